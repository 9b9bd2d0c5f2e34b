/*
 * layerwise.c - kvx-bench layerwise: the time a room's KV takes to reach
 * the decode when each layer leaves as soon as it is computed
 * (kvx_room_send_layers, one layer per hand-over) against the same room
 * handed over in one chunk once every layer is computed (send_chunk).
 *
 * prefill:1x1,decode:1x1 on ranks 0 and 1; a room is --room-pages pages of
 * --layers layers (K and V). The prefill "computes" each layer by spinning
 * for a fixed time (it occupies a core as a forward pass occupies the GPU),
 * then hands the layer over (layer-wise) or goes on (at the end). Both
 * ranks run agreement rounds, as a scheduler would, until the room is
 * agreed SUCCESS. Measured on rank 0's clock:
 *   tail   the last layer computed -> agreed SUCCESS on both ranks
 *   whole  compute start -> agreed SUCCESS on both ranks
 * The compute time per layer is a --balance multiple of one layer's
 * transfer, measured first per size as the at-end tail with no compute,
 * divided by the layers. Modes alternate within each repetition; ratios
 * are medians of paired ratios. The decode's pages are zeroed before each
 * repetition and checked against the pattern after it, with the aux.
 */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

#define LW_LIMIT_S 30.0

typedef struct lw_job {
    const bench_opts_t *o;
    MPI_Comm comm;
    int rank; /* 0 prefill, 1 decode */
    unsigned layers;
    kvx_ctx_t *ctx;
    void **bufs; /* [layer * 2 + comp] */
    size_t pb, max_np;
    uint32_t *pages;
    uint64_t next_id;
    double offset; /* this rank's clock minus rank 0's */
} lw_job_t;

typedef struct lw_rep {
    double tail_us, whole_us, call_us;
    int ok;
} lw_rep_t;

static uint64_t lw_seed(unsigned layer, int comp, size_t page)
{
    return ((uint64_t)layer * 2 + (uint64_t)comp) * 1000003ull + page;
}

static void lw_spin(double us)
{
    double end = bench_now() + us * 1e-6;

    while (bench_now() < end) {
    }
}

/* Rounds until the room is agreed SUCCESS or FAILED; the time it was, or a
 * negative value at the deadline (the room is aborted then). */
static double lw_agreed(lw_job_t *j, uint64_t id, kvx_room_state_t *state)
{
    double start = bench_now();
    kvx_agreed_t out;

    *state = KVX_ROOM_BOOTSTRAPPING;
    while (bench_now() - start < LW_LIMIT_S) {
        kvx_agree_t *a;

        if (kvx_agree_start(j->ctx, &id, 1, &a) != KVX_OK) {
            break;
        }
        while (kvx_agree_test(a, &out) == KVX_INPROGRESS) {
        }
        kvx_agree_free(a);
        if (out.status == KVX_OK &&
            (out.state == KVX_ROOM_SUCCESS || out.state == KVX_ROOM_FAILED)) {
            *state = out.state;
            return bench_now();
        }
        bench_sleep_us(j->o->poll_us);
    }
    kvx_room_abort(j->ctx, id, "kvx-bench layerwise: not agreed in time");
    return -1;
}

/* The prefill's part: granted, then compute and hand over; t[0] compute
 * start, t[1] the last layer computed, t[2] seconds spent in kvx's send
 * calls (time the forward pass waits). */
static int lw_prefill(lw_job_t *j, uint64_t id, size_t np, int layerwise, double compute_us,
                      double t[3])
{
    kvx_room_state_t st = KVX_ROOM_BOOTSTRAPPING;
    double start = bench_now();
    int ok = kvx_room_send_open(j->ctx, id, 0, np) == KVX_OK;

    while (ok && kvx_room_poll(j->ctx, id, &st) == KVX_OK && st == KVX_ROOM_BOOTSTRAPPING &&
           bench_now() - start < LW_LIMIT_S) {
        bench_sleep_us(50);
    }
    bench_barrier_sleepy(j->comm);
    MPI_Barrier(j->comm);
    t[0] = bench_now();
    for (unsigned l = 0; l < j->layers; l++) {
        if (j->o->compute_sleep) {
            bench_sleep_us(compute_us);
        } else {
            lw_spin(compute_us);
        }
        if (l + 1 == j->layers) {
            t[1] = bench_now();
        }
        if (ok && layerwise) {
            int last = l + 1 == j->layers;
            double c0 = bench_now();

            ok = kvx_room_send_layers(j->ctx, id, j->pages, np, l, 1, NULL, last ? &id : NULL,
                                      last ? sizeof(id) : 0) == KVX_OK;
            t[2] += bench_now() - c0;
        }
    }
    if (ok && !layerwise) {
        double c0 = bench_now();

        ok = kvx_room_send_chunk(j->ctx, id, j->pages, np, &id, sizeof(id)) == KVX_OK;
        t[2] += bench_now() - c0;
    }
    return ok;
}

