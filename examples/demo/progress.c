/*
 * progress.c - rank 0's progress line: rooms done of the total, GB/s, and
 * failures so far.
 *
 * Rooms end on the decode instances, so TP rank 0 of each decode instance
 * sends its counts to rank 0 every 100 ms (point to point, on a duplicate of
 * the world communicator, so that nothing mixes with kvx's collectives);
 * rank 0 reads them between the steps of its own instance and redraws.
 *
 * On a terminal the line is redrawn in place; otherwise a plain line is
 * printed every tenth of the rooms (and at least every 5 s). Open MPI's
 * mpirun gives every rank a pseudo-terminal as its stdout whatever its own
 * stdout is, so under mpirun "a terminal" means mpirun's own stdout (the
 * parent's) is one.
 */
#include "demo.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { TAG_COUNTS = 1, TAG_FINAL = 2 };
enum { MSG_INSTANCE, MSG_DONE, MSG_FAILED, MSG_BYTES, MSG_LEN };

struct demo_progress {
    MPI_Comm comm;
    MPI_Comm extra; /* rank 0: the replacement's intercommunicator (--replace) */
    int via;        /* the replacement: comm is that intercommunicator, not ours */
    int reporter;   /* TP rank 0 of a decode instance */
    int draw;       /* world rank 0 */
    demo_progress_mode_t mode;
    unsigned total;
    int instances, decode_tp;
    uint64_t *counts; /* rank 0: MSG_LEN per decode instance */
    int finals;
    MPI_Request pending;
    int *final; /* per decode instance: its final counts came */
    uint64_t msg[MSG_LEN];
    double last_send, last_draw;
    unsigned last_tenth;
    uint64_t last_done; /* rooms done on the last plain line */
};

/* Is fd 1 of our parent (mpirun) a terminal? */
static int parent_on_terminal(void)
{
    char path[64], target[256];
    ssize_t n;

    snprintf(path, sizeof(path), "/proc/%d/fd/1", (int)getppid());
    n = readlink(path, target, sizeof(target) - 1);
    if (n <= 0) {
        return 0;
    }
    target[n] = '\0';
    return strncmp(target, "/dev/pts/", 9) == 0 || strncmp(target, "/dev/tty", 8) == 0;
}

static demo_progress_mode_t resolve(demo_progress_mode_t mode)
{
    if (mode != DEMO_PROGRESS_AUTO) {
        return mode;
    }
    if (!isatty(STDOUT_FILENO)) {
        return DEMO_PROGRESS_LINES;
    }
    if (getenv("OMPI_COMM_WORLD_SIZE") != NULL && !parent_on_terminal()) {
        return DEMO_PROGRESS_LINES;
    }
    return DEMO_PROGRESS_TTY;
}

demo_progress_t *demo_progress_create(const demo_opts_t *o, const kvx_identity_t *id)
{
    demo_progress_t *p = calloc(1, sizeof(*p));

    if (p == NULL) {
        return NULL;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &p->comm);
    p->reporter = id->role == KVX_ROLE_DECODE && id->tp_rank == 0;
    p->draw = id->world_rank == 0;
    p->mode = resolve(o->progress);
    p->total = o->requests;
    p->instances = id->decode_instances;
    p->decode_tp = id->decode_tp;
    p->pending = MPI_REQUEST_NULL;
    p->extra = MPI_COMM_NULL;
    p->last_done = UINT64_MAX;
    /* One more slot: a replacement's counts, beside those of the instance
     * it replaced (counted before it died). */
    p->counts = calloc(((size_t)id->decode_instances + 1) * MSG_LEN, sizeof(uint64_t));
    p->final = calloc((size_t)id->decode_instances, sizeof(int));
    if (p->counts == NULL || p->final == NULL) {
        free(p->counts);
        free(p->final);
        free(p);
        return NULL;
    }
    return p;
}

void demo_progress_destroy(demo_progress_t *p)
{
    int sent = 1;

    if (p != NULL && p->pending != MPI_REQUEST_NULL) {
        MPI_Test(&p->pending, &sent, MPI_STATUS_IGNORE);
    }
    if (p != NULL && sent) { /* else MPI still reads p->msg (rank 0 is gone): kept */
        if (!p->via) {
            MPI_Comm_free(&p->comm);
        }
        free(p->counts);
        free(p->final);
        free(p);
    }
}

void demo_progress_via(demo_progress_t *p, MPI_Comm inter, int child)
{
    if (p == NULL) {
        return;
    }
    if (child) {
        /* Its counts go to world rank 0 of the job, the intercommunicator's
         * remote rank 0, in the extra slot. */
        MPI_Comm_free(&p->comm);
        p->comm = inter;
        p->via = 1;
    } else {
        p->extra = inter;
    }
}

static void total(const demo_progress_t *p, uint64_t sum[MSG_LEN])
{
    memset(sum, 0, MSG_LEN * sizeof(uint64_t));
    for (int i = 0; i <= p->instances; i++) {
        for (int k = MSG_DONE; k < MSG_LEN; k++) {
            sum[k] += p->counts[(size_t)i * MSG_LEN + k];
        }
    }
}

