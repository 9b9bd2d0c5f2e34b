/*
 * verify.c - kvx-bench verify: what KVX_VERIFY costs on the data path.
 *
 * The put shape (prefill:1x1,decode:1x1 on ranks 0 and 1; a room is one
 * layer's K and V) on three contexts created side by side -- verify off,
 * sample and full (kvx_ctx_params_t.verify) -- whose repetitions alternate
 * within each point. Rooms lie on consecutive pages (one run: put's shape)
 * or on every other page (fragmented: one digest unit per page and buffer,
 * pages' shape). Every room must end SUCCESS with its aux; the pattern is
 * checked after the last repetition of each point.
 */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

#define VMODES 3

typedef struct verify_job {
    const bench_opts_t *o;
    MPI_Comm comm;
    int rank; /* 0 prefill, 1 decode */
    kvx_ctx_t *ctx[VMODES];
    void **bufs[VMODES];
    size_t pb, max_np;
    uint32_t **run, **frag; /* [slot] pages of each shape */
    uint64_t next_id;
} verify_job_t;

static const kvx_verify_t verify_modes[VMODES] = { KVX_VERIFY_OFF, KVX_VERIFY_SAMPLE,
                                                   KVX_VERIFY_FULL };
static const char *const verify_names[VMODES] = { "off", "sample", "full" };

static uint64_t verify_seed(size_t bytes, int slot, int comp, int frag)
{
    return (uint64_t)bytes * 64 + (uint64_t)slot * 4 + (uint64_t)comp * 2 + (uint64_t)frag;
}

/* The pattern into the prefill's pages of every context, zeros into the decode's. */
static void verify_prepare(verify_job_t *j, size_t np, size_t bytes, int frag)
{
    for (int m = 0; m < VMODES; m++) {
        for (int s = 0; s < j->o->window; s++) {
            for (int c = 0; c < 2; c++) {
                uint32_t *pages = frag ? j->frag[s] : j->run[s];

                for (size_t i = 0; i < np; i++) {
                    char *p = (char *)j->bufs[m][c] + (size_t)pages[i] * j->pb;

                    if (j->rank == 0) {
                        bench_fill(p, j->pb, verify_seed(bytes, s, c, frag) + i);
                    } else {
                        memset(p, 0, j->pb);
                    }
                }
            }
        }
    }
}

static size_t verify_check(verify_job_t *j, size_t np, size_t bytes, int frag)
{
    size_t bad = 0;

    for (int m = 0; j->rank == 1 && m < VMODES; m++) {
        for (int s = 0; s < j->o->window; s++) {
            for (int c = 0; c < 2; c++) {
                uint32_t *pages = frag ? j->frag[s] : j->run[s];

                for (size_t i = 0; i < np; i++) {
                    bad += bench_check((char *)j->bufs[m][c] + (size_t)pages[i] * j->pb, j->pb,
                                       verify_seed(bytes, s, c, frag) + i);
                }
            }
        }
    }
    return bad;
}

/* One stream of nrooms on context m; the decode's seconds on every rank,
 * negative when a room failed. */
static double verify_stream(verify_job_t *j, int m, size_t np, int frag, int nrooms, char *err,
                            size_t len)
{
    uint32_t **pages = frag ? j->frag : j->run;
    stream_spec_t s = { j->o->window,  nrooms,
                        j->o->window,  pages,
                        pages,         np,
                        j->o->poll_us, 60 + (double)nrooms * (double)np * 1e-3,
                        j->next_id };
    stream_result_t r;
    double sec[2];
    int ok;

    j->next_id += (uint64_t)nrooms;
    stream_run(j->ctx[m], j->comm, &s, &r);
    ok = r.ok_rooms == nrooms && r.bad_aux == 0;
    if (!ok && err[0] == '\0') {
        snprintf(err, len, "verify %s: rank %d: %d of %d rooms SUCCESS, %d bad aux: %.400s",
                 verify_names[m], j->rank, r.ok_rooms, nrooms, r.bad_aux, r.error);
    }
    sec[0] = j->rank == 1 ? r.seconds : 0;
    sec[1] = ok ? 0 : 1;
    MPI_Allreduce(MPI_IN_PLACE, sec, 2, MPI_DOUBLE, MPI_MAX, j->comm);
    return sec[1] > 0 ? -1 : sec[0];
}