/* Words of the decode's pages that differ from the pattern, and a wrong aux. */
static size_t lw_check(lw_job_t *j, uint64_t id, size_t np)
{
    size_t bad = 0, len = 0;
    uint64_t aux = 0;

    for (unsigned l = 0; l < j->layers; l++) {
        for (int c = 0; c < 2; c++) {
            for (size_t i = 0; i < np; i++) {
                bad += bench_check((char *)j->bufs[l * 2 + c] + (size_t)j->pages[i] * j->pb, j->pb,
                                   lw_seed(l, c, j->pages[i]));
            }
        }
    }
    if (kvx_room_aux(j->ctx, id, &aux, sizeof(aux), &len) != KVX_OK || len != sizeof(aux) ||
        aux != id) {
        bad++;
    }
    return bad;
}

/* One room in one mode; the same values on both ranks. */
static lw_rep_t lw_room(lw_job_t *j, size_t np, int layerwise, double compute_us, size_t *bad)
{
    uint64_t id = j->next_id++;
    lw_rep_t rep = { 0, 0, 0, 1 };
    kvx_room_state_t st;
    double t[3] = { 0, 0, 0 }, v[4], done;

    if (j->rank == 1) {
        for (unsigned b = 0; b < j->layers * 2; b++) {
            memset(j->bufs[b], 0, np * j->pb);
        }
        rep.ok = kvx_room_recv_open(j->ctx, id, 0, j->pages, np, 0) == KVX_OK;
        bench_barrier_sleepy(j->comm);
        MPI_Barrier(j->comm);
    } else {
        rep.ok = lw_prefill(j, id, np, layerwise, compute_us, t);
    }
    done = lw_agreed(j, id, &st);
    rep.ok &= done > 0 && st == KVX_ROOM_SUCCESS;
    /* A rank done first must not spin in MPI (Open MPI's blocking calls
     * do), nor check bytes, while the other's room is not concluded: on a
     * small machine it would take the core the other's progress thread
     * needs. */
    bench_barrier_sleepy(j->comm);
    if (j->rank == 1) {
        *bad += rep.ok ? lw_check(j, id, np) : 0;
    }
    rep.ok &= bench_room_close(j->ctx, id) == KVX_OK;
    v[0] = done - j->offset; /* on rank 0's clock */
    v[1] = t[1];
    v[2] = t[0];
    v[3] = t[2];
    MPI_Allreduce(MPI_IN_PLACE, v, 4, MPI_DOUBLE, MPI_MAX, j->comm);
    MPI_Allreduce(MPI_IN_PLACE, &rep.ok, 1, MPI_INT, MPI_MIN, j->comm);
    rep.tail_us = (v[0] - v[1]) * 1e6;
    rep.whole_us = (v[0] - v[2]) * 1e6;
    rep.call_us = v[3] * 1e6;
    return rep;
}

/* One layer's transfer: the at-end tail with no compute, over the layers. */
static double lw_calibrate(lw_job_t *j, size_t np, int *ok, size_t *bad)
{
    double *v = calloc((size_t)j->o->reps, sizeof(double)), med;

    for (int r = 0; r < j->o->reps; r++) {
        lw_rep_t rep = lw_room(j, np, 0, 0, bad);

        *ok &= rep.ok;
        v[r] = rep.tail_us;
    }
    med = bench_median(v, j->o->reps) / j->layers;
    free(v);
    return med;
}

typedef struct lw_point {
    double *tail[2], *whole[2], *call[2]; /* [0] at the end, [1] layer-wise */
} lw_point_t;

