/*
 * fake_ucx.c - src/ucx's functions for the unit tests of the room machines
 * (tests/fake_ucx.h says what it does). Every non-inline function of
 * src/ucx/kvx_ucx.h is defined here, so that the linker takes none of
 * src/ucx's objects out of the convenience library -- but kucx_status(),
 * whose file (src/ucx/ucx_status.c) holds nothing else: the statuses are
 * the library's own.
 */
#include "config.h"

#include "fake_ucx.h"

#include "core/base/msg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

fake_ucx_t fake_ucx;

void fake_reset(void)
{
    while (fake_ucx.msgs != NULL) {
        fake_msg_free(fake_take(NULL));
    }
    while (fake_ucx.ops != NULL) {
        fake_op_t *op = fake_ucx.ops;

        fake_ucx.ops = op->next;
        free(op->req);
        free(op);
    }
    memset(&fake_ucx, 0, sizeof(fake_ucx));
    fake_ucx.refuse_ucs = UCS_ERR_NO_RESOURCE;
}

unsigned fake_pending(const struct kvx_ctx *to)
{
    unsigned n = 0;

    for (const fake_msg_t *m = fake_ucx.msgs; m != NULL; m = m->next) {
        n += to == NULL || m->to == to;
    }
    return n;
}

fake_msg_t *fake_take(const struct kvx_ctx *to)
{
    for (fake_msg_t **link = &fake_ucx.msgs; *link != NULL; link = &(*link)->next) {
        fake_msg_t *m = *link;

        if (to == NULL || m->to == to) {
            *link = m->next;
            m->next = NULL;
            return m;
        }
    }
    return NULL;
}

void fake_msg_free(fake_msg_t *m)
{
    if (m != NULL) {
        free(m->hdr);
        free(m->buf);
        free(m);
    }
}

static void *fake_copy(const void *buf, size_t len)
{
    void *p = malloc(len > 0 ? len : 1);

    if (p == NULL) {
        abort();
    }
    memcpy(p, buf, len);
    return p;
}

/* Queues a message to the context the endpoint leads to (oldest first). */
static fake_msg_t *fake_queue(ucp_ep_h ep, const void *hdr, size_t hlen, const void *buf,
                              size_t len)
{
    fake_msg_t *m = calloc(1, sizeof(*m)), **tail;

    if (m == NULL) {
        abort();
    }
    m->buf = fake_copy(buf, len);
    m->len = len;
    if (hdr != NULL) {
        m->hdr = fake_copy(hdr, hlen);
        m->hlen = hlen;
    }
    m->to = ((fake_ep_t *)(void *)ep)->to;
    for (tail = &fake_ucx.msgs; *tail != NULL; tail = &(*tail)->next) {
    }
    *tail = m;
    return m;
}

fake_msg_t *fake_msg_dup(const fake_msg_t *m)
{
    fake_msg_t *c = calloc(1, sizeof(*c));

    if (c == NULL) {
        abort();
    }
    *c = *m;
    c->next = NULL;
    c->buf = fake_copy(m->buf, m->len);
    c->hdr = m->hdr != NULL ? fake_copy(m->hdr, m->hlen) : NULL;
    return c;
}

int fake_msg_type(const fake_msg_t *m)
{
    msg_hdr_t h;

    memcpy(&h, m->hdr != NULL ? m->hdr : m->buf, sizeof(h));
    return h.type;
}

unsigned fake_inflight(void)
{
    unsigned n = 0;

    for (const fake_op_t *op = fake_ucx.ops; op != NULL; op = op->next) {
        n++;
    }
    return n;
}

unsigned fake_complete(ucs_status_t status)
{
    unsigned n = 0;

    /* Callbacks may post more (a flush after the last put): those wait for
     * the next call. */
    fake_op_t *ops = fake_ucx.ops;

    fake_ucx.ops = NULL;
    while (ops != NULL) {
        fake_op_t *op = ops;

        ops = op->next;
        op->cb(op->req, status, op->user);
        free(op);
        n++;
    }
    return n;
}

