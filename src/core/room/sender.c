/*
 * sender.c - the prefill side of a room: targets, posting puts under flow
 * control, completion (aux, flush, DONE).
 *
 * A prefill rank's room has one target per decode rank it shares a head
 * with. Puts of a target are posted in batches of the pages handed over so
 * far: for each (layer, component), each run of pages contiguous on both
 * sides, each piece the layouts allow. When a peer has too many bytes or
 * operations in flight the target waits on that peer's pump queue, and the
 * progress thread resumes it as puts complete. When every page is posted,
 * the aux row is put, the endpoint is flushed (every put is then remotely
 * complete), and DONE tells the decode rank.
 */
#include "config.h"

#include "core/ctx/ctx.h"
#include "core/ctx/pool.h"
#include "core/ctx/stats.h"
#include "core/link/peer.h"
#include "core/room/fault.h"
#include "core/room/room.h"
#include "core/room/room_stats.h"
#include "core/room/sender.h"
#include "core/room/unpack.h"
#include "core/xfer/cuda_stage.h"
#include "core/xfer/pack.h"
#include "core/xfer/verify.h"
#include "mem/mem.h"
#include "util/failure.h"
#include "util/log.h"
#include "util/time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

kvx_status_t sender_open(kvx_ctx_t *ctx, room_t *room, size_t npages_total)
{
    const kvl_t *dkvl = &ctx->kvls[KVX_ROLE_DECODE][room->peer_instance];
    unsigned n = 0;

    room->targets = calloc((size_t)dkvl->tp, sizeof(target_t));
    room->src = malloc(npages_total * sizeof(uint32_t));
    room->lcount = calloc(ctx->my.kv.layers, sizeof(uint32_t));
    if (room->targets == NULL || room->src == NULL || room->lcount == NULL) {
        return KVX_ERR_NO_MEMORY;
    }
    for (int d = 0; d < dkvl->tp; d++) {
        target_t *t = &room->targets[n];

        plan_pair(&ctx->my, ctx->tp_rank, dkvl, d, &t->pair);
        if (!t->pair.talks) {
            continue;
        }
        t->room = room;
        t->room_id = room->id;
        t->peer =
            peer_of_rank(ctx, joblayout_rank(&ctx->job, KVX_ROLE_DECODE, room->peer_instance, d));
        t->aux_slot = -1;
        if (t->pair.writes) {
            plan_geom_init(&t->geom, &ctx->my, ctx->num_pages, dkvl, t->peer->num_pages, &t->pair);
            t->mode = cstage_mode(ctx, plan_mode(&t->geom));
        }
        n++;
    }
    room->ntargets = n;
    room->npages_total = npages_total;
    room->nlp_all = npages_total * ctx->my.kv.layers;
    return KVX_OK;
}

/* A control message to t's decode rank about incarnation nonce. */
static void sender_send_to(kvx_ctx_t *ctx, target_t *t, msg_type_t type, uint64_t nonce)
{
    size_t len;
    void *m = msg_new(type, ctx->rank, t->room->id, nonce, &len);

    if (m != NULL) {
        peer_send(ctx, t->peer, m, len);
    }
}

static void sender_send(kvx_ctx_t *ctx, target_t *t, msg_type_t type)
{
    sender_send_to(ctx, t, type, t->nonce);
}

void sender_fail(kvx_ctx_t *ctx, target_t *t, kvx_status_t status, kvx_stage_t stage,
                 ucs_status_t ucs, const char *what)
{
    kvx_failure_t f;

    if (ucs == UCS_ERR_ENDPOINT_TIMEOUT || ucs == UCS_ERR_CONNECTION_RESET ||
        ucs == UCS_ERR_UNREACHABLE || ucs == UCS_ERR_SHMEM_SEGMENT) {
        /* The endpoint itself is broken, as if UCX had called its error
         * handler: the peer is lost, and every room with it fails with that
         * reason, not only this one. */
        peer_ep_error(t->peer, t->peer->ep, ucs);
    }
    failure_set_room(&f, t->room->id, status, stage, ucs_status_string(ucs), "%s %s failed", what,
                     t->peer->name);
    room_fail(ctx, t->room, &f, 1);
}

/* Enters TRANSFERRING once every grant is in and pages were handed over. */
static void sender_maybe_start(kvx_ctx_t *ctx, room_t *room)
{
    if (room->started || room_terminal(room) || room->ngranted < room->ntargets ||
        room->nsrc == 0) {
        return;
    }
    room->started = 1;
    room_set_state(ctx, room, KVX_ROOM_TRANSFERRING);
    for (unsigned t = 0; t < room->ntargets; t++) {
        sender_send(ctx, &room->targets[t], MSG_START);
    }
}

/* SUCCESS on the prefill means every decode rank it talks to reported the
 * room SUCCESS (RECEIVED): then the decode instance cannot agree otherwise. */
static void sender_maybe_succeed(kvx_ctx_t *ctx, room_t *room)
{
    if (!room_terminal(room) && room->started && room->nlp == room->nlp_all &&
        room->ndone_sent == room->ntargets && room->nreceived == room->ntargets) {
        room_set_state(ctx, room, KVX_ROOM_SUCCESS);
    }
}

/* Tells the decode rank its pages are safe: nothing of the room is in flight. */
static void sender_send_drained(kvx_ctx_t *ctx, target_t *t)
{
    if (!t->drained_sent) {
        t->drained_sent = 1;
        sender_send(ctx, t, MSG_DRAINED);
    }
}

/* The DONE of a writer: with the digests of what it wrote when the decode
 * rank asked (KVX_VERIFY), computed from the source pages now that every
 * put is remotely complete -- what the decode must hold. A device pool is
 * read back (ctx->vdev); without that (verify 0 in the DONE) the decode
 * counts the writer's part unchecked. */
