/*
 * pool_steps.c - this rank's KV pool and aux slots (ctx/pool.h): given by
 * the caller or allocated here, in host or CUDA memory, registered with UCX
 * once, freed at destroy. Aux slots are host memory whatever the pool's type.
 */
#include "config.h"

#include "core/ctx/ctx.h"
#include "core/ctx/pool.h"
#include "core/setup/pool_steps.h"
#include "mem/mem.h"
#include "util/failure.h"
#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An aux slot holds a header tagging it with its room, then the payload. */
#define POOL_AUX_HEADER 16

/* The pool kvx owns: page-aligned memory of this process, or, with
 * KVX_POOL_ALLOC=ucx, memory UCX allocates and registers at once
 * (ucp_mem_map with UCP_MEM_MAP_ALLOCATE). UCX's shared-memory transports
 * put straight into memory UCX allocated (POSIX or SysV shared memory), but
 * into ordinary memory UCX 1.13 puts by active messages the target copies
 * (kvx-bench put, 4 MiB rooms on this VM: about 1.6-1.9 against 4.5-7 GB/s).
 * It is not the default: when a peer dies mid-transfer into such memory,
 * UCX 1.13 aborts the surviving rank (an assertion under
 * ucp_ep_set_failed -> ucp_wireup_ep_pending_queue_purge, in either error
 * mode; mpi_tests/cases/kill_decode.mpi shows it). */
static kvx_status_t pool_alloc(kvx_ctx_t *ctx, size_t len, kvx_failure_t *why)
{
    pool_t *pool = &ctx->pool;

    if (pool->type == KVX_MEM_CUDA) {
        return mem_cuda_alloc(pool->dev, len, &pool->owned, why);
    }
    if (ctx->cfg.pool_alloc == 1) {
        kvx_status_t status =
            kucx_region_map(&ctx->ucx, NULL, len, UCS_MEMORY_TYPE_HOST, &pool->regions[0], why);

        if (status != KVX_OK) {
            return status;
        }
        memset(pool->regions[0].base, 0, len);
        pool->ucx_owned = 1;
        return KVX_OK;
    }
    /* Pages are page aligned so that registration pins whole pages. */
    if (posix_memalign(&pool->owned, 4096, len) != 0) {
        pool->owned = NULL;
        failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_INIT, NULL,
                    "cannot allocate a KV pool of %zu bytes", len);
        return KVX_ERR_NO_MEMORY;
    }
    memset(pool->owned, 0, len);
    return KVX_OK;
}

/* The caller's memory of a CUDA pool must be device memory of its device. */
static kvx_status_t pool_check(const pool_t *pool, const void *ptr, size_t len, const char *what,
                               kvx_failure_t *why)
{
    return pool->type == KVX_MEM_CUDA ? mem_cuda_check(ptr, len, pool->dev, what, why) : KVX_OK;
}

/* Points pool->buf at the caller's buffers, the slab, or memory of our own,
 * and says how many regions they form. */
static kvx_status_t pool_place(kvx_ctx_t *ctx, const kvx_ctx_params_t *params, kvx_failure_t *why)
{
    pool_t *pool = &ctx->pool;
    char *base = params->slab;

    pool->nregions = params->buffers != NULL ? pool->nbufs : 1;
    pool->regions = calloc((size_t)pool->nregions, sizeof(*pool->regions));
    if (pool->regions == NULL) {
        failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_INIT, NULL, "no memory for regions");
        return KVX_ERR_NO_MEMORY;
    }
    if (params->buffers != NULL) {
        for (int i = 0; i < pool->nbufs; i++) {
            char what[64];

            snprintf(what, sizeof(what), "buffers[%d] (layer %d, component %d)", i,
                     i / (int)ctx->my.comps, i % (int)ctx->my.comps);
            if (params->buffers[i] == NULL) {
                failure_set(why, KVX_ERR_INVALID_PARAM, KVX_STAGE_INIT, NULL, "%s is NULL", what);
                return KVX_ERR_INVALID_PARAM;
            }
            if (pool_check(pool, params->buffers[i], pool->buf_len, what, why) != KVX_OK) {
                return why->status;
            }
            pool->buf[i] = params->buffers[i];
            pool->buf_region[i] = i;
        }
        return KVX_OK;
    }
    if (base == NULL) {
        kvx_status_t status = pool_alloc(ctx, pool->buf_len * (size_t)pool->nbufs, why);

        if (status != KVX_OK) {
            return status;
        }
        base = pool->ucx_owned ? pool->regions[0].base : pool->owned;
    } else if (pool_check(pool, base, pool->buf_len * (size_t)pool->nbufs, "slab", why) != KVX_OK) {
        return why->status;
    }
    for (int i = 0; i < pool->nbufs; i++) {
        pool->buf[i] = base + (size_t)i * pool->buf_len;
        pool->buf_region[i] = 0;
    }
    return KVX_OK;
}

