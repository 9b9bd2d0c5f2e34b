/*
 * topo_path.c - the path class between a GPU and a NIC, with the meanings
 * of `nvidia-smi topo -m`:
 *
 *   PIX   at most one PCIe switch: both devices sit at most one bridge below
 *         their lowest common bridge (a switch's downstream ports hang off
 *         its upstream port, which hwloc shows as two bridge levels)
 *   PXB   several PCIe bridges, but no host bridge
 *   PHB   their lowest common ancestor is a PCIe host bridge
 *   NODE  different host bridges, one NUMA node
 *   SYS   different NUMA nodes
 *
 * The common ancestor is found by walking ->parent here:
 * hwloc_get_common_ancestor_obj() climbs whichever object is deeper, but
 * I/O objects have negative virtual depths (bridges -4, PCI devices -5), so
 * given two of different types it climbs the other one past the root and
 * dereferences NULL (it crashes on llnl-lassen.xml).
 */
#include "config.h"

#include "topo.h"

#include <hwloc.h>
#include <stdlib.h>

static hwloc_obj_t path_common_ancestor(hwloc_obj_t a, hwloc_obj_t b)
{
    for (hwloc_obj_t x = a; x != NULL; x = x->parent) {
        for (hwloc_obj_t y = b; y != NULL; y = y->parent) {
            if (x == y) {
                return x;
            }
        }
    }
    return NULL;
}

/* Bridges strictly between obj and its ancestor top. */
static unsigned path_bridges_below(hwloc_obj_t obj, hwloc_obj_t top)
{
    unsigned n = 0;

    for (hwloc_obj_t x = obj->parent; x != NULL && x != top; x = x->parent) {
        n += x->type == HWLOC_OBJ_BRIDGE;
    }
    return n;
}

static hwloc_const_nodeset_t path_nodeset(hwloc_obj_t obj)
{
    while (obj != NULL && obj->nodeset == NULL) {
        obj = obj->parent;
    }
    return obj != NULL ? obj->nodeset : NULL;
}

kvx_topo_path_t topo_path_classify(struct hwloc_obj *a, struct hwloc_obj *b)
{
    hwloc_obj_t top = path_common_ancestor(a, b);
    hwloc_const_nodeset_t na, nb;

    if (top != NULL && top->type == HWLOC_OBJ_BRIDGE) {
        if (top->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
            return KVX_TOPO_PATH_PHB;
        }
        return path_bridges_below(a, top) <= 1 && path_bridges_below(b, top) <= 1
                   ? KVX_TOPO_PATH_PIX
                   : KVX_TOPO_PATH_PXB;
    }
    if (top != NULL && (top->type == HWLOC_OBJ_PCI_DEVICE || top->type == HWLOC_OBJ_OS_DEVICE)) {
        return KVX_TOPO_PATH_PIX; /* one device, or a function of the other */
    }
    /* Different host bridges: their local NUMA nodes tell NODE from SYS. A
     * host bridge attached to the whole machine is near every node. */
    na = path_nodeset(a);
    nb = path_nodeset(b);
    return na != NULL && nb != NULL && hwloc_bitmap_intersects(na, nb) ? KVX_TOPO_PATH_NODE
                                                                       : KVX_TOPO_PATH_SYS;
}

const char *kvx_topo_path_name(kvx_topo_path_t path)
{
    static const char *const names[] = { "PIX", "PXB", "PHB", "NODE", "SYS" };

    return (unsigned)path < sizeof(names) / sizeof(names[0]) ? names[path] : "?";
}

kvx_status_t topo_path_fill(topo_t *topo, kvx_failure_t *reason_p)
{
    size_t n = topo->ngpus * topo->nnics;

    topo->paths = calloc(n > 0 ? n : 1, sizeof(*topo->paths));
    if (topo->paths == NULL) {
        return topo_fail(reason_p, KVX_ERR_NO_MEMORY, NULL, "out of memory for %zu paths", n);
    }
    for (size_t g = 0; g < topo->ngpus; g++) {
        for (size_t i = 0; i < topo->nnics; i++) {
            topo->paths[g * topo->nnics + i] =
                topo_path_classify(topo->gpus[g].pci, topo->nics[i].anchor);
        }
    }
    return KVX_OK;
}