static void *sender_new_done(kvx_ctx_t *ctx, target_t *t, size_t *len_p)
{
    room_t *room = t->room;
    msg_done_t d = { t->bytes, t->puts, 0, 0, 0, 0, 0 };
    verify_units_t u = { room->id, ctx->my.kv.layers,  ctx->my.comps,  t->pair.nheads,
                         t->dst,   room->npages_total, (int)t->verify, t->verify_rate };
    verify_side_t side = { &ctx->my,  ctx->num_pages,   ctx->pool.buf,
                           room->src, t->pair.src_head, ctx->vdev };
    uint64_t *digests = NULL;
    kvx_failure_t why;
    size_t n = 0;
    void *m;

    if (t->verify == 0 || (ctx->pool.type != KVX_MEM_HOST && ctx->vdev == NULL)) {
        return msg_new_done(ctx->rank, room->id, t->nonce, t->bytes, t->puts, len_p);
    }
    n = verify_checked(&u);
    digests = malloc((n + 1) * sizeof(uint64_t));
    if (digests == NULL || n > MSG_DIGESTS_MAX) {
        free(digests);
        kvx_rwarn(room->id, "no digests for %s: %zu units", t->peer->name, n);
        return msg_new_done(ctx->rank, room->id, t->nonce, t->bytes, t->puts, len_p);
    }
    if (verify_digest(&u, &side, digests, &why) != KVX_OK) {
        free(digests);
        kvx_rwarn(room->id, "no digests for %s: %s", t->peer->name, why.text);
        return msg_new_done(ctx->rank, room->id, t->nonce, t->bytes, t->puts, len_p);
    }
    d.verify = t->verify;
    if (t->aux_slot >= 0 && t->aux_row != NULL) {
        msg_aux_header_t h;

        memcpy(&h, t->aux_row, sizeof(h));
        d.aux = verify_aux(room->id, (const char *)t->aux_row + sizeof(h), h.len);
        d.has_aux = 1;
    }
    m = msg_new_done_digests(ctx->rank, room->id, t->nonce, &d, digests, n, len_p);
    free(digests);
    return m;
}

static void sender_target_done(kvx_ctx_t *ctx, target_t *t)
{
    fault_action_t act;
    uint64_t at = 0;

    if (t->pair.writes) {
        switch (fault_at(ctx, KVX_STAGE_COMPLETION, t->room->id, &t->room->fault_seen, &act)) {
        case FAULT_FAIL:
            room_fail(ctx, t->room, &act.failure, 1);
            return;
        case FAULT_DROP:
            kvx_rwarn(t->room->id, "injected: DONE to %s is not sent", t->peer->name);
            t->done_sent = 1;
            t->room->ndone_sent++;
            return;
        case FAULT_DELAY:
            at = kvx_now_ns() + act.delay_ns;
            break;
        default:
            break;
        }
    }
    t->done_sent = 1;
    t->room->ndone_sent++;
    if (t->pair.writes) {
        size_t len;
        void *m = sender_new_done(ctx, t, &len);

        if (m != NULL) {
            peer_send_at(ctx, t->peer, m, len, at);
        }
    }
    sender_maybe_succeed(ctx, t->room);
}

void sender_on_verdict(kvx_ctx_t *ctx, room_t *room, const kvx_failure_t *root)
{
    if (!room_terminal(room)) {
        room_fail(ctx, room, root, 1);
    }
    /* The decode instance's choice replaces this rank's own record, so both
     * instances report one root cause -- unless this instance had to
     * conclude without it: an agreed outcome is final. */
    if (!room->agreed) {
        room->failure = *root;
    }
    room->verdict = 1;
    sender_conclude_broken(ctx, room);
}

void sender_conclude_broken(kvx_ctx_t *ctx, room_t *room)
{
    if (room->broken_at == 0 || room->agreed || !room->user_open) {
        return;
    }
    if (room->decode_agreed) {
        if (!room_terminal(room)) {
            room_set_state(ctx, room, KVX_ROOM_SUCCESS);
        }
        room->agreed_state = KVX_ROOM_SUCCESS;
    } else if (room->verdict) {
        room->agreed_state = KVX_ROOM_FAILED; /* with the decode's root cause */
    } else if (sender_cut_off(room) ||
               kvx_now_ns() - room->broken_at > 10 * ctx->cfg.peer_timeout) {
        kvx_failure_t f = room->failure; /* the break's reason, or the room's own */

        if (!room_terminal(room)) {
            room_fail(ctx, room, &f, 1);
        }
        room->agreed_state = KVX_ROOM_FAILED;
    } else {
        return;
    }
    room->agreed = 1;
    stats_room_concluded(ctx, room);
    kvx_rdebug(room->id, "concluded %s on a broken instance (%s)",
               kvx_room_state_name(room->agreed_state),
               room->decode_agreed ? "the decode agreed SUCCESS"
               : room->verdict     ? "the decode's verdict"
                                   : "no word from the decode can come");
}

/* The decode ranks of a room this instance found unheld must learn it even
 * where the room is SUCCESS or failed already, on either side: the FAIL of
 * room_fail() goes out only with a new failure, and a decode rank that holds
 * the room SUCCESS drops a FAIL. A VERDICT from the prefill makes the decode
 * instance agree FAILED with this record (receiver_on_verdict()) instead of
 * waiting for pages the rank that lacks the room will never send. A target
 * without a grant has no incarnation to name: its decode rank hears the FAIL
 * (protocol_pre_grant_fail()) or has not opened the room. */
void sender_send_verdict(kvx_ctx_t *ctx, room_t *room)
{
    for (unsigned i = 0; i < room->ntargets; i++) {
        target_t *t = &room->targets[i];
        size_t len;
        void *m;

        if (t->nonce != 0 && (m = msg_new_failure(MSG_VERDICT, ctx->rank, room->id, t->nonce,
                                                  &room->failure, &len)) != NULL) {
            peer_send(ctx, t->peer, m, len);
        }
    }
}

void sender_conclude_unheld(kvx_ctx_t *ctx, room_t *room, const kvx_failure_t *f)
{
    if (!room_terminal(room)) {
        room_fail(ctx, room, f, 1);
    }
    /* The decode's verdict, when it came first, is the root cause both
     * instances report; else this one, replacing a record of this rank. */
    if (!room->verdict) {
        room->failure = *f;
    }
    if (!room->verdict && !room->decode_agreed) {
        sender_send_verdict(ctx, room);
    }
    room->broken_at = room->broken_at ? room->broken_at : kvx_now_ns();
    sender_conclude_broken(ctx, room);
}

void sender_on_agreed(kvx_ctx_t *ctx, room_t *room, const peer_t *peer)
{
    if (!room->decode_agreed && !room->agreed) {
        kvx_rdebug(room->id, "%s: the decode instance agreed SUCCESS", peer->name);
    }
    room->decode_agreed = 1;
    sender_conclude_broken(ctx, room);
}

int sender_sources_safe(const room_t *room)
{
    for (unsigned i = 0; i < room->ntargets; i++) {
        const target_t *t = &room->targets[i];

        /* What a process gone from this machine would have read (or had
         * UCX read for it) reaches nobody: reusing the pages harms no one. */
        if ((t->ops > 0 || t->pumping || t->pack_waiting) && !peer_dead_here(t->peer)) {
            return 0;
        }
    }
    return 1;
}

