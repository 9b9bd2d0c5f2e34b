/*
 * cuda_stage.c - the memory path (kvx_mem_path_t): chosen once per job, and
 * on the staged path the data messages that carry pages through host
 * staging memory with a copy engine on each side.
 *
 * The staged protocol, per sub-run (at most 4 MiB of one run of pages of
 * one (layer, component)), reuses pack.c's posting order and unpack.c's
 * landing and checks:
 *
 *   prefill  gather: copies of the run's pieces (contiguous in its pool)
 *            into a slot of the staging area, queued on the copy engine
 *            (kvx's CUDA stream); the progress thread closes a batch with a
 *            fence (one CUDA event) for every copy queued since the last,
 *            which is a chunk's copies when the chunk fits the area.
 *            When the batch completed, the slot goes as one MSG_DATA active
 *            message by rendezvous (the decode chooses where it lands).
 *   decode   land: the data is received into a slot of its own staging
 *            area (room/unpack.c), then scatter: copies of the pieces
 *            contiguous in its pool, queued and fenced alike. When they
 *            completed the bytes count for their writer (the scattered op,
 *            unpack_scattered() -> unpack_count()), and the room is
 *            SUCCESS only when every writer's bytes counted and its DONE
 *            arrived: SUCCESS waits for the device copies.
 *
 * The progress thread queues and polls every copy (a prefill's gathers are
 * queued there, not in the application thread that handed the chunk
 * over), and keeps the pool's device current: kvx makes no CUDA call in an
 * application thread but while creating and destroying a context.
 *
 * Both sides put the run's bytes in one order (plan_iter_init_sides()), so
 * each copies the pieces contiguous on its own side. A slot is released
 * when its data message completed (prefill) or its copies did (decode).
 * The pages of a decode room that failed stay DRAINING while a copy into
 * them is in flight (receiver_update_pages() asks cstage_room_busy());
 * data for a failed room is dropped.
 *
 * This file knows targets and staging slots, never rooms: what a room
 * must hear goes through ctx->xfer_ops (target.h), and the decode side's
 * callers (room/unpack.c) fail their room with what cstage_scatter*()
 * returns.
 */
#include "config.h"

#include "core/ctx/ctx.h"
#include "core/ctx/stats.h"
#include "core/link/peer.h"
#include "core/xfer/cuda_stage.h"
#include "core/xfer/cursor.h"
#include "core/xfer/target.h"
#include "mpi/kvx_mpi.h"
#include "util/failure.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

/* ---- the path ----------------------------------------------------------- */

const char *kvx_mem_path_name(kvx_mem_path_t path)
{
    return path == KVX_MEM_PATH_DIRECT ? "direct" : path == KVX_MEM_PATH_STAGED ? "staged" : "?";
}

plan_mode_t cstage_mode(const kvx_ctx_t *ctx, plan_mode_t mode)
{
    if (ctx->cstage.all || (ctx->cstage.any_cuda && mode != PLAN_DIRECT)) {
        return PLAN_STAGED;
    }
    return mode;
}

/* What one rank asks for. */
typedef struct cstage_need {
    int staged;         /* this rank must stage (or KVX_MEM_PATH=staged) */
    int cuda;           /* its pool is CUDA memory */
    int direct;         /* KVX_MEM_PATH=direct */
    int ucx_cuda;       /* its UCX accesses CUDA memory */
    uint64_t ucx_types; /* UCX's memory types */
} cstage_need_t;

