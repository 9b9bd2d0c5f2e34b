/*
 * t_stride.c - pools whose buffers interleave page by page
 * (kvx_ctx_params_t.page_stride), byte-exact.
 *
 *   t_stride --layout prefill:AxB,decode:CxD [--prefill kv|layers] [--decode kv|layers]
 *            [--page-layout hnd|nhd] [--rooms N]
 *
 * "kv": K and V interleaved in each block, one region per layer laid out
 * [num_pages, 2, page] (vLLM's FlashInfer layout with NHD pages); "layers":
 * all layers in one region, [num_pages, layers, 2, page]. Each side uses its
 * own stride. The decode checks every byte of every room's pages, and that
 * every byte outside them is still zero (nothing landed on a neighbour of
 * the stride). First, a stride smaller than a page must fail creation on
 * every rank with KVX_ERR_INVALID_PARAM and the reason.
 */
#include <kvx.h>
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

int tl_rank, tl_failures;

#define LAYERS    3
#define PAGE_SIZE 4
#define KV_HEADS  4
#define HEAD_DIM  8 /* fp8: one byte per element, a row is 8 bytes */

typedef struct opts {
    const char *job;
    const char *mode[3]; /* by role */
    kvx_page_layout_t layout;
    int rooms;
} opts_t;

typedef struct pool {
    unsigned char *mem;
    size_t mem_len, stride, page_bytes;
    void *bufs[LAYERS * 2];
    unsigned first_head, heads;
} pool_t;

static unsigned char value(uint64_t room, unsigned layer, unsigned comp, unsigned head,
                           unsigned token, unsigned e)
{
    return (
        unsigned char)(((room * 131 + layer * 31 + comp * 17 + head * 7 + token * 3 + e) & 0xff) |
                       1);
}

/* Byte e of token t of local head h inside one page. */
static size_t in_page(kvx_page_layout_t layout, unsigned heads, unsigned h, unsigned t, unsigned e)
{
    return layout == KVX_PAGE_NHD ? ((size_t)t * heads + h) * HEAD_DIM + e
                                  : ((size_t)h * PAGE_SIZE + t) * HEAD_DIM + e;
}

/* Rank r's role, TP rank and size in the layout "prefill:AxB,decode:CxD"
 * (the pool is sized before the context exists). */
