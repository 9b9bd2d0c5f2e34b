/*
 * t_agree.c - room outcomes agreed by every TP rank, with the real reason.
 *
 *   t_agree inject    TP2 -> TP2, a put failure injected on prefill tp1 of one
 *                     room: all four ranks agree FAILED with the same origin,
 *                     stage and text; the decode learns within 100 ms
 *   t_agree diverge   TP ranks open rooms in different orders, some late, one
 *                     on one rank only: agreement completes without a hang,
 *                     the rest SUCCESS everywhere, the lone room not agreed
 *   t_agree deadline  expiry in BOOTSTRAPPING, WAITING_FOR_INPUT, TRANSFERRING
 *   t_agree abort     abort from the decode mid-transfer (the drain rule
 *                     checked by canary bytes) and from the prefill
 *   t_agree soak N    N rooms TP2 -> TP2 with KVX_FAULT's injected failures:
 *                     every room concluded and agreed identically on all four
 *                     ranks, 0 mismatched bytes, every failure the injected one
 *
 * The job layout comes from KVX_LAYOUT, fault rules from KVX_FAULT.
 */
#include <kvx.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

int tl_rank, tl_failures;

typedef struct job {
    kvx_ctx_t *ctx;
    kvx_identity_t id;
    kvp_geom_t g;
    void *bufs[64];
    unsigned comps;
    size_t num_pages;
} job_t;

