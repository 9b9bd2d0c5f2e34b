/*
 * cuda.c - the CUDA runtime, loaded with dlopen so that one kvx build runs
 * on nodes with and without a GPU: devices, device memory, pointer checks,
 * page-locking. Every call goes through KVX_CUDA_CALL (cudart.h).
 */
#include "config.h"

#include "mem.h"
#include "util/failure.h"
#include "util/log.h"

#include <stdio.h>
#include <string.h>

#ifdef KVX_HAVE_CUDA

#include "cudart.h"

#include <dlfcn.h>
#include <pthread.h>

mem_cudart_t mem_cudart;

/* The outcome of the first mem_cuda_open(), kept for the process. */
static pthread_mutex_t cuda_lock = PTHREAD_MUTEX_INITIALIZER;
static int cuda_tried;
static kvx_status_t cuda_status;
static kvx_failure_t cuda_why;
static char cuda_path[512]; /* the file loaded, "" when none */
static int cuda_devices;

void mem_cuda_error_text(cudaError_t rc, char *buf, size_t len)
{
    snprintf(buf, len, "%s: %s", mem_cudart.cudaGetErrorName(rc),
             mem_cudart.cudaGetErrorString(rc));
}

kvx_status_t mem_cuda_fail(kvx_failure_t *why, cudaError_t rc, const char *call)
{
    kvx_status_t status = rc == cudaErrorMemoryAllocation ? KVX_ERR_NO_MEMORY : KVX_ERR_CUDA;
    char text[128];

    mem_cuda_error_text(rc, text, sizeof(text));
    kvx_error("%s failed: %s", call, text);
    if (why != NULL) {
        failure_set(why, status, KVX_STAGE_INIT, text, "%s failed", call);
    }
    return status;
}

kvx_status_t mem_cuda_use(int dev, kvx_failure_t *why)
{
    int current = -1;
    kvx_status_t status = KVX_CUDA_CALL(why, cudaGetDevice, &current);

    if (status == KVX_OK && current != dev) {
        status = KVX_CUDA_CALL(why, cudaSetDevice, dev);
    }
    return status;
}

/* Sets the kept outcome to "CUDA unavailable: ..." (lock held). */
static kvx_status_t cuda_unavailable(const char *foreign, const char *fmt, const char *arg)
{
    char text[sizeof(cuda_why.text)];

    snprintf(text, sizeof(text), fmt, arg);
    failure_set(&cuda_why, KVX_ERR_CUDA, KVX_STAGE_INIT, foreign, "CUDA unavailable: %s", text);
    kvx_debug("%s", cuda_why.text);
    return KVX_ERR_CUDA;
}

/* dlopens the first runtime found: the one asked for, else the build's
 * major version from the build's directory, then from the loader path. */
static void *cuda_dlopen(const char *library, char *err, size_t len)
{
    char names[3][512];
    int n = 0;
    void *h = NULL;

    if (library != NULL && library[0] != '\0') {
        snprintf(names[n++], sizeof(names[0]), "%s", library);
    } else {
        snprintf(names[n++], sizeof(names[0]), "%s/libcudart.so.%d", KVX_CUDA_LIBDIR,
                 CUDART_VERSION / 1000);
        snprintf(names[n++], sizeof(names[0]), "libcudart.so.%d", CUDART_VERSION / 1000);
        snprintf(names[n++], sizeof(names[0]), "libcudart.so");
    }
    err[0] = '\0';
    for (int i = 0; i < n && h == NULL; i++) {
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h == NULL && err[0] == '\0') {
            snprintf(err, len, "%s", dlerror());
        }
    }
    return h;
}

static kvx_status_t cuda_load(const char *library)
{
    char err[512];
    void *h = cuda_dlopen(library, err, sizeof(err));
    Dl_info info;

    if (h == NULL) {
        return cuda_unavailable(err, "cannot load the CUDA runtime (%s)", err);
    }
#define MEM_CUDART_SYM_STR_(x) #x
#define MEM_CUDART_SYM_STR(x)  MEM_CUDART_SYM_STR_(x)
#define MEM_CUDART_RESOLVE_(fn)                                                             \
    *(void **)&mem_cudart.fn = dlsym(h, MEM_CUDART_SYM_STR(fn));                            \
    if (mem_cudart.fn == NULL) {                                                            \
        return cuda_unavailable(NULL, "the CUDA runtime lacks %s", MEM_CUDART_SYM_STR(fn)); \
    }
    MEM_CUDART_FUNCS(MEM_CUDART_RESOLVE_)
#undef MEM_CUDART_RESOLVE_
    if (dladdr(*(void **)&mem_cudart.cudaMalloc, &info) != 0 && info.dli_fname != NULL) {
        snprintf(cuda_path, sizeof(cuda_path), "%s", info.dli_fname);
    }
    return KVX_OK;
}

