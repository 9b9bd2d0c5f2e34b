/*
 * t_grant.c - a peer writes only where its room was granted (issue 9).
 *
 * The public API cannot send a corrupted grant (kvx_room_recv_open checks
 * its pages), so this test reaches into a real context (it links
 * src/libkvx_internal.la, like t_harness): on the prefill ranks it builds
 * PREALLOC messages as a decode rank would, passes them through
 * msg_decode() and protocol_dispatch() under the context lock, exactly as
 * the progress thread does with what arrives, and checks what the room
 * makes of them.
 *
 * Layout prefill:1x2,decode:1x1 with one KV head: prefill tp0 writes the
 * decode's pages and aux row, prefill tp1 holds the same head and only
 * talks. The decode's pool has 16 pages, the prefill's 64, so a page id can
 * pass the decoder (no pool of the job is that small) and still lie outside
 * the decode's pool.
 *
 * Every forged grant arrives after the room's pages were handed over, so a
 * grant that were used would post puts at once. For each, the room FAILS
 * at stage prealloc with the documented status and reason, posts no put
 * (kvx_room_info: puts and bytes 0), and the decode's pool keeps its fill:
 *   writer        page 40 of a 16-page pool     KVX_ERR_PAGE_RANGE
 *   writer        writes=0 (t_grant writes0)    KVX_ERR_PROTOCOL
 *   writer        3 pages for 4 announced       KVX_ERR_INVALID_PARAM
 *   writer        aux slot 9 of 4               KVX_ERR_AUX
 *   control only  writes=1 with pages           KVX_ERR_PROTOCOL
 *   control only  an aux slot                   KVX_ERR_AUX
 * And, without failing anything:
 *   page 70 (beyond every pool): refused by msg_decode, never dispatched
 *   a grant claiming to come from a prefill sibling: ignored
 *   a second grant of a granted room (other pages): ignored; the room
 *   completes into the pages of its real grant, byte-exact, and the other
 *   pages keep their fill.
 *
 * Usage: t_grant [writes0] (writes0: only the writer granted as control
 * only, which ASan shows reading past the message: an open finding).
 */
#include "config.h"

#include <kvx.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/msg.h"
#include "core/ctx/ctx.h"
#include "core/link/peer.h"
#include "core/room/protocol.h"
#include "core/room/room.h"
#include "core/room/sender.h"
#include "testlib.h"

int tl_rank, tl_failures;

#define DECODE_PAGES  16
#define PREFILL_PAGES 64
#define DECODE_RANK   2
#define POOL_FILL     0xc5
#define LIMIT_S       10.0

typedef tl_job_t job_t;

static void job_start(job_t *j)
{
    kvx_ctx_params_t p;

    kvx_ctx_params_init(&p);
    p.kv.layers = 2;
    p.kv.page_size = 4;
    p.kv.kv_heads = 1;
    p.kv.head_dim = 16;
    p.num_pages = tl_rank == DECODE_RANK ? DECODE_PAGES : PREFILL_PAGES;
    p.aux_slots = 4;
    p.aux_item_size = 8;
    tl_job_start(j, &p);
}

/* A PREALLOC as world rank from would send it, through the decoder and the
 * dispatcher, as the progress thread handles what arrives. Its nonce names a
 * decode incarnation of its own per room id, as a real decode's does (the
 * prefill drops messages of the incarnations of rooms it closed). */
static kvx_status_t inject(job_t *j, int from, uint64_t room, int64_t aux_slot, int writes,
                           const uint32_t *pages, size_t n, char *why, size_t why_len)
{
    size_t len;
    void *buf =
        msg_new_prealloc(from, room, 0x5eed00000000ull | room, aux_slot, writes, pages, n, &len);
    kvx_ctx_t *ctx = j->ctx;
    kvx_status_t st;
    msg_t m;

    pthread_mutex_lock(&ctx->lock);
    st = msg_decode(buf, len, &ctx->limits, &m, why, why_len);
    if (st == KVX_OK) {
        protocol_dispatch(ctx, peer_of_rank(ctx, from), &m, buf, len);
    }
    pthread_mutex_unlock(&ctx->lock);
    free(buf);
    return st;
}

