/*
 * ctx.h - the context object. Everything it owns is protected by ctx->lock;
 * the progress thread holds it while it progresses UCX, API calls hold it
 * while they touch state. The objects it points to have their own headers
 * (peer.h, room.h, agree.h, ...); here they are only named.
 */
#ifndef KVX_CORE_CTX_H
#define KVX_CORE_CTX_H

#include <kvx.h>

#include "core/base/join.h"
#include "core/base/joblayout.h"
#include "core/base/kvlayout.h"
#include "core/base/msg.h"
#include "core/base/stage_copies.h"
#include "core/base/staging.h"
#include "core/ctx/pool.h"
#include "ucx/kvx_ucx.h"
#include "util/cfg.h"
#include "util/hmap.h"
#include "util/time.h"

#include <pthread.h>
#include <stdint.h>

struct peer;
struct outmsg;
struct target;
struct landing;
struct agree_table;
struct room_agree_ops;
struct room_side;
struct xfer_ops;
struct fault_set;
struct stats;
struct join_state;

/* The first member of a block that a UCX callback frees (pack.c's message
 * headers, unpack.c's direct receives): listed on the context until then
 * (ctx_hold(), ctx_unhold()), so that destroy frees the blocks of requests
 * that never complete (workers left open to a dead peer: ctx_free_held()). */
typedef struct ctx_held {
    struct ctx_held *prev, *next;
} ctx_held_t;

#define KVX_DEAD_NONCES    4096
#define KVX_PROGRESS_HOOKS 8

struct kvx_ctx {
    uint64_t magic;
    pthread_mutex_t lock;
    kvx_cfg_t cfg;
    MPI_Comm world, tp_comm_user, tp_comm;
    int rank, size;
    joblayout_t job;
    kvx_role_t role;
    int instance, tp_rank, tp_size;
    kvl_t my;       /* this rank's instance geometry */
    kvl_t *kvls[3]; /* [role][instance] geometry of every instance */
    kvx_kv_layout_t kv;
    size_t num_pages;
    size_t aux_item_size;
    pool_t pool;
    kucx_ctx_t ucx;
    struct peer *peers;
    int npeers;
    struct peer **peer_by_rank; /* [job rank] -> peer or NULL */
    kvx_failure_t *pair_fail;   /* [other instance]: status != OK when unusable */
    /* Job ranks and instances the arrays above and kvls hold: the world's,
     * and the places of instances that may join (KVX_JOIN_MAX). A joined
     * instance's ranks follow the world's (setup/joining.c). */
    int rank_cap, inst_cap[3];
    int peer_cap;                  /* slots of peers: rank_cap, and the joined places' again */
    char door_addr[JOIN_ADDR_MAX]; /* where this rank takes joiners, or "" */
    join_door_t *doors;            /* every rank's that does (bootstrap) */
    int ndoors;
    /* Instances that join a running job (setup/joining.c), or NULL. */
    struct join_state *join;
    uint64_t membership;    /* kvx_ctx_membership(): joins, replacements, departures seen */
    uint64_t peers_changed; /* peers lost or said goodbye so far (peer.c, outcome.c) */
    hmap_t rooms;
    struct outmsg *out_head, *out_tail;
    msg_limits_t limits;
    uint64_t bad_msgs;
    unsigned ngated; /* prefill rooms with hand-overs waiting for a CUDA event */
    pthread_t progress;
    int progress_running, stopping;
    /* Passes API threads made (progress_drive()): the thread reads the count,
     * not a clock, to tell that the application drives. */
    uint64_t driven;
    /* Progress passes made, by the thread or an API thread (progress_pass()):
     * kvx_room_poll() makes one only when none ran since it last looked at
     * the room (room_t.polled). */
    uint64_t passes;
    /* The clock of the progress pass running (0: not read yet in this pass);
     * in_pass while one runs (ctx_pass_now()). */
    uint64_t pass_now;
    int in_pass;
    /* The work of higher floors the progress thread runs, in the order
     * registered (link/progress.h: progress_add_poller/ticker). */
    unsigned (*pollers[KVX_PROGRESS_HOOKS])(struct kvx_ctx *ctx);
    void (*tickers[KVX_PROGRESS_HOOKS])(struct kvx_ctx *ctx, uint64_t now);
    unsigned npollers, ntickers;
    /* What link/peer.c tells the floors above, and asks them (peer_listen()). */
    void (*on_peer_lost)(struct kvx_ctx *ctx, struct peer *peer, const char *how);
    uint64_t (*ping_rounds)(const struct kvx_ctx *ctx);
    /* What the room floor asks of agreement (room_agree_with()). */
    const struct room_agree_ops *room_agree;
    /* The side machines of rooms, by kvx_role_t (room_sides()). */
    const struct room_side *room_side[3];
    /* What the xfer floor tells the room floor (xfer_attach()). */
    const struct xfer_ops *xfer_ops;
    uint64_t next_nonce;
    /* Prefill: the decode incarnations (nonces) of rooms this rank closed,
     * the latest KVX_DEAD_NONCES of them: their late messages are dropped,
     * never kept for (or applied to) a new room with the same id. */
    uint64_t dead_nonce[KVX_DEAD_NONCES]; /* a ring: the oldest is overwritten */
    unsigned dead_next;
    /* The ring's nonces again, for the lookup of every message's nonce:
     * open addressing, 0 an empty slot (sender_dead_has()). */
    uint64_t dead_set[2 * KVX_DEAD_NONCES];
    int api_waiting;     /* API threads waiting for the lock (atomic) */
    int progress_asleep; /* the progress thread waits on the event fds (atomic; progress.c) */
    int tp_broken;       /* a TP sibling is lost: no collective on tp_comm any more */
    /* Why, when not by a loss: the TP ranks went out of step (status is
     * KVX_OK otherwise). */
    kvx_failure_t tp_break;
    int cancel_eps; /* some peer's endpoints wait for peer_cancel_failed() */
    struct agree_table *agree;
    struct fault_set *faults; /* NULL when no rule is set */
    /* Staging (pack.c, unpack.c): packed puts, data message headers, landings. */
    staging_t staging;
    struct target *pack_wait_head, *pack_wait_tail; /* waiting for a slot or their data */
    struct landing *land_head, *land_tail;          /* data waiting for a slot to land in */
    unsigned landing;                               /* data messages being received */
    int pack_kick;                                  /* a slot or a data message completed */
    ctx_held_t *held;        /* blocks that UCX callbacks free (ctx_hold()) */
    cstage_t cstage;         /* cuda_stage.c: the memory path */
    struct verify_dev *vdev; /* verify.c: reads a CUDA pool back for KVX_VERIFY, or NULL */
    struct stats *stats;     /* stats.c: counters, health, metrics file */
    /* Decode: which room holds each page of the pool (room.c: room_pages_*),
     * so that no page is granted to two rooms, nor one quarantined. */
    uint64_t *page_room; /* [page, then num_pages + aux slot] the room holding it
                            (or that quarantined it) */
    uint8_t *page_hold;  /* [same] PAGE_FREE, PAGE_HELD, PAGE_QUARANTINED */
};

