/*
 * ucx_ctx.c - the UCP context and worker kvx's progress thread owns.
 */
#include "config.h"

#include "kvx_ucx.h"
#include "util/failure.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kucx_version(char *buf, size_t len)
{
    snprintf(buf, len, "%s", ucp_get_version_string());
}

static kvx_status_t kucx_fail(kvx_failure_t *why, const char *what, ucs_status_t rc)
{
    kvx_status_t status = kucx_status(rc);

    kvx_error("%s failed: %s", what, ucs_status_string(rc));
    failure_set(why, status, KVX_STAGE_INIT, ucs_status_string(rc), "%s failed", what);
    return status;
}

kvx_status_t kucx_ctx_init(kucx_ctx_t *u, int ngroups, kvx_failure_t *why)
{
    ucp_params_t params = { 0 };
    ucp_worker_params_t wparams = { 0 };
    ucp_context_attr_t cattr = { 0 };
    ucp_config_t *config;
    ucs_status_t rc;

    memset(u, 0, sizeof(*u));
    /* No prefix: kvx's UCX context reads the user's UCX_* variables (and
     * the UCX_NET_DEVICES the topology chose) like any UCX program. */
    rc = ucp_config_read(NULL, NULL, &config);
    if (rc != UCS_OK) {
        return kucx_fail(why, "ucp_config_read", rc);
    }
    /* UCX 1.13's default protocols abort the process when, as the target of
     * software-emulated puts (TCP), a rank answers puts of a peer whose
     * endpoint failed ("Fatal: unexpected error: Endpoint timeout" in
     * ucp_put_handler; seen when a prefill rank died mid-transfer). The v2
     * protocols fail those requests instead, at the same bandwidth here
     * (shared memory 4.7 GB/s, TCP 0.9 GB/s either way). A user's own
     * UCX_PROTO_ENABLE is kept. */
    if (getenv("UCX_PROTO_ENABLE") == NULL &&
        ucp_config_modify(config, "PROTO_ENABLE", "y") != UCS_OK) {
        kvx_warn("cannot enable UCX's v2 protocols: a peer dying mid-transfer over TCP may "
                 "abort this rank inside UCX");
    }
    params.field_mask =
        UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_REQUEST_SIZE;
    params.request_size = sizeof(kucx_req_t);
    params.features = UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
    params.mt_workers_shared = 0;
    rc = ucp_init(&params, config, &u->context);
    ucp_config_release(config);
    if (rc != UCS_OK) {
        return kucx_fail(why, "ucp_init", rc);
    }
    u->ngroups = ngroups > 0 ? ngroups : 1;
    u->w = calloc((size_t)u->ngroups * KUCX_PLANES, sizeof(*u->w));
    u->pfds = calloc((size_t)u->ngroups * KUCX_PLANES, sizeof(struct pollfd));
    if (u->w == NULL || u->pfds == NULL) {
        kucx_ctx_cleanup(u);
        failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_INIT, NULL, "no memory for UCX workers");
        return KVX_ERR_NO_MEMORY;
    }
    wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    for (int i = 0; i < u->ngroups * KUCX_PLANES; i++) {
        kucx_worker_t *w = &u->w[i];

        w->u = u;
        w->efd = -1;
        rc = ucp_worker_create(u->context, &wparams, &w->worker);
        if (rc != UCS_OK) {
            w->worker = NULL;
            kucx_ctx_cleanup(u);
            return kucx_fail(why, "ucp_worker_create", rc);
        }
        if (ucp_worker_get_efd(w->worker, &w->efd) != UCS_OK) {
            if (i == 0) {
                kvx_info("UCX worker has no event fd: the progress thread will poll");
            }
            w->efd = -1;
        }
    }
    cattr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    if (ucp_context_query(u->context, &cattr) == UCS_OK) {
        u->memory_types = cattr.memory_types;
    }
    return KVX_OK;
}

kvx_status_t kucx_probe_memory_types(uint64_t *types_p, kvx_failure_t *why)
{
    ucp_params_t params = { 0 };
    ucp_context_attr_t cattr = { 0 };
    ucp_context_h context;
    ucp_config_t *config;
    ucs_status_t rc = ucp_config_read(NULL, NULL, &config);

    if (rc != UCS_OK) {
        return kucx_fail(why, "ucp_config_read", rc);
    }
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_RMA | UCP_FEATURE_AM;
    rc = ucp_init(&params, config, &context);
    ucp_config_release(config);
    if (rc != UCS_OK) {
        return kucx_fail(why, "ucp_init", rc);
    }
    cattr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    rc = ucp_context_query(context, &cattr);
    ucp_cleanup(context);
    if (rc != UCS_OK) {
        return kucx_fail(why, "ucp_context_query", rc);
    }
    *types_p = cattr.memory_types;
    return KVX_OK;
}

