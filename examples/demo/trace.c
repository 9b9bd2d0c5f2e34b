/*
 * trace.c - reading a request trace (trace.h) at rank 0 and handing its
 * rows to every rank.
 *
 * JSON lines are parsed with jansson, which tells integers from reals (a
 * token count of 1.5 or 1e30 is an error, not a rounding) and says where a
 * line stops being JSON. Every error names the file and line; the first
 * one ends the reading.
 */
#include "demo.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The largest prompt or output a row may claim. */
#define TRACE_MAX_TOKENS (1u << 30)

typedef struct reader {
    const char *path;
    FILE *f;
    char *line;
    size_t line_cap;
    size_t lineno;
    char err[512];
    demo_trace_t *t;
    size_t alloc, limit;
    int col[3];       /* CSV: the columns of TIMESTAMP, ContextTokens, GeneratedTokens */
    double first_abs; /* the first row's time, ms on the trace's own clock */
} reader_t;

static int fail(reader_t *r, const char *fmt, ...)
{
    size_t off = (size_t)snprintf(r->err, sizeof(r->err), "%s:%zu: ", r->path, r->lineno);
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(r->err + off, sizeof(r->err) - off, fmt, ap);
    va_end(ap);
    return -1;
}

/* The next line without its end (\n, \r\n); 0 at the end of the file. */
static int next_line(reader_t *r)
{
    ssize_t len = getline(&r->line, &r->line_cap, r->f);

    if (len < 0) {
        return 0;
    }
    r->lineno++;
    while (len > 0 && (r->line[len - 1] == '\n' || r->line[len - 1] == '\r')) {
        r->line[--len] = '\0';
    }
    return 1;
}

static int blank(const char *s)
{
    return s[strspn(s, " \t")] == '\0';
}

/* A row, checked against the one before: times never go back. */
static int add_row(reader_t *r, double abs_ms, uint32_t input, uint32_t output)
{
    demo_trace_t *t = r->t;

    if (t->n == 0) {
        r->first_abs = abs_ms;
    } else if (abs_ms - r->first_abs < t->rows[t->n - 1].t_ms) {
        return fail(r,
                    "timestamp goes back by %.3f ms from the previous row: a trace must be "
                    "sorted by arrival",
                    t->rows[t->n - 1].t_ms - (abs_ms - r->first_abs));
    }
    if (t->n == r->alloc) {
        size_t cap = r->alloc ? 2 * r->alloc : 1024;
        demo_trace_row_t *more = realloc(t->rows, cap * sizeof(*more));

        if (more == NULL) {
            return fail(r, "out of memory");
        }
        t->rows = more;
        r->alloc = cap;
    }
    t->rows[t->n++] = (demo_trace_row_t){ abs_ms - r->first_abs, input, output };
    return 0;
}

/* ---- JSON lines ------------------------------------------------------------------- */

static int json_tokens(reader_t *r, json_t *row, const char *key, uint32_t min, uint32_t *out)
{
    json_t *v = json_object_get(row, key);
    json_int_t n;

    if (v == NULL) {
        return fail(r, "no \"%s\" (JSON lines need timestamp, input_length, output_length)", key);
    }
    if (!json_is_integer(v)) {
        return fail(r, "\"%s\" is not a whole number of tokens", key);
    }
    n = json_integer_value(v);
    if (n < 0) {
        return fail(r, "\"%s\" is negative (%lld)", key, (long long)n);
    }
    if (n < (json_int_t)min || n > (json_int_t)TRACE_MAX_TOKENS) {
        return fail(r, "\"%s\" is %lld, not in [%u, %u]", key, (long long)n, min, TRACE_MAX_TOKENS);
    }
    *out = (uint32_t)n;
    return 0;
}

static int json_row(reader_t *r)
{
    json_error_t e;
    json_t *row = json_loads(r->line, JSON_REJECT_DUPLICATES, &e), *ts;
    uint32_t input = 0, output = 0;
    double ms;
    int rc = -1;

    if (row == NULL) {
        return fail(r, "not JSON: %s (column %d)", e.text, e.column);
    }
    ts = json_object_get(row, "timestamp");
    if (!json_is_object(row)) {
        fail(r, "not a JSON object");
    } else if (ts == NULL) {
        fail(r, "no \"timestamp\" (JSON lines need timestamp, input_length, output_length)");
    } else if (!json_is_number(ts) || !isfinite(ms = json_number_value(ts))) {
        fail(r, "\"timestamp\" is not a number of milliseconds");
    } else if (ms < 0) {
        fail(r, "\"timestamp\" is negative (%g)", ms);
    } else if (json_tokens(r, row, "input_length", 1, &input) == 0 &&
               json_tokens(r, row, "output_length", 0, &output) == 0) {
        rc = add_row(r, ms, input, output);
    }
    json_decref(row);
    return rc;
}

