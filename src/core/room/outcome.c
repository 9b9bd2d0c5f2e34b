/*
 * outcome.c - what a lost or departing peer means for the rooms: the rooms
 * it had a part in fail, a lost TP sibling (or TP ranks out of step) breaks
 * the instance and concludes its rooms, a goodbye fails the rooms that
 * still wait for it. The peer floor (link/peer.c) detects; this decides.
 */
#include "config.h"

#include "core/ctx/ctx.h"
#include "core/ctx/stats.h"
#include "core/link/peer.h"
#include "core/room/outcome.h"
#include "core/room/receiver.h"
#include "core/room/room.h"
#include "core/room/room_stats.h"
#include "core/room/sender.h"
#include "util/failure.h"
#include "util/log.h"
#include "util/time.h"

/* A lost TP sibling breaks the instance: no collective can run. A decode
 * instance concludes every room not agreed yet FAILED here, with the loss as
 * its reason -- a room already SUCCESS on this rank too, since the instance
 * can no longer confirm it -- and tells the prefill ranks. A prefill rank
 * fails the rooms it was still sending, and concludes each room with the
 * decode instance's word: that instance is whole and decides (a room whose
 * pages it all had may still succeed); without any word possible, FAILED. */
static void peer_break_instance(kvx_ctx_t *ctx, room_t *room, const kvx_failure_t *f)
{
    if (!room->user_open || room->agreed) {
        return;
    }
    if (!room_terminal(room) && !sender_delivered(room)) {
        room_fail(ctx, room, f, 1);
    } else if (room->state != KVX_ROOM_FAILED && !room->verdict) {
        room->failure = *f; /* (a verdict's root cause stays) */
    }
    if (room->side == KVX_ROLE_PREFILL) {
        room->broken_at = room->broken_at ? room->broken_at : kvx_now_ns();
        sender_conclude_broken(ctx, room);
        return;
    }
    room->agreed = 1;
    room->agreed_state = KVX_ROOM_FAILED;
    stats_room_concluded(ctx, room);
    if (room->side == KVX_ROLE_DECODE) {
        /* The prefill ranks wait for this instance's verdict. */
        ctx->room_agree->send_verdict(ctx, room);
    }
}

void peer_break_tp(kvx_ctx_t *ctx, const kvx_failure_t *f, int tell)
{
    room_t *room;
    char line[512];

    if (ctx->tp_broken) {
        return; /* broken already (a loss, or out of step): that reason stays */
    }
    ctx->tp_break = *f;
    ctx->tp_break.has_room = 0;
    __atomic_store_n(&ctx->tp_broken, 1, __ATOMIC_RELAXED);
    kvx_failure_format(&ctx->tp_break, line, sizeof(line));
    kvx_error("%s", line);
    for (size_t pos = 0; (room = room_next(ctx, &pos)) != NULL;) {
        kvx_failure_t rf = ctx->tp_break;

        rf.room_id = room->id;
        rf.has_room = 1;
        peer_break_instance(ctx, room, &rf);
    }
    for (int i = 0; i < ctx->npeers && tell; i++) {
        peer_t *peer = &ctx->peers[i];
        size_t len;
        void *m;

        if (peer->role == ctx->role && !peer->lost &&
            (m = msg_new_failure(MSG_TP_BREAK, ctx->rank, 0, 0, &ctx->tp_break, &len)) != NULL) {
            peer_send(ctx, peer, m, len);
        }
    }
}

void peer_break_if_broken(kvx_ctx_t *ctx, room_t *room)
{
    kvx_failure_t f;

    if (ctx->tp_broken && ctx->tp_break.status != KVX_OK) {
        f = ctx->tp_break;
        f.room_id = room->id;
        f.has_room = 1;
        peer_break_instance(ctx, room, &f);
        return;
    }
    for (int i = 0; i < ctx->npeers && ctx->tp_broken; i++) {
        peer_t *peer = &ctx->peers[i];

        if (peer->role == ctx->role && peer->lost) {
            failure_set_room(&f, room->id, KVX_ERR_PEER_LOST, room_stage(room), NULL,
                             "peer %s lost: %s", peer->name, peer->lost_how);
            peer_break_instance(ctx, room, &f);
            return;
        }
    }
}

