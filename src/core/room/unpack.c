/*
 * unpack.c - the receiver side of data messages: a writer whose heads this
 * rank interleaves with other writers' within every token (plan mode
 * UNPACK), or any writer asked for messages because the endpoint has no
 * native RMA (KVX_WRITES), sends each run as MSG_DATA active messages, and
 * this rank copies the heads into its pages; such a writer sends the aux
 * row as MSG_AUX.
 *
 * An eager message is unpacked inside the handler. A rendezvous message
 * whose run lies contiguous in this rank's host pool is received straight
 * into the pages (UCX's one copy: a read of the writer's memory over CMA on
 * one host, RDMA across hosts); the room holds a reference, and its pages
 * stay DRAINING if it fails meanwhile, until UCX is done writing them or
 * the writer's process is gone from this machine (source->direct,
 * receiver_update_pages()). Any other rendezvous message is
 * received into a slot of the staging area first (when none is free it
 * waits on ctx->land_*, and UCX holds the sender's data until then), then
 * unpacked and the slot released. Nothing here keeps a room pointer across
 * a staging wait: the room is looked up again by id and incarnation, and
 * data of a room that failed or closed meanwhile is dropped, so pages of an
 * aborted room are never written after it failed.
 *
 * A writer is complete when its DONE arrived and every byte it owes this
 * rank was unpacked, in either order (receiver_source_complete()).
 *
 * On a staged memory path (xfer/cuda_stage.c) every data message is
 * staged: the copies out of its slot go through the copy engine, and its
 * bytes count (unpack_count()) once they completed (unpack_scattered(), the
 * scattered op of room_xfer_ops).
 */
#include "config.h"

#include "core/ctx/ctx.h"
#include "core/ctx/stats.h"
#include "core/link/peer.h"
#include "core/room/receiver.h"
#include "core/room/room.h"
#include "core/room/unpack.h"
#include "core/xfer/cuda_stage.h"
#include "util/failure.h"
#include "util/log.h"
#include "util/time.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Rendezvous data waiting for a slot. */
typedef struct landing {
    struct landing *next;
    void *desc;
    size_t len;
    unsigned char hdr[MSG_DATA_LEN];
} landing_t;

/* Fails the room with f, at transfer (a failure from this file or the copy
 * engine). */
static void unpack_fail_with(kvx_ctx_t *ctx, room_t *room, kvx_failure_t *f)
{
    f->stage = KVX_STAGE_TRANSFER;
    f->room_id = room->id;
    f->has_room = 1;
    room_fail(ctx, room, f, 1);
}

