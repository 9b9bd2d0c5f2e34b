/*
 * serve.c - one instance's scheduler loop, run in lockstep by its TP ranks.
 *
 * Every step, on every TP rank of the instance:
 *   1. admit: open the next requests in order while a slot and their pages
 *      are free (decode: pre-allocate the pages and an aux slot; prefill:
 *      announce the room and its page count);
 *   2. start one round of agreement over the rooms not concluded yet;
 *   3. prefill: compute one step of chunked prefill (chunk_pages pages, the
 *      oldest rooms first) and hand each room's new pages to kvx;
 *   4. finish the round; record each room the instance agreed on (decode:
 *      check every byte of the heads this rank holds, and the aux token);
 *   5. close concluded rooms: a failed decode room may be refused (BUSY)
 *      until its writers confirmed that nothing is in flight, or come back
 *      QUARANTINED: then its pages are never reused;
 *   6. let the closed rooms go (their pages back to the allocator). The TP
 *      ranks must do this identically, so that their allocators stay the
 *      same and the next admissions are the same everywhere: a room agreed
 *      FAILED may close at different steps on different ranks, so every
 *      step ends with an MPI_Allreduce over the TP ranks that says which
 *      rooms every rank has closed (and whether any got QUARANTINED). The
 *      same collective decides the time limit together, the clock that
 *      admits the next --trace request (the slowest rank's: no rank opens a
 *      room before its arrival), the instances lost, and those that came
 *      back (--replace). It ends every step, not only the steps some rank
 *      found it needed: kvx refuses an open on the TP rank that saw its
 *      peer lost first while a sibling opens the same room, and a step
 *      with the collective on one rank and without it on another left them
 *      waiting for each other until KVX_TP_TIMEOUT (a whole decode instance
 *      killed mid-run did so).
 *
 * An instance of the other role that lost a rank cannot serve any more.
 * Once a room with it failed here with KVX_ERR_PEER_LOST (on any TP rank:
 * the step's collective tells them all at once), this instance offers it
 * nothing more, as a router stops sending to a dead instance. Requests are
 * routed up front, so the ones routed to it fail at once without a room
 * (KVX_ERR_PEER_LOST, stage bootstrap; the summary counts them with the
 * refused rooms, which kvx never opened either) rather than in one room
 * after another that kvx fails at once: a run ends soon after it lost the
 * instances it depends on.
 */
#include "demo.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* --replace: an instance that came back. A prefill instance, once its TP
 * ranks agree the place of a lost decode instance is usable again (a
 * replacement joined it: kvx_ctx_pair_status() KVX_OK), routes that
 * instance's requests to it again from its next one on, and first sends it
 * a one-page hello room whose aux row is that request's index. The
 * replacement opens a hello room with every prefill instance as it starts,
 * and serves a prefill instance's requests from the one its hello named
 * (the earlier ones were failed by that prefill instance). Hello pages are
 * never given back, on either side: a failed room may close at different
 * steps on different TP ranks, and the allocators must stay the same. */
enum { HELLO_NONE, HELLO_OPEN, HELLO_AGREED, HELLO_CLOSED };
#define HELLO_ID(prefill, decode) ((1ull << 63) | ((uint64_t)(prefill) << 20) | (uint64_t)(decode))

struct demo_flight {
    const demo_req_t *req; /* NULL: a free slot */
    int peer_gen;          /* peer_gen[] of its peer instance when it was admitted */
    int refused;           /* kvx refused its open on this rank */
    int sibling_done;      /* a refusal on some TP rank was recorded (sibling_refusals()) */
    size_t mine;           /* its index in mine[] and out[] */
    uint32_t *pages;
    uint32_t aux_slot;
    uint32_t sent; /* prefill: pages computed and handed over */
    int dead;      /* prefill: the room failed here, computing it is waste */
    int agreed;    /* the instance agreed on its outcome (recorded in out[]) */
    int closed;    /* 0: open here; 1: closed; 2: closed, pages quarantined */
    int drained;   /* its close was refused while writers drained */
    uint64_t seq;  /* admission order */
    double t_open;
    double t_computed;           /* prefill: its last KV was computed */
    uint32_t step_first, step_n; /* prefill: its pages in the step being computed */
};

double demo_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

size_t demo_pool_pages(const demo_opts_t *o)
{
    size_t P = o->kv.page_size, max = (o->max_tokens + P - 1) / P,
           mean = ((size_t)o->min_tokens + o->max_tokens + 1) / 2;
    size_t fit = ((size_t)o->concurrency * mean + P - 1) / P;

    if (o->pool_pages != 0) {
        return o->pool_pages;
    }
    if (o->kill_instance >= 0 || o->replace || o->replacement_of >= 0) {
        /* A prefill rank never reuses the source pages of rooms that were
         * in flight to an instance that died (kvx quarantines them once
         * KVX_DRAIN_TIMEOUT passed): room for as many rooms again. */
        fit += (size_t)o->concurrency * max;
    }
    return fit > max ? fit : max;
}

size_t demo_aux_slots(const demo_opts_t *o)
{
    return 2 * (size_t)o->concurrency;
}

