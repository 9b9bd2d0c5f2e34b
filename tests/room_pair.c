/*
 * room_pair.c - two hand-built contexts over the stand-in transport
 * (tests/room_pair.h says what they are and how a test drives them).
 */
#include "config.h"

#include "room_pair.h"

#include "core/agree/agree.h"
#include "core/ctx/pool.h"
#include "core/ctx/stats.h"
#include "core/link/peer.h"
#include "core/room/fault.h"
#include "core/room/outcome.h"
#include "core/room/protocol.h"
#include "core/room/receiver.h"
#include "core/room/room.h"
#include "core/room/room_stats.h"
#include "core/room/sender.h"
#include "core/room/unpack.h"
#include "core/setup/pool_steps.h"
#include "core/xfer/pack.h"
#include "util/ident.h"
#include "util/time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAIR_LAYOUT "prefill:1x1,decode:1x1"

static void pair_check(kvx_status_t status, const kvx_failure_t *why, const char *what)
{
    if (status != KVX_OK) {
        fprintf(stderr, "room_pair: %s: %s (%s)\n", what, kvx_status_name(status), why->text);
        abort();
    }
}

void pair_as(const kvx_ctx_t *ctx)
{
    ident_set_rank(ctx->rank);
    ident_set_role(ctx->role, ctx->instance, ctx->tp_rank, ctx->tp_size);
}

/* One rank's context, up to (not including) its peers. */
static kvx_ctx_t *pair_side_new(int rank, const char *fault)
{
    kvx_ctx_t *ctx = calloc(1, sizeof(*ctx));
    char *env[] = { NULL };
    kvx_ctx_params_t params;
    kvx_failure_t why;
    char who[32];

    memset(&why, 0, sizeof(why));
    if (ctx == NULL || hmap_init(&ctx->rooms, 64) != KVX_OK || stats_init(ctx) != KVX_OK) {
        abort();
    }
    ctx->magic = KVX_CTX_MAGIC;
    ctx->world = ctx->tp_comm = ctx->tp_comm_user = MPI_COMM_NULL;
    pthread_mutex_init(&ctx->lock, NULL);
    peer_listen(ctx, peer_fail_rooms, agree_rounds);
    room_agree_with(ctx, &agree_room_ops);
    xfer_attach(ctx, &room_xfer_ops);
    room_sides(ctx, &sender_side, &receiver_side);
    stats_add_health(ctx, peer_health);
    stats_add_health(ctx, room_health);
    pair_check(cfg_load(&ctx->cfg, env, NULL, NULL, &why), &why, "cfg_load");
    ctx->cfg.bootstrap_timeout = PAIR_BOOTSTRAP_TIMEOUT;
    ctx->cfg.waiting_timeout = PAIR_WAITING_TIMEOUT;
    ctx->cfg.transfer_timeout = PAIR_TRANSFER_TIMEOUT;
    ctx->cfg.peer_timeout = PAIR_PEER_TIMEOUT;
    ctx->cfg.keepalive_interval = PAIR_PEER_TIMEOUT / 4;
    ctx->cfg.drain_timeout = PAIR_DRAIN_TIMEOUT;
    ctx->rank = rank;
    ctx->size = 2;
    ctx->rank_cap = 2;
    pair_check(joblayout_parse(PAIR_LAYOUT, ctx->size, &ctx->job, &why), &why, "joblayout");
    joblayout_locate(&ctx->job, rank, &ctx->role, &ctx->instance, &ctx->tp_rank);
    ctx->tp_size = ctx->job.tp[ctx->role];
    pair_as(ctx);

    kvx_ctx_params_init(&params);
    params.kv.layers = 2;
    params.kv.page_size = 4;
    params.kv.kv_heads = 1;
    params.kv.head_dim = 4;
    params.kv.dtype = KVX_DTYPE_FP16;
    params.kv.attn = KVX_ATTN_MHA;
    params.kv.page_layout = KVX_PAGE_HND;
    params.num_pages = PAIR_PAGES;
    params.aux_slots = rank == 1 ? 4 : 0;
    params.aux_item_size = PAIR_AUX_SIZE;
    snprintf(who, sizeof(who), "%s[%d]", kvx_role_name(ctx->role), ctx->instance);
    pair_check(kvl_init(&ctx->my, &params.kv, ctx->tp_size, who, &why), &why, "kvl_init");
    pair_check(fault_parse(fault != NULL ? fault : "", &ctx->faults, &why), &why, "fault_parse");
    ctx->kv = params.kv;
    ctx->num_pages = params.num_pages;
    ctx->aux_item_size = params.aux_item_size;
    pair_check(pool_probe(ctx, &params, &why), &why, "pool_probe");
    pair_check(pool_init(ctx, &params, &why), &why, "pool_init");
    pair_check(pool_register(ctx, &why), &why, "pool_register");
    /* bootstrap_geometry() and bootstrap_pairs(): both instances alike. */
    for (int role = KVX_ROLE_PREFILL; role <= KVX_ROLE_DECODE; role++) {
        ctx->kvls[role] = calloc(1, sizeof(kvl_t));
        snprintf(who, sizeof(who), "%s[0]", kvx_role_name((kvx_role_t)role));
        pair_check(kvl_init(&ctx->kvls[role][0], &params.kv, 1, who, &why), &why, "kvl_init");
    }
    ctx->pair_fail = calloc(1, sizeof(kvx_failure_t));
    ctx->limits.world_size = ctx->size;
    ctx->limits.max_pages = PAIR_PAGES;
    if (ctx->kvls[KVX_ROLE_PREFILL] == NULL || ctx->kvls[KVX_ROLE_DECODE] == NULL ||
        ctx->pair_fail == NULL || !ctx_register(ctx)) {
        abort();
    }
    return ctx;
}

