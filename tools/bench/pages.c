/*
 * pages.c - kvx-bench pages: 16 KiB pages with 0/25/50/100% of the
 * destination pages scattered.
 *
 * prefill:1x1,decode:1x1 on ranks 0 and 1; pages of 16 tokens x 4 KV heads
 * x 128 x bf16 = 16 KiB per (layer, component); a room is --pages pages of
 * --layers layers, K and V. The source pages of a room are consecutive. Of
 * its destination pages a chosen share, picked at random, is scattered:
 * moved out of line so that none of them continues a run; the others stay
 * consecutive. kvx merges runs that are consecutive on both sides, so the
 * puts per room grow with the scattered share. The GB/s of each share is
 * compared with the contiguous one (the ratio); the same puts posted by raw
 * UCP (raw.c) show what the transport itself makes of them.
 */
#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct pages_job {
    const bench_opts_t *o;
    MPI_Comm comm;
    int rank;
    kvx_ctx_t *ctx;
    raw_t *raw;
    void **bufs;
    unsigned nbufs; /* layers x 2 */
    size_t pb, np, num_pages;
    uint32_t **src;   /* [slot] */
    uint32_t ***dst;  /* [level][slot] */
    raw_put_t **puts; /* [slot] of the current level */
    size_t *nputs;
    uint64_t next_id;
} pages_job_t;

static uint64_t pages_seed(unsigned b, int slot, size_t i)
{
    return ((uint64_t)b << 40) | ((uint64_t)slot << 20) | i;
}

/* Destination pages of a slot with pct% scattered: the others at base + i,
 * the scattered ones, in reverse order two apart, after them. */
static uint32_t *pages_scatter(size_t np, int slot, double pct, uint64_t seed)
{
    uint32_t *dst = malloc(sizeof(uint32_t) * np);
    size_t *order = malloc(sizeof(size_t) * np), k = (size_t)lround(pct * (double)np / 100.0);
    char *scattered = calloc(np, 1);
    size_t base = (size_t)slot * 3 * np, m = 0;

    for (size_t i = 0; i < np; i++) {
        order[i] = i;
    }
    for (size_t i = np - 1; i > 0; i--) {
        size_t r = (size_t)(bench_word(seed, i) % (i + 1)), t = order[i];

        order[i] = order[r];
        order[r] = t;
    }
    for (size_t i = 0; i < k && i < np; i++) {
        scattered[order[i]] = 1;
    }
    for (size_t i = 0; i < np; i++) {
        dst[i] = (uint32_t)(scattered[i] ? base + np + 2 * (k - 1 - m++) : base + i);
    }
    free(order);
    free(scattered);
    return dst;
}

/* The puts kvx posts for a room, as raw puts: per layer and component, one
 * per run of pages consecutive on both sides. Returns how many. */
static size_t pages_raw_puts(const pages_job_t *j, const uint32_t *src, const uint32_t *dst,
                             raw_put_t *puts)
{
    size_t n = 0, bytes = j->num_pages * j->pb;

    for (unsigned b = 0; b < j->nbufs; b++) {
        for (size_t i = 0; i < j->np;) {
            size_t len = 1;

            while (i + len < j->np && src[i + len] == src[i] + len &&
                   dst[i + len] == dst[i] + len) {
                len++;
            }
            puts[n++] =
                (raw_put_t){ b * bytes + src[i] * j->pb, b * bytes + dst[i] * j->pb, len * j->pb };
            i += len;
        }
    }
    return n;
}

/* Sources once, with a pattern per (buffer, slot, page); the same in the
 * raw source. */
static void pages_fill(pages_job_t *j)
{
    size_t bytes = j->num_pages * j->pb;

    for (unsigned b = 0; j->rank == 0 && b < j->nbufs; b++) {
        for (int s = 0; s < j->o->window; s++) {
            for (size_t i = 0; i < j->np; i++) {
                size_t off = j->src[s][i] * j->pb;

                bench_fill((char *)j->bufs[b] + off, j->pb, pages_seed(b, s, i));
                bench_fill((char *)raw_src(j->raw) + b * bytes + off, j->pb, pages_seed(b, s, i));
            }
        }
    }
}

