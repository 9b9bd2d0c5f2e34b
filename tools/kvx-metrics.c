/*
 * kvx-metrics - the job-wide view of kvx's per-rank metrics files
 * (KVX_METRICS_FILE): reads them and writes one Prometheus text with each
 * instance's and each role's totals, and the ranks whose file went stale.
 *
 *   kvx-metrics [-o FILE] [--stale N] [--now T] FILE|DIR...
 *
 * Counters and histograms (bucket by bucket) are summed; gauges are summed
 * too, except kvx_health, kvx_progress_age_seconds and
 * kvx_metrics_interval_seconds (the worst rank's) and
 * kvx_metrics_timestamp_seconds (the oldest). A rank whose file was written
 * more than N intervals ago (its kvx_metrics_timestamp_seconds) is stale:
 * dead, hung, or cut off. Its last counters still count (counters never go
 * back), it is listed in kvx_metrics_stale, and its instance's kvx_health
 * is UNHEALTHY (2). Series carry scope="instance" (role, instance) or
 * scope="job" (role).
 *
 * It reads files only: no MPI, so it cannot block a scheduler or wait on a
 * lost rank. Run it from cron or a node_exporter textfile-collector hook,
 * writing into the collector's directory with -o (atomic: temp + rename).
 * Uses no kvx library at all: it only reads text.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

typedef enum { KM_SUM = 0, KM_MAX, KM_MIN } km_op_t;

typedef struct km_family {
    char name[128], type[16];
    char *help;
} km_family_t;

typedef struct km_series {
    int family;
    int job;       /* scope: 0 instance, 1 job */
    char key[640]; /* name{labels} as written */
    double value;
    unsigned hash;
    int next; /* hash chain */
} km_series_t;

typedef struct km_rank {
    char role[16], instance[16], tp[16], rank[16], host[128], file[4096];
    double written, interval;
    int stale;
} km_rank_t;

#define KM_BUCKETS 4096

static km_family_t *fams;
static size_t nfams;
static km_series_t *series;
static size_t nseries, cap_series;
static int heads[KM_BUCKETS];
static km_rank_t *ranks;
static size_t nranks;
static int bad_input;

static void usage(FILE *out)
{
    fprintf(out, "usage: kvx-metrics [-o FILE] [--stale N] [--now T] FILE|DIR...\n"
                 "  Combines kvx metrics files (KVX_METRICS_FILE, one per rank; a DIR means\n"
                 "  its *.prom files) into per-instance and per-role totals, Prometheus text.\n"
                 "  -o, --output FILE  write there atomically (temp file + rename) instead of\n"
                 "                     stdout\n"
                 "  --stale N          a rank whose file is older than N of its intervals is\n"
                 "                     stale (default 3)\n"
                 "  --now T            judge staleness at T (seconds since the epoch) instead\n"
                 "                     of now: for replays and tests\n"
                 "  -h, --help         this help\n");
}

static unsigned km_hash(const char *s, int job)
{
    unsigned h = 2166136261u ^ (unsigned)job;

    while (*s != '\0') {
        h = (h ^ (unsigned char)*s++) * 16777619u;
    }
    return h;
}

static int km_family(const char *name)
{
    for (size_t i = 0; i < nfams; i++) {
        if (strcmp(fams[i].name, name) == 0) {
            return (int)i;
        }
    }
    fams = realloc(fams, (nfams + 1) * sizeof(*fams));
    if (fams == NULL) {
        perror("kvx-metrics");
        exit(1);
    }
    memset(&fams[nfams], 0, sizeof(fams[nfams]));
    snprintf(fams[nfams].name, sizeof(fams[nfams].name), "%s", name);
    return (int)nfams++;
}

/* The family a sample name belongs to: histograms own _bucket/_sum/_count. */
static int km_family_of(const char *name)
{
    static const char *const sfx[] = { "_bucket", "_sum", "_count" };
    char base[128];

    for (int i = 0; i < 3; i++) {
        size_t n = strlen(name), k = strlen(sfx[i]);

        if (n > k && n - k < sizeof(base) && strcmp(name + n - k, sfx[i]) == 0) {
            memcpy(base, name, n - k);
            base[n - k] = '\0';
            for (size_t f = 0; f < nfams; f++) {
                if (strcmp(fams[f].name, base) == 0 && strcmp(fams[f].type, "histogram") == 0) {
                    return (int)f;
                }
            }
        }
    }
    return km_family(name);
}