static void whoami(const char *layout, int rank, kvx_role_t *role, int *tp_rank, int *tp_size)
{
    int a = 0, b = 0, c = 0, d = 0;

    if (layout == NULL || sscanf(layout, "prefill:%dx%d,decode:%dx%d", &a, &b, &c, &d) != 4) {
        fprintf(stderr, "t_stride: --layout must be prefill:AxB,decode:CxD\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    *role = rank < a * b ? KVX_ROLE_PREFILL : KVX_ROLE_DECODE;
    *tp_size = rank < a * b ? b : d;
    *tp_rank = (rank < a * b ? rank : rank - a * b) % *tp_size;
}

static void pool_make(pool_t *p, const kvx_kv_layout_t *kv, int tp_size, int tp_rank,
                      const char *mode, size_t num_pages)
{
    kvx_failure_t why;
    size_t region;

    TL_CHECK(kvx_kv_rank_shape(kv, tp_size, tp_rank, &p->first_head, &p->heads, &p->page_bytes,
                               &why) == KVX_OK,
             "kvx_kv_rank_shape: %s", why.text);
    if (strcmp(mode, "kv") == 0) {
        p->stride = 2 * p->page_bytes;
        region = num_pages * p->stride;
        p->mem_len = region * LAYERS;
    } else {
        p->stride = LAYERS * 2 * p->page_bytes;
        region = 0;
        p->mem_len = num_pages * p->stride;
    }
    p->mem = calloc(1, p->mem_len);
    for (unsigned b = 0; b < LAYERS * 2; b++) {
        unsigned layer = b / 2, comp = b % 2;

        p->bufs[b] = strcmp(mode, "kv") == 0 ? p->mem + layer * region + comp * p->page_bytes
                                             : p->mem + b * p->page_bytes;
    }
}

/* Fills (check 0) or counts the bytes that differ (check 1) of one room's
 * pages, token i of the room on page pages[i / PAGE_SIZE]. */
static size_t room_bytes(const pool_t *p, kvx_page_layout_t layout, uint64_t room,
                         const uint32_t *pages, size_t n, int check)
{
    size_t bad = 0;

    for (unsigned b = 0; b < LAYERS * 2; b++) {
        for (size_t i = 0; i < n; i++) {
            unsigned char *page = (unsigned char *)p->bufs[b] + pages[i] * p->stride;

            for (unsigned h = 0; h < p->heads; h++) {
                for (unsigned t = 0; t < PAGE_SIZE; t++) {
                    for (unsigned e = 0; e < HEAD_DIM; e++) {
                        unsigned char v = value(room, b / 2, b % 2, p->first_head + h,
                                                (unsigned)i * PAGE_SIZE + t, e);
                        unsigned char *at = page + in_page(layout, p->heads, h, t, e);

                        if (!check) {
                            *at = v;
                        } else if (*at != v) {
                            bad++;
                        }
                    }
                }
            }
        }
    }
    return bad;
}

/* Zeroes the pages of a room in a copy of the pool; what is left must be 0. */
static void room_clear(const pool_t *p, unsigned char *copy, const uint32_t *pages, size_t n)
{
    for (unsigned b = 0; b < LAYERS * 2; b++) {
        for (size_t i = 0; i < n; i++) {
            size_t off = (size_t)((unsigned char *)p->bufs[b] - p->mem) + pages[i] * p->stride;

            memset(copy + off, 0, p->page_bytes);
        }
    }
}

static void bad_stride(kvx_ctx_params_t *params, const pool_t *p)
{
    kvx_ctx_t *ctx = NULL;
    kvx_failure_t why;
    kvx_status_t st;

    params->page_stride = p->page_bytes - 1;
    st = kvx_ctx_create(MPI_COMM_WORLD, params, &ctx, &why);
    TL_CHECK(st == KVX_ERR_INVALID_PARAM, "a stride below a page: %s", kvx_status_name(st));
    TL_CHECK(strstr(why.text, "is smaller than a page") != NULL, "reason: %s", why.text);
    if (st == KVX_OK) {
        kvx_ctx_destroy(ctx);
    }
}

static void parse(int argc, char **argv, opts_t *o)
{
    o->job = NULL;
    o->mode[KVX_ROLE_PREFILL] = "kv";
    o->mode[KVX_ROLE_DECODE] = "layers";
    o->layout = KVX_PAGE_NHD;
    o->rooms = 40;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--layout") == 0) {
            o->job = argv[i + 1];
        } else if (strcmp(argv[i], "--prefill") == 0) {
            o->mode[KVX_ROLE_PREFILL] = argv[i + 1];
        } else if (strcmp(argv[i], "--decode") == 0) {
            o->mode[KVX_ROLE_DECODE] = argv[i + 1];
        } else if (strcmp(argv[i], "--page-layout") == 0) {
            o->layout = strcmp(argv[i + 1], "hnd") == 0 ? KVX_PAGE_HND : KVX_PAGE_NHD;
        } else if (strcmp(argv[i], "--rooms") == 0) {
            o->rooms = atoi(argv[i + 1]);
        }
    }
}