static void cstage_need(const kvx_cfg_t *cfg, kvx_mem_type_t type, uint64_t types, cstage_need_t *n)
{
    memset(n, 0, sizeof(*n));
    n->cuda = type == KVX_MEM_CUDA;
    n->ucx_types = types;
    n->ucx_cuda = (types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
    n->direct = cfg->mem_path == CFG_MEM_PATH_DIRECT;
    n->staged = cfg->mem_path == CFG_MEM_PATH_STAGED ||
                (cfg->mem_path == CFG_MEM_PATH_AUTO && n->cuda && !n->ucx_cuda);
}

/* KVX_MEM_PATH=direct that cannot be honored: why, else KVX_OK. */
static kvx_status_t cstage_check_direct(const cstage_need_t *n, int job_staged, kvx_failure_t *why)
{
    char types[128], ver[64];

    if (!n->direct) {
        return KVX_OK;
    }
    kucx_memory_types_name(n->ucx_types, types, sizeof(types));
    kucx_version(ver, sizeof(ver));
    if (n->cuda && !n->ucx_cuda) {
        failure_set(why, KVX_ERR_UNSUPPORTED, KVX_STAGE_INIT, NULL,
                    "KVX_MEM_PATH=direct, but UCX %s cannot access CUDA memory (its memory types: "
                    "%s)",
                    ver, types);
        return KVX_ERR_UNSUPPORTED;
    }
    if (job_staged) {
        failure_set(why, KVX_ERR_CONFIG, KVX_STAGE_INIT, NULL,
                    "KVX_MEM_PATH=direct, but another rank stages (its UCX cannot access its CUDA "
                    "pool, or KVX_MEM_PATH=staged there)");
        return KVX_ERR_CONFIG;
    }
    return KVX_OK;
}

/* One sentence: why the path, and how pages cross on it. */
static void cstage_explain(char *buf, size_t len, const cstage_need_t *n, int job_staged,
                           int any_cuda, size_t bytes, int numa, const char *engine)
{
    char types[128], ver[64], cause[256], where[32] = "";

    kucx_memory_types_name(n->ucx_types, types, sizeof(types));
    kucx_version(ver, sizeof(ver));
    if (!job_staged) {
        snprintf(buf, len, "%s: puts from pool to pool%s%s",
                 any_cuda ? "UCX accesses CUDA memory" : "every pool is host memory",
                 any_cuda ? "; TP ratios that pack or unpack stage through host memory, copied by "
                          : "",
                 any_cuda ? engine : "");
        return;
    }
    if (n->staged && !n->cuda) {
        snprintf(cause, sizeof(cause), "KVX_MEM_PATH=staged");
    } else if (n->staged) {
        snprintf(cause, sizeof(cause), "UCX %s cannot access CUDA memory (its memory types: %s)",
                 ver, types);
    } else {
        snprintf(cause, sizeof(cause),
                 "another rank stages (its UCX cannot access its CUDA pool, or "
                 "KVX_MEM_PATH=staged there)");
    }
    if (numa >= 0) {
        snprintf(where, sizeof(where), " on NUMA node %d", numa);
    }
    snprintf(buf, len, "%s: pages cross %zu bytes of %shost staging%s, copied by %s", cause, bytes,
             n->cuda ? "page-locked " : "", where, engine);
}

kvx_status_t cstage_init(kvx_ctx_t *ctx, kvx_failure_t *why)
{
    cstage_t *c = &ctx->cstage;
    cstage_need_t n;
    int mine[2], job[2];
    kvx_status_t status;

    cstage_need(&ctx->cfg, ctx->pool.type, ctx->ucx.memory_types, &n);
    mine[0] = n.staged;
    mine[1] = n.cuda;
    status = KVX_MPI_CALL(MPI_Allreduce(mine, job, 2, MPI_INT, MPI_MAX, ctx->world));
    if (status != KVX_OK) {
        failure_set(why, status, KVX_STAGE_INIT, NULL, "cannot agree on the memory path");
        return status;
    }
    status = cstage_check_direct(&n, job[0], why);
    if (status != KVX_OK) {
        return status;
    }
    c->all = job[0];
    c->any_cuda = job[1];
    c->on = c->all || c->any_cuda;
    c->path = c->all ? KVX_MEM_PATH_STAGED : KVX_MEM_PATH_DIRECT;
    if (c->on) {
        status = mem_copier_create(ctx->pool.type, ctx->pool.dev, &c->copier, why);
        if (status != KVX_OK) {
            return status;
        }
    }
    cstage_explain(c->reason, sizeof(c->reason), &n, c->all, c->any_cuda, ctx->cfg.staging_bytes,
                   ctx->pool.numa, c->copier != NULL ? mem_copier_name(c->copier) : "nothing");
    kvx_info("memory path: %s: %s", kvx_mem_path_name(c->path), c->reason);
    return KVX_OK;
}

void cstage_cleanup(kvx_ctx_t *ctx)
{
    mem_copier_destroy(ctx->cstage.copier);
    ctx->cstage.copier = NULL;
}

kvx_status_t kvx_ctx_mem_path(kvx_ctx_t *ctx, kvx_mem_path_t *path_p, char *reason, size_t len)
{
    kvx_status_t status = ctx_enter(ctx);

    if (status != KVX_OK) {
        return status;
    }
    if (path_p == NULL) {
        status = KVX_ERR_INVALID_PARAM;
    } else {
        *path_p = ctx->cstage.path;
        if (reason != NULL && len > 0) {
            snprintf(reason, len, "%s", ctx->cstage.reason);
        }
    }
    ctx_leave(ctx);
    return status;
}

kvx_status_t kvx_mem_path_probe(kvx_mem_type_t type, kvx_mem_path_t *path_p, char *reason,
                                size_t len)
{
    kvx_failure_t why = { 0 };
    kvx_status_t status = KVX_OK;
    const kvx_cfg_t *cfg = cfg_global(&status, &why);
    uint64_t types = 0;
    cstage_need_t n;

    if (status == KVX_OK && (path_p == NULL || (type != KVX_MEM_HOST && type != KVX_MEM_CUDA))) {
        status = KVX_ERR_INVALID_PARAM;
        failure_set(&why, status, KVX_STAGE_INIT, NULL, "no path_p, or an unknown memory type");
    }
    if (status == KVX_OK && type == KVX_MEM_CUDA) {
        status = mem_cuda_open(cfg->cuda_library, &why);
    }
    if (status == KVX_OK) {
        status = kucx_probe_memory_types(&types, &why);
    }
    if (status == KVX_OK) {
        cstage_need(cfg, type, types, &n);
        status = cstage_check_direct(&n, 0, &why);
    }
    if (status != KVX_OK) {
        if (reason != NULL && len > 0) {
            snprintf(reason, len, "%s", why.text);
        }
        return status;
    }
    *path_p = n.staged ? KVX_MEM_PATH_STAGED : KVX_MEM_PATH_DIRECT;
    if (reason != NULL && len > 0) {
        cstage_explain(reason, len, &n, n.staged, n.cuda, cfg->staging_bytes, -1,
                       n.cuda ? "cudaMemcpyAsync" : "memcpy");
    }
    return KVX_OK;
}

/* ---- the staging area ---------------------------------------------------- */

kvx_status_t cstage_area_init(kvx_ctx_t *ctx, size_t size, unsigned cap, kvx_failure_t *why)
{
    cstage_t *c = &ctx->cstage;
    staging_t *s = &ctx->staging;
    void *base = NULL;
    int placed = 0;
    kvx_status_t status;

    if (size > 0) {
        status = mem_host_alloc(size, ctx->pool.numa, &base, &placed, why);
        if (status != KVX_OK) {
            return status;
        }
    }
    c->area_len = size;
    if (size > 0 && ctx->pool.type == KVX_MEM_CUDA) {
        status = mem_cuda_pin(base, size, ctx->pool.dev, why);
        if (status != KVX_OK) {
            goto err_free;
        }
        c->pinned = 1;
    }
    c->ops = calloc(cap, sizeof(*c->ops));
    c->queue = calloc(cap, sizeof(*c->queue));
    status = staging_ring_init(s, base, size, cap);
    if (c->ops == NULL || c->queue == NULL || status != KVX_OK) {
        failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_INIT, NULL, "no memory for %u slots", cap);
        status = KVX_ERR_NO_MEMORY;
        goto err_free;
    }
    if (size > 0) {
        status = kucx_region_map(&ctx->ucx, base, size, UCS_MEMORY_TYPE_HOST, &s->region, why);
        if (status != KVX_OK) {
            goto err_free;
        }
    }
    if (placed) {
        kvx_info("staging: %zu bytes%s on NUMA node %d, %u slots, for staged data messages", size,
                 c->pinned ? " page-locked" : "", ctx->pool.numa, cap);
    } else {
        kvx_info("staging: %zu bytes%s, %u slots, for staged data messages", size,
                 c->pinned ? " page-locked" : "", cap);
    }
    return KVX_OK;

err_free:
    s->base = base;
    cstage_area_cleanup(ctx);
    return status;
}