static km_op_t km_op(const char *fam)
{
    if (strcmp(fam, "kvx_health") == 0 || strcmp(fam, "kvx_progress_age_seconds") == 0 ||
        strcmp(fam, "kvx_metrics_interval_seconds") == 0) {
        return KM_MAX;
    }
    return strcmp(fam, "kvx_metrics_timestamp_seconds") == 0 ? KM_MIN : KM_SUM;
}

static void km_add(int family, int job, const char *key, double v)
{
    unsigned h = km_hash(key, job);
    km_op_t op = km_op(fams[family].name);

    for (int i = heads[h % KM_BUCKETS]; i >= 0; i = series[i].next) {
        km_series_t *s = &series[i];

        if (s->hash == h && s->job == job && strcmp(s->key, key) == 0) {
            s->value = op == KM_SUM   ? s->value + v
                       : op == KM_MAX ? fmax(s->value, v)
                                      : fmin(s->value, v);
            return;
        }
    }
    if (nseries == cap_series) {
        cap_series = cap_series ? 2 * cap_series : 1024;
        series = realloc(series, cap_series * sizeof(*series));
        if (series == NULL) {
            perror("kvx-metrics");
            exit(1);
        }
    }
    series[nseries].family = family;
    series[nseries].job = job;
    series[nseries].value = v;
    series[nseries].hash = h;
    snprintf(series[nseries].key, sizeof(series[nseries].key), "%s", key);
    series[nseries].next = heads[h % KM_BUCKETS];
    heads[h % KM_BUCKETS] = (int)nseries++;
}

/* Splits name{labels} value: labels copied raw; returns 0 on a bad line. */
static int km_split(char *line, char **name, char **labels, double *v)
{
    char *brace = strchr(line, '{'), *space = strchr(line, ' '), *sp, *end;

    *name = line;
    *labels = NULL;
    if (brace != NULL && (space == NULL || brace < space)) {
        char *close = strrchr(brace, '}');

        if (close == NULL) {
            return 0;
        }
        *brace = '\0';
        *close = '\0';
        *labels = brace + 1;
        sp = close + 1;
    } else {
        sp = strchr(line, ' ');
        if (sp == NULL) {
            return 0;
        }
        *sp = '\0';
        sp++;
    }
    *v = strtod(sp, &end);
    return end != sp;
}

/* The next label of a raw label list: k="v" (value unescaped in place is not
 * needed: kvx's values are re-emitted verbatim). Returns the rest, or NULL. */
static char *km_label(char *p, char **k, char **v)
{
    char *eq = strchr(p, '='), *q;

    if (eq == NULL || eq[1] != '"') {
        return NULL;
    }
    *eq = '\0';
    *k = p;
    *v = q = eq + 2;
    while (*q != '\0' && *q != '"') {
        q += *q == '\\' && q[1] != '\0' ? 2 : 1;
    }
    if (*q != '"') {
        return NULL;
    }
    *q++ = '\0';
    return *q == ',' ? q + 1 : q;
}

/* One sample of rank r: adds it to its instance's and its role's series. */
static void km_sample(km_rank_t *r, int family, const char *name, char *labels, double v)
{
    char inst[640], job[640], extra[512] = "", *k, *val, *p = labels;
    size_t o = 0;

    while (p != NULL && *p != '\0' && (p = km_label(p, &k, &val)) != NULL) {
        if (strcmp(k, "role") == 0 || strcmp(k, "instance") == 0 || strcmp(k, "tp") == 0 ||
            strcmp(k, "rank") == 0 || strcmp(k, "host") == 0) {
            continue;
        }
        o += (size_t)snprintf(extra + o, o < sizeof(extra) ? sizeof(extra) - o : 0, ",%s=\"%s\"", k,
                              val);
    }
    if (strcmp(fams[family].name, "kvx_health") == 0 && r->stale) {
        v = 2; /* a stale rank's last verdict is not news: its silence is */
    }
    snprintf(inst, sizeof(inst), "%s{scope=\"instance\",role=\"%s\",instance=\"%s\"%s}", name,
             r->role, r->instance, extra);
    snprintf(job, sizeof(job), "%s{scope=\"job\",role=\"%s\"%s}", name, r->role, extra);
    km_add(family, 0, inst, v);
    km_add(family, 1, job, v);
}

