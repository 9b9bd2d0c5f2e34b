/*
 * agree.c - kvx-bench agree: how long every TP rank takes to agree on the
 * outcome of N rooms, against one MPI_Allreduce of the same bytes.
 *
 * For each --tp T the first 2T ranks form prefill:1xT,decode:1xT (the
 * others sleep). A repetition opens N one-page rooms on every rank and runs
 * one round on each instance, which gives the new rooms their slots (timed
 * as "register"); then the pages move (with --failed percent of the rooms,
 * at least one, aborted by the last prefill TP rank instead, so that one
 * rank of each instance holds the failure and its reason must travel). When
 * every rank holds every room in its final local state, the clock starts
 * at a barrier and both instances run rounds back to back, spinning in
 * kvx_agree_test(), until every room is agreed on every rank: kvx's time is
 * the slowest rank's. (A prefill rank counts a room it failed as FAILED
 * only once the decode instance's verdict has come, so with failures the
 * prefill instance needs a round after the decode's.)
 *
 * The baseline is one MPI_Allreduce(MIN) of what a round's first
 * collective reduces, N + 1 int32 (one state per slot and a trailer), over
 * the same TP communicators at the same time, the slowest rank's time.
 */
#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct agree_job {
    const bench_opts_t *o;
    MPI_Comm comm, tp_comm; /* tp_comm: a duplicate of kvx's, for the baseline */
    kvx_ctx_t *ctx;
    kvx_identity_t id;
    int tp;
    uint64_t next_id;
    uint64_t *ids;
    uint32_t *pages;
    char *chosen;
    kvx_agreed_t *out;
    int32_t *vec, *res;
} agree_job_t;

typedef struct agree_rep {
    double reg_us, kvx_us, mpi_us, nbc_us;
    double decode_us; /* the slowest decode rank's kvx_us: the outcome that starts decoding */
    int rounds, ok;
} agree_rep_t;

/* One round, spun to completion. */
static kvx_status_t agree_round(agree_job_t *j, size_t n)
{
    kvx_agree_t *a;
    kvx_status_t st = kvx_agree_start(j->ctx, j->ids, n, &a);

    if (st != KVX_OK) {
        return st;
    }
    while ((st = kvx_agree_test(a, j->out)) == KVX_INPROGRESS) {
    }
    kvx_agree_free(a);
    return st;
}

/* Opens the rooms, registers them (timed), and moves their pages; the
 * chosen rooms are aborted by the last prefill TP rank. */
static int agree_prepare(agree_job_t *j, int n, double *reg_us)
{
    int prefill = j->id.role == KVX_ROLE_PREFILL, ok = 1;
    double t0;

    for (int i = 0; i < n; i++) {
        j->ids[i] = j->next_id++;
        ok &= (prefill ? kvx_room_send_open(j->ctx, j->ids[i], 0, 1)
                       : kvx_room_recv_open(j->ctx, j->ids[i], 0, &j->pages[i], 1, -1)) == KVX_OK;
    }
    MPI_Barrier(j->comm);
    t0 = bench_now();
    ok &= agree_round(j, (size_t)n) == KVX_OK;
    *reg_us = (bench_now() - t0) * 1e6;
    for (int i = 0; prefill && i < n; i++) {
        if (j->chosen[i] && j->id.tp_rank == j->tp - 1) {
            ok &= kvx_room_abort(j->ctx, j->ids[i], "kvx-bench: a failed room") == KVX_OK;
        } else {
            ok &= kvx_room_send_chunk(j->ctx, j->ids[i], &j->pages[i], 1, NULL, 0) == KVX_OK;
        }
    }
    return ok;
}

/* Sleeps until every room is SUCCESS or FAILED on this rank. */
static int agree_settle(agree_job_t *j, int n)
{
    double start = bench_now();
    int next = 0;

    while (next < n && bench_now() - start < 120) {
        kvx_room_state_t st;

        if (kvx_room_poll(j->ctx, j->ids[next], &st) == KVX_OK && st != KVX_ROOM_SUCCESS &&
            st != KVX_ROOM_FAILED) {
            bench_sleep_us(200);
        } else {
            next++;
        }
    }
    return next == n;
}

/* A hash of a failed room's agreed root cause, to compare across ranks. */
static uint64_t agree_cause_hash(const kvx_failure_t *f)
{
    uint64_t h = 1469598103934665603ull;

    h = (h ^ (uint64_t)f->origin_rank) * 1099511628211ull;
    h = (h ^ (uint64_t)f->stage) * 1099511628211ull;
    h = (h ^ (uint64_t)(int64_t)f->status) * 1099511628211ull;
    for (const char *c = f->text; *c != '\0'; c++) {
        h = (h ^ (uint64_t)(unsigned char)*c) * 1099511628211ull;
    }
    return h;
}