/* Posts an operation under the mode; the request records len. */
static kvx_status_t fake_post(fake_mode_t mode, int flush, size_t len, kucx_done_cb_t cb,
                              void *user, ucs_status_t *ucs_p)
{
    fake_op_t *op, **tail;
    kucx_req_t *req;

    if (mode == FAKE_REFUSE) {
        *ucs_p = fake_ucx.refuse_ucs;
        return kucx_status(fake_ucx.refuse_ucs);
    }
    *ucs_p = UCS_OK;
    if (mode == FAKE_NOW) {
        return KVX_OK;
    }
    op = calloc(1, sizeof(*op));
    req = calloc(1, sizeof(*req));
    if (op == NULL || req == NULL) {
        abort();
    }
    req->len = len;
    op->flush = flush;
    op->cb = cb;
    op->user = user;
    op->req = req;
    for (tail = &fake_ucx.ops; *tail != NULL; tail = &(*tail)->next) {
    }
    *tail = op;
    *ucs_p = UCS_INPROGRESS;
    return KVX_INPROGRESS;
}

/* ---- what the room machines use ------------------------------------------ */

kvx_status_t kucx_put(ucp_ep_h ep, int fast, const void *buf, size_t len, ucp_mem_h memh,
                      uint64_t raddr, ucp_rkey_h rkey, kucx_done_cb_t cb, void *user,
                      ucs_status_t *ucs_p)
{
    if (fake_ucx.put_mode != FAKE_REFUSE) {
        /* One process: the remote address is the target's own pointer. */
        memcpy((void *)(uintptr_t)raddr, buf, len);
        fake_ucx.puts++;
        fake_ucx.put_bytes += len;
    }
    return fake_post(fake_ucx.put_mode, 0, len, cb, user, ucs_p);
}

kvx_status_t kucx_flush(ucp_ep_h ep, kucx_done_cb_t cb, void *user, ucs_status_t *ucs_p)
{
    fake_ucx.flushes += fake_ucx.flush_mode != FAKE_REFUSE;
    return fake_post(fake_ucx.flush_mode, 1, 0, cb, user, ucs_p);
}

kvx_status_t kucx_am_send(ucp_ep_h ep, unsigned id, const void *buf, size_t len, kucx_done_cb_t cb,
                          void *user, ucs_status_t *ucs_p)
{
    fake_queue(ep, NULL, 0, buf, len);
    fake_ucx.sent++;
    *ucs_p = UCS_OK;
    return KVX_OK; /* copied: the caller frees buf */
}

void kucx_request_free(void *request)
{
    free(request);
}

/* ---- registered memory: nothing to register ------------------------------ */

kvx_status_t kucx_region_map(kucx_ctx_t *u, void *base, size_t length, ucs_memory_type_t type,
                             kucx_region_t *r, kvx_failure_t *why)
{
    memset(r, 0, sizeof(*r));
    r->base = base;
    r->length = length;
    r->memh = (ucp_mem_h)(void *)r; /* any non-NULL handle */
    return KVX_OK;
}

void kucx_region_unmap(kucx_ctx_t *u, kucx_region_t *r)
{
    memset(r, 0, sizeof(*r));
}

kvx_status_t kucx_rkey_unpack(ucp_ep_h ep, const void *packed, ucp_rkey_h *rkey_p)
{
    *rkey_p = (ucp_rkey_h)(uintptr_t)packed;
    return KVX_OK;
}

void kucx_rkey_destroy(ucp_rkey_h rkey)
{
}

/* ---- the rest: never reached by the tests, defined so nothing of src/ucx
 * is linked ---------------------------------------------------------------- */

void kucx_version(char *buf, size_t len)
{
    snprintf(buf, len, "fake");
}

kvx_status_t kucx_ctx_init(kucx_ctx_t *u, int ngroups, kvx_failure_t *why)
{
    memset(u, 0, sizeof(*u));
    u->ngroups = ngroups;
    return KVX_OK;
}

void kucx_ctx_cleanup(kucx_ctx_t *u)
{
    memset(u, 0, sizeof(*u));
}

kvx_status_t kucx_probe_memory_types(uint64_t *types_p, kvx_failure_t *why)
{
    *types_p = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    return KVX_OK;
}

void kucx_memory_types_name(uint64_t types, char *buf, size_t len)
{
    snprintf(buf, len, "%s", types & UCS_BIT(UCS_MEMORY_TYPE_HOST) ? "host" : "");
}

