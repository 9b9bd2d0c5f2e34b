/*
 * kvx_mpi.h - kvx's wrapper of MPI: the one checking macro that turns an MPI
 * error into a kvx status, and the few MPI helpers the core needs.
 */
#ifndef KVX_MPI_KVX_MPI_H
#define KVX_MPI_KVX_MPI_H

#include <kvx.h>
#include <mpi.h>

#include "util/log.h"

/* Text of an MPI error code ("MPI_ERR_COMM: invalid communicator"). */
void kmpi_error_string(int rc, char *buf, size_t len);

/*
 * Calls an MPI function; on error logs the call and MPI's message and makes
 * the enclosing expression's status KVX_ERR_MPI. Usage:
 *     status = KVX_MPI_CALL(MPI_Comm_rank(comm, &rank));
 */
#define KVX_MPI_CALL(call)                                             \
    ({                                                                 \
        int kmpi_rc_ = (call);                                         \
        kvx_status_t kmpi_st_ = KVX_OK;                                \
        if (kmpi_rc_ != MPI_SUCCESS) {                                 \
            char kmpi_msg_[MPI_MAX_ERROR_STRING];                      \
            kmpi_error_string(kmpi_rc_, kmpi_msg_, sizeof(kmpi_msg_)); \
            kvx_error("%s failed: %s", #call, kmpi_msg_);              \
            kmpi_st_ = KVX_ERR_MPI;                                    \
        }                                                              \
        kmpi_st_;                                                      \
    })

/* MPI_Get_library_version, first line only. */
void kmpi_version(char *buf, size_t len);

#endif