/* The identity labels of a sample line (every kvx sample carries them). */
static void km_identity(km_rank_t *r, const char *labels)
{
    char buf[1024], *k, *v, *p = buf;

    snprintf(buf, sizeof(buf), "%s", labels != NULL ? labels : "");
    while (*p != '\0' && (p = km_label(p, &k, &v)) != NULL) {
        char *dst = strcmp(k, "role") == 0       ? r->role
                    : strcmp(k, "instance") == 0 ? r->instance
                    : strcmp(k, "tp") == 0       ? r->tp
                    : strcmp(k, "rank") == 0     ? r->rank
                    : strcmp(k, "host") == 0     ? r->host
                                                 : NULL;

        if (dst != NULL) {
            snprintf(dst, strcmp(k, "host") == 0 ? sizeof(r->host) : sizeof(r->role), "%s", v);
        }
    }
}

/* Reads one file's lines; families get their TYPE and HELP from it. */
static char **km_read(const char *path, size_t *n_p)
{
    FILE *f = fopen(path, "r");
    char *line = NULL, **lines = NULL;
    size_t cap = 0, n = 0;
    ssize_t len;

    if (f == NULL) {
        fprintf(stderr, "kvx-metrics: %s: %s\n", path, strerror(errno));
        bad_input = 1;
        return NULL;
    }
    while ((len = getline(&line, &cap, f)) >= 0) {
        if (len > 0 && line[len - 1] == '\n') {
            line[len - 1] = '\0';
        }
        lines = realloc(lines, (n + 1) * sizeof(*lines));
        lines[n++] = strdup(line);
    }
    free(line);
    fclose(f);
    *n_p = n;
    return lines;
}

static void km_meta(char *line)
{
    char kind[8], name[128];
    int off = 0, f;

    if (sscanf(line, "# %7s %127s %n", kind, name, &off) < 2 ||
        (strcmp(kind, "TYPE") != 0 && strcmp(kind, "HELP") != 0)) {
        return;
    }
    f = km_family(name); /* may move fams */
    if (strcmp(kind, "TYPE") == 0) {
        snprintf(fams[f].type, sizeof(fams[f].type), "%s", line + off);
    } else if (fams[f].help == NULL) {
        fams[f].help = strdup(line + off);
    }
}

