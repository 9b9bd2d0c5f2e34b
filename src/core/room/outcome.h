/*
 * outcome.h - the rooms' side of lost and departing peers (outcome.c).
 */
#ifndef KVX_CORE_OUTCOME_H
#define KVX_CORE_OUTCOME_H

#include <kvx.h>

#include "core/link/peer.h"
#include "core/room/room.h"

/* A room opened after a TP sibling was lost concludes FAILED at once: no
 * agreement round will ever run for it (tests/model/room.pml checks it). */
void peer_break_if_broken(kvx_ctx_t *ctx, room_t *room);
/* The instance's TP ranks are out of step: no collective runs on tp_comm
 * any more; every room concludes as after a lost sibling, with f as its
 * reason, and the siblings are told (MSG_TP_BREAK) when tell is set. */
void peer_break_tp(kvx_ctx_t *ctx, const kvx_failure_t *f, int tell);
/* A room opened with a peer already lost fails at once, with the loss. */
void peer_fail_if_lost(kvx_ctx_t *ctx, room_t *room, peer_t *peer);
/* Fails the room if the peer said goodbye (KVX_ERR_SHUTDOWN) and the room
 * still waits for it. */
void peer_fail_if_gone(kvx_ctx_t *ctx, room_t *room, const peer_t *peer);
/* A goodbye heard: the rooms the peer had a part in fail now. */
void peer_on_bye(kvx_ctx_t *ctx, peer_t *peer);
/* Fails every room that involves a lost peer (how: how it was found lost). */
void peer_fail_rooms(kvx_ctx_t *ctx, peer_t *peer, const char *how);

#endif
