/*
 * replay.c - what a --trace replay achieved against what the trace
 * offered (trace.h): requests per second and KV GB/s, latency from a
 * request's arrival to its agreed SUCCESS, and the plot over time.
 *
 * Offered: the N requests replayed, over the span from the first arrival
 * to the last (the trace's span / speed). Achieved: the requests agreed
 * SUCCESS by every rank, over the time from the start of the replay to the
 * last of them. A request's KV is its pages (after the cap) times the
 * page size times the model's KV per token, on both sides alike.
 */
#include "demo.h"

#include "plot/gnuplot.h"

#include <jansson.h>
#include <math.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct replay_stats {
    size_t n, succeeded;
    double span, window; /* s: the offered arrivals; the start to the last SUCCESS */
    double offered_bytes, achieved_bytes;
    double min, p50, p90, p99, max; /* ms from arrival to agreed SUCCESS */
} replay_stats_t;

/* KV bytes of request i as it moves (whole pages, every layer and head). */
static double request_bytes(const demo_opts_t *o, size_t i)
{
    const kvx_kv_layout_t *kv = &o->kv;
    size_t elem = kv->dtype == KVX_DTYPE_FP8 ? 1 : kv->dtype == KVX_DTYPE_FP32 ? 4 : 2;
    size_t pages = (demo_trace_tokens(o->replay, i) + kv->page_size - 1) / kv->page_size;

    return (double)pages * kv->page_size * kv->layers * (kv->attn == KVX_ATTN_MLA ? 1 : 2) *
           kv->kv_heads * kv->head_dim * (double)elem;
}

static void stats(const demo_opts_t *o, const double *done_at, replay_stats_t *st)
{
    size_t n = o->replay->n;
    double *lat = calloc(n, sizeof(double));

    memset(st, 0, sizeof(*st));
    st->n = n;
    st->span = demo_trace_arrival(o, n - 1);
    for (size_t i = 0; i < n; i++) {
        st->offered_bytes += request_bytes(o, i);
        if (done_at[i] < 0) {
            continue;
        }
        st->achieved_bytes += request_bytes(o, i);
        st->window = done_at[i] > st->window ? done_at[i] : st->window;
        if (lat != NULL) {
            lat[st->succeeded] = (done_at[i] - demo_trace_arrival(o, i)) * 1e3;
        }
        st->succeeded++;
    }
    if (lat != NULL && st->succeeded > 0) {
        qsort(lat, st->succeeded, sizeof(double), demo_by_value);
        st->min = lat[0];
        st->p50 = demo_percentile(lat, st->succeeded, 0.50);
        st->p90 = demo_percentile(lat, st->succeeded, 0.90);
        st->p99 = demo_percentile(lat, st->succeeded, 0.99);
        st->max = lat[st->succeeded - 1];
    }
    free(lat);
}

static double rate(double x, double seconds)
{
    return seconds > 0 ? x / seconds : 0;
}

void demo_replay_print(const demo_opts_t *o, const double *done_at)
{
    const demo_trace_t *t = o->replay;
    replay_stats_t st;

    stats(o, done_at, &st);
    printf("trace:        %zu requests of %s over %.2f s (recorded %.2f s, %gx); %zu prompts "
           "longer than %u tokens capped to it\n",
           st.n, o->trace, st.span, t->rows[t->n - 1].t_ms / 1e3, o->trace_speed, t->capped,
           t->cap);
    printf("offered:      %.2f req/s, %.3f GB/s of KV (%.3f GB; %llu of %llu prompt tokens "
           "after the cap)\n",
           rate((double)st.n, st.span), rate(st.offered_bytes, st.span) / 1e9,
           st.offered_bytes / 1e9, (unsigned long long)t->kept, (unsigned long long)t->tokens);
    printf("achieved:     %.2f req/s, %.3f GB/s of KV (%zu succeeded, the last %.2f s after the "
           "first arrival)\n",
           rate((double)st.succeeded, st.window), rate(st.achieved_bytes, st.window) / 1e9,
           st.succeeded, st.window);
    printf("from arrival: p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms (arrival to agreed "
           "SUCCESS)\n",
           st.p50, st.p90, st.p99, st.max);
}

