/*
 * t_cuda.c - CUDA pools at creation and when a copy fails, every outcome the
 * same on every rank.
 *
 *   t_cuda create     Where CUDA is unavailable (no driver, no device): a
 *                     context with a CUDA pool fails with KVX_ERR_CUDA and
 *                     "CUDA unavailable: <CUDA's error>" on every rank, and a
 *                     host pool still works. Where it is available: a
 *                     cuda_device the node lacks, host memory given as
 *                     device buffers, another device's memory, a slab too
 *                     short (--short-slab: only where nothing lies beyond
 *                     an allocation, i.e. the fake runtime), and
 *                     KVX_MEM_PATH=direct where UCX cannot access CUDA
 *                     memory each fail with the documented status and
 *                     reason; a pool kvx allocates reports its path.
 *   t_cuda copyfail-prefill | copyfail-decode
 *                     (fake runtime) the given side's copies fail from the
 *                     first one on, as after a sticky device error: the
 *                     room fails on both sides with KVX_ERR_CUDA and CUDA's
 *                     error as its reason, and nothing hangs.
 *
 * The job layout comes from KVX_LAYOUT (prefill:1x1,decode:1x1 for copyfail).
 */
#include <kvx.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvcuda.h"
#include "testlib.h"

int tl_rank, tl_failures;
static int tl_size;

static void base(kvx_ctx_params_t *p)
{
    kvx_ctx_params_init(p);
    p->kv.layers = 2;
    p->kv.page_size = 16;
    p->kv.kv_heads = 2;
    p->kv.head_dim = 16;
    p->num_pages = 8;
    p->aux_slots = 2;
    p->aux_item_size = 8;
}

/* Every rank must hold the same line, which must contain want. */
static void same_everywhere(const char *what, const char *line, const char *want)
{
    char *all = malloc(512 * (size_t)tl_size);

    MPI_Allgather(line, 512, MPI_CHAR, all, 512, MPI_CHAR, MPI_COMM_WORLD);
    for (int r = 0; r < tl_size; r++) {
        TL_CHECK(strcmp(all + 512 * r, all) == 0, "%s: rank %d says '%s', rank 0 '%s'", what, r,
                 all + 512 * r, all);
    }
    TL_CHECK(strstr(line, want) != NULL, "%s: '%s' lacks '%s'", what, line, want);
    if (tl_rank == 0) {
        printf("%-16s every rank: %s\n", what, all);
    }
    free(all);
}

/* Creation that must fail the same way everywhere. */
static void expect_fails(const char *what, const kvx_ctx_params_t *p, kvx_status_t status,
                         const char *want)
{
    kvx_ctx_t *ctx = NULL;
    kvx_failure_t why;
    char line[512] = "";
    kvx_status_t st = kvx_ctx_create(MPI_COMM_WORLD, p, &ctx, &why);

    TL_CHECK(st == status, "%s: create returned %s, expected %s", what, kvx_status_name(st),
             kvx_status_name(status));
    if (st == KVX_OK) {
        kvx_ctx_destroy(ctx);
        return;
    }
    kvx_failure_format(&why, line, sizeof(line));
    same_everywhere(what, line, want);
}

static void expect_works(const char *what, const kvx_ctx_params_t *p, kvx_mem_path_t *path_p)
{
    kvx_ctx_t *ctx = NULL;
    kvx_failure_t why;
    char line[512];

    if (kvx_ctx_create(MPI_COMM_WORLD, p, &ctx, &why) != KVX_OK) {
        kvx_failure_format(&why, line, sizeof(line));
        TL_CHECK(0, "%s: create failed: %s", what, line);
        return;
    }
    if (path_p != NULL) {
        TL_CHECK(kvx_ctx_mem_path(ctx, path_p, line, sizeof(line)) == KVX_OK, "%s: no path", what);
        if (tl_rank == 0) {
            printf("%-16s works: memory path %s: %s\n", what, kvx_mem_path_name(*path_p), line);
        }
    }
    kvx_ctx_destroy(ctx);
}

