/*
 * receiver.c - the decode side of a room: grants (PREALLOC) to the prefill
 * ranks that share heads with this rank, and completion when every writer
 * said DONE (and all its data messages were unpacked) and the aux row
 * carries this room.
 */
#include "config.h"

#include "core/ctx/ctx.h"
#include "core/ctx/stats.h"
#include "core/link/peer.h"
#include "core/room/fault.h"
#include "core/room/receiver.h"
#include "core/room/room.h"
#include "core/room/room_stats.h"
#include "core/xfer/cuda_stage.h"
#include "core/xfer/verify.h"
#include "util/failure.h"
#include "util/log.h"
#include "util/time.h"

#include <stdlib.h>
#include <string.h>

int receiver_verify_mode(const kvx_ctx_t *ctx)
{
    return ctx->pool.type == KVX_MEM_HOST || ctx->vdev != NULL ? ctx->cfg.verify : 0;
}

/* Sends the grant (PREALLOC) to every prefill rank of the room. */
static kvx_status_t receiver_grant(kvx_ctx_t *ctx, room_t *room)
{
    fault_action_t act;
    uint64_t at = 0;

    switch (fault_at(ctx, KVX_STAGE_PREALLOC, room->id, &room->fault_seen, &act)) {
    case FAULT_FAIL:
        room_fail(ctx, room, &act.failure, 1);
        return KVX_OK;
    case FAULT_DROP:
        kvx_rwarn(room->id, "injected: the grants are not sent");
        return KVX_OK;
    case FAULT_DELAY:
        at = kvx_now_ns() + act.delay_ns;
        break;
    default:
        break;
    }
    room->granted = 1;
    for (unsigned i = 0; i < room->nsources; i++) {
        source_t *s = &room->sources[i];
        size_t len;
        int writes = !s->pair.writes ? MSG_WRITES_NONE
                     : s->msgs       ? MSG_WRITES_MESSAGES
                                     : MSG_WRITES_PUTS;
        void *m = msg_new_prealloc(ctx->rank, room->id, room->nonce,
                                   s->pair.aux_writer ? room->aux_slot : -1, writes, room->pages,
                                   room->npages, &len);

        if (m == NULL) {
            return KVX_ERR_NO_MEMORY;
        }
        if (s->pair.writes && receiver_verify_mode(ctx) > 0) {
            msg_prealloc_verify(m, (uint32_t)receiver_verify_mode(ctx),
                                (uint32_t)ctx->cfg.verify_sample);
        }
        peer_send_at(ctx, s->peer, m, len, at);
    }
    return KVX_OK;
}

/* KVX_WRITES=auto on one host: a writer's runs of at least this many bytes
 * on average (per layer and component) come as data messages, which UCX
 * receives straight into the pages (unpack.c: one CMA read of the writer's
 * memory) instead of puts (UCX 1.13 emulates puts into ordinary memory with
 * active messages: a copy into its shared-memory FIFO and a copy out).
 * Chosen by measurement (docs/perf/notes/2026-12-07-landing.md): kvx-bench
 * put with ranks bound to a core each, kvx/raw as messages against puts,
 * medians of 3: 1 MiB rooms 1.03 against 0.95, 16 MiB 1.11 against 0.96
 * (a caller that polls in a loop); 256 KiB 0.51 against 0.37 (one that
 * sleeps between polls); level from 128 KiB rooms (64 KiB runs), behind
 * below. */
#define RECEIVER_MSG_MIN (64 * 1024)

/* Does a writer's part of the room come as data messages under
 * KVX_WRITES=auto, though its endpoint does RMA? On one host (every lane
 * shared memory), into a host pool kvx or the application allocated (puts
 * into a pool UCX allocated are one copy already), without a copy engine,
 * when its runs are contiguous in both pools (plan mode DIRECT) and
 * large. */
