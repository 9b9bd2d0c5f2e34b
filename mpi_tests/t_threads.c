/*
 * t_threads.c - the room API from several application threads at once,
 * against the progress thread: kvx.h promises that every room call is
 * thread safe.
 *
 * On a 1 prefill x 1 decode layout, each of --threads threads of the
 * prefill rank and of the decode rank drives rooms of its own (its own ids,
 * pages and aux slot), one after the other, so that rooms of different
 * threads open, send, complete and close at the same time; one more thread
 * per rank queries the rooms of every thread meanwhile (poll, info,
 * failure, aux). Every room must succeed, byte-exact, and every query must
 * answer one of its documented statuses. tests/sanitize.sh runs it under
 * ThreadSanitizer (mpi_tests/cases/threads.mpi).
 *
 * Usage: t_threads [--threads T] [--rooms N (per thread)] [--pages MAX]
 * (the job layout comes from KVX_LAYOUT and must be prefill:1x1,decode:1x1)
 */
#include <kvx.h>

#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvpattern.h"

#define ROOM_LIMIT_S 60.0 /* a room not terminal by then fails the test */

typedef struct shared {
    kvx_ctx_t *ctx;
    kvx_role_t role;
    kvp_geom_t g;
    void **bufs;
    unsigned comps;
    int threads, rooms, max_pages;
    int failures;      /* atomic */
    long observed;     /* atomic: queries the observer made */
    int stop;          /* atomic: tells the observer to stop */
    uint64_t mismatch; /* atomic */
} shared_t;

typedef struct worker {
    shared_t *sh;
    int index;
    int current; /* atomic: the room this thread is on */
    pthread_t thread;
} worker_t;

static int rank;

#define FAIL(sh, ...)                                             \
    do {                                                          \
        fprintf(stderr, "t_threads: rank %d: ", rank);            \
        fprintf(stderr, __VA_ARGS__);                             \
        fprintf(stderr, "\n");                                    \
        __atomic_add_fetch(&(sh)->failures, 1, __ATOMIC_SEQ_CST); \
    } while (0)

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t room_id(int thread, int r)
{
    return 1 + (uint64_t)thread * 1000000u + (uint64_t)r;
}

/* Room r of a thread: 1..max pages out of the thread's own max, in an
 * order that changes from room to room, so runs split and merge. */
static size_t room_pages(const shared_t *sh, int thread, int r, uint32_t *pages)
{
    size_t n = 1 + (size_t)r % (size_t)sh->max_pages;

    for (size_t i = 0; i < n; i++) {
        size_t k = r % 2 ? n - 1 - i : (i + (size_t)r) % n;

        pages[i] = (uint32_t)((size_t)thread * (size_t)sh->max_pages + k);
    }
    return n;
}

/* Polls until the room is terminal; returns its state. */
static kvx_room_state_t wait_room(shared_t *sh, uint64_t id)
{
    double start = now_s();
    kvx_room_state_t st = KVX_ROOM_BOOTSTRAPPING;

    while (now_s() - start < ROOM_LIMIT_S) {
        if (kvx_room_poll(sh->ctx, id, &st) != KVX_OK) {
            FAIL(sh, "room %llu vanished", (unsigned long long)id);
            return KVX_ROOM_FAILED;
        }
        if (st == KVX_ROOM_SUCCESS || st == KVX_ROOM_FAILED) {
            return st;
        }
        usleep(20);
    }
    FAIL(sh, "room %llu still %s after %.0f s", (unsigned long long)id, kvx_room_state_name(st),
         ROOM_LIMIT_S);
    return st;
}

static void send_room(shared_t *sh, uint64_t id, const uint32_t *pages, size_t n)
{
    uint64_t aux = kvp_aux(id);
    size_t chunk = n > 2 ? n / 3 : n, done = 0;
    kvx_status_t st;

    kvp_pages(&sh->g, sh->bufs, sh->comps, id, pages, n, 0, 1);
    st = kvx_room_send_open(sh->ctx, id, 0, n);
    while (st == KVX_OK && done < n) {
        size_t k = n - done <= chunk ? n - done : chunk;
        int last = done + k == n;

        st = kvx_room_send_chunk(sh->ctx, id, pages + done, k, last ? &aux : NULL,
                                 last ? sizeof(aux) : 0);
        done += k;
    }
    if (st != KVX_OK) {
        FAIL(sh, "sending room %llu: %s", (unsigned long long)id, kvx_status_string(st));
    }
}

