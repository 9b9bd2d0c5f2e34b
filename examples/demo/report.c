/*
 * report.c - what every rank concluded, compared room by room at rank 0,
 * and the summary: rooms, bytes, GB/s, latency, failures by reason and
 * origin, agreement, mismatched bytes; the same as JSON with --json.
 *
 * A room is agreed by both instances when every TP rank of its prefill
 * instance and of its decode instance concluded it, with the same state
 * and, when FAILED, the same root cause (origin rank, stage, status, and
 * whether it was injected).
 */
#include "demo.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct group {
    int32_t status, stage, origin;
    uint32_t injected;
    size_t rooms;
    const char *example;
} group_t;

struct demo_report {
    const demo_opts_t *o;
    kvx_identity_t id;
    /* Rank 0 only. */
    demo_outcome_t *all;
    size_t nall;
    demo_text_t *texts;
    size_t ntexts;
    double elapsed;
    uint64_t decode_stats[4]; /* quarantined pages, pages granted, runs, drain waits */
    /* What rank 0 worked out. */
    size_t success, failed, disagreed, unconcluded, not_injected;
    uint64_t bytes, mismatches;
    double p50, p99;
    group_t *groups;
    size_t ngroups;
};

/* MPI_Gatherv of n items of size bytes from every rank to rank 0. */
static void *gather(const void *mine, size_t n, size_t size, size_t *total_p)
{
    int rank, world, count = (int)(n * size), *counts = NULL, *displs = NULL;
    char *all = NULL;
    size_t total = 0;

    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (rank == 0) {
        counts = calloc((size_t)world, sizeof(int));
        displs = calloc((size_t)world, sizeof(int));
    }
    MPI_Gather(&count, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 0; r < world; r++) {
            displs[r] = (int)total;
            total += (size_t)counts[r];
        }
        all = malloc(total > 0 ? total : 1);
    }
    MPI_Gatherv(mine, count, MPI_BYTE, all, counts, displs, MPI_BYTE, 0, MPI_COMM_WORLD);
    free(counts);
    free(displs);
    *total_p = total / size;
    return all;
}

