/*
 * kvx.h - the whole public interface of kvx.
 *
 * kvx moves the KV cache of LLM requests ("rooms") from prefill ranks to
 * decode ranks of one MPI job, and makes every rank that took part agree on
 * how each room ended and why. MPI carries the control plane, UCX the pages.
 *
 * Conventions:
 *  - Every function returns a kvx_status_t unless said otherwise: KVX_OK (0),
 *    KVX_INPROGRESS (1) or a negative error. Output parameters come last and
 *    are written only on success.
 *  - Nothing waits on the network unless its name ends in _wait.
 *  - "Collective" means every rank of the named communicator must call it.
 */
#ifndef KVX_H
#define KVX_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define KVX_API __attribute__((visibility("default")))
#else
#define KVX_API
#endif

/*
 * Status codes. One table gives each code its value, its name and its
 * message, so the three can never drift apart (libuv's UV_ERRNO_MAP idea).
 */
#define KVX_STATUS_MAP(X)                                                    \
    X(OK, 0, "success")                                                      \
    X(INPROGRESS, 1, "operation in progress")                                \
    X(ERR_INVALID_PARAM, -1, "invalid parameter")                            \
    X(ERR_INVALID_HANDLE, -2, "invalid or destroyed handle")                 \
    X(ERR_NO_MEMORY, -3, "out of memory")                                    \
    X(ERR_NO_ROOM, -4, "no such room")                                       \
    X(ERR_ROOM_EXISTS, -5, "room id is still active")                        \
    X(ERR_STATE, -6, "call not allowed in the room's state")                 \
    X(ERR_PAGE_RANGE, -7, "page id out of range")                            \
    X(ERR_TOO_MANY_PAGES, -8, "more pages than announced")                   \
    X(ERR_AUX, -9, "aux data does not fit or does not match")                \
    X(ERR_LAYOUT, -10, "invalid job layout")                                 \
    X(ERR_KV_MISMATCH, -11, "KV layouts of prefill and decode do not match") \
    X(ERR_CONFIG, -12, "invalid configuration")                              \
    X(ERR_MPI, -13, "MPI error")                                             \
    X(ERR_UCX, -14, "UCX transport error")                                   \
    X(ERR_TOPO, -15, "topology error")                                       \
    X(ERR_CUDA, -16, "CUDA error")                                           \
    X(ERR_TIMEOUT, -17, "deadline expired")                                  \
    X(ERR_ABORTED, -18, "aborted")                                           \
    X(ERR_PEER_LOST, -19, "peer lost")                                       \
    X(ERR_INJECTED, -20, "injected failure")                                 \
    X(ERR_SHUTDOWN, -21, "shutdown")                                         \
    X(ERR_PROTOCOL, -22, "malformed or unexpected peer message")             \
    X(ERR_BUSY, -23, "resource busy")                                        \
    X(ERR_QUARANTINED, -24, "pages quarantined")                             \
    X(ERR_UNSUPPORTED, -25, "not supported")                                 \
    X(ERR_IO, -26, "I/O error")                                              \
    X(ERR_INTERNAL, -27, "internal error")

typedef enum kvx_status {
#define KVX_STATUS_ENUM_(name, value, msg) KVX_##name = value,
    KVX_STATUS_MAP(KVX_STATUS_ENUM_)
#undef KVX_STATUS_ENUM_
} kvx_status_t;

/** The message of a status ("deadline expired"); never NULL. Thread safe. */
KVX_API const char *kvx_status_string(kvx_status_t status);

/** The name of a status ("KVX_ERR_TIMEOUT"); never NULL. Thread safe. */
KVX_API const char *kvx_status_name(kvx_status_t status);

/** A rank's role in the job. */
typedef enum kvx_role {
    KVX_ROLE_NONE = 0, /**< not known yet (before a context exists) */
    KVX_ROLE_PREFILL,
    KVX_ROLE_DECODE
} kvx_role_t;

/** "prefill", "decode" or "none". */
KVX_API const char *kvx_role_name(kvx_role_t role);

/**
 * Room states, numbered so that the minimum over ranks is the agreed state.
 * A state only rises, except that FAILED always wins and sticks.
 */
typedef enum kvx_room_state {
    KVX_ROOM_FAILED = 0,
    KVX_ROOM_BOOTSTRAPPING = 1,
    KVX_ROOM_WAITING_FOR_INPUT = 2,
    KVX_ROOM_TRANSFERRING = 3,
    KVX_ROOM_SUCCESS = 4
} kvx_room_state_t;

/** "FAILED", "BOOTSTRAPPING", ...; never NULL. */
KVX_API const char *kvx_room_state_name(kvx_room_state_t state);

/**
 * Where in a room's life a failure happened, in the order a room meets them:
 * when several ranks fail one room, the earliest stage is the root cause.
 */
