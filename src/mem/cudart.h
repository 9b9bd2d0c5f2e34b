/*
 * cudart.h - private to src/mem: the CUDA runtime kvx loaded with dlopen,
 * and the one macro through which src/mem calls it.
 *
 * kvx is built against the CUDA headers but never linked with libcudart:
 * cuda.c loads it when a context, kvx-info or a test first needs CUDA, so
 * that one build runs on nodes with and without a GPU or driver.
 */
#ifndef KVX_MEM_CUDART_H
#define KVX_MEM_CUDART_H

#include "config.h"

#ifdef KVX_HAVE_CUDA

#include <kvx.h>

#include <cuda_runtime_api.h>

#include "util/log.h"

/* The runtime functions kvx uses; each field has its function's type. */
#define MEM_CUDART_FUNCS(X)      \
    X(cudaGetErrorName)          \
    X(cudaGetErrorString)        \
    X(cudaRuntimeGetVersion)     \
    X(cudaDriverGetVersion)      \
    X(cudaGetDeviceCount)        \
    X(cudaGetDevice)             \
    X(cudaSetDevice)             \
    X(cudaDeviceGetPCIBusId)     \
    X(cudaPointerGetAttributes)  \
    X(cudaMalloc)                \
    X(cudaFree)                  \
    X(cudaMemset)                \
    X(cudaHostRegister)          \
    X(cudaHostUnregister)        \
    X(cudaStreamCreateWithFlags) \
    X(cudaStreamDestroy)         \
    X(cudaStreamSynchronize)     \
    X(cudaMemcpyAsync)           \
    X(cudaEventCreateWithFlags)  \
    X(cudaEventDestroy)          \
    X(cudaEventRecord)           \
    X(cudaEventQuery)            \
    X(cudaEventSynchronize)

typedef struct mem_cudart {
#define MEM_CUDART_FIELD_(fn) __typeof__(fn) *fn;
    MEM_CUDART_FUNCS(MEM_CUDART_FIELD_)
#undef MEM_CUDART_FIELD_
} mem_cudart_t;

/* The loaded table; valid once mem_cuda_open() returned KVX_OK. */
extern mem_cudart_t mem_cudart;

/* Logs a failed call with CUDA's name and message for the error, fills
 * *why (when not NULL; stage init, foreign = "cudaErrorX: message") and
 * returns KVX_ERR_NO_MEMORY for cudaErrorMemoryAllocation, else
 * KVX_ERR_CUDA. */
kvx_status_t mem_cuda_fail(kvx_failure_t *why, cudaError_t rc, const char *call);

/* "cudaErrorInsufficientDriver: CUDA driver version is insufficient for
 * CUDA runtime version", for a failure record's foreign field. */
void mem_cuda_error_text(cudaError_t rc, char *buf, size_t len);

/*
 * Calls a CUDA runtime function of the loaded table; on error logs the call
 * and CUDA's message and makes the expression's status a kvx status (the
 * model is UCX's UCT_CUDADRV_FUNC_LOG_ERR). why may be NULL. Usage:
 *     status = KVX_CUDA_CALL(why, cudaMalloc, &p, len);
 */
#define KVX_CUDA_CALL(why, fn, ...)                                            \
    ({                                                                         \
        cudaError_t kcu_rc_ = mem_cudart.fn(__VA_ARGS__);                      \
        kvx_status_t kcu_st_ = KVX_OK;                                         \
        if (kcu_rc_ != cudaSuccess) {                                          \
            kcu_st_ = mem_cuda_fail((why), kcu_rc_, #fn "(" #__VA_ARGS__ ")"); \
        }                                                                      \
        kcu_st_;                                                               \
    })

/* Makes dev the calling thread's current device. Restoring the previous
 * one could create a context on a device the process never used (a thread
 * that never chose a device reads device 0), so kvx does not: the threads
 * that call this are kvx's progress thread, which makes every copy, and
 * the thread that creates or destroys a context with a CUDA pool. */
kvx_status_t mem_cuda_use(int dev, kvx_failure_t *why);

#endif /* KVX_HAVE_CUDA */

#endif
