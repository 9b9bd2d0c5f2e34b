/*
 * topo_discover.c - finding a node's GPUs and NICs in hwloc's I/O tree.
 *
 * GPUs are NVIDIA PCI display/3D controllers (vendor 0x10de, class 0x03xx),
 * named by PCI bus id: Debian's hwloc has no CUDA plugin, and where one
 * exists (cudaN, nvmlN OS devices) they sit below the same PCI device.
 * NICs are the active ports of OpenFabrics devices, one rail each; a node
 * without any falls back to its Network devices (TCP).
 */
#include "config.h"

#include "topo.h"
#include "util/log.h"

#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DISCOVER_NVIDIA      0x10de
#define DISCOVER_PORT_MAX    16
#define DISCOVER_PORT_ACTIVE "4" /* IB_PORT_ACTIVE in PortNState */

void topo_locality(const topo_t *topo, struct hwloc_obj *obj, int *numa_p, char *cpuset, size_t len)
{
    hwloc_obj_t local = hwloc_get_non_io_ancestor_obj(topo->hw, obj);

    *numa_p = -1;
    if (local != NULL && local->nodeset != NULL && hwloc_bitmap_weight(local->nodeset) == 1) {
        *numa_p = hwloc_bitmap_first(local->nodeset);
    }
    if (local != NULL && local->cpuset != NULL) {
        hwloc_bitmap_list_snprintf(cpuset, len, local->cpuset);
    } else if (len > 0) {
        cpuset[0] = '\0';
    }
}

static int discover_is_gpu(hwloc_obj_t pci)
{
    return pci->attr->pcidev.vendor_id == DISCOVER_NVIDIA &&
           (pci->attr->pcidev.class_id >> 8) == 0x03;
}

static int discover_gpu_cmp(const void *a, const void *b)
{
    return strcmp(((const topo_gpu_t *)a)->info.busid, ((const topo_gpu_t *)b)->info.busid);
}

static void discover_gpu_fill(const topo_t *topo, hwloc_obj_t pci, topo_gpu_t *gpu)
{
    const char *model = hwloc_obj_get_info_by_name(pci, "PCIDevice");

    gpu->pci = pci;
    topo_busid_of(pci, gpu->info.busid, sizeof(gpu->info.busid));
    snprintf(gpu->info.model, sizeof(gpu->info.model), "%s", model != NULL ? model : "");
    topo_locality(topo, pci, &gpu->info.numa, gpu->info.cpuset, sizeof(gpu->info.cpuset));
}

static kvx_status_t discover_gpus(topo_t *topo, kvx_failure_t *reason_p)
{
    hwloc_obj_t pci = NULL;
    size_t n = 0;

    while ((pci = hwloc_get_next_pcidev(topo->hw, pci)) != NULL) {
        n += (size_t)discover_is_gpu(pci);
    }
    topo->gpus = calloc(n > 0 ? n : 1, sizeof(*topo->gpus));
    if (topo->gpus == NULL) {
        return topo_fail(reason_p, KVX_ERR_NO_MEMORY, NULL, "out of memory for %zu GPUs", n);
    }
    while ((pci = hwloc_get_next_pcidev(topo->hw, pci)) != NULL) {
        if (discover_is_gpu(pci)) {
            discover_gpu_fill(topo, pci, &topo->gpus[topo->ngpus++]);
        }
    }
    /* Bus id order is CUDA's PCI_BUS_ID order and nvidia-smi's: every rank
     * of the node sees the same list whatever CUDA_VISIBLE_DEVICES says. */
    qsort(topo->gpus, topo->ngpus, sizeof(*topo->gpus), discover_gpu_cmp);
    return KVX_OK;
}

/* The active ports of an OpenFabrics device (PortNState = ACTIVE), sorted.
 * A device exported without port information (the AWS XMLs) has port 1. */
static size_t discover_ports(hwloc_obj_t osdev, unsigned *ports)
{
    size_t n = 0;
    int described = 0;

    for (unsigned i = 0; i < osdev->infos_count; i++) {
        const char *name = osdev->infos[i].name;
        unsigned port;
        int used = 0;

        if (sscanf(name, "Port%uState%n", &port, &used) != 1 || used == 0 || name[used] != '\0') {
            continue;
        }
        described = 1;
        if (strcmp(osdev->infos[i].value, DISCOVER_PORT_ACTIVE) == 0 && n < DISCOVER_PORT_MAX) {
            size_t at = n++;

            for (; at > 0 && ports[at - 1] > port; at--) {
                ports[at] = ports[at - 1];
            }
            ports[at] = port;
        }
    }
    if (!described) {
        ports[n++] = 1;
    } else if (n == 0) {
        kvx_debug("%s has no active port: not used", osdev->name);
    }
    return n;
}

