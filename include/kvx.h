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

#include <mpi.h>
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
/* Contexts                                                                 */
/* ------------------------------------------------------------------------ */

/** A kvx context: this rank's place in the job, its KV pool, its peers. */
typedef struct kvx_ctx kvx_ctx_t;

/** Element type of the KV cache. */
typedef enum kvx_dtype {
    KVX_DTYPE_BF16 = 0,
    KVX_DTYPE_FP16,
    KVX_DTYPE_FP8,
    KVX_DTYPE_FP32
} kvx_dtype_t;

/** Attention kind: K and V per layer (MHA, GQA), or one latent per layer (MLA). */
typedef enum kvx_attn { KVX_ATTN_MHA = 0, KVX_ATTN_MLA } kvx_attn_t;

/**
 * How one (layer, component) buffer of num_pages pages is laid out. Token t
 * of head h of page p, element e, is at byte
 *  - KVX_PAGE_HND:        ((p * heads + h) * page_size + t) * head_dim + e   (x dtype size)
 *  - KVX_PAGE_NHD:        ((p * page_size + t) * heads + h) * head_dim + e
 *  - KVX_PAGE_HEAD_MAJOR: ((h * num_pages + p) * page_size + t) * head_dim + e
 * where heads is this rank's number of KV heads. HND keeps a head slice of
 * a page contiguous; HEAD_MAJOR keeps a head slice of a run of pages
 * contiguous.
 *
 * Heterogeneous TP. Prefill and decode instances may have different TP
 * sizes when one divides the other. Each decode rank receives exactly the
 * heads it holds, each from one prefill rank (when several prefill ranks
 * hold a head, because TP exceeds kv_heads, decode rank d takes it from the
 * (d mod holders)-th; MLA's latent, which every rank holds, comes from
 * prefill rank d mod prefill_tp, and the other prefill ranks conclude
 * without writing). kvx computes who writes where and how many writers
 * each decode rank waits for; the application does nothing different.
 *
 * Operations per room. The pages of a room (of a chunk, for chunked rooms)
 * are merged into runs: consecutive pages that are consecutive in both
 * pools. Per run and per (layer, component), a prefill rank posts:
 *
 *   layout       same heads per rank  decode holds fewer   decode holds more
 *                (1->1, MLA)          (1->2, 2->4)         (2->1, 4->2, 4->1)
 *   HND          1 put                1 packed put         1 put per page
 *   NHD          1 put                1 packed put         1 data message
 *   HEAD_MAJOR   1 put per head       1 put per head       1 put per head
 *
 * where "fewer" and "more" compare the heads a decode rank holds with the
 * heads a prefill rank holds (with kv_heads=2, 4->2 holds 1 and 1: the first
 * column; 4->1 holds 1 and 2: the last), and per head means per head the
 * pair moves. Only HND with the decode holding more heads depends on the
 * room's size (tokens / page_size puts): a decode page interleaves several
 * writers' heads, and a UCX put (contiguous on both sides in UCX 1.13)
 * cannot skip the other writers' parts; each page is one put of the
 * writer's whole head slice, with no copy. A packed put copies the
 * writer's strided heads of the run into registered staging memory first
 * (KVX_STAGING_BYTES, reused under flow control). A data message carries
 * the run's contiguous source bytes to the decode rank, which copies each
 * token's heads into its pages (NHD interleaves writers within every token,
 * so puts would be one per token). A packed put or a data message carries at
 * most 4 MiB: a longer run takes one per 4 MiB. kvx_room_info() counts all
 * of these as puts (and the aux row, when the room has one, as one more).
 * HEAD_MAJOR is the layout that moves every TP ratio without any copy in a
 * number of puts that does not depend on the room's pages.
 *
 * The table is for endpoints with native RMA (shared memory, CMA, RDMA).
 * Where UCX has none (TCP), it would emulate each put with active messages,
 * and UCX 1.13 aborts a process that is the target of such puts when their
 * initiator dies. A decode rank there asks its writers for data messages
 * instead (KVX_WRITES=auto; put and message force either): one per run of
 * at most 4 MiB per (layer, component), from the pool when the run is
 * contiguous in it and gathered into staging when not, and the aux row as
 * one more. Data of a room that failed is dropped on arrival, so the
 * decode's pages are free at once when such a writer is lost.
 */
