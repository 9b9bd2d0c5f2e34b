/*
 * report.c - what every rank concluded, compared room by room at rank 0,
 * and the summary: rooms, bytes, GB/s, latency, failures by reason and
 * origin, agreement, mismatched bytes; the same as JSON with --json.
 *
 * A room is agreed by both instances when every TP rank of its prefill
 * instance and of its decode instance concluded it, with the same state
 * and, when FAILED, the same root cause (origin rank, stage, status, and
 * whether it was injected).
 *
 * The counts the summary prints come from kvx's own counters
 * (kvx_ctx_stats(), sent with each rank's report): rooms succeeded and
 * failed, and failures by stage, origin and status, as one rank of each
 * decode instance counted them (each room has one decode instance; the
 * prefill instances when a decode instance has no rank heard); bytes and
 * GB/s as the prefill ranks counted what they moved; pages quarantined;
 * peers lost. What only the demo knows stays its own: the bytes it
 * verified, latency from pre-allocation, whether the ranks agree. Each
 * rank's counters must match that rank's own records, and the counted
 * rooms the demo's comparison: otherwise the run FAILED. A rank not heard
 * has no counters here: the summary says so.
 */
#include "demo.h"

#include <jansson.h>

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An upper bound of the bytes of one aux row as kvx moves it (its header
 * and the demo's 4-byte first token), per prefill and decode rank pair. */
#define AUX_ROW_MAX 256

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
    double tail_p50, tail_p99; /* last KV computed (prefill) to agreed SUCCESS (decode) */
    size_t nlat, ntail;        /* SUCCESS rooms with the records each needs */
    group_t *groups;
    size_t ngroups;
    double *done_at; /* per request: when agreed SUCCESS everywhere, else -1 (trace.h) */
    /* The ranks heard at the end; a lost instance is one with a rank that
     * was not. Its rooms, and the other instances' before and after. */
    demo_xchg_t *x;
    int *heard;
    double lost_at; /* the first room failed by the loss, s into the run */
    size_t lost_rooms, lost_rooms_failed;
    group_t *lost_groups;
    size_t nlost_groups;
    size_t before, after; /* SUCCESS rooms of whole instances */
    uint32_t differ_example[3];
    size_t ndiffer_examples;
    uint64_t bytes_before, bytes_after;
    const char **text_of; /* per request: its failure as decode TP rank 0 formatted it */
    /* kvx_ctx_stats() of each rank heard, and what the summary takes from it. */
    kvx_stats_t *kstats;
    int *has_kstats;
    int *counting;   /* per world rank: its counters are the rooms' counts */
    int count_side;  /* the rooms counted by the decode (1) or prefill (0) instances */
    int count_whole; /* every instance of that side has a rank counted */
    int bytes_whole; /* every prefill rank's counters were read */
    uint64_t csucceeded, cfailed, crefused, cbytes, cquarantined, csrc_quarantined, cpeers_lost;
    size_t nmismatch; /* counters that do not match the demo's records */
    char mismatch[4][320];
    uint64_t (*hellos)[3]; /* per world rank: hello rooms kvx opened, SUCCESS, FAILED */
    int32_t (*hello_fail)[DEMO_HELLO_FAILS][3]; /* and how the first failed ones failed */
    /* --replace, rank 0: the replacement's ranks (its TP rank t) and what
     * the summary says of it (compare()). */
    demo_replace_facts_t facts;
    int has_facts;
    int rep_heard;
    int *rep_has_kstats;
    kvx_stats_t *rep_kstats;
    uint64_t (*rep_hellos)[3];
    int32_t (*rep_hello_fail)[DEMO_HELLO_FAILS][3];
    double rep_joined_s; /* when its last rank joined, s into the job's run */
    size_t rep_rooms, rep_success, rep_failed, rep_gap;
    double rep_first_success; /* the first room it agreed SUCCESS, s into the run; -1 none */
};

/* What a rank sends at the end: its counts and kvx's, then its outcomes
 * and texts. */
typedef struct report_head {
    double elapsed;
    double joined_s; /* the replacement: when it joined, s into the job's run */
    uint64_t stats[4];
    uint64_t hellos[3];
    int32_t hello_fail[DEMO_HELLO_FAILS][3];
    uint64_t nout, ntexts;
    uint64_t has_kstats;
    int32_t tp_rank, replacement;
    kvx_stats_t kstats;
} report_head_t;

/* Of a replacement's records, only the requests it served (the others were
 * not its own: serve.c skip_unserved()). */
static int kept(const demo_serve_t *s, const demo_outcome_t *o)
{
    return !s->replacement || o->opened || o->concluded;
}

void *demo_report_blob(const demo_serve_t *s, double joined_s, size_t *len_p)
{
    int reporter = s->id.role == KVX_ROLE_DECODE && s->id.tp_rank == 0;
    report_head_t h;
    size_t nout = 0, len;
    char *mine;

    for (size_t i = 0; i < s->nmine; i++) {
        nout += kept(s, &s->out[i]);
    }
    len = sizeof(h) + nout * sizeof(demo_outcome_t) + s->ntexts * sizeof(demo_text_t);
    if ((mine = malloc(len)) == NULL) {
        return NULL;
    }
    memset(&h, 0, sizeof(h));
    h.elapsed = s->elapsed;
    h.joined_s = joined_s;
    h.nout = nout;
    h.ntexts = s->ntexts;
    h.tp_rank = s->id.tp_rank;
    h.replacement = s->replacement;
    memcpy(h.hellos, s->hellos, sizeof(h.hellos));
    memcpy(h.hello_fail, s->hello_fail, sizeof(h.hello_fail));
    if (reporter) {
        h.stats[0] = s->quarantined_pages;
        h.stats[1] = s->pages.taken;
        h.stats[2] = s->pages.runs;
        h.stats[3] = s->drain_waits;
    }
    /* Every room this rank opened is closed by now: each has its outcome in
     * the counters. */
    h.has_kstats = kvx_ctx_stats(s->ctx, &h.kstats) == KVX_OK;
    memcpy(mine, &h, sizeof(h));
    nout = 0;
    for (size_t i = 0; i < s->nmine; i++) { /* s->out is NULL on a rank that reports no room */
        if (kept(s, &s->out[i])) {
            memcpy(mine + sizeof(h) + nout++ * sizeof(demo_outcome_t), &s->out[i],
                   sizeof(demo_outcome_t));
        }
    }
    if (s->ntexts > 0) {
        memcpy(mine + sizeof(h) + nout * sizeof(demo_outcome_t), s->texts,
               s->ntexts * sizeof(demo_text_t));
    }
    *len_p = len;
    return mine;
}

/* One rank's report into r: its head in *h. 0, or -1 when it is malformed
 * or there was no memory. */
