/*
 * topo.h - kvx's wrapper of hwloc: which GPUs and NICs a node has, how far
 * each GPU is from each NIC, which NICs each GPU uses, and the binding of a
 * rank near its GPU.
 *
 * How the context uses it, once per kvx_ctx_create() and before UCX reads
 * its configuration (ucp_config_read), on every rank:
 *
 *     topo_t *topo;
 *     kvx_topo_choice_t choice;
 *     topo_applied_t applied;
 *
 *     st = topo_create(cfg, NULL, &topo, &why);            // KVX_TOPO_XML or this machine
 *     if (st == KVX_OK)                                     // busid: the CUDA device's, or NULL
 *         st = topo_choose(topo, busid, local_rank, &choice, &why);
 *     if (st == KVX_OK)
 *         st = topo_apply(topo, &choice, cfg, &applied, &why);  // env + binding, logged
 *     topo_destroy(topo);                                   // the choice outlives it
 *
 * - cfg is the context's parsed configuration (cfg_global()).
 * - busid comes from cudaDeviceGetPCIBusId() on the rank's CUDA device (src/mem
 *   owns CUDA); NULL or "" for a rank without a GPU. Debian's hwloc has no CUDA
 *   plugin, so the PCI bus id is the only link between a CUDA device and hwloc.
 * - local_rank is the rank's index in MPI_Comm_split_type(MPI_COMM_TYPE_SHARED);
 *   it spreads ranks without a GPU over the NICs near them.
 * - Every rank of a node computes the same assignment from the same GPU list,
 *   so no communication is needed.
 * - On any error nothing is bound and the environment is untouched; the
 *   failure record says why in one sentence (stage init).
 * - topo_apply() calls setenv(): call it before other threads read the
 *   environment (context creation is not thread safe with respect to
 *   getenv/setenv elsewhere in the process).
 */
#ifndef KVX_TOPO_TOPO_H
#define KVX_TOPO_TOPO_H

#include <kvx.h>

#include "topo_obj.h"
#include "util/cfg.h"

#include <stddef.h>

/* hwloc's API version at run time and at build time. */
void topo_version(char *buf, size_t len);

/* ---- the topology ------------------------------------------------------ */

/* Loads xml_path (when not NULL), else cfg->topo_xml (when not ""), else this
 * machine; discovers GPUs and NICs; classes every pair; assigns NICs to GPUs
 * (balanced, then KVX_NET_DEVICES and KVX_GPU_NIC_MAP). Errors:
 * KVX_ERR_TOPO (missing/malformed XML, hwloc failure), KVX_ERR_CONFIG (an
 * override that is malformed or names an absent GPU or NIC),
 * KVX_ERR_NO_MEMORY. */
kvx_status_t topo_create(const kvx_cfg_t *cfg, const char *xml_path, topo_t **topo_p,
                         kvx_failure_t *reason_p);
void topo_destroy(topo_t *topo);

/* ---- one rank ---------------------------------------------------------- */

/* What a rank uses (see kvx_topo_choose() in kvx.h): its GPU's NICs, or for
 * gpu_busid NULL/"" a NIC near its NUMA node. Errors: KVX_ERR_INVALID_PARAM
 * (malformed bus id, local_rank < 0), KVX_ERR_TOPO (GPU not in topo). */
kvx_status_t topo_choose(const topo_t *topo, const char *gpu_busid, int local_rank,
                         kvx_topo_choice_t *choice_p, kvx_failure_t *reason_p);

/* What topo_apply() did, in the words it logged. */
typedef struct topo_applied {
    int net_set;                /* 1 when kvx set UCX_NET_DEVICES */
    int net_user;               /* 1 when the user's UCX_NET_DEVICES was kept */
    char ucx_net_devices[1024]; /* what UCX will use ("" when left to UCX) */
    int cpu_bound;              /* cores bound to the GPU's local CPUs */
    int mem_bound;              /* memory bound to the GPU's NUMA node */
    char net_text[384];         /* the line logged about the NICs */
    char bind_text[384];        /* the line logged about the binding */
} topo_applied_t;

/* Applies a choice to this process: sets UCX_NET_DEVICES unless the user set
 * it (then keeps it and says so), and binds per cfg->bind: cores to the GPU's
 * local CPUs (whole process), memory to its NUMA node (this thread's policy,
 * inherited by threads created later). A rank without a GPU, KVX_BIND=none or
 * a topology that is not this machine's skips binding, with a message. Both
 * lines are logged at info level. Errors: KVX_ERR_TOPO when hwloc cannot
 * bind (the previous binding is restored and the environment untouched). */
kvx_status_t topo_apply(const topo_t *topo, const kvx_topo_choice_t *choice, const kvx_cfg_t *cfg,
                        topo_applied_t *applied_p, kvx_failure_t *reason_p);

/* ---- the stages topo_create() runs, and the bus id helpers ------------ */

/* Normalizes a PCI bus id ("00000000:53:00.0", "53:00.0", "0000:B3:00.0")
 * to "0000:53:00.0". Returns 0, or -1 when s is not a bus id. */
int topo_busid_parse(const char *s, char *out, size_t len);

/* The bus id of a PCI object, normalized. */
void topo_busid_of(const struct hwloc_obj *pci, char *out, size_t len);

/* Discovery (topo_discover.c): fills gpus[] and nics[]. */
kvx_status_t topo_discover(topo_t *topo, kvx_failure_t *reason_p);

/* The NUMA node (OS index, -1 for none or several) and local CPUs (list) of
 * an object: those of its first non-I/O ancestor. */
void topo_locality(const topo_t *topo, struct hwloc_obj *obj, int *numa_p, char *cpuset,
                   size_t len);

/* The path class between two I/O objects, and the matrix of every GPU-NIC
 * pair (topo_path.c). */
kvx_topo_path_t topo_path_classify(struct hwloc_obj *a, struct hwloc_obj *b);
kvx_status_t topo_path_fill(topo_t *topo, kvx_failure_t *reason_p);

/* The balanced assignment of NICs to GPUs (topo_assign.c). */
kvx_status_t topo_assign(topo_t *topo, kvx_failure_t *reason_p);

/* Sets a GPU's NICs (rails[] of n) and fills its ucx_net_devices, path and
 * gdr_advised from them. */
kvx_status_t topo_gpu_set_rails(topo_t *topo, topo_gpu_t *gpu, const size_t *rails, size_t n);

/* Joins the ucx_name of rails with commas. */
void topo_rails_format(const topo_t *topo, const size_t *rails, size_t n, char *out, size_t len);

/* KVX_NET_DEVICES and KVX_GPU_NIC_MAP (topo_override.c). */
kvx_status_t topo_override(topo_t *topo, const kvx_cfg_t *cfg, kvx_failure_t *reason_p);

#endif
