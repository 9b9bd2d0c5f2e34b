/*
 * t_stats.c - kvx_ctx_stats(), kvx_ctx_health() and KVX_METRICS_FILE
 * against what the test counts itself.
 *
 *   t_stats count       prefill:1x2,decode:1x2 with KVX_FAULT failing every
 *                       4th room at stage post on prefill tp1: ROOMS rooms in
 *                       batches, agreed; every rank's counters equal its own
 *                       tally (rooms, outcomes by status x stage x origin
 *                       role, rounds, bytes = Σ kvx_room_info bytes and, for
 *                       each room that succeeded, pages x page bytes x
 *                       buffers), health OK at start and end. Writes
 *                       $KVXT_OUT/expect.<rank> for the metrics file's check.
 *                       (stats_msgs: as data messages; stats_staged: through
 *                       the copy engine of the staged path.)
 *   t_stats kill        prefill:1x2,decode:1x2, --enable-recovery: after some
 *                       rooms decode[0].tp1 (rank 3) kills itself. Its TP
 *                       sibling is UNHEALTHY (the instance is broken), so is
 *                       prefill tp1 (its only decode peer is gone), both
 *                       naming it; prefill tp0, which shares no head with it
 *                       and never talked to it, stays OK.
 *   t_stats quarantine  prefill:2x1,decode:1x1, --enable-recovery, KVX_FAULT
 *                       kills prefill[1] at post: the decode's room from it
 *                       is quarantined after KVX_DRAIN_TIMEOUT, and health
 *                       says so against KVX_HEALTH_QUARANTINE_PAGES.
 *   t_stats stall       prefill:1x1,decode:1x1, KVX_FAULT stalls the decode's
 *                       progress thread (with the context lock) at
 *                       completion: kvx_ctx_health() answers within its bound
 *                       and says the progress thread has not ticked, then OK
 *                       again once it runs.
 *
 * Each rank writes $KVXT_OUT/result.<rank> (OK or FAIL) and
 * $KVXT_OUT/expect.<rank>, and one rank $KVXT_OUT/expect-job.<rank> for the
 * job-wide view; mpi_tests/check-stats.sh reads them with the metrics files
 * (KVX_METRICS_FILE=$KVXT_OUT/metrics.%r.prom) and what kvx-metrics makes
 * of them.
 */
#include <kvx.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

int tl_rank, tl_failures;

#define ROOMS 32
#define PAGES 8
#define BATCH 4

static tl_job_t job;
static FILE *expect;

typedef struct tally {
    uint64_t opened, succeeded, failed, rounds, bytes, success_bytes;
    uint64_t failures[KVX_STAGE_COUNT][3][KVX_STATS_STATUSES];
} tally_t;