static int is_decode(const demo_serve_t *s)
{
    return s->id.role == KVX_ROLE_DECODE;
}

int demo_serve_init(demo_serve_t *s, const demo_opts_t *o, kvx_ctx_t *ctx, const demo_req_t *reqs,
                    size_t num_pages)
{
    unsigned C = o->concurrency;
    size_t np;

    memset(s, 0, sizeof(*s));
    s->o = o;
    s->ctx = ctx;
    s->reqs = reqs;
    s->slots = C;
    kvx_ctx_identity(ctx, &s->id);
    s->tp = kvx_ctx_tp_comm(ctx);
    s->mine = calloc(o->requests, sizeof(uint32_t));
    s->out = calloc(o->requests, sizeof(demo_outcome_t));
    s->flight = calloc(C, sizeof(demo_flight_t));
    s->npeer_instances = is_decode(s) ? s->id.prefill_instances : s->id.decode_instances;
    np = (size_t)s->npeer_instances;
    s->replacement = o->replacement_of >= 0;
    /* A round holds the flights and the hello rooms. */
    s->ids = calloc(C + np, sizeof(uint64_t));
    s->round = calloc(C + np, sizeof(unsigned));
    s->agreed = calloc(C + np, sizeof(kvx_agreed_t));
    s->sync = calloc(4 * (size_t)C + 3 + 2 * np, sizeof(int));
    s->peer_seen = calloc(np, sizeof(int));
    s->peer_shunned = calloc(np, sizeof(int));
    s->peer_gen = calloc(np, sizeof(int));
    s->hello = calloc(np, sizeof(demo_hello_t));
    s->first_req = malloc(np * sizeof(int64_t));
    if (s->mine == NULL || s->out == NULL || s->flight == NULL || s->ids == NULL ||
        s->round == NULL || s->agreed == NULL || s->sync == NULL || s->peer_seen == NULL ||
        s->peer_shunned == NULL || s->peer_gen == NULL || s->hello == NULL ||
        s->first_req == NULL || demo_kv_init(&s->kv, ctx, &o->kv, num_pages) != 0 ||
        demo_alloc_init(&s->pages, num_pages) != 0 ||
        demo_alloc_init(&s->aux, demo_aux_slots(o)) != 0) {
        return -1;
    }
    for (size_t k = 0; k < np; k++) {
        s->first_req[k] = -1;
    }
    for (uint32_t i = 0; i < o->requests; i++) {
        int inst = is_decode(s) ? reqs[i].decode : reqs[i].prefill;

        if (inst == s->id.instance) {
            s->out[s->nmine].req = i;
            s->out[s->nmine].rank = s->id.world_rank;
            s->out[s->nmine].replacement = (uint32_t)s->replacement;
            s->mine[s->nmine++] = i;
        }
    }
    return 0;
}

void demo_serve_cleanup(demo_serve_t *s)
{
    for (unsigned i = 0; s->flight != NULL && i < s->slots; i++) {
        free(s->flight[i].pages);
    }
    free(s->mine);
    free(s->out);
    free(s->flight);
    free(s->ids);
    free(s->round);
    free(s->agreed);
    free(s->sync);
    free(s->peer_seen);
    free(s->peer_shunned);
    free(s->peer_gen);
    free(s->hello);
    free(s->first_req);
    free(s->texts);
    demo_kv_cleanup(&s->kv);
    demo_alloc_cleanup(&s->pages);
    demo_alloc_cleanup(&s->aux);
}

/* ---- 1. admission ---------------------------------------------------------------- */

/* A request that failed on this rank without a room kvx knows of. */
static void fail_unopened(demo_serve_t *s, demo_outcome_t *out, kvx_status_t st)
{
    out->concluded = 1;
    out->state = KVX_ROOM_FAILED;
    out->status = st;
    out->stage = KVX_STAGE_BOOTSTRAP;
    out->origin = s->id.world_rank;
    out->origin_role = s->id.role;
    out->at_s = demo_now() - s->t0;
}

/* A room kvx refused to open fails here. The refusal may depend on what
 * only this rank saw (its peer lost a moment before its siblings saw it):
 * the step's collective tells the siblings, which fail the room the same
 * way (sibling_refusals()). */
static void open_failed(demo_serve_t *s, demo_flight_t *f, kvx_status_t st)
{
    fprintf(stderr, "kvx-demo: rank %d: room %llu: %s refused: %s\n", s->id.world_rank,
            (unsigned long long)f->req->id, is_decode(s) ? "recv_open" : "send_open",
            kvx_status_name(st));
    fail_unopened(s, &s->out[f->mine], st);
    f->agreed = 1;
    f->closed = 1;
    f->refused = 1;
}

/* Rooms kvx refused to open on some TP rank (origin[i] its world rank + 1,
 * minus_status[i] minus the status, both the collective's maximum): every
 * TP rank records the same refusal, and a rank that opened the room aborts
 * it now, keeping kvx's own failure of it for the counters. Without this
 * the ranks that opened it would wait KVX_TP_TIMEOUT for the one that
 * could not, and conclude another reason. */