static void job_start(job_t *j, size_t num_pages, unsigned page_size, unsigned head_dim)
{
    kvx_ctx_params_t p;
    kvx_failure_t why;
    char line[512];

    memset(j, 0, sizeof(*j));
    kvx_ctx_params_init(&p);
    p.kv.layers = 2;
    p.kv.page_size = page_size;
    p.kv.kv_heads = 4;
    p.kv.head_dim = head_dim;
    p.num_pages = num_pages;
    p.aux_slots = num_pages;
    p.aux_item_size = sizeof(uint64_t);
    if (kvx_ctx_create(MPI_COMM_WORLD, &p, &j->ctx, &why) != KVX_OK) {
        kvx_failure_format(&why, line, sizeof(line));
        fprintf(stderr, "rank %d: kvx_ctx_create: %s\n", tl_rank, line);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    kvx_ctx_identity(j->ctx, &j->id);
    j->comps = 2;
    j->num_pages = num_pages;
    j->g.kv = p.kv;
    j->g.num_pages = num_pages;
    j->g.elem = kvp_elem(p.kv.dtype);
    kvx_ctx_heads(j->ctx, &j->g.first_head, &j->g.heads);
    for (unsigned b = 0; b < p.kv.layers * j->comps; b++) {
        kvx_ctx_kv_buffer(j->ctx, b / j->comps, b % j->comps, &j->bufs[b], NULL);
    }
}

static int is_prefill(const job_t *j)
{
    return j->id.role == KVX_ROLE_PREFILL;
}

/* Opens room id on this rank with pages (decode: grant; prefill: compute the
 * pattern, then send it in nchunks chunks; nchunks 0 sends nothing). */
static void open_room(job_t *j, uint64_t id, const uint32_t *pages, size_t n, int nchunks)
{
    kvx_status_t st;

    if (!is_prefill(j)) {
        st = kvx_room_recv_open(j->ctx, id, 0, pages, n, (int64_t)(pages[0] % j->num_pages));
        TL_CHECK(st == KVX_OK, "recv_open %llu: %s", (unsigned long long)id, kvx_status_name(st));
        return;
    }
    st = kvx_room_send_open(j->ctx, id, 0, n);
    TL_CHECK(st == KVX_OK, "send_open %llu: %s", (unsigned long long)id, kvx_status_name(st));
    kvp_pages(&j->g, j->bufs, j->comps, id, pages, n, 0, 1);
    for (int c = 0, done = 0; c < nchunks; c++) {
        int len = c == nchunks - 1 ? (int)n - done : (int)n / nchunks;
        uint64_t aux = kvp_aux(id);
        int last = c == nchunks - 1;

        st = kvx_room_send_chunk(j->ctx, id, pages + done, (size_t)len, last ? &aux : NULL,
                                 last ? sizeof(aux) : 0);
        /* A room that already failed (an injected fault) refuses chunks. */
        TL_CHECK(st == KVX_OK || st == KVX_ERR_STATE, "send_chunk %llu: %s", (unsigned long long)id,
                 kvx_status_name(st));
        done += len;
    }
}

/* Decode: the room's bytes and aux row. */
static size_t verify_room(job_t *j, uint64_t id, const uint32_t *pages, size_t n)
{
    uint64_t aux = 0;
    size_t len = 0, bad = kvp_pages(&j->g, j->bufs, j->comps, id, pages, n, 0, 0);

    if (kvx_room_aux(j->ctx, id, &aux, sizeof(aux), &len) != KVX_OK || aux != kvp_aux(id)) {
        bad++;
    }
    return bad;
}

/* Every rank's string must equal rank 0's (over comm). */
static void same_string(MPI_Comm comm, const char *what, const char *mine)
{
    char buf[512] = { 0 }, *all;
    int size, rank;

    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    snprintf(buf, sizeof(buf), "%s", mine);
    all = malloc(sizeof(buf) * (size_t)size);
    MPI_Allgather(buf, sizeof(buf), MPI_CHAR, all, sizeof(buf), MPI_CHAR, comm);
    for (int r = 0; r < size; r++) {
        TL_CHECK(strcmp(all + sizeof(buf) * r, all) == 0, "%s: rank %d has '%s', rank 0 '%s'", what,
                 r, all + sizeof(buf) * r, all);
    }
    if (tl_rank == 0) {
        printf("%s on every rank: %s\n", what, all);
    }
    free(all);
}

/* ---- inject ------------------------------------------------------------ */

#define INJECT_ROOMS 20
#define INJECT_ID    107 /* KVX_FAULT names it: room=107 */

static void scenario_inject(void)
{
    job_t j;
    uint64_t ids[INJECT_ROOMS];
    uint32_t pages[INJECT_ROOMS][4];
    kvx_agreed_t out[INJECT_ROOMS];
    double t_fail = 0, t_local = 0, t_agreed = 0, times[3], *all;
    int size, concluded = 0;
    kvx_failure_t f;
    char line[512];

    job_start(&j, 256, 16, 32);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int r = 0; r < INJECT_ROOMS; r++) {
        ids[r] = 100 + (uint64_t)r;
        for (int p = 0; p < 4; p++) {
            pages[r][p] = (uint32_t)(r * 4 + p);
        }
        if (!is_prefill(&j)) {
            open_room(&j, ids[r], pages[r], 4, 0);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int r = 0; r < INJECT_ROOMS && is_prefill(&j); r++) {
        kvx_room_state_t st;

        open_room(&j, ids[r], pages[r], 4, 2);
        if (ids[r] == INJECT_ID && kvx_room_poll(j.ctx, ids[r], &st) == KVX_OK &&
            st == KVX_ROOM_FAILED) {
            t_fail = tl_now(); /* the injected put failure happened in send_chunk */
        }
    }
    /* Agreement rounds until every room concludes; note when the injected
     * room was seen FAILED locally and when it was agreed. */
    while (!concluded) {
        kvx_room_state_t st;
        int done = 1, all_done = 0;

        if (kvx_room_poll(j.ctx, INJECT_ID, &st) == KVX_OK && st == KVX_ROOM_FAILED &&
            t_local == 0) {
            t_local = tl_now();
        }
        TL_CHECK(tl_agree_round(j.ctx, ids, INJECT_ROOMS, out) == KVX_OK, "agreement round");
        for (int r = 0; r < INJECT_ROOMS; r++) {
            done &= out[r].status == KVX_OK &&
                    (out[r].state == KVX_ROOM_SUCCESS || out[r].state == KVX_ROOM_FAILED);
            if (ids[r] == INJECT_ID && out[r].status == KVX_OK && out[r].state == KVX_ROOM_FAILED &&
                t_agreed == 0) {
                t_agreed = tl_now();
            }
        }
        MPI_Allreduce(&done, &all_done, 1, MPI_INT, MPI_MIN, kvx_ctx_tp_comm(j.ctx));
        concluded = all_done;
    }
    for (int r = 0; r < INJECT_ROOMS; r++) {
        kvx_room_state_t want = ids[r] == INJECT_ID ? KVX_ROOM_FAILED : KVX_ROOM_SUCCESS;

        TL_CHECK(out[r].state == want, "room %llu agreed %s", (unsigned long long)ids[r],
                 kvx_room_state_name(out[r].state));
        if (!is_prefill(&j) && want == KVX_ROOM_SUCCESS) {
            TL_CHECK(verify_room(&j, ids[r], pages[r], 4) == 0, "room %llu bytes",
                     (unsigned long long)ids[r]);
        }
    }
    TL_CHECK(kvx_room_failure(j.ctx, INJECT_ID, &f) == KVX_OK, "no failure record");
    TL_CHECK(f.origin_rank == 1 && f.origin_role == KVX_ROLE_PREFILL && f.origin_instance == 0 &&
                 f.origin_tp_rank == 1 && f.stage == KVX_STAGE_POST &&
                 f.status == KVX_ERR_INJECTED && (f.flags & KVX_FAILURE_INJECTED),
             "root cause: %s", (kvx_failure_format(&f, line, sizeof(line)), line));
    f.count = 0; /* each instance counts its own ranks */
    kvx_failure_format(&f, line, sizeof(line));
    same_string(MPI_COMM_WORLD, "root cause", line);
    /* Timing: prefill tp1's failure time reaches every rank through rank 1. */
    times[0] = t_fail;
    times[1] = t_local;
    times[2] = t_agreed;
    all = malloc(sizeof(times) * (size_t)size);
    MPI_Allgather(times, 3, MPI_DOUBLE, all, 3, MPI_DOUBLE, MPI_COMM_WORLD);
    t_fail = all[3 * 1];
    if (!is_prefill(&j)) {
        printf("rank %d (decode tp%d): FAILED locally %.1f ms and agreed %.1f ms after the "
               "prefill's injected failure\n",
               tl_rank, j.id.tp_rank, t_local ? (t_local - t_fail) * 1e3 : -1.0,
               (t_agreed - t_fail) * 1e3);
        /* 0.1 s, wider under sanitizers and load (testlib.h): CI's TSan
         * run read 0.129 s with another sanitizer build running beside it. */
        double bound = 0.1 * tl_timeout_scale() * tl_load_factor();

        TL_CHECK(t_agreed - t_fail < bound, "decode learned after %.3f s (bound %.3f s)",
                 t_agreed - t_fail, bound);
    }
    free(all);
    kvx_ctx_destroy(j.ctx);
}

/* ---- diverge ----------------------------------------------------------- */

#define DIVERGE_ROOMS 24

static void scenario_diverge(void)
{
    job_t j;
    uint64_t ids[DIVERGE_ROOMS + 1];
    uint32_t pages[DIVERGE_ROOMS][2];
    kvx_agreed_t out[DIVERGE_ROOMS + 1];
    int opened[DIVERGE_ROOMS] = { 0 }, order[DIVERGE_ROOMS];
    uint64_t rng = 99 + (uint64_t)tl_rank;
    int rounds = 0, done = 0;

    job_start(&j, 256, 16, 32);
    /* TP rank 0 opens rooms in order; TP rank 1 in a shuffled order, and
     * the last 6 only after a few rounds. */
    for (int r = 0; r < DIVERGE_ROOMS; r++) {
        ids[r] = 500 + (uint64_t)r;
        pages[r][0] = (uint32_t)(2 * r);
        pages[r][1] = (uint32_t)(2 * r + 1);
        order[r] = r;
    }
    ids[DIVERGE_ROOMS] = 999; /* opened by decode tp0 only */
    for (int r = DIVERGE_ROOMS - 1; r > 0 && j.id.tp_rank == 1; r--) {
        int k = (int)(tl_rng(&rng) % (uint64_t)(r + 1)), t = order[r];

        order[r] = order[k];
        order[k] = t;
    }
    while (!done) {
        int all = 0, mine = 1;

        for (int i = 0; i < DIVERGE_ROOMS; i++) {
            int r = order[i];

            if (!opened[r] && (j.id.tp_rank == 0 || r < DIVERGE_ROOMS - 6 || rounds >= 3)) {
                open_room(&j, ids[r], pages[r], 2, 1);
                opened[r] = 1;
            }
        }
        if (rounds == 0 && !is_prefill(&j) && j.id.tp_rank == 0) {
            uint32_t lone = 200;

            open_room(&j, ids[DIVERGE_ROOMS], &lone, 1, 0);
        }
        TL_CHECK(tl_agree_round(j.ctx, ids, DIVERGE_ROOMS + 1, out) == KVX_OK, "round %d", rounds);
        rounds++;
        for (int r = 0; r < DIVERGE_ROOMS; r++) {
            mine &= out[r].status == KVX_OK && out[r].state == KVX_ROOM_SUCCESS;
        }
        mine = mine ? 1 : rounds > 20000 ? 2 : 0;
        MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, kvx_ctx_tp_comm(j.ctx));
        done = all > 0;
        TL_CHECK(mine != 2, "rooms not concluded after %d rounds", rounds);
    }
    for (int r = 0; r < DIVERGE_ROOMS && !is_prefill(&j); r++) {
        TL_CHECK(verify_room(&j, ids[r], pages[r], 2) == 0, "room %llu bytes",
                 (unsigned long long)ids[r]);
    }
    /* The lone room: held by one decode rank only, so never agreed. */
    if (!is_prefill(&j)) {
        kvx_status_t want = j.id.tp_rank == 0 ? KVX_INPROGRESS : KVX_ERR_NO_ROOM;

        TL_CHECK(out[DIVERGE_ROOMS].status == want, "lone room: %s",
                 kvx_status_name(out[DIVERGE_ROOMS].status));
        if (j.id.tp_rank == 0) {
            kvx_room_close(j.ctx, ids[DIVERGE_ROOMS]);
        }
    }
    if (tl_rank == 0) {
        printf("diverge: %d rooms agreed SUCCESS on every TP rank after %d rounds; the room only "
               "decode tp0 holds stays not agreed\n",
               DIVERGE_ROOMS, rounds);
    }
    kvx_ctx_destroy(j.ctx);
}

