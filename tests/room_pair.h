/*
 * room_pair.h - a prefill rank and a decode rank in one process, wired to
 * each other through the stand-in transport (tests/fake_ucx.h), for the
 * unit tests of the room machines (tests/test_room.c).
 *
 * The contexts are built by hand, as kvx_ctx_create() would leave them
 * after bootstrap for the job "prefill:1x1,decode:1x1" (rank 0 prefill,
 * rank 1 decode), without MPI, UCX or a progress thread: the test is the
 * progress thread. It delivers the control messages (pair_deliver*),
 * completes puts and flushes (pair_complete), moves the clock forward
 * (pair_advance) and runs the tickers (pair_tick), so every deadline is
 * reached at once.
 * The public room calls (kvx_room_*) work on both contexts.
 */
#ifndef KVX_TESTS_ROOM_PAIR_H
#define KVX_TESTS_ROOM_PAIR_H

#include "core/ctx/ctx.h"
#include "fake_ucx.h"

#include <stdint.h>

/* The geometry: 2 layers x (K, V), 4 tokens of 1 head x 4 fp16 elements
 * per page (32 bytes), 8 pages per buffer, 4 aux slots of 32 bytes. */
#define PAIR_PAGES    8
#define PAIR_AUX_SIZE 32

/* The deadlines every test runs under (ns). */
#define PAIR_BOOTSTRAP_TIMEOUT (10 * KVX_NS_PER_S)
#define PAIR_WAITING_TIMEOUT   (20 * KVX_NS_PER_S)
#define PAIR_TRANSFER_TIMEOUT  (30 * KVX_NS_PER_S)
#define PAIR_PEER_TIMEOUT      (2 * KVX_NS_PER_S)
#define PAIR_DRAIN_TIMEOUT     (5 * KVX_NS_PER_S)

typedef struct pair_side {
    kvx_ctx_t *ctx;
    fake_ep_t ep[KUCX_PLANES]; /* the endpoints to the other side */
} pair_side_t;

typedef struct pair {
    pair_side_t p, d;
    kvx_ctx_t *P, *D; /* p.ctx, d.ctx */
} pair_t;

/* Builds both sides; fault rules (KVX_FAULT syntax) per side, or NULL. */
void pair_init(pair_t *pr, const char *prefill_fault, const char *decode_fault);
void pair_fini(pair_t *pr);
/* Makes every page travel as data messages, as a decode rank whose
 * endpoint has no native RMA asks (KVX_WRITES): both sides get staging
 * (pack_setup()), and the fake transport carries eager data messages that
 * the delivery calls hand to the data-message handler (unpack_am_cb()). */
void pair_use_messages(pair_t *pr);
/* Makes ctx the rank that failures and log lines name (one process holds
 * both ranks): every call into a side goes through it. */
void pair_as(const kvx_ctx_t *ctx);
/* Sends what the contexts queued (their outboxes) to the fake transport. */
void pair_flush(pair_t *pr);
/* Delivers the oldest message in flight to ctx (any with NULL) as UCX
 * would, then runs what the progress thread runs after it (pollers,
 * outbox); returns its type, -1 when none was in flight. */
int pair_deliver_one(pair_t *pr, kvx_ctx_t *to);
/* Delivers a message (the caller still owns it). */
void pair_deliver_msg(pair_t *pr, const fake_msg_t *m);
/* Delivers until nothing is in flight; returns how many. */
unsigned pair_deliver(pair_t *pr);
/* Completes every put and flush in flight with status, then flushes the
 * outboxes; returns how many. */
unsigned pair_complete(pair_t *pr, ucs_status_t status);
/* Moves the clock of both sides forward (kvx_clock_skew_ns, util/time.h):
 * every timestamp and deadline of the core reads the moved clock. */
void pair_advance(uint64_t ns);
/* The tickers of one side now (agree_tick, room_tick, peer_tick), then its outbox. */
void pair_tick(pair_t *pr, kvx_ctx_t *ctx);
/* Marks the other side as heard from now (it is alive). */
void pair_heard(kvx_ctx_t *ctx);

/* A byte pattern of (rank, buffer, page) written into every page of a pool. */
void pair_fill(kvx_ctx_t *ctx);
/* Do the decode's pages dst hold the prefill's pages src, in every buffer? */
int pair_landed(const pair_t *pr, const uint32_t *src, const uint32_t *dst, size_t n);
/* Is the decode's page untouched (still all zero) in every buffer? */
int pair_page_zero(const pair_t *pr, uint32_t page);

/* The room's state on a side (KVX_ROOM_FAILED + 1 when it is not open). */
kvx_room_state_t pair_state(kvx_ctx_t *ctx, uint64_t id);
/* The room's failure record on a side (zeroed when it has none). */
kvx_failure_t pair_failure(kvx_ctx_t *ctx, uint64_t id);
kvx_room_info_t pair_info(kvx_ctx_t *ctx, uint64_t id);
/* Rooms in a side's table (open, closed but kept, or unopened shadows). */
size_t pair_rooms(const kvx_ctx_t *ctx);

#endif