void kucx_memory_types_name(uint64_t types, char *buf, size_t len)
{
    size_t o = 0;

    buf[0] = '\0';
    for (int t = UCS_MEMORY_TYPE_HOST; t < UCS_MEMORY_TYPE_LAST && o < len; t++) {
        if (types & UCS_BIT(t)) {
            o +=
                (size_t)snprintf(buf + o, len - o, "%s%s", o ? ", " : "", ucs_memory_type_names[t]);
        }
    }
}

void kucx_workers_destroy(kucx_ctx_t *u)
{
    for (int i = 0; u->w != NULL && i < u->ngroups * KUCX_PLANES; i++) {
        if (u->w[i].worker != NULL) {
            ucp_worker_destroy(u->w[i].worker);
            u->w[i].worker = NULL;
        }
        u->w[i].efd = -1;
    }
}

/* What kucx_workers_abandon() left, reachable from here until the process
 * exits: deliberately kept. LeakSanitizer still reports the few objects UCX
 * points to only from memory it does not scan (each endpoint's extension,
 * from ucp_ep_create; shared-memory segment descriptors, uct_mm_seg_new). */
typedef struct kucx_abandoned {
    struct kucx_abandoned *next;
    ucp_context_h context;
    int nworkers;
    ucp_worker_h workers[];
} kucx_abandoned_t;

static kucx_abandoned_t *abandoned;
static pthread_mutex_t abandoned_lock = PTHREAD_MUTEX_INITIALIZER;

void kucx_workers_abandon(kucx_ctx_t *u)
{
    int n = u->w != NULL ? u->ngroups * KUCX_PLANES : 0;
    kucx_abandoned_t *a = malloc(sizeof(*a) + (size_t)n * sizeof(a->workers[0]));

    if (a != NULL) {
        a->context = u->context;
        a->nworkers = n;
        for (int i = 0; i < n; i++) {
            a->workers[i] = u->w[i].worker;
        }
        pthread_mutex_lock(&abandoned_lock);
        a->next = abandoned;
        abandoned = a;
        pthread_mutex_unlock(&abandoned_lock);
    }
    for (int i = 0; i < n; i++) {
        u->w[i].worker = NULL;
        u->w[i].efd = -1;
    }
    /* ucp_cleanup() would free what the workers still use. */
    u->abandoned = 1;
}

void kucx_ctx_cleanup(kucx_ctx_t *u)
{
    kucx_workers_destroy(u);
    if (u->context != NULL && !u->abandoned) {
        ucp_cleanup(u->context);
    }
    free(u->w);
    free(u->pfds);
    memset(u, 0, sizeof(*u));
}

/* A worker this rank created no endpoint on serves no peer of kvx's (kvx
 * connects every pair both ways, at bootstrap or at a join), yet an empty
 * ucp_worker_progress() costs about 200 instructions: at TP 1, where group 0
 * (TP siblings) has nobody, two of a pass's four calls. Such a worker is
 * progressed every KUCX_IDLE_EVERY-th pass only, for a peer's wire-up that
 * reaches it before this rank's own endpoint exists. The callers hold
 * ctx->lock (or the progress thread is stopped). */
#define KUCX_IDLE_EVERY 32

unsigned kucx_progress(kucx_ctx_t *u)
{
    int all = u->passes++ % KUCX_IDLE_EVERY == 0;
    unsigned n = 0;

    for (int plane = KUCX_CTRL; plane >= KUCX_DATA; plane--) {
        for (int g = 0; g < u->ngroups; g++) {
            kucx_worker_t *kw = kucx_worker(u, g, (kucx_plane_t)plane);

            /* NULL once destroyed or abandoned (kvx_ctx_destroy()). */
            if (kw->worker != NULL && (kw->used || all)) {
                n += ucp_worker_progress(kw->worker);
            }
        }
    }
    return n;
}

int kucx_can_sleep(const kucx_ctx_t *u)
{
    for (int i = 0; i < u->ngroups * KUCX_PLANES; i++) {
        if (u->w[i].efd < 0) {
            return 0;
        }
    }
    return u->ngroups > 0;
}

kvx_status_t kucx_arm(kucx_ctx_t *u)
{
    for (int i = 0; i < u->ngroups * KUCX_PLANES; i++) {
        if (ucp_worker_arm(u->w[i].worker) != UCS_OK) {
            return KVX_ERR_BUSY;
        }
    }
    return KVX_OK;
}

int kucx_wait(kucx_ctx_t *u, int timeout_ms)
{
    struct pollfd *pfd = u->pfds;
    int n = u->ngroups * KUCX_PLANES;

    for (int i = 0; i < n; i++) {
        pfd[i].fd = u->w[i].efd;
        pfd[i].events = POLLIN;
        pfd[i].revents = 0;
    }
    return poll(pfd, (nfds_t)n, timeout_ms);
}

