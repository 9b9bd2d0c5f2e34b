/*
 * cursor.h - a target's posting cursor and the queue of waiting targets
 * (cursor.c, which also holds xfer_attach(), declared with the ops in
 * target.h).
 */
#ifndef KVX_CORE_CURSOR_H
#define KVX_CORE_CURSOR_H

#include <kvx.h>

#include "core/base/plan.h"
#include "core/xfer/target.h"

#include <stddef.h>
#include <stdint.h>

/* Queues t until a slot is released or its data messages complete (the
 * queue holds t's room). */
void cursor_wait(kvx_ctx_t *ctx, target_t *t);
/* Resumes the waiting targets once something completed (a progress
 * poller); returns how many. */
unsigned cursor_progress(kvx_ctx_t *ctx);
/* The next sub-run of t to post: at most plan_op_pages() pages of the
 * current run, for the current (layer, component); *pos_p is the position
 * of its first page in the room's page list. 0 when all is posted or the
 * next hand-over waits for its event. */
int cursor_peek(kvx_ctx_t *ctx, target_t *t, plan_run_t *sub, size_t *pos_p);
/* Moves t's cursor past pages of its current run that were posted. */
void cursor_advance(target_t *t, uint32_t pages);

#endif