#define KVX_CTX_MAGIC 0x6b76782d63747821ull

/* ---- ctx.c: entering a live context ---- */
/* Validates a handle from the API and locks it; KVX_ERR_INVALID_HANDLE when
 * it is not a live context. */
kvx_status_t ctx_enter(kvx_ctx_t *ctx);
void ctx_leave(kvx_ctx_t *ctx);
/* Enters without waiting for the lock longer than wait_ns: KVX_OK with
 * *locked_p 1 (locked) or 0 (entered, the lock was busy: the context stays
 * alive, but only its atomic fields may be read); leave with
 * ctx_leave_bounded(). */
kvx_status_t ctx_enter_bounded(kvx_ctx_t *ctx, uint64_t wait_ns, int *locked_p);
void ctx_leave_bounded(kvx_ctx_t *ctx, int locked);
/* The time for what happens within one progress pass -- a message heard, the
 * outbox sent: read once per pass, and only by a pass that needs it (reading
 * the clock was a tenth of a prefill rank's time with 16 KiB rooms,
 * docs/perf/notes/2026-12-07-clock.md). Outside a pass, the clock. It may be
 * earlier than a stamp another call took during the pass: use it to stamp
 * (a time later compared with a fresh reading), never as the "now" that a
 * deadline is checked against. */
static inline uint64_t ctx_pass_now(kvx_ctx_t *ctx)
{
    if (!ctx->in_pass) {
        return kvx_now_ns();
    }
    if (ctx->pass_now == 0) {
        ctx->pass_now = kvx_now_ns();
    }
    return ctx->pass_now;
}

/* Lists a block that a UCX request's callback will free (once the request
 * is in flight), and unlists it in that callback (ctx->lock held). */
static inline void ctx_hold(kvx_ctx_t *ctx, ctx_held_t *h)
{
    h->prev = NULL;
    h->next = ctx->held;
    if (h->next != NULL) {
        h->next->prev = h;
    }
    ctx->held = h;
}

static inline void ctx_unhold(kvx_ctx_t *ctx, ctx_held_t *h)
{
    *(h->prev != NULL ? &h->prev->next : &ctx->held) = h->next;
    if (h->next != NULL) {
        h->next->prev = h->prev;
    }
}
/* Frees the blocks still listed, once nothing progresses the workers: their
 * requests never complete. Returns how many. */
size_t ctx_free_held(kvx_ctx_t *ctx);

kvx_role_t ctx_other_role(const kvx_ctx_t *ctx);
/* How many UCX worker groups this rank runs (KVX_WORKER_GROUPS, kvx_ucx.h
 * says why), and which of a rank's ngroups serves peers of (role,
 * instance): group 0 its TP siblings, one per instance of the other role. */
int ctx_worker_groups(const kvx_ctx_t *ctx);
int ctx_group_of(int ngroups, kvx_role_t self, kvx_role_t role, int instance);

/* The registry's side of creation and destruction (setup/steps.c). At most
 * CTX_MAX_LIVE contexts live in a process (ctx.c says why they are counted). */
#define CTX_MAX_LIVE 64
/* Takes a closed entry for a context being created; 0 when all are taken. */
int ctx_register(kvx_ctx_t *ctx);
/* Opens a created context to API calls. */
void ctx_open(kvx_ctx_t *ctx);
/* Marks a live context as being destroyed; 0 for a stale or foreign
 * handle, or one another thread destroys already. */
int ctx_begin_destroy(kvx_ctx_t *ctx);
/* Closes a context to API calls and waits for the calls still inside. */
void ctx_unregister(kvx_ctx_t *ctx);
/* Frees the context that left the graveyard to make room for this one. */
void ctx_bury(kvx_ctx_t *ctx);

#endif