static void check_room(shared_t *sh, uint64_t id, const uint32_t *pages, size_t n)
{
    uint64_t aux = 0;
    size_t len = 0, bad = kvp_pages(&sh->g, sh->bufs, sh->comps, id, pages, n, 0, 0);

    if (bad > 0) {
        FAIL(sh, "room %llu: %zu bytes differ", (unsigned long long)id, bad);
        __atomic_add_fetch(&sh->mismatch, bad, __ATOMIC_SEQ_CST);
    }
    if (kvx_room_aux(sh->ctx, id, &aux, sizeof(aux), &len) != KVX_OK || len != sizeof(aux) ||
        aux != kvp_aux(id)) {
        FAIL(sh, "room %llu: aux %llx (%zu bytes), expected %llx", (unsigned long long)id,
             (unsigned long long)aux, len, (unsigned long long)kvp_aux(id));
    }
}

static void *work(void *arg)
{
    worker_t *w = arg;
    shared_t *sh = w->sh;
    uint32_t *pages = malloc((size_t)sh->max_pages * sizeof(uint32_t));

    for (int r = 0; r < sh->rooms && pages != NULL; r++) {
        uint64_t id = room_id(w->index, r);
        size_t n = room_pages(sh, w->index, r, pages);
        kvx_room_state_t st;
        kvx_status_t s;

        __atomic_store_n(&w->current, r, __ATOMIC_RELAXED);
        if (sh->role == KVX_ROLE_PREFILL) {
            send_room(sh, id, pages, n);
        } else if ((s = kvx_room_recv_open(sh->ctx, id, 0, pages, n, w->index)) != KVX_OK) {
            FAIL(sh, "recv_open %llu: %s", (unsigned long long)id, kvx_status_string(s));
        }
        st = wait_room(sh, id);
        if (st != KVX_ROOM_SUCCESS) {
            kvx_failure_t f;
            char line[512] = "(no reason)";

            if (kvx_room_failure(sh->ctx, id, &f) == KVX_OK) {
                kvx_failure_format(&f, line, sizeof(line));
            }
            FAIL(sh, "room %llu ended %s: %s", (unsigned long long)id, kvx_room_state_name(st),
                 line);
        } else if (sh->role == KVX_ROLE_DECODE) {
            check_room(sh, id, pages, n);
        }
        if ((s = kvx_room_close(sh->ctx, id)) != KVX_OK) {
            FAIL(sh, "close %llu: %s", (unsigned long long)id, kvx_status_string(s));
        }
    }
    free(pages);
    return NULL;
}

/* Each query on a room another thread drives answers one of its
 * documented statuses, whatever the room's moment. */
static void observe_once(shared_t *sh, worker_t *workers, uint64_t *rng)
{
    int t = (int)(kvp_mix(++*rng) % (uint64_t)sh->threads);
    int r = __atomic_load_n(&workers[t].current, __ATOMIC_RELAXED);
    uint64_t id = room_id(t, r), aux;
    kvx_room_state_t state;
    kvx_room_info_t info;
    kvx_failure_t f;
    kvx_identity_t me;
    kvx_status_t s[4];
    size_t len;

    s[0] = kvx_room_poll(sh->ctx, id, &state);
    s[1] = kvx_room_info(sh->ctx, id, &info);
    s[2] = kvx_room_failure(sh->ctx, id, &f);
    s[3] = kvx_room_aux(sh->ctx, id, &aux, sizeof(aux), &len);
    if ((s[0] != KVX_OK && s[0] != KVX_ERR_NO_ROOM) ||
        (s[1] != KVX_OK && s[1] != KVX_ERR_NO_ROOM) ||
        (s[2] != KVX_OK && s[2] != KVX_ERR_STATE && s[2] != KVX_ERR_NO_ROOM) ||
        (s[3] != KVX_OK && s[3] != KVX_ERR_STATE && s[3] != KVX_ERR_NO_ROOM &&
         s[3] != KVX_ERR_AUX) ||
        kvx_ctx_identity(sh->ctx, &me) != KVX_OK) {
        FAIL(sh, "queries on room %llu answered %s, %s, %s, %s", (unsigned long long)id,
             kvx_status_name(s[0]), kvx_status_name(s[1]), kvx_status_name(s[2]),
             kvx_status_name(s[3]));
    }
    __atomic_add_fetch(&sh->observed, 5, __ATOMIC_RELAXED);
}

typedef struct observer {
    shared_t *sh;
    worker_t *workers;
} observer_t;