int sender_cut_off(const room_t *room)
{
    for (unsigned i = 0; i < room->ntargets; i++) {
        if (!room->targets[i].peer->lost && !room->targets[i].peer->bye) {
            return 0;
        }
    }
    return room->ntargets > 0;
}

int sender_unheard(const kvx_ctx_t *ctx, const room_t *room)
{
    /* A decode instance that does not run agreement rounds must not hold
     * this instance's outcome forever: after 10 peer timeouts without its
     * word the room concludes FAILED -- a SUCCESS here is not the decode's
     * (agree_outcome(), agree_silence()) -- and the decode ranks are told
     * the record (agree_conclude(), sender_send_verdict()). */
    return kvx_now_ns() - room->entered > 10 * ctx->cfg.peer_timeout;
}

int sender_may_conclude(const kvx_ctx_t *ctx, const room_t *room)
{
    if (room->verdict || !room->user_open || room->state != KVX_ROOM_FAILED) {
        return 1;
    }
    /* The decode instance decides: this rank waits for its word (VERDICT,
     * or AGREED through a TP sibling) even when a decode rank is lost -- the
     * decode may have agreed SUCCESS before the loss, and its verdict names
     * the root cause both instances report. A round concludes FAILED without
     * it only when no prefill rank of the room can hear any decode rank
     * (agree_outcome()).
     * A decode instance that does not run agreement rounds must not hold
     * this instance's outcome forever (sender_unheard()): the room then
     * concludes FAILED with this rank's record, which the decode ranks are
     * told (a decode instance that agreed FAILED meanwhile with another
     * record keeps its own). */
    return sender_unheard(ctx, room);
}

void sender_on_received(kvx_ctx_t *ctx, room_t *room, peer_t *peer)
{
    for (unsigned i = 0; i < room->ntargets; i++) {
        target_t *t = &room->targets[i];

        if (t->peer == peer && !t->received) {
            t->received = 1;
            room->nreceived++;
            sender_maybe_succeed(ctx, room);
            return;
        }
    }
    kvx_rwarn(room->id, "ignoring an unexpected RECEIVED from %s", peer->name);
    ctx->bad_msgs++;
}

void sender_put_cb(void *request, ucs_status_t status, void *user)
{
    target_t *t = user;
    kvx_ctx_t *ctx = t->peer->ctx;

    t->peer->inflight_ops--;
    t->peer->inflight_bytes -= kucx_request_len(request);
    t->ops--;
    kucx_request_free(request);
    if (status != UCS_OK) {
        sender_fail(ctx, t, kucx_status(status), KVX_STAGE_POST, status, "put to");
    }
    room_unref(ctx, t->room);
}

/* Every put to t is remotely complete: the transfer is done, or, when the
 * room failed meanwhile, the decode's pages are safe from this rank. A flush
 * that failed confirms nothing: the decode then quarantines the pages. */
static void sender_flushed(kvx_ctx_t *ctx, target_t *t, ucs_status_t status)
{
    t->flushing = 0;
    if (status != UCS_OK) {
        sender_fail(ctx, t, kucx_status(status), KVX_STAGE_COMPLETION, status, "flush of puts to");
    } else if (room_terminal(t->room)) {
        sender_send_drained(ctx, t);
    } else {
        sender_target_done(ctx, t);
    }
}

static void sender_flush_cb(void *request, ucs_status_t status, void *user)
{
    target_t *t = user;
    kvx_ctx_t *ctx = t->peer->ctx;

    kucx_request_free(request);
    sender_flushed(ctx, t, status);
    room_unref(ctx, t->room);
}

/* Counts an operation posted to t (KVX_OK: completed at once; KVX_INPROGRESS:
 * in flight until sender_put_cb). */
void sender_account(target_t *t, size_t len, kvx_status_t posted)
{
    if (posted == KVX_INPROGRESS) {
        t->peer->inflight_ops++;
        t->peer->inflight_bytes += len;
        t->room->refs++;
        t->ops++;
    }
    t->puts++;
    t->bytes += len;
    t->room->puts++;
    t->room->bytes += len;
}

/* Posts one put; returns 0 when the target must stop (failed). */
static int sender_put(kvx_ctx_t *ctx, target_t *t, const void *src, size_t len, uint64_t raddr,
                      ucp_rkey_h rkey, ucp_mem_h memh, kvx_stage_t stage)
{
    ucs_status_t ucs;
    kvx_status_t status = kucx_put(t->peer->ep, t->peer->put_in_host, src, len, memh, raddr, rkey,
                                   sender_put_cb, t, &ucs);

    if (status != KVX_OK && status != KVX_INPROGRESS) {
        sender_fail(ctx, t, status, stage, ucs, stage == KVX_STAGE_AUX ? "aux put to" : "put to");
        return 0;
    }
    sender_account(t, len, status);
    stats_xfer(ctx, KVX_XFER_PUT, len);
    return 1;
}

/* Starts a batch: the next ready hand-over, with the ready ones after it
 * that continue it (the same layers, the next positions), so that chunks
 * handed over before the grant came travel as one batch of merged runs. */
int sender_next_batch(target_t *t)
{
    room_t *room = t->room;
    const handover_t *h;

    /* t->runs holds a run per page of the room (allocated with the grant):
     * nothing is allocated here, so nothing can fail half way. */
    if (t->next_hov >= room->nready) {
        return 0;
    }
    h = &room->hov[t->next_hov++];
    t->bpos = h->pos;
    t->bn = h->n;
    t->bl0 = h->l0;
    t->bl1 = h->l0 + h->nl;
    while (t->next_hov < room->nready && room->hov[t->next_hov].l0 == t->bl0 &&
           room->hov[t->next_hov].l0 + room->hov[t->next_hov].nl == t->bl1 &&
           room->hov[t->next_hov].pos == t->bpos + t->bn) {
        t->bn += room->hov[t->next_hov++].n;
    }
    t->nruns = plan_runs(room->src + t->bpos, t->dst + t->bpos, t->bn, t->runs);
    t->run = t->comp = 0;
    t->layer = t->bl0;
    t->iter_live = 0;
    t->in_batch = 1;
    return 1;
}

/* The next piece of the current batch, advancing (run, component, layer). */
static int sender_next_piece(kvx_ctx_t *ctx, target_t *t, size_t *so, size_t *doff, size_t *len)
{
    for (;;) {
        if (!t->in_batch && !sender_next_batch(t)) {
            return 0;
        }
        if (t->iter_live && plan_iter_next(&t->iter, so, doff, len)) {
            return 1;
        }
        if (t->iter_live) {
            t->iter_live = 0;
            t->run++;
        }
        if (t->run == t->nruns) {
            t->run = 0;
            if (++t->comp == ctx->my.comps) {
                t->comp = 0;
                if (++t->layer == t->bl1) {
                    t->in_batch = 0;
                    continue;
                }
            }
        }
        plan_iter_init(&t->iter, &t->geom, &t->runs[t->run]);
        t->iter_live = 1;
    }
}

