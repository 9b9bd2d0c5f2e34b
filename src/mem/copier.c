/*
 * copier.c - copy engines (mem.h): one interface, a host implementation
 * (memcpy, made when a poll finds the batch fenced) and a CUDA one
 * (cudaMemcpyAsync on kvx's stream, one event per batch).
 */
#include "config.h"

#include "mem.h"
#include "util/failure.h"
#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef KVX_HAVE_CUDA
#include "cudart.h"
#endif

typedef struct copier_ops {
    kvx_status_t (*copy)(mem_copier_t *c, void *dst, const void *src, size_t len,
                         kvx_failure_t *why);
    /* Closes the batch of the copies queued since the last fence as ticket
     * c->fenced + 1. */
    kvx_status_t (*fence)(mem_copier_t *c, kvx_failure_t *why);
    /* Advances c->done; blocks until it reaches ticket when wait is set. */
    kvx_status_t (*poll)(mem_copier_t *c, uint64_t ticket, int wait, kvx_failure_t *why);
    void (*destroy)(mem_copier_t *c);
} copier_ops_t;

/* A host copy waiting for its batch to be polled. */
typedef struct host_copy {
    void *dst;
    const void *src;
    size_t len;
} host_copy_t;

#ifdef KVX_HAVE_CUDA
/* A recorded event: its batch's copies are done when it completed. */
typedef struct cuda_mark {
    cudaEvent_t event;
    uint64_t ticket;
} cuda_mark_t;
#endif

struct mem_copier {
    const copier_ops_t *ops;
    char name[64];
    uint64_t fenced; /* the last ticket handed out */
    uint64_t done;   /* the last ticket completed */
    size_t unfenced; /* copies queued since the last fence */
    int dev;         /* CUDA device, -1 for host */
    /* host: copies in order; the first nfenced belong to fenced batches */
    host_copy_t *queue;
    size_t nqueued, nfenced, cap;
#ifdef KVX_HAVE_CUDA
    cudaStream_t stream;
    cuda_mark_t *marks; /* recorded, oldest first: [first, first + nmarks) */
    size_t first, nmarks, mcap;
    cudaEvent_t *spare; /* completed events, reused */
    size_t nspare;
#endif
};

/* ---- host --------------------------------------------------------------- */

static kvx_status_t host_copy(mem_copier_t *c, void *dst, const void *src, size_t len,
                              kvx_failure_t *why)
{
    if (c->nqueued == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 256;
        host_copy_t *q = realloc(c->queue, cap * sizeof(*q));

        if (q == NULL) {
            failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_INIT, NULL,
                        "no memory to queue %zu copies", cap);
            return KVX_ERR_NO_MEMORY;
        }
        c->queue = q;
        c->cap = cap;
    }
    c->queue[c->nqueued++] = (host_copy_t){ dst, src, len };
    return KVX_OK;
}

static kvx_status_t host_fence(mem_copier_t *c, kvx_failure_t *why)
{
    c->nfenced = c->nqueued;
    return KVX_OK;
}

/* A host engine has nothing to wait for: every fenced copy is made now. */
static kvx_status_t host_poll(mem_copier_t *c, uint64_t ticket, int wait, kvx_failure_t *why)
{
    for (size_t i = 0; i < c->nfenced; i++) {
        memcpy(c->queue[i].dst, c->queue[i].src, c->queue[i].len);
    }
    memmove(c->queue, c->queue + c->nfenced, (c->nqueued - c->nfenced) * sizeof(*c->queue));
    c->nqueued -= c->nfenced;
    c->nfenced = 0;
    c->done = c->fenced;
    return KVX_OK;
}

static void host_destroy(mem_copier_t *c)
{
    free(c->queue);
}

static const copier_ops_t host_ops = { host_copy, host_fence, host_poll, host_destroy };

/* ---- CUDA --------------------------------------------------------------- */

#ifdef KVX_HAVE_CUDA

