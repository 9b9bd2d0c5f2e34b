/*
 * peer.h - the ranks this rank talks to: the peer table, flow control, liveness
 * and the outbox of control messages.
 */
#ifndef KVX_CORE_PEER_H
#define KVX_CORE_PEER_H

#include <kvx.h>

#include "core/base/kvlayout.h"
#include "ucx/kvx_ucx.h"

#include <stddef.h>
#include <stdint.h>

struct room;
struct target;
struct msg_agreed_room;

/* A rank this rank talks to over UCX. */
typedef struct peer {
    struct kvx_ctx *ctx; /* for UCX callbacks */
    int rank;
    kvx_role_t role;
    int instance, tp_rank;
    char name[64]; /* "decode[1].tp0 (rank 9)" */
    ucp_ep_h ep;   /* data plane: puts and flushes */
    ucp_ep_h cep;  /* control plane: kvx's messages (kvx_ucx.h says why apart) */
    int group;     /* this rank's worker group that ep and cep belong to */
    /* Its pool, for ranks this rank writes to. */
    const kvl_t *kvl; /* its instance's geometry */
    size_t num_pages;
    uint64_t *buf_addr;   /* remote address of each (layer, comp) buffer */
    ucp_rkey_h *buf_rkey; /* rkey covering each buffer */
    ucp_rkey_h *rkeys;    /* per remote region */
    int nregions;
    uint64_t aux_addr;
    ucp_rkey_h aux_rkey;
    size_t aux_slots, aux_stride;
    /* Flow control of puts to it. */
    uint64_t inflight_bytes;
    unsigned inflight_ops;
    struct target *pump_head, *pump_tail; /* targets with puts waiting for room */
    /* Liveness. */
    uint64_t last_heard, last_sent;
    int lost, bye;
    /* An incarnation of a joined instance that a later one replaced
     * (setup/joining.c): no longer its rank's peer, its slot free for
     * another once nothing refers to it. Always lost too. */
    int retired;
    /* A joined instance's generation g numbers its rooms' nonces from
     * (g - 1) << 24: a message below that is an earlier incarnation's. */
    uint32_t nonce_floor;
    int bye_answered;   /* a joined peer that left alone was said goodbye to */
    int peer_mode;      /* its endpoints run in UCX peer error mode */
    int msg_writes;     /* pages between it and this rank travel as data messages */
    int ep_failed;      /* UCX reported an endpoint error: never used again */
    char lost_how[128]; /* when lost: how it was detected */
    int pid;            /* its process id */
    int same_machine;   /* same kernel and PID namespace: its pid can be checked */
    int put_in_host;    /* every RMA lane to it is this host's memory: fast-completion puts */
    int cancel_eps;     /* its endpoints failed: cancel them after this progress call */
    int same_host;      /* same_machine and the same network namespace */
    /* A TP sibling: the agreement rounds it said it started (its PINGs),
     * and when that number last changed (ns); 0 until it first said. */
    uint64_t rounds, rounds_changed;
    /* decode: rooms agreed SUCCESS in this round, for its AGREED */
    struct msg_agreed_room *agreed;
    uint32_t nagreed, agreed_cap;
} peer_t;

/* An outgoing control message waiting for (or in) UCX. */
typedef struct outmsg {
    struct outmsg *next;
    peer_t *peer;
    void *buf;
    size_t len;
    uint64_t not_before; /* injected delay (ns), 0 for none */
} outmsg_t;

/* Queues a control message to a peer (sent by the progress thread). */
void peer_send(kvx_ctx_t *ctx, peer_t *peer, void *buf, size_t len);
/* Same, not before a time (an injected delay). */
void peer_send_at(kvx_ctx_t *ctx, peer_t *peer, void *buf, size_t len, uint64_t not_before);
/* Sends queued messages that are due (progress thread, lock held). */
void peer_flush_outbox(kvx_ctx_t *ctx);
/* Keepalive and loss detection (progress thread, lock held). */
void peer_tick(kvx_ctx_t *ctx, uint64_t now);
peer_t *peer_of_rank(kvx_ctx_t *ctx, int rank);
/* Puts may be posted to this peer now. */
int peer_has_room(const kvx_ctx_t *ctx, const peer_t *peer);
/* What the floors above hear from the peers, and what a PING tells: set
 * once, at the start of creation, before any peer exists (setup/steps.c).
 * lost runs synchronously when a peer is declared lost, so that the first
 * failure recorded stays the root cause; rounds gives the agreement rounds
 * this rank started, told to every TP sibling in its PINGs. */
void peer_listen(kvx_ctx_t *ctx, void (*lost)(kvx_ctx_t *ctx, peer_t *peer, const char *how),
                 uint64_t (*rounds)(const kvx_ctx_t *ctx));
/* A sibling's PING said how many agreement rounds it started (agree_tick()
 * compares the counts). */
void peer_on_ping(peer_t *peer, uint64_t rounds);
/* The health's walk of the peers: lost ones (not gone after their goodbye),
 * a broken TP instance, none of the other role left (a probe,
 * stats_add_health()). */
void peer_health(kvx_ctx_t *ctx, uint64_t now, kvx_health_t *h);
/* Is the peer's process gone from this machine (it can write nothing more:
 * no syscall of its own, no read of its memory)? 0 for a remote peer. */
int peer_dead_here(const peer_t *peer);
/* Declares a peer lost: its rooms fail with how (once). */
void peer_mark_lost(kvx_ctx_t *ctx, peer_t *peer, const char *how);
/* UCX's error callback of peer-mode endpoints. */
void peer_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status);
/* Cancels the endpoints of peers whose endpoints failed (outside UCX's
 * callbacks). */
void peer_cancel_failed(kvx_ctx_t *ctx);

#endif
