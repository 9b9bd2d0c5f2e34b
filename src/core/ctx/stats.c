/*
 * stats.c - a context's counters, updated by one-line hooks where events
 * happen (ctx->lock held), its health verdict, and the metrics file the
 * progress thread writes.
 *
 * The hooks that read a room or a peer live on their floors
 * (room/room_stats.c, link/peer.c), and so do the walks of the health
 * (stats_add_health()).
 */
#include "config.h"

#include "core/ctx/ctx.h"
#include "core/ctx/stats.h"
#include "util/ident.h"
#include "util/log.h"
#include "util/time.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

/* How long kvx_ctx_health() waits for the context lock. */
#define STATS_LOCK_WAIT (100 * KVX_NS_PER_MS)

kvx_status_t stats_init(kvx_ctx_t *ctx)
{
    ctx->stats = calloc(1, sizeof(*ctx->stats));
    return ctx->stats != NULL ? KVX_OK : KVX_ERR_NO_MEMORY;
}

void stats_cleanup(kvx_ctx_t *ctx)
{
    free(ctx->stats);
    ctx->stats = NULL;
}

void stats_xfer(kvx_ctx_t *ctx, kvx_xfer_kind_t kind, size_t bytes)
{
    ctx->stats->c.ops[kind]++;
    ctx->stats->c.bytes[kind] += bytes;
}

void stats_verified(kvx_ctx_t *ctx, size_t units, int unchecked)
{
    ctx->stats->c.verify_units += units;
    ctx->stats->c.verify_unchecked += unchecked != 0;
}

void stats_add_health(kvx_ctx_t *ctx, stats_health_probe_t probe)
{
    stats_t *s = ctx->stats;

    if (s->nprobes < sizeof(s->probes) / sizeof(s->probes[0])) {
        s->probes[s->nprobes++] = probe;
    }
}

void stats_round_start(kvx_ctx_t *ctx)
{
    ctx->stats->round_start = kvx_now_ns();
}

void stats_round_end(kvx_ctx_t *ctx, kvx_status_t status)
{
    stats_t *s = ctx->stats;

    if (s->round_start == 0) {
        return;
    }
    s->c.agree_rounds++;
    s->c.agree_rounds_failed += status != KVX_OK;
    stats_hist_add(&s->c.agree_round_seconds, kvx_ns_to_s(kvx_now_ns() - s->round_start));
    s->round_start = 0;
}

/* ---- snapshot and health (lock held) ---------------------------------- */

static void stats_snapshot(kvx_ctx_t *ctx, kvx_stats_t *out)
{
    *out = ctx->stats->c;
    out->messages_rejected = ctx->bad_msgs;
}

static uint64_t stats_progress_age(kvx_ctx_t *ctx, uint64_t now)
{
    uint64_t tick = __atomic_load_n(&ctx->stats->tick, __ATOMIC_ACQUIRE);

    return tick != 0 && now > tick ? now - tick : 0;
}

static void stats_health_locked(kvx_ctx_t *ctx, uint64_t now, kvx_health_t *h)
{
    stats_t *s = ctx->stats;

    h->quarantine_budget = ctx->cfg.health_quarantine > 0 ? (uint64_t)ctx->cfg.health_quarantine
                                                          : (ctx->num_pages + 9) / 10;
    h->pages_quarantined = s->c.pages_quarantined + s->c.src_pages_quarantined;
    if (h->pages_quarantined > h->quarantine_budget) {
        h->reasons |= KVX_HEALTH_QUARANTINE_OVER;
    } else if (h->pages_quarantined > 0) {
        h->reasons |= KVX_HEALTH_QUARANTINE;
    }
    if (!ctx->progress_running) {
        h->reasons |= KVX_HEALTH_PROGRESS_STALLED;
    }
    for (unsigned i = 0; i < s->nprobes; i++) {
        s->probes[i](ctx, now, h);
    }
    if (s->last_fail_at != 0) {
        h->has_failure = 1;
        h->last_failure = s->last_fail;
        h->last_failure_age = kvx_ns_to_s(now - s->last_fail_at);
    }
}

