/*
 * agree.c - every TP rank of an instance concludes each room the same way.
 *
 * The ranks of an instance keep one table of "slots", identical on every
 * rank because it only changes by the results of collectives: a slot names a
 * room every rank holds. A round is
 *
 *   A  MPI_Iallreduce(MIN) of one int per slot (the rank's state of the
 *      room), a trailer (-(rooms this rank holds that have no slot)), and on
 *      a prefill instance one more int per slot saying what the rank heard
 *      of the decode instance's outcome (agree_heard(); agree_outcome());
 *   B  only if some slot's minimum is FAILED: MPI_Iallreduce with a user
 *      operation over one record per failed slot, which keeps the root cause
 *      (on a prefill instance the decode's verdict where a rank holds it;
 *      else the earliest stage, then lowest origin rank) and counts the
 *      ranks that had failed the room;
 *   C  only if some rank holds rooms without a slot: MPI_Iallgather of each
 *      rank's unslotted room ids (padded to the largest count); the rooms
 *      every rank holds get the lowest free slots, in id order.
 *
 * B and C depend on A only and run together. A slot whose minimum is SUCCESS
 * or FAILED is final: the outcome is stored in the room and the slot freed.
 * Ranks may hold different rooms in different orders; counts never mismatch
 * because every count comes from a collective. A room some rank does not
 * hold is simply not agreed yet. When a TP sibling is lost no collective is
 * entered (it would never complete in Open MPI 4.1).
 */
#include "config.h"

#include "ctx.h"
#include "mpi/kvx_mpi.h"
#include "util/failure.h"
#include "util/log.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One rank's view of a failed room, reduced by agree_root_op(). */
typedef struct agree_rec {
    int32_t has;     /* this rank holds a failure record */
    int32_t count;   /* ranks that held one (summed by the reduction) */
    int32_t verdict; /* prefill: f is the decode instance's verdict */
    kvx_failure_t f;
} agree_rec_t;

typedef struct agree_table {
    room_t **room; /* [slot] this rank's room, NULL for a free slot */
    size_t nslots, cap;
    size_t free_from; /* no free slot below this one */
    MPI_Datatype rec_type;
    MPI_Op root_op;
    struct kvx_agree *round; /* the round in progress, or NULL */
} agree_table_t;

struct kvx_agree {
    kvx_ctx_t *ctx;
    uint64_t *ids;
    size_t n;
    int phase; /* 0: A in flight; 1: B/C in flight; 2: done */
    kvx_status_t status;
    MPI_Request req[2];
    int nreq;
    size_t S;           /* slots in the vector of this round */
    size_t W;           /* prefill: S more ints after the trailer (agree_heard()) */
    int32_t *vec, *res; /* A */
    room_t **sampled;   /* [slot] the room vec[slot] is about, NULL if free */
    size_t K;           /* B: failed slots */
    size_t *failed;
    agree_rec_t *recs, *recs_out;
    size_t M;       /* C: width of each rank's list */
    room_t **fresh; /* this rank's unslotted rooms, by id */
    size_t nfresh;
    uint64_t *mine, *all;
};

static void agree_root_op(void *in, void *inout, int *len, MPI_Datatype *type)
{
    agree_rec_t *a = in, *b = inout;

    for (int i = 0; i < *len; i++) {
        int32_t count = a[i].count + b[i].count;

        /* The decode instance's verdict beats any record of this instance:
         * else a prefill rank's earlier own failure, unheard by the decode,
         * would make the two instances name different root causes. */
        if (a[i].has && (!b[i].has || a[i].verdict > b[i].verdict ||
                         (a[i].verdict == b[i].verdict && failure_compare(&a[i].f, &b[i].f) < 0))) {
            b[i] = a[i];
        }
        b[i].count = count;
    }
}