/* Puts the aux row into the decode's slot (before the flush, which then
 * covers it), or sends it as MSG_AUX to a decode that asked for messages. */
static int sender_put_aux(kvx_ctx_t *ctx, target_t *t)
{
    room_t *room = t->room;
    size_t len = sizeof(msg_aux_header_t) + room->aux_len;
    msg_aux_header_t h = { room->id, (uint32_t)room->aux_len, (uint32_t)t->nonce };
    fault_action_t act;

    if (!t->pair.aux_writer || t->aux_slot < 0) {
        t->aux_posted = 1;
        return 1;
    }
    if (t->aux_row != NULL) {
        goto send; /* a MSG_AUX that waited for a slot */
    }
    switch (fault_at(ctx, KVX_STAGE_AUX, room->id, &room->fault_seen, &act)) {
    case FAULT_FAIL:
        room_fail(ctx, room, &act.failure, 1);
        return 0;
    case FAULT_DELAY:
        t->hold_until = kvx_now_ns() + act.delay_ns;
        return 0; /* sender_tick() pumps again when it is due */
    case FAULT_DROP:
        kvx_rwarn(room->id, "injected: the aux row to %s is not put", t->peer->name);
        t->aux_posted = 1;
        return 1;
    default:
        break;
    }
    t->aux_row = malloc(len);
    if (t->aux_row == NULL) {
        kvx_failure_t f;

        failure_set_room(&f, room->id, KVX_ERR_NO_MEMORY, KVX_STAGE_AUX, NULL,
                         "no memory for the aux row to %s", t->peer->name);
        room_fail(ctx, room, &f, 1);
        return 0;
    }
    memcpy(t->aux_row, &h, sizeof(h));
    if (room->aux_len > 0) {
        memcpy((char *)t->aux_row + sizeof(h), room->aux, room->aux_len);
    }
send:
    if (t->msgs) {
        t->aux_posted = pack_send_aux(ctx, t, t->aux_row, len);
        return t->aux_posted;
    }
    t->aux_posted = 1;
    return sender_put(ctx, t, t->aux_row, len,
                      t->peer->aux_addr + (uint64_t)t->aux_slot * t->peer->aux_stride,
                      t->peer->aux_rkey, NULL, KVX_STAGE_AUX);
}

static void sender_flush(kvx_ctx_t *ctx, target_t *t)
{
    ucs_status_t ucs;
    kvx_status_t status;

    /* Data messages need no flush: the decode counts what arrived, and
     * drops whatever arrives for a room that failed. */
    if (t->msgs) {
        sender_flushed(ctx, t, UCS_OK);
        return;
    }
    t->flushing = 1;
    status = kucx_flush(t->peer->ep, sender_flush_cb, t, &ucs);
    if (status == KVX_INPROGRESS) {
        t->room->refs++;
        return;
    }
    sender_flushed(ctx, t, status == KVX_OK ? UCS_OK : ucs);
}

void sender_learn_nonce(room_t *room, const peer_t *peer, uint64_t nonce)
{
    for (unsigned i = 0; i < room->ntargets; i++) {
        if (room->targets[i].peer == peer && !room->targets[i].granted) {
            room->targets[i].nonce = nonce;
        }
    }
}

/* The dead nonces' set: linear probing over 2 x KVX_DEAD_NONCES slots (at
 * most half full), a multiplicative hash of the nonce (rank << 32 | count). */
#define DEAD_SLOTS (2 * KVX_DEAD_NONCES)

static size_t dead_home(uint64_t nonce)
{
    return (size_t)((nonce * 0x9e3779b97f4a7c15ull) >> 32) & (DEAD_SLOTS - 1);
}

/* The slot of nonce, or of the empty slot where it would go. */
static size_t dead_find(const kvx_ctx_t *ctx, uint64_t nonce)
{
    size_t i = dead_home(nonce);

    while (ctx->dead_set[i] != 0 && ctx->dead_set[i] != nonce) {
        i = (i + 1) & (DEAD_SLOTS - 1);
    }
    return i;
}

static int dead_has(const kvx_ctx_t *ctx, uint64_t nonce)
{
    return nonce != 0 && ctx->dead_set[dead_find(ctx, nonce)] == nonce;
}

/* Removes nonce from the set, moving later entries of its probe run back so
 * that every entry stays reachable from its home slot. */
static void dead_remove(kvx_ctx_t *ctx, uint64_t nonce)
{
    size_t i = dead_find(ctx, nonce), j = i;

    if (ctx->dead_set[i] != nonce) {
        return;
    }
    for (;;) {
        size_t home;

        j = (j + 1) & (DEAD_SLOTS - 1);
        if (ctx->dead_set[j] == 0) {
            break;
        }
        home = dead_home(ctx->dead_set[j]);
        /* The entry at j may fill the hole at i unless its home lies
         * cyclically in (i, j]. */
        if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) {
            ctx->dead_set[i] = ctx->dead_set[j];
            i = j;
        }
    }
    ctx->dead_set[i] = 0;
}

static void dead_add(kvx_ctx_t *ctx, uint64_t nonce)
{
    unsigned at = ctx->dead_next % KVX_DEAD_NONCES;

    if (dead_has(ctx, nonce)) {
        return; /* once in the ring, so that evicting it means it is gone */
    }
    if (ctx->dead_nonce[at] != 0) {
        dead_remove(ctx, ctx->dead_nonce[at]); /* the oldest gives way */
    }
    ctx->dead_nonce[at] = nonce;
    ctx->dead_next++;
    ctx->dead_set[dead_find(ctx, nonce)] = nonce;
}

void sender_bury(kvx_ctx_t *ctx, const room_t *room)
{
    for (unsigned i = 0; room->side == KVX_ROLE_PREFILL && i < room->ntargets; i++) {
        if (room->targets[i].nonce != 0) {
            dead_add(ctx, room->targets[i].nonce);
        }
    }
}

int sender_msg_stale(const kvx_ctx_t *ctx, const room_t *room, const peer_t *peer, uint64_t nonce)
{
    int other = 0;

    if (nonce == 0 || ctx->role != KVX_ROLE_PREFILL) {
        return 0; /* a FAIL from before the grant names no incarnation */
    }
    for (unsigned i = 0; room != NULL && i < room->ntargets; i++) {
        if (room->targets[i].peer == peer && room->targets[i].nonce != 0) {
            if (room->targets[i].nonce == nonce) {
                return 0;
            }
            other = 1;
            break;
        }
    }
    /* A late message (AGREED, RECEIVED) about a room closed a moment ago --
     * even when the id is open again. */
    if (dead_has(ctx, nonce)) {
        return 1;
    }
    return other ? 2 : 0;
}

