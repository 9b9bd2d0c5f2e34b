/*
 * fault.c - kvx-bench fault: how long from a failure to FAILED agreed on
 * every rank.
 *
 * prefill:1x2,decode:1x2 on ranks 0-3 (the others sleep). Every rank runs
 * agreement rounds, --interval-us apart, as a serving engine's scheduler
 * would, until every room of a wave is agreed.
 *
 *   injected  a wave of --rooms rooms per repetition; a KVX_FAULT rule fails
 *             the last one at the post stage on prefill tp1 (every=N). The
 *             clock starts just before prefill tp1 hands that room over and
 *             stops when the slowest rank has it agreed FAILED (with the
 *             injected cause: prefill tp1, stage post).
 *   killed    (last, once; needs mpirun --enable-recovery --mca
 *             async_mpi_finalize 1) rooms in TRANSFERRING (the prefill holds
 *             back their last page); decode tp1 SIGKILLs itself at a time
 *             set in advance; the clock stops when the slowest survivor has
 *             every room agreed FAILED with the loss of decode[0].tp1 as the
 *             reason.
 *
 * Times of different ranks are compared on rank 0's clock (offsets from
 * ping-pongs, bench_clock_offset()).
 */
#include "bench.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FAULT_PAGES  32
#define FAULT_VICTIM 3 /* decode[0].tp1 */

typedef struct fault_job {
    const bench_opts_t *o;
    MPI_Comm comm; /* ranks 0-3 */
    int rank;
    kvx_ctx_t *ctx;
    kvx_identity_t id;
    double offset; /* this rank's clock minus rank 0's */
    uint64_t next_id;
    uint64_t *ids;
    uint32_t *pages;
    kvx_agreed_t *out;
    double *agreed_at; /* local time each room was first seen agreed */
} fault_job_t;

typedef struct fault_rep {
    double ms;
    int ok;
} fault_rep_t;

static int fault_open(fault_job_t *j, const char *rule)
{
    kvx_kv_layout_t kv = { 2, 16, 4, 64, KVX_DTYPE_BF16, KVX_ATTN_MHA, KVX_PAGE_HND };
    int ok;

    j->ctx = bench_ctx_create(j->comm, "prefill:1x2,decode:1x2", &kv,
                              (size_t)j->o->rooms * FAULT_PAGES, (size_t)j->o->rooms, rule);
    ok = j->ctx != NULL;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, j->comm);
    if (ok) {
        kvx_ctx_identity(j->ctx, &j->id);
    }
    return ok ? 0 : -1;
}

/* Rounds, interval apart, until every room is agreed; notes when each was.
 * A lost TP sibling ends rounds at once (KVX_ERR_PEER_LOST) with the
 * outcomes the loss concluded. Returns 1 when all concluded. */
static int fault_conclude(fault_job_t *j, int n, double limit)
{
    double start = bench_now();
    int concluded = 0;

    for (int i = 0; i < n; i++) {
        j->agreed_at[i] = 0;
    }
    while (!concluded && bench_now() - start < limit) {
        kvx_agree_t *a;
        kvx_status_t st = kvx_agree_start(j->ctx, j->ids, (size_t)n, &a);

        if (st != KVX_OK) {
            return 0;
        }
        while ((st = kvx_agree_test(a, j->out)) == KVX_INPROGRESS) {
        }
        kvx_agree_free(a);
        concluded = st == KVX_OK || st == KVX_ERR_PEER_LOST;
        for (int i = 0; i < n && (st == KVX_OK || st == KVX_ERR_PEER_LOST); i++) {
            int done = j->out[i].status == KVX_OK &&
                       (j->out[i].state == KVX_ROOM_SUCCESS || j->out[i].state == KVX_ROOM_FAILED);

            if (done && j->agreed_at[i] == 0) {
                j->agreed_at[i] = bench_now();
            }
            concluded &= done;
        }
        if (st == KVX_ERR_PEER_LOST) {
            return concluded;
        }
        bench_sleep_us(j->o->interval_us);
    }
    return concluded;
}

/* The failure of room i agreed here is the one expected (origin, stage,
 * and, for a loss, the victim's name in the text). */