typedef enum kvx_page_layout {
    KVX_PAGE_HND = 0,
    KVX_PAGE_NHD,
    KVX_PAGE_HEAD_MAJOR
} kvx_page_layout_t;

/**
 * Where the KV pool lives.
 *
 * KVX_MEM_CUDA (a kvx built with CUDA: kvx_versions() says which): the pool
 * is device memory of CUDA device cuda_device. The caller gives device
 * pointers (buffers or slab, e.g. from cudaMalloc on that device; kvx checks
 * that the first and last byte of each is device memory of that device), or
 * leaves both NULL and kvx allocates the pool on that device (cudaMalloc,
 * zeroed). kvx_ctx_kv_buffer() then returns device pointers. Aux slots stay
 * in host memory. The device's PCI bus id chooses the rank's NICs and
 * binding (as kvx_topo_choose() does). kvx loads the CUDA runtime with
 * dlopen (KVX_CUDA_LIBRARY), so one build runs on nodes with and without a
 * GPU or driver; without them, creating a context with a CUDA pool fails
 * with KVX_ERR_CUDA ("CUDA unavailable: " and CUDA's error) on every rank.
 *
 * Threads: kvx_ctx_create() and kvx_ctx_destroy() leave cuda_device the
 * calling thread's current device (cudaSetDevice); kvx makes every copy on
 * its own progress thread, and no CUDA call in other application threads.
 *
 * Ordering with the application's streams: kvx reads a prefill's pages on a
 * stream of its own (or UCX does, by RDMA), which nothing orders after the
 * application's kernels. The work that writes the pages of a chunk must
 * have completed (e.g. cudaStreamSynchronize() or cudaEventSynchronize()
 * on the engine's stream) before kvx_room_send_chunk() hands them over, and
 * they must not change while the room moves them (as for host pools). On the decode,
 * the pages of a SUCCESS room are complete in device memory: any stream may
 * read them.
 *
 * How the pages move is the context's memory path (kvx_mem_path_t).
 */
typedef enum kvx_mem_type { KVX_MEM_HOST = 0, KVX_MEM_CUDA } kvx_mem_type_t;

/**
 * How a context moves pages, chosen at creation for the whole job and the
 * same on every rank (kvx_ctx_mem_path(); KVX_MEM_PATH forces one).
 *
 *  - DIRECT: puts from pool to pool, as the table above says. Chosen when
 *    every pool is host memory, or when UCX on every rank with a CUDA pool
 *    can access CUDA memory (UCX built with CUDA: GPUDirect RDMA, cuda_ipc).
 *    With CUDA pools, the TP ratios that would pack or unpack in host
 *    memory stage instead, as below.
 *  - STAGED: chosen when some rank's UCX cannot access its CUDA pool (as
 *    Debian's UCX, built without CUDA). Every run of pages crosses host
 *    memory: the prefill copies it from its pool into page-locked staging
 *    memory (cudaMemcpyAsync on a stream of kvx's own, one event per batch
 *    of a chunk), sends it from there as one data message (one per 4 MiB),
 *    and the decode rank lands it in its own staging memory and copies it
 *    into its pages; the decode room is SUCCESS only after those copies
 *    finished, and a failed room's pages are released only after every
 *    copy into them finished. Staging is KVX_STAGING_BYTES per rank, on the
 *    GPU's NUMA node. A host pool on this path is copied with memcpy (what
 *    KVX_MEM_PATH=staged does with host pools: a test of the path). Where a
 *    decode rank asks for data messages (KVX_WRITES), only the aux row
 *    changes: one more data message instead of a put.
 */
typedef enum kvx_mem_path { KVX_MEM_PATH_DIRECT = 0, KVX_MEM_PATH_STAGED } kvx_mem_path_t;

/** "direct" or "staged"; "?" for another value. Thread safe. */
KVX_API const char *kvx_mem_path_name(kvx_mem_path_t path);

/** The model's KV geometry, as the whole instance sees it. */
typedef struct kvx_kv_layout {
    unsigned layers;               /**< number of layers */
    unsigned page_size;            /**< tokens per page */
    unsigned kv_heads;             /**< KV heads of the model (total over TP); 1 for MLA */
    unsigned head_dim;             /**< elements per head per token (MLA: latent width) */
    kvx_dtype_t dtype;             /**< element type */
    kvx_attn_t attn;               /**< MHA/GQA (K and V) or MLA (one latent) */
    kvx_page_layout_t page_layout; /**< in-pool layout */
} kvx_kv_layout_t;

