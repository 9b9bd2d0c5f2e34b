/*
 * t_shutdown.c - destroying contexts with rooms in flight (issue 9), on 1
 * prefill x 1 decode (KVX_LAYOUT=prefill:1x1,decode:1x1).
 *
 * Each scene creates a context on both ranks and opens the same rooms:
 *   DONE     SUCCESS before the shutdown: stays SUCCESS, byte-exact
 *   XFER     TRANSFERRING: half of its pages sent
 *   WAIT     WAITING_FOR_INPUT: granted, nothing sent
 *   DEC      opened by the decode only (the prefill holds its grant)
 *   PRE      opened by the prefill only
 *   BULK     1024 pages, all handed over just before the shutdown
 *
 *   prefill-first  the prefill destroys. Before the decode destroys its own
 *                  context it sees XFER, WAIT and DEC FAILED with
 *                  KVX_ERR_SHUTDOWN at stage shutdown, origin the prefill,
 *                  BULK the same or SUCCESS byte-exact, DONE SUCCESS, the
 *                  pages of every failed room released (the prefill said
 *                  nothing of them is in flight; never quarantined), and,
 *                  once the prefill's goodbye is in, a room it opens fails
 *                  at once.
 *   decode-first   the mirror: the prefill sees XFER, WAIT and BULK FAILED
 *                  from the decode, DONE SUCCESS, a new room failing at once.
 *   together       both destroy at once (the decode 200 ms later, once its
 *                  observer saw the prefill's shutdown fail its rooms), while a
 *                  thread of each rank polls every room it opened: each room
 *                  in flight is seen FAILED at stage shutdown before the
 *                  handle goes stale, DONE only SUCCESS, and no call answers
 *                  anything but KVX_OK until KVX_ERR_INVALID_HANDLE.
 *
 * Every destroy returns KVX_OK within 10 s (every peer said goodbye: no
 * wait for KVX_SHUTDOWN_TIMEOUT) and joins the progress thread (the process
 * has as many threads as before the context). Leaks and memory errors:
 * valgrind (mpi_tests/memcheck.sh) and ASan/LeakSanitizer, TSan for the
 * observer threads (tests/sanitize.sh).
 */
#include <kvx.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

int tl_rank, tl_failures;

enum { DONE, XFER, WAIT, DEC, PRE, BULK, NEW, NROOMS };

static const char *const room_names[NROOMS] = {
    "DONE", "XFER", "WAIT", "DEC", "PRE", "BULK", "NEW"
};
/* First page and page count of each room (the same ids on both sides). */
static const uint32_t room_first[NROOMS] = { 1024, 1028, 1036, 1040, 1044, 0, 1048 };
static const uint32_t room_pages[NROOMS] = { 4, 8, 4, 4, 4, 1024, 1 };

#define NUM_PAGES  1056
#define LIMIT_S    10.0
#define SHUTDOWN_T "the context was destroyed while the room was in flight"

typedef tl_job_t job_t;

static int scene_no;       /* the scene running: rooms are scene * 100 + k */
static int threads_before; /* the process's threads before its context */

static uint64_t rid(const job_t *j, int k)
{
    (void)j;
    return (uint64_t)scene_no * 100 + (uint64_t)k;
}

static uint32_t *room_page_list(int k)
{
    uint32_t *p = malloc(room_pages[k] * sizeof(uint32_t));

    for (uint32_t i = 0; i < room_pages[k]; i++) {
        p[i] = room_first[k] + i;
    }
    return p;
}

static int is_prefill(const job_t *j)
{
    return j->id.role == KVX_ROLE_PREFILL;
}

/* Does this rank hold room k? */
static int holds(const job_t *j, int k)
{
    return k != NEW && (is_prefill(j) ? k != DEC : k != PRE);
}

static void job_start(job_t *j, int scene)
{
    kvx_ctx_params_t p;

    scene_no = scene;
    threads_before = tl_thread_count();
    kvx_ctx_params_init(&p);
    p.kv.layers = 2;
    p.kv.page_size = 16;
    p.kv.kv_heads = 2;
    p.kv.head_dim = 64;
    p.num_pages = NUM_PAGES;
    p.aux_slots = 8;
    p.aux_item_size = 8;
    tl_job_start(j, &p);
}

static kvx_room_state_t wait_state(kvx_ctx_t *ctx, uint64_t id, kvx_room_state_t want)
{
    return tl_wait_state(ctx, id, want, LIMIT_S);
}

