/*
 * stats_prom.c - histogram buckets and the Prometheus text exposition
 * format (0.0.4) of a context's counters and health, and the atomic write
 * of a metrics file. Knows no context: tests/test_stats.c checks it alone.
 *
 * Histograms are kept per bucket (kvx_histogram_t) and written cumulative,
 * as the format wants: bucket le="x" counts every observation <= x.
 */
#include "config.h"

#include "core/ctx/stats.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Upper bounds (s) of every bucket but the last (+Inf): from the 100 us a
 * small agreement round takes on one host to the minute a stuck room may. */
static const double stats_bounds[KVX_STATS_BUCKETS - 1] = { 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3,
                                                            1e-2, 2.5e-2, 5e-2, 0.1,  0.25,   0.5,
                                                            1,    2.5,    5,    10,   30,     60 };

double kvx_stats_bucket_bound(unsigned i)
{
    if (i < KVX_STATS_BUCKETS - 1) {
        return stats_bounds[i];
    }
    return i == KVX_STATS_BUCKETS - 1 ? HUGE_VAL : -1;
}

void stats_hist_add(kvx_histogram_t *h, double seconds)
{
    unsigned i = 0;

    if (!(seconds >= 0)) {
        seconds = 0; /* a clock step or NaN counts as instant, never lost */
    }
    while (i < KVX_STATS_BUCKETS - 1 && seconds > stats_bounds[i]) {
        i++;
    }
    h->bucket[i]++;
    h->count++;
    h->sum += seconds;
}

const char *kvx_xfer_kind_name(kvx_xfer_kind_t kind)
{
    static const char *const names[KVX_XFER_KINDS] = {
        "put", "packed_put", "msg_sent", "msg_received", "staged_copy", "msg_direct"
    };

    return (unsigned)kind < KVX_XFER_KINDS ? names[kind] : "?";
}

const char *kvx_health_verdict_name(kvx_health_verdict_t verdict)
{
    static const char *const names[] = { "OK", "DEGRADED", "UNHEALTHY" };

    return (unsigned)verdict < 3 ? names[verdict] : "?";
}

const char *kvx_health_reason_name(unsigned bit)
{
    /* In the order of the KVX_HEALTH_* bits. */
    static const char *const names[] = { "progress_stalled", "lock_busy",    "tp_broken",
                                         "no_peers",         "peer_lost",    "quarantine",
                                         "quarantine_over",  "rooms_stalled" };

    return bit < sizeof(names) / sizeof(names[0]) ? names[bit] : NULL;
}

/* A label value with \, " and newline escaped, as the format asks. */
static void stats_escape(const char *in, char *out, size_t len)
{
    size_t o = 0;

    for (; *in != '\0' && o + 3 < len; in++) {
        if (*in == '\\' || *in == '"' || *in == '\n') {
            out[o++] = '\\';
            out[o++] = *in == '\n' ? 'n' : *in;
        } else {
            out[o++] = *in;
        }
    }
    out[o] = '\0';
}

void stats_prom_labels(char *buf, size_t len, kvx_role_t role, int instance, int tp_rank, int rank,
                       const char *host)
{
    char h[192];

    stats_escape(host != NULL ? host : "", h, sizeof(h));
    snprintf(buf, len, "role=\"%s\",instance=\"%d\",tp=\"%d\",rank=\"%d\",host=\"%s\"",
             kvx_role_name(role), instance, tp_rank, rank, h);
}

static void stats_family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One sample: name{labels[,extra]} value. */
static void stats_u64(FILE *f, const char *name, const char *labels, const char *extra, uint64_t v)
{
    fprintf(f, "%s{%s%s%s} %" PRIu64 "\n", name, labels, extra != NULL ? "," : "",
            extra != NULL ? extra : "", v);
}

static void stats_dbl(FILE *f, const char *name, const char *labels, const char *extra, double v)
{
    fprintf(f, "%s{%s%s%s} %.15g\n", name, labels, extra != NULL ? "," : "",
            extra != NULL ? extra : "", v);
}

static void stats_counter(FILE *f, const char *name, const char *help, const char *labels,
                          uint64_t v)
{
    stats_family(f, name, "counter", help);
    stats_u64(f, name, labels, NULL, v);
}

static void stats_gauge(FILE *f, const char *name, const char *help, const char *labels, double v)
{
    stats_family(f, name, "gauge", help);
    stats_dbl(f, name, labels, NULL, v);
}

