/*
 * ucx_status.c - UCX's statuses as kvx's. A file of its own so that the
 * stand-in for src/ucx in the unit tests (tests/fake_ucx.c) links with this
 * same mapping.
 */
#include "config.h"

#include "kvx_ucx.h"

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