static kvx_status_t cuda_copy(mem_copier_t *c, void *dst, const void *src, size_t len,
                              kvx_failure_t *why)
{
    kvx_status_t status = mem_cuda_use(c->dev, why);

    if (status == KVX_OK) {
        status = KVX_CUDA_CALL(why, cudaMemcpyAsync, dst, src, len, cudaMemcpyDefault, c->stream);
    }
    return status;
}

/* Room for one more mark at the end of the ring. */
static kvx_status_t cuda_mark_room(mem_copier_t *c, kvx_failure_t *why)
{
    if (c->first + c->nmarks < c->mcap) {
        return KVX_OK;
    }
    if (c->first > 0) {
        memmove(c->marks, c->marks + c->first, c->nmarks * sizeof(*c->marks));
        c->first = 0;
        return KVX_OK;
    }
    {
        size_t cap = c->mcap ? 2 * c->mcap : 64;
        cuda_mark_t *m = realloc(c->marks, cap * sizeof(*m));
        cudaEvent_t *s = realloc(c->spare, cap * sizeof(*s));

        if (m != NULL) {
            c->marks = m;
        }
        if (s != NULL) {
            c->spare = s;
        }
        if (m == NULL || s == NULL) {
            failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_INIT, NULL, "no memory for CUDA events");
            return KVX_ERR_NO_MEMORY;
        }
        c->mcap = cap;
    }
    return KVX_OK;
}

static kvx_status_t cuda_fence(mem_copier_t *c, kvx_failure_t *why)
{
    cudaEvent_t ev = NULL;
    kvx_status_t status = cuda_mark_room(c, why);

    if (status == KVX_OK) {
        status = mem_cuda_use(c->dev, why);
    }
    if (status != KVX_OK) {
        return status;
    }
    if (c->nspare > 0) {
        ev = c->spare[--c->nspare];
    } else {
        status = KVX_CUDA_CALL(why, cudaEventCreateWithFlags, &ev, cudaEventDisableTiming);
    }
    if (status == KVX_OK) {
        status = KVX_CUDA_CALL(why, cudaEventRecord, ev, c->stream);
        if (status == KVX_OK) {
            c->marks[c->first + c->nmarks++] = (cuda_mark_t){ ev, c->fenced + 1 };
        } else {
            c->spare[c->nspare++] = ev;
        }
    }
    return status;
}

/* Retires the oldest mark when its event completed (or, with wait, once it
 * has): 1 retired, 0 not yet, -1 error. */
static int cuda_retire(mem_copier_t *c, int wait, kvx_failure_t *why)
{
    cuda_mark_t *m = &c->marks[c->first];
    cudaError_t rc =
        wait ? mem_cudart.cudaEventSynchronize(m->event) : mem_cudart.cudaEventQuery(m->event);

    if (rc == cudaErrorNotReady) {
        return 0;
    }
    if (rc != cudaSuccess) {
        mem_cuda_fail(why, rc, wait ? "cudaEventSynchronize" : "cudaEventQuery");
        return -1;
    }
    c->done = m->ticket;
    c->spare[c->nspare++] = m->event;
    c->first++;
    c->nmarks--;
    return 1;
}

static kvx_status_t cuda_poll(mem_copier_t *c, uint64_t ticket, int wait, kvx_failure_t *why)
{
    int r = 1;
    kvx_status_t status = mem_cuda_use(c->dev, why);

    if (status != KVX_OK) {
        return status;
    }
    while (c->nmarks > 0 && r > 0) {
        r = cuda_retire(c, wait && c->done < ticket, why);
    }
    return r < 0 ? KVX_ERR_CUDA : KVX_OK;
}

static void cuda_destroy(mem_copier_t *c)
{

    if (c->stream != NULL && mem_cuda_use(c->dev, NULL) == KVX_OK) {
        KVX_CUDA_CALL(NULL, cudaStreamSynchronize, c->stream);
        for (size_t i = 0; i < c->nmarks; i++) {
            KVX_CUDA_CALL(NULL, cudaEventDestroy, c->marks[c->first + i].event);
        }
        for (size_t i = 0; i < c->nspare; i++) {
            KVX_CUDA_CALL(NULL, cudaEventDestroy, c->spare[i]);
        }
        KVX_CUDA_CALL(NULL, cudaStreamDestroy, c->stream);
    }
    free(c->marks);
    free(c->spare);
}

