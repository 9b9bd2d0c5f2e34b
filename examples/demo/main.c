/*
 * kvx-demo - a prefill/decode serving simulation on kvx.
 *
 * A stream of requests with prompt lengths drawn from a seed is served by
 * the job's prefill and decode instances (the layout). Decode instances
 * pre-allocate each request's pages from an allocator that fragments over
 * time; prefill instances compute the KV in chunks and hand each chunk to
 * kvx as soon as it is computed; the decode checks every byte of every head
 * it holds; every TP rank of an instance agrees on each room's outcome, and
 * at the end all ranks compare what they concluded. Rank 0 shows progress
 * and prints the summary; its last line starts "kvx-demo: OK" or
 * "kvx-demo: FAILED". `kvx-demo --help` lists the options.
 *
 * Uses the public API only (include/kvx.h).
 */
#include "demo.h"

#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *dtype_name(kvx_dtype_t d)
{
    static const char *const names[] = { "bf16", "fp16", "fp8", "fp32" };

    return (unsigned)d < 4 ? names[d] : "?";
}

static void print_header(const demo_opts_t *o, const kvx_identity_t *id, size_t pool)
{
    static const char *const layouts[] = { "HND", "NHD", "HEAD_MAJOR" };
    const kvx_kv_layout_t *kv = &o->kv;
    int mla = kv->attn == KVX_ATTN_MLA;
    size_t elem = kv->dtype == KVX_DTYPE_FP8 ? 1 : kv->dtype == KVX_DTYPE_FP32 ? 4 : 2;
    double token = (double)kv->layers * (mla ? 1 : 2) * kv->kv_heads * kv->head_dim * elem;
    const char *env_fault = demo_config_value("KVX_FAULT");

    printf("# kvx-demo %s: prefill:%dx%d,decode:%dx%d (%d ranks), KV in host memory\n",
           kvx_version(), id->prefill_instances, id->prefill_tp, id->decode_instances,
           id->decode_tp, id->world_size);
    if (o->replay != NULL) {
        demo_trace_header(o);
    } else {
        char rate[64] = "";

        if (o->rate > 0) {
            snprintf(rate, sizeof(rate), ", arriving %.4g per second", o->rate);
        }
        printf("# %u requests%s, prompts of %u-%u tokens (seed %llu), %u rooms in flight per "
               "instance\n",
               o->requests, rate, o->min_tokens, o->max_tokens, (unsigned long long)o->seed,
               o->concurrency);
    }
    if (o->kill_instance >= 0 || o->replace) {
        char kill[64] = "none";

        if (o->kill_instance >= 0) {
            snprintf(kill, sizeof(kill), "decode[%d] after %u of its rooms", o->kill_instance,
                     o->kill_after);
        }
        printf("# killed: %s; replacement: %s\n", kill,
               o->replace ? "spawned by rank 0 for a lost decode instance" : "none");
    }
    char shape[64];

    if (mla) {
        snprintf(shape, sizeof(shape), "a latent of %u", kv->head_dim);
    } else {
        snprintf(shape, sizeof(shape), "K,V x %u heads x %u", kv->kv_heads, kv->head_dim);
    }
    printf("# KV per token %.1f KiB: %u layers x %s x %s; pages of %u tokens (%s), %zu per rank\n",
           token / 1024, kv->layers, shape, dtype_name(kv->dtype), kv->page_size,
           layouts[kv->page_layout], pool);
    char compute[128] = "";

    /* Said only when set: the default run's line stays as it was. */
    if (o->layer_us > 0 || o->layerwise) {
        snprintf(compute, sizeof(compute), ", %.0f us of compute per layer, %s", o->layer_us,
                 o->layerwise ? "each layer handed over as computed"
                              : "a step's chunk handed over");
    }
    printf("# chunked prefill: %u pages per step%s; faults: %s%s%s\n", o->chunk_pages, compute,
           o->fault != NULL    ? o->fault
           : env_fault != NULL ? ""
                               : "none",
           o->fault != NULL && env_fault != NULL ? ";" : "", env_fault != NULL ? env_fault : "");
    fflush(stdout);
}