kvx_status_t agree_init(kvx_ctx_t *ctx)
{
    agree_table_t *t = calloc(1, sizeof(*t));

    if (t == NULL) {
        return KVX_ERR_NO_MEMORY;
    }
    t->rec_type = MPI_DATATYPE_NULL;
    t->root_op = MPI_OP_NULL;
    if (KVX_MPI_CALL(MPI_Type_contiguous(sizeof(agree_rec_t), MPI_BYTE, &t->rec_type)) != KVX_OK ||
        KVX_MPI_CALL(MPI_Type_commit(&t->rec_type)) != KVX_OK ||
        KVX_MPI_CALL(MPI_Op_create(agree_root_op, 1, &t->root_op)) != KVX_OK) {
        free(t);
        return KVX_ERR_MPI;
    }
    ctx->agree = t;
    return KVX_OK;
}

/* The buffers of rounds abandoned on a broken communicator: MPI may still
 * write into them until MPI_Finalize, so they are never freed, and they are
 * kept reachable from here (a leak checker sees them as in use, which they
 * are). One node per abandoned round; a TP sibling dies once per context. */
typedef struct agree_grave {
    struct agree_grave *next;
    void *buf[6];
} agree_grave_t;

static agree_grave_t *agree_graves;
static pthread_mutex_t agree_graves_lock = PTHREAD_MUTEX_INITIALIZER;

static void agree_abandon(struct kvx_agree *a)
{
    agree_grave_t *g = calloc(1, sizeof(*g));

    if (g != NULL) {
        g->buf[0] = a->vec;
        g->buf[1] = a->res;
        g->buf[2] = a->recs;
        g->buf[3] = a->recs_out;
        g->buf[4] = a->mine;
        g->buf[5] = a->all;
        pthread_mutex_lock(&agree_graves_lock);
        g->next = agree_graves;
        agree_graves = g;
        pthread_mutex_unlock(&agree_graves_lock);
    }
    a->vec = a->res = NULL;
    a->recs = a->recs_out = NULL;
    a->mine = a->all = NULL;
}

static void agree_round_free(struct kvx_agree *a)
{
    free(a->ids);
    free(a->vec);
    free(a->res);
    free(a->sampled);
    free(a->failed);
    free(a->recs);
    free(a->recs_out);
    free(a->fresh);
    free(a->mine);
    free(a->all);
    free(a);
}

void agree_cleanup(kvx_ctx_t *ctx)
{
    agree_table_t *t = ctx->agree;

    if (t == NULL) {
        return;
    }
    if (t->root_op != MPI_OP_NULL) {
        MPI_Op_free(&t->root_op);
    }
    if (t->rec_type != MPI_DATATYPE_NULL) {
        MPI_Type_free(&t->rec_type);
    }
    /* A round abandoned on a broken communicator keeps its buffers: MPI may
     * still own them. */
    free(t->room);
    free(t);
    ctx->agree = NULL;
}

void agree_forget(kvx_ctx_t *ctx, room_t *room)
{
    if (ctx->agree != NULL && room->slot >= 0) {
        agree_table_t *t = ctx->agree;

        t->room[room->slot] = NULL;
        t->free_from = (size_t)room->slot < t->free_from ? (size_t)room->slot : t->free_from;
        room->slot = -1;
    }
}

int agree_in_round(const kvx_ctx_t *ctx)
{
    return ctx->agree != NULL && ctx->agree->round != NULL;
}

static int agree_cmp_room(const void *a, const void *b)
{
    uint64_t x = (*(room_t *const *)a)->id, y = (*(room_t *const *)b)->id;

    return x < y ? -1 : x > y;
}

/* Rooms this rank holds that have no slot yet, sorted by id. */
static kvx_status_t agree_collect_fresh(kvx_ctx_t *ctx, struct kvx_agree *a)
{
    a->fresh = malloc((ctx->rooms.count + 1) * sizeof(room_t *));
    if (a->fresh == NULL) {
        return KVX_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < ctx->rooms.capacity; i++) {
        room_t *room = ctx->rooms.slots[i].value;

        if (room != NULL && room->user_open && !room->closed && room->slot < 0 && !room->agreed) {
            a->fresh[a->nfresh++] = room;
        }
    }
    qsort(a->fresh, a->nfresh, sizeof(room_t *), agree_cmp_room);
    return KVX_OK;
}