/* ---- deadline ---------------------------------------------------------- */

/* Rooms: 1 only the decode opens; 2 only the prefill opens; 3 both open, no
 * chunk; 4 one chunk of two. Deadlines are 300 ms (the case file). */
static void scenario_deadline(void)
{
    static const struct {
        uint64_t id;
        int decode_opens, prefill_opens, chunks;
        kvx_stage_t stage;
        const char *decode_text, *prefill_text;
    } rooms[] = {
        { 1, 1, 0, 0, KVX_STAGE_BOOTSTRAP, "BOOTSTRAPPING for 0.3", NULL },
        { 2, 0, 1, 0, KVX_STAGE_BOOTSTRAP, NULL, "BOOTSTRAPPING for 0.3" },
        { 3, 1, 1, 0, KVX_STAGE_WAIT, "WAITING_FOR_INPUT for 0.3", "WAITING_FOR_INPUT for 0.3" },
        { 4, 1, 1, 1, KVX_STAGE_TRANSFER, "TRANSFERRING for 0.3", "TRANSFERRING for 0.3" },
    };
    job_t j;
    double start;

    job_start(&j, 64, 16, 32);
    for (size_t i = 0; i < sizeof(rooms) / sizeof(rooms[0]); i++) {
        uint32_t pages[2] = { (uint32_t)(2 * i), (uint32_t)(2 * i + 1) };
        int opens = is_prefill(&j) ? rooms[i].prefill_opens : rooms[i].decode_opens;

        if (!opens) {
            continue;
        }
        if (is_prefill(&j)) {
            kvx_room_send_open(j.ctx, rooms[i].id, 0, 2);
            if (rooms[i].chunks) {
                kvx_room_send_chunk(j.ctx, rooms[i].id, pages, 1, NULL, 0);
            }
        } else {
            kvx_room_recv_open(j.ctx, rooms[i].id, 0, pages, 2, -1);
        }
    }
    start = tl_now();
    for (size_t i = 0; i < sizeof(rooms) / sizeof(rooms[0]); i++) {
        const char *text = is_prefill(&j) ? rooms[i].prefill_text : rooms[i].decode_text;
        kvx_room_state_t st = KVX_ROOM_BOOTSTRAPPING;
        kvx_failure_t f;
        char line[512];

        if (text == NULL) {
            continue;
        }
        while (kvx_room_poll(j.ctx, rooms[i].id, &st) == KVX_OK && st != KVX_ROOM_FAILED &&
               tl_now() - start < 5) {
            usleep(1000);
        }
        TL_CHECK(st == KVX_ROOM_FAILED, "room %llu is %s after 5 s",
                 (unsigned long long)rooms[i].id, kvx_room_state_name(st));
        if (kvx_room_failure(j.ctx, rooms[i].id, &f) != KVX_OK) {
            continue;
        }
        kvx_failure_format(&f, line, sizeof(line));
        printf("rank %d: %s\n", tl_rank, line);
        TL_CHECK(f.status == KVX_ERR_TIMEOUT && f.stage == rooms[i].stage, "%s", line);
        /* Either side's deadline may fire first; its record is the cause. */
        TL_CHECK(strstr(f.text, "for 0.3") != NULL && strstr(f.text, "waiting for") != NULL, "%s",
                 line);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    kvx_ctx_destroy(j.ctx);
}

/* ---- abort ------------------------------------------------------------- */

#define ABORT_PAGES 256 /* of 64 KiB per buffer: 64 MiB per room */

static void scenario_abort(void)
{
    job_t j;
    uint32_t pages[ABORT_PAGES];
    kvx_room_state_t st = KVX_ROOM_BOOTSTRAPPING;
    kvx_failure_t f;
    char line[512];
    int busy = 0;
    kvx_status_t cst;
    double start;

    job_start(&j, ABORT_PAGES + 8, 128, 64);
    for (int p = 0; p < ABORT_PAGES; p++) {
        pages[p] = (uint32_t)(ABORT_PAGES - 1 - p);
    }
    /* Room 1: the decode aborts while pages flow. */
    if (is_prefill(&j)) {
        kvx_room_send_open(j.ctx, 1, 0, ABORT_PAGES);
        for (int c = 0; c < ABORT_PAGES / 16; c++) {
            cst = kvx_room_send_chunk(j.ctx, 1, pages + 16 * c, 16, NULL, 0);
            if (cst != KVX_OK) {
                TL_CHECK(cst == KVX_ERR_STATE, "chunk: %s", kvx_status_name(cst));
                break;
            }
            usleep(500);
        }
        start = tl_now();
        while (kvx_room_poll(j.ctx, 1, &st) == KVX_OK && st != KVX_ROOM_FAILED &&
               tl_now() - start < 5) {
            usleep(1000);
        }
        kvx_room_failure(j.ctx, 1, &f);
        kvx_failure_format(&f, line, sizeof(line));
        printf("prefill: %s\n", line);
        TL_CHECK(f.stage == KVX_STAGE_ABORT && f.origin_role == KVX_ROLE_DECODE &&
                     strstr(f.text, "aborted by the decode: test abort") != NULL,
                 "%s", line);
        kvx_room_close(j.ctx, 1);
    } else {
        kvx_room_recv_open(j.ctx, 1, 0, pages, ABORT_PAGES, -1);
        start = tl_now();
        while (kvx_room_poll(j.ctx, 1, &st) == KVX_OK && st != KVX_ROOM_TRANSFERRING &&
               tl_now() - start < 5) {
            usleep(100);
        }
        TL_CHECK(st == KVX_ROOM_TRANSFERRING, "room 1 never started (%s)", kvx_room_state_name(st));
        usleep(2000);
        TL_CHECK(kvx_room_abort(j.ctx, 1, "test abort") == KVX_OK, "abort");
        /* The pages are the caller's again only when the writer confirmed. */
        while ((cst = kvx_room_close(j.ctx, 1)) == KVX_ERR_BUSY) {
            busy++;
            usleep(100);
        }
        TL_CHECK(cst == KVX_OK, "close: %s", kvx_status_name(cst));
        printf("decode: close was refused %d times while the writer drained\n", busy);
        /* Canary: any late write of room 1 would change these bytes. */
        for (unsigned b = 0; b < 2 * j.comps; b++) {
            memset(j.bufs[b], 0xa5, j.num_pages * kvx_ctx_page_bytes(j.ctx));
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    usleep(300000);
    if (!is_prefill(&j)) {
        size_t changed = 0, len = j.num_pages * kvx_ctx_page_bytes(j.ctx);

        for (unsigned b = 0; b < 2 * j.comps; b++) {
            for (size_t i = 0; i < len; i++) {
                changed += ((unsigned char *)j.bufs[b])[i] != 0xa5;
            }
        }
        TL_CHECK(changed == 0, "%zu canary bytes changed after the pages were released", changed);
        printf("decode: 0 of %zu canary bytes changed after release\n", len * 2 * j.comps);
    }
    /* Room 2: the prefill aborts; the decode learns the prefill's reason. */
    MPI_Barrier(MPI_COMM_WORLD);
    if (is_prefill(&j)) {
        kvx_room_send_open(j.ctx, 2, 0, 4);
        kvx_room_send_chunk(j.ctx, 2, pages, 2, NULL, 0);
        usleep(20000);
        TL_CHECK(kvx_room_abort(j.ctx, 2, "request cancelled") == KVX_OK, "abort 2");
        kvx_room_close(j.ctx, 2);
    } else {
        kvx_room_recv_open(j.ctx, 2, 0, pages, 4, -1);
        start = tl_now();
        while (kvx_room_poll(j.ctx, 2, &st) == KVX_OK && st != KVX_ROOM_FAILED &&
               tl_now() - start < 5) {
            usleep(1000);
        }
        kvx_room_failure(j.ctx, 2, &f);
        kvx_failure_format(&f, line, sizeof(line));
        printf("decode: %s\n", line);
        TL_CHECK(f.stage == KVX_STAGE_ABORT && f.origin_role == KVX_ROLE_PREFILL &&
                     strstr(f.text, "aborted by the prefill: request cancelled") != NULL,
                 "%s", line);
        while ((cst = kvx_room_close(j.ctx, 2)) == KVX_ERR_BUSY) {
            usleep(100);
        }
        TL_CHECK(cst == KVX_OK, "close 2: %s", kvx_status_name(cst));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    kvx_ctx_destroy(j.ctx);
}

/* ---- soak -------------------------------------------------------------- */

/* What every rank concluded about a room, compared across all ranks. */
typedef struct outcome {
    int32_t state, stage, origin, status;
} outcome_t;

static void scenario_soak(int nrooms)
{
    enum { WAVE = 256, MAXP = 8 };
    job_t j;
    tl_alloc_t alloc;
    uint64_t ids[WAVE];
    uint32_t *pages[WAVE];
    size_t npages[WAVE], bad = 0;
    kvx_agreed_t out[WAVE];
    outcome_t *mine = calloc((size_t)nrooms, sizeof(outcome_t)), *all = NULL;
    int size, failed = 0, not_injected = 0;
    double start = tl_now();

    job_start(&j, WAVE * MAXP + 16, 16, 16);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    tl_alloc_init(&alloc, j.num_pages, 7 + (uint64_t)j.id.role);
    for (int base = 0; base < nrooms; base += WAVE) {
        int n = nrooms - base < WAVE ? nrooms - base : WAVE;

        for (int i = 0; i < n; i++) {
            uint64_t rng = 31337u + (uint64_t)(base + i);

            ids[i] = 1000000 + (uint64_t)(base + i);
            npages[i] = 1 + tl_rng(&rng) % MAXP;
            pages[i] = tl_alloc_take(&alloc, npages[i]);
            open_room(&j, ids[i], pages[i], npages[i], 1 + (int)(npages[i] > 2));
        }
        TL_CHECK(tl_agree_all(j.ctx, ids, (size_t)n, out, 60.0), "wave at %d did not conclude",
                 base);
        for (int i = 0; i < n; i++) {
            outcome_t *o = &mine[base + i];
            kvx_failure_t f;
            kvx_status_t cst;

            o->state = out[i].state;
            if (out[i].state == KVX_ROOM_FAILED && kvx_room_failure(j.ctx, ids[i], &f) == KVX_OK) {
                o->stage = f.stage;
                o->origin = f.origin_rank;
                o->status = f.status;
                failed++;
                not_injected += !(f.flags & KVX_FAILURE_INJECTED);
            } else if (out[i].state == KVX_ROOM_SUCCESS && !is_prefill(&j)) {
                bad += verify_room(&j, ids[i], pages[i], npages[i]);
            }
            while ((cst = kvx_room_close(j.ctx, ids[i])) == KVX_ERR_BUSY) {
                usleep(100);
            }
            TL_CHECK(cst == KVX_OK, "close %llu: %s", (unsigned long long)ids[i],
                     kvx_status_name(cst));
            tl_alloc_give(&alloc, pages[i], npages[i]);
        }
    }
    if (tl_rank == 0) {
        all = malloc(sizeof(outcome_t) * (size_t)nrooms * (size_t)size);
    }
    MPI_Gather(mine, nrooms * (int)sizeof(outcome_t), MPI_BYTE, all,
               nrooms * (int)sizeof(outcome_t), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (tl_rank == 0) {
        int disagreed = 0;

        for (int r = 1; r < size; r++) {
            disagreed +=
                memcmp(all, all + (size_t)r * (size_t)nrooms, nrooms * sizeof(outcome_t)) != 0;
            for (int i = 0; i < nrooms && disagreed; i++) {
                outcome_t *a = &all[i], *b = &all[(size_t)r * (size_t)nrooms + (size_t)i];

                if (memcmp(a, b, sizeof(*a)) != 0) {
                    fprintf(stderr, "room %d: rank 0 %d/%d/%d, rank %d %d/%d/%d\n", i, a->state,
                            a->stage, a->origin, r, b->state, b->stage, b->origin);
                    break;
                }
            }
        }
        TL_CHECK(disagreed == 0, "%d ranks concluded rooms differently from rank 0", disagreed);
    }
    TL_CHECK(bad == 0, "%zu mismatched bytes in SUCCESS rooms", bad);
    TL_CHECK(not_injected == 0, "%d failures were not the injected ones", not_injected);
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (tl_rank == 0) {
        printf("soak: %d rooms in %.1f s: %d FAILED (all injected), %d SUCCESS, agreed "
               "identically on all %d ranks, %zu mismatched bytes\n",
               nrooms, tl_now() - start, failed, nrooms - failed, size, bad);
    }
    free(mine);
    free(all);
    free(alloc.free);
    kvx_ctx_destroy(j.ctx);
}

int main(int argc, char **argv)
{
    int total = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &tl_rank);
    if (argc < 2) {
        fprintf(stderr, "usage: t_agree inject|diverge|deadline|abort|soak N\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (strcmp(argv[1], "inject") == 0) {
        scenario_inject();
    } else if (strcmp(argv[1], "diverge") == 0) {
        scenario_diverge();
    } else if (strcmp(argv[1], "deadline") == 0) {
        scenario_deadline();
    } else if (strcmp(argv[1], "abort") == 0) {
        scenario_abort();
    } else if (strcmp(argv[1], "soak") == 0) {
        /* KVXT_SOAK_ROOMS: fewer rooms in sanitized builds (tests/sanitize.sh). */
        const char *n = getenv("KVXT_SOAK_ROOMS");

        scenario_soak(n != NULL && atoi(n) > 0 ? atoi(n) : argc > 2 ? atoi(argv[2]) : 20000);
    } else {
        fprintf(stderr, "t_agree: unknown scenario %s\n", argv[1]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Allreduce(&tl_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (tl_rank == 0) {
        printf("%s\n", total == 0 ? "PASS" : "FAIL");
    }
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