static const copier_ops_t cuda_ops = { cuda_copy, cuda_fence, cuda_poll, cuda_destroy };

static kvx_status_t cuda_create(mem_copier_t *c, int dev, kvx_failure_t *why)
{
    kvx_status_t status = mem_cuda_use(dev, why);

    if (status != KVX_OK) {
        return status;
    }
    status = KVX_CUDA_CALL(why, cudaStreamCreateWithFlags, &c->stream, cudaStreamNonBlocking);
    return status;
}

#endif /* KVX_HAVE_CUDA */

/* ---- the interface ------------------------------------------------------ */

kvx_status_t mem_copier_create(kvx_mem_type_t type, int dev, mem_copier_t **copier_p,
                               kvx_failure_t *why)
{
    mem_copier_t *c = calloc(1, sizeof(*c));
    kvx_status_t status = KVX_OK;

    if (c == NULL) {
        failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_INIT, NULL, "no memory for a copy engine");
        return KVX_ERR_NO_MEMORY;
    }
    c->dev = -1;
    c->ops = &host_ops;
    snprintf(c->name, sizeof(c->name), "memcpy");
    if (type == KVX_MEM_CUDA) {
#ifdef KVX_HAVE_CUDA
        status = mem_cuda_open(NULL, why);
        if (status == KVX_OK) {
            c->dev = dev;
            c->ops = &cuda_ops;
            snprintf(c->name, sizeof(c->name), "cudaMemcpyAsync on CUDA device %d", dev);
            status = cuda_create(c, dev, why);
        }
#else
        status = mem_cuda_open(NULL, why);
#endif
    }
    if (status != KVX_OK) {
        mem_copier_destroy(c);
        return status;
    }
    *copier_p = c;
    return KVX_OK;
}

void mem_copier_destroy(mem_copier_t *c)
{
    if (c == NULL) {
        return;
    }
    c->ops->destroy(c);
    free(c);
}

const char *mem_copier_name(const mem_copier_t *c)
{
    return c->name;
}

kvx_status_t mem_copier_copy(mem_copier_t *c, void *dst, const void *src, size_t len,
                             kvx_failure_t *why)
{
    kvx_status_t status = len == 0 ? KVX_OK : c->ops->copy(c, dst, src, len, why);

    c->unfenced += status == KVX_OK && len > 0;
    return status;
}

kvx_status_t mem_copier_fence(mem_copier_t *c, uint64_t *ticket_p, kvx_failure_t *why)
{
    if (c->unfenced > 0) {
        kvx_status_t status = c->ops->fence(c, why);

        if (status != KVX_OK) {
            return status;
        }
        c->fenced++;
        c->unfenced = 0;
    }
    *ticket_p = c->fenced;
    return KVX_OK;
}

kvx_status_t mem_copier_poll(mem_copier_t *c, uint64_t *done_p, kvx_failure_t *why)
{
    kvx_status_t status = c->done < c->fenced ? c->ops->poll(c, c->fenced, 0, why) : KVX_OK;

    *done_p = c->done;
    return status;
}

kvx_status_t mem_copier_wait(mem_copier_t *c, uint64_t ticket, kvx_failure_t *why)
{
    if (ticket > c->fenced) {
        failure_set(why, KVX_ERR_INTERNAL, KVX_STAGE_INIT, NULL,
                    "waiting for copy batch %llu, but only %llu were fenced",
                    (unsigned long long)ticket, (unsigned long long)c->fenced);
        return KVX_ERR_INTERNAL;
    }
    return c->done < ticket ? c->ops->poll(c, ticket, 1, why) : KVX_OK;
}