/* What every rank agreed is what happened: the chosen rooms FAILED with the
 * abort on the last prefill TP rank as their cause, the others SUCCESS. */
static int agree_verify(agree_job_t *j, int n, uint64_t *hash)
{
    int ok = 1;

    *hash = 0;
    for (int i = 0; i < n; i++) {
        kvx_failure_t f;

        if (j->out[i].status != KVX_OK ||
            j->out[i].state != (j->chosen[i] ? KVX_ROOM_FAILED : KVX_ROOM_SUCCESS)) {
            ok = 0;
            continue;
        }
        if (!j->chosen[i]) {
            continue;
        }
        if (kvx_room_failure(j->ctx, j->ids[i], &f) != KVX_OK ||
            f.origin_role != KVX_ROLE_PREFILL || f.origin_tp_rank != j->tp - 1 ||
            f.stage != KVX_STAGE_ABORT || strstr(f.text, "kvx-bench: a failed room") == NULL) {
            char line[512];

            kvx_failure_format(&f, line, sizeof(line));
            fprintf(stderr, "kvx-bench agree: rank %d: room %llu: unexpected cause: %s\n",
                    bench_rank, (unsigned long long)j->ids[i], line);
            ok = 0;
        }
        *hash += agree_cause_hash(&f);
    }
    return ok;
}

static agree_rep_t agree_measure(agree_job_t *j, int n, int nfail)
{
    agree_rep_t rep = { 0, 0, 0, 0, 0, 0, 1 };
    double t0, v[6];
    MPI_Request req;
    int done = 0;
    uint64_t hash[2];

    memset(j->chosen, 0, (size_t)n);
    for (int m = 0; m < nfail; m++) {
        j->chosen[(int)((m + 0.5) * n / nfail)] = 1;
    }
    rep.ok &= agree_prepare(j, n, &rep.reg_us);
    rep.ok &= agree_settle(j, n);
    bench_barrier_sleepy(j->comm);
    MPI_Barrier(j->comm);
    t0 = bench_now();
    /* Every TP rank sees the same agreed results, so all decide alike
     * whether another round is needed. */
    for (int concluded = 0; !concluded && rep.ok && rep.rounds < 200000;) {
        rep.ok &= agree_round(j, (size_t)n) == KVX_OK;
        rep.rounds++;
        concluded = 1;
        for (int i = 0; i < n && concluded; i++) {
            concluded = j->out[i].status == KVX_OK &&
                        (j->out[i].state == KVX_ROOM_SUCCESS || j->out[i].state == KVX_ROOM_FAILED);
        }
    }
    rep.kvx_us = (bench_now() - t0) * 1e6;
    rep.ok &= agree_verify(j, n, &hash[0]);
    for (int i = 0; i < n; i++) {
        rep.ok &= bench_room_close(j->ctx, j->ids[i]) == KVX_OK;
    }
    /* The baseline, over the same communicators at the same time. */
    MPI_Barrier(j->comm);
    t0 = bench_now();
    MPI_Allreduce(j->vec, j->res, n + 1, MPI_INT32_T, MPI_MIN, j->tp_comm);
    rep.mpi_us = (bench_now() - t0) * 1e6;
    /* The non-blocking form kvx uses, spun with MPI_Test like a round. */
    MPI_Barrier(j->comm);
    t0 = bench_now();
    MPI_Iallreduce(j->vec, j->res, n + 1, MPI_INT32_T, MPI_MIN, j->tp_comm, &req);
    while (!done) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    }
    rep.nbc_us = (bench_now() - t0) * 1e6;
    v[0] = rep.reg_us;
    v[1] = rep.kvx_us;
    v[2] = rep.mpi_us;
    v[3] = rep.rounds;
    v[4] = rep.nbc_us;
    v[5] = j->id.role == KVX_ROLE_DECODE ? rep.kvx_us : 0;
    MPI_Allreduce(MPI_IN_PLACE, v, 6, MPI_DOUBLE, MPI_MAX, j->comm);
    hash[1] = hash[0];
    MPI_Allreduce(MPI_IN_PLACE, &hash[0], 1, MPI_UINT64_T, MPI_MIN, j->comm);
    MPI_Allreduce(MPI_IN_PLACE, &hash[1], 1, MPI_UINT64_T, MPI_MAX, j->comm);
    MPI_Allreduce(MPI_IN_PLACE, &rep.ok, 1, MPI_INT, MPI_MIN, j->comm);
    rep.reg_us = v[0];
    rep.kvx_us = v[1];
    rep.mpi_us = v[2];
    rep.rounds = (int)v[3];
    rep.nbc_us = v[4];
    rep.decode_us = v[5];
    rep.ok &= hash[0] == hash[1];
    return rep;
}

