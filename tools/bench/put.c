/*
 * put.c - kvx-bench put: rooms of one contiguous run each, 64 KiB to 64 MiB,
 * against raw UCP puts of the same bytes.
 *
 * prefill:1x1,decode:1x1 on ranks 0 and 1. A room of B bytes is one layer's
 * K and V, B/2 each, over consecutive pages on both sides (kvx posts one put
 * per buffer, and one for the aux row). The baseline moves the same two
 * puts per room between the same ranks on a UCP context of its own set up
 * as kvx's is, flushing each room (raw.c). Both keep --window rooms in
 * flight; their repetitions alternate; each figure is the median, the ratio
 * the median of the paired ratios. Pages are 32 KiB, or half of --min where
 * that is smaller, so that --min 16k makes rooms of one 8 KiB page of K and
 * one of V.
 */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

typedef struct put_job {
    const bench_opts_t *o;
    MPI_Comm comm;
    int rank; /* 0 prefill and initiator, 1 decode and target */
    kvx_ctx_t *ctx;
    raw_t *raw;
    void **bufs; /* K, V */
    size_t pb;   /* bytes of a page of one buffer */
    size_t max_np;
    uint32_t **pages; /* [slot] pages 0.. of the slot, the same on both sides */
    uint64_t next_id;
} put_job_t;

static uint64_t put_seed(size_t bytes, int slot, int comp)
{
    return (uint64_t)bytes * 16 + (uint64_t)slot * 2 + (uint64_t)comp;
}

/* Source pattern of a size on the prefill and the initiator; zeroed
 * destinations on the decode and the target. */
static void put_prepare(put_job_t *j, size_t np, size_t bytes)
{
    size_t slot_bytes = j->max_np * j->pb, half = (size_t)j->o->window * slot_bytes;

    for (int s = 0; s < j->o->window; s++) {
        for (int c = 0; c < 2; c++) {
            char *kvx = (char *)j->bufs[c] + (size_t)s * slot_bytes;
            char *raw = (char *)(j->rank == 0 ? raw_src(j->raw) : raw_dst(j->raw)) + c * half +
                        (size_t)s * slot_bytes;

            if (j->rank == 0) {
                bench_fill(kvx, np * j->pb, put_seed(bytes, s, c));
                bench_fill(raw, np * j->pb, put_seed(bytes, s, c));
            } else {
                memset(kvx, 0, np * j->pb);
                memset(raw, 0, np * j->pb);
            }
        }
    }
}

/* Words that differ from the pattern in the decode's and the target's slots. */
static size_t put_verify(put_job_t *j, size_t np, size_t bytes, int slots)
{
    size_t slot_bytes = j->max_np * j->pb, half = (size_t)j->o->window * slot_bytes, bad = 0;

    for (int s = 0; j->rank == 1 && s < slots; s++) {
        for (int c = 0; c < 2; c++) {
            bad += bench_check((char *)j->bufs[c] + (size_t)s * slot_bytes, np * j->pb,
                               put_seed(bytes, s, c));
            bad += bench_check((char *)raw_dst(j->raw) + c * half + (size_t)s * slot_bytes,
                               np * j->pb, put_seed(bytes, s, c));
        }
    }
    return bad;
}

/* One kvx stream of nrooms; returns the decode's seconds (on every rank),
 * negative when a room failed. */
static double put_kvx(put_job_t *j, size_t np, int nrooms, uint64_t *puts, char *err, size_t len)
{
    stream_spec_t s = { j->o->window,  nrooms,
                        j->o->window,  j->pages,
                        j->pages,      np,
                        j->o->poll_us, 60 + (double)nrooms * (double)np * 1e-3,
                        j->next_id };
    stream_result_t r;
    double sec[2];
    int ok;

    j->next_id += (uint64_t)nrooms;
    stream_run(j->ctx, j->comm, &s, &r);
    ok = r.ok_rooms == nrooms && r.bad_aux == 0;
    if (!ok && err[0] == '\0') {
        snprintf(err, len, "rank %d: %d of %d rooms SUCCESS, %d bad aux: %.400s", j->rank,
                 r.ok_rooms, nrooms, r.bad_aux, r.error);
    }
    sec[0] = j->rank == 1 ? r.seconds : 0;
    sec[1] = ok ? 0 : 1;
    MPI_Allreduce(MPI_IN_PLACE, sec, 2, MPI_DOUBLE, MPI_MAX, j->comm);
    MPI_Bcast(&r.puts, 1, MPI_UINT64_T, 0, j->comm);
    *puts = r.puts;
    return sec[1] > 0 ? -1 : sec[0];
}