/* The samples of one histogram (the family is written by the caller). */
static void stats_hist(FILE *f, const char *name, const char *labels, const char *extra,
                       const kvx_histogram_t *h)
{
    char n[128], le[160];
    uint64_t cum = 0;

    snprintf(n, sizeof(n), "%s_bucket", name);
    for (unsigned i = 0; i < KVX_STATS_BUCKETS; i++) {
        cum += h->bucket[i];
        if (i < KVX_STATS_BUCKETS - 1) {
            snprintf(le, sizeof(le), "%s%sle=\"%g\"", extra != NULL ? extra : "",
                     extra != NULL ? "," : "", stats_bounds[i]);
        } else {
            snprintf(le, sizeof(le), "%s%sle=\"+Inf\"", extra != NULL ? extra : "",
                     extra != NULL ? "," : "");
        }
        stats_u64(f, n, labels, le, cum);
    }
    snprintf(n, sizeof(n), "%s_sum", name);
    stats_dbl(f, n, labels, extra, h->sum);
    snprintf(n, sizeof(n), "%s_count", name);
    stats_u64(f, n, labels, extra, h->count);
}

static void stats_write_outcomes(FILE *f, const kvx_stats_t *s, const char *labels)
{
    char extra[256];

    stats_family(f, "kvx_room_outcomes_total", "counter",
                 "Room outcomes (agreed, or local at close) by root cause: status, stage and "
                 "role of the rank that recorded it.");
    stats_u64(f, "kvx_room_outcomes_total", labels,
              "outcome=\"success\",status=\"KVX_OK\",stage=\"none\",origin_role=\"none\"",
              s->rooms_succeeded);
    for (int stage = 0; stage < KVX_STAGE_COUNT; stage++) {
        for (int role = 0; role < 3; role++) {
            for (int st = 0; st < KVX_STATS_STATUSES; st++) {
                if (s->failures[stage][role][st] == 0) {
                    continue;
                }
                snprintf(extra, sizeof(extra),
                         "outcome=\"failed\",status=\"%s\",stage=\"%s\",origin_role=\"%s\"",
                         st > 0 ? kvx_status_name((kvx_status_t)-st) : "unknown",
                         kvx_stage_name((kvx_stage_t)stage), kvx_role_name((kvx_role_t)role));
                stats_u64(f, "kvx_room_outcomes_total", labels, extra,
                          s->failures[stage][role][st]);
            }
        }
    }
}

static void stats_write_xfer(FILE *f, const kvx_stats_t *s, const char *labels)
{
    char extra[64];

    stats_family(f, "kvx_transfer_bytes_total", "counter",
                 "Bytes moved, by what carried them (aux rows included).");
    for (int k = 0; k < KVX_XFER_KINDS; k++) {
        snprintf(extra, sizeof(extra), "kind=\"%s\"", kvx_xfer_kind_name((kvx_xfer_kind_t)k));
        stats_u64(f, "kvx_transfer_bytes_total", labels, extra, s->bytes[k]);
    }
    stats_family(f, "kvx_transfer_ops_total", "counter",
                 "Puts, data messages and staged copies, by kind.");
    for (int k = 0; k < KVX_XFER_KINDS; k++) {
        snprintf(extra, sizeof(extra), "kind=\"%s\"", kvx_xfer_kind_name((kvx_xfer_kind_t)k));
        stats_u64(f, "kvx_transfer_ops_total", labels, extra, s->ops[k]);
    }
}

static void stats_write_hists(FILE *f, const kvx_stats_t *s, const char *labels)
{
    stats_family(f, "kvx_room_seconds", "histogram",
                 "Time from a room's open to its outcome, by outcome.");
    stats_hist(f, "kvx_room_seconds", labels, "outcome=\"success\"", &s->room_success_seconds);
    stats_hist(f, "kvx_room_seconds", labels, "outcome=\"failed\"", &s->room_failed_seconds);
    stats_family(f, "kvx_transfer_seconds", "histogram",
                 "Time a room spent TRANSFERRING before it succeeded on this rank.");
    stats_hist(f, "kvx_transfer_seconds", labels, NULL, &s->transfer_seconds);
    stats_family(f, "kvx_agree_round_seconds", "histogram",
                 "Time of an agreement round, from kvx_agree_start to its end.");
    stats_hist(f, "kvx_agree_round_seconds", labels, NULL, &s->agree_round_seconds);
}

static void stats_write_pages(FILE *f, const kvx_stats_t *s, const char *labels)
{
    stats_family(f, "kvx_pages_quarantined_total", "counter",
                 "Pages never to reuse: decode pages a writer never confirmed it stopped "
                 "writing, prefill source pages UCX might still read at close.");
    stats_u64(f, "kvx_pages_quarantined_total", labels, "side=\"decode\"", s->pages_quarantined);
    stats_u64(f, "kvx_pages_quarantined_total", labels, "side=\"prefill\"",
              s->src_pages_quarantined);
    stats_counter(f, "kvx_rooms_quarantined_total", "Decode rooms whose pages were quarantined.",
                  labels, s->rooms_quarantined);
    stats_counter(f, "kvx_pages_released_total",
                  "Pages of failed decode rooms released once every writer confirmed it "
                  "stopped.",
                  labels, s->pages_released);
}