#define KVX_STAGE_MAP(X)        \
    X(INIT, "init")             \
    X(BOOTSTRAP, "bootstrap")   \
    X(PREALLOC, "prealloc")     \
    X(WAIT, "wait")             \
    X(POST, "post")             \
    X(AUX, "aux")               \
    X(COMPLETION, "completion") \
    X(TRANSFER, "transfer")     \
    X(NOTIFY, "notify")         \
    X(AGREE, "agree")           \
    X(ABORT, "abort")           \
    X(SHUTDOWN, "shutdown")

typedef enum kvx_stage {
#define KVX_STAGE_ENUM_(name, str) KVX_STAGE_##name,
    KVX_STAGE_MAP(KVX_STAGE_ENUM_)
#undef KVX_STAGE_ENUM_
        KVX_STAGE_COUNT
} kvx_stage_t;

/** "post", "bootstrap", ...; never NULL. */
KVX_API const char *kvx_stage_name(kvx_stage_t stage);

/** kvx_failure_t.flags: the failure was injected by a KVX_FAULT rule. */
#define KVX_FAILURE_INJECTED 0x1u

/**
 * A failure record: why something failed, where, and what the foreign library
 * said. Recorded once at its origin and carried unchanged to every rank that
 * takes part in the room, so that every rank reports the real root cause.
 */
typedef struct kvx_failure {
    kvx_status_t status;    /**< what kind of failure */
    kvx_stage_t stage;      /**< where in the room's life */
    uint64_t room_id;       /**< the room, when has_room is set */
    int has_room;           /**< 0 for failures outside a room */
    int origin_rank;        /**< world rank that recorded it, -1 if unknown */
    kvx_role_t origin_role; /**< role of that rank */
    int origin_instance;    /**< instance of that rank */
    int origin_tp_rank;     /**< TP rank of that rank inside its instance */
    unsigned flags;         /**< KVX_FAILURE_* bits */
    unsigned count;         /**< ranks that recorded a failure for this room (agreed) */
    char foreign[128];      /**< the foreign library's own text, or "" */
    char text[256];         /**< one sentence saying what went wrong */
} kvx_failure_t;

/**
 * Formats a failure record on one line, for example
 * "room 42 FAILED at post on prefill[0].tp2 (rank 5): put to decode[1].tp0
 * (rank 9) failed: Connection reset by remote peer".
 *
 * @param failure  the record
 * @param buf      where to write; always NUL-terminated when len > 0
 * @param len      size of buf
 * @return the length the full line has (as snprintf), so a result >= len
 *         means it was truncated. Thread safe.
 */
KVX_API int kvx_failure_format(const kvx_failure_t *failure, char *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* Configuration: every KVX_* environment variable, one row each.             */
/* ------------------------------------------------------------------------ */

/** One configuration variable, as kvx-info -c prints it. */
typedef struct kvx_config_var {
    const char *name;          /**< "KVX_TRANSFER_TIMEOUT" */
    const char *type;          /**< "time", "size", "int", "bool", "enum", "list", "string" */
    const char *default_value; /**< as text */
    const char *accepted;      /**< the accepted form ("300s, 500ms, 1.5s", "none|cpu|cpu+mem") */
    const char *help;          /**< one sentence */
    const char *value;         /**< the value in this process's environment, or NULL */
} kvx_config_var_t;

/** Number of configuration variables. Thread safe. */
KVX_API size_t kvx_config_count(void);

/**
 * The index-th configuration variable.
 * @return KVX_OK, or KVX_ERR_INVALID_PARAM when index >= kvx_config_count()
 *         or var_p is NULL.
 */
KVX_API kvx_status_t kvx_config_var(size_t index, kvx_config_var_t *var_p);

/**
 * Parses every KVX_* variable of this process's environment as a context
 * would, and warns (through the logger) about unknown KVX_* names.
 * @param reason_p  optional; on KVX_ERR_CONFIG, which variable and why
 * @return KVX_OK or KVX_ERR_CONFIG.
 */
KVX_API kvx_status_t kvx_config_check(kvx_failure_t *reason_p);

/* ------------------------------------------------------------------------ */
/* Versions.                                                                */
/* ------------------------------------------------------------------------ */

/** kvx's own version, "0.1.0". */
KVX_API const char *kvx_version(void);

/** Versions of kvx and of the libraries it was built with and runs with. */
typedef struct kvx_versions {
    char kvx[32];
    char mpi[256];  /**< MPI_Get_library_version, first line */
    char ucx[64];   /**< ucp_get_version_string */
    char hwloc[64]; /**< run time API version, and the build-time one */
    char cuda[128]; /**< "not built", or runtime and driver versions, or why unavailable */
} kvx_versions_t;

/** Fills versions_p. Does not need MPI to be initialized. */
KVX_API kvx_status_t kvx_versions(kvx_versions_t *versions_p);

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

/* ------------------------------------------------------------------------ */
/* End of topology.                                                          */
/* ------------------------------------------------------------------------ */

#ifdef __cplusplus
}
#endif

#endif /* KVX_H */
