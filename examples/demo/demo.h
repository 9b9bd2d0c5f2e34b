/*
 * demo.h - the parts of kvx-demo, a prefill/decode serving simulation
 * written against the public API only (include/kvx.h).
 *
 *   main.c      the context, the run, the end
 *   options.c   the command line and the default layout
 *   stream.c    the requests, the same on every rank
 *   kvgen.c     the KV a prefill rank "computes" and a decode rank checks
 *   pagealloc.c a page allocator that fragments like a serving engine's
 *   serve.c     one instance's scheduler loop: admit, compute, agree, close
 *   progress.c  rank 0's progress line, fed by the decode instances
 *   report.c    every rank's outcomes compared at rank 0; summary and JSON
 *   trace.c     --trace: a recorded request trace, read at rank 0 (trace.h)
 *   replace.c   --kill-decode and --replace: a decode instance dies and rank 0
 *               spawns its replacement, which joins the running job
 *   replay.c    --trace: offered and achieved load, latency from arrival, plot
 */
#ifndef KVX_DEMO_H
#define KVX_DEMO_H

#include "trace.h"

#include <kvx.h>
#include <mpi.h>

#include <stddef.h>
#include <stdint.h>

/* ---- options.c -------------------------------------------------------------- */

typedef enum demo_progress_mode {
    DEMO_PROGRESS_AUTO = 0,
    DEMO_PROGRESS_TTY,
    DEMO_PROGRESS_LINES,
    DEMO_PROGRESS_NONE
} demo_progress_mode_t;

typedef struct demo_opts {
    const char *layout; /* --layout; NULL: KVX_LAYOUT, else from the world size */
    char layout_buf[64];
    unsigned requests;
    unsigned min_tokens, max_tokens; /* --prompt-tokens */
    double rate;                     /* --rate: requests per second; 0: all at the start */
    unsigned concurrency;            /* rooms in flight per instance */
    unsigned chunk_pages;            /* pages a prefill step computes */
    double layer_us;                 /* --layer-us: compute per layer of a full step */
    int layerwise;                   /* --layerwise: each layer handed over when computed */
    kvx_kv_layout_t kv;
    size_t pool_pages; /* pages per (layer, component); 0: sized from the requests */
    const char *fault;
    uint64_t seed;
    const char *json;
    double time_limit;
    double end_timeout; /* --end-timeout: how long the end waits for a silent rank */
    demo_progress_mode_t progress;
    int synthetic; /* --requests or --prompt-tokens given */
    /* --trace: the stream replays a recorded trace instead (trace.h). */
    const char *trace;
    double trace_speed;
    size_t trace_limit;
    uint32_t trace_cap; /* tokens; longer prompts are capped */
    const char *plot;
    demo_trace_t *replay; /* the rows, on every rank (demo_trace_load) */
    /* --kill-decode K:N: every TP rank of decode[K] dies after N rooms. */
    int kill_instance; /* -1: none */
    unsigned kill_after;
    int replace; /* --replace: rank 0 spawns a replacement for a lost decode instance */
    /* Set on the processes --replace spawns: the instance they replace
     * (-1 in the job), the job's door and its clock's start (CLOCK_REALTIME
     * seconds, so that their times read as the job's). */
    int replacement_of;
    const char *join_address;
    double job_t0;
    int argc; /* the command line, for the spawn */
    char **argv;
    int threads_multiple; /* MPI_THREAD_MULTIPLE was granted */
} demo_opts_t;

/* Parses argv (identically on every rank). Returns 0, or the exit status:
 * 2 for a usage error (rank 0 said why), 1 for --help (printed by rank 0). */
int demo_opts_parse(int argc, char **argv, int rank, int world_size, demo_opts_t *o);

/* The value of a kvx configuration variable in this environment, or NULL
 * (read through kvx_config_var(): kvx owns every KVX_* variable). */
const char *demo_config_value(const char *name);

/* ---- stream.c ---------------------------------------------------------------- */

typedef struct demo_req {
    uint64_t id; /* the room id */
    uint32_t index, tokens, npages;
    int prefill, decode; /* the instances that serve it */
    double arrival;      /* seconds after the start; 0 unless --trace */
} demo_req_t;

/* The whole stream, the same on every rank: prompt lengths drawn from the
 * seed, instances assigned round robin over every prefill/decode pair. */
demo_req_t *demo_requests(const demo_opts_t *o, const kvx_identity_t *id);

uint64_t demo_mix(uint64_t x);

/* ---- kvgen.c ------------------------------------------------------------------ */

