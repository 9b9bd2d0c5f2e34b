/*
 * hetero.c - kvx-bench hetero: TP 1->1, 2->1, 1->2 and 4->2 at equal bytes.
 *
 * For each --layouts P:D the first P+D ranks form prefill:1xP,decode:1xD
 * (the others sleep); the model is the same in every layout (8 KV heads x
 * 128 x bf16, 16-token pages, --layers layers, K and V), so a room of
 * --pages pages moves the same bytes whoever holds which heads. Every decode
 * rank checks every element of the heads it holds against the pattern the
 * prefill ranks computed (indexed by the model's head, so any split
 * verifies). GB/s is the room bytes over the slowest decode rank's time;
 * the ratio is against 1:1 in the same repetition.
 */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

#define HETERO_HEADS    8
#define HETERO_HEAD_DIM 128
#define HETERO_PS       16

typedef struct hetero_job {
    const bench_opts_t *o;
    MPI_Comm comm;
    kvx_ctx_t *ctx;
    kvx_identity_t id;
    unsigned first_head, heads;
    void **bufs;
    size_t num_pages;
    uint32_t **pages; /* [slot], the same on both sides */
    uint64_t next_id;
} hetero_job_t;

/* Index of element (page p, local head h, token t, element e) in a buffer. */
static size_t hetero_index(const hetero_job_t *j, size_t p, unsigned h, unsigned t, unsigned e)
{
    switch (j->o->page_layout) {
    case KVX_PAGE_NHD:
        return ((p * HETERO_PS + t) * j->heads + h) * HETERO_HEAD_DIM + e;
    case KVX_PAGE_HEAD_MAJOR:
        return ((h * j->num_pages + p) * HETERO_PS + t) * HETERO_HEAD_DIM + e;
    default:
        return ((p * j->heads + h) * HETERO_PS + t) * HETERO_HEAD_DIM + e;
    }
}

/* Fills (prefill), zeroes (decode, check 0) or checks (decode, check 1) the
 * slots' pages; the value of an element depends on the model's head, so
 * every TP split agrees on it. Returns the elements that differ. */
static size_t hetero_pattern(hetero_job_t *j, int check)
{
    int fill = j->id.role == KVX_ROLE_PREFILL;
    size_t bad = 0, np = j->o->pages;

    for (unsigned b = 0; b < 2 * j->o->layers; b++) {
        uint16_t *buf = j->bufs[b];

        for (int s = 0; s < j->o->window; s++) {
            for (size_t i = 0; i < np; i++) {
                for (unsigned h = 0; h < j->heads; h++) {
                    for (unsigned t = 0; t < HETERO_PS; t++) {
                        size_t x = hetero_index(j, j->pages[s][i], h, t, 0);
                        uint64_t seed = ((uint64_t)b << 48) | ((uint64_t)s << 40) |
                                        ((i * HETERO_HEADS + j->first_head + h) * HETERO_PS + t);

                        for (unsigned e = 0; e < HETERO_HEAD_DIM; e++) {
                            uint16_t v = (uint16_t)bench_word(seed, e);

                            if (fill) {
                                buf[x + e] = v;
                            } else if (check) {
                                bad += buf[x + e] != v;
                            } else {
                                buf[x + e] = 0;
                            }
                        }
                    }
                }
            }
        }
    }
    return bad;
}

typedef struct hetero_rep {
    double gbps, puts;
    int ok;
} hetero_rep_t;

static int hetero_open(hetero_job_t *j, int p, int d)
{
    const bench_opts_t *o = j->o;
    kvx_kv_layout_t kv = { o->layers,      HETERO_PS,    HETERO_HEADS,  HETERO_HEAD_DIM,
                           KVX_DTYPE_BF16, KVX_ATTN_MHA, o->page_layout };
    char layout[64];

    snprintf(layout, sizeof(layout), "prefill:1x%d,decode:1x%d", p, d);
    j->num_pages = (size_t)o->window * o->pages;
    j->next_id = 0; /* a fresh context: ids start again on every rank of it */
    j->ctx = bench_ctx_create(j->comm, layout, &kv, j->num_pages, (size_t)o->window, NULL);
    if (j->ctx == NULL) {
        return -1;
    }
    kvx_ctx_identity(j->ctx, &j->id);
    kvx_ctx_heads(j->ctx, &j->first_head, &j->heads);
    j->bufs = bench_ctx_buffers(j->ctx, o->layers, 2);
    j->pages = malloc(sizeof(uint32_t *) * (size_t)o->window);
    for (int s = 0; s < o->window; s++) {
        j->pages[s] = malloc(sizeof(uint32_t) * o->pages);
        for (unsigned i = 0; i < o->pages; i++) {
            j->pages[s][i] = (uint32_t)((size_t)s * o->pages + i);
        }
    }
    return 0;
}

