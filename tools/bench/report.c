/*
 * report.c - what rank 0 prints and writes, in the manner of the OSU
 * micro-benchmarks and nccl-tests: a first line naming the benchmark, a
 * '#' block describing the setup, fixed-width columns with units, a
 * correctness column, a footer that says OK or FAILED; the same rows as
 * JSON (--json) and drawn by gnuplot (--plot).
 */
#include "bench.h"
#include "plot/gnuplot.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct bench_out {
    const bench_opts_t *o;
    int rows, bad_rows;
    json_t *json_rows; /* the rows written, JSON objects */
    json_t *row;       /* the row being written */
    json_t *setup;     /* the setup lines, JSON strings */
    int json_bad;      /* a member jansson refused (a string not UTF-8) */
    FILE *plot;
    char *plot_buf;
    size_t plot_len;
    char *script;
};

/* The KVX_* settings that shape the numbers, with their values here. */
static void kvx_settings(char *buf, size_t len)
{
    static const char *const shown[] = { "KVX_PROGRESS",         "KVX_MAX_INFLIGHT_BYTES",
                                         "KVX_MAX_INFLIGHT_OPS", "KVX_STAGING_BYTES",
                                         "KVX_EP_ERR_MODE",      "KVX_PEER_TIMEOUT" };
    size_t off = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < kvx_config_count(); i++) {
        kvx_config_var_t v;
        int show = 0;

        kvx_config_var(i, &v);
        for (size_t k = 0; k < sizeof(shown) / sizeof(shown[0]); k++) {
            show |= !strcmp(v.name, shown[k]);
        }
        if ((show || v.value != NULL) && off < len) {
            off += (size_t)snprintf(buf + off, len - off, "%s%s=%s%s", off ? " " : "", v.name,
                                    v.value != NULL ? v.value : v.default_value,
                                    v.value != NULL ? " (set)" : "");
        }
    }
}

bench_out_t *bench_out_open(const bench_opts_t *o, const char *world_text)
{
    bench_out_t *out = calloc(1, sizeof(*out));
    kvx_versions_t v;
    char when[64], settings[1024], load[64] = "?";
    time_t t = time(NULL);
    FILE *f;

    out->o = o;
    out->json_rows = json_array();
    out->setup = json_array();
    out->plot = open_memstream(&out->plot_buf, &out->plot_len);
    kvx_versions(&v);
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", gmtime(&t));
    if ((f = fopen("/proc/loadavg", "r")) != NULL) {
        if (fgets(load, sizeof(load), f) != NULL) {
            load[strcspn(load, "\n")] = '\0';
        }
        fclose(f);
    }
    kvx_settings(settings, sizeof(settings));
    printf("# kvx-bench %s v%s\n", o->sub, kvx_version());
    bench_out_setup(out, "date: %s", when);
    bench_out_setup(out, "%s", world_text);
    bench_out_setup(out, "load average at start: %s", load);
    bench_out_setup(out, "memory: host (kvx pools and baseline buffers)");
    bench_out_setup(out, "UCX %s; MPI %s", v.ucx, v.mpi);
    bench_out_setup(out, "kvx: %s", settings);
    bench_out_setup(out, "UCX_TLS=%s UCX_PROTO_ENABLE=%s",
                    getenv("UCX_TLS") ? getenv("UCX_TLS") : "(unset)",
                    getenv("UCX_PROTO_ENABLE") ? getenv("UCX_PROTO_ENABLE")
                                               : "(unset: kvx and the baseline enable v2)");
    return out;
}

