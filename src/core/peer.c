/*
 * peer.c - control messages to peers, keepalive and loss detection.
 *
 * Endpoints run without UCX error handling (see src/ucx/ucx_ep.c), so a
 * dead or silent peer is found here: every rank hears from each peer at
 * least every KVX_KEEPALIVE_INTERVAL (a PING when there is nothing else to
 * say), and a peer silent for KVX_PEER_TIMEOUT is lost; every room that
 * involves it fails with the reason.
 */
#include "config.h"

#include "ctx.h"
#include "util/failure.h"
#include "util/log.h"
#include "util/time.h"

#include <stdlib.h>

peer_t *peer_of_rank(kvx_ctx_t *ctx, int rank)
{
    if (rank < 0 || rank >= ctx->size) {
        return NULL;
    }
    return ctx->peer_by_rank[rank];
}

int peer_has_room(const kvx_ctx_t *ctx, const peer_t *peer)
{
    return peer->inflight_bytes < ctx->cfg.max_inflight_bytes &&
           peer->inflight_ops < (unsigned)ctx->cfg.max_inflight_ops;
}

void peer_send_at(kvx_ctx_t *ctx, peer_t *peer, void *buf, size_t len, uint64_t not_before)
{
    outmsg_t *m = malloc(sizeof(*m));

    if (m == NULL) {
        kvx_error("no memory to queue a %s to %s", msg_type_name(((msg_hdr_t *)buf)->type),
                  peer->name);
        free(buf);
        return;
    }
    m->next = NULL;
    m->peer = peer;
    m->buf = buf;
    m->len = len;
    m->not_before = not_before;
    if (ctx->out_tail != NULL) {
        ctx->out_tail->next = m;
    } else {
        ctx->out_head = m;
    }
    ctx->out_tail = m;
}

void peer_send(kvx_ctx_t *ctx, peer_t *peer, void *buf, size_t len)
{
    peer_send_at(ctx, peer, buf, len, 0);
}

static void peer_sent_cb(void *request, ucs_status_t status, void *user)
{
    free(user);
    kucx_request_free(request);
}

static void peer_send_now(outmsg_t *m, uint64_t now)
{
    ucs_status_t ucs;
    kvx_status_t status;

    if (m->peer->lost) {
        free(m->buf);
        return;
    }
    status = kucx_am_send(m->peer->ep, MSG_AM_ID, m->buf, m->len, peer_sent_cb, m->buf, &ucs);
    if (status == KVX_OK) {
        free(m->buf);
    } else if (status != KVX_INPROGRESS) {
        kvx_warn("sending %s to %s failed: %s", msg_type_name(((msg_hdr_t *)m->buf)->type),
                 m->peer->name, ucs_status_string(ucs));
        free(m->buf);
    }
    m->peer->last_sent = now;
}

void peer_flush_outbox(kvx_ctx_t *ctx)
{
    uint64_t now = kvx_now_ns();
    outmsg_t **link = &ctx->out_head, *last = NULL;

    /* Messages held by an injected delay stay queued until they are due. */
    while (*link != NULL) {
        outmsg_t *m = *link;

        if (m->not_before > now) {
            last = m;
            link = &m->next;
            continue;
        }
        *link = m->next;
        peer_send_now(m, now);
        free(m);
    }
    ctx->out_tail = last;
}

/* Fails every room that involves a lost peer. */
static void peer_fail_rooms(kvx_ctx_t *ctx, peer_t *peer, const char *how)
{
    for (size_t i = 0; i < ctx->rooms.capacity; i++) {
        room_t *room = ctx->rooms.slots[i].value;
        int involved = 0;
        kvx_failure_t f;

        if (room == NULL || room->state == KVX_ROOM_FAILED || room->state == KVX_ROOM_SUCCESS) {
            continue;
        }
        for (unsigned t = 0; t < room->ntargets; t++) {
            involved |= room->targets[t].peer == peer;
        }
        for (unsigned s = 0; s < room->nsources; s++) {
            involved |= room->sources[s].peer == peer;
        }
        /* A lost TP sibling means this instance can no longer finish any room. */
        involved |= peer->role == ctx->role && room->user_open;
        if (!involved) {
            continue;
        }
        failure_set_room(&f, room->id, KVX_ERR_PEER_LOST, room_stage(room), NULL,
                         "peer %s lost: %s", peer->name, how);
        room_fail(ctx, room, &f, 1);
    }
}

void peer_tick(kvx_ctx_t *ctx, uint64_t now)
{
    for (int i = 0; i < ctx->npeers; i++) {
        peer_t *peer = &ctx->peers[i];

        if (peer->lost) {
            continue;
        }
        if (!peer->bye && now - peer->last_heard > ctx->cfg.peer_timeout) {
            char how[96];

            snprintf(how, sizeof(how), "silent for %.1f s", kvx_ns_to_s(now - peer->last_heard));
            peer->lost = 1;
            /* A collective on the TP communicator would never complete now. */
            ctx->tp_broken |= peer->role == ctx->role;
            kvx_warn("peer %s lost: %s", peer->name, how);
            peer_fail_rooms(ctx, peer, how);
            continue;
        }
        if (now - peer->last_sent >= ctx->cfg.keepalive_interval) {
            size_t len;
            void *ping = msg_new(MSG_PING, ctx->rank, 0, 0, &len);

            if (ping != NULL) {
                peer_send(ctx, peer, ping, len);
            }
        }
    }
}