/* Injected failures at the agree stage happen before the state is sampled. */
static void agree_faults(kvx_ctx_t *ctx)
{
    fault_action_t act;

    for (size_t i = 0; ctx->faults != NULL && i < ctx->rooms.capacity; i++) {
        room_t *room = ctx->rooms.slots[i].value;

        if (room != NULL && room->user_open && !room_terminal(room) && !sender_delivered(room) &&
            fault_at(ctx, KVX_STAGE_AGREE, room, &act) == FAULT_FAIL) {
            room_fail(ctx, room, &act.failure, 1);
        }
    }
}

/* Phase A's second part, on a prefill instance: the MIN over ranks is
 * HEARD_AGREED if any rank heard the decode instance agree SUCCESS, and
 * HEARD_NOTHING only if no rank can hear from any decode rank of the room. */
enum { HEARD_AGREED = -1, HEARD_CAN = 0, HEARD_NOTHING = 1 };

static int32_t agree_heard(const room_t *room)
{
    if (room == NULL) {
        return HEARD_NOTHING; /* a free slot does not hold the others back */
    }
    if (room->side != KVX_ROLE_PREFILL) {
        return HEARD_CAN;
    }
    if (room->decode_agreed) {
        return HEARD_AGREED;
    }
    return sender_cut_off(room) ? HEARD_NOTHING : HEARD_CAN;
}

/* A slot's outcome from phase A, the same on every rank: the minimum state
 * (FAILED or SUCCESS are final) -- except that on a prefill instance the
 * decode's agreed SUCCESS, heard by any rank, concludes the room SUCCESS
 * (ranks that failed by losing a decode rank after delivering wait for the
 * decode's word: sender_may_conclude()), and a room no rank can hear an
 * outcome for any more concludes FAILED. */
static int32_t agree_outcome(int32_t min, int32_t heard)
{
    if (min == KVX_ROOM_FAILED || min == INT32_MAX) {
        return min;
    }
    if (heard == HEARD_AGREED) {
        return KVX_ROOM_SUCCESS;
    }
    if (min != KVX_ROOM_SUCCESS && heard == HEARD_NOTHING) {
        return KVX_ROOM_FAILED;
    }
    return min;
}

/* Phase A, with the context locked: sample every slot's state. */
static kvx_status_t agree_sample(kvx_ctx_t *ctx, struct kvx_agree *a)
{
    agree_table_t *t = ctx->agree;

    agree_faults(ctx);
    a->S = t->nslots;
    a->W = ctx->role == KVX_ROLE_PREFILL ? a->S : 0;
    a->vec = malloc((a->S + 1 + a->W) * sizeof(int32_t));
    a->res = malloc((a->S + 1 + a->W) * sizeof(int32_t));
    a->sampled = malloc((a->S + 1) * sizeof(room_t *));
    if (a->vec == NULL || a->res == NULL || a->sampled == NULL ||
        agree_collect_fresh(ctx, a) != KVX_OK) {
        return KVX_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < a->S; i++) {
        room_t *room = t->room[i];

        a->sampled[i] = room;
        /* A free slot must not hold the others back. A failed prefill room
         * counts as FAILED once it holds the decode instance's verdict (so
         * both instances report one root cause): until then, as the state
         * it failed in. */
        if (room == NULL) {
            a->vec[i] = INT32_MAX;
        } else if (room->side == KVX_ROLE_PREFILL && room->verdict) {
            a->vec[i] = KVX_ROOM_FAILED; /* the decode's verdict decides, even here SUCCESS */
        } else if (room->side == KVX_ROLE_PREFILL && !sender_may_conclude(ctx, room)) {
            a->vec[i] = (int32_t)room->before_fail;
        } else {
            a->vec[i] = (int32_t)room->state;
        }
        if (a->W > 0) {
            a->vec[a->S + 1 + i] = agree_heard(room);
        }
    }
    a->vec[a->S] = -(int32_t)(a->nfresh > INT32_MAX ? INT32_MAX : a->nfresh);
    return KVX_OK;
}

