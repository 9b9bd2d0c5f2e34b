/*
 * pack.h - packed puts and data messages, the sender side.
 */
#ifndef KVX_CORE_PACK_H
#define KVX_CORE_PACK_H

#include <kvx.h>

#include "core/base/plan.h"
#include "core/xfer/target.h"

/* Sets up staging when this rank's pairs need it (end of bootstrap). */
kvx_status_t pack_setup(kvx_ctx_t *ctx, kvx_failure_t *why);
void pack_cleanup(kvx_ctx_t *ctx);
/* Posts t's next packed put or data message: 1 posted, 0 nothing left in
 * the batch, -1 stop (failed, or waiting for staging). */
int pack_post(kvx_ctx_t *ctx, target_t *t);
/* The decode asked t for data messages only (MSG_WRITES_MESSAGES): sets t
 * up for them; KVX_ERR_CONFIG when this rank has no staging for it. */
kvx_status_t pack_use_messages(kvx_ctx_t *ctx, target_t *t, kvx_failure_t *why);
/* Sends the aux row (len bytes at row, kept until the message completes)
 * as MSG_AUX: 1 posted, 0 not (t failed, or waits for a slot). */
int pack_send_aux(kvx_ctx_t *ctx, target_t *t, const void *row, size_t len);
/* No data message of t still reads its source pages. */
int pack_quiet(const target_t *t);

#endif