static int receiver_msgs_here(const kvx_ctx_t *ctx, const room_t *room, const source_t *s)
{
    plan_run_t two = { 0, 0, 2 };
    size_t so, doff, n = 0, runs = 1;
    plan_geom_t g;
    plan_iter_t it;

    if (ctx->cfg.writes != 0 || !s->peer->put_in_host || ctx->cstage.on ||
        ctx->pool.type != KVX_MEM_HOST || ctx->pool.ucx_owned) {
        return 0;
    }
    receiver_geom(ctx, s, &g);
    /* Not where the writer would gather strided runs (PACK): a gathered
     * message holds a slot of its staging ring until it completes, which a
     * message to a rank that died never does (no error handling on shared
     * memory), and the ring would stop for every other peer (pack.c). */
    if (plan_mode(&g) != PLAN_DIRECT) {
        return 0;
    }
    /* Its runs here, on average: scattered pages make many small messages,
     * each a rendezvous of its own (kvx-bench pages: 0.65-0.80 of raw at
     * half or all pages scattered, against 0.81-0.88 as puts). */
    for (size_t i = 1; i < room->npages; i++) {
        runs += room->pages[i] != room->pages[i - 1] + 1;
    }
    if (room->npages * g.pair_page_bytes < RECEIVER_MSG_MIN * runs) {
        return 0;
    }
    /* Every run (consecutive pages here) must be one range of the pool:
     * then each message lands straight (unpack_direct_at()), and this rank
     * needs no staging area for them. */
    plan_iter_init_sides(&it, &g, &two, PLAN_DST);
    return plan_iter_next(&it, &so, &doff, &n) && n == 2 * g.pair_page_bytes;
}

kvx_status_t receiver_open(kvx_ctx_t *ctx, room_t *room, const uint32_t *pages, size_t npages,
                           int64_t aux_slot)
{
    const kvl_t *pkvl = &ctx->kvls[KVX_ROLE_PREFILL][room->peer_instance];
    unsigned n = 0;

    room->sources = calloc((size_t)pkvl->tp, sizeof(source_t));
    room->pages = malloc(npages * sizeof(uint32_t));
    if (room->sources == NULL || room->pages == NULL) {
        return KVX_ERR_NO_MEMORY;
    }
    memcpy(room->pages, pages, npages * sizeof(uint32_t));
    room->npages = npages;
    room->aux_slot = aux_slot;
    /* A nonce names this incarnation of the room id, so a late message of
     * an earlier room with the same id is recognized and dropped. */
    room->nonce = ((uint64_t)(uint32_t)ctx->rank << 32) | (uint32_t)++ctx->next_nonce;
    for (int p = 0; p < pkvl->tp; p++) {
        source_t *s = &room->sources[n];

        plan_pair(pkvl, p, &ctx->my, ctx->tp_rank, &s->pair);
        if (!s->pair.talks) {
            continue;
        }
        s->peer =
            peer_of_rank(ctx, joblayout_rank(&ctx->job, KVX_ROLE_PREFILL, room->peer_instance, p));
        /* Pages of a writer whose endpoint has no native RMA come as data
         * messages (KVX_WRITES), and large runs on one host: this rank
         * chooses, the grant tells. */
        s->msgs = s->pair.writes && (s->peer->msg_writes || receiver_msgs_here(ctx, room, s));
        room->nwriters += s->pair.writes;
        n++;
    }
    room->nsources = n;
    return receiver_grant(ctx, room);
}

/* The aux row must carry this room (id and incarnation) and fit its slot. */
static int receiver_check_aux(kvx_ctx_t *ctx, room_t *room, kvx_failure_t *f)
{
    msg_aux_header_t h;

    if (room->aux_slot < 0) {
        return 1;
    }
    memcpy(&h, (char *)ctx->pool.aux + (size_t)room->aux_slot * ctx->pool.aux_stride, sizeof(h));
    if (h.room != room->id || h.nonce != (uint32_t)room->nonce || h.len > ctx->aux_item_size) {
        failure_set_room(f, room->id, KVX_ERR_AUX, KVX_STAGE_AUX, NULL,
                         "aux slot %lld holds a row of room %llu (%u bytes), not of this room",
                         (long long)room->aux_slot, (unsigned long long)h.room, h.len);
        return 0;
    }
    return 1;
}

/* SUCCESS on this decode rank: every writer's puts landed and the aux row
 * is this room's. The prefill ranks are told (RECEIVED): a prefill rank is
 * SUCCESS only then; the instance's agreed outcome follows (AGREED or
 * VERDICT, agree_send_verdict()) for a prefill rank that needs it. */