static void lw_row(lw_job_t *j, bench_out_t *out, size_t np, double balance, double xfer_us,
                   double compute_us, lw_point_t *p, int ok)
{
    int reps = j->o->reps;
    bench_stat_t te = bench_stat(p->tail[0], reps), tl = bench_stat(p->tail[1], reps),
                 we = bench_stat(p->whole[0], reps), wl = bench_stat(p->whole[1], reps),
                 ce = bench_stat(p->call[0], reps), cl = bench_stat(p->call[1], reps);
    double tail_ratio = bench_ratio(p->tail[0], p->tail[1], reps),
           whole_ratio = bench_ratio(p->whole[1], p->whole[0], reps),
           over = wl.med - compute_us * j->layers;
    double mib = (double)np * j->pb * 2 * j->layers / (1 << 20);

    bench_out_row(out, ok,
                  "%5zu %7.2f %7.2f %9.0f %8.0f  %9.0f %9.0f %7.2f %6.2f  %9.0f %9.0f %7.3f "
                  "%9.0f  %7.0f %7.0f  %s",
                  np, mib, balance, compute_us, xfer_us, te.med, tl.med, tail_ratio,
                  tl.med / xfer_us, we.med, wl.med, whole_ratio, over, ce.med, cl.med,
                  ok ? "OK" : "FAILED");
    bench_json_begin(out);
    bench_json_num(out, "pages", (double)np);
    bench_json_num(out, "layers", j->layers);
    bench_json_num(out, "room_bytes", (double)np * (double)j->pb * 2 * j->layers);
    bench_json_num(out, "balance", balance);
    bench_json_num(out, "compute_per_layer_us", compute_us);
    bench_json_num(out, "transfer_per_layer_us", xfer_us);
    bench_json_stat(out, "end_tail_us", te);
    bench_json_stat(out, "layerwise_tail_us", tl);
    bench_json_num(out, "tail_end_over_layerwise", tail_ratio);
    bench_json_num(out, "layerwise_tail_over_layer_transfer", tl.med / xfer_us);
    bench_json_stat(out, "end_whole_us", we);
    bench_json_stat(out, "layerwise_whole_us", wl);
    bench_json_num(out, "whole_layerwise_over_end", whole_ratio);
    bench_json_num(out, "layerwise_whole_over_compute_us", over);
    bench_json_stat(out, "end_send_calls_us", ce);
    bench_json_stat(out, "layerwise_send_calls_us", cl);
    bench_json_end(out, reps, ok);
    bench_plot_data(out, "%zu %g %.1f %.1f %.1f %.1f", np, balance, te.med, tl.med, we.med, wl.med);
}

/* Every balance of one room size. */
static int lw_size(lw_job_t *j, bench_out_t *out, size_t np)
{
    const bench_opts_t *o = j->o;
    size_t bad = 0;
    int ok = 1;
    double xfer_us = lw_calibrate(j, np, &ok, &bad);
    lw_point_t p;

    for (int m = 0; m < 2; m++) {
        p.tail[m] = calloc((size_t)o->reps, sizeof(double));
        p.whole[m] = calloc((size_t)o->reps, sizeof(double));
        p.call[m] = calloc((size_t)o->reps, sizeof(double));
    }
    for (int b = 0; b < o->balances.n; b++) {
        double compute_us = o->balances.v[b] * xfer_us;
        int pok = ok;

        for (int r = 0; r < o->reps; r++) {
            /* alternate which mode goes first, so neither always follows the other */
            for (int k = 0; k < 2; k++) {
                int m = (r + k) % 2;
                lw_rep_t rep = lw_room(j, np, m, compute_us, &bad);

                pok &= rep.ok;
                p.tail[m][r] = rep.tail_us;
                p.whole[m][r] = rep.whole_us;
                p.call[m][r] = rep.call_us;
            }
        }
        MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_UNSIGNED_LONG, MPI_SUM, j->comm);
        if (j->rank == 0 && out != NULL) {
            if (bad > 0) {
                bench_out_note(out, "%zu pages: %zu words or aux rows differ from what was sent",
                               np, bad);
            }
            lw_row(j, out, np, o->balances.v[b], xfer_us, compute_us, &p, pok && bad == 0);
        }
        ok &= pok && bad == 0;
        bad = 0;
    }
    for (int m = 0; m < 2; m++) {
        free(p.tail[m]);
        free(p.whole[m]);
        free(p.call[m]);
    }
    return ok;
}

static void lw_header(lw_job_t *j, bench_out_t *out)
{
    const bench_opts_t *o = j->o;

    bench_out_setup(out,
                    "layout: prefill:1x1,decode:1x1 (ranks 0 -> 1); a room is N pages of %u "
                    "layers, K and V, %zu-byte pages (HND, 16 tokens x 8 heads x 128 bf16)",
                    j->layers, j->pb);
    bench_out_setup(out,
                    "method: the prefill %s 'compute' us per layer; layer-wise: "
                    "kvx_room_send_layers of that layer after it; at the end: one "
                    "send_chunk after the last; both ranks run rounds until agreed SUCCESS",
                    o->compute_sleep ? "sleeps (--compute sleep)" : "spins (--compute spin)");
    bench_out_setup(out,
                    "tail = last layer computed -> agreed SUCCESS on both ranks; whole = compute "
                    "start -> the same; xfer = one layer's transfer (at-end tail with no compute "
                    "/ %u layers); compute = balance x xfer; %d reps, modes alternating; median; "
                    "ratios = median of paired ratios; call = time in kvx's send calls per room",
                    j->layers, o->reps);
    bench_out_heads(out,
                    "pages     MiB balance   compute     xfer   end tail   lw tail end/lw "
                    "lw/xfer  end whole  lw whole   lw/end   lw over end call lw call  check",
                    "       /room         /layer us  /layer us      (us)      (us)                "
                    "      (us)      (us)            compute (us)    (us)    (us)");
}