void sender_drain(kvx_ctx_t *ctx, room_t *room)
{
    for (unsigned i = 0; i < room->ntargets; i++) {
        target_t *t = &room->targets[i];

        /* Without its grant nothing was written; the decode room is named
         * by the nonce its FAIL carried (when it sent one). */
        if (t->pair.writes && !t->granted && t->nonce != 0) {
            sender_send_drained(ctx, t);
            continue;
        }
        /* A writer that said DONE has nothing in flight; a flush already
         * posted says DRAINED when it completes. */
        if (!t->pair.writes || !t->granted || t->done_sent || t->drained_sent || t->flushing) {
            continue;
        }
        if (t->puts == 0 || t->msgs) {
            sender_send_drained(ctx, t);
        } else {
            sender_flush(ctx, t);
        }
    }
}

void sender_tick(kvx_ctx_t *ctx, room_t *room, uint64_t now)
{
    for (unsigned i = 0; i < room->ntargets; i++) {
        target_t *t = &room->targets[i];

        if (t->hold_until != 0 && t->hold_until <= now) {
            t->hold_until = 0;
            sender_pump(ctx, t);
        }
    }
}

static void sender_queue(peer_t *peer, target_t *t)
{
    if (t->pumping) {
        return;
    }
    t->pumping = 1;
    t->pump_next = NULL;
    t->room->refs++; /* the queue's reference, dropped by sender_pump_peer() */
    if (peer->pump_tail != NULL) {
        peer->pump_tail->pump_next = t;
    } else {
        peer->pump_head = t;
    }
    peer->pump_tail = t;
}

/* Posts what flow control allows; finishes the target when all is posted. */
void sender_pump(kvx_ctx_t *ctx, target_t *t)
{
    room_t *room = t->room;
    const pool_t *pool = &ctx->pool;
    size_t so, doff, len;

    if (room_terminal(room) || !t->granted || t->done_sent || t->flushing || t->hold_until) {
        return;
    }
    while (t->pair.writes) {
        unsigned b;

        if (!peer_has_room(ctx, t->peer)) {
            sender_queue(t->peer, t);
            return;
        }
        if (t->mode != PLAN_DIRECT) {
            /* pack.c: a packed put, or a data message, per run. */
            int more = pack_post(ctx, t);

            if (more <= 0) {
                if (more < 0) {
                    return;
                }
                break;
            }
            continue;
        }
        if (!sender_next_piece(ctx, t, &so, &doff, &len)) {
            break;
        }
        b = t->layer * ctx->my.comps + t->comp;
        if (!sender_put(ctx, t, (char *)pool->buf[b] + so, len, t->peer->buf_addr[b] + doff,
                        t->peer->buf_rkey[b], pool->regions[pool->buf_region[b]].memh,
                        KVX_STAGE_POST)) {
            return;
        }
    }
    if (room->nlp < room->nlp_all || (t->pair.writes && t->next_hov < room->nhov) ||
        !room->started || !pack_quiet(t)) {
        return;
    }
    if (!t->pair.writes) {
        sender_target_done(ctx, t);
    } else if (!t->aux_posted && sender_put_aux(ctx, t)) {
        sender_flush(ctx, t);
    }
}

void sender_pump_peer(kvx_ctx_t *ctx, peer_t *peer)
{
    room_t *room;

    while (peer->pump_head != NULL && peer_has_room(ctx, peer)) {
        target_t *t = peer->pump_head;

        peer->pump_head = t->pump_next;
        if (peer->pump_head == NULL) {
            peer->pump_tail = NULL;
        }
        t->pumping = 0;
        /* The queue's reference keeps a closed room alive until t pumped. */
        room = t->room;
        sender_pump(ctx, t);
        room_unref(ctx, room);
    }
}

unsigned sender_pump_peers(kvx_ctx_t *ctx)
{
    for (int i = 0; i < ctx->npeers; i++) {
        if (ctx->peers[i].pump_head != NULL) {
            sender_pump_peer(ctx, &ctx->peers[i]);
        }
    }
    return 0;
}

/* Fault injection at the post stage: the chunk is accepted, then the room
 * fails (or its puts wait) as a transport failure would make it. */
static void sender_post_fault(kvx_ctx_t *ctx, room_t *room)
{
    fault_action_t act;

    switch (fault_at(ctx, KVX_STAGE_POST, room->id, &room->fault_seen, &act)) {
    case FAULT_FAIL:
        room_fail(ctx, room, &act.failure, 1);
        break;
    case FAULT_DELAY:
        for (unsigned i = 0; i < room->ntargets; i++) {
            room->targets[i].hold_until = kvx_now_ns() + act.delay_ns;
        }
        break;
    default:
        break;
    }
}

static void sender_pump_all(kvx_ctx_t *ctx, room_t *room)
{
    for (unsigned t = 0; t < room->ntargets && !room_terminal(room); t++) {
        sender_pump(ctx, &room->targets[t]);
    }
}

/* Checks a hand-over before anything of it is kept: why says which check
 * refused it. */