/** Parameters of kvx_ctx_create(); initialize with kvx_ctx_params_init(). */
typedef struct kvx_ctx_params {
    /** Job layout, "prefill:AxB,decode:CxD": A prefill instances of TP B,
     *  then C decode instances of TP D, world ranks in that order. NULL
     *  means the KVX_LAYOUT variable. */
    const char *layout;
    kvx_kv_layout_t kv;      /**< the KV geometry */
    size_t num_pages;        /**< pages per (layer, component) on this rank */
    kvx_mem_type_t mem_type; /**< host, or CUDA (see kvx_mem_type_t) */
    int cuda_device;         /**< CUDA device of the pool when mem_type is CUDA
                                  (an index as cudaSetDevice takes it) */
    /** Caller's memory, one buffer per (layer, component), indexed
     *  [layer * components + component] (components: K=0, V=1; MLA: 1),
     *  each num_pages * kvx_ctx_page_bytes() long; or NULL. Device
     *  pointers of cuda_device when mem_type is CUDA. */
    void *const *buffers;
    /** Or one slab holding every buffer back to back in that order; or
     *  NULL. When buffers and slab are both NULL kvx allocates the pool. */
    void *slab;
    size_t aux_slots;     /**< aux slots per rank (decode side) */
    size_t aux_item_size; /**< largest aux payload in bytes */
    /** Fault-injection rules in the KVX_FAULT syntax (kvx_fault_syntax()),
     *  applied with those of KVX_FAULT; NULL for none. */
    const char *fault;
} kvx_ctx_params_t;

/** Sets every field of params to its default (no pages, HND, bf16, host). */
KVX_API void kvx_ctx_params_init(kvx_ctx_params_t *params);

/**
 * Creates a context. Collective over world: every rank calls it with its own
 * parameters, and every rank gets the same status and, on failure, the same
 * reason (the lowest failing rank's).
 *
 * Bootstraps over MPI: splits world into instances by the layout, registers
 * the KV and aux pools with UCX, exchanges worker addresses, pool
 * descriptors and KV layouts, validates every prefill/decode instance pair
 * and connects the ranks that can exchange pages.
 *
 * A KV layout that differs between a prefill and a decode instance (page
 * size, dtype, layers, heads, head_dim, attention kind, page layout, aux
 * size) does not fail creation: that pair is marked unusable, every room
 * between the two instances fails at open with KVX_ERR_KV_MISMATCH and the
 * reason naming both values and both instances, and kvx_ctx_pair_status()
 * reports it. Layouts that differ inside one instance, an invalid job layout,
 * invalid parameters or configuration fail creation.
 *
 * A progress thread owns the UCX worker from here to destroy; transfers
 * advance whether or not the caller calls into kvx.
 *
 * @param world     the job's communicator (usually MPI_COMM_WORLD); kvx
 *                  duplicates it. MPI must be initialized; kvx calls MPI only
 *                  from the calling thread inside kvx_ctx_* and kvx_agree_*.
 * @param params    this rank's parameters
 * @param ctx_p     the new context
 * @param reason_p  optional; on failure, why (same on every rank)
 * @return KVX_OK, KVX_ERR_INVALID_PARAM (also: a CUDA pool pointer that is
 *         not device memory of cuda_device, a cuda_device the node lacks),
 *         KVX_ERR_LAYOUT, KVX_ERR_CONFIG, KVX_ERR_NO_MEMORY, KVX_ERR_UCX,
 *         KVX_ERR_MPI, KVX_ERR_CUDA (a CUDA pool on a rank where CUDA is
 *         unavailable -- no driver, no device: the reason reads "CUDA
 *         unavailable: " and CUDA's own error -- or a CUDA call failed),
 *         KVX_ERR_UNSUPPORTED (a CUDA pool in a kvx built without CUDA;
 *         KVX_MEM_PATH=direct where UCX cannot access CUDA memory).
 */
KVX_API kvx_status_t kvx_ctx_create(MPI_Comm world, const kvx_ctx_params_t *params,
                                    kvx_ctx_t **ctx_p, kvx_failure_t *reason_p);

/**
 * Destroys a context. Collective over the ranks of the job that are alive:
 * rooms still in flight fail with KVX_ERR_SHUTDOWN (and their peers are
 * told), the rank waits until every live peer has said goodbye (so no peer
 * writes into memory about to be unmapped), then stops the progress thread
 * and releases everything. Dead peers are not waited for.
 * @return KVX_OK or KVX_ERR_INVALID_HANDLE.
 */