static void agree_row(agree_job_t *j, bench_out_t *out, int n, double pct, int nfail,
                      const agree_rep_t *reps)
{
    int nr = j->o->reps, ok = 1, rounds = 0;
    double *k = malloc(sizeof(double) * nr), *m = malloc(sizeof(double) * nr),
           *g = malloc(sizeof(double) * nr), *b = malloc(sizeof(double) * nr),
           *d = malloc(sizeof(double) * nr), ratio;
    bench_stat_t ks, ms, gs, bs, ds;

    for (int r = 0; r < nr; r++) {
        k[r] = reps[r].kvx_us;
        m[r] = reps[r].mpi_us;
        g[r] = reps[r].reg_us;
        b[r] = reps[r].nbc_us;
        d[r] = reps[r].decode_us;
        ok &= reps[r].ok;
        rounds = reps[r].rounds > rounds ? reps[r].rounds : rounds;
    }
    ks = bench_stat(k, nr);
    ms = bench_stat(m, nr);
    gs = bench_stat(g, nr);
    bs = bench_stat(b, nr);
    ds = bench_stat(d, nr);
    ratio = bench_ratio(k, m, nr);
    bench_out_row(out, ok,
                  "%3d %6d %6.0f %6d %6d %9.1f  %9.1f %9.1f %9.1f %9.1f  %9.1f %9.1f %10.1f "
                  "%7.2f  %s",
                  j->tp, n, pct, nfail, rounds, gs.med, ks.med, ks.min, ks.max, ds.med, ms.med,
                  ms.min, bs.med, ratio, ok ? "OK" : "FAILED");
    bench_json_begin(out);
    bench_json_num(out, "rooms", n);
    bench_json_num(out, "tp", j->tp);
    bench_json_num(out, "failed_pct", pct);
    bench_json_stat(out, "kvx_us", ks);
    bench_json_stat(out, "decode_us", ds);
    bench_json_stat(out, "allreduce_us", ms);
    bench_json_stat(out, "iallreduce_us", bs);
    bench_json_num(out, "ratio", ratio);
    bench_json_num(out, "failed_rooms", nfail);
    bench_json_num(out, "rounds", rounds);
    bench_json_num(out, "register_us", gs.med);
    bench_json_end(out, nr, ok);
    bench_plot_data(out, "%d %.0f %d %.2f %.2f", j->tp, pct, n, ks.med, ms.med);
    free(k);
    free(m);
    free(g);
    free(b);
    free(d);
}

/* Every (rooms, failed) point of one TP size. */
static int agree_tp(agree_job_t *j, bench_out_t *out, int *blocks, char *plot, size_t plot_len)
{
    const bench_opts_t *o = j->o;
    int max_n = 0, ok = 1;
    agree_rep_t *reps = calloc((size_t)o->reps, sizeof(agree_rep_t));

    for (int i = 0; i < o->nrooms.n; i++) {
        max_n = (int)o->nrooms.v[i] > max_n ? (int)o->nrooms.v[i] : max_n;
    }
    j->ids = calloc((size_t)max_n, sizeof(uint64_t));
    j->pages = calloc((size_t)max_n, sizeof(uint32_t));
    j->chosen = calloc((size_t)max_n, 1);
    j->out = calloc((size_t)max_n, sizeof(kvx_agreed_t));
    j->vec = calloc((size_t)max_n + 1, sizeof(int32_t));
    j->res = calloc((size_t)max_n + 1, sizeof(int32_t));
    for (int i = 0; i < max_n; i++) {
        j->pages[i] = (uint32_t)i;
        j->vec[i] = KVX_ROOM_SUCCESS;
    }
    for (int f = 0; f < o->failed.n; f++) {
        for (int i = 0; i < o->nrooms.n; i++) {
            int n = (int)o->nrooms.v[i];
            int nfail = o->failed.v[f] > 0 ? (int)lround(n * o->failed.v[f] / 100.0) : 0;

            nfail = o->failed.v[f] > 0 && nfail < 1 ? 1 : nfail > n ? n : nfail;
            for (int r = 0; r < o->reps; r++) {
                reps[r] = agree_measure(j, n, nfail);
            }
            if (out != NULL) {
                agree_row(j, out, n, o->failed.v[f], nfail, reps);
            }
            ok &= reps[0].ok;
        }
        if (out != NULL) {
            size_t len = strlen(plot);

            bench_plot_data(out, "\n");
            snprintf(plot + len, plot_len - len,
                     "%sDATA index %d using 3:4 with linespoints title 'kvx TP%d, %g%% failed', "
                     "DATA index %d using 3:5 with linespoints dashtype 2 title "
                     "'MPI_Allreduce TP%d'",
                     len > 5 ? ", " : "", *blocks, j->tp, o->failed.v[f], *blocks, j->tp);
            (*blocks)++;
        }
    }
    free(j->ids);
    free(j->pages);
    free(j->chosen);
    free(j->out);
    free(j->vec);
    free(j->res);
    free(reps);
    return ok;
}

