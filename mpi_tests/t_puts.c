/*
 * t_puts.c - for consecutive pages, the puts of a room per layer do not
 * depend on page_size or on the token count: counted, not assumed.
 *
 * Under the job's TP ratio (one prefill and one decode instance, from
 * KVX_LAYOUT), for MHA/GQA and MLA, each page layout, page sizes 16 and 64
 * and 512 and 4096 tokens, one room of consecutive pages on both sides is
 * handed over in one chunk without aux. The prefill ranks' puts
 * (kvx_room_info().puts, summed over the instance) per layer are printed
 * and must equal what include/kvx.h documents for the layout and ratio,
 * computed here from the table there, not from kvx's plan code. Wherever
 * that table says a run takes a fixed number of operations, the four
 * (page size, tokens) points must also agree with each other; HND with the
 * decode holding more heads must take one put per page.
 *
 * Usage: t_puts [--kv-heads H]    (default 4; head_dim 64, bf16, 2 layers)
 */
#include <kvx.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LAYERS   2
#define HEAD_DIM 64
#define FIRST    3 /* the room's first page on both sides */

static int rank;

typedef struct point {
    kvx_attn_t attn;
    kvx_page_layout_t layout;
    unsigned page_size, tokens;
} point_t;

/* Operations per room per layer over the whole prefill instance, from the
 * table of include/kvx.h: per run and (layer, component), 1 put when a
 * decode rank holds as many heads as a prefill rank or fewer (packed), and
 * when it holds more, 1 put per page (HND) or 1 data message (NHD); 1 put
 * per head moved with HEAD_MAJOR. */