static void stats_write_health(FILE *f, const kvx_health_t *h, const char *labels)
{
    char extra[64];
    const char *name;

    stats_gauge(f, "kvx_health", "This rank's verdict: 0 OK, 1 DEGRADED, 2 UNHEALTHY.", labels,
                h->verdict);
    stats_family(f, "kvx_health_reason", "gauge",
                 "The reasons of the verdict, 1 when it applies (kvx_ctx_health).");
    for (unsigned b = 0; (name = kvx_health_reason_name(b)) != NULL; b++) {
        snprintf(extra, sizeof(extra), "reason=\"%s\"", name);
        stats_u64(f, "kvx_health_reason", labels, extra, (h->reasons >> b) & 1u);
    }
    stats_gauge(f, "kvx_progress_age_seconds", "Seconds since the progress thread last ticked.",
                labels, h->progress_age);
    stats_gauge(f, "kvx_peers_lost", "Peers lost now.", labels, h->peers_lost);
    stats_gauge(f, "kvx_rooms_stalled", "Rooms in one state longer than KVX_HEALTH_STALL_TIMEOUT.",
                labels, h->rooms_stalled);
}

void stats_prom_write(FILE *f, const kvx_stats_t *s, const kvx_health_t *h, const char *labels,
                      double interval, double wall)
{
    stats_counter(f, "kvx_rooms_opened_total", "Rooms opened (send and receive).", labels,
                  s->rooms_opened);
    stats_counter(f, "kvx_rooms_closed_total", "Rooms closed by the application.", labels,
                  s->rooms_closed);
    stats_gauge(f, "kvx_rooms_open", "Rooms open now.", labels,
                (double)(s->rooms_opened - s->rooms_closed));
    stats_write_outcomes(f, s, labels);
    stats_counter(f, "kvx_rooms_agreed_total",
                  "Of the outcomes, those the instance agreed (the rest: closed before).", labels,
                  s->rooms_agreed);
    stats_write_xfer(f, s, labels);
    stats_counter(f, "kvx_agree_rounds_total", "Agreement rounds completed.", labels,
                  s->agree_rounds);
    stats_counter(f, "kvx_agree_rounds_failed_total",
                  "Agreement rounds that ended with an error (a lost TP sibling, MPI).", labels,
                  s->agree_rounds_failed);
    stats_write_pages(f, s, labels);
    stats_counter(f, "kvx_peers_lost_total", "Peers declared lost (not after their goodbye).",
                  labels, s->peers_lost);
    stats_counter(f, "kvx_messages_rejected_total",
                  "Malformed or unexpected peer messages dropped.", labels, s->messages_rejected);
    stats_counter(f, "kvx_verify_units_total",
                  "Units of landed KV and aux rows checked against the writer's digests.", labels,
                  s->verify_units);
    stats_counter(f, "kvx_verify_unchecked_total",
                  "Writers' parts of rooms KVX_VERIFY could not check (a device pool).", labels,
                  s->verify_unchecked);
    stats_write_hists(f, s, labels);
    stats_write_health(f, h, labels);
    stats_gauge(f, "kvx_metrics_interval_seconds", "KVX_METRICS_INTERVAL.", labels, interval);
    stats_gauge(f, "kvx_metrics_timestamp_seconds",
                "When this text was written (seconds since the epoch).", labels, wall);
}

int stats_write_atomic(const char *path, const char *text, size_t len)
{
    char tmp[4200];
    FILE *f;
    int fd, err = 0;

    /* The same directory, so that rename() replaces the file atomically: a
     * reader sees the old text or the new one, never a part. Readable by
     * all: a collector (node_exporter) runs as another user. */
    snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
    fd = mkstemp(tmp);
    if (fd < 0) {
        return errno;
    }
    if (fchmod(fd, 0644) != 0 || (f = fdopen(fd, "w")) == NULL) {
        err = errno;
        close(fd);
        unlink(tmp);
        return err;
    }
    if (fwrite(text, 1, len, f) != len) {
        err = errno != 0 ? errno : EIO;
    }
    if (fclose(f) != 0 && err == 0) {
        err = errno;
    }
    if (err == 0 && rename(tmp, path) != 0) {
        err = errno;
    }
    if (err != 0) {
        unlink(tmp);
    }
    return err;
}
