/*
 * t_join.c - a decode instance joins a running job (docs/user/join.md).
 *
 *   t_join job ROOMS JOINED     the running job, prefill:1x1,decode:1x1 with a
 *                               job key: prefill[0] sends ROOMS rooms to
 *                               decode[0]; once decode[1] has joined
 *                               (kvx_ctx_pair_status), every other new room
 *                               goes to it, JOINED in all
 *   t_join joiner JOINED        the joiner, its own mpirun (KVX_LAYOUT=decode:1x1,
 *                               KVX_JOIN=the job's address): joins as decode[1]
 *                               and receives JOINED rooms
 *   t_join refused STATUS TEXT [PAGE_SIZE]
 *                               a joiner the job must refuse: kvx_ctx_create()
 *                               fails with STATUS and a reason holding TEXT
 *
 * Every room is 4 pages of the kvpattern.h content of its id, checked byte
 * by byte on the decode rank that receives it; room ids say where a room
 * goes (decode[0]: 1..ROOMS, decode[1]: 1001..1000+JOINED), so each side
 * opens its rooms in order without asking the other.
 */
#include "kvpattern.h"
#include "testlib.h"

#include <kvx.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int tl_rank, tl_failures;
static tl_job_t J;

#define JOIN_PAGES 4
#define JOINED_ID0 1000

static void params(kvx_ctx_params_t *p, unsigned page_size)
{
    kvx_ctx_params_init(p);
    p->kv.layers = 2;
    p->kv.page_size = page_size;
    p->kv.kv_heads = 2;
    p->kv.head_dim = 16;
    p->kv.dtype = KVX_DTYPE_BF16;
    p->num_pages = 64;
}

/* A joiner that must be refused: the status and the reason's words. */
static void refused(const char *status, const char *text, unsigned page_size)
{
    kvx_ctx_params_t p;
    kvx_failure_t why;
    kvx_ctx_t *ctx = NULL;
    kvx_status_t st;
    char line[512];

    params(&p, page_size);
    st = kvx_ctx_create(MPI_COMM_WORLD, &p, &ctx, &why);
    kvx_failure_format(&why, line, sizeof(line));
    TL_CHECK(
        st != KVX_OK && strcmp(kvx_status_name(st), status) == 0 && strstr(why.text, text) != NULL,
        "kvx_ctx_create: %s (%s); wanted %s with \"%s\"", kvx_status_name(st), line, status, text);
    printf("t_join refused: %s\n", line);
    if (st == KVX_OK) {
        kvx_ctx_destroy(ctx);
    }
}

static void start(void)
{
    kvx_ctx_params_t p;

    params(&p, 4);
    tl_job_start(&J, &p);
}

static void send_room(uint64_t id, int decode)
{
    uint32_t pages[JOIN_PAGES];
    kvx_room_state_t st;
    kvx_status_t cs;
    double t0;

    for (unsigned i = 0; i < JOIN_PAGES; i++) {
        pages[i] = i;
    }
    kvp_pages(&J.g, J.bufs, J.comps, id, pages, JOIN_PAGES, 0, 1);
    TL_CHECK(kvx_room_send_open(J.ctx, id, decode, JOIN_PAGES) == KVX_OK, "send_open %llu",
             (unsigned long long)id);
    TL_CHECK(kvx_room_send_chunk(J.ctx, id, pages, JOIN_PAGES, NULL, 0) == KVX_OK,
             "send_chunk %llu", (unsigned long long)id);
    st = tl_wait_state(J.ctx, id, KVX_ROOM_SUCCESS, 60);
    if (st != KVX_ROOM_SUCCESS) {
        char line[512];

        TL_CHECK(0, "room %llu to decode[%d] is %s: %s", (unsigned long long)id, decode,
                 kvx_room_state_name(st), tl_failure_line(J.ctx, id, line, sizeof(line)));
    }
    t0 = tl_now();
    while ((cs = kvx_room_close(J.ctx, id)) == KVX_ERR_BUSY && tl_now() - t0 < 30) {
        usleep(1000);
    }
    TL_CHECK(cs == KVX_OK, "close %llu: %s", (unsigned long long)id, kvx_status_name(cs));
}

