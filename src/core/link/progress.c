/*
 * progress.c - the progress thread: it owns the UCX worker, so transfers
 * advance while the application's threads do other work (on shared memory
 * UCX emulates puts with active messages the target must progress).
 *
 * It spins while there is work and, in adaptive mode, sleeps on the
 * worker's event fd when there is none; deadlines and keepalives are
 * checked every tick. Errors inside it fail rooms; they never end it.
 */
#include "config.h"

#include "core/ctx/ctx.h"
#include "core/ctx/stats.h"
#include "core/link/peer.h"
#include "core/link/progress.h"
#include "util/log.h"
#include "util/time.h"

#include <poll.h>
#include <sched.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROGRESS_SPINS 256 /* empty progress calls before sleeping */
/* KVX_PROGRESS=caller: while an API thread made a pass this recently, the
 * thread dozes; once the calls stop, it takes over at most twice this late
 * (progress_driven()). 1 ms
 * measured ahead of 200 us (docs/perf/notes/2026-12-07-overhead.md). */
#define PROGRESS_CALLER_NS (1000 * KVX_NS_PER_US)

static uint64_t progress_tick_ns(const kvx_ctx_t *ctx)
{
    uint64_t tick = ctx->cfg.keepalive_interval / 4;

    return tick < KVX_NS_PER_MS        ? KVX_NS_PER_MS
           : tick > 10 * KVX_NS_PER_MS ? 10 * KVX_NS_PER_MS
                                       : tick;
}

/* The workers, the pollers and the outbox, with the lock held; returns how
 * much happened. */
static unsigned progress_pass(kvx_ctx_t *ctx)
{
    unsigned n;

    ctx->in_pass = 1;
    ctx->pass_now = 0;
    ctx->passes++;
    n = kucx_progress(&ctx->ucx);

    if (ctx->cancel_eps) {
        peer_cancel_failed(ctx);
    }
    for (unsigned i = 0; i < ctx->npollers; i++) {
        n += ctx->pollers[i](ctx);
    }
    if (ctx->out_head != NULL) {
        peer_flush_outbox(ctx);
        n++;
    }
    ctx->in_pass = 0;
    return n;
}

/* One round of work with the lock held; returns how much happened, and
 * when (*now_p). The tickers run on this thread only. */
static unsigned progress_once(kvx_ctx_t *ctx, uint64_t *next_tick, uint64_t *now_p)
{
    unsigned n = progress_pass(ctx);
    /* Fresh, not the pass's clock: the tickers compare it with stamps taken
     * during the pass, which may be later than the pass's start. */
    uint64_t now = kvx_now_ns();

    if (now >= *next_tick) {
        for (unsigned i = 0; i < ctx->ntickers; i++) {
            ctx->tickers[i](ctx, now);
        }
        *next_tick = now + progress_tick_ns(ctx);
        stats_tick(ctx, now); /* may drop the lock while it writes the metrics file */
    }
    *now_p = now;
    return n;
}

int progress_drive(kvx_ctx_t *ctx, int kick)
{
    /* Not beside a busy thread (it has its core), not before the thread
     * started or once destroy stopped it (destroy progresses itself), and
     * not in a job with CUDA pools: every CUDA call stays on the thread.
     * Work a call queued is the thread's to start unless the caller drives. */
    if (ctx->cfg.progress == CFG_PROGRESS_BUSY || !ctx->progress_running || ctx->cstage.any_cuda ||
        (kick && ctx->cfg.progress != CFG_PROGRESS_CALLER)) {
        return 0;
    }
    progress_pass(ctx);
    ctx->driven++;
    return 1;
}

/* When the thread last saw the application's passes go on. */
typedef struct progress_seen {
    uint64_t driven; /* ctx->driven then */
    uint64_t at;     /* then (0: never) */
} progress_seen_t;

/* Whether the application drives (KVX_PROGRESS=caller): its room calls made
 * passes since the thread last looked, or it looked less than
 * PROGRESS_CALLER_NS ago and saw them then. Counting, not reading a clock
 * in every pass of a caller: once the calls stop, the thread takes over
 * within two windows. */
static int progress_driven(const kvx_ctx_t *ctx, uint64_t now, progress_seen_t *seen)
{
    if (ctx->cfg.progress != CFG_PROGRESS_CALLER) {
        return 0;
    }
    if (ctx->driven != seen->driven) {
        seen->driven = ctx->driven;
        seen->at = now;
    }
    return seen->at != 0 && now - seen->at < PROGRESS_CALLER_NS;
}

/* Sleeps without the lock until the caller's window ends or the next tick
 * is due, whichever is first: not on the event fds, whose events the
 * caller's passes handle. */
static void progress_doze(kvx_ctx_t *ctx, uint64_t now, uint64_t next_tick,
                          const progress_seen_t *seen)
{
    uint64_t until = seen->at + PROGRESS_CALLER_NS;
    struct timespec ts = { 0, 0 };

    until = until < next_tick ? until : next_tick;
    ts.tv_nsec = until > now ? (long)(until - now) : 0;
    pthread_mutex_unlock(&ctx->lock);
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&ctx->lock);
}

