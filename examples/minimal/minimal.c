/*
 * minimal.c - the KV of one request moved from a prefill rank to a decode
 * rank, and both ranks agreeing on how it ended.
 *
 *   mpirun -np 2 ./minimal            rank 0 prefill, rank 1 decode
 *   mpirun -np 2 ./minimal --fail     the prefill's puts fail (an injected
 *                                     failure): both ranks print its reason
 *
 * Build against an installed kvx:  cc minimal.c $(pkg-config --cflags --libs kvx)
 * Exit status 0 when the room ended as expected on this rank.
 */
#include <kvx.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROOM     42 /* the request's id, chosen by the application */
#define NPAGES   4  /* pages of the request */
#define DEADLINE 30 /* seconds; a real scheduler would go on serving meanwhile */

static const struct timespec ms1 = { .tv_nsec = 1000000 };

static void die(const char *what, kvx_status_t st, const kvx_failure_t *why)
{
    char line[512] = "";

    if (why != NULL) {
        kvx_failure_format(why, line, sizeof(line));
    }
    fprintf(stderr, "minimal: %s: %s %s\n", what, kvx_status_name(st), line);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Page p of every (layer, component) buffer holds the byte p + 1. */
static int pages_hold_pattern(kvx_ctx_t *ctx, const kvx_kv_layout_t *kv, int fill)
{
    size_t page = kvx_ctx_page_bytes(ctx);

    for (unsigned b = 0; b < kv->layers * 2; b++) {
        unsigned char *buf;
        size_t len;

        kvx_ctx_kv_buffer(ctx, b / 2, b % 2, (void **)&buf, &len);
        for (size_t i = 0; i < NPAGES * page; i++) {
            if (fill) {
                buf[i] = (unsigned char)(i / page + 1);
            } else if (buf[i] != (unsigned char)(i / page + 1)) {
                return 0;
            }
        }
    }
    return 1;
}

int main(int argc, char **argv)
{
    const uint32_t pages[NPAGES] = { 0, 1, 2, 3 };
    const uint64_t room = ROOM;
    int inject = argc > 1 && !strcmp(argv[1], "--fail");
    kvx_ctx_params_t params;
    kvx_ctx_t *ctx;
    kvx_identity_t me;
    kvx_failure_t why;
    kvx_agreed_t agreed = { .status = KVX_INPROGRESS }; /* the instance's view */
    kvx_status_t st;
    time_t deadline = time(NULL) + DEADLINE;
    uint32_t token = 1234; /* the first decoded token travels as aux */
    int ok;

    MPI_Init(&argc, &argv);

    /* Both ranks describe the same model; each rank's pool holds 8 pages. */
    kvx_ctx_params_init(&params);
    params.layout = "prefill:1x1,decode:1x1";
    params.kv.layers = 2;
    params.kv.page_size = 16;
    params.kv.kv_heads = 2;
    params.kv.head_dim = 64;
    params.num_pages = 8; /* kvx allocates the pool */
    params.aux_slots = 1;
    params.aux_item_size = sizeof(token);
    params.fault = inject ? "stage=post,role=prefill,effect=fail" : NULL;
    st = kvx_ctx_create(MPI_COMM_WORLD, &params, &ctx, &why); /* collective */
    if (st != KVX_OK) {
        die("kvx_ctx_create", st, &why);
    }
    kvx_ctx_identity(ctx, &me);

    if (me.role == KVX_ROLE_DECODE) {
        /* Pre-allocate the request's pages and an aux slot; tell prefill 0. */
        st = kvx_room_recv_open(ctx, room, 0, pages, NPAGES, 0);
    } else {
        /* Compute the KV (here: a pattern), then hand it over in one chunk. */
        pages_hold_pattern(ctx, &params.kv, 1);
        st = kvx_room_send_open(ctx, room, 0, NPAGES);
        if (st == KVX_OK) {
            st = kvx_room_send_chunk(ctx, room, pages, NPAGES, &token, sizeof(token));
        }
    }
    if (st != KVX_OK) {
        die("opening the room", st, NULL);
    }

    /* Agreement rounds, never blocking the scheduler, until this instance
     * (and, for the prefill, the decode instance) has concluded the room. */
    while (agreed.status != KVX_OK ||
           (agreed.state != KVX_ROOM_SUCCESS && agreed.state != KVX_ROOM_FAILED)) {
        kvx_agree_t *round;

        st = time(NULL) > deadline ? KVX_ERR_TIMEOUT : kvx_agree_start(ctx, &room, 1, &round);
        if (st != KVX_OK) { /* kvx_agree_start() is collective over the TP ranks */
            die("agreement", st, NULL);
        }
        while (kvx_agree_test(round, &agreed) == KVX_INPROGRESS) {
            /* a scheduler does its other work here */
        }
        kvx_agree_free(round);
        nanosleep(&ms1, NULL);
    }

    printf("%s rank %d: room %d %s", kvx_role_name(me.role), me.world_rank, ROOM,
           kvx_room_state_name(agreed.state));
    ok = agreed.state == (inject ? KVX_ROOM_FAILED : KVX_ROOM_SUCCESS);
    if (agreed.state == KVX_ROOM_FAILED && kvx_room_failure(ctx, room, &why) == KVX_OK) {
        char line[512];

        kvx_failure_format(&why, line, sizeof(line));
        printf(": %s", line); /* the same root cause on both ranks */
        ok = ok && why.status == KVX_ERR_INJECTED;
    } else if (agreed.state == KVX_ROOM_SUCCESS && me.role == KVX_ROLE_DECODE) {
        uint32_t got = 0;
        size_t len;

        ok = ok && kvx_room_aux(ctx, room, &got, sizeof(got), &len) == KVX_OK && got == token &&
             pages_hold_pattern(ctx, &params.kv, 0);
        printf(", first token %u, pages %s", (unsigned)got, ok ? "intact" : "CORRUPT");
    }
    printf("\n");

    /* Closing hands the pages back; a failed decode room may answer BUSY
     * until its writers confirmed that nothing is in flight. */
    while ((st = kvx_room_close(ctx, room)) == KVX_ERR_BUSY && time(NULL) < deadline) {
        nanosleep(&ms1, NULL);
    }
    kvx_ctx_destroy(ctx); /* collective */
    MPI_Finalize();
    return ok && st == KVX_OK ? 0 : 1;
}