/* Zeroes the destinations (before a stream) or counts the words that differ
 * in the slots' destination pages (after it), in the kvx pool or the raw
 * destination. */
static size_t pages_dst(pages_job_t *j, int level, int raw, int check)
{
    size_t bytes = j->num_pages * j->pb, bad = 0;

    for (unsigned b = 0; j->rank == 1 && b < j->nbufs; b++) {
        char *base = raw ? (char *)raw_dst(j->raw) + b * bytes : (char *)j->bufs[b];

        for (int s = 0; s < j->o->window; s++) {
            for (size_t i = 0; i < j->np; i++) {
                char *page = base + j->dst[level][s][i] * j->pb;

                if (check) {
                    bad += bench_check(page, j->pb, pages_seed(b, s, i));
                } else {
                    memset(page, 0, j->pb);
                }
            }
        }
    }
    return bad;
}

typedef struct pages_rep {
    double kvx, raw, puts;
    int ok;
} pages_rep_t;

/* One stream of each kind at one scatter level. */
static pages_rep_t pages_measure(pages_job_t *j, int level)
{
    int w = j->o->window, n = j->o->rooms;
    stream_spec_t s = { w,
                        n,
                        w,
                        j->src,
                        j->dst[level],
                        j->np,
                        j->o->poll_us,
                        60 + (double)n * (double)j->np * 1e-2,
                        j->next_id };
    double bytes = (double)n * (double)j->np * (double)j->pb * j->nbufs, v[3];
    stream_result_t r;
    pages_rep_t rep = { 0, 0, 0, 1 };
    size_t bad;

    j->next_id += (uint64_t)n;
    for (int k = 0; k < w; k++) {
        j->nputs[k] = pages_raw_puts(j, j->src[k], j->dst[level][k], j->puts[k]);
    }
    pages_dst(j, level, 0, 0);
    stream_run(j->ctx, j->comm, &s, &r);
    bad = pages_dst(j, level, 0, 1);
    pages_dst(j, level, 1, 0);
    v[1] = raw_stream(j->raw, (const raw_put_t *const *)j->puts, j->nputs, w, n, w);
    bad += pages_dst(j, level, 1, 1);
    if (r.error[0] != '\0' || bad > 0 || r.bad_aux > 0) {
        fprintf(stderr, "kvx-bench pages: rank %d: %zu words differ, %d bad aux: %s\n", j->rank,
                bad, r.bad_aux, r.error);
    }
    v[0] = j->rank == 1 ? r.seconds : 0;
    v[1] = j->rank == 1 ? v[1] : 0;
    v[2] = r.ok_rooms == n && r.bad_aux == 0 && bad == 0 && (j->rank == 0 || v[1] > 0) ? 0 : 1;
    MPI_Allreduce(MPI_IN_PLACE, v, 3, MPI_DOUBLE, MPI_MAX, j->comm);
    MPI_Bcast(&r.puts, 1, MPI_UINT64_T, 0, j->comm);
    rep.kvx = v[0] > 0 ? bytes / v[0] / 1e9 : 0;
    rep.raw = v[1] > 0 ? bytes / v[1] / 1e9 : 0;
    rep.puts = (double)r.puts / n;
    rep.ok = v[2] == 0;
    return rep;
}