static void hetero_close(hetero_job_t *j)
{
    for (int s = 0; j->pages != NULL && s < j->o->window; s++) {
        free(j->pages[s]);
    }
    free(j->pages);
    free(j->bufs);
    j->pages = NULL;
    j->bufs = NULL;
    if (j->ctx != NULL) {
        kvx_ctx_destroy(j->ctx);
        j->ctx = NULL;
    }
}

/* One stream of n rooms; the slowest decode rank's seconds, < 0 on failure. */
static double hetero_stream(hetero_job_t *j, int n, double *puts)
{
    const bench_opts_t *o = j->o;
    stream_spec_t s = { o->window, n,        o->window,  j->pages,
                        j->pages,  o->pages, o->poll_us, 120 + (double)n * o->pages * 1e-2,
                        j->next_id };
    stream_result_t r;
    double v[3];
    size_t bad;

    j->next_id += (uint64_t)n;
    if (j->id.role == KVX_ROLE_DECODE) {
        hetero_pattern(j, 0);
    }
    stream_run(j->ctx, j->comm, &s, &r);
    bad = j->id.role == KVX_ROLE_DECODE ? hetero_pattern(j, 1) : 0;
    if (r.error[0] != '\0' || bad > 0) {
        fprintf(stderr, "kvx-bench hetero: rank %d: %zu elements differ: %s\n", bench_rank, bad,
                r.error);
    }
    v[0] = j->id.role == KVX_ROLE_DECODE ? r.seconds : 0;
    v[1] = r.ok_rooms == n && r.bad_aux == 0 && bad == 0 ? 0 : 1;
    v[2] = (double)r.puts;
    MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_MAX, j->comm);
    MPI_Allreduce(MPI_IN_PLACE, &v[2], 1, MPI_DOUBLE, MPI_SUM, j->comm);
    *puts = v[2] / n;
    return v[1] > 0 ? -1 : v[0];
}

/* One repetition of one layout, on the first p + d ranks. */
static hetero_rep_t hetero_measure(hetero_job_t *j, int p, int d)
{
    const bench_opts_t *o = j->o;
    double room_bytes =
        (double)o->pages * HETERO_PS * HETERO_HEADS * HETERO_HEAD_DIM * 2 * 2 * o->layers;
    hetero_rep_t rep = { 0, 0, 1 };
    int ok;

    j->comm = bench_subworld(p + d);
    if (j->comm != MPI_COMM_NULL) {
        ok = hetero_open(j, p, d) == 0;
        MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, j->comm);
        if (ok) {
            double sec;

            if (j->id.role == KVX_ROLE_PREFILL) {
                hetero_pattern(j, 0);
            }
            hetero_stream(j, 2 * o->window, &rep.puts); /* warm-up */
            sec = hetero_stream(j, o->rooms, &rep.puts);
            rep.gbps = sec > 0 ? room_bytes * o->rooms / sec / 1e9 : 0;
            rep.ok = sec > 0;
        }
        rep.ok &= ok;
        hetero_close(j);
        MPI_Comm_free(&j->comm);
    }
    bench_barrier_sleepy(MPI_COMM_WORLD);
    MPI_Bcast(&rep, sizeof(rep), MPI_BYTE, 0, MPI_COMM_WORLD);
    return rep;
}

static void hetero_row(bench_out_t *out, const bench_opts_t *o, int l, int base,
                       hetero_rep_t *const *reps)
{
    int p = (int)o->layouts.v[l] / 1000, d = (int)o->layouts.v[l] % 1000, nr = o->reps, ok = 1;
    double *g = malloc(sizeof(double) * nr), *b = malloc(sizeof(double) * nr), ratio;
    char name[32];
    bench_stat_t s;

    for (int r = 0; r < nr; r++) {
        g[r] = reps[l][r].gbps;
        b[r] = reps[base][r].gbps;
        ok &= reps[l][r].ok;
    }
    s = bench_stat(g, nr);
    ratio = bench_ratio(g, b, nr);
    snprintf(name, sizeof(name), "%d->%d", p, d);
    bench_out_row(out, ok, "%6s %5d %8.0f %8.3f %8.3f %8.3f %7.3f  %s", name, p + d,
                  reps[l][0].puts, s.med, s.min, s.max, ratio, ok ? "OK" : "FAILED");
    bench_json_begin(out);
    bench_json_str(out, "layout", name);
    bench_json_stat(out, "gbps", s);
    bench_json_num(out, "ratio", ratio);
    bench_json_num(out, "ranks", p + d);
    bench_json_num(out, "puts_per_room", reps[l][0].puts);
    bench_json_end(out, nr, ok);
    bench_plot_data(out, "%d \"%s\" %.4f %.4f %.4f", l, name, s.med, s.min, s.max);
    free(g);
    free(b);
}

