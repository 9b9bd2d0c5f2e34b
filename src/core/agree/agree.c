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

#include "core/agree/agree.h"
#include "core/ctx/ctx.h"
#include "core/ctx/stats.h"
#include "core/link/peer.h"
#include "core/link/progress.h"
#include "core/room/fault.h"
#include "core/room/outcome.h"
#include "core/room/receiver.h"
#include "core/room/room.h"
#include "core/room/room_stats.h"
#include "core/room/sender.h"
#include "mpi/kvx_mpi.h"
#include "util/failure.h"
#include "util/log.h"
#include "util/time.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One rank's view of a failed room, reduced by agree_root_op(). */
typedef struct agree_rec {
    int32_t has;     /* this rank holds a failure record */
    int32_t count;   /* ranks that held one (summed by the reduction) */
    int32_t verdict; /* prefill: f is the decode instance's verdict */
    kvx_failure_t f;
    /* decode, when the TP ranks hold different aux: what the lowest TP rank
     * with the smallest digest [0] and with the largest [1] hold */
    char aux[2][112];
} agree_rec_t;

/* A room this decode rank concluded because a TP sibling never held it
 * (agree_conclude_unheld()): listed in phase C for AGREE_TOMB_LIFE so that
 * the sibling, opening it late, concludes it at once with the same record
 * rather than waiting KVX_TP_TIMEOUT and naming this rank. */
typedef struct agree_tomb {
    uint64_t id;
    uint64_t until; /* dropped after this (ns), or when this rank opens the id again */
    int lacking, holder;
} agree_tomb_t;

#define AGREE_TOMB_LIFE 4 /* times KVX_TP_TIMEOUT */
#define AGREE_TOMB_MAX  4096

typedef struct agree_table {
    room_t **room; /* [slot] this rank's room, NULL for a free slot */
    size_t nslots, cap;
    size_t free_from; /* no free slot below this one */
    MPI_Datatype rec_type;
    MPI_Op root_op;
    struct kvx_agree *round; /* the round in progress, or NULL */
    uint64_t rounds;         /* rounds whose collective this rank entered */
    uint64_t rounds_changed; /* when that last changed (ns) */
    agree_tomb_t *tomb;      /* decode: rooms concluded unheld, oldest first */
    size_t ntomb, tomb_cap;
} agree_table_t;

/* Phase C's flags of a room in a rank's list. */
#define AGREE_FRESH_EXPIRED 1u /* opened on that rank more than KVX_TP_TIMEOUT ago */
#define AGREE_FRESH_TOMB    2u /* not held: concluded unheld there (agree_tomb_t) */
#define AGREE_TOMB_FLAGS(lacking, holder) \
    (AGREE_FRESH_TOMB | ((uint64_t)(lacking) << 16) | ((uint64_t)(holder) << 40))
#define AGREE_TOMB_LACKING(flags) ((int)(((flags) >> 16) & 0xffffff))
#define AGREE_TOMB_HOLDER(flags)  ((int)(((flags) >> 40) & 0xffffff))

struct kvx_agree {
    kvx_ctx_t *ctx;
    uint64_t *ids;
    size_t n;
    int phase; /* 0: A in flight; 1: B/C in flight; 2: done */
    kvx_status_t status;
    MPI_Request req[2];
    int nreq;
    size_t S;                 /* slots in the vector of this round */
    size_t W;                 /* prefill: S more ints after the trailer (agree_heard()) */
    size_t X;                 /* decode under TP: 2 S more ints, each slot's aux digest and its
                                 twin, whose minima give the least and the greatest digest */
    int16_t *aux_lo, *aux_hi; /* [slot] TP ranks holding different aux, or -1 */
    int32_t *vec, *res;       /* A */
    room_t **sampled;         /* [slot] the room vec[slot] is about, NULL if free */
    size_t K;                 /* B: failed slots */
    size_t *failed;
    agree_rec_t *recs, *recs_out;
    kvx_agreed_t *reported; /* the out written while the round was in progress */
    size_t M;               /* C: width of each rank's list (ids, then as many flags) */
    room_t **fresh;         /* this rank's unslotted rooms, by id */
    size_t nfresh;
    agree_tomb_t *tomb; /* this rank's tombstones when the round started, by id */
    size_t ntomb;
    uint64_t *mine, *all;
};