/* Loads the runtime and counts the devices (lock held). */
static kvx_status_t cuda_probe(const char *library)
{
    cudaError_t rc;

    if (cuda_load(library) != KVX_OK) {
        return KVX_ERR_CUDA;
    }
    rc = mem_cudart.cudaGetDeviceCount(&cuda_devices);
    if (rc != cudaSuccess) {
        cuda_devices = 0;
        return cuda_unavailable(mem_cudart.cudaGetErrorName(rc), "%s",
                                mem_cudart.cudaGetErrorString(rc));
    }
    if (cuda_devices == 0) {
        return cuda_unavailable(NULL, "%s", "no CUDA device");
    }
    kvx_debug("CUDA runtime %s: %d devices", cuda_path, cuda_devices);
    return KVX_OK;
}

kvx_status_t mem_cuda_open(const char *library, kvx_failure_t *why)
{
    kvx_status_t status;

    pthread_mutex_lock(&cuda_lock);
    if (!cuda_tried) {
        cuda_tried = 1;
        cuda_status = cuda_probe(library);
    }
    status = cuda_status;
    if (status != KVX_OK && why != NULL) {
        /* The origin is whoever asks now, not the first caller. */
        failure_set(why, cuda_why.status, KVX_STAGE_INIT, cuda_why.foreign, "%s", cuda_why.text);
    }
    pthread_mutex_unlock(&cuda_lock);
    return status;
}

void mem_cuda_version(const char *library, char *buf, size_t len)
{
    int runtime = 0, driver = 0;
    size_t o;
    kvx_status_t status = mem_cuda_open(library, NULL);

    if (cuda_path[0] == '\0') {
        snprintf(buf, len, "%s", cuda_why.text);
        return;
    }
    mem_cudart.cudaRuntimeGetVersion(&runtime);
    mem_cudart.cudaDriverGetVersion(&driver);
    if (status == KVX_OK) {
        o = (size_t)snprintf(buf, len, "runtime %d.%d, driver %d.%d, %d device%s", runtime / 1000,
                             runtime % 1000 / 10, driver / 1000, driver % 1000 / 10, cuda_devices,
                             cuda_devices == 1 ? "" : "s");
    } else if (driver == 0) {
        o = (size_t)snprintf(buf, len, "runtime %d.%d, no driver: %s", runtime / 1000,
                             runtime % 1000 / 10, cuda_why.text);
    } else {
        o = (size_t)snprintf(buf, len, "runtime %d.%d, driver %d.%d: %s", runtime / 1000,
                             runtime % 1000 / 10, driver / 1000, driver % 1000 / 10, cuda_why.text);
    }
    /* Which libcudart, when there is room for it. */
    if (o + strlen(cuda_path) + 3 < len) {
        snprintf(buf + o, len - o, " (%s)", cuda_path);
    }
}

kvx_status_t mem_cuda_device(int dev, char *busid, size_t len, kvx_failure_t *why)
{
    kvx_status_t status = mem_cuda_open(NULL, why);

    if (status != KVX_OK) {
        return status;
    }
    if (dev < 0 || dev >= cuda_devices) {
        failure_set(why, KVX_ERR_INVALID_PARAM, KVX_STAGE_INIT, NULL,
                    "cuda_device %d: this node has CUDA devices 0 to %d", dev, cuda_devices - 1);
        return KVX_ERR_INVALID_PARAM;
    }
    status = KVX_CUDA_CALL(why, cudaDeviceGetPCIBusId, busid, (int)len, dev);
    return status == KVX_OK ? mem_cuda_use(dev, why) : status;
}

kvx_status_t mem_cuda_alloc(int dev, size_t len, void **ptr_p, kvx_failure_t *why)
{
    void *ptr = NULL;
    kvx_status_t status = mem_cuda_open(NULL, why);

    if (status == KVX_OK) {
        status = mem_cuda_use(dev, why);
    }
    if (status != KVX_OK) {
        return status;
    }
    status = KVX_CUDA_CALL(why, cudaMalloc, &ptr, len);
    if (status == KVX_OK) {
        status = KVX_CUDA_CALL(why, cudaMemset, ptr, 0, len);
        if (status != KVX_OK) {
            KVX_CUDA_CALL(NULL, cudaFree, ptr);
        }
    }
    if (status != KVX_OK) {
        if (why != NULL) {
            snprintf(why->text, sizeof(why->text), "cannot allocate %zu bytes on CUDA device %d",
                     len, dev);
        }
        return status;
    }
    *ptr_p = ptr;
    return KVX_OK;
}

