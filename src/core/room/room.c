/*
 * room.c - the room table, states, failures and deadlines.
 *
 * A room's state only rises, except that FAILED wins and sticks. The first
 * failure recorded is the room's root cause on this rank; it is sent to the
 * other side of the room so that both sides report the same cause.
 */
#include "config.h"

#include "core/ctx/ctx.h"
#include "core/ctx/stats.h"
#include "core/link/peer.h"
#include "core/room/fault.h"
#include "core/room/room.h"
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

int room_agree_pending(const kvx_ctx_t *ctx, const room_t *room)
{
    return room->user_open && !room->agreed && room->slot < 0 && ctx->tp_size > 1 &&
           !ctx->tp_broken && kvx_now_ns() - room->opened <= 2 * ctx->cfg.tp_timeout;
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
    uint64_t now;

    if (room_terminal(room) || state <= room->state) {
        return;
    }
    now = kvx_now_ns();
    kvx_rdebug(room->id, "%s -> %s", kvx_room_state_name(room->state), kvx_room_state_name(state));
    if (room->user_open && state == KVX_ROOM_SUCCESS && room->state == KVX_ROOM_TRANSFERRING) {
        stats_hist_add(&ctx->stats->c.transfer_seconds, kvx_ns_to_s(room_age(room, now)));
    }
    room->state = state;
    room->entered = now;
}

void room_send_failure(kvx_ctx_t *ctx, const room_t *room, const kvx_failure_t *f, peer_t *peer,
                       uint64_t nonce, uint64_t not_before)
{
    size_t len;
    void *m = msg_new_fail(ctx->rank, room->id, nonce, f, &len);

    if (m != NULL) {
        peer_send_at(ctx, peer, m, len, not_before);
    }
}

void room_send_fail(kvx_ctx_t *ctx, room_t *room, peer_t *peer, uint64_t nonce, uint64_t not_before)
{
    room_send_failure(ctx, room, &room->failure, peer, nonce, not_before);
}