KVX_API kvx_status_t kvx_ctx_destroy(kvx_ctx_t *ctx);

/** Where this rank sits in the job. */
typedef struct kvx_identity {
    int world_rank, world_size;
    kvx_role_t role;
    int instance; /**< index among the instances of its role */
    int tp_rank, tp_size;
    int prefill_instances, prefill_tp;
    int decode_instances, decode_tp;
} kvx_identity_t;

/** This rank's identity. Thread safe. @return KVX_OK or KVX_ERR_INVALID_HANDLE. */
KVX_API kvx_status_t kvx_ctx_identity(kvx_ctx_t *ctx, kvx_identity_t *identity_p);

/** The instance's TP communicator (owned by kvx; valid until destroy), or
 *  MPI_COMM_NULL for an invalid handle. */
KVX_API MPI_Comm kvx_ctx_tp_comm(kvx_ctx_t *ctx);

/** Bytes of one page of one (layer, component) on this rank, or 0 for an
 *  invalid handle. */
KVX_API size_t kvx_ctx_page_bytes(kvx_ctx_t *ctx);

/** The KV heads this rank holds: [*first_p, *first_p + *count_p) of the
 *  model's kv_heads (MLA: 0, 1). */
KVX_API kvx_status_t kvx_ctx_heads(kvx_ctx_t *ctx, unsigned *first_p, unsigned *count_p);

/**
 * The buffer of one (layer, component) of this rank's pool, for the serving
 * engine to compute into (prefill) or read from (decode): device memory of
 * cuda_device when the pool is CUDA memory.
 * @return KVX_OK, KVX_ERR_INVALID_HANDLE or KVX_ERR_INVALID_PARAM.
 */
KVX_API kvx_status_t kvx_ctx_kv_buffer(kvx_ctx_t *ctx, unsigned layer, unsigned component,
                                       void **buffer_p, size_t *length_p);

/**
 * The memory path the job agreed on at creation, and why.
 * @param path_p  the path
 * @param reason  optional (NULL); one sentence, e.g. "UCX 1.13.1 cannot
 *                access CUDA memory (its memory types: host): pages cross
 *                33554432 bytes of page-locked host staging on NUMA node 0,
 *                copied by cudaMemcpyAsync on CUDA device 0"
 * @param len     size of reason
 * @return KVX_OK, KVX_ERR_INVALID_PARAM (path_p NULL), KVX_ERR_INVALID_HANDLE.
 * Thread safe.
 */
KVX_API kvx_status_t kvx_ctx_mem_path(kvx_ctx_t *ctx, kvx_mem_path_t *path_p, char *reason,
                                      size_t len);

/**
 * The memory path a context of this process with a pool of the given type
 * would take on its own (a job stages when any of its ranks would): asks
 * UCX which memory types it can access (with this process's UCX_*
 * variables) and reads KVX_MEM_PATH. For tools (kvx-info -p prints it);
 * does not need MPI. Creates and destroys a UCX context; for CUDA, loads the
 * CUDA runtime.
 * @param reason  optional (NULL); why, in one sentence
 * @return KVX_OK; KVX_ERR_CUDA (CUDA unavailable: the reason says why),
 *         KVX_ERR_UNSUPPORTED (built without CUDA; KVX_MEM_PATH=direct with
 *         a UCX that cannot access CUDA memory), KVX_ERR_UCX, KVX_ERR_CONFIG,
 *         KVX_ERR_INVALID_PARAM. Not thread safe with kvx_ctx_create().
 */
KVX_API kvx_status_t kvx_mem_path_probe(kvx_mem_type_t type, kvx_mem_path_t *path_p, char *reason,
                                        size_t len);

/**
 * Whether this rank can exchange pages with an instance of the other role.
 * @param other_instance  a decode instance (on prefill ranks) or a prefill
 *                        instance (on decode ranks)
 * @param reason_p        optional; for KVX_ERR_KV_MISMATCH, which values differ
 * @return KVX_OK, KVX_ERR_KV_MISMATCH, KVX_ERR_INVALID_PARAM or KVX_ERR_INVALID_HANDLE.
 */
KVX_API kvx_status_t kvx_ctx_pair_status(kvx_ctx_t *ctx, int other_instance,
                                         kvx_failure_t *reason_p);

