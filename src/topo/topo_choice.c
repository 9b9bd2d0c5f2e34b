/*
 * topo_choice.c - what one rank uses: the NICs of its GPU, or for a rank
 * without a GPU, a NIC near its NUMA node, then near its package.
 */
#include "config.h"

#include "topo.h"

#include <hwloc.h>
#include <stdio.h>
#include <string.h>

static kvx_status_t choice_gpu(const topo_t *topo, const char *gpu_busid, kvx_topo_choice_t *c,
                               kvx_failure_t *reason_p)
{
    char busid[32], list[192];
    const topo_gpu_t *gpu;

    if (topo_busid_parse(gpu_busid, busid, sizeof(busid)) != 0) {
        return topo_fail(reason_p, KVX_ERR_INVALID_PARAM, NULL,
                         "'%s' is not a PCI bus id (expected domain:bus:device.function, as in "
                         "0000:53:00.0)",
                         gpu_busid);
    }
    gpu = topo_gpu_find(topo, busid);
    if (gpu == NULL) {
        topo_list_gpus(topo, list, sizeof(list));
        return topo_fail(reason_p, KVX_ERR_TOPO, NULL, "the GPU %s is not in %s (%s)", busid,
                         topo->source, list);
    }
    c->gpu = (int)(gpu - topo->gpus);
    topo_text(c->ucx_net_devices, sizeof(c->ucx_net_devices), "%s", gpu->info.ucx_net_devices);
    c->path = gpu->info.path;
    c->numa = gpu->info.numa;
    topo_text(c->cpuset, sizeof(c->cpuset), "%s", gpu->info.cpuset);
    c->gdr_advised = gpu->info.gdr_advised;
    topo_text(c->reason, sizeof(c->reason), "GPU %s %s", busid, gpu->info.reason);
    return KVX_OK;
}

/* The NUMA node a rank without a GPU calls home: on this machine, the one
 * its current binding lies in; otherwise its local rank spread over the
 * nodes that have CPUs (*by_rank_p is then set). NULL without NUMA nodes. */
static hwloc_obj_t choice_home(const topo_t *topo, int local_rank, int *by_rank_p,
                               unsigned *nnodes_p)
{
    hwloc_obj_t nodes[256], node = NULL;
    unsigned n = 0;
    hwloc_bitmap_t bound = topo->thissystem ? hwloc_bitmap_alloc() : NULL;

    while ((node = hwloc_get_next_obj_by_type(topo->hw, HWLOC_OBJ_NUMANODE, node)) != NULL &&
           n < 256) {
        if (node->cpuset != NULL && !hwloc_bitmap_iszero(node->cpuset)) {
            nodes[n++] = node;
        }
    }
    *by_rank_p = 1;
    *nnodes_p = n;
    if (bound != NULL && hwloc_get_cpubind(topo->hw, bound, HWLOC_CPUBIND_PROCESS) == 0) {
        for (unsigned i = 0; i < n && *by_rank_p; i++) {
            if (!hwloc_bitmap_iszero(bound) && hwloc_bitmap_isincluded(bound, nodes[i]->cpuset)) {
                node = nodes[i];
                *by_rank_p = 0;
            }
        }
    }
    hwloc_bitmap_free(bound);
    if (*by_rank_p) {
        node = n > 0 ? nodes[(unsigned)local_rank % n] : NULL;
    }
    return node;
}

/* The package an object is in (itself included), or NULL. */
static hwloc_obj_t choice_package(hwloc_obj_t obj)
{
    while (obj != NULL && obj->type != HWLOC_OBJ_PACKAGE) {
        obj = obj->parent;
    }
    return obj;
}

/* 0: the NIC is on the home node; 1: on a set of nodes including it, or in
 * its package; 2: farther. */