void kucx_workers_destroy(kucx_ctx_t *u)
{
}

void kucx_workers_abandon(kucx_ctx_t *u)
{
}

unsigned kucx_progress(kucx_ctx_t *u)
{
    return 0;
}

int kucx_can_sleep(const kucx_ctx_t *u)
{
    return 0;
}

kvx_status_t kucx_arm(kucx_ctx_t *u)
{
    return KVX_ERR_BUSY;
}

int kucx_wait(kucx_ctx_t *u, int timeout_ms)
{
    return 0;
}

void kucx_signal(kucx_ctx_t *u)
{
}

kvx_status_t kucx_worker_address(kucx_ctx_t *u, int group, kucx_plane_t plane, void **addr_p,
                                 size_t *len_p)
{
    *addr_p = NULL;
    *len_p = 0;
    return KVX_ERR_UNSUPPORTED;
}

void kucx_worker_address_free(kucx_ctx_t *u, int group, kucx_plane_t plane, void *addr)
{
}

kvx_status_t kucx_set_am_handler(kucx_ctx_t *u, unsigned id, kucx_am_cb_t cb, void *arg)
{
    return KVX_OK;
}

kvx_status_t kucx_set_am_data_handler(kucx_ctx_t *u, unsigned id, kucx_am_cb_t cb, void *arg)
{
    u->data_cb = cb;
    u->data_arg = arg;
    return KVX_OK;
}

kvx_status_t kucx_ep_create(kucx_ctx_t *u, int group, kucx_plane_t plane, const void *address,
                            kucx_err_cb_t err_cb, void *err_arg, ucp_ep_h *ep_p, kvx_failure_t *why)
{
    *ep_p = NULL;
    return KVX_ERR_UNSUPPORTED;
}

void kucx_ep_cancel(ucp_ep_h ep)
{
}

int kucx_ep_is_shm(ucp_ep_h ep)
{
    return 1;
}

int kucx_ep_native_rma(ucp_ep_h ep)
{
    return 1;
}

int kucx_ep_close(kucx_ctx_t *u, int group, kucx_plane_t plane, ucp_ep_h ep, int force,
                  uint64_t timeout_ns)
{
    return 1;
}

void kucx_ep_transports(ucp_ep_h ep, char *buf, size_t len)
{
    snprintf(buf, len, "fake");
}

static kvx_status_t fake_unsupported(ucs_status_t *ucs_p)
{
    *ucs_p = UCS_ERR_UNSUPPORTED;
    return KVX_ERR_UCX;
}

/* An eager data message: header and payload are copied, so it is done at
 * once (KVX_OK, no callback), as UCX's eager sends of small messages are. */
kvx_status_t kucx_am_send_data(ucp_ep_h ep, unsigned id, const void *header, size_t header_len,
                               const void *buf, size_t len, ucp_mem_h memh, kucx_done_cb_t cb,
                               void *user, ucs_status_t *ucs_p)
{
    if (fake_ucx.data_mode == FAKE_REFUSE) {
        *ucs_p = fake_ucx.refuse_ucs;
        return kucx_status(fake_ucx.refuse_ucs);
    }
    fake_queue(ep, header, header_len, buf, len);
    fake_ucx.data_sent++;
    *ucs_p = UCS_OK;
    return KVX_OK;
}

kvx_status_t kucx_am_send_rndv(ucp_ep_h ep, unsigned id, const void *header, size_t header_len,
                               const void *buf, size_t len, ucp_mem_h memh, kucx_done_cb_t cb,
                               void *user, ucs_status_t *ucs_p)
{
    return fake_unsupported(ucs_p);
}

kvx_status_t kucx_am_recv_data(kucx_ctx_t *u, void *desc, void *buf, size_t len, ucp_mem_h memh,
                               kucx_recv_cb_t cb, void *user, ucs_status_t *ucs_p)
{
    return fake_unsupported(ucs_p);
}

void kucx_am_data_release(kucx_ctx_t *u, void *desc)
{
}

kvx_status_t kucx_recv_posted(ucp_worker_h worker, void *desc, void *buf, size_t len,
                              ucp_mem_h memh, kucx_recv_cb_t cb, void *user, ucs_status_t *ucs_p)
{
    return fake_unsupported(ucs_p);
}
