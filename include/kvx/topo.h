/*
 * kvx/topo.h - topology introspection: the GPUs and NICs of a node, their
 * path classes and the NICs each GPU uses, as context creation chooses them
 * and kvx-topo prints them. Binds nothing.
 *
 * Included by kvx.h; a program may include either. Uses kvx.h's status
 * codes and failure records.
 */
#ifndef KVX_TOPO_H
#define KVX_TOPO_H

#include <kvx.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Topology: the GPUs and NICs of a node and the NICs each GPU uses.        */
/* ------------------------------------------------------------------------ */

/**
 * How far a GPU is from a NIC, with the meanings of `nvidia-smi topo -m`,
 * nearest first, so that a smaller value is a better path.
 */
typedef enum kvx_topo_path {
    KVX_TOPO_PATH_PIX = 0, /**< through at most one PCIe switch */
    KVX_TOPO_PATH_PXB,     /**< through several PCIe bridges, no host bridge */
    KVX_TOPO_PATH_PHB,     /**< through a PCIe host bridge (the CPU) */
    KVX_TOPO_PATH_NODE,    /**< between host bridges of one NUMA node */
    KVX_TOPO_PATH_SYS      /**< across NUMA nodes (the SMP interconnect) */
} kvx_topo_path_t;

/** "PIX", "PXB", "PHB", "NODE", "SYS"; "?" for another value. Thread safe. */
KVX_API const char *kvx_topo_path_name(kvx_topo_path_t path);

/** A node's topology as kvx sees it (opaque). */
typedef struct kvx_topo kvx_topo_t;

/**
 * One NIC, as kvx uses it: a port of an RDMA (OpenFabrics) device, or, on a
 * node without any RDMA device, a TCP network interface.
 */
typedef struct kvx_topo_nic {
    char name[64];     /**< device: "mlx5_0", "rdmap79s0", "eth0" */
    unsigned port;     /**< RDMA port (1, 2, ...); 0 for a TCP interface */
    int tcp;           /**< 1 for a TCP interface */
    char ucx_name[80]; /**< as UCX_NET_DEVICES names it: "mlx5_0:1", "eth0" */
    char busid[32];    /**< its PCI device, "0000:4f:00.0"; "" when not on PCI */
    int numa;          /**< OS index of its NUMA node; -1 for none or several */
} kvx_topo_nic_t;

/** One GPU (an NVIDIA PCI display or 3D controller) and the NICs it uses. */
typedef struct kvx_topo_gpu {
    char busid[32];             /**< "0000:53:00.0": lower case, full domain */
    char model[96];             /**< the PCI device name when known, else "" */
    int numa;                   /**< OS index of its NUMA node; -1 for none or several */
    char cpuset[512];           /**< its local CPUs as a list, "0-47" */
    size_t nic_count;           /**< NICs it uses: kvx_topo_gpu_nic() lists them */
    kvx_topo_path_t path;       /**< path class to those NICs (the farthest of them) */
    int gdr_advised;            /**< 1 when path is PIX or PXB (GPUDirect RDMA pays) */
    int overridden;             /**< 1 when KVX_GPU_NIC_MAP or KVX_NET_DEVICES chose */
    char ucx_net_devices[1024]; /**< UCX_NET_DEVICES for a rank on this GPU */
    char reason[256];           /**< one sentence: why these NICs */
} kvx_topo_gpu_t;

/** What one rank uses: its NICs and where it is bound. */
typedef struct kvx_topo_choice {
    int gpu;                    /**< index of its GPU (kvx_topo_gpu()), -1 for none */
    char ucx_net_devices[1024]; /**< UCX_NET_DEVICES; "" when the node has no NIC */
    kvx_topo_path_t path;       /**< from its GPU; without a GPU, NODE when the NIC
                                     is near the rank's NUMA node, SYS when not */
    int numa;                   /**< NUMA node near the rank (OS index), -1 if unknown */
    char cpuset[512];           /**< CPUs near the rank as a list, "" if unknown */
    int gdr_advised;            /**< 1 when the GPU's path is PIX or PXB */
    char reason[256];           /**< one sentence: why these NICs */
} kvx_topo_choice_t;

