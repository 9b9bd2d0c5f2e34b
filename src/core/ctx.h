/*
 * ctx.h - the context and the objects it owns: peers, rooms and their
 * per-peer parts. Everything here is protected by ctx->lock; the progress
 * thread holds it while it progresses UCX, API calls hold it while they
 * touch state.
 */
#ifndef KVX_CORE_CTX_H
#define KVX_CORE_CTX_H

#include <kvx.h>

#include "joblayout.h"
#include "cuda_stage.h"
#include "kvlayout.h"
#include "msg.h"
#include "plan.h"
#include "staging.h"
#include "ucx/kvx_ucx.h"
#include "util/cfg.h"
#include "util/hmap.h"

#include <pthread.h>
#include <stdint.h>

struct room;
struct target;

/* A rank this rank talks to over UCX. */
typedef struct peer {
    struct kvx_ctx *ctx; /* for UCX callbacks */
    int rank;
    kvx_role_t role;
    int instance, tp_rank;
    char name[64]; /* "decode[1].tp0 (rank 9)" */
    ucp_ep_h ep;   /* data plane: puts and flushes */
    ucp_ep_h cep;  /* control plane: kvx's messages (kvx_ucx.h says why apart) */
    /* Its pool, for ranks this rank writes to. */
    const kvl_t *kvl; /* its instance's geometry */
    size_t num_pages;
    uint64_t *buf_addr;   /* remote address of each (layer, comp) buffer */
    ucp_rkey_h *buf_rkey; /* rkey covering each buffer */
    ucp_rkey_h *rkeys;    /* per remote region */
    int nregions;
    uint64_t aux_addr;
    ucp_rkey_h aux_rkey;
    size_t aux_slots, aux_stride;
    /* Flow control of puts to it. */
    uint64_t inflight_bytes;
    unsigned inflight_ops;
    struct target *pump_head, *pump_tail; /* targets with puts waiting for room */
    /* Liveness. */
    uint64_t last_heard, last_sent;
    int lost, bye;
    int peer_mode;      /* its endpoints run in UCX peer error mode */
    int msg_writes;     /* pages between it and this rank travel as data messages */
    int ep_failed;      /* UCX reported an endpoint error: never used again */
    char lost_how[128]; /* when lost: how it was detected */
    int pid;            /* its process id */
    int same_machine;   /* same kernel and PID namespace: its pid can be checked */
    int put_in_host;    /* every RMA lane to it is this host's memory: fast-completion puts */
    int cancel_eps;     /* its endpoints failed: cancel them after this progress call */
    int same_host;      /* same_machine and the same network namespace */
    /* decode: rooms agreed SUCCESS in this round, for its AGREED */
    struct msg_agreed_room *agreed;
    uint32_t nagreed, agreed_cap;
} peer_t;

/* Sender side: one decode rank a prefill room talks to. */
typedef struct target {
    struct room *room;
    peer_t *peer;
    plan_pair_t pair;
    plan_geom_t geom;
    int granted;    /* its PREALLOC arrived */
    uint64_t nonce; /* the decode room's incarnation, from its PREALLOC */
    uint32_t *dst;  /* granted destination pages */
    int64_t aux_slot;
    /* Posting cursor over pages [batch_start, batch_end). */
    size_t posted; /* pages whose puts are all posted */
    size_t batch_end;
    plan_run_t *runs;
    size_t nruns, run;
    unsigned layer, comp;
    plan_iter_t iter;
    int iter_live;
    int in_batch, aux_posted, flushing, done_sent;
    int received;        /* the decode rank reported the room SUCCESS */
    int drained_sent;    /* DRAINED told the decode nothing is in flight */
    uint64_t hold_until; /* injected delay: post nothing before (ns) */
    void *aux_row;       /* header + payload put into the decode's aux slot */
    uint64_t puts, bytes;
    struct target *pump_next;
    int pumping; /* queued on peer->pump_* */
    /* pack.c: packed puts and data messages (modes PACK and UNPACK). */
    plan_mode_t mode;
    int msgs;               /* the decode asked for data messages only (mode is UNPACK) */
    uint32_t pack_page;     /* pages of the current run posted */
    size_t pack_pos;        /* position of the current run in the room's pages */
    unsigned pack_inflight; /* data messages still reading the source pages */
    int pack_waiting;       /* queued on ctx->pack_wait_* */
    struct target *pack_next;
} target_t;