int main(int argc, char **argv)
{
    opts_t o;
    kvx_ctx_params_t params;
    kvx_failure_t why;
    kvx_ctx_t *ctx;
    kvx_role_t role;
    int tp_rank, tp_size, all_failures = 0;
    size_t num_pages, bad = 0, stray = 0;
    uint32_t(*pages)[8];
    size_t *npages;
    pool_t p;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &tl_rank);
    parse(argc, argv, &o);
    whoami(o.job, tl_rank, &role, &tp_rank, &tp_size);
    kvx_ctx_params_init(&params);
    params.layout = o.job;
    params.kv = (kvx_kv_layout_t){ LAYERS,        PAGE_SIZE,    KV_HEADS, HEAD_DIM,
                                   KVX_DTYPE_FP8, KVX_ATTN_MHA, o.layout };
    num_pages = 8 * (size_t)o.rooms + 3;
    params.num_pages = num_pages;
    params.aux_slots = (size_t)o.rooms;
    params.aux_item_size = 8;
    pool_make(&p, &params.kv, tp_size, tp_rank, o.mode[role], num_pages);
    params.buffers = p.bufs;
    bad_stride(&params, &p);
    params.page_stride = p.stride;
    if (kvx_ctx_create(MPI_COMM_WORLD, &params, &ctx, &why) != KVX_OK) {
        fprintf(stderr, "rank %d: kvx_ctx_create: %s\n", tl_rank, why.text);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    {
        void *b1;
        size_t len;

        kvx_ctx_kv_buffer(ctx, 0, 1, &b1, &len);
        TL_CHECK(b1 == p.bufs[1] && len == (num_pages - 1) * p.stride + p.page_bytes,
                 "buffer (0, 1): %p of %zu bytes", b1, len);
    }
    /* Room r: 1 + r % 8 pages; the prefill's back to back, the decode's
     * scattered (a stride of 7 through the pool). */
    pages = calloc((size_t)o.rooms, sizeof(*pages));
    npages = calloc((size_t)o.rooms, sizeof(*npages));
    for (int r = 0, next = 0, at = 0; r < o.rooms; r++) {
        npages[r] = 1 + (size_t)r % 8;
        for (size_t i = 0; i < npages[r]; i++) {
            pages[r][i] = role == KVX_ROLE_PREFILL ? (uint32_t)next++
                                                   : (uint32_t)((at = (at + 7) % (int)num_pages));
        }
    }
    for (int r = 0; r < o.rooms; r++) {
        uint64_t id = 700 + (uint64_t)r, aux = id;

        if (role == KVX_ROLE_DECODE) {
            TL_CHECK(kvx_room_recv_open(ctx, id, 0, pages[r], npages[r], r) == KVX_OK, "recv_open");
            continue;
        }
        room_bytes(&p, o.layout, id, pages[r], npages[r], 0);
        TL_CHECK(kvx_room_send_open(ctx, id, 0, npages[r]) == KVX_OK, "send_open");
        TL_CHECK(kvx_room_send_chunk(ctx, id, pages[r], npages[r], &aux, sizeof(aux)) == KVX_OK,
                 "send_chunk");
    }
    for (int r = 0; r < o.rooms; r++) {
        uint64_t id = 700 + (uint64_t)r;
        kvx_room_state_t st = tl_wait_state(ctx, id, KVX_ROOM_SUCCESS, 60.0);
        char line[512];

        TL_CHECK(st == KVX_ROOM_SUCCESS, "room %llu: %s", (unsigned long long)id,
                 tl_failure_line(ctx, id, line, sizeof(line)));
    }
    if (role == KVX_ROLE_DECODE) {
        unsigned char *copy = malloc(p.mem_len);

        memcpy(copy, p.mem, p.mem_len);
        for (int r = 0; r < o.rooms; r++) {
            bad += room_bytes(&p, o.layout, 700 + (uint64_t)r, pages[r], npages[r], 1);
            room_clear(&p, copy, pages[r], npages[r]);
        }
        for (size_t i = 0; i < p.mem_len; i++) {
            stray += copy[i] != 0;
        }
        free(copy);
        TL_CHECK(bad == 0, "%zu bytes of the rooms' pages differ", bad);
        TL_CHECK(stray == 0, "%zu bytes outside the rooms' pages were written", stray);
        printf("t_stride: rank %d (decode tp%d, %s, stride %zu): %d rooms, %zu wrong bytes, "
               "%zu stray bytes\n",
               tl_rank, tp_rank, o.mode[role], p.stride, o.rooms, bad, stray);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int r = 0; r < o.rooms; r++) {
        kvx_room_close(ctx, 700 + (uint64_t)r);
    }
    kvx_ctx_destroy(ctx);
    free(pages);
    free(npages);
    free(p.mem);
    MPI_Allreduce(&tl_failures, &all_failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (tl_rank == 0) {
        printf("t_stride: %s\n", all_failures == 0 ? "OK" : "FAILED");
    }
    MPI_Finalize();
    return all_failures == 0 ? 0 : 1;
}