static void *observe(void *arg)
{
    observer_t *o = arg;
    uint64_t rng = (uint64_t)rank;

    while (!__atomic_load_n(&o->sh->stop, __ATOMIC_ACQUIRE)) {
        observe_once(o->sh, o->workers, &rng);
    }
    return NULL;
}

static void parse(int argc, char **argv, shared_t *sh)
{
    static const struct option longs[] = {
        { "threads", 1, 0, 't' }, { "rooms", 1, 0, 'r' }, { "pages", 1, 0, 'p' }, { 0, 0, 0, 0 }
    };
    int c;

    sh->threads = 4;
    sh->rooms = 100;
    sh->max_pages = 16;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        int v = atoi(optarg);

        if (v <= 0) {
            fprintf(stderr, "t_threads: see the comment at the top of mpi_tests/t_threads.c\n");
            exit(2);
        }
        sh->threads = c == 't' ? v : sh->threads;
        sh->rooms = c == 'r' ? v : sh->rooms;
        sh->max_pages = c == 'p' ? v : sh->max_pages;
    }
}

/* Creates the context and finds its pool; 0 on success. */
static int setup(shared_t *sh)
{
    kvx_ctx_params_t params;
    kvx_identity_t id;
    kvx_failure_t why;
    char line[512];

    kvx_ctx_params_init(&params);
    params.kv.layers = 2;
    params.kv.page_size = 16;
    params.kv.kv_heads = 4;
    params.kv.head_dim = 32;
    params.num_pages = (size_t)sh->threads * (size_t)sh->max_pages;
    params.aux_slots = (size_t)sh->threads;
    params.aux_item_size = sizeof(uint64_t);
    if (kvx_ctx_create(MPI_COMM_WORLD, &params, &sh->ctx, &why) != KVX_OK) {
        kvx_failure_format(&why, line, sizeof(line));
        fprintf(stderr, "t_threads: rank %d: kvx_ctx_create: %s\n", rank, line);
        return 1;
    }
    kvx_ctx_identity(sh->ctx, &id);
    if (id.prefill_instances != 1 || id.decode_instances != 1 || id.tp_size != 1) {
        fprintf(stderr, "t_threads: needs KVX_LAYOUT=prefill:1x1,decode:1x1\n");
        return 1;
    }
    sh->role = id.role;
    sh->comps = 2;
    sh->bufs = calloc(params.kv.layers * sh->comps, sizeof(void *));
    for (unsigned b = 0; sh->bufs != NULL && b < params.kv.layers * sh->comps; b++) {
        kvx_ctx_kv_buffer(sh->ctx, b / sh->comps, b % sh->comps, &sh->bufs[b], NULL);
    }
    sh->g.kv = params.kv;
    kvx_ctx_heads(sh->ctx, &sh->g.first_head, &sh->g.heads);
    sh->g.num_pages = params.num_pages;
    sh->g.elem = kvp_elem(params.kv.dtype);
    return sh->bufs == NULL;
}

int main(int argc, char **argv)
{
    shared_t sh;
    observer_t obs;
    worker_t *workers;
    pthread_t observer;
    int tot_fail = 0;
    double t0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    memset(&sh, 0, sizeof(sh));
    parse(argc, argv, &sh);
    if (setup(&sh) != 0) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    workers = calloc((size_t)sh.threads, sizeof(*workers));
    obs.sh = &sh;
    obs.workers = workers;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = now_s();
    for (int t = 0; t < sh.threads; t++) {
        workers[t].sh = &sh;
        workers[t].index = t;
        pthread_create(&workers[t].thread, NULL, work, &workers[t]);
    }
    pthread_create(&observer, NULL, observe, &obs);
    for (int t = 0; t < sh.threads; t++) {
        pthread_join(workers[t].thread, NULL);
    }
    __atomic_store_n(&sh.stop, 1, __ATOMIC_RELEASE);
    pthread_join(observer, NULL);
    MPI_Reduce(&sh.failures, &tot_fail, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    kvx_ctx_destroy(sh.ctx);
    if (rank == 0) {
        printf("t_threads: %d threads x %d rooms per rank in %.2f s, %ld queries from another "
               "thread on rank 0, %d failures\n%s\n",
               sh.threads, sh.rooms, now_s() - t0, sh.observed, tot_fail,
               tot_fail == 0 ? "PASS" : "FAIL");
    }
    free(workers);
    free(sh.bufs);
    MPI_Finalize();
    return tot_fail == 0 ? 0 : 1;
}
