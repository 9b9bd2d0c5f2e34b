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

#ifdef __cplusplus
}
#endif

#endif /* KVX_H */
