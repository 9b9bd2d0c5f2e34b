/*
 * receiver.c - the decode side of a room: grants (PREALLOC) to the prefill
 * ranks that share heads with this rank, and completion when every writer
 * said DONE and the aux row carries this room.
 */
#include "config.h"

#include "ctx.h"
#include "util/failure.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

kvx_status_t receiver_open(kvx_ctx_t *ctx, room_t *room, const uint32_t *pages, size_t npages,
                           int64_t aux_slot)
{
    const kvl_t *pkvl = &ctx->kvls[KVX_ROLE_PREFILL][room->peer_instance];
    unsigned n = 0;

    room->sources = calloc((size_t)pkvl->tp, sizeof(source_t));
    room->pages = malloc(npages * sizeof(uint32_t));
    if (room->sources == NULL || room->pages == NULL) {
        return KVX_ERR_NO_MEMORY;
    }
    memcpy(room->pages, pages, npages * sizeof(uint32_t));
    room->npages = npages;
    room->aux_slot = aux_slot;
    /* A nonce names this incarnation of the room id, so a late message of
     * an earlier room with the same id is recognized and dropped. */
    room->nonce = ((uint64_t)(uint32_t)ctx->rank << 32) | (uint32_t)++ctx->next_nonce;
    for (int p = 0; p < pkvl->tp; p++) {
        source_t *s = &room->sources[n];
        size_t len;
        void *m;

        plan_pair(pkvl, p, &ctx->my, ctx->tp_rank, &s->pair);
        if (!s->pair.talks) {
            continue;
        }
        s->peer =
            peer_of_rank(ctx, joblayout_rank(&ctx->job, KVX_ROLE_PREFILL, room->peer_instance, p));
        room->nwriters += s->pair.writes;
        n++;
        m = msg_new_prealloc(ctx->rank, room->id, room->nonce, s->pair.aux_writer ? aux_slot : -1,
                             s->pair.writes, pages, npages, &len);
        if (m == NULL) {
            return KVX_ERR_NO_MEMORY;
        }
        peer_send(ctx, s->peer, m, len);
    }
    room->nsources = n;
    return KVX_OK;
}

/* The aux row must carry this room (id and incarnation) and fit its slot. */
static int receiver_check_aux(kvx_ctx_t *ctx, room_t *room, kvx_failure_t *f)
{
    msg_aux_header_t h;

    if (room->aux_slot < 0) {
        return 1;
    }
    memcpy(&h, (char *)ctx->pool.aux + (size_t)room->aux_slot * ctx->pool.aux_stride, sizeof(h));
    if (h.room != room->id || h.nonce != (uint32_t)room->nonce || h.len > ctx->aux_item_size) {
        failure_set_room(f, room->id, KVX_ERR_AUX, KVX_STAGE_AUX, NULL,
                         "aux slot %lld holds a row of room %llu (%u bytes), not of this room",
                         (long long)room->aux_slot, (unsigned long long)h.room, h.len);
        return 0;
    }
    return 1;
}

/* DONE may overtake the writer's data messages (unpack.c): the writer is
 * complete when both are in. */
void receiver_source_complete(kvx_ctx_t *ctx, room_t *room, source_t *s)
{
    kvx_failure_t f;

    if (!s->done || s->complete || room_terminal(room) || !unpack_source_done(ctx, room, s)) {
        return;
    }
    s->complete = 1;
    if (++room->ndone == room->nwriters) {
        if (receiver_check_aux(ctx, room, &f)) {
            room_set_state(ctx, room, KVX_ROOM_SUCCESS);
        } else {
            room_fail(ctx, room, &f, 1);
        }
    }
}

void receiver_on_msg(kvx_ctx_t *ctx, room_t *room, peer_t *peer, const msg_t *m)
{
    source_t *s = NULL;

    for (unsigned i = 0; i < room->nsources && s == NULL; i++) {
        s = room->sources[i].peer == peer ? &room->sources[i] : NULL;
    }
    if (s == NULL) {
        kvx_rwarn(room->id, "ignoring %s from %s, which is not a source of this room",
                  msg_type_name(m->hdr.type), peer->name);
        ctx->bad_msgs++;
        return;
    }
    if (room_terminal(room)) {
        return;
    }
    switch (m->hdr.type) {
    case MSG_ACCEPT:
        if (!s->accepted) {
            s->accepted = 1;
            if (++room->naccepted == room->nsources) {
                room_set_state(ctx, room, KVX_ROOM_WAITING_FOR_INPUT);
            }
        }
        break;
    case MSG_START:
        room_set_state(ctx, room, KVX_ROOM_TRANSFERRING);
        break;
    case MSG_DONE:
        if (!s->pair.writes || s->done) {
            kvx_rwarn(room->id, "ignoring an unexpected DONE from %s", peer->name);
            ctx->bad_msgs++;
            break;
        }
        s->done = 1;
        receiver_source_complete(ctx, room, s);
        break;
    default:
        break;
    }
}