static int fault_cause(fault_job_t *j, int i, int injected)
{
    kvx_failure_t f;
    char line[512] = "(no failure record)";
    int ok = kvx_room_failure(j->ctx, j->ids[i], &f) == KVX_OK;

    if (ok) {
        kvx_failure_format(&f, line, sizeof(line));
        ok = injected ? f.origin_role == KVX_ROLE_PREFILL && f.origin_tp_rank == 1 &&
                            f.stage == KVX_STAGE_POST && (f.flags & KVX_FAILURE_INJECTED)
                      : strstr(line, "decode[0].tp1") != NULL && strstr(line, " lost") != NULL;
    }
    if (!ok) {
        fprintf(stderr, "kvx-bench fault: rank %d: room %llu: unexpected cause: %s\n", bench_rank,
                (unsigned long long)j->ids[i], line);
    }
    return ok;
}

/* The prefill hands the wave over; tp1 notes when it handed over the room
 * the rule fails, and which it was. */
static void fault_send_wave(fault_job_t *j, int n, int npages, double *t_fail, int *failed)
{
    for (int i = 0; i < n; i++) {
        double t = bench_now();
        kvx_room_state_t st;

        kvx_room_send_chunk(j->ctx, j->ids[i], &j->pages[i * FAULT_PAGES], (size_t)npages,
                            npages == FAULT_PAGES ? &j->ids[i] : NULL,
                            npages == FAULT_PAGES ? sizeof(uint64_t) : 0);
        if (*failed < 0 && kvx_room_poll(j->ctx, j->ids[i], &st) == KVX_OK &&
            st == KVX_ROOM_FAILED) {
            *t_fail = t;
            *failed = i;
        }
    }
}

/* Opens a wave of n rooms of FAULT_PAGES pages on every rank. */
static void fault_open_wave(fault_job_t *j, int n)
{
    for (int i = 0; i < n; i++) {
        j->ids[i] = j->next_id++;
        if (j->id.role == KVX_ROLE_DECODE) {
            kvx_room_recv_open(j->ctx, j->ids[i], 0, &j->pages[i * FAULT_PAGES], FAULT_PAGES, i);
        } else {
            kvx_room_send_open(j->ctx, j->ids[i], 0, FAULT_PAGES);
        }
    }
}

static fault_rep_t fault_injected_once(fault_job_t *j)
{
    int n = j->o->rooms, failed = -1, ok = 1;
    double t_fail = 0, mine[2];
    fault_rep_t rep = { 0, 1 };

    fault_open_wave(j, n);
    MPI_Barrier(j->comm);
    if (j->id.role == KVX_ROLE_PREFILL) {
        fault_send_wave(j, n, FAULT_PAGES, &t_fail, &failed);
    }
    ok &= fault_conclude(j, n, 60);
    /* Prefill tp1 (rank 1) says which room failed and when, on rank 0's clock. */
    mine[0] = t_fail - j->offset;
    mine[1] = failed;
    MPI_Bcast(mine, 2, MPI_DOUBLE, 1, j->comm);
    failed = (int)mine[1];
    ok &= failed >= 0;
    for (int i = 0; i < n && ok; i++) {
        ok &= j->out[i].state == (i == failed ? KVX_ROOM_FAILED : KVX_ROOM_SUCCESS);
    }
    ok = ok && fault_cause(j, failed, 1);
    rep.ms = ok ? (j->agreed_at[failed] - j->offset - mine[0]) * 1e3 : 0;
    for (int i = 0; i < n; i++) {
        bench_room_close(j->ctx, j->ids[i]);
    }
    MPI_Allreduce(MPI_IN_PLACE, &rep.ms, 1, MPI_DOUBLE, MPI_MAX, j->comm);
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, j->comm);
    rep.ok = ok;
    return rep;
}

