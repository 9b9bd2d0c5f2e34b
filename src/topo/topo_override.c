/*
 * topo_override.c - the user's word over the automatic choice:
 *
 *   KVX_NET_DEVICES=mlx5_0:1,mlx5_1:1      every rank uses these NICs
 *   KVX_GPU_NIC_MAP=0000:53:00.0=rdmap79s0:1,rdmap80s0:1;0000:64:00.0=...
 *                                          these GPUs use these NICs
 *
 * A device is "dev:port" for an RDMA port, "dev" for all active ports of an
 * RDMA device or for a TCP interface. The map wins over KVX_NET_DEVICES for
 * the GPUs it names; a later entry for the same GPU replaces an earlier one.
 * Any name this topology does not have is an error: a typo must not quietly
 * fall back to the automatic choice.
 */
#include "config.h"

#include "topo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OVERRIDE_MAP_FORM "busid=dev:port[,dev:port];busid=..."

/* An empty item (";a", "a;;b", "a;") is a typo, as in every kvx list. */
static int override_has_empty(const char *s, char sep)
{
    const char twice[3] = { sep, sep, '\0' };

    return s[0] == '\0' || s[0] == sep || s[strlen(s) - 1] == sep || strstr(s, twice) != NULL;
}

static int override_match(const topo_nic_t *nic, const char *spec)
{
    const char *colon = strchr(spec, ':');

    if (colon == NULL) {
        return strcmp(nic->info.name, spec) == 0;
    }
    return strcmp(nic->info.ucx_name, spec) == 0;
}

/* Appends the rails named by spec to rails[*n], skipping repeats. */
static kvx_status_t override_resolve(const topo_t *topo, const char *spec, const char *origin,
                                     size_t *rails, size_t *n, kvx_failure_t *reason_p)
{
    int found = 0;
    char nics[192];

    for (size_t i = 0; i < topo->nnics; i++) {
        int repeat = 0;

        if (!override_match(&topo->nics[i], spec)) {
            continue;
        }
        found = 1;
        for (size_t j = 0; j < *n; j++) {
            repeat |= rails[j] == i;
        }
        if (!repeat) {
            rails[(*n)++] = i;
        }
    }
    if (found) {
        return KVX_OK;
    }
    topo_list_nics(topo, nics, sizeof(nics));
    return topo_fail(reason_p, KVX_ERR_CONFIG, NULL,
                     "%s names the NIC '%s', which %s does not have (%s)", origin, spec,
                     topo->source, nics);
}

static void override_reason(topo_gpu_t *gpu, const char *origin)
{
    snprintf(gpu->info.reason, sizeof(gpu->info.reason),
             "uses the NICs %s chooses, at %s from it; GPUDirect RDMA %s", origin,
             kvx_topo_path_name(gpu->info.path),
             gpu->info.gdr_advised ? "advised" : "not advised beyond PXB");
    gpu->info.overridden = 1;
}

static kvx_status_t override_net_devices(topo_t *topo, const cfg_list_t *list, size_t *rails,
                                         kvx_failure_t *reason_p)
{
    kvx_status_t status = KVX_OK;
    size_t n = 0;

    for (size_t k = 0; k < list->count && status == KVX_OK; k++) {
        status = override_resolve(topo, list->items[k], "KVX_NET_DEVICES", rails, &n, reason_p);
    }
    for (size_t g = 0; g < topo->ngpus && status == KVX_OK; g++) {
        status = topo_gpu_set_rails(topo, &topo->gpus[g], rails, n);
        override_reason(&topo->gpus[g], "KVX_NET_DEVICES");
    }
    if (status == KVX_OK) {
        topo->host_rails = malloc(n * sizeof(*rails));
        status = topo->host_rails != NULL ? KVX_OK : KVX_ERR_NO_MEMORY;
    }
    if (status == KVX_OK) {
        memcpy(topo->host_rails, rails, n * sizeof(*rails));
        topo->nhost_rails = n;
    }
    return status;
}

/* One "busid=dev,dev" entry of KVX_GPU_NIC_MAP (entry is modified). */
static kvx_status_t override_map_entry(topo_t *topo, char *entry, size_t *rails,
                                       kvx_failure_t *reason_p)
{
    char *eq = strchr(entry, '='), text[256], busid[32], list[192], *save = NULL;
    kvx_status_t status = KVX_OK;
    topo_gpu_t *gpu;
    size_t n = 0;

    snprintf(text, sizeof(text), "%s", entry);
    if (eq != NULL) {
        *eq = '\0';
    }
    if (eq == NULL || override_has_empty(eq + 1, ',') ||
        topo_busid_parse(entry, busid, sizeof(busid)) != 0) {
        return topo_fail(reason_p, KVX_ERR_CONFIG, NULL,
                         "KVX_GPU_NIC_MAP entry '%s' is not valid: expected %s", text,
                         OVERRIDE_MAP_FORM);
    }
    gpu = topo_gpu_find(topo, busid);
    if (gpu == NULL) {
        topo_list_gpus(topo, list, sizeof(list));
        return topo_fail(reason_p, KVX_ERR_CONFIG, NULL,
                         "KVX_GPU_NIC_MAP names the GPU %s, which %s does not have (%s)", busid,
                         topo->source, list);
    }
    for (char *dev = strtok_r(eq + 1, ",", &save); dev != NULL && status == KVX_OK;
         dev = strtok_r(NULL, ",", &save)) {
        status = override_resolve(topo, dev, "KVX_GPU_NIC_MAP", rails, &n, reason_p);
    }
    if (status == KVX_OK) {
        status = topo_gpu_set_rails(topo, gpu, rails, n);
        override_reason(gpu, "KVX_GPU_NIC_MAP");
    }
    return status;
}

static kvx_status_t override_map(topo_t *topo, const char *map, size_t *rails,
                                 kvx_failure_t *reason_p)
{
    char *copy = strdup(map), *save = NULL;
    kvx_status_t status = copy != NULL ? KVX_OK : KVX_ERR_NO_MEMORY;

    if (status == KVX_OK && override_has_empty(map, ';')) {
        status =
            topo_fail(reason_p, KVX_ERR_CONFIG, NULL,
                      "KVX_GPU_NIC_MAP='%s' is not valid: expected %s", map, OVERRIDE_MAP_FORM);
    }
    for (char *entry = status == KVX_OK ? strtok_r(copy, ";", &save) : NULL;
         entry != NULL && status == KVX_OK; entry = strtok_r(NULL, ";", &save)) {
        status = override_map_entry(topo, entry, rails, reason_p);
    }
    free(copy);
    return status;
}

kvx_status_t topo_override(topo_t *topo, const kvx_cfg_t *cfg, kvx_failure_t *reason_p)
{
    size_t *rails = calloc(topo->nnics + 1, sizeof(*rails));
    kvx_status_t status = rails != NULL ? KVX_OK : KVX_ERR_NO_MEMORY;

    if (status == KVX_OK && cfg->net_devices.count > 0) {
        status = override_net_devices(topo, &cfg->net_devices, rails, reason_p);
    }
    if (status == KVX_OK && cfg->gpu_nic_map != NULL && cfg->gpu_nic_map[0] != '\0') {
        status = override_map(topo, cfg->gpu_nic_map, rails, reason_p);
    }
    free(rails);
    if (status == KVX_ERR_NO_MEMORY) {
        return topo_fail(reason_p, status, NULL, "out of memory applying NIC overrides");
    }
    return status;
}