/* One raw stream of nrooms with the puts of room size np pages per buffer. */
static double put_raw(put_job_t *j, size_t np, int nrooms)
{
    int w = j->o->window;
    size_t slot_bytes = j->max_np * j->pb, half = (size_t)w * slot_bytes;
    raw_put_t *puts = malloc(sizeof(raw_put_t) * 2 * (size_t)w);
    const raw_put_t **slot_puts = malloc(sizeof(raw_put_t *) * (size_t)w);
    size_t *n = malloc(sizeof(size_t) * (size_t)w);
    double sec;

    for (int s = 0; s < w; s++) {
        for (int c = 0; c < 2; c++) {
            size_t off = c * half + (size_t)s * slot_bytes;

            puts[2 * s + c] = (raw_put_t){ off, off, np * j->pb };
        }
        slot_puts[s] = &puts[2 * s];
        n[s] = 2;
    }
    sec = raw_stream(j->raw, slot_puts, n, w, nrooms, w);
    sec = j->rank == 1 ? sec : 0;
    MPI_Allreduce(MPI_IN_PLACE, &sec, 1, MPI_DOUBLE, MPI_MAX, j->comm);
    free(puts);
    free(slot_puts);
    free(n);
    return sec;
}

/* Tokens of 2 KiB per page: 16 (32 KiB pages), fewer for rooms under
 * 64 KiB, down to 1. */
static unsigned put_tokens(size_t min_size)
{
    unsigned tokens = 16;

    while (tokens > 1 && (size_t)tokens * 2048 * 2 > min_size) {
        tokens /= 2;
    }
    return tokens;
}

static void put_row(put_job_t *j, bench_out_t *out, size_t bytes, int nrooms, double puts,
                    const double *kvx, const double *raw, int ok)
{
    int reps = j->o->reps;
    bench_stat_t k = bench_stat(kvx, reps), r = bench_stat(raw, reps);
    double ratio = bench_ratio(kvx, raw, reps);

    bench_out_row(out, ok, "%11zu %6d %6.1f %8.3f %8.3f %8.3f  %8.3f %8.3f %8.3f  %6.3f  %s", bytes,
                  nrooms, puts, k.med, k.min, k.max, r.med, r.min, r.max, ratio,
                  ok ? "OK" : "FAILED");
    bench_json_begin(out);
    bench_json_num(out, "bytes", (double)bytes);
    bench_json_stat(out, "kvx_gbps", k);
    bench_json_stat(out, "raw_gbps", r);
    bench_json_num(out, "ratio", ratio);
    bench_json_num(out, "rooms", nrooms);
    bench_json_num(out, "puts_per_room", puts);
    bench_json_end(out, reps, ok);
    bench_plot_data(out, "%zu %.4f %.4f %.4f", bytes, k.med, r.med, ratio);
}

/* Every repetition of one size: kvx and raw alternating. */
static void put_size(put_job_t *j, bench_out_t *out, size_t bytes)
{
    size_t np = bytes / (2 * j->pb);
    int w = j->o->window, reps = j->o->reps;
    int nrooms = (int)(j->o->total / bytes);
    double *kvx = calloc((size_t)reps, sizeof(double)), *raw = calloc((size_t)reps, sizeof(double));
    uint64_t puts = 0;
    char err[512] = "";
    size_t bad;
    int ok = 1;

    nrooms = nrooms < 2 * w ? 2 * w : nrooms > 2048 ? 2048 : nrooms;
    put_prepare(j, np, bytes);
    /* Warm-up, not counted: both paths touch their buffers and endpoints. */
    ok &= put_kvx(j, np, 2 * w, &puts, err, sizeof(err)) >= 0;
    ok &= put_raw(j, np, 2 * w) >= 0;
    for (int r = 0; r < reps; r++) {
        double k = put_kvx(j, np, nrooms, &puts, err, sizeof(err));
        double x = put_raw(j, np, nrooms);

        ok &= k > 0 && x > 0;
        kvx[r] = k > 0 ? (double)bytes * nrooms / k / 1e9 : 0;
        raw[r] = x > 0 ? (double)bytes * nrooms / x / 1e9 : 0;
    }
    bad = put_verify(j, np, bytes, w);
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_UNSIGNED_LONG, MPI_SUM, j->comm);
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, j->comm);
    if (err[0] != '\0') {
        fprintf(stderr, "kvx-bench put: %zu bytes: %s\n", bytes, err);
    }
    if (j->rank == 0 && out != NULL) {
        if (bad > 0) {
            bench_out_note(out, "%zu bytes: %zu words differ from what was sent", bytes, bad);
        }
        put_row(j, out, bytes, nrooms, (double)puts / nrooms, kvx, raw, ok && bad == 0);
    }
    free(kvx);
    free(raw);
}

static const char put_plot[] =
    "set logscale x 2\nset format x '%.0b%B'\nset xlabel 'bytes per room'\n"
    "set ylabel 'GB/s'\nset y2label 'kvx / raw'\nset y2range [0:1.2]\nset ytics nomirror\n"
    "set y2tics\nplot DATA using 1:2 with linespoints title 'kvx (decode SUCCESS)', "
    "DATA using 1:3 with linespoints title 'raw ucp_put_nbx + flush', "
    "DATA using 1:4 axes x1y2 with linespoints dashtype 2 title 'ratio'";

