/*
 * room_api.c - the public room calls: check the handle and the arguments,
 * then hand over to the sender or receiver side under the context lock.
 */
#include "config.h"

#include "core/ctx/ctx.h"
#include "core/ctx/stats.h"
#include "core/link/peer.h"
#include "core/link/progress.h"
#include "core/room/fault.h"
#include "core/room/outcome.h"
#include "core/room/protocol.h"
#include "core/room/receiver.h"
#include "core/room/room.h"
#include "core/room/sender.h"
#include "core/room/room_stats.h"
#include "util/failure.h"
#include "util/log.h"
#include "util/time.h"

#include <stdlib.h>
#include <string.h>

/* Logs why a call was refused (the detecting function logs, once), and
 * keeps the reason for kvx_last_error(). */
static kvx_status_t room_api_refuse(uint64_t id, const kvx_failure_t *why)
{
    kvx_rwarn(id, "refused: %s%s%s", why->text, why->foreign[0] ? ": " : "", why->foreign);
    failure_set_last(why);
    return why->status;
}

/* A refusal of a query or of an unknown handle: the reason is kept for
 * kvx_last_error() and logged at debug level only (an engine may ask about
 * rooms it closed). */
static kvx_status_t room_api_no(uint64_t id, kvx_status_t status, const char *what)
{
    if (status == KVX_ERR_INVALID_HANDLE) {
        failure_set_last_text(status, id, 1, "%s: the context handle is invalid or destroyed",
                              what);
    } else if (status == KVX_ERR_NO_ROOM) {
        failure_set_last_text(status, id, 1, "%s: no room %llu is open on this rank", what,
                              (unsigned long long)id);
    } else {
        failure_set_last_text(status, id, 1, "%s: %s", what, kvx_status_string(status));
    }
    kvx_rdebug(id, "%s: %s", what, kvx_status_name(status));
    return status;
}

/* Leaves the context; with kick, after a call that queued work for the
 * progress thread: under KVX_PROGRESS=caller the call makes the thread's
 * pass itself (messages leave and puts start now), else it wakes the thread. */
static void room_api_leave(kvx_ctx_t *ctx, int kick)
{
    int driven = kick && progress_drive(ctx, 1);

    ctx_leave(ctx);
    if (kick && !driven) {
        progress_wake(ctx);
    }
}

static kvx_status_t room_api_check_open(kvx_ctx_t *ctx, uint64_t id, kvx_role_t side, int other,
                                        kvx_failure_t *why)
{
    room_t *room = room_find(ctx, id);

    if (ctx->stopping) {
        failure_set_room(why, id, KVX_ERR_SHUTDOWN, KVX_STAGE_SHUTDOWN, NULL,
                         "the context is being destroyed");
        return KVX_ERR_SHUTDOWN;
    }
    if (ctx->role != side) {
        failure_set_room(why, id, KVX_ERR_INVALID_PARAM, KVX_STAGE_BOOTSTRAP, NULL,
                         "a %s rank cannot open a %s room", kvx_role_name(ctx->role),
                         side == KVX_ROLE_PREFILL ? "send" : "receive");
        return KVX_ERR_INVALID_PARAM;
    }
    if (other < 0 || other >= ctx->job.count[ctx_other_role(ctx)]) {
        failure_set_room(why, id, KVX_ERR_INVALID_PARAM, KVX_STAGE_BOOTSTRAP, NULL,
                         "there is no %s instance %d (the job has %d)",
                         kvx_role_name(ctx_other_role(ctx)), other,
                         ctx->job.count[ctx_other_role(ctx)]);
        return KVX_ERR_INVALID_PARAM;
    }
    if (room != NULL && room->user_open) {
        failure_set_room(why, id, KVX_ERR_ROOM_EXISTS, KVX_STAGE_BOOTSTRAP, NULL,
                         "room id is still open (%s); close it before reusing the id",
                         kvx_room_state_name(room->state));
        return KVX_ERR_ROOM_EXISTS;
    }
    if (ctx->pair_fail[other].status != KVX_OK) {
        *why = ctx->pair_fail[other];
        why->room_id = id;
        why->has_room = 1;
        return why->status;
    }
    return KVX_OK;
}