static void sibling_refusals(demo_serve_t *s, const int *origin, const int *minus_status)
{
    for (unsigned i = 0; i < s->slots; i++) {
        demo_flight_t *f = &s->flight[i];
        demo_outcome_t *out;
        kvx_failure_t why;

        if (f->req == NULL || origin[i] == 0 || f->sibling_done) {
            continue;
        }
        f->sibling_done = 1;
        out = &s->out[f->mine];
        if (!f->refused) {
            if (!f->closed) {
                kvx_room_abort(s->ctx, f->req->id, "refused on a TP sibling");
            }
            out->sibling_refused = 1;
            out->kstatus = out->status; /* what it concluded here, if it did */
            out->kstage = out->stage;
            out->krole = out->origin_role;
            if (!f->closed && kvx_room_failure(s->ctx, f->req->id, &why) == KVX_OK) {
                out->kstatus = why.status;
                out->kstage = why.stage;
                out->krole = why.origin_role;
            }
            f->dead = 1;
            f->agreed = 1; /* closed by serve_close(), now or when UCX let go */
        }
        fail_unopened(s, out, -minus_status[i]);
        out->origin = origin[i] - 1;
        out->origin_role = s->id.role;
    }
}

static int peer_instance(const demo_serve_t *s, const demo_req_t *r)
{
    return is_decode(s) ? r->prefill : r->decode;
}

static int admit_one(demo_serve_t *s, demo_flight_t *f)
{
    const demo_req_t *r = &s->reqs[s->mine[s->next]];
    kvx_status_t st;

    if (s->pages.cap - s->pages.lost < r->npages) {
        /* Quarantines left the pool too small for it, now and for good:
         * it fails here rather than wait at the head forever (the same on
         * every TP rank: pages are lost together). */
        fprintf(stderr,
                "kvx-demo: rank %d: request %u needs %u pages; %zu of this rank's %zu are left "
                "after quarantines: it fails without a room\n",
                s->id.world_rank, r->index, r->npages, s->pages.cap - s->pages.lost, s->pages.cap);
        fail_unopened(s, &s->out[s->next], KVX_ERR_NO_MEMORY);
        s->next++;
        s->done++;
        s->failed++;
        return 1;
    }
    if (is_decode(s) && !s->replacement && s->o->kill_instance == s->id.instance &&
        s->seq >= s->o->kill_after) {
        demo_replace_kill(s); /* --kill-decode: every TP rank at this same step */
    }
    if (r->arrival > s->clock || s->pages.count < r->npages ||
        (is_decode(s) && s->aux.count == 0) ||
        (f->pages = malloc(r->npages * sizeof(uint32_t))) == NULL) {
        return 0;
    }
    demo_alloc_take(&s->pages, r->npages, f->pages);
    f->req = r;
    f->peer_gen = s->peer_gen[peer_instance(s, r)];
    f->mine = s->next++;
    f->seq = s->seq++;
    f->t_open = demo_now();
    if (is_decode(s)) {
        demo_alloc_take(&s->aux, 1, &f->aux_slot);
        st = kvx_room_recv_open(s->ctx, r->id, r->prefill, f->pages, r->npages, f->aux_slot);
    } else {
        st = kvx_room_send_open(s->ctx, r->id, r->decode, r->npages);
    }
    if (st != KVX_OK) {
        open_failed(s, f, st);
    } else {
        s->out[f->mine].opened = 1;
    }
    return 1;
}

/* The replacement: the requests at the head that a prefill instance routed
 * here before its hello named the first one it routes here again (it
 * failed those itself), or of a prefill instance that sent no hello by the
 * job's end, are not this instance's: passed over without a record. */
static int skip_unserved(demo_serve_t *s)
{
    int busy = 0;

    while (s->replacement && s->next < s->nmine) {
        const demo_req_t *r = &s->reqs[s->mine[s->next]];
        int64_t first = s->first_req[r->prefill];

        if ((first < 0 && !s->end_seen) || (first >= 0 && r->index >= (uint64_t)first)) {
            break;
        }
        s->next++;
        busy = 1;
    }
    return busy;
}

/* The replacement: the request at the head is of a prefill instance that
 * has not said yet from which request on it routes here: it waits. */
static int head_held(const demo_serve_t *s)
{
    return s->replacement && s->next < s->nmine && !s->end_seen &&
           s->first_req[s->reqs[s->mine[s->next]].prefill] < 0;
}

/* The requests at the head that arrived and are routed to an instance the
 * TP ranks agreed is lost fail here, without a room: the same on every TP
 * rank (peer_shunned changes only with the collective). */
static int skip_shunned(demo_serve_t *s)
{
    int busy = 0;

    while (s->next < s->nmine) {
        const demo_req_t *r = &s->reqs[s->mine[s->next]];

        if (r->arrival > s->clock || !s->peer_shunned[peer_instance(s, r)]) {
            break;
        }
        fail_unopened(s, &s->out[s->next], KVX_ERR_PEER_LOST);
        s->next++;
        s->done++;
        s->failed++;
        busy = 1;
    }
    return busy;
}