/* The plan's view of the room's only target on this prefill rank. */
static plan_pair_t pair_of(job_t *j, uint64_t room)
{
    plan_pair_t pair;
    room_t *r;

    pthread_mutex_lock(&j->ctx->lock);
    r = room_find(j->ctx, room);
    memset(&pair, 0, sizeof(pair));
    if (r != NULL && r->ntargets == 1) {
        pair = r->targets[0].pair;
    }
    pthread_mutex_unlock(&j->ctx->lock);
    return pair;
}

static uint64_t bad_msgs(job_t *j)
{
    uint64_t n;

    pthread_mutex_lock(&j->ctx->lock);
    n = j->ctx->bad_msgs;
    pthread_mutex_unlock(&j->ctx->lock);
    return n;
}

/* Opens room id on this prefill rank and hands its 4 pages over: a grant
 * that were used would post puts at once. */
static void open_and_hand_over(job_t *j, uint64_t id)
{
    uint32_t src[4] = { 20, 21, 22, 23 };

    TL_CHECK(kvx_room_send_open(j->ctx, id, 0, 4) == KVX_OK, "send_open %llu",
             (unsigned long long)id);
    TL_CHECK(kvx_room_send_chunk(j->ctx, id, src, 4, NULL, 0) == KVX_OK, "chunk of %llu",
             (unsigned long long)id);
}

/* One forged grant that must fail the room with want and reason. */
static void forged(job_t *j, uint64_t id, const char *what, int64_t aux_slot, int writes,
                   const uint32_t *pages, size_t n, kvx_status_t want, const char *reason)
{
    kvx_room_info_t info;
    kvx_failure_t f;
    char why[256] = "";
    kvx_status_t st;

    open_and_hand_over(j, id);
    st = inject(j, DECODE_RANK, id, aux_slot, writes, pages, n, why, sizeof(why));
    TL_CHECK(st == KVX_OK, "%s: the decoder refused it: %s", what, why);
    TL_CHECK(kvx_room_failure(j->ctx, id, &f) == KVX_OK && f.status == want &&
                 f.stage == KVX_STAGE_PREALLOC && strcmp(f.text, reason) == 0,
             "%s: %s at %s: '%s', want %s: '%s'", what, kvx_status_name(f.status),
             kvx_stage_name(f.stage), f.text, kvx_status_name(want), reason);
    TL_CHECK(kvx_room_info(j->ctx, id, &info) == KVX_OK && info.puts == 0 && info.bytes == 0,
             "%s: %llu puts, %llu bytes posted", what, (unsigned long long)info.puts,
             (unsigned long long)info.bytes);
    printf("grant: rank %d | %-28s -> %s at %s | %s | puts %llu\n", tl_rank, what,
           kvx_status_name(f.status), kvx_stage_name(f.stage), f.text,
           (unsigned long long)info.puts);
    kvx_room_close(j->ctx, id);
}

/* A writer granted as control only (writes=0): its own mode, because
 * sender_on_prealloc() copies the grant's page ids, which such a message
 * does not carry, before it checks the grant (ASan: a heap-buffer-overflow
 * read; see mpi_tests/cases/grant_writes0.mpi). */
static void prefill_writes0(job_t *j)
{
    if (tl_rank == 0) {
        forged(j, 11, "writes=0 to a writer", 0, 0, NULL, 4, KVX_ERR_PROTOCOL,
               "decode[0].tp0 (rank 2) granted as control only, but the plan says it writes");
    }
}