static void receiver_succeed(kvx_ctx_t *ctx, room_t *room)
{
    fault_action_t act;

    room_set_state(ctx, room, KVX_ROOM_SUCCESS);
    room->pages_state = KVX_PAGES_RELEASED;
    switch (fault_at(ctx, KVX_STAGE_NOTIFY, room->id, &room->fault_seen, &act)) {
    case FAULT_DROP:
        kvx_rwarn(room->id, "injected: this rank's outcome notices are not sent");
        room->notify_at = UINT64_MAX;
        return;
    case FAULT_DELAY:
        room->notify_at = kvx_now_ns() + act.delay_ns;
        break;
    default:
        break;
    }
    for (unsigned i = 0; i < room->nsources; i++) {
        size_t len;
        void *m = msg_new(MSG_RECEIVED, ctx->rank, room->id, room->nonce, &len);

        if (m != NULL) {
            peer_send_at(ctx, room->sources[i].peer, m, len, room->notify_at);
        }
    }
}

static void receiver_all_done(kvx_ctx_t *ctx, room_t *room)
{
    fault_action_t act;
    kvx_failure_t f;

    switch (fault_at(ctx, KVX_STAGE_COMPLETION, room->id, &room->fault_seen, &act)) {
    case FAULT_FAIL:
        room_fail(ctx, room, &act.failure, 1);
        return;
    default:
        break;
    }
    if (receiver_check_aux(ctx, room, &f)) {
        receiver_succeed(ctx, room);
    } else {
        room_fail(ctx, room, &f, 1);
    }
}

/* Pages are safe once every writer that did not complete confirmed it has
 * nothing in flight, and no copy of kvx's own into them is (staged path). */
void receiver_update_pages(kvx_ctx_t *ctx, room_t *room)
{
    if (room->state != KVX_ROOM_FAILED || room->pages_state != KVX_PAGES_DRAINING ||
        (ctx->cstage.on && cstage_room_busy(ctx, room->id, room->nonce))) {
        return;
    }
    for (unsigned i = 0; i < room->nsources && room->granted; i++) {
        const source_t *s = &room->sources[i];

        /* UCX still receives its data into the pages: only a writer whose
         * process is gone from this machine can no longer be read from. */
        if (s->direct > 0 && !peer_dead_here(s->peer)) {
            return;
        }

        /* A writer of data messages cannot touch the pages any more:
         * what it still sends for a failed room is dropped (unpack.c). */
        if (s->pair.writes && !s->done && !s->drained && !s->msgs) {
            return;
        }
    }
    room->pages_state = KVX_PAGES_RELEASED;
    stats_pages_released(ctx, room);
    kvx_rdebug(room->id, "pages released: every writer confirmed it stopped");
}

void receiver_on_fail(kvx_ctx_t *ctx, room_t *room)
{
    room->pages_state = KVX_PAGES_DRAINING;
    receiver_update_pages(ctx, room);
}

/* A prefill instance that cannot conclude a room (one of its TP ranks never
 * opened it, or closed it before the instance agreed: agree_conclude_unheld())
 * says so with its record. The decode instance decides the outcome for both,
 * and it cannot be SUCCESS: the room fails here with that record, and where
 * it is SUCCESS here already it counts FAILED with it in this instance's
 * rounds (agree_sample()), so that every rank of both instances concludes
 * FAILED with one record within rounds, not at the bootstrap deadline of a
 * sibling waiting for the pages of the rank that lacks the room. An agreed
 * room was told to the prefill already. */
static void receiver_on_verdict(kvx_ctx_t *ctx, room_t *room, const peer_t *peer,
                                const kvx_failure_t *f)
{
    if (room->agreed) {
        return;
    }
    if (!room_terminal(room)) {
        room_fail(ctx, room, f, 1);
    } else if (room->state == KVX_ROOM_SUCCESS && !room->prefill_failed) {
        kvx_rinfo(room->id, "SUCCESS here, but %s says its instance cannot conclude it: %s",
                  peer->name, f->text);
        room->failure = *f;
        room->failure.room_id = room->id;
        room->failure.has_room = 1;
    }
    room->prefill_failed = 1;
}

void receiver_tick(kvx_ctx_t *ctx, room_t *room, uint64_t now)
{
    char pages[256];
    size_t o = 0;

    if (room->pages_state != KVX_PAGES_DRAINING || room_age(room, now) <= ctx->cfg.drain_timeout) {
        return;
    }
    room->pages_state = KVX_PAGES_QUARANTINED;
    stats_pages_quarantined(ctx, room);
    for (size_t i = 0; i < room->npages && o < sizeof(pages) - 16; i++) {
        o += (size_t)snprintf(pages + o, sizeof(pages) - o, "%s%u", i ? "," : "", room->pages[i]);
    }
    kvx_rerror(room->id,
               "%zu pages quarantined: a writer did not confirm within %.1f s that nothing is in "
               "flight; never reuse pages %s%s",
               room->npages, kvx_ns_to_s(ctx->cfg.drain_timeout), pages,
               o >= sizeof(pages) - 16 ? ",..." : "");
}

