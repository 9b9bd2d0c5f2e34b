/*
 * mem.h - memory kvx moves: host pools and, when built with CUDA, GPU pools.
 *
 * The CUDA runtime is loaded with dlopen on first use (cuda.c), so one kvx
 * build runs on nodes with and without a GPU or driver: without them every
 * CUDA function here fails with KVX_ERR_CUDA and a sentence that starts
 * "CUDA unavailable: " and ends with CUDA's own error. A build without
 * CUDA answers KVX_ERR_UNSUPPORTED.
 *
 * None of these functions is thread safe with respect to one object (a
 * copier); the core calls them under its context lock.
 */
#ifndef KVX_MEM_MEM_H
#define KVX_MEM_MEM_H

#include <kvx.h>

#include <stddef.h>
#include <stdint.h>

/* ---- the CUDA runtime (cuda.c) --------------------------------------- */

/* Loads the CUDA runtime once per process and checks that it sees a
 * device. library: a libcudart to load instead of the default search (the
 * build's libcudart.so.N, then the loader path); NULL or "" for the
 * default. The outcome of the first call is kept: later calls return it. */
kvx_status_t mem_cuda_open(const char *library, kvx_failure_t *why);

/* "not built"; or "runtime 13.0, driver 12.8, 8 devices (libcudart.so.13)";
 * or the runtime version and why CUDA is unavailable. Loads the runtime. */
void mem_cuda_version(const char *library, char *buf, size_t len);

/* Checks that dev is a device of this node and gives its PCI bus id
 * ("0000:53:00.0", as cudaDeviceGetPCIBusId writes it). Makes dev the
 * calling thread's current device, so that nothing kvx does creates a
 * context on another. */
kvx_status_t mem_cuda_device(int dev, char *busid, size_t len, kvx_failure_t *why);

/* Device memory on dev, zeroed. */
kvx_status_t mem_cuda_alloc(int dev, size_t len, void **ptr_p, kvx_failure_t *why);
void mem_cuda_free(int dev, void *ptr);

/* Checks that [ptr, ptr + len) is device memory of dev (its first and last
 * bytes); KVX_ERR_INVALID_PARAM with a sentence naming what (e.g.
 * "buffers[3]") and what the memory is instead. */
kvx_status_t mem_cuda_check(const void *ptr, size_t len, int dev, const char *what,
                            kvx_failure_t *why);

/* Page-locks host memory so that dev's copy engines (and every device's)
 * reach it. */
kvx_status_t mem_cuda_pin(void *ptr, size_t len, int dev, kvx_failure_t *why);
void mem_cuda_unpin(void *ptr);

/* Has a cudaEvent_t the engine recorded completed? KVX_OK: yes;
 * KVX_INPROGRESS: not yet; else the query failed (*why says how). */
kvx_status_t mem_cuda_event_done(void *event, kvx_failure_t *why);

/* ---- host memory (host.c) --------------------------------------------- */

/* Page-aligned host memory, zeroed, placed on NUMA node numa (an OS index;
 * -1: wherever the process's policy puts it). Placement is a preference:
 * when the kernel refuses it the memory is allocated anyway and
 * *placed_p (may be NULL) says 0. */
kvx_status_t mem_host_alloc(size_t len, int numa, void **ptr_p, int *placed_p, kvx_failure_t *why);
void mem_host_free(void *ptr, size_t len);

/* ---- copy engines (copier.c) ------------------------------------------ */

/*
 * A copy engine moves bytes between a pool and host staging memory,
 * asynchronously and in order. Copies are grouped into batches by fences;
 * a batch's ticket (1, 2, ...) completes after every earlier one.
 *
 *  - host: memcpy. A copy is made when a poll or wait finds its batch
 *    fenced, not when it is asked for: like a GPU's, its bytes are there
 *    only once its ticket completed, so the staging protocol is tested
 *    with host memory exactly as it runs with CUDA.
 *  - CUDA: cudaMemcpyAsync on a stream of kvx's own, one event per batch.
 *
 * Source and destination must stay untouched until the ticket completed.
 */
typedef struct mem_copier mem_copier_t;

kvx_status_t mem_copier_create(kvx_mem_type_t type, int dev, mem_copier_t **copier_p,
                               kvx_failure_t *why);
/* Waits for every copy, then frees the engine; NULL is allowed. */
void mem_copier_destroy(mem_copier_t *copier);
/* "memcpy", "cudaMemcpyAsync on device 0". */
const char *mem_copier_name(const mem_copier_t *copier);
/* Queues a copy of len bytes. */
kvx_status_t mem_copier_copy(mem_copier_t *copier, void *dst, const void *src, size_t len,
                             kvx_failure_t *why);
/* Closes the batch of copies queued since the last fence; *ticket_p is its
 * ticket (the previous one when nothing was queued). */
kvx_status_t mem_copier_fence(mem_copier_t *copier, uint64_t *ticket_p, kvx_failure_t *why);
/* The highest ticket that completed, with every earlier one. Never blocks. */
kvx_status_t mem_copier_poll(mem_copier_t *copier, uint64_t *done_p, kvx_failure_t *why);
/* Blocks until ticket completed (and every earlier one). */
kvx_status_t mem_copier_wait(mem_copier_t *copier, uint64_t ticket, kvx_failure_t *why);

#endif