/* Receiver side: one prefill rank a decode room talks to. */
typedef struct source {
    peer_t *peer;
    plan_pair_t pair;
    int accepted, done;
    int drained;       /* it confirmed nothing of the room is in flight */
    int complete;      /* done, and all its data unpacked (unpack.c) */
    int msgs;          /* it sends every page as data messages (KVX_WRITES) */
    int aux_in;        /* msgs: its aux row arrived (MSG_AUX) */
    uint64_t unpacked; /* bytes of data messages unpacked */
} source_t;

/* A message that arrived before its room was opened, replayed at open. */
typedef struct early {
    struct early *next;
    void *buf;
    size_t len;
} early_t;

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
    /* decode */
    uint32_t *pages;
    size_t npages;
    int64_t aux_slot;
    source_t *sources;
    unsigned nsources, nwriters, naccepted, ndone;
    /* prefill */
    size_t npages_total, nsrc;
    uint32_t *src; /* source pages handed over so far */
    void *aux;     /* aux row (header + payload) to put */
    size_t aux_len;
    target_t *targets;
    unsigned ntargets, ngranted, ndone_sent;
    unsigned nreceived;
    uint64_t puts, bytes;
    int started;
    early_t *early;
    unsigned nearly;
    /* page safety (decode) */
    kvx_pages_state_t pages_state;
    int granted; /* decode: its grants (PREALLOC) went out: writers may write */
    /* agreement */
    kvx_room_state_t before_fail; /* the state it failed in */
    int verdict;                  /* prefill: holds the decode instance's agreed root cause */
    int decode_agreed;            /* prefill: the decode instance agreed SUCCESS (AGREED) */
    uint64_t broken_at; /* prefill: when its TP instance broke (a sibling lost): from then on
                           the room concludes with the decode's word (sender_conclude_broken) */
    uint64_t notify_at; /* decode: injected hold on its outcome notices (RECEIVED, AGREED,
                           VERDICT) until then; UINT64_MAX: never sent */
    int slot;           /* place in the agreement vector, -1 for none */
    int agreed;         /* the instance agreed a final outcome */
    kvx_room_state_t agreed_state;
    /* fault injection */
    unsigned fault_seen; /* stages already evaluated for this room (bits) */
} room_t;

/* This rank's pool: buffers, registration, aux. */
typedef struct pool {
    void **buf;     /* [layer * comps + comp] */
    size_t buf_len; /* num_pages * page_bytes */
    int nbufs;
    kucx_region_t *regions;
    int nregions;
    int *buf_region;     /* region of each buffer */
    void *owned;         /* memory kvx allocated, or NULL */
    kvx_mem_type_t type; /* where the buffers are (aux slots are host memory) */
    int dev;             /* their CUDA device, when type is CUDA */
    char busid[32];      /* its PCI bus id; "" for a host pool */
    int numa;            /* NUMA node near this rank (its GPU's), -1 if unknown */
    int ucx_owned;       /* regions[0] is memory UCX allocated for kvx (KVX_POOL_ALLOC=ucx) */
    void *aux;
    size_t aux_slots, aux_stride;
    kucx_region_t aux_region;
} pool_t;

/* An outgoing control message waiting for (or in) UCX. */
typedef struct outmsg {
    struct outmsg *next;
    peer_t *peer;
    void *buf;
    size_t len;
    uint64_t not_before; /* injected delay (ns), 0 for none */
} outmsg_t;

struct agree_table;
struct fault_set;

#define KVX_DEAD_NONCES 4096