static void prefill_forgeries(job_t *j)
{
    uint32_t out[4] = { 0, 1, 40, 2 }, ok[4] = { 8, 9, 10, 11 }, three[3] = { 8, 9, 10 };
    uint32_t beyond[4] = { 0, 1, 70, 2 };
    int sibling = 1 - tl_rank;
    kvx_room_state_t st;
    plan_pair_t pair;
    char why[256] = "";
    uint64_t before;

    open_and_hand_over(j, 9);
    pair = pair_of(j, 9);
    TL_CHECK(pair.talks && pair.writes == (tl_rank == 0) && pair.aux_writer == (tl_rank == 0),
             "plan: talks %d writes %d aux_writer %d", pair.talks, pair.writes, pair.aux_writer);
    /* Refused by the decoder: no pool of the job has 71 pages. */
    TL_CHECK(inject(j, DECODE_RANK, 9, -1, 1, beyond, 4, why, sizeof(why)) == KVX_ERR_PROTOCOL &&
                 strstr(why, "PREALLOC grants page 70; no pool has 71 pages") != NULL,
             "page 70: %s", why);
    printf("grant: rank %d | %-28s -> KVX_ERR_PROTOCOL (decoder) | %s\n", tl_rank,
           "page 70, beyond every pool", why);
    /* Not from the other side of the room: ignored. */
    before = bad_msgs(j);
    TL_CHECK(inject(j, sibling, 9, -1, pair.writes, ok, 4, why, sizeof(why)) == KVX_OK,
             "sibling's grant: %s", why);
    TL_CHECK(bad_msgs(j) == before + 1 && kvx_room_poll(j->ctx, 9, &st) == KVX_OK &&
                 st == KVX_ROOM_BOOTSTRAPPING,
             "a grant from prefill rank %d was not ignored (%s)", sibling, kvx_room_state_name(st));
    printf("grant: rank %d | %-28s -> ignored, room stays BOOTSTRAPPING\n", tl_rank,
           "from a prefill sibling");
    kvx_room_close(j->ctx, 9);
    if (pair.writes) {
        forged(j, 10, "page 40 of a 16-page pool", 0, 1, out, 4, KVX_ERR_PAGE_RANGE,
               "decode[0].tp0 (rank 2) granted page 40, outside its pool of 16 pages");
        forged(j, 12, "3 pages for 4 announced", 0, 1, three, 3, KVX_ERR_INVALID_PARAM,
               "decode[0].tp0 (rank 2) granted 3 pages but the prefill announced 4");
        forged(j, 13, "aux slot 9 of 4", 9, 1, ok, 4, KVX_ERR_AUX,
               "decode[0].tp0 (rank 2) granted aux slot 9 (it has 4 slots; aux writer: yes)");
    } else {
        forged(j, 20, "writes=1 to a control rank", -1, 1, ok, 4, KVX_ERR_PROTOCOL,
               "decode[0].tp0 (rank 2) granted as a writer, but the plan says it does not "
               "write");
        forged(j, 21, "aux slot to a non-aux-writer", 0, 0, NULL, 4, KVX_ERR_AUX,
               "decode[0].tp0 (rank 2) granted aux slot 0 (it has 4 slots; aux writer: no)");
    }
}

/* Room 1, granted for real: a second grant to other pages is ignored, and
 * the room writes where its first grant said. */