static void agree_root_op(void *in, void *inout, int *len, MPI_Datatype *type)
{
    agree_rec_t *a = in, *b = inout;

    for (int i = 0; i < *len; i++) {
        int32_t count = a[i].count + b[i].count;

        char aux[2][sizeof(b[i].aux[0])];

        /* Each aux description comes from one rank: the merge keeps both. */
        for (int d = 0; d < 2; d++) {
            memcpy(aux[d], b[i].aux[d][0] != '\0' ? b[i].aux[d] : a[i].aux[d], sizeof(aux[d]));
        }

        /* The decode instance's verdict beats any record of this instance:
         * else a prefill rank's earlier own failure, unheard by the decode,
         * would make the two instances name different root causes. */
        if (a[i].has && (!b[i].has || a[i].verdict > b[i].verdict ||
                         (a[i].verdict == b[i].verdict && failure_compare(&a[i].f, &b[i].f) < 0))) {
            b[i] = a[i];
        }
        b[i].count = count;
        memcpy(b[i].aux, aux, sizeof(aux));
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
    free(a->tomb);
    free(a->mine);
    free(a->all);
    free(a->aux_lo);
    free(a->aux_hi);
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
    free(t->tomb);
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

uint64_t agree_rounds(const kvx_ctx_t *ctx)
{
    return ctx->agree != NULL ? ctx->agree->rounds : 0;
}

/* Every TP rank must start the same rounds in the same order. A rank that
 * started more rounds than a sibling waits in a collective the sibling never
 * enters: when the two counts differ and neither moved for KVX_TP_TIMEOUT,
 * the instance is broken with both counts as the reason, on every rank (the
 * siblings are told, and see the same counts themselves). */
void agree_tick(kvx_ctx_t *ctx, uint64_t now)
{
    agree_table_t *t = ctx->agree;

    for (int i = 0; t != NULL && !ctx->tp_broken && i < ctx->npeers; i++) {
        peer_t *peer = &ctx->peers[i];
        uint64_t since =
            peer->rounds_changed > t->rounds_changed ? peer->rounds_changed : t->rounds_changed;
        const peer_t *lo, *hi;
        uint64_t lo_rounds, hi_rounds;
        kvx_failure_t f;
        char lo_name[64], hi_name[64];

        if (peer->role != ctx->role || peer->lost || peer->rounds_changed == 0 ||
            peer->rounds == t->rounds || now - since <= ctx->cfg.tp_timeout) {
            continue;
        }
        /* The same sentence on both ranks: the lower TP rank first. */
        lo = peer->tp_rank < ctx->tp_rank ? peer : NULL;
        hi = lo != NULL ? NULL : peer;
        lo_rounds = lo != NULL ? peer->rounds : t->rounds;
        hi_rounds = lo != NULL ? t->rounds : peer->rounds;
        snprintf(lo_name, sizeof(lo_name), "tp%d", lo != NULL ? lo->tp_rank : ctx->tp_rank);
        snprintf(hi_name, sizeof(hi_name), "tp%d", hi != NULL ? hi->tp_rank : ctx->tp_rank);
        failure_set(&f, KVX_ERR_OUT_OF_STEP, KVX_STAGE_AGREE, NULL,
                    "agreement rounds out of step in %s[%d]: %s is in round %llu, %s in round "
                    "%llu, and neither moved for %.2f s (KVX_TP_TIMEOUT): every TP rank must "
                    "start the same rounds",
                    kvx_role_name(ctx->role), ctx->instance, lo_name, (unsigned long long)lo_rounds,
                    hi_name, (unsigned long long)hi_rounds, kvx_ns_to_s(ctx->cfg.tp_timeout));
        /* Recorded as if by the lower TP rank, so both ranks hold one record. */
        f.origin_tp_rank = lo != NULL ? lo->tp_rank : ctx->tp_rank;
        f.origin_rank = lo != NULL ? lo->rank : ctx->rank;
        peer_break_tp(ctx, &f, 1);
    }
}

/* The status a round reports once the instance is broken. */
static kvx_status_t agree_broken_status(const kvx_ctx_t *ctx)
{
    return ctx->tp_break.status != KVX_OK ? ctx->tp_break.status : KVX_ERR_PEER_LOST;
}

static int agree_cmp_room(const void *a, const void *b)
{
    uint64_t x = (*(room_t *const *)a)->id, y = (*(room_t *const *)b)->id;

    return x < y ? -1 : x > y;
}

static int agree_cmp_tomb(const void *a, const void *b)
{
    uint64_t x = ((const agree_tomb_t *)a)->id, y = ((const agree_tomb_t *)b)->id;

    return x < y ? -1 : x > y;
}

static int agree_cmp_id_room(const void *key, const void *elem)
{
    uint64_t x = *(const uint64_t *)key, y = (*(room_t *const *)elem)->id;

    return x < y ? -1 : x > y;
}

/* Drops the tombstones past their life and those of ids this rank holds
 * fresh (a room of the id opened again: a new incarnation, which is fresh
 * in at least the round after its open), and copies the rest, sorted by id,
 * for this round's phase C: no id is both fresh and a tombstone here. */
static kvx_status_t agree_collect_tombs(kvx_ctx_t *ctx, struct kvx_agree *a)
{
    agree_table_t *t = ctx->agree;
    uint64_t now = kvx_now_ns();
    size_t kept = 0;

    for (size_t i = 0; i < t->ntomb; i++) {
        if (now < t->tomb[i].until && bsearch(&t->tomb[i].id, a->fresh, a->nfresh, sizeof(room_t *),
                                              agree_cmp_id_room) == NULL) {
            t->tomb[kept++] = t->tomb[i];
        }
    }
    t->ntomb = kept;
    if (kept == 0) {
        return KVX_OK;
    }
    a->tomb = malloc(kept * sizeof(agree_tomb_t));
    if (a->tomb == NULL) {
        return KVX_ERR_NO_MEMORY;
    }
    memcpy(a->tomb, t->tomb, kept * sizeof(agree_tomb_t));
    a->ntomb = kept;
    qsort(a->tomb, a->ntomb, sizeof(agree_tomb_t), agree_cmp_tomb);
    return KVX_OK;
}

/* Keeps a room's unheld conclusion for the TP rank that lacked it. */
static void agree_bury(kvx_ctx_t *ctx, uint64_t id, int lacking, int holder)
{
    agree_table_t *t = ctx->agree;

    if (t->ntomb == AGREE_TOMB_MAX) {
        memmove(t->tomb, t->tomb + 1, (t->ntomb - 1) * sizeof(agree_tomb_t)); /* the oldest goes */
        t->ntomb--;
    }
    if (t->ntomb == t->tomb_cap) {
        size_t cap = t->tomb_cap ? 2 * t->tomb_cap : 16;
        agree_tomb_t *grown = realloc(t->tomb, cap * sizeof(agree_tomb_t));

        if (grown == NULL) {
            return; /* the late rank then waits KVX_TP_TIMEOUT itself */
        }
        t->tomb = grown;
        t->tomb_cap = cap;
    }
    t->tomb[t->ntomb].id = id;
    t->tomb[t->ntomb].until = kvx_now_ns() + AGREE_TOMB_LIFE * ctx->cfg.tp_timeout;
    t->tomb[t->ntomb].lacking = lacking;
    t->tomb[t->ntomb].holder = holder;
    t->ntomb++;
}

/* Rooms this rank holds that have no slot yet, sorted by id, and (decode)
 * the ids it concluded unheld lately. */
static kvx_status_t agree_collect_fresh(kvx_ctx_t *ctx, struct kvx_agree *a)
{
    room_t *room;

    a->fresh = malloc((ctx->rooms.count + 1) * sizeof(room_t *));
    if (a->fresh == NULL) {
        return KVX_ERR_NO_MEMORY;
    }
    for (size_t pos = 0; (room = room_next(ctx, &pos)) != NULL;) {
        if (room->user_open && room->slot < 0 && !room->agreed &&
            (!room->closed || room_agree_pending(ctx, room))) {
            a->fresh[a->nfresh++] = room;
        }
    }
    qsort(a->fresh, a->nfresh, sizeof(room_t *), agree_cmp_room);
    return agree_collect_tombs(ctx, a);
}

/* Injected failures at the agree stage happen before the state is sampled. */
static void agree_faults(kvx_ctx_t *ctx)
{
    room_t *room;
    fault_action_t act;

    for (size_t pos = 0; ctx->faults != NULL && (room = room_next(ctx, &pos)) != NULL;) {
        if (room->user_open && !room_terminal(room) && !sender_delivered(room) &&
            fault_at(ctx, KVX_STAGE_AGREE, room->id, &room->fault_seen, &act) == FAULT_FAIL) {
            room_fail(ctx, room, &act.failure, 1);
        }
    }
}

/* Phase A's second part, on a prefill instance: the MIN over ranks is
 * HEARD_AGREED if any rank heard the decode instance agree SUCCESS,
 * HEARD_SILENT if no rank can still hear and some rank holds the room
 * SUCCESS but heard nothing of it for 10 x KVX_PEER_TIMEOUT
 * (sender_unheard()), and HEARD_NOTHING only if no rank can hear from any
 * decode rank of the room. */
enum { HEARD_AGREED = -1, HEARD_CAN = 0, HEARD_SILENT = 1, HEARD_NOTHING = 2 };

static int32_t agree_heard(const kvx_ctx_t *ctx, const room_t *room)
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
    if (sender_cut_off(room)) {
        return HEARD_NOTHING;
    }
    if (room->state == KVX_ROOM_SUCCESS && sender_unheard(ctx, room)) {
        return HEARD_SILENT; /* a decode instance that runs no rounds */
    }
    return HEARD_CAN;
}

/* Phase B's record of a room this prefill rank holds SUCCESS without any
 * word of the decode instance for 10 x KVX_PEER_TIMEOUT: the decode decides,
 * and it said nothing, so the room is not SUCCESS -- it concludes FAILED
 * with this record (and the decode ranks are told, agree_conclude()). */
static void agree_silence(const kvx_ctx_t *ctx, const room_t *room, kvx_failure_t *f)
{
    failure_set_room(f, room->id, KVX_ERR_TIMEOUT, KVX_STAGE_AGREE, NULL,
                     "no word from %s[%d] about room %llu for 10 x KVX_PEER_TIMEOUT (%.1f s): "
                     "SUCCESS on %s[%d].tp%d (rank %d), but the decode instance never agreed it",
                     kvx_role_name(KVX_ROLE_DECODE), room->peer_instance,
                     (unsigned long long)room->id, kvx_ns_to_s(10 * ctx->cfg.peer_timeout),
                     kvx_role_name(ctx->role), ctx->instance, ctx->tp_rank, ctx->rank);
}

/* A slot's outcome from phase A, the same on every rank: the minimum state
 * (FAILED or SUCCESS are final) -- except that on a prefill instance the
 * decode's agreed SUCCESS, heard by any rank, concludes the room SUCCESS
 * whatever the minimum (ranks that failed by losing a decode rank after
 * delivering wait for the decode's word: sender_may_conclude()), a room
 * every prefill rank delivered is SUCCESS only with that word (every
 * receipt is not yet the decode instance's outcome: it may still agree
 * FAILED, say when one of its ranks dies before its round) -- and FAILED
 * when the decode stayed silent for 10 x KVX_PEER_TIMEOUT (agree_silence())
 * -- and a room no rank can hear an outcome for any more concludes FAILED. */
static int32_t agree_outcome(int32_t min, int32_t heard)
{
    if (min == INT32_MAX) {
        return min;
    }
    if (heard == HEARD_AGREED) {
        /* Even over a FAILED minimum: a sibling that concluded alone after
         * 10 x KVX_PEER_TIMEOUT (sender_may_conclude()) must not outvote the
         * decode's agreed SUCCESS that a rank holds (spin:
         * broken-failedfirst). */
        return KVX_ROOM_SUCCESS;
    }
    if (min == KVX_ROOM_FAILED) {
        return min;
    }
    if (min == KVX_ROOM_SUCCESS && heard == HEARD_CAN) {
        return KVX_ROOM_TRANSFERRING; /* not final: the decode instance decides */
    }
    if (min == KVX_ROOM_SUCCESS && heard == HEARD_SILENT) {
        return KVX_ROOM_FAILED; /* not SUCCESS without the decode's word */
    }
    if (min != KVX_ROOM_SUCCESS && heard >= HEARD_SILENT) {
        return KVX_ROOM_FAILED;
    }
    return min;
}

/* Aux under TP: every decode TP rank of a room must hold the same aux row
 * (the first token the engine decodes from). A SUCCESS room's row is
 * digested into 24 bits with this rank's TP rank below them, twice: lo as
 * is, hi as the negation of the digest with 127 - TP rank. The minima over
 * the instance give the smallest digest (and the lowest TP rank with it) and
 * the largest (and the lowest TP rank with it); they differ when some ranks
 * hold different aux, or no aux slot. Other rooms are neutral. */
#define AGREE_AUX_NEUTRAL INT32_MAX

static void agree_aux_digest(kvx_ctx_t *ctx, const room_t *room, int32_t *lo, int32_t *hi)
{
    uint32_t h = 2166136261u, d;

    *lo = *hi = AGREE_AUX_NEUTRAL;
    if (room == NULL || room->side != KVX_ROLE_DECODE || room->state != KVX_ROOM_SUCCESS) {
        return;
    }
    if (room->aux_slot >= 0) {
        const unsigned char *row =
            (const unsigned char *)ctx->pool.aux + (size_t)room->aux_slot * ctx->pool.aux_stride;
        msg_aux_header_t ah;
        uint32_t len;

        memcpy(&ah, row, sizeof(ah));
        len = ah.len <= ctx->aux_item_size ? ah.len : 0;
        for (uint32_t i = 0; i < sizeof(len) + len; i++) {
            h = (h ^
                 (i < sizeof(len) ? (len >> (8 * i)) & 0xff : row[sizeof(ah) + i - sizeof(len)])) *
                16777619u;
        }
        h = ((h >> 24) ^ h) & 0xffffffu;
        h = h == 0xffffffu ? 0xfffffeu : h; /* all ones: no aux slot */
    } else {
        h = 0xffffffu;
    }
    d = h << 7;
    *lo = (int32_t)(d | (uint32_t)ctx->tp_rank);
    *hi = -(int32_t)(d | (uint32_t)(127 - ctx->tp_rank));
}

/* What this rank holds as a room's aux, for the reason of a mismatch. */
static void agree_aux_describe(kvx_ctx_t *ctx, const room_t *room, char *buf, size_t len)
{
    const char *writer = "no writer";
    int o;

    for (unsigned i = 0; i < room->nsources; i++) {
        if (room->sources[i].pair.aux_writer) {
            writer = room->sources[i].peer->name;
        }
    }
    o = snprintf(buf, len, "%s[%d].tp%d (rank %d) ", kvx_role_name(ctx->role), ctx->instance,
                 ctx->tp_rank, ctx->rank);
    if (room->aux_slot < 0) {
        snprintf(buf + o, len - (size_t)o, "has no aux slot");
    } else {
        const unsigned char *row =
            (const unsigned char *)ctx->pool.aux + (size_t)room->aux_slot * ctx->pool.aux_stride;
        msg_aux_header_t ah;

        memcpy(&ah, row, sizeof(ah));
        o += snprintf(buf + o, len - (size_t)o, "has %u bytes", ah.len);
        for (uint32_t i = 0; i < ah.len && i < 8 && (size_t)o + 3 < len; i++) {
            o += snprintf(buf + o, len - (size_t)o, "%s%02x", i ? "" : " ", row[sizeof(ah) + i]);
        }
        snprintf(buf + o, len - (size_t)o, "%s from %s", ah.len > 8 ? ".." : "", writer);
    }
}

/* Phase A, with the context locked: sample every slot's state. */
static kvx_status_t agree_sample(kvx_ctx_t *ctx, struct kvx_agree *a)
{
    agree_table_t *t = ctx->agree;

    agree_faults(ctx);
    a->S = t->nslots;
    a->W = ctx->role == KVX_ROLE_PREFILL ? a->S : 0;
    a->X = ctx->role == KVX_ROLE_DECODE && ctx->tp_size > 1 && ctx->tp_size <= 128 ? 2 * a->S : 0;
    a->vec = malloc((a->S + 1 + a->W + a->X) * sizeof(int32_t));
    a->res = malloc((a->S + 1 + a->W + a->X) * sizeof(int32_t));
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
        } else if (room->side == KVX_ROLE_DECODE && room->prefill_failed) {
            a->vec[i] = KVX_ROOM_FAILED; /* the prefill cannot conclude it, even here SUCCESS */
        } else if (room->side == KVX_ROLE_PREFILL && !sender_may_conclude(ctx, room)) {
            a->vec[i] = (int32_t)room->before_fail;
        } else {
            a->vec[i] = (int32_t)room->state;
        }
        if (a->W > 0) {
            a->vec[a->S + 1 + i] = agree_heard(ctx, room);
        }
        if (a->X > 0) {
            agree_aux_digest(ctx, room, &a->vec[a->S + 1 + i], &a->vec[a->S + 1 + a->S + i]);
        }
    }
    a->vec[a->S] = -(int32_t)(a->nfresh + a->ntomb > INT32_MAX ? INT32_MAX : a->nfresh + a->ntomb);
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
        if (n > 0) { /* a round of no rooms may pass rooms NULL */
            memcpy(a->ids, rooms, n * sizeof(uint64_t));
        }
        if (ctx->tp_broken) {
            /* No collective: the round reports what the loss concluded. */
            a->status = agree_broken_status(ctx);
            a->phase = 2;
            ctx_leave(ctx);
            *agree_p = a;
            return KVX_OK;
        }
        status = agree_sample(ctx, a);
    }
    if (status == KVX_OK) {
        ctx->agree->round = a;
        stats_round_start(ctx);
        ctx->agree->rounds++;
        ctx->agree->rounds_changed = kvx_now_ns();
    }
    ctx_leave(ctx);
    if (status != KVX_OK) {
        if (a != NULL) {
            agree_round_free(a);
        }
        return status;
    }
    status = KVX_MPI_CALL(MPI_Iallreduce(a->vec, a->res, (int)(a->S + 1 + a->W + a->X), MPI_INT32_T,
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
    if (a->X > 0) {
        a->aux_lo = malloc((a->S + 1) * sizeof(int16_t));
        a->aux_hi = malloc((a->S + 1) * sizeof(int16_t));
        if (a->aux_lo == NULL || a->aux_hi == NULL) {
            return KVX_ERR_NO_MEMORY;
        }
    }
    for (size_t i = 0; i < a->S && a->X > 0; i++) {
        int32_t lo = a->res[a->S + 1 + i], hi = a->res[a->S + 1 + a->S + i];

        a->aux_lo[i] = a->aux_hi[i] = -1;
        if (a->res[i] == KVX_ROOM_SUCCESS && lo != AGREE_AUX_NEUTRAL && hi != AGREE_AUX_NEUTRAL &&
            (lo >> 7) != ((-hi) >> 7)) {
            a->res[i] = KVX_ROOM_FAILED;
            a->aux_lo[i] = (int16_t)(lo & 127);
            a->aux_hi[i] = (int16_t)(127 - ((-hi) & 127));
        }
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

            size_t slot = a->failed[k];

            if (a->X > 0 && a->aux_lo[slot] >= 0) {
                /* Aux differs: the two ranks named say what they hold. */
                int d = a->aux_lo[slot] == ctx->tp_rank   ? 0
                        : a->aux_hi[slot] == ctx->tp_rank ? 1
                                                          : -1;

                if (d >= 0 && room != NULL) {
                    agree_aux_describe(ctx, room, a->recs[k].aux[d], sizeof(a->recs[k].aux[d]));
                    a->recs[k].has = 1;
                    a->recs[k].count = 1;
                    failure_set_room(&a->recs[k].f, room->id, KVX_ERR_AUX, KVX_STAGE_AUX, NULL,
                                     "the TP ranks of %s[%d] hold different aux",
                                     kvx_role_name(ctx->role), ctx->instance);
                    a->recs[k].f.origin_tp_rank = a->aux_hi[slot];
                    a->recs[k].f.origin_rank =
                        joblayout_rank(&ctx->job, ctx->role, ctx->instance, a->aux_hi[slot]);
                }
            } else if (room != NULL && (room->state == KVX_ROOM_FAILED ||
                                        (room->side == KVX_ROLE_PREFILL && room->verdict) ||
                                        (room->side == KVX_ROLE_DECODE && room->prefill_failed))) {
                a->recs[k].has = 1;
                a->recs[k].count = 1;
                a->recs[k].verdict = room->side == KVX_ROLE_PREFILL && room->verdict;
                a->recs[k].f = room->failure;
            } else if (room != NULL && room->side == KVX_ROLE_PREFILL &&
                       room->state == KVX_ROOM_SUCCESS && sender_unheard(ctx, room)) {
                a->recs[k].has = 1;
                a->recs[k].count = 1;
                agree_silence(ctx, room, &a->recs[k].f);
            }
        }
        pthread_mutex_unlock(&ctx->lock);
        status = KVX_MPI_CALL(MPI_Iallreduce(a->recs, a->recs_out, (int)a->K, t->rec_type,
                                             t->root_op, ctx->tp_comm, &a->req[a->nreq++]));
    }
    if (status == KVX_OK && a->M > 0) {
        int size;

        uint64_t now = kvx_now_ns();

        MPI_Comm_size(ctx->tp_comm, &size);
        a->mine = calloc(2 * a->M + 1, sizeof(uint64_t));
        a->all = calloc((2 * a->M + 1) * (size_t)size, sizeof(uint64_t));
        if (a->mine == NULL || a->all == NULL) {
            return KVX_ERR_NO_MEMORY;
        }
        /* Both lists are sorted by id and share none (agree_collect_tombs()):
         * merged, the list stays sorted. */
        a->mine[0] = a->nfresh + a->ntomb;
        for (size_t i = 0, j = 0, n = 0; i < a->nfresh || j < a->ntomb; n++) {
            if (j == a->ntomb || (i < a->nfresh && a->fresh[i]->id < a->tomb[j].id)) {
                a->mine[n + 1] = a->fresh[i]->id;
                a->mine[1 + a->M + n] =
                    now - a->fresh[i]->opened > ctx->cfg.tp_timeout ? AGREE_FRESH_EXPIRED : 0;
                i++;
            } else {
                a->mine[n + 1] = a->tomb[j].id;
                a->mine[1 + a->M + n] = AGREE_TOMB_FLAGS(a->tomb[j].lacking, a->tomb[j].holder);
                j++;
            }
        }
        status = KVX_MPI_CALL(MPI_Iallgather(a->mine, (int)(2 * a->M + 1), MPI_UINT64_T, a->all,
                                             (int)(2 * a->M + 1), MPI_UINT64_T, ctx->tp_comm,
                                             &a->req[a->nreq++]));
    }
    return status;
}