static void verify_row(verify_job_t *j, bench_out_t *out, size_t bytes, int frag, int nrooms,
                       double *const gbps[VMODES], int ok)
{
    int reps = j->o->reps;
    bench_stat_t s[VMODES];
    double rs = bench_ratio(gbps[1], gbps[0], reps), rf = bench_ratio(gbps[2], gbps[0], reps);

    for (int m = 0; m < VMODES; m++) {
        s[m] = bench_stat(gbps[m], reps);
    }
    bench_out_row(out, ok, "%11zu %6d %-5s %8.3f %8.3f %8.3f  %7.3f %7.3f  %s", bytes, nrooms,
                  frag ? "frag" : "run", s[0].med, s[1].med, s[2].med, rs, rf,
                  ok ? "OK" : "FAILED");
    bench_json_begin(out);
    bench_json_num(out, "bytes", (double)bytes);
    bench_json_str(out, "pages", frag ? "fragmented" : "consecutive");
    for (int m = 0; m < VMODES; m++) {
        char key[32];

        snprintf(key, sizeof(key), "%s_gbps", verify_names[m]);
        bench_json_stat(out, key, s[m]);
    }
    bench_json_num(out, "sample_over_off", rs);
    bench_json_num(out, "full_over_off", rf);
    bench_json_num(out, "rooms", nrooms);
    bench_json_end(out, reps, ok);
    bench_plot_data(out, "%zu %d %.4f %.4f %.4f", bytes, frag, s[0].med, s[1].med, s[2].med);
}

/* Every repetition of one point: off, sample and full in turn. */
static void verify_point(verify_job_t *j, bench_out_t *out, size_t bytes, int frag)
{
    size_t np = bytes / (2 * j->pb);
    int w = j->o->window, reps = j->o->reps;
    int nrooms = (int)(j->o->total / bytes);
    double *gbps[VMODES];
    char err[512] = "";
    size_t bad;
    int ok = 1;

    nrooms = nrooms < 2 * w ? 2 * w : nrooms > 2048 ? 2048 : nrooms;
    verify_prepare(j, np, bytes, frag);
    for (int m = 0; m < VMODES; m++) {
        gbps[m] = calloc((size_t)reps, sizeof(double));
        ok &= verify_stream(j, m, np, frag, 2 * w, err, sizeof(err)) >= 0; /* warm-up */
    }
    for (int r = 0; r < reps; r++) {
        for (int m = 0; m < VMODES; m++) {
            double sec = verify_stream(j, m, np, frag, nrooms, err, sizeof(err));

            ok &= sec > 0;
            gbps[m][r] = sec > 0 ? (double)bytes * nrooms / sec / 1e9 : 0;
        }
    }
    bad = verify_check(j, np, bytes, frag);
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_UNSIGNED_LONG, MPI_SUM, j->comm);
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, j->comm);
    if (err[0] != '\0') {
        fprintf(stderr, "kvx-bench verify: %zu bytes: %s\n", bytes, err);
    }
    if (j->rank == 0 && out != NULL) {
        if (bad > 0) {
            bench_out_note(out, "%zu bytes: %zu words differ from what was sent", bytes, bad);
        }
        verify_row(j, out, bytes, frag, nrooms, gbps, ok && bad == 0);
    }
    for (int m = 0; m < VMODES; m++) {
        free(gbps[m]);
    }
}

static void verify_header(verify_job_t *j, bench_out_t *out)
{
    const bench_opts_t *o = j->o;
    const char *rate = "?";
    kvx_config_var_t v;

    for (size_t i = 0; kvx_config_var(i, &v) == KVX_OK; i++) {
        if (!strcmp(v.name, "KVX_VERIFY_SAMPLE")) {
            rate = v.value != NULL ? v.value : v.default_value;
        }
    }

    bench_out_setup(out,
                    "layout: prefill:1x1,decode:1x1 (ranks 0 -> 1); a room is 1 layer of K and "
                    "V, %zu-byte pages: run = consecutive pages, frag = every other page",
                    j->pb);
    bench_out_setup(out,
                    "contexts: KVX_VERIFY off, sample (1 unit in %s) and full, side by side; "
                    "digests: XXH3 per row, the prefill before its DONE, the decode before "
                    "SUCCESS",
                    rate);
    bench_out_setup(out,
                    "method: %d rooms in flight; rooms per point = %zu MiB / size (%d..2048); %d "
                    "reps, off, sample and full in turn; median; ratios = median of paired ratios",
                    o->window, o->total >> 20, 2 * o->window, o->reps);
    bench_out_heads(out,
                    "      bytes  rooms pages  off GB/s sample     full  sample/off full/off  "
                    "check",
                    "        (B)    (#)          median   median   median");
}

