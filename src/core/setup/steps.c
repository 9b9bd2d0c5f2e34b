/*
 * steps.c - creating and destroying contexts: the steps of kvx_ctx_create()
 * and kvx_ctx_destroy(), in their order.
 */
#include "config.h"

#include "core/agree/agree.h"
#include "core/ctx/ctx.h"
#include "core/ctx/pool.h"
#include "core/ctx/stats.h"
#include "core/link/peer.h"
#include "core/link/progress.h"
#include "core/room/fault.h"
#include "core/room/outcome.h"
#include "core/room/protocol.h"
#include "core/room/receiver.h"
#include "core/room/room.h"
#include "core/room/room_stats.h"
#include "core/room/sender.h"
#include "core/room/unpack.h"
#include "core/setup/bootstrap.h"
#include "core/setup/joining.h"
#include "core/setup/pool_steps.h"
#include "core/xfer/cuda_stage.h"
#include "core/xfer/cursor.h"
#include "core/xfer/pack.h"
#include "core/xfer/verify.h"
#include "mpi/kvx_mpi.h"
#include "topo/topo.h"
#include "util/exitrec.h"
#include "util/failure.h"
#include "util/ident.h"
#include "util/log.h"
#include "util/time.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

static void ctx_warn_unknown(const char *name, const char *nearest, void *arg)
{
    kvx_warn("unknown variable %s in the environment is ignored (did you mean %s?)", name, nearest);
}

/* The rules of KVX_FAULT and of the parameters, joined. */
static const char *ctx_fault_spec(kvx_ctx_t *ctx, const kvx_ctx_params_t *params)
{
    static __thread char joined[2048];
    const char *env = ctx->cfg.fault != NULL ? ctx->cfg.fault : "";
    const char *api = params->fault != NULL ? params->fault : "";

    snprintf(joined, sizeof(joined), "%s%s%s", env, *env && *api ? ";" : "", api);
    return joined;
}

/* kvx calls MPI from the application's thread inside kvx_ctx_create(),
 * kvx_ctx_destroy() and kvx_agree_*() (its progress thread never does), so
 * MPI's thread level must let this thread call MPI (kvx.h: Threads and MPI). */
static kvx_status_t ctx_check_thread(kvx_failure_t *why)
{
    int provided = MPI_THREAD_SINGLE, is_main = 1;

    MPI_Query_thread(&provided);
    MPI_Is_thread_main(&is_main);
    if (provided < MPI_THREAD_SERIALIZED && !is_main) {
        failure_set(why, KVX_ERR_MPI, KVX_STAGE_INIT, NULL,
                    "kvx_ctx_create called from a thread other than MPI's main thread under %s: "
                    "call kvx from the thread that initialized MPI, or initialize MPI with "
                    "MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE",
                    provided == MPI_THREAD_SINGLE ? "MPI_THREAD_SINGLE" : "MPI_THREAD_FUNNELED");
        return KVX_ERR_MPI;
    }
    return KVX_OK;
}

/* The page stride of params (0: pages back to back) into ctx->my. */
static kvx_status_t ctx_check_stride(kvx_ctx_t *ctx, const kvx_ctx_params_t *params,
                                     kvx_failure_t *why)
{
    const kvl_t *k = &ctx->my;
    size_t stride = params->page_stride;
    const char *bad = NULL;

    if (stride == 0 || stride == k->page_bytes) {
        return KVX_OK;
    }
    if (stride < k->page_bytes) {
        bad = "is smaller than a page";
    } else if (k->kv.page_layout == KVX_PAGE_HEAD_MAJOR) {
        bad = "needs the HND or NHD page layout (HEAD_MAJOR keeps a head's pages together)";
    } else if (params->buffers == NULL) {
        bad = "needs buffers (a slab or kvx's own pool keeps pages back to back)";
    } else if (params->num_pages > 1 &&
               (SIZE_MAX - k->page_bytes) / (params->num_pages - 1) < stride) {
        bad = "overflows with num_pages";
    }
    if (bad != NULL) {
        failure_set(why, KVX_ERR_INVALID_PARAM, KVX_STAGE_INIT, NULL,
                    "page_stride=%zu %s (page_bytes=%zu)", stride, bad, k->page_bytes);
        return KVX_ERR_INVALID_PARAM;
    }
    ctx->my.page_stride = stride;
    return KVX_OK;
}