/* This rank's view of its KV pool. */
typedef struct demo_kv {
    kvx_kv_layout_t kv;
    unsigned comps;      /* 2 (K, V), 1 for MLA */
    unsigned heads;      /* heads this rank holds */
    unsigned first_head; /* the model head of its first */
    size_t num_pages;
    size_t elem; /* bytes per element */
    size_t row;  /* bytes of one head of one token */
    void **bufs; /* [layer * comps + comp] */
} demo_kv_t;

int demo_kv_init(demo_kv_t *g, kvx_ctx_t *ctx, const kvx_kv_layout_t *kv, size_t num_pages);
void demo_kv_cleanup(demo_kv_t *g);

/* Writes (check 0) or checks (check 1) the KV of pages [first, first + n) of
 * a room whose pages are pages[]: every layer, component, token and head this
 * rank holds. Returns the bytes that differ (0 when writing). */
uint64_t demo_kv_pages(const demo_kv_t *g, uint64_t room, const uint32_t *pages, size_t first,
                       size_t n, int check);
/* Writes the KV of one layer of those pages (a layer-wise prefill step). */
void demo_kv_layer(const demo_kv_t *g, uint64_t room, const uint32_t *pages, size_t first, size_t n,
                   unsigned layer);

/* The aux payload: the room's first output token, derived from its id. */
uint32_t demo_first_token(uint64_t room);

/* ---- pagealloc.c -------------------------------------------------------------- */

/* Free ids in a FIFO queue: an allocation takes the oldest free ids, a free
 * appends a request's ids in its order, so the pool fragments as requests
 * of different lengths end out of order (sglang's allocator without its
 * optional sort). Every rank of an instance runs the same sequence of calls,
 * so TP ranks agree on page ids, as a serving engine's ranks do. */
typedef struct demo_alloc {
    uint32_t *queue;
    size_t cap, head, count;
    size_t lost;          /* quarantined: never given back */
    uint64_t taken, runs; /* ids allocated, and in how many consecutive runs */
} demo_alloc_t;

int demo_alloc_init(demo_alloc_t *a, size_t n);
void demo_alloc_cleanup(demo_alloc_t *a);
/* n ids into out; -1 (nothing taken) when fewer are free. */
int demo_alloc_take(demo_alloc_t *a, size_t n, uint32_t *out);
void demo_alloc_give(demo_alloc_t *a, const uint32_t *ids, size_t n);
/* ids that may still be written by a writer that never confirmed. */
void demo_alloc_lose(demo_alloc_t *a, size_t n);

/* ---- serve.c ------------------------------------------------------------------ */

/* What one rank concluded about one room; compared across ranks at the end. */
typedef struct demo_outcome {
    uint32_t req;        /* request index */
    int32_t concluded;   /* 1: agreed SUCCESS or FAILED by this instance */
    int32_t state;       /* kvx_room_state_t */
    int32_t status;      /* root cause, when FAILED */
    int32_t stage;       /* kvx_stage_t */
    int32_t origin;      /* world rank */
    int32_t origin_role; /* kvx_role_t of that rank, as kvx recorded it */
    uint32_t injected;   /* KVX_FAILURE_INJECTED */
    uint32_t decode;     /* recorded by a decode rank */
    double latency_ms;   /* decode: pre-allocation to agreed outcome */
    double computed_s;   /* prefill: when its last KV was computed, seconds after the start */
    double agreed_s;     /* decode: when the outcome was agreed, seconds after the start */
    uint64_t bytes;      /* decode: KV bytes that landed in this rank's pages (SUCCESS) */
    uint64_t mismatches;
    double at_s;          /* when this rank concluded it, seconds into the run */
    int32_t rank;         /* the world rank that recorded it */
    uint32_t opened;      /* kvx opened the room on this rank (kvx_ctx_stats() counts it) */
    uint32_t replacement; /* recorded by a rank of the replacement (--replace) */
    /* kvx refused the room's open on a TP sibling, and this rank, which had
     * opened it, aborted it: the record is the sibling's refusal (the same
     * on every TP rank), and these are kvx's own failure of the room here,
     * which its counters count. */
    uint32_t sibling_refused;
    int32_t kstatus, kstage, krole;
} demo_outcome_t;

/* The agreed root cause of a failed room, as decode TP rank 0 formats it. */
typedef struct demo_text {
    uint32_t req;
    char line[252];
} demo_text_t;

typedef struct demo_progress demo_progress_t;
typedef struct demo_flight demo_flight_t;
typedef struct demo_replace demo_replace_t;

#define DEMO_HELLO_FAILS 16

/* A one-page room a prefill instance sends the replacement of a decode
 * instance when it routes requests to it again: its aux row names the first
 * request it routes there (serve.c). */