static int serve_admit(demo_serve_t *s)
{
    int busy = skip_shunned(s) | skip_unserved(s);

    for (unsigned i = 0; i < s->slots && s->next < s->nmine; i++) {
        busy |= skip_shunned(s) | skip_unserved(s);
        if (s->next == s->nmine || head_held(s)) {
            break;
        }
        if (s->flight[i].req == NULL) {
            if (!admit_one(s, &s->flight[i])) {
                break; /* first come, first served: the head waits for pages */
            }
            busy = 1;
        }
    }
    return busy;
}

/* ---- 3. chunked prefill ------------------------------------------------------------ */

/* The oldest room that still has pages to compute, or NULL. */
static demo_flight_t *next_to_compute(demo_serve_t *s)
{
    demo_flight_t *best = NULL;

    for (unsigned i = 0; i < s->slots; i++) {
        demo_flight_t *f = &s->flight[i];

        if (f->req != NULL && !f->dead && !f->agreed && f->sent < f->req->npages &&
            (best == NULL || f->seq < best->seq)) {
            best = f;
        }
    }
    return best;
}

/* A layer's compute time for a step of n pages (--layer-us is a full
 * step's): a busy wait, as a forward pass holds the GPU. */
static void compute_layer(const demo_serve_t *s, uint32_t n)
{
    double end = demo_now() + s->o->layer_us * 1e-6 * n / s->o->chunk_pages;

    while (s->o->layer_us > 0 && demo_now() < end) {
    }
}

/* Hands over the step's pages of a room: one layer (layer-wise), or every
 * layer (layer < 0). The room's last hand-over carries the first token. */
static void hand_over(demo_serve_t *s, demo_flight_t *f, int layer)
{
    uint32_t token = demo_first_token(f->req->id);
    int last = f->step_first + f->step_n == f->req->npages &&
               (layer < 0 || (unsigned)layer + 1 == s->kv.kv.layers);
    kvx_status_t st;

    if (f->dead) {
        return;
    }
    if (last) {
        f->t_computed = demo_now();
    }
    st = layer < 0 ? kvx_room_send_chunk(s->ctx, f->req->id, f->pages + f->step_first, f->step_n,
                                         last ? &token : NULL, last ? sizeof(token) : 0)
                   : kvx_room_send_layers(s->ctx, f->req->id, f->pages + f->step_first, f->step_n,
                                          (unsigned)layer, 1, NULL, last ? &token : NULL,
                                          last ? sizeof(token) : 0);
    if (st != KVX_OK) {
        if (st != KVX_ERR_STATE) { /* STATE: it failed since the poll */
            fprintf(stderr, "kvx-demo: rank %d: room %llu: %s: %s\n", s->id.world_rank,
                    (unsigned long long)f->req->id, layer < 0 ? "send_chunk" : "send_layers",
                    kvx_status_name(st));
        }
        f->dead = 1;
    }
}

/* One prefill step: chunk_pages pages of KV of the oldest rooms, computed
 * layer by layer into the rooms' pages. Each layer is handed over as it is
 * computed (--layerwise), or each room's pages of the step as one chunk
 * once every layer is. A room that failed meanwhile is not computed
 * further. */
static int serve_compute(demo_serve_t *s)
{
    unsigned budget = s->o->chunk_pages, layers = s->kv.kv.layers;
    uint32_t total = 0;
    demo_flight_t *f;

    while (budget > 0 && (f = next_to_compute(s)) != NULL) {
        uint32_t n = f->req->npages - f->sent < budget ? f->req->npages - f->sent : budget;
        kvx_room_state_t state;

        if (kvx_room_poll(s->ctx, f->req->id, &state) != KVX_OK || state == KVX_ROOM_FAILED) {
            f->dead = 1;
            continue;
        }
        f->step_first = f->sent;
        f->step_n = n;
        f->sent += n;
        budget -= n;
        total += n;
    }
    for (unsigned l = 0; total > 0 && l < layers; l++) {
        compute_layer(s, total);
        for (unsigned i = 0; i < s->slots; i++) {
            f = &s->flight[i];
            if (f->req != NULL && f->step_n > 0 && !f->dead) {
                demo_kv_layer(&s->kv, f->req->id, f->pages, f->step_first, f->step_n, l);
                if (s->o->layerwise) {
                    hand_over(s, f, (int)l);
                }
            }
        }
    }
    for (unsigned i = 0; total > 0 && i < s->slots; i++) {
        f = &s->flight[i];
        if (f->req != NULL && f->step_n > 0 && !s->o->layerwise) {
            hand_over(s, f, -1);
        }
        f->step_n = 0;
    }
    return total > 0;
}

/* ---- 2, 4. agreement and what was agreed ------------------------------------------- */

/* The rooms not agreed yet: the flights', then the hello rooms' (their slot
 * in round[] is slots + the peer instance). */