static void pages_row(pages_job_t *j, bench_out_t *out, int level, pages_rep_t *const *reps)
{
    int nr = j->o->reps;
    double *kvx = malloc(sizeof(double) * nr), *raw = malloc(sizeof(double) * nr),
           *base = malloc(sizeof(double) * nr), puts = reps[level][0].puts, pct;
    int ok = 1, runs = 0;
    bench_stat_t k, r;

    for (int i = 0; i < nr; i++) {
        kvx[i] = reps[level][i].kvx;
        raw[i] = reps[level][i].raw;
        base[i] = reps[0][i].kvx;
        ok &= reps[level][i].ok;
    }
    for (size_t i = 0; i < j->np; i++) {
        runs += i == 0 || j->dst[level][0][i] != j->dst[level][0][i - 1] + 1;
    }
    k = bench_stat(kvx, nr);
    r = bench_stat(raw, nr);
    pct = j->o->scatter.v[level];
    bench_out_row(out, ok, "%7.0f %6d %8.0f %8.3f %8.3f %8.3f %7.3f  %8.3f %7.3f  %s", pct, runs,
                  puts, k.med, k.min, k.max, bench_ratio(kvx, base, nr), r.med,
                  bench_ratio(kvx, raw, nr), ok ? "OK" : "FAILED");
    bench_json_begin(out);
    bench_json_num(out, "scatter_pct", pct);
    bench_json_stat(out, "gbps", k);
    bench_json_num(out, "puts_per_room", puts);
    bench_json_num(out, "ratio", bench_ratio(kvx, base, nr));
    bench_json_num(out, "runs_per_room", runs);
    bench_json_stat(out, "raw_gbps", r);
    bench_json_num(out, "kvx_over_raw", bench_ratio(kvx, raw, nr));
    bench_json_end(out, nr, ok);
    bench_plot_data(out, "%.0f %.4f %.4f %.4f", pct, k.med, r.med, bench_ratio(kvx, base, nr));
    free(kvx);
    free(raw);
    free(base);
}

static const char pages_plot[] =
    "set xlabel 'destination pages scattered (%)'\nset ylabel 'GB/s'\n"
    "set y2label 'kvx / kvx contiguous'\nset y2range [0:1.2]\nset ytics nomirror\nset y2tics\n"
    "set xrange [-5:105]\nplot DATA using 1:2 with linespoints title 'kvx', "
    "DATA using 1:3 with linespoints title 'raw UCP, same puts', "
    "DATA using 1:4 axes x1y2 with linespoints dashtype 2 title 'ratio to contiguous'";

static void pages_header(pages_job_t *j, bench_out_t *out)
{
    const bench_opts_t *o = j->o;

    bench_out_setup(out,
                    "layout: prefill:1x1,decode:1x1 (ranks 0 -> 1); a room is %zu pages of %zu "
                    "bytes x %u layers x K,V = %.1f MiB; sources consecutive, the scattered share "
                    "of destinations picked at random, none continuing a run",
                    j->np, j->pb, o->layers, (double)j->np * j->pb * j->nbufs / 1048576.0);
    bench_out_setup(out, "UCX transports, raw endpoint 0 -> 1: %s", raw_transports(j->raw));
    bench_out_setup(out,
                    "method: %d rooms per point, %d in flight; %d reps, levels alternating; "
                    "median (min, max); ratio = median of paired kvx(scattered)/kvx(contiguous); "
                    "raw = the same puts on raw UCP (flush per room); puts per room include "
                    "the aux row",
                    o->rooms, o->window, o->reps);
    bench_out_heads(
        out,
        "scatter   runs     puts  kvx GB/s      min      max   ratio  raw GB/s kvx/raw  "
        "check",
        "    (%) (/room)  (/room)    median                    /contig    median          "
        "      ");
}