void cstage_area_cleanup(kvx_ctx_t *ctx)
{
    cstage_t *c = &ctx->cstage;
    staging_t *s = &ctx->staging;
    uint64_t ticket;
    kvx_failure_t f;

    /* Copies still in flight read or write the area: they finish first. */
    if (c->copier != NULL && !c->broken &&
        (mem_copier_fence(c->copier, &ticket, &f) != KVX_OK ||
         mem_copier_wait(c->copier, ticket, &f) != KVX_OK)) {
        kvx_error("staging: copies did not finish: %s", f.text);
    }
    if (s->region.memh != NULL) {
        kucx_region_unmap(&ctx->ucx, &s->region);
    }
    if (c->pinned) {
        mem_cuda_unpin(s->base);
    }
    mem_host_free(s->base, c->area_len);
    free(s->slots);
    free(c->ops);
    free(c->queue);
    memset(s, 0, sizeof(*s));
    c->ops = NULL;
    c->queue = NULL;
    c->qfirst = c->qcount = c->qunfenced = 0;
    c->pinned = 0;
    c->area_len = 0;
}

/* ---- slots with copies ------------------------------------------------- */

/* Fails t's room with a failure recorded outside it, at post (its gather). */
static void cstage_fail_target(kvx_ctx_t *ctx, target_t *t, kvx_failure_t *f)
{
    f->stage = KVX_STAGE_POST;
    f->room_id = t->room_id;
    f->has_room = 1;
    ctx->xfer_ops->fail_room(ctx, t, f);
}