static size_t round_ids(demo_serve_t *s)
{
    size_t n = 0;

    for (unsigned i = 0; i < s->slots; i++) {
        demo_flight_t *f = &s->flight[i];

        if (f->req != NULL && !f->agreed) {
            s->round[n] = i;
            s->ids[n++] = f->req->id;
        }
    }
    for (int k = 0; k < s->npeer_instances; k++) {
        if (s->hello[k].state == HELLO_OPEN) {
            s->round[n] = s->slots + (unsigned)k;
            s->ids[n++] = s->hello[k].id;
        }
    }
    return n;
}

static void keep_text(demo_serve_t *s, uint32_t req, const kvx_failure_t *why)
{
    if (s->ntexts == s->cap_texts) {
        size_t cap = s->cap_texts ? 2 * s->cap_texts : 64;
        demo_text_t *t = realloc(s->texts, cap * sizeof(*t));

        if (t == NULL) {
            return;
        }
        s->texts = t;
        s->cap_texts = cap;
    }
    s->texts[s->ntexts].req = req;
    kvx_failure_format(why, s->texts[s->ntexts].line, sizeof(s->texts[0].line));
    s->ntexts++;
}

/* Decode: every byte of the heads this rank holds, and the aux token. */
static uint64_t verify(demo_serve_t *s, const demo_flight_t *f)
{
    uint32_t token = 0, want = demo_first_token(f->req->id);
    size_t len = 0;
    uint64_t bad = demo_kv_pages(&s->kv, f->req->id, f->pages, 0, f->req->npages, 1);

    if (kvx_room_aux(s->ctx, f->req->id, &token, sizeof(token), &len) != KVX_OK ||
        len != sizeof(token)) {
        bad += sizeof(token);
    } else {
        for (unsigned b = 0; b < sizeof(token); b++) {
            bad += ((token >> (8 * b)) & 0xff) != ((want >> (8 * b)) & 0xff);
        }
    }
    if (bad > 0) {
        fprintf(stderr, "kvx-demo: rank %d: room %llu: %llu bytes differ\n", s->id.world_rank,
                (unsigned long long)f->req->id, (unsigned long long)bad);
    }
    return bad;
}

static void conclude(demo_serve_t *s, demo_flight_t *f, kvx_room_state_t state)
{
    demo_outcome_t *out = &s->out[f->mine];
    kvx_failure_t why;

    f->agreed = 1;
    out->concluded = 1;
    out->state = state;
    if (state == KVX_ROOM_FAILED && kvx_room_failure(s->ctx, f->req->id, &why) == KVX_OK) {
        out->status = why.status;
        out->stage = why.stage;
        out->origin = why.origin_rank;
        out->origin_role = why.origin_role;
        out->injected = (why.flags & KVX_FAILURE_INJECTED) != 0;
        /* Not when this instance lost a TP rank: that fails its rooms too;
         * nor for a room admitted before its peer instance came back. */
        s->peer_seen[peer_instance(s, f->req)] |=
            why.status == KVX_ERR_PEER_LOST && !s->broken &&
            f->peer_gen == s->peer_gen[peer_instance(s, f->req)];
        if (is_decode(s) && s->id.tp_rank == 0) {
            keep_text(s, out->req, &why);
        }
    }
    /* Every rank says when it concluded: with a whole decode instance lost,
     * only the prefill ranks tell when its rooms failed. */
    out->at_s = demo_now() - s->t0;
    if (!is_decode(s)) {
        out->computed_s = f->t_computed > 0 ? f->t_computed - s->t0 : 0;
        return;
    }
    out->latency_ms = (demo_now() - f->t_open) * 1e3;
    out->agreed_s = demo_now() - s->t0;
    if (state == KVX_ROOM_SUCCESS) {
        out->mismatches = verify(s, f);
        out->bytes =
            (uint64_t)f->req->npages * kvx_ctx_page_bytes(s->ctx) * s->kv.kv.layers * s->kv.comps;
    }
}

/* Records the rooms the instance agreed on in this round. Returns whether
 * any was, or -1 when a room vanished.
 *
 * The outcome is read from the room (kvx_room_info().agreed) rather than
 * from the round's out[]: kvx_agree_test() reports, for a room that got its
 * place in the agreement table during this very round, the outcome of the
 * room that held that place before (src/core/agree/agree.c, agree_report()), so a
 * room still BOOTSTRAPPING can come back "agreed SUCCESS". */
/* A hello room the instance agreed on. The prefill: a failed one means the
 * instance cannot serve after all (its loss is seen again, and it is
 * shunned at the next collective). The replacement: the first request the
 * prefill instance routes here, from the aux row; a failed hello, none. */
