/*
 * stage_copies.h - the state of the staged path's copy engine that a context
 * embeds (ctx->cstage): the job's memory path and what each staging slot's
 * copies are for. Only data here; xfer/cuda_stage.c runs the engine.
 */
#ifndef KVX_CORE_STAGE_COPIES_H
#define KVX_CORE_STAGE_COPIES_H

#include <kvx.h>

#include "core/base/plan.h"
#include "mem/mem.h"

#include <stdint.h>

struct target;

/* What a staging slot is busy with, beyond its data message. */
typedef enum cstage_kind {
    CSTAGE_FREE = 0,
    CSTAGE_GATHER, /* sender: pool -> slot copies, then the data message */
    CSTAGE_SEND,   /* sender: the data message is in flight */
    CSTAGE_SCATTER /* receiver: slot -> pool copies */
} cstage_kind_t;

/* One staging slot's copy work. */
typedef struct cstage_op {
    cstage_kind_t kind;
    uint64_t ticket;  /* its copy batch, once fenced */
    int fenced;       /* ticket is set */
    struct target *t; /* GATHER, SEND: the target it is for */
    plan_run_t sub;   /* GATHER: the pages, of buffer buf */
    unsigned buf;
    int copied; /* its copies are queued on the engine */
} cstage_op_t;

typedef struct cstage {
    int on;       /* some pair of the job stages: every data message is staged */
    int all;      /* every pair stages (the staged path) */
    int any_cuda; /* some rank's pool is CUDA memory */
    kvx_mem_path_t path;
    char reason[256];                   /* why this path, for the log and kvx_ctx_mem_path() */
    mem_copier_t *copier;               /* this rank's engine (memcpy for host pools) */
    cstage_op_t *ops;                   /* [slot index of ctx->staging] */
    uint32_t *queue;                    /* slots with copies, in the order they were queued */
    unsigned qfirst, qcount, qunfenced; /* the last qunfenced have no ticket yet */
    int pinned;                         /* the staging area is page-locked for CUDA */
    size_t area_len;
    int broken; /* the engine failed: every staged transfer fails, with broken_why */
    kvx_failure_t broken_why;
} cstage_t;

#endif
