/*
 * progress.h - the progress thread.
 */
#ifndef KVX_CORE_PROGRESS_H
#define KVX_CORE_PROGRESS_H

#include <kvx.h>

#include <stdint.h>

/* Work of a higher floor the progress thread runs with the lock held: a
 * poller every round (it returns how much happened), a ticker every tick.
 * They run in the order they were added, all before progress_start()
 * (setup/steps.c adds them); the outbox is flushed after the pollers. */
typedef unsigned (*progress_poller_t)(kvx_ctx_t *ctx);
typedef void (*progress_ticker_t)(kvx_ctx_t *ctx, uint64_t now);
void progress_add_poller(kvx_ctx_t *ctx, progress_poller_t poller);
void progress_add_ticker(kvx_ctx_t *ctx, progress_ticker_t ticker);
/* Starts the thread; the active-message handler of the control plane is
 * set before (setup/steps.c). */
kvx_status_t progress_start(kvx_ctx_t *ctx);
void progress_stop(kvx_ctx_t *ctx);
/* An API thread's pass over the workers, the pollers and the outbox, in the
 * thread's place, with the lock held (kvx_room_poll(): what arrived since the
 * caller's last call is handled before it reads a state, on its own thread,
 * as a raw UCP or NIXL caller progresses its worker); 0 where it may not
 * (KVX_PROGRESS=busy, a job with CUDA pools, no thread running). With kick,
 * after a call that queued work (open, send, close, abort): only under
 * KVX_PROGRESS=caller, where it replaces waking the thread. */
int progress_drive(kvx_ctx_t *ctx, int kick);
/* Wakes the progress thread if it sleeps (new work was posted); called
 * after the caller left the lock. */
void progress_wake(kvx_ctx_t *ctx);

#endif