/* ------------------------------------------------------------------------ */
/* Rooms: one request's transfer from one prefill to one decode instance.    */
/* Rooms are named by caller-chosen 64-bit ids. A room id may be reused once */
/* its room is closed. All room calls are thread safe and never block on the */
/* network.                                                                  */
/* ------------------------------------------------------------------------ */

/**
 * Decode side: opens a room that receives into the given pages and aux slot,
 * and tells exactly the prefill ranks of prefill_instance that will write
 * into this rank. The room is BOOTSTRAPPING until they answer, then
 * WAITING_FOR_INPUT, TRANSFERRING once pages flow, and SUCCESS when every
 * expected writer's puts are remotely complete and the aux row (tagged with
 * this room id) has landed.
 *
 * @param pages     destination page ids, in the order of the request's tokens
 * @param npages    number of pages; the prefill must announce the same count
 * @param aux_slot  aux slot to receive into, or -1 for none
 * @return KVX_OK; KVX_ERR_ROOM_EXISTS (id still open), KVX_ERR_PAGE_RANGE,
 *         KVX_ERR_INVALID_PARAM (npages 0, duplicate page, aux slot out of
 *         range, wrong role, unknown instance), KVX_ERR_KV_MISMATCH (the pair
 *         is unusable; nothing is opened), KVX_ERR_NO_MEMORY,
 *         KVX_ERR_INVALID_HANDLE. On error nothing is opened or written.
 */
KVX_API kvx_status_t kvx_room_recv_open(kvx_ctx_t *ctx, uint64_t room_id, int prefill_instance,
                                        const uint32_t *pages, size_t npages, int64_t aux_slot);

/**
 * Prefill side: opens a room that will send npages_total pages to
 * decode_instance. Chunks may be handed over before the decode's
 * pre-allocation arrives; they are sent when it does.
 * @return KVX_OK, KVX_ERR_ROOM_EXISTS, KVX_ERR_INVALID_PARAM, KVX_ERR_KV_MISMATCH,
 *         KVX_ERR_NO_MEMORY, KVX_ERR_INVALID_HANDLE.
 */
KVX_API kvx_status_t kvx_room_send_open(kvx_ctx_t *ctx, uint64_t room_id, int decode_instance,
                                        size_t npages_total);

/**
 * Prefill side: hands over the next npages source pages of the room, as soon
 * as prefill has computed them; puts of all layers are posted without
 * waiting. The chunk that completes npages_total is the last one and may
 * carry the aux payload (aux_len <= aux_item_size); earlier chunks must not.
 *
 * @return KVX_OK; KVX_ERR_TOO_MANY_PAGES (more than announced),
 *         KVX_ERR_PAGE_RANGE, KVX_ERR_AUX (aux too large or on a chunk that is
 *         not the last), KVX_ERR_STATE (room already FAILED or complete),
 *         KVX_ERR_NO_ROOM, KVX_ERR_INVALID_PARAM, KVX_ERR_INVALID_HANDLE.
 *         A rejected chunk writes nothing; the room stays as it was.
 */
KVX_API kvx_status_t kvx_room_send_chunk(kvx_ctx_t *ctx, uint64_t room_id, const uint32_t *pages,
                                         size_t npages, const void *aux, size_t aux_len);

/**
 * The room's local state. Never blocks.
 * @return KVX_OK, KVX_ERR_NO_ROOM or KVX_ERR_INVALID_HANDLE.
 */
KVX_API kvx_status_t kvx_room_poll(kvx_ctx_t *ctx, uint64_t room_id, kvx_room_state_t *state_p);

/**
 * Why the room failed: the root cause once known (recorded at its origin,
 * possibly on another rank).
 * @return KVX_OK, KVX_ERR_STATE (the room has not failed, or its instance
 *         agreed SUCCESS: see kvx_agreed_t), KVX_ERR_NO_ROOM,
 *         KVX_ERR_INVALID_HANDLE.
 */
KVX_API kvx_status_t kvx_room_failure(kvx_ctx_t *ctx, uint64_t room_id, kvx_failure_t *failure_p);

/**
 * Aborts a room from either side: it becomes FAILED with stage "abort" and
 * the given reason, and the other side of the room is told. On the decode
 * side the pages stay DRAINING until every writer confirmed it stopped
 * (kvx_room_close() says when they are free).
 * @return KVX_OK; KVX_ERR_STATE: the room is SUCCESS, or, on the prefill
 *         side, every page was already delivered (the decode has the data
 *         and decides the outcome); KVX_ERR_NO_ROOM, KVX_ERR_INVALID_HANDLE.
 *         Aborting a FAILED room is KVX_OK.
 */
