/*
 * xchg.c - the exchanges at the end of a run, bounded: every rank sends
 * its report to every other rank point to point and waits for theirs until
 * a deadline, so that a rank that died or sits behind a cut link delays
 * the end by at most that deadline and is named, rather than hanging the
 * job in a collective (under mpirun --enable-recovery a collective over a
 * communicator with a dead rank never completes).
 *
 * Sends that cannot complete (the peer is gone) are left behind: the run
 * ends without waiting for them (demo_xchg_finalize()).
 */
#include "demo.h"

#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TAG_LEN       7301
#define TAG_DATA      7302
#define TAG_ALIVE     7303
#define ALIVE_EVERY_S 0.25

/* Liveness while the run goes on: every rank tells every other one now and
 * then that it is still there (demo_xchg_alive()), so that at the end a
 * rank still serving is waited for and one that fell silent is not. */
static struct {
    int rank, size;
    double last_sent;
    double *heard_at; /* per rank: when something last came from it */
    MPI_Request *sends;
    char byte, in;
} alive;

static void alive_init(void)
{
    if (alive.heard_at != NULL) {
        return;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &alive.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &alive.size);
    alive.heard_at = calloc((size_t)alive.size, sizeof(double));
    alive.sends = calloc((size_t)alive.size, sizeof(MPI_Request));
    if (alive.heard_at == NULL || alive.sends == NULL) {
        abort();
    }
    for (int r = 0; r < alive.size; r++) {
        alive.heard_at[r] = demo_now();
        alive.sends[r] = MPI_REQUEST_NULL;
    }
}