static int choice_level(const topo_t *topo, const topo_nic_t *nic, hwloc_obj_t home)
{
    hwloc_obj_t local = hwloc_get_non_io_ancestor_obj(topo->hw, nic->anchor);
    hwloc_obj_t pkg = choice_package(home);

    if (local == NULL || local->nodeset == NULL) {
        return 2;
    }
    if (hwloc_bitmap_isequal(local->nodeset, home->nodeset)) {
        return 0;
    }
    if (hwloc_bitmap_isincluded(home->nodeset, local->nodeset) ||
        (pkg != NULL && choice_package(local) == pkg)) {
        return 1;
    }
    return 2;
}

static const char *const choice_where[] = { "on", "near", "away from" };

static void choice_host_nic(const topo_t *topo, int local_rank, hwloc_obj_t home, int by_rank,
                            unsigned nnodes, kvx_topo_choice_t *c)
{
    size_t ncand = 0, k, pick = 0;
    int best = 2;

    for (size_t i = 0; i < topo->nnics; i++) {
        int level = choice_level(topo, &topo->nics[i], home);

        ncand = level < best ? 1 : ncand + (level == best);
        best = level < best ? level : best;
    }
    /* Ranks spread over the nodes by local rank meet each node's NICs once
     * every nnodes ranks. */
    k = (by_rank ? (unsigned)local_rank / nnodes : (unsigned)local_rank) % ncand;
    for (size_t i = 0, seen = 0; i < topo->nnics; i++) {
        if (choice_level(topo, &topo->nics[i], home) == best && seen++ == k) {
            pick = i;
        }
    }
    topo_rails_format(topo, &pick, 1, c->ucx_net_devices, sizeof(c->ucx_net_devices));
    c->path = best < 2 ? KVX_TOPO_PATH_NODE : KVX_TOPO_PATH_SYS;
    topo_text(c->reason, sizeof(c->reason),
              "no GPU: uses %s, %s its NUMA node %u (%zu of %zu NIC%s as near, by local rank %d)",
              c->ucx_net_devices, choice_where[best], home->os_index, k + 1, ncand,
              ncand == 1 ? "" : "s", local_rank);
}

static void choice_host(const topo_t *topo, int local_rank, kvx_topo_choice_t *c)
{
    int by_rank;
    unsigned nnodes;
    hwloc_obj_t home = choice_home(topo, local_rank, &by_rank, &nnodes);

    c->gpu = -1;
    c->numa = home != NULL ? (int)home->os_index : -1;
    if (home != NULL) {
        hwloc_bitmap_list_snprintf(c->cpuset, sizeof(c->cpuset), home->cpuset);
    }
    c->path = KVX_TOPO_PATH_SYS;
    if (topo->host_rails != NULL) {
        topo_rails_format(topo, topo->host_rails, topo->nhost_rails, c->ucx_net_devices,
                          sizeof(c->ucx_net_devices));
        topo_text(c->reason, sizeof(c->reason), "no GPU: uses the NICs KVX_NET_DEVICES chooses");
    } else if (topo->nnics == 0 || home == NULL) {
        topo_text(c->reason, sizeof(c->reason), "no GPU and %s: UCX chooses its own devices",
                  topo->nnics == 0 ? "no NIC found" : "no NUMA node with CPUs");
    } else {
        choice_host_nic(topo, local_rank, home, by_rank, nnodes, c);
    }
}

kvx_status_t topo_choose(const topo_t *topo, const char *gpu_busid, int local_rank,
                         kvx_topo_choice_t *choice_p, kvx_failure_t *reason_p)
{
    kvx_topo_choice_t c;
    kvx_status_t status = KVX_OK;

    memset(&c, 0, sizeof(c));
    if (local_rank < 0) {
        return topo_fail(reason_p, KVX_ERR_INVALID_PARAM, NULL, "the local rank %d is negative",
                         local_rank);
    }
    if (gpu_busid != NULL && gpu_busid[0] != '\0') {
        status = choice_gpu(topo, gpu_busid, &c, reason_p);
    } else {
        choice_host(topo, local_rank, &c);
    }
    if (status == KVX_OK) {
        *choice_p = c;
    }
    return status;
}
