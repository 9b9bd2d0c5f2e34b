/*
 * sender.h - the prefill side of a room: one target per decode rank it writes to.
 */
#ifndef KVX_CORE_SENDER_H
#define KVX_CORE_SENDER_H

#include <kvx.h>

#include "core/base/msg.h"
#include "core/base/plan.h"
#include "core/link/peer.h"
#include "core/room/room.h"
#include "core/xfer/target.h"
#include "ucx/kvx_ucx.h"

kvx_status_t sender_open(kvx_ctx_t *ctx, room_t *room, size_t npages_total);
/* A hand-over of pages [n] for layers [l0, l0 + nl) (ready: cudaEvent_t or
 * NULL); on error why says which check refused it and nothing changed. */
kvx_status_t sender_layers(kvx_ctx_t *ctx, room_t *room, const uint32_t *pages, size_t n,
                           unsigned l0, unsigned nl, void *ready, const void *aux, size_t aux_len,
                           kvx_failure_t *why);
/* Pages of the room handed over for every layer. */
size_t sender_pages_sent(const kvx_ctx_t *ctx, const room_t *room);
/* Says which layers still miss pages (a room not all handed over), in buf. */
const char *sender_missing(const kvx_ctx_t *ctx, const room_t *room, char *buf, size_t len);
/* What a prefill room whose every (page, layer) was handed over waits for
 * while a hand-over's ready event has not completed (nready < nhov): "the
 * ready event of hand-over 2 of 3 (layers 1..1, pages 0..3) to complete". */
const char *sender_gated(const room_t *room, char *buf, size_t len);
/* Progress poller: queries the events of gated hand-overs and posts the
 * ones that completed. */
unsigned sender_poll_events(kvx_ctx_t *ctx);
void sender_on_prealloc(kvx_ctx_t *ctx, room_t *room, peer_t *peer, const msg_t *m);
/* room replaces closed, a closed room of its id that still answers grants
 * (room_api_create()): the first grant from each decode rank closed has not
 * heard is closed's to answer (room->prior). Called once room's targets are
 * set (sender_open()). */
void sender_take_prior(kvx_ctx_t *ctx, room_t *room, const room_t *closed);
void sender_on_received(kvx_ctx_t *ctx, room_t *room, peer_t *peer);
/* The decode instance agreed the room FAILED with this root cause. */
void sender_on_verdict(kvx_ctx_t *ctx, room_t *room, const kvx_failure_t *root);
/* The decode instance agreed the room SUCCESS (AGREED from peer). */
void sender_on_agreed(kvx_ctx_t *ctx, room_t *room, const peer_t *peer);
/* Has the room waited 10 peer timeouts in its state (a delivered room: for
 * the decode's word)? */
int sender_unheard(const kvx_ctx_t *ctx, const room_t *room);
/* May this prefill rank count its failed room as FAILED in its instance's
 * agreement (it holds the decode's verdict, or cannot get one)? */
int sender_may_conclude(const kvx_ctx_t *ctx, const room_t *room);
/* Can no decode rank of the room tell this prefill rank the decode
 * instance's outcome any more (every one it talks to lost or gone)? */
int sender_cut_off(const room_t *room);
/* May the application reuse the room's source pages although UCX still
 * holds operations of it? Only when every such operation goes to a peer
 * whose process is gone from this machine (peer_dead_here()). */
int sender_sources_safe(const room_t *room);
/* A room of a broken prefill instance (no round can run): concludes it
 * once the decode's word came (AGREED, VERDICT), or none can come. */
void sender_conclude_broken(kvx_ctx_t *ctx, room_t *room);
/* A room some TP rank of this prefill instance does not hold (f says which
 * one, agree_conclude_unheld()): fails here, tells the decode ranks and
 * concludes with the decode instance's word, like a broken instance's room. */
void sender_conclude_unheld(kvx_ctx_t *ctx, room_t *room, const kvx_failure_t *f);
/* Tells every decode rank of the room that granted it this rank's record
 * (MSG_VERDICT from the prefill): this instance concluded, or will conclude,
 * the room FAILED without the decode's word (receiver_on_verdict()). */
void sender_send_verdict(kvx_ctx_t *ctx, room_t *room);
/* Every decode rank of the room has all of this rank's pages (DONE sent):
 * from here on the decode instance decides the room, not this rank. */
static inline int sender_delivered(const room_t *room)
{
    return room->side == KVX_ROLE_PREFILL && room->ntargets > 0 &&
           room->ndone_sent == room->ntargets;
}
/* A decode rank's FAIL names its room's incarnation before any grant did. */
void sender_learn_nonce(room_t *room, const peer_t *peer, uint64_t nonce);
/* Prefill: the room is going away; its decode incarnations become dead. */
void sender_bury(kvx_ctx_t *ctx, const room_t *room);
/* Prefill: is a decode rank's message (nonce) about another incarnation
 * of the room id than the open room (room, or NULL) knows? 0: no; 1: one of
 * a room this rank closed; 2: not the one the open room was granted by. */
int sender_msg_stale(const kvx_ctx_t *ctx, const room_t *room, const peer_t *peer, uint64_t nonce);
/* The room failed: stop posting, and once nothing is in flight to a decode
 * rank tell it DRAINED (so it may reuse the pages). */
void sender_drain(kvx_ctx_t *ctx, room_t *room);
/* Resumes targets held by an injected delay (progress tick). */
void sender_tick(kvx_ctx_t *ctx, room_t *room, uint64_t now);
/* Posts what flow control allows for every target queued on peer. */
void sender_pump_peer(kvx_ctx_t *ctx, peer_t *peer);
/* The same for every peer with targets queued (a progress poller; counts
 * no work, as the pump never did). */
unsigned sender_pump_peers(kvx_ctx_t *ctx);
/* What the xfer floor calls in the room floor (xfer_attach(), setup): the
 * target's ops are these below, the scatter ops room/unpack.c's. */
extern const xfer_ops_t room_xfer_ops;
/* The prefill side of the room table (room_sides(), setup). */
extern const room_side_t sender_side;
/* The target's side of the transfer ops: */
void sender_pump(kvx_ctx_t *ctx, target_t *t);
int sender_next_batch(target_t *t);
void sender_account(target_t *t, size_t len, kvx_status_t posted);
void sender_put_cb(void *request, ucs_status_t status, void *user);
void sender_fail(kvx_ctx_t *ctx, target_t *t, kvx_status_t status, kvx_stage_t stage,
                 ucs_status_t ucs, const char *what);

#endif
