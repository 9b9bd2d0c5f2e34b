/*
 * kvx.h - the public interface of kvx (with <kvx/config.h> and
 * <kvx/topo.h>, the introspection for tools, which it includes).
 *
 * kvx moves the KV cache of LLM requests ("rooms") from prefill ranks to
 * decode ranks of one MPI job, and makes every rank that took part agree on
 * how each room ended and why. MPI carries the control plane, UCX the pages.
 *
 * The life of one request (examples/minimal/minimal.c, in this order):
 *
 *   every rank     kvx_ctx_create(world, &params, &ctx, &why)    collective over world
 *   decode ranks   kvx_room_recv_open(ctx, id, prefill_instance, pages, n, aux_slot)
 *   prefill ranks  kvx_room_send_open(ctx, id, decode_instance, n)
 *                  kvx_room_send_chunk(ctx, id, pages, k, aux, aux_len)
 *                      once per chunk, as soon as prefill computed it; the
 *                      last chunk may carry the aux payload (or, layer by
 *                      layer: kvx_room_send_layers(ctx, id, pages, k, l, 1,
 *                      event, ...) as each layer is computed)
 *   every rank     kvx_agree_start(ctx, ids, m, &round)          collective over the TP ranks
 *                  kvx_agree_test(round, out) until not KVX_INPROGRESS (never blocks)
 *                  kvx_agree_free(round)
 *                      rounds from the scheduler loop until out[] says the
 *                      room is agreed SUCCESS or FAILED
 *   on FAILED      kvx_room_failure(ctx, id, &why)               the root cause, alike on every
 * rank decode         kvx_room_aux(ctx, id, buf, len, &len)         on SUCCESS; the pages are
 * complete every rank     kvx_room_close(ctx, id)                       KVX_ERR_BUSY: call again
 * later every rank     kvx_ctx_destroy(ctx)                          collective over the live ranks
 *
 * Threads and MPI.
 *  - MPI must be initialized before kvx_ctx_create() and finalized after
 *    kvx_ctx_destroy(). Each context runs a progress thread that moves the
 *    pages; it never calls MPI.
 *  - kvx calls MPI only from the application thread inside
 *    kvx_ctx_create(), kvx_ctx_destroy(), kvx_agree_start(),
 *    kvx_agree_test() and kvx_agree_wait() (and MPI_Get_library_version
 *    in kvx_versions()). MPI's thread level must allow that thread to call
 *    MPI: MPI_Init (MPI_THREAD_SINGLE, as Open MPI gives it) or
 *    MPI_THREAD_FUNNELED when these calls are made from the thread that
 *    initialized MPI; MPI_THREAD_SERIALIZED when they are made from another
 *    thread, never at the same time as another MPI call of the process;
 *    MPI_THREAD_MULTIPLE when other threads call MPI meanwhile.
 *    kvx_ctx_create() checks what it can: called from a thread that is not
 *    MPI's main thread under SINGLE or FUNNELED it fails with KVX_ERR_MPI,
 *    naming the level, on every rank.
 *  - Collective calls: kvx_ctx_create() (every rank of world),
 *    kvx_ctx_destroy() (every live rank), kvx_agree_start() (every TP rank
 *    of the instance, rounds in the same order). Everything else is local.
 *  - Room calls (kvx_room_*) are thread safe and never block on the
 *    network: several threads may drive rooms at once, against the
 *    progress thread. So are the functions whose comment says so (names,
 *    formatters, kvx_ctx_identity(), ...).
 *
 * CUDA streams (KV pools in CUDA memory, kvx_mem_type_t).
 *  - kvx makes every CUDA copy on its progress thread, on a stream of its
 *    own; it makes no CUDA call in the application's threads, except that
 *    kvx_ctx_create() and kvx_ctx_destroy() leave cuda_device the calling
 *    thread's current device.
 *  - Nothing orders kvx's reads after the application's kernels: the work
 *    that writes a chunk's pages must have completed (cudaStreamSynchronize
 *    or cudaEventSynchronize) before kvx_room_send_chunk(), and the pages
 *    must not change while the room moves them.
 *  - On the decode, the pages of a SUCCESS room are complete in device
 *    memory: any stream may read them.
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
    X(ERR_INTERNAL, -27, "internal error")                                   \
    X(ERR_OUT_OF_STEP, -28, "TP ranks of an instance out of step")           \
    X(ERR_CORRUPT, -29, "KV data landed different from what was sent")

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
    X(VERIFY, "verify")         \
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

/**
 * Why the last kvx call of this thread that returned an error refused, with
 * the sentence kvx logged (like errno: calls that succeed leave it as it
 * was). Every room call (kvx_room_*) and agreement call (kvx_agree_*) that
 * returns a negative status records it; kvx_ctx_create(), kvx_topo_*() and
 * kvx_config_check() give their reason through their reason_p parameter.
 * For example, after kvx_room_recv_open() returned KVX_ERR_BUSY, text reads
 * "page 6 (index 1) is held by room 9700, which is still open".
 *
 * @param failure_p  optional; the record (status, room_id when has_room,
 *                   the origin -- this rank --, text)
 * @return the status of that call, or KVX_OK when no call of this thread
 *         has failed yet. Thread safe (one record per thread).
 */
