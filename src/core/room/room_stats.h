/*
 * room_stats.h - the counters a room's events move (kvx_stats_t, ctx/stats.h
 * holds them). A room's outcome counts once per rank: when the agreed flag
 * turns on (stats_room_concluded(), from every place that sets it) for a
 * room still open, else at close with the local state (stats_room_closed()).
 * ctx->lock held, as for every hook.
 */
#ifndef KVX_CORE_ROOM_STATS_H
#define KVX_CORE_ROOM_STATS_H

#include <kvx.h>

#include "core/room/room.h"

#include <stdint.h>

void stats_room_opened(kvx_ctx_t *ctx, const room_t *room);
/* The room's agreed flag turned on: its outcome counts. */
void stats_room_concluded(kvx_ctx_t *ctx, const room_t *room);
/* kvx_room_close() closes the room, answering status. */
void stats_room_closed(kvx_ctx_t *ctx, const room_t *room, kvx_status_t status);
void stats_pages_quarantined(kvx_ctx_t *ctx, const room_t *room);
void stats_pages_released(kvx_ctx_t *ctx, const room_t *room);

#endif