void peer_fail_if_lost(kvx_ctx_t *ctx, room_t *room, peer_t *peer)
{
    kvx_failure_t f;

    if (peer->lost && !room_terminal(room)) {
        failure_set_room(&f, room->id, KVX_ERR_PEER_LOST, KVX_STAGE_BOOTSTRAP, NULL,
                         "peer %s lost: %s", peer->name, peer->lost_how);
        room_fail(ctx, room, &f, 1);
    }
}

static int peer_owes(const room_t *room, const peer_t *peer);

/* A peer that said goodbye (its context is being destroyed) will never
 * answer the room: if the room still waits for it, it fails now, not at its
 * bootstrap deadline. One whose part is done may have left (a decode rank's
 * RECEIVED kept for a prefill rank that writes nothing and opens late). */
void peer_fail_if_gone(kvx_ctx_t *ctx, room_t *room, const peer_t *peer)
{
    kvx_failure_t f;

    if (peer->bye && !room_terminal(room) && peer_owes(room, peer)) {
        failure_set_room(&f, room->id, KVX_ERR_SHUTDOWN, KVX_STAGE_SHUTDOWN, NULL,
                         "%s is shutting down: its context is being destroyed", peer->name);
        room_fail(ctx, room, &f, 1);
    }
}

static int peer_involved(const room_t *room, const peer_t *peer)
{
    for (unsigned t = 0; t < room->ntargets; t++) {
        if (room->targets[t].peer == peer) {
            return 1;
        }
    }
    for (unsigned s = 0; s < room->nsources; s++) {
        if (room->sources[s].peer == peer) {
            return 1;
        }
    }
    return 0;
}

/* Does the room still wait for the peer: a decode rank that has not
 * reported the room SUCCESS, a prefill rank that has not said DONE? */
static int peer_owes(const room_t *room, const peer_t *peer)
{
    if (room->side == KVX_ROLE_PREFILL && room->decode_agreed) {
        return 0; /* the decode instance's SUCCESS is final */
    }
    for (unsigned t = 0; t < room->ntargets; t++) {
        if (room->targets[t].peer == peer && !room->targets[t].received) {
            return 1;
        }
    }
    for (unsigned s = 0; s < room->nsources; s++) {
        if (room->sources[s].peer == peer && !room->sources[s].done) {
            return 1;
        }
    }
    return 0;
}

/* Goodbye from a peer of the other instance: the rooms that still wait for
 * it -- those it never opened among them, which no FAIL of its destroy
 * named -- fail now with the shutdown as reason. A peer whose part of a
 * room is done may leave before the room ends. */
void peer_on_bye(kvx_ctx_t *ctx, peer_t *peer)
{
    room_t *room;

    peer->bye = 1;
    ctx->peers_changed++;
    for (size_t pos = 0; peer->role != ctx->role && (room = room_next(ctx, &pos)) != NULL;) {
        if (room->user_open && peer_owes(room, peer)) {
            peer_fail_if_gone(ctx, room, peer);
        }
    }
}

/* Fails every room that involves a lost peer. */
void peer_fail_rooms(kvx_ctx_t *ctx, peer_t *peer, const char *how)
{
    room_t *room;

    for (size_t pos = 0; (room = room_next(ctx, &pos)) != NULL;) {
        kvx_failure_t f;

        if (peer->role == ctx->role) {
            failure_set_room(&f, room->id, KVX_ERR_PEER_LOST, room_stage(room), NULL,
                             "peer %s lost: %s", peer->name, how);
            peer_break_instance(ctx, room, &f);
            continue;
        }
        if (room->state == KVX_ROOM_FAILED || room->state == KVX_ROOM_SUCCESS ||
            !peer_involved(room, peer)) {
            continue;
        }
        failure_set_room(&f, room->id, KVX_ERR_PEER_LOST, room_stage(room), NULL,
                         "peer %s lost: %s", peer->name, how);
        room_fail(ctx, room, &f, 1);
    }
}
