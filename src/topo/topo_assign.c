/*
 * topo_assign.c - which NICs each GPU uses.
 *
 * A GPU's candidates are the NICs at its best path class. It takes
 * max(1, candidates / sharers) of them, the sharers being the GPUs whose
 * candidates overlap its own (itself included): on p5 each GPU takes the 4
 * EFA behind its own switch; on Lassen the two GPUs of a socket take one of
 * the socket's two ports each; on p4d the two GPUs of a host bridge share
 * its one EFA. GPUs are served in bus id order and each takes its
 * least-loaded candidates, the lower NIC index on a tie, so every rank of a
 * node computes the same assignment from the same lists, with no messages.
 */
#include "config.h"

#include "topo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void topo_rails_format(const topo_t *topo, const size_t *rails, size_t n, char *out, size_t len)
{
    size_t o = 0;

    out[0] = '\0';
    for (size_t i = 0; i < n && o < len; i++) {
        o += (size_t)snprintf(out + o, len - o, "%s%s", i > 0 ? "," : "",
                              topo->nics[rails[i]].info.ucx_name);
    }
}

kvx_status_t topo_gpu_set_rails(topo_t *topo, topo_gpu_t *gpu, const size_t *rails, size_t n)
{
    size_t g = (size_t)(gpu - topo->gpus);
    size_t *copy = malloc((n > 0 ? n : 1) * sizeof(*copy));

    if (copy == NULL) {
        return KVX_ERR_NO_MEMORY;
    }
    memcpy(copy, rails, n * sizeof(*copy));
    free(gpu->rails);
    gpu->rails = copy;
    gpu->info.nic_count = n;
    /* With no NIC there is no path; SYS says "nothing near". */
    gpu->info.path = n > 0 ? KVX_TOPO_PATH_PIX : KVX_TOPO_PATH_SYS;
    for (size_t i = 0; i < n; i++) {
        if (topo_path_of(topo, g, rails[i]) > gpu->info.path) {
            gpu->info.path = topo_path_of(topo, g, rails[i]);
        }
    }
    gpu->info.gdr_advised = n > 0 && gpu->info.path <= KVX_TOPO_PATH_PXB;
    topo_rails_format(topo, rails, n, gpu->info.ucx_net_devices, sizeof(gpu->info.ucx_net_devices));
    return KVX_OK;
}

/* cand[g * nnics + i] is set when NIC i is at GPU g's best path class. */
static void assign_candidates(const topo_t *topo, unsigned char *cand)
{
    for (size_t g = 0; g < topo->ngpus; g++) {
        kvx_topo_path_t best = KVX_TOPO_PATH_SYS;

        for (size_t i = 0; i < topo->nnics; i++) {
            if (topo_path_of(topo, g, i) < best) {
                best = topo_path_of(topo, g, i);
            }
        }
        for (size_t i = 0; i < topo->nnics; i++) {
            cand[g * topo->nnics + i] = topo_path_of(topo, g, i) == best;
        }
    }
}

static size_t assign_sharers(const topo_t *topo, const unsigned char *cand, size_t g)
{
    size_t sharers = 0;

    for (size_t h = 0; h < topo->ngpus; h++) {
        for (size_t i = 0; i < topo->nnics; i++) {
            if (cand[g * topo->nnics + i] && cand[h * topo->nnics + i]) {
                sharers++;
                break;
            }
        }
    }
    return sharers;
}

/* Takes want of GPU g's candidates, least loaded first, into rails[]. */
static void assign_pick(const topo_t *topo, const unsigned char *cand, size_t g, size_t want,
                        size_t *load, size_t *rails)
{
    for (size_t k = 0; k < want; k++) {
        size_t pick = topo->nnics;

        for (size_t i = 0; i < topo->nnics; i++) {
            int taken = 0;

            for (size_t j = 0; j < k; j++) {
                taken |= rails[j] == i;
            }
            if (cand[g * topo->nnics + i] && !taken &&
                (pick == topo->nnics || load[i] < load[pick])) {
                pick = i;
            }
        }
        rails[k] = pick;
        load[pick]++;
    }
}

static void assign_reason(topo_gpu_t *gpu, size_t ncand, size_t sharers)
{
    const char *path = kvx_topo_path_name(gpu->info.path);
    const char *gdr =
        gpu->info.gdr_advised ? "GPUDirect RDMA advised" : "GPUDirect RDMA not advised beyond PXB";
    const char *others = sharers == 2 ? "GPU that has" : "GPUs that have";
    size_t n = gpu->info.nic_count;

    if (sharers <= 1) {
        snprintf(gpu->info.reason, sizeof(gpu->info.reason),
                 "uses the %zu NIC%s at %s from it, which %s no other GPU's nearest; %s", n,
                 n == 1 ? "" : "s", path, n == 1 ? "is" : "are", gdr);
    } else if (n < ncand) {
        snprintf(gpu->info.reason, sizeof(gpu->info.reason),
                 "uses %zu of the %zu NICs at %s from it, split with %zu other %s none nearer; %s",
                 n, ncand, path, sharers - 1, others, gdr);
    } else {
        snprintf(gpu->info.reason, sizeof(gpu->info.reason),
                 "shares the %zu NIC%s at %s from it with %zu other %s none nearer; %s", n,
                 n == 1 ? "" : "s", path, sharers - 1, others, gdr);
    }
}

kvx_status_t topo_assign(topo_t *topo, kvx_failure_t *reason_p)
{
    unsigned char *cand = calloc(topo->ngpus * topo->nnics + 1, 1);
    size_t *load = calloc(topo->nnics + 1, sizeof(*load));
    size_t *rails = calloc(topo->nnics + 1, sizeof(*rails));
    kvx_status_t status =
        cand != NULL && load != NULL && rails != NULL ? KVX_OK : KVX_ERR_NO_MEMORY;

    if (status == KVX_OK) {
        assign_candidates(topo, cand);
    }
    for (size_t g = 0; g < topo->ngpus && status == KVX_OK; g++) {
        topo_gpu_t *gpu = &topo->gpus[g];
        size_t ncand = 0, sharers = assign_sharers(topo, cand, g), want;

        for (size_t i = 0; i < topo->nnics; i++) {
            ncand += cand[g * topo->nnics + i];
        }
        want = sharers > 0 && ncand / sharers > 1 ? ncand / sharers : (ncand > 0);
        assign_pick(topo, cand, g, want, load, rails);
        status = topo_gpu_set_rails(topo, gpu, rails, want);
        if (want == 0) {
            snprintf(gpu->info.reason, sizeof(gpu->info.reason),
                     "no NIC found: UCX chooses its own devices");
        } else {
            assign_reason(gpu, ncand, sharers);
        }
    }
    free(rails);
    free(load);
    free(cand);
    if (status != KVX_OK) {
        return topo_fail(reason_p, status, NULL, "out of memory assigning NICs to %zu GPUs",
                         topo->ngpus);
    }
    return KVX_OK;
}