typedef struct demo_hello {
    uint64_t id;
    uint32_t page, aux_slot;
    int state; /* HELLO_NONE, HELLO_OPEN, HELLO_AGREED, HELLO_CLOSED */
} demo_hello_t;

typedef struct demo_serve {
    const demo_opts_t *o;
    kvx_ctx_t *ctx;
    kvx_identity_t id;
    MPI_Comm tp;
    demo_kv_t kv;
    demo_alloc_t pages, aux;
    const demo_req_t *reqs;
    uint32_t *mine; /* this instance's requests, in order */
    size_t nmine, next;
    demo_outcome_t *out; /* one per mine[] */
    demo_flight_t *flight;
    unsigned slots;
    uint64_t *ids;   /* the round's rooms */
    unsigned *round; /* their slots */
    kvx_agreed_t *agreed;
    int *sync;
    uint64_t seq;       /* rooms admitted */
    uint64_t steps;     /* steps of the loop, the same on every TP rank */
    demo_text_t *texts; /* decode TP rank 0: its failed rooms */
    size_t ntexts, cap_texts;
    /* Retired so far by this instance. */
    size_t done, failed;
    uint64_t bytes; /* KV bytes of this rank in SUCCESS rooms */
    uint64_t quarantined_pages;
    size_t drain_waits; /* rooms whose close was refused until the drain */
    double t0, elapsed;
    double clock; /* seconds after t0 that every TP rank has passed (arrivals) */
    demo_progress_t *progress;
    int broken; /* a TP sibling is lost: no collective over the instance */
    /* Per instance of the other role: a room with it failed here with
     * KVX_ERR_PEER_LOST (seen), and the TP ranks agreed so (shunned: no more
     * requests are offered to it). */
    int *peer_seen, *peer_shunned;
    int npeer_instances;
    /* --replace. Prefill: per decode instance, how often it came back
     * (a room counts its loss only when it was admitted since) and the hello
     * sent to it. The replacement: per prefill instance, its hello and the
     * first request it routes here (-1: not told yet); the job said it ends
     * (no hello comes any more). */
    int *peer_gen;
    demo_hello_t *hello;
    int64_t *first_req;
    uint64_t hellos[3]; /* hello rooms kvx opened here, agreed SUCCESS, agreed FAILED */
    int32_t hello_fail[DEMO_HELLO_FAILS][3]; /* the first failed ones: stage, origin role, status */
    int replacement;
    int end_seen;
    demo_replace_t *rp; /* world rank 0 with --replace or --kill-decode; the replacement */
} demo_serve_t;

/* KV pages per (layer, component) on every rank: --pool-pages, else room
 * for --concurrency requests of the mean prompt (at least the longest). */
size_t demo_pool_pages(const demo_opts_t *o);
size_t demo_aux_slots(const demo_opts_t *o);

int demo_serve_init(demo_serve_t *s, const demo_opts_t *o, kvx_ctx_t *ctx, const demo_req_t *reqs,
                    size_t num_pages);
/* Runs this instance's requests to the end (or the time limit). Every TP
 * rank of the instance runs the same rounds. 0, or -1 after a fatal error. */
int demo_serve_run(demo_serve_t *s);
void demo_serve_cleanup(demo_serve_t *s);

double demo_now(void);

/* ---- progress.c --------------------------------------------------------------- */

/* Collective over world: rank 0 draws, decode TP rank 0s report. */
demo_progress_t *demo_progress_create(const demo_opts_t *o, const kvx_identity_t *id);
/* Called every step: a decode reporter sends its counts now and then, rank 0
 * reads what arrived and redraws. */
void demo_progress_step(demo_progress_t *p, const demo_serve_t *s);
/* At the end of the loop: the reporters' last counts; rank 0 waits for all
 * of them and prints the last line. */
void demo_progress_finish(demo_progress_t *p, const demo_serve_t *s);
void demo_progress_destroy(demo_progress_t *p);
/* --replace. World rank 0 (child 0): the replacement's counts also come on
 * inter. The replacement (child 1): its counts go to world rank 0 there. */
void demo_progress_via(demo_progress_t *p, MPI_Comm inter, int child);

/* ---- xchg.c ------------------------------------------------------------------- */

/* The end of a run, bounded: every rank's report to every other rank, point
 * to point, each waited for until deadline_s has passed since the last one
 * arrived. A rank that is dead or unreachable is not heard; no call here
 * ever waits on it longer. */
typedef struct demo_xchg demo_xchg_t;

demo_xchg_t *demo_xchg_all(const void *mine, size_t len, double deadline_s);
/* While serving, now and then: "still here" to every rank, and takes in
 * theirs. Never blocks. */
