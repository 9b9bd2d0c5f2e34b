/*
 * fake_cudart.c - a stand-in CUDA runtime for machines without a GPU, so
 * that make check runs kvx's CUDA code (src/mem/cuda.c, the CUDA copy
 * engine, CUDA pools and the staged path) rather than skipping it. Loaded
 * instead of libcudart with KVX_CUDA_LIBRARY (and KVXT_CUDA_LIBRARY for the
 * test programs).
 *
 * It behaves like a GPU where kvx could go wrong:
 *  - "device memory" is mapped PROT_NONE: any access that is not a copy
 *    through this runtime (kvx touching a device pointer) crashes;
 *  - copies on a stream are made only when an event recorded after them
 *    is found complete, and an event completes only on its
 *    KVXT_FAKE_CUDA_POLLS-th query (default 3), or when synchronized: a
 *    protocol that reads staging memory before its copies completed reads
 *    stale bytes;
 *  - pointer attributes say device, page-locked host or host memory.
 *
 * Knobs (environment): KVXT_FAKE_CUDA_DEVICES (default 2);
 * KVXT_FAKE_CUDA_ERROR=nodriver|nodevice (cudaGetDeviceCount fails as
 * without a driver / device); KVXT_FAKE_CUDA_FAIL_COPY=N (the Nth
 * cudaMemcpyAsync and every call after it fail with
 * cudaErrorIllegalAddress, as a sticky device error does).
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FAKE_API         __attribute__((visibility("default")))
#define FAKE_MAX_REGIONS 4096
#define FAKE_MAX_OPS     (1 << 16)

typedef struct fake_region {
    char *base;
    size_t len, mapped;
    int dev;
    int device; /* 1: device memory (PROT_NONE); 0: registered host memory */
} fake_region_t;

typedef struct fake_op {
    void *dst;
    const void *src;
    size_t len;
    struct fake_event *event; /* a marker instead of a copy */
} fake_op_t;

typedef struct fake_stream {
    fake_op_t *ops;
    size_t first, count;
    int dev;
} fake_stream_t;

typedef struct fake_event {
    fake_stream_t *stream;
    unsigned queries;
    int pending; /* recorded, its marker not reached yet */
} fake_event_t;

static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
static fake_region_t fake_regions[FAKE_MAX_REGIONS];
static int fake_nregions;
static __thread int fake_current;
static long fake_copies;
static int fake_sticky; /* a sticky error happened */

/* A number from the environment (read at every call: a test may set it
 * between calls), or dflt. */
static int fake_number(const char *value, int dflt)
{
    return value != NULL && *value != '\0' ? atoi(value) : dflt;
}

static int fake_devices(void)
{
    return fake_number(getenv("KVXT_FAKE_CUDA_DEVICES"), 2);
}

static const char *fake_error_mode(void)
{
    const char *v = getenv("KVXT_FAKE_CUDA_ERROR");

    return v != NULL ? v : "";
}

static fake_region_t *fake_find(const void *p)
{
    const char *c = p;

    for (int i = 0; i < fake_nregions; i++) {
        if (c >= fake_regions[i].base && c < fake_regions[i].base + fake_regions[i].len) {
            return &fake_regions[i];
        }
    }
    return NULL;
}

/* Opens (or closes again) the pages of [p, p + len) when they are device
 * memory; only those pages, which keeps large pools cheap to copy into. */
static void fake_protect(const void *p, size_t len, int prot)
{
    fake_region_t *r = fake_find(p);
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo, hi;

    if (r == NULL || !r->device || len == 0) {
        return;
    }
    lo = (uintptr_t)p & ~(page - 1);
    hi = ((uintptr_t)p + len + page - 1) & ~(page - 1);
    mprotect((void *)lo, hi - lo, prot);
}

/* A copy as the GPU makes it: device memory is reachable only here. */
static void fake_copy(void *dst, const void *src, size_t len)
{
    fake_protect(dst, len, PROT_READ | PROT_WRITE);
    fake_protect(src, len, PROT_READ | PROT_WRITE);
    memmove(dst, src, len);
    fake_protect(dst, len, PROT_NONE);
    fake_protect(src, len, PROT_NONE);
}

/* Runs a stream's operations up to and including event's marker (all of
 * them when event is NULL). */
static void fake_run(fake_stream_t *st, fake_event_t *event)
{
    while (st->count > 0) {
        fake_op_t *op = &st->ops[st->first];

        st->first = (st->first + 1) % FAKE_MAX_OPS;
        st->count--;
        if (op->event != NULL) {
            op->event->pending = 0;
            if (op->event == event) {
                return;
            }
        } else {
            fake_copy(op->dst, op->src, op->len);
        }
    }
}

