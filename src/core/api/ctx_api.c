/*
 * ctx_api.c - the context getters and the entries for bindings.
 */
#include "config.h"

#include "core/ctx/ctx.h"
#include "util/failure.h"

#include <stdlib.h>
#include <string.h>

void kvx_ctx_params_init(kvx_ctx_params_t *p)
{
    if (p == NULL) {
        return;
    }
    memset(p, 0, sizeof(*p));
    p->kv.dtype = KVX_DTYPE_BF16;
    p->kv.attn = KVX_ATTN_MHA;
    p->kv.page_layout = KVX_PAGE_HND;
    p->mem_type = KVX_MEM_HOST;
}

kvx_status_t kvx_ctx_identity(kvx_ctx_t *ctx, kvx_identity_t *id)
{
    kvx_status_t status = ctx_enter(ctx);

    if (status != KVX_OK) {
        return status;
    }
    if (id != NULL) {
        id->world_rank = ctx->rank;
        id->world_size = ctx->size;
        id->role = ctx->role;
        id->instance = ctx->instance;
        id->tp_rank = ctx->tp_rank;
        id->tp_size = ctx->tp_size;
        id->prefill_instances = ctx->job.count[KVX_ROLE_PREFILL];
        id->prefill_tp = ctx->job.tp[KVX_ROLE_PREFILL];
        id->decode_instances = ctx->job.count[KVX_ROLE_DECODE];
        id->decode_tp = ctx->job.tp[KVX_ROLE_DECODE];
    } else {
        status = KVX_ERR_INVALID_PARAM;
    }
    ctx_leave(ctx);
    return status;
}

MPI_Comm kvx_ctx_tp_comm(kvx_ctx_t *ctx)
{
    MPI_Comm comm;

    if (ctx_enter(ctx) != KVX_OK) {
        return MPI_COMM_NULL;
    }
    comm = ctx->tp_comm_user;
    ctx_leave(ctx);
    return comm;
}

size_t kvx_ctx_page_bytes(kvx_ctx_t *ctx)
{
    size_t bytes;

    if (ctx_enter(ctx) != KVX_OK) {
        return 0;
    }
    bytes = ctx->my.page_bytes;
    ctx_leave(ctx);
    return bytes;
}

kvx_status_t kvx_ctx_heads(kvx_ctx_t *ctx, unsigned *first_p, unsigned *count_p)
{
    kvx_status_t status = ctx_enter(ctx);

    if (status != KVX_OK) {
        return status;
    }
    if (first_p == NULL || count_p == NULL) {
        status = KVX_ERR_INVALID_PARAM;
    } else {
        *first_p = kvl_first_head(&ctx->my, ctx->tp_rank);
        *count_p = ctx->my.heads;
    }
    ctx_leave(ctx);
    return status;
}

kvx_status_t kvx_ctx_kv_buffer(kvx_ctx_t *ctx, unsigned layer, unsigned comp, void **buffer_p,
                               size_t *length_p)
{
    kvx_status_t status = ctx_enter(ctx);
    const kvl_t *k;

    if (status != KVX_OK) {
        return status;
    }
    k = &ctx->my;
    if (layer >= k->kv.layers || comp >= k->comps || buffer_p == NULL) {
        status = KVX_ERR_INVALID_PARAM;
    } else {
        *buffer_p = ctx->pool.buf[layer * k->comps + comp];
        if (length_p != NULL) {
            *length_p = ctx->pool.buf_len;
        }
    }
    ctx_leave(ctx);
    return status;
}

kvx_status_t kvx_ctx_membership(kvx_ctx_t *ctx, uint64_t *epoch_p)
{
    kvx_status_t status = ctx_enter(ctx);

    if (status != KVX_OK) {
        return status;
    }
    if (epoch_p == NULL) {
        status = KVX_ERR_INVALID_PARAM;
    } else {
        *epoch_p = ctx->membership;
    }
    ctx_leave(ctx);
    return status;
}

kvx_status_t kvx_ctx_join_address(kvx_ctx_t *ctx, char *buf, size_t len)
{
    kvx_status_t status = ctx_enter(ctx);

    if (status != KVX_OK) {
        return status;
    }
    if (ctx->door_addr[0] == '\0') {
        status = KVX_ERR_STATE;
    } else if (buf == NULL || strlen(ctx->door_addr) >= len) {
        status = KVX_ERR_INVALID_PARAM;
    } else {
        memcpy(buf, ctx->door_addr, strlen(ctx->door_addr) + 1);
    }
    ctx_leave(ctx);
    return status;
}

kvx_status_t kvx_ctx_pair_status(kvx_ctx_t *ctx, int other, kvx_failure_t *reason_p)
{
    kvx_status_t status = ctx_enter(ctx);

    if (status != KVX_OK) {
        return status;
    }
    if (other < 0 || other >= ctx->job.count[ctx_other_role(ctx)]) {
        status = KVX_ERR_INVALID_PARAM;
    } else if (ctx->pair_fail[other].status != KVX_OK) {
        status = ctx->pair_fail[other].status;
        failure_copy(reason_p, &ctx->pair_fail[other]);
    }
    ctx_leave(ctx);
    return status;
}

/*
 * Entry points for bindings. An MPI_Comm is a pointer in Open MPI and an
 * int in MPICH, so a binding that is not compiled against mpi.h cannot pass
 * one safely; the Fortran handle is an integer in every MPI library and
 * MPI_Comm_f2c() converts it.
 */
kvx_status_t kvx_ctx_create_f(MPI_Fint world, const kvx_ctx_params_t *params, kvx_ctx_t **ctx_p,
                              kvx_failure_t *reason_p)
{
    int initialized = 0, finalized = 0;

    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    /* MPI_Comm_f2c needs MPI; without it kvx_ctx_create says what is wrong. */
    return kvx_ctx_create(initialized && !finalized ? MPI_Comm_f2c(world) : MPI_COMM_NULL, params,
                          ctx_p, reason_p);
}

MPI_Fint kvx_ctx_tp_comm_f(kvx_ctx_t *ctx)
{
    MPI_Comm comm = kvx_ctx_tp_comm(ctx);

    return MPI_Comm_c2f(comm);
}

kvx_status_t kvx_kv_rank_shape(const kvx_kv_layout_t *kv, int tp_size, int tp_rank,
                               unsigned *first_head_p, unsigned *heads_p, size_t *page_bytes_p,
                               kvx_failure_t *reason_p)
{
    kvx_failure_t why;
    kvx_status_t status;
    kvl_t k;

    memset(&why, 0, sizeof(why));
    if (kv == NULL || tp_size < 1 || tp_rank < 0 || tp_rank >= tp_size) {
        failure_set(&why, KVX_ERR_INVALID_PARAM, KVX_STAGE_INIT, NULL,
                    "kvx_kv_rank_shape needs a layout and 0 <= tp_rank (%d) < tp_size (%d)",
                    tp_rank, tp_size);
        failure_copy(reason_p, &why);
        return KVX_ERR_INVALID_PARAM;
    }
    status = kvl_init(&k, kv, tp_size, "kv layout", &why);
    if (status != KVX_OK) {
        failure_copy(reason_p, &why);
        return status;
    }
    if (first_head_p != NULL) {
        *first_head_p = kvl_first_head(&k, tp_rank);
    }
    if (heads_p != NULL) {
        *heads_p = k.heads;
    }
    if (page_bytes_p != NULL) {
        *page_bytes_p = k.page_bytes;
    }
    return KVX_OK;
}