static void setup(size_t num_pages)
{
    kvx_ctx_params_t p;
    char path[4096];

    kvx_ctx_params_init(&p);
    p.kv.layers = 2;
    p.kv.page_size = 16;
    p.kv.kv_heads = 4;
    p.kv.head_dim = 32;
    p.num_pages = num_pages;
    tl_job_start(&job, &p);
    snprintf(path, sizeof(path), "%s/expect.%d", getenv("KVXT_OUT"), tl_rank);
    expect = fopen(path, "w");
    if (expect == NULL) {
        fprintf(stderr, "rank %d: cannot write %s\n", tl_rank, path);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* The metrics file must say this (mpi_tests/check-stats.sh). */
static void want(const char *name, const char *labels, const char *op, uint64_t v)
{
    fprintf(expect, "%s{rank=\"%d\"%s%s} %s %llu\n", name, tl_rank, labels[0] ? "," : "", labels,
            op, (unsigned long long)v);
}

/* kvx-metrics over every rank's file must say this. */
static void want_job(const char *line)
{
    char path[4096];
    FILE *f;

    snprintf(path, sizeof(path), "%s/expect-job.%d", getenv("KVXT_OUT"), tl_rank);
    f = fopen(path, "a");
    if (f != NULL) {
        fprintf(f, "%s\n", line);
        fclose(f);
    }
}

static void finish(const char *what)
{
    fclose(expect);
    tl_result_keep(what);
}

/* Health, once the progress thread ticked: OK with no reason. */
static void expect_healthy(const char *when)
{
    kvx_health_t h;
    double t0 = tl_now();

    do {
        TL_CHECK(kvx_ctx_health(job.ctx, &h) == KVX_OK, "health");
        usleep(1000);
    } while (h.verdict != KVX_HEALTH_OK && tl_now() - t0 < 10);
    TL_CHECK(h.verdict == KVX_HEALTH_OK && h.reasons == 0 && strncmp(h.text, "OK:", 3) == 0,
             "%s: %s (reasons 0x%x)", when, h.text, h.reasons);
}

static uint32_t *room_pages(int r)
{
    static uint32_t pages[PAGES];

    for (int p = 0; p < PAGES; p++) {
        pages[p] = (uint32_t)(r * PAGES + (PAGES - 1 - p));
    }
    return pages;
}

static void open_room(int r)
{
    uint64_t room = 100 + (uint64_t)r;
    const uint32_t *pages = room_pages(r);
    kvx_room_state_t state = KVX_ROOM_BOOTSTRAPPING;
    kvx_status_t st;

    if (job.id.role == KVX_ROLE_DECODE) {
        TL_CHECK(kvx_room_recv_open(job.ctx, room, r % job.id.prefill_instances, pages, PAGES,
                                    -1) == KVX_OK,
                 "recv_open %d", r);
        return;
    }
    if (r % job.id.prefill_instances != job.id.instance) {
        return;
    }
    TL_CHECK(kvx_room_send_open(job.ctx, room, 0, PAGES) == KVX_OK, "send_open %d", r);
    kvp_pages(&job.g, job.bufs, job.comps, room, pages, PAGES, 0, 1);
    /* A sibling's injected failure may reach this rank's room (through the
     * decode) before its chunk: the chunk is then refused, as kvx.h says. */
    st = kvx_room_send_chunk(job.ctx, room, pages, PAGES, NULL, 0);
    TL_CHECK(st == KVX_OK ||
                 (st == KVX_ERR_STATE && kvx_room_poll(job.ctx, room, &state) == KVX_OK &&
                  state == KVX_ROOM_FAILED),
             "chunk %d: %s", r, kvx_status_name(st));
}

/* Rounds until every room is concluded on every TP rank; counts them. */
static void agree_all(const uint64_t *ids, size_t n, kvx_agreed_t *out, tally_t *t)
{
    MPI_Comm tp = kvx_ctx_tp_comm(job.ctx);
    double start = tl_now();
    int all = 0;

    while (!all) {
        int done = 1;
        kvx_status_t st = tl_agree_round(job.ctx, ids, n, out);

        TL_CHECK(st == KVX_OK, "agree: %s", kvx_status_name(st));
        t->rounds++;
        for (size_t i = 0; i < n; i++) {
            done &= out[i].status == KVX_OK &&
                    (out[i].state == KVX_ROOM_SUCCESS || out[i].state == KVX_ROOM_FAILED);
        }
        done |= tl_now() - start > 60;
        MPI_Allreduce(&done, &all, 1, MPI_INT, MPI_MIN, tp);
        usleep(500);
    }
}

/* Counts a concluded room, then closes it. */
static void tally_room(uint64_t room, const kvx_agreed_t *a, tally_t *t)
{
    kvx_room_info_t info;
    kvx_failure_t f;
    double t0 = tl_now();
    kvx_status_t st;

    TL_CHECK(kvx_room_info(job.ctx, room, &info) == KVX_OK, "info %llu", (unsigned long long)room);
    t->bytes += info.bytes;
    if (a->state == KVX_ROOM_SUCCESS) {
        t->succeeded++;
        t->success_bytes += info.bytes;
        if (job.id.role == KVX_ROLE_PREFILL) {
            TL_CHECK(info.bytes == (uint64_t)PAGES * job.page_bytes * job.g.kv.layers * job.comps,
                     "room %llu: %llu bytes sent, not pages x page bytes x buffers",
                     (unsigned long long)room, (unsigned long long)info.bytes);
        }
    } else {
        t->failed++;
        TL_CHECK(kvx_room_failure(job.ctx, room, &f) == KVX_OK, "failure");
        t->failures[f.stage][f.origin_role][-f.status]++;
    }
    while ((st = kvx_room_close(job.ctx, room)) == KVX_ERR_BUSY && tl_now() - t0 < 20) {
        usleep(1000);
    }
    TL_CHECK(st == KVX_OK, "close %llu: %s", (unsigned long long)room, kvx_status_name(st));
}

static void run_rooms(int nrooms, tally_t *t)
{
    uint64_t ids[BATCH];
    kvx_agreed_t out[BATCH];

    for (int b = 0; b < nrooms; b += BATCH) {
        size_t n = 0;

        for (int r = b; r < b + BATCH && r < nrooms; r++) {
            open_room(r);
            if (job.id.role == KVX_ROLE_DECODE || r % job.id.prefill_instances == job.id.instance) {
                ids[n++] = 100 + (uint64_t)r;
            }
        }
        t->opened += n;
        agree_all(ids, n, out, t);
        for (size_t i = 0; i < n; i++) {
            tally_room(ids[i], &out[i], t);
        }
    }
}

static uint64_t hist_total(const kvx_histogram_t *h)
{
    uint64_t n = 0;

    for (unsigned i = 0; i < KVX_STATS_BUCKETS; i++) {
        n += h->bucket[i];
    }
    return n;
}

/* On the staged path every byte sent was gathered by the copy engine first,
 * and every byte landed was scattered by it (a room that fails meanwhile
 * may have copies that were never sent or counted as landed). */
static void check_staged(const kvx_stats_t *s, const tally_t *t, uint64_t room_bytes)
{
    kvx_mem_path_t path;
    uint64_t moved =
        job.id.role == KVX_ROLE_PREFILL ? s->bytes[KVX_XFER_MSG_SENT] : s->bytes[KVX_XFER_MSG_RECV];
    uint64_t copied = s->bytes[KVX_XFER_STAGED_COPY];

    TL_CHECK(kvx_ctx_mem_path(job.ctx, &path, NULL, 0) == KVX_OK, "mem path");
    if (path != KVX_MEM_PATH_STAGED) {
        TL_CHECK(copied == 0 && s->ops[KVX_XFER_STAGED_COPY] == 0, "%llu bytes staged on %s",
                 (unsigned long long)copied, "the direct path");
        return;
    }
    TL_CHECK(moved >= t->succeeded * room_bytes && copied >= moved &&
                 copied <= t->opened * room_bytes && s->ops[KVX_XFER_STAGED_COPY] > 0,
             "staged: %llu bytes copied, %llu bytes %s", (unsigned long long)copied,
             (unsigned long long)moved, job.id.role == KVX_ROLE_PREFILL ? "sent" : "landed");
}

static void check_counts(const kvx_stats_t *s, const tally_t *t)
{
    uint64_t sent =
        s->bytes[KVX_XFER_PUT] + s->bytes[KVX_XFER_PACKED_PUT] + s->bytes[KVX_XFER_MSG_SENT];
    uint64_t room_bytes = (uint64_t)PAGES * job.page_bytes * job.g.kv.layers * job.comps;

    TL_CHECK(s->rooms_opened == t->opened && s->rooms_closed == t->opened,
             "opened %llu closed %llu", (unsigned long long)s->rooms_opened,
             (unsigned long long)s->rooms_closed);
    TL_CHECK(s->rooms_succeeded == t->succeeded && s->rooms_failed == t->failed,
             "succeeded %llu failed %llu, the test counted %llu and %llu",
             (unsigned long long)s->rooms_succeeded, (unsigned long long)s->rooms_failed,
             (unsigned long long)t->succeeded, (unsigned long long)t->failed);
    TL_CHECK(s->rooms_agreed == t->opened, "agreed %llu", (unsigned long long)s->rooms_agreed);
    TL_CHECK(memcmp(s->failures, t->failures, sizeof(t->failures)) == 0,
             "failures by status x stage x role differ from the test's");
    /* every 4th room fails at post on prefill tp1 (KVX_FAULT every=4) */
    TL_CHECK(t->failed == ROOMS / 4 &&
                 t->failures[KVX_STAGE_POST][KVX_ROLE_PREFILL][-KVX_ERR_INJECTED] == ROOMS / 4,
             "%llu rooms failed, not %d injected at post", (unsigned long long)t->failed,
             ROOMS / 4);
    TL_CHECK(s->agree_rounds == t->rounds && s->agree_round_seconds.count == t->rounds &&
                 s->agree_rounds_failed == 0,
             "rounds %llu (timed %llu), the test ran %llu", (unsigned long long)s->agree_rounds,
             (unsigned long long)s->agree_round_seconds.count, (unsigned long long)t->rounds);
    TL_CHECK(s->room_success_seconds.count == t->succeeded &&
                 hist_total(&s->room_success_seconds) == t->succeeded &&
                 s->room_failed_seconds.count == t->failed &&
                 hist_total(&s->room_failed_seconds) == t->failed,
             "room histograms count %llu/%llu", (unsigned long long)s->room_success_seconds.count,
             (unsigned long long)s->room_failed_seconds.count);
    TL_CHECK(s->transfer_seconds.count >= t->succeeded, "transfer histogram counts %llu",
             (unsigned long long)s->transfer_seconds.count);
    if (job.id.role == KVX_ROLE_PREFILL) {
        TL_CHECK(sent == t->bytes && t->success_bytes == t->succeeded * room_bytes,
                 "sent %llu bytes, the rooms say %llu", (unsigned long long)sent,
                 (unsigned long long)t->bytes);
        TL_CHECK(s->bytes[KVX_XFER_MSG_RECV] == 0, "a prefill rank received data");
    } else {
        /* The decode receives data messages only under KVX_WRITES=message,
         * and then at least the pages of every room that succeeded. */
        uint64_t got = s->bytes[KVX_XFER_MSG_RECV];

        TL_CHECK(sent == 0, "a decode rank sent %llu bytes", (unsigned long long)sent);
        TL_CHECK(got == 0 || (got >= t->succeeded * room_bytes && got <= t->opened * room_bytes),
                 "received %llu bytes of data messages for %llu rooms of %llu bytes",
                 (unsigned long long)got, (unsigned long long)t->succeeded,
                 (unsigned long long)room_bytes);
    }
    check_staged(s, t, room_bytes);
    TL_CHECK(s->pages_quarantined == 0 && s->peers_lost == 0, "quarantined %llu lost %llu",
             (unsigned long long)s->pages_quarantined, (unsigned long long)s->peers_lost);
}

static void scenario_count(void)
{
    tally_t t;
    kvx_stats_t s;
    char labels[256];
    uint64_t total = 0;

    memset(&t, 0, sizeof(t));
    setup(ROOMS * PAGES);
    expect_healthy("at start");
    run_rooms(ROOMS, &t);
    TL_CHECK(kvx_ctx_stats(job.ctx, &s) == KVX_OK, "stats");
    check_counts(&s, &t);
    expect_healthy("at the end");
    want("kvx_rooms_opened_total", "", "==", t.opened);
    want("kvx_rooms_closed_total", "", "==", t.opened);
    want("kvx_room_outcomes_total", "outcome=\"success\"", "==", t.succeeded);
    want("kvx_room_outcomes_total",
         "outcome=\"failed\",status=\"KVX_ERR_INJECTED\",stage=\"post\",origin_role=\"prefill\"",
         "==", t.failed);
    want("kvx_room_seconds_count", "outcome=\"success\"", "==", t.succeeded);
    want("kvx_room_seconds_bucket", "outcome=\"failed\",le=\"+Inf\"", "==", t.failed);
    want("kvx_agree_rounds_total", "", "==", t.rounds);
    want("kvx_agree_round_seconds_count", "", "==", t.rounds);
    for (int k = 0; k < KVX_XFER_KINDS; k++) {
        snprintf(labels, sizeof(labels), "kind=\"%s\"", kvx_xfer_kind_name((kvx_xfer_kind_t)k));
        want("kvx_transfer_bytes_total", labels, "==", s.bytes[k]);
        want("kvx_transfer_ops_total", labels, "==", s.ops[k]);
        total += s.bytes[k];
    }
    want("kvx_transfer_bytes_total", "", "==", total);
    want("kvx_pages_quarantined_total", "", "==", 0);
    want("kvx_health", "", "==", KVX_HEALTH_OK);
    if (tl_rank == 0) {
        /* both TP ranks of each instance count each room */
        want_job("kvx_rooms_opened_total{scope=\"job\",role=\"prefill\"} == 64");
        want_job("kvx_rooms_opened_total{scope=\"job\",role=\"decode\"} == 64");
        want_job("kvx_room_outcomes_total{scope=\"instance\",role=\"decode\",instance=\"0\","
                 "outcome=\"failed\",stage=\"post\",origin_role=\"prefill\"} == 16");
        want_job("kvx_room_outcomes_total{scope=\"job\",outcome=\"success\"} == 96");
        want_job("kvx_metrics_ranks{state=\"fresh\"} == 4");
        want_job("kvx_metrics_ranks{state=\"stale\"} == 0");
        want_job("kvx_health{scope=\"job\"} == 0");
    }
    finish("counters match the test's own count");
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Polls health until every bit of reasons is set (or limit seconds). */
static void wait_health(kvx_health_t *h, unsigned reasons, double limit)
{
    double t0 = tl_now();

    do {
        TL_CHECK(kvx_ctx_health(job.ctx, h) == KVX_OK, "health");
        usleep(2000);
    } while ((h->reasons & reasons) != reasons && tl_now() - t0 < limit);
}

static void scenario_kill(void)
{
    tally_t t;
    kvx_health_t h;
    kvx_stats_t s;

    memset(&t, 0, sizeof(t));
    setup(ROOMS * PAGES);
    expect_healthy("at start");
    /* every room succeeds (no fault rule): only the loss is news */
    for (int r = 0; r < BATCH; r++) {
        uint64_t room = 100 + (uint64_t)r;
        kvx_agreed_t a;

        open_room(r);
        t.opened++;
        agree_all(&room, 1, &a, &t);
        TL_CHECK(a.state == KVX_ROOM_SUCCESS, "room %d %s", r, kvx_room_state_name(a.state));
        tally_room(room, &a, &t);
    }
    MPI_Barrier(MPI_COMM_WORLD); /* the last collective of a whole world */
    if (tl_rank == 3) {
        kill(getpid(), SIGKILL);
    }
    if (tl_rank == 0) {
        usleep(3000000); /* a loss on this host is seen within a keepalive */
        expect_healthy("on a rank that never talked to the lost one");
        TL_CHECK(kvx_ctx_stats(job.ctx, &s) == KVX_OK && s.peers_lost == 0, "peers lost");
        want("kvx_health", "", "==", KVX_HEALTH_OK);
        want("kvx_peers_lost_total", "", "==", 0);
        finish("no peer of this rank was lost: OK");
        return;
    }
    wait_health(&h, KVX_HEALTH_PEER_LOST, 30);
    TL_CHECK(h.verdict == KVX_HEALTH_UNHEALTHY && h.peers_lost == 1 && h.lost_ranks[0] == 3 &&
                 strstr(h.lost_peers, "decode[0].tp1 (rank 3)") != NULL &&
                 strstr(h.text, "decode[0].tp1 (rank 3)") != NULL,
             "after the kill: %s", h.text);
    if (job.id.role == KVX_ROLE_DECODE) {
        TL_CHECK((h.reasons & KVX_HEALTH_TP_BROKEN) && strstr(h.text, "TP sibling is lost") != NULL,
                 "the lost rank's sibling: %s", h.text);
        want("kvx_health_reason", "reason=\"tp_broken\"", "==", 1);
        /* the dead rank's file stopped at the kill: kvx-metrics says so */
        want_job("kvx_metrics_ranks{role=\"decode\",state=\"stale\"} == 1");
        want_job("kvx_metrics_ranks{state=\"fresh\"} == 3");
        want_job("kvx_metrics_stale{rank=\"3\"} >= 0.6");
        want_job("kvx_health{scope=\"instance\",role=\"decode\",instance=\"0\"} == 2");
        want_job("kvx_health{scope=\"instance\",role=\"prefill\",instance=\"0\"} == 2");
        want_job("kvx_peers_lost_total{scope=\"job\",role=\"prefill\"} == 1");
        want_job("kvx_rooms_opened_total{scope=\"job\",role=\"prefill\"} == 8");
    } else {
        TL_CHECK((h.reasons & KVX_HEALTH_NO_PEERS) &&
                     strstr(h.text, "every peer of the other role is lost") != NULL,
                 "prefill tp1: %s", h.text);
        want("kvx_health_reason", "reason=\"no_peers\"", "==", 1);
    }
    want("kvx_health", "", "==", KVX_HEALTH_UNHEALTHY);
    TL_CHECK(kvx_ctx_stats(job.ctx, &s) == KVX_OK && s.peers_lost == 1 &&
                 s.rooms_succeeded == t.succeeded,
             "stats: %llu peers lost", (unsigned long long)s.peers_lost);
    want("kvx_peers_lost_total", "", "==", 1);
    want("kvx_peers_lost", "", "==", 1);
    want("kvx_health_reason", "reason=\"peer_lost\"", "==", 1);
    want("kvx_room_outcomes_total", "outcome=\"success\"", "==", t.succeeded);
    finish(h.text);
}

static void scenario_quarantine(void)
{
    kvx_health_t h;
    kvx_stats_t s;
    kvx_room_info_t info;
    kvx_status_t st;
    uint64_t quarantined = 0;

    setup(ROOMS * PAGES);
    expect_healthy("at start");
    MPI_Barrier(MPI_COMM_WORLD);
    /* room 100 from prefill[0], room 101 from prefill[1], which KVX_FAULT
     * kills as it posts: its room's pages can never be confirmed safe */
    open_room(0);
    open_room(1);
    if (job.id.role == KVX_ROLE_PREFILL) {
        TL_CHECK(tl_wait_state(job.ctx, 100, KVX_ROOM_SUCCESS, 30) == KVX_ROOM_SUCCESS, "room 100");
        finish("prefill[0] delivered its room");
        return;
    }
    TL_CHECK(tl_wait_state(job.ctx, 100, KVX_ROOM_SUCCESS, 30) == KVX_ROOM_SUCCESS, "room 100");
    wait_health(&h, KVX_HEALTH_PEER_LOST | KVX_HEALTH_QUARANTINE_OVER, 30);
    for (uint64_t room = 100; room <= 101; room++) {
        TL_CHECK(kvx_room_info(job.ctx, room, &info) == KVX_OK, "info");
        quarantined += info.pages == KVX_PAGES_QUARANTINED ? info.npages : 0;
    }
    TL_CHECK(quarantined == PAGES, "%llu pages quarantined by kvx_room_info",
             (unsigned long long)quarantined);
    TL_CHECK(kvx_ctx_stats(job.ctx, &s) == KVX_OK && s.pages_quarantined == quarantined &&
                 s.rooms_quarantined == 1 && s.peers_lost == 1,
             "stats: %llu pages in %llu rooms quarantined, %llu peers lost",
             (unsigned long long)s.pages_quarantined, (unsigned long long)s.rooms_quarantined,
             (unsigned long long)s.peers_lost);
    TL_CHECK(h.verdict == KVX_HEALTH_UNHEALTHY && h.pages_quarantined == PAGES &&
                 h.quarantine_budget == 4 &&
                 strstr(h.text, "8 pages quarantined (budget 4)") != NULL &&
                 strstr(h.text, "prefill[1].tp0 (rank 1)") != NULL,
             "health: %s", h.text);
    TL_CHECK(kvx_room_close(job.ctx, 100) == KVX_OK, "close 100");
    st = kvx_room_close(job.ctx, 101);
    TL_CHECK(st == KVX_ERR_QUARANTINED, "close 101: %s", kvx_status_name(st));
    TL_CHECK(kvx_ctx_stats(job.ctx, &s) == KVX_OK && s.rooms_succeeded == 1 &&
                 s.rooms_failed == 1 &&
                 s.failures[KVX_STAGE_TRANSFER][KVX_ROLE_DECODE][-KVX_ERR_PEER_LOST] +
                         s.failures[KVX_STAGE_WAIT][KVX_ROLE_DECODE][-KVX_ERR_PEER_LOST] +
                         s.failures[KVX_STAGE_BOOTSTRAP][KVX_ROLE_DECODE][-KVX_ERR_PEER_LOST] ==
                     1,
             "outcomes after close: %llu SUCCESS, %llu FAILED",
             (unsigned long long)s.rooms_succeeded, (unsigned long long)s.rooms_failed);
    want("kvx_pages_quarantined_total", "side=\"decode\"", "==", PAGES);
    want("kvx_rooms_quarantined_total", "", "==", 1);
    want("kvx_health", "", "==", KVX_HEALTH_UNHEALTHY);
    want("kvx_health_reason", "reason=\"quarantine_over\"", "==", 1);
    want("kvx_room_outcomes_total", "outcome=\"failed\",status=\"KVX_ERR_PEER_LOST\"", "==", 1);
    finish(h.text);
}

static void scenario_stall(void)
{
    kvx_health_t h;
    double t0, slowest = 0;

    setup(ROOMS * PAGES);
    expect_healthy("at start");
    open_room(0);
    if (job.id.role == KVX_ROLE_DECODE) {
        /* KVX_FAULT holds the progress thread 3 s at the room's completion */
        t0 = tl_now();
        do {
            double c = tl_now();

            TL_CHECK(kvx_ctx_health(job.ctx, &h) == KVX_OK, "health");
            slowest = tl_now() - c > slowest ? tl_now() - c : slowest;
            usleep(20000);
        } while (!(h.reasons & KVX_HEALTH_PROGRESS_STALLED) && tl_now() - t0 < 30);
        TL_CHECK(h.verdict == KVX_HEALTH_UNHEALTHY && (h.reasons & KVX_HEALTH_LOCK_BUSY) &&
                     strstr(h.text, "the progress thread has not ticked for") != NULL &&
                     h.progress_age >= 0.5,
                 "while stalled: %s", h.text);
        TL_CHECK(slowest < 1.0, "kvx_ctx_health took %.3f s with the lock held", slowest);
        printf("rank %d: %s (slowest call %.0f ms)\n", tl_rank, h.text, slowest * 1e3);
    }
    TL_CHECK(tl_wait_state(job.ctx, 100, KVX_ROOM_SUCCESS, 30) == KVX_ROOM_SUCCESS, "room 100");
    expect_healthy("after the stall");
    TL_CHECK(kvx_room_close(job.ctx, 100) == KVX_OK, "close");
    want("kvx_health", "", "==", KVX_HEALTH_OK);
    want("kvx_room_outcomes_total", "outcome=\"success\"", "==", 1);
    finish("health saw the stalled progress thread");
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &tl_rank);
    if (strcmp(mode, "count") == 0) {
        scenario_count();
    } else if (strcmp(mode, "kill") == 0) {
        scenario_kill();
    } else if (strcmp(mode, "quarantine") == 0) {
        scenario_quarantine();
    } else if (strcmp(mode, "stall") == 0) {
        scenario_stall();
    } else {
        fprintf(stderr, "usage: t_stats count | kill | quarantine | stall\n");
        MPI_Finalize();
        return 2;
    }
    /* The metrics file is written once more here; the result after it. */
    tl_destroy_and_result(job.ctx);
    MPI_Finalize();
    return tl_failures == 0 ? 0 : 1;
}
