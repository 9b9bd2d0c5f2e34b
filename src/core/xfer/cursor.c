/*
 * cursor.c - where a target's posting stands: the next sub-run of its runs
 * to post (per (layer, component), at most plan_op_pages() pages) and the
 * move past what was posted, and the queue of targets waiting for a staging
 * slot or for their data messages to complete (ctx->pack_wait_*), which the
 * progress thread resumes once a slot or a message completed (pack_kick).
 * pack.c and cuda_stage.c post from it, in the same order.
 */
#include "config.h"

#include "core/ctx/ctx.h"
#include "core/xfer/cursor.h"
#include "core/xfer/target.h"

/* Queues t until a slot is released or its data messages complete; the
 * queue holds a reference to the room. */
void cursor_wait(kvx_ctx_t *ctx, target_t *t)
{
    if (t->pack_waiting) {
        return;
    }
    t->pack_waiting = 1;
    t->pack_next = NULL;
    ctx->xfer_ops->hold(t);
    if (ctx->pack_wait_tail != NULL) {
        ctx->pack_wait_tail->pack_next = t;
    } else {
        ctx->pack_wait_head = t;
    }
    ctx->pack_wait_tail = t;
}

unsigned cursor_progress(kvx_ctx_t *ctx)
{
    target_t *t = ctx->pack_wait_head;
    unsigned n = 0;

    if (t != NULL && ctx->pack_kick) {
        ctx->pack_kick = 0;
        ctx->pack_wait_head = ctx->pack_wait_tail = NULL;
        while (t != NULL) {
            target_t *next = t->pack_next;

            t->pack_waiting = 0;
            ctx->xfer_ops->resume(ctx, t); /* may queue t again */
            ctx->xfer_ops->release(ctx, t);
            t = next;
            n++;
        }
    }
    return n;
}

void xfer_attach(kvx_ctx_t *ctx, const xfer_ops_t *ops)
{
    ctx->xfer_ops = ops;
}

/* The next sub-run to post: at most plan_op_pages() pages of the current
 * run, for the current (layer, component); *pos_p is the position of its
 * first page in the room's page list. Moves over finished runs, components,
 * layers and batches, but not into the sub-run (cursor_advance() does). */
int cursor_peek(kvx_ctx_t *ctx, target_t *t, plan_run_t *sub, size_t *pos_p)
{
    const plan_run_t *run;
    uint32_t left;

    for (;;) {
        if (!t->in_batch) {
            if (!ctx->xfer_ops->next_batch(t)) {
                return 0;
            }
            t->pack_page = 0;
            t->pack_pos = t->bpos;
        }
        if (t->run < t->nruns) {
            break;
        }
        t->run = 0;
        t->pack_pos = t->bpos;
        if (++t->comp == ctx->my.comps) {
            t->comp = 0;
            if (++t->layer == t->bl1) {
                t->in_batch = 0;
            }
        }
    }
    run = &t->runs[t->run];
    left = run->count - t->pack_page;
    sub->src = run->src + t->pack_page;
    sub->dst = run->dst + t->pack_page;
    sub->count = left < plan_op_pages(&t->geom) ? left : plan_op_pages(&t->geom);
    *pos_p = t->pack_pos + t->pack_page;
    return 1;
}

void cursor_advance(target_t *t, uint32_t pages)
{
    t->pack_page += pages;
    if (t->pack_page == t->runs[t->run].count) {
        t->pack_pos += t->pack_page;
        t->pack_page = 0;
        t->run++;
    }
}
