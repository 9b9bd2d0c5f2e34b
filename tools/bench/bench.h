/*
 * bench.h - what the parts of kvx-bench share: options, sub-worlds of the
 * MPI job, clocks and statistics, the report (header, rows, footer, JSON,
 * plot), the raw UCP baseline and the room streams.
 *
 * kvx-bench uses kvx through include/kvx.h only; the raw baseline calls UCP
 * and MPI directly.
 */
#ifndef KVX_BENCH_H
#define KVX_BENCH_H

#include <kvx.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- options -------------------------------------------------------------- */

#define BENCH_MAX_LIST 16

typedef struct bench_list {
    double v[BENCH_MAX_LIST];
    int n;
} bench_list_t;

typedef struct bench_opts {
    const char *sub;
    const char *json, *plot;
    int reps;                         /* measured repetitions per point */
    int window;                       /* rooms in flight */
    double poll_us;                   /* sleep of a waiting application thread */
    size_t min_size, max_size, total; /* put: room sizes, bytes per point */
    unsigned layers, pages;           /* pages, hetero: geometry of a room */
    int rooms;                        /* pages, hetero: rooms per point */
    kvx_page_layout_t page_layout;
    bench_list_t scatter, tp, nrooms, failed, layouts;
    bench_list_t room_pages, balances; /* layerwise: pages per room, compute/transfer */
    int compute_sleep;                 /* layerwise: a layer's compute sleeps (1) or spins */
    int kinds;                         /* fault: BENCH_KIND_* bits */
    double interval_us;                /* agree, fault: pause between agreement rounds */
    int force_kill;                    /* fault: kill without --enable-recovery */
    int raw_spin;                      /* the raw baseline spins (1) or waits as kvx (0) */
} bench_opts_t;

#define BENCH_KIND_INJECTED 1
#define BENCH_KIND_KILLED   2

/* ---- the job ---------------------------------------------------------------- */

extern int bench_rank, bench_size; /* in MPI_COMM_WORLD */
extern int bench_raw_spin;         /* --raw-wait: 1 spin, 0 as kvx's progress thread */

/* The first n ranks of the world, or MPI_COMM_NULL on the others. */
MPI_Comm bench_subworld(int n);
/* One line saying how many ranks run on how many hosts and cores, and
 * whether they are oversubscribed, then what (the layout). Collective over
 * the world. */
void bench_world_text(const char *what, char *buf, size_t len);
/* A barrier that sleeps while it waits, so that idle ranks leave the cores
 * to the measured ones (Open MPI's blocking calls spin). */
void bench_barrier_sleepy(MPI_Comm comm);
/* The two-rank subcommands (put, verify, layerwise): the world text for
 * "what uses ranks 0 and 1", and 0; or 2 (printed) when the job has fewer
 * than 2 ranks. Collective over the world. */
int bench_pair_world(const char *what, char *world, size_t len);
/* Their KV layout: 32 KiB pages (HND, 16 tokens x 8 heads x 128 bf16, MHA)
 * of layers layers; returns the bytes of one page of one buffer. */
size_t bench_kv_32k(kvx_kv_layout_t *kv, unsigned layers);
/* The same with pages of tokens tokens (2 KiB each). */
size_t bench_kv_tokens(kvx_kv_layout_t *kv, unsigned layers, unsigned tokens);
/* A kvx context over comm for layout; NULL (after printing why) on error. */
kvx_ctx_t *bench_ctx_create(MPI_Comm comm, const char *layout, const kvx_kv_layout_t *kv,
                            size_t num_pages, size_t aux_slots, const char *fault);
/* The same with KVX_VERIFY's mode set by the parameters. */
kvx_ctx_t *bench_ctx_create_verify(MPI_Comm comm, const char *layout, const kvx_kv_layout_t *kv,
                                   size_t num_pages, size_t aux_slots, kvx_verify_t verify);
kvx_ctx_t *bench_ctx_create_full(MPI_Comm comm, const char *layout, const kvx_kv_layout_t *kv,
                                 size_t num_pages, size_t aux_slots, const char *fault,
                                 kvx_verify_t verify);
/* Pointers to every (layer, component) buffer of the pool, calloc'ed. */
void **bench_ctx_buffers(kvx_ctx_t *ctx, unsigned layers, unsigned comps);
/* Closes a room, waiting (bounded) while a failed room's writers drain. */
kvx_status_t bench_room_close(kvx_ctx_t *ctx, uint64_t id);
/* Whether this process runs under mpirun --enable-recovery. */
int bench_recovery_enabled(void);

/* ---- clocks and statistics ---------------------------------------------------- */

double bench_now(void);
void bench_sleep_us(double us);
/* Median, minimum and maximum of n values (v is not changed). */
double bench_median(const double *v, int n);
double bench_min(const double *v, int n);
double bench_max(const double *v, int n);
typedef struct bench_stat {
    double med, min, max;
} bench_stat_t;
bench_stat_t bench_stat(const double *v, int n);
/* The median of the paired ratios a[i] / b[i] (repetitions interleaved, so
 * that a change of load hits both sides of a pair alike). */
double bench_ratio(const double *a, const double *b, int n);
/* This rank's clock minus the clock of rank 0 of comm, from ping-pongs
 * (0 on rank 0). Collective over comm. */
double bench_clock_offset(MPI_Comm comm);