/* Everything a rank can check alone, before any collective beyond dup. */
static kvx_status_t ctx_check_local(kvx_ctx_t *ctx, const kvx_ctx_params_t *params,
                                    kvx_ctx_t **ctx_p, kvx_failure_t *why)
{
    const char *layout;
    char who[64];
    kvx_status_t status;

    status = cfg_load(&ctx->cfg, environ, ctx_warn_unknown, NULL, why);
    if (status == KVX_OK) {
        status = ctx_check_thread(why);
    }
    if (status != KVX_OK) {
        return status;
    }
    if (params == NULL || ctx_p == NULL) {
        failure_set(why, KVX_ERR_INVALID_PARAM, KVX_STAGE_INIT, NULL, "%s is NULL",
                    params == NULL ? "params" : "ctx_p");
        return KVX_ERR_INVALID_PARAM;
    }
    if (!ctx_register(ctx)) {
        failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_INIT, NULL,
                    "more than %d live contexts in this process", CTX_MAX_LIVE);
        return KVX_ERR_NO_MEMORY;
    }
    if ((unsigned)params->verify > KVX_VERIFY_FULL) {
        failure_set(why, KVX_ERR_INVALID_PARAM, KVX_STAGE_INIT, NULL,
                    "verify=%d: KVX_VERIFY_DEFAULT, _OFF, _SAMPLE or _FULL", (int)params->verify);
        return KVX_ERR_INVALID_PARAM;
    }
    if (params->verify != KVX_VERIFY_DEFAULT) {
        ctx->cfg.verify = (int)params->verify - KVX_VERIFY_OFF;
    }
    layout = params->layout != NULL ? params->layout : ctx->cfg.layout;
    if (joining_is_joiner(ctx)) {
        status = joining_own_layout(ctx, layout, why); /* its place comes later */
    } else {
        status = joblayout_parse(layout, ctx->size, &ctx->job, why);
        if (status == KVX_OK) {
            joblayout_locate(&ctx->job, ctx->rank, &ctx->role, &ctx->instance, &ctx->tp_rank);
        }
    }
    if (status != KVX_OK) {
        return status;
    }
    ctx->tp_size = ctx->job.tp[ctx->role];
    ident_set_role(ctx->role, ctx->instance, ctx->tp_rank, ctx->tp_size);
    snprintf(who, sizeof(who), "%s[%d]", kvx_role_name(ctx->role), ctx->instance);
    status = kvl_init(&ctx->my, &params->kv, ctx->tp_size, who, why);
    if (status != KVX_OK) {
        return status;
    }
    if (params->num_pages == 0 || params->num_pages > UINT32_MAX) {
        failure_set(why, KVX_ERR_INVALID_PARAM, KVX_STAGE_INIT, NULL,
                    "num_pages=%zu: a pool needs 1 to %u pages", params->num_pages, UINT32_MAX);
        return KVX_ERR_INVALID_PARAM;
    }
    if (params->buffers != NULL && params->slab != NULL) {
        failure_set(why, KVX_ERR_INVALID_PARAM, KVX_STAGE_INIT, NULL,
                    "give either buffers or slab, not both");
        return KVX_ERR_INVALID_PARAM;
    }
    status = ctx_check_stride(ctx, params, why);
    if (status != KVX_OK) {
        return status;
    }
    if ((params->aux_slots == 0) != (params->aux_item_size == 0)) {
        failure_set(why, KVX_ERR_INVALID_PARAM, KVX_STAGE_INIT, NULL,
                    "aux_slots=%zu and aux_item_size=%zu: give both or neither", params->aux_slots,
                    params->aux_item_size);
        return KVX_ERR_INVALID_PARAM;
    }
    status = fault_parse(ctx_fault_spec(ctx, params), &ctx->faults, why);
    if (status != KVX_OK) {
        return status;
    }
    if (ctx->faults != NULL) {
        kvx_warn("fault injection is on: %s", ctx_fault_spec(ctx, params));
    }
    ctx->kv = params->kv;
    ctx->num_pages = params->num_pages;
    ctx->aux_item_size = params->aux_item_size;
    return KVX_OK;
}

