/*
 * room.c - the room table, states, failures and deadlines.
 *
 * A room's state only rises, except that FAILED wins and sticks. The first
 * failure recorded is the room's root cause on this rank; it is sent to the
 * other side of the room so that both sides report the same cause.
 */
#include "config.h"

#include "ctx.h"
#include "util/failure.h"
#include "util/log.h"
#include "util/time.h"

#include <stdlib.h>
#include <string.h>

room_t *room_find(kvx_ctx_t *ctx, uint64_t id)
{
    room_t *room = hmap_get(&ctx->rooms, id);

    return room != NULL && !room->closed ? room : NULL;
}

kvx_status_t room_new(kvx_ctx_t *ctx, uint64_t id, kvx_role_t side, int peer_instance,
                      room_t **room_p)
{
    room_t *room = calloc(1, sizeof(*room));

    if (room == NULL || hmap_put(&ctx->rooms, id, room) != KVX_OK) {
        free(room);
        return KVX_ERR_NO_MEMORY;
    }
    room->id = id;
    room->side = side;
    room->peer_instance = peer_instance;
    room->state = KVX_ROOM_BOOTSTRAPPING;
    room->opened = room->entered = kvx_now_ns();
    room->aux_slot = -1;
    room->slot = -1;
    *room_p = room;
    return KVX_OK;
}

int room_terminal(const room_t *room)
{
    return room->state == KVX_ROOM_FAILED || room->state == KVX_ROOM_SUCCESS;
}

kvx_stage_t room_stage(const room_t *room)
{
    switch (room->state) {
    case KVX_ROOM_BOOTSTRAPPING:
        return KVX_STAGE_BOOTSTRAP;
    case KVX_ROOM_WAITING_FOR_INPUT:
        return KVX_STAGE_WAIT;
    default:
        return KVX_STAGE_TRANSFER;
    }
}

void room_set_state(kvx_ctx_t *ctx, room_t *room, kvx_room_state_t state)
{
    if (room_terminal(room) || state <= room->state) {
        return;
    }
    kvx_rdebug(room->id, "%s -> %s", kvx_room_state_name(room->state), kvx_room_state_name(state));
    room->state = state;
    room->entered = kvx_now_ns();
}

static void room_send_fail(kvx_ctx_t *ctx, room_t *room, peer_t *peer, uint64_t nonce,
                           uint64_t not_before)
{
    size_t len;
    void *m = msg_new_fail(ctx->rank, room->id, nonce, &room->failure, &len);

    if (m != NULL) {
        peer_send_at(ctx, peer, m, len, not_before);
    }
}

/* Tells every peer on the other side of the room why it failed. */
static void room_notify(kvx_ctx_t *ctx, room_t *room)
{
    fault_action_t act;
    uint64_t at = 0;

    switch (fault_at(ctx, KVX_STAGE_NOTIFY, room, &act)) {
    case FAULT_DROP:
    case FAULT_FAIL:
        kvx_rwarn(room->id, "injected: the failure notice to the other side is not sent");
        return;
    case FAULT_DELAY:
        at = kvx_now_ns() + act.delay_ns;
        break;
    default:
        break;
    }
    for (unsigned t = 0; t < room->ntargets; t++) {
        room_send_fail(ctx, room, room->targets[t].peer, room->targets[t].nonce, at);
    }
    for (unsigned s = 0; s < room->nsources; s++) {
        room_send_fail(ctx, room, room->sources[s].peer, room->nonce, at);
    }
}

/* A room nobody opened here has no targets yet: the decode ranks whose
 * grants arrived early are told from the kept messages. */
static void room_notify_early(kvx_ctx_t *ctx, room_t *room)
{
    for (early_t *e = room->early; e != NULL; e = e->next) {
        char why[128];
        msg_t m;
        peer_t *peer;
        size_t len;
        void *fail;

        if (msg_decode(e->buf, e->len, &ctx->limits, &m, why, sizeof(why)) != KVX_OK ||
            m.hdr.type != MSG_PREALLOC || (peer = peer_of_rank(ctx, m.hdr.src_rank)) == NULL) {
            continue;
        }
        fail = msg_new_fail(ctx->rank, room->id, m.hdr.nonce, &room->failure, &len);
        if (fail != NULL) {
            peer_send(ctx, peer, fail, len);
        }
    }
}

void room_fail(kvx_ctx_t *ctx, room_t *room, const kvx_failure_t *f, int notify)
{
    char line[512];

    if (room_terminal(room)) {
        return;
    }
    room->failure = *f;
    room->failure.room_id = room->id;
    room->failure.has_room = 1;
    room->before_fail = room->state;
    room->state = KVX_ROOM_FAILED;
    room->entered = kvx_now_ns();
    kvx_failure_format(&room->failure, line, sizeof(line));
    kvx_rwarn(room->id, "%s", line);
    if (notify) {
        room_notify(ctx, room);
        if (!room->user_open) {
            room_notify_early(ctx, room);
        }
    }
    if (room->side == KVX_ROLE_PREFILL) {
        sender_drain(ctx, room);
    } else if (room->user_open) {
        receiver_on_fail(ctx, room);
    }
}