struct kvx_ctx {
    uint64_t magic;
    pthread_mutex_t lock;
    kvx_cfg_t cfg;
    MPI_Comm world, tp_comm_user, tp_comm;
    int rank, size;
    joblayout_t job;
    kvx_role_t role;
    int instance, tp_rank, tp_size;
    kvl_t my;       /* this rank's instance geometry */
    kvl_t *kvls[3]; /* [role][instance] geometry of every instance */
    kvx_kv_layout_t kv;
    size_t num_pages;
    size_t aux_item_size;
    pool_t pool;
    kucx_ctx_t ucx;
    peer_t *peers;
    int npeers;
    peer_t **peer_by_rank;    /* [world rank] -> peer or NULL */
    kvx_failure_t *pair_fail; /* [other instance]: status != OK when unusable */
    hmap_t rooms;
    outmsg_t *out_head, *out_tail;
    msg_limits_t limits;
    uint64_t bad_msgs;
    pthread_t progress;
    int progress_running, stopping;
    uint64_t next_nonce;
    /* Prefill: the decode incarnations (nonces) of rooms this rank closed,
     * the latest KVX_DEAD_NONCES of them: their late messages are dropped,
     * never kept for (or applied to) a new room with the same id. */
    uint64_t dead_nonce[KVX_DEAD_NONCES];
    unsigned dead_next;
    int api_waiting; /* API threads waiting for the lock (atomic) */
    int tp_broken;   /* a TP sibling is lost: no collective on tp_comm any more */
    int cancel_eps;  /* some peer's endpoints wait for peer_cancel_failed() */
    struct agree_table *agree;
    struct fault_set *faults; /* NULL when no rule is set */
    /* Staging (pack.c, unpack.c): packed puts, data message headers, landings. */
    staging_t staging;
    target_t *pack_wait_head, *pack_wait_tail; /* waiting for a slot or their data */
    struct landing *land_head, *land_tail;     /* data waiting for a slot to land in */
    unsigned landing;                          /* data messages being received */
    int pack_kick;                             /* a slot or a data message completed */
    cstage_t cstage;                           /* cuda_stage.c: the memory path */
};

#define KVX_CTX_MAGIC 0x6b76782d63747821ull

/* ---- ctx.c ---- */
/* Validates a handle from the API and locks it; KVX_ERR_INVALID_HANDLE when
 * it is not a live context. */
kvx_status_t ctx_enter(kvx_ctx_t *ctx);
void ctx_leave(kvx_ctx_t *ctx);
kvx_role_t ctx_other_role(const kvx_ctx_t *ctx);

/* ---- pool.c ---- */
/* The pool's device, before the topology is chosen: for a CUDA pool, loads
 * CUDA and checks the device (pool.busid gets its bus id). */
kvx_status_t pool_probe(kvx_ctx_t *ctx, const kvx_ctx_params_t *params, kvx_failure_t *why);
/* Places the pool (caller's buffers, checked, or allocated) and the aux slots. */
kvx_status_t pool_init(kvx_ctx_t *ctx, const kvx_ctx_params_t *params, kvx_failure_t *why);
/* Registers them with UCX, once the memory path is known (a staged CUDA
 * pool is not registered: UCX cannot access it). */
kvx_status_t pool_register(kvx_ctx_t *ctx, kvx_failure_t *why);
void pool_cleanup(kvx_ctx_t *ctx);

/* ---- bootstrap.c ---- */
/* Exchanges descriptors, validates pairs, creates peers and endpoints. */
kvx_status_t bootstrap_run(kvx_ctx_t *ctx, kvx_failure_t *why);
void bootstrap_cleanup(kvx_ctx_t *ctx);
/* Force-closes every endpoint: UCX completes what it still held (with an
 * error) through the usual callbacks. */
void bootstrap_close_endpoints(kvx_ctx_t *ctx);
/* Same status and reason on every rank of comm: the lowest failing rank's. */
kvx_status_t bootstrap_agree(MPI_Comm comm, kvx_status_t status, kvx_failure_t *why);

/* ---- peer.c ---- */
/* Queues a control message to a peer (sent by the progress thread). */
void peer_send(kvx_ctx_t *ctx, peer_t *peer, void *buf, size_t len);
/* Same, not before a time (an injected delay). */
void peer_send_at(kvx_ctx_t *ctx, peer_t *peer, void *buf, size_t len, uint64_t not_before);
/* Sends queued messages that are due (progress thread, lock held). */
void peer_flush_outbox(kvx_ctx_t *ctx);
/* Keepalive and loss detection (progress thread, lock held). */
void peer_tick(kvx_ctx_t *ctx, uint64_t now);
peer_t *peer_of_rank(kvx_ctx_t *ctx, int rank);
/* Puts may be posted to this peer now. */
int peer_has_room(const kvx_ctx_t *ctx, const peer_t *peer);
/* Declares a peer lost: its rooms fail with how (once). */
void peer_mark_lost(kvx_ctx_t *ctx, peer_t *peer, const char *how);
/* UCX's error callback of peer-mode endpoints. */
void peer_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status);
/* A room opened after a TP sibling was lost concludes FAILED at once: no
 * agreement round will ever run for it (found by tests/model/room.pml). */