static kvx_status_t ctx_split_tp(kvx_ctx_t *ctx)
{
    int color = joblayout_color(&ctx->job, ctx->role, ctx->instance);
    kvx_status_t status;

    status = KVX_MPI_CALL(MPI_Comm_split(ctx->world, color, ctx->tp_rank, &ctx->tp_comm));
    if (status == KVX_OK) {
        status = KVX_MPI_CALL(MPI_Comm_dup(ctx->tp_comm, &ctx->tp_comm_user));
    }
    return status;
}

static void ctx_free(kvx_ctx_t *ctx)
{
    int broken = ctx->tp_broken;

    joining_cleanup(ctx);
    agree_cleanup(ctx);
    stats_cleanup(ctx);
    room_pages_cleanup(ctx);
    fault_free(ctx->faults);
    if (ctx->tp_comm_user != MPI_COMM_NULL) {
        MPI_Comm_free(&ctx->tp_comm_user);
    }
    /* A communicator with a dead rank may have collectives that never
     * complete: it is left to MPI_Finalize. */
    if (ctx->tp_comm != MPI_COMM_NULL && !broken) {
        MPI_Comm_free(&ctx->tp_comm);
    }
    if (ctx->world != MPI_COMM_NULL) {
        MPI_Comm_free(&ctx->world);
    }
    hmap_cleanup(&ctx->rooms);
    cfg_cleanup(&ctx->cfg);
    pthread_mutex_destroy(&ctx->lock);
    ctx->magic = 0;
    ctx_bury(ctx);
}

/* What creation built below the rooms, in the order it goes: the endpoints,
 * keys and landings (bootstrap), the copy engine and staging area, the
 * read-back of a CUDA pool, the pool, the UCX context. The one list, for
 * destroy and for a creation that failed part way (each step frees only
 * what was made). */
static void ctx_teardown(kvx_ctx_t *ctx)
{
    bootstrap_cleanup(ctx);
    cstage_cleanup(ctx);
    verify_dev_destroy(ctx->vdev);
    ctx->vdev = NULL;
    pool_cleanup(ctx);
    kucx_ctx_cleanup(&ctx->ucx);
}

static kvx_status_t ctx_init_world(kvx_ctx_t *ctx, MPI_Comm world, kvx_failure_t *why)
{
    int initialized = 0, finalized = 0, inter = 0;
    kvx_status_t status;

    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized) {
        failure_set(why, KVX_ERR_MPI, KVX_STAGE_INIT, NULL,
                    "MPI is not initialized (call MPI_Init before kvx_ctx_create)");
        return KVX_ERR_MPI;
    }
    if (world == MPI_COMM_NULL) {
        failure_set(why, KVX_ERR_INVALID_PARAM, KVX_STAGE_INIT, NULL, "world is MPI_COMM_NULL");
        return KVX_ERR_INVALID_PARAM;
    }
    /* Every rank of an intercommunicator sees it as one: all refuse alike. */
    if (MPI_Comm_test_inter(world, &inter) == MPI_SUCCESS && inter) {
        failure_set(why, KVX_ERR_INVALID_PARAM, KVX_STAGE_INIT, NULL,
                    "world is an intercommunicator; kvx needs an intracommunicator");
        return KVX_ERR_INVALID_PARAM;
    }
    status = KVX_MPI_CALL(MPI_Comm_dup(world, &ctx->world));
    if (status != KVX_OK) {
        failure_set(why, status, KVX_STAGE_INIT, NULL, "MPI_Comm_dup of world failed");
        return status;
    }
    /* kvx's own communicators report errors instead of aborting the job. */
    MPI_Comm_set_errhandler(ctx->world, MPI_ERRORS_RETURN);
    MPI_Comm_rank(ctx->world, &ctx->rank);
    MPI_Comm_size(ctx->world, &ctx->size);
    ident_set_rank(ctx->rank);
    /* A role from an earlier context must not name this one's failures. */
    ident_set_role(KVX_ROLE_NONE, -1, -1, 0);
    return KVX_OK;
}