/* CUDA is unavailable here: say so on every rank, and host pools work. */
static void create_unavailable(const char *probe)
{
    kvx_ctx_params_t p;

    base(&p);
    p.mem_type = KVX_MEM_CUDA;
    expect_fails("unavailable", &p, KVX_ERR_CUDA, "CUDA unavailable: ");
    expect_fails("unavailable", &p, KVX_ERR_CUDA, probe + strlen("CUDA unavailable: "));
    base(&p);
    expect_works("host pool", &p, NULL);
}

static void create_checks(int short_slab)
{
    kvx_ctx_params_t p;
    kvx_mem_path_t probe, path;
    char want[256], reason[512];
    size_t buf = 8 * 16 * 2 * 16 * 2; /* num_pages x page_size x heads x head_dim x bf16 */
    void *host[4], *dev[4], *other[4];
    int d = tl_rank % kvc.devices, o = (d + 1) % kvc.devices;

    base(&p);
    p.mem_type = KVX_MEM_CUDA;
    p.cuda_device = kvc.devices;
    snprintf(want, sizeof(want), "cuda_device %d: this node has CUDA devices 0 to %d", kvc.devices,
             kvc.devices - 1);
    expect_fails("no such device", &p, KVX_ERR_INVALID_PARAM, want);

    for (int b = 0; b < 4; b++) {
        host[b] = calloc(1, buf);
        dev[b] = kvc_alloc(d, buf);
        other[b] = kvc_alloc(o, buf);
    }
    p.cuda_device = d;
    p.buffers = host;
    expect_fails("host buffers", &p, KVX_ERR_INVALID_PARAM,
                 "buffers[0] (layer 0, component 0): its first byte");
    expect_fails("host buffers", &p, KVX_ERR_INVALID_PARAM, "is host memory, not device memory");
    if (kvc.devices > 1) {
        p.buffers = other;
        expect_fails("other device", &p, KVX_ERR_INVALID_PARAM, "is memory of CUDA device");
        expect_fails("other device", &p, KVX_ERR_INVALID_PARAM, "not of cuda_device");
    }
    if (short_slab) {
        p.buffers = NULL;
        p.slab = dev[0]; /* one buffer's worth, for four */
        expect_fails("short slab", &p, KVX_ERR_INVALID_PARAM, "slab: its last byte");
    }
    TL_CHECK(kvx_mem_path_probe(KVX_MEM_CUDA, &probe, reason, sizeof(reason)) == KVX_OK,
             "probe: %s", reason);
    if (probe == KVX_MEM_PATH_STAGED) {
        base(&p);
        p.mem_type = KVX_MEM_CUDA;
        p.cuda_device = d;
        setenv("KVX_MEM_PATH", "direct", 1);
        expect_fails("forced direct", &p, KVX_ERR_UNSUPPORTED, "KVX_MEM_PATH=direct, but UCX");
        unsetenv("KVX_MEM_PATH");
    }
    base(&p);
    p.mem_type = KVX_MEM_CUDA;
    p.cuda_device = d;
    p.buffers = dev;
    expect_works("caller buffers", &p, &path);
    TL_CHECK(path == probe, "the job's path %s is not the probe's %s", kvx_mem_path_name(path),
             kvx_mem_path_name(probe));
    p.buffers = NULL;
    expect_works("kvx allocates", &p, &path);
    for (int b = 0; b < 4; b++) {
        free(host[b]);
        kvc.free_(dev[b]);
        kvc.free_(other[b]);
    }
}

