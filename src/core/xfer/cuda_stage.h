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
struct room;
struct source;
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
/* Receiver: copies a landed data message from its slot into the pool; the
 * slot is released, and the bytes count for the writer, once the copies
 * completed. */
void cstage_scatter(struct kvx_ctx *ctx, struct room *room, struct source *s, const msg_data_t *d,
                    staging_slot_t *slot);
/* Receiver: the same for eager data, copied and waited for at once. */
void cstage_scatter_now(struct kvx_ctx *ctx, struct room *room, struct source *s,
                        const msg_data_t *d, const void *data, size_t len);
/* Fences new copies, and finishes the slots whose copies completed:
 * sends gathered data, counts scattered data. Returns work still pending. */
unsigned cstage_progress(struct kvx_ctx *ctx);
/* A copy into the decode room's pages is still in flight. */
int cstage_room_busy(const struct kvx_ctx *ctx, const struct room *room);

#endif