/* The choice for this rank's GPU (pool.busid), or without one: by NUMA
 * locality. A GPU the topology lacks (a container that hides PCI devices
 * from hwloc) is chosen for as if the rank had none, with a warning. */
static kvx_status_t ctx_choose(kvx_ctx_t *ctx, const topo_t *topo, int local_rank,
                               kvx_topo_choice_t *choice, kvx_failure_t *why)
{
    const char *busid = ctx->pool.busid[0] != '\0' ? ctx->pool.busid : NULL;
    char norm[32];

    if (busid != NULL && topo_busid_parse(busid, norm, sizeof(norm)) == 0 &&
        topo_gpu_find(topo, norm) == NULL) {
        kvx_warn("CUDA device %d (PCI %s) is not in this node's topology (%s): NICs are chosen "
                 "by NUMA locality",
                 ctx->pool.dev, busid, kvx_topo_source(topo));
        busid = NULL;
    }
    return topo_choose(topo, busid, local_rank, choice, why);
}

/* Picks this rank's NICs and cores (src/topo) before UCX reads its
 * configuration: near the GPU of a CUDA pool; a rank with a host pool
 * chooses by NUMA locality and is not bound. */
static kvx_status_t ctx_topology(kvx_ctx_t *ctx, kvx_failure_t *why)
{
    MPI_Comm node;
    int local_rank = 0;
    topo_t *topo = NULL;
    kvx_topo_choice_t choice;
    topo_applied_t applied;
    kvx_status_t status;

    status = KVX_MPI_CALL(
        MPI_Comm_split_type(ctx->world, MPI_COMM_TYPE_SHARED, ctx->rank, MPI_INFO_NULL, &node));
    if (status != KVX_OK) {
        failure_set(why, status, KVX_STAGE_INIT, NULL, "cannot find the ranks of this node");
        return status;
    }
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_free(&node);
    status = topo_create(&ctx->cfg, NULL, &topo, why);
    if (status == KVX_OK) {
        status = ctx_choose(ctx, topo, local_rank, &choice, why);
    }
    if (status == KVX_OK) {
        status = topo_apply(topo, &choice, &ctx->cfg, &applied, why);
        ctx->pool.numa = choice.numa; /* where staging memory goes */
    }
    if (topo != NULL) {
        topo_destroy(topo);
    }
    return status;
}

/* The control plane's handler and the work of the progress thread, each
 * round: the senders' queued puts, then packed puts, landings and staged
 * copies; each tick: agreement out of step, the rooms' deadlines, then the
 * peers' keepalives and losses. Then the thread starts. */
static kvx_status_t ctx_start_progress(kvx_ctx_t *ctx)
{
    kvx_status_t status = kucx_set_am_handler(&ctx->ucx, MSG_AM_ID, protocol_am_cb, ctx);

    if (status != KVX_OK) {
        return status;
    }
    progress_add_poller(ctx, sender_pump_peers);
    progress_add_poller(ctx, cursor_progress);
    progress_add_poller(ctx, unpack_progress);
    progress_add_poller(ctx, cstage_progress);
    progress_add_poller(ctx, sender_poll_events);
    progress_add_ticker(ctx, agree_tick);
    progress_add_ticker(ctx, room_tick);
    progress_add_ticker(ctx, peer_tick);
    if (ctx->join != NULL) {
        progress_add_ticker(ctx, joining_tick); /* not a poller: no syscall per round */
    }
    return progress_start(ctx);
}