KVX_API kvx_status_t kvx_last_error(kvx_failure_t *failure_p);

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
 * Whether a decode rank checks the KV that landed against what the writer
 * sent (kvx_ctx_params_t.verify; the KVX_VERIFY variable, off by default).
 * The writer digests (XXH3) each unit it wrote -- one (layer, component) of
 * a run of consecutive decode pages, at most 64 pages -- block by block
 * (a head's rows of a page, or a token's heads in NHD), keyed by logical
 * coordinates (room, layer, component, position of the page in the room,
 * head or token), and sends the digests with its DONE; the decode
 * rank digests what landed in its own pool the same way before the room may
 * be SUCCESS. Page ids, pool strides and TP slices may differ between the
 * two sides. A mismatch fails the room on every rank of both instances with
 * KVX_ERR_CORRUPT at stage verify, origin the decode rank that saw it:
 * "layer 17 V pages 120-127 from prefill[0].tp0 (rank 0) do not match what
 * was sent". The decode rank's setting decides, and its grant tells the
 * writer.
 *  - SAMPLE: each unit with chance 1 in KVX_VERIFY_SAMPLE, drawn from the
 *    room id and the unit (the same on both sides), and always the aux row;
 *  - FULL: every unit and the aux row.
 * A CUDA pool is read back to host through a copy engine of kvx's own
 * (cudaMemcpyAsync and a wait, on the progress thread) to be digested; a
 * rank that cannot do so warns at creation and its rooms are not checked
 * (kvx_ctx_stats() counts them). Cost: docs/perf/notes/2026-12-02-verify.md
 * (kvx-bench verify).
 */