static const char lw_plot[] =
    "set logscale x 2\nset xlabel 'pages per room'\nset ylabel 'us'\n"
    "plot DATA using 1:($2==1?$3:1/0) with linespoints title 'tail, at the end (balance 1)', "
    "DATA using 1:($2==1?$4:1/0) with linespoints title 'tail, layer-wise (balance 1)', "
    "DATA using 1:($2==1?$5:1/0) with linespoints dashtype 2 title 'whole, at the end', "
    "DATA using 1:($2==1?$6:1/0) with linespoints dashtype 2 title 'whole, layer-wise'";

static int lw_open(lw_job_t *j)
{
    const bench_opts_t *o = j->o;
    kvx_kv_layout_t kv;
    int ok;

    MPI_Comm_rank(j->comm, &j->rank);
    for (int i = 0; i < o->room_pages.n; i++) {
        j->max_np = (size_t)o->room_pages.v[i] > j->max_np ? (size_t)o->room_pages.v[i] : j->max_np;
    }
    j->pb = bench_kv_32k(&kv, j->layers);
    j->ctx = bench_ctx_create(j->comm, "prefill:1x1,decode:1x1", &kv, j->max_np, 1, NULL);
    ok = j->ctx != NULL && kvx_ctx_page_bytes(j->ctx) == j->pb;
    if (ok) {
        j->bufs = bench_ctx_buffers(j->ctx, j->layers, 2);
        j->pages = malloc(sizeof(uint32_t) * j->max_np);
        for (size_t i = 0; i < j->max_np; i++) {
            j->pages[i] = (uint32_t)i;
        }
        for (unsigned b = 0; j->rank == 0 && b < j->layers * 2; b++) {
            for (size_t i = 0; i < j->max_np; i++) {
                bench_fill((char *)j->bufs[b] + i * j->pb, j->pb, lw_seed(b / 2, (int)(b % 2), i));
            }
        }
    }
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, j->comm);
    j->offset = ok ? bench_clock_offset(j->comm) : 0;
    return ok;
}

int bench_layerwise(const bench_opts_t *o)
{
    lw_job_t j;
    bench_out_t *out = NULL;
    char world[512];
    int rc = 1, ok = 1;

    memset(&j, 0, sizeof(j));
    j.o = o;
    j.layers = o->layers;
    j.comm = bench_subworld(2);
    if (bench_pair_world("layerwise", world, sizeof(world)) != 0) {
        return 2;
    }
    if (j.comm != MPI_COMM_NULL) {
        ok = lw_open(&j);
    }
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (ok && j.comm != MPI_COMM_NULL) {
        size_t bad = 0;

        /* wireup and first touch, both modes */
        lw_room(&j, (size_t)o->room_pages.v[0], 0, 0, &bad);
        lw_room(&j, (size_t)o->room_pages.v[0], 1, 0, &bad);
        if (j.rank == 0) {
            out = bench_out_open(o, world);
            lw_header(&j, out);
            bench_plot_script(out, lw_plot);
        }
        for (int i = 0; i < o->room_pages.n; i++) {
            ok &= lw_size(&j, out, (size_t)o->room_pages.v[i]);
        }
        if (j.rank == 0) {
            bench_out_note(out, "target: lw tail about one layer's transfer plus agreement "
                                "(lw/xfer near 1), lw whole about compute + one layer's "
                                "transfer (lw over compute near xfer)");
        }
        rc = j.rank == 0 ? bench_out_close(out) : 0;
    }
    if (j.comm != MPI_COMM_NULL) {
        if (j.ctx != NULL) {
            kvx_ctx_destroy(j.ctx);
        }
        free(j.bufs);
        free(j.pages);
        MPI_Comm_free(&j.comm);
    }
    bench_barrier_sleepy(MPI_COMM_WORLD);
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return ok ? rc : 1;
}