/* Where id is in a sorted list of n ids, or -1. */
static int64_t agree_find(const uint64_t *list, uint64_t n, uint64_t id)
{
    uint64_t lo = 0, hi = n;

    while (lo < hi) {
        uint64_t mid = (lo + hi) / 2;

        if (list[mid] == id) {
            return (int64_t)mid;
        }
        if (list[mid] < id) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return -1;
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

/* A room some TP rank has not held within KVX_TP_TIMEOUT of another opening
 * it concludes FAILED on every rank that holds it, with the same record:
 * recorded as if by the rank that lacks it (the lowest such), since that is
 * where the scheduler went wrong. A decode instance decides: FAILED at once,
 * told to the prefill (VERDICT). A prefill instance does not conclude alone
 * (finding 17(a), docs/dev/protocol.md): it fails the room, tells the decode
 * ranks its record, and concludes with the decode instance's word
 * (sender_conclude_unheld()), which that record makes FAILED. */
static void agree_conclude_unheld(kvx_ctx_t *ctx, room_t *room, int lacking, int holder)
{
    int lacking_rank = joblayout_rank(&ctx->job, ctx->role, ctx->instance, lacking);
    int holder_rank = joblayout_rank(&ctx->job, ctx->role, ctx->instance, holder);
    kvx_failure_t f;

    failure_set_room(&f, room->id, KVX_ERR_OUT_OF_STEP, KVX_STAGE_AGREE, NULL,
                     "%s[%d].tp%d (rank %d) never opened room %llu, or closed it before its "
                     "instance agreed: %s[%d].tp%d (rank %d) held it for more than "
                     "KVX_TP_TIMEOUT (%.2f s)",
                     kvx_role_name(ctx->role), ctx->instance, lacking, lacking_rank,
                     (unsigned long long)room->id, kvx_role_name(ctx->role), ctx->instance, holder,
                     holder_rank, kvx_ns_to_s(ctx->cfg.tp_timeout));
    f.origin_rank = lacking_rank;
    f.origin_role = ctx->role;
    f.origin_instance = ctx->instance;
    f.origin_tp_rank = lacking;
    if (room->side == KVX_ROLE_PREFILL) {
        sender_conclude_unheld(ctx, room, &f);
        return;
    }
    if (!room_terminal(room)) {
        room_fail(ctx, room, &f, 1);
    }
    room->failure = f;
    room->agreed = 1;
    room->agreed_state = KVX_ROOM_FAILED;
    stats_room_concluded(ctx, room);
    agree_send_verdict(ctx, room);
    agree_bury(ctx, room->id, lacking, holder);
}

/* Fresh rooms every TP rank holds get slots, in id order (the same on every
 * rank: each computes the same intersection from the same lists). A fresh
 * room that some rank lacks, once any holder has held it for KVX_TP_TIMEOUT,
 * is concluded FAILED (decided from the same lists on every holder) -- on a
 * prefill rank once: it then waits for the decode's word (broken_at). */
static kvx_status_t agree_assign(kvx_ctx_t *ctx, struct kvx_agree *a)
{
    int size;

    MPI_Comm_size(ctx->tp_comm, &size);
    for (size_t i = 0; i < a->nfresh; i++) {
        room_t *room = a->fresh[i];
        int lacking = -1, expired = -1;
        uint64_t tomb = 0;

        for (int r = 0; r < size; r++) {
            const uint64_t *list = a->all + (size_t)r * (2 * a->M + 1);
            int64_t at = agree_find(list + 1, list[0], room->id);
            uint64_t flags = at >= 0 ? list[1 + a->M + (size_t)at] : 0;

            if (at < 0 || (flags & AGREE_FRESH_TOMB)) {
                lacking = lacking < 0 ? r : lacking;
                tomb = tomb == 0 ? flags & ~AGREE_FRESH_EXPIRED : tomb;
            } else if ((flags & AGREE_FRESH_EXPIRED) && expired < 0) {
                expired = r;
            }
        }
        if (tomb != 0) {
            /* Opened late here: a sibling concluded it without this rank. */
            agree_conclude_unheld(ctx, room, AGREE_TOMB_LACKING(tomb), AGREE_TOMB_HOLDER(tomb));
            continue;
        }
        if (lacking < 0 && agree_take_slot(ctx->agree, room) != KVX_OK) {
            return KVX_ERR_NO_MEMORY;
        }
        if (lacking >= 0 && expired >= 0 &&
            !(room->side == KVX_ROLE_PREFILL && room->broken_at != 0)) {
            agree_conclude_unheld(ctx, room, lacking, expired);
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
        if (rec->aux[0][0] != '\0' && rec->aux[1][0] != '\0') {
            snprintf(root.text, sizeof(root.text), "%.60s: %.*s; %.*s", rec->f.text, 95,
                     rec->aux[0], 95, rec->aux[1]);
        }
        if (!room_terminal(room)) {
            room_fail(ctx, room, &root, 1);
        }
        room->failure = root;
        if (room->side == KVX_ROLE_PREFILL && !rec->verdict) {
            /* Concluded without the decode's word (silence, or no decode
             * rank left): a decode instance that still agrees hears why. */
            sender_send_verdict(ctx, room);
        }
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
    stats_room_concluded(ctx, room);
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
            a->status = KVX_ERR_PEER_LOST; /* (or why it broke, below) */
            a->phase = 2;
            a->nreq = 0;
            agree_abandon(a);
        } else {
            /* Every entry says so, so that nothing reads an unwritten (or
             * zeroed: status OK, state FAILED) view as agreed. */
            for (size_t i = 0; i < a->n && a->reported != out; i++) {
                out[i].status = KVX_INPROGRESS;
                out[i].state = KVX_ROOM_BOOTSTRAPPING;
            }
            a->reported = out;
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
    if (a->status == KVX_ERR_PEER_LOST) {
        a->status = agree_broken_status(ctx);
    }
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
        stats_round_end(ctx, a->status);
        wake |= room_sweep(ctx) > 0; /* closed rooms kept through the round */
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

const room_agree_ops_t agree_room_ops = {
    .forget = agree_forget,
    .in_round = agree_in_round,
    .send_verdict = agree_send_verdict,
};