static unsigned cstage_index(const kvx_ctx_t *ctx, const staging_slot_t *slot)
{
    return (unsigned)(slot - ctx->staging.slots);
}

/* Queues a slot whose copies were just queued on the engine. */
static cstage_op_t *cstage_queue(kvx_ctx_t *ctx, staging_slot_t *slot, cstage_kind_t kind)
{
    cstage_t *c = &ctx->cstage;
    unsigned i = cstage_index(ctx, slot);

    memset(&c->ops[i], 0, sizeof(c->ops[i]));
    c->ops[i].kind = kind;
    c->ops[i].copied = kind != CSTAGE_GATHER;
    c->queue[(c->qfirst + c->qcount) % ctx->staging.cap] = i;
    c->qcount++;
    c->qunfenced++;
    return &c->ops[i];
}

static void cstage_copy_gathers(kvx_ctx_t *ctx);

/* Closes the batch of the slots queued since the last fence, once their
 * copies are queued. */
static kvx_status_t cstage_fence(kvx_ctx_t *ctx, uint64_t *ticket_p, kvx_failure_t *why)
{
    cstage_t *c = &ctx->cstage;
    kvx_status_t status;

    cstage_copy_gathers(ctx);
    status = mem_copier_fence(c->copier, ticket_p, why);
    if (status != KVX_OK) {
        return status;
    }
    for (unsigned k = c->qcount - c->qunfenced; k < c->qcount; k++) {
        cstage_op_t *op = &c->ops[c->queue[(c->qfirst + k) % ctx->staging.cap]];

        op->ticket = *ticket_p; /* 0 when nothing was ever copied: done at once */
        op->fenced = 1;
    }
    c->qunfenced = 0;
    return KVX_OK;
}

/* The engine failed (a CUDA error is sticky): the rooms of every slot with
 * copies fail with its reason, and so does every staged transfer after
 * (the slots stay: the engine may still write into them). */
