/*
 * room.h - the room table: one room per id and side, its state, failure and pages.
 */
#ifndef KVX_CORE_ROOM_H
#define KVX_CORE_ROOM_H

#include <kvx.h>

#include "util/failure.h"

#include <stddef.h>
#include <stdint.h>

struct source;
struct target;

/* A message that arrived before its room was opened, replayed at open. */
typedef struct early {
    struct early *next;
    void *buf;
    size_t len;
} early_t;

/* Prefill: one hand-over of pages for a range of layers (kvx_room_send_layers):
 * room positions [pos, pos + n) of layers [l0, l0 + nl), posted once ready. */
typedef struct handover {
    size_t pos;
    size_t n;
    unsigned l0, nl;
    void *event; /* cudaEvent_t to wait for, NULL when ready */
} handover_t;

typedef struct room {
    uint64_t id;
    kvx_role_t side; /* PREFILL: sends; DECODE: receives */
    int peer_instance;
    int user_open; /* opened by the application (else a shadow of early messages) */
    kvx_room_state_t state;
    kvx_failure_t failure;    /* valid when state == FAILED */
    uint64_t nonce;           /* the decode room's incarnation */
    uint64_t opened, entered; /* when opened, when the state was entered (ns) */
    unsigned refs;            /* UCX operations still referencing the room */
    int closed;               /* closed by the application; freed when refs drops to 0 */
    uint64_t polled;          /* ctx->passes when kvx_room_poll() last looked */
    /* decode */
    uint32_t *pages;
    size_t npages;
    int64_t aux_slot;
    struct source *sources;
    unsigned nsources, nwriters, naccepted, ndone;
    /* prefill */
    size_t npages_total, nsrc;
    uint32_t *src;   /* source pages by position; [0, nsrc) named by some layer */
    handover_t *hov; /* hand-overs in the order they came */
    size_t nhov, hov_cap;
    size_t nready;       /* hand-overs [0, nready) are ready to post (their events completed) */
    uint32_t *lcount;    /* pages handed over per layer */
    size_t nlp, nlp_all; /* (page, layer)s handed over, and of the whole room */
    void *aux;           /* aux row (header + payload) to put */
    size_t aux_len;
    struct target *targets;
    unsigned ntargets, ngranted, ndone_sent;
    unsigned nreceived;
    uint64_t puts, bytes;
    int started;
    /* prefill: the closed room of this id that this one replaced
     * (room_api_create()) still owed answers to grants; the first grant from
     * each decode rank it owed is that room's, answered with this record
     * until prior_until (sender_on_prealloc(): a decode room opened before
     * the close reached it may have failed on it already, its pages given
     * back, and must not be adopted). NULL: none owed. */
    kvx_failure_t *prior;
    uint64_t prior_until;
    early_t *early;
    unsigned nearly;
    /* page safety (decode) */
    kvx_pages_state_t pages_state;
    int granted; /* decode: its grants (PREALLOC) went out: writers may write */
    /* agreement */
    kvx_room_state_t before_fail; /* the state it failed in */
    int verdict;                  /* prefill: holds the decode instance's agreed root cause */
    int decode_agreed;            /* prefill: the decode instance agreed SUCCESS (AGREED) */
    uint64_t broken_at; /* prefill: when its TP instance broke (a sibling lost), or when the
                           room was found unheld by a TP rank (agree_conclude_unheld()): from
                           then on the room concludes with the decode's word
                           (sender_conclude_broken) */
    int prefill_failed; /* decode: a prefill rank of the room said its instance cannot
                           conclude it (VERDICT from the prefill, sender_conclude_unheld()):
                           the room counts FAILED in rounds with that record, SUCCESS here
                           or not (receiver_on_verdict) */
    uint64_t notify_at; /* decode: injected hold on its outcome notices (RECEIVED, AGREED,
                           VERDICT) until then; UINT64_MAX: never sent */
    int slot;           /* place in the agreement vector, -1 for none */
    int agreed;         /* the instance agreed a final outcome */
    kvx_room_state_t agreed_state;
    /* fault injection */
    unsigned fault_seen; /* stages already evaluated for this room (bits) */
} room_t;

enum { PAGE_FREE = 0, PAGE_HELD, PAGE_QUARANTINED, PAGE_CLAIMING };

/* What the room floor asks of agreement, which sits above it: set by the
 * agree floor's table (agree_room_ops) when a context is made, as peer_listen()
 * is, and called synchronously. */
typedef struct room_agree_ops {
    /* A room is being freed: it gives up its place in the agreement vector. */
    void (*forget)(kvx_ctx_t *ctx, room_t *room);
    /* A round is in flight: it holds pointers to rooms (room_may_free()). */
    int (*in_round)(const kvx_ctx_t *ctx);
    /* Decode: tells the room's prefill ranks the agreed outcome. */
    void (*send_verdict)(kvx_ctx_t *ctx, room_t *room);
} room_agree_ops_t;
void room_agree_with(kvx_ctx_t *ctx, const room_agree_ops_t *ops);

/* What a room's side machine does when the room table's code reaches it:
 * the prefill's (room/sender.c, sender_side) and the decode's
 * (room/receiver.c, receiver_side), given to room_sides() when a context
 * is made and called synchronously, where room.c called them by name. */
