/*
 * unpack.h - data messages, the receiver side.
 */
#ifndef KVX_CORE_UNPACK_H
#define KVX_CORE_UNPACK_H

#include <kvx.h>

#include "core/base/staging.h"
#include "core/room/receiver.h"
#include "core/room/room.h"
#include "ucx/kvx_ucx.h"

#include <stddef.h>

ucs_status_t unpack_am_cb(void *arg, const void *header, size_t header_length, void *data,
                          size_t length, const ucp_am_recv_param_t *param);
/* A staged data message's copies into the pool completed: its bytes count
 * (unless its room failed or closed meanwhile), the slot is released, and a
 * failed room's pages may go (the scattered op of room_xfer_ops). */
void unpack_scattered(kvx_ctx_t *ctx, staging_slot_t *slot);
/* The copy engine failed with slot's copies queued: the room of its data
 * message fails with f (the scatter_failed op). */
void unpack_scatter_failed(kvx_ctx_t *ctx, staging_slot_t *slot, kvx_failure_t *f);
/* Lands data that waited for a slot; returns work done (a progress poller). */
unsigned unpack_progress(kvx_ctx_t *ctx);
/* Drops waiting data and waits for data being received (destroy). */
void unpack_cleanup(kvx_ctx_t *ctx);
/* The open decode room and writing source of the data message whose header
 * and data a slot holds, checked against the room; NULL when it must be
 * dropped (the room failed if the message could not be of it). */
source_t *unpack_slot_source(kvx_ctx_t *ctx, const staging_slot_t *slot, msg_t *m, room_t **room_p);
/* Counts len bytes of s unpacked (and completes s when they were its last). */
void unpack_count(kvx_ctx_t *ctx, room_t *room, source_t *s, size_t len);

#endif
