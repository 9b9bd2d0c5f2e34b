/*
 * ucx_mem.c - registered memory regions and remote keys.
 */
#include "config.h"

#include "kvx_ucx.h"
#include "util/failure.h"

#include <string.h>

/* Registers [base, base + length), or with base NULL has UCX allocate the
 * memory (r->base then says where). */
kvx_status_t kucx_region_map(kucx_ctx_t *u, void *base, size_t length, ucs_memory_type_t type,
                             kucx_region_t *r, kvx_failure_t *why)
{
    ucp_mem_map_params_t p = { 0 };
    ucp_mem_attr_t attr = { 0 };
    ucs_status_t rc;

    memset(r, 0, sizeof(*r));
    p.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                   UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    p.address = base;
    p.length = length;
    p.memory_type = type;
    p.flags = base == NULL ? UCP_MEM_MAP_ALLOCATE : 0;
    rc = ucp_mem_map(u->context, &p, &r->memh);
    if (rc == UCS_OK && base == NULL) {
        attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
        rc = ucp_mem_query(r->memh, &attr);
        if (rc != UCS_OK) {
            ucp_mem_unmap(u->context, r->memh);
            r->memh = NULL;
        }
        base = attr.address;
    }
    if (rc != UCS_OK) {
        kvx_error("ucp_mem_map(%p, %zu) failed: %s", base, length, ucs_status_string(rc));
        if (base == NULL) {
            failure_set(why, kucx_status(rc), KVX_STAGE_INIT, ucs_status_string(rc),
                        "cannot allocate %zu bytes through UCX", length);
        } else {
            failure_set(why, kucx_status(rc), KVX_STAGE_INIT, ucs_status_string(rc),
                        "cannot register %zu bytes at %p with UCX", length, base);
        }
        return kucx_status(rc);
    }
    rc = ucp_rkey_pack(u->context, r->memh, &r->rkey_buf, &r->rkey_len);
    if (rc != UCS_OK) {
        kvx_error("ucp_rkey_pack failed: %s", ucs_status_string(rc));
        failure_set(why, kucx_status(rc), KVX_STAGE_INIT, ucs_status_string(rc),
                    "cannot pack the remote key of %zu bytes at %p", length, base);
        ucp_mem_unmap(u->context, r->memh);
        r->memh = NULL;
        return kucx_status(rc);
    }
    r->base = base;
    r->length = length;
    return KVX_OK;
}

void kucx_region_unmap(kucx_ctx_t *u, kucx_region_t *r)
{
    if (r->rkey_buf != NULL) {
        ucp_rkey_buffer_release(r->rkey_buf);
    }
    if (r->memh != NULL) {
        ucp_mem_unmap(u->context, r->memh);
    }
    memset(r, 0, sizeof(*r));
}

kvx_status_t kucx_rkey_unpack(ucp_ep_h ep, const void *packed, ucp_rkey_h *rkey_p)
{
    return KVX_UCS_CALL(ucp_ep_rkey_unpack(ep, packed, rkey_p));
}

void kucx_rkey_destroy(ucp_rkey_h rkey)
{
    if (rkey != NULL) {
        ucp_rkey_destroy(rkey);
    }
}