void mem_cuda_free(int dev, void *ptr)
{

    if (ptr != NULL && mem_cuda_use(dev, NULL) == KVX_OK) {
        KVX_CUDA_CALL(NULL, cudaFree, ptr);
    }
}

/* Says what the memory at p is when it is not device memory of dev. */
static kvx_status_t cuda_check_one(const void *p, int dev, const char *what, const char *which,
                                   kvx_failure_t *why)
{
    struct cudaPointerAttributes a;
    kvx_status_t status;

    memset(&a, 0, sizeof(a));
    status = KVX_CUDA_CALL(why, cudaPointerGetAttributes, &a, p);
    if (status != KVX_OK) {
        return status;
    }
    if (a.type == cudaMemoryTypeDevice && a.device == dev) {
        return KVX_OK;
    }
    if (a.type == cudaMemoryTypeDevice) {
        failure_set(why, KVX_ERR_INVALID_PARAM, KVX_STAGE_INIT, NULL,
                    "%s: its %s byte (%p) is memory of CUDA device %d, not of cuda_device %d", what,
                    which, p, a.device, dev);
    } else {
        failure_set(why, KVX_ERR_INVALID_PARAM, KVX_STAGE_INIT, NULL,
                    "%s: its %s byte (%p) is %s, not device memory of CUDA device %d", what, which,
                    p,
                    a.type == cudaMemoryTypeManaged ? "CUDA managed memory"
                    : a.type == cudaMemoryTypeHost  ? "page-locked host memory"
                                                    : "host memory",
                    dev);
    }
    return KVX_ERR_INVALID_PARAM;
}

kvx_status_t mem_cuda_check(const void *ptr, size_t len, int dev, const char *what,
                            kvx_failure_t *why)
{
    kvx_status_t status = mem_cuda_open(NULL, why);

    if (status == KVX_OK) {
        status = cuda_check_one(ptr, dev, what, "first", why);
    }
    if (status == KVX_OK && len > 1) {
        status = cuda_check_one((const char *)ptr + len - 1, dev, what, "last", why);
    }
    return status;
}

kvx_status_t mem_cuda_pin(void *ptr, size_t len, int dev, kvx_failure_t *why)
{
    kvx_status_t status = mem_cuda_open(NULL, why);

    if (status == KVX_OK) {
        status = mem_cuda_use(dev, why);
    }
    if (status == KVX_OK) {
        status = KVX_CUDA_CALL(why, cudaHostRegister, ptr, len, cudaHostRegisterPortable);
    }
    return status;
}

void mem_cuda_unpin(void *ptr)
{
    KVX_CUDA_CALL(NULL, cudaHostUnregister, ptr);
}

kvx_status_t mem_cuda_event_done(void *event, kvx_failure_t *why)
{
    cudaError_t rc = mem_cudart.cudaEventQuery((cudaEvent_t)event);

    if (rc == cudaSuccess) {
        return KVX_OK;
    }
    if (rc == cudaErrorNotReady) {
        return KVX_INPROGRESS;
    }
    return mem_cuda_fail(why, rc, "cudaEventQuery");
}

#else /* !KVX_HAVE_CUDA */

static kvx_status_t cuda_not_built(kvx_failure_t *why)
{
    if (why != NULL) {
        failure_set(why, KVX_ERR_UNSUPPORTED, KVX_STAGE_INIT, NULL,
                    "this kvx was built without CUDA (configure --with-cuda)");
    }
    return KVX_ERR_UNSUPPORTED;
}

kvx_status_t mem_cuda_open(const char *library, kvx_failure_t *why)
{
    return cuda_not_built(why);
}

void mem_cuda_version(const char *library, char *buf, size_t len)
{
    snprintf(buf, len, "not built");
}

kvx_status_t mem_cuda_device(int dev, char *busid, size_t len, kvx_failure_t *why)
{
    return cuda_not_built(why);
}

kvx_status_t mem_cuda_alloc(int dev, size_t len, void **ptr_p, kvx_failure_t *why)
{
    return cuda_not_built(why);
}

void mem_cuda_free(int dev, void *ptr)
{
}

kvx_status_t mem_cuda_check(const void *ptr, size_t len, int dev, const char *what,
                            kvx_failure_t *why)
{
    return cuda_not_built(why);
}

kvx_status_t mem_cuda_pin(void *ptr, size_t len, int dev, kvx_failure_t *why)
{
    return cuda_not_built(why);
}

void mem_cuda_unpin(void *ptr)
{
}

kvx_status_t mem_cuda_event_done(void *event, kvx_failure_t *why)
{
    (void)event;
    return cuda_not_built(why);
}

#endif /* KVX_HAVE_CUDA */