static const char *receiver_comp_name(const kvx_ctx_t *ctx, unsigned comp)
{
    return ctx->my.comps == 1 ? "latent" : comp == 0 ? "K" : "V";
}

/* An injected corruption (stage verify, effect corrupt): one byte of what
 * landed from this writer flips, as a bad NIC or DMA would have it. */
static void receiver_corrupt(kvx_ctx_t *ctx, room_t *room, const verify_units_t *u,
                             const verify_side_t *side)
{
    unsigned layer, comp;
    size_t pos;
    unsigned char *b = verify_pick_byte(u, side, ctx->rank, &layer, &comp, &pos);
    kvx_failure_t why;

    if (side->dev == NULL) {
        *b ^= 0x20;
    } else if (verify_dev_xor(side->dev, b, 0x20, &why) != KVX_OK) {
        kvx_rwarn(room->id, "injected: cannot flip a byte of device memory: %s", why.text);
        return;
    }
    kvx_rwarn(room->id, "injected: flipped a byte of layer %u %s page %u after it landed", layer,
              receiver_comp_name(ctx, comp), room->pages[pos]);
}

/* KVX_VERIFY: digests what landed from writer s the way it digested what it
 * sent, and compares. Returns 0 when the room failed (KVX_ERR_CORRUPT
 * naming the first unit that differs; KVX_ERR_PROTOCOL for a DONE that
 * does not carry what the grant asked). */
static int receiver_verify(kvx_ctx_t *ctx, room_t *room, source_t *s)
{
    int mode = receiver_verify_mode(ctx);
    verify_units_t u = { room->id,      ctx->my.kv.layers,
                         ctx->my.comps, s->pair.nheads,
                         room->pages,   room->npages,
                         mode,          (unsigned)ctx->cfg.verify_sample };
    verify_side_t side = { &ctx->my,    ctx->num_pages,   ctx->pool.buf,
                           room->pages, s->pair.dst_head, ctx->vdev };
    fault_action_t act;
    kvx_failure_t f;
    uint64_t *mine;
    size_t n;

    if (mode == 0) {
        return 1;
    }
    if (s->dverify == 0) {
        stats_verified(ctx, 0, 1); /* the writer could not digest: its pool is on a device */
        return 1;
    }
    n = verify_checked(&u);
    if (s->dverify != (uint32_t)mode || s->ndigests != n ||
        s->has_aux != (room->aux_slot >= 0 && s->pair.aux_writer)) {
        failure_set_room(&f, room->id, KVX_ERR_PROTOCOL, KVX_STAGE_VERIFY, NULL,
                         "%s sent %u digests in mode %u (aux %d); this rank asked for %zu in "
                         "mode %d (aux %d)",
                         s->peer->name, s->ndigests, s->dverify, s->has_aux, n, mode,
                         room->aux_slot >= 0 && s->pair.aux_writer);
        room_fail(ctx, room, &f, 1);
        return 0;
    }
    switch (fault_at(ctx, KVX_STAGE_VERIFY, room->id, &room->fault_seen, &act)) {
    case FAULT_CORRUPT:
        receiver_corrupt(ctx, room, &u, &side);
        break;
    case FAULT_FAIL:
        room_fail(ctx, room, &act.failure, 1);
        return 0;
    default:
        break;
    }
    mine = malloc((n + 1) * sizeof(uint64_t));
    if (mine == NULL) {
        failure_set_room(&f, room->id, KVX_ERR_NO_MEMORY, KVX_STAGE_VERIFY, NULL,
                         "no memory to check %zu units from %s", n, s->peer->name);
        room_fail(ctx, room, &f, 1);
        return 0;
    }
    if (verify_digest(&u, &side, mine, &f) != KVX_OK) {
        char text[sizeof(f.text)];

        snprintf(text, sizeof(text), "%s", f.text);
        failure_set_room(&f, room->id, f.status, KVX_STAGE_VERIFY, NULL,
                         "cannot read back what landed from %s to check it: %.200s", s->peer->name,
                         text);
        free(mine);
        room_fail(ctx, room, &f, 1);
        return 0;
    }
    for (size_t j = 0, k = 0; j < n; k++) {
        unsigned layer, comp;
        size_t pos, len;

        if (!verify_selected(&u, k)) {
            continue;
        }
        if (mine[j] == s->digests[j]) {
            j++;
            continue;
        }
        stats_verified(ctx, j + 1, 0); /* compared, up to the first that differs */
        verify_unit(&u, k, &layer, &comp, &pos, &len);
        if (len == 1) {
            failure_set_room(&f, room->id, KVX_ERR_CORRUPT, KVX_STAGE_VERIFY, NULL,
                             "layer %u %s page %u from %s does not match what was sent", layer,
                             receiver_comp_name(ctx, comp), room->pages[pos], s->peer->name);
        } else {
            failure_set_room(&f, room->id, KVX_ERR_CORRUPT, KVX_STAGE_VERIFY, NULL,
                             "layer %u %s pages %u-%u from %s do not match what was sent", layer,
                             receiver_comp_name(ctx, comp), room->pages[pos],
                             room->pages[pos + len - 1], s->peer->name);
        }
        free(mine);
        room_fail(ctx, room, &f, 1);
        return 0;
    }
    free(mine);
    if (s->has_aux) {
        msg_aux_header_t h;
        const char *slot =
            (const char *)ctx->pool.aux + (size_t)room->aux_slot * ctx->pool.aux_stride;

        memcpy(&h, slot, sizeof(h));
        if (h.len > ctx->aux_item_size ||
            verify_aux(room->id, slot + sizeof(h), h.len) != s->aux_digest) {
            stats_verified(ctx, n + 1, 0);
            failure_set_room(&f, room->id, KVX_ERR_CORRUPT, KVX_STAGE_VERIFY, NULL,
                             "the aux row in slot %lld from %s does not match what was sent",
                             (long long)room->aux_slot, s->peer->name);
            room_fail(ctx, room, &f, 1);
            return 0;
        }
    }
    stats_verified(ctx, n + (size_t)s->has_aux, 0);
    return 1;
}

