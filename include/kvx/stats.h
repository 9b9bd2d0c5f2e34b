/*
 * kvx/stats.h - what a context counted since it was created, whether its
 * transfer layer is healthy, and the same as Prometheus text. Included by
 * kvx.h; not meant to be included alone.
 *
 * The counters are always on: each is updated where its event happens, with
 * the context lock the event holds anyway (no atomics, no extra lock).
 * KVX_METRICS_FILE makes the progress thread write them every
 * KVX_METRICS_INTERVAL as a Prometheus text file (the node_exporter
 * textfile-collector convention); kvx-metrics combines the files of a job.
 * docs/user/metrics.md describes every metric.
 */
#ifndef KVX_STATS_H
#define KVX_STATS_H

#include <kvx.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Counters                                                                 */
/* ------------------------------------------------------------------------ */

#define KVX_STATS_COUNT_(name, value, msg) +1
/** Entries of the status dimension of kvx_stats_t.failures: a failure of
 *  status s (negative) counts at index -s. Index 0 is never used. */
enum { KVX_STATS_STATUSES = (0 KVX_STATUS_MAP(KVX_STATS_COUNT_)) - 1 };
#undef KVX_STATS_COUNT_

/** Buckets of every kvx_histogram_t, the last one unbounded (+Inf). */
#define KVX_STATS_BUCKETS 19

/**
 * The upper bound, in seconds, of histogram bucket i: 100 us, 250 us,
 * 500 us, 1 ms, 2.5 ms, ... 10 s, 30 s, 60 s, then +Inf (HUGE_VAL) for
 * i = KVX_STATS_BUCKETS - 1; -1 for an i out of range. Thread safe.
 */
KVX_API double kvx_stats_bucket_bound(unsigned i);

/** A latency histogram with fixed buckets. */
typedef struct kvx_histogram {
    uint64_t count;                     /**< observations */
    double sum;                         /**< their sum, seconds */
    uint64_t bucket[KVX_STATS_BUCKETS]; /**< observations in each bucket (not cumulative):
                                             bucket i holds those <= its bound and >
                                             the bound of bucket i - 1 */
} kvx_histogram_t;

/** What carried a transfer's bytes. */
typedef enum kvx_xfer_kind {
    KVX_XFER_PUT = 0,     /**< prefill: one-sided puts straight from the pool (pages, aux rows) */
    KVX_XFER_PACKED_PUT,  /**< prefill: puts of strided heads packed into staging */
    KVX_XFER_MSG_SENT,    /**< prefill: data messages sent (pages, aux rows, staged pages) */
    KVX_XFER_MSG_RECV,    /**< decode: data messages of pages received and landed */
    KVX_XFER_STAGED_COPY, /**< staged path: device copies between the pool and host staging */
    KVX_XFER_MSG_DIRECT,  /**< decode: of msg_received, the data UCX received straight into the
                               pages (rendezvous, no staging copy) */
    KVX_XFER_KINDS
} kvx_xfer_kind_t;

/** "put", "packed_put", "msg_sent", "msg_received", "staged_copy", "msg_direct"; "?"
 *  otherwise. */
KVX_API const char *kvx_xfer_kind_name(kvx_xfer_kind_t kind);

/**
 * A context's counters since its creation.
 *
 * A room's outcome counts once, on each rank that opened it: when its
 * instance agrees it (kvx_agree_test(), or the conclusion of a broken
 * instance), or, for a room closed before any agreement, its local state at
 * kvx_room_close() (a room still open there is aborted: FAILED, stage
 * abort). Rooms still open at destroy have no outcome.
 */