/* bootstrap_peers() for one peer: the other side, its pool and endpoints. */
static void pair_side_connect(pair_side_t *me, pair_side_t *other)
{
    kvx_ctx_t *ctx = me->ctx, *oc = other->ctx;
    peer_t *peer = calloc(1, sizeof(*peer));
    const pool_t *op = &oc->pool;

    ctx->peer_by_rank = calloc((size_t)ctx->size, sizeof(peer_t *));
    if (peer == NULL || ctx->peer_by_rank == NULL) {
        abort();
    }
    for (int plane = 0; plane < KUCX_PLANES; plane++) {
        me->ep[plane].to = oc;
        me->ep[plane].plane = (kucx_plane_t)plane;
    }
    peer->ctx = ctx;
    peer->rank = oc->rank;
    joblayout_locate(&ctx->job, oc->rank, &peer->role, &peer->instance, &peer->tp_rank);
    joblayout_name(&ctx->job, oc->rank, peer->name, sizeof(peer->name));
    peer->ep = (ucp_ep_h)(void *)&me->ep[KUCX_DATA];
    peer->cep = (ucp_ep_h)(void *)&me->ep[KUCX_CTRL];
    peer->kvl = &ctx->kvls[peer->role][peer->instance];
    peer->num_pages = oc->num_pages;
    peer->aux_slots = op->aux_slots;
    peer->aux_stride = op->aux_stride;
    peer->buf_addr = calloc((size_t)op->nbufs, sizeof(*peer->buf_addr));
    peer->buf_rkey = calloc((size_t)op->nbufs, sizeof(*peer->buf_rkey));
    if (peer->buf_addr == NULL || peer->buf_rkey == NULL) {
        abort();
    }
    for (int b = 0; b < op->nbufs; b++) {
        /* One process: a remote address is the other side's pointer. */
        peer->buf_addr[b] = (uint64_t)(uintptr_t)op->buf[b];
        peer->buf_rkey[b] = (ucp_rkey_h)(void *)&op->regions[op->buf_region[b]];
    }
    peer->aux_addr = (uint64_t)(uintptr_t)op->aux;
    peer->aux_rkey = (ucp_rkey_h)(void *)&op->aux_region;
    peer->last_heard = peer->last_sent = kvx_now_ns();
    peer->pid = getpid();
    peer->put_in_host = 1;
    ctx->peers = peer;
    ctx->npeers = 1;
    ctx->peer_by_rank[oc->rank] = peer;
}

