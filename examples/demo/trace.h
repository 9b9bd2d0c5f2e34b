/*
 * trace.h - kvx-demo --trace: a recorded request trace replayed on its own
 * clock (trace.c reads it, replay.c reports on the replay).
 *
 * Two public formats, told apart by content:
 *   JSON lines, one object per request with "timestamp" (ms since the start),
 *     "input_length" and "output_length" in tokens (Mooncake, FAST '25);
 *     other keys (hash_ids) are ignored;
 *   CSV with the header TIMESTAMP,ContextTokens,GeneratedTokens, TIMESTAMP an
 *     absolute time "2023-11-16 18:17:03.9799600" (Azure LLM inference 2023).
 * Rows must be sorted by time; the replay starts at the first row.
 */
#ifndef KVX_DEMO_TRACE_H
#define KVX_DEMO_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct demo_opts;

typedef enum demo_trace_format { DEMO_TRACE_JSONL = 0, DEMO_TRACE_CSV } demo_trace_format_t;

typedef struct demo_trace_row {
    double t_ms;            /* arrival, ms after the first row, as recorded */
    uint32_t input, output; /* prompt and output tokens, as recorded */
} demo_trace_row_t;

typedef struct demo_trace {
    demo_trace_format_t format;
    size_t n;
    demo_trace_row_t *rows;
    uint32_t cap;    /* prompts longer than this are capped to it */
    size_t capped;   /* rows whose prompt was capped */
    uint64_t tokens; /* prompt tokens as recorded */
    uint64_t kept;   /* prompt tokens replayed (after the cap) */
} demo_trace_t;

/* Collective over MPI_COMM_WORLD: rank 0 reads o->trace (at most
 * o->trace_limit rows) and sends the rows to every rank, so that every
 * rank replays the same requests and only rank 0 needs the file. Then
 * sets the cap, o->requests and o->min_tokens/max_tokens (the capped
 * prompts) on every rank, and counts o->time_limit from the last arrival. Returns 0, or 2 on every
 * rank when the trace is bad (rank 0 said "kvx-demo: FILE:LINE: why" on stderr). */
int demo_trace_load(struct demo_opts *o, int rank);
/* Reads at most limit rows of path into t (times relative to the first
 * row; t zeroed by the caller), or says why in err: "PATH:LINE: why".
 * Returns 0 or -1. Not collective: demo_trace_load() calls it on rank 0. */
int demo_trace_read(const char *path, size_t limit, demo_trace_t *t, char *err, size_t len);
void demo_trace_free(demo_trace_t *t);

/* Request i as replayed: its prompt tokens after the cap, and its arrival
 * in seconds after the start of the replay (the trace's clock / speed). */
uint32_t demo_trace_tokens(const demo_trace_t *t, size_t i);
double demo_trace_arrival(const struct demo_opts *o, size_t i);

/* The header line of the run (rank 0). */
void demo_trace_header(const struct demo_opts *o);

/* ---- replay.c ------------------------------------------------------------------- */

/* Rank 0, after the outcomes were compared: done_at[i] is when request i
 * was agreed SUCCESS by every rank that serves it (seconds after the start,
 * the latest decode rank), or a negative number when it did not succeed. */
void demo_replay_print(const struct demo_opts *o, const double *done_at);
/* The "trace" member of the --json object (a jansson object; NULL without memory). */
struct json_t *demo_replay_json(const struct demo_opts *o, const double *done_at);
/* --plot: latency and GB/s over the replay, drawn with gnuplot. */
void demo_replay_plot(const struct demo_opts *o, const double *done_at);

#endif