/* One room whose copies fail on one side (KVXT_FAKE_CUDA_FAIL_COPY). */
static void copyfail(kvx_role_t failing)
{
    kvx_ctx_params_t p;
    kvx_identity_t id;
    kvx_failure_t why;
    kvx_ctx_t *ctx;
    kvx_room_state_t st = KVX_ROOM_BOOTSTRAPPING;
    kvx_status_t cst;
    uint32_t pages[4] = { 1, 2, 3, 5 };
    uint64_t aux = 7;
    char line[512] = "";
    double start;

    base(&p);
    p.mem_type = KVX_MEM_CUDA;
    if (kvx_ctx_create(MPI_COMM_WORLD, &p, &ctx, &why) != KVX_OK) {
        kvx_failure_format(&why, line, sizeof(line));
        TL_CHECK(0, "create failed: %s", line);
        return;
    }
    kvx_ctx_identity(ctx, &id);
    if (id.role == failing) {
        setenv("KVXT_FAKE_CUDA_FAIL_COPY", "1", 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (id.role == KVX_ROLE_DECODE) {
        TL_CHECK(kvx_room_recv_open(ctx, 1, 0, pages, 4, 0) == KVX_OK, "recv_open");
    } else {
        TL_CHECK(kvx_room_send_open(ctx, 1, 0, 4) == KVX_OK, "send_open");
        TL_CHECK(kvx_room_send_chunk(ctx, 1, pages, 4, &aux, sizeof(aux)) == KVX_OK, "chunk");
    }
    start = tl_now();
    while (kvx_room_poll(ctx, 1, &st) == KVX_OK && st != KVX_ROOM_FAILED &&
           st != KVX_ROOM_SUCCESS && tl_now() - start < 30) {
        usleep(1000);
    }
    TL_CHECK(st == KVX_ROOM_FAILED, "the room is %s", kvx_room_state_name(st));
    if (kvx_room_failure(ctx, 1, &why) == KVX_OK) {
        kvx_failure_format(&why, line, sizeof(line));
        TL_CHECK(why.status == KVX_ERR_CUDA, "status %s", kvx_status_name(why.status));
        TL_CHECK(strstr(why.foreign, "cudaErrorIllegalAddress") != NULL, "reason: %s", line);
        TL_CHECK(why.origin_role == failing, "origin: %s", line);
        printf("rank %d: %s\n", tl_rank, line);
    }
    /* The pages are released once the copies into them stopped (a sticky
     * error stops them all): within the drain, never quarantined. */
    start = tl_now();
    while ((cst = kvx_room_close(ctx, 1)) == KVX_ERR_BUSY && tl_now() - start < 30) {
        usleep(1000);
    }
    TL_CHECK(cst == KVX_OK, "close: %s after %.1f s", kvx_status_name(cst), tl_now() - start);
    kvx_ctx_destroy(ctx);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "create";
    int short_slab = argc > 2 && strcmp(argv[2], "--short-slab") == 0;
    char why[256] = "";
    kvx_mem_path_t path;
    int bad;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &tl_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &tl_size);
    if (kvx_mem_path_probe(KVX_MEM_CUDA, &path, why, sizeof(why)) == KVX_ERR_UNSUPPORTED) {
        printf("SKIP: t_cuda: %s\n", why);
        MPI_Finalize();
        return 77;
    }
    if (strcmp(mode, "create") == 0 && strncmp(why, "CUDA unavailable: ", 18) == 0) {
        create_unavailable(why);
    } else if (kvc_open(why, sizeof(why)) != 0) {
        TL_CHECK(0, "kvx can use CUDA, but the test cannot: %s", why);
    } else if (strcmp(mode, "create") == 0) {
        create_checks(short_slab);
    } else if (strcmp(mode, "copyfail-prefill") == 0 || strcmp(mode, "copyfail-decode") == 0) {
        copyfail(mode[9] == 'p' ? KVX_ROLE_PREFILL : KVX_ROLE_DECODE);
    } else {
        TL_CHECK(0, "unknown mode %s", mode);
    }
    MPI_Allreduce(&tl_failures, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (tl_rank == 0) {
        printf("%s\n", bad == 0 ? "PASS" : "FAIL");
    }
    MPI_Finalize();
    return bad == 0 ? 0 : 1;
}
