/*
 * unpack.c - the receiver side of data messages (plan mode UNPACK): a
 * writer whose heads this rank interleaves with other writers' within every
 * token sends each run as one MSG_DATA active message, and this rank copies
 * the heads into its pages.
 *
 * An eager message is unpacked inside the handler. A rendezvous message is
 * received into a slot of the staging area first (when none is free it
 * waits on ctx->land_*, and UCX holds the sender's data until then), then
 * unpacked and the slot released. Nothing here keeps a room pointer across
 * a wait: the room is looked up again by id and incarnation, and data of a
 * room that failed or closed meanwhile is dropped, so pages of an aborted
 * room are never written after it failed.
 *
 * A writer is complete when its DONE arrived and every byte it owes this
 * rank was unpacked, in either order (receiver_source_complete()).
 *
 * On a staged memory path (cuda_stage.c) every data message is staged: the
 * copies out of its slot go through the copy engine, and its bytes count
 * (unpack_count()) once they completed.
 */
#include "config.h"

#include "ctx.h"
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

static void unpack_geom(const kvx_ctx_t *ctx, const source_t *s, plan_geom_t *g)
{
    plan_geom_init(g, s->peer->kvl, s->peer->num_pages, &ctx->my, ctx->num_pages, &s->pair);
}

/* Bytes of one page a writer sends this rank in data messages; 0 when it
 * does not send any (it puts). */
static size_t unpack_page_bytes(const kvx_ctx_t *ctx, const source_t *s)
{
    plan_geom_t g;

    if (!s->pair.writes) {
        return 0;
    }
    unpack_geom(ctx, s, &g);
    switch (cstage_mode(ctx, plan_mode(&g))) {
    case PLAN_UNPACK:
    case PLAN_STAGED:
        return g.pair_page_bytes;
    default:
        return 0;
    }
}

/* Bytes a writer sends this rank in data messages over the whole room. */
static uint64_t unpack_expected(const kvx_ctx_t *ctx, const room_t *room, const source_t *s)
{
    return (uint64_t)room->npages * unpack_page_bytes(ctx, s) * ctx->my.kv.layers * ctx->my.comps;
}

int unpack_source_done(kvx_ctx_t *ctx, const room_t *room, const source_t *s)
{
    return s->unpacked == unpack_expected(ctx, room, s);
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
    f.room_id = room->id;
    f.has_room = 1;
    room_fail(ctx, room, &f, 1);
}

/* The open decode room and writing source a data message is for, checked
 * against the room; NULL when it must be dropped (the room failed if the
 * message could not be of it). */
static source_t *unpack_find(kvx_ctx_t *ctx, const msg_t *m, size_t len, room_t **room_p)
{
    room_t *room = room_find(ctx, m->hdr.room);
    peer_t *peer = peer_of_rank(ctx, m->hdr.src_rank);
    const msg_data_t *d = &m->u.data;
    source_t *s = NULL;
    size_t page_bytes;

    if (room == NULL || !room->user_open || room->side != KVX_ROLE_DECODE ||
        m->hdr.nonce != room->nonce || room_terminal(room) || peer == NULL) {
        kvx_rdebug(m->hdr.room, "dropping DATA from rank %d: no such room open", m->hdr.src_rank);
        return NULL;
    }
    for (unsigned i = 0; i < room->nsources && s == NULL; i++) {
        s = room->sources[i].peer == peer ? &room->sources[i] : NULL;
    }
    page_bytes = s != NULL ? unpack_page_bytes(ctx, s) : 0;
    if (page_bytes == 0) {
        unpack_fail(ctx, room, KVX_ERR_PROTOCOL, NULL,
                    "%s sent DATA but is not a writer that this rank unpacks", peer->name);
        return NULL;
    }
    if (d->layer >= ctx->my.kv.layers || d->comp >= ctx->my.comps ||
        d->pos + (size_t)d->npages > room->npages) {
        unpack_fail(ctx, room, KVX_ERR_PROTOCOL, NULL,
                    "%s sent DATA for pages [%u, +%u) of a room of %zu pages (or a bad layer)",
                    peer->name, d->pos, d->npages, room->npages);
        return NULL;
    }
    if (len != page_bytes * d->npages || s->unpacked + len > unpack_expected(ctx, room, s)) {
        unpack_fail(ctx, room, KVX_ERR_PROTOCOL, NULL,
                    "%s sent DATA of %zu bytes for pages [%u, +%u): not what its heads hold",
                    peer->name, len, d->pos, d->npages);
        return NULL;
    }
    *room_p = room;
    return s;
}

/* Copies the writer's heads of pages [pos, pos + npages) into the pool. */
static void unpack_data(kvx_ctx_t *ctx, room_t *room, source_t *s, const msg_data_t *d,
                        const char *data, size_t len)
{
    char *pool = ctx->pool.buf[d->layer * ctx->my.comps + d->comp];
    plan_geom_t g;

    unpack_geom(ctx, s, &g);
    for (uint32_t j = 0; j < d->npages; j++) {
        /* The data holds the writer's pages back to back: page j at j * spage. */
        plan_run_t one = { j, room->pages[d->pos + j], 1 };
        plan_iter_t it;
        size_t so, doff, n;

        plan_iter_init(&it, &g, &one);
        while (plan_iter_next(&it, &so, &doff, &n)) {
            memcpy(pool + doff, data + (so - g.sbase), n);
        }
    }
    unpack_count(ctx, room, s, len);
}

void unpack_count(kvx_ctx_t *ctx, room_t *room, source_t *s, size_t len)
{
    s->unpacked += len;
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

/* Unpacks data that landed in a slot (or says why it did not land), then
 * frees the slot. */
static void unpack_landed(kvx_ctx_t *ctx, staging_slot_t *slot, ucs_status_t status)
{
    room_t *room;
    source_t *s;
    msg_t m;

    if ((s = unpack_slot_source(ctx, slot, &m, &room)) != NULL) {
        if (status == UCS_OK && ctx->cstage.on) {
            /* The slot is released when the copies out of it completed. */
            cstage_scatter(ctx, room, s, &m.u.data, slot);
            return;
        }
        if (status == UCS_OK) {
            unpack_data(ctx, room, s, &m.u.data, staging_at(&ctx->staging, slot), slot->len);
        } else {
            unpack_fail(ctx, room, kucx_status(status), ucs_status_string(status),
                        "receiving DATA from %s failed (pages [%u, +%u), %zu bytes)", s->peer->name,
                        m.u.data.pos, m.u.data.npages, slot->len);
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
        m.hdr.type != MSG_DATA) {
        ctx->bad_msgs++;
        kvx_warn("malformed data message #%llu: %s", (unsigned long long)ctx->bad_msgs,
                 m.hdr.type != MSG_DATA && m.hdr.magic == MSG_MAGIC ? "not DATA" : why);
        return UCS_OK;
    }
    peer = peer_of_rank(ctx, m.hdr.src_rank);
    if (peer != NULL) {
        peer->last_heard = kvx_now_ns();
    }
    s = unpack_find(ctx, &m, length, &room);
    if (s == NULL) {
        return UCS_OK; /* rendezvous data is dropped and its send completes */
    }
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        if (ctx->cstage.on) {
            cstage_scatter_now(ctx, room, s, &m.u.data, data, length);
        } else {
            unpack_data(ctx, room, s, &m.u.data, data, length);
        }
        return UCS_OK;
    }
    return unpack_land(ctx, header, data, length);
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