static const char hetero_plot[] =
    "set style fill solid 0.5\nset boxwidth 0.6\nset ylabel 'GB/s'\nset yrange [0:*]\n"
    "set xrange [-0.5:*]\nplot DATA using 1:3:xtic(2) with boxes title 'kvx, median', "
    "DATA using 1:3:4:5 with yerrorbars title 'min..max'";

static const char *const page_layout_names[] = { "HND", "NHD", "HEAD_MAJOR" };

int bench_hetero(const bench_opts_t *o)
{
    hetero_job_t j;
    hetero_rep_t **reps = malloc(sizeof(hetero_rep_t *) * o->layouts.n);
    bench_out_t *out = NULL;
    char world[512], tls[320];
    int base = 0, need = 0, rc = 0;

    memset(&j, 0, sizeof(j));
    j.o = o;
    for (int l = 0; l < o->layouts.n; l++) {
        int p = (int)o->layouts.v[l] / 1000, d = (int)o->layouts.v[l] % 1000;

        need = p + d > need ? p + d : need;
        base = p == 1 && d == 1 ? l : base;
        reps[l] = calloc((size_t)o->reps, sizeof(hetero_rep_t));
    }
    bench_world_text("each layout runs on the first P+D ranks; the others sleep", world,
                     sizeof(world));
    if (need > bench_size) {
        if (bench_rank == 0) {
            fprintf(stderr, "kvx-bench hetero: the layouts need %d ranks, the job has %d\n", need,
                    bench_size);
        }
        return 2;
    }
    raw_probe_transports(MPI_COMM_WORLD, tls, sizeof(tls));
    if (bench_rank == 0) {
        out = bench_out_open(o, world);
        bench_out_setup(
            out, "UCX transports, probe endpoint rank 0 -> 1 with kvx's UCX settings: %s", tls);
        bench_out_setup(out, "layout: prefill:1xP,decode:1xD on the first P+D ranks for each "
                             "P->D of the table");
        bench_out_setup(out,
                        "model: 8 KV heads x %d x bf16, %d-token pages, %u layers, K and V, %s; "
                        "a room is %u pages = %.1f MiB whatever the TP sizes",
                        HETERO_HEAD_DIM, HETERO_PS, o->layers, page_layout_names[o->page_layout],
                        o->pages,
                        (double)o->pages * HETERO_PS * HETERO_HEADS * HETERO_HEAD_DIM * 4 *
                            o->layers / 1048576.0);
        bench_out_setup(out,
                        "method: %d rooms per point, %d in flight per rank, consecutive pages; "
                        "%d reps, layouts alternating, a fresh context each; GB/s over the "
                        "slowest decode rank; ratio = median of paired GB/s / GB/s(1->1)",
                        o->rooms, o->window, o->reps);
        bench_out_heads(out, "layout ranks     puts     GB/s      min      max   ratio  check",
                        "         (#)  (/room)   median                    /1->1       ");
        bench_plot_script(out, hetero_plot);
    }
    for (int r = 0; r < o->reps; r++) {
        for (int l = 0; l < o->layouts.n; l++) {
            reps[l][r] =
                hetero_measure(&j, (int)o->layouts.v[l] / 1000, (int)o->layouts.v[l] % 1000);
        }
    }
    for (int l = 0; bench_rank == 0 && l < o->layouts.n; l++) {
        hetero_row(out, o, l, base, reps);
    }
    if (bench_rank == 0) {
        bench_out_note(out, "puts per room: summed over the prefill ranks (packed puts and data "
                            "messages count as puts; the aux row is one)");
        rc = bench_out_close(out);
    }
    for (int l = 0; l < o->layouts.n; l++) {
        free(reps[l]);
    }
    free(reps);
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return rc;
}
