/*
 * host.c - host memory placed on a NUMA node: the staging area that CUDA
 * pages cross sits next to the GPU that copies into it.
 *
 * The memory is mapped, given a preferred node with mbind(2) before any
 * page exists, then touched so that every page is allocated there now. The
 * system call is used directly: kvx needs nothing else from libnuma.
 */
#include "config.h"

#include "mem.h"
#include "util/failure.h"
#include "util/log.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define HOST_MPOL_PREFERRED 1 /* <numaif.h>'s MPOL_PREFERRED */
#define HOST_MAX_NODE       1024

/* Prefers node numa for [ptr, ptr + len); 0 on success, else an errno. */
static int host_prefer(void *ptr, size_t len, int numa)
{
#ifdef SYS_mbind
    unsigned long mask[HOST_MAX_NODE / (8 * sizeof(unsigned long))];

    if (numa < 0 || numa >= HOST_MAX_NODE) {
        return EINVAL;
    }
    memset(mask, 0, sizeof(mask));
    mask[(size_t)numa / (8 * sizeof(unsigned long))] |=
        1ul << ((size_t)numa % (8 * sizeof(unsigned long)));
    if (syscall(SYS_mbind, ptr, len, HOST_MPOL_PREFERRED, mask, (unsigned long)HOST_MAX_NODE + 1,
                0ul) != 0) {
        return errno;
    }
    return 0;
#else
    return ENOSYS;
#endif
}

kvx_status_t mem_host_alloc(size_t len, int numa, void **ptr_p, int *placed_p, kvx_failure_t *why)
{
    void *ptr = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int err = 0, placed = 0;

    if (ptr == MAP_FAILED) {
        failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_INIT, strerror(errno),
                    "cannot map %zu bytes of host memory", len);
        return KVX_ERR_NO_MEMORY;
    }
    if (numa >= 0) {
        err = host_prefer(ptr, len, numa);
        placed = err == 0;
        if (!placed) {
            kvx_info("%zu bytes of host memory are not placed on NUMA node %d (mbind: %s)", len,
                     numa, strerror(err));
        }
    }
    /* Fault every page in now, on the preferred node, and zeroed. */
    memset(ptr, 0, len);
    *ptr_p = ptr;
    if (placed_p != NULL) {
        *placed_p = placed;
    }
    return KVX_OK;
}

void mem_host_free(void *ptr, size_t len)
{
    if (ptr != NULL) {
        munmap(ptr, len);
    }
}