kvx_status_t kvx_agree_start(kvx_ctx_t *ctx, const uint64_t *rooms, size_t n, kvx_agree_t **agree_p)
{
    struct kvx_agree *a;
    kvx_status_t status = ctx_enter(ctx);

    if (status != KVX_OK) {
        return status;
    }
    if (agree_p == NULL || (rooms == NULL && n > 0)) {
        status = KVX_ERR_INVALID_PARAM;
    } else if (ctx->agree->round != NULL) {
        status = KVX_ERR_BUSY;
    }
    a = status == KVX_OK ? calloc(1, sizeof(*a)) : NULL;
    if (status == KVX_OK && (a == NULL || (a->ids = malloc((n + 1) * sizeof(uint64_t))) == NULL)) {
        status = KVX_ERR_NO_MEMORY;
    }
    if (status == KVX_OK) {
        a->ctx = ctx;
        a->n = n;
        memcpy(a->ids, rooms, n * sizeof(uint64_t));
        if (ctx->tp_broken) {
            /* No collective: the round reports what the loss concluded. */
            a->status = KVX_ERR_PEER_LOST;
            a->phase = 2;
            ctx_leave(ctx);
            *agree_p = a;
            return KVX_OK;
        }
        status = agree_sample(ctx, a);
    }
    if (status == KVX_OK) {
        ctx->agree->round = a;
    }
    ctx_leave(ctx);
    if (status != KVX_OK) {
        if (a != NULL) {
            agree_round_free(a);
        }
        return status;
    }
    status = KVX_MPI_CALL(MPI_Iallreduce(a->vec, a->res, (int)(a->S + 1 + a->W), MPI_INT32_T,
                                         MPI_MIN, ctx->tp_comm, &a->req[0]));
    a->nreq = 1;
    if (status != KVX_OK) {
        a->status = status;
        a->phase = 2;
    }
    *agree_p = a;
    return KVX_OK;
}

/* After A: post B (root causes of failed slots) and C (fresh rooms). */
static kvx_status_t agree_post_bc(kvx_ctx_t *ctx, struct kvx_agree *a)
{
    agree_table_t *t = ctx->agree;
    kvx_status_t status = KVX_OK;

    a->failed = malloc((a->S + 1) * sizeof(size_t));
    if (a->failed == NULL) {
        return KVX_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < a->W; i++) {
        a->res[i] = agree_outcome(a->res[i], a->res[a->S + 1 + i]);
    }
    for (size_t i = 0; i < a->S; i++) {
        if (a->res[i] == KVX_ROOM_FAILED) {
            a->failed[a->K++] = i;
        }
    }
    a->M = (size_t) - (int64_t)a->res[a->S];
    a->nreq = 0;
    if (a->K > 0) {
        a->recs = calloc(a->K, sizeof(agree_rec_t));
        a->recs_out = calloc(a->K, sizeof(agree_rec_t));
        if (a->recs == NULL || a->recs_out == NULL) {
            return KVX_ERR_NO_MEMORY;
        }
        pthread_mutex_lock(&ctx->lock);
        for (size_t k = 0; k < a->K; k++) {
            room_t *room = t->room[a->failed[k]];

            if (room != NULL && (room->state == KVX_ROOM_FAILED ||
                                 (room->side == KVX_ROLE_PREFILL && room->verdict))) {
                a->recs[k].has = 1;
                a->recs[k].count = 1;
                a->recs[k].verdict = room->side == KVX_ROLE_PREFILL && room->verdict;
                a->recs[k].f = room->failure;
            }
        }
        pthread_mutex_unlock(&ctx->lock);
        status = KVX_MPI_CALL(MPI_Iallreduce(a->recs, a->recs_out, (int)a->K, t->rec_type,
                                             t->root_op, ctx->tp_comm, &a->req[a->nreq++]));
    }
    if (status == KVX_OK && a->M > 0) {
        int size;

        MPI_Comm_size(ctx->tp_comm, &size);
        a->mine = calloc(a->M + 1, sizeof(uint64_t));
        a->all = calloc((a->M + 1) * (size_t)size, sizeof(uint64_t));
        if (a->mine == NULL || a->all == NULL) {
            return KVX_ERR_NO_MEMORY;
        }
        a->mine[0] = a->nfresh;
        for (size_t i = 0; i < a->nfresh; i++) {
            a->mine[i + 1] = a->fresh[i]->id;
        }
        status = KVX_MPI_CALL(MPI_Iallgather(a->mine, (int)(a->M + 1), MPI_UINT64_T, a->all,
                                             (int)(a->M + 1), MPI_UINT64_T, ctx->tp_comm,
                                             &a->req[a->nreq++]));
    }
    return status;
}