/* ---- CSV ---------------------------------------------------------------------------- */

static const char *const csv_names[3] = { "TIMESTAMP", "ContextTokens", "GeneratedTokens" };

/* Splits line at the commas in place: at most max fields. */
static int csv_fields(char *line, char **f, int max)
{
    int n = 0;

    for (char *p = line; n < max; p++) {
        f[n++] = p;
        if ((p = strchr(p, ',')) == NULL) {
            break;
        }
        *p = '\0';
    }
    return n;
}

static char *trim(char *s)
{
    char *end;

    s += strspn(s, " \t\"");
    end = s + strlen(s);
    while (end > s && strchr(" \t\"", end[-1]) != NULL) {
        *--end = '\0';
    }
    return s;
}

/* Is line the header? Then the columns are where it names them. */
static int csv_header(reader_t *r, char *line)
{
    char *f[64];
    int n = csv_fields(line, f, 64);

    for (int k = 0; k < 3; k++) {
        r->col[k] = -1;
        for (int i = 0; i < n; i++) {
            if (strcmp(trim(f[i]), csv_names[k]) == 0) {
                r->col[k] = i;
            }
        }
        if (r->col[k] < 0) {
            return 0;
        }
    }
    return 1;
}

/* "2023-11-16 18:17:03.9799600" (or with a T): ms since 1970 (UTC). */
static int csv_time(const char *s, double *ms)
{
    struct tm tm;
    int y, mo, d, h, mi, sec, len = 0;
    double frac = 0, unit = 0.1;

    if (sscanf(s, "%4d-%2d-%2d%*1[ T]%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &len) != 6 ||
        len == 0 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) {
        return -1;
    }
    s += len;
    if (*s == '.') {
        for (s++; *s >= '0' && *s <= '9'; s++, unit /= 10) {
            frac += (*s - '0') * unit;
        }
    }
    if (*s != '\0' && strcmp(s, "Z") != 0) {
        return -1;
    }
    memset(&tm, 0, sizeof(tm));
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    *ms = ((double)timegm(&tm) + frac) * 1e3;
    return 0;
}

static int csv_tokens(reader_t *r, const char *s, int k, uint32_t min, uint32_t *out)
{
    char *end;
    long long v;

    if (*s == '-') {
        return fail(r, "%s is negative (%s)", csv_names[k], s);
    }
    v = strtoll(s, &end, 10);
    if (*s == '\0' || *end != '\0') {
        return fail(r, "%s is not a whole number of tokens: '%s'", csv_names[k], s);
    }
    if (v < (long long)min || v > (long long)TRACE_MAX_TOKENS) {
        return fail(r, "%s is %lld, not in [%u, %u]", csv_names[k], v, min, TRACE_MAX_TOKENS);
    }
    *out = (uint32_t)v;
    return 0;
}

static int csv_row(reader_t *r)
{
    char *f[64];
    int n = csv_fields(r->line, f, 64), need = 0;
    uint32_t input, output;
    double ms;

    for (int k = 0; k < 3; k++) {
        need = r->col[k] >= need ? r->col[k] + 1 : need;
    }
    if (n < need) {
        return fail(r, "%d fields, the header has at least %d", n, need);
    }
    if (csv_time(trim(f[r->col[0]]), &ms) != 0) {
        return fail(r, "TIMESTAMP is not a time like 2023-11-16 18:17:03.9799600: '%s'",
                    f[r->col[0]]);
    }
    if (csv_tokens(r, trim(f[r->col[1]]), 1, 1, &input) != 0 ||
        csv_tokens(r, trim(f[r->col[2]]), 2, 0, &output) != 0) {
        return -1;
    }
    return add_row(r, ms, input, output);
}

/* ---- the file --------------------------------------------------------------------- */

static int read_rows(reader_t *r)
{
    char *first;

    do {
        if (!next_line(r)) {
            if (r->lineno == 0) {
                r->lineno = 1;
                return fail(r, "no requests: the file is empty");
            }
            return fail(r, "no requests: nothing but blank lines");
        }
    } while (blank(r->line));
    first = r->line + (strncmp(r->line, "\xef\xbb\xbf", 3) == 0 ? 3 : 0);
    first += strspn(first, " \t");
    if (*first == '{') {
        r->t->format = DEMO_TRACE_JSONL;
        if (json_row(r) != 0) {
            return -1;
        }
    } else if (csv_header(r, first)) {
        r->t->format = DEMO_TRACE_CSV;
    } else {
        return fail(r, "not a trace: neither a JSON object (JSON lines with timestamp, "
                       "input_length, output_length) nor the CSV header "
                       "TIMESTAMP,ContextTokens,GeneratedTokens");
    }
    while (r->t->n < r->limit && next_line(r)) {
        if (blank(r->line)) {
            continue;
        }
        if ((r->t->format == DEMO_TRACE_JSONL ? json_row(r) : csv_row(r)) != 0) {
            return -1;
        }
    }
    if (ferror(r->f)) {
        return fail(r, "cannot read on");
    }
    if (r->t->n == 0) {
        r->lineno++;
        return fail(r, "no requests after the header");
    }
    return 0;
}

int demo_trace_read(const char *path, size_t limit, demo_trace_t *t, char *err, size_t len)
{
    reader_t r;
    int rc;

    memset(&r, 0, sizeof(r));
    r.path = path;
    r.t = t;
    r.limit = limit;
    if ((r.f = fopen(path, "r")) == NULL) {
        snprintf(err, len, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    rc = read_rows(&r);
    if (rc != 0) {
        snprintf(err, len, "%s", r.err);
    }
    free(r.line);
    fclose(r.f);
    return rc;
}

/* ---- every rank ----------------------------------------------------------------- */

/* The cap: --trace-cap, or what --pool-pages holds when that is less. */
static void apply_cap(demo_opts_t *o, demo_trace_t *t)
{
    uint32_t lo = UINT32_MAX, hi = 0;

    t->cap = o->trace_cap;
    if (o->pool_pages != 0 && o->pool_pages * o->kv.page_size < t->cap) {
        t->cap = (uint32_t)(o->pool_pages * o->kv.page_size);
    }
    for (size_t i = 0; i < t->n; i++) {
        uint32_t k = demo_trace_tokens(t, i);

        t->capped += t->rows[i].input > t->cap;
        t->tokens += t->rows[i].input;
        t->kept += k;
        lo = k < lo ? k : lo;
        hi = k > hi ? k : hi;
    }
    o->requests = (unsigned)t->n;
    o->min_tokens = lo;
    o->max_tokens = hi;
}

int demo_trace_load(demo_opts_t *o, int rank)
{
    demo_trace_t *t = calloc(1, sizeof(*t));
    struct {
        uint64_t n;
        int32_t format, ok;
        char err[512];
    } head;

    memset(&head, 0, sizeof(head));
    if (rank == 0) {
        head.ok = t != NULL &&
                  demo_trace_read(o->trace, o->trace_limit, t, head.err, sizeof(head.err)) == 0;
        head.n = t != NULL ? t->n : 0;
        head.format = t != NULL ? (int32_t)t->format : 0;
    }
    MPI_Bcast(&head, sizeof(head), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (!head.ok) {
        if (rank == 0) {
            fprintf(stderr, "kvx-demo: %s\n", head.err[0] ? head.err : "out of memory");
        }
        demo_trace_free(t);
        return 2;
    }
    if (rank != 0) {
        t->n = head.n;
        t->format = (demo_trace_format_t)head.format;
        if ((t->rows = calloc(t->n, sizeof(*t->rows))) == NULL) {
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    MPI_Bcast(t->rows, (int)(t->n * sizeof(*t->rows)), MPI_BYTE, 0, MPI_COMM_WORLD);
    apply_cap(o, t);
    o->replay = t;
    o->time_limit += demo_trace_arrival(o, t->n - 1); /* counted from the last arrival */
    return 0;
}

void demo_trace_free(demo_trace_t *t)
{
    if (t != NULL) {
        free(t->rows);
        free(t);
    }
}

uint32_t demo_trace_tokens(const demo_trace_t *t, size_t i)
{
    return t->rows[i].input < t->cap ? t->rows[i].input : t->cap;
}

double demo_trace_arrival(const demo_opts_t *o, size_t i)
{
    return o->replay->rows[i].t_ms / 1e3 / o->trace_speed;
}

void demo_trace_header(const demo_opts_t *o)
{
    static const char *const formats[] = { "JSON lines", "CSV" };
    const demo_trace_t *t = o->replay;

    printf("# trace %s (%s): %zu requests over %.1f s, replayed at %gx (%.1f s); prompts of "
           "%u-%u tokens, %zu capped to %u\n",
           o->trace, formats[t->format], t->n, t->rows[t->n - 1].t_ms / 1e3, o->trace_speed,
           demo_trace_arrival(o, t->n - 1), o->min_tokens, o->max_tokens, t->capped, t->cap);
    printf("# %u rooms in flight per instance\n", o->concurrency);
}