static int take(demo_report_t *r, const void *data, size_t n, report_head_t *h)
{
    if (n < sizeof(*h)) {
        return -1;
    }
    memcpy(h, data, sizeof(*h));
    if (h->nout > r->o->requests || h->ntexts > r->o->requests ||
        n != sizeof(*h) + h->nout * sizeof(demo_outcome_t) + h->ntexts * sizeof(demo_text_t)) {
        return -1;
    }
    r->elapsed = h->elapsed > r->elapsed ? h->elapsed : r->elapsed;
    for (int i = 0; i < 4; i++) {
        r->decode_stats[i] += h->stats[i];
    }
    r->all = realloc(r->all, (r->nall + h->nout) * sizeof(demo_outcome_t));
    r->texts = realloc(r->texts, (r->ntexts + h->ntexts) * sizeof(demo_text_t) + 1);
    if (r->all == NULL || r->texts == NULL) {
        return -1;
    }
    memcpy(r->all + r->nall, (const char *)data + sizeof(*h), h->nout * sizeof(demo_outcome_t));
    memcpy(r->texts + r->ntexts, (const char *)data + sizeof(*h) + h->nout * sizeof(demo_outcome_t),
           h->ntexts * sizeof(demo_text_t));
    r->nall += h->nout;
    r->ntexts += h->ntexts;
    return 0;
}

demo_report_t *demo_report_gather(const demo_serve_t *s)
{
    demo_report_t *r = calloc(1, sizeof(*r));
    size_t len = 0, world = (size_t)s->id.world_size;
    char *mine = demo_report_blob(s, 0, &len);

    if (r == NULL || mine == NULL) {
        fprintf(stderr, "kvx-demo: rank %d: out of memory for the report\n", s->id.world_rank);
        free(mine);
        return r;
    }
    r->o = s->o;
    r->id = s->id;
    r->rep_first_success = -1;
    r->x = demo_xchg_all(mine, len, s->o->end_timeout);
    free(mine);
    r->heard = calloc(world, sizeof(int));
    r->kstats = calloc(world, sizeof(kvx_stats_t));
    r->has_kstats = calloc(world, sizeof(int));
    r->hellos = calloc(world, sizeof(*r->hellos));
    r->hello_fail = calloc(world, sizeof(*r->hello_fail));
    r->rep_hello_fail = calloc((size_t)s->id.decode_tp, sizeof(*r->rep_hello_fail));
    r->rep_kstats = calloc((size_t)s->id.decode_tp, sizeof(kvx_stats_t));
    r->rep_has_kstats = calloc((size_t)s->id.decode_tp, sizeof(int));
    r->rep_hellos = calloc((size_t)s->id.decode_tp, sizeof(*r->rep_hellos));
    for (int k = 0;
         r->x != NULL && r->heard != NULL && r->kstats != NULL && r->has_kstats != NULL &&
         r->hellos != NULL && r->hello_fail != NULL && k < s->id.world_size;
         k++) {
        const void *data;
        report_head_t rh;
        size_t n;

        if (!demo_xchg_heard(r->x, k, &data, &n) || take(r, data, n, &rh) != 0) {
            continue;
        }
        r->heard[k] = 1;
        if (rh.has_kstats) {
            r->kstats[k] = rh.kstats;
            r->has_kstats[k] = 1;
        }
        memcpy(r->hellos[k], rh.hellos, sizeof(rh.hellos));
        memcpy(r->hello_fail[k], rh.hello_fail, sizeof(rh.hello_fail));
    }
    return r;
}

void demo_report_add_replacement(demo_report_t *r, const void *data, size_t len)
{
    report_head_t rh;

    if (r == NULL || r->rep_kstats == NULL || r->rep_has_kstats == NULL || r->rep_hellos == NULL ||
        r->rep_hello_fail == NULL || take(r, data, len, &rh) != 0 || !rh.replacement ||
        rh.tp_rank < 0 || rh.tp_rank >= r->id.decode_tp) {
        return;
    }
    r->rep_heard++;
    r->rep_joined_s = rh.joined_s > r->rep_joined_s ? rh.joined_s : r->rep_joined_s;
    if (rh.has_kstats) {
        r->rep_kstats[rh.tp_rank] = rh.kstats;
        r->rep_has_kstats[rh.tp_rank] = 1;
    }
    memcpy(r->rep_hellos[rh.tp_rank], rh.hellos, sizeof(rh.hellos));
    memcpy(r->rep_hello_fail[rh.tp_rank], rh.hello_fail, sizeof(rh.hello_fail));
}

void demo_report_set_facts(demo_report_t *r, const demo_replace_facts_t *facts)
{
    if (r != NULL) {
        r->facts = *facts;
        r->has_facts = 1;
    }
}

int demo_report_complete(const demo_report_t *r)
{
    return r != NULL && demo_xchg_all_heard(r->x);
}