typedef enum kvx_verify {
    KVX_VERIFY_DEFAULT = 0, /**< as the KVX_VERIFY variable says (off by default) */
    KVX_VERIFY_OFF,
    KVX_VERIFY_SAMPLE,
    KVX_VERIFY_FULL
} kvx_verify_t;

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
    /** Bytes from the start of one page to the start of the next in every
     *  (layer, component) buffer; 0 (the default) means
     *  kvx_ctx_page_bytes(): pages back to back. A larger stride describes
     *  pools whose buffers interleave page by page, without copying:
     *   - K and V in each block, [num_blocks, 2, block_size, kv_heads,
     *     head_dim] per layer (vLLM's FlashInfer layout; page_layout NHD):
     *     buffers[2l] = layer l's base, buffers[2l + 1] = base + page_bytes,
     *     page_stride = 2 * page_bytes;
     *   - all layers in one tensor, [num_blocks, layers, 2, ...]: buffer
     *     (l, c) at base + (2l + c) * page_bytes, page_stride = layers * 2 *
     *     page_bytes.
     *  Each buffer then spans (num_pages - 1) * page_stride + page_bytes
     *  bytes (kvx_ctx_kv_buffer()'s length). Only with buffers (not slab, not
     *  a pool kvx allocates) and the HND or NHD page layout; at least the
     *  page's bytes; the same on every rank of an instance (the other
     *  instances may use another stride). Otherwise creation fails with
     *  KVX_ERR_INVALID_PARAM and the reason. */
    size_t page_stride;
    /** Whether this rank checks what lands in its pool (decode ranks;
     *  kvx_verify_t). KVX_VERIFY_DEFAULT: the KVX_VERIFY variable. */
    kvx_verify_t verify;
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
 * @return KVX_OK, KVX_ERR_KV_MISMATCH, KVX_ERR_INVALID_PARAM or KVX_ERR_INVALID_HANDLE;
 *         for an instance that joined a running job (docs/user/join.md),
 *         KVX_ERR_BUSY while it is joining ("decode[2] is joining: 1 of the 2
 *         ranks this rank talks to have joined") and KVX_ERR_PEER_LOST once it
 *         is gone ("decode[2] is gone: decode[2].tp0 (rank 6) left"), until a
 *         later incarnation takes its place.
 */
KVX_API kvx_status_t kvx_ctx_pair_status(kvx_ctx_t *ctx, int other_instance,
                                         kvx_failure_t *reason_p);

/**
 * The membership epoch of this rank: a count that grows whenever an instance
 * of the other role joins the running job, is replaced, leaves or is lost, as
 * this rank sees it (docs/user/join.md). A scheduler polls it; when it moved,
 * it reads kvx_ctx_identity() (how many instances) and kvx_ctx_pair_status()
 * of each. Stays 0 on a rank that takes no joiners.
 * @param epoch_p  where the epoch goes
 * @return KVX_OK, KVX_ERR_INVALID_PARAM (NULL) or KVX_ERR_INVALID_HANDLE. Thread safe.
 */
KVX_API kvx_status_t kvx_ctx_membership(kvx_ctx_t *ctx, uint64_t *epoch_p);

/**
 * Where this rank takes instances that join the running job: the address of
 * its door, "HOST:PORT" (IPv6: "[ADDR]:PORT"), the value a joiner's
 * KVX_JOIN (kvx-run --join) names. A job with KVX_JOIN_KEY_FILE serves a
 * door on every rank of its first role; world rank 0's gives places, and
 * KVX_JOIN_ADDRESS_FILE is where it writes this same address. A scheduler
 * that starts a replacement itself (MPI_Comm_spawn, a second srun step)
 * passes it on (docs/user/join.md).
 * @param buf  where the address goes, NUL-terminated
 * @param len  bytes at buf; 80 hold every address
 * @return KVX_OK; KVX_ERR_STATE when this rank serves no door (no job key,
 *         a rank of the last role, a joiner); KVX_ERR_INVALID_PARAM for a
 *         NULL buf or one too short (nothing written then);
 *         KVX_ERR_INVALID_HANDLE. Thread safe.
 */
KVX_API kvx_status_t kvx_ctx_join_address(kvx_ctx_t *ctx, char *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* Rooms: one request's transfer from one prefill to one decode instance.    */
/* Rooms are named by caller-chosen 64-bit ids (see the scheduler contract   */
/* below for reuse). All room calls are thread safe and never block on the   */
/* network.                                                                  */
/* ------------------------------------------------------------------------ */

/*
 * The scheduler contract. Every TP rank of an instance runs the same
 * scheduler; kvx makes all of them -- and the TP ranks of the other instance
 * of the room -- end each room the same way, with one reason. What the
 * scheduler must do, and what kvx does when it does not:
 *
 * 1. One request is one room id, used on every TP rank of both instances:
 *      decode:  kvx_room_recv_open(id, prefill_instance, pages, n, aux_slot)
 *      prefill: kvx_room_send_open(id, decode_instance, n), then
 *               kvx_room_send_chunk(id, ...) per chunk; the last chunk carries
 *               the aux payload (the first decoded token), the same bytes on
 *               every prefill TP rank
 *      both:    agreement rounds until the room is agreed, then
 *               kvx_room_close(id) (decode: until it is not KVX_ERR_BUSY)
 *    Either side may open first. The opens of one id on the TP ranks of an
 *    instance need not be at the same time, but every TP rank must open it:
 *    a room some TP rank has not opened within KVX_TP_TIMEOUT (30 s) of
 *    another opening it concludes FAILED on every rank of both instances
 *    that holds it, with one record: KVX_ERR_OUT_OF_STEP "decode[0].tp1
 *    (rank 3) never opened room 7, or closed it before its instance agreed:
 *    ...", its origin the rank that lacks the room. A decode instance
 *    concludes it at once and tells the prefill; a prefill instance tells
 *    the decode ranks, and concludes with the decode instance's agreed
 *    FAILED, which carries that record (both within a few KVX_TP_TIMEOUT,
 *    not at KVX_BOOTSTRAP_TIMEOUT of a decode rank waiting for the pages of
 *    the prefill rank that lacks the room). A TP rank that opens the room
 *    later concludes it at its next round with the same record: on a
 *    prefill rank the decode's verdict waits for it; a decode rank's
 *    siblings keep their conclusion for it for 4 x KVX_TP_TIMEOUT (or until
 *    they open the id again). Later than that, a late decode rank waits
 *    KVX_TP_TIMEOUT itself and names the sibling that no longer holds it.
 *
 * 2. Local state versus agreed state. kvx_room_poll() is this rank's view;
 *    only an agreed outcome (kvx_agree_test() with status KVX_OK and state
 *    SUCCESS or FAILED, or kvx_room_info().agreed) is the same on every TP
 *    rank. Act on the agreed outcome: start decoding, free the request, reply
 *    to the client. A room locally SUCCESS may still be agreed FAILED (a
 *    sibling failed it; the TP ranks hold different aux; see 5).
 *
 * 3. Rounds: one at a time, the same sequence on every TP rank. A round is a
 *    collective over the instance's TP ranks: each must start the same rounds
 *    in the same order (their lists of room ids may differ). Start rounds on
 *    a schedule all TP ranks share (every iteration of a loop they all run,
 *    not "while I have rooms"). A rank that starts a round its siblings
 *    never start waits in it; when the ranks' counts of rounds differ and
 *    none moved for KVX_TP_TIMEOUT, the instance is broken on all its ranks:
 *    the round ends with KVX_ERR_OUT_OF_STEP ("tp0 is in round 13, tp1 in
 *    round 12"), every room not agreed concludes as after a lost sibling
 *    (decode: FAILED with that reason, told to the prefill) and every later
 *    round ends at once with that status. Build a new context to continue.
 *
 * 4. Closing. Close a room once it is agreed. A room closed before its
 *    instance agreed (a room not yet SUCCESS or FAILED is aborted by the
 *    close) still takes part in the next rounds with its final state, so its
 *    siblings conclude it: closing early never leaves a sibling waiting. A
 *    decode room's pages are the application's once kvx_room_close() returns
 *    KVX_OK, never when it returns KVX_ERR_QUARANTINED. A page is granted to
 *    one open room at a time: kvx_room_recv_open() refuses a page another
 *    open room, or a quarantined room, holds (KVX_ERR_BUSY, KVX_ERR_QUARANTINED:
 *    "page 6 (index 1) is held by room 9700, which is still open").
 *
 * 5. Aux under TP. Every prefill TP rank passes the same aux on its last
 *    chunk; each decode TP rank receives it from one of them. The decode
 *    instance compares what its ranks hold when it agrees: a room whose
 *    decode TP ranks hold different aux (or some none) is agreed FAILED,
 *    KVX_ERR_AUX, naming both ranks, what each holds and from which prefill
 *    rank.
 *
 * 6. Id reuse. An id may be opened again on a rank once the rank closed its
 *    room, even while the other instance still holds its own: a decode rank
 *    may close an agreed room and open the id again at once; the new grant is
 *    kept by each prefill rank until it closes its old room and opens the id
 *    again (or, when it never does, fails at KVX_BOOTSTRAP_TIMEOUT). On the
 *    TP ranks of one instance, open an id again only after the instance
 *    agreed its previous room (rounds name rooms by id).
 *
 * 7. Reasons. Every refused call returns a status and leaves the sentence
 *    kvx logged in kvx_last_error(); every failed room has its root cause in
 *    kvx_room_failure(), the same on every rank of both instances.
 *
 * The decode instance's outcome is the request's: a prefill instance
 * concludes a room SUCCESS only once the decode instance agreed it SUCCESS
 * (every page landing on every decode rank is not enough: the decode may
 * still agree FAILED -- aux differs, rounds out of step, a decode rank lost
 * before its round), and FAILED with the decode's root cause. A room SUCCESS
 * on the prefill that hears no word of the decode instance for 10 times
 * KVX_PEER_TIMEOUT (a decode instance that runs no agreement rounds) is
 * agreed FAILED by the prefill, KVX_ERR_TIMEOUT "no word from decode[0]
 * about room 7 for 10 x KVX_PEER_TIMEOUT (15.0 s): ...", and the decode
 * ranks are told: a decode instance that agrees the room later agrees it
 * FAILED with that record (only one that agreed SUCCESS before the record
 * reached it keeps SUCCESS). A failed prefill room waits as long for the
 * decode's verdict, then concludes with its own record -- unless a TP
 * sibling holds the decode's agreed SUCCESS by then: the decode's word beats
 * any prefill rank's failure.
 *
 * A scheduler loop of one TP rank (all TP ranks of the instance run it; on
 * the prefill, send_open and send_chunk take the place of recv_open):
 *
 *   for (;;) {
 *       while (queue_pop(&req))                       // same order on every TP rank
 *           if (kvx_room_recv_open(ctx, req.id, req.prefill, req.pages,
 *                                  req.npages, req.aux_slot) != KVX_OK) {
 *               kvx_last_error(&why);                 // why.text: the reason
 *               reply_error(req.id, why.text);
 *           } else
 *               live[n++] = req.id;
 *       kvx_agree_start(ctx, live, n, &round);        // every iteration, on every rank
 *       while (kvx_agree_test(round, out) == KVX_INPROGRESS)
 *           do_other_work();
 *       kvx_agree_free(round);
 *       for (size_t i = 0; i < n; i++) {
 *           if (out[i].status != KVX_OK ||
 *               (out[i].state != KVX_ROOM_SUCCESS && out[i].state != KVX_ROOM_FAILED))
 *               continue;                             // not agreed yet
 *           if (out[i].state == KVX_ROOM_SUCCESS)
 *               start_decoding(live[i]);              // pages and aux are complete
 *           else {
 *               kvx_room_failure(ctx, live[i], &why);
 *               reply_error(live[i], why.text);
 *           }
 *           if (kvx_room_close(ctx, live[i]) == KVX_ERR_BUSY)
 *               continue;                             // drains: close it next time
 *           live[i] = live[n - 1];                    // forget it: swap in the last
 *           out[i] = out[--n];
 *           i--;
 *       }
 *   }
 */

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
 *         range, wrong role, unknown instance), KVX_ERR_BUSY (a page is
 *         granted to another room still open here: "page 6 (index 1) is held
 *         by room 9700, which is still open"; a page is held from this open
 *         until kvx_room_close() of its room returns KVX_OK),
 *         KVX_ERR_QUARANTINED (a page of a room whose close returned
 *         KVX_ERR_QUARANTINED: never granted again); the same for the aux
 *         slot ("aux slot 3 is held by room 9700, which is still open"), KVX_ERR_KV_MISMATCH (the
 * pair is unusable; nothing is opened), KVX_ERR_NO_MEMORY, KVX_ERR_INVALID_HANDLE. On error nothing
 * is opened or written.
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
 *         KVX_ERR_NO_ROOM, KVX_ERR_INVALID_PARAM (also: aux NULL with aux_len
 *         > 0), KVX_ERR_INVALID_HANDLE.
 *         A rejected chunk writes nothing; the room stays as it was.
 */
KVX_API kvx_status_t kvx_room_send_chunk(kvx_ctx_t *ctx, uint64_t room_id, const uint32_t *pages,
                                         size_t npages, const void *aux, size_t aux_len);

/**
 * Prefill side, layer by layer: hands over the next npages source pages of
 * layers [first_layer, first_layer + nlayers) as soon as prefill has
 * computed those layers of them, so that a layer's KV travels while later
 * layers are still computed. kvx_room_send_chunk() is this call with every
 * layer (0, kvx layers) and no event.
 *
 * Each layer has its own cursor over the room's pages: a hand-over names
 * the next npages pages of each of its layers, which must all have had the
 * same number of pages handed over before it. Layer ranges and chunks may
 * come in any order otherwise (layer 5 of chunk 0 after layer 9 of chunk 1,
 * say), every (page, layer) exactly once. A page position another layer
 * already named must be given the same source page (a page id addresses
 * all layers of the pool). Puts of each hand-over are posted in the order
 * the hand-overs came, runs of consecutive pages merged per layer. The room
 * is complete when every page of every layer and the aux have landed; the
 * hand-over that completes the last (page, layer) may carry the aux payload,
 * no earlier one. A room with layers still missing at its state deadline
 * (KVX_TRANSFER_TIMEOUT) fails KVX_ERR_TIMEOUT saying which layers.
 *
 * @param ready_event  NULL: the pages are ready now (host pools always;
 *        a CUDA pool whose engine synchronized). Else a cudaEvent_t the
 *        engine recorded on its stream after the kernels that wrote these
 *        layers: kvx posts nothing of this hand-over (nor of later ones)
 *        before cudaEventQuery() says it completed, polled on the progress
 *        thread; the caller never waits. The event must stay valid and not
 *        be recorded again until the room is SUCCESS or FAILED here. Only
 *        with a CUDA pool; a failed query fails the room (KVX_ERR_CUDA,
 *        stage post); an event not complete at the room's deadline fails
 *        it KVX_ERR_TIMEOUT naming the hand-over.
 * @return KVX_OK; KVX_ERR_INVALID_PARAM (nlayers 0, a layer outside the
 *         model, layers of the range at different counts, a page position
 *         named with another source page, an event without a CUDA pool, aux
 *         NULL with aux_len > 0), KVX_ERR_TOO_MANY_PAGES (more pages of a
 *         layer than announced: a (page, layer) handed twice), and the
 *         statuses of kvx_room_send_chunk(). A rejected hand-over writes
 *         nothing; the room stays as it was.
 */
KVX_API kvx_status_t kvx_room_send_layers(kvx_ctx_t *ctx, uint64_t room_id, const uint32_t *pages,
                                          size_t npages, unsigned first_layer, unsigned nlayers,
                                          void *ready_event, const void *aux, size_t aux_len);

/**
 * The room's local state. Never blocks. Unless KVX_PROGRESS is busy (or the
 * job has CUDA pools), the call first progresses the transfers itself, as
 * the progress thread would (UCX callbacks then run on the calling thread,
 * with the context's lock held): an application that polls in a loop drives
 * its rooms instead of starving the thread (KVX_PROGRESS=caller goes further:
 * docs/perf/notes/2026-12-07-overhead.md). A poll skips that pass when one
 * ran since the room was last polled: polling N rooms in turn makes one
 * pass per round, and two polls of one room always have a pass between them.
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
    size_t pages_sent;             /**< sender: pages handed over so far (of every layer) */
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
     *  rank's own), or the round is still in progress (kvx_agree_test()
     *  returned KVX_INPROGRESS: every entry reads so, state BOOTSTRAPPING);
     *  KVX_ERR_NO_ROOM: this rank holds no such room. A view is only what
     *  kvx_agree_test() wrote: zeroed memory is not one (it would read
     *  "agreed FAILED"); initialize with KVX_AGREED_INIT when in doubt. */
    kvx_status_t status;
    /** The agreed state: the minimum over the instance's TP ranks (FAILED
     *  when any rank failed the room, SUCCESS only when all succeeded). A
     *  SUCCESS or FAILED agreed once is final. One exception keeps the two
     *  instances agreeing: once a prefill rank has delivered every page, the
     *  decode instance decides -- a prefill room is agreed SUCCESS only after
     *  the decode instance agreed it SUCCESS. If a decode rank is lost after that, the
     *  prefill ranks wait for the decode instance's outcome from a decode
     *  rank still there (it may have agreed SUCCESS before the loss) and
     *  conclude SUCCESS with it, even on a rank whose room failed by the
     *  loss; they conclude FAILED without it only when no prefill rank of
     *  the room can hear from any decode rank of it. */
    kvx_room_state_t state;
} kvx_agreed_t;

