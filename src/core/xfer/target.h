/*
 * target.h - a transfer target: one decode rank a prefill room writes to, and
 * the operations this floor calls in the room floor above it.
 *
 * The xfer floor moves one target's bytes (pack.c, cuda_stage.c) but owns
 * neither targets nor rooms: the prefill machine (room/sender.c) holds the
 * targets, and what xfer must tell it -- an operation posted, completed or
 * failed, a waiting target to resume, the room to hold or let go -- goes
 * through the table the room floor gives xfer_attach() (room_xfer_ops),
 * set once when a context is made. So do the ends of the decode's staged
 * copies (scattered, scatter_failed). Every op runs synchronously where
 * xfer calls it, in the order it calls them, with ctx->lock held.
 */
#ifndef KVX_CORE_TARGET_H
#define KVX_CORE_TARGET_H

#include <kvx.h>

#include "core/base/plan.h"
#include "core/base/staging.h"
#include "core/link/peer.h"
#include "ucx/kvx_ucx.h"

#include <stddef.h>
#include <stdint.h>

struct room;

/* One decode rank a prefill room talks to: what it was granted and the
 * cursor of what was posted to it. */
typedef struct target {
    struct room *room; /* the room floor's; this floor reads only room_id */
    uint64_t room_id;
    peer_t *peer;
    plan_pair_t pair;
    plan_geom_t geom;
    int granted;    /* its PREALLOC arrived */
    int owes_prior; /* its next PREALLOC is the replaced room's to answer (room->prior) */
    uint64_t nonce; /* the decode room's incarnation, from its PREALLOC */
    uint32_t *dst;  /* granted destination pages */
    int64_t aux_slot;
    uint32_t verify, verify_rate; /* the decode asked for digests (KVX_VERIFY), from its grant */
    /* Posting cursor: hand-overs [0, next_hov) are in a batch or posted; the
     * batch is positions [bpos, bpos + bn) of layers [bl0, bl1). */
    size_t next_hov;
    size_t bpos, bn;
    unsigned bl0, bl1;
    plan_run_t *runs;
    size_t nruns, run;
    unsigned layer, comp;
    plan_iter_t iter;
    int iter_live;
    int in_batch, aux_posted, flushing, done_sent;
    int received;        /* the decode rank reported the room SUCCESS */
    int drained_sent;    /* DRAINED told the decode nothing is in flight */
    uint64_t hold_until; /* injected delay: post nothing before (ns) */
    void *aux_row;       /* header + payload put into the decode's aux slot */
    uint64_t puts, bytes;
    unsigned ops; /* operations posted to it and not completed (puts, messages) */
    struct target *pump_next;
    int pumping; /* queued on peer->pump_* */
    /* pack.c: packed puts and data messages (modes PACK and UNPACK). */
    plan_mode_t mode;
    int msgs;               /* the decode asked for data messages only (mode is UNPACK) */
    uint32_t pack_page;     /* pages of the current run posted */
    size_t pack_pos;        /* position of the current run in the room's pages */
    unsigned pack_inflight; /* data messages still reading the source pages */
    int pack_waiting;       /* queued on ctx->pack_wait_* */
    struct target *pack_next;
} target_t;

typedef struct xfer_ops {
    /* ---- a target (the prefill machine) ---- */
    /* Moves t to its next batch of hand-overs ready to post; 0 for none. */
    int (*next_batch)(target_t *t);
    /* An operation of len bytes was posted to t (KVX_OK: done at once,
     * KVX_INPROGRESS: done() follows). */
    void (*posted)(target_t *t, size_t len, kvx_status_t status);
    /* An operation of t completed (UCX's send callback; user is t). */
    void (*done)(void *request, ucs_status_t status, void *user);
    /* Posting to t failed: its room fails (stage, what failed, with ucs). */
    void (*failed)(kvx_ctx_t *ctx, target_t *t, kvx_status_t status, kvx_stage_t stage,
                   ucs_status_t ucs, const char *what);
    /* A slot was released or t's data messages completed: post again. */
    void (*resume)(kvx_ctx_t *ctx, target_t *t);
    /* t's room is in a final state: post nothing more for it. */
    int (*over)(const target_t *t);
    /* t's room fails with f (f->room_id and stage set). */
    void (*fail_room)(kvx_ctx_t *ctx, target_t *t, const kvx_failure_t *f);
    /* A queue or an operation of this floor holds t's room, and lets it go
     * (the room may be freed then, and t with it). */
    void (*hold)(target_t *t);
    void (*release)(kvx_ctx_t *ctx, target_t *t);
    /* ---- the decode's staged copies (the decode machine) ---- */
    /* The copies of the data message in slot into the pool completed: its
     * bytes count, and the slot is released (cstage_slot_free()). */
    void (*scattered)(kvx_ctx_t *ctx, staging_slot_t *slot);
    /* The copy engine failed while slot's copies were queued: the room of
     * the data message in it fails with f. */
    void (*scatter_failed)(kvx_ctx_t *ctx, staging_slot_t *slot, kvx_failure_t *f);
} xfer_ops_t;

/* Sets the room floor's ops (setup, when a context is made). */
void xfer_attach(kvx_ctx_t *ctx, const xfer_ops_t *ops);

#endif