/* Collective: every rank gets the same status and reason. */
static kvx_ctx_t *create(const demo_opts_t *o, int rank, size_t pool)
{
    kvx_ctx_params_t params;
    kvx_failure_t why;
    kvx_ctx_t *ctx = NULL;
    char line[512];

    kvx_ctx_params_init(&params);
    params.layout = o->layout;
    params.kv = o->kv;
    params.num_pages = pool;
    params.aux_slots = demo_aux_slots(o);
    params.aux_item_size = sizeof(uint32_t);
    params.fault = o->fault;
    if (kvx_ctx_create(MPI_COMM_WORLD, &params, &ctx, &why) != KVX_OK) {
        kvx_failure_format(&why, line, sizeof(line));
        if (o->replacement_of >= 0) {
            fprintf(stderr, "kvx-demo: replacement rank %d: it could not join: %s\n", rank, line);
        } else if (rank == 0) {
            printf("kvx-demo: FAILED (no kvx context: %s)\n", line);
        }
        return NULL;
    }
    return ctx;
}

static double wall_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The stream, the instance's scheduler and the progress line. */
static demo_req_t *prepare(const demo_opts_t *o, kvx_ctx_t *ctx, const kvx_identity_t *id,
                           size_t pool, demo_serve_t *s)
{
    demo_req_t *reqs = demo_requests(o, id);

    if (reqs == NULL || demo_serve_init(s, o, ctx, reqs, pool) != 0 ||
        (s->progress = demo_progress_create(o, id)) == NULL) {
        fprintf(stderr, "kvx-demo: rank %d: out of memory\n", id->world_rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return reqs;
}

/* A process --replace spawned (replace.c): it joined the running job in the
 * place of the decode instance it replaces, serves what the prefill
 * instances route to it, and reports to the job's world rank 0. */
static int run_replacement(demo_opts_t *o, int rank, int size)
{
    demo_replace_t *rp = demo_replace_child(o, size);
    size_t pool = demo_pool_pages(o), len = 0;
    demo_req_t *reqs = NULL;
    kvx_ctx_t *ctx;
    demo_serve_t s;
    kvx_identity_t id;
    double joined;
    void *blob;

    if (rp == NULL || (ctx = create(o, rank, pool)) == NULL) {
        return 1; /* said why */
    }
    kvx_ctx_identity(ctx, &id);
    if (id.role != KVX_ROLE_DECODE || id.instance != o->replacement_of) {
        fprintf(stderr,
                "kvx-demo: rank %d of the replacement joined as %s[%d], not in the place "
                "of decode[%d]: it leaves\n",
                rank, kvx_role_name(id.role), id.instance, o->replacement_of);
        kvx_ctx_destroy(ctx);
        return 1;
    }
    reqs = prepare(o, ctx, &id, pool, &s);
    /* The job's clock: its times read as the job's (the same host's clock,
     * or one kept in step by NTP). */
    s.t0 = demo_now() - (wall_now() - o->job_t0);
    joined = demo_now() - s.t0;
    s.rp = rp;
    demo_progress_via(s.progress, demo_replace_comm(rp), 1);
    if (rank == 0) {
        printf("kvx-demo: replacement: decode[%d] (%d rank%s) joined the running job %.2f s into "
               "its run\n",
               id.instance, size, size == 1 ? "" : "s", joined);
        fflush(stdout);
    }
    if (demo_serve_run(&s) != 0) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    demo_progress_finish(s.progress, &s);
    blob = demo_report_blob(&s, joined, &len);
    /* Bounded by the job's own limit: rank 0 takes it once the job's ranks
     * are done. */
    if (blob == NULL || demo_replace_send(rp, blob, len, o->time_limit + 2 * o->end_timeout) != 0) {
        fprintf(stderr, "kvx-demo: replacement rank %d: its report was not taken\n", rank);
    } else {
        free(blob); /* else MPI may still read it */
    }
    kvx_ctx_destroy(ctx);
    demo_progress_destroy(s.progress);
    demo_serve_cleanup(&s);
    free(reqs);
    demo_replace_free(rp);
    return 0; /* the report (rank 0's summary) says how it went */
}

static int run(const demo_opts_t *o, int rank)
{
    size_t pool = demo_pool_pages(o);
    kvx_ctx_t *ctx = create(o, rank, pool);
    demo_req_t *reqs = NULL;
    demo_report_t *report;
    demo_serve_t s;
    kvx_identity_t id;
    int status;

    if (ctx == NULL) {
        return 1;
    }
    kvx_ctx_identity(ctx, &id);
    if (o->kill_instance >= id.decode_instances) {
        if (rank == 0) {
            fprintf(stderr, "kvx-demo: --kill-decode %d: the layout has %d decode instances\n",
                    o->kill_instance, id.decode_instances);
        }
        kvx_ctx_destroy(ctx);
        return 2;
    }
    reqs = prepare(o, ctx, &id, pool, &s);
    s.rp = demo_replace_create(o, &id);
    if (rank == 0) {
        print_header(o, &id, pool);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    s.t0 = demo_now();
    if (demo_serve_run(&s) != 0) {
        MPI_Abort(MPI_COMM_WORLD, 1); /* the TP ranks fell out of step, or MPI failed */
    }
    demo_progress_finish(s.progress, &s);
    report = demo_report_gather(&s);
    demo_replace_finish(s.rp, report, o->end_timeout);
    if (demo_report_complete(report)) {
        kvx_ctx_destroy(ctx);
        status = demo_report_print(report);
    } else {
        /* A rank is gone or unreachable: the summary first, since UCX 1.13
         * can abort this process while destroy closes endpoints to a peer
         * behind a cut link (uct_tcp_ep_destroy, uct_tcp_ep_flush). */
        status = demo_report_print(report);
        kvx_ctx_destroy(ctx);
    }
    demo_report_free(report);
    demo_progress_destroy(s.progress);
    demo_serve_cleanup(&s);
    demo_replace_free(s.rp);
    free(reqs);
    return status;
}

/* A spawned replacement whose parent gave up on MPI_Comm_spawn (or died)
 * would wait in MPI_Init for ever, and mpirun with it. */
#define REPLACEMENT_INIT_DEADLINE_S 90
#define DEMO_STR_(x)                #x
#define DEMO_STR(x)                 DEMO_STR_(x)

static void replacement_init_expired(int sig)
{
    static const char msg[] = "kvx-demo: replacement: MPI_Init did not return within " DEMO_STR(
        REPLACEMENT_INIT_DEADLINE_S) " s (the spawning rank gave up or is gone): exiting\n";
    ssize_t n = write(STDERR_FILENO, msg, sizeof(msg) - 1);

    (void)sig;
    (void)n;
    _exit(1);
}

int main(int argc, char **argv)
{
    demo_opts_t o;
    int rank, size, status, provided = 0, replace = 0, replacement = 0;

    /* --replace spawns from a thread of rank 0 while its main thread serves
     * on (replace.c): that needs MPI_THREAD_MULTIPLE. */
    for (int i = 1; i < argc; i++) {
        replace |= strcmp(argv[i], "--replace") == 0;
        replacement |= strcmp(argv[i], "--replacement-of") == 0;
    }
    if (replacement) {
        signal(SIGALRM, replacement_init_expired);
        alarm(REPLACEMENT_INIT_DEADLINE_S);
    }
    if (replace) {
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    } else {
        MPI_Init(&argc, &argv);
    }
    if (replacement) {
        alarm(0);
        signal(SIGALRM, SIG_DFL);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    status = demo_opts_parse(argc, argv, rank, size, &o);
    o.threads_multiple = provided == MPI_THREAD_MULTIPLE;
    if (status == 0 && o.trace != NULL) {
        status = demo_trace_load(&o, rank); /* collective: every rank, the same answer */
    }
    if (status == 0 && o.replacement_of >= 0) {
        status = run_replacement(&o, rank, size);
    } else if (status == 0) {
        status = run(&o, rank);
    } else if (status == 1) {
        status = 0; /* --help */
    }
    demo_trace_free(o.replay);
    /* With a rank gone or unreachable MPI_Finalize may wait for it forever
     * (under mpirun --enable-recovery --mca async_mpi_finalize 1 it does
     * not): the run's status stands after a few seconds either way. */
    demo_xchg_finalize(status, 5.0);
    return status;
}