static int pages_setup(pages_job_t *j)
{
    const bench_opts_t *o = j->o;
    kvx_kv_layout_t kv = { o->layers, 16, 4, 128, KVX_DTYPE_BF16, KVX_ATTN_MHA, KVX_PAGE_HND };
    int ok;

    j->np = o->pages;
    j->nbufs = o->layers * 2;
    j->pb = 16 * 4 * 128 * 2;
    j->num_pages = (size_t)o->window * 3 * j->np;
    j->ctx = bench_ctx_create(j->comm, "prefill:1x1,decode:1x1", &kv, j->num_pages,
                              (size_t)o->window, NULL);
    ok = j->ctx != NULL && kvx_ctx_page_bytes(j->ctx) == j->pb;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, j->comm);
    if (!ok) {
        return -1;
    }
    j->bufs = bench_ctx_buffers(j->ctx, o->layers, 2);
    j->raw = raw_create(j->comm, j->nbufs * j->num_pages * j->pb, j->nbufs * j->num_pages * j->pb);
    if (j->raw == NULL) {
        return -1;
    }
    j->src = malloc(sizeof(uint32_t *) * o->window);
    j->dst = malloc(sizeof(uint32_t **) * o->scatter.n);
    j->puts = malloc(sizeof(raw_put_t *) * o->window);
    j->nputs = malloc(sizeof(size_t) * o->window);
    for (int s = 0; s < o->window; s++) {
        j->src[s] = malloc(sizeof(uint32_t) * j->np);
        j->puts[s] = malloc(sizeof(raw_put_t) * j->np * j->nbufs);
        for (size_t i = 0; i < j->np; i++) {
            j->src[s][i] = (uint32_t)((size_t)s * 3 * j->np + i);
        }
    }
    for (int l = 0; l < o->scatter.n; l++) {
        j->dst[l] = malloc(sizeof(uint32_t *) * o->window);
        for (int s = 0; s < o->window; s++) {
            j->dst[l][s] = pages_scatter(j->np, s, o->scatter.v[l], 1000 * l + s + 1);
        }
    }
    pages_fill(j);
    return 0;
}

static void pages_free(pages_job_t *j)
{
    for (int s = 0; j->src != NULL && s < j->o->window; s++) {
        free(j->src[s]);
        free(j->puts[s]);
    }
    for (int l = 0; j->dst != NULL && l < j->o->scatter.n; l++) {
        for (int s = 0; s < j->o->window; s++) {
            free(j->dst[l][s]);
        }
        free(j->dst[l]);
    }
    free(j->src);
    free(j->dst);
    free(j->puts);
    free(j->nputs);
    raw_destroy(j->raw);
    if (j->ctx != NULL) {
        kvx_ctx_destroy(j->ctx);
    }
    free(j->bufs);
}

int bench_pages(const bench_opts_t *o)
{
    pages_job_t j;
    pages_rep_t **reps;
    bench_out_t *out = NULL;
    char world[512];
    int rc = 1, ok;

    memset(&j, 0, sizeof(j));
    j.o = o;
    j.comm = bench_subworld(2);
    bench_world_text("pages uses ranks 0 and 1; the others sleep", world, sizeof(world));
    if (bench_size < 2 || o->scatter.v[0] != 0) {
        if (bench_rank == 0) {
            fprintf(stderr, "kvx-bench pages: needs 2 ranks, and --scatter must start at 0\n");
        }
        return 2;
    }
    ok = 1;
    if (j.comm != MPI_COMM_NULL) {
        MPI_Comm_rank(j.comm, &j.rank);
        ok = pages_setup(&j) == 0;
    }
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (ok && j.comm != MPI_COMM_NULL) {
        reps = malloc(sizeof(pages_rep_t *) * o->scatter.n);
        for (int l = 0; l < o->scatter.n; l++) {
            reps[l] = calloc((size_t)o->reps, sizeof(pages_rep_t));
            pages_measure(&j, l); /* warm-up */
        }
        if (j.rank == 0) {
            out = bench_out_open(o, world);
            pages_header(&j, out);
            bench_plot_script(out, pages_plot);
        }
        for (int r = 0; r < o->reps; r++) {
            for (int l = 0; l < o->scatter.n; l++) {
                reps[l][r] = pages_measure(&j, l);
            }
        }
        for (int l = 0; j.rank == 0 && l < o->scatter.n; l++) {
            pages_row(&j, out, l, reps);
        }
        rc = j.rank == 0 ? bench_out_close(out) : 0;
        for (int l = 0; l < o->scatter.n; l++) {
            free(reps[l]);
        }
        free(reps);
    }
    if (j.comm != MPI_COMM_NULL) {
        pages_free(&j);
        MPI_Comm_free(&j.comm);
    }
    bench_barrier_sleepy(MPI_COMM_WORLD);
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return ok ? rc : 1;
}