static void km_file(const char *path, double now, double stale_n)
{
    size_t n = 0;
    char **lines = km_read(path, &n);
    km_rank_t *r;
    struct stat st;

    if (lines == NULL) {
        return;
    }
    ranks = realloc(ranks, (nranks + 1) * sizeof(*ranks));
    r = &ranks[nranks++];
    memset(r, 0, sizeof(*r));
    snprintf(r->file, sizeof(r->file), "%s", path);
    r->interval = 5;
    r->written = stat(path, &st) == 0 ? (double)st.st_mtime : 0;
    /* first pass: TYPE/HELP, identity, when it was written */
    for (size_t i = 0; i < n; i++) {
        char copy[4096], *name, *labels;
        double v;

        if (lines[i][0] == '#') {
            km_meta(lines[i]);
            continue;
        }
        snprintf(copy, sizeof(copy), "%s", lines[i]);
        if (lines[i][0] == '\0' || !km_split(copy, &name, &labels, &v)) {
            continue;
        }
        if (r->rank[0] == '\0') {
            km_identity(r, labels);
        }
        r->written = strcmp(name, "kvx_metrics_timestamp_seconds") == 0 ? v : r->written;
        r->interval = strcmp(name, "kvx_metrics_interval_seconds") == 0 ? v : r->interval;
    }
    if (r->rank[0] == '\0') {
        fprintf(stderr, "kvx-metrics: %s: no kvx sample (not a KVX_METRICS_FILE?)\n", path);
        bad_input = 1;
        nranks--;
    } else {
        r->stale = now - r->written > stale_n * r->interval;
        for (size_t i = 0; i < n; i++) {
            char *name, *labels;
            double v;

            if (lines[i][0] != '#' && lines[i][0] != '\0' &&
                km_split(lines[i], &name, &labels, &v)) {
                km_sample(r, km_family_of(name), name, labels, v);
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        free(lines[i]);
    }
    free(lines);
}

static void km_path(const char *path, double now, double stale_n)
{
    struct stat st;
    DIR *d;
    struct dirent *e;

    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        km_file(path, now, stale_n);
        return;
    }
    d = opendir(path);
    while (d != NULL && (e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        char full[8192];

        if (len > 5 && strcmp(e->d_name + len - 5, ".prom") == 0) {
            snprintf(full, sizeof(full), "%s/%s", path, e->d_name);
            km_file(full, now, stale_n);
        }
    }
    if (d != NULL) {
        closedir(d);
    }
}

static void km_write_ranks(FILE *out, double now)
{
    fprintf(out, "# HELP kvx_metrics_ranks Ranks whose metrics file was read, by state.\n"
                 "# TYPE kvx_metrics_ranks gauge\n");
    for (size_t i = 0; i < nranks; i++) {
        int seen = 0;

        for (size_t j = 0; j < i && !seen; j++) {
            seen = strcmp(ranks[j].role, ranks[i].role) == 0 &&
                   strcmp(ranks[j].instance, ranks[i].instance) == 0;
        }
        for (int stale = 0; stale < 2 && !seen; stale++) {
            unsigned n = 0;

            for (size_t j = 0; j < nranks; j++) {
                n += strcmp(ranks[j].role, ranks[i].role) == 0 &&
                     strcmp(ranks[j].instance, ranks[i].instance) == 0 && ranks[j].stale == stale;
            }
            fprintf(out,
                    "kvx_metrics_ranks{scope=\"instance\",role=\"%s\",instance=\"%s\","
                    "state=\"%s\"} %u\n",
                    ranks[i].role, ranks[i].instance, stale ? "stale" : "fresh", n);
        }
    }
    fprintf(out, "# HELP kvx_metrics_stale Ranks whose file is older than --stale intervals: "
                 "seconds since it was written.\n# TYPE kvx_metrics_stale gauge\n");
    for (size_t i = 0; i < nranks; i++) {
        if (ranks[i].stale) {
            fprintf(out,
                    "kvx_metrics_stale{role=\"%s\",instance=\"%s\",tp=\"%s\",rank=\"%s\","
                    "host=\"%s\"} %.3f\n",
                    ranks[i].role, ranks[i].instance, ranks[i].tp, ranks[i].rank, ranks[i].host,
                    now - ranks[i].written);
            fprintf(stderr,
                    "kvx-metrics: stale: rank %s (%s[%s].tp%s on %s), %s written %.1f s ago\n",
                    ranks[i].rank, ranks[i].role, ranks[i].instance, ranks[i].tp, ranks[i].host,
                    ranks[i].file, now - ranks[i].written);
        }
    }
}

static void km_write(FILE *out, double now)
{
    fprintf(out, "# kvx-metrics %s: %zu ranks combined\n", PACKAGE_VERSION, nranks);
    for (size_t f = 0; f < nfams; f++) {
        int any = 0;

        for (size_t i = 0; i < nseries && !any; i++) {
            any = series[i].family == (int)f;
        }
        if (!any) {
            continue;
        }
        fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", fams[f].name,
                fams[f].help != NULL ? fams[f].help : "", fams[f].name,
                fams[f].type[0] ? fams[f].type : "untyped");
        for (int job = 0; job < 2; job++) {
            for (size_t i = 0; i < nseries; i++) {
                if (series[i].family == (int)f && series[i].job == job) {
                    fprintf(out, "%s %.15g\n", series[i].key, series[i].value);
                }
            }
        }
    }
    km_write_ranks(out, now);
}

/* Writes to path through a temporary file in its directory. */
static int km_output(const char *path, double now)
{
    char tmp[4200];
    int fd;
    FILE *f;

    snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
    fd = mkstemp(tmp);
    if (fd < 0 || fchmod(fd, 0644) != 0 || (f = fdopen(fd, "w")) == NULL) {
        fprintf(stderr, "kvx-metrics: %s: %s\n", tmp, strerror(errno));
        return 1;
    }
    km_write(f, now);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "kvx-metrics: %s: %s\n", path, strerror(errno));
        unlink(tmp);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = { { "output", required_argument, NULL, 'o' },
                                          { "stale", required_argument, NULL, 's' },
                                          { "now", required_argument, NULL, 'n' },
                                          { "help", no_argument, NULL, 'h' },
                                          { NULL, 0, NULL, 0 } };
    const char *output = NULL;
    double stale_n = 3, now = 0;
    struct timeval tv;
    int c, rc;

    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'o':
            output = optarg;
            break;
        case 's':
            stale_n = atof(optarg);
            break;
        case 'n':
            now = atof(optarg);
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind >= argc || !(stale_n > 0)) {
        usage(stderr);
        return 2;
    }
    for (int i = 0; i < KM_BUCKETS; i++) {
        heads[i] = -1;
    }
    gettimeofday(&tv, NULL);
    now = now > 0 ? now : (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
    for (int i = optind; i < argc; i++) {
        km_path(argv[i], now, stale_n);
    }
    if (nranks == 0) {
        fprintf(stderr, "kvx-metrics: no metrics file read\n");
        return 1;
    }
    rc = output != NULL ? km_output(output, now) : (km_write(stdout, now), 0);
    return rc != 0 ? rc : bad_input;
}