static void hello_conclude(demo_serve_t *s, int k, kvx_room_state_t state)
{
    demo_hello_t *h = &s->hello[k];
    uint32_t first = s->o->requests;
    size_t len = 0;
    kvx_failure_t why;
    char line[256] = "";

    h->state = HELLO_AGREED;
    if (state != KVX_ROOM_SUCCESS && kvx_room_failure(s->ctx, h->id, &why) == KVX_OK) {
        kvx_failure_format(&why, line, sizeof(line));
        if (s->hellos[2] < DEMO_HELLO_FAILS) { /* kvx counts it: so must the records */
            s->hello_fail[s->hellos[2]][0] = why.stage;
            s->hello_fail[s->hellos[2]][1] = why.origin_role;
            s->hello_fail[s->hellos[2]][2] = why.status;
        }
    }
    s->hellos[state == KVX_ROOM_SUCCESS ? 1 : 2]++;
    if (!is_decode(s)) {
        if (state != KVX_ROOM_SUCCESS) {
            s->peer_seen[k] = 1;
            fprintf(stderr, "kvx-demo: rank %d: the hello to decode[%d] failed: %s\n",
                    s->id.world_rank, k, line);
        }
        return;
    }
    if (state == KVX_ROOM_SUCCESS &&
        (kvx_room_aux(s->ctx, h->id, &first, sizeof(first), &len) != KVX_OK ||
         len != sizeof(first) || first > s->o->requests)) {
        first = s->o->requests;
        snprintf(line, sizeof(line), "its aux row is not a request's index");
    }
    s->first_req[k] = first;
    if (s->id.tp_rank == 0) {
        if (first < s->o->requests) {
            printf("kvx-demo: replacement decode[%d]: prefill[%d] routes its requests here "
                   "from request %u on\n",
                   s->id.instance, k, first);
        } else {
            printf("kvx-demo: replacement decode[%d]: no request of prefill[%d] comes here "
                   "(%s)\n",
                   s->id.instance, k, line[0] ? line : "it has none left");
        }
        fflush(stdout);
    }
}

static int serve_conclude(demo_serve_t *s, size_t n)
{
    int busy = 0;

    for (size_t k = 0; k < n; k++) {
        demo_flight_t *f;
        kvx_room_info_t info;

        if (s->round[k] >= s->slots) {
            int peer = (int)(s->round[k] - s->slots);

            if (kvx_room_info(s->ctx, s->hello[peer].id, &info) == KVX_OK && info.agreed) {
                hello_conclude(s, peer, info.agreed_state);
                busy = 1;
            }
            continue;
        }
        f = &s->flight[s->round[k]];

        if (s->agreed[k].status == KVX_ERR_NO_ROOM ||
            kvx_room_info(s->ctx, f->req->id, &info) != KVX_OK) {
            /* Only this rank knows: the TP ranks could not stay in step. */
            fprintf(stderr, "kvx-demo: rank %d: room %llu vanished\n", s->id.world_rank,
                    (unsigned long long)f->req->id);
            return -1;
        }
        if (info.agreed) {
            conclude(s, f, info.agreed_state);
            busy = 1;
        }
    }
    return busy;
}

/* ---- 5, 6. closing, and leaving the instance together ------------------------------ */

static void serve_close(demo_serve_t *s)
{
    for (int k = 0; k < s->npeer_instances; k++) {
        demo_hello_t *h = &s->hello[k];

        if (h->state == HELLO_AGREED && kvx_room_close(s->ctx, h->id) != KVX_ERR_BUSY) {
            h->state = HELLO_CLOSED; /* its page (and aux slot) stay taken */
        }
    }
    for (unsigned i = 0; i < s->slots; i++) {
        demo_flight_t *f = &s->flight[i];
        kvx_status_t st;

        if (f->req == NULL || !f->agreed || f->closed) {
            continue;
        }
        st = kvx_room_close(s->ctx, f->req->id);
        while (st == KVX_ERR_BUSY && s->out[f->mine].state == KVX_ROOM_SUCCESS) {
            /* Not expected (a SUCCESS room's pages are released), but the
             * TP ranks count on a SUCCESS room closing in this step. */
            usleep(100);
            st = kvx_room_close(s->ctx, f->req->id);
        }
        if (st == KVX_ERR_BUSY) {
            /* A writer has not confirmed the drain yet: again next step. */
            s->drain_waits += !f->drained;
            f->drained = 1;
            continue;
        }
        f->closed = st == KVX_ERR_QUARANTINED ? 2 : 1;
        if (st != KVX_OK && st != KVX_ERR_QUARANTINED) {
            fprintf(stderr, "kvx-demo: rank %d: room %llu: close: %s\n", s->id.world_rank,
                    (unsigned long long)f->req->id, kvx_status_name(st));
        }
    }
}

/* Closed on every TP rank: the pages go back, unless some rank was told
 * they are quarantined (then no rank reuses them: page ids stay the same
 * on every TP rank). */
static void retire(demo_serve_t *s, demo_flight_t *f, int quarantined)
{
    const demo_outcome_t *out = &s->out[f->mine];

    if (quarantined) {
        demo_alloc_lose(&s->pages, f->req->npages);
        demo_alloc_lose(&s->aux, 1); /* only a decode room is ever quarantined */
        s->quarantined_pages += f->req->npages;
    } else {
        demo_alloc_give(&s->pages, f->pages, f->req->npages);
        if (is_decode(s)) {
            demo_alloc_give(&s->aux, &f->aux_slot, 1);
        }
    }
    s->done++;
    s->failed += out->state == KVX_ROOM_FAILED;
    s->bytes += out->bytes;
    free(f->pages);
    memset(f, 0, sizeof(*f));
}

