/*
 * agree.h - agreement rounds over the TP instance.
 */
#ifndef KVX_CORE_AGREE_H
#define KVX_CORE_AGREE_H

#include <kvx.h>

#include "core/link/peer.h"
#include "core/room/room.h"

#include <stdint.h>

kvx_status_t agree_init(kvx_ctx_t *ctx);
void agree_cleanup(kvx_ctx_t *ctx);
/* A room is being freed: forget its slot. */
void agree_forget(kvx_ctx_t *ctx, room_t *room);
/* A round is in progress: closed rooms are kept until it ends. */
int agree_in_round(const kvx_ctx_t *ctx);
/* Rounds whose collective this rank entered (told to the TP siblings in
 * every PING). */
uint64_t agree_rounds(const kvx_ctx_t *ctx);
/* Rounds out of step for KVX_TP_TIMEOUT break the instance (progress tick). */
void agree_tick(kvx_ctx_t *ctx, uint64_t now);
/* Decode: tells the room's prefill ranks the agreed outcome: its root cause
 * (VERDICT) for FAILED, AGREED for SUCCESS. */
void agree_send_verdict(kvx_ctx_t *ctx, room_t *room);
/* Decode: sends the AGREED lists agree_send_verdict() collected. */
void agree_flush_agreed(kvx_ctx_t *ctx);
/* What the room floor asks of agreement (room_agree_with()): agree_forget,
 * agree_in_round, agree_send_verdict. */
extern const room_agree_ops_t agree_room_ops;

#endif