/* Takes in every "still here" that arrived. */
static void alive_drain(void)
{
    for (;;) {
        MPI_Status st;
        int flag = 0;

        MPI_Iprobe(MPI_ANY_SOURCE, TAG_ALIVE, MPI_COMM_WORLD, &flag, &st);
        if (!flag) {
            return;
        }
        MPI_Recv(&alive.in, 1, MPI_CHAR, st.MPI_SOURCE, TAG_ALIVE, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        alive.heard_at[st.MPI_SOURCE] = demo_now();
    }
}

double demo_xchg_silence(int rank)
{
    alive_init();
    return rank >= 0 && rank < alive.size ? demo_now() - alive.heard_at[rank] : 0;
}

void demo_xchg_alive(void)
{
    double now = demo_now();

    alive_init();
    alive_drain();
    if (now - alive.last_sent < ALIVE_EVERY_S) {
        return;
    }
    alive.last_sent = now;
    for (int r = 0; r < alive.size; r++) {
        int done = 1;

        if (r == alive.rank) {
            continue;
        }
        if (alive.sends[r] != MPI_REQUEST_NULL) {
            MPI_Test(&alive.sends[r], &done, MPI_STATUS_IGNORE);
        }
        if (done) { /* one in flight per peer: none pile up toward a dead one */
            MPI_Isend(&alive.byte, 1, MPI_CHAR, r, TAG_ALIVE, MPI_COMM_WORLD, &alive.sends[r]);
        }
    }
}

struct demo_xchg {
    MPI_Comm comm;
    int rank, size;
    uint64_t len;
    MPI_Request *sends; /* 2 per peer: the length, then the bytes */
    void **got;
    size_t *got_len;
    int *heard;             /* 1: the peer's report arrived */
    int *gaveup;            /* 1: its bytes did not come by the deadline (their buffer is MPI's) */
    demo_xchg_t *next_kept; /* demo_xchg_free() kept it for MPI */
};

/* The bytes of r's report, whose length n came: a receive that moves only
 * while r calls MPI (a rendezvous), so it is tested, not waited for, until
 * deadline_s after r was last heard. 0 when they did not come: the buffer
 * is then left to MPI (never freed). */
static int xchg_recv(demo_xchg_t *x, int r, uint64_t n, double deadline_s)
{
    MPI_Request rq;
    int done = 0;

    MPI_Irecv(x->got[r], (int)n, MPI_BYTE, r, TAG_DATA, x->comm, &rq);
    while (MPI_Test(&rq, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done &&
           demo_now() - alive.heard_at[r] < deadline_s) {
        usleep(1000);
    }
    if (!done) {
        x->got[r] = NULL;
        x->got_len[r] = 0;
    }
    return done;
}

/* Tests this rank's sends: every one, or (heard_only) those to the ranks
 * whose report came; 1 when all of them completed. */
static int xchg_sent(demo_xchg_t *x, int heard_only)
{
    int done = 1;

    for (int i = 0; i < 2 * x->size; i++) {
        int flag = 1;

        if (x->sends[i] != MPI_REQUEST_NULL && (!heard_only || x->heard[i / 2])) {
            MPI_Test(&x->sends[i], &flag, MPI_STATUS_IGNORE);
        }
        done &= flag;
    }
    return done;
}

/* Progresses those sends (a rendezvous send moves only while its sender
 * calls MPI) until they completed or deadline_s passed; 1 when they did. */
static int xchg_wait_sent(demo_xchg_t *x, int heard_only, double deadline_s)
{
    double start = demo_now();
    int sent;

    while (!(sent = xchg_sent(x, heard_only)) && demo_now() - start < deadline_s) {
        usleep(1000);
    }
    return sent;
}

demo_xchg_t *demo_xchg_all(const void *mine, size_t len, double deadline_s)
{
    demo_xchg_t *x = calloc(1, sizeof(*x));
    int missing;

    if (x == NULL) {
        return NULL;
    }
    /* Not a duplicate: MPI_Comm_dup is a collective, which a dead rank never
     * joins. The tags are the demo's own on MPI_COMM_WORLD. */
    x->comm = MPI_COMM_WORLD;
    MPI_Comm_rank(x->comm, &x->rank);
    MPI_Comm_size(x->comm, &x->size);
    x->len = len;
    x->sends = calloc(2 * (size_t)x->size, sizeof(MPI_Request));
    x->got = calloc((size_t)x->size, sizeof(void *));
    x->got_len = calloc((size_t)x->size, sizeof(size_t));
    x->heard = calloc((size_t)x->size, sizeof(int));
    x->gaveup = calloc((size_t)x->size, sizeof(int));
    if (x->sends == NULL || x->got == NULL || x->got_len == NULL || x->heard == NULL ||
        x->gaveup == NULL) {
        return NULL;
    }
    /* This rank's own copy is also what the sends read from. */
    x->heard[x->rank] = 1;
    x->got_len[x->rank] = len;
    x->got[x->rank] = malloc(len > 0 ? len : 1);
    if (x->got[x->rank] == NULL) {
        return NULL;
    }
    memcpy(x->got[x->rank], mine, len);
    for (int r = 0; r < x->size; r++) {
        x->sends[2 * r] = x->sends[2 * r + 1] = MPI_REQUEST_NULL;
        if (r == x->rank) {
            continue;
        }
        MPI_Isend(&x->len, 1, MPI_UINT64_T, r, TAG_LEN, x->comm, &x->sends[2 * r]);
        MPI_Isend(x->got[x->rank], (int)len, MPI_BYTE, r, TAG_DATA, x->comm, &x->sends[2 * r + 1]);
    }
    /* A rank is waited for until deadline_s after it was last heard from
     * (its report, or "still here" while it serves on): a slower instance
     * still makes it, a dead or unreachable rank delays the end by at most
     * deadline_s. */
    alive_init();
    do {
        missing = 0;
        demo_xchg_alive();
        for (int r = 0; r < x->size; r++) {
            MPI_Status st;
            uint64_t n;
            int flag = 0;

            if (x->heard[r] || x->gaveup[r]) {
                continue;
            }
            MPI_Iprobe(r, TAG_LEN, x->comm, &flag, &st);
            if (!flag) {
                missing += demo_now() - alive.heard_at[r] < deadline_s;
                continue;
            }
            /* Both messages were sent together: once the length is here the
             * bytes follow (or the sender died in between; then the probe
             * below times out with the others). */
            MPI_Recv(&n, 1, MPI_UINT64_T, r, TAG_LEN, x->comm, MPI_STATUS_IGNORE);
            x->got[r] = malloc(n > 0 ? n : 1);
            x->got_len[r] = n;
            for (flag = 0; !flag && demo_now() - alive.heard_at[r] < deadline_s;) {
                MPI_Iprobe(r, TAG_DATA, x->comm, &flag, &st);
                if (!flag) {
                    usleep(1000);
                }
            }
            if (!flag || x->got[r] == NULL) {
                x->gaveup[r] = 1; /* it died between the two */
                continue;
            }
            x->heard[r] = xchg_recv(x, r, n, deadline_s);
            x->gaveup[r] = !x->heard[r];
            alive.heard_at[r] = x->heard[r] ? demo_now() : alive.heard_at[r];
        }
        if (missing > 0) {
            usleep(1000);
        }
    } while (missing > 0);
    /* The ranks heard are there to take this rank's report: its sends to
     * them are progressed before this rank goes on to work that calls no
     * MPI (kvx_ctx_destroy). A rank partitioned from some of the others
     * would otherwise leave the ones it reaches waiting for it. */
    xchg_wait_sent(x, 1, deadline_s);
    return x;
}

int demo_xchg_heard(const demo_xchg_t *x, int rank, const void **data_p, size_t *len_p)
{
    if (x == NULL || rank < 0 || rank >= x->size || !x->heard[rank]) {
        return 0;
    }
    *data_p = x->got[rank];
    *len_p = x->got_len[rank];
    return 1;
}

int demo_xchg_all_heard(const demo_xchg_t *x)
{
    for (int r = 0; x != NULL && r < x->size; r++) {
        if (!x->heard[r]) {
            return 0;
        }
    }
    return x != NULL;
}

int demo_xchg_first_heard(const demo_xchg_t *x)
{
    for (int r = 0; x != NULL && r < x->size; r++) {
        if (x->heard[r]) {
            return r;
        }
    }
    return -1;
}

int demo_xchg_free(demo_xchg_t *x, double deadline_s)
{
    int sent;

    if (x == NULL) {
        return 1;
    }
    sent = xchg_wait_sent(x, 0, deadline_s);
    if (!sent) {
        /* MPI still owns the requests and what they send (a report to a
         * rank that is gone): kept, and reachable from here for what it is
         * worth to a leak checker. */
        static demo_xchg_t *kept;

        x->next_kept = kept;
        kept = x;
        return 0;
    }
    for (int r = 0; r < x->size; r++) {
        free(x->got[r]);
    }
    free(x->sends);
    free(x->got);
    free(x->got_len);
    free(x->heard);
    free(x->gaveup);
    free(x);
    return sent;
}

/* ---- the end of MPI ------------------------------------------------------------ */

static int finalize_status;

static void *finalize_watchdog(void *arg)
{
    double limit = *(double *)arg;

    usleep((useconds_t)(limit * 1e6));
    fprintf(stderr,
            "kvx-demo: MPI_Finalize did not return within %.0f s (a rank it waits for is "
            "gone or unreachable): exiting with status %d\n",
            limit, finalize_status);
    fflush(NULL);
    /* exit(), not _exit(): the exit handlers run, among them the one in
     * which a kvx rank records its status for kvx-run --tolerate-failures
     * (the last registered, so the first to run). Should a handler wait on
     * what MPI_Finalize holds, the alarm ends the process 5 s later. */
    alarm(5);
    exit(finalize_status);
    return NULL;
}

void demo_xchg_finalize(int status, double limit_s)
{
    static double limit;
    pthread_t t;

    finalize_status = status;
    limit = limit_s;
    fflush(NULL);
    if (pthread_create(&t, NULL, finalize_watchdog, &limit) == 0) {
        pthread_detach(t);
    }
    MPI_Finalize();
}
