/*
 * ucx_xfer.c - puts, flushes and active messages.
 *
 * None of these allocate: UCX takes requests from its own pool, and the
 * callback's user_data carries kvx's context for the operation. A callback
 * owns its request and releases it with kucx_request_free().
 */
#include "config.h"

#include "kvx_ucx.h"

static kvx_status_t kucx_posted(void *req, ucs_status_t *ucs_p)
{
    if (req == NULL) {
        *ucs_p = UCS_OK;
        return KVX_OK;
    }
    if (UCS_PTR_IS_ERR(req)) {
        *ucs_p = UCS_PTR_STATUS(req);
        return kucx_status(*ucs_p);
    }
    *ucs_p = UCS_INPROGRESS;
    return KVX_INPROGRESS;
}

/* Parameters of an operation that reports to cb(user), on registered
 * memory when memh is not NULL. */
static ucp_request_param_t kucx_param(void *user, ucp_mem_h memh)
{
    ucp_request_param_t p = { 0 };

    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.user_data = user;
    if (memh != NULL) {
        p.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
        p.memh = memh;
    }
    return p;
}

/* kucx_posted() for an operation that moves len bytes: the request records
 * them. Completion callbacks run only inside progress, which the caller's
 * lock keeps out, so the length is recorded before anyone reads it. */
static kvx_status_t kucx_posted_len(void *req, size_t len, ucs_status_t *ucs_p)
{
    if (req != NULL && !UCS_PTR_IS_ERR(req)) {
        ((kucx_req_t *)req)->len = len;
    }
    return kucx_posted(req, ucs_p);
}

kvx_status_t kucx_put(ucp_ep_h ep, int fast, const void *buf, size_t len, ucp_mem_h memh,
                      uint64_t raddr, ucp_rkey_h rkey, kucx_done_cb_t cb, void *user,
                      ucs_status_t *ucs_p)
{
    ucp_request_param_t p = kucx_param(user, memh);

    p.cb.send = cb;
    if (fast) {
        p.op_attr_mask |= UCP_OP_ATTR_FLAG_FAST_CMPL;
    }
    return kucx_posted_len(ucp_put_nbx(ep, buf, len, raddr, rkey, &p), len, ucs_p);
}

kvx_status_t kucx_flush(ucp_ep_h ep, kucx_done_cb_t cb, void *user, ucs_status_t *ucs_p)
{
    ucp_request_param_t p = { 0 };

    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = cb;
    p.user_data = user;
    return kucx_posted(ucp_ep_flush_nbx(ep, &p), ucs_p);
}

kvx_status_t kucx_am_send(ucp_ep_h ep, unsigned id, const void *buf, size_t len, kucx_done_cb_t cb,
                          void *user, ucs_status_t *ucs_p)
{
    ucp_request_param_t p = { 0 };

    p.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    p.cb.send = cb;
    p.user_data = user;
    p.flags = UCP_AM_SEND_FLAG_EAGER;
    return kucx_posted(ucp_am_send_nbx(ep, id, NULL, 0, buf, len, &p), ucs_p);
}

static kvx_status_t kucx_am_send_flags(ucp_ep_h ep, unsigned id, const void *header,
                                       size_t header_len, const void *buf, size_t len,
                                       ucp_mem_h memh, uint32_t flags, kucx_done_cb_t cb,
                                       void *user, ucs_status_t *ucs_p)
{
    ucp_request_param_t p = kucx_param(user, memh);

    p.cb.send = cb;
    if (flags != 0) {
        p.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = flags;
    }
    return kucx_posted_len(ucp_am_send_nbx(ep, id, header, header_len, buf, len, &p), len, ucs_p);
}

kvx_status_t kucx_am_send_data(ucp_ep_h ep, unsigned id, const void *header, size_t header_len,
                               const void *buf, size_t len, ucp_mem_h memh, kucx_done_cb_t cb,
                               void *user, ucs_status_t *ucs_p)
{
    return kucx_am_send_flags(ep, id, header, header_len, buf, len, memh, 0, cb, user, ucs_p);
}

kvx_status_t kucx_am_send_rndv(ucp_ep_h ep, unsigned id, const void *header, size_t header_len,
                               const void *buf, size_t len, ucp_mem_h memh, kucx_done_cb_t cb,
                               void *user, ucs_status_t *ucs_p)
{
    return kucx_am_send_flags(ep, id, header, header_len, buf, len, memh, UCP_AM_SEND_FLAG_RNDV, cb,
                              user, ucs_p);
}

kvx_status_t kucx_recv_posted(ucp_worker_h worker, void *desc, void *buf, size_t len,
                              ucp_mem_h memh, kucx_recv_cb_t cb, void *user, ucs_status_t *ucs_p)
{
    ucp_request_param_t p = kucx_param(user, memh);

    p.cb.recv_am = cb;
    return kucx_posted_len(ucp_am_recv_data_nbx(worker, desc, buf, len, &p), len, ucs_p);
}

void kucx_request_free(void *request)
{
    if (request != NULL && !UCS_PTR_IS_ERR(request)) {
        ucp_request_free(request);
    }
}