KVX_API kvx_status_t kvx_room_abort(kvx_ctx_t *ctx, uint64_t room_id, const char *reason);

/**
 * Decode side: copies the aux payload of a SUCCESS room into buf.
 * @param len_p  the payload's length
 * @return KVX_OK, KVX_ERR_STATE (not SUCCESS), KVX_ERR_AUX (buf too small,
 *         or the room had no aux slot), KVX_ERR_NO_ROOM, KVX_ERR_INVALID_HANDLE.
 */
KVX_API kvx_status_t kvx_room_aux(kvx_ctx_t *ctx, uint64_t room_id, void *buf, size_t len,
                                  size_t *len_p);

/**
 * Whether a decode room's pages may still be written by a peer. After a room
 * failed, pages a writer may still be putting into are DRAINING until every
 * such writer confirmed that nothing is in flight; then RELEASED. When a
 * writer does not confirm within KVX_DRAIN_TIMEOUT (dead, cut off) they are
 * QUARANTINED: never reuse them.
 */
typedef enum kvx_pages_state {
    KVX_PAGES_IN_USE = 0, /**< the room is in flight: peers write into them */
    KVX_PAGES_DRAINING,   /**< failed; waiting for writers to confirm they stopped */
    KVX_PAGES_RELEASED,   /**< nothing can write into them any more */
    KVX_PAGES_QUARANTINED /**< a writer never confirmed: never reuse them */
} kvx_pages_state_t;

/** Counters of one room, for tests and tools. */
typedef struct kvx_room_info {
    kvx_room_state_t state;
    kvx_role_t side; /**< prefill (sender) or decode (receiver) */
    int peer_instance;
    size_t npages;                 /**< pages announced (sender) or granted (receiver) */
    size_t pages_sent;             /**< sender: pages handed over so far */
    uint64_t puts;                 /**< sender: puts and data messages posted */
    uint64_t bytes;                /**< sender: bytes put */
    unsigned writers;              /**< receiver: prefill ranks expected to write */
    unsigned writers_done;         /**< receiver: of those, how many completed */
    unsigned targets;              /**< sender: decode ranks this rank writes to */
    kvx_pages_state_t pages;       /**< receiver: may peers still write into its pages */
    int agreed;                    /**< the instance agreed on the room's outcome */
    kvx_room_state_t agreed_state; /**< when agreed: SUCCESS or FAILED */
} kvx_room_info_t;

/** @return KVX_OK, KVX_ERR_NO_ROOM or KVX_ERR_INVALID_HANDLE. */
KVX_API kvx_status_t kvx_room_info(kvx_ctx_t *ctx, uint64_t room_id, kvx_room_info_t *info_p);

/**
 * Closes a room and forgets its id. A room that is not FAILED or SUCCESS is
 * aborted first (reason "closed by the application").
 *
 * On the decode side closing hands the room's pages back to the caller:
 * @return KVX_OK: the pages may be reused; KVX_ERR_BUSY: the room failed and a
 *         writer has not yet confirmed it stopped -- the room stays open, call
 *         again later (the drain is bounded by KVX_DRAIN_TIMEOUT);
 *         KVX_ERR_QUARANTINED: the room is closed but a writer never
 *         confirmed: never reuse its pages (they are logged); KVX_ERR_NO_ROOM,
 *         KVX_ERR_INVALID_HANDLE.
 * On the prefill side closing hands the room's source pages back: a room
 * that failed while its puts or data messages were in flight answers
 * KVX_ERR_BUSY until UCX no longer reads them (call again), and
 * KVX_ERR_QUARANTINED (closed; never reuse those source pages) when that
 * takes longer than KVX_DRAIN_TIMEOUT.
 */
KVX_API kvx_status_t kvx_room_close(kvx_ctx_t *ctx, uint64_t room_id);

/* ------------------------------------------------------------------------ */
/* Agreement: every TP rank of an instance concludes each room the same way. */
/* ------------------------------------------------------------------------ */

/** One round of agreement, from kvx_agree_start() until kvx_agree_test() is KVX_OK. */
typedef struct kvx_agree kvx_agree_t;