static void draw(demo_progress_t *p, double elapsed, int last)
{
    uint64_t sum[MSG_LEN];
    unsigned tenth;
    char line[160];

    total(p, sum);
    tenth = (unsigned)(sum[MSG_DONE] * 10 / (p->total ? p->total : 1));
    snprintf(line, sizeof(line), "kvx-demo: %6llu/%u rooms done  %6.2f GB/s  %llu failed  %5.1f s",
             (unsigned long long)sum[MSG_DONE], p->total,
             elapsed > 0 ? (double)sum[MSG_BYTES] / elapsed / 1e9 : 0.0,
             (unsigned long long)sum[MSG_FAILED], elapsed);
    if (p->mode == DEMO_PROGRESS_TTY) {
        if (last || elapsed - p->last_draw >= 0.1) {
            printf("\r%s\033[K%s", line, last ? "\n" : "");
            fflush(stdout);
            p->last_draw = elapsed;
        }
    } else if (p->mode == DEMO_PROGRESS_LINES) {
        if ((last && sum[MSG_DONE] != p->last_done) || tenth > p->last_tenth ||
            elapsed - p->last_draw >= 5) {
            printf("%s\n", line);
            fflush(stdout);
            p->last_draw = elapsed;
            p->last_tenth = tenth;
            p->last_done = sum[MSG_DONE];
        }
    }
}

/* The replacement's counts: only its progress tags (the intercommunicator
 * carries the demo's other messages with it too, replace.c). */
static void receive_extra(demo_progress_t *p)
{
    for (int tag = TAG_COUNTS; p->extra != MPI_COMM_NULL && tag <= TAG_FINAL; tag++) {
        uint64_t msg[MSG_LEN];
        MPI_Status status;
        int flag = 0;

        MPI_Iprobe(MPI_ANY_SOURCE, tag, p->extra, &flag, &status);
        if (flag) {
            MPI_Recv(msg, MSG_LEN, MPI_UINT64_T, status.MPI_SOURCE, tag, p->extra, &status);
            memcpy(&p->counts[(size_t)p->instances * MSG_LEN], msg, sizeof(msg));
        }
    }
}

static void receive(demo_progress_t *p, int blocking)
{
    receive_extra(p);
    for (;;) {
        uint64_t msg[MSG_LEN];
        MPI_Status status;
        int flag = 1;

        if (!blocking) {
            MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, p->comm, &flag, &status);
        }
        if (!flag) {
            return;
        }
        MPI_Recv(msg, MSG_LEN, MPI_UINT64_T, MPI_ANY_SOURCE, MPI_ANY_TAG, p->comm, &status);
        if (msg[MSG_INSTANCE] < (uint64_t)p->instances) {
            memcpy(&p->counts[msg[MSG_INSTANCE] * MSG_LEN], msg, sizeof(msg));
            if (status.MPI_TAG == TAG_FINAL && !p->final[msg[MSG_INSTANCE]]) {
                p->final[msg[MSG_INSTANCE]] = 1;
                p->finals++;
            }
        }
        if (blocking) {
            return;
        }
    }
}

static void fill(demo_progress_t *p, const demo_serve_t *s)
{
    p->msg[MSG_INSTANCE] = p->via ? (uint64_t)p->instances : (uint64_t)s->id.instance;
    p->msg[MSG_DONE] = s->done;
    p->msg[MSG_FAILED] = s->failed;
    p->msg[MSG_BYTES] = s->bytes * (uint64_t)p->decode_tp; /* every decode rank gets as much */
}

void demo_progress_step(demo_progress_t *p, const demo_serve_t *s)
{
    double now = demo_now();
    int sent = 0;

    demo_xchg_alive(); /* so the end waits for this rank while it serves */
    if (p->reporter && now - p->last_send >= 0.1) {
        if (p->pending != MPI_REQUEST_NULL) {
            MPI_Test(&p->pending, &sent, MPI_STATUS_IGNORE);
        }
        if (p->pending == MPI_REQUEST_NULL) {
            fill(p, s);
            MPI_Isend(p->msg, MSG_LEN, MPI_UINT64_T, 0, TAG_COUNTS, p->comm, &p->pending);
            p->last_send = now;
        }
    }
    if (p->draw) {
        receive(p, 0);
        draw(p, now - s->t0, 0);
    }
}

void demo_progress_finish(demo_progress_t *p, const demo_serve_t *s)
{
    double start = demo_now();
    int sent = 0;

    /* Bounded, like every exchange at the end (xchg.c): a reporter or rank 0
     * may be dead or unreachable, and its counts then never come. */
    if (p->reporter) {
        while (p->pending != MPI_REQUEST_NULL && demo_now() - start < s->o->end_timeout) {
            MPI_Test(&p->pending, &sent, MPI_STATUS_IGNORE);
            if (p->pending != MPI_REQUEST_NULL) {
                usleep(1000);
            }
        }
        if (p->pending == MPI_REQUEST_NULL) {
            fill(p, s);
            MPI_Isend(p->msg, MSG_LEN, MPI_UINT64_T, 0, TAG_FINAL, p->comm, &p->pending);
        }
    }
    if (!p->draw) {
        return;
    }
    while (p->finals < p->instances) {
        int first = s->id.world_size - p->instances * p->decode_tp, live = 0;

        receive(p, 0);
        draw(p, demo_now() - s->t0, 0);
        demo_xchg_alive();
        /* Wait while a reporter still due is heard from (it serves on); one
         * silent for end_timeout already (behind a cut link, dead) is not
         * waited for again. */
        for (int i = 0; i < p->instances; i++) {
            live |= !p->final[i] && demo_xchg_silence(first + i * p->decode_tp) < s->o->end_timeout;
        }
        if (!live) {
            break;
        }
        usleep(1000);
    }
    draw(p, demo_now() - s->t0, 1);
    if (p->finals < p->instances) {
        printf("kvx-demo: %d of %d decode instances sent no final counts within %.0f s%s\n",
               p->instances - p->finals, p->instances, s->o->end_timeout,
               p->extra != MPI_COMM_NULL ? " (a replacement's come with its report)" : "");
    }
}