/* Tells every peer on the other side of the room why it failed. */
static void room_notify(kvx_ctx_t *ctx, room_t *room)
{
    fault_action_t act;
    uint64_t at = 0;

    switch (fault_at(ctx, KVX_STAGE_NOTIFY, room->id, &room->fault_seen, &act)) {
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
    ctx->room_side[room->side]->notify_fail(ctx, room, at);
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
    ctx->room_side[room->side]->on_fail(ctx, room);
}

void room_agree_with(kvx_ctx_t *ctx, const room_agree_ops_t *ops)
{
    ctx->room_agree = ops;
}

void room_sides(kvx_ctx_t *ctx, const room_side_t *prefill, const room_side_t *decode)
{
    ctx->room_side[KVX_ROLE_PREFILL] = prefill;
    ctx->room_side[KVX_ROLE_DECODE] = decode;
}

void room_free(kvx_ctx_t *ctx, room_t *room)
{
    ctx->room_agree->forget(ctx, room);
    ctx->room_side[room->side]->on_free(ctx, room);
    /* A closed room may have been moved aside for a new room with its id. */
    if (hmap_get(&ctx->rooms, room->id) == room) {
        room_t *next;

        hmap_remove(&ctx->rooms, room->id);
        /* Messages kept for the id's next incarnation (a decode rank opened
         * it again before this room was closed) wait for it in an unopened
         * room's place, as if they had come now. */
        if (room->user_open && room->early != NULL && !ctx->stopping &&
            room_new(ctx, room->id, KVX_ROLE_PREFILL, -1, &next) == KVX_OK) {
            next->early = room->early;
            next->nearly = room->nearly;
            room->early = NULL;
        }
    }
    free(room->pages);
    if (room->nready < room->nhov) {
        ctx->ngated--; /* freed with hand-overs waiting for their events */
    }
    free(room->src);
    free(room->hov);
    free(room->lcount);
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
int room_answers_grants(const kvx_ctx_t *ctx, const room_t *room)
{
    return room->side == KVX_ROLE_PREFILL && room->user_open && room->ngranted < room->ntargets &&
           kvx_now_ns() - room->entered <= ctx->cfg.bootstrap_timeout;
}

/*
 * The one answer to "may this room be freed now?", asked wherever a room
 * may have become free: kvx_room_close() and the last UCX reference
 * (room_release()), every tick (room_tick()), the end of a round
 * (room_sweep()) and an open of the same id (room_api_create()). All of
 * these must hold:
 *
 * - closed: the application closed it (or room_tick() closed a shadow of
 *   early messages whose deadline passed); an open room is the
 *   application's.
 * - refs == 0: no UCX operation, staging copy or send queue references it;
 *   their callbacks use the room.
 * - slot < 0: it holds no place in the agreement vector; agree_conclude()
 *   or agree_forget() gives the place up.
 * - no round in flight (agree_in_round()): a round sampled the vector with
 *   pointers to the rooms and reads them when it ends.
 * - it answers no grant any more (room_answers_grants()): a prefill room
 *   closed before all its grants came answers each (FAIL, DRAINED) until
 *   the bootstrap deadline, so that the decode fails with its reason and
 *   gets its pages back instead of waiting for its own deadline.
 * - it takes no part in agreement any more (room_agree_pending()): closed
 *   before its instance agreed on it, it still contributes its final state
 *   to rounds so that its TP siblings conclude their copies.
 *
 * The last two are duties of the id's latest incarnation, tied to
 * user_open: room_api_create() clears user_open of a closed room when the
 * application opens the id again (the new room answers the id's grants and
 * takes its part in rounds), and a shadow never had them.
 */
int room_may_free(const kvx_ctx_t *ctx, const room_t *room)
{
    return room->closed && room->refs == 0 && room->slot < 0 && !ctx->room_agree->in_round(ctx) &&
           !room_answers_grants(ctx, room) && !room_agree_pending(ctx, room);
}

room_t *room_next(const kvx_ctx_t *ctx, size_t *pos)
{
    while (*pos < ctx->rooms.capacity) {
        room_t *room = ctx->rooms.slots[(*pos)++].value;

        if (room != NULL) {
            return room;
        }
    }
    return NULL;
}

size_t room_sweep(kvx_ctx_t *ctx)
{
    size_t freed = 0;

    for (size_t i = 0; i < ctx->rooms.capacity; i++) {
        room_t *room = ctx->rooms.slots[i].value;

        /* Freeing shifts a later entry into slot i: look at it again. */
        while (room != NULL && room_may_free(ctx, room)) {
            room_free(ctx, room);
            room = ctx->rooms.slots[i].value;
            freed++;
        }
    }
    return freed;
}

void room_free_all(kvx_ctx_t *ctx)
{
    for (size_t i = 0; i < ctx->rooms.capacity; i++) {
        /* Freeing shifts later entries into slot i: look at it again. */
        while (ctx->rooms.slots[i].value != NULL) {
            room_free(ctx, ctx->rooms.slots[i].value);
        }
    }
}

void room_release(kvx_ctx_t *ctx, room_t *room)
{
    if (room_may_free(ctx, room)) {
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
    char missing[192];

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
        waiting_for = ctx->room_side[room->side]->waiting_for(ctx, room, missing, sizeof(missing));
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

        if (room != NULL && room->closed) {
            if (room_may_free(ctx, room)) {
                room_free(ctx, room);
                i--; /* backward-shift deletion moved an entry into slot i */
            }
            continue;
        }
        if (room == NULL) {
            continue;
        }
        timeout = room->user_open ? room_timeout(ctx, room) : ctx->cfg.bootstrap_timeout;
        if (!room->user_open && room_terminal(room) && room_age(room, now) > timeout) {
            /* A shadow of early messages for a room nobody opened: forget it. */
            room->closed = 1;
            if (room_may_free(ctx, room)) {
                room_free(ctx, room);
                i--; /* backward-shift deletion moved an entry into slot i */
            }
            continue;
        }
        /* A prefill room whose pages were all delivered waits for the decode's
         * receipt without a deadline: the decode's own deadline covers it. */
        if (timeout != 0 && !room_terminal(room) && room_age(room, now) > timeout &&
            !ctx->room_side[room->side]->delivered(room)) {
            room_expire(ctx, room, now);
        }
        ctx->room_side[room->side]->on_tick(ctx, room, now);
    }
}

void room_health(kvx_ctx_t *ctx, uint64_t now, kvx_health_t *h)
{
    uint64_t oldest = 0;

    for (size_t i = 0; i < ctx->rooms.capacity; i++) {
        const room_t *room = ctx->rooms.slots[i].value;
        uint64_t age;

        if (room == NULL || !room->user_open || room->closed || room_terminal(room)) {
            continue;
        }
        age = room_age(room, now);
        if (age > ctx->cfg.health_stall) {
            h->rooms_stalled++;
            if (age > oldest) {
                oldest = age;
                h->stalled_room = room->id;
            }
        }
    }
    h->stalled_seconds = kvx_ns_to_s(oldest);
    h->reasons |= h->rooms_stalled > 0 ? KVX_HEALTH_ROOMS_STALLED : 0;
}

/* The table is made on the first grant: a prefill rank never needs it. */
static kvx_status_t room_pages_table(kvx_ctx_t *ctx)
{
    if (ctx->page_hold == NULL) {
        /* Pages, then the aux slots (an aux row is written by a peer too). */
        size_t n = ctx->num_pages + ctx->pool.aux_slots;

        ctx->page_room = calloc(n, sizeof(uint64_t));
        ctx->page_hold = calloc(n, 1);
        if (ctx->page_room == NULL || ctx->page_hold == NULL) {
            room_pages_cleanup(ctx);
            return KVX_ERR_NO_MEMORY;
        }
    }
    return KVX_OK;
}

void room_pages_cleanup(kvx_ctx_t *ctx)
{
    free(ctx->page_room);
    free(ctx->page_hold);
    ctx->page_room = NULL;
    ctx->page_hold = NULL;
}

/* Gives back the first n pages a claim marked. */
static void room_pages_unclaim(kvx_ctx_t *ctx, const uint32_t *pages, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (ctx->page_hold[pages[i]] == PAGE_CLAIMING) {
            ctx->page_hold[pages[i]] = PAGE_FREE;
        }
    }
}

/* The aux slot of a grant, after its pages: KVX_OK or why not. */
static kvx_status_t room_pages_claim_aux(kvx_ctx_t *ctx, uint64_t id, int64_t aux_slot,
                                         kvx_failure_t *why)
{
    size_t a = ctx->num_pages + (size_t)aux_slot;

    if (aux_slot < 0) {
        return KVX_OK;
    }
    if (ctx->page_hold[a] == PAGE_HELD) {
        failure_set_room(why, id, KVX_ERR_BUSY, KVX_STAGE_PREALLOC, NULL,
                         "aux slot %lld is held by room %llu, which is still open",
                         (long long)aux_slot, (unsigned long long)ctx->page_room[a]);
        return KVX_ERR_BUSY;
    }
    if (ctx->page_hold[a] == PAGE_QUARANTINED) {
        failure_set_room(why, id, KVX_ERR_QUARANTINED, KVX_STAGE_PREALLOC, NULL,
                         "aux slot %lld is quarantined: room %llu was closed while a writer "
                         "might still put into it",
                         (long long)aux_slot, (unsigned long long)ctx->page_room[a]);
        return KVX_ERR_QUARANTINED;
    }
    ctx->page_hold[a] = PAGE_HELD;
    ctx->page_room[a] = id;
    return KVX_OK;
}

kvx_status_t room_pages_claim(kvx_ctx_t *ctx, uint64_t id, const uint32_t *pages, size_t npages,
                              int64_t aux_slot, kvx_failure_t *why)
{
    kvx_status_t status = room_pages_table(ctx);

    if (status != KVX_OK) {
        failure_set_room(why, id, status, KVX_STAGE_PREALLOC, NULL, "no memory for the page table");
        return status;
    }
    for (size_t i = 0; i < npages; i++) {
        uint32_t p = pages[i];

        if (p >= ctx->num_pages) {
            failure_set_room(why, id, KVX_ERR_PAGE_RANGE, KVX_STAGE_PREALLOC, NULL,
                             "page %u (index %zu) is outside the pool of %zu pages", p, i,
                             ctx->num_pages);
            status = KVX_ERR_PAGE_RANGE;
        } else if (ctx->page_hold[p] == PAGE_CLAIMING) {
            failure_set_room(why, id, KVX_ERR_INVALID_PARAM, KVX_STAGE_PREALLOC, NULL,
                             "page %u (index %zu) appears twice (pool of %zu pages)", p, i,
                             ctx->num_pages);
            status = KVX_ERR_INVALID_PARAM;
        } else if (ctx->page_hold[p] == PAGE_HELD) {
            failure_set_room(why, id, KVX_ERR_BUSY, KVX_STAGE_PREALLOC, NULL,
                             "page %u (index %zu) is held by room %llu, which is still open", p, i,
                             (unsigned long long)ctx->page_room[p]);
            status = KVX_ERR_BUSY;
        } else if (ctx->page_hold[p] == PAGE_QUARANTINED) {
            failure_set_room(why, id, KVX_ERR_QUARANTINED, KVX_STAGE_PREALLOC, NULL,
                             "page %u (index %zu) is quarantined: room %llu was closed while a "
                             "writer might still put into it",
                             p, i, (unsigned long long)ctx->page_room[p]);
            status = KVX_ERR_QUARANTINED;
        }
        if (status != KVX_OK) {
            room_pages_unclaim(ctx, pages, i);
            return status;
        }
        ctx->page_hold[p] = PAGE_CLAIMING;
    }
    status = room_pages_claim_aux(ctx, id, aux_slot, why);
    if (status != KVX_OK) {
        room_pages_unclaim(ctx, pages, npages);
        return status;
    }
    for (size_t i = 0; i < npages; i++) {
        ctx->page_hold[pages[i]] = PAGE_HELD;
        ctx->page_room[pages[i]] = id;
    }
    return KVX_OK;
}

void room_pages_release(kvx_ctx_t *ctx, uint64_t id, const uint32_t *pages, size_t npages,
                        int64_t aux_slot, int quarantine)
{
    size_t a = ctx->num_pages + (size_t)aux_slot;

    for (size_t i = 0; ctx->page_hold != NULL && i < npages; i++) {
        uint32_t p = pages[i];

        if (p < ctx->num_pages && ctx->page_hold[p] == PAGE_HELD && ctx->page_room[p] == id) {
            ctx->page_hold[p] = quarantine ? PAGE_QUARANTINED : PAGE_FREE;
        }
    }
    if (ctx->page_hold != NULL && aux_slot >= 0 && (uint64_t)aux_slot < ctx->pool.aux_slots &&
        ctx->page_hold[a] == PAGE_HELD && ctx->page_room[a] == id) {
        ctx->page_hold[a] = quarantine ? PAGE_QUARANTINED : PAGE_FREE;
    }
}