void pair_init(pair_t *pr, const char *prefill_fault, const char *decode_fault)
{
    memset(pr, 0, sizeof(*pr));
    fake_reset();
    pr->P = pr->p.ctx = pair_side_new(0, prefill_fault);
    pr->D = pr->d.ctx = pair_side_new(1, decode_fault);
    pair_side_connect(&pr->p, &pr->d);
    pair_side_connect(&pr->d, &pr->p);
    ctx_open(pr->P);
    ctx_open(pr->D);
    pair_fill(pr->P);
}

void pair_use_messages(pair_t *pr)
{
    kvx_ctx_t *sides[2] = { pr->P, pr->D };
    kvx_failure_t why;

    for (int i = 0; i < 2; i++) {
        kvx_ctx_t *ctx = sides[i];

        pthread_mutex_lock(&ctx->lock);
        pair_as(ctx);
        ctx->peers[0].msg_writes = 1;
        pair_check(pack_setup(ctx, &why), &why, "pack_setup");
        pthread_mutex_unlock(&ctx->lock);
    }
}

static void pair_side_free(kvx_ctx_t *ctx)
{
    ctx_unregister(ctx);
    ctx->stopping = 1;
    for (size_t i = 0; i < ctx->rooms.capacity; i++) {
        room_t *room = ctx->rooms.slots[i].value;

        if (room != NULL) {
            room->slot = -1;
            room_free(ctx, room);
            i = (size_t)-1; /* the table moved: from the start */
        }
    }
    while (ctx->out_head != NULL) {
        outmsg_t *m = ctx->out_head;

        ctx->out_head = m->next;
        free(m->buf);
        free(m);
    }
    for (int i = 0; i < ctx->npeers; i++) {
        free(ctx->peers[i].buf_addr);
        free(ctx->peers[i].buf_rkey);
        free(ctx->peers[i].agreed);
    }
    free(ctx->peers);
    free(ctx->peer_by_rank);
    free(ctx->kvls[KVX_ROLE_PREFILL]);
    free(ctx->kvls[KVX_ROLE_DECODE]);
    free(ctx->pair_fail);
    pack_cleanup(ctx);
    pool_cleanup(ctx);
    stats_cleanup(ctx);
    room_pages_cleanup(ctx);
    fault_free(ctx->faults);
    hmap_cleanup(&ctx->rooms);
    cfg_cleanup(&ctx->cfg);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

void pair_fini(pair_t *pr)
{
    /* Operations still in flight complete (as destroying the workers
     * completes them) before their rooms go. */
    pair_complete(pr, UCS_ERR_CANCELED);
    fake_reset();
    pair_side_free(pr->P);
    pair_side_free(pr->D);
    memset(pr, 0, sizeof(*pr));
    kvx_clock_skew_ns = 0;
}

static void pair_flush_side(kvx_ctx_t *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    pair_as(ctx);
    peer_flush_outbox(ctx);
    pthread_mutex_unlock(&ctx->lock);
}

void pair_flush(pair_t *pr)
{
    pair_flush_side(pr->P);
    pair_flush_side(pr->D);
}

void pair_deliver_msg(pair_t *pr, const fake_msg_t *m)
{
    ucp_am_recv_param_t param;
    kvx_ctx_t *ctx = m->to;

    memset(&param, 0, sizeof(param)); /* eager: no UCP_AM_RECV_ATTR_FLAG_RNDV */
    pthread_mutex_lock(&ctx->lock);
    pair_as(ctx);
    if (m->hdr != NULL) {
        unpack_am_cb(ctx, m->hdr, m->hlen, m->buf, m->len, &param);
    } else {
        protocol_am_cb(ctx, NULL, 0, m->buf, m->len, &param);
    }
    /* What the progress loop runs after UCX's callbacks. */
    sender_pump_peers(ctx);
    peer_flush_outbox(ctx);
    pthread_mutex_unlock(&ctx->lock);
    pair_flush(pr);
}

int pair_deliver_one(pair_t *pr, kvx_ctx_t *to)
{
    fake_msg_t *m;
    int type;

    pair_flush(pr);
    m = fake_take(to);
    if (m == NULL) {
        return -1;
    }
    type = fake_msg_type(m);
    pair_deliver_msg(pr, m);
    fake_msg_free(m);
    return type;
}

unsigned pair_deliver(pair_t *pr)
{
    unsigned n = 0;

    while (pair_deliver_one(pr, NULL) >= 0) {
        n++;
    }
    return n;
}

unsigned pair_complete(pair_t *pr, ucs_status_t status)
{
    unsigned n;

    /* Every put and flush is the prefill's. */
    pthread_mutex_lock(&pr->P->lock);
    pair_as(pr->P);
    n = fake_complete(status);
    sender_pump_peers(pr->P);
    pthread_mutex_unlock(&pr->P->lock);
    pair_flush(pr);
    return n;
}

void pair_advance(uint64_t ns)
{
    kvx_clock_skew_ns += ns;
}

void pair_tick(pair_t *pr, kvx_ctx_t *ctx)
{
    uint64_t now = kvx_now_ns();

    pthread_mutex_lock(&ctx->lock);
    pair_as(ctx);
    agree_tick(ctx, now);
    room_tick(ctx, now);
    peer_tick(ctx, now);
    pthread_mutex_unlock(&ctx->lock);
    pair_flush(pr);
}

void pair_heard(kvx_ctx_t *ctx)
{
    uint64_t now = kvx_now_ns();

    for (int i = 0; i < ctx->npeers; i++) {
        ctx->peers[i].last_heard = ctx->peers[i].last_sent = now;
    }
}

static uint8_t pair_byte(int rank, int b, size_t page, size_t i)
{
    return (uint8_t)(1 + rank * 97 + b * 31 + page * 7 + i);
}

void pair_fill(kvx_ctx_t *ctx)
{
    for (int b = 0; b < ctx->pool.nbufs; b++) {
        for (size_t p = 0; p < ctx->num_pages; p++) {
            uint8_t *page = (uint8_t *)ctx->pool.buf[b] + p * ctx->my.page_stride;

            for (size_t i = 0; i < ctx->my.page_bytes; i++) {
                page[i] = pair_byte(ctx->rank, b, p, i);
            }
        }
    }
}

int pair_landed(const pair_t *pr, const uint32_t *src, const uint32_t *dst, size_t n)
{
    const kvx_ctx_t *P = pr->P, *D = pr->D;

    for (int b = 0; b < D->pool.nbufs; b++) {
        for (size_t k = 0; k < n; k++) {
            if (memcmp((const char *)D->pool.buf[b] + dst[k] * D->my.page_stride,
                       (const char *)P->pool.buf[b] + src[k] * P->my.page_stride,
                       D->my.page_bytes) != 0) {
                return 0;
            }
        }
    }
    return 1;
}

int pair_page_zero(const pair_t *pr, uint32_t page)
{
    const kvx_ctx_t *D = pr->D;

    for (int b = 0; b < D->pool.nbufs; b++) {
        const uint8_t *p = (const uint8_t *)D->pool.buf[b] + page * D->my.page_stride;

        for (size_t i = 0; i < D->my.page_bytes; i++) {
            if (p[i] != 0) {
                return 0;
            }
        }
    }
    return 1;
}

kvx_room_state_t pair_state(kvx_ctx_t *ctx, uint64_t id)
{
    kvx_room_state_t state = KVX_ROOM_FAILED + 1;

    pair_as(ctx);
    kvx_room_poll(ctx, id, &state);
    return state;
}

kvx_failure_t pair_failure(kvx_ctx_t *ctx, uint64_t id)
{
    kvx_failure_t f;

    memset(&f, 0, sizeof(f));
    pair_as(ctx);
    if (kvx_room_failure(ctx, id, &f) != KVX_OK) {
        memset(&f, 0, sizeof(f));
    }
    return f;
}

kvx_room_info_t pair_info(kvx_ctx_t *ctx, uint64_t id)
{
    kvx_room_info_t info;

    memset(&info, 0, sizeof(info));
    pair_as(ctx);
    kvx_room_info(ctx, id, &info);
    return info;
}

size_t pair_rooms(const kvx_ctx_t *ctx)
{
    return ctx->rooms.count;
}