void kucx_signal(kucx_ctx_t *u)
{
    kucx_worker_t *w = u->w != NULL ? kucx_worker(u, 0, KUCX_CTRL) : NULL;

    if (w != NULL && w->worker != NULL && w->efd >= 0) {
        ucp_worker_signal(w->worker);
    }
}

kvx_status_t kucx_worker_address(kucx_ctx_t *u, int group, kucx_plane_t plane, void **addr_p,
                                 size_t *len_p)
{
    ucp_address_t *addr;
    size_t len;
    kvx_status_t status =
        KVX_UCS_CALL(ucp_worker_get_address(kucx_worker(u, group, plane)->worker, &addr, &len));

    if (status == KVX_OK) {
        *addr_p = addr;
        *len_p = len;
    }
    return status;
}

void kucx_worker_address_free(kucx_ctx_t *u, int group, kucx_plane_t plane, void *addr)
{
    ucp_worker_release_address(kucx_worker(u, group, plane)->worker, (ucp_address_t *)addr);
}

static kvx_status_t kucx_set_handler(kucx_ctx_t *u, kucx_plane_t plane, unsigned id,
                                     kucx_am_cb_t cb, void *arg, uint32_t flags)
{
    for (int g = 0; g < u->ngroups; g++) {
        kucx_worker_t *w = kucx_worker(u, g, plane);
        ucp_am_handler_param_t p = { 0 };
        kvx_status_t status;

        p.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                       UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
        p.id = id;
        p.cb = cb;
        p.arg = arg != NULL ? arg : w;
        p.flags = flags;
        status = KVX_UCS_CALL(ucp_worker_set_am_recv_handler(w->worker, &p));
        if (status != KVX_OK) {
            return status;
        }
    }
    return KVX_OK;
}

kvx_status_t kucx_set_am_handler(kucx_ctx_t *u, unsigned id, kucx_am_cb_t cb, void *arg)
{
    return kucx_set_handler(u, KUCX_CTRL, id, cb, arg, 0);
}

/* A rendezvous descriptor as the core holds it: UCX's, with the worker that
 * received it (ucp_am_recv_data_nbx() finds the sender's endpoint there). */
typedef struct kucx_desc {
    ucp_worker_h worker;
    void *desc;
    int in_cb; /* the handler runs: kucx_data_cb() frees the wrapper */
} kucx_desc_t;

/* Done with a wrapper: freed now, or by kucx_data_cb() when its handler
 * received or released the data before returning. */
static void kucx_desc_done(kucx_desc_t *d)
{
    if (d->in_cb) {
        d->desc = NULL;
    } else {
        free(d);
    }
}

/* Every data worker's handler: hands eager data on as it is, and a
 * rendezvous descriptor wrapped with its worker. */
static ucs_status_t kucx_data_cb(void *arg, const void *header, size_t header_length, void *data,
                                 size_t length, const ucp_am_recv_param_t *param)
{
    kucx_worker_t *w = arg;
    kucx_ctx_t *u = w->u;
    kucx_desc_t *d;
    ucs_status_t rc;

    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        return u->data_cb(u->data_arg, header, header_length, data, length, param);
    }
    d = malloc(sizeof(*d));
    if (d == NULL) {
        /* Dropped: the sender's request completes, and the room that waited
         * for these bytes fails at its deadline. */
        kvx_error("no memory for a rendezvous message of %zu bytes: dropped", length);
        return UCS_OK;
    }
    d->worker = w->worker;
    d->desc = data;
    d->in_cb = 1;
    rc = u->data_cb(u->data_arg, header, header_length, d, length, param);
    d->in_cb = 0;
    if (rc != UCS_INPROGRESS || d->desc == NULL) {
        free(d); /* not kept, or already received or released */
    }
    return rc;
}

kvx_status_t kucx_set_am_data_handler(kucx_ctx_t *u, unsigned id, kucx_am_cb_t cb, void *arg)
{
    u->data_cb = cb;
    u->data_arg = arg;
    /* Data messages travel with the puts, on the data workers. */
    return kucx_set_handler(u, KUCX_DATA, id, kucx_data_cb, NULL, UCP_AM_FLAG_WHOLE_MSG);
}

kvx_status_t kucx_am_recv_data(kucx_ctx_t *u, void *desc, void *buf, size_t len, ucp_mem_h memh,
                               kucx_recv_cb_t cb, void *user, ucs_status_t *ucs_p)
{
    kucx_desc_t *d = desc;
    ucp_worker_h worker = d->worker;
    void *data = d->desc;

    (void)u;
    kucx_desc_done(d);
    return kucx_recv_posted(worker, data, buf, len, memh, cb, user, ucs_p);
}

void kucx_am_data_release(kucx_ctx_t *u, void *desc)
{
    kucx_desc_t *d = desc;

    (void)u;
    ucp_am_data_release(d->worker, d->desc);
    kucx_desc_done(d);
}
