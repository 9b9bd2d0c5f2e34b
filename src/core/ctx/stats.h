/*
 * stats.h - a context's counters (kvx_stats_t), its health and their
 * Prometheus text.
 *
 * The hooks of room events are in room/room_stats.h. Every hook is called
 * where its event happens, with ctx->lock held (the
 * lock every event of a context holds anyway), so the counters are plain
 * integers. The one exception is the progress thread's tick, which
 * kvx_ctx_health() reads without the lock: it is stored atomically.
 */
#ifndef KVX_CORE_STATS_H
#define KVX_CORE_STATS_H

#include <kvx.h>

#include <stdint.h>
#include <stdio.h>

struct kvx_ctx;

/* A walk a higher floor adds to the health (stats_add_health()): the peers
 * (link/peer.c peer_health), the rooms (room/room_stats.c room_health). */
typedef void (*stats_health_probe_t)(struct kvx_ctx *ctx, uint64_t now, kvx_health_t *h);

typedef struct stats {
    kvx_stats_t c;                  /* the counters */
    uint64_t tick;                  /* progress thread's last tick (ns, atomic) */
    uint64_t round_start;           /* the agreement round in progress began (ns), 0: none */
    kvx_failure_t last_fail;        /* root cause of the last FAILED outcome */
    uint64_t last_fail_at;          /* when it was counted (ns), 0: none */
    uint64_t next_export;           /* when the metrics file is due (ns) */
    int export_failed;              /* writing the file failed once (warned) */
    int writing;                    /* the progress thread writes the file (lock dropped) */
    char path[4096];                /* KVX_METRICS_FILE expanded, "" for none */
    stats_health_probe_t probes[4]; /* run in the order added, ctx->lock held */
    unsigned nprobes;
} stats_t;

/* ---- stats.c: lifetime and hooks (ctx->lock held) ---- */
kvx_status_t stats_init(struct kvx_ctx *ctx);
void stats_cleanup(struct kvx_ctx *ctx);
void stats_xfer(struct kvx_ctx *ctx, kvx_xfer_kind_t kind, size_t bytes);
/* Decode: units checked against a writer's digests; unchecked: the writer's
 * part of a room could not be checked (its pool is on a device). */
void stats_verified(struct kvx_ctx *ctx, size_t units, int unchecked);
/* Adds a walk to the health (setup, after stats_init()). */
void stats_add_health(struct kvx_ctx *ctx, stats_health_probe_t probe);
void stats_round_start(struct kvx_ctx *ctx);
void stats_round_end(struct kvx_ctx *ctx, kvx_status_t status);
/* The progress thread's tick: stamps it and, when due, writes the metrics
 * file (with the lock dropped while it writes). */
void stats_tick(struct kvx_ctx *ctx, uint64_t now);
/* Writes the metrics file once more (destroy; lock not held). */
void stats_export_final(struct kvx_ctx *ctx);

/* ---- stats_prom.c: the Prometheus text (no context; unit tested) ---- */
/* Adds one observation (seconds) to a histogram. */
void stats_hist_add(kvx_histogram_t *h, double seconds);
/* The labels of every sample: role="prefill",instance="0",tp="1",rank="3",host="h". */
void stats_prom_labels(char *buf, size_t len, kvx_role_t role, int instance, int tp_rank, int rank,
                       const char *host);
/* Writes the exposition text of s and h; labels as stats_prom_labels()
 * writes them; interval: KVX_METRICS_INTERVAL in seconds; wall: the time of
 * writing (seconds since the epoch). */
void stats_prom_write(FILE *f, const kvx_stats_t *s, const kvx_health_t *h, const char *labels,
                      double interval, double wall);
/* Writes text atomically to path: a temporary file in its directory, then
 * rename(). Returns 0, or an errno. */
int stats_write_atomic(const char *path, const char *text, size_t len);

#endif