static void cstage_fail_all(kvx_ctx_t *ctx, const kvx_failure_t *why)
{
    cstage_t *c = &ctx->cstage;

    if (!c->broken) {
        c->broken = 1;
        c->broken_why = *why;
        kvx_error("staging: the copy engine failed, staged transfers fail from now on: %s",
                  why->text);
    }
    for (unsigned k = 0; k < c->qcount; k++) {
        unsigned i = c->queue[(c->qfirst + k) % ctx->staging.cap];
        staging_slot_t *slot = &ctx->staging.slots[i];
        kvx_failure_t f = *why;

        if (c->ops[i].kind == CSTAGE_GATHER) {
            cstage_fail_target(ctx, c->ops[i].t, &f);
        } else {
            ctx->xfer_ops->scatter_failed(ctx, slot, &f);
        }
    }
}

/* ---- sender --------------------------------------------------------------- */

/* The gather of one slot is over (sent, or dropped): the target may finish
 * once none is left. */
static void cstage_gather_over(kvx_ctx_t *ctx, target_t *t, staging_slot_t *slot)
{
    ctx->cstage.ops[cstage_index(ctx, slot)].kind = CSTAGE_FREE;
    staging_release(&ctx->staging, slot);
    ctx->pack_kick = 1;
    if (--t->pack_inflight == 0) {
        cursor_wait(ctx, t);
    }
}

static void cstage_sent_cb(void *request, ucs_status_t status, void *user)
{
    staging_slot_t *slot = user;
    target_t *t = slot->owner;
    kvx_ctx_t *ctx = t->peer->ctx;

    cstage_gather_over(ctx, t, slot);
    ctx->xfer_ops->done(request, status, t);
}

/* Queues copies of a sub-run's pieces (contiguous in the pool) into its
 * slot, in the order both sides agree on. */
static kvx_status_t cstage_gather(kvx_ctx_t *ctx, const cstage_op_t *op, staging_slot_t *slot,
                                  kvx_failure_t *why)
{
    const target_t *t = op->t;
    const char *pool = ctx->pool.buf[op->buf];
    char *dst = staging_at(&ctx->staging, slot);
    plan_iter_t it;
    size_t so, doff, n, off = 0;
    kvx_status_t status = KVX_OK;

    plan_iter_init_sides(&it, &t->geom, &op->sub, PLAN_SRC);
    while (status == KVX_OK && plan_iter_next(&it, &so, &doff, &n)) {
        if (n > slot->len - off) {
            break;
        }
        status = mem_copier_copy(ctx->cstage.copier, dst + off, pool + so, n, why);
        off += n;
    }
    if (status == KVX_OK && off != slot->len) {
        failure_set(why, KVX_ERR_INTERNAL, KVX_STAGE_POST, NULL,
                    "staging pages for %s: the pieces hold %zu bytes, not %zu", t->peer->name, off,
                    slot->len);
        status = KVX_ERR_INTERNAL;
    }
    stats_xfer(ctx, KVX_XFER_STAGED_COPY, status == KVX_OK ? off : 0);
    return status;
}

/* Queues the copies of the gathers posted since the last fence (the
 * progress thread: application threads make no CUDA call). A gather of a
 * room that failed meanwhile copies nothing; its slot completes empty. */
static void cstage_copy_gathers(kvx_ctx_t *ctx)
{
    cstage_t *c = &ctx->cstage;
    kvx_failure_t f;

    for (unsigned k = c->qcount - c->qunfenced; k < c->qcount; k++) {
        unsigned i = c->queue[(c->qfirst + k) % ctx->staging.cap];
        cstage_op_t *op = &c->ops[i];

        if (op->copied) {
            continue;
        }
        op->copied = 1;
        if (!ctx->xfer_ops->over(op->t) &&
            cstage_gather(ctx, op, &ctx->staging.slots[i], &f) != KVX_OK) {
            cstage_fail_target(ctx, op->t, &f);
        }
    }
}