static kvx_status_t discover_add_nic(topo_t *topo, hwloc_obj_t osdev, unsigned port,
                                     kvx_failure_t *reason_p)
{
    topo_nic_t *nics = realloc(topo->nics, (topo->nnics + 1) * sizeof(*nics));
    topo_nic_t *nic;

    if (nics == NULL) {
        return topo_fail(reason_p, KVX_ERR_NO_MEMORY, NULL, "out of memory for NIC %s",
                         osdev->name);
    }
    topo->nics = nics;
    nic = &nics[topo->nnics++];
    memset(nic, 0, sizeof(*nic));
    nic->osdev = osdev;
    nic->anchor = osdev;
    if (osdev->parent != NULL && osdev->parent->type == HWLOC_OBJ_PCI_DEVICE) {
        nic->anchor = osdev->parent;
        topo_busid_of(nic->anchor, nic->info.busid, sizeof(nic->info.busid));
    }
    snprintf(nic->info.name, sizeof(nic->info.name), "%s", osdev->name);
    nic->info.port = port;
    nic->info.tcp = port == 0;
    if (port == 0) {
        snprintf(nic->info.ucx_name, sizeof(nic->info.ucx_name), "%s", osdev->name);
    } else {
        snprintf(nic->info.ucx_name, sizeof(nic->info.ucx_name), "%s:%u", osdev->name, port);
    }
    topo_locality(topo, nic->anchor, &nic->info.numa, NULL, 0);
    return KVX_OK;
}

static kvx_status_t discover_nics_of(topo_t *topo, hwloc_obj_osdev_type_t type,
                                     kvx_failure_t *reason_p)
{
    hwloc_obj_t osdev = NULL;
    kvx_status_t status = KVX_OK;

    while (status == KVX_OK && (osdev = hwloc_get_next_osdev(topo->hw, osdev)) != NULL) {
        unsigned ports[DISCOVER_PORT_MAX];
        size_t n;

        if (osdev->attr->osdev.type != type || osdev->name == NULL) {
            continue;
        }
        n = type == HWLOC_OBJ_OSDEV_OPENFABRICS ? discover_ports(osdev, ports) : 1;
        for (size_t p = 0; p < n && status == KVX_OK; p++) {
            status = discover_add_nic(topo, osdev,
                                      type == HWLOC_OBJ_OSDEV_OPENFABRICS ? ports[p] : 0, reason_p);
        }
    }
    return status;
}

/* PCI bus id order (devices not on PCI last), then name, then port. */
static int discover_nic_cmp(const void *pa, const void *pb)
{
    const kvx_topo_nic_t *a = &((const topo_nic_t *)pa)->info;
    const kvx_topo_nic_t *b = &((const topo_nic_t *)pb)->info;
    int c;

    if ((a->busid[0] == '\0') != (b->busid[0] == '\0')) {
        return a->busid[0] == '\0' ? 1 : -1;
    }
    c = strcmp(a->busid, b->busid);
    if (c == 0) {
        c = strcmp(a->name, b->name);
    }
    if (c == 0) {
        c = a->port < b->port ? -1 : a->port > b->port;
    }
    return c;
}

kvx_status_t topo_discover(topo_t *topo, kvx_failure_t *reason_p)
{
    kvx_status_t status = discover_gpus(topo, reason_p);

    if (status == KVX_OK) {
        status = discover_nics_of(topo, HWLOC_OBJ_OSDEV_OPENFABRICS, reason_p);
    }
    if (status == KVX_OK && topo->nnics == 0) {
        topo->tcp = 1;
        status = discover_nics_of(topo, HWLOC_OBJ_OSDEV_NETWORK, reason_p);
    }
    if (status == KVX_OK && topo->nnics > 1) {
        /* Not with none: topo->nics is NULL then, which qsort may not get. */
        qsort(topo->nics, topo->nnics, sizeof(*topo->nics), discover_nic_cmp);
    }
    return status;
}
