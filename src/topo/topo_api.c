/*
 * topo_api.c - the public kvx_topo_* functions (include/kvx.h): a read-only
 * view of a topo_t for tools, configured from the process environment.
 */
#include "config.h"

#include "topo.h"

kvx_status_t kvx_topo_create(const char *xml_path, kvx_topo_t **topo_p, kvx_failure_t *reason_p)
{
    kvx_status_t status;
    const kvx_cfg_t *cfg = cfg_global(&status, reason_p);

    if (topo_p == NULL) {
        return KVX_ERR_INVALID_PARAM;
    }
    if (status != KVX_OK) {
        return status; /* cfg_global logged it and filled *reason_p */
    }
    return topo_create(cfg, xml_path, topo_p, reason_p);
}

void kvx_topo_destroy(kvx_topo_t *topo)
{
    topo_destroy(topo);
}

const char *kvx_topo_source(const kvx_topo_t *topo)
{
    return topo != NULL ? topo->source : "";
}

size_t kvx_topo_gpu_count(const kvx_topo_t *topo)
{
    return topo != NULL ? topo->ngpus : 0;
}

size_t kvx_topo_nic_count(const kvx_topo_t *topo)
{
    return topo != NULL ? topo->nnics : 0;
}

kvx_status_t kvx_topo_gpu(const kvx_topo_t *topo, size_t index, kvx_topo_gpu_t *gpu_p)
{
    if (topo == NULL || gpu_p == NULL || index >= topo->ngpus) {
        return KVX_ERR_INVALID_PARAM;
    }
    *gpu_p = topo->gpus[index].info;
    return KVX_OK;
}

kvx_status_t kvx_topo_gpu_nic(const kvx_topo_t *topo, size_t gpu, size_t i, size_t *nic_p)
{
    if (topo == NULL || nic_p == NULL || gpu >= topo->ngpus ||
        i >= topo->gpus[gpu].info.nic_count) {
        return KVX_ERR_INVALID_PARAM;
    }
    *nic_p = topo->gpus[gpu].rails[i];
    return KVX_OK;
}

kvx_status_t kvx_topo_nic(const kvx_topo_t *topo, size_t index, kvx_topo_nic_t *nic_p)
{
    if (topo == NULL || nic_p == NULL || index >= topo->nnics) {
        return KVX_ERR_INVALID_PARAM;
    }
    *nic_p = topo->nics[index].info;
    return KVX_OK;
}

kvx_status_t kvx_topo_path(const kvx_topo_t *topo, size_t gpu, size_t nic, kvx_topo_path_t *path_p)
{
    if (topo == NULL || path_p == NULL || gpu >= topo->ngpus || nic >= topo->nnics) {
        return KVX_ERR_INVALID_PARAM;
    }
    *path_p = topo_path_of(topo, gpu, nic);
    return KVX_OK;
}

kvx_status_t kvx_topo_choose(const kvx_topo_t *topo, const char *gpu_busid, int local_rank,
                             kvx_topo_choice_t *choice_p, kvx_failure_t *reason_p)
{
    if (topo == NULL || choice_p == NULL) {
        return KVX_ERR_INVALID_PARAM;
    }
    return topo_choose(topo, gpu_busid, local_rank, choice_p, reason_p);
}