int cstage_post(kvx_ctx_t *ctx, target_t *t, const plan_run_t *sub, size_t pos)
{
    size_t len = (size_t)sub->count * t->geom.pair_page_bytes;
    msg_data_t d = { t->layer, t->comp, (uint32_t)pos, sub->count };
    staging_slot_t *slot = staging_get(&ctx->staging, len);
    cstage_op_t *op;
    kvx_failure_t f;

    if (ctx->cstage.broken) {
        f = ctx->cstage.broken_why;
        if (slot != NULL) {
            staging_release(&ctx->staging, slot);
        }
        cstage_fail_target(ctx, t, &f);
        return -1;
    }
    if (slot == NULL) {
        cursor_wait(ctx, t);
        return -1;
    }
    slot->owner = t;
    msg_put_data(slot->hdr, MSG_DATA, ctx->rank, t->room_id, t->nonce, &d);
    /* The progress thread queues its copies (cstage_copy_gathers()). */
    op = cstage_queue(ctx, slot, CSTAGE_GATHER);
    op->t = t;
    op->sub = *sub;
    op->buf = t->layer * ctx->my.comps + t->comp;
    ctx->xfer_ops->hold(t);
    t->pack_inflight++;
    cursor_advance(t, sub->count);
    return 1;
}

/* A gathered slot's copies completed: its data message goes now. */
static void cstage_send(kvx_ctx_t *ctx, staging_slot_t *slot)
{
    target_t *t = slot->owner;
    ucs_status_t ucs = UCS_OK;
    kvx_status_t status = KVX_ERR_ABORTED;

    if (!ctx->xfer_ops->over(t)) {
        ctx->cstage.ops[cstage_index(ctx, slot)].kind = CSTAGE_SEND;
        status = kucx_am_send_rndv(t->peer->ep, MSG_DATA_ID, slot->hdr, MSG_DATA_LEN,
                                   staging_at(&ctx->staging, slot), slot->len,
                                   ctx->staging.region.memh, cstage_sent_cb, slot, &ucs);
        if (status == KVX_OK || status == KVX_INPROGRESS) {
            ctx->xfer_ops->posted(t, slot->len, status);
            stats_xfer(ctx, KVX_XFER_MSG_SENT, slot->len);
        } else {
            ctx->xfer_ops->failed(ctx, t, status, KVX_STAGE_POST, ucs, "staged data message to");
        }
    }
    if (status != KVX_INPROGRESS) {
        cstage_gather_over(ctx, t, slot);
    }
    ctx->xfer_ops->release(ctx, t); /* the gather's; a message in flight holds its own */
}

/* ---- receiver ------------------------------------------------------------- */

/* Queues copies of a data message's pieces (contiguous in the pool) from
 * data into the room's pages. */
static kvx_status_t cstage_scatter_copies(kvx_ctx_t *ctx, const cstage_dest_t *to,
                                          const msg_data_t *d, const char *data, size_t len,
                                          kvx_failure_t *why)
{
    char *pool = ctx->pool.buf[d->layer * ctx->my.comps + d->comp];
    plan_run_t run = { 0, to->pages[0], d->npages };
    size_t so, doff, n, off = 0;
    kvx_status_t status = KVX_OK;
    plan_iter_t it;

    for (uint32_t j = 1; j < d->npages; j++) {
        if (to->pages[j] != run.dst + j) {
            failure_set(why, KVX_ERR_PROTOCOL, KVX_STAGE_TRANSFER, NULL,
                        "%s sent staged DATA for pages [%u, +%u), which are not consecutive here",
                        to->writer, d->pos, d->npages);
            return KVX_ERR_PROTOCOL;
        }
    }
    plan_iter_init_sides(&it, &to->geom, &run, PLAN_DST);
    while (status == KVX_OK && plan_iter_next(&it, &so, &doff, &n) && n <= len - off) {
        status = mem_copier_copy(ctx->cstage.copier, pool + doff, data + off, n, why);
        off += n;
    }
    if (status == KVX_OK && off != len) {
        failure_set(why, KVX_ERR_PROTOCOL, KVX_STAGE_TRANSFER, NULL,
                    "%s sent staged DATA of %zu bytes for pages [%u, +%u): their pieces hold %zu",
                    to->writer, len, d->pos, d->npages, off);
        status = KVX_ERR_PROTOCOL;
    }
    stats_xfer(ctx, KVX_XFER_STAGED_COPY, status == KVX_OK ? off : 0);
    return status;
}

