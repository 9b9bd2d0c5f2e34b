/*
 * topo_bind.c - applying a rank's choice to its process: UCX_NET_DEVICES for
 * kvx's UCX context, and the binding of cores and memory near its GPU.
 *
 * Nothing is done halfway: the binding is checked and made first (and
 * undone if the memory part fails), the environment is set last.
 */
#include "config.h"

#include "topo.h"
#include "util/log.h"

#include <errno.h>
#include <hwloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The value kvx itself last gave UCX_NET_DEVICES: a second context in the
 * same process may replace it, while a user's value is always kept. */
static pthread_mutex_t bind_env_lock = PTHREAD_MUTEX_INITIALIZER;
static char bind_env_ours[1024];

static void bind_net(const kvx_topo_choice_t *choice, topo_applied_t *a)
{
    const char *user;

    pthread_mutex_lock(&bind_env_lock);
    user = getenv("UCX_NET_DEVICES");
    if (user != NULL && strcmp(user, bind_env_ours) != 0) {
        a->net_user = 1;
        topo_text(a->ucx_net_devices, sizeof(a->ucx_net_devices), "%s", user);
        topo_text(a->net_text, sizeof(a->net_text),
                  "UCX_NET_DEVICES=%s is set by the user and kept (kvx would use '%s': %s)", user,
                  choice->ucx_net_devices, choice->reason);
    } else if (choice->ucx_net_devices[0] == '\0') {
        topo_text(a->net_text, sizeof(a->net_text), "UCX_NET_DEVICES left unset: %s",
                  choice->reason);
    } else if (setenv("UCX_NET_DEVICES", choice->ucx_net_devices, 1) == 0) {
        a->net_set = 1;
        topo_text(bind_env_ours, sizeof(bind_env_ours), "%s", choice->ucx_net_devices);
        topo_text(a->ucx_net_devices, sizeof(a->ucx_net_devices), "%s", choice->ucx_net_devices);
        topo_text(a->net_text, sizeof(a->net_text), "UCX_NET_DEVICES=%s: %s",
                  choice->ucx_net_devices, choice->reason);
    } else {
        topo_text(a->net_text, sizeof(a->net_text),
                  "UCX_NET_DEVICES could not be set (%s); UCX chooses its own devices",
                  strerror(errno));
    }
    pthread_mutex_unlock(&bind_env_lock);
}

/* Why binding is skipped, or NULL when it is to be done. */
static const char *bind_skip(const topo_t *topo, const kvx_topo_choice_t *choice, int mode)
{
    if (choice->gpu < 0) {
        return "no GPU: binding skipped, the launcher's binding stays";
    }
    if (mode == CFG_BIND_NONE) {
        return "KVX_BIND=none: binding skipped";
    }
    if (!topo->thissystem) {
        return "the topology is not this machine's: binding skipped (HWLOC_THISSYSTEM=1 "
               "asserts that it is)";
    }
    return NULL;
}

static kvx_status_t bind_mem(const topo_t *topo, hwloc_obj_t local, hwloc_const_cpuset_t before,
                             const char *busid, kvx_failure_t *reason_p)
{
    kvx_status_t status;

    /* No PROCESS flag: Linux sets the memory policy of the calling thread,
     * which the threads it starts later inherit. */
    if (hwloc_set_membind(topo->hw, local->nodeset, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_BYNODESET) ==
        0) {
        return KVX_OK;
    }
    status = topo_fail(reason_p, KVX_ERR_TOPO, strerror(errno),
                       "cannot bind memory to the NUMA node of GPU %s", busid);
    hwloc_set_cpubind(topo->hw, before, HWLOC_CPUBIND_PROCESS);
    return status;
}

static kvx_status_t bind_cores(const topo_t *topo, const kvx_topo_choice_t *choice, int mode,
                               topo_applied_t *a, kvx_failure_t *reason_p)
{
    const topo_gpu_t *gpu = &topo->gpus[choice->gpu];
    hwloc_obj_t local = hwloc_get_non_io_ancestor_obj(topo->hw, gpu->pci);
    hwloc_bitmap_t before = hwloc_bitmap_alloc();
    kvx_status_t status = KVX_OK;

    if (before == NULL || hwloc_get_cpubind(topo->hw, before, HWLOC_CPUBIND_PROCESS) != 0) {
        status = topo_fail(reason_p, KVX_ERR_TOPO, strerror(errno),
                           "cannot read this process's CPU binding");
    } else if (hwloc_set_cpubind(topo->hw, local->cpuset, HWLOC_CPUBIND_PROCESS) != 0) {
        status =
            topo_fail(reason_p, KVX_ERR_TOPO, strerror(errno),
                      "cannot bind to the CPUs %s of GPU %s", gpu->info.cpuset, gpu->info.busid);
    } else if (mode == CFG_BIND_CPU_MEM) {
        status = bind_mem(topo, local, before, gpu->info.busid, reason_p);
    }
    hwloc_bitmap_free(before);
    if (status == KVX_OK) {
        a->cpu_bound = 1;
        a->mem_bound = mode == CFG_BIND_CPU_MEM;
        topo_text(a->bind_text, sizeof(a->bind_text), "bound to the CPUs %s of GPU %s%s",
                  gpu->info.cpuset, gpu->info.busid,
                  mode == CFG_BIND_CPU_MEM ? ", memory to their NUMA node" : "");
    }
    return status;
}

kvx_status_t topo_apply(const topo_t *topo, const kvx_topo_choice_t *choice, const kvx_cfg_t *cfg,
                        topo_applied_t *applied_p, kvx_failure_t *reason_p)
{
    const char *skip = bind_skip(topo, choice, cfg->bind);
    topo_applied_t a;
    kvx_status_t status = KVX_OK;

    memset(&a, 0, sizeof(a));
    if (choice->gpu >= (int)topo->ngpus) {
        return topo_fail(reason_p, KVX_ERR_INVALID_PARAM, NULL,
                         "the choice names GPU %d of a topology with %zu", choice->gpu,
                         topo->ngpus);
    }
    if (skip != NULL) {
        topo_text(a.bind_text, sizeof(a.bind_text), "%s", skip);
    } else {
        status = bind_cores(topo, choice, cfg->bind, &a, reason_p);
    }
    if (status != KVX_OK) {
        return status;
    }
    bind_net(choice, &a);
    kvx_info("%s", a.net_text);
    kvx_info("%s", a.bind_text);
    if (applied_p != NULL) {
        *applied_p = a;
    }
    return KVX_OK;
}
