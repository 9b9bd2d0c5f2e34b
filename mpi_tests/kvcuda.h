/*
 * kvcuda.h - the few CUDA runtime calls the multi-rank tests make to fill
 * and read device pools: loaded with dlopen, like kvx does, so that a test
 * binary runs (and skips, exit 77) where there is no GPU or driver.
 *
 * The runtime is KVXT_CUDA_LIBRARY when set (a case sets it to the same
 * library as KVX_CUDA_LIBRARY, e.g. tests' fake runtime), else
 * libcudart.so.KVXT_CUDART_MAJOR from KVXT_CUDA_LIBDIR, then from the
 * loader path.
 */
#ifndef KVX_TESTS_KVCUDA_H
#define KVX_TESTS_KVCUDA_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef KVXT_CUDA_LIBDIR
#define KVXT_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif
#ifndef KVXT_CUDART_MAJOR
#define KVXT_CUDART_MAJOR 13
#endif

#define KVC_MEMCPY_DEFAULT 4 /* cudaMemcpyDefault */

typedef struct kvc {
    int (*get_device_count)(int *);
    int (*set_device)(int);
    int (*malloc_)(void **, size_t);
    int (*free_)(void *);
    int (*memcpy_)(void *, const void *, size_t, int);
    const char *(*error_string)(int);
    const char *(*error_name)(int);
    /* For layer-wise hand-overs with ready events (t_rooms --layerwise). */
    int (*stream_create)(void **, unsigned);
    int (*memcpy_async)(void *, const void *, size_t, int, void *);
    int (*event_create)(void **, unsigned);
    int (*event_record)(void *, void *);
    int (*event_destroy)(void *);
    int (*stream_destroy)(void *);
    int devices;
} kvc_t;

static kvc_t kvc;

/* Loads the runtime and counts devices: 0, or -1 with the reason in why. */
static inline int kvc_open(char *why, size_t len)
{
    const char *lib = getenv("KVXT_CUDA_LIBRARY");
    char name[512];
    void *h = NULL;
    int rc;

    if (lib != NULL && *lib != '\0') {
        h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    } else {
        snprintf(name, sizeof(name), "%s/libcudart.so.%d", KVXT_CUDA_LIBDIR, KVXT_CUDART_MAJOR);
        h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (h == NULL) {
            snprintf(name, sizeof(name), "libcudart.so.%d", KVXT_CUDART_MAJOR);
            h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        }
    }
    if (h == NULL) {
        snprintf(why, len, "CUDA unavailable: cannot load the CUDA runtime: %s", dlerror());
        return -1;
    }
    *(void **)&kvc.get_device_count = dlsym(h, "cudaGetDeviceCount");
    *(void **)&kvc.set_device = dlsym(h, "cudaSetDevice");
    *(void **)&kvc.malloc_ = dlsym(h, "cudaMalloc");
    *(void **)&kvc.free_ = dlsym(h, "cudaFree");
    *(void **)&kvc.memcpy_ = dlsym(h, "cudaMemcpy");
    *(void **)&kvc.error_string = dlsym(h, "cudaGetErrorString");
    *(void **)&kvc.error_name = dlsym(h, "cudaGetErrorName");
    *(void **)&kvc.stream_create = dlsym(h, "cudaStreamCreateWithFlags");
    *(void **)&kvc.memcpy_async = dlsym(h, "cudaMemcpyAsync");
    *(void **)&kvc.event_create = dlsym(h, "cudaEventCreateWithFlags");
    *(void **)&kvc.event_record = dlsym(h, "cudaEventRecord");
    *(void **)&kvc.event_destroy = dlsym(h, "cudaEventDestroy");
    *(void **)&kvc.stream_destroy = dlsym(h, "cudaStreamDestroy");
    if (kvc.get_device_count == NULL || kvc.set_device == NULL || kvc.malloc_ == NULL ||
        kvc.free_ == NULL || kvc.memcpy_ == NULL || kvc.error_string == NULL ||
        kvc.error_name == NULL || kvc.stream_create == NULL || kvc.memcpy_async == NULL ||
        kvc.event_create == NULL || kvc.event_record == NULL || kvc.event_destroy == NULL ||
        kvc.stream_destroy == NULL) {
        snprintf(why, len, "the CUDA runtime lacks a function the tests use");
        return -1;
    }
    rc = kvc.get_device_count(&kvc.devices);
    /* As kvx says it: "CUDA unavailable: " and CUDA's error. */
    if (rc != 0) {
        snprintf(why, len, "CUDA unavailable: %s: %s", kvc.error_string(rc), kvc.error_name(rc));
        return -1;
    }
    if (kvc.devices == 0) {
        snprintf(why, len, "CUDA unavailable: no CUDA device");
        return -1;
    }
    return 0;
}

/* Copies between host and device memory (either way); exits on error. */
static inline void kvc_copy(void *dst, const void *src, size_t len)
{
    int rc = kvc.memcpy_(dst, src, len, KVC_MEMCPY_DEFAULT);

    if (rc != 0) {
        fprintf(stderr, "cudaMemcpy of %zu bytes failed: %s\n", len, kvc.error_string(rc));
        exit(1);
    }
}

/* Queues a copy on stream (either way); exits on error. */
static inline void kvc_copy_async(void *dst, const void *src, size_t len, void *stream)
{
    int rc = kvc.memcpy_async(dst, src, len, KVC_MEMCPY_DEFAULT, stream);

    if (rc != 0) {
        fprintf(stderr, "cudaMemcpyAsync of %zu bytes failed: %s\n", len, kvc.error_string(rc));
        exit(1);
    }
}

/* Device memory of dev; exits on error. */
static inline void *kvc_alloc(int dev, size_t len)
{
    void *p = NULL;
    int rc = kvc.set_device(dev);

    if (rc == 0) {
        rc = kvc.malloc_(&p, len);
    }
    if (rc != 0) {
        fprintf(stderr, "cudaMalloc of %zu bytes on device %d failed: %s\n", len, dev,
                kvc.error_string(rc));
        exit(1);
    }
    return p;
}

#endif