static int agree_open(agree_job_t *j, int tp)
{
    kvx_kv_layout_t kv = { 1, 1, (unsigned)tp, 8, KVX_DTYPE_BF16, KVX_ATTN_MHA, KVX_PAGE_HND };
    char layout[64];
    int max_n = 0, ok;

    for (int i = 0; i < j->o->nrooms.n; i++) {
        max_n = (int)j->o->nrooms.v[i] > max_n ? (int)j->o->nrooms.v[i] : max_n;
    }
    snprintf(layout, sizeof(layout), "prefill:1x%d,decode:1x%d", tp, tp);
    j->tp = tp;
    j->next_id = 0; /* a fresh context: ids start again on every rank of it */
    j->ctx = bench_ctx_create(j->comm, layout, &kv, (size_t)max_n + 1, 1, NULL);
    ok = j->ctx != NULL;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, j->comm);
    if (!ok) {
        return -1;
    }
    kvx_ctx_identity(j->ctx, &j->id);
    MPI_Comm_dup(kvx_ctx_tp_comm(j->ctx), &j->tp_comm);
    return 0;
}

static void agree_header(bench_out_t *out, const bench_opts_t *o)
{
    bench_out_setup(out, "layout: prefill:1xT,decode:1xT on the first 2T ranks; one-page rooms; "
                         "both instances agree at once, each over its own TP ranks");
    bench_out_setup(out,
                    "method: per repetition, N rooms opened and registered by one round "
                    "(\"register\"), pages moved, the failed share aborted by prefill tp T-1; "
                    "then, every rank holding its final state, rounds back to back until every "
                    "room is agreed on every rank (kvx); decode: until every room is agreed on "
                    "every decode rank (the outcome the decode acts on; a prefill rank concludes "
                    "only once it heard it); %d reps; slowest rank; median",
                    o->reps);
    bench_out_setup(out, "baseline: one MPI_Allreduce(MIN) of N+1 int32 over each instance's TP "
                         "ranks, both instances at once; ratio = median of paired kvx/allreduce; "
                         "iallreduce: the same as MPI_Iallreduce spun with MPI_Test (what a round "
                         "starts with)");
    bench_out_heads(out,
                    " tp  rooms failed failed rounds  register        kvx       min       max    "
                    "decode  allreduce       min iallreduce   ratio  check",
                    "       (#)    (%)    (#)    (#)      (us)       (us)                         "
                    "  (us)       (us)                 (us) kvx/MPI       ");
}

int bench_agree(const bench_opts_t *o)
{
    agree_job_t j;
    bench_out_t *out = NULL;
    char world[512], tls[320], plot[4096] = "plot ";
    int rc = 0, ok = 1, blocks = 0;

    memset(&j, 0, sizeof(j));
    j.o = o;
    bench_world_text("each TP size T runs on the first 2T ranks; the others sleep", world,
                     sizeof(world));
    raw_probe_transports(MPI_COMM_WORLD, tls, sizeof(tls));
    if (bench_rank == 0) {
        out = bench_out_open(o, world);
        bench_out_setup(
            out, "UCX transports, probe endpoint rank 0 -> 1 with kvx's UCX settings: %s", tls);
        agree_header(out, o);
    }
    for (int t = 0; t < o->tp.n; t++) {
        int tp = (int)o->tp.v[t];

        if (2 * tp > bench_size) {
            if (bench_rank == 0) {
                bench_out_note(out, "TP %d needs %d ranks; the job has %d: not measured", tp,
                               2 * tp, bench_size);
            }
            continue;
        }
        j.comm = bench_subworld(2 * tp);
        if (j.comm != MPI_COMM_NULL) {
            if (agree_open(&j, tp) == 0) {
                ok &= agree_tp(&j, out, &blocks, plot, sizeof(plot));
                MPI_Comm_free(&j.tp_comm);
                kvx_ctx_destroy(j.ctx);
            } else {
                ok = 0;
            }
            MPI_Comm_free(&j.comm);
        }
        bench_barrier_sleepy(MPI_COMM_WORLD);
    }
    if (bench_rank == 0) {
        bench_out_note(out, "register: the round that gives N new rooms their slots (one "
                            "MPI_Iallreduce, then an MPI_Iallgather of the room ids)");
        char script[4300];

        snprintf(script, sizeof(script),
                 "set logscale xy\nset xlabel 'rooms per round'\nset ylabel 'microseconds'\n%s",
                 blocks > 0 ? plot : "plot 0 notitle");
        bench_plot_script(out, script);
        rc = bench_out_close(out);
    }
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return ok ? rc : 1;
}