typedef struct room_side {
    /* Tells each peer of the room on the other side why it failed (a FAIL
     * each, room_send_fail(), not before at). */
    void (*notify_fail)(kvx_ctx_t *ctx, room_t *room, uint64_t at);
    /* The room failed (its failure recorded and told): the prefill stops
     * posting and drains its targets; an opened decode room drains its
     * pages, or releases them. */
    void (*on_fail)(kvx_ctx_t *ctx, room_t *room);
    /* Every tick, after the room's deadline was checked: injected holds,
     * drain deadlines, a broken prefill instance's conclusion. */
    void (*on_tick)(kvx_ctx_t *ctx, room_t *room, uint64_t now);
    /* The room is being freed: the side's incarnations become dead, its
     * targets or sources go. */
    void (*on_free)(kvx_ctx_t *ctx, room_t *room);
    /* Every page was delivered: the room's state has no deadline here (the
     * other side's covers it). */
    int (*delivered)(const room_t *room);
    /* What a TRANSFERRING room waits for, for the deadline's reason (in buf
     * when it is built). */
    const char *(*waiting_for)(const kvx_ctx_t *ctx, const room_t *room, char *buf, size_t len);
} room_side_t;
void room_sides(kvx_ctx_t *ctx, const room_side_t *prefill, const room_side_t *decode);
struct peer;
/* Sends peer a FAIL with the room's failure about incarnation nonce, not
 * before not_before (0: now). */
void room_send_fail(kvx_ctx_t *ctx, room_t *room, struct peer *peer, uint64_t nonce,
                    uint64_t not_before);
/* The same with another record f (a closed room's, room->prior). */
void room_send_failure(kvx_ctx_t *ctx, const room_t *room, const kvx_failure_t *f,
                       struct peer *peer, uint64_t nonce, uint64_t not_before);

room_t *room_find(kvx_ctx_t *ctx, uint64_t id);
/* Walks the room table, in table order:
 *     size_t pos = 0;
 *     while ((room = room_next(ctx, &pos)) != NULL) ...
 * The body may fail rooms; only room_sweep(), room_tick() and
 * room_free_all() free rooms while they walk. */
room_t *room_next(const kvx_ctx_t *ctx, size_t *pos);
/* Frees every room that room_may_free() lets go (the end of a round);
 * returns how many. */
size_t room_sweep(kvx_ctx_t *ctx);
/* Frees every room (destroy, once the workers are gone). */
void room_free_all(kvx_ctx_t *ctx);
kvx_status_t room_new(kvx_ctx_t *ctx, uint64_t id, kvx_role_t side, int peer_instance,
                      room_t **room_p);
void room_set_state(kvx_ctx_t *ctx, room_t *room, kvx_room_state_t state);
/* The stage a failure now would be recorded at (from the room's state). */
kvx_stage_t room_stage(const room_t *room);
int room_terminal(const room_t *room);
/* A room the application closed before its instance agreed on it still
 * takes part in agreement (with its final state) until it has a slot or is
 * concluded, so that its TP siblings conclude their copies -- at most
 * 2 x KVX_TP_TIMEOUT after it was opened. */
int room_agree_pending(const kvx_ctx_t *ctx, const room_t *room);
/* How long the room has been in its state at now. A state entered after
 * now was sampled (a room failed within the same tick) is 0 old, never a
 * wrapped-around age. */
static inline uint64_t room_age(const room_t *room, uint64_t now)
{
    return now > room->entered ? now - room->entered : 0;
}
/* Records the room's failure (once: the first failure is the root cause)
 * and tells the other side of the room. */
void room_fail(kvx_ctx_t *ctx, room_t *room, const kvx_failure_t *f, int notify);
void room_unref(kvx_ctx_t *ctx, room_t *room);
/* May the room be freed now: closed, unreferenced, out of agreement and
 * answering no grant (room.c says each condition and why). Every path that
 * frees a room the application opened asks it. */
int room_may_free(const kvx_ctx_t *ctx, const room_t *room);
/* A closed prefill room that has not heard every grant and answers them
 * until its bootstrap deadline (room_may_free() says why). */
int room_answers_grants(const kvx_ctx_t *ctx, const room_t *room);
/* Frees the room if room_may_free() says so. */
void room_release(kvx_ctx_t *ctx, room_t *room);
void room_tick(kvx_ctx_t *ctx, uint64_t now);
/* The health's walk of the room table: rooms in one state longer than
 * KVX_HEALTH_STALL (a probe, stats_add_health()). */
void room_health(kvx_ctx_t *ctx, uint64_t now, kvx_health_t *h);
void room_free(kvx_ctx_t *ctx, room_t *room);
/* Decode: checks a grant's pages (in the pool, distinct, held by no open
 * room and not quarantined) and its aux slot (-1: none; held by no open
 * room, not quarantined) and holds them for room id; on error why says which
 * and nothing is held. */
kvx_status_t room_pages_claim(kvx_ctx_t *ctx, uint64_t id, const uint32_t *pages, size_t npages,
                              int64_t aux_slot, kvx_failure_t *why);
/* Hands a decode room's pages and aux slot back (free again, or quarantined
 * for good). */
void room_pages_release(kvx_ctx_t *ctx, uint64_t id, const uint32_t *pages, size_t npages,
                        int64_t aux_slot, int quarantine);
void room_pages_cleanup(kvx_ctx_t *ctx);

#endif