static kvx_status_t sender_check_layers(kvx_ctx_t *ctx, room_t *room, const uint32_t *pages,
                                        size_t n, unsigned l0, unsigned nl, void *ready,
                                        size_t aux_len, int last, kvx_failure_t *why)
{
    unsigned layers = ctx->my.kv.layers;
    size_t pos;

    if (room_terminal(room) || room->nlp == room->nlp_all) {
        failure_set_room(why, room->id, KVX_ERR_STATE, KVX_STAGE_POST, NULL,
                         "room is %s with %zu of %zu pages handed over: no more chunks",
                         kvx_room_state_name(room->state), sender_pages_sent(ctx, room),
                         room->npages_total);
        return KVX_ERR_STATE;
    }
    if (nl == 0) {
        failure_set_room(why, room->id, KVX_ERR_INVALID_PARAM, KVX_STAGE_POST, NULL,
                         "nlayers is 0: a hand-over names 1 or more layers");
        return KVX_ERR_INVALID_PARAM;
    }
    if (l0 >= layers || nl > layers - l0) {
        failure_set_room(why, room->id, KVX_ERR_INVALID_PARAM, KVX_STAGE_POST, NULL,
                         "layers %u..%u: the model has layers 0..%u", l0, l0 + nl - 1, layers - 1);
        return KVX_ERR_INVALID_PARAM;
    }
    pos = room->lcount[l0];
    for (unsigned l = l0 + 1; l < l0 + nl; l++) {
        if (room->lcount[l] != pos) {
            failure_set_room(why, room->id, KVX_ERR_INVALID_PARAM, KVX_STAGE_POST, NULL,
                             "layers %u..%u are not at the same page: layer %u has %u pages "
                             "handed over, layer %u has %u",
                             l0, l0 + nl - 1, l0, (unsigned)pos, l, (unsigned)room->lcount[l]);
            return KVX_ERR_INVALID_PARAM;
        }
    }
    if (n > room->npages_total - pos && nl == layers) {
        failure_set_room(why, room->id, KVX_ERR_TOO_MANY_PAGES, KVX_STAGE_POST, NULL,
                         "chunk of %zu pages after %zu: the room announced %zu", n, pos,
                         room->npages_total);
        return KVX_ERR_TOO_MANY_PAGES;
    }
    if (n > room->npages_total - pos) {
        failure_set_room(why, room->id, KVX_ERR_TOO_MANY_PAGES, KVX_STAGE_POST, NULL,
                         "%zu pages of layers %u..%u after %zu: the room announced %zu%s", n, l0,
                         l0 + nl - 1, pos, room->npages_total,
                         pos == room->npages_total ? " (every page of them was handed over)" : "");
        return KVX_ERR_TOO_MANY_PAGES;
    }
    for (size_t i = 0; i < n; i++) {
        if (pages[i] >= ctx->num_pages) {
            failure_set_room(why, room->id, KVX_ERR_PAGE_RANGE, KVX_STAGE_POST, NULL,
                             "source page %u (chunk index %zu) is outside the pool of %zu pages",
                             pages[i], i, ctx->num_pages);
            return KVX_ERR_PAGE_RANGE;
        }
        if (pos + i < room->nsrc && room->src[pos + i] != pages[i]) {
            failure_set_room(why, room->id, KVX_ERR_INVALID_PARAM, KVX_STAGE_POST, NULL,
                             "source page %u (chunk index %zu) for layer %u at page %zu, where an "
                             "earlier hand-over named page %u",
                             pages[i], i, l0, pos + i, room->src[pos + i]);
            return KVX_ERR_INVALID_PARAM;
        }
    }
    if (ready != NULL && ctx->pool.type == KVX_MEM_HOST) {
        failure_set_room(why, room->id, KVX_ERR_INVALID_PARAM, KVX_STAGE_POST, NULL,
                         "a ready event needs a CUDA pool: this pool is host memory");
        return KVX_ERR_INVALID_PARAM;
    }
    if ((aux_len > 0 && !last) || aux_len > ctx->aux_item_size) {
        failure_set_room(why, room->id, KVX_ERR_AUX, KVX_STAGE_AUX, NULL,
                         "aux of %zu bytes %s (aux_item_size=%zu)", aux_len,
                         last ? "does not fit" : "on a chunk that is not the last",
                         ctx->aux_item_size);
        return KVX_ERR_AUX;
    }
    return KVX_OK;
}

size_t sender_pages_sent(const kvx_ctx_t *ctx, const room_t *room)
{
    size_t least = room->npages_total;

    for (unsigned l = 0; room->lcount != NULL && l < ctx->my.kv.layers; l++) {
        least = room->lcount[l] < least ? room->lcount[l] : least;
    }
    return room->lcount != NULL ? least : 0;
}

const char *sender_missing(const kvx_ctx_t *ctx, const room_t *room, char *buf, size_t len)
{
    unsigned first = ctx->my.kv.layers, last = 0, n = 0;

    for (unsigned l = 0; l < ctx->my.kv.layers; l++) {
        if (room->lcount[l] < room->npages_total) {
            first = first < l ? first : l;
            last = l;
            n++;
        }
    }
    snprintf(buf, len,
             "the application to hand over the rest of %u layer%s (%u..%u; %zu of %zu "
             "(page, layer)s handed over)",
             n, n == 1 ? "" : "s", first, last, room->nlp, room->nlp_all);
    return buf;
}

const char *sender_gated(const room_t *room, char *buf, size_t len)
{
    const handover_t *h = &room->hov[room->nready];

    snprintf(buf, len,
             "the ready event of hand-over %zu of %zu (layers %u..%u, pages %zu..%zu) to "
             "complete: cudaEventQuery says not ready",
             room->nready + 1, room->nhov, h->l0, h->l0 + h->nl - 1, h->pos, h->pos + h->n - 1);
    return buf;
}

/* Grows the list of hand-overs by one; 0 when out of memory. */
static int sender_hov_grow(room_t *room)
{
    handover_t *h;
    size_t cap;

    if (room->nhov < room->hov_cap) {
        return 1;
    }
    cap = room->hov_cap ? 2 * room->hov_cap : 4;
    h = realloc(room->hov, cap * sizeof(*h));
    if (h == NULL) {
        return 0;
    }
    room->hov = h;
    room->hov_cap = cap;
    return 1;
}

kvx_status_t sender_layers(kvx_ctx_t *ctx, room_t *room, const uint32_t *pages, size_t n,
                           unsigned l0, unsigned nl, void *ready, const void *aux, size_t aux_len,
                           kvx_failure_t *why)
{
    int last = room->nlp + n * nl == room->nlp_all;
    kvx_status_t status;
    size_t pos;
    handover_t *h;

    if (aux_len > 0 && aux == NULL) {
        failure_set_room(why, room->id, KVX_ERR_INVALID_PARAM, KVX_STAGE_AUX, NULL,
                         "aux is NULL but aux_len is %zu", aux_len);
        return KVX_ERR_INVALID_PARAM;
    }
    status = sender_check_layers(ctx, room, pages, n, l0, nl, ready, aux_len, last, why);
    if (status != KVX_OK) {
        return status;
    }
    if (n == 0) {
        return KVX_OK; /* nothing handed over */
    }
    if (!sender_hov_grow(room)) {
        failure_set_room(why, room->id, KVX_ERR_NO_MEMORY, KVX_STAGE_POST, NULL,
                         "no memory for hand-over %zu", room->nhov);
        return KVX_ERR_NO_MEMORY;
    }
    if (last && aux_len > 0) {
        room->aux = malloc(aux_len);
        if (room->aux == NULL) {
            failure_set_room(why, room->id, KVX_ERR_NO_MEMORY, KVX_STAGE_AUX, NULL,
                             "no memory for the aux of %zu bytes", aux_len);
            return KVX_ERR_NO_MEMORY;
        }
        memcpy(room->aux, aux, aux_len);
        room->aux_len = aux_len;
    }
    pos = room->lcount[l0];
    if (pos + n > room->nsrc) {
        memcpy(room->src + pos, pages, n * sizeof(uint32_t));
        room->nsrc = pos + n;
    }
    for (unsigned l = l0; l < l0 + nl; l++) {
        room->lcount[l] += (uint32_t)n;
    }
    room->nlp += n * nl;
    h = &room->hov[room->nhov++];
    *h = (handover_t){ pos, n, l0, nl, ready };
    if (ready == NULL && room->nready == room->nhov - 1) {
        room->nready = room->nhov;
    } else if (room->nready == room->nhov - 1) {
        ctx->ngated++; /* the first hand-over of the room that waits */
    }
    sender_post_fault(ctx, room);
    sender_maybe_start(ctx, room);
    sender_pump_all(ctx, room);
    return KVX_OK;
}