#define FAKE_ERROR_MAP(X)                                                                          \
    X(cudaSuccess, "no error")                                                                     \
    X(cudaErrorInvalidValue, "invalid argument")                                                   \
    X(cudaErrorMemoryAllocation, "out of memory")                                                  \
    X(cudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA runtime version") \
    X(cudaErrorNoDevice, "no CUDA-capable device is detected")                                     \
    X(cudaErrorInvalidDevice, "invalid device ordinal")                                            \
    X(cudaErrorNotReady, "device not ready")                                                       \
    X(cudaErrorIllegalAddress, "an illegal memory access was encountered")

FAKE_API const char *cudaGetErrorName(cudaError_t e)
{
#define FAKE_NAME_(code, text) \
    if (e == code) {           \
        return #code;          \
    }
    FAKE_ERROR_MAP(FAKE_NAME_)
#undef FAKE_NAME_
    return "cudaErrorUnknown";
}

FAKE_API const char *cudaGetErrorString(cudaError_t e)
{
#define FAKE_TEXT_(code, text) \
    if (e == code) {           \
        return text;           \
    }
    FAKE_ERROR_MAP(FAKE_TEXT_)
#undef FAKE_TEXT_
    return "unknown error";
}

FAKE_API cudaError_t cudaRuntimeGetVersion(int *v)
{
    *v = CUDART_VERSION;
    return cudaSuccess;
}

FAKE_API cudaError_t cudaDriverGetVersion(int *v)
{
    *v = strcmp(fake_error_mode(), "nodriver") == 0 ? 0 : CUDART_VERSION;
    return cudaSuccess;
}

/* The error every call returns when the fake is set to fail, else success. */
static cudaError_t fake_status(void)
{
    if (strcmp(fake_error_mode(), "nodriver") == 0) {
        return cudaErrorInsufficientDriver;
    }
    if (strcmp(fake_error_mode(), "nodevice") == 0) {
        return cudaErrorNoDevice;
    }
    return fake_sticky ? cudaErrorIllegalAddress : cudaSuccess;
}

FAKE_API cudaError_t cudaGetDeviceCount(int *n)
{
    cudaError_t rc = fake_status();

    *n = rc == cudaSuccess ? fake_devices() : 0;
    return rc;
}

FAKE_API cudaError_t cudaGetDevice(int *dev)
{
    *dev = fake_current;
    return fake_status();
}

FAKE_API cudaError_t cudaSetDevice(int dev)
{
    if (dev < 0 || dev >= fake_devices()) {
        return cudaErrorInvalidDevice;
    }
    fake_current = dev;
    return fake_status();
}

FAKE_API cudaError_t cudaDeviceGetPCIBusId(char *buf, int len, int dev)
{
    if (dev < 0 || dev >= fake_devices()) {
        return cudaErrorInvalidDevice;
    }
    snprintf(buf, (size_t)len, "00000000:%02X:00.0", 0x53 + dev);
    return fake_status();
}

static cudaError_t fake_add(void *base, size_t len, size_t mapped, int device)
{
    if (fake_nregions == FAKE_MAX_REGIONS) {
        return cudaErrorMemoryAllocation;
    }
    fake_regions[fake_nregions++] = (fake_region_t){ base, len, mapped, fake_current, device };
    return cudaSuccess;
}

static void fake_remove(fake_region_t *r)
{
    *r = fake_regions[--fake_nregions];
}

FAKE_API cudaError_t cudaMalloc(void **p, size_t len)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), mapped = (len + page - 1) / page * page;
    cudaError_t rc = fake_status();
    void *base;

    if (rc != cudaSuccess) {
        return rc;
    }
    base = mmap(NULL, mapped ? mapped : page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
        return cudaErrorMemoryAllocation;
    }
    pthread_mutex_lock(&fake_lock);
    rc = fake_add(base, len, mapped ? mapped : page, 1);
    pthread_mutex_unlock(&fake_lock);
    *p = base;
    return rc;
}

FAKE_API cudaError_t cudaFree(void *p)
{
    fake_region_t *r;

    pthread_mutex_lock(&fake_lock);
    r = fake_find(p);
    if (r != NULL && r->device && r->base == p) {
        munmap(r->base, r->mapped);
        fake_remove(r);
    }
    pthread_mutex_unlock(&fake_lock);
    return r == NULL ? cudaErrorInvalidValue : cudaSuccess;
}

FAKE_API cudaError_t cudaMemset(void *p, int v, size_t len)
{
    pthread_mutex_lock(&fake_lock);
    fake_protect(p, len, PROT_READ | PROT_WRITE);
    memset(p, v, len);
    fake_protect(p, len, PROT_NONE);
    pthread_mutex_unlock(&fake_lock);
    return fake_status();
}

FAKE_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t len, enum cudaMemcpyKind kind)
{
    pthread_mutex_lock(&fake_lock);
    fake_copy(dst, src, len);
    pthread_mutex_unlock(&fake_lock);
    return fake_status();
}