/* The grant's pages are held for the room from here (room_pages_claim()). */
static kvx_status_t room_api_check_pages(kvx_ctx_t *ctx, uint64_t id, const uint32_t *pages,
                                         size_t npages, int64_t aux_slot, kvx_failure_t *why)
{
    if (pages == NULL || npages == 0 || npages > ctx->num_pages) {
        failure_set_room(why, id, KVX_ERR_INVALID_PARAM, KVX_STAGE_PREALLOC, NULL,
                         "%zu pages%s: a room needs 1 to %zu pages", npages,
                         pages == NULL ? " (NULL)" : "", ctx->num_pages);
        return KVX_ERR_INVALID_PARAM;
    }
    if (aux_slot < -1 || (aux_slot >= 0 && (uint64_t)aux_slot >= ctx->pool.aux_slots)) {
        failure_set_room(why, id, KVX_ERR_INVALID_PARAM, KVX_STAGE_PREALLOC, NULL,
                         "aux slot %lld is not one of the %zu aux slots (or -1 for none)",
                         (long long)aux_slot, ctx->pool.aux_slots);
        return KVX_ERR_INVALID_PARAM;
    }
    return room_pages_claim(ctx, id, pages, npages, aux_slot, why);
}

/* A room can hold no more pages than the decode instance's pool, whose
 * grant lists distinct pages: a larger one could never be granted (and its
 * page list is allocated at open). */
static kvx_status_t room_api_check_total(kvx_ctx_t *ctx, uint64_t id, int decode_instance,
                                         size_t npages_total, kvx_failure_t *why)
{
    size_t pool = 0;

    for (int d = 0; d < ctx->job.tp[KVX_ROLE_DECODE] && pool == 0; d++) {
        const peer_t *peer =
            peer_of_rank(ctx, joblayout_rank(&ctx->job, KVX_ROLE_DECODE, decode_instance, d));

        pool = peer != NULL ? peer->num_pages : 0;
    }
    if (npages_total == 0 || npages_total > (pool != 0 ? pool : ctx->limits.max_pages)) {
        failure_set_room(why, id, KVX_ERR_INVALID_PARAM, KVX_STAGE_BOOTSTRAP, NULL,
                         "npages_total=%zu: a room sends 1 to %zu pages (the pool of decode[%d])",
                         npages_total, pool != 0 ? pool : ctx->limits.max_pages, decode_instance);
        return KVX_ERR_INVALID_PARAM;
    }
    return KVX_OK;
}

/* Opens the application's room over a shadow of early messages, if any,
 * and replays them. A closed prefill room of the id that still answers
 * grants is moved aside and given back in *owing (NULL: none): the caller
 * hands its debts to the new room once that has its targets
 * (sender_take_prior()), then lets it go (room_api_let_go()). */
static kvx_status_t room_api_create(kvx_ctx_t *ctx, uint64_t id, kvx_role_t side, int other,
                                    room_t **room_p, room_t **owing)
{
    room_t *room = hmap_get(&ctx->rooms, id);
    early_t *next = NULL;
    unsigned nnext = 0;
    kvx_status_t status;

    *owing = NULL;
    if (room != NULL && room->closed) {
        int owes = side == KVX_ROLE_PREFILL && room_answers_grants(ctx, room);

        /* Messages the closed room kept for this incarnation are the new
         * room's, and so are its duties: from now on the new room answers
         * the id's grants and takes its part in rounds (room_may_free()).
         * A grant the closed room still waits for is the closed room's,
         * though: the new room answers it with the closed room's record. */
        next = room->early;
        nnext = room->nearly;
        room->early = NULL;
        room->nearly = 0;
        room->user_open = 0;
        if (!owes && room_may_free(ctx, room)) {
            room_free(ctx, room);
        } else {
            /* A closed room still referenced by UCX (or by the agreement
             * vector, or a round in flight), or owing answers, keeps its
             * memory; its id moves aside so the new room can have it, and
             * room_unref() (or room_api_let_go(), for one that owes) frees
             * it. Only rooms in the table are looked at again: one kept by
             * a slot or a round alone, with no UCX reference, is never
             * freed, not even by destroy (a leak, left as it was). */
            hmap_remove(&ctx->rooms, id);
            sender_bury(ctx, room);
            *owing = owes ? room : NULL;
        }
        room = NULL;
    }
    if (room == NULL) {
        status = room_new(ctx, id, side, other, &room);
        if (status != KVX_OK) {
            while (next != NULL) {
                early_t *e = next;

                next = e->next;
                free(e->buf);
                free(e);
            }
            return status;
        }
        room->early = next;
        room->nearly = nnext;
    }
    room->side = side;
    room->peer_instance = other;
    room->user_open = 1;
    *room_p = room;
    return KVX_OK;
}