demo_report_t *demo_report_gather(const demo_serve_t *s)
{
    demo_report_t *r = calloc(1, sizeof(*r));
    int reporter = s->id.role == KVX_ROLE_DECODE && s->id.tp_rank == 0;
    uint64_t stats[4] = { 0, 0, 0, 0 };

    r->o = s->o;
    r->id = s->id;
    r->all = gather(s->out, s->nmine, sizeof(demo_outcome_t), &r->nall);
    r->texts = gather(s->texts, s->ntexts, sizeof(demo_text_t), &r->ntexts);
    MPI_Reduce(&s->elapsed, &r->elapsed, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (reporter) {
        stats[0] = s->quarantined_pages;
        stats[1] = s->pages.taken;
        stats[2] = s->pages.runs;
        stats[3] = s->drain_waits;
    }
    MPI_Reduce(stats, r->decode_stats, 4, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    return r;
}

void demo_report_free(demo_report_t *r)
{
    if (r != NULL) {
        free(r->all);
        free(r->texts);
        free(r->groups);
        free(r);
    }
}

/* ---- the comparison ----------------------------------------------------------------- */

static int same_outcome(const demo_outcome_t *a, const demo_outcome_t *b)
{
    if (a->concluded != b->concluded || a->state != b->state) {
        return 0;
    }
    return a->state != KVX_ROOM_FAILED || (a->status == b->status && a->stage == b->stage &&
                                           a->origin == b->origin && a->injected == b->injected);
}

static void add_failure(demo_report_t *r, const demo_outcome_t *o, const char *text)
{
    size_t g;

    for (g = 0; g < r->ngroups; g++) {
        group_t *x = &r->groups[g];

        if (x->status == o->status && x->stage == o->stage && x->origin == o->origin &&
            x->injected == o->injected) {
            break;
        }
    }
    if (g == r->ngroups) {
        group_t *more = realloc(r->groups, (r->ngroups + 1) * sizeof(group_t));

        if (more == NULL) {
            return;
        }
        r->groups = more;
        r->groups[r->ngroups++] = (group_t){ o->status, o->stage, o->origin, o->injected, 0, NULL };
    }
    r->groups[g].rooms++;
    if (r->groups[g].example == NULL) {
        r->groups[g].example = text;
    }
}

/* Failures in the order rooms meet them: by stage, then origin rank. */
static int by_stage(const void *a, const void *b)
{
    const group_t *x = a, *y = b;

    if (x->stage != y->stage) {
        return x->stage < y->stage ? -1 : 1;
    }
    if (x->origin != y->origin) {
        return x->origin < y->origin ? -1 : 1;
    }
    return (x->status > y->status) - (x->status < y->status);
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* Nearest rank: the smallest value with at least p of them at or below. */
static double percentile(const double *v, size_t n, double p)
{
    size_t k = (size_t)(p * (double)n + 0.999999);

    return n == 0 ? 0 : v[(k > 0 ? k : 1) - 1];
}

typedef struct room_view {
    const demo_outcome_t *ref; /* the first record */
    unsigned records;
    int differ;
    double latency_ms; /* the slowest decode rank */
    uint64_t bytes, mismatches;
} room_view_t;

static void compare(demo_report_t *r)
{
    size_t N = r->o->requests;
    unsigned expect = (unsigned)(r->id.prefill_tp + r->id.decode_tp);
    room_view_t *v = calloc(N, sizeof(room_view_t));
    const char **text = calloc(N, sizeof(char *));
    double *lat = calloc(N, sizeof(double));
    size_t nlat = 0;

    for (size_t k = 0; k < r->ntexts; k++) {
        text[r->texts[k].req] = r->texts[k].line;
    }
    for (size_t k = 0; k < r->nall; k++) {
        const demo_outcome_t *o = &r->all[k];
        room_view_t *x = &v[o->req];

        x->differ |= x->records > 0 && !same_outcome(x->ref, o);
        x->ref = x->records++ == 0 ? o : x->ref;
        x->latency_ms = o->latency_ms > x->latency_ms ? o->latency_ms : x->latency_ms;
        x->bytes += o->bytes;
        x->mismatches += o->mismatches;
        r->mismatches += o->mismatches;
    }
    for (size_t i = 0; i < N; i++) {
        room_view_t *x = &v[i];

        if (x->records != expect || !x->ref->concluded) {
            r->unconcluded++;
            r->disagreed++;
        } else if (x->differ) {
            r->disagreed++;
        } else if (x->ref->state == KVX_ROOM_SUCCESS) {
            r->success++;
            r->bytes += x->bytes;
            lat[nlat++] = x->latency_ms;
        } else {
            r->failed++;
            r->not_injected += !x->ref->injected;
            add_failure(r, x->ref, text[i]);
        }
    }
    if (r->ngroups > 0) { /* qsort() takes no NULL array, even empty */
        qsort(r->groups, r->ngroups, sizeof(group_t), by_stage);
    }
    if (nlat > 0) {
        qsort(lat, nlat, sizeof(double), by_value);
    }
    r->p50 = percentile(lat, nlat, 0.50);
    r->p99 = percentile(lat, nlat, 0.99);
    /* The examples point into r->texts, which lives as long as r. */
    free(v);
    free(text);
    free(lat);
}

/* ---- the output ------------------------------------------------------------------------ */

/* "prefill[0].tp1 (rank 1)": where a world rank sits in the layout. */
static void origin_name(const demo_report_t *r, int rank, char *buf, size_t len)
{
    int np = r->id.prefill_instances * r->id.prefill_tp;

    if (rank < 0) {
        snprintf(buf, len, "unknown");
    } else if (rank < np) {
        snprintf(buf, len, "prefill[%d].tp%d (rank %d)", rank / r->id.prefill_tp,
                 rank % r->id.prefill_tp, rank);
    } else {
        snprintf(buf, len, "decode[%d].tp%d (rank %d)", (rank - np) / r->id.decode_tp,
                 (rank - np) % r->id.decode_tp, rank);
    }
}

static void print_failures(const demo_report_t *r)
{
    const group_t *most = NULL;

    if (r->ngroups == 0) {
        return;
    }
    printf("  %6s  %-22s %-11s %-26s %s\n", "rooms", "reason", "stage", "origin", "injected");
    for (size_t g = 0; g < r->ngroups; g++) {
        const group_t *x = &r->groups[g];
        char origin[64];

        origin_name(r, x->origin, origin, sizeof(origin));
        printf("  %6zu  %-22s %-11s %-26s %s\n", x->rooms, kvx_status_name(x->status),
               kvx_stage_name(x->stage), origin, x->injected ? "yes" : "NO");
        most = most == NULL || x->rooms > most->rooms ? x : most;
    }
    if (most->example != NULL) {
        printf("  e.g. %s\n", most->example);
    }
}

static void print_summary(const demo_report_t *r)
{
    int world = r->id.world_size;
    const uint64_t *d = r->decode_stats;

    printf("rooms:        %u total: %zu succeeded, %zu failed, %zu disagreed (%zu not concluded)\n",
           r->o->requests, r->success, r->failed, r->disagreed, r->unconcluded);
    printf("bytes:        %.3f GB of KV in %.1f s: %.2f GB/s\n", (double)r->bytes / 1e9, r->elapsed,
           r->elapsed > 0 ? (double)r->bytes / r->elapsed / 1e9 : 0.0);
    printf("latency:      p50 %.1f ms, p99 %.1f ms (pre-allocation to agreed SUCCESS)\n", r->p50,
           r->p99);
    printf("verified:     %llu mismatched bytes (every head of every token of %zu rooms, and "
           "their first tokens)\n",
           (unsigned long long)r->mismatches, r->success);
    if (r->disagreed == 0) {
        printf("agreement:    all %d ranks of both instances agreed on every room (state; "
               "when failed, origin, stage and status)\n",
               world);
    } else {
        printf("agreement:    %zu rooms were not concluded identically on all %d ranks\n",
               r->disagreed, world);
    }
    printf("decode pages: %llu granted in %llu runs (%.1f pages per run); %llu failed rooms "
           "kept theirs until the writers drained; %llu quarantined\n",
           (unsigned long long)d[1], (unsigned long long)d[2],
           d[2] ? (double)d[1] / (double)d[2] : 0.0, (unsigned long long)d[3],
           (unsigned long long)d[0]);
    printf("failures:     %zu rooms%s\n", r->failed,
           r->failed == 0         ? ""
           : r->not_injected == 0 ? ", every one injected"
                                  : ", some NOT injected");
    print_failures(r);
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s != '\0'; s++) {
        if (*s == '"' || *s == '\\') {
            fprintf(f, "\\%c", *s);
        } else if ((unsigned char)*s < 0x20) {
            fprintf(f, "\\u%04x", (unsigned)*s);
        } else {
            fputc(*s, f);
        }
    }
    fputc('"', f);
}

static int write_json(const demo_report_t *r, int ok)
{
    FILE *f = fopen(r->o->json, "w");
    char layout[96];

    if (f == NULL) {
        perror(r->o->json);
        return -1;
    }
    fprintf(f,
            "{\"rooms_total\": %u, \"rooms_success\": %zu, \"rooms_failed\": %zu, "
            "\"rooms_disagreed\": %zu,\n \"byte_mismatches\": %llu, \"bytes\": %llu, "
            "\"gbps\": %.4f,\n \"latency_ms\": {\"p50\": %.3f, \"p99\": %.3f},\n \"failures\": [",
            r->o->requests, r->success, r->failed, r->disagreed, (unsigned long long)r->mismatches,
            (unsigned long long)r->bytes,
            r->elapsed > 0 ? (double)r->bytes / r->elapsed / 1e9 : 0.0, r->p50, r->p99);
    for (size_t g = 0; g < r->ngroups; g++) {
        const group_t *x = &r->groups[g];
        char origin[64];

        origin_name(r, x->origin, origin, sizeof(origin));
        fprintf(f, "%s\n  {\"reason\": ", g ? "," : "");
        json_string(f, kvx_status_name(x->status));
        fprintf(f, ", \"origin\": ");
        json_string(f, origin);
        fprintf(f, ", \"stage\": ");
        json_string(f, kvx_stage_name(x->stage));
        fprintf(f, ", \"injected\": %s, \"count\": %zu}", x->injected ? "true" : "false", x->rooms);
    }
    snprintf(layout, sizeof(layout), "prefill:%dx%d,decode:%dx%d", r->id.prefill_instances,
             r->id.prefill_tp, r->id.decode_instances, r->id.decode_tp);
    fprintf(f,
            "],\n \"rooms_unconcluded\": %zu, \"quarantined_pages\": %llu, \"seconds\": %.3f, "
            "\"layout\": \"%s\", \"ok\": %s}\n",
            r->unconcluded, (unsigned long long)r->decode_stats[0], r->elapsed, layout,
            ok ? "true" : "false");
    return fclose(f) == 0 ? 0 : -1;
}

int demo_report_print(demo_report_t *r)
{
    int ok = 1;

    if (r->id.world_rank == 0) {
        compare(r);
        ok = r->unconcluded == 0 && r->disagreed == 0 && r->mismatches == 0 && r->not_injected == 0;
        print_summary(r);
        if (r->o->json != NULL && write_json(r, ok) != 0) {
            ok = 0;
        }
        if (ok) {
            printf("kvx-demo: OK (%u rooms, %zu failed as injected, all ranks agreed)\n",
                   r->o->requests, r->failed);
        } else {
            printf("kvx-demo: FAILED (%zu disagreed, %zu not concluded, %llu mismatched bytes, "
                   "%zu failures not injected)\n",
                   r->disagreed, r->unconcluded, (unsigned long long)r->mismatches,
                   r->not_injected);
        }
        fflush(stdout);
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return ok ? 0 : 1;
}
