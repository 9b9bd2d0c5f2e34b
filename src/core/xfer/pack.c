/*
 * pack.c - the sender side of the plan modes that need a copy (plan.h):
 * packed puts (PACK) and data messages (UNPACK), one per run per (layer,
 * component), at most PLAN_MAX_OP bytes each.
 *
 * PACK: the decode rank holds a part of this rank's heads, so a run's
 * bytes are contiguous there and strided here. Its pieces are copied into
 * a slot of the staging area and put at once; the slot is released when
 * the put completes, so the source pages are free as soon as it is posted.
 *
 * UNPACK: the run is contiguous here and interleaved with other writers'
 * heads there, within every token. It travels as one active message (a
 * MSG_DATA header, kept in a header-only slot, and the run's bytes straight
 * from the pool), which the decode rank unpacks (room/unpack.c). The source
 * pages are read until the message completes, so the target finishes
 * (aux, flush, DONE) only when none is in flight.
 *
 * STAGED (the memory path, cuda_stage.c): like UNPACK, but the run is
 * gathered into a slot through a copy engine first, and the decode rank
 * scatters it through its own. The staging area is then cuda_stage.c's.
 *
 * Messages only: a decode rank whose endpoint has no native RMA asks for
 * every run as a data message, whatever the layouts (KVX_WRITES). Runs
 * strided here are gathered into a slot first, in plan_iter order; the aux
 * row goes as MSG_AUX; nothing is flushed (the decode counts what arrived).
 * On a staged memory path such a pair is STAGED (its runs already travel
 * as data messages), and only the aux row changes.
 *
 * A target that finds no free slot waits on ctx->pack_wait_*; completions
 * kick the progress thread, which pumps the waiting targets again.
 *
 * What the prefill machine must hear (posted, done, failed, resume) goes
 * through ctx->xfer_ops (target.h).
 */
#include "config.h"

#include "core/ctx/ctx.h"
#include "core/ctx/stats.h"
#include "core/link/peer.h"
#include "core/xfer/cuda_stage.h"
#include "core/xfer/cursor.h"
#include "core/xfer/pack.h"
#include "core/xfer/target.h"
#include "util/failure.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

/* Slots of the ring: operations in flight that hold one, over all peers. */
#define PACK_SLOTS 4096

/* This rank's pair with a peer of the other role, and how its pages
 * travel: a writer asked for data messages (KVX_WRITES) sends every run as
 * one, whatever the layouts (mode UNPACK), and on the memory path's staged
 * pairs (cuda_stage.c) every run crosses host staging (mode STAGED).
 * Returns 0 when no pages flow between the two. */
static int pack_peer_geom(const kvx_ctx_t *ctx, const peer_t *peer, plan_geom_t *g,
                          plan_mode_t *mode_p)
{
    plan_pair_t pair;

    if (peer->role == ctx->role) {
        return 0;
    }
    if (ctx->role == KVX_ROLE_PREFILL) {
        plan_pair(&ctx->my, ctx->tp_rank, peer->kvl, peer->tp_rank, &pair);
        plan_geom_init(g, &ctx->my, ctx->num_pages, peer->kvl, peer->num_pages, &pair);
    } else {
        plan_pair(peer->kvl, peer->tp_rank, &ctx->my, ctx->tp_rank, &pair);
        plan_geom_init(g, peer->kvl, peer->num_pages, &ctx->my, ctx->num_pages, &pair);
    }
    *mode_p = cstage_mode(ctx, peer->msg_writes ? PLAN_UNPACK : plan_mode(g));
    return pair.writes;
}

/* Does this prefill rank need staging bytes to send t's runs as data
 * messages (its runs are strided here, or staged), and are there enough? */
static int pack_area_ok(const kvx_ctx_t *ctx, const target_t *t, int *needed_p)
{
    *needed_p = t->mode == PLAN_STAGED || !plan_src_contiguous(&t->geom);
    return !*needed_p || (ctx->staging.cap > 0 && ctx->staging.size >= 2 * plan_max_op(&t->geom));
}