/* ---- what a source owes in data messages (room/unpack.c checks them) ---- */

void receiver_geom(const kvx_ctx_t *ctx, const source_t *s, plan_geom_t *g)
{
    plan_geom_init(g, s->peer->kvl, s->peer->num_pages, &ctx->my, ctx->num_pages, &s->pair);
}

/* Bytes of one page a writer sends this rank in data messages; 0 when it
 * does not send any (it puts). */
size_t receiver_msg_page_bytes(const kvx_ctx_t *ctx, const source_t *s)
{
    plan_geom_t g;

    if (!s->pair.writes) {
        return 0;
    }
    receiver_geom(ctx, s, &g);
    switch (s->msgs ? PLAN_UNPACK : cstage_mode(ctx, plan_mode(&g))) {
    case PLAN_UNPACK:
    case PLAN_STAGED:
        return g.pair_page_bytes;
    default:
        return 0;
    }
}

/* Bytes a writer sends this rank in data messages over the whole room. */
uint64_t receiver_msg_bytes(const kvx_ctx_t *ctx, const room_t *room, const source_t *s)
{
    return (uint64_t)room->npages * receiver_msg_page_bytes(ctx, s) * ctx->my.kv.layers *
           ctx->my.comps;
}

/* Does a writer of data messages owe this room its aux row? */
int receiver_owes_aux(const room_t *room, const source_t *s)
{
    return s->msgs && s->pair.aux_writer && room->aux_slot >= 0;
}

/* Every byte the source sends to be unpacked here was unpacked. */
static int receiver_unpacked_all(kvx_ctx_t *ctx, const room_t *room, const source_t *s)
{
    return s->unpacked == receiver_msg_bytes(ctx, room, s) &&
           (!receiver_owes_aux(room, s) || s->aux_in);
}

/* DONE may overtake the writer's data messages (unpack.c): the writer is
 * complete when both are in, and what landed is what it sent (KVX_VERIFY). */
