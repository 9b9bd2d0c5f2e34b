/*
 * replace.c - a decode instance dies and the job brings its replacement,
 * without a restart (--kill-decode, --replace; docs/user/join.md).
 *
 * The kill: every TP rank of decode[K] kills itself (SIGKILL) once it has
 * admitted N rooms, all at the same step. Its TP rank 0 first tells world
 * rank 0 when, with a synchronous send waited for at most a second, so that
 * the summary times the recovery from the kill itself.
 *
 * The replacement: once the TP ranks of world rank 0's instance agreed that
 * decode[K] is lost, and kvx says its place is free (kvx_ctx_pair_status()
 * KVX_ERR_PEER_LOST), rank 0 spawns TP-size processes of this program with
 * MPI_Comm_spawn over MPI_COMM_SELF: a communicator without the dead ranks
 * (the job runs under mpirun --enable-recovery, where a collective over one
 * that holds them never completes). They join the running job through
 * kvx's door -- KVX_JOIN is rank 0's kvx_ctx_join_address(), the job key
 * the KVX_JOIN_KEY_FILE every rank of the job has -- and take decode[K]'s
 * place as its next generation, its world ranks included.
 *
 * What the replacement serves is said through kvx itself: each prefill
 * instance, once its TP ranks agree the place is usable again, routes the
 * requests of decode[K] from its next one on to it, after a one-page hello
 * room whose aux row names that request (serve.c). The spawn's
 * intercommunicator carries only the demo's own bookkeeping with rank 0:
 * the replacement's progress counts, the job's end (after it, no hello
 * comes), and the replacement's report. Every wait on it is bounded.
 */
#include "demo.h"

#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TAG_KILLED 7310 /* on MPI_COMM_WORLD: the victim's time of death */
enum { TAG_END = 11, TAG_LEN = 12, TAG_DATA = 13 }; /* on the intercommunicator */

/* MPI_Comm_spawn does not return while a child that died before MPI_Init
 * is waited for (Open MPI 4.1 under --enable-recovery: no deadline): it
 * runs on a thread of its own, and rank 0 serves on meanwhile and gives up
 * on it after SPAWN_DEADLINE_S. */
#define SPAWN_DEADLINE_S 60.0

struct spawn_call {
    char exe[PATH_MAX];
    char addr[128]; /* the door the replacement joins at */
    char **args;
    int n;
    MPI_Comm comm;
    int rc;
    int done; /* set by the thread, read by rank 0's main thread (atomics) */
};

struct demo_replace {
    const demo_opts_t *o;
    int child;     /* this process is (part of) the replacement */
    MPI_Comm comm; /* the spawn's intercommunicator, or MPI_COMM_NULL */
    /* World rank 0. */
    MPI_Request kill_rq;
    double killed_at; /* what the victim sent */
    int killed;
    int tried;               /* a spawn was started (one per run) */
    struct spawn_call *call; /* while it runs; left to the thread when given up */
    demo_replace_facts_t facts;
    /* The replacement. */
    int ended;
    MPI_Request sends[2];
    uint64_t len;
};

static double wall_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

demo_replace_t *demo_replace_create(const demo_opts_t *o, const kvx_identity_t *id)
{
    demo_replace_t *rp;

    if (id->world_rank != 0 || (!o->replace && o->kill_instance < 0)) {
        return NULL;
    }
    if ((rp = calloc(1, sizeof(*rp))) == NULL) {
        return NULL;
    }
    rp->o = o;
    rp->comm = MPI_COMM_NULL;
    rp->kill_rq = MPI_REQUEST_NULL;
    rp->facts.instance = -1;
    rp->facts.killed_s = -1;
    if (o->kill_instance >= 0) {
        MPI_Irecv(&rp->killed_at, 1, MPI_DOUBLE, MPI_ANY_SOURCE, TAG_KILLED, MPI_COMM_WORLD,
                  &rp->kill_rq);
    }
    return rp;
}