typedef struct kvx_stats {
    uint64_t rooms_opened;    /**< send and receive opens that succeeded */
    uint64_t rooms_closed;    /**< kvx_room_close() calls that closed a room */
    uint64_t rooms_succeeded; /**< outcome SUCCESS */
    uint64_t rooms_failed;    /**< outcome FAILED */
    uint64_t rooms_agreed;    /**< of the outcomes, those agreed by the instance */
    /** Failed outcomes by their (agreed) root cause:
     *  [stage][origin role][-status]. */
    uint64_t failures[KVX_STAGE_COUNT][3][KVX_STATS_STATUSES];
    uint64_t bytes[KVX_XFER_KINDS];       /**< bytes by kind (aux rows included) */
    uint64_t ops[KVX_XFER_KINDS];         /**< operations by kind (puts, messages, copies) */
    uint64_t agree_rounds;                /**< agreement rounds completed */
    uint64_t agree_rounds_failed;         /**< of those, rounds that did not end KVX_OK */
    uint64_t pages_quarantined;           /**< decode: granted pages quarantined (a writer
                                               never confirmed it stopped) */
    uint64_t rooms_quarantined;           /**< decode: rooms whose pages were quarantined */
    uint64_t src_pages_quarantined;       /**< prefill: source pages of rooms closed while UCX
                                               could still read them */
    uint64_t pages_released;              /**< decode: pages of failed rooms released once every
                                               writer confirmed it stopped */
    uint64_t peers_lost;                  /**< peers declared lost (not those that said goodbye) */
    uint64_t messages_rejected;           /**< malformed or unexpected peer messages dropped */
    uint64_t verify_units;                /**< decode: units of landed KV (and aux rows) checked
                                               against the writer's digests (KVX_VERIFY) */
    uint64_t verify_unchecked;            /**< decode: writers' parts of rooms KVX_VERIFY could
                                               not check (the writer's pool is on a device) */
    kvx_histogram_t room_success_seconds; /**< open -> outcome, rooms that succeeded */
    kvx_histogram_t room_failed_seconds;  /**< open -> outcome, rooms that failed */
    kvx_histogram_t transfer_seconds;     /**< TRANSFERRING -> local SUCCESS: from the first chunk
                                               with every grant in (prefill: until every decode
                                               rank has all pages), or from the prefill's START
                                               (decode: until every writer's pages landed) */
    kvx_histogram_t agree_round_seconds;  /**< kvx_agree_start() -> the round's end */
} kvx_stats_t;

/**
 * Copies the context's counters. Takes the context lock for the copy (a few
 * microseconds); never waits on the network. Not collective; thread safe.
 * @return KVX_OK, KVX_ERR_INVALID_PARAM (stats_p NULL), KVX_ERR_INVALID_HANDLE.
 */
KVX_API kvx_status_t kvx_ctx_stats(kvx_ctx_t *ctx, kvx_stats_t *stats_p);

/* ------------------------------------------------------------------------ */
/* Health                                                                   */
/* ------------------------------------------------------------------------ */

/** One verdict about a rank's transfer layer, worst last. */
typedef enum kvx_health_verdict {
    KVX_HEALTH_OK = 0,   /**< nothing wrong */
    KVX_HEALTH_DEGRADED, /**< it works, but something is lost or slow: watch it */
    KVX_HEALTH_UNHEALTHY /**< stop admitting work to this rank */
} kvx_health_verdict_t;

/** "OK", "DEGRADED", "UNHEALTHY". */
KVX_API const char *kvx_health_verdict_name(kvx_health_verdict_t verdict);

/* kvx_health_t.reasons bits; the verdict each one implies in brackets. */
/** The progress thread has not ticked for KVX_HEALTH_PROGRESS_TIMEOUT, or is not running
 *  [UNHEALTHY]. */
#define KVX_HEALTH_PROGRESS_STALLED 0x1u
/** The context lock was not free within 100 ms: only the progress thread's tick was read
 *  (nothing else is known) [UNHEALTHY with PROGRESS_STALLED, else DEGRADED]. */
