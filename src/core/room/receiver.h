/*
 * receiver.h - the decode side of a room: one source per prefill rank that writes to it.
 */
#ifndef KVX_CORE_RECEIVER_H
#define KVX_CORE_RECEIVER_H

#include <kvx.h>

#include "core/base/msg.h"
#include "core/base/plan.h"
#include "core/link/peer.h"
#include "core/room/room.h"

/* Receiver side: one prefill rank a decode room talks to. */
typedef struct source {
    peer_t *peer;
    plan_pair_t pair;
    int accepted, done;
    int drained;       /* it confirmed nothing of the room is in flight */
    int complete;      /* done, and all its data unpacked (unpack.c) */
    int msgs;          /* it sends every page as data messages (KVX_WRITES) */
    int aux_in;        /* msgs: its aux row arrived (MSG_AUX) */
    uint64_t unpacked; /* bytes of data messages unpacked */
    unsigned direct;   /* its rendezvous data UCX is still receiving into the pages (unpack.c) */
    /* KVX_VERIFY: what its DONE carried (receiver_verify()) */
    uint64_t *digests;
    uint32_t ndigests, dverify; /* dverify: the mode it digested in, 0 for none */
    uint64_t aux_digest;
    int has_aux;
} source_t;

kvx_status_t receiver_open(kvx_ctx_t *ctx, room_t *room, const uint32_t *pages, size_t npages,
                           int64_t aux_slot);
/* A message of a source of the room (a VERDICT from a prefill rank too:
 * its instance cannot conclude the room, which then fails here even when
 * SUCCESS, prefill_failed). */
void receiver_on_msg(kvx_ctx_t *ctx, room_t *room, peer_t *peer, const msg_t *m);
/* The room failed: its pages drain (or are released at once). */
void receiver_on_fail(kvx_ctx_t *ctx, room_t *room);
/* Drain deadline (progress tick). */
void receiver_tick(kvx_ctx_t *ctx, room_t *room, uint64_t now);
/* Counts a writer complete once it said DONE and its data is unpacked. */
void receiver_source_complete(kvx_ctx_t *ctx, room_t *room, source_t *s);
/* The mode this rank asks its writers to digest in (0: off; a device pool
 * is not checked). */
int receiver_verify_mode(const kvx_ctx_t *ctx);
/* A failed room's pages are released once nothing can write into them. */
void receiver_update_pages(kvx_ctx_t *ctx, room_t *room);

/* The pair geometry of source s (writer first). */
void receiver_geom(const kvx_ctx_t *ctx, const source_t *s, plan_geom_t *g);
/* Bytes of one page s sends this rank in data messages; 0 when it sends
 * none (it puts). */
size_t receiver_msg_page_bytes(const kvx_ctx_t *ctx, const source_t *s);
/* Bytes s sends this rank in data messages over the whole room. */
uint64_t receiver_msg_bytes(const kvx_ctx_t *ctx, const room_t *room, const source_t *s);
/* Does s, a writer of data messages, owe the room its aux row? */
int receiver_owes_aux(const room_t *room, const source_t *s);
/* The decode side of the room table (room_sides(), setup). */
extern const room_side_t receiver_side;

#endif
