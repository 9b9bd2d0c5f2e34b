/*
 * topo_obj.h - the topology object (topo_t, its GPUs and NICs) and the
 * helpers the stages of src/topo share (topo_obj.c). topo.h builds on it.
 */
#ifndef KVX_TOPO_TOPO_OBJ_H
#define KVX_TOPO_TOPO_OBJ_H

#include <kvx.h>

#include <stddef.h>

struct hwloc_topology;
struct hwloc_obj;

typedef struct topo_gpu {
    kvx_topo_gpu_t info;
    struct hwloc_obj *pci; /* its PCI device */
    size_t *rails;         /* info.nic_count indices into nics[], in the order used */
} topo_gpu_t;

typedef struct topo_nic {
    kvx_topo_nic_t info;
    struct hwloc_obj *osdev;  /* the OpenFabrics or Network OS device */
    struct hwloc_obj *anchor; /* its PCI device, or osdev when not on PCI */
} topo_nic_t;

/* The public kvx_topo_t is this struct. */
struct kvx_topo {
    struct hwloc_topology *hw;
    char source[1024]; /* "this machine" or the XML file */
    int thissystem;    /* hwloc says the topology is this machine's */
    topo_gpu_t *gpus;  /* in bus id order */
    size_t ngpus;
    topo_nic_t *nics; /* rails: RDMA ports, or TCP interfaces when no RDMA */
    size_t nnics;
    int tcp;                /* the NICs are TCP interfaces */
    kvx_topo_path_t *paths; /* ngpus x nnics, one row per GPU */
    size_t *host_rails;     /* KVX_NET_DEVICES for ranks without GPU, or NULL */
    size_t nhost_rails;
};
typedef struct kvx_topo topo_t;

/* The path class of gpus[gpu] to nics[nic]. */
static inline kvx_topo_path_t topo_path_of(const topo_t *topo, size_t gpu, size_t nic)
{
    return topo->paths[gpu * topo->nnics + nic];
}

/* Records a failure detected in topo (stage init), logs it, copies it to
 * *reason_p when not NULL, and returns status. */
kvx_status_t topo_fail(kvx_failure_t *reason_p, kvx_status_t status, const char *foreign,
                       const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* snprintf for sentences that are cut at len on purpose (a log line or a
 * reason field holds what fits). */
void topo_text(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The GPU with a (normalized) bus id, or NULL. */
topo_gpu_t *topo_gpu_find(const topo_t *topo, const char *busid);

/* "its GPUs: 0000:53:00.0, ..." / "its NICs: mlx5_0:1, ..." (or "it has no
 * GPU/NIC"), truncated to len, for error sentences. */
void topo_list_gpus(const topo_t *topo, char *out, size_t len);
void topo_list_nics(const topo_t *topo, char *out, size_t len);

#endif