/** A view that reads "not agreed" (for arrays filled by kvx_agree_test()). */
#define KVX_AGREED_INIT                        \
    {                                          \
        KVX_INPROGRESS, KVX_ROOM_BOOTSTRAPPING \
    }

/**
 * Starts a round of agreement. Collective over the instance's TP ranks: every
 * TP rank starts rounds in the same order, but ranks may hold different rooms
 * (in any order) and pass different lists. A round covers every room open on
 * the rank. It costs one MPI_Iallreduce of the rooms' states; plus, only when
 * some room failed, one reduction that chooses each failed room's root cause
 * (earliest stage, then lowest origin rank) and hands it to every rank; plus,
 * only when rooms were opened since the last round, one MPI_Iallgather that
 * gives them a common place in the state vector (with, per room, whether this
 * rank has held it for more than KVX_TP_TIMEOUT; a decode rank also lists,
 * for 4 x KVX_TP_TIMEOUT, the rooms it concluded because a sibling lacked
 * them, for a sibling that opens one late). A room some TP rank does not
 * hold is not agreed yet; once a rank has held it for KVX_TP_TIMEOUT it is
 * agreed FAILED on every rank that holds it (KVX_ERR_OUT_OF_STEP, naming the
 * lowest TP rank that lacks it). On a decode instance under TP each SUCCESS
 * room's aux row is compared too (two more ints per room in the first
 * reduction): different aux agrees the room FAILED (KVX_ERR_AUX, naming both
 * ranks and what each holds). An agreed FAILED also fails the room on ranks
 * where it was still in flight (their peers are told).
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
 * Keep calling until every room is reported agreed. An instance whose TP
 * ranks started different numbers of rounds, none moving for KVX_TP_TIMEOUT,
 * is broken the same way, with KVX_ERR_OUT_OF_STEP as the reason ("tp0 is in
 * round 13, tp1 in round 12"), on all its ranks (see the scheduler contract).
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
 * @param out  n entries, written when the round is done; while it is in
 *             progress, every entry reads status KVX_INPROGRESS
 * @return KVX_OK (done), KVX_INPROGRESS, KVX_ERR_PEER_LOST (done, but a TP
 *         sibling is lost: out holds the outcomes concluded since -- see
 *         kvx_agree_start(); a room still waiting for the decode's word is
 *         KVX_INPROGRESS), KVX_ERR_OUT_OF_STEP (done the same way: the TP
 *         ranks started different rounds), KVX_ERR_MPI, KVX_ERR_INVALID_PARAM.
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
/* Bindings: entry points for languages that are not compiled against mpi.h. */
/* ------------------------------------------------------------------------ */