kvx_status_t pack_setup(kvx_ctx_t *ctx, kvx_failure_t *why)
{
    int need_slots = 0, need_area = 0;
    size_t bytes = ctx->cfg.staging_bytes, need_bytes = 2 * PLAN_MAX_OP;
    kvx_status_t status;

    for (int i = 0; i < ctx->npeers; i++) {
        plan_mode_t mode;
        plan_geom_t g;
        int area;

        if (!pack_peer_geom(ctx, &ctx->peers[i], &g, &mode)) {
            continue;
        }
        if (ctx->role == KVX_ROLE_PREFILL) {
            need_slots |= mode != PLAN_DIRECT;
            area = mode == PLAN_PACK || mode == PLAN_STAGED ||
                   (mode == PLAN_UNPACK && !plan_src_contiguous(&g));
        } else {
            need_slots |= mode == PLAN_UNPACK || mode == PLAN_STAGED;
            area = mode == PLAN_UNPACK || mode == PLAN_STAGED;
        }
        need_area |= area;
        if (area && 2 * plan_max_op(&g) > need_bytes) {
            need_bytes = 2 * plan_max_op(&g);
        }
    }
    /* A rank that takes joiners (setup/joining.c) cannot know its later
     * peers' transports: across hosts without native RMA their pages go as
     * data messages, which need slots and an area. */
    if (ctx->door_addr[0] != '\0' && !ctx->cstage.on) {
        need_slots = 1;
        need_area |= ctx->role == KVX_ROLE_PREFILL;
    }
    if (!need_slots) {
        return KVX_OK;
    }
    if (need_area && bytes < need_bytes) {
        failure_set(why, KVX_ERR_CONFIG, KVX_STAGE_INIT, NULL,
                    "KVX_STAGING_BYTES=%zu is too small: this rank's %s need at least %zu", bytes,
                    ctx->cstage.on ? "memory path and TP ratio" : "TP ratio and transports",
                    need_bytes);
        return KVX_ERR_CONFIG;
    }
    status = ctx->cstage.on
                 ? cstage_area_init(ctx, need_area ? bytes : 0, PACK_SLOTS, why)
                 : staging_init(&ctx->staging, &ctx->ucx, need_area ? bytes : 0, PACK_SLOTS, why);
    if (status == KVX_OK && !ctx->cstage.on) { /* cstage_area_init() said it */
        kvx_info("staging: %zu bytes registered, %u slots, for %s", need_area ? bytes : 0,
                 PACK_SLOTS,
                 ctx->role == KVX_ROLE_PREFILL ? "packed puts and data messages"
                                               : "data messages to unpack");
    }
    return status;
}

kvx_status_t pack_use_messages(kvx_ctx_t *ctx, target_t *t, kvx_failure_t *why)
{
    int needed;

    t->msgs = 1;
    t->mode = cstage_mode(ctx, PLAN_UNPACK);
    /* Runs contiguous here go from the pool: no staging needed. */
    if (pack_area_ok(ctx, t, &needed) && (t->mode != PLAN_STAGED || ctx->staging.cap > 0)) {
        return KVX_OK;
    }
    failure_set_room(why, t->room_id, KVX_ERR_CONFIG, KVX_STAGE_PREALLOC, NULL,
                     "%s asks for pages as data messages, but this rank set %s aside for them "
                     "(its endpoint has native RMA here: set KVX_WRITES alike on every rank)",
                     t->peer->name,
                     needed && ctx->staging.cap > 0 ? "too few staging bytes" : "no staging");
    return KVX_ERR_CONFIG;
}

void pack_cleanup(kvx_ctx_t *ctx)
{
    if (ctx->cstage.on) {
        cstage_area_cleanup(ctx);
    } else {
        staging_cleanup(&ctx->staging, &ctx->ucx);
    }
    ctx->pack_wait_head = ctx->pack_wait_tail = NULL;
}

int pack_quiet(const target_t *t)
{
    return t->pack_inflight == 0;
}

/* Completion of a packed put or a data message. */
static void pack_done_cb(void *request, ucs_status_t status, void *user)
{
    staging_slot_t *slot = user;
    target_t *t = slot->owner;
    kvx_ctx_t *ctx = t->peer->ctx;

    staging_release(&ctx->staging, slot);
    ctx->pack_kick = 1;
    /* Data messages and aux rows (t->msgs) count in pack_inflight. */
    if ((t->mode == PLAN_UNPACK || t->msgs) && --t->pack_inflight == 0) {
        cursor_wait(ctx, t); /* it may finish now */
    }
    ctx->xfer_ops->done(request, status, t);
}

/* Copies the pieces of sub into the slot at their offsets in the remote
 * range [first, first + len); 0 when a piece falls outside (a plan bug). */
static int pack_fill(const target_t *t, const char *src, const plan_run_t *sub, size_t first,
                     char *dst, size_t len)
{
    plan_iter_t it;
    size_t so, doff, n;

    plan_iter_init(&it, &t->geom, sub);
    while (plan_iter_next(&it, &so, &doff, &n)) {
        if (doff < first || doff - first > len || n > len - (doff - first)) {
            return 0;
        }
        memcpy(dst + (doff - first), src + so, n);
    }
    return 1;
}