void peer_break_if_broken(kvx_ctx_t *ctx, room_t *room);
/* A room opened with a peer already lost fails at once, with the loss. */
void peer_fail_if_lost(kvx_ctx_t *ctx, room_t *room, peer_t *peer);
/* Fails the room if the peer said goodbye (KVX_ERR_SHUTDOWN). */
void peer_fail_if_gone(kvx_ctx_t *ctx, room_t *room, const peer_t *peer);
/* A goodbye heard: the rooms the peer had a part in fail now. */
void peer_on_bye(kvx_ctx_t *ctx, peer_t *peer);
/* Cancels the endpoints of peers whose endpoints failed (outside UCX's
 * callbacks). */
void peer_cancel_failed(kvx_ctx_t *ctx);

/* ---- room.c ---- */
room_t *room_find(kvx_ctx_t *ctx, uint64_t id);
kvx_status_t room_new(kvx_ctx_t *ctx, uint64_t id, kvx_role_t side, int peer_instance,
                      room_t **room_p);
void room_set_state(kvx_ctx_t *ctx, room_t *room, kvx_room_state_t state);
/* The stage a failure now would be recorded at (from the room's state). */
kvx_stage_t room_stage(const room_t *room);
int room_terminal(const room_t *room);
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
/* Frees a closed room once nothing references it any more. */
void room_release(kvx_ctx_t *ctx, room_t *room);
void room_tick(kvx_ctx_t *ctx, uint64_t now);
void room_free(kvx_ctx_t *ctx, room_t *room);

/* ---- sender.c ---- */
kvx_status_t sender_open(kvx_ctx_t *ctx, room_t *room, size_t npages_total);
kvx_status_t sender_chunk(kvx_ctx_t *ctx, room_t *room, const uint32_t *pages, size_t n,
                          const void *aux, size_t aux_len, kvx_failure_t *why);
void sender_on_prealloc(kvx_ctx_t *ctx, room_t *room, peer_t *peer, const msg_t *m);
void sender_on_received(kvx_ctx_t *ctx, room_t *room, peer_t *peer);
/* The decode instance agreed the room FAILED with this root cause. */
void sender_on_verdict(kvx_ctx_t *ctx, room_t *room, const kvx_failure_t *root);
/* The decode instance agreed the room SUCCESS (AGREED from peer). */
void sender_on_agreed(kvx_ctx_t *ctx, room_t *room, const peer_t *peer);
/* May this prefill rank count its failed room as FAILED in its instance's
 * agreement (it holds the decode's verdict, or cannot get one)? */
int sender_may_conclude(const kvx_ctx_t *ctx, const room_t *room);
/* Can no decode rank of the room tell this prefill rank the decode
 * instance's outcome any more (every one it talks to lost or gone)? */
int sender_cut_off(const room_t *room);
/* A room of a broken prefill instance (no round can run): concludes it
 * once the decode's word came (AGREED, VERDICT), or none can come. */
void sender_conclude_broken(kvx_ctx_t *ctx, room_t *room);
/* Every decode rank of the room has all of this rank's pages (DONE sent):
 * from here on the decode instance decides the room, not this rank. */
static inline int sender_delivered(const room_t *room)
{
    return room->side == KVX_ROLE_PREFILL && room->ntargets > 0 &&
           room->ndone_sent == room->ntargets;
}
/* A decode rank's FAIL names its room's incarnation before any grant did. */
void sender_learn_nonce(room_t *room, const peer_t *peer, uint64_t nonce);
/* Prefill: the room is going away; its decode incarnations become dead. */
void sender_bury(kvx_ctx_t *ctx, const room_t *room);
/* Prefill: is a decode rank's message (nonce) about another incarnation
 * of the room id than the open room (room, or NULL) knows? 0: no; 1: one of
 * a room this rank closed; 2: not the one the open room was granted by. */
int sender_msg_stale(const kvx_ctx_t *ctx, const room_t *room, const peer_t *peer, uint64_t nonce);
/* The room failed: stop posting, and once nothing is in flight to a decode
 * rank tell it DRAINED (so it may reuse the pages). */