/* The steps of creation; each ends with every rank agreeing on its outcome. */
static kvx_status_t ctx_build(kvx_ctx_t *ctx, const kvx_ctx_params_t *params, kvx_ctx_t **ctx_p,
                              kvx_failure_t *why)
{
    kvx_status_t status;

    status = bootstrap_agree(ctx->world, ctx_check_local(ctx, params, ctx_p, why), why);
    if (status == KVX_OK && joining_is_joiner(ctx)) {
        status = joining_contact(ctx, why);
    }
    if (status != KVX_OK) {
        return status;
    }
    status = ctx_split_tp(ctx);
    if (status == KVX_OK) {
        status = agree_init(ctx);
    }
    if (status != KVX_OK) {
        failure_set(why, status, KVX_STAGE_INIT, NULL, "cannot split the TP communicators");
        return status;
    }
    /* A CUDA pool's device is known before the topology: its bus id
     * chooses the NICs. Without CUDA every rank hears why. */
    status = bootstrap_agree(ctx->world, pool_probe(ctx, params, why), why);
    if (status != KVX_OK) {
        return status;
    }
    status = bootstrap_agree(ctx->world, ctx_topology(ctx, why), why);
    if (status != KVX_OK) {
        return status;
    }
    status = kucx_ctx_init(&ctx->ucx, ctx_worker_groups(ctx), why);
    if (status == KVX_OK) {
        status = pool_init(ctx, params, why);
    }
    status = bootstrap_agree(ctx->world, status, why);
    if (status == KVX_OK) {
        status = bootstrap_agree(ctx->world, cstage_init(ctx, why), why);
    }
    if (status == KVX_OK) {
        status = bootstrap_agree(ctx->world, pool_register(ctx, why), why);
    }
    if (status != KVX_OK) {
        return status;
    }
    status = bootstrap_agree(ctx->world, joining_prepare(ctx, why), why);
    if (status != KVX_OK) {
        return status;
    }
    status = bootstrap_agree(
        ctx->world, joining_is_joiner(ctx) ? joining_bootstrap(ctx, why) : bootstrap_run(ctx, why),
        why);
    if (status != KVX_OK) {
        return status;
    }
    return ctx_start_progress(ctx);
}

kvx_status_t kvx_ctx_create(MPI_Comm world, const kvx_ctx_params_t *params, kvx_ctx_t **ctx_p,
                            kvx_failure_t *reason_p)
{
    kvx_failure_t why;
    kvx_ctx_t *ctx;
    kvx_status_t status;

    memset(&why, 0, sizeof(why));
    /* A NULL ctx_p is refused by the agreed checks (ctx_check_local), so
     * that the other ranks are not left waiting in a collective. */
    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL || hmap_init(&ctx->rooms, 1024) != KVX_OK || stats_init(ctx) != KVX_OK) {
        if (ctx != NULL) {
            hmap_cleanup(&ctx->rooms);
        }
        free(ctx);
        failure_set(&why, KVX_ERR_NO_MEMORY, KVX_STAGE_INIT, NULL, "no memory for a context");
        failure_copy(reason_p, &why);
        return KVX_ERR_NO_MEMORY;
    }
    ctx->magic = KVX_CTX_MAGIC;
    ctx->world = ctx->tp_comm = ctx->tp_comm_user = MPI_COMM_NULL;
    pthread_mutex_init(&ctx->lock, NULL);
    /* A lost peer fails its rooms (room/outcome.c); a PING tells the rounds. */
    peer_listen(ctx, peer_fail_rooms, agree_rounds);
    room_agree_with(ctx, &agree_room_ops);
    xfer_attach(ctx, &room_xfer_ops);
    room_sides(ctx, &sender_side, &receiver_side);
    stats_add_health(ctx, peer_health);
    stats_add_health(ctx, room_health);
    status = ctx_init_world(ctx, world, &why);
    if (status == KVX_OK) {
        status = ctx_build(ctx, params, ctx_p, &why);
    }
    if (status != KVX_OK) {
        char line[512];

        kvx_failure_format(&why, line, sizeof(line));
        kvx_error("kvx_ctx_create failed: %s", line);
        ctx_teardown(ctx);
        ctx_unregister(ctx);
        ctx_free(ctx);
        ident_set_role(KVX_ROLE_NONE, -1, -1, 0);
        failure_copy(reason_p, &why);
        return status;
    }
    ctx_open(ctx);
    if (ctx->cfg.verify > 0 && ctx->pool.type != KVX_MEM_HOST) {
        kvx_failure_t vwhy;

        /* Any rank may be asked for digests: a CUDA pool is read back. */
        if (verify_dev_create(ctx->pool.dev, ctx->cfg.drain_timeout, &ctx->vdev, &vwhy) != KVX_OK) {
            kvx_warn("KVX_VERIFY=%s: this rank's pool is CUDA memory and cannot be read back (%s): "
                     "what it sends or receives is not checked",
                     ctx->cfg.verify == 2 ? "full" : "sample", vwhy.text);
        }
    }
    kvx_info("context ready: %s[%d].tp%d of %d, %zu pages of %zu bytes per buffer, %d peers",
             kvx_role_name(ctx->role), ctx->instance, ctx->tp_rank, ctx->tp_size, ctx->num_pages,
             ctx->my.page_bytes, ctx->npeers);
    if (ctx->cfg.run_status_dir != NULL && ctx->cfg.run_status_dir[0] != '\0') {
        exitrec_arm(ctx->cfg.run_status_dir, ctx->rank);
    }
    joining_publish(ctx);
    *ctx_p = ctx;
    return KVX_OK;
}