/* Sends pages [from, to) of room k (the last one with the aux row). */
static void send_pages(job_t *j, int k, uint32_t from, uint32_t to, int allow_refusal)
{
    uint32_t *pages = room_page_list(k);
    uint64_t aux = kvp_aux(rid(j, k));
    int last = to == room_pages[k];
    kvx_status_t st = kvx_room_send_chunk(j->ctx, rid(j, k), pages + from, to - from,
                                          last ? &aux : NULL, last ? sizeof(aux) : 0);

    /* A room the decode already failed refuses its chunk. */
    TL_CHECK(st == KVX_OK || (allow_refusal && st == KVX_ERR_STATE), "chunk of %s: %s",
             room_names[k], kvx_status_name(st));
    free(pages);
}

/* Opens every room of this rank and brings each to its state. */
static void rooms_open(job_t *j)
{
    for (int k = 0; k < NROOMS; k++) {
        uint32_t *pages = room_page_list(k);
        kvx_status_t st;

        if (!holds(j, k)) {
            free(pages);
            continue;
        }
        if (is_prefill(j)) {
            kvp_pages(&j->g, j->bufs, 2, rid(j, k), pages, room_pages[k], 0, 1);
            st = kvx_room_send_open(j->ctx, rid(j, k), 0, room_pages[k]);
        } else {
            st = kvx_room_recv_open(j->ctx, rid(j, k), 0, pages, room_pages[k], k);
        }
        TL_CHECK(st == KVX_OK, "open %s: %s", room_names[k], kvx_status_name(st));
        free(pages);
    }
    if (is_prefill(j)) {
        send_pages(j, DONE, 0, room_pages[DONE], 0);
        TL_CHECK(wait_state(j->ctx, rid(j, XFER), KVX_ROOM_WAITING_FOR_INPUT) ==
                     KVX_ROOM_WAITING_FOR_INPUT,
                 "XFER not granted");
        send_pages(j, XFER, 0, room_pages[XFER] / 2, 0);
    }
    TL_CHECK(wait_state(j->ctx, rid(j, DONE), KVX_ROOM_SUCCESS) == KVX_ROOM_SUCCESS,
             "DONE not SUCCESS");
    TL_CHECK(wait_state(j->ctx, rid(j, XFER), KVX_ROOM_TRANSFERRING) == KVX_ROOM_TRANSFERRING,
             "XFER not TRANSFERRING");
    TL_CHECK(wait_state(j->ctx, rid(j, WAIT), KVX_ROOM_WAITING_FOR_INPUT) ==
                 KVX_ROOM_WAITING_FOR_INPUT,
             "WAIT not WAITING_FOR_INPUT");
    TL_CHECK(wait_state(j->ctx, rid(j, BULK), KVX_ROOM_WAITING_FOR_INPUT) ==
                 KVX_ROOM_WAITING_FOR_INPUT,
             "BULK not WAITING_FOR_INPUT");
}

/* Decode: a SUCCESS room holds the prefill's bytes and aux row. */
static void check_bytes(job_t *j, int k)
{
    uint32_t *pages = room_page_list(k);
    uint64_t aux = 0;
    size_t len = 0;

    if (!is_prefill(j)) {
        TL_CHECK(kvp_pages(&j->g, j->bufs, 2, rid(j, k), pages, room_pages[k], 0, 0) == 0,
                 "%s: mismatched bytes", room_names[k]);
        TL_CHECK(kvx_room_aux(j->ctx, rid(j, k), &aux, sizeof(aux), &len) == KVX_OK &&
                     aux == kvp_aux(rid(j, k)),
                 "%s: aux row", room_names[k]);
    }
    free(pages);
}

/* A room failed by the shutdown of world rank origin (-1: any rank). */
static int shutdown_failure(job_t *j, uint64_t id, int origin, kvx_failure_t *f)
{
    return kvx_room_failure(j->ctx, id, f) == KVX_OK && f->status == KVX_ERR_SHUTDOWN &&
           f->stage == KVX_STAGE_SHUTDOWN && (origin < 0 || f->origin_rank == origin);
}

static double timed_destroy(job_t *j)
{
    double t0 = tl_now(), took;
    kvx_status_t st = kvx_ctx_destroy(j->ctx);

    took = tl_now() - t0;
    TL_CHECK(st == KVX_OK, "destroy: %s", kvx_status_name(st));
    TL_CHECK(took < LIMIT_S, "destroy took %.1f s: a peer did not say goodbye", took);
    TL_CHECK(tl_thread_count() == threads_before, "%d threads after destroy, %d before the context",
             tl_thread_count(), threads_before);
    return took;
}

/* Once the peer's goodbye is in (the survivor cannot see when: it tries
 * every 20 ms, closing a room that did not fail at once), a room opened
 * toward the peer fails at open with the reason. Rooms opened before it
 * came: t_repro byeroom. */