void room_free(kvx_ctx_t *ctx, room_t *room)
{
    agree_forget(ctx, room);
    sender_bury(ctx, room);
    /* A closed room may have been moved aside for a new room with its id. */
    if (hmap_get(&ctx->rooms, room->id) == room) {
        hmap_remove(&ctx->rooms, room->id);
    }
    for (unsigned t = 0; t < room->ntargets; t++) {
        free(room->targets[t].dst);
        free(room->targets[t].runs);
        free(room->targets[t].aux_row);
    }
    free(room->targets);
    free(room->sources);
    free(room->pages);
    free(room->src);
    free(room->aux);
    while (room->early != NULL) {
        early_t *e = room->early;

        room->early = e->next;
        free(e->buf);
        free(e);
    }
    free(room);
}

/* A closed prefill room whose grants did not all come yet keeps answering
 * them (FAIL, DRAINED) until they do or the bootstrap deadline passes: a
 * decode rank must never wait for a writer that forgot its room. */
static int room_answers_grants(const kvx_ctx_t *ctx, const room_t *room)
{
    return room->side == KVX_ROLE_PREFILL && room->user_open && room->ngranted < room->ntargets &&
           kvx_now_ns() - room->entered <= ctx->cfg.bootstrap_timeout;
}

void room_release(kvx_ctx_t *ctx, room_t *room)
{
    /* A closed room lives on while UCX operations reference it and while it
     * holds a place in the agreement vector (the other TP ranks may still
     * hold the room: its final state is still contributed). */
    if (room->closed && room->refs == 0 && room->slot < 0 && !agree_in_round(ctx) &&
        !room_answers_grants(ctx, room)) {
        room_free(ctx, room);
    }
}

void room_unref(kvx_ctx_t *ctx, room_t *room)
{
    room->refs--;
    room_release(ctx, room);
}

/* The deadline of the room's current state, 0 for none. */
static uint64_t room_timeout(const kvx_ctx_t *ctx, const room_t *room)
{
    switch (room->state) {
    case KVX_ROOM_BOOTSTRAPPING:
        return ctx->cfg.bootstrap_timeout;
    case KVX_ROOM_WAITING_FOR_INPUT:
        return ctx->cfg.waiting_timeout;
    case KVX_ROOM_TRANSFERRING:
        return ctx->cfg.transfer_timeout;
    default:
        return 0;
    }
}

static void room_expire(kvx_ctx_t *ctx, room_t *room, uint64_t now)
{
    kvx_failure_t f;
    const char *waiting_for;

    switch (room->state) {
    case KVX_ROOM_BOOTSTRAPPING:
        waiting_for = room->side == KVX_ROLE_DECODE ? "the prefill to open the room"
                                                    : "the decode's pre-allocation";
        break;
    case KVX_ROOM_WAITING_FOR_INPUT:
        waiting_for = room->side == KVX_ROLE_DECODE ? "the prefill's first pages"
                                                    : "the application's first chunk";
        break;
    default:
        waiting_for =
            room->side == KVX_ROLE_DECODE ? "every writer to complete" : "the puts to complete";
        break;
    }
    failure_set_room(&f, room->id, KVX_ERR_TIMEOUT, room_stage(room), NULL,
                     "%s for %.3f s waiting for %s (%s deadline)", kvx_room_state_name(room->state),
                     kvx_ns_to_s(room_age(room, now)), waiting_for,
                     room->user_open ? "state" : "unopened room");
    room_fail(ctx, room, &f, 1);
}

void room_tick(kvx_ctx_t *ctx, uint64_t now)
{
    for (size_t i = 0; i < ctx->rooms.capacity; i++) {
        room_t *room = ctx->rooms.slots[i].value;
        uint64_t timeout;

        if (room != NULL && room->closed && room->user_open) {
            if (!room_answers_grants(ctx, room) && room->refs == 0 && room->slot < 0 &&
                !agree_in_round(ctx)) {
                room_free(ctx, room);
                i--; /* backward-shift deletion moved an entry into slot i */
            }
            continue;
        }
        if (room == NULL || room->closed) {
            continue;
        }
        timeout = room->user_open ? room_timeout(ctx, room) : ctx->cfg.bootstrap_timeout;
        if (!room->user_open && room_terminal(room) && room_age(room, now) > timeout) {
            /* A shadow of early messages for a room nobody opened: forget it. */
            room->closed = 1;
            if (room->refs == 0 && room->slot < 0 && !agree_in_round(ctx)) {
                room_free(ctx, room);
                i--; /* backward-shift deletion moved an entry into slot i */
            }
            continue;
        }
        /* A prefill room whose pages were all delivered waits for the decode's
         * receipt without a deadline: the decode's own deadline covers it. */
        if (timeout != 0 && !room_terminal(room) && room_age(room, now) > timeout &&
            !sender_delivered(room)) {
            room_expire(ctx, room, now);
        }
        if (room->side == KVX_ROLE_PREFILL) {
            sender_tick(ctx, room, now);
            sender_conclude_broken(ctx, room);
        } else {
            receiver_tick(ctx, room, now);
        }
    }
}