/**
 * kvx_ctx_create() with the communicator given as its Fortran handle, the
 * integer every MPI library converts with MPI_Comm_f2c() (mpi4py:
 * comm.py2f()). An MPI_Comm is a pointer in Open MPI and an int in MPICH,
 * so a binding that guesses its C type can crash inside kvx_ctx_create();
 * the Fortran handle has one type everywhere. Collective over world, with
 * the statuses and reasons of kvx_ctx_create() (KVX_ERR_MPI when MPI is not
 * initialized, KVX_ERR_INVALID_PARAM for the handle of MPI_COMM_NULL).
 */
KVX_API kvx_status_t kvx_ctx_create_f(MPI_Fint world, const kvx_ctx_params_t *params,
                                      kvx_ctx_t **ctx_p, kvx_failure_t *reason_p);

/** kvx_ctx_tp_comm() as a Fortran handle (mpi4py: MPI.Comm.f2py()); the
 *  handle of MPI_COMM_NULL for an invalid handle. Thread safe. */
KVX_API MPI_Fint kvx_ctx_tp_comm_f(kvx_ctx_t *ctx);

/**
 * What a rank of an instance of TP tp_size will hold, before any context
 * exists, so that an engine can size and allocate its KV pool first: the
 * same numbers kvx_ctx_heads() and kvx_ctx_page_bytes() give afterwards.
 *
 * @param kv            the model's KV geometry (validated as by kvx_ctx_create())
 * @param tp_size       the instance's TP size
 * @param tp_rank       the rank's TP rank, 0 <= tp_rank < tp_size
 * @param first_head_p  optional; the first model KV head the rank holds
 * @param heads_p       optional; how many KV heads it holds (replicated
 *                      heads when tp_size exceeds kv_heads; MLA: 1)
 * @param page_bytes_p  optional; bytes of one page of one (layer, component)
 * @param reason_p      optional; on error, which value is wrong
 * @return KVX_OK or KVX_ERR_INVALID_PARAM. Not collective; needs no MPI;
 *         thread safe.
 */
KVX_API kvx_status_t kvx_kv_rank_shape(const kvx_kv_layout_t *kv, int tp_size, int tp_rank,
                                       unsigned *first_head_p, unsigned *heads_p,
                                       size_t *page_bytes_p, kvx_failure_t *reason_p);

/* ------------------------------------------------------------------------ */
/* End of bindings.                                                          */
/* ------------------------------------------------------------------------ */

#ifdef __cplusplus
}
#endif

/* The introspection interfaces, for tools; part of the API as well. */
#include <kvx/config.h>
#include <kvx/topo.h>
#include <kvx/stats.h> /* counters, health, Prometheus text */

#endif /* KVX_H */