static const char verify_plot[] =
    "set logscale x 2\nset format x '%.0b%B'\nset xlabel 'bytes per room'\n"
    "set ylabel 'GB/s'\nplot DATA using 1:($2==0?$3:1/0) with linespoints title 'off (run)', "
    "DATA using 1:($2==0?$4:1/0) with linespoints title 'sample (run)', "
    "DATA using 1:($2==0?$5:1/0) with linespoints title 'full (run)'";

int bench_verify(const bench_opts_t *o)
{
    verify_job_t j;
    kvx_kv_layout_t kv;
    bench_out_t *out = NULL;
    char world[512];
    int rc = 1, ok = 1;

    memset(&j, 0, sizeof(j));
    j.o = o;
    j.comm = bench_subworld(2);
    if (bench_pair_world("verify", world, sizeof(world)) != 0) {
        return 2;
    }
    if (j.comm != MPI_COMM_NULL) {
        MPI_Comm_rank(j.comm, &j.rank);
        j.pb = bench_kv_32k(&kv, 1);
        j.max_np = (o->max_size + 2 * j.pb - 1) / (2 * j.pb);
        for (int m = 0; m < VMODES && ok; m++) {
            /* twice the pages of a slot: the fragmented shape uses every other one */
            j.ctx[m] = bench_ctx_create_verify(j.comm, "prefill:1x1,decode:1x1", &kv,
                                               (size_t)o->window * j.max_np * 2, (size_t)o->window,
                                               verify_modes[m]);
            ok = j.ctx[m] != NULL && kvx_ctx_page_bytes(j.ctx[m]) == j.pb;
            if (ok) {
                j.bufs[m] = bench_ctx_buffers(j.ctx[m], 1, 2);
            }
        }
        MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, j.comm);
    }
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (ok && j.comm != MPI_COMM_NULL) {
        j.run = malloc(sizeof(uint32_t *) * (size_t)o->window);
        j.frag = malloc(sizeof(uint32_t *) * (size_t)o->window);
        for (int s = 0; s < o->window; s++) {
            j.run[s] = malloc(sizeof(uint32_t) * j.max_np);
            j.frag[s] = malloc(sizeof(uint32_t) * j.max_np);
            for (size_t i = 0; i < j.max_np; i++) {
                j.run[s][i] = (uint32_t)((size_t)s * 2 * j.max_np + i);
                j.frag[s][i] = (uint32_t)((size_t)s * 2 * j.max_np + 2 * i);
            }
        }
        verify_point(&j, NULL, 2 * j.pb, 0); /* wireup */
        if (j.rank == 0) {
            out = bench_out_open(o, world);
            verify_header(&j, out);
            bench_plot_script(out, verify_plot);
        }
        for (size_t b = o->min_size; b <= o->max_size; b *= 4) {
            size_t bytes = (b + 2 * j.pb - 1) / (2 * j.pb) * 2 * j.pb;

            verify_point(&j, out, bytes, 0);
            verify_point(&j, out, bytes, 1);
        }
        rc = j.rank == 0 ? bench_out_close(out) : 0;
        for (int s = 0; s < o->window; s++) {
            free(j.run[s]);
            free(j.frag[s]);
        }
        free(j.run);
        free(j.frag);
    }
    if (j.comm != MPI_COMM_NULL) {
        for (int m = 0; m < VMODES; m++) {
            if (j.ctx[m] != NULL) {
                kvx_ctx_destroy(j.ctx[m]);
            }
            free(j.bufs[m]);
        }
        MPI_Comm_free(&j.comm);
    }
    bench_barrier_sleepy(MPI_COMM_WORLD);
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return ok ? rc : 1;
}