/* When the time limit passes, every TP rank gives up on the same step:
 * what is still open is closed (aborted) and counts as not concluded. */
static void give_up(demo_serve_t *s)
{
    size_t open = 0;

    for (unsigned i = 0; i < s->slots; i++) {
        demo_flight_t *f = &s->flight[i];

        if (f->req != NULL && !f->closed) {
            kvx_room_close(s->ctx, f->req->id);
            open++;
        }
    }
    fprintf(stderr,
            "kvx-demo: rank %d: time limit of %.0f s: %zu rooms still open, %zu never opened\n",
            s->id.world_rank, s->o->time_limit, open, s->nmine - s->next);
}

/* The instances of the other role some TP rank saw lost: offered nothing
 * more from now on (skip_shunned()). */
static void shun_lost(demo_serve_t *s, const int *seen)
{
    for (int k = 0; k < s->npeer_instances; k++) {
        if (seen[k] && !s->peer_shunned[k]) {
            s->peer_shunned[k] = 1;
            fprintf(stderr,
                    "kvx-demo: rank %d: %s[%d] is lost: the requests routed to it are not "
                    "offered any more (they fail as peer lost, without a room)\n",
                    s->id.world_rank, is_decode(s) ? "prefill" : "decode", k);
        }
    }
}

/* A prefill instance routes a lost decode instance's requests to it again:
 * its TP ranks agreed a replacement took the place. The hello names the
 * first; the rooms from it on are opened as any (the replacement opens its
 * side once the hello reached it; until then kvx holds them). */
static void cut_over(demo_serve_t *s, int k)
{
    demo_hello_t *h = &s->hello[k];
    uint32_t first = s->next < s->nmine ? s->mine[s->next] : s->o->requests;
    kvx_status_t st;

    if (s->pages.count == 0) {
        return; /* at a later collective */
    }
    demo_alloc_take(&s->pages, 1, &h->page);
    demo_alloc_lose(&s->pages, 1);
    h->id = HELLO_ID(s->id.instance, k);
    st = kvx_room_send_open(s->ctx, h->id, k, 1);
    if (st == KVX_OK) {
        s->hellos[0]++;
        h->state = HELLO_OPEN;
        st = kvx_room_send_chunk(s->ctx, h->id, &h->page, 1, &first, sizeof(first));
    }
    if (st != KVX_OK) {
        /* It fails (or is refused) here: the instance stays shunned. */
        fprintf(stderr, "kvx-demo: rank %d: the hello to decode[%d]: %s\n", s->id.world_rank, k,
                kvx_status_name(st));
        h->state = h->state == HELLO_OPEN ? HELLO_OPEN : HELLO_CLOSED;
        return;
    }
    s->peer_shunned[k] = 0;
    s->peer_seen[k] = 0;
    s->peer_gen[k]++;
    if (s->id.tp_rank == 0) {
        printf("kvx-demo: prefill[%d]: decode[%d] is back (a replacement joined in its place): "
               "its requests from request %u on go to it again\n",
               s->id.instance, k, first);
        fflush(stdout);
    }
}

/* What the collective said of replacements: a prefill instance routes to
 * one whose place every TP rank sees usable again; the replacement, once
 * the job said it ends, waits for no hello any more (each still open is
 * given up). */
static void replacements(demo_serve_t *s, const int *pair_bad, int ended)
{
    for (int k = 0; k < s->npeer_instances; k++) {
        demo_hello_t *h = &s->hello[k];

        if (s->o->replace && !is_decode(s) && s->peer_shunned[k] && !pair_bad[k] &&
            h->state == HELLO_NONE) {
            cut_over(s, k);
        }
        if (s->replacement && ended && h->state == HELLO_OPEN) {
            kvx_room_close(s->ctx, h->id);
            h->state = HELLO_CLOSED;
        }
    }
    s->end_seen |= s->replacement && ended;
}

/* Is a hello room not closed yet? The instance does not end before. */
static int hello_pending(const demo_serve_t *s)
{
    for (int k = 0; k < s->npeer_instances; k++) {
        if (s->hello[k].state == HELLO_OPEN || s->hello[k].state == HELLO_AGREED) {
            return 1;
        }
    }
    return 0;
}

/* Retires the rooms every TP rank closed. Returns 1 when this instance is
 * done (all its requests, or the time limit). */