void demo_replace_kill(const demo_serve_t *s)
{
    if (s->id.tp_rank == 0) {
        double at = demo_now() - s->t0, start = demo_now();
        MPI_Request rq;
        int done = 0;

        MPI_Issend(&at, 1, MPI_DOUBLE, 0, TAG_KILLED, MPI_COMM_WORLD, &rq);
        while (!done && demo_now() - start < 1.0) {
            MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
            if (!done) {
                usleep(1000);
            }
        }
    }
    fprintf(stderr,
            "kvx-demo: rank %d (decode[%d].tp%d) kills itself after %u rooms "
            "(--kill-decode)\n",
            s->id.world_rank, s->id.instance, s->id.tp_rank, s->o->kill_after);
    fflush(stderr);
    kill(getpid(), SIGKILL);
    for (;;) {
        pause();
    }
}

/* The command line of the replacement: the job's own (the same stream,
 * model and pools), and what makes it one. */
static char **child_args(const demo_opts_t *o, int instance, const char *addr, double t0_wall)
{
    char **args = calloc((size_t)o->argc + 8, sizeof(char *));
    static char inst[16], t0[48];
    int n = 0;

    if (args == NULL) {
        return NULL;
    }
    for (int i = 1; i < o->argc; i++) {
        args[n++] = o->argv[i];
    }
    snprintf(inst, sizeof(inst), "%d", instance);
    snprintf(t0, sizeof(t0), "%.6f", t0_wall);
    args[n++] = "--replacement-of";
    args[n++] = inst;
    args[n++] = "--join-address";
    args[n++] = (char *)addr;
    args[n++] = "--job-t0";
    args[n++] = t0;
    args[n] = NULL;
    return args;
}

/* This program's path. In a build tree libtool runs .libs/NAME through the
 * wrapper script NAME beside .libs, which sets the library path: that is
 * what the replacement must run (the spawned processes get the job's
 * environment, not this process's). */
static int program_path(char *exe, size_t len)
{
    ssize_t n = readlink("/proc/self/exe", exe, len - 1);
    char wrapper[PATH_MAX], *base;

    if (n <= 0) {
        return -1;
    }
    exe[n] = '\0';
    base = strrchr(exe, '/');
    if (base != NULL && base - exe >= 6 && strncmp(base - 6, "/.libs", 6) == 0) {
        const char *name = base + 1;

        name += strncmp(name, "lt-", 3) == 0 ? 3 : 0;
        snprintf(wrapper, sizeof(wrapper), "%.*s/%s", (int)(base - 6 - exe), exe, name);
        if (access(wrapper, X_OK) == 0) {
            snprintf(exe, len, "%s", wrapper);
        }
    }
    return 0;
}

