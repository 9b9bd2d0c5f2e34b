/*
 * ucx_ctx.c - the UCP context and worker kvx's progress thread owns.
 */
#include "config.h"

#include "kvx_ucx.h"
#include "util/failure.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

kvx_status_t kucx_status(ucs_status_t status)
{
    switch (status) {
    case UCS_OK:
        return KVX_OK;
    case UCS_INPROGRESS:
        return KVX_INPROGRESS;
    case UCS_ERR_NO_MEMORY:
        return KVX_ERR_NO_MEMORY;
    case UCS_ERR_BUSY:
        return KVX_ERR_BUSY;
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_UNREACHABLE:
        return KVX_ERR_PEER_LOST;
    case UCS_ERR_TIMED_OUT:
        return KVX_ERR_TIMEOUT;
    case UCS_ERR_CANCELED:
        return KVX_ERR_ABORTED;
    default:
        return KVX_ERR_UCX;
    }
}

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

kvx_status_t kucx_ctx_init(kucx_ctx_t *u, kvx_failure_t *why)
{
    ucp_params_t params = { 0 };
    ucp_worker_params_t wparams = { 0 };
    ucp_context_attr_t cattr = { 0 };
    ucp_config_t *config;
    ucs_status_t rc;

    memset(u, 0, sizeof(*u));
    u->efd[KUCX_DATA] = u->efd[KUCX_CTRL] = -1;
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
    wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    for (int w = 0; w < KUCX_PLANES; w++) {
        rc = ucp_worker_create(u->context, &wparams, &u->worker[w]);
        if (rc != UCS_OK) {
            kucx_ctx_cleanup(u);
            return kucx_fail(why, "ucp_worker_create", rc);
        }
        if (ucp_worker_get_efd(u->worker[w], &u->efd[w]) != UCS_OK) {
            kvx_info("UCX worker has no event fd: the progress thread will poll");
            u->efd[w] = -1;
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
    for (int w = 0; w < KUCX_PLANES; w++) {
        if (u->worker[w] != NULL) {
            ucp_worker_destroy(u->worker[w]);
            u->worker[w] = NULL;
        }
        u->efd[w] = -1;
    }
}

void kucx_ctx_cleanup(kucx_ctx_t *u)
{
    kucx_workers_destroy(u);
    if (u->context != NULL) {
        ucp_cleanup(u->context);
    }
    memset(u, 0, sizeof(*u));
    u->efd[KUCX_DATA] = u->efd[KUCX_CTRL] = -1;
}

unsigned kucx_progress(kucx_ctx_t *u)
{
    return ucp_worker_progress(u->worker[KUCX_CTRL]) + ucp_worker_progress(u->worker[KUCX_DATA]);
}

kvx_status_t kucx_arm(kucx_ctx_t *u)
{
    for (int w = 0; w < KUCX_PLANES; w++) {
        if (ucp_worker_arm(u->worker[w]) != UCS_OK) {
            return KVX_ERR_BUSY;
        }
    }
    return KVX_OK;
}

void kucx_signal(kucx_ctx_t *u)
{
    if (u->efd[KUCX_CTRL] >= 0) {
        ucp_worker_signal(u->worker[KUCX_CTRL]);
    }
}

kvx_status_t kucx_worker_address(kucx_ctx_t *u, kucx_plane_t plane, void **addr_p, size_t *len_p)
{
    ucp_address_t *addr;
    size_t len;
    kvx_status_t status = KVX_UCS_CALL(ucp_worker_get_address(u->worker[plane], &addr, &len));

    if (status == KVX_OK) {
        *addr_p = addr;
        *len_p = len;
    }
    return status;
}

void kucx_worker_address_free(kucx_ctx_t *u, kucx_plane_t plane, void *addr)
{
    ucp_worker_release_address(u->worker[plane], (ucp_address_t *)addr);
}

kvx_status_t kucx_set_am_handler(kucx_ctx_t *u, unsigned id, kucx_am_cb_t cb, void *arg)
{
    ucp_am_handler_param_t p = { 0 };

    p.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                   UCP_AM_HANDLER_PARAM_FIELD_ARG;
    p.id = id;
    p.cb = cb;
    p.arg = arg;
    return KVX_UCS_CALL(ucp_worker_set_am_recv_handler(u->worker[KUCX_CTRL], &p));
}

kvx_status_t kucx_set_am_data_handler(kucx_ctx_t *u, unsigned id, kucx_am_cb_t cb, void *arg)
{
    ucp_am_handler_param_t p = { 0 };

    p.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                   UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    p.id = id;
    p.cb = cb;
    p.arg = arg;
    p.flags = UCP_AM_FLAG_WHOLE_MSG;
    /* Data messages travel with the puts, on the data worker. */
    return KVX_UCS_CALL(ucp_worker_set_am_recv_handler(u->worker[KUCX_DATA], &p));
}