static int serve_sync(demo_serve_t *s, int *busy)
{
    unsigned C = s->slots;
    int *v = s->sync, used = 0, np = s->npeer_instances;
    int *seen = v + 2 * C + 2, *pair_bad = seen + np, *ended = pair_bad + np;
    int *refused = ended + 1, *minus_status = refused + C;

    for (unsigned i = 0; i < C; i++) {
        const demo_flight_t *f = &s->flight[i];

        v[i] = f->req != NULL && f->closed == 0;
        v[C + i] = f->req != NULL && f->closed == 2;
        refused[i] = f->req != NULL && f->refused ? s->id.world_rank + 1 : 0;
        minus_status[i] = f->req != NULL && f->refused ? -s->out[f->mine].status : 0;
    }
    v[2 * C] = demo_now() - s->t0 > s->o->time_limit;
    v[2 * C + 1] = -(int)((demo_now() - s->t0) * 1e3); /* the max of minus: the slowest clock */
    for (int k = 0; k < np; k++) {
        seen[k] = s->peer_seen[k];
        /* Asked of every peer instance: one this very collective finds
         * lost is not usable either. */
        pair_bad[k] =
            s->o->replace && !is_decode(s) && kvx_ctx_pair_status(s->ctx, k, NULL) != KVX_OK;
    }
    *ended = demo_replace_ended(s->replacement ? s->rp : NULL);
    if (s->broken) {
        /* No collective over a broken instance: this rank alone decides. */
        s->clock = demo_now() - s->t0;
        shun_lost(s, seen);
        replacements(s, pair_bad, *ended);
    } else {
        MPI_Allreduce(MPI_IN_PLACE, v, (int)(4 * C + 3) + 2 * np, MPI_INT, MPI_MAX, s->tp);
        s->clock = -v[2 * C + 1] / 1e3;
        sibling_refusals(s, refused, minus_status);
        shun_lost(s, seen);
        replacements(s, pair_bad, *ended);
    }
    s->steps++;
    for (unsigned i = 0; i < C; i++) {
        if (s->flight[i].req != NULL && !v[i]) {
            retire(s, &s->flight[i], v[C + i]);
            *busy = 1;
        }
        used += s->flight[i].req != NULL;
    }
    if (v[2 * C]) {
        give_up(s);
        return 1;
    }
    return used == 0 && s->next == s->nmine && !hello_pending(s);
}

/* ---- the loop ------------------------------------------------------------------------ */

/* The replacement, as it starts: a hello room with every prefill instance,
 * for the first request it routes here. One refused here means none comes
 * from that instance. */
static void hello_await_all(demo_serve_t *s)
{
    for (int k = 0; s->replacement && k < s->npeer_instances; k++) {
        demo_hello_t *h = &s->hello[k];
        kvx_status_t st = KVX_ERR_NO_MEMORY;

        h->id = HELLO_ID(k, s->id.instance);
        if (s->pages.count > 0 && s->aux.count > 0) {
            demo_alloc_take(&s->pages, 1, &h->page);
            demo_alloc_take(&s->aux, 1, &h->aux_slot);
            demo_alloc_lose(&s->pages, 1);
            demo_alloc_lose(&s->aux, 1);
            st = kvx_room_recv_open(s->ctx, h->id, k, &h->page, 1, h->aux_slot);
        }
        if (st == KVX_OK) {
            s->hellos[0]++;
            h->state = HELLO_OPEN;
        } else {
            fprintf(stderr, "kvx-demo: rank %d: the hello from prefill[%d]: %s\n", s->id.world_rank,
                    k, kvx_status_name(st));
            h->state = HELLO_CLOSED;
            s->first_req[k] = s->o->requests;
        }
    }
}

int demo_serve_run(demo_serve_t *s)
{
    unsigned idle = 0;

    hello_await_all(s);
    for (;;) {
        int busy = serve_admit(s), concluded, stop;
        size_t n = round_ids(s);
        kvx_agree_t *round;
        kvx_status_t st = kvx_agree_start(s->ctx, s->ids, n, &round);

        if (st != KVX_OK) {
            fprintf(stderr, "kvx-demo: rank %d: kvx_agree_start: %s\n", s->id.world_rank,
                    kvx_status_name(st));
            return -1;
        }
        if (!is_decode(s)) {
            busy |= serve_compute(s); /* while the round is under way */
        }
        st = kvx_agree_wait(round, s->agreed);
        kvx_agree_free(round);
        if (st == KVX_ERR_PEER_LOST && !s->broken) {
            /* A TP sibling is lost: its rooms conclude FAILED with the loss
             * (kvx_agree_start()), and this rank serves on alone, without
             * collectives; the rooms it opens fail at once. */
            fprintf(stderr, "kvx-demo: rank %d: a TP sibling is lost: serving on without it\n",
                    s->id.world_rank);
            s->broken = 1;
        }
        if (st != KVX_OK && st != KVX_ERR_PEER_LOST) {
            /* A TP sibling is lost (or MPI failed): the blocking collectives
             * below could never complete. */
            fprintf(stderr, "kvx-demo: rank %d: agreement: %s\n", s->id.world_rank,
                    kvx_status_name(st));
            return -1;
        }
        if ((concluded = serve_conclude(s, n)) < 0) {
            return -1;
        }
        busy |= concluded;
        serve_close(s);
        stop = serve_sync(s, &busy);
        if (!s->replacement) {
            demo_replace_step(s->rp, s); /* world rank 0: the kill's time, the spawn */
        }
        demo_progress_step(s->progress, s);
        if (stop) {
            break;
        }
        /* Idle steps back off, from 0.1 to 1.6 ms: the ranks of the other
         * instance may share these cores. */
        idle = busy ? 0 : idle < 5 ? idle + 1 : idle;
        if (idle > 0) {
            usleep(50u << idle);
        }
    }
    s->elapsed = demo_now() - s->t0;
    return 0;
}
