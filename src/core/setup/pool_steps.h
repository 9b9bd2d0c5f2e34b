/*
 * pool_steps.h - the steps of creation and destruction that place, register
 * and free a context's pool (ctx/pool.h holds the pool itself).
 */
#ifndef KVX_CORE_POOL_STEPS_H
#define KVX_CORE_POOL_STEPS_H

#include <kvx.h>

#include "core/ctx/pool.h"

/* The pool's device, before the topology is chosen: for a CUDA pool, loads
 * CUDA and checks the device (pool.busid gets its bus id). */
kvx_status_t pool_probe(kvx_ctx_t *ctx, const kvx_ctx_params_t *params, kvx_failure_t *why);
/* Places the pool (caller's buffers, checked, or allocated) and the aux slots. */
kvx_status_t pool_init(kvx_ctx_t *ctx, const kvx_ctx_params_t *params, kvx_failure_t *why);
/* Registers them with UCX, once the memory path is known (a staged CUDA
 * pool is not registered: UCX cannot access it). */
kvx_status_t pool_register(kvx_ctx_t *ctx, kvx_failure_t *why);
void pool_cleanup(kvx_ctx_t *ctx);

#endif