/*
 * Goodbye to one peer. A peer that hears BYE may unmap its memory at once,
 * so BYE goes only after a flush of the data endpoint says that nothing
 * this rank put or sent to it is still in flight. Kept until the workers
 * are destroyed: a flush that never completed completes there.
 */
typedef struct ctx_bye {
    kvx_ctx_t *ctx;
    peer_t *peer;
    int sent;
} ctx_bye_t;

static void ctx_bye_send(ctx_bye_t *b)
{
    size_t len;
    void *bye = msg_new(MSG_BYE, b->ctx->rank, 0, 0, &len);

    b->sent = 1;
    if (bye != NULL && !b->peer->lost) {
        peer_send(b->ctx, b->peer, bye, len);
    } else {
        free(bye);
    }
}

static void ctx_bye_flushed(void *request, ucs_status_t status, void *user)
{
    kucx_request_free(request);
    ctx_bye_send(user);
}

/* Flushes the data endpoint, then says goodbye (lock held). */
static void ctx_bye_start(kvx_ctx_t *ctx, ctx_bye_t *b, peer_t *peer)
{
    ucs_status_t ucs;

    b->ctx = ctx;
    b->peer = peer;
    if (peer->lost || peer->ep_failed ||
        kucx_flush(peer->ep, ctx_bye_flushed, b, &ucs) != KVX_INPROGRESS) {
        ctx_bye_send(b);
    }
}

/* Fails every room still in flight and waits until no operation is in
 * flight and every live peer said goodbye (or the shutdown deadline).
 * Returns the goodbyes, to be freed once the workers are destroyed. */
/* Names the peers destroy did not wait for (lost) and, when the goodbyes
 * ran out of time, those it waited for in vain: the user learns which ranks
 * it could not reach. */