static void new_room_fails(job_t *j)
{
    uint32_t page = room_first[NEW];
    kvx_room_state_t st = KVX_ROOM_BOOTSTRAPPING;
    double t0 = tl_now();
    kvx_failure_t f;
    char line[512];
    int tries = 0;

    while (st != KVX_ROOM_FAILED && tl_now() - t0 < LIMIT_S) {
        if (tries++ > 0) {
            kvx_room_close(j->ctx, rid(j, NEW));
            usleep(20000);
        }
        if (is_prefill(j)) {
            TL_CHECK(kvx_room_send_open(j->ctx, rid(j, NEW), 0, 1) == KVX_OK, "open NEW");
        } else {
            TL_CHECK(kvx_room_recv_open(j->ctx, rid(j, NEW), 0, &page, 1, -1) == KVX_OK,
                     "open NEW");
        }
        kvx_room_poll(j->ctx, rid(j, NEW), &st);
    }
    TL_CHECK(st == KVX_ROOM_FAILED && shutdown_failure(j, rid(j, NEW), tl_rank, &f) &&
                 strstr(f.text, "is shutting down: its context is being destroyed") != NULL,
             "a room opened after the peer's goodbye: %s",
             tl_failure_line(j->ctx, rid(j, NEW), line, sizeof(line)));
    printf("shutdown: scene %d rank %d: NEW  (try %d) %s\n", scene_no, tl_rank, tries,
           tl_failure_line(j->ctx, rid(j, NEW), line, sizeof(line)));
}

/* The survivor's view after its peer destroyed its context (world rank
 * origin): the rooms in flight fail with the peer's shutdown, their pages
 * are released, and a new room fails at once. */
static void survivor_checks(job_t *j, int origin)
{
    kvx_room_info_t info;
    kvx_failure_t f;
    char line[512];

    for (int k = XFER; k <= BULK; k++) {
        kvx_room_state_t st;

        if (!holds(j, k) || k == PRE) {
            continue; /* PRE: see t_repro byeroom */
        }
        st = wait_state(j->ctx, rid(j, k), KVX_ROOM_SUCCESS);
        if (k == BULK && st == KVX_ROOM_SUCCESS) {
            check_bytes(j, k); /* every page landed before the shutdown */
            continue;
        }
        TL_CHECK(st == KVX_ROOM_FAILED && shutdown_failure(j, rid(j, k), origin, &f) &&
                     strcmp(f.text, SHUTDOWN_T) == 0,
                 "%s is %s: %s", room_names[k], kvx_room_state_name(st),
                 tl_failure_line(j->ctx, rid(j, k), line, sizeof(line)));
        printf("shutdown: scene %d rank %d: %-4s %s\n", scene_no, tl_rank, room_names[k],
               tl_failure_line(j->ctx, rid(j, k), line, sizeof(line)));
    }
    TL_CHECK(kvx_room_poll(j->ctx, rid(j, DONE), &info.state) == KVX_OK &&
                 info.state == KVX_ROOM_SUCCESS,
             "DONE is %s", kvx_room_state_name(info.state));
    check_bytes(j, DONE);
    for (int k = XFER; k <= BULK && !is_prefill(j); k++) {
        double t0 = tl_now();

        /* Released within 3 s: before KVX_DRAIN_TIMEOUT (5 s) quarantines. */
        while (kvx_room_info(j->ctx, rid(j, k), &info) == KVX_OK &&
               info.pages == KVX_PAGES_DRAINING && tl_now() - t0 < 3.0) {
            usleep(1000);
        }
        TL_CHECK(info.pages == KVX_PAGES_RELEASED, "%s: pages %d after the prefill's shutdown",
                 room_names[k], (int)info.pages);
    }
    new_room_fails(j);
}