/* A slot of len bytes for t, or NULL after queueing t to wait for one. */
static staging_slot_t *pack_slot(kvx_ctx_t *ctx, target_t *t, size_t len)
{
    staging_slot_t *slot = staging_get(&ctx->staging, len);

    if (slot == NULL) {
        cursor_wait(ctx, t);
        return NULL;
    }
    slot->owner = t;
    return slot;
}

/* Accounts an operation of sub's pages that holds slot and moves past
 * them; on error releases the slot and fails the room. Returns what
 * pack_post() returns. */
static int pack_posted(kvx_ctx_t *ctx, target_t *t, staging_slot_t *slot, const plan_run_t *sub,
                       kvx_status_t status, ucs_status_t ucs, const char *what)
{
    size_t len = (size_t)sub->count * t->geom.pair_page_bytes;

    if (status != KVX_INPROGRESS) {
        staging_release(&ctx->staging, slot);
    }
    if (status != KVX_OK && status != KVX_INPROGRESS) {
        ctx->xfer_ops->failed(ctx, t, status, KVX_STAGE_POST, ucs, what);
        return -1;
    }
    ctx->xfer_ops->posted(t, len, status);
    stats_xfer(ctx, t->mode == PLAN_UNPACK ? KVX_XFER_MSG_SENT : KVX_XFER_PACKED_PUT, len);
    t->pack_inflight += t->mode == PLAN_UNPACK && status == KVX_INPROGRESS;
    cursor_advance(t, sub->count);
    return 1;
}

static int pack_put(kvx_ctx_t *ctx, target_t *t, const plan_run_t *sub)
{
    const plan_geom_t *g = &t->geom;
    unsigned b = t->layer * ctx->my.comps + t->comp;
    size_t len = (size_t)sub->count * g->pair_page_bytes, first = g->dbase + sub->dst * g->dpage;
    staging_slot_t *slot = pack_slot(ctx, t, len);
    ucs_status_t ucs = UCS_OK;
    kvx_status_t status;

    if (slot == NULL) {
        return -1;
    }
    if (!pack_fill(t, ctx->pool.buf[b], sub, first, staging_at(&ctx->staging, slot), len)) {
        kvx_failure_t f;

        staging_release(&ctx->staging, slot);
        failure_set_room(&f, t->room_id, KVX_ERR_INTERNAL, KVX_STAGE_POST, NULL,
                         "packing pages for %s: a piece falls outside its run", t->peer->name);
        ctx->xfer_ops->fail_room(ctx, t, &f);
        return -1;
    }
    status = kucx_put(t->peer->ep, t->peer->put_in_host, staging_at(&ctx->staging, slot), len,
                      ctx->staging.region.memh, t->peer->buf_addr[b] + first, t->peer->buf_rkey[b],
                      pack_done_cb, slot, &ucs);
    return pack_posted(ctx, t, slot, sub, status, ucs, "packed put to");
}

/* The header of a data message that goes straight from the pool (or an
 * aux row): kept until the message completes (UCX 1.13 reads it until
 * then), outside the staging ring, whose slots are reused in order: a
 * message to a peer that died on this machine never completes (no error
 * handling on shared memory), and a slot of it would stop the ring for
 * every other peer. */
typedef struct pack_msg {
    ctx_held_t held; /* first: freed by destroy if UCX never completes it */
    target_t *t;
    unsigned char hdr[MSG_DATA_LEN];
} pack_msg_t;

static void pack_msg_done_cb(void *request, ucs_status_t status, void *user)
{
    pack_msg_t *pm = user;
    target_t *t = pm->t;
    kvx_ctx_t *ctx = t->peer->ctx;

    ctx_unhold(ctx, &pm->held);
    free(pm);
    ctx->pack_kick = 1;
    if (--t->pack_inflight == 0) {
        cursor_wait(ctx, t); /* it may finish now */
    }
    ctx->xfer_ops->done(request, status, t);
}

/* Sends a data message (type MSG_DATA or MSG_AUX, d its header's body) of
 * len bytes at buf straight from memory registered as memh (NULL: none). */