/* Moves the room's ready mark over the hand-overs whose events completed
 * (in order: a later one is posted after the ones before it); returns
 * whether it moved. A failed query fails the room. */
static int sender_room_events(kvx_ctx_t *ctx, room_t *room)
{
    size_t from = room->nready;
    kvx_failure_t q, f;

    while (room->nready < room->nhov && !room_terminal(room)) {
        handover_t *h = &room->hov[room->nready];
        kvx_status_t status = h->event == NULL ? KVX_OK : mem_cuda_event_done(h->event, &q);

        if (status == KVX_INPROGRESS) {
            break;
        }
        if (status != KVX_OK) {
            failure_set_room(&f, room->id, status, KVX_STAGE_POST, q.foreign,
                             "the ready event of layers %u..%u (pages %zu..%zu) failed", h->l0,
                             h->l0 + h->nl - 1, h->pos, h->pos + h->n - 1);
            room_fail(ctx, room, &f, 1);
            break;
        }
        h->event = NULL; /* done: never queried again */
        room->nready++;
    }
    if (room_terminal(room)) {
        room->nready = room->nhov; /* never posted: no event is queried again */
    }
    if (room->nready == room->nhov) {
        ctx->ngated--;
    }
    return room->nready != from;
}

unsigned sender_poll_events(kvx_ctx_t *ctx)
{
    room_t *room;
    unsigned busy = 0;

    if (ctx->ngated == 0) {
        return 0;
    }
    for (size_t pos = 0; ctx->ngated > 0 && (room = room_next(ctx, &pos)) != NULL;) {
        if (room->side != KVX_ROLE_PREFILL || room->nready == room->nhov) {
            continue;
        }
        if (sender_room_events(ctx, room)) {
            sender_pump_all(ctx, room);
        }
        busy++;
    }
    /* Busy while events are pending: a layer is posted the moment its
     * kernels are done, not at the next tick. */
    return busy;
}

/* Checks a grant against this room and the decode's pool before any page
 * of it is used: a peer writes only where its room was granted. */
static int sender_check_grant(kvx_ctx_t *ctx, target_t *t, const msg_t *m, const uint32_t *dst,
                              kvx_failure_t *f)
{
    room_t *room = t->room;
    const msg_prealloc_t *p = &m->u.prealloc;

    if ((p->writes != MSG_WRITES_NONE) != t->pair.writes) {
        failure_set_room(f, room->id, KVX_ERR_PROTOCOL, KVX_STAGE_PREALLOC, NULL,
                         "%s granted as %s, but the plan says it %s", t->peer->name,
                         p->writes ? "a writer" : "control only",
                         t->pair.writes ? "writes" : "does not write");
        return 0;
    }
    if (p->npages != room->npages_total) {
        failure_set_room(f, room->id, KVX_ERR_INVALID_PARAM, KVX_STAGE_PREALLOC, NULL,
                         "%s granted %u pages but the prefill announced %zu", t->peer->name,
                         p->npages, room->npages_total);
        return 0;
    }
    for (uint32_t i = 0; i < p->npages && t->pair.writes; i++) {
        if (dst[i] >= t->peer->num_pages) {
            failure_set_room(f, room->id, KVX_ERR_PAGE_RANGE, KVX_STAGE_PREALLOC, NULL,
                             "%s granted page %u, outside its pool of %zu pages", t->peer->name,
                             dst[i], t->peer->num_pages);
            return 0;
        }
    }
    if (p->aux_slot >= 0 && (!t->pair.aux_writer || (uint64_t)p->aux_slot >= t->peer->aux_slots)) {
        failure_set_room(f, room->id, KVX_ERR_AUX, KVX_STAGE_PREALLOC, NULL,
                         "%s granted aux slot %lld (it has %zu slots; aux writer: %s)",
                         t->peer->name, (long long)p->aux_slot, t->peer->aux_slots,
                         t->pair.aux_writer ? "yes" : "no");
        return 0;
    }
    return 1;
}

/* Fault injection when a grant arrives; returns 1 when it is not to be used. */
static int sender_prealloc_fault(kvx_ctx_t *ctx, room_t *room, target_t *t)
{
    fault_action_t act;

    switch (fault_at(ctx, KVX_STAGE_PREALLOC, room->id, &room->fault_seen, &act)) {
    case FAULT_FAIL:
        t->granted = 1;
        room->ngranted++;
        room_fail(ctx, room, &act.failure, 1);
        return 1;
    case FAULT_DROP:
        kvx_rwarn(room->id, "injected: the grant of %s is ignored", t->peer->name);
        return 1;
    case FAULT_DELAY:
        for (unsigned i = 0; i < room->ntargets; i++) {
            room->targets[i].hold_until = kvx_now_ns() + act.delay_ns;
        }
        return 0;
    default:
        return 0;
    }
}

void sender_take_prior(kvx_ctx_t *ctx, room_t *room, const room_t *closed)
{
    /* Only a room that failed can owe: one that succeeded heard every
     * grant. Without memory for the record the grants are this room's. */
    if (closed->state != KVX_ROOM_FAILED || (room->prior = malloc(sizeof(*room->prior))) == NULL) {
        return;
    }
    *room->prior = closed->failure;
    /* Until the closed room itself would have stopped answering
     * (room_answers_grants()). */
    room->prior_until = closed->entered + ctx->cfg.bootstrap_timeout;
    for (unsigned i = 0; i < room->ntargets; i++) {
        target_t *t = &room->targets[i];

        for (unsigned j = 0; j < closed->ntargets; j++) {
            t->owes_prior |= closed->targets[j].peer == t->peer && !closed->targets[j].granted;
        }
        if (t->owes_prior) {
            kvx_rdebug(room->id, "the closed room of this id owes %s an answer to its grant",
                       t->peer->name);
        }
    }
}