static void scene_one_first(int scene, int first_role)
{
    job_t j;

    job_start(&j, scene);
    rooms_open(&j);
    MPI_Barrier(MPI_COMM_WORLD);
    if (j.id.role == (kvx_role_t)first_role) {
        if (is_prefill(&j)) {
            send_pages(&j, BULK, 0, room_pages[BULK], 0);
        }
        printf("shutdown: scene %d rank %d: destroyed first in %.3f s\n", scene, tl_rank,
               timed_destroy(&j));
    } else {
        if (is_prefill(&j)) {
            send_pages(&j, BULK, 0, room_pages[BULK], 1);
        }
        survivor_checks(&j, 1 - tl_rank);
        printf("shutdown: scene %d rank %d: destroyed second in %.3f s\n", scene, tl_rank,
               timed_destroy(&j));
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* ---- together: an observer thread per rank -------------------------------- */

/* What the observer saw (counters atomic; why is read after the join). */
typedef struct watch {
    job_t *j;
    int failed[NROOMS];  /* seen FAILED at stage shutdown */
    int success[NROOMS]; /* seen SUCCESS */
    int other[NROOMS];   /* seen anything else terminal, or another status */
    long polls;
    char why[512];
} watch_t;

/* Has the observer seen every room in flight FAILED at stage shutdown? */
static int watch_saw_all(watch_t *w)
{
    for (int k = XFER; k < NROOMS; k++) {
        if (holds(w->j, k) && __atomic_load_n(&w->failed[k], __ATOMIC_RELAXED) == 0 &&
            !(k == BULK && __atomic_load_n(&w->success[k], __ATOMIC_RELAXED) > 0)) {
            return 0;
        }
    }
    return 1;
}

static void *watch_main(void *arg)
{
    watch_t *w = arg;
    job_t *j = w->j;

    for (;;) {
        for (int k = 0; k < NROOMS; k++) {
            kvx_room_state_t st;
            kvx_failure_t f;
            kvx_status_t s;

            if (!holds(j, k)) {
                continue;
            }
            s = kvx_room_poll(j->ctx, rid(j, k), &st);
            if (s == KVX_ERR_INVALID_HANDLE) {
                return NULL; /* destroyed */
            }
            __atomic_add_fetch(&w->polls, 1, __ATOMIC_RELAXED);
            if (s != KVX_OK) {
                __atomic_add_fetch(&w->other[k], 1, __ATOMIC_RELAXED);
                snprintf(w->why, sizeof(w->why), "%s: poll %s", room_names[k], kvx_status_name(s));
            } else if (st == KVX_ROOM_SUCCESS) {
                __atomic_add_fetch(&w->success[k], 1, __ATOMIC_RELAXED);
            } else if (st == KVX_ROOM_FAILED) {
                s = kvx_room_failure(j->ctx, rid(j, k), &f);
                if (s == KVX_ERR_INVALID_HANDLE) {
                    return NULL;
                }
                if (s == KVX_OK && f.status == KVX_ERR_SHUTDOWN && f.stage == KVX_STAGE_SHUTDOWN) {
                    __atomic_add_fetch(&w->failed[k], 1, __ATOMIC_RELAXED);
                } else {
                    __atomic_add_fetch(&w->other[k], 1, __ATOMIC_RELAXED);
                    snprintf(w->why, sizeof(w->why), "%s: %s, %s at %s: %s", room_names[k],
                             kvx_status_name(s), kvx_status_name(f.status), kvx_stage_name(f.stage),
                             f.text);
                }
            }
        }
        usleep(100);
    }
}

static void scene_together(int scene)
{
    pthread_t thread;
    kvx_status_t st;
    double t0, took;
    watch_t w;
    job_t j;

    job_start(&j, scene);
    rooms_open(&j);
    memset(&w, 0, sizeof(w));
    w.j = &j;
    pthread_create(&thread, NULL, watch_main, &w);
    while (__atomic_load_n(&w.polls, __ATOMIC_RELAXED) == 0) {
        usleep(1000);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (is_prefill(&j)) {
        send_pages(&j, BULK, 0, room_pages[BULK], 0);
    } else {
        /* The decode destroys once its observer saw the prefill's shutdown
         * fail its rooms (at least 200 ms later): the prefill's destroy
         * waits for it meanwhile, its own observer polling. */
        usleep(200000);
        for (double t1 = tl_now(); !watch_saw_all(&w) && tl_now() - t1 < LIMIT_S;) {
            usleep(1000);
        }
    }
    t0 = tl_now();
    st = kvx_ctx_destroy(j.ctx);
    took = tl_now() - t0;
    pthread_join(thread, NULL);
    TL_CHECK(st == KVX_OK, "destroy: %s", kvx_status_name(st));
    TL_CHECK(took < LIMIT_S, "destroy took %.1f s: a peer did not say goodbye", took);
    TL_CHECK(tl_thread_count() == threads_before, "%d threads after destroy, %d before the context",
             tl_thread_count(), threads_before);
    for (int k = 0; k < NROOMS; k++) {
        if (!holds(&j, k)) {
            continue;
        }
        TL_CHECK(w.other[k] == 0, "%s: the observer saw %s", room_names[k], w.why);
        if (k == DONE) {
            TL_CHECK(w.failed[k] == 0, "DONE was seen FAILED");
        } else {
            TL_CHECK(w.failed[k] > 0 || (k == BULK && w.success[k] > 0),
                     "%s was never seen FAILED at stage shutdown", room_names[k]);
        }
    }
    printf("shutdown: scene %d rank %d: destroyed in %.3f s while an observer polled %ld times; "
           "every room in flight seen FAILED at shutdown before the handle went stale\n",
           scene, tl_rank, took, w.polls);
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    int total = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &tl_rank);
    setvbuf(stdout, NULL, _IOLBF, 0);
    scene_one_first(1, KVX_ROLE_PREFILL);
    scene_one_first(2, KVX_ROLE_DECODE);
    scene_together(3);
    MPI_Allreduce(&tl_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (tl_rank == 0) {
        printf("t_shutdown: %s\n", total == 0 ? "PASS" : "FAIL");
    }
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