static void *spawn_main(void *arg)
{
    struct spawn_call *c = arg;
    int *codes = calloc((size_t)c->n, sizeof(int));

    c->rc = codes == NULL ? MPI_ERR_NO_MEM
                          : MPI_Comm_spawn(c->exe, c->args, c->n, MPI_INFO_NULL, 0, MPI_COMM_SELF,
                                           &c->comm, codes);
    free(codes);
    __atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void spawn_start(demo_replace_t *rp, demo_serve_t *s, int k)
{
    demo_replace_facts_t *f = &rp->facts;
    struct spawn_call *c = calloc(1, sizeof(*c));
    pthread_t thread;

    rp->tried = 1;
    f->instance = k;
    f->tp = s->id.decode_tp;
    f->spawn_s = demo_now() - s->t0;
    if (c == NULL) {
        snprintf(f->failed, sizeof(f->failed), "no memory");
        return;
    }
    if (kvx_ctx_join_address(s->ctx, c->addr, sizeof(c->addr)) != KVX_OK) {
        snprintf(f->failed, sizeof(f->failed),
                 "the job takes no joiners: launch it with a job key (kvx-run --join-key FILE)");
        free(c);
        return;
    }
    if (!rp->o->threads_multiple) {
        snprintf(f->failed, sizeof(f->failed),
                 "MPI granted no MPI_THREAD_MULTIPLE, which the spawn's own thread needs");
        free(c);
        return;
    }
    if (program_path(c->exe, sizeof(c->exe)) != 0 ||
        (c->args = child_args(rp->o, k, c->addr, wall_now() - (demo_now() - s->t0))) == NULL) {
        snprintf(f->failed, sizeof(f->failed), "no memory, or no path of this program");
        free(c);
        return;
    }
    c->n = f->tp;
    c->comm = MPI_COMM_NULL;
    printf("kvx-demo: decode[%d] is lost: spawning its replacement (%d process%s) to join at %s\n",
           k, f->tp, f->tp == 1 ? "" : "es", c->addr);
    fflush(stdout);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    if (pthread_create(&thread, NULL, spawn_main, c) != 0) {
        snprintf(f->failed, sizeof(f->failed), "no thread for the spawn");
        free(c->args);
        free(c);
        return;
    }
    pthread_detach(thread);
    rp->call = c;
}

/* The spawn returned, or ran past its deadline (then its thread keeps what
 * it has: MPI may still write there). */
static void spawn_poll(demo_replace_t *rp, demo_serve_t *s)
{
    demo_replace_facts_t *f = &rp->facts;
    struct spawn_call *c = rp->call;
    char err[MPI_MAX_ERROR_STRING];
    int len = 0;

    if (c == NULL) {
        return;
    }
    if (!__atomic_load_n(&c->done, __ATOMIC_ACQUIRE)) {
        if (demo_now() - s->t0 - f->spawn_s > SPAWN_DEADLINE_S) {
            snprintf(f->failed, sizeof(f->failed),
                     "MPI_Comm_spawn did not return within %.0f s (a process that fails before "
                     "MPI_Init keeps it waiting)",
                     SPAWN_DEADLINE_S);
            rp->call = NULL;
        }
        return;
    }
    f->spawn_took = demo_now() - s->t0 - f->spawn_s;
    if (c->rc != MPI_SUCCESS) {
        MPI_Error_string(c->rc, err, &len);
        snprintf(f->failed, sizeof(f->failed), "MPI_Comm_spawn failed: %.200s", err);
    } else {
        rp->comm = c->comm;
        MPI_Comm_set_errhandler(rp->comm, MPI_ERRORS_RETURN);
        demo_progress_via(s->progress, rp->comm, 0);
    }
    free(c->args);
    free(c);
    rp->call = NULL;
}

void demo_replace_step(demo_replace_t *rp, demo_serve_t *s)
{
    int done = 0;

    if (rp == NULL) {
        return;
    }
    if (rp->kill_rq != MPI_REQUEST_NULL) {
        MPI_Test(&rp->kill_rq, &done, MPI_STATUS_IGNORE);
        if (done) {
            rp->facts.killed_s = rp->killed_at;
        }
    }
    spawn_poll(rp, s);
    if (!rp->o->replace || rp->tried || s->id.role != KVX_ROLE_PREFILL) {
        return;
    }
    for (int k = 0; k < s->npeer_instances; k++) {
        /* Agreed lost by the instance, and a free place for kvx: every
         * rank of it this rank talks to is gone. */
        if (s->peer_shunned[k] && kvx_ctx_pair_status(s->ctx, k, NULL) == KVX_ERR_PEER_LOST) {
            spawn_start(rp, s, k);
            return;
        }
    }
}

demo_replace_t *demo_replace_child(demo_opts_t *o, int world_size)
{
    static char layout[32];
    demo_replace_t *rp;
    MPI_Comm parent;

    MPI_Comm_get_parent(&parent);
    if (parent == MPI_COMM_NULL) {
        fprintf(stderr, "kvx-demo: --replacement-of is for the processes kvx-demo --replace "
                        "spawns\n");
        return NULL;
    }
    if ((rp = calloc(1, sizeof(*rp))) == NULL) {
        return NULL;
    }
    rp->o = o;
    rp->child = 1;
    rp->comm = parent;
    rp->kill_rq = MPI_REQUEST_NULL;
    rp->sends[0] = rp->sends[1] = MPI_REQUEST_NULL;
    MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN);
    /* kvx_ctx_create() reads these: join the job at its door as one decode
     * instance of this world's size. The job's faults are not the
     * replacement's (KVX_FAULT came with the job's environment). */
    snprintf(layout, sizeof(layout), "decode:1x%d", world_size);
    o->layout = layout;
    setenv("KVX_LAYOUT", layout, 1);
    setenv("KVX_JOIN", o->join_address, 1);
    unsetenv("KVX_FAULT");
    o->fault = NULL;
    o->replace = 0;
    o->kill_instance = -1;
    o->json = NULL;
    o->plot = NULL;
    return rp;
}

