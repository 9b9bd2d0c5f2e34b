/*
 * ctx.c - the registry of live contexts, entering one (its lock), and
 * freeing the blocks whose UCX callbacks never ran (ctx_free_held()).
 */
#include "config.h"

#include "core/ctx/ctx.h"
#include "util/time.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * Live contexts, so that a stale or foreign handle is an answer, not a
 * crash. An entry counts the API calls inside its context: destroy lets
 * calls in while it fails the rooms (they read FAILED, stage shutdown),
 * then closes the entry and waits for the calls still inside before it
 * frees anything. A destroyed context's memory is kept until CTX_MAX_LIVE
 * more were destroyed, so that a new context cannot be given its address
 * and make the stale handle look live (CTX_MAX_LIVE is in ctx.h).
 */
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
int ctx_register(kvx_ctx_t *ctx)
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
void ctx_open(kvx_ctx_t *ctx)
{
    pthread_mutex_lock(&ctx_registry_lock);
    ctx_entry(ctx)->closed = 0;
    pthread_mutex_unlock(&ctx_registry_lock);
}

/* Marks a live context as being destroyed; 0 for a stale or foreign
 * handle, or one another thread destroys already. */
int ctx_begin_destroy(kvx_ctx_t *ctx)
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
void ctx_unregister(kvx_ctx_t *ctx)
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
void ctx_bury(kvx_ctx_t *ctx)
{
    kvx_ctx_t *old;

    pthread_mutex_lock(&ctx_registry_lock);
    old = ctx_grave[ctx_grave_next];
    ctx_grave[ctx_grave_next] = ctx;
    ctx_grave_next = (ctx_grave_next + 1) % CTX_MAX_LIVE;
    pthread_mutex_unlock(&ctx_registry_lock);
    free(old);
}

/* Counts an API call into a live context; 0 for a stale handle. */
static int ctx_use(kvx_ctx_t *ctx)
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
    return found;
}

static void ctx_unuse(kvx_ctx_t *ctx)
{
    ctx_entry_t *e;

    pthread_mutex_lock(&ctx_registry_lock);
    e = ctx_entry(ctx);
    if (e != NULL && --e->users == 0 && e->closed) {
        pthread_cond_broadcast(&ctx_registry_idle);
    }
    pthread_mutex_unlock(&ctx_registry_lock);
}

kvx_status_t ctx_enter(kvx_ctx_t *ctx)
{
    if (!ctx_use(ctx)) {
        return KVX_ERR_INVALID_HANDLE;
    }
    __atomic_add_fetch(&ctx->api_waiting, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&ctx->lock);
    __atomic_sub_fetch(&ctx->api_waiting, 1, __ATOMIC_RELAXED);
    return KVX_OK;
}

void ctx_leave(kvx_ctx_t *ctx)
{
    pthread_mutex_unlock(&ctx->lock);
    ctx_unuse(ctx);
}

kvx_status_t ctx_enter_bounded(kvx_ctx_t *ctx, uint64_t wait_ns, int *locked_p)
{
    struct timespec until;

    if (!ctx_use(ctx)) {
        return KVX_ERR_INVALID_HANDLE;
    }
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)(wait_ns / KVX_NS_PER_S);
    until.tv_nsec += (long)(wait_ns % KVX_NS_PER_S);
    if (until.tv_nsec >= (long)KVX_NS_PER_S) {
        until.tv_sec++;
        until.tv_nsec -= (long)KVX_NS_PER_S;
    }
    __atomic_add_fetch(&ctx->api_waiting, 1, __ATOMIC_RELAXED);
    *locked_p = pthread_mutex_timedlock(&ctx->lock, &until) == 0;
    __atomic_sub_fetch(&ctx->api_waiting, 1, __ATOMIC_RELAXED);
    return KVX_OK;
}

void ctx_leave_bounded(kvx_ctx_t *ctx, int locked)
{
    if (locked) {
        pthread_mutex_unlock(&ctx->lock);
    }
    ctx_unuse(ctx);
}

size_t ctx_free_held(kvx_ctx_t *ctx)
{
    size_t n = 0;

    while (ctx->held != NULL) {
        ctx_held_t *h = ctx->held;

        ctx->held = h->next;
        free(h);
        n++;
    }
    return n;
}

kvx_role_t ctx_other_role(const kvx_ctx_t *ctx)
{
    return ctx->role == KVX_ROLE_PREFILL ? KVX_ROLE_DECODE : KVX_ROLE_PREFILL;
}

int ctx_worker_groups(const kvx_ctx_t *ctx)
{
    long long others = ctx->job.count[ctx_other_role(ctx)];

    return 1 + (int)(others < ctx->cfg.worker_groups - 1 ? others : ctx->cfg.worker_groups - 1);
}

int ctx_group_of(int ngroups, kvx_role_t self, kvx_role_t role, int instance)
{
    return role == self || ngroups < 2 ? 0 : 1 + instance % (ngroups - 1);
}