/* Sleeps until a worker has events or the next tick is due; returns 0 when
 * it slept until the tick without an event. */
static int progress_sleep(kvx_ctx_t *ctx, uint64_t next_tick)
{
    uint64_t now = kvx_now_ns();
    int timeout_ms = next_tick > now ? (int)((next_tick - now) / KVX_NS_PER_MS) + 1 : 0;
    int events;

    if (!kucx_can_sleep(&ctx->ucx)) {
        pthread_mutex_unlock(&ctx->lock);
        usleep(100);
        pthread_mutex_lock(&ctx->lock);
        return 1;
    }
    if (kucx_arm(&ctx->ucx) != KVX_OK) {
        return 1; /* events are pending: progress again */
    }
    /* Set under the lock: an API thread that queued work after this pass
     * reads it once it left the lock, and wakes this thread. */
    __atomic_store_n(&ctx->progress_asleep, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&ctx->lock);
    events = kucx_wait(&ctx->ucx, timeout_ms);
    pthread_mutex_lock(&ctx->lock);
    __atomic_store_n(&ctx->progress_asleep, 0, __ATOMIC_RELAXED);
    return events != 0;
}

static void *progress_main(void *arg)
{
    kvx_ctx_t *ctx = arg;
    uint64_t next_tick = 0;
    progress_seen_t seen = { 0, 0 };
    unsigned idle = 0;

    pthread_mutex_lock(&ctx->lock);
    while (ctx->progress_running) {
        uint64_t now;

        if (progress_once(ctx, &next_tick, &now) > 0 || ctx->cfg.progress == CFG_PROGRESS_BUSY) {
            idle = 0;
        } else if (progress_driven(ctx, now, &seen)) {
            progress_doze(ctx, now, next_tick, &seen);
            idle = 0; /* when the calls stop, spin and sleep as adaptive */
            continue;
        } else if (++idle >= PROGRESS_SPINS) {
            /* Spin again only after an event: a wake for the tick alone
             * progresses once (the tick) and sleeps again, rather than
             * spinning PROGRESS_SPINS empty calls on every tick. */
            idle = progress_sleep(ctx, next_tick) ? 0 : PROGRESS_SPINS - 1;
            continue;
        }
        /* Let API threads in: a mutex is not fair, so yield when one waits. */
        pthread_mutex_unlock(&ctx->lock);
        if (__atomic_load_n(&ctx->api_waiting, __ATOMIC_RELAXED) > 0) {
            sched_yield();
        }
        pthread_mutex_lock(&ctx->lock);
    }
    pthread_mutex_unlock(&ctx->lock);
    return NULL;
}

/* A fixed set of work, added by code: more than KVX_PROGRESS_HOOKS is a bug. */
void progress_add_poller(kvx_ctx_t *ctx, progress_poller_t poller)
{
    if (ctx->npollers == KVX_PROGRESS_HOOKS) {
        kvx_error("more than %d progress pollers", KVX_PROGRESS_HOOKS);
        abort();
    }
    ctx->pollers[ctx->npollers++] = poller;
}

void progress_add_ticker(kvx_ctx_t *ctx, progress_ticker_t ticker)
{
    if (ctx->ntickers == KVX_PROGRESS_HOOKS) {
        kvx_error("more than %d progress tickers", KVX_PROGRESS_HOOKS);
        abort();
    }
    ctx->tickers[ctx->ntickers++] = ticker;
}

kvx_status_t progress_start(kvx_ctx_t *ctx)
{
    /* Silence counts from here: no peer is heard before progress runs, and
     * the last step of the bootstrap, a collective, may have waited seconds
     * for a slow rank on a loaded machine. */
    for (int i = 0; i < ctx->npeers; i++) {
        ctx->peers[i].last_heard = kvx_now_ns();
    }
    ctx->progress_running = 1;
    if (pthread_create(&ctx->progress, NULL, progress_main, ctx) != 0) {
        ctx->progress_running = 0;
        kvx_error("cannot start the progress thread");
        return KVX_ERR_NO_MEMORY;
    }
    return KVX_OK;
}

void progress_stop(kvx_ctx_t *ctx)
{
    if (!ctx->progress_running) {
        return;
    }
    pthread_mutex_lock(&ctx->lock);
    ctx->progress_running = 0;
    pthread_mutex_unlock(&ctx->lock);
    kucx_signal(&ctx->ucx);
    pthread_join(ctx->progress, NULL);
}

void progress_wake(kvx_ctx_t *ctx)
{
    /* A thread that is awake runs another pass before it sleeps, and sees
     * the work: a signal would cost a system call here and, there, a worker
     * that refuses to arm (UCX reads the signal as an event) and another
     * PROGRESS_SPINS empty passes. */
    if (__atomic_load_n(&ctx->progress_asleep, __ATOMIC_RELAXED)) {
        kucx_signal(&ctx->ucx);
    }
}