/* The decode side of rooms [first, first + n): each opened, landed, checked. */
static void receive(uint64_t first, int n)
{
    for (int k = 0; k < n; k++) {
        uint64_t id = first + (uint64_t)k;
        uint32_t pages[JOIN_PAGES];
        kvx_room_state_t st;
        kvx_status_t cs;
        size_t bad;
        double t0;

        for (unsigned i = 0; i < JOIN_PAGES; i++) {
            pages[i] = (uint32_t)(8 + (k % 4) * JOIN_PAGES + i);
        }
        memset(J.bufs[0], 0, J.page_bytes); /* page 0 is not one of them */
        TL_CHECK(kvx_room_recv_open(J.ctx, id, 0, pages, JOIN_PAGES, -1) == KVX_OK,
                 "recv_open %llu", (unsigned long long)id);
        st = tl_wait_state(J.ctx, id, KVX_ROOM_SUCCESS, 120);
        if (st != KVX_ROOM_SUCCESS) {
            char line[512];

            TL_CHECK(0, "room %llu is %s: %s", (unsigned long long)id, kvx_room_state_name(st),
                     tl_failure_line(J.ctx, id, line, sizeof(line)));
        }
        bad = kvp_pages(&J.g, J.bufs, J.comps, id, pages, JOIN_PAGES, 0, 0);
        TL_CHECK(bad == 0, "room %llu: %zu bytes differ from what was sent", (unsigned long long)id,
                 bad);
        t0 = tl_now();
        while ((cs = kvx_room_close(J.ctx, id)) == KVX_ERR_BUSY && tl_now() - t0 < 30) {
            usleep(1000);
        }
        TL_CHECK(cs == KVX_OK, "close %llu: %s", (unsigned long long)id, kvx_status_name(cs));
    }
}

/* prefill[0]: rooms to decode[0] until decode[1] is usable, then every
 * other room to it. */
static void prefill(int rooms, int joined)
{
    double t0 = tl_now(), joined_at = 0, limit = 120 * tl_timeout_scale();
    int to0 = 0, to1 = 0;
    kvx_failure_t why;

    while (to0 < rooms || to1 < joined) {
        int usable = kvx_ctx_pair_status(J.ctx, 1, &why) == KVX_OK;

        if (usable && joined_at == 0) {
            kvx_identity_t id;

            joined_at = tl_now();
            kvx_ctx_identity(J.ctx, &id);
            TL_CHECK(id.decode_instances == 2, "decode[1] is usable but the job has %d",
                     id.decode_instances);
            printf("t_join: decode[1] usable %.3f s after the first room, %d rooms to decode[0] "
                   "before\n",
                   joined_at - t0, to0);
        }
        if (usable && to1 < joined && (to1 <= to0 - rooms / 2 || to0 >= rooms)) {
            send_room(JOINED_ID0 + 1 + (uint64_t)to1++, 1);
        } else if (to0 < rooms && (to0 < rooms / 2 || usable)) {
            send_room(1 + (uint64_t)to0++, 0);
        } else if (tl_now() - t0 < limit) {
            usleep(10000);
        } else {
            TL_CHECK(0, "decode[1] did not join within %.0f s (%s)", limit, why.text);
            break;
        }
    }
    TL_CHECK(joined_at > 0, "decode[1] never joined");
}

int main(int argc, char **argv)
{
    int provided, job = argc > 1 && strcmp(argv[1], "job") == 0;
    char line[160];

    if (argc < 3 || (!job && strcmp(argv[1], "joiner") != 0 && strcmp(argv[1], "refused"))) {
        fprintf(stderr, "usage: t_join job ROOMS JOINED | t_join joiner JOINED | "
                        "t_join refused STATUS TEXT [PAGE_SIZE]\n");
        return 2;
    }
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &tl_rank);
    if (strcmp(argv[1], "refused") == 0) {
        refused(argv[2], argc > 3 ? argv[3] : "", argc > 4 ? (unsigned)atoi(argv[4]) : 4);
        tl_result(tl_failures ? "t_join refused: FAILED" : "t_join refused: ok");
        MPI_Finalize();
        return tl_failures ? 1 : 0;
    }
    start();
    if (job && J.id.role == KVX_ROLE_PREFILL) {
        prefill(atoi(argv[2]), atoi(argv[3]));
    } else if (job) {
        receive(1, atoi(argv[2]));
    } else {
        TL_CHECK(J.id.role == KVX_ROLE_DECODE && J.id.instance == 1,
                 "the joiner is %s[%d], not decode[1]", kvx_role_name(J.id.role), J.id.instance);
        receive(JOINED_ID0 + 1, atoi(argv[2]));
    }
    kvx_ctx_destroy(J.ctx);
    snprintf(line, sizeof(line), "t_join %s: %s", job ? "job" : "joiner",
             tl_failures ? "FAILED" : "ok");
    tl_result(line);
    MPI_Finalize();
    return tl_failures ? 1 : 0;
}