static void fault_row(bench_out_t *out, const char *kind, const double *ms, int n, int ok)
{
    bench_stat_t s = bench_stat(ms, n);

    bench_out_row(out, ok, "%9s %5d %9.1f %9.1f %9.1f  %s", kind, n, s.med, s.min, s.max,
                  ok ? "OK" : "FAILED");
    bench_json_begin(out);
    bench_json_str(out, "kind", kind);
    bench_json_stat(out, "ms", s);
    bench_json_end(out, n, ok);
    bench_plot_data(out, "%d %s %.3f %.3f %.3f", strcmp(kind, "injected") ? 1 : 0, kind, s.med,
                    s.min, s.max);
}

static int fault_injected(fault_job_t *j, bench_out_t *out)
{
    char rule[128];
    double *ms = calloc((size_t)j->o->reps, sizeof(double));
    int ok;

    snprintf(rule, sizeof(rule), "stage=post,role=prefill,tp=1,every=%d,effect=fail", j->o->rooms);
    ok = fault_open(j, rule) == 0;
    for (int r = 0; ok && r < j->o->reps; r++) {
        fault_rep_t rep = fault_injected_once(j);

        ms[r] = rep.ms;
        ok &= rep.ok;
    }
    if (j->rank == 0) {
        fault_row(out, "injected", ms, j->o->reps, ok);
    }
    if (j->ctx != NULL) {
        kvx_ctx_destroy(j->ctx);
        j->ctx = NULL;
    }
    free(ms);
    return ok;
}

/* The victim sleeps until the planned time (on its own clock) and dies. */
static void fault_die_at(double t_local)
{
    struct timespec ts;
    double now = bench_now();

    if (t_local > now) {
        ts.tv_sec = (time_t)(t_local - now);
        ts.tv_nsec = (long)((t_local - now - (double)ts.tv_sec) * 1e9);
        nanosleep(&ts, NULL);
    }
    kill(getpid(), SIGKILL);
}

/* Runs on every rank of the comm; after it the victim is gone and only
 * survivors (their comm: surv) return. */
static int fault_killed(fault_job_t *j, bench_out_t *out, MPI_Comm surv)
{
    int n = j->o->rooms, failed = -1, ok;
    double t_kill = 0, dummy = 0, ms = 0;

    ok = fault_open(j, NULL) == 0;
    if (!ok) {
        return 0;
    }
    fault_open_wave(j, n);
    if (j->id.role == KVX_ROLE_PREFILL) {
        fault_send_wave(j, n, FAULT_PAGES / 2, &dummy, &failed);
    }
    /* Rank 0 plans the kill 300 ms ahead, on its clock: the last collective
     * on a whole comm. */
    t_kill = bench_now() - j->offset + 0.3;
    MPI_Bcast(&t_kill, 1, MPI_DOUBLE, 0, j->comm);
    if (j->rank == FAULT_VICTIM) {
        fault_die_at(t_kill + j->offset);
    }
    ok &= fault_conclude(j, n, 60);
    for (int i = 0; i < n && ok; i++) {
        ok &= j->out[i].state == KVX_ROOM_FAILED && fault_cause(j, i, 0);
        ms = (j->agreed_at[i] - j->offset - t_kill) * 1e3 > ms
                 ? (j->agreed_at[i] - j->offset - t_kill) * 1e3
                 : ms;
    }
    MPI_Allreduce(MPI_IN_PLACE, &ms, 1, MPI_DOUBLE, MPI_MAX, surv);
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, surv);
    if (j->rank == 0) {
        fault_row(out, "killed", &ms, 1, ok);
    }
    for (int i = 0; i < n; i++) {
        kvx_room_close(j->ctx, j->ids[i]); /* pages whose writer died stay quarantined */
    }
    kvx_ctx_destroy(j->ctx);
    j->ctx = NULL;
    return ok;
}

static const char fault_plot[] =
    "set style fill solid 0.5\nset boxwidth 0.6\nset ylabel 'ms to FAILED agreed on every rank'\n"
    "set yrange [0:*]\nset xrange [-0.5:1.5]\nplot DATA using 1:3:xtic(2) with boxes title "
    "'median', DATA using 1:3:4:5 with yerrorbars title 'min..max'";