/* The closed room room_api_create() moved aside for its debts: freed now if
 * nothing else holds it (room_may_free(); room_free() leaves the id's new
 * room in the table), else by room_unref() as any room moved aside. */
static void room_api_let_go(kvx_ctx_t *ctx, room_t *owing)
{
    if (owing != NULL && room_may_free(ctx, owing)) {
        room_free(ctx, owing);
    }
}

static void room_api_replay(kvx_ctx_t *ctx, room_t *room)
{
    early_t *e = room->early;

    room->early = NULL;
    while (e != NULL) {
        early_t *next = e->next;
        char why[128];
        msg_t m;

        if (msg_decode(e->buf, e->len, &ctx->limits, &m, why, sizeof(why)) == KVX_OK) {
            protocol_dispatch(ctx, peer_of_rank(ctx, m.hdr.src_rank), &m, e->buf, e->len);
        }
        free(e->buf);
        free(e);
        e = next;
    }
}

/* Right after open: a peer of the room already lost, or shutting down while
 * the room still waits for it (peer_fail_if_gone()), fails it now (not at
 * its bootstrap deadline), and so does an injected bootstrap fault. */
static void room_api_opened(kvx_ctx_t *ctx, room_t *room)
{
    fault_action_t act;

    stats_room_opened(ctx, room);
    for (unsigned t = 0; t < room->ntargets; t++) {
        peer_fail_if_lost(ctx, room, room->targets[t].peer);
        peer_fail_if_gone(ctx, room, room->targets[t].peer);
    }
    for (unsigned s = 0; s < room->nsources; s++) {
        peer_fail_if_lost(ctx, room, room->sources[s].peer);
        peer_fail_if_gone(ctx, room, room->sources[s].peer);
    }
    if (!room_terminal(room) &&
        fault_at(ctx, KVX_STAGE_BOOTSTRAP, room->id, &room->fault_seen, &act) == FAULT_FAIL) {
        room_fail(ctx, room, &act.failure, 1);
    }
    peer_break_if_broken(ctx, room);
}

kvx_status_t kvx_room_recv_open(kvx_ctx_t *ctx, uint64_t id, int prefill_instance,
                                const uint32_t *pages, size_t npages, int64_t aux_slot)
{
    kvx_status_t status = ctx_enter(ctx);
    kvx_failure_t why;
    room_t *room, *owing = NULL;

    if (status != KVX_OK) {
        return room_api_no(id, status, "kvx_room_recv_open");
    }
    status = room_api_check_open(ctx, id, KVX_ROLE_DECODE, prefill_instance, &why);
    if (status == KVX_OK) {
        status = room_api_check_pages(ctx, id, pages, npages, aux_slot, &why);
    }
    if (status == KVX_OK) {
        status = room_api_create(ctx, id, KVX_ROLE_DECODE, prefill_instance, &room, &owing);
        if (status == KVX_OK &&
            (status = receiver_open(ctx, room, pages, npages, aux_slot)) != KVX_OK) {
            room_free(ctx, room);
        } else if (status == KVX_OK) {
            room_api_opened(ctx, room);
        }
        room_api_let_go(ctx, owing);
        if (status != KVX_OK) {
            room_pages_release(ctx, id, pages, npages, aux_slot, 0);
            failure_set_room(&why, id, status, KVX_STAGE_PREALLOC, NULL, "cannot open the room");
        }
    }
    room_api_leave(ctx, status == KVX_OK);
    if (status != KVX_OK) {
        return room_api_refuse(id, &why);
    }
    return KVX_OK;
}

kvx_status_t kvx_room_send_open(kvx_ctx_t *ctx, uint64_t id, int decode_instance,
                                size_t npages_total)
{
    kvx_status_t status = ctx_enter(ctx);
    kvx_failure_t why;
    room_t *room, *owing = NULL;

    if (status != KVX_OK) {
        return room_api_no(id, status, "kvx_room_send_open");
    }
    status = room_api_check_open(ctx, id, KVX_ROLE_PREFILL, decode_instance, &why);
    if (status == KVX_OK) {
        status = room_api_check_total(ctx, id, decode_instance, npages_total, &why);
    }
    if (status == KVX_OK) {
        status = room_api_create(ctx, id, KVX_ROLE_PREFILL, decode_instance, &room, &owing);
        if (status == KVX_OK && (status = sender_open(ctx, room, npages_total)) != KVX_OK) {
            room_free(ctx, room);
        }
        if (status != KVX_OK) {
            failure_set_room(&why, id, status, KVX_STAGE_BOOTSTRAP, NULL, "cannot open the room");
        } else {
            if (owing != NULL) {
                sender_take_prior(ctx, room, owing);
            }
            room_api_replay(ctx, room);
            room_api_opened(ctx, room);
        }
        room_api_let_go(ctx, owing);
    }
    room_api_leave(ctx, status == KVX_OK);
    if (status != KVX_OK) {
        return room_api_refuse(id, &why);
    }
    return KVX_OK;
}