static void granted_room(job_t *j)
{
    uint32_t dst[4] = { 3, 4, 5, 6 }, src[4] = { 30, 31, 32, 33 }, other[4] = { 12, 13, 14, 15 };
    uint64_t aux = kvp_aux(1), got = 0, before;
    kvx_room_state_t st = KVX_ROOM_BOOTSTRAPPING;
    char why[256] = "";
    size_t len;

    if (tl_rank == DECODE_RANK) {
        TL_CHECK(kvx_room_recv_open(j->ctx, 1, 0, dst, 4, 0) == KVX_OK, "recv_open 1");
    } else {
        kvp_pages(&j->g, j->bufs, 2, 1, src, 4, 0, 1);
        TL_CHECK(kvx_room_send_open(j->ctx, 1, 0, 4) == KVX_OK, "send_open 1");
        st = tl_wait_state(j->ctx, 1, KVX_ROOM_WAITING_FOR_INPUT, LIMIT_S);
        TL_CHECK(st == KVX_ROOM_WAITING_FOR_INPUT, "room 1 not granted: %s",
                 kvx_room_state_name(st));
        before = bad_msgs(j);
        TL_CHECK(inject(j, DECODE_RANK, 1, 1, pair_of(j, 1).writes, other, 4, why, sizeof(why)) ==
                     KVX_OK,
                 "second grant: %s", why);
        TL_CHECK(bad_msgs(j) == before + 1 && kvx_room_poll(j->ctx, 1, &st) == KVX_OK &&
                     st == KVX_ROOM_WAITING_FOR_INPUT,
                 "a second grant was not ignored (%s)", kvx_room_state_name(st));
        printf("grant: rank %d | %-28s -> ignored, room stays WAITING_FOR_INPUT\n", tl_rank,
               "a second grant, pages 12-15");
        TL_CHECK(kvx_room_send_chunk(j->ctx, 1, src, 4, &aux, sizeof(aux)) == KVX_OK, "chunk 1");
    }
    st = tl_wait_state(j->ctx, 1, KVX_ROOM_SUCCESS, LIMIT_S);
    TL_CHECK(st == KVX_ROOM_SUCCESS, "room 1 is %s", kvx_room_state_name(st));
    if (tl_rank == DECODE_RANK) {
        TL_CHECK(kvp_pages(&j->g, j->bufs, 2, 1, dst, 4, 0, 0) == 0, "room 1's bytes");
        TL_CHECK(kvx_room_aux(j->ctx, 1, &got, sizeof(got), &len) == KVX_OK && got == aux,
                 "room 1's aux");
    }
    kvx_room_close(j->ctx, 1);
}

/* Decode: every page but the real grant's keeps the pool's fill. */
static void decode_pool_intact(job_t *j)
{
    size_t changed = 0;

    for (unsigned b = 0; b < 4; b++) {
        const unsigned char *p = j->bufs[b];

        for (size_t page = 0; page < DECODE_PAGES; page++) {
            for (size_t i = 0; i < j->page_bytes && (page < 3 || page > 6); i++) {
                changed += p[page * j->page_bytes + i] != POOL_FILL;
            }
        }
    }
    TL_CHECK(changed == 0, "%zu bytes outside the granted pages were written", changed);
    printf("grant: rank %d: the decode's pool outside pages 3-6 kept its fill (%zu bytes "
           "changed)\n",
           tl_rank, changed);
}

int main(int argc, char **argv)
{
    int writes0 = argc > 1 && strcmp(argv[1], "writes0") == 0;
    int total = 0, size;
    job_t j;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &tl_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (size != 3) {
        fprintf(stderr, "t_grant needs 3 ranks (KVX_LAYOUT=prefill:1x2,decode:1x1)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    job_start(&j);
    if (tl_rank == DECODE_RANK) {
        for (unsigned b = 0; b < 4; b++) {
            memset(j.bufs[b], POOL_FILL, DECODE_PAGES * j.page_bytes);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (tl_rank != DECODE_RANK && writes0) {
        prefill_writes0(&j);
    } else if (tl_rank != DECODE_RANK) {
        prefill_forgeries(&j);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (!writes0) {
        granted_room(&j);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (tl_rank == DECODE_RANK) {
        usleep(100000); /* anything late would have landed by now */
        decode_pool_intact(&j);
    }
    kvx_ctx_destroy(j.ctx);
    MPI_Allreduce(&tl_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (tl_rank == 0) {
        printf("t_grant: %s\n", total == 0 ? "PASS" : "FAIL");
    }
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