#define KVX_HEALTH_LOCK_BUSY 0x2u
/** A TP sibling is lost: the instance is broken, no agreement can run [UNHEALTHY]. */
#define KVX_HEALTH_TP_BROKEN 0x4u
/** Every peer of the other role is lost: nothing can move [UNHEALTHY]. */
#define KVX_HEALTH_NO_PEERS 0x8u
/** Some peer is lost [DEGRADED]. */
#define KVX_HEALTH_PEER_LOST 0x10u
/** Pages are quarantined, within KVX_HEALTH_QUARANTINE_PAGES [DEGRADED]. */
#define KVX_HEALTH_QUARANTINE 0x20u
/** More pages quarantined than KVX_HEALTH_QUARANTINE_PAGES [UNHEALTHY]. */
#define KVX_HEALTH_QUARANTINE_OVER 0x40u
/** A room has been in its state longer than KVX_HEALTH_STALL_TIMEOUT [DEGRADED]. */
#define KVX_HEALTH_ROOMS_STALLED 0x80u

/** Names of the reason bits, for KVX_HEALTH_* bit b: "progress_stalled", ...; NULL past the
 *  last. Thread safe. */
KVX_API const char *kvx_health_reason_name(unsigned bit);

/** Whether a rank's transfer layer is healthy, and why not. */
typedef struct kvx_health {
    kvx_health_verdict_t verdict;
    unsigned reasons;           /**< KVX_HEALTH_* bits */
    double progress_age;        /**< seconds since the progress thread last ticked */
    unsigned peers_lost;        /**< peers lost now */
    int lost_ranks[16];         /**< world ranks of the first of them */
    char lost_peers[256];       /**< their names, "decode[1].tp0 (rank 3), ..." */
    uint64_t pages_quarantined; /**< decode pages and prefill source pages, since creation */
    uint64_t quarantine_budget; /**< KVX_HEALTH_QUARANTINE_PAGES, resolved */
    unsigned rooms_stalled;     /**< rooms in one state longer than KVX_HEALTH_STALL_TIMEOUT */
    uint64_t stalled_room;      /**< the one in its state longest */
    double stalled_seconds;     /**< how long */
    int has_failure;            /**< last_failure is set */
    kvx_failure_t last_failure; /**< the root cause of the last FAILED outcome */
    double last_failure_age;    /**< seconds since it was counted */
    char text[512];             /**< one sentence, e.g. "UNHEALTHY: the progress thread
                                     has not ticked for 3.2 s" */
} kvx_health_t;

/**
 * This rank's health. Never blocks: the progress thread's last tick is read
 * without the context lock, and the lock is waited for at most 100 ms (a
 * progress thread stuck while holding it is reported, not waited for). Not
 * collective; thread safe.
 * @return KVX_OK, KVX_ERR_INVALID_PARAM (health_p NULL), KVX_ERR_INVALID_HANDLE.
 */
KVX_API kvx_status_t kvx_ctx_health(kvx_ctx_t *ctx, kvx_health_t *health_p);

/* ------------------------------------------------------------------------ */
/* Prometheus text                                                          */
/* ------------------------------------------------------------------------ */

/**
 * The counters and the health as Prometheus text exposition format (0.0.4),
 * what KVX_METRICS_FILE holds: kvx_rooms_opened_total,
 * kvx_room_outcomes_total{outcome,status,stage,origin_role},
 * kvx_transfer_bytes_total{kind}, kvx_room_seconds{outcome} (histogram),
 * kvx_health, ... every sample labelled with role, instance, tp, rank and
 * host. For an engine that serves its own /metrics.
 * @param buf    where to write; NUL-terminated when len > 0
 * @param len    its size
 * @param len_p  optional: the length of the whole text (without the NUL); a
 *               value >= len means buf was too small (the text is cut)
 * @return KVX_OK, KVX_ERR_INVALID_PARAM (buf NULL with len > 0),
 *         KVX_ERR_NO_MEMORY, KVX_ERR_INVALID_HANDLE. Thread safe; takes the
 *         context lock as kvx_ctx_stats() does.
 */
KVX_API kvx_status_t kvx_ctx_metrics_text(kvx_ctx_t *ctx, char *buf, size_t len, size_t *len_p);

#ifdef __cplusplus
}
#endif

#endif /* KVX_STATS_H */