/* kvx_room_send_chunk() and kvx_room_send_layers(): what (the caller's
 * name) in the reason; nlayers 0 means every layer. */
static kvx_status_t room_api_send(kvx_ctx_t *ctx, uint64_t id, const uint32_t *pages, size_t npages,
                                  unsigned first_layer, unsigned nlayers, int all_layers,
                                  void *ready, const void *aux, size_t aux_len, const char *what)
{
    kvx_status_t status = ctx_enter(ctx);
    kvx_failure_t why;
    room_t *room;

    if (status != KVX_OK) {
        return room_api_no(id, status, what);
    }
    room = room_find(ctx, id);
    if (room == NULL || !room->user_open) {
        status = KVX_ERR_NO_ROOM;
    } else if (room->side != KVX_ROLE_PREFILL) {
        failure_set_room(&why, id, KVX_ERR_INVALID_PARAM, KVX_STAGE_POST, NULL,
                         "%s on a receiving room", what + strlen("kvx_room_"));
        status = KVX_ERR_INVALID_PARAM;
    } else if (pages == NULL || npages == 0) {
        failure_set_room(&why, id, KVX_ERR_INVALID_PARAM, KVX_STAGE_POST, NULL,
                         "a chunk needs at least one page");
        status = KVX_ERR_INVALID_PARAM;
    } else {
        if (all_layers) {
            first_layer = 0;
            nlayers = ctx->my.kv.layers;
        }
        status = sender_layers(ctx, room, pages, npages, first_layer, nlayers, ready, aux, aux_len,
                               &why);
    }
    room_api_leave(ctx, status == KVX_OK);
    if (status == KVX_ERR_NO_ROOM) {
        return room_api_no(id, status, what);
    }
    if (status != KVX_OK) {
        return room_api_refuse(id, &why);
    }
    return KVX_OK;
}

kvx_status_t kvx_room_send_chunk(kvx_ctx_t *ctx, uint64_t id, const uint32_t *pages, size_t npages,
                                 const void *aux, size_t aux_len)
{
    return room_api_send(ctx, id, pages, npages, 0, 0, 1, NULL, aux, aux_len,
                         "kvx_room_send_chunk");
}

kvx_status_t kvx_room_send_layers(kvx_ctx_t *ctx, uint64_t id, const uint32_t *pages, size_t npages,
                                  unsigned first_layer, unsigned nlayers, void *ready_event,
                                  const void *aux, size_t aux_len)
{
    return room_api_send(ctx, id, pages, npages, first_layer, nlayers, 0, ready_event, aux, aux_len,
                         "kvx_room_send_layers");
}

/* Finds an open room for a query; KVX_ERR_NO_ROOM when there is none. With
 * drive (a poll), the caller first progresses the workers (progress_drive())
 * unless a pass ran since it last polled the room: an application that
 * polls its rooms in turn makes one pass per round, not one per room, and
 * every room still sees a pass between two of its polls. */
static kvx_status_t room_api_get(kvx_ctx_t *ctx, uint64_t id, room_t **room_p, const char *what,
                                 int drive)
{
    kvx_status_t status = ctx_enter(ctx);

    if (status != KVX_OK) {
        return room_api_no(id, status, what);
    }
    *room_p = room_find(ctx, id);
    if (drive) {
        if ((*room_p == NULL || (*room_p)->polled == ctx->passes) && progress_drive(ctx, 0)) {
            *room_p = room_find(ctx, id);
        }
        if (*room_p != NULL) {
            (*room_p)->polled = ctx->passes;
        }
    }
    if (*room_p == NULL || !(*room_p)->user_open) {
        ctx_leave(ctx);
        return room_api_no(id, KVX_ERR_NO_ROOM, what);
    }
    return KVX_OK;
}

