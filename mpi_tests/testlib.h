/*
 * testlib.h - helpers the multi-rank test programs share: checks that count
 * failures, a clock, a page allocator that fragments, and an agreement loop.
 * Tests use the public API only.
 */
#ifndef KVX_TESTS_TESTLIB_H
#define KVX_TESTS_TESTLIB_H

#include <kvx.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvpattern.h"

extern int tl_rank, tl_failures;

#define TL_CHECK(cond, ...)                                                                    \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", tl_rank, __FILE__, __LINE__, \
                    #cond);                                                                    \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fprintf(stderr, "\n");                                                             \
            tl_failures++;                                                                     \
        }                                                                                      \
    } while (0)

static inline double tl_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* KVXT_TIMEOUT_SCALE, the harness's multiplier of time bounds for slower
 * builds (tests/sanitize.sh sets 3), at least 1. */
/* A KVX_* variable as kvx reads it (only kvx reads them: check-getenv.sh):
 * its value here, else its default. */
static inline const char *tl_config_value(const char *name)
{
    kvx_config_var_t v;

    for (size_t i = 0; kvx_config_var(i, &v) == KVX_OK; i++) {
        if (!strcmp(v.name, name)) {
            return v.value != NULL ? v.value : v.default_value != NULL ? v.default_value : "";
        }
    }
    return "";
}

static inline double tl_timeout_scale(void)
{
    const char *s = getenv("KVXT_TIMEOUT_SCALE");
    int k = s != NULL ? atoi(s) : 1;

    return k > 1 ? k : 1;
}

/* How much busier than one runnable process per core this machine is: the
 * last minute's load average over the cores, from 1 to 4. A time bound a
 * test asserts (detection within 1 s) is the product's figure times this
 * and tl_timeout_scale(): under make -j2 check beside a benchmark a killed
 * peer was seen 1.58 s after the kill, with a load near 10 on 2 cores. */
static inline double tl_load_factor(void)
{
    FILE *f = fopen("/proc/loadavg", "r");
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    double load = 0;

    if (f != NULL) {
        if (fscanf(f, "%lf", &load) != 1) {
            load = 0;
        }
        fclose(f);
    }
    load /= cores > 0 ? (double)cores : 1;
    return load < 1 ? 1 : load > 4 ? 4 : load;
}

/* What this rank saw, for a case's post step (mpi_tests/check-results.sh):
 * "OK rank R: LINE" (FAIL when a check failed) in $KVXT_OUT/result.R, and
 * the line on stdout. */
static inline void tl_result(const char *line)
{
    char path[4096];
    FILE *f;

    snprintf(path, sizeof(path), "%s/result.%d", getenv("KVXT_OUT"), tl_rank);
    f = fopen(path, "w");
    if (f != NULL) {
        fprintf(f, "%s rank %d: %s\n", tl_failures == 0 ? "OK" : "FAIL", tl_rank, line);
        fclose(f);
    }
    printf("rank %d: %s%s\n", tl_rank, line, tl_failures ? " -- FAILED CHECKS" : "");
}

/* The result line of a survivor, kept until its context is destroyed. */
#define TL_KEPT_LEN 512
static inline char *tl_kept(void)
{
    static char line[TL_KEPT_LEN];

    return line;
}

static inline void tl_result_keep(const char *line)
{
    snprintf(tl_kept(), TL_KEPT_LEN, "%s", line);
}

/* Destroys ctx, then writes the kept result (if any): a survivor that
 * crashes or hangs tearing its context down (endpoints and workers to a
 * dead peer) leaves none, and the case fails even where mpirun exits 0
 * (--enable-recovery). */
static inline void tl_destroy_and_result(kvx_ctx_t *ctx)
{
    kvx_status_t st = kvx_ctx_destroy(ctx);

    TL_CHECK(st == KVX_OK, "kvx_ctx_destroy: %s", kvx_status_name(st));
    if (tl_kept()[0] != '\0') {
        tl_result(tl_kept());
    }
}

static inline uint64_t tl_rng(uint64_t *s)
{
    *s += 0x9e3779b97f4a7c15ull;
    return kvp_mix(*s);
}

/* Pages taken at random from the free set: every rank of an instance runs
 * the same sequence, so they agree on page ids. */
typedef struct tl_alloc {
    uint32_t *free;
    size_t nfree;
    uint64_t rng;
} tl_alloc_t;

static inline void tl_alloc_init(tl_alloc_t *a, size_t n, uint64_t seed)
{
    a->free = malloc(n * sizeof(uint32_t));
    for (size_t i = 0; i < n; i++) {
        a->free[i] = (uint32_t)i;
    }
    a->nfree = n;
    a->rng = seed;
}

static inline uint32_t *tl_alloc_take(tl_alloc_t *a, size_t n)
{
    uint32_t *pages = malloc(n * sizeof(uint32_t));

    for (size_t i = 0; i < n; i++) {
        size_t j = tl_rng(&a->rng) % a->nfree;

        pages[i] = a->free[j];
        a->free[j] = a->free[--a->nfree];
    }
    return pages;
}

