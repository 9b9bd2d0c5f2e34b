/*
 * version.c - kvx_version() and kvx_versions().
 */
#include "config.h"

#include <kvx.h>

#include "mem/mem.h"
#include "mpi/kvx_mpi.h"
#include "topo/topo.h"
#include "ucx/kvx_ucx.h"
#include "util/cfg.h"

#include <stdio.h>
#include <string.h>

const char *kvx_version(void)
{
    return PACKAGE_VERSION;
}

kvx_status_t kvx_versions(kvx_versions_t *versions_p)
{
    kvx_versions_t v;

    if (versions_p == NULL) {
        return KVX_ERR_INVALID_PARAM;
    }
    memset(&v, 0, sizeof(v));
    snprintf(v.kvx, sizeof(v.kvx), "%s", PACKAGE_VERSION);
    kmpi_version(v.mpi, sizeof(v.mpi));
    kucx_version(v.ucx, sizeof(v.ucx));
    topo_version(v.hwloc, sizeof(v.hwloc));
    mem_cuda_version(cfg_global(NULL, NULL)->cuda_library, v.cuda, sizeof(v.cuda));
    *versions_p = v;
    return KVX_OK;
}
