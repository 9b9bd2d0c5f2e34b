/*
 * ctx.c - creating and destroying contexts, and the context getters.
 */
#include "config.h"

#include "ctx.h"
#include "mpi/kvx_mpi.h"
#include "topo/topo.h"
#include "util/failure.h"
#include "util/ident.h"
#include "util/log.h"
#include "util/time.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

/*
 * Live contexts, so that a stale or foreign handle is an answer, not a
 * crash. An entry counts the API calls inside its context: destroy lets
 * calls in while it fails the rooms (they read FAILED, stage shutdown),
 * then closes the entry and waits for the calls still inside before it
 * frees anything. A destroyed context's memory is kept until CTX_MAX_LIVE
 * more were destroyed, so that a new context cannot be given its address
 * and make the stale handle look live.
 */
#define CTX_MAX_LIVE 64

typedef struct ctx_entry {
    kvx_ctx_t *ctx; /* NULL: a free entry */
    unsigned users; /* API calls between ctx_enter() and ctx_leave() */
    int closed;     /* no API call may enter (being created, or destroyed) */
    int destroying; /* kvx_ctx_destroy() started: a second one is refused */
} ctx_entry_t;

static pthread_mutex_t ctx_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ctx_registry_idle = PTHREAD_COND_INITIALIZER;
static ctx_entry_t ctx_registry[CTX_MAX_LIVE];
static kvx_ctx_t *ctx_grave[CTX_MAX_LIVE];
static unsigned ctx_grave_next;

/* The entry of a context, or NULL (registry lock held). */
static ctx_entry_t *ctx_entry(const kvx_ctx_t *ctx)
{
    for (int i = 0; i < CTX_MAX_LIVE && ctx != NULL; i++) {
        if (ctx_registry[i].ctx == ctx) {
            return &ctx_registry[i];
        }
    }
    return NULL;
}

/* Takes a closed entry for a context being created; 0 when all are taken. */
static int ctx_register(kvx_ctx_t *ctx)
{
    ctx_entry_t *e = NULL;

    pthread_mutex_lock(&ctx_registry_lock);
    for (int i = 0; i < CTX_MAX_LIVE && e == NULL; i++) {
        e = ctx_registry[i].ctx == NULL ? &ctx_registry[i] : NULL;
    }
    if (e != NULL) {
        memset(e, 0, sizeof(*e));
        e->ctx = ctx;
        e->closed = 1;
    }
    pthread_mutex_unlock(&ctx_registry_lock);
    return e != NULL;
}

/* Opens a created context to API calls. */
static void ctx_open(kvx_ctx_t *ctx)
{
    pthread_mutex_lock(&ctx_registry_lock);
    ctx_entry(ctx)->closed = 0;
    pthread_mutex_unlock(&ctx_registry_lock);
}

/* Marks a live context as being destroyed; 0 for a stale or foreign
 * handle, or one another thread destroys already. */
static int ctx_begin_destroy(kvx_ctx_t *ctx)
{
    ctx_entry_t *e;
    int ok;

    pthread_mutex_lock(&ctx_registry_lock);
    e = ctx_entry(ctx);
    ok = e != NULL && !e->closed && !e->destroying;
    if (ok) {
        e->destroying = 1;
    }
    pthread_mutex_unlock(&ctx_registry_lock);
    return ok;
}

/* Closes a context to API calls and waits for the calls still inside. */
static void ctx_unregister(kvx_ctx_t *ctx)
{
    ctx_entry_t *e;

    pthread_mutex_lock(&ctx_registry_lock);
    e = ctx_entry(ctx);
    if (e != NULL) {
        e->closed = 1;
        while (e->users > 0) {
            pthread_cond_wait(&ctx_registry_idle, &ctx_registry_lock);
        }
        memset(e, 0, sizeof(*e));
    }
    pthread_mutex_unlock(&ctx_registry_lock);
}

/* Frees the context that left the graveyard to make room for this one. */
static void ctx_bury(kvx_ctx_t *ctx)
{
    kvx_ctx_t *old;

    pthread_mutex_lock(&ctx_registry_lock);
    old = ctx_grave[ctx_grave_next];
    ctx_grave[ctx_grave_next] = ctx;
    ctx_grave_next = (ctx_grave_next + 1) % CTX_MAX_LIVE;
    pthread_mutex_unlock(&ctx_registry_lock);
    free(old);
}

kvx_status_t ctx_enter(kvx_ctx_t *ctx)
{
    ctx_entry_t *e;
    int found;

    pthread_mutex_lock(&ctx_registry_lock);
    e = ctx_entry(ctx);
    found = e != NULL && !e->closed;
    if (found) {
        e->users++;
    }
    pthread_mutex_unlock(&ctx_registry_lock);
    if (found) {
        __atomic_add_fetch(&ctx->api_waiting, 1, __ATOMIC_RELAXED);
        pthread_mutex_lock(&ctx->lock);
        __atomic_sub_fetch(&ctx->api_waiting, 1, __ATOMIC_RELAXED);
    }
    return found ? KVX_OK : KVX_ERR_INVALID_HANDLE;
}