void demo_report_free(demo_report_t *r)
{
    if (r != NULL) {
        free(r->all);
        free(r->texts);
        free(r->groups);
        free(r->done_at);
        free(r->lost_groups);
        free(r->heard);
        free(r->text_of);
        free(r->kstats);
        free(r->has_kstats);
        free(r->counting);
        free(r->hellos);
        free(r->rep_kstats);
        free(r->rep_has_kstats);
        free(r->rep_hellos);
        free(r->hello_fail);
        free(r->rep_hello_fail);
        /* A report to a rank that is gone never completes: left to MPI. */
        demo_xchg_free(r->x, 1.0);
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

static void add_group(group_t **groups, size_t *ngroups, const demo_outcome_t *o, const char *text)
{
    size_t g;

    for (g = 0; g < *ngroups; g++) {
        group_t *x = &(*groups)[g];

        if (x->status == o->status && x->stage == o->stage && x->origin == o->origin &&
            x->injected == o->injected) {
            break;
        }
    }
    if (g == *ngroups) {
        group_t *more = realloc(*groups, (*ngroups + 1) * sizeof(group_t));

        if (more == NULL) {
            return;
        }
        *groups = more;
        (*groups)[(*ngroups)++] = (group_t){ o->status, o->stage, o->origin, o->injected, 0, NULL };
    }
    (*groups)[g].rooms++;
    if ((*groups)[g].example == NULL) {
        (*groups)[g].example = text;
    }
}

/* The world rank of TP rank t of an instance. */
static int rank_of(const demo_report_t *r, int decode, int instance, int t)
{
    return decode ? r->id.prefill_instances * r->id.prefill_tp + instance * r->id.decode_tp + t
                  : instance * r->id.prefill_tp + t;
}

/* TP ranks of an instance that were heard at the end. */
static unsigned heard_of(const demo_report_t *r, int decode, int instance)
{
    int tp = decode ? r->id.decode_tp : r->id.prefill_tp;
    unsigned n = 0;

    for (int t = 0; t < tp; t++) {
        n += r->heard != NULL && r->heard[rank_of(r, decode, instance, t)];
    }
    return n;
}

static int instance_whole(const demo_report_t *r, int decode, int instance)
{
    return heard_of(r, decode, instance) == (unsigned)(decode ? r->id.decode_tp : r->id.prefill_tp);
}

/* Is each side of request q heard whole: its prefill instance, and its
 * decode instance or, when the replacement served it, the replacement. */
static int req_whole(const demo_report_t *r, const demo_req_t *q, int served)
{
    return instance_whole(r, 0, q->prefill) &&
           (served ? r->rep_heard == r->id.decode_tp : instance_whole(r, 1, q->decode));
}

/* How many records request q should have. */
static unsigned req_expect(const demo_report_t *r, const demo_req_t *q, int served)
{
    return heard_of(r, 0, q->prefill) +
           (served ? (unsigned)r->rep_heard : heard_of(r, 1, q->decode));
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

int demo_by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* Nearest rank: the smallest value with at least p of them at or below. */
double demo_percentile(const double *v, size_t n, double p)
{
    size_t k = (size_t)(p * (double)n + 0.999999);

    return n == 0 ? 0 : v[(k > 0 ? k : 1) - 1];
}

typedef struct room_view {
    const demo_outcome_t *ref; /* the first record */
    unsigned records;
    int differ;
    double latency_ms; /* the slowest decode rank */
    double computed_s; /* when the slowest prefill rank computed its last KV */
    double agreed_s;   /* when the slowest decode rank saw it agreed */
    uint64_t bytes, mismatches;
} room_view_t;

/* The rooms of an instance that lost a rank are compared among the ranks
 * left (every TP rank of the other instance and the survivors of the broken
 * one) by state and reason only: the two instances may name different
 * origins for the same loss. Rooms of whole instances are compared as
 * always, and count before or after the loss was first seen. */
static void compare(demo_report_t *r)
{
    size_t N = r->o->requests;
    room_view_t *v = calloc(N, sizeof(room_view_t));
    const char **text = r->text_of = calloc(N, sizeof(char *));
    double *lat = calloc(N, sizeof(double));
    double *at = calloc(N, sizeof(double));
    double *tail = calloc(N, sizeof(double));
    char *served = calloc(N, 1); /* by the replacement */
    size_t nlat = 0, ntail = 0;
    demo_req_t *reqs = demo_requests(r->o, &r->id);

    r->done_at = calloc(N, sizeof(double));
    if (v == NULL || text == NULL || lat == NULL || at == NULL || tail == NULL || reqs == NULL ||
        served == NULL) {
        goto out;
    }
    for (size_t k = 0; k < r->nall; k++) {
        if (r->all[k].replacement && r->all[k].req < N) {
            served[r->all[k].req] = 1;
        }
    }
    for (size_t k = 0; k < r->ntexts; k++) {
        if (r->texts[k].req < N) {
            text[r->texts[k].req] = r->texts[k].line;
        }
    }
    for (size_t k = 0; k < r->nall; k++) {
        const demo_outcome_t *o = &r->all[k];
        room_view_t *x = &v[o->req];
        int whole = req_whole(r, &reqs[o->req], served[o->req]);

        x->differ |= x->records > 0 &&
                     (whole ? !same_outcome(x->ref, o)
                            : x->ref->concluded != o->concluded || x->ref->state != o->state ||
                                  (o->state == KVX_ROOM_FAILED && x->ref->status != o->status));
        x->ref = x->records++ == 0 ? o : x->ref;
        x->latency_ms = o->latency_ms > x->latency_ms ? o->latency_ms : x->latency_ms;
        x->computed_s = o->computed_s > x->computed_s ? o->computed_s : x->computed_s;
        x->agreed_s = o->agreed_s > x->agreed_s ? o->agreed_s : x->agreed_s;
        x->bytes += o->bytes;
        x->mismatches += o->mismatches;
        r->mismatches += o->mismatches;
        at[o->req] = o->at_s > at[o->req] ? o->at_s : at[o->req];
        if (!whole && o->state == KVX_ROOM_FAILED && o->status == KVX_ERR_PEER_LOST &&
            (r->lost_at == 0 || o->at_s < r->lost_at)) {
            r->lost_at = o->at_s;
        }
    }
    for (size_t i = 0; i < N; i++) {
        room_view_t *x = &v[i];
        int whole = req_whole(r, &reqs[i], served[i]);
        unsigned expect = req_expect(r, &reqs[i], served[i]);

        r->done_at[i] = -1;
        r->lost_rooms += !whole;
        r->rep_rooms += served[i];
        if (x->records != expect || x->records == 0 || !x->ref->concluded || x->differ) {
            r->unconcluded += x->records != expect || x->records == 0 || !x->ref->concluded;
            r->disagreed++;
            if (r->ndiffer_examples < 3) {
                r->differ_example[r->ndiffer_examples++] = (uint32_t)i;
            }
        } else if (x->ref->state == KVX_ROOM_SUCCESS) {
            r->success++;
            if (served[i]) {
                r->rep_success++;
                r->rep_first_success =
                    r->rep_first_success < 0 || x->agreed_s < r->rep_first_success
                        ? x->agreed_s
                        : r->rep_first_success;
            }
            r->bytes += x->bytes;
            /* Only with records of both sides (a partition may leave one);
             * every rank's clock starts at one barrier (main.c). */
            if (x->agreed_s > 0 && x->computed_s > 0) {
                tail[ntail++] = (x->agreed_s - x->computed_s) * 1e3;
            }
            if (x->agreed_s > 0) {
                lat[nlat++] = x->latency_ms;
            }
            r->done_at[i] = x->agreed_s;
            if (whole && r->lost_at > 0 && at[i] >= r->lost_at) {
                r->after++;
                r->bytes_after += x->bytes;
            } else if (whole) {
                r->before++;
                r->bytes_before += x->bytes;
            }
        } else {
            r->failed++;
            r->rep_failed += served[i];
            r->rep_gap += !served[i] && r->has_facts && reqs[i].decode == r->facts.instance;
            if (!whole) {
                /* A loss is no injected fault, but it is what this run
                 * shows: these rooms could not succeed. */
                r->lost_rooms_failed++;
                add_group(&r->lost_groups, &r->nlost_groups, x->ref, text[i]);
                r->not_injected += x->ref->status != KVX_ERR_PEER_LOST && !x->ref->injected;
            } else {
                r->not_injected += !x->ref->injected;
            }
        }
    }
    qsort(lat, nlat, sizeof(double), demo_by_value);
    qsort(tail, ntail, sizeof(double), demo_by_value);
    r->nlat = nlat;
    r->ntail = ntail;
    r->p50 = demo_percentile(lat, nlat, 0.50);
    r->p99 = demo_percentile(lat, nlat, 0.99);
    r->tail_p50 = demo_percentile(tail, ntail, 0.50);
    r->tail_p99 = demo_percentile(tail, ntail, 0.99);
out:
    /* The examples point into r->texts, which lives as long as r. */
    free(served);
    free(v);
    free(lat);
    free(at);
    free(tail);
    free(reqs);
}

/* ---- kvx's counters ---------------------------------------------------------------- */

/* A rank's own records of the rooms it had. */
typedef struct tally {
    size_t opened;    /* rooms kvx opened on it */
    size_t succeeded; /* of those, concluded SUCCESS */
    size_t failed;    /* concluded FAILED */
    size_t pending;   /* not concluded (given up at the time limit) */
    size_t refused;   /* rooms kvx refused to open: failed, and never in its counters */
} tally_t;

static void mismatch(demo_report_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void mismatch(demo_report_t *r, const char *fmt, ...)
{
    va_list ap;

    if (r->nmismatch < sizeof(r->mismatch) / sizeof(r->mismatch[0])) {
        va_start(ap, fmt);
        vsnprintf(r->mismatch[r->nmismatch], sizeof(r->mismatch[0]), fmt, ap);
        va_end(ap);
    }
    r->nmismatch++;
}

/* "decode[1].tp0": where a world rank sits in the layout. */
static void rank_name(const demo_report_t *r, int rank, char *buf, size_t len)
{
    int np = r->id.prefill_instances * r->id.prefill_tp;

    if (rank < np) {
        snprintf(buf, len, "prefill[%d].tp%d", rank / r->id.prefill_tp, rank % r->id.prefill_tp);
    } else {
        snprintf(buf, len, "decode[%d].tp%d", (rank - np) / r->id.decode_tp,
                 (rank - np) % r->id.decode_tp);
    }
}

/* Where kvx_stats_t.failures files a failure: [stage][origin role][-status],
 * out-of-range values where kvx_ctx_stats() puts them (stage init, role
 * none, index 0). */
static uint64_t *cell_of(uint64_t (*cells)[3][KVX_STATS_STATUSES], const demo_outcome_t *o)
{
    /* A room aborted because a TP sibling's open was refused: kvx counted
     * its own failure of it here, not the sibling's refusal. */
    int32_t ostage = o->sibling_refused ? o->kstage : o->stage;
    int32_t orole = o->sibling_refused ? o->krole : o->origin_role;
    int32_t ostatus = o->sibling_refused ? o->kstatus : o->status;
    unsigned stage = (unsigned)ostage < KVX_STAGE_COUNT ? (unsigned)ostage : KVX_STAGE_INIT;
    unsigned role = (unsigned)orole < 3 ? (unsigned)orole : KVX_ROLE_NONE;
    int st = ostatus < 0 && -ostatus < KVX_STATS_STATUSES ? -ostatus : 0;

    return &cells[stage][role][st];
}

/* The first cell where two failure tables differ; 0 when none does. */
static int first_difference(const uint64_t (*a)[3][KVX_STATS_STATUSES],
                            const uint64_t (*b)[3][KVX_STATS_STATUSES], unsigned *stage,
                            unsigned *role, unsigned *st)
{
    for (*stage = 0; *stage < KVX_STAGE_COUNT; (*stage)++) {
        for (*role = 0; *role < 3; (*role)++) {
            for (*st = 0; *st < KVX_STATS_STATUSES; (*st)++) {
                if (a[*stage][*role][*st] != b[*stage][*role][*st]) {
                    return 1;
                }
            }
        }
    }
    return 0;
}

/* Rank k's counters against its own records: the rooms kvx opened there,
 * their outcomes, and the failures by stage, origin role and status. Exact
 * when every room it opened was concluded; a room given up at the time
 * limit was closed unconcluded, and kvx counted it by its state then. */
static void check_rank(demo_report_t *r, int k, int replacement, const kvx_stats_t *ks,
                       const uint64_t hellos[3], const int32_t (*hello_fail)[3], tally_t *t)
{
    uint64_t(*cells)[3][KVX_STATS_STATUSES] = calloc(1, sizeof(ks->failures));
    unsigned stage, role, st;
    char base[64], name[96];

    rank_name(r, k, base, sizeof(base));
    snprintf(name, sizeof(name), "%s%s", replacement ? "the replacement " : "", base);
    if (cells == NULL) {
        mismatch(r, "%s (rank %d): no memory to compare its counters", name, k);
        return;
    }
    /* The hello rooms of --replace are kvx's rooms, not requests. */
    t->opened += hellos[0];
    t->succeeded += hellos[1];
    t->failed += hellos[2];
    for (uint64_t i = 0; i < hellos[2] && i < DEMO_HELLO_FAILS; i++) {
        demo_outcome_t o = { .stage = hello_fail[i][0],
                             .origin_role = hello_fail[i][1],
                             .status = hello_fail[i][2] };

        (*cell_of(cells, &o))++;
    }
    for (size_t i = 0; i < r->nall; i++) {
        const demo_outcome_t *o = &r->all[i];

        if (o->rank != k || (int)o->replacement != replacement) {
            continue;
        }
        if (!o->opened) {
            t->refused += o->concluded != 0;
            continue;
        }
        t->opened++;
        if (!o->concluded) {
            t->pending++;
        } else if (o->state == KVX_ROOM_SUCCESS) {
            t->succeeded++;
        } else {
            t->failed++;
            (*cell_of(cells, o))++;
        }
    }
    if (ks->rooms_opened != t->opened || ks->rooms_succeeded < t->succeeded ||
        ks->rooms_succeeded > t->succeeded + t->pending || ks->rooms_failed < t->failed ||
        ks->rooms_failed > t->failed + t->pending ||
        ks->rooms_succeeded + ks->rooms_failed > t->opened) {
        mismatch(r,
                 "%s (rank %d): kvx counted %llu rooms opened, %llu succeeded, %llu failed; "
                 "its own records %zu, %zu, %zu (%zu not concluded)",
                 name, k, (unsigned long long)ks->rooms_opened,
                 (unsigned long long)ks->rooms_succeeded, (unsigned long long)ks->rooms_failed,
                 t->opened, t->succeeded, t->failed, t->pending);
    } else if (t->pending == 0 && first_difference((const uint64_t(*)[3][KVX_STATS_STATUSES])cells,
                                                   ks->failures, &stage, &role, &st)) {
        mismatch(r,
                 "%s (rank %d): failures at stage %s from a %s rank with %s: kvx counted %llu, "
                 "its own records %llu",
                 name, k, kvx_stage_name((kvx_stage_t)stage), kvx_role_name((kvx_role_t)role),
                 st ? kvx_status_name(-(kvx_status_t)st) : "a status out of range",
                 (unsigned long long)ks->failures[stage][role][st],
                 (unsigned long long)cells[stage][role][st]);
    }
    free(cells);
}

/* The lowest TP rank of an instance whose counters were read, or -1. */
static int counted_rank(const demo_report_t *r, int decode, int instance)
{
    int tp = decode ? r->id.decode_tp : r->id.prefill_tp;

    for (int t = 0; t < tp; t++) {
        int k = rank_of(r, decode, instance, t);

        if (r->has_kstats[k]) {
            return k;
        }
    }
    return -1;
}

/* Has every instance of a side a rank counted? */
static int side_whole(const demo_report_t *r, int decode)
{
    int instances = decode ? r->id.decode_instances : r->id.prefill_instances;

    for (int i = 0; i < instances; i++) {
        if (counted_rank(r, decode, i) < 0) {
            return 0;
        }
    }
    return 1;
}

/* What kvx moved: a prefill rank's puts, packed puts and data messages. */
static uint64_t moved(const kvx_stats_t *ks)
{
    return ks->bytes[KVX_XFER_PUT] + ks->bytes[KVX_XFER_PACKED_PUT] + ks->bytes[KVX_XFER_MSG_SENT];
}

/* The summary's counts from the counters of the ranks heard, each rank's
 * counters checked against its own records, and the counted rooms against
 * the comparison's (after compare()). */
static void count(demo_report_t *r)
{
    int world = r->id.world_size, np = r->id.prefill_instances * r->id.prefill_tp;
    tally_t *t = calloc((size_t)world, sizeof(tally_t));
    int instances;

    r->counting = calloc((size_t)world, sizeof(int));
    if (t == NULL || r->counting == NULL || r->kstats == NULL || r->has_kstats == NULL ||
        r->hellos == NULL || r->hello_fail == NULL || r->rep_kstats == NULL ||
        r->rep_has_kstats == NULL || r->rep_hellos == NULL || r->rep_hello_fail == NULL ||
        r->all == NULL) {
        mismatch(r, "no memory to read kvx's counters");
        free(t);
        return;
    }
    for (int k = 0; k < world; k++) {
        if (r->has_kstats[k]) {
            check_rank(r, k, 0, &r->kstats[k], r->hellos[k], r->hello_fail[k], &t[k]);
        }
    }
    for (int i = 0; r->has_facts && r->facts.instance >= 0 && i < r->id.decode_tp; i++) {
        tally_t rt = { 0 };

        if (r->rep_has_kstats[i]) {
            check_rank(r, rank_of(r, 1, r->facts.instance, i), 1, &r->rep_kstats[i],
                       r->rep_hellos[i], r->rep_hello_fail[i], &rt);
        }
    }
    /* Rooms: one rank of each decode instance, else of each prefill
     * instance, counts every room once. */
    r->count_side = side_whole(r, 1) || !side_whole(r, 0);
    r->count_whole = side_whole(r, r->count_side);
    instances = r->count_side ? r->id.decode_instances : r->id.prefill_instances;
    for (int i = 0; i < instances; i++) {
        int k = counted_rank(r, r->count_side, i);

        if (k >= 0) {
            r->counting[k] = 1;
            r->csucceeded += r->kstats[k].rooms_succeeded - r->hellos[k][1];
            r->cfailed += r->kstats[k].rooms_failed - r->hellos[k][2] + t[k].refused;
            r->crefused += t[k].refused;
        }
    }
    for (int i = 0; i < r->id.decode_instances; i++) {
        int k = counted_rank(r, 1, i);

        r->cquarantined += k >= 0 ? r->kstats[k].pages_quarantined : 0;
    }
    r->bytes_whole = 1;
    for (int k = 0; k < world; k++) {
        if (!r->has_kstats[k]) {
            r->bytes_whole &= k >= np;
            continue;
        }
        if (k < np) {
            r->cbytes += moved(&r->kstats[k]);
            r->csrc_quarantined += r->kstats[k].src_pages_quarantined;
        }
        r->cpeers_lost += r->kstats[k].peers_lost;
    }
    /* The failures as the counting ranks recorded them: kvx's counters by
     * stage, origin role and status (checked above), split by origin rank
     * and whether injected, which only the records say. */
    for (size_t i = 0; i < r->nall; i++) {
        const demo_outcome_t *o = &r->all[i];

        if (o->rank >= 0 && o->rank < world && r->counting[o->rank] && o->concluded &&
            o->state == KVX_ROOM_FAILED) {
            add_group(&r->groups, &r->ngroups, o,
                      r->text_of != NULL && o->req < r->o->requests ? r->text_of[o->req] : NULL);
        }
    }
    if (r->ngroups > 0) { /* qsort() takes no NULL array, even empty */
        qsort(r->groups, r->ngroups, sizeof(group_t), by_stage);
    }
    /* The demo's own count of the rooms against kvx's. */
    if (r->count_whole && r->disagreed == 0 &&
        (r->csucceeded != r->success || r->cfailed != r->failed)) {
        mismatch(r,
                 "rooms: kvx's counters count %llu succeeded and %llu failed, the demo's "
                 "comparison %zu and %zu",
                 (unsigned long long)r->csucceeded, (unsigned long long)r->cfailed, r->success,
                 r->failed);
    }
    /* Every byte verified was moved by a prefill rank; beyond it, a room
     * that succeeded moved only its aux rows. */
    if (r->bytes_whole && r->cbytes < r->bytes) {
        mismatch(r,
                 "bytes: the prefill ranks' counters count %llu moved, fewer than the %llu "
                 "the decode ranks verified",
                 (unsigned long long)r->cbytes, (unsigned long long)r->bytes);
    } else if (r->bytes_whole && r->cfailed == 0 && r->disagreed == 0 &&
               r->cbytes - r->bytes >
                   (uint64_t)AUX_ROW_MAX * r->success * r->id.prefill_tp * r->id.decode_tp) {
        mismatch(r,
                 "bytes: the prefill ranks' counters count %llu moved, %llu more than the "
                 "decode ranks verified: more than aux rows can be",
                 (unsigned long long)r->cbytes, (unsigned long long)(r->cbytes - r->bytes));
    }
    free(t);
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

/* "decode[1] (rank 4)": the instances with a rank not heard at the end. */
static size_t lost_names(const demo_report_t *r, char *buf, size_t len)
{
    size_t o = 0, n = 0;

    buf[0] = '\0';
    for (int d = 0; d < 2; d++) {
        int instances = d ? r->id.decode_instances : r->id.prefill_instances;
        int tp = d ? r->id.decode_tp : r->id.prefill_tp;

        for (int i = 0; i < instances; i++) {
            if (instance_whole(r, d, i)) {
                continue;
            }
            o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s%s[%d] (rank", n++ ? ", " : "",
                                  d ? "decode" : "prefill", i);
            for (int t = 0; t < tp; t++) {
                int k = rank_of(r, d, i, t);

                if (!r->heard[k]) {
                    o += (size_t)snprintf(buf + o, o < len ? len - o : 0, " %d", k);
                }
            }
            o += (size_t)snprintf(buf + o, o < len ? len - o : 0, " not heard)");
        }
    }
    return n;
}

static double rate(uint64_t bytes, double s)
{
    return s > 0 ? (double)bytes / s / 1e9 : 0.0;
}

static void print_lost(const demo_report_t *r)
{
    char names[256];

    if (lost_names(r, names, sizeof(names)) == 0) {
        return;
    }
    printf("lost:         %s, first seen %.2f s into the run: %zu of its %zu rooms failed%s\n",
           names, r->lost_at, r->lost_rooms_failed, r->lost_rooms,
           r->lost_rooms_failed == r->lost_rooms ? "" : " (the rest succeeded before the loss)");
    /* Their reasons are rows of the failures table above (--json: lost.reasons). */
    printf("others:       rooms of whole instances: %zu succeeded before (%.2f GB/s), %zu after "
           "(%.2f GB/s)\n",
           r->before, rate(r->bytes_before, r->lost_at), r->after,
           rate(r->bytes_after, r->elapsed - r->lost_at));
}

/* When capacity came back: the replacement's first SUCCESS, from the kill
 * (or, when its time was not told, from the loss first seen). */
static double recovery(const demo_report_t *r)
{
    double from = r->facts.killed_s >= 0 ? r->facts.killed_s : r->lost_at;

    return r->rep_first_success >= 0 ? r->rep_first_success - from : -1;
}

/* Did --replace do what it says: a decode instance lost, a replacement
 * spawned, joined and heard at the end? (1 when nothing was lost.) */
static int replaced_whole(const demo_report_t *r)
{
    if (!r->o->replace || !r->has_facts || r->lost_rooms == 0) {
        return 1;
    }
    return r->facts.instance >= 0 && r->facts.failed[0] == '\0' && r->rep_heard == r->id.decode_tp;
}

static void print_replacement(const demo_report_t *r)
{
    const demo_replace_facts_t *f = &r->facts;
    char killed[64] = "";

    if (!r->has_facts || (!r->o->replace && f->killed_s < 0)) {
        return;
    }
    if (f->killed_s >= 0) {
        snprintf(killed, sizeof(killed), "killed %.2f s into the run, ", f->killed_s);
    }
    if (f->instance < 0) {
        printf("replacement:  none: %s\n",
               r->o->replace ? "no decode instance was lost" : "not asked for (--replace)");
        return;
    }
    if (f->failed[0] != '\0') {
        printf("replacement:  decode[%d] (%sthe loss seen %.2f s): none: %s\n", f->instance, killed,
               r->lost_at, f->failed);
        return;
    }
    printf("replacement:  decode[%d]: %sthe loss seen %.2f s; %d process%s spawned by rank 0 at "
           "%.2f s (MPI_Comm_spawn %.2f s), ",
           f->instance, killed, r->lost_at, f->tp, f->tp == 1 ? "" : "es", f->spawn_s,
           f->spawn_took);
    if (r->rep_heard > 0) {
        printf("joined by %.2f s; ", r->rep_joined_s);
    } else {
        printf("none reported having joined; ");
    }
    printf("first room agreed SUCCESS on it at ");
    if (r->rep_first_success >= 0) {
        printf("%.2f s: capacity back %.2f s after the %s\n", r->rep_first_success, recovery(r),
               f->killed_s >= 0 ? "kill" : "loss was seen");
    } else {
        printf("none\n");
    }
    printf("  %zu requests routed to decode[%d] failed with it (in flight at the loss, or "
           "refused until the replacement took its place); %zu rooms on the replacement: %zu "
           "succeeded, %zu failed; %d of its %d ranks reported\n",
           r->rep_gap, f->instance, r->rep_rooms, r->rep_success, r->rep_failed, r->rep_heard,
           f->tp);
}

/* What each rank concluded about the first rooms that differ. */
static void print_differ(const demo_report_t *r)
{
    for (size_t e = 0; e < r->ndiffer_examples; e++) {
        char line[512];
        size_t o = 0;

        o += (size_t)snprintf(line, sizeof(line), "  request %u:", r->differ_example[e]);
        for (size_t k = 0; k < r->nall && o < sizeof(line); k++) {
            const demo_outcome_t *x = &r->all[k];

            if (x->req == r->differ_example[e]) {
                o += (size_t)snprintf(
                    line + o, sizeof(line) - o, " rank %d %s%s%s", x->rank,
                    !x->concluded ? "not concluded" : kvx_room_state_name(x->state),
                    x->concluded && x->state == KVX_ROOM_FAILED ? " " : "",
                    x->concluded && x->state == KVX_ROOM_FAILED ? kvx_status_name(x->status) : "");
            }
        }
        printf("%s\n", line);
    }
}

static int heard_count(const demo_report_t *r)
{
    int n = 0;

    for (int k = 0; r->heard != NULL && k < r->id.world_size; k++) {
        n += r->heard[k];
    }
    return n;
}

/* Appends to buf: the names of the ranks for which pick() is true. */
static size_t rank_list(const demo_report_t *r, int (*pick)(const demo_report_t *, int), char *buf,
                        size_t len)
{
    size_t o = 0, n = 0;

    buf[0] = '\0';
    for (int k = 0; k < r->id.world_size; k++) {
        char name[64];

        if (!pick(r, k)) {
            continue;
        }
        rank_name(r, k, name, sizeof(name));
        o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s%s", n++ ? ", " : "", name);
    }
    return n;
}

static int pick_counting(const demo_report_t *r, int k)
{
    return r->counting != NULL && r->counting[k];
}

static int pick_unavailable(const demo_report_t *r, int k)
{
    return r->has_kstats == NULL || !r->has_kstats[k];
}

static int pick_lost_peers(const demo_report_t *r, int k)
{
    return r->has_kstats != NULL && r->has_kstats[k] && r->kstats[k].peers_lost > 0;
}

/* "decode[1]": the instances of the counting side without a rank counted. */
static size_t uncounted_names(const demo_report_t *r, char *buf, size_t len)
{
    int d = r->count_side;
    size_t o = 0, n = 0;

    buf[0] = '\0';
    for (int i = 0;
         r->has_kstats != NULL && i < (d ? r->id.decode_instances : r->id.prefill_instances); i++) {
        if (counted_rank(r, d, i) < 0) {
            o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s%s[%d]", n++ ? ", " : "",
                                  d ? "decode" : "prefill", i);
        }
    }
    return n;
}

/* Where the counts came from, whether every rank's counters match its own
 * records, which ranks have none, and the peers lost. */
static void print_counters(const demo_report_t *r)
{
    char counting[256], missing[256], uncounted[128], lost[256];
    size_t nmissing = rank_list(r, pick_unavailable, missing, sizeof(missing));
    size_t nlost = rank_list(r, pick_lost_peers, lost, sizeof(lost));

    if (rank_list(r, pick_counting, counting, sizeof(counting)) == 0) {
        snprintf(counting, sizeof(counting), "no rank");
    }
    printf("counters:     kvx_ctx_stats() of %s %d ranks %s; rooms and failures as %s counted "
           "them, bytes as the prefill ranks%s did; %llu peers lost%s%s%s\n",
           nmissing ? "the" : "all", r->id.world_size - (int)nmissing,
           r->nmismatch ? "read, but NOT all match their own records" : "match their own records",
           counting, r->bytes_whole ? "" : " heard", (unsigned long long)r->cpeers_lost,
           nlost ? " (counted by " : "", nlost ? lost : "", nlost ? ")" : "");
    if (nmissing > 0) {
        printf("  unavailable: %s (not heard at the end): %s counters are not in these counts\n",
               missing, nmissing == 1 ? "its" : "their");
    }
    if (uncounted_names(r, uncounted, sizeof(uncounted)) > 0) {
        /* Only with a decode and a prefill instance both without a rank
         * heard: no counters count those rooms. */
        printf("  uncounted:   the rooms of %s: no rank of theirs was heard, nor of every "
               "prefill instance\n",
               uncounted);
    }
    if (r->crefused > 0) {
        printf("  refused:     %llu of the failed rooms were never opened (kvx refused them, or "
               "they were routed to a lost instance and not offered): the demo counted those\n",
               (unsigned long long)r->crefused);
    }
    for (size_t i = 0; i < r->nmismatch && i < sizeof(r->mismatch) / sizeof(r->mismatch[0]); i++) {
        printf("  MISMATCH: %s\n", r->mismatch[i]);
    }
    if (r->nmismatch > sizeof(r->mismatch) / sizeof(r->mismatch[0])) {
        printf("  MISMATCH: %zu more\n",
               r->nmismatch - sizeof(r->mismatch) / sizeof(r->mismatch[0]));
    }
}

static void print_summary(const demo_report_t *r)
{
    int world = r->id.world_size;
    const uint64_t *d = r->decode_stats;

    if (r->disagreed == 0) {
        printf(
            "rooms:        %u total: %llu succeeded, %llu failed, 0 disagreed (0 not concluded)\n",
            r->o->requests, (unsigned long long)r->csucceeded, (unsigned long long)r->cfailed);
    } else {
        /* The counters count a room as its counting rank concluded it,
         * whatever the others did. */
        printf("rooms:        %u total: %llu succeeded, %llu failed as kvx counted them; %zu "
               "disagreed between ranks (%zu not concluded)\n",
               r->o->requests, (unsigned long long)r->csucceeded, (unsigned long long)r->cfailed,
               r->disagreed, r->unconcluded);
    }
    printf("bytes:        %.3f GB moved in %.1f s: %.2f GB/s (KV and aux rows, as kvx counted "
           "them)\n",
           (double)r->cbytes / 1e9, r->elapsed, rate(r->cbytes, r->elapsed));
    if (r->nlat > 0) {
        printf("latency:      p50 %.1f ms, p99 %.1f ms (pre-allocation to agreed SUCCESS)\n",
               r->p50, r->p99);
    } else {
        printf("latency:      not measured: no decode rank's records of a room that succeeded\n");
    }
    if (r->ntail > 0) {
        printf("tail:         p50 %.2f ms, p99 %.2f ms (a room's last KV computed on the prefill "
               "to agreed SUCCESS on the decode; %s, %.0f us of compute per layer of a step)\n",
               r->tail_p50, r->tail_p99,
               r->o->layerwise ? "each layer handed over as computed"
                               : "a step's chunk once computed",
               r->o->layer_us);
    } else {
        printf("tail:         not measured: no room that succeeded has records of both sides\n");
    }
    printf("verified:     %llu mismatched bytes in %.3f GB of KV (every head of every token of %zu "
           "rooms, and their first tokens)\n",
           (unsigned long long)r->mismatches, (double)r->bytes / 1e9, r->success);
    if (r->disagreed == 0 && r->lost_rooms > 0 && r->rep_heard > 0) {
        printf("agreement:    the %d ranks heard and the replacement's %d agreed on every room "
               "(rooms of a lost instance: state and status)\n",
               heard_count(r), r->rep_heard);
    } else if (r->disagreed == 0 && r->lost_rooms > 0) {
        printf("agreement:    the %d ranks heard agreed on every room (rooms of a lost instance: "
               "state and status)\n",
               heard_count(r));
    } else if (r->disagreed == 0) {
        printf("agreement:    all %d ranks of both instances agreed on every room (state; "
               "when failed, origin, stage and status)\n",
               world);
    } else {
        printf("agreement:    %zu rooms were not concluded identically on all %d ranks\n",
               r->disagreed, world);
        print_differ(r);
    }
    printf("decode pages: %llu granted in %llu runs (%.1f pages per run); %llu failed rooms "
           "kept theirs until the writers drained; %llu quarantined",
           (unsigned long long)d[1], (unsigned long long)d[2],
           d[2] ? (double)d[1] / (double)d[2] : 0.0, (unsigned long long)d[3],
           (unsigned long long)r->cquarantined);
    if (d[0] != r->cquarantined) {
        /* An instance sets a room's pages aside on every TP rank when one
         * of them got it quarantined. */
        printf(" (the demo set %llu aside: quarantined on a TP sibling)", (unsigned long long)d[0]);
    }
    if (r->csrc_quarantined > 0) {
        printf("; %llu prefill source pages quarantined", (unsigned long long)r->csrc_quarantined);
    }
    printf("\n");
    print_counters(r);
    printf("failures:     %llu rooms%s\n", (unsigned long long)r->cfailed,
           r->failed == 0                               ? ""
           : r->not_injected == 0 && r->lost_rooms == 0 ? ", every one injected"
           : r->not_injected == 0                       ? ", every one injected or by the loss"
                                                        : ", some NOT injected");
    print_failures(r);
    if (r->o->replay != NULL) {
        demo_replay_print(r->o, r->done_at);
    }
    print_lost(r);
    print_replacement(r);
}

/* Sets key of obj to value; the first failure (no memory, a string not
 * UTF-8) sticks in *bad. */
static void jset(json_t *obj, const char *key, json_t *value, int *bad)
{
    if (value == NULL || json_object_set_new(obj, key, value) != 0) {
        *bad = 1;
    }
}

static json_t *json_failures(const demo_report_t *r, int *bad)
{
    json_t *a = json_array();

    for (size_t g = 0; a != NULL && g < r->ngroups; g++) {
        const group_t *x = &r->groups[g];
        json_t *o = json_object();
        char origin[64];

        origin_name(r, x->origin, origin, sizeof(origin));
        if (o == NULL || json_array_append_new(a, o) != 0) {
            *bad = 1;
            break;
        }
        jset(o, "reason", json_string(kvx_status_name(x->status)), bad);
        jset(o, "origin", json_string(origin), bad);
        jset(o, "stage", json_string(kvx_stage_name(x->stage)), bad);
        jset(o, "injected", json_boolean(x->injected), bad);
        jset(o, "count", json_integer((json_int_t)x->rooms), bad);
    }
    return a;
}

static json_t *json_lost(const demo_report_t *r, int *bad)
{
    json_t *lost = json_object(), *reasons = json_array(), *before, *after;
    char names[256];

    if (lost == NULL || reasons == NULL) {
        json_decref(lost);
        json_decref(reasons);
        return NULL;
    }
    lost_names(r, names, sizeof(names));
    jset(lost, "instances", json_string(names), bad);
    jset(lost, "at_s", json_real(r->lost_at), bad);
    jset(lost, "rooms", json_integer((json_int_t)r->lost_rooms), bad);
    jset(lost, "rooms_failed", json_integer((json_int_t)r->lost_rooms_failed), bad);
    for (size_t g = 0; g < r->nlost_groups; g++) {
        const group_t *x = &r->lost_groups[g];
        char origin[64];
        json_t *o;

        origin_name(r, x->origin, origin, sizeof(origin));
        o = json_pack("{s:s, s:s, s:s, s:I}", "reason", kvx_status_name(x->status), "stage",
                      kvx_stage_name(x->stage), "origin", origin, "count", (json_int_t)x->rooms);

        if (o == NULL || json_array_append_new(reasons, o) != 0) {
            *bad = 1;
        }
    }
    jset(lost, "reasons", reasons, bad);
    before = json_pack("{s:I, s:f}", "rooms_success", (json_int_t)r->before, "gbps",
                       rate(r->bytes_before, r->lost_at));
    after = json_pack("{s:I, s:f}", "rooms_success", (json_int_t)r->after, "gbps",
                      rate(r->bytes_after, r->elapsed - r->lost_at));
    jset(lost, "others_before", before, bad);
    jset(lost, "others_after", after, bad);
    return lost;
}

static json_t *json_replacement(const demo_report_t *r, int *bad)
{
    const demo_replace_facts_t *f = &r->facts;
    json_t *o = json_object();

    if (o == NULL) {
        *bad = 1;
        return NULL;
    }
    jset(o, "instance", json_integer(f->instance), bad);
    jset(o, "failed", json_string(f->failed), bad);
    jset(o, "killed_s", f->killed_s >= 0 ? json_real(f->killed_s) : json_null(), bad);
    jset(o, "lost_s", json_real(r->lost_at), bad);
    jset(o, "spawn_s", json_real(f->spawn_s), bad);
    jset(o, "spawn_took_s", json_real(f->spawn_took), bad);
    jset(o, "joined_s", json_real(r->rep_joined_s), bad);
    jset(o, "first_success_s",
         r->rep_first_success >= 0 ? json_real(r->rep_first_success) : json_null(), bad);
    jset(o, "recovery_s", r->rep_first_success >= 0 ? json_real(recovery(r)) : json_null(), bad);
    jset(o, "ranks_heard", json_integer(r->rep_heard), bad);
    jset(o, "gap_requests", json_integer((json_int_t)r->rep_gap), bad);
    jset(o, "rooms", json_integer((json_int_t)r->rep_rooms), bad);
    jset(o, "rooms_success", json_integer((json_int_t)r->rep_success), bad);
    jset(o, "rooms_failed", json_integer((json_int_t)r->rep_failed), bad);
    return o;
}

/* Where the counts came from, and whether they match the demo's records. */
static json_t *json_counters(const demo_report_t *r, int *bad)
{
    json_t *c = json_object(), *from = json_array(), *missing = json_array(), *mism = json_array();
    int ok = c != NULL && from != NULL && missing != NULL && mism != NULL;

    for (int k = 0; ok && k < r->id.world_size; k++) {
        char name[64];

        rank_name(r, k, name, sizeof(name));
        if (pick_counting(r, k) && json_array_append_new(from, json_string(name)) != 0) {
            ok = 0;
        }
        if (pick_unavailable(r, k) && json_array_append_new(missing, json_integer(k)) != 0) {
            ok = 0;
        }
    }
    for (size_t i = 0; ok && i < r->nmismatch && i < sizeof(r->mismatch) / sizeof(r->mismatch[0]);
         i++) {
        ok = json_array_append_new(mism, json_string(r->mismatch[i])) == 0;
    }
    if (!ok) {
        json_decref(c);
        json_decref(from);
        json_decref(missing);
        json_decref(mism);
        *bad = 1;
        return NULL;
    }
    jset(c, "match", json_boolean(r->nmismatch == 0), bad);
    jset(c, "rooms_from", from, bad);
    jset(c, "rooms_complete", json_boolean(r->count_whole), bad);
    jset(c, "bytes_complete", json_boolean(r->bytes_whole), bad);
    jset(c, "unavailable_ranks", missing, bad);
    jset(c, "src_pages_quarantined", json_integer((json_int_t)r->csrc_quarantined), bad);
    jset(c, "mismatches", mism, bad);
    return c;
}

/* --json FILE: the summary as one JSON object, written with jansson. */
static int write_json(const demo_report_t *r, int ok)
{
    json_t *root = json_object(), *unreached = json_array();
    char layout[96];
    int bad = root == NULL || unreached == NULL;

    if (bad) {
        json_decref(root);
        json_decref(unreached);
        fprintf(stderr, "kvx-demo: no memory for the JSON summary\n");
        return -1;
    }
    jset(root, "rooms_total", json_integer(r->o->requests), &bad);
    jset(root, "rooms_success", json_integer((json_int_t)r->csucceeded), &bad);
    jset(root, "rooms_failed", json_integer((json_int_t)r->cfailed), &bad);
    jset(root, "rooms_disagreed", json_integer((json_int_t)r->disagreed), &bad);
    jset(root, "byte_mismatches", json_integer((json_int_t)r->mismatches), &bad);
    jset(root, "bytes", json_integer((json_int_t)r->cbytes), &bad);
    jset(root, "gbps", json_real(rate(r->cbytes, r->elapsed)), &bad);
    jset(root, "bytes_verified", json_integer((json_int_t)r->bytes), &bad);
    jset(root, "latency_ms", json_pack("{s:f, s:f}", "p50", r->p50, "p99", r->p99), &bad);
    jset(root, "tail_ms", json_pack("{s:f, s:f}", "p50", r->tail_p50, "p99", r->tail_p99), &bad);
    jset(root, "layerwise", json_boolean(r->o->layerwise), &bad);
    jset(root, "layer_us", json_real(r->o->layer_us), &bad);
    jset(root, "failures", json_failures(r, &bad), &bad);
    for (int k = 0; r->heard != NULL && k < r->id.world_size; k++) {
        if (!r->heard[k] && json_array_append_new(unreached, json_integer(k)) != 0) {
            bad = 1;
        }
    }
    jset(root, "unreachable_ranks", unreached, &bad);
    if (r->lost_rooms > 0) {
        jset(root, "lost", json_lost(r, &bad), &bad);
    }
    if (r->has_facts && (r->o->replace || r->facts.killed_s >= 0)) {
        jset(root, "replacement", json_replacement(r, &bad), &bad);
    }
    snprintf(layout, sizeof(layout), "prefill:%dx%d,decode:%dx%d", r->id.prefill_instances,
             r->id.prefill_tp, r->id.decode_instances, r->id.decode_tp);
    jset(root, "rooms_unconcluded", json_integer((json_int_t)r->unconcluded), &bad);
    jset(root, "quarantined_pages", json_integer((json_int_t)r->cquarantined), &bad);
    jset(root, "peers_lost", json_integer((json_int_t)r->cpeers_lost), &bad);
    jset(root, "counters", json_counters(r, &bad), &bad);
    jset(root, "seconds", json_real(r->elapsed), &bad);
    jset(root, "layout", json_string(layout), &bad);
    jset(root, "ok", json_boolean(ok), &bad);
    if (r->o->replay != NULL) {
        jset(root, "trace", demo_replay_json(r->o, r->done_at), &bad);
    }
    if (!bad &&
        json_dump_file(root, r->o->json,
                       JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10)) != 0) {
        perror(r->o->json);
        bad = 1;
    } else if (bad) {
        fprintf(stderr, "kvx-demo: the JSON summary could not be built; %s NOT written\n",
                r->o->json);
    }
    json_decref(root);
    return bad ? -1 : 0;
}

int demo_report_print(demo_report_t *r)
{
    int ok, printer = demo_xchg_first_heard(r->x);

    /* Every rank works the summary out from what it heard; the lowest rank
     * heard prints it. */
    compare(r);
    count(r);
    ok = r->unconcluded == 0 && r->disagreed == 0 && r->mismatches == 0 && r->not_injected == 0 &&
         r->nmismatch == 0 && replaced_whole(r);
    if (printer != r->id.world_rank) {
        return ok ? 0 : 1;
    }
    print_summary(r);
    if (r->o->json != NULL && write_json(r, ok) != 0) {
        ok = 0;
    }
    if (r->o->plot != NULL) {
        demo_replay_plot(r->o, r->done_at);
    }
    if (ok && r->lost_rooms > 0 && r->rep_heard > 0) {
        printf("kvx-demo: OK (%u rooms, %zu failed by the lost instance, %zu as injected, every "
               "other room succeeded, %zu of them on its replacement; the ranks heard agreed)\n",
               r->o->requests, r->lost_rooms_failed, r->failed - r->lost_rooms_failed,
               r->rep_success);
    } else if (ok && r->lost_rooms > 0) {
        printf("kvx-demo: OK (%u rooms, %zu failed by the lost instance, %zu as injected, every "
               "other room succeeded; the ranks heard agreed)\n",
               r->o->requests, r->lost_rooms_failed, r->failed - r->lost_rooms_failed);
    } else if (ok) {
        printf("kvx-demo: OK (%u rooms, %zu failed as injected, all ranks agreed)\n",
               r->o->requests, r->failed);
    } else {
        printf("kvx-demo: FAILED (%zu disagreed, %zu not concluded, %llu mismatched bytes, "
               "%zu failures not injected%s%s)\n",
               r->disagreed, r->unconcluded, (unsigned long long)r->mismatches, r->not_injected,
               r->nmismatch ? "; kvx's counters do NOT match the demo's records" : "",
               replaced_whole(r) ? "" : "; the lost instance was NOT replaced");
    }
    fflush(stdout);
    return ok ? 0 : 1;
}