void sender_drain(kvx_ctx_t *ctx, room_t *room);
/* Resumes targets held by an injected delay (progress tick). */
void sender_tick(kvx_ctx_t *ctx, room_t *room, uint64_t now);
/* Posts what flow control allows for every target queued on peer. */
void sender_pump_peer(kvx_ctx_t *ctx, peer_t *peer);
/* For pack.c: */
void sender_pump(kvx_ctx_t *ctx, target_t *t);
int sender_next_batch(target_t *t);
void sender_account(target_t *t, size_t len, kvx_status_t posted);
void sender_put_cb(void *request, ucs_status_t status, void *user);
void sender_fail(kvx_ctx_t *ctx, target_t *t, kvx_status_t status, kvx_stage_t stage,
                 ucs_status_t ucs, const char *what);

/* ---- receiver.c ---- */
kvx_status_t receiver_open(kvx_ctx_t *ctx, room_t *room, const uint32_t *pages, size_t npages,
                           int64_t aux_slot);
void receiver_on_msg(kvx_ctx_t *ctx, room_t *room, peer_t *peer, const msg_t *m);
/* The room failed: its pages drain (or are released at once). */
void receiver_on_fail(kvx_ctx_t *ctx, room_t *room);
/* Drain deadline (progress tick). */
void receiver_tick(kvx_ctx_t *ctx, room_t *room, uint64_t now);
/* Counts a writer complete once it said DONE and its data is unpacked. */
void receiver_source_complete(kvx_ctx_t *ctx, room_t *room, source_t *s);
/* A failed room's pages are released once nothing can write into them. */
void receiver_update_pages(kvx_ctx_t *ctx, room_t *room);

/* ---- pack.c: the sender side of packed puts and data messages ---- */
/* Sets up staging when this rank's pairs need it (end of bootstrap). */
kvx_status_t pack_setup(kvx_ctx_t *ctx, kvx_failure_t *why);
void pack_cleanup(kvx_ctx_t *ctx);
/* Posts t's next packed put or data message: 1 posted, 0 nothing left in
 * the batch, -1 stop (failed, or waiting for staging). */
int pack_post(kvx_ctx_t *ctx, target_t *t);
/* The decode asked t for data messages only (MSG_WRITES_MESSAGES): sets t
 * up for them; KVX_ERR_CONFIG when this rank has no staging for it. */
kvx_status_t pack_use_messages(kvx_ctx_t *ctx, target_t *t, kvx_failure_t *why);
/* Sends the aux row (len bytes at row, kept until the message completes)
 * as MSG_AUX: 1 posted, 0 not (t failed, or waits for a slot). */
int pack_send_aux(kvx_ctx_t *ctx, target_t *t, const void *row, size_t len);
/* No data message of t still reads its source pages. */
int pack_quiet(const target_t *t);
/* Resumes waiting targets and landings (progress thread); returns work done. */
unsigned pack_progress(kvx_ctx_t *ctx);

/* Used by cuda_stage.c, which posts its own data messages in pack.c's order. */
int pack_peek(kvx_ctx_t *ctx, target_t *t, plan_run_t *sub, size_t *pos_p);
void pack_advance(target_t *t, uint32_t pages);
void pack_wait(kvx_ctx_t *ctx, target_t *t);

/* ---- cuda_stage.c: the memory path; staged data messages ---- */
/* Chooses the path for the whole job (collective over world: every rank
 * calls it once its pool is placed) and creates this rank's copy engine. */
kvx_status_t cstage_init(kvx_ctx_t *ctx, kvx_failure_t *why);
/* Waits for every copy and frees the engine (the staging area goes with
 * pack_cleanup()). */
void cstage_cleanup(kvx_ctx_t *ctx);
/* The mode a pair's runs travel in on this path. */
plan_mode_t cstage_mode(const kvx_ctx_t *ctx, plan_mode_t mode);
/* The staging area of a staged context: page-locked for a CUDA pool, on
 * the GPU's NUMA node; registered with UCX. */
kvx_status_t cstage_area_init(kvx_ctx_t *ctx, size_t size, unsigned cap, kvx_failure_t *why);
void cstage_area_cleanup(kvx_ctx_t *ctx);
/* Sender: t's next sub-run (at pos in the room) takes a slot; the progress
 * thread gathers it there and sends its data message once the copies
 * completed. Returns as pack_post(). */
int cstage_post(kvx_ctx_t *ctx, target_t *t, const plan_run_t *sub, size_t pos);
/* Receiver: copies a landed data message from its slot into the pool; the
 * slot is released, and the bytes count for the writer, once the copies
 * completed. */
void cstage_scatter(kvx_ctx_t *ctx, room_t *room, source_t *s, const msg_data_t *d,
                    staging_slot_t *slot);
