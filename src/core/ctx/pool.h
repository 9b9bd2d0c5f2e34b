/*
 * pool.h - this rank's pool: its buffers, their registration, the aux slots.
 * The steps that place, register and free it are setup/pool_steps.c.
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

#endif
