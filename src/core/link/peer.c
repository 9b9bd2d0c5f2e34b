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

#include "core/ctx/ctx.h"
#include "core/ctx/stats.h"
#include "core/link/peer.h"
#include "util/failure.h"
#include "util/log.h"
#include "util/time.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

peer_t *peer_of_rank(kvx_ctx_t *ctx, int rank)
{
    if (rank < 0 || rank >= ctx->rank_cap) {
        return NULL;
    }
    return ctx->peer_by_rank[rank];
}

void peer_listen(kvx_ctx_t *ctx, void (*lost)(kvx_ctx_t *ctx, peer_t *peer, const char *how),
                 uint64_t (*rounds)(const kvx_ctx_t *ctx))
{
    ctx->on_peer_lost = lost;
    ctx->ping_rounds = rounds;
}

void peer_on_ping(peer_t *peer, uint64_t rounds)
{
    if (peer->rounds_changed == 0 || peer->rounds != rounds) {
        peer->rounds = rounds;
        peer->rounds_changed = kvx_now_ns();
    }
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

    if (m->peer->lost || m->peer->ep_failed) {
        free(m->buf);
        return;
    }
    kvx_trace("send %s room %llu to %s", msg_type_name(((msg_hdr_t *)m->buf)->type),
              (unsigned long long)((msg_hdr_t *)m->buf)->room, m->peer->name);
    status = kucx_am_send(m->peer->cep, MSG_AM_ID, m->buf, m->len, peer_sent_cb, m->buf, &ucs);
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
    uint64_t now = ctx_pass_now(ctx);
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

/* Is the process of a peer on this machine gone (exited, or a zombie)? */
static int peer_process_gone(const peer_t *peer)
{
    char path[64], stat[256];
    FILE *f;
    const char *state;

    if (kill(peer->pid, 0) != 0 && errno == ESRCH) {
        return 1;
    }
    snprintf(path, sizeof(path), "/proc/%d/stat", peer->pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return 1;
    }
    if (fgets(stat, sizeof(stat), f) == NULL) {
        stat[0] = '\0';
    }
    fclose(f);
    state = strrchr(stat, ')');
    return state != NULL && (state[2] == 'Z' || state[2] == 'X');
}

int peer_dead_here(const peer_t *peer)
{
    return peer->same_machine && peer_process_gone(peer);
}

/* Why a silent peer counts as lost, or NULL while it does not. A peer whose
 * pid this rank can see (same_machine) and whose process is gone is lost
 * after 3 keepalive intervals. A peer on this host whose process is still
 * there is only slow (an overloaded machine stalls every rank for a second at
 * times) and is lost when silent 10 times KVX_PEER_TIMEOUT (hung). A remote
 * peer is lost when silent KVX_PEER_TIMEOUT: so is one on this machine in
 * another network namespace, since a live process says nothing about the
 * network between it and this rank, which can fail silently (a cut link, a
 * firewall), as between hosts. */
static const char *peer_lost_how(const kvx_ctx_t *ctx, const peer_t *peer, uint64_t silent,
                                 char *how, size_t len)
{
    if (peer->same_machine && silent > 3 * ctx->cfg.keepalive_interval && peer_process_gone(peer)) {
        snprintf(how, len, "its process %d on this machine is gone (silent for %.2f s)", peer->pid,
                 kvx_ns_to_s(silent));
        return how;
    }
    if (silent > ctx->cfg.peer_timeout * (peer->same_host ? 10 : 1)) {
        snprintf(how, len, "silent for %.2f s", kvx_ns_to_s(silent));
        return how;
    }
    return NULL;
}

void peer_mark_lost(kvx_ctx_t *ctx, peer_t *peer, const char *how)
{
    if (peer->lost) {
        return;
    }
    peer->lost = 1;
    ctx->peers_changed++;
    snprintf(peer->lost_how, sizeof(peer->lost_how), "%s", how);
    ctx->stats->c.peers_lost += !peer->bye; /* a goodbye is no loss */
    /* A collective on the TP communicator would never complete now (read
     * by API threads without the lock, in kvx_agree_test). */
    if (peer->role == ctx->role) {
        __atomic_store_n(&ctx->tp_broken, 1, __ATOMIC_RELAXED);
    }
    if (peer->bye) {
        /* It said goodbye and closed its endpoints: over TCP, UCX reports
         * that as an error of ours. Not news; its rooms still fail. */
        kvx_info("peer %s gone after its goodbye: %s", peer->name, how);
    } else {
        kvx_warn("peer %s lost: %s", peer->name, how);
    }
    if (ctx->on_peer_lost != NULL) {
        ctx->on_peer_lost(ctx, peer, how);
    }
}

void peer_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    peer_t *peer = arg;
    char how[128];

    /* Runs inside the worker's progress, with the context locked. */
    snprintf(how, sizeof(how), "UCX reported %s on the %s endpoint", ucs_status_string(status),
             ep == peer->cep ? "control" : "data");
    peer_mark_lost(peer->ctx, peer, how);
    if (peer->ep_failed) {
        return;
    }
    peer->ep_failed = 1;
    /* Closed as soon as the worker's progress returns (peer_cancel_failed):
     * UCX 1.13 aborts the process when, as the target of software-emulated
     * puts over TCP, it answers puts of a peer whose endpoint failed
     * (ucp_put_handler -> "Fatal: unexpected error: Endpoint timeout"); a
     * closed endpoint's traffic is dropped instead. Not from inside this
     * callback: closing the other worker's endpoint here takes UCX's locks
     * in the opposite order of its own progress (ThreadSanitizer). What the
     * endpoints still held completes, with an error, through the callbacks. */
    peer->cancel_eps = 1;
    peer->ctx->cancel_eps = 1;
}