/* Receiver: the same for eager data, copied and waited for at once. */
void cstage_scatter_now(kvx_ctx_t *ctx, room_t *room, source_t *s, const msg_data_t *d,
                        const void *data, size_t len);
/* Fences new copies, and finishes the slots whose copies completed:
 * sends gathered data, counts scattered data. Returns work still pending. */
unsigned cstage_progress(kvx_ctx_t *ctx);
/* A copy into the decode room's pages is still in flight. */
int cstage_room_busy(const kvx_ctx_t *ctx, const room_t *room);

/* ---- unpack.c: the receiver side of data messages ---- */
ucs_status_t unpack_am_cb(void *arg, const void *header, size_t header_length, void *data,
                          size_t length, const ucp_am_recv_param_t *param);
/* Every byte the source sends to be unpacked here was unpacked. */
int unpack_source_done(kvx_ctx_t *ctx, const room_t *room, const source_t *s);
/* Lands data that waited for a slot; returns work done. */
unsigned unpack_progress(kvx_ctx_t *ctx);
/* Drops waiting data and waits for data being received (destroy). */
void unpack_cleanup(kvx_ctx_t *ctx);
/* The open decode room and writing source of the data message whose header
 * and data a slot holds, checked against the room; NULL when it must be
 * dropped (the room failed if the message could not be of it). */
source_t *unpack_slot_source(kvx_ctx_t *ctx, const staging_slot_t *slot, msg_t *m, room_t **room_p);
/* Counts len bytes of s unpacked (and completes s when they were its last). */
void unpack_count(kvx_ctx_t *ctx, room_t *room, source_t *s, size_t len);

/* ---- protocol.c ---- */
/* The active-message handler: decodes, checks and dispatches a message. */
ucs_status_t protocol_am_cb(void *arg, const void *header, size_t header_length, void *data,
                            size_t length, const ucp_am_recv_param_t *param);
/* Handles one decoded message (also used to replay early messages). */
void protocol_dispatch(kvx_ctx_t *ctx, peer_t *peer, const msg_t *m, const void *buf, size_t len);

/* ---- agree.c ---- */
kvx_status_t agree_init(kvx_ctx_t *ctx);
void agree_cleanup(kvx_ctx_t *ctx);
/* A room is being freed: forget its slot. */
void agree_forget(kvx_ctx_t *ctx, room_t *room);
/* A round is in progress: closed rooms are kept until it ends. */
int agree_in_round(const kvx_ctx_t *ctx);
/* Decode: tells the room's prefill ranks the agreed outcome: its root cause
 * (VERDICT) for FAILED, AGREED for SUCCESS. */
void agree_send_verdict(kvx_ctx_t *ctx, room_t *room);
/* Decode: sends the AGREED lists agree_send_verdict() collected. */
void agree_flush_agreed(kvx_ctx_t *ctx);

/* ---- fault.c ---- */
typedef enum fault_effect {
    FAULT_NONE = 0,
    FAULT_FAIL,
    FAULT_DELAY,
    FAULT_DROP,
    FAULT_KILL
} fault_effect_t;

typedef struct fault_action {
    fault_effect_t effect;
    kvx_failure_t failure; /* FAULT_FAIL: the injected failure, tagged injected */
    uint64_t delay_ns;     /* FAULT_DELAY */
} fault_action_t;

kvx_status_t fault_parse(const char *spec, struct fault_set **set_p, kvx_failure_t *why);
void fault_free(struct fault_set *set);
/* Evaluates the rules at a stage of a room (once per room and stage).
 * FAULT_KILL does not return. */
fault_effect_t fault_eval(kvx_ctx_t *ctx, kvx_stage_t stage, room_t *room, fault_action_t *act);
/* The cheap test every hook makes first. */
static inline fault_effect_t fault_at(kvx_ctx_t *ctx, kvx_stage_t stage, room_t *room,
                                      fault_action_t *act)
{
    if (__builtin_expect(ctx->faults == NULL, 1)) {
        return FAULT_NONE;
    }
    return fault_eval(ctx, stage, room, act);
}

/* ---- progress.c ---- */
kvx_status_t progress_start(kvx_ctx_t *ctx);
void progress_stop(kvx_ctx_t *ctx);
/* Wakes the progress thread (new work was posted). */
void progress_wake(kvx_ctx_t *ctx);

#endif