void receiver_source_complete(kvx_ctx_t *ctx, room_t *room, source_t *s)
{
    if (!s->done || s->complete || room_terminal(room) || !receiver_unpacked_all(ctx, room, s)) {
        return;
    }
    if (!receiver_verify(ctx, room, s)) {
        return;
    }
    s->complete = 1;
    if (++room->ndone == room->nwriters) {
        receiver_all_done(ctx, room);
    }
}

void receiver_on_msg(kvx_ctx_t *ctx, room_t *room, peer_t *peer, const msg_t *m)
{
    source_t *s = NULL;

    for (unsigned i = 0; i < room->nsources && s == NULL; i++) {
        s = room->sources[i].peer == peer ? &room->sources[i] : NULL;
    }
    if (s == NULL) {
        kvx_rwarn(room->id, "ignoring %s from %s, which is not a source of this room",
                  msg_type_name(m->hdr.type), peer->name);
        ctx->bad_msgs++;
        return;
    }
    if (m->hdr.type == MSG_VERDICT) {
        receiver_on_verdict(ctx, room, peer, &m->u.failure); /* terminal or not */
        return;
    }
    /* DRAINED, and DONE (the writer flushed), prove nothing of this writer
     * is in flight, whatever happened to the room meanwhile. */
    if (m->hdr.type == MSG_DRAINED || (m->hdr.type == MSG_DONE && room_terminal(room))) {
        s->drained = 1;
        receiver_update_pages(ctx, room);
        return;
    }
    if (room_terminal(room)) {
        return;
    }
    switch (m->hdr.type) {
    case MSG_ACCEPT:
        if (!s->accepted) {
            s->accepted = 1;
            if (++room->naccepted == room->nsources) {
                room_set_state(ctx, room, KVX_ROOM_WAITING_FOR_INPUT);
            }
        }
        break;
    case MSG_START:
        room_set_state(ctx, room, KVX_ROOM_TRANSFERRING);
        break;
    case MSG_DONE:
        if (!s->pair.writes || s->done) {
            kvx_rwarn(room->id, "ignoring an unexpected DONE from %s", peer->name);
            ctx->bad_msgs++;
            break;
        }
        if (m->u.done.ndigests > 0 &&
            (s->digests = malloc((size_t)m->u.done.ndigests * sizeof(uint64_t))) == NULL) {
            kvx_failure_t f;

            failure_set_room(&f, room->id, KVX_ERR_NO_MEMORY, KVX_STAGE_VERIFY, NULL,
                             "no memory for %u digests from %s", m->u.done.ndigests, peer->name);
            room_fail(ctx, room, &f, 1);
            break;
        }
        if (s->digests != NULL) {
            memcpy(s->digests, m->digests, (size_t)m->u.done.ndigests * sizeof(uint64_t));
        }
        s->ndigests = m->u.done.ndigests;
        s->dverify = m->u.done.verify;
        s->aux_digest = m->u.done.aux;
        s->has_aux = (int)m->u.done.has_aux;
        s->done = 1;
        receiver_source_complete(ctx, room, s);
        break;
    default:
        break;
    }
}

/* ---- the decode side of the room table (room_side_t, room.h) ---- */

static void receiver_notify_fail(kvx_ctx_t *ctx, room_t *room, uint64_t at)
{
    for (unsigned s = 0; s < room->nsources; s++) {
        room_send_fail(ctx, room, room->sources[s].peer, room->nonce, at);
    }
}

static void receiver_side_fail(kvx_ctx_t *ctx, room_t *room)
{
    if (room->user_open) {
        receiver_on_fail(ctx, room);
    }
}

static void receiver_side_free(kvx_ctx_t *ctx, room_t *room)
{
    (void)ctx;
    for (unsigned i = 0; room->sources != NULL && i < room->nsources; i++) {
        free(room->sources[i].digests);
    }
    free(room->sources);
    room->sources = NULL;
}

static int receiver_side_delivered(const room_t *room)
{
    (void)room;
    return 0; /* the decode's deadlines hold until it concludes */
}

static const char *receiver_waiting_for(const kvx_ctx_t *ctx, const room_t *room, char *buf,
                                        size_t len)
{
    (void)ctx, (void)room, (void)buf, (void)len;
    return "every writer to complete";
}

const room_side_t receiver_side = {
    .notify_fail = receiver_notify_fail,
    .on_fail = receiver_side_fail,
    .on_tick = receiver_tick,
    .on_free = receiver_side_free,
    .delivered = receiver_side_delivered,
    .waiting_for = receiver_waiting_for,
};