static void unpack_fail(kvx_ctx_t *ctx, room_t *room, kvx_status_t status, const char *foreign,
                        const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void unpack_fail(kvx_ctx_t *ctx, room_t *room, kvx_status_t status, const char *foreign,
                        const char *fmt, ...)
{
    kvx_failure_t f;
    va_list ap;

    va_start(ap, fmt);
    failure_vset(&f, status, KVX_STAGE_TRANSFER, foreign, fmt, ap);
    va_end(ap);
    unpack_fail_with(ctx, room, &f);
}

/* Where the copy engine puts a data message of s for the room. */
static void unpack_dest(const kvx_ctx_t *ctx, const room_t *room, const source_t *s,
                        const msg_data_t *d, cstage_dest_t *to)
{
    to->pages = room->pages + d->pos;
    receiver_geom(ctx, s, &to->geom);
    to->writer = s->peer->name;
}

/* Checks an aux row message of len bytes from s. */
static int unpack_check_aux(kvx_ctx_t *ctx, room_t *room, const source_t *s, size_t len)
{
    if (!receiver_owes_aux(room, s) || s->aux_in) {
        unpack_fail(ctx, room, KVX_ERR_PROTOCOL, NULL,
                    "%s sent %s aux row, but it owes this room none (aux slot %lld)", s->peer->name,
                    s->aux_in ? "a second" : "an", (long long)room->aux_slot);
        return 0;
    }
    if (len < sizeof(msg_aux_header_t) || len > ctx->pool.aux_stride) {
        unpack_fail(ctx, room, KVX_ERR_AUX, NULL,
                    "%s sent an aux row of %zu bytes; a slot holds %zu", s->peer->name, len,
                    ctx->pool.aux_stride);
        return 0;
    }
    return 1;
}

/* Checks a DATA message of len bytes from s: its pages must be a run of
 * the room's (consecutive in this rank's pool, as the writer cut them). */
static int unpack_check_data(kvx_ctx_t *ctx, room_t *room, const source_t *s, const msg_data_t *d,
                             size_t len)
{
    size_t page_bytes = receiver_msg_page_bytes(ctx, s);

    if (page_bytes == 0) {
        unpack_fail(ctx, room, KVX_ERR_PROTOCOL, NULL,
                    "%s sent DATA but is not a writer that this rank unpacks", s->peer->name);
        return 0;
    }
    if (d->layer >= ctx->my.kv.layers || d->comp >= ctx->my.comps ||
        d->pos + (size_t)d->npages > room->npages) {
        unpack_fail(ctx, room, KVX_ERR_PROTOCOL, NULL,
                    "%s sent DATA for pages [%u, +%u) of a room of %zu pages (or a bad layer)",
                    s->peer->name, d->pos, d->npages, room->npages);
        return 0;
    }
    if (len != page_bytes * d->npages || s->unpacked + len > receiver_msg_bytes(ctx, room, s)) {
        unpack_fail(ctx, room, KVX_ERR_PROTOCOL, NULL,
                    "%s sent DATA of %zu bytes for pages [%u, +%u): not what its heads hold",
                    s->peer->name, len, d->pos, d->npages);
        return 0;
    }
    for (uint32_t j = 1; j < d->npages; j++) {
        if (room->pages[d->pos + j] != room->pages[d->pos] + j) {
            unpack_fail(ctx, room, KVX_ERR_PROTOCOL, NULL,
                        "%s sent DATA for pages [%u, +%u), which are not a run of this pool",
                        s->peer->name, d->pos, d->npages);
            return 0;
        }
    }
    return 1;
}

/* The open decode room and writing source a data message (DATA or AUX) is
 * for, checked against the room; NULL when it must be dropped (the room
 * failed if the message could not be of it). */
static source_t *unpack_find(kvx_ctx_t *ctx, const msg_t *m, size_t len, room_t **room_p)
{
    room_t *room = room_find(ctx, m->hdr.room);
    peer_t *peer = peer_of_rank(ctx, m->hdr.src_rank);
    source_t *s = NULL;

    if (room == NULL || !room->user_open || room->side != KVX_ROLE_DECODE ||
        m->hdr.nonce != room->nonce || room_terminal(room) || peer == NULL) {
        kvx_rdebug(m->hdr.room, "dropping %s from rank %d: no such room open",
                   msg_type_name(m->hdr.type), m->hdr.src_rank);
        return NULL;
    }
    for (unsigned i = 0; i < room->nsources && s == NULL; i++) {
        s = room->sources[i].peer == peer ? &room->sources[i] : NULL;
    }
    if (s == NULL) {
        unpack_fail(ctx, room, KVX_ERR_PROTOCOL, NULL, "%s sent %s but is not a source of the room",
                    peer->name, msg_type_name(m->hdr.type));
        return NULL;
    }
    if (m->hdr.type == MSG_AUX ? !unpack_check_aux(ctx, room, s, len)
                               : !unpack_check_data(ctx, room, s, &m->u.data, len)) {
        return NULL;
    }
    *room_p = room;
    return s;
}

/* Copies the writer's heads of the run of pages [pos, pos + npages) into
 * the pool. The data holds the run's pieces back to back, in the order
 * plan_iter yields them (for a writer whose run is contiguous in its pool,
 * that is the run's bytes as they lie there). */
static void unpack_data(kvx_ctx_t *ctx, room_t *room, source_t *s, const msg_data_t *d,
                        const char *data, size_t len)
{
    char *pool = ctx->pool.buf[d->layer * ctx->my.comps + d->comp];
    plan_run_t run = { 0, room->pages[d->pos], d->npages };
    size_t so, doff, n, at = 0;
    plan_geom_t g;
    plan_iter_t it;

    receiver_geom(ctx, s, &g);
    plan_iter_init(&it, &g, &run);
    while (plan_iter_next(&it, &so, &doff, &n) && at + n <= len) {
        memcpy(pool + doff, data + at, n);
        at += n;
    }
    unpack_count(ctx, room, s, len);
}

void unpack_count(kvx_ctx_t *ctx, room_t *room, source_t *s, size_t len)
{
    s->unpacked += len;
    stats_xfer(ctx, KVX_XFER_MSG_RECV, len);
    receiver_source_complete(ctx, room, s);
}

source_t *unpack_slot_source(kvx_ctx_t *ctx, const staging_slot_t *slot, msg_t *m, room_t **room_p)
{
    char why[128];

    memset(m, 0, sizeof(*m));
    if (msg_decode(slot->hdr, MSG_DATA_LEN, &ctx->limits, m, why, sizeof(why)) != KVX_OK) {
        return NULL;
    }
    return unpack_find(ctx, m, slot->len, room_p);
}

/* Puts the aux row into the room's slot (receiver_check_aux() checks it). */
static void unpack_aux(kvx_ctx_t *ctx, room_t *room, source_t *s, const char *data, size_t len)
{
    memcpy((char *)ctx->pool.aux + (size_t)room->aux_slot * ctx->pool.aux_stride, data, len);
    s->aux_in = 1;
    receiver_source_complete(ctx, room, s);
}

static void unpack_deliver(kvx_ctx_t *ctx, room_t *room, source_t *s, const msg_t *m,
                           const char *data, size_t len)
{
    if (m->hdr.type == MSG_AUX) {
        unpack_aux(ctx, room, s, data, len);
    } else {
        unpack_data(ctx, room, s, &m->u.data, data, len);
    }
}

/* Unpacks data that landed in a slot (or says why it did not land), then
 * frees the slot. */
static void unpack_landed(kvx_ctx_t *ctx, staging_slot_t *slot, ucs_status_t status)
{
    room_t *room;
    source_t *s;
    msg_t m;

    if ((s = unpack_slot_source(ctx, slot, &m, &room)) != NULL) {
        if (status == UCS_OK && ctx->cstage.on && m.hdr.type == MSG_DATA) {
            cstage_dest_t to;
            kvx_failure_t f;

            /* The slot is released when the copies out of it completed
             * (aux rows stay in host memory: delivered at once). */
            unpack_dest(ctx, room, s, &m.u.data, &to);
            if (cstage_scatter(ctx, &to, &m.u.data, slot, &f) != KVX_OK) {
                unpack_fail_with(ctx, room, &f);
            }
            return;
        }
        if (status == UCS_OK) {
            unpack_deliver(ctx, room, s, &m, staging_at(&ctx->staging, slot), slot->len);
        } else {
            unpack_fail(ctx, room, kucx_status(status), ucs_status_string(status),
                        "receiving %s from %s failed (pages [%u, +%u), %zu bytes)",
                        msg_type_name(m.hdr.type), s->peer->name, m.u.data.pos, m.u.data.npages,
                        slot->len);
        }
    }
    staging_release(&ctx->staging, slot);
    ctx->pack_kick = 1;
}

static void unpack_recv_cb(void *request, ucs_status_t status, size_t length, void *user)
{
    staging_slot_t *slot = user;
    kvx_ctx_t *ctx = slot->owner;

    kucx_request_free(request);
    ctx->landing--;
    unpack_landed(ctx, slot, status);
}

/* Starts receiving rendezvous data into a slot. */
static void unpack_recv(kvx_ctx_t *ctx, staging_slot_t *slot, void *desc)
{
    ucs_status_t ucs = UCS_OK;
    kvx_status_t status;

    slot->owner = ctx;
    status = kucx_am_recv_data(&ctx->ucx, desc, staging_at(&ctx->staging, slot), slot->len,
                               ctx->staging.region.memh, unpack_recv_cb, slot, &ucs);
    if (status == KVX_INPROGRESS) {
        ctx->landing++;
    } else {
        unpack_landed(ctx, slot, ucs);
    }
}

/* A rendezvous DATA received straight into the room's pages. */
typedef struct direct {
    ctx_held_t held; /* first: freed by destroy if UCX never completes it */
    kvx_ctx_t *ctx;
    room_t *room; /* referenced until the receive completed */
    source_t *s;
    msg_data_t d;
    size_t len;
} direct_t;

static void unpack_direct_done(direct_t *dr, ucs_status_t status)
{
    kvx_ctx_t *ctx = dr->ctx;
    room_t *room = dr->room;

    dr->s->direct--;
    if (room_terminal(room) || !room->user_open) {
        /* Failed (or closed) meanwhile: these bytes count for nothing, but
         * the pages may be released now that UCX no longer writes them. */
        receiver_update_pages(ctx, room);
    } else if (status == UCS_OK) {
        stats_xfer(ctx, KVX_XFER_MSG_DIRECT, dr->len);
        unpack_count(ctx, room, dr->s, dr->len);
    } else {
        unpack_fail(ctx, room, kucx_status(status), ucs_status_string(status),
                    "receiving DATA from %s into pages [%u, +%u) failed (%zu bytes)",
                    dr->s->peer->name, dr->d.pos, dr->d.npages, dr->len);
    }
    free(dr);
    room_unref(ctx, room);
}

static void unpack_direct_cb(void *request, ucs_status_t status, size_t length, void *user)
{
    direct_t *dr = user;

    (void)length;
    kucx_request_free(request);
    dr->ctx->landing--;
    ctx_unhold(dr->ctx, &dr->held);
    unpack_direct_done(dr, status);
}

/* Where in the pool a run's data lands when it is one contiguous range
 * there (a host pool, no copy engine), or NULL. */
static char *unpack_direct_at(kvx_ctx_t *ctx, const room_t *room, const source_t *s,
                              const msg_data_t *d, size_t len, ucp_mem_h *memh_p)
{
    int b = (int)(d->layer * ctx->my.comps + d->comp);
    plan_run_t run = { 0, room->pages[d->pos], d->npages };
    size_t so, doff, n;
    plan_geom_t g;
    plan_iter_t it;

    if (ctx->cstage.on || ctx->pool.type != KVX_MEM_HOST) {
        return NULL;
    }
    receiver_geom(ctx, s, &g);
    plan_iter_init_sides(&it, &g, &run, PLAN_DST);
    if (!plan_iter_next(&it, &so, &doff, &n) || n != len) {
        return NULL;
    }
    *memh_p = ctx->pool.regions[ctx->pool.buf_region[b]].memh;
    return (char *)ctx->pool.buf[b] + doff;
}

/* Receives rendezvous DATA straight into the pages; 0 when the run is not
 * contiguous there (or no memory): the caller stages it. */
static int unpack_direct(kvx_ctx_t *ctx, room_t *room, source_t *s, const msg_t *m, void *desc,
                         size_t len)
{
    ucs_status_t ucs = UCS_OK;
    ucp_mem_h memh = NULL;
    char *at = unpack_direct_at(ctx, room, s, &m->u.data, len, &memh);
    direct_t *dr = at != NULL ? malloc(sizeof(*dr)) : NULL;

    if (dr == NULL) {
        return 0;
    }
    *dr = (direct_t){ .ctx = ctx, .room = room, .s = s, .d = m->u.data, .len = len };
    room->refs++;
    s->direct++;
    if (kucx_am_recv_data(&ctx->ucx, desc, at, len, memh, unpack_direct_cb, dr, &ucs) ==
        KVX_INPROGRESS) {
        ctx->landing++;
        ctx_hold(ctx, &dr->held);
    } else {
        unpack_direct_done(dr, ucs);
    }
    return 1;
}

/* Rendezvous data: into a slot now, or wait for one. */
static ucs_status_t unpack_land(kvx_ctx_t *ctx, const void *header, void *desc, size_t len)
{
    staging_slot_t *slot = ctx->land_head == NULL ? staging_get(&ctx->staging, len) : NULL;
    landing_t *l;

    if (slot != NULL) {
        memcpy(slot->hdr, header, MSG_DATA_LEN);
        unpack_recv(ctx, slot, desc);
        return UCS_OK;
    }
    l = malloc(sizeof(*l));
    if (l == NULL) {
        kvx_error("no memory to keep DATA of %zu bytes waiting for staging: dropped", len);
        return UCS_ERR_NO_MEMORY; /* the sender's message fails, and its room */
    }
    l->next = NULL;
    l->desc = desc;
    l->len = len;
    memcpy(l->hdr, header, MSG_DATA_LEN);
    if (ctx->land_tail != NULL) {
        ctx->land_tail->next = l;
    } else {
        ctx->land_head = l;
    }
    ctx->land_tail = l;
    return UCS_INPROGRESS;
}

ucs_status_t unpack_am_cb(void *arg, const void *header, size_t header_length, void *data,
                          size_t length, const ucp_am_recv_param_t *param)
{
    kvx_ctx_t *ctx = arg;
    char why[256];
    peer_t *peer;
    room_t *room;
    source_t *s;
    msg_t m;

    memset(&m, 0, sizeof(m));
    if (msg_decode(header, header_length, &ctx->limits, &m, why, sizeof(why)) != KVX_OK ||
        (m.hdr.type != MSG_DATA && m.hdr.type != MSG_AUX)) {
        ctx->bad_msgs++;
        kvx_warn("malformed data message #%llu: %s", (unsigned long long)ctx->bad_msgs,
                 m.hdr.magic == MSG_MAGIC && m.hdr.type != 0 ? "not DATA or AUX" : why);
        return UCS_OK;
    }
    peer = peer_of_rank(ctx, m.hdr.src_rank);
    if (peer != NULL) {
        peer->last_heard = ctx_pass_now(ctx);
    }
    s = unpack_find(ctx, &m, length, &room);
    if (s == NULL) {
        return UCS_OK; /* rendezvous data is dropped and its send completes */
    }
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        if (ctx->cstage.on && m.hdr.type == MSG_DATA) {
            cstage_dest_t to;
            kvx_failure_t f;

            unpack_dest(ctx, room, s, &m.u.data, &to);
            if (cstage_scatter_now(ctx, &to, &m.u.data, data, length, &f) == KVX_OK) {
                unpack_count(ctx, room, s, length);
            } else {
                unpack_fail_with(ctx, room, &f);
            }
        } else {
            unpack_deliver(ctx, room, s, &m, data, length);
        }
        return UCS_OK;
    }
    if (m.hdr.type == MSG_DATA && unpack_direct(ctx, room, s, &m, data, length)) {
        return UCS_OK;
    }
    if (ctx->staging.cap == 0) {
        /* Only a writer whose runs land straight is asked for messages
         * without staging here (receiver.c): no memory for its record. */
        unpack_fail(ctx, room, KVX_ERR_NO_MEMORY, NULL,
                    "cannot receive DATA from %s into pages [%u, +%u): no memory", s->peer->name,
                    m.u.data.pos, m.u.data.npages);
        return UCS_OK; /* the data is dropped and its send completes */
    }
    return unpack_land(ctx, header, data, length);
}