json_t *demo_replay_json(const demo_opts_t *o, const double *done_at)
{
    static const char *const formats[] = { "jsonl", "csv" };
    const demo_trace_t *t = o->replay;
    replay_stats_t st;

    stats(o, done_at, &st);
    return json_pack(
        "{s:s, s:I, s:f, s:f, s:f, s:I, s:I, s:I, s:I,"
        " s:{s:f, s:f, s:I}, s:{s:f, s:f, s:I, s:I, s:f},"
        " s:{s:f, s:f, s:f, s:f, s:f}}",
        "format", formats[t->format], "requests", (json_int_t)st.n, "speed", o->trace_speed,
        "recorded_s", t->rows[t->n - 1].t_ms / 1e3, "span_s", st.span, "cap_tokens",
        (json_int_t)t->cap, "capped", (json_int_t)t->capped, "prompt_tokens", (json_int_t)t->tokens,
        "prompt_tokens_replayed", (json_int_t)t->kept, "offered", "rps",
        rate((double)st.n, st.span), "gbps", rate(st.offered_bytes, st.span) / 1e9, "bytes",
        (json_int_t)llround(st.offered_bytes), "achieved", "rps",
        rate((double)st.succeeded, st.window), "gbps", rate(st.achieved_bytes, st.window) / 1e9,
        "bytes", (json_int_t)llround(st.achieved_bytes), "requests", (json_int_t)st.succeeded,
        "seconds", st.window, "latency_from_arrival_ms", "min", st.min, "p50", st.p50, "p90",
        st.p90, "p99", st.p99, "max", st.max);
}

/* ---- the plot ----------------------------------------------------------------------- */

/* Two blocks: each SUCCESS (when, latency from arrival); then per bin of
 * time, the KV GB/s offered (by arrival) and achieved (by SUCCESS). */
static void plot_data(FILE *f, const demo_opts_t *o, const double *done_at, double end)
{
    enum { BINS = 50 };
    size_t n = o->replay->n;
    double bin = end / BINS, offered[BINS] = { 0 }, achieved[BINS] = { 0 };

    for (size_t i = 0; i < n; i++) {
        int a = (int)(demo_trace_arrival(o, i) / bin), d = (int)(done_at[i] / bin);

        offered[a < BINS ? a : BINS - 1] += request_bytes(o, i);
        if (done_at[i] >= 0) {
            achieved[d < BINS ? d : BINS - 1] += request_bytes(o, i);
            fprintf(f, "%.6f %.3f\n", done_at[i], (done_at[i] - demo_trace_arrival(o, i)) * 1e3);
        }
    }
    fprintf(f, "\n\n");
    for (int k = 0; k < BINS; k++) {
        fprintf(f, "%.6f %.6f %.6f\n", (k + 0.5) * bin, offered[k] / bin / 1e9,
                achieved[k] / bin / 1e9);
    }
}

void demo_replay_plot(const demo_opts_t *o, const double *done_at)
{
    char *data = NULL, script[1024];
    size_t len = 0;
    replay_stats_t st;
    FILE *f;

    stats(o, done_at, &st);
    if ((f = open_memstream(&data, &len)) == NULL) {
        printf("plot:         %s NOT written (out of memory)\n", o->plot);
        return;
    }
    plot_data(f, o, done_at, st.window > st.span ? st.window : st.span > 0 ? st.span : 1);
    fclose(f);
    snprintf(script, sizeof(script),
             "set multiplot layout 2,1 title 'kvx-demo %s: %s at %gx'\nset grid\n"
             "set key left top\nset xlabel 'seconds after the first arrival'\n"
             "set ylabel 'ms'\nset yrange [0:*]\n"
             "plot DATA index 0 using 1:2 with points pt 7 ps 0.4 title "
             "'latency, arrival to agreed SUCCESS'\n"
             "set ylabel 'GB/s'\n"
             "plot DATA index 1 using 1:2 with boxes fs transparent solid 0.3 noborder "
             "title 'offered KV (by arrival)', "
             "DATA index 1 using 1:3 with histeps lw 2 title 'achieved KV (by SUCCESS)'\n"
             "unset multiplot\n",
             kvx_version(), o->trace, o->trace_speed);
    printf("plot:         %s %s\n", o->plot, gnuplot_png(o->plot, 960, 720, script, data, len));
    free(data);
}
