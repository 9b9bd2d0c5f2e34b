/*
 * report.c - what rank 0 prints and writes, in the manner of the OSU
 * micro-benchmarks and nccl-tests: a first line naming the benchmark, a
 * '#' block describing the setup, fixed-width columns with units, a
 * correctness column, a footer that says OK or FAILED; the same rows as
 * JSON (--json) and drawn by gnuplot (--plot).
 */
#include "bench.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct bench_out {
    const bench_opts_t *o;
    int rows, bad_rows;
    FILE *json;     /* the rows, as JSON objects */
    char *json_buf; /* behind json */
    size_t json_len;
    int json_members; /* members of the row being written */
    FILE *setup;      /* the setup lines, as a JSON array's strings */
    char *setup_buf;
    size_t setup_len;
    FILE *plot;
    char *plot_buf;
    size_t plot_len;
    char *script;
};

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s != '\0'; s++) {
        if (*s == '"' || *s == '\\') {
            fprintf(f, "\\%c", *s);
        } else if ((unsigned char)*s < 0x20) {
            fprintf(f, "\\u%04x", (unsigned char)*s);
        } else {
            fputc(*s, f);
        }
    }
    fputc('"', f);
}

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
    out->json = open_memstream(&out->json_buf, &out->json_len);
    out->setup = open_memstream(&out->setup_buf, &out->setup_len);
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
    fprintf(out->setup, "%s", ftell(out->setup) > 0 ? ",\n    " : "");
    json_string(out->setup, line);
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
    fprintf(out->json, "%s{", ftell(out->json) > 0 ? ",\n    " : "");
    out->json_members = 0;
}

void bench_json_num(bench_out_t *out, const char *key, double v)
{
    fprintf(out->json, "%s\"%s\": ", out->json_members++ ? ", " : "", key);
    if (v == (double)(long long)v && v < 1e15 && v > -1e15) {
        fprintf(out->json, "%lld", (long long)v);
    } else {
        fprintf(out->json, "%.6g", v);
    }
}

void bench_json_str(bench_out_t *out, const char *key, const char *v)
{
    fprintf(out->json, "%s\"%s\": ", out->json_members++ ? ", " : "", key);
    json_string(out->json, v);
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
    fprintf(out->json, "}");
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

static int write_json(bench_out_t *out, int ok)
{
    FILE *f = fopen(out->o->json, "w");

    if (f == NULL) {
        perror(out->o->json);
        return -1;
    }
    fprintf(f, "{\"bench\": \"%s\", \"version\": \"%s\", \"ok\": %s,\n  \"setup\": [%s],\n",
            out->o->sub, kvx_version(), ok ? "true" : "false", out->setup_buf);
    fprintf(f, "  \"rows\": [%s]}\n", out->json_buf);
    return fclose(f) == 0 ? 0 : -1;
}

/* The script with DATA and OUT replaced by the data file and the image. */
static void write_script(FILE *f, const char *sub, const char *script, const char *data,
                         const char *png)
{
    fprintf(f, "set terminal pngcairo size 960,600 noenhanced\nset output '%s'\n", png);
    fprintf(f, "set title 'kvx-bench %s v%s'\nset grid\nset key left top\n", sub, kvx_version());
    for (const char *p = script; *p != '\0';) {
        if (!strncmp(p, "DATA", 4)) {
            fprintf(f, "'%s'", data);
            p += 4;
        } else {
            fputc(*p++, f);
        }
    }
    fputc('\n', f);
}

static int have_gnuplot(void)
{
    return system("command -v gnuplot >/dev/null 2>&1") == 0;
}

static void write_plot(bench_out_t *out)
{
    char data[] = "/tmp/kvx-bench-data.XXXXXX", gp[] = "/tmp/kvx-bench-plot.XXXXXX";
    char cmd[4200];
    int dfd, gfd;
    FILE *f;

    if (!have_gnuplot()) {
        printf("# plot: gnuplot is not installed (Debian: apt-get install gnuplot-nox); %s not "
               "written\n",
               out->o->plot);
        return;
    }
    dfd = mkstemp(data);
    gfd = mkstemp(gp);
    if (dfd < 0 || gfd < 0) {
        printf("# plot: cannot create temporary files\n");
        return;
    }
    if ((f = fdopen(dfd, "w")) != NULL) {
        fwrite(out->plot_buf, 1, out->plot_len, f);
        fclose(f);
    }
    if ((f = fdopen(gfd, "w")) != NULL) {
        write_script(f, out->o->sub, out->script ? out->script : "", data, out->o->plot);
        fclose(f);
    }
    snprintf(cmd, sizeof(cmd), "gnuplot '%s'", gp);
    printf("# plot: %s %s\n", out->o->plot,
           system(cmd) == 0 ? "written" : "NOT written (gnuplot failed)");
    unlink(data);
    unlink(gp);
}

int bench_out_close(bench_out_t *out)
{
    int ok = out->bad_rows == 0 && out->rows > 0;

    fflush(out->json);
    fflush(out->setup);
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
    fclose(out->json);
    fclose(out->setup);
    fclose(out->plot);
    free(out->json_buf);
    free(out->setup_buf);
    free(out->plot_buf);
    free(out->script);
    free(out);
    return ok ? 0 : 1;
}