void ctx_leave(kvx_ctx_t *ctx)
{
    ctx_entry_t *e;

    pthread_mutex_unlock(&ctx->lock);
    pthread_mutex_lock(&ctx_registry_lock);
    e = ctx_entry(ctx);
    if (e != NULL && --e->users == 0 && e->closed) {
        pthread_cond_broadcast(&ctx_registry_idle);
    }
    pthread_mutex_unlock(&ctx_registry_lock);
}

kvx_role_t ctx_other_role(const kvx_ctx_t *ctx)
{
    return ctx->role == KVX_ROLE_PREFILL ? KVX_ROLE_DECODE : KVX_ROLE_PREFILL;
}

void kvx_ctx_params_init(kvx_ctx_params_t *p)
{
    if (p == NULL) {
        return;
    }
    memset(p, 0, sizeof(*p));
    p->kv.dtype = KVX_DTYPE_BF16;
    p->kv.attn = KVX_ATTN_MHA;
    p->kv.page_layout = KVX_PAGE_HND;
    p->mem_type = KVX_MEM_HOST;
}

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

/* Everything a rank can check alone, before any collective beyond dup. */
static kvx_status_t ctx_check_local(kvx_ctx_t *ctx, const kvx_ctx_params_t *params,
                                    kvx_ctx_t **ctx_p, kvx_failure_t *why)
{
    const char *layout;
    char who[64];
    kvx_status_t status;

    status = cfg_load(&ctx->cfg, environ, ctx_warn_unknown, NULL, why);
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
    layout = params->layout != NULL ? params->layout : ctx->cfg.layout;
    status = joblayout_parse(layout, ctx->size, &ctx->job, why);
    if (status != KVX_OK) {
        return status;
    }
    joblayout_locate(&ctx->job, ctx->rank, &ctx->role, &ctx->instance, &ctx->tp_rank);
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

    agree_cleanup(ctx);
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

/* The steps of creation; each ends with every rank agreeing on its outcome. */
static kvx_status_t ctx_build(kvx_ctx_t *ctx, const kvx_ctx_params_t *params, kvx_ctx_t **ctx_p,
                              kvx_failure_t *why)
{
    kvx_status_t status;

    status = bootstrap_agree(ctx->world, ctx_check_local(ctx, params, ctx_p, why), why);
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
    status = kucx_ctx_init(&ctx->ucx, why);
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
    status = bootstrap_agree(ctx->world, bootstrap_run(ctx, why), why);
    if (status != KVX_OK) {
        return status;
    }
    return progress_start(ctx);
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
    if (ctx == NULL || hmap_init(&ctx->rooms, 1024) != KVX_OK) {
        free(ctx);
        failure_set(&why, KVX_ERR_NO_MEMORY, KVX_STAGE_INIT, NULL, "no memory for a context");
        failure_copy(reason_p, &why);
        return KVX_ERR_NO_MEMORY;
    }
    ctx->magic = KVX_CTX_MAGIC;
    ctx->world = ctx->tp_comm = ctx->tp_comm_user = MPI_COMM_NULL;
    ctx->ucx.efd[KUCX_DATA] = ctx->ucx.efd[KUCX_CTRL] = -1;
    pthread_mutex_init(&ctx->lock, NULL);
    status = ctx_init_world(ctx, world, &why);
    if (status == KVX_OK) {
        status = ctx_build(ctx, params, ctx_p, &why);
    }
    if (status != KVX_OK) {
        char line[512];

        kvx_failure_format(&why, line, sizeof(line));
        kvx_error("kvx_ctx_create failed: %s", line);
        bootstrap_cleanup(ctx);
        cstage_cleanup(ctx);
        pool_cleanup(ctx);
        kucx_ctx_cleanup(&ctx->ucx);
        ctx_unregister(ctx);
        ctx_free(ctx);
        ident_set_role(KVX_ROLE_NONE, -1, -1, 0);
        failure_copy(reason_p, &why);
        return status;
    }
    ctx_open(ctx);
    kvx_info("context ready: %s[%d].tp%d of %d, %zu pages of %zu bytes per buffer, %d peers",
             kvx_role_name(ctx->role), ctx->instance, ctx->tp_rank, ctx->tp_size, ctx->num_pages,
             ctx->my.page_bytes, ctx->npeers);
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
static ctx_bye_t *ctx_quiesce(kvx_ctx_t *ctx)
{
    uint64_t deadline = kvx_now_ns() + ctx->cfg.shutdown_timeout;
    ctx_bye_t *byes = calloc((size_t)ctx->npeers + 1, sizeof(*byes));
    int waiting = 1;

    pthread_mutex_lock(&ctx->lock);
    ctx->stopping = 1;
    for (size_t i = 0; i < ctx->rooms.capacity; i++) {
        room_t *room = ctx->rooms.slots[i].value;
        kvx_failure_t f;

        if (room != NULL && room->state != KVX_ROOM_FAILED && room->state != KVX_ROOM_SUCCESS) {
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
    if (waiting) {
        kvx_warn("destroy: peers did not all say goodbye within %.1f s; closing anyway",
                 kvx_ns_to_s(ctx->cfg.shutdown_timeout));
    }
    return byes;
}

kvx_status_t kvx_ctx_destroy(kvx_ctx_t *ctx)
{
    ctx_bye_t *byes;

    if (!ctx_begin_destroy(ctx)) {
        return KVX_ERR_INVALID_HANDLE;
    }
    /* Other threads' calls are still answered while the rooms fail (they
     * read FAILED, stage shutdown; opens are refused with KVX_ERR_SHUTDOWN);
     * then the handle goes stale, and nothing is freed while a call is
     * still inside. */
    byes = ctx_quiesce(ctx);
    ctx_unregister(ctx);
    progress_stop(ctx);
    bootstrap_close_endpoints(ctx);
    /* What UCX still holds (puts to a dead peer) completes here, through
     * callbacks that use the rooms: those are freed after. */
    kucx_workers_destroy(&ctx->ucx);
    free(byes);
    while (ctx->out_head != NULL) {
        outmsg_t *m = ctx->out_head;

        ctx->out_head = m->next;
        free(m->buf);
        free(m);
    }
    for (size_t i = 0; i < ctx->rooms.capacity; i++) {
        /* Freeing shifts later entries into slot i: look at it again. */
        while (ctx->rooms.slots[i].value != NULL) {
            room_free(ctx, ctx->rooms.slots[i].value);
        }
    }
    bootstrap_cleanup(ctx);
    cstage_cleanup(ctx);
    pool_cleanup(ctx);
    kucx_ctx_cleanup(&ctx->ucx);
    ctx_free(ctx);
    return KVX_OK;
}

kvx_status_t kvx_ctx_identity(kvx_ctx_t *ctx, kvx_identity_t *id)
{
    kvx_status_t status = ctx_enter(ctx);

    if (status != KVX_OK) {
        return status;
    }
    if (id != NULL) {
        id->world_rank = ctx->rank;
        id->world_size = ctx->size;
        id->role = ctx->role;
        id->instance = ctx->instance;
        id->tp_rank = ctx->tp_rank;
        id->tp_size = ctx->tp_size;
        id->prefill_instances = ctx->job.count[KVX_ROLE_PREFILL];
        id->prefill_tp = ctx->job.tp[KVX_ROLE_PREFILL];
        id->decode_instances = ctx->job.count[KVX_ROLE_DECODE];
        id->decode_tp = ctx->job.tp[KVX_ROLE_DECODE];
    } else {
        status = KVX_ERR_INVALID_PARAM;
    }
    ctx_leave(ctx);
    return status;
}

MPI_Comm kvx_ctx_tp_comm(kvx_ctx_t *ctx)
{
    MPI_Comm comm;

    if (ctx_enter(ctx) != KVX_OK) {
        return MPI_COMM_NULL;
    }
    comm = ctx->tp_comm_user;
    ctx_leave(ctx);
    return comm;
}

size_t kvx_ctx_page_bytes(kvx_ctx_t *ctx)
{
    size_t bytes;

    if (ctx_enter(ctx) != KVX_OK) {
        return 0;
    }
    bytes = ctx->my.page_bytes;
    ctx_leave(ctx);
    return bytes;
}

kvx_status_t kvx_ctx_heads(kvx_ctx_t *ctx, unsigned *first_p, unsigned *count_p)
{
    kvx_status_t status = ctx_enter(ctx);

    if (status != KVX_OK) {
        return status;
    }
    if (first_p == NULL || count_p == NULL) {
        status = KVX_ERR_INVALID_PARAM;
    } else {
        *first_p = kvl_first_head(&ctx->my, ctx->tp_rank);
        *count_p = ctx->my.heads;
    }
    ctx_leave(ctx);
    return status;
}

kvx_status_t kvx_ctx_kv_buffer(kvx_ctx_t *ctx, unsigned layer, unsigned comp, void **buffer_p,
                               size_t *length_p)
{
    kvx_status_t status = ctx_enter(ctx);
    const kvl_t *k;

    if (status != KVX_OK) {
        return status;
    }
    k = &ctx->my;
    if (layer >= k->kv.layers || comp >= k->comps || buffer_p == NULL) {
        status = KVX_ERR_INVALID_PARAM;
    } else {
        *buffer_p = ctx->pool.buf[layer * k->comps + comp];
        if (length_p != NULL) {
            *length_p = ctx->pool.buf_len;
        }
    }
    ctx_leave(ctx);
    return status;
}

kvx_status_t kvx_ctx_pair_status(kvx_ctx_t *ctx, int other, kvx_failure_t *reason_p)
{
    kvx_status_t status = ctx_enter(ctx);

    if (status != KVX_OK) {
        return status;
    }
    if (other < 0 || other >= ctx->job.count[ctx_other_role(ctx)]) {
        status = KVX_ERR_INVALID_PARAM;
    } else if (ctx->pair_fail[other].status != KVX_OK) {
        status = ctx->pair_fail[other].status;
        failure_copy(reason_p, &ctx->pair_fail[other]);
    }
    ctx_leave(ctx);
    return status;
}
