/*
 * protocol.c - receiving control messages: every message is decoded and
 * checked by msg_decode(), must come from a known peer, and is then handed
 * to the sender or receiver side of its room.
 */
#include "config.h"

#include "core/ctx/ctx.h"
#include "core/link/peer.h"
#include "core/room/outcome.h"
#include "core/room/protocol.h"
#include "core/room/receiver.h"
#include "core/room/room.h"
#include "core/room/sender.h"
#include "util/failure.h"
#include "util/log.h"
#include "util/time.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Keeps a copy of a message that arrived before the application opened
 * its room (a prefill rank may hear the decode's grant first). */
static void protocol_keep_early(kvx_ctx_t *ctx, const msg_t *m, const void *buf, size_t len)
{
    room_t *room = hmap_get(&ctx->rooms, m->hdr.room);
    void *one = NULL;
    early_t *e;

    if (buf == NULL && m->hdr.type == MSG_AGREED) {
        /* One room of an AGREED list: kept as an AGREED of its own. */
        buf = one = msg_new_agreed(m->hdr.src_rank, m->rooms, 1, &len);
        if (one == NULL) {
            kvx_rerror(m->hdr.room, "no memory to keep an early AGREED");
            return;
        }
    }

    if (room == NULL) {
        if (room_new(ctx, m->hdr.room, KVX_ROLE_PREFILL, -1, &room) != KVX_OK) {
            kvx_rerror(m->hdr.room, "no memory to keep an early %s", msg_type_name(m->hdr.type));
            return;
        }
    }
    /* Bounded: a peer sending junk for rooms nobody opens cannot make this
     * rank hold memory without end (the shadow expires with the bootstrap
     * deadline). */
    if (room->nearly >= 4 * (unsigned)ctx->npeers + 4) {
        kvx_rwarn(m->hdr.room, "dropping an early %s from rank %d: too many for an unopened room",
                  msg_type_name(m->hdr.type), m->hdr.src_rank);
        ctx->bad_msgs++;
        free(one);
        return;
    }
    room->nearly++;
    e = malloc(sizeof(*e));
    if (e != NULL && (e->buf = malloc(len)) != NULL) {
        memcpy(e->buf, buf, len);
        e->len = len;
        e->next = NULL;
        /* Appended, so replay keeps arrival order. */
        early_t **tail = &room->early;
        while (*tail != NULL) {
            tail = &(*tail)->next;
        }
        *tail = e;
    } else {
        free(e);
        kvx_rerror(m->hdr.room, "no memory to keep an early %s", msg_type_name(m->hdr.type));
    }
    free(one);
}

/* A decode room failed before this prefill rank opened it: nothing was or
 * will be written into its pages (the kept FAIL fails the room at open). */
static void protocol_nothing_in_flight(kvx_ctx_t *ctx, peer_t *peer, const msg_t *m)
{
    size_t len;
    void *drained = msg_new(MSG_DRAINED, ctx->rank, m->hdr.room, m->hdr.nonce, &len);

    if (drained != NULL) {
        peer_send(ctx, peer, drained, len);
    }
}

/* A prefill rank that failed before this decode rank's grant reached it
 * cannot name the room's incarnation: its FAIL carries nonce 0. It is taken
 * while the room waits for that rank's answer to the grant. */
static int protocol_pre_grant_fail(const room_t *room, const peer_t *peer, const msg_t *m)
{
    if (m->hdr.type != MSG_FAIL || m->hdr.nonce != 0 || room->state != KVX_ROOM_BOOTSTRAPPING) {
        return 0;
    }
    for (unsigned i = 0; i < room->nsources; i++) {
        if (room->sources[i].peer == peer) {
            return !room->sources[i].accepted;
        }
    }
    return 0;
}

/* Is a decode rank's grant (or failure) about a newer incarnation of the
 * room id than the one this prefill rank's room (open, or closed and still
 * kept) was granted by? A decode rank may close an agreed room and open the
 * id again before this rank closed its room: its nonces (its world rank,
 * then a count) only grow. */
static int protocol_next_incarnation(const room_t *room, const peer_t *peer, const msg_t *m)
{
    if (room == NULL || !room->user_open || room->side != KVX_ROLE_PREFILL ||
        (m->hdr.type != MSG_PREALLOC && m->hdr.type != MSG_FAIL)) {
        return 0;
    }
    for (unsigned i = 0; i < room->ntargets; i++) {
        if (room->targets[i].peer == peer) {
            return room->targets[i].nonce != 0 && m->hdr.nonce > room->targets[i].nonce &&
                   m->hdr.nonce >> 32 == (uint64_t)(uint32_t)peer->rank;
        }
        /* The room was opened to an incarnation of the decode instance that
         * a later one replaced (setup/joining.c): the later one's grant is
         * for the next room with this id. */
        if (room->targets[i].peer->retired && room->targets[i].peer->rank == peer->rank) {
            return 1;
        }
    }
    return 0;
}

/* Is a decode rank's message (not a grant) about the incarnation this
 * prefill rank's closed room, still kept to answer grants, was granted by?
 * Say the echo of the FAIL that room answered a late grant with: it is the
 * end of that incarnation, not a word for the next room with this id. */
static int protocol_closed_incarnation(const room_t *held, const peer_t *peer, const msg_t *m)
{
    if (held == NULL || !held->closed || held->side != KVX_ROLE_PREFILL || m->hdr.nonce == 0 ||
        m->hdr.type == MSG_PREALLOC) {
        return 0;
    }
    for (unsigned i = 0; i < held->ntargets; i++) {
        if (held->targets[i].peer == peer) {
            return held->targets[i].nonce == m->hdr.nonce;
        }
    }
    return 0;
}

static void protocol_room_msg(kvx_ctx_t *ctx, peer_t *peer, const msg_t *m, const void *buf,
                              size_t len)
{
    room_t *held = hmap_get(&ctx->rooms, m->hdr.room);
    room_t *room = room_find(ctx, m->hdr.room);
    int stale = peer->role != ctx->role
                    ? sender_msg_stale(ctx, room != NULL && room->user_open ? room : NULL, peer,
                                       m->hdr.nonce)
                    : 0;

    if (ctx->role == KVX_ROLE_PREFILL && protocol_next_incarnation(held, peer, m)) {
        /* Kept for the room the application opens next with this id
         * (room_api_create() hands them over; room_free() keeps them in an
         * unopened room's place when none is opened). */
        kvx_rdebug(m->hdr.room, "keeping a %s from %s for the next incarnation of the room",
                   msg_type_name(m->hdr.type), peer->name);
        protocol_keep_early(ctx, m, buf, len);
        if (m->hdr.type == MSG_FAIL) {
            protocol_nothing_in_flight(ctx, peer, m);
        }
        return;
    }
    if (stale == 1 || protocol_closed_incarnation(held, peer, m)) {
        /* Say a closed room's late FAIL, RECEIVED, VERDICT or AGREED (the
         * usual end of a room that succeeded): kept, a FAIL would fail the
         * next room with the same id. */
        kvx_rdebug(m->hdr.room, "dropping a %s from %s about a closed incarnation of the room",
                   msg_type_name(m->hdr.type), peer->name);
        return;
    }
    if (stale == 2) {
        kvx_rwarn(m->hdr.room, "ignoring a %s from %s about another incarnation of the room",
                  msg_type_name(m->hdr.type), peer->name);
        ctx->bad_msgs++;
        return;
    }
    if (room == NULL && ctx->role == KVX_ROLE_PREFILL && m->hdr.type == MSG_PREALLOC) {
        /* A room the application closed before this grant came still
         * answers it (sender_on_prealloc: FAIL and DRAINED). */
        room = hmap_get(&ctx->rooms, m->hdr.room);
        room = room != NULL && room->closed && room->user_open ? room : NULL;
    }
    if (room == NULL || !room->user_open) {
        /* A prefill rank may open its room late: the grant, a failure, and
         * even the decode's receipt or verdict (a rank that writes nothing
         * can hear the room succeed before it opened it) wait for it. */
        if (ctx->role == KVX_ROLE_PREFILL &&
            (m->hdr.type == MSG_PREALLOC || m->hdr.type == MSG_FAIL ||
             m->hdr.type == MSG_RECEIVED || m->hdr.type == MSG_VERDICT ||
             m->hdr.type == MSG_AGREED)) {
            protocol_keep_early(ctx, m, buf, len);
            if (m->hdr.type == MSG_FAIL) {
                protocol_nothing_in_flight(ctx, peer, m);
            }
        } else {
            kvx_rdebug(m->hdr.room, "dropping %s from %s: no such room open",
                       msg_type_name(m->hdr.type), peer->name);
        }
        return;
    }
    if (peer->role == ctx->role || peer->instance != room->peer_instance) {
        kvx_rwarn(room->id, "ignoring %s from %s, which is not on the other side of the room",
                  msg_type_name(m->hdr.type), peer->name);
        ctx->bad_msgs++;
        return;
    }
    if (room->side == KVX_ROLE_DECODE && m->hdr.nonce != room->nonce &&
        !protocol_pre_grant_fail(room, peer, m)) {
        kvx_rdebug(room->id, "dropping a %s from %s of an earlier incarnation of the room",
                   msg_type_name(m->hdr.type), peer->name);
        return;
    }
    if (m->hdr.type == MSG_FAIL) {
        /* The peer's record is the root cause: keep its origin. */
        room_fail(ctx, room, &m->u.failure, 1);
        if (room->side == KVX_ROLE_PREFILL) {
            /* The FAIL names the decode room's incarnation: now that rank
             * can be told nothing is in flight, even if this room had
             * failed before. */
            sender_learn_nonce(room, peer, m->hdr.nonce);
            sender_drain(ctx, room);
        }
    } else if (room->side == KVX_ROLE_PREFILL && m->hdr.type == MSG_PREALLOC) {
        sender_on_prealloc(ctx, room, peer, m);
    } else if (room->side == KVX_ROLE_PREFILL && m->hdr.type == MSG_RECEIVED) {
        sender_on_received(ctx, room, peer);
    } else if (room->side == KVX_ROLE_PREFILL && m->hdr.type == MSG_VERDICT) {
        sender_on_verdict(ctx, room, &m->u.failure);
    } else if (room->side == KVX_ROLE_PREFILL && m->hdr.type == MSG_AGREED) {
        sender_on_agreed(ctx, room, peer);
    } else if (room->side == KVX_ROLE_DECODE) {
        receiver_on_msg(ctx, room, peer, m);
    } else {
        kvx_rwarn(room->id, "ignoring %s from %s on the prefill side", msg_type_name(m->hdr.type),
                  peer->name);
        ctx->bad_msgs++;
    }
}

/* An AGREED names rooms: each is taken as a message about its room (with
 * its own incarnation), as if it had come alone. */
static void protocol_agreed(kvx_ctx_t *ctx, peer_t *peer, const msg_t *m)
{
    msg_t one = *m; /* once: a message is some 500 bytes, and AGREED lists up to
                       MSG_AGREED_MAX rooms */
    msg_agreed_room_t e;

    one.u.agreed.count = 1;
    one.rooms = &e;
    for (uint32_t i = 0; i < m->u.agreed.count; i++) {
        memcpy(&e, (const char *)m->rooms + (size_t)i * sizeof(e), sizeof(e));
        one.hdr.room = e.room;
        one.hdr.nonce = e.nonce;
        protocol_room_msg(ctx, peer, &one, NULL, 0);
    }
}

void protocol_dispatch(kvx_ctx_t *ctx, peer_t *peer, const msg_t *m, const void *buf, size_t len)
{
    switch (m->hdr.type) {
    case MSG_PING:
        if (peer->role == ctx->role) {
            peer_on_ping(peer, m->hdr.nonce);
        }
        break;
    case MSG_TP_BREAK:
        if (peer->role == ctx->role) {
            peer_break_tp(ctx, &m->u.failure, 0);
        } else {
            kvx_warn("ignoring a TP_BREAK from %s, which is not a TP sibling", peer->name);
            ctx->bad_msgs++;
        }
        break;
    case MSG_AGREED:
        protocol_agreed(ctx, peer, m);
        break;
    case MSG_BYE:
        peer_on_bye(ctx, peer);
        break;
    default:
        protocol_room_msg(ctx, peer, m, buf, len);
        break;
    }
}

ucs_status_t protocol_am_cb(void *arg, const void *header, size_t header_length, void *data,
                            size_t length, const ucp_am_recv_param_t *param)
{
    kvx_ctx_t *ctx = arg;
    char why[256];
    peer_t *peer;
    msg_t m;

    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        /* kvx sends eagerly only; a rendezvous message is not one of ours. */
        kvx_warn("dropping a rendezvous active message of %zu bytes", length);
        ctx->bad_msgs++;
        return UCS_OK;
    }
    memset(&m, 0, sizeof(m));
    if (msg_decode(data, length, &ctx->limits, &m, why, sizeof(why)) != KVX_OK) {
        int32_t src = -1;

        /* The buffer may be unaligned, and the rank is only a claim. */
        if (length >= sizeof(msg_hdr_t)) {
            memcpy(&src, (const char *)data + offsetof(msg_hdr_t, src_rank), sizeof(src));
        }
        ctx->bad_msgs++;
        kvx_warn("malformed message #%llu (claiming rank %d): %s",
                 (unsigned long long)ctx->bad_msgs, src, why);
        return UCS_OK;
    }
    peer = peer_of_rank(ctx, m.hdr.src_rank);
    if (peer == NULL) {
        ctx->bad_msgs++;
        kvx_warn("message %s from rank %d, which is not a peer of this rank",
                 msg_type_name(m.hdr.type), m.hdr.src_rank);
        return UCS_OK;
    }
    if (m.hdr.nonce != 0 && (uint32_t)m.hdr.nonce < peer->nonce_floor) {
        ctx->bad_msgs++;
        kvx_warn("message %s room %llu from %s is of an earlier incarnation of its instance "
                 "(nonce %llx, this one's start at %x): dropped",
                 msg_type_name(m.hdr.type), (unsigned long long)m.hdr.room, peer->name,
                 (unsigned long long)m.hdr.nonce, peer->nonce_floor);
        return UCS_OK;
    }
    peer->last_heard = ctx_pass_now(ctx);
    if (peer->lost && peer->role != ctx->role && !peer->ep_failed) {
        /* Heard again after being declared lost (a partition that healed):
         * the rooms that failed stay failed; new rooms may use it again. A
         * TP sibling is never taken back: the instance's collectives are
         * already abandoned. */
        peer->lost = 0;
        kvx_warn("peer %s is back after being lost (%s)", peer->name, peer->lost_how);
    }
    kvx_trace("recv %s room %llu from %s", msg_type_name(m.hdr.type),
              (unsigned long long)m.hdr.room, peer->name);
    protocol_dispatch(ctx, peer, &m, data, length);
    return UCS_OK;
}