kvx_status_t pool_register(kvx_ctx_t *ctx, kvx_failure_t *why)
{
    pool_t *pool = &ctx->pool;
    int cuda = pool->type == KVX_MEM_CUDA;
    kvx_status_t status;

    /* On the staged path nothing reaches a CUDA pool but kvx's own copies;
     * a pool UCX allocated (KVX_POOL_ALLOC=ucx) is registered already. */
    for (int r = pool->ucx_owned; r < pool->nregions && !(cuda && ctx->cstage.all); r++) {
        size_t len = pool->nregions == 1 ? pool->buf_len * (size_t)pool->nbufs : pool->buf_len;
        void *base = pool->nregions == 1 ? pool->buf[0] : pool->buf[r];

        status = kucx_region_map(&ctx->ucx, base, len,
                                 cuda ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST,
                                 &pool->regions[r], why);
        if (status != KVX_OK) {
            return status;
        }
    }
    if (pool->aux_slots == 0) {
        return KVX_OK;
    }
    return kucx_region_map(&ctx->ucx, pool->aux, pool->aux_slots * pool->aux_stride,
                           UCS_MEMORY_TYPE_HOST, &pool->aux_region, why);
}

kvx_status_t pool_probe(kvx_ctx_t *ctx, const kvx_ctx_params_t *params, kvx_failure_t *why)
{
    pool_t *pool = &ctx->pool;
    kvx_status_t status;

    pool->type = params->mem_type;
    pool->dev = params->cuda_device;
    pool->numa = -1;
    if (pool->type == KVX_MEM_HOST) {
        return KVX_OK;
    }
    if (pool->type != KVX_MEM_CUDA) {
        failure_set(why, KVX_ERR_INVALID_PARAM, KVX_STAGE_INIT, NULL,
                    "mem_type %d is neither KVX_MEM_HOST nor KVX_MEM_CUDA", (int)pool->type);
        return KVX_ERR_INVALID_PARAM;
    }
    status = mem_cuda_open(ctx->cfg.cuda_library, why);
    if (status == KVX_OK) {
        status = mem_cuda_device(pool->dev, pool->busid, sizeof(pool->busid), why);
    }
    if (status == KVX_OK) {
        kvx_info("KV pool on CUDA device %d (PCI %s)", pool->dev, pool->busid);
    }
    return status;
}

kvx_status_t pool_init(kvx_ctx_t *ctx, const kvx_ctx_params_t *params, kvx_failure_t *why)
{
    pool_t *pool = &ctx->pool;
    kvx_status_t status;

    pool->nbufs = (int)(ctx->my.kv.layers * ctx->my.comps);
    pool->buf_len = (ctx->num_pages - 1) * ctx->my.page_stride + ctx->my.page_bytes;
    pool->buf = calloc((size_t)pool->nbufs, sizeof(*pool->buf));
    pool->buf_region = calloc((size_t)pool->nbufs, sizeof(*pool->buf_region));
    if (pool->buf == NULL || pool->buf_region == NULL) {
        failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_INIT, NULL, "no memory for the pool table");
        return KVX_ERR_NO_MEMORY;
    }
    status = pool_place(ctx, params, why);
    if (status != KVX_OK) {
        return status;
    }
    pool->aux_slots = params->aux_slots;
    pool->aux_stride = POOL_AUX_HEADER + ((params->aux_item_size + 7) & ~(size_t)7);
    if (pool->aux_slots > 0) {
        pool->aux = calloc(pool->aux_slots, pool->aux_stride);
        if (pool->aux == NULL) {
            failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_INIT, NULL,
                        "cannot allocate %zu aux slots of %zu bytes", pool->aux_slots,
                        pool->aux_stride);
            return KVX_ERR_NO_MEMORY;
        }
    }
    return KVX_OK;
}

void pool_cleanup(kvx_ctx_t *ctx)
{
    pool_t *pool = &ctx->pool;

    for (int r = 0; r < pool->nregions && pool->regions != NULL; r++) {
        kucx_region_unmap(&ctx->ucx, &pool->regions[r]);
    }
    if (pool->aux_region.memh != NULL) {
        kucx_region_unmap(&ctx->ucx, &pool->aux_region);
    }
    free(pool->regions);
    free(pool->buf);
    free(pool->buf_region);
    if (pool->type == KVX_MEM_CUDA) {
        mem_cuda_free(pool->dev, pool->owned);
    } else {
        free(pool->owned);
    }
    free(pool->aux);
    memset(pool, 0, sizeof(*pool));
}