/* Appends one clause of the sentence. */
static void stats_say(kvx_health_t *h, size_t *o, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void stats_say(kvx_health_t *h, size_t *o, const char *fmt, ...)
{
    va_list ap;

    if (*o >= sizeof(h->text)) {
        return;
    }
    *o += (size_t)snprintf(h->text + *o, sizeof(h->text) - *o, "%s",
                           h->text[*o - 1] == ':' ? " " : "; ");
    if (*o >= sizeof(h->text)) {
        return;
    }
    va_start(ap, fmt);
    *o += (size_t)vsnprintf(h->text + *o, sizeof(h->text) - *o, fmt, ap);
    va_end(ap);
}

/* The verdict and its sentence, worst reason first. */
static void stats_health_verdict(kvx_health_t *h, int running, double stall_s)
{
    const unsigned bad = KVX_HEALTH_PROGRESS_STALLED | KVX_HEALTH_TP_BROKEN | KVX_HEALTH_NO_PEERS |
                         KVX_HEALTH_QUARANTINE_OVER;
    unsigned r = h->reasons;
    size_t o;

    h->verdict = (r & bad) ? KVX_HEALTH_UNHEALTHY : r != 0 ? KVX_HEALTH_DEGRADED : KVX_HEALTH_OK;
    o = (size_t)snprintf(h->text, sizeof(h->text), "%s:", kvx_health_verdict_name(h->verdict));
    if ((r & KVX_HEALTH_PROGRESS_STALLED) && !running) {
        stats_say(h, &o, "the progress thread is not running");
    } else if (r & KVX_HEALTH_PROGRESS_STALLED) {
        stats_say(h, &o, "the progress thread has not ticked for %.1f s", h->progress_age);
    }
    if (r & KVX_HEALTH_LOCK_BUSY) {
        stats_say(h, &o, "the context lock was held for more than %llu ms: nothing else known",
                  (unsigned long long)(STATS_LOCK_WAIT / KVX_NS_PER_MS));
    }
    if (r & KVX_HEALTH_TP_BROKEN) {
        stats_say(h, &o, "a TP sibling is lost: no agreement can run");
    }
    if (r & KVX_HEALTH_NO_PEERS) {
        stats_say(h, &o, "every peer of the other role is lost");
    }
    if (r & (KVX_HEALTH_QUARANTINE | KVX_HEALTH_QUARANTINE_OVER)) {
        stats_say(h, &o, "%llu pages quarantined (budget %llu)",
                  (unsigned long long)h->pages_quarantined,
                  (unsigned long long)h->quarantine_budget);
    }
    if (r & KVX_HEALTH_PEER_LOST) {
        stats_say(h, &o, "%u peer%s lost: %s", h->peers_lost, h->peers_lost == 1 ? "" : "s",
                  h->lost_peers);
    }
    if (r & KVX_HEALTH_ROOMS_STALLED) {
        stats_say(h, &o, "%u room%s in one state longer than %.0f s (room %llu for %.1f s)",
                  h->rooms_stalled, h->rooms_stalled == 1 ? "" : "s", stall_s,
                  (unsigned long long)h->stalled_room, h->stalled_seconds);
    }
    if (r == 0) {
        stats_say(h, &o,
                  "the progress thread ticked %.3f s ago; no peer lost, nothing "
                  "quarantined, no room stalled",
                  h->progress_age);
    }
}

/* Health with the lock held (locked) or not (only the tick is read). */
static void stats_health(kvx_ctx_t *ctx, int locked, kvx_health_t *h)
{
    uint64_t now = kvx_now_ns();
    uint64_t age = stats_progress_age(ctx, now);
    int running = 1;

    memset(h, 0, sizeof(*h));
    h->progress_age = kvx_ns_to_s(age);
    if (age > ctx->cfg.health_progress) {
        h->reasons |= KVX_HEALTH_PROGRESS_STALLED;
    }
    if (locked) {
        running = ctx->progress_running;
        stats_health_locked(ctx, now, h);
    } else {
        h->reasons |= KVX_HEALTH_LOCK_BUSY;
    }
    stats_health_verdict(h, running, kvx_ns_to_s(ctx->cfg.health_stall));
}

/* ---- the API ------------------------------------------------------------ */

kvx_status_t kvx_ctx_stats(kvx_ctx_t *ctx, kvx_stats_t *stats_p)
{
    kvx_status_t status = ctx_enter(ctx);

    if (status != KVX_OK) {
        return status;
    }
    if (stats_p == NULL) {
        status = KVX_ERR_INVALID_PARAM;
    } else {
        stats_snapshot(ctx, stats_p);
    }
    ctx_leave(ctx);
    return status;
}

kvx_status_t kvx_ctx_health(kvx_ctx_t *ctx, kvx_health_t *health_p)
{
    int locked = 0;
    kvx_status_t status = ctx_enter_bounded(ctx, STATS_LOCK_WAIT, &locked);

    if (status != KVX_OK) {
        return status;
    }
    if (health_p == NULL) {
        status = KVX_ERR_INVALID_PARAM;
    } else {
        stats_health(ctx, locked, health_p);
    }
    ctx_leave_bounded(ctx, locked);
    return status;
}

/* The whole text of a snapshot, malloc'ed; NULL on no memory. */
static char *stats_text(kvx_ctx_t *ctx, const kvx_stats_t *s, const kvx_health_t *h, size_t *len_p)
{
    char labels[512];
    char *text = NULL;
    size_t len = 0;
    struct timeval tv;
    FILE *f = open_memstream(&text, &len);

    if (f == NULL) {
        return NULL;
    }
    gettimeofday(&tv, NULL);
    stats_prom_labels(labels, sizeof(labels), ctx->role, ctx->instance, ctx->tp_rank, ctx->rank,
                      ident_get()->host);
    stats_prom_write(f, s, h, labels, kvx_ns_to_s(ctx->cfg.metrics_interval),
                     (double)tv.tv_sec + (double)tv.tv_usec / 1e6);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    *len_p = len;
    return text;
}

kvx_status_t kvx_ctx_metrics_text(kvx_ctx_t *ctx, char *buf, size_t len, size_t *len_p)
{
    kvx_status_t status = ctx_enter(ctx);
    kvx_stats_t *s = malloc(sizeof(*s));
    kvx_health_t h;
    size_t n = 0;
    char *text = NULL;

    if (status != KVX_OK || s == NULL || (buf == NULL && len > 0)) {
        if (status == KVX_OK) {
            ctx_leave(ctx);
        }
        free(s);
        return status != KVX_OK ? status : s == NULL ? KVX_ERR_NO_MEMORY : KVX_ERR_INVALID_PARAM;
    }
    stats_snapshot(ctx, s);
    stats_health(ctx, 1, &h);
    ctx_leave(ctx);
    text = stats_text(ctx, s, &h, &n);
    free(s);
    if (text == NULL) {
        return KVX_ERR_NO_MEMORY;
    }
    if (len > 0) {
        snprintf(buf, len, "%s", text);
    }
    if (len_p != NULL) {
        *len_p = n;
    }
    free(text);
    return KVX_OK;
}

/* ---- the metrics file ------------------------------------------------ */

/* Takes a snapshot (lock held), then writes the file; unlock: without the
 * lock while it writes (the progress thread). One write at a time: the
 * final one waits for a periodic one in flight (stats_export_final()). */
static void stats_export(kvx_ctx_t *ctx, int unlock)
{
    stats_t *st = ctx->stats;
    kvx_stats_t *s = malloc(sizeof(*s));
    kvx_health_t h;
    char *text;
    size_t len = 0;
    int err;

    if (s == NULL) {
        return;
    }
    stats_snapshot(ctx, s);
    stats_health(ctx, 1, &h);
    st->writing = 1;
    if (unlock) {
        pthread_mutex_unlock(&ctx->lock);
    }
    text = stats_text(ctx, s, &h, &len);
    err = text != NULL ? stats_write_atomic(st->path, text, len) : ENOMEM;
    free(text);
    free(s);
    if (unlock) {
        pthread_mutex_lock(&ctx->lock);
    }
    st->writing = 0;
    if (err != 0 && !st->export_failed) {
        kvx_warn("cannot write KVX_METRICS_FILE %s: %s (not retried in the log)", st->path,
                 strerror(err));
    }
    st->export_failed |= err != 0;
}

void stats_tick(kvx_ctx_t *ctx, uint64_t now)
{
    stats_t *s = ctx->stats;
    uint64_t interval = ctx->cfg.metrics_interval;

    __atomic_store_n(&s->tick, now, __ATOMIC_RELEASE);
    if (now < s->next_export) {
        return;
    }
    if (s->next_export == 0 && ctx->cfg.metrics_file != NULL && ctx->cfg.metrics_file[0]) {
        log_expand_pattern(ctx->cfg.metrics_file, s->path, sizeof(s->path));
    }
    if (s->path[0] == '\0') {
        s->next_export = UINT64_MAX;
        return;
    }
    s->next_export = now + (interval < 100 * KVX_NS_PER_MS ? 100 * KVX_NS_PER_MS : interval);
    stats_export(ctx, 1);
}

void stats_export_final(kvx_ctx_t *ctx)
{
    stats_t *s = ctx->stats;

    pthread_mutex_lock(&ctx->lock);
    s->next_export = UINT64_MAX; /* no periodic write starts any more */
    while (s->writing) {
        pthread_mutex_unlock(&ctx->lock);
        usleep(1000);
        pthread_mutex_lock(&ctx->lock);
    }
    if (s->path[0] != '\0') {
        stats_export(ctx, 0);
    }
    pthread_mutex_unlock(&ctx->lock);
}