void unpack_scattered(kvx_ctx_t *ctx, staging_slot_t *slot)
{
    room_t *room;
    source_t *s;
    msg_hdr_t h;
    msg_t m;

    memcpy(&h, slot->hdr, sizeof(h));
    if ((s = unpack_slot_source(ctx, slot, &m, &room)) != NULL) {
        unpack_count(ctx, room, s, slot->len);
    }
    cstage_slot_free(ctx, slot);
    /* A failed room's pages may be released once no copy into them is left. */
    room = room_find(ctx, h.room);
    if (room != NULL && room->side == KVX_ROLE_DECODE && room->nonce == h.nonce &&
        room->state == KVX_ROOM_FAILED) {
        receiver_update_pages(ctx, room);
    }
}

void unpack_scatter_failed(kvx_ctx_t *ctx, staging_slot_t *slot, kvx_failure_t *f)
{
    room_t *room;
    msg_hdr_t h;

    memcpy(&h, slot->hdr, sizeof(h));
    room = room_find(ctx, h.room);
    /* A scatter's slot holds a data message a decode room received. */
    if (room != NULL && room->side == KVX_ROLE_DECODE) {
        unpack_fail_with(ctx, room, f);
        receiver_update_pages(ctx, room); /* failed before: no copy holds it now */
    }
}

unsigned unpack_progress(kvx_ctx_t *ctx)
{
    unsigned n = 0;

    while (ctx->land_head != NULL) {
        landing_t *l = ctx->land_head;
        staging_slot_t *slot = staging_get(&ctx->staging, l->len);

        if (slot == NULL) {
            break;
        }
        ctx->land_head = l->next;
        if (ctx->land_head == NULL) {
            ctx->land_tail = NULL;
        }
        memcpy(slot->hdr, l->hdr, MSG_DATA_LEN);
        unpack_recv(ctx, slot, l->desc);
        free(l);
        n++;
    }
    return n;
}

void unpack_cleanup(kvx_ctx_t *ctx)
{
    uint64_t deadline = kvx_now_ns() + KVX_NS_PER_MS * 1000;

    while (ctx->land_head != NULL) {
        landing_t *l = ctx->land_head;

        ctx->land_head = l->next;
        kucx_am_data_release(&ctx->ucx, l->desc);
        free(l);
    }
    ctx->land_tail = NULL;
    /* Data being received writes into the staging area: let it land before
     * the area goes (the progress thread is stopped). */
    while (ctx->landing > 0 && kvx_now_ns() < deadline) {
        kucx_progress(&ctx->ucx);
    }
}