static void fault_header(bench_out_t *out, const bench_opts_t *o)
{
    bench_out_setup(out,
                    "layout: prefill:1x2,decode:1x2 on ranks 0-3; rooms of %d pages of 2 "
                    "layers x K,V x 4 KiB",
                    FAULT_PAGES);
    bench_out_setup(out,
                    "injected: %d rooms per wave, the last failed at post on prefill tp1 "
                    "(KVX_FAULT rule every=%d); clock from just before tp1 hands it over",
                    o->rooms, o->rooms);
    bench_out_setup(out,
                    "killed: decode tp1 (rank 3) SIGKILLs itself 300 ms after a planned "
                    "start while %d rooms are TRANSFERRING; clock from the planned kill",
                    o->rooms);
    bench_out_setup(out,
                    "every rank runs agreement rounds %.0f us apart; the clock stops when the "
                    "slowest rank has the room(s) agreed FAILED with the expected cause; times "
                    "on rank 0's clock (ping-pong offsets)",
                    o->interval_us);
    bench_out_heads(out, "     kind  reps        ms       min       max  check",
                    "                   median                         ");
}

static void fault_alloc(fault_job_t *j)
{
    int n = j->o->rooms;

    j->ids = calloc((size_t)n, sizeof(uint64_t));
    j->pages = calloc((size_t)n * FAULT_PAGES, sizeof(uint32_t));
    j->out = calloc((size_t)n, sizeof(kvx_agreed_t));
    j->agreed_at = calloc((size_t)n, sizeof(double));
    for (int i = 0; i < n * FAULT_PAGES; i++) {
        j->pages[i] = (uint32_t)i;
    }
}

int bench_fault(const bench_opts_t *o)
{
    int killed = (o->kinds & BENCH_KIND_KILLED) != 0, ok = 1, rc = 0;
    fault_job_t j;
    bench_out_t *out = NULL;
    MPI_Comm alive, surv = MPI_COMM_NULL;
    char world[512], tls[320];

    if (bench_size < 4 || (killed && !bench_recovery_enabled() && !o->force_kill)) {
        if (bench_rank == 0) {
            fprintf(stderr, "kvx-bench fault: needs 4 ranks%s\n",
                    killed ? ", and for the killed peer mpirun --enable-recovery --mca "
                             "async_mpi_finalize 1 (or --kinds injected)"
                           : "");
        }
        return 2;
    }
    memset(&j, 0, sizeof(j));
    j.o = o;
    /* After the kill no collective over the world can complete: the
     * survivors meet on communicators made before it. */
    MPI_Comm_split(MPI_COMM_WORLD, killed && bench_rank == FAULT_VICTIM ? MPI_UNDEFINED : 0,
                   bench_rank, &alive);
    j.comm = bench_subworld(4);
    bench_world_text("fault uses ranks 0-3; the others sleep", world, sizeof(world));
    raw_probe_transports(MPI_COMM_WORLD, tls, sizeof(tls));
    if (bench_rank == 0) {
        out = bench_out_open(o, world);
        bench_out_setup(
            out, "UCX transports, probe endpoint rank 0 -> 1 with kvx's UCX settings: %s", tls);
        fault_header(out, o);
        bench_plot_script(out, fault_plot);
    }
    if (j.comm != MPI_COMM_NULL) {
        MPI_Comm_rank(j.comm, &j.rank);
        MPI_Comm_split(j.comm, killed && j.rank == FAULT_VICTIM ? MPI_UNDEFINED : 0, j.rank, &surv);
        j.offset = bench_clock_offset(j.comm);
        fault_alloc(&j);
        if (o->kinds & BENCH_KIND_INJECTED) {
            ok &= fault_injected(&j, out);
        }
        if (killed) {
            ok &= fault_killed(&j, out, surv);
        }
        free(j.ids);
        free(j.pages);
        free(j.out);
        free(j.agreed_at);
    }
    if (bench_rank == 0) {
        rc = bench_out_close(out);
    }
    bench_barrier_sleepy(alive);
    MPI_Bcast(&rc, 1, MPI_INT, 0, alive);
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, alive);
    if (surv != MPI_COMM_NULL) {
        MPI_Comm_free(&surv);
    }
    MPI_Comm_free(&alive);
    return ok ? rc : 1;
}