static kvx_status_t pack_msg_send(kvx_ctx_t *ctx, target_t *t, msg_type_t type, const msg_data_t *d,
                                  const void *buf, size_t len, ucp_mem_h memh, ucs_status_t *ucs_p)
{
    pack_msg_t *pm = malloc(sizeof(*pm));
    kvx_status_t status;

    if (pm == NULL) {
        return KVX_ERR_NO_MEMORY;
    }
    pm->t = t;
    msg_put_data(pm->hdr, type, ctx->rank, t->room_id, t->nonce, d);
    status = kucx_am_send_data(t->peer->ep, MSG_DATA_ID, pm->hdr, MSG_DATA_LEN, buf, len, memh,
                               pack_msg_done_cb, pm, ucs_p);
    if (status == KVX_INPROGRESS) {
        ctx_hold(ctx, &pm->held); /* UCX calls back from a later progress */
    } else {
        free(pm);
    }
    return status;
}

/* Copies the pieces of sub back to back, in plan_iter order: the data of
 * a message (unpack.c reads it in the same order). */
static void pack_gather(const target_t *t, const char *src, const plan_run_t *sub, char *dst)
{
    plan_iter_t it;
    size_t so, doff, n, at = 0;

    plan_iter_init(&it, &t->geom, sub);
    while (plan_iter_next(&it, &so, &doff, &n)) {
        memcpy(dst + at, src + so, n);
        at += n;
    }
}

static int pack_send(kvx_ctx_t *ctx, target_t *t, const plan_run_t *sub, size_t pos)
{
    const plan_geom_t *g = &t->geom;
    unsigned b = t->layer * ctx->my.comps + t->comp;
    const char *src = (const char *)ctx->pool.buf[b] + g->sbase + sub->src * g->spage;
    size_t len = (size_t)sub->count * g->pair_page_bytes;
    ucp_mem_h memh = ctx->pool.regions[ctx->pool.buf_region[b]].memh;
    msg_data_t d = { t->layer, t->comp, (uint32_t)pos, sub->count };
    staging_slot_t *slot;
    ucs_status_t ucs = UCS_OK;
    kvx_status_t status;

    /* Runs contiguous in this pool go from it; runs strided here (data
     * messages asked for by the decode) are gathered into a slot. */
    if (plan_src_contiguous(g)) {
        status = pack_msg_send(ctx, t, MSG_DATA, &d, src, len, memh, &ucs);
        if (status != KVX_OK && status != KVX_INPROGRESS) {
            ctx->xfer_ops->failed(ctx, t, status, KVX_STAGE_POST, ucs, "data message to");
            return -1;
        }
        ctx->xfer_ops->posted(t, len, status);
        stats_xfer(ctx, KVX_XFER_MSG_SENT, len);
        t->pack_inflight += status == KVX_INPROGRESS;
        cursor_advance(t, sub->count);
        return 1;
    }
    if ((slot = pack_slot(ctx, t, len)) == NULL) {
        return -1;
    }
    pack_gather(t, ctx->pool.buf[b], sub, staging_at(&ctx->staging, slot));
    src = staging_at(&ctx->staging, slot);
    memh = ctx->staging.region.memh;
    msg_put_data(slot->hdr, MSG_DATA, ctx->rank, t->room_id, t->nonce, &d);
    status = kucx_am_send_data(t->peer->ep, MSG_DATA_ID, slot->hdr, MSG_DATA_LEN, src, len, memh,
                               pack_done_cb, slot, &ucs);
    return pack_posted(ctx, t, slot, sub, status, ucs, "data message to");
}

int pack_send_aux(kvx_ctx_t *ctx, target_t *t, const void *row, size_t len)
{
    msg_data_t d = { 0, 0, 0, 0 };
    ucs_status_t ucs = UCS_OK;
    kvx_status_t status = pack_msg_send(ctx, t, MSG_AUX, &d, row, len, NULL, &ucs);

    if (status != KVX_OK && status != KVX_INPROGRESS) {
        ctx->xfer_ops->failed(ctx, t, status, KVX_STAGE_AUX, ucs, "aux row to");
        return 0;
    }
    ctx->xfer_ops->posted(t, len, status);
    stats_xfer(ctx, KVX_XFER_MSG_SENT, len);
    t->pack_inflight += status == KVX_INPROGRESS;
    return 1;
}

int pack_post(kvx_ctx_t *ctx, target_t *t)
{
    plan_run_t sub;
    size_t pos;

    if (!cursor_peek(ctx, t, &sub, &pos)) {
        return 0; /* all posted, or the next hand-over waits for its event */
    }
    switch (t->mode) {
    case PLAN_PACK:
        return pack_put(ctx, t, &sub);
    case PLAN_STAGED:
        return cstage_post(ctx, t, &sub, pos);
    default:
        return pack_send(ctx, t, &sub, pos);
    }
}
