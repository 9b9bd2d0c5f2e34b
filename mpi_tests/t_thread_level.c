/*
 * t_thread_level.c - kvx_ctx_create() against MPI's thread level
 * (kvx.h: Threads and MPI).
 *
 *   t_thread_level funneled    MPI_Init_thread(MPI_THREAD_FUNNELED); rank 0
 *                              creates its context from a thread of its own,
 *                              the others from the main thread: every rank
 *                              gets KVX_ERR_MPI with rank 0's reason, which
 *                              names the level
 *   t_thread_level serialized  MPI_Init_thread(MPI_THREAD_SERIALIZED); every
 *                              rank creates and destroys from a thread of
 *                              its own: it works
 *
 * (the job layout comes from KVX_LAYOUT)
 */
#include <kvx.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "testlib.h"

int tl_rank, tl_failures;

typedef struct job {
    kvx_status_t created, destroyed;
    kvx_failure_t why;
    int destroy;
} job_t;

static void job_run(job_t *j)
{
    kvx_ctx_params_t p;
    kvx_ctx_t *ctx = NULL;

    kvx_ctx_params_init(&p);
    p.kv.layers = 1;
    p.kv.page_size = 16;
    p.kv.kv_heads = 2;
    p.kv.head_dim = 64;
    p.num_pages = 4;
    memset(&j->why, 0, sizeof(j->why));
    j->created = kvx_ctx_create(MPI_COMM_WORLD, &p, &ctx, &j->why);
    j->destroyed = j->created == KVX_OK ? kvx_ctx_destroy(ctx) : KVX_ERR_INVALID_HANDLE;
}

static void *job_thread(void *arg)
{
    job_run(arg);
    return NULL;
}

static void job_in_thread(job_t *j)
{
    pthread_t t;

    TL_CHECK(pthread_create(&t, NULL, job_thread, j) == 0, "pthread_create");
    pthread_join(t, NULL);
}

int main(int argc, char **argv)
{
    int serialized = argc > 1 && !strcmp(argv[1], "serialized");
    int required = serialized ? MPI_THREAD_SERIALIZED : MPI_THREAD_FUNNELED, provided, all;
    job_t j;
    char line[512];

    MPI_Init_thread(&argc, &argv, required, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &tl_rank);
    if (provided != required) {
        if (tl_rank == 0) {
            printf("SKIP: asked MPI for thread level %d, got %d\n", required, provided);
        }
        MPI_Finalize();
        return 77;
    }
    if (serialized || tl_rank == 0) {
        job_in_thread(&j);
    } else {
        job_run(&j);
    }
    kvx_failure_format(&j.why, line, sizeof(line));
    printf("rank %d: %s: kvx_ctx_create -> %s%s%s\n", tl_rank,
           serialized ? "serialized" : "funneled", kvx_status_name(j.created),
           j.created == KVX_OK ? "" : ": ", j.created == KVX_OK ? "" : line);
    if (serialized) {
        TL_CHECK(j.created == KVX_OK, "create from a thread under SERIALIZED: %s", line);
        TL_CHECK(j.destroyed == KVX_OK, "destroy from a thread: %s", kvx_status_name(j.destroyed));
    } else {
        TL_CHECK(j.created == KVX_ERR_MPI, "got %s", kvx_status_name(j.created));
        TL_CHECK(strstr(j.why.text, "MPI_THREAD_FUNNELED") != NULL &&
                     strstr(j.why.text, "thread other than MPI's main thread") != NULL,
                 "reason: %s", j.why.text);
        TL_CHECK(j.why.origin_rank == 0, "origin rank %d, not rank 0", j.why.origin_rank);
    }
    MPI_Allreduce(&tl_failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    return all == 0 ? 0 : 1;
}