static unsigned long documented(const point_t *pt, unsigned kv_heads, int ptp, int dtp)
{
    unsigned kv = pt->attn == KVX_ATTN_MLA ? 1 : kv_heads, comps = pt->attn == KVX_ATTN_MLA ? 1 : 2;
    unsigned hp = kv >= (unsigned)ptp ? kv / (unsigned)ptp : 1;
    unsigned hd = kv >= (unsigned)dtp ? kv / (unsigned)dtp : 1;
    unsigned long pairs = (unsigned long)dtp * (hd > hp ? hd / hp : 1);
    unsigned moved = hd < hp ? hd : hp, pages = pt->tokens / pt->page_size;
    unsigned long ops = 1;

    if (pt->layout == KVX_PAGE_HEAD_MAJOR) {
        ops = moved;
    } else if (hd > hp && pt->layout == KVX_PAGE_HND) {
        ops = pages;
    }
    return pairs * comps * ops;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs one room; returns the instance's puts per layer, or -1, and the TP
 * sizes of the job. */
static long run_point(const point_t *pt, unsigned kv_heads, uint64_t room, int *ptp, int *dtp)
{
    size_t npages = pt->tokens / pt->page_size;
    kvx_ctx_params_t params;
    kvx_room_state_t st = KVX_ROOM_BOOTSTRAPPING;
    kvx_room_info_t info;
    kvx_identity_t id;
    kvx_failure_t why;
    kvx_ctx_t *ctx;
    uint32_t *pages = malloc(npages * sizeof(uint32_t));
    long puts = 0, total = 0, bad = 0, any_bad = 0;
    char line[512];
    double start;

    kvx_ctx_params_init(&params);
    params.kv.layers = LAYERS;
    params.kv.page_size = pt->page_size;
    params.kv.kv_heads = pt->attn == KVX_ATTN_MLA ? 1 : kv_heads;
    params.kv.head_dim = HEAD_DIM;
    params.kv.dtype = KVX_DTYPE_BF16;
    params.kv.attn = pt->attn;
    params.kv.page_layout = pt->layout;
    params.num_pages = npages + FIRST + 5;
    params.aux_slots = 1;
    params.aux_item_size = 8;
    if (kvx_ctx_create(MPI_COMM_WORLD, &params, &ctx, &why) != KVX_OK) {
        kvx_failure_format(&why, line, sizeof(line));
        fprintf(stderr, "t_puts: rank %d: kvx_ctx_create: %s\n", rank, line);
        free(pages);
        return -1;
    }
    kvx_ctx_identity(ctx, &id);
    *ptp = id.prefill_tp;
    *dtp = id.decode_tp;
    for (size_t i = 0; i < npages; i++) {
        pages[i] = (uint32_t)(FIRST + i);
    }
    if (id.role == KVX_ROLE_DECODE) {
        bad = kvx_room_recv_open(ctx, room, 0, pages, npages, -1) != KVX_OK;
    } else {
        bad = kvx_room_send_open(ctx, room, 0, npages) != KVX_OK ||
              kvx_room_send_chunk(ctx, room, pages, npages, NULL, 0) != KVX_OK;
    }
    start = now_s();
    while (!bad && st != KVX_ROOM_SUCCESS && st != KVX_ROOM_FAILED && now_s() - start < 30) {
        kvx_room_poll(ctx, room, &st);
        usleep(100);
    }
    if (!bad && st != KVX_ROOM_SUCCESS) {
        if (kvx_room_failure(ctx, room, &why) == KVX_OK) {
            kvx_failure_format(&why, line, sizeof(line));
        } else {
            snprintf(line, sizeof(line), "%s", kvx_room_state_name(st));
        }
        fprintf(stderr, "t_puts: rank %d: room %llu: %s\n", rank, (unsigned long long)room, line);
        bad = 1;
    }
    if (!bad && id.role == KVX_ROLE_PREFILL && kvx_room_info(ctx, room, &info) == KVX_OK) {
        puts = (long)info.puts;
    }
    kvx_room_close(ctx, room);
    MPI_Allreduce(&puts, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&bad, &any_bad, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    kvx_ctx_destroy(ctx);
    free(pages);
    return any_bad ? -1 : total / LAYERS;
}

static const char *layout_name(kvx_page_layout_t l)
{
    return l == KVX_PAGE_NHD ? "NHD" : l == KVX_PAGE_HEAD_MAJOR ? "HEAD_MAJOR" : "HND";
}

int main(int argc, char **argv)
{
    static const unsigned page_sizes[] = { 16, 64 }, tokens[] = { 512, 4096 };
    unsigned kv_heads = 4;
    int failed = 0, ptp = 1, dtp = 1;
    uint64_t room = 1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc == 3 && !strcmp(argv[1], "--kv-heads")) {
        kv_heads = (unsigned)atoi(argv[2]);
    }
    for (int a = 0; a < 2; a++) {
        for (int l = KVX_PAGE_HND; l <= KVX_PAGE_HEAD_MAJOR; l++) {
            long first = -1;

            for (int i = 0; i < 4; i++) {
                point_t pt = { a ? KVX_ATTN_MLA : KVX_ATTN_MHA, (kvx_page_layout_t)l,
                               page_sizes[i / 2], tokens[i % 2] };
                point_t lo = { pt.attn, pt.layout, page_sizes[0], tokens[0] };
                point_t hi = { pt.attn, pt.layout, page_sizes[1], tokens[1] };
                long got = run_point(&pt, kv_heads, room++, &ptp, &dtp);
                unsigned long want = documented(&pt, kv_heads, ptp, dtp);
                /* The table says a fixed count: all four points must agree. */
                int fixed =
                    documented(&lo, kv_heads, ptp, dtp) == documented(&hi, kv_heads, ptp, dtp);
                int ok = got >= 0 && (unsigned long)got == want;

                first = i == 0 ? got : first;
                ok = ok && (!fixed || got == first);
                if (rank == 0 && a == 0 && l == KVX_PAGE_HND && i == 0) {
                    printf("# t_puts: prefill TP %d -> decode TP %d, %u KV heads (MLA: 1 latent), "
                           "head_dim %d, bf16, %d layers; one room of consecutive pages, one "
                           "chunk, no aux\n",
                           ptp, dtp, kv_heads, HEAD_DIM, LAYERS);
                    printf("# %-4s %-11s %9s %7s %6s %11s %9s\n", "attn", "layout", "page_size",
                           "tokens", "pages", "puts/layer", "expected");
                }
                if (rank == 0) {
                    printf("  %-4s %-11s %9u %7u %6u %11ld %9lu %s\n", a ? "MLA" : "MHA",
                           layout_name(pt.layout), pt.page_size, pt.tokens,
                           pt.tokens / pt.page_size, got, want,
                           !ok     ? "<- FAILED"
                           : fixed ? "fixed"
                                   : "per page");
                }
                failed += !ok;
            }
        }
    }
    if (rank == 0) {
        printf("# %s\n", failed == 0 ? "OK" : "FAILED");
    }
    MPI_Finalize();
    return failed == 0 ? 0 : 1;
}