void bench_out_setup(bench_out_t *out, const char *fmt, ...)
{
    char line[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    printf("# %s\n", line);
    fflush(stdout);
    out->json_bad |= json_array_append_new(out->setup, json_string(line)) != 0;
}

void bench_out_note(bench_out_t *out, const char *fmt, ...)
{
    va_list ap;

    (void)out;
    printf("# ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

void bench_out_heads(bench_out_t *out, const char *names, const char *units)
{
    (void)out;
    printf("#\n#%s\n#%s\n", names, units);
    fflush(stdout);
}

void bench_out_row(bench_out_t *out, int ok, const char *fmt, ...)
{
    va_list ap;

    out->rows++;
    out->bad_rows += !ok;
    printf(" ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

void bench_json_begin(bench_out_t *out)
{
    json_decref(out->row);
    out->row = json_object();
}

/* Whole numbers as JSON integers, others as reals; NaN and infinities, which
 * JSON cannot hold, as null. */
void bench_json_num(bench_out_t *out, const char *key, double v)
{
    json_t *num;

    if (!isfinite(v)) {
        num = json_null();
    } else if (v < 1e15 && v > -1e15 && v == (double)(long long)v) {
        num = json_integer((json_int_t)v);
    } else {
        num = json_real(v);
    }
    out->json_bad |= json_object_set_new(out->row, key, num) != 0;
}

void bench_json_str(bench_out_t *out, const char *key, const char *v)
{
    out->json_bad |= json_object_set_new(out->row, key, json_string(v)) != 0;
}

void bench_json_stat(bench_out_t *out, const char *key, bench_stat_t s)
{
    char name[64];

    bench_json_num(out, key, s.med);
    snprintf(name, sizeof(name), "%s_min", key);
    bench_json_num(out, name, s.min);
    snprintf(name, sizeof(name), "%s_max", key);
    bench_json_num(out, name, s.max);
}

void bench_json_end(bench_out_t *out, int reps, int ok)
{
    bench_json_num(out, "reps", reps);
    bench_json_str(out, "check", ok ? "OK" : "FAILED");
    out->json_bad |= json_array_append_new(out->json_rows, out->row) != 0;
    out->row = NULL;
}

void bench_plot_data(bench_out_t *out, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vfprintf(out->plot, fmt, ap);
    va_end(ap);
    fputc('\n', out->plot);
}

void bench_plot_script(bench_out_t *out, const char *script)
{
    free(out->script);
    out->script = strdup(script);
}

/* The document, indented, reals with the 6 significant digits the table
 * shows; the rows and setup stay owned by out. */
static int write_json(bench_out_t *out, int ok)
{
    json_t *doc;
    FILE *f;
    int rc;

    if (out->json_bad) {
        printf("# json: a member is not UTF-8\n");
        return -1;
    }
    doc = json_pack("{s:s, s:s, s:b, s:O, s:O}", "bench", out->o->sub, "version", kvx_version(),
                    "ok", ok, "setup", out->setup, "rows", out->json_rows);
    if (doc == NULL) {
        return -1;
    }
    if ((f = fopen(out->o->json, "w")) == NULL) {
        perror(out->o->json);
        json_decref(doc);
        return -1;
    }
    rc = json_dumpf(doc, f, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
    rc |= fputc('\n', f) == EOF;
    rc |= fclose(f) != 0;
    json_decref(doc);
    return rc == 0 ? 0 : -1;
}

static void write_plot(bench_out_t *out)
{
    char *script = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&script, &len);

    if (f == NULL) {
        printf("# plot: %s NOT written (out of memory)\n", out->o->plot);
        return;
    }
    fprintf(f, "set title 'kvx-bench %s v%s'\nset grid\nset key left top\n%s", out->o->sub,
            kvx_version(), out->script ? out->script : "");
    fclose(f);
    printf("# plot: %s %s\n", out->o->plot,
           gnuplot_png(out->o->plot, 960, 600, script, out->plot_buf, out->plot_len));
    free(script);
}

int bench_out_close(bench_out_t *out)
{
    int ok = out->bad_rows == 0 && out->rows > 0;

    fflush(out->plot);
    printf("#\n# correctness: %d of %d rows OK\n", out->rows - out->bad_rows, out->rows);
    if (out->o->json != NULL) {
        printf("# json: %s %s\n", out->o->json,
               write_json(out, ok) == 0 ? "written" : "NOT written");
    }
    if (out->o->plot != NULL) {
        write_plot(out);
    }
    printf("# %s\n", ok ? "OK" : "FAILED");
    fflush(stdout);
    json_decref(out->row);
    json_decref(out->json_rows);
    json_decref(out->setup);
    fclose(out->plot);
    free(out->plot_buf);
    free(out->script);
    free(out);
    return ok ? 0 : 1;
}