int demo_replace_ended(demo_replace_t *rp)
{
    int flag = 0;
    char byte;

    if (rp == NULL || !rp->child || rp->ended) {
        return rp != NULL && rp->ended;
    }
    MPI_Iprobe(0, TAG_END, rp->comm, &flag, MPI_STATUS_IGNORE);
    if (flag) {
        MPI_Recv(&byte, 1, MPI_CHAR, 0, TAG_END, rp->comm, MPI_STATUS_IGNORE);
        rp->ended = 1;
    }
    return rp->ended;
}

MPI_Comm demo_replace_comm(const demo_replace_t *rp)
{
    return rp != NULL ? rp->comm : MPI_COMM_NULL;
}

int demo_replace_send(demo_replace_t *rp, const void *report, size_t len, double deadline_s)
{
    double start = demo_now();
    int done = 0;

    rp->len = len;
    MPI_Isend(&rp->len, 1, MPI_UINT64_T, 0, TAG_LEN, rp->comm, &rp->sends[0]);
    MPI_Isend(report, (int)len, MPI_BYTE, 0, TAG_DATA, rp->comm, &rp->sends[1]);
    /* Rank 0 takes the reports once the job's ranks are done: until then
     * this rank waits here (bounded), its context still joined. Rank 0 says
     * the job ends first: that message is taken too, so that none is left
     * on its way to a process that is gone (Open MPI then warns that it
     * could not connect). */
    while ((!done || !demo_replace_ended(rp)) && demo_now() - start < deadline_s) {
        if (!done) {
            MPI_Testall(2, rp->sends, &done, MPI_STATUSES_IGNORE);
        }
        if (!done || !rp->ended) {
            usleep(1000);
        }
    }
    return done ? 0 : -1;
}

/* One rank's report off the intercommunicator: its length came; the bytes
 * are waited for until deadline_s. */
static void take_report(demo_replace_t *rp, demo_report_t *r, int src, double deadline_s)
{
    uint64_t n = 0;
    MPI_Request rq;
    double start = demo_now();
    char *buf;
    int done = 0;

    MPI_Recv(&n, 1, MPI_UINT64_T, src, TAG_LEN, rp->comm, MPI_STATUS_IGNORE);
    if (n > (1u << 30) || (buf = malloc(n > 0 ? n : 1)) == NULL) {
        return;
    }
    MPI_Irecv(buf, (int)n, MPI_BYTE, src, TAG_DATA, rp->comm, &rq);
    while (!done && demo_now() - start < deadline_s) {
        MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
        if (!done) {
            usleep(1000);
        }
    }
    if (done) {
        demo_report_add_replacement(r, buf, n);
        free(buf);
    } /* else the buffer is MPI's: left behind */
}

void demo_replace_finish(demo_replace_t *rp, demo_report_t *r, double deadline_s)
{
    double last;
    int heard = 0;

    if (rp == NULL) {
        return;
    }
    if (rp->kill_rq != MPI_REQUEST_NULL) {
        int done = 0;

        MPI_Test(&rp->kill_rq, &done, MPI_STATUS_IGNORE);
        if (done) {
            rp->facts.killed_s = rp->killed_at;
        } else {
            MPI_Cancel(&rp->kill_rq);
            MPI_Request_free(&rp->kill_rq);
        }
    }
    if (rp->call != NULL && rp->facts.failed[0] == '\0') {
        snprintf(rp->facts.failed, sizeof(rp->facts.failed),
                 "MPI_Comm_spawn had not returned by the end of the run");
    }
    demo_report_set_facts(r, &rp->facts);
    if (rp->comm == MPI_COMM_NULL) {
        return;
    }
    /* Every rank of the job is done: no prefill instance sends a hello any
     * more. The replacement ends its loop and reports. */
    for (int t = 0; t < rp->facts.tp; t++) {
        static const char byte = 1;
        MPI_Request rq;

        MPI_Isend(&byte, 1, MPI_CHAR, t, TAG_END, rp->comm, &rq);
        MPI_Request_free(&rq);
    }
    last = demo_now();
    while (heard < rp->facts.tp && demo_now() - last < deadline_s) {
        MPI_Status st;
        int flag = 0;

        MPI_Iprobe(MPI_ANY_SOURCE, TAG_LEN, rp->comm, &flag, &st);
        if (!flag) {
            usleep(1000);
            continue;
        }
        take_report(rp, r, st.MPI_SOURCE, deadline_s);
        heard++;
        last = demo_now();
    }
}

void demo_replace_free(demo_replace_t *rp)
{
    free(rp);
}