/** The agreed view of one room after a round. */
typedef struct kvx_agreed {
    /** KVX_OK: state is agreed by every TP rank of this instance;
     *  KVX_INPROGRESS: not every TP rank holds the room yet (state is this
     *  rank's own); KVX_ERR_NO_ROOM: this rank holds no such room. */
    kvx_status_t status;
    /** The agreed state: the minimum over the instance's TP ranks (FAILED
     *  when any rank failed the room, SUCCESS only when all succeeded). A
     *  SUCCESS or FAILED agreed once is final. One exception keeps the two
     *  instances agreeing: once a prefill rank has delivered every page, the
     *  decode instance decides. If a decode rank is lost after that, the
     *  prefill ranks wait for the decode instance's outcome from a decode
     *  rank still there (it may have agreed SUCCESS before the loss) and
     *  conclude SUCCESS with it, even on a rank whose room failed by the
     *  loss; they conclude FAILED without it only when no prefill rank of
     *  the room can hear from any decode rank of it. */
    kvx_room_state_t state;
} kvx_agreed_t;

/**
 * Starts a round of agreement. Collective over the instance's TP ranks: every
 * TP rank starts rounds in the same order, but ranks may hold different rooms
 * (in any order) and pass different lists. A round covers every room open on
 * the rank. It costs one MPI_Iallreduce of the rooms' states; plus, only when
 * some room failed, one reduction that chooses each failed room's root cause
 * (earliest stage, then lowest origin rank) and hands it to every rank; plus,
 * only when rooms were opened since the last round, one MPI_Iallgather that
 * gives them a common place in the state vector. A room some TP rank does not
 * hold is not agreed yet. An agreed FAILED also fails the room on ranks where
 * it was still in flight (their peers are told).
 *
 * Never blocks: drive it with kvx_agree_test() from the scheduler loop. Calls
 * MPI from the calling thread only.
 *
 * @param rooms  the room ids to report on (any subset, any order; NULL when
 *               n is 0: the round still advances every room)
 * When a TP sibling is lost no collective is entered (it could never
 * complete) and the round completes at once with KVX_ERR_PEER_LOST. On a
 * decode instance every room not agreed yet was concluded FAILED with the
 * loss as its reason (the prefill ranks are told). On a prefill instance the
 * rooms it was still sending failed; each room concludes with the decode
 * instance's word, which is whole and decides: SUCCESS when it agreed
 * SUCCESS, else FAILED with its root cause -- or FAILED on this rank's own
 * when no decode rank of the room is left, or after 10 KVX_PEER_TIMEOUTs.
 * Keep calling until every room is reported agreed.
 *
 * @return KVX_OK; KVX_ERR_BUSY (a round is in progress); KVX_ERR_NO_MEMORY;
 *         KVX_ERR_INVALID_PARAM; KVX_ERR_INVALID_HANDLE.
 */
KVX_API kvx_status_t kvx_agree_start(kvx_ctx_t *ctx, const uint64_t *rooms, size_t n,
                                     kvx_agree_t **agree_p);

/**
 * Advances a round without blocking. On KVX_OK out[i] is the agreed view of
 * rooms[i], and for a room agreed FAILED kvx_room_failure() returns the agreed
 * root cause (the same on every TP rank, with count = the TP ranks that had
 * failed it).
 * @param out  n entries, written when the round is done
 * @return KVX_OK (done), KVX_INPROGRESS, KVX_ERR_PEER_LOST (done, but a TP
 *         sibling is lost: out holds the outcomes concluded since -- see
 *         kvx_agree_start(); a room still waiting for the decode's word is
 *         KVX_INPROGRESS), KVX_ERR_MPI, KVX_ERR_INVALID_PARAM.
 */
KVX_API kvx_status_t kvx_agree_test(kvx_agree_t *agree, kvx_agreed_t *out);

/** kvx_agree_test() until it is not KVX_INPROGRESS (blocks). */
KVX_API kvx_status_t kvx_agree_wait(kvx_agree_t *agree, kvx_agreed_t *out);

/** Frees a finished round. @return KVX_OK, or KVX_ERR_BUSY while it is in progress. */
KVX_API kvx_status_t kvx_agree_free(kvx_agree_t *agree);

/**
 * The grammar of fault-injection rules (KVX_FAULT and kvx_ctx_params_t.fault)
 * as a help text. Rules are separated by ';', fields by ','.
 */
KVX_API const char *kvx_fault_syntax(void);

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