static void put_header(put_job_t *j, bench_out_t *out)
{
    const bench_opts_t *o = j->o;

    bench_out_setup(out,
                    "layout: prefill:1x1,decode:1x1 (ranks 0 -> 1); a room is 1 layer of K and "
                    "V, %zu-byte pages, consecutive on both sides; 8-byte aux row",
                    j->pb);
    bench_out_setup(out, "UCX transports, raw endpoint 0 -> 1: %s", raw_transports(j->raw));
    bench_out_setup(out, "UCX_NET_DEVICES=%s",
                    getenv("UCX_NET_DEVICES") ? getenv("UCX_NET_DEVICES") : "(unset)");
    bench_out_setup(out,
                    "method: %d rooms in flight; rooms per size = %zu MiB / size (%d..2048); %d "
                    "reps, kvx and raw alternating; median (min, max); ratio = median of paired "
                    "kvx/raw",
                    o->window, o->total >> 20, 2 * o->window, o->reps);
    bench_out_setup(out,
                    "kvx clock: from a barrier, with the first rooms granted, until the "
                    "decode sees its last room SUCCESS (polling every %.0f us)",
                    o->poll_us);
    bench_out_setup(out,
                    "raw clock: from a barrier until the target, %s, sees a flag put after "
                    "the last flush",
                    bench_raw_spin ? "spinning in ucp_worker_progress (--raw-wait spin)"
                                   : "progressing its worker as kvx's progress thread does "
                                     "(--raw-wait kvx)");
    bench_out_heads(
        out,
        "      bytes  rooms   puts   kvx GB/s      min      max  raw GB/s      min      "
        "max   ratio  check",
        "        (B)    (#) (/room)    median                      median              "
        "      kvx/raw");
}

int bench_put(const bench_opts_t *o)
{
    put_job_t j = { o, bench_subworld(2), 0, NULL, NULL, NULL, 0, 0, NULL, 0 };
    kvx_kv_layout_t kv;
    bench_out_t *out = NULL;
    char world[512];
    int rc = 1, ok = 1;

    if (bench_pair_world("put", world, sizeof(world)) != 0) {
        return 2;
    }
    if (j.comm != MPI_COMM_NULL) {
        MPI_Comm_rank(j.comm, &j.rank);
        /* The page size of one buffer is known once a context says so:
         * 32 KiB, or half of --min when that is smaller (a room is at
         * least a page of K and one of V). */
        j.pb = bench_kv_tokens(&kv, 1, put_tokens(o->min_size));
        j.max_np = (o->max_size + 2 * j.pb - 1) / (2 * j.pb);
        j.ctx = bench_ctx_create(j.comm, "prefill:1x1,decode:1x1", &kv,
                                 (size_t)o->window * j.max_np, (size_t)o->window, NULL);
        ok = j.ctx != NULL && kvx_ctx_page_bytes(j.ctx) == j.pb;
        MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, j.comm);
        if (ok) {
            j.bufs = bench_ctx_buffers(j.ctx, 1, 2);
            j.raw = raw_create(j.comm, 2 * (size_t)o->window * j.max_np * j.pb,
                               2 * (size_t)o->window * j.max_np * j.pb);
            ok = j.raw != NULL;
        }
    }
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (ok && j.comm != MPI_COMM_NULL) {
        j.pages = malloc(sizeof(uint32_t *) * (size_t)o->window);
        for (int s = 0; s < o->window; s++) {
            j.pages[s] = malloc(sizeof(uint32_t) * j.max_np);
            for (size_t i = 0; i < j.max_np; i++) {
                j.pages[s][i] = (uint32_t)((size_t)s * j.max_np + i);
            }
        }
        put_size(&j, NULL, 2 * j.pb); /* wireup, so that the header names the lanes */
        if (j.rank == 0) {
            out = bench_out_open(o, world);
            put_header(&j, out);
            bench_plot_script(out, put_plot);
        }
        for (size_t b = o->min_size; b <= o->max_size; b *= 2) {
            put_size(&j, out, (b + 2 * j.pb - 1) / (2 * j.pb) * 2 * j.pb);
        }
        rc = j.rank == 0 ? bench_out_close(out) : 0;
        for (int s = 0; s < o->window; s++) {
            free(j.pages[s]);
        }
        free(j.pages);
    }
    if (j.comm != MPI_COMM_NULL) {
        raw_destroy(j.raw);
        if (j.ctx != NULL) {
            kvx_ctx_destroy(j.ctx);
        }
        free(j.bufs);
        MPI_Comm_free(&j.comm);
    }
    bench_barrier_sleepy(MPI_COMM_WORLD);
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return ok ? rc : 1;
}
