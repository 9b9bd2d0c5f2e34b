/*
 * cuda_stage.h - the memory path of a context (cuda_stage.c): whether pages
 * go straight from pool to pool, or through host staging memory with a
 * copy engine on each side (KVX_MEM_PATH, UCX's memory types).
 */
#ifndef KVX_CORE_CUDA_STAGE_H
#define KVX_CORE_CUDA_STAGE_H

#include <kvx.h>

#include "core/base/plan.h"
#include "core/base/stage_copies.h"
#include "core/base/staging.h"
#include "mem/mem.h"

#include <stdint.h>

struct kvx_ctx;
struct target;

/* ---- cuda_stage.c: the memory path; staged data messages ---- */
/* Chooses the path for the whole job (collective over world: every rank
 * calls it once its pool is placed) and creates this rank's copy engine. */
kvx_status_t cstage_init(struct kvx_ctx *ctx, kvx_failure_t *why);
/* Waits for every copy and frees the engine (the staging area goes with
 * pack_cleanup()). */
void cstage_cleanup(struct kvx_ctx *ctx);
/* The mode a pair's runs travel in on this path. */
plan_mode_t cstage_mode(const struct kvx_ctx *ctx, plan_mode_t mode);
/* The staging area of a staged context: page-locked for a CUDA pool, on
 * the GPU's NUMA node; registered with UCX. */
kvx_status_t cstage_area_init(struct kvx_ctx *ctx, size_t size, unsigned cap, kvx_failure_t *why);
void cstage_area_cleanup(struct kvx_ctx *ctx);
/* Sender: t's next sub-run (at pos in the room) takes a slot; the progress
 * thread gathers it there and sends its data message once the copies
 * completed. Returns as pack_post(). */
int cstage_post(struct kvx_ctx *ctx, struct target *t, const plan_run_t *sub, size_t pos);
/* Receiver: where a data message's pages go -- the room's pages from the
 * message's position on, the pair's geometry (writer's side first), and the
 * writer's name for reasons. */
typedef struct cstage_dest {
    const uint32_t *pages;
    plan_geom_t geom;
    const char *writer;
} cstage_dest_t;
/* Receiver: queues the copies of a landed data message from its slot into
 * the pool; once they complete, the scattered op (target.h) counts the
 * bytes and releases the slot. Not KVX_OK: the copies are refused (why,
 * at transfer), and the caller fails the room; the slot is queued anyway
 * (or released when the engine is broken). */
kvx_status_t cstage_scatter(struct kvx_ctx *ctx, const cstage_dest_t *to, const msg_data_t *d,
                            staging_slot_t *slot, kvx_failure_t *why);
/* Receiver: the same for eager data, copied and waited for at once: KVX_OK
 * when the bytes are in the pool. */
kvx_status_t cstage_scatter_now(struct kvx_ctx *ctx, const cstage_dest_t *to, const msg_data_t *d,
                                const void *data, size_t len, kvx_failure_t *why);
/* Receiver: a scattered slot's work is over; the slot is free again. */
void cstage_slot_free(struct kvx_ctx *ctx, staging_slot_t *slot);
/* Fences new copies, and finishes the slots whose copies completed:
 * sends gathered data, counts scattered data. Returns work still pending. */
unsigned cstage_progress(struct kvx_ctx *ctx);
/* A copy into the decode room's pages is still in flight. */
int cstage_room_busy(const struct kvx_ctx *ctx, uint64_t id, uint64_t nonce);

#endif