/* A grant the replaced room owed (room->prior): answered as that room would
 * have (its FAIL with this grant's incarnation, and that nothing was or
 * will be written), never adopted; the next grant from the rank is this
 * room's. The incarnation is dead here, so the decode's echo of its
 * failure is dropped (sender_msg_stale()). */
static int sender_answer_prior(kvx_ctx_t *ctx, room_t *room, target_t *t, const msg_t *m)
{
    if (!t->owes_prior) {
        return 0;
    }
    t->owes_prior = 0;
    if (room->prior == NULL || kvx_now_ns() > room->prior_until) {
        return 0;
    }
    kvx_rdebug(room->id, "answering the grant of %s (nonce %llx) for the closed room of this id",
               t->peer->name, (unsigned long long)m->hdr.nonce);
    room_send_failure(ctx, room, room->prior, t->peer, m->hdr.nonce, 0);
    if (t->pair.writes) {
        sender_send_to(ctx, t, MSG_DRAINED, m->hdr.nonce);
    }
    dead_add(ctx, m->hdr.nonce);
    return 1;
}

void sender_on_prealloc(kvx_ctx_t *ctx, room_t *room, peer_t *peer, const msg_t *m)
{
    target_t *t = NULL;
    kvx_failure_t f;

    for (unsigned i = 0; i < room->ntargets && t == NULL; i++) {
        t = room->targets[i].peer == peer ? &room->targets[i] : NULL;
    }
    if (t == NULL || t->granted) {
        kvx_rwarn(room->id, "ignoring %s PREALLOC from %s",
                  t == NULL ? "an unexpected" : "a second", peer->name);
        ctx->bad_msgs++;
        return;
    }
    if (sender_answer_prior(ctx, room, t, m)) {
        return;
    }
    t->nonce = m->hdr.nonce;
    if (room_terminal(room)) {
        /* The room failed before the grant came: the FAIL sent then could
         * not name this decode room's incarnation; say it again, and that
         * nothing was or will be written. */
        t->granted = 1;
        room->ngranted++;
        room_send_fail(ctx, room, peer, t->nonce, 0);
        if (t->pair.writes) {
            sender_send_drained(ctx, t);
        }
        return;
    }
    if (sender_prealloc_fault(ctx, room, t)) {
        return;
    }
    t->dst = malloc((size_t)m->u.prealloc.npages * sizeof(uint32_t));
    t->runs = malloc((size_t)m->u.prealloc.npages * sizeof(plan_run_t));
    if (t->dst == NULL || t->runs == NULL) {
        failure_set_room(&f, room->id, KVX_ERR_NO_MEMORY, KVX_STAGE_PREALLOC, NULL,
                         "no memory for the grant of %s", peer->name);
        room_fail(ctx, room, &f, 1);
        return;
    }
    /* Page ids only travel in a writer's grant: a control-only grant to a
     * rank the plan makes write carries none (sender_check_grant refuses it). */
    if (t->pair.writes && m->u.prealloc.writes != MSG_WRITES_NONE) {
        memcpy(t->dst, m->pages, (size_t)m->u.prealloc.npages * sizeof(uint32_t));
    }
    t->granted = 1;
    room->ngranted++;
    if (!sender_check_grant(ctx, t, m, t->dst, &f) ||
        (m->u.prealloc.writes == MSG_WRITES_MESSAGES && pack_use_messages(ctx, t, &f) != KVX_OK)) {
        room_fail(ctx, room, &f, 1);
        return;
    }
    t->aux_slot = m->u.prealloc.aux_slot;
    t->verify = t->pair.writes ? m->u.prealloc.verify : 0;
    t->verify_rate = m->u.prealloc.verify_rate;
    sender_send(ctx, t, MSG_ACCEPT);
    if (room->ngranted == room->ntargets) {
        room_set_state(ctx, room, KVX_ROOM_WAITING_FOR_INPUT);
    }
    sender_maybe_start(ctx, room);
    sender_pump_all(ctx, room);
}

/* ---- what the xfer floor tells the prefill machine (xfer/target.h) ---- */

static int sender_target_over(const target_t *t)
{
    return room_terminal(t->room);
}

static void sender_target_fail_room(kvx_ctx_t *ctx, target_t *t, const kvx_failure_t *f)
{
    room_fail(ctx, t->room, f, 1);
}

static void sender_target_hold(target_t *t)
{
    t->room->refs++;
}

static void sender_target_release(kvx_ctx_t *ctx, target_t *t)
{
    room_unref(ctx, t->room); /* t goes with the room when it is freed */
}

const xfer_ops_t room_xfer_ops = {
    .next_batch = sender_next_batch,
    .posted = sender_account,
    .done = sender_put_cb,
    .failed = sender_fail,
    .resume = sender_pump,
    .over = sender_target_over,
    .fail_room = sender_target_fail_room,
    .hold = sender_target_hold,
    .release = sender_target_release,
    .scattered = unpack_scattered,
    .scatter_failed = unpack_scatter_failed,
};

/* ---- the prefill side of the room table (room_side_t, room.h) ---- */

static void sender_notify_fail(kvx_ctx_t *ctx, room_t *room, uint64_t at)
{
    for (unsigned t = 0; t < room->ntargets; t++) {
        room_send_fail(ctx, room, room->targets[t].peer, room->targets[t].nonce, at);
    }
}

static void sender_side_tick(kvx_ctx_t *ctx, room_t *room, uint64_t now)
{
    sender_tick(ctx, room, now);
    sender_conclude_broken(ctx, room);
}

static void sender_side_free(kvx_ctx_t *ctx, room_t *room)
{
    sender_bury(ctx, room);
    free(room->prior);
    room->prior = NULL;
    for (unsigned t = 0; t < room->ntargets; t++) {
        free(room->targets[t].dst);
        free(room->targets[t].runs);
        free(room->targets[t].aux_row);
    }
    free(room->targets);
    room->targets = NULL;
}

static const char *sender_waiting_for(const kvx_ctx_t *ctx, const room_t *room, char *buf,
                                      size_t len)
{
    if (room->nlp < room->nlp_all) {
        return sender_missing(ctx, room, buf, len);
    }
    if (room->nready < room->nhov) {
        return sender_gated(room, buf, len);
    }
    return "the puts to complete";
}

const room_side_t sender_side = {
    .notify_fail = sender_notify_fail,
    .on_fail = sender_drain,
    .on_tick = sender_side_tick,
    .on_free = sender_side_free,
    .delivered = sender_delivered,
    .waiting_for = sender_waiting_for,
};
