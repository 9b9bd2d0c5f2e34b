/*
 * kvx_ucx.h - kvx's wrapper of UCX: the checking macro and helpers.
 */
#ifndef KVX_UCX_KVX_UCX_H
#define KVX_UCX_KVX_UCX_H

#include <kvx.h>
#include <ucp/api/ucp.h>

#include "util/log.h"

/*
 * Calls a UCX function returning ucs_status_t; on error logs the call and
 * UCX's message and makes the expression's status KVX_ERR_UCX (or
 * KVX_ERR_NO_MEMORY). Usage: status = KVX_UCS_CALL(ucp_init(...));
 */
#define KVX_UCS_CALL(call)                                                  \
    ({                                                                      \
        ucs_status_t kucs_rc_ = (call);                                     \
        kvx_status_t kucs_st_ = KVX_OK;                                     \
        if (kucs_rc_ != UCS_OK && kucs_rc_ != UCS_INPROGRESS) {             \
            kvx_error("%s failed: %s", #call, ucs_status_string(kucs_rc_)); \
            kucs_st_ = kucx_status(kucs_rc_);                               \
        }                                                                   \
        kucs_st_;                                                           \
    })

/* The kvx status for a UCX status. */
kvx_status_t kucx_status(ucs_status_t status);

/* "1.13.1" (run time library version). */
void kucx_version(char *buf, size_t len);

#endif