void demo_xchg_alive(void);
/* Seconds since anything came from the rank (its "still here", its report). */
double demo_xchg_silence(int rank);
/* 1 and the rank's report (owned by x), or 0 when it was not heard. */
int demo_xchg_heard(const demo_xchg_t *x, int rank, const void **data_p, size_t *len_p);
int demo_xchg_all_heard(const demo_xchg_t *x);
/* The lowest rank heard (this one counts): the one that prints. */
int demo_xchg_first_heard(const demo_xchg_t *x);
/* Waits up to deadline_s for this rank's sends, then frees what MPI no
 * longer uses; returns 0 when some send could not complete (a peer gone). */
int demo_xchg_free(demo_xchg_t *x, double deadline_s);
/* MPI_Finalize, and _exit(status) if it has not returned after limit_s
 * (it can wait on a rank that is gone). */
void demo_xchg_finalize(int status, double limit_s);

/* ---- report.c ----------------------------------------------------------------- */

typedef struct demo_report demo_report_t;

/* Every rank's outcomes to every rank (xchg.c: bounded, point to point),
 * each of which compares them room by room over the ranks it heard. Call
 * before kvx_ctx_destroy(); print after it, so that the summary is the last
 * thing printed. */
demo_report_t *demo_report_gather(const demo_serve_t *s);
/* The lowest rank heard prints the summary (and writes --json); returns the
 * exit status, which every rank works out from what it heard. */
int demo_report_print(demo_report_t *r);
/* Was every rank heard at the end? */
int demo_report_complete(const demo_report_t *r);
void demo_report_free(demo_report_t *r);

/* ---- replace.c ---------------------------------------------------------------- */

/* World rank 0 of a job run with --replace or --kill-decode, after the
 * context is created (NULL elsewhere, and when there is nothing to do). */
demo_replace_t *demo_replace_create(const demo_opts_t *o, const kvx_identity_t *id);
/* Every step of world rank 0: takes the victim's time of death, and spawns
 * the replacement once its instance agreed a decode instance is lost and
 * kvx says its place is free (blocks for the spawn, about half a second). */
void demo_replace_step(demo_replace_t *rp, demo_serve_t *s);
/* --kill-decode on a rank of the victim: TP rank 0 tells world rank 0 when,
 * then every rank kills itself (SIGKILL). Never returns. */
void demo_replace_kill(const demo_serve_t *s) __attribute__((noreturn));
/* A process --replace spawned: the intercommunicator with world rank 0 and
 * the environment kvx_ctx_create() reads to join (KVX_JOIN, KVX_LAYOUT);
 * NULL, having said why, when this process was not spawned by kvx-demo. */
demo_replace_t *demo_replace_child(demo_opts_t *o, int world_size);
/* The replacement: has the job said it ends? Never blocks. */
int demo_replace_ended(demo_replace_t *rp);
/* The spawn's intercommunicator (MPI_COMM_NULL before it). */
MPI_Comm demo_replace_comm(const demo_replace_t *rp);
/* The replacement at its end: its report to world rank 0, waited for until
 * rank 0 took it or deadline_s passed. 0 when it was taken. */
int demo_replace_send(demo_replace_t *rp, const void *report, size_t len, double deadline_s);
/* World rank 0 at the end, after every rank of the job was heard: tells the
 * replacement the job ends and takes its ranks' reports into r (each
 * waited for until deadline_s after the last). */
void demo_replace_finish(demo_replace_t *rp, demo_report_t *r, double deadline_s);
void demo_replace_free(demo_replace_t *rp);

/* What rank 0 knows of the replacement, for the summary. */
typedef struct demo_replace_facts {
    int instance;      /* the decode instance replaced, -1: none */
    int tp;            /* its processes */
    double killed_s;   /* when --kill-decode killed it (-1: not told) */
    double spawn_s;    /* when rank 0 started the spawn */
    double spawn_took; /* seconds MPI_Comm_spawn took */
    char failed[256];  /* why there is no replacement, or "" */
} demo_replace_facts_t;

/* ---- report.c (the replacement's part) ------------------------------------------ */

/* What a rank sends at the end, built by demo_report_gather(): malloc'ed. */
void *demo_report_blob(const demo_serve_t *s, double joined_s, size_t *len_p);
/* Rank 0: one rank of the replacement's report, and the facts of its spawn. */
void demo_report_add_replacement(demo_report_t *r, const void *data, size_t len);
void demo_report_set_facts(demo_report_t *r, const demo_replace_facts_t *facts);

/* qsort()'s order of doubles; the nearest-rank percentile p of n sorted
 * values: the smallest with at least p of them at or below (0 when n is 0). */
int demo_by_value(const void *a, const void *b);
double demo_percentile(const double *v, size_t n, double p);

#endif
