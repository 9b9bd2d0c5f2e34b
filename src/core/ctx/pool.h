/*
 * pool.h - this rank's pool: its buffers, their registration, the aux slots.
 */
#ifndef KVX_CORE_POOL_H
#define KVX_CORE_POOL_H

#include <kvx.h>

#include "ucx/kvx_ucx.h"

#include <stddef.h>

/* This rank's pool: buffers, registration, aux. */
typedef struct pool {
    void **buf;     /* [layer * comps + comp] */
    size_t buf_len; /* num_pages * page_bytes */
    int nbufs;
    kucx_region_t *regions;
    int nregions;
    int *buf_region;     /* region of each buffer */
    void *owned;         /* memory kvx allocated, or NULL */
    kvx_mem_type_t type; /* where the buffers are (aux slots are host memory) */
    int dev;             /* their CUDA device, when type is CUDA */
    char busid[32];      /* its PCI bus id; "" for a host pool */
    int numa;            /* NUMA node near this rank (its GPU's), -1 if unknown */
    int ucx_owned;       /* regions[0] is memory UCX allocated for kvx (KVX_POOL_ALLOC=ucx) */
    void *aux;
    size_t aux_slots, aux_stride;
    kucx_region_t aux_region;
} pool_t;

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