/* A value of the word at index i of a buffer filled for (seed): the pattern
 * senders write and receivers check. */
static inline uint64_t bench_word(uint64_t seed, size_t i)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + i;

    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    return x ^ (x >> 29);
}
void bench_fill(void *buf, size_t len, uint64_t seed);
/* Number of 8-byte words of buf that differ from the pattern. */
size_t bench_check(const void *buf, size_t len, uint64_t seed);

/* ---- the report (rank 0 of the world) ------------------------------------------ */

typedef struct bench_out bench_out_t;

/* Opens the report: the first line and the setup block common to every
 * subcommand (world_text from bench_world_text(), memory, versions, load,
 * kvx settings). */
bench_out_t *bench_out_open(const bench_opts_t *o, const char *world_text);
/* One more line of the setup block ("# " is prepended). */
void bench_out_setup(bench_out_t *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The column heads: a line of names and a line of units. */
void bench_out_heads(bench_out_t *out, const char *names, const char *units);
/* A table row, printed as given; ok says whether its correctness column
 * passed. */
void bench_out_row(bench_out_t *out, int ok, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* JSON members of the current row: call json_begin, the values, json_end. */
void bench_json_begin(bench_out_t *out);
void bench_json_num(bench_out_t *out, const char *key, double v);
void bench_json_str(bench_out_t *out, const char *key, const char *v);
/* key (the median), key_min and key_max. */
void bench_json_stat(bench_out_t *out, const char *key, bench_stat_t s);
/* Closes the row with its repetitions and its correctness ("check"). */
void bench_json_end(bench_out_t *out, int reps, int ok);
/* A line of plot data (whitespace-separated columns). */
void bench_plot_data(bench_out_t *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* gnuplot commands that draw the data ("DATA" names the data file). */
void bench_plot_script(bench_out_t *out, const char *script);
/* A note under the table ("# " is prepended). */
void bench_out_note(bench_out_t *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Footer, JSON file, plot; returns 0 when every row passed. */
int bench_out_close(bench_out_t *out);

/* ---- the raw UCP baseline --------------------------------------------------------- */

/* One put of a room: offsets in the source and destination buffers. */
typedef struct raw_put {
    size_t src, dst, len;
} raw_put_t;

typedef struct raw raw_t;

/* A UCP context, worker and endpoint with kvx's UCX settings between rank 0
 * (initiator) and rank 1 (target) of comm (2 ranks), with src_len bytes of
 * registered source and dst_len of registered destination memory. NULL on
 * error (printed). Collective over comm. */
raw_t *raw_create(MPI_Comm comm, size_t src_len, size_t dst_len);
void raw_destroy(raw_t *raw);
void *raw_src(raw_t *raw);
void *raw_dst(raw_t *raw);
/* The transports of the endpoint, as ucp_ep_print_info names them. */
const char *raw_transports(raw_t *raw);
/* Moves nrooms rooms, room r being the puts of slot r % nslots, each room
 * flushed, at most window rooms not yet flushed; then a flag tells the
 * target. Returns, on the target, seconds from the start (a barrier) until
 * it saw the flag; on the initiator, until its last flush completed; a
 * negative value on error. Collective over the raw's comm. */
double raw_stream(raw_t *raw, const raw_put_t *const *slot_puts, const size_t *slot_nputs,
                  int nslots, int nrooms, int window);
/* "sysv/memory cma/memory" for a probe endpoint from rank 0 to rank 1 of
 * comm, created with kvx's UCX settings (for the setup block); rank 0 gets
 * the answer. Collective over comm (at least 2 ranks). */
void raw_probe_transports(MPI_Comm comm, char *buf, size_t len);

/* ---- room streams ------------------------------------------------------------------ */

/* Rooms from prefill instance 0 to decode instance 0 of a context: room r
 * sends the pages of slot r % nslots (source pages src[slot], destination
 * pages dst[slot], npages each) with an 8-byte aux row (its id), at most
 * window rooms open on a rank at once. Every rank of both instances calls
 * it with the same arguments. */
typedef struct stream_spec {
    int nslots, nrooms, window;
    uint32_t *const *src, *const *dst;
    size_t npages;
    double poll_us, limit_s;
    uint64_t first_id;
} stream_spec_t;

typedef struct stream_result {
    double seconds;  /* decode: start to the last room SUCCESS; prefill: to its last */
    int ok_rooms;    /* rooms that ended SUCCESS on this rank */
    int bad_aux;     /* decode: aux rows that did not carry the room's id */
    uint64_t puts;   /* prefill: puts and data messages posted (kvx_ctx_stats) */
    uint64_t bytes;  /* prefill: their bytes */
    char error[512]; /* the first failure, or "" */
} stream_result_t;

/* Runs a stream; the clock starts when every rank of comm left a barrier. */
void stream_run(kvx_ctx_t *ctx, MPI_Comm comm, const stream_spec_t *s, stream_result_t *r);

/* ---- subcommands ------------------------------------------------------------------- */

int bench_put(const bench_opts_t *o);
int bench_pages(const bench_opts_t *o);
int bench_hetero(const bench_opts_t *o);
int bench_agree(const bench_opts_t *o);
int bench_fault(const bench_opts_t *o);
int bench_verify(const bench_opts_t *o);
int bench_layerwise(const bench_opts_t *o);

#endif