kvx_status_t kvx_room_poll(kvx_ctx_t *ctx, uint64_t id, kvx_room_state_t *state_p)
{
    room_t *room;
    kvx_status_t status = room_api_get(ctx, id, &room, "kvx_room_poll", 1);

    if (status != KVX_OK) {
        return status;
    }
    if (state_p != NULL) {
        *state_p = room->state;
    }
    ctx_leave(ctx);
    return state_p != NULL ? KVX_OK : room_api_no(id, KVX_ERR_INVALID_PARAM, "kvx_room_poll");
}

kvx_status_t kvx_room_failure(kvx_ctx_t *ctx, uint64_t id, kvx_failure_t *failure_p)
{
    room_t *room;
    kvx_status_t status = room_api_get(ctx, id, &room, "kvx_room_failure", 0);

    if (status != KVX_OK) {
        return status;
    }
    /* An agreed outcome decides: a prefill rank that failed after it
     * delivered every page may have concluded SUCCESS with the decode. */
    if ((room->agreed ? room->agreed_state : room->state) != KVX_ROOM_FAILED) {
        status = KVX_ERR_STATE;
    } else if (failure_p == NULL) {
        status = KVX_ERR_INVALID_PARAM;
    } else {
        *failure_p = room->failure;
    }
    ctx_leave(ctx);
    if (status == KVX_ERR_STATE) {
        failure_set_last_text(status, id, 1, "kvx_room_failure: room %llu has not failed",
                              (unsigned long long)id);
    } else if (status != KVX_OK) {
        room_api_no(id, status, "kvx_room_failure");
    }
    return status;
}

kvx_status_t kvx_room_abort(kvx_ctx_t *ctx, uint64_t id, const char *reason)
{
    room_t *room;
    kvx_status_t status = room_api_get(ctx, id, &room, "kvx_room_abort", 0);
    kvx_failure_t f;

    if (status != KVX_OK) {
        return status;
    }
    if (room->state == KVX_ROOM_SUCCESS) {
        failure_set_room(&f, id, KVX_ERR_STATE, KVX_STAGE_ABORT, NULL,
                         "abort refused: the room is SUCCESS on this rank");
        status = room_api_refuse(id, &f);
    } else if (sender_delivered(room) && room->state != KVX_ROOM_FAILED) {
        /* The decode has every page: it decides, and may already have. */
        failure_set_room(&f, id, KVX_ERR_STATE, KVX_STAGE_ABORT, NULL,
                         "abort refused: every page was delivered; the decode decides the outcome");
        status = room_api_refuse(id, &f);
    } else if (room->state != KVX_ROOM_FAILED) {
        failure_set_room(&f, id, KVX_ERR_ABORTED, KVX_STAGE_ABORT, NULL, "aborted by the %s: %s",
                         room->side == KVX_ROLE_PREFILL ? "prefill" : "decode",
                         reason != NULL ? reason : "no reason given");
        room_fail(ctx, room, &f, 1);
    }
    room_api_leave(ctx, 1);
    return status;
}

kvx_status_t kvx_room_aux(kvx_ctx_t *ctx, uint64_t id, void *buf, size_t len, size_t *len_p)
{
    room_t *room;
    kvx_status_t status = room_api_get(ctx, id, &room, "kvx_room_aux", 0);
    msg_aux_header_t h;
    const char *row;

    if (status != KVX_OK) {
        return status;
    }
    if (room->side != KVX_ROLE_DECODE || room->state != KVX_ROOM_SUCCESS) {
        status = KVX_ERR_STATE;
        failure_set_last_text(status, id, 1, "kvx_room_aux: room %llu is a %s room in state %s",
                              (unsigned long long)id,
                              room->side == KVX_ROLE_DECODE ? "receiving" : "sending",
                              kvx_room_state_name(room->state));
    } else if (room->aux_slot < 0) {
        status = KVX_ERR_AUX;
        failure_set_last_text(status, id, 1,
                              "kvx_room_aux: room %llu was opened without an aux slot",
                              (unsigned long long)id);
    } else {
        row = (const char *)ctx->pool.aux + (size_t)room->aux_slot * ctx->pool.aux_stride;
        memcpy(&h, row, sizeof(h));
        /* The slot is written by a peer: its length is checked, not trusted. */
        if (h.len > ctx->aux_item_size || h.len > len || (h.len > 0 && buf == NULL)) {
            status = KVX_ERR_AUX;
            failure_set_last_text(status, id, 1,
                                  "kvx_room_aux: the aux of room %llu is %u bytes; the buffer "
                                  "holds %zu%s",
                                  (unsigned long long)id, h.len, len, buf == NULL ? " (NULL)" : "");
        } else {
            memcpy(buf, row + sizeof(h), h.len);
        }
        if (len_p != NULL) {
            *len_p = h.len;
        }
    }
    ctx_leave(ctx);
    return status;
}