/* Is id in a sorted list of n ids? */
static int agree_has(const uint64_t *list, uint64_t n, uint64_t id)
{
    uint64_t lo = 0, hi = n;

    while (lo < hi) {
        uint64_t mid = (lo + hi) / 2;

        if (list[mid] == id) {
            return 1;
        }
        if (list[mid] < id) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return 0;
}

static kvx_status_t agree_take_slot(agree_table_t *t, room_t *room)
{
    size_t s = t->free_from; /* the lowest free slot, found without rescanning from 0 */

    while (s < t->nslots && t->room[s] != NULL) {
        s++;
    }
    if (s == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        room_t **grown = realloc(t->room, cap * sizeof(room_t *));

        if (grown == NULL) {
            return KVX_ERR_NO_MEMORY;
        }
        memset(grown + t->cap, 0, (cap - t->cap) * sizeof(room_t *));
        t->room = grown;
        t->cap = cap;
    }
    t->room[s] = room;
    t->nslots = s + 1 > t->nslots ? s + 1 : t->nslots;
    t->free_from = s + 1;
    room->slot = (int)s;
    return KVX_OK;
}

/* Fresh rooms every TP rank holds get slots, in id order (the same on every
 * rank: each computes the same intersection from the same lists). */
static kvx_status_t agree_assign(kvx_ctx_t *ctx, struct kvx_agree *a)
{
    int size;

    MPI_Comm_size(ctx->tp_comm, &size);
    for (size_t i = 0; i < a->nfresh; i++) {
        room_t *room = a->fresh[i];
        int everywhere = 1;

        for (int r = 0; r < size && everywhere; r++) {
            const uint64_t *list = a->all + (size_t)r * (a->M + 1);

            everywhere = agree_has(list + 1, list[0], room->id);
        }
        if (everywhere && agree_take_slot(ctx->agree, room) != KVX_OK) {
            return KVX_ERR_NO_MEMORY;
        }
    }
    return KVX_OK;
}

/* Adds a room to the peer's AGREED of this round; 0 on no memory. */
static int agree_note_success(peer_t *peer, const room_t *room)
{
    if (peer->nagreed == peer->agreed_cap) {
        uint32_t cap = peer->agreed_cap ? 2 * peer->agreed_cap : 64;
        msg_agreed_room_t *grown = realloc(peer->agreed, cap * sizeof(*grown));

        if (grown == NULL) {
            return 0;
        }
        peer->agreed = grown;
        peer->agreed_cap = cap;
    }
    peer->agreed[peer->nagreed].room = room->id;
    peer->agreed[peer->nagreed].nonce = room->nonce;
    peer->nagreed++;
    if (peer->nagreed == MSG_AGREED_MAX) {
        agree_flush_agreed(peer->ctx);
    }
    return 1;
}

/* Sends each peer one AGREED for the rooms this round agreed SUCCESS. */
void agree_flush_agreed(kvx_ctx_t *ctx)
{
    for (int i = 0; i < ctx->npeers; i++) {
        peer_t *peer = &ctx->peers[i];
        size_t len;
        void *m;

        if (peer->nagreed == 0) {
            continue;
        }
        m = msg_new_agreed(ctx->rank, peer->agreed, peer->nagreed, &len);
        if (m != NULL) {
            peer_send(ctx, peer, m, len);
        } else {
            kvx_error("no memory to tell %s of %u rooms agreed SUCCESS", peer->name, peer->nagreed);
        }
        peer->nagreed = 0;
    }
}

/* The decode instance decides a room's outcome for both instances (and a
 * failed room's root cause): every prefill rank of the room hears it -- a
 * SUCCESS in the round's AGREED to each (agree_flush_agreed()), unless an
 * injected fault holds this room's notices. */
void agree_send_verdict(kvx_ctx_t *ctx, room_t *room)
{
    for (unsigned i = 0; i < room->nsources && room->notify_at != UINT64_MAX; i++) {
        peer_t *peer = room->sources[i].peer;
        msg_agreed_room_t one = { room->id, room->nonce };
        size_t len;
        void *m;

        if (room->agreed_state == KVX_ROOM_SUCCESS && room->notify_at == 0 &&
            agree_note_success(peer, room)) {
            continue;
        }
        m = room->agreed_state == KVX_ROOM_SUCCESS
                ? msg_new_agreed(ctx->rank, &one, 1, &len)
                : msg_new_failure(MSG_VERDICT, ctx->rank, room->id, room->nonce, &room->failure,
                                  &len);
        if (m != NULL) {
            peer_send_at(ctx, peer, m, len, room->notify_at);
        }
    }
}

/* A final outcome: stored in the room; an agreed FAILED also fails the room
 * here if it was still in flight, with the agreed root cause. */
static void agree_conclude(kvx_ctx_t *ctx, struct kvx_agree *a, size_t slot, const agree_rec_t *rec)
{
    room_t *room = ctx->agree->room[slot];

    if (room == NULL) {
        return;
    }
    room->agreed = 1;
    room->agreed_state = (kvx_room_state_t)a->res[slot];
    if (room->agreed_state == KVX_ROOM_FAILED && rec != NULL && rec->has) {
        kvx_failure_t root = rec->f;

        root.count = (unsigned)rec->count;
        if (!room_terminal(room)) {
            room_fail(ctx, room, &root, 1);
        }
        room->failure = root;
    }
    if (room->agreed_state == KVX_ROOM_SUCCESS && room->side == KVX_ROLE_PREFILL &&
        room->state != KVX_ROOM_SUCCESS) {
        /* The decode instance has every page: a rank still waiting for its
         * receipt, or failed by losing a decode rank after it delivered,
         * concludes with it. */
        if (!room_terminal(room)) {
            room_set_state(ctx, room, KVX_ROOM_SUCCESS);
        } else {
            kvx_rinfo(room->id,
                      "SUCCESS as the decode instance agreed, although this rank "
                      "failed after delivering every page: %s",
                      room->failure.text);
        }
    }
    if (room->side == KVX_ROLE_DECODE) {
        agree_send_verdict(ctx, room);
    }
    ctx->agree->room[slot] = NULL;
    ctx->agree->free_from = slot < ctx->agree->free_from ? slot : ctx->agree->free_from;
    room->slot = -1;
}

/* After B and C, with the context locked. */
static kvx_status_t agree_apply(kvx_ctx_t *ctx, struct kvx_agree *a)
{
    size_t k = 0;

    for (size_t i = 0; i < a->S; i++) {
        if (a->res[i] == KVX_ROOM_FAILED) {
            agree_conclude(ctx, a, i, &a->recs_out[k++]);
        } else if (a->res[i] == KVX_ROOM_SUCCESS) {
            agree_conclude(ctx, a, i, NULL);
        }
    }
    agree_flush_agreed(ctx);
    return a->M > 0 ? agree_assign(ctx, a) : KVX_OK;
}

/* Closed rooms were kept through the round: release those now free.
 * Returns how many. */
static size_t agree_sweep(kvx_ctx_t *ctx)
{
    size_t freed = 0;

    for (size_t i = 0; i < ctx->rooms.capacity; i++) {
        room_t *room = ctx->rooms.slots[i].value;

        while (room != NULL && room->closed && room->refs == 0 && room->slot < 0) {
            room_free(ctx, room);
            room = ctx->rooms.slots[i].value;
            freed++;
        }
    }
    return freed;
}

static void agree_report(kvx_ctx_t *ctx, struct kvx_agree *a, kvx_agreed_t *out)
{
    for (size_t i = 0; i < a->n; i++) {
        room_t *room = room_find(ctx, a->ids[i]);

        if (room == NULL || !room->user_open) {
            out[i].status = KVX_ERR_NO_ROOM;
            out[i].state = KVX_ROOM_FAILED;
        } else if (room->agreed) {
            out[i].status = KVX_OK;
            out[i].state = room->agreed_state;
        } else if (a->status == KVX_OK && room->slot >= 0 && (size_t)room->slot < a->S &&
                   a->sampled[room->slot] == room && a->res[room->slot] != INT32_MAX) {
            /* (A slot this round gave to the room spoke of its previous
             * holder: the room is then not agreed yet.) */
            out[i].status = KVX_OK;
            out[i].state = (kvx_room_state_t)a->res[room->slot];
        } else {
            out[i].status = KVX_INPROGRESS;
            out[i].state = room->state;
        }
    }
}

/* Advances MPI; returns 1 when the phase's requests are complete. */
static int agree_mpi_done(kvx_ctx_t *ctx, struct kvx_agree *a)
{
    int flag = 1;

    if (a->nreq > 0 &&
        KVX_MPI_CALL(MPI_Testall(a->nreq, a->req, &flag, MPI_STATUSES_IGNORE)) != KVX_OK) {
        a->status = KVX_ERR_MPI;
        return 1;
    }
    return flag;
}

kvx_status_t kvx_agree_test(kvx_agree_t *a, kvx_agreed_t *out)
{
    kvx_ctx_t *ctx;
    int wake;

    if (a == NULL || (out == NULL && a->n > 0)) {
        return KVX_ERR_INVALID_PARAM;
    }
    ctx = a->ctx;
    if (a->phase < 2 && !agree_mpi_done(ctx, a)) {
        /* A lost sibling never completes the collective: give up on it
         * (its buffers stay with MPI) rather than wait forever. */
        if (__atomic_load_n(&ctx->tp_broken, __ATOMIC_RELAXED)) {
            a->status = KVX_ERR_PEER_LOST;
            a->phase = 2;
            a->nreq = 0;
            agree_abandon(a);
        } else {
            return KVX_INPROGRESS;
        }
    }
    if (a->phase == 0 && a->status == KVX_OK) {
        a->status = agree_post_bc(ctx, a);
        a->phase = 1;
        if (a->status == KVX_OK) {
            return kvx_agree_test(a, out);
        }
    }
    pthread_mutex_lock(&ctx->lock);
    if (a->phase == 1 && a->status == KVX_OK) {
        a->status = agree_apply(ctx, a);
    }
    a->phase = 2;
    /* The progress thread has work only if the round failed rooms, queued
     * messages (verdicts) or freed rooms; waking it otherwise costs every
     * rank an idle spin (PROGRESS_SPINS progress calls) per round. */
    wake = a->status != KVX_OK || a->K > 0 || ctx->out_head != NULL;
    if (ctx->agree->round == a) {
        ctx->agree->round = NULL;
        wake |= agree_sweep(ctx) > 0;
    }
    agree_report(ctx, a, out);
    pthread_mutex_unlock(&ctx->lock);
    if (wake) {
        progress_wake(ctx);
    }
    return a->status;
}

kvx_status_t kvx_agree_wait(kvx_agree_t *a, kvx_agreed_t *out)
{
    kvx_status_t status;

    while ((status = kvx_agree_test(a, out)) == KVX_INPROGRESS) {
        usleep(10);
    }
    return status;
}

kvx_status_t kvx_agree_free(kvx_agree_t *a)
{
    if (a == NULL) {
        return KVX_ERR_INVALID_PARAM;
    }
    if (a->phase < 2) {
        return KVX_ERR_BUSY;
    }
    /* An abandoned round's buffers MPI may still write into are with
     * agree_graves already. */
    agree_round_free(a);
    return KVX_OK;
}