static inline void tl_alloc_give(tl_alloc_t *a, uint32_t *pages, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        a->free[a->nfree++] = pages[i];
    }
    free(pages);
}

static inline const char *tl_failure_line(kvx_ctx_t *ctx, uint64_t id, char *buf, size_t len)
{
    kvx_failure_t f;

    if (kvx_room_failure(ctx, id, &f) != KVX_OK) {
        snprintf(buf, len, "(no failure)");
    } else {
        kvx_failure_format(&f, buf, len);
    }
    return buf;
}

/* Threads of this process (a destroyed context's progress thread is gone). */
static inline int tl_thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;

    while (d != NULL && (e = readdir(d)) != NULL) {
        n += e->d_name[0] != '.';
    }
    if (d != NULL) {
        closedir(d);
    }
    return n;
}

/* Polls a room until its state is at least want, or FAILED, for at most
 * limit seconds; returns the last state seen. */
static inline kvx_room_state_t tl_wait_state(kvx_ctx_t *ctx, uint64_t id, kvx_room_state_t want,
                                             double limit)
{
    kvx_room_state_t st = KVX_ROOM_BOOTSTRAPPING;
    double t0 = tl_now();

    while (kvx_room_poll(ctx, id, &st) == KVX_OK && st != KVX_ROOM_FAILED && st < want &&
           tl_now() - t0 < limit) {
        usleep(500);
    }
    return st;
}

/* A context on MPI_COMM_WORLD and what a test needs to fill or check its
 * pages (at most 8 buffers). */
typedef struct tl_job {
    kvx_ctx_t *ctx;
    kvx_identity_t id;
    kvp_geom_t g;
    void *bufs[8];
    unsigned comps;
    size_t page_bytes;
} tl_job_t;

/* Creates the context; when that fails every rank says why and the job ends. */
static inline void tl_job_start(tl_job_t *j, const kvx_ctx_params_t *p)
{
    kvx_failure_t why;
    char line[512];

    memset(j, 0, sizeof(*j));
    if (kvx_ctx_create(MPI_COMM_WORLD, p, &j->ctx, &why) != KVX_OK) {
        kvx_failure_format(&why, line, sizeof(line));
        fprintf(stderr, "rank %d: kvx_ctx_create: %s\n", tl_rank, line);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    kvx_ctx_identity(j->ctx, &j->id);
    j->comps = p->kv.attn == KVX_ATTN_MLA ? 1 : 2;
    j->g.kv = p->kv;
    j->g.num_pages = p->num_pages;
    j->g.elem = kvp_elem(p->kv.dtype);
    kvx_ctx_heads(j->ctx, &j->g.first_head, &j->g.heads);
    j->page_bytes = kvx_ctx_page_bytes(j->ctx);
    for (unsigned b = 0; b < p->kv.layers * j->comps && b < 8; b++) {
        kvx_ctx_kv_buffer(j->ctx, b / j->comps, b % j->comps, &j->bufs[b], NULL);
    }
}

/* One round of agreement, driven to completion. */
static inline kvx_status_t tl_agree_round(kvx_ctx_t *ctx, const uint64_t *ids, size_t n,
                                          kvx_agreed_t *out)
{
    kvx_agree_t *a;
    kvx_status_t st = kvx_agree_start(ctx, ids, n, &a);

    if (st != KVX_OK) {
        return st;
    }
    st = kvx_agree_wait(a, out);
    kvx_agree_free(a);
    return st;
}

/* Rounds until every room of ids is agreed SUCCESS or FAILED on every TP
 * rank (decided together over the TP communicator, so all ranks run the
 * same number of rounds), or limit seconds. Returns 1 when all concluded. */
static inline int tl_agree_all(kvx_ctx_t *ctx, const uint64_t *ids, size_t n, kvx_agreed_t *out,
                               double limit)
{
    double start = tl_now();
    MPI_Comm tp = kvx_ctx_tp_comm(ctx);

    for (;;) {
        int done = 1, all = 0, timeout;
        kvx_status_t st = tl_agree_round(ctx, ids, n, out);

        if (st != KVX_OK) {
            return 0;
        }
        for (size_t i = 0; i < n; i++) {
            done &= out[i].status == KVX_OK &&
                    (out[i].state == KVX_ROOM_SUCCESS || out[i].state == KVX_ROOM_FAILED);
        }
        timeout = tl_now() - start > limit;
        done = done ? 1 : timeout ? 2 : 0;
        MPI_Allreduce(&done, &all, 1, MPI_INT, MPI_MIN, tp);
        if (all >= 1) {
            int any_timeout = done == 2;

            MPI_Allreduce(MPI_IN_PLACE, &any_timeout, 1, MPI_INT, MPI_MAX, tp);
            return !any_timeout && all == 1;
        }
        usleep(200);
    }
}

#endif