FAKE_API cudaError_t cudaHostRegister(void *p, size_t len, unsigned int flags)
{
    cudaError_t rc = fake_status();

    pthread_mutex_lock(&fake_lock);
    if (rc == cudaSuccess) {
        rc = fake_add(p, len, len, 0);
    }
    pthread_mutex_unlock(&fake_lock);
    return rc;
}

FAKE_API cudaError_t cudaHostUnregister(void *p)
{
    fake_region_t *r;

    pthread_mutex_lock(&fake_lock);
    r = fake_find(p);
    if (r != NULL && !r->device) {
        fake_remove(r);
    }
    pthread_mutex_unlock(&fake_lock);
    return r == NULL ? cudaErrorInvalidValue : cudaSuccess;
}

FAKE_API cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p)
{
    fake_region_t *r;

    memset(a, 0, sizeof(*a));
    pthread_mutex_lock(&fake_lock);
    r = fake_find(p);
    a->type = r == NULL   ? cudaMemoryTypeUnregistered
              : r->device ? cudaMemoryTypeDevice
                          : cudaMemoryTypeHost;
    a->device = r != NULL ? r->dev : -1;
    a->devicePointer = r != NULL && r->device ? (void *)p : NULL;
    a->hostPointer = r != NULL && r->device ? NULL : (void *)p;
    pthread_mutex_unlock(&fake_lock);
    return fake_status();
}

FAKE_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    fake_stream_t *st = calloc(1, sizeof(*st));

    if (st == NULL || (st->ops = calloc(FAKE_MAX_OPS, sizeof(*st->ops))) == NULL) {
        free(st);
        return cudaErrorMemoryAllocation;
    }
    st->dev = fake_current;
    *s = (cudaStream_t)st;
    return fake_status();
}

FAKE_API cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    pthread_mutex_lock(&fake_lock);
    fake_run((fake_stream_t *)s, NULL);
    pthread_mutex_unlock(&fake_lock);
    return fake_status();
}

FAKE_API cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    fake_stream_t *st = (fake_stream_t *)s;

    cudaStreamSynchronize(s);
    free(st->ops);
    free(st);
    return cudaSuccess;
}

static cudaError_t fake_push(fake_stream_t *st, fake_op_t op)
{
    if (st->count == FAKE_MAX_OPS) {
        fake_run(st, NULL); /* a full queue drains, as a GPU would in time */
    }
    st->ops[(st->first + st->count++) % FAKE_MAX_OPS] = op;
    return cudaSuccess;
}

FAKE_API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t len,
                                     enum cudaMemcpyKind kind, cudaStream_t s)
{
    long fail_at = fake_number(getenv("KVXT_FAKE_CUDA_FAIL_COPY"), 0);
    cudaError_t rc;

    pthread_mutex_lock(&fake_lock);
    if (fail_at > 0 && ++fake_copies >= fail_at) {
        fake_sticky = 1;
    }
    rc = fake_status();
    if (rc == cudaSuccess) {
        rc = fake_push((fake_stream_t *)s, (fake_op_t){ dst, src, len, NULL });
    }
    pthread_mutex_unlock(&fake_lock);
    return rc;
}

FAKE_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
    fake_event_t *ev = calloc(1, sizeof(*ev));

    if (ev == NULL) {
        return cudaErrorMemoryAllocation;
    }
    *e = (cudaEvent_t)ev;
    return fake_status();
}

FAKE_API cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    free(e);
    return cudaSuccess;
}

FAKE_API cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    fake_event_t *ev = (fake_event_t *)e;
    cudaError_t rc;

    pthread_mutex_lock(&fake_lock);
    ev->stream = (fake_stream_t *)s;
    ev->queries = 0;
    ev->pending = 1;
    rc = fake_push(ev->stream, (fake_op_t){ NULL, NULL, 0, ev });
    pthread_mutex_unlock(&fake_lock);
    return rc == cudaSuccess ? fake_status() : rc;
}

FAKE_API cudaError_t cudaEventQuery(cudaEvent_t e)
{
    fake_event_t *ev = (fake_event_t *)e;
    cudaError_t rc = fake_status();

    pthread_mutex_lock(&fake_lock);
    if (rc == cudaSuccess && ev->pending &&
        ++ev->queries >= (unsigned)fake_number(getenv("KVXT_FAKE_CUDA_POLLS"), 3)) {
        fake_run(ev->stream, ev);
    }
    if (rc == cudaSuccess && ev->pending) {
        rc = cudaErrorNotReady;
    }
    pthread_mutex_unlock(&fake_lock);
    return rc;
}

FAKE_API cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    fake_event_t *ev = (fake_event_t *)e;

    pthread_mutex_lock(&fake_lock);
    if (ev->pending) {
        fake_run(ev->stream, ev);
    }
    pthread_mutex_unlock(&fake_lock);
    return fake_status();
}