static void ctx_say_unreached(kvx_ctx_t *ctx, const ctx_bye_t *byes, int waiting)
{
    char lost[512], silent[512];
    size_t nl = 0, ns = 0;

    lost[0] = silent[0] = '\0';
    pthread_mutex_lock(&ctx->lock);
    for (int i = 0; i < ctx->npeers; i++) {
        peer_t *peer = &ctx->peers[i];

        if (peer->lost && !peer->bye && nl < sizeof(lost)) {
            nl +=
                (size_t)snprintf(lost + nl, sizeof(lost) - nl, "%s%s", nl ? ", " : "", peer->name);
        } else if (waiting && !peer->lost &&
                   (!peer->bye || peer->inflight_ops > 0 || byes == NULL || !byes[i].sent) &&
                   ns < sizeof(silent)) {
            ns += (size_t)snprintf(silent + ns, sizeof(silent) - ns, "%s%s", ns ? ", " : "",
                                   peer->name);
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    if (nl > 0) {
        kvx_info("destroy: not waiting for lost peers: %s", lost);
    }
    if (waiting) {
        kvx_warn("destroy: peers did not all say goodbye within %.1f s; closing anyway "
                 "without: %s",
                 kvx_ns_to_s(ctx->cfg.shutdown_timeout), silent[0] ? silent : "(the outbox)");
    }
}

static ctx_bye_t *ctx_quiesce(kvx_ctx_t *ctx)
{
    room_t *room;
    uint64_t deadline = kvx_now_ns() + ctx->cfg.shutdown_timeout;
    ctx_bye_t *byes = calloc((size_t)ctx->npeers + 1, sizeof(*byes));
    int waiting = 1;

    pthread_mutex_lock(&ctx->lock);
    ctx->stopping = 1;
    for (size_t pos = 0; (room = room_next(ctx, &pos)) != NULL;) {
        kvx_failure_t f;

        if (room->state != KVX_ROOM_FAILED && room->state != KVX_ROOM_SUCCESS) {
            failure_set_room(&f, room->id, KVX_ERR_SHUTDOWN, KVX_STAGE_SHUTDOWN, NULL,
                             "the context was destroyed while the room was in flight");
            room_fail(ctx, room, &f, 1);
        }
    }
    for (int i = 0; i < ctx->npeers && byes != NULL; i++) {
        ctx_bye_start(ctx, &byes[i], &ctx->peers[i]);
    }
    pthread_mutex_unlock(&ctx->lock);
    progress_wake(ctx);
    while (waiting && kvx_now_ns() < deadline) {
        usleep(1000);
        pthread_mutex_lock(&ctx->lock);
        waiting = ctx->out_head != NULL;
        for (int i = 0; i < ctx->npeers && !waiting; i++) {
            peer_t *peer = &ctx->peers[i];

            /* Puts to a lost peer never complete: it is not waited for. */
            waiting = !peer->lost &&
                      (!peer->bye || peer->inflight_ops > 0 || byes == NULL || !byes[i].sent);
        }
        pthread_mutex_unlock(&ctx->lock);
    }
    ctx_say_unreached(ctx, byes, waiting);
    return byes;
}

kvx_status_t kvx_ctx_destroy(kvx_ctx_t *ctx)
{
    ctx_bye_t *byes;
    size_t held;

    if (!ctx_begin_destroy(ctx)) {
        return KVX_ERR_INVALID_HANDLE;
    }
    /* Other threads' calls are still answered while the rooms fail (they
     * read FAILED, stage shutdown; opens are refused with KVX_ERR_SHUTDOWN);
     * then the handle goes stale, and nothing is freed while a call is
     * still inside. */
    byes = ctx_quiesce(ctx);
    stats_export_final(ctx);
    ctx_unregister(ctx);
    progress_stop(ctx);
    if (bootstrap_close_endpoints(ctx) == 0) {
        /* What UCX still holds (puts to a dead peer) completes here, through
         * callbacks that use the rooms: those are freed after. */
        kucx_workers_destroy(&ctx->ucx);
    } else {
        /* Endpoints to unreachable peers were left open: destroying their
         * workers would abort the process. Nothing progresses the workers
         * again, so no callback runs into the rooms freed below. */
        kucx_workers_abandon(&ctx->ucx);
    }
    /* What the callbacks of requests that never complete would free. */
    held = ctx_free_held(ctx);
    if (held > 0) {
        kvx_info("destroy: %zu data messages to or from lost peers never completed; freed what "
                 "they held",
                 held);
    }
    free(byes);
    while (ctx->out_head != NULL) {
        outmsg_t *m = ctx->out_head;

        ctx->out_head = m->next;
        free(m->buf);
        free(m);
    }
    room_free_all(ctx);
    ctx_teardown(ctx);
    ctx_free(ctx);
    return KVX_OK;
}