kvx_status_t cstage_scatter(kvx_ctx_t *ctx, const cstage_dest_t *to, const msg_data_t *d,
                            staging_slot_t *slot, kvx_failure_t *why)
{
    kvx_status_t status;

    if (ctx->cstage.broken) {
        *why = ctx->cstage.broken_why;
        staging_release(&ctx->staging, slot);
        ctx->pack_kick = 1;
        return why->status != KVX_OK ? why->status : KVX_ERR_INTERNAL; /* never OK: broken */
    }
    status = cstage_scatter_copies(ctx, to, d, staging_at(&ctx->staging, slot), slot->len, why);

    cstage_queue(ctx, slot, CSTAGE_SCATTER);
    return status;
}

kvx_status_t cstage_scatter_now(kvx_ctx_t *ctx, const cstage_dest_t *to, const msg_data_t *d,
                                const void *data, size_t len, kvx_failure_t *why)
{
    uint64_t ticket;
    kvx_failure_t f, g;
    kvx_status_t status, waited;

    if (ctx->cstage.broken) {
        *why = ctx->cstage.broken_why;
        return why->status != KVX_OK ? why->status : KVX_ERR_INTERNAL; /* never OK: broken */
    }
    status = cstage_scatter_copies(ctx, to, d, data, len, &f);
    waited = cstage_fence(ctx, &ticket, &g);

    /* The data is UCX's until this returns: every copy out of it ends here. */
    if (waited == KVX_OK) {
        waited = mem_copier_wait(ctx->cstage.copier, ticket, &g);
    }
    if (waited != KVX_OK) {
        cstage_fail_all(ctx, &g);
        if (status == KVX_OK) {
            status = waited;
            f = g;
        }
    }
    if (status != KVX_OK) {
        *why = f;
    }
    return status;
}

void cstage_slot_free(kvx_ctx_t *ctx, staging_slot_t *slot)
{
    ctx->cstage.ops[cstage_index(ctx, slot)].kind = CSTAGE_FREE;
    staging_release(&ctx->staging, slot);
    ctx->pack_kick = 1;
}

int cstage_room_busy(const kvx_ctx_t *ctx, uint64_t id, uint64_t nonce)
{
    const cstage_t *c = &ctx->cstage;

    /* A failed engine copies nothing more (CUDA's errors are sticky). */
    if (c->broken) {
        return 0;
    }
    for (unsigned k = 0; k < c->qcount; k++) {
        unsigned i = c->queue[(c->qfirst + k) % ctx->staging.cap];
        msg_hdr_t h;

        memcpy(&h, ctx->staging.slots[i].hdr, sizeof(h));
        if (c->ops[i].kind == CSTAGE_SCATTER && h.room == id && h.nonce == nonce) {
            return 1;
        }
    }
    return 0;
}

/* ---- progress ------------------------------------------------------------- */

unsigned cstage_progress(kvx_ctx_t *ctx)
{
    cstage_t *c = &ctx->cstage;
    uint64_t ticket, done;
    kvx_failure_t f;
    unsigned n = 0;

    if (c->qcount == 0 || c->broken) {
        return 0;
    }
    if (cstage_fence(ctx, &ticket, &f) != KVX_OK ||
        mem_copier_poll(c->copier, &done, &f) != KVX_OK) {
        cstage_fail_all(ctx, &f);
        return 0;
    }
    while (c->qcount > 0) {
        unsigned i = c->queue[c->qfirst];
        staging_slot_t *slot = &ctx->staging.slots[i];
        cstage_kind_t kind = c->ops[i].kind;

        if (!c->ops[i].fenced || c->ops[i].ticket > done) {
            break;
        }
        c->qfirst = (c->qfirst + 1) % ctx->staging.cap;
        c->qcount--;
        n++;
        if (kind == CSTAGE_GATHER) {
            cstage_send(ctx, slot);
        } else {
            ctx->xfer_ops->scattered(ctx, slot); /* releases the slot (cstage_slot_free()) */
        }
    }
    /* Copies in flight are work: the progress thread polls, not sleeps. */
    return n + c->qcount;
}