kvx_status_t kvx_room_info(kvx_ctx_t *ctx, uint64_t id, kvx_room_info_t *info)
{
    room_t *room;
    kvx_status_t status = room_api_get(ctx, id, &room, "kvx_room_info", 0);

    if (status != KVX_OK) {
        return status;
    }
    if (info == NULL) {
        ctx_leave(ctx);
        return room_api_no(id, KVX_ERR_INVALID_PARAM, "kvx_room_info");
    }
    memset(info, 0, sizeof(*info));
    info->state = room->state;
    info->side = room->side;
    info->peer_instance = room->peer_instance;
    info->npages = room->side == KVX_ROLE_PREFILL ? room->npages_total : room->npages;
    info->pages_sent = room->side == KVX_ROLE_PREFILL ? sender_pages_sent(ctx, room) : 0;
    info->puts = room->puts;
    info->bytes = room->bytes;
    info->writers = room->nwriters;
    info->writers_done = room->ndone;
    info->targets = room->ntargets;
    info->pages = room->pages_state;
    info->agreed = room->agreed;
    info->agreed_state = room->agreed ? room->agreed_state : room->state;
    ctx_leave(ctx);
    return KVX_OK;
}

kvx_status_t kvx_room_close(kvx_ctx_t *ctx, uint64_t id)
{
    room_t *room;
    kvx_status_t status = room_api_get(ctx, id, &room, "kvx_room_close", 0);
    kvx_failure_t f;

    if (status != KVX_OK) {
        return status;
    }
    if (!room_terminal(room)) {
        failure_set_room(&f, id, KVX_ERR_ABORTED, KVX_STAGE_ABORT, NULL,
                         "closed by the application while %s", kvx_room_state_name(room->state));
        room_fail(ctx, room, &f, 1);
    }
    if (room->side == KVX_ROLE_DECODE && room->pages_state == KVX_PAGES_DRAINING) {
        /* A writer may still put into the pages: the caller keeps them. */
        room_api_leave(ctx, 1);
        failure_set_last_text(KVX_ERR_BUSY, id, 1,
                              "kvx_room_close: room %llu failed and a writer has not yet "
                              "confirmed it stopped writing into its pages: call again",
                              (unsigned long long)id);
        return KVX_ERR_BUSY;
    }
    if (room->side == KVX_ROLE_DECODE && room->pages_state == KVX_PAGES_QUARANTINED) {
        status = KVX_ERR_QUARANTINED;
        failure_set_last_text(status, id, 1,
                              "kvx_room_close: a writer of room %llu never confirmed it stopped: "
                              "its pages are quarantined, never reuse them",
                              (unsigned long long)id);
    }
    if (room->side == KVX_ROLE_PREFILL && room->state == KVX_ROOM_FAILED && room->refs > 0 &&
        !sender_sources_safe(room)) {
        /* Puts or data messages of the failed room may still read its
         * source pages: the caller keeps them until UCX is done with them,
         * at most KVX_DRAIN_TIMEOUT after the failure (then they are
         * quarantined: never reuse them) -- unless every such operation
         * goes to a peer whose process is gone from this machine. */
        if (room_age(room, kvx_now_ns()) <= ctx->cfg.drain_timeout) {
            room_api_leave(ctx, 1);
            failure_set_last_text(KVX_ERR_BUSY, id, 1,
                                  "kvx_room_close: UCX may still read the source pages of room "
                                  "%llu: call again",
                                  (unsigned long long)id);
            return KVX_ERR_BUSY;
        }
        kvx_rwarn(id,
                  "closed while UCX may still read its source pages (%u operations): "
                  "do not reuse them",
                  room->refs);
        status = KVX_ERR_QUARANTINED;
        failure_set_last_text(status, id, 1,
                              "kvx_room_close: closed room %llu while UCX may still read its "
                              "source pages: never reuse them",
                              (unsigned long long)id);
    }
    if (room->side == KVX_ROLE_DECODE) {
        /* The pages are the caller's again, or never again when quarantined. */
        room_pages_release(ctx, id, room->pages, room->npages, room->aux_slot,
                           status == KVX_ERR_QUARANTINED);
    }
    stats_room_closed(ctx, room, status);
    room->closed = 1;
    room_release(ctx, room);
    room_api_leave(ctx, 1);
    return status;
}