void peer_cancel_failed(kvx_ctx_t *ctx)
{
    ctx->cancel_eps = 0;
    for (int i = 0; i < ctx->npeers; i++) {
        peer_t *peer = &ctx->peers[i];

        if (peer->cancel_eps) {
            peer->cancel_eps = 0;
            kucx_ep_cancel(peer->ep);
            kucx_ep_cancel(peer->cep);
        }
    }
}

/* The agreement rounds this rank started (0 before agreement is set up). */
static uint64_t peer_rounds(const kvx_ctx_t *ctx)
{
    return ctx->ping_rounds != NULL ? ctx->ping_rounds(ctx) : 0;
}

void peer_tick(kvx_ctx_t *ctx, uint64_t now)
{
    for (int i = 0; i < ctx->npeers; i++) {
        peer_t *peer = &ctx->peers[i];
        char how[128];

        if (peer->lost) {
            continue;
        }
        if (!peer->bye && peer_lost_how(ctx, peer, now - peer->last_heard, how, sizeof(how))) {
            peer_mark_lost(ctx, peer, how);
            continue;
        }
        if (now - peer->last_sent >= ctx->cfg.keepalive_interval) {
            size_t len;
            /* A TP sibling also hears how many rounds this rank started. */
            void *ping = msg_new(MSG_PING, ctx->rank, 0,
                                 peer->role == ctx->role ? peer_rounds(ctx) : 0, &len);

            if (ping != NULL) {
                peer_send(ctx, peer, ping, len);
            }
        }
    }
}

/* Peers lost (not gone after their goodbye), and whether any of the other
 * role is left. */
void peer_health(kvx_ctx_t *ctx, uint64_t now, kvx_health_t *h)
{
    size_t o = 0;
    int others = 0, others_lost = 0;

    (void)now;

    for (int i = 0; i < ctx->npeers; i++) {
        const peer_t *p = &ctx->peers[i];

        if (p->retired) { /* a replaced incarnation */
            continue;
        }
        others += p->role != ctx->role;
        if (!p->lost || p->bye) {
            continue;
        }
        others_lost += p->role != ctx->role;
        if (h->peers_lost < sizeof(h->lost_ranks) / sizeof(h->lost_ranks[0])) {
            h->lost_ranks[h->peers_lost] = p->rank;
        }
        if (o < sizeof(h->lost_peers)) {
            o += (size_t)snprintf(h->lost_peers + o, sizeof(h->lost_peers) - o, "%s%s",
                                  h->peers_lost ? ", " : "", p->name);
        }
        h->peers_lost++;
    }
    h->reasons |= h->peers_lost > 0 ? KVX_HEALTH_PEER_LOST : 0;
    h->reasons |= ctx->tp_broken ? KVX_HEALTH_TP_BROKEN : 0;
    h->reasons |= others > 0 && others_lost == others ? KVX_HEALTH_NO_PEERS : 0;
}