/**
 * Discovers a node's GPUs and NICs, classes every GPU-NIC path and assigns
 * each GPU its closest NICs, balanced over the GPUs that share them and the
 * same on every rank. KVX_NET_DEVICES and KVX_GPU_NIC_MAP replace the
 * automatic choice. Binds nothing and sets no environment variable.
 *
 * @param xml_path  an hwloc XML topology (`lstopo --of xml`) to read instead
 *                  of this machine; NULL means KVX_TOPO_XML when it is set,
 *                  else this machine
 * @param topo_p    the topology, to be freed with kvx_topo_destroy()
 * @param reason_p  optional; on error, what was wrong, in one sentence
 * @return KVX_OK; KVX_ERR_TOPO when the topology cannot be read (missing or
 *         malformed XML); KVX_ERR_CONFIG when a KVX_* variable is malformed or
 *         names a GPU or NIC the topology does not have; KVX_ERR_NO_MEMORY;
 *         KVX_ERR_INVALID_PARAM when topo_p is NULL.
 * Not collective. Thread safe (touches nothing shared).
 */
KVX_API kvx_status_t kvx_topo_create(const char *xml_path, kvx_topo_t **topo_p,
                                     kvx_failure_t *reason_p);

/** Frees a topology; NULL is allowed. */
KVX_API void kvx_topo_destroy(kvx_topo_t *topo);

/** "this machine", or the XML file it was read from; never NULL. */
KVX_API const char *kvx_topo_source(const kvx_topo_t *topo);

/** Number of GPUs, in PCI bus id order (CUDA_DEVICE_ORDER=PCI_BUS_ID). */
KVX_API size_t kvx_topo_gpu_count(const kvx_topo_t *topo);

/** Number of NICs, in PCI bus id order, then name, then port. */
KVX_API size_t kvx_topo_nic_count(const kvx_topo_t *topo);

/**
 * The index-th GPU.
 * @return KVX_OK, or KVX_ERR_INVALID_PARAM for a bad index or NULL pointer.
 */
KVX_API kvx_status_t kvx_topo_gpu(const kvx_topo_t *topo, size_t index, kvx_topo_gpu_t *gpu_p);

/**
 * The i-th NIC a GPU uses, in the order it uses them, as an index for
 * kvx_topo_nic().
 * @return KVX_OK, or KVX_ERR_INVALID_PARAM for a bad index or NULL pointer.
 */
KVX_API kvx_status_t kvx_topo_gpu_nic(const kvx_topo_t *topo, size_t gpu, size_t i, size_t *nic_p);

/**
 * The index-th NIC.
 * @return KVX_OK, or KVX_ERR_INVALID_PARAM for a bad index or NULL pointer.
 */
KVX_API kvx_status_t kvx_topo_nic(const kvx_topo_t *topo, size_t index, kvx_topo_nic_t *nic_p);

/**
 * The path class between a GPU and a NIC.
 * @return KVX_OK, or KVX_ERR_INVALID_PARAM for a bad index or NULL pointer.
 */
KVX_API kvx_status_t kvx_topo_path(const kvx_topo_t *topo, size_t gpu, size_t nic,
                                   kvx_topo_path_t *path_p);

/**
 * What one rank would use: the NICs of its GPU, or, for a rank without a
 * GPU, a NIC near its NUMA node (then its package), spread over the ranks of
 * the node by local_rank. Binds nothing.
 *
 * @param gpu_busid   the rank's GPU, as cudaDeviceGetPCIBusId or nvidia-smi
 *                    write it ("0000:53:00.0", "00000000:53:00.0", any case);
 *                    NULL or "" for a rank without a GPU
 * @param local_rank  the rank's index among the ranks of its node (>= 0)
 * @param choice_p    the choice
 * @param reason_p    optional; on error, why
 * @return KVX_OK; KVX_ERR_INVALID_PARAM for a malformed bus id or a negative
 *         local_rank; KVX_ERR_TOPO when the GPU is not in the topology.
 * Thread safe.
 */
KVX_API kvx_status_t kvx_topo_choose(const kvx_topo_t *topo, const char *gpu_busid, int local_rank,
                                     kvx_topo_choice_t *choice_p, kvx_failure_t *reason_p);

#ifdef __cplusplus
}
#endif

#endif /* KVX_TOPO_H */
