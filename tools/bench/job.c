/*
 * job.c - the MPI job as kvx-bench uses it: sub-worlds, barriers that do not
 * spin, contexts, clocks, statistics and the data pattern.
 */
#include "bench.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

MPI_Comm bench_subworld(int n)
{
    MPI_Comm sub;

    MPI_Comm_split(MPI_COMM_WORLD, bench_rank < n ? 0 : MPI_UNDEFINED, bench_rank, &sub);
    return sub;
}

void bench_world_text(const char *what, char *buf, size_t len)
{
    char host[MPI_MAX_PROCESSOR_NAME] = { 0 }, *all = NULL;
    int n, hosts = 0, most = 0;
    long cores = sysconf(_SC_NPROCESSORS_ONLN), fewest = cores;

    MPI_Get_processor_name(host, &n);
    all = malloc((size_t)bench_size * sizeof(host));
    MPI_Allgather(host, sizeof(host), MPI_CHAR, all, sizeof(host), MPI_CHAR, MPI_COMM_WORLD);
    MPI_Allreduce(&cores, &fewest, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
    for (int r = 0; r < bench_size; r++) {
        int first = 1, here = 0;

        for (int q = 0; q < bench_size; q++) {
            int same = !strcmp(all + (size_t)r * sizeof(host), all + (size_t)q * sizeof(host));

            first &= !(same && q < r);
            here += same;
        }
        hosts += first;
        most = here > most ? here : most;
    }
    snprintf(buf, len,
             "ranks: %d in the job on %d host%s of %ld cores: %d on the busiest host, %.1f per "
             "core%s (each kvx rank also runs a progress thread); %s",
             bench_size, hosts, hosts == 1 ? "" : "s", fewest, most, (double)most / (double)fewest,
             most > fewest ? ", oversubscribed" : "", what);
    free(all);
}

void bench_barrier_sleepy(MPI_Comm comm)
{
    MPI_Request req;
    int done = 0;

    MPI_Ibarrier(comm, &req);
    while (MPI_Test(&req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done) {
        usleep(200);
    }
}

int bench_pair_world(const char *what, char *world, size_t len)
{
    char text[128];

    snprintf(text, sizeof(text), "%s uses ranks 0 and 1; the others sleep", what);
    bench_world_text(text, world, len);
    if (bench_size < 2) {
        if (bench_rank == 0) {
            fprintf(stderr, "kvx-bench %s: needs 2 ranks\n", what);
        }
        return 2;
    }
    return 0;
}

size_t bench_kv_32k(kvx_kv_layout_t *kv, unsigned layers)
{
    return bench_kv_tokens(kv, layers, 16);
}

size_t bench_kv_tokens(kvx_kv_layout_t *kv, unsigned layers, unsigned tokens)
{
    memset(kv, 0, sizeof(*kv));
    kv->layers = layers;
    kv->page_size = tokens;
    kv->kv_heads = 8;
    kv->head_dim = 128;
    kv->dtype = KVX_DTYPE_BF16;
    kv->attn = KVX_ATTN_MHA;
    kv->page_layout = KVX_PAGE_HND;
    return (size_t)kv->page_size * kv->kv_heads * kv->head_dim * 2;
}

kvx_ctx_t *bench_ctx_create(MPI_Comm comm, const char *layout, const kvx_kv_layout_t *kv,
                            size_t num_pages, size_t aux_slots, const char *fault)
{
    return bench_ctx_create_full(comm, layout, kv, num_pages, aux_slots, fault, KVX_VERIFY_DEFAULT);
}

kvx_ctx_t *bench_ctx_create_verify(MPI_Comm comm, const char *layout, const kvx_kv_layout_t *kv,
                                   size_t num_pages, size_t aux_slots, kvx_verify_t verify)
{
    return bench_ctx_create_full(comm, layout, kv, num_pages, aux_slots, NULL, verify);
}

kvx_ctx_t *bench_ctx_create_full(MPI_Comm comm, const char *layout, const kvx_kv_layout_t *kv,
                                 size_t num_pages, size_t aux_slots, const char *fault,
                                 kvx_verify_t verify)
{
    kvx_ctx_params_t p;
    kvx_failure_t why;
    kvx_ctx_t *ctx;
    char line[512];

    kvx_ctx_params_init(&p);
    p.layout = layout;
    p.kv = *kv;
    p.num_pages = num_pages;
    p.aux_slots = aux_slots;
    p.aux_item_size = sizeof(uint64_t);
    p.fault = fault;
    p.verify = verify;
    if (kvx_ctx_create(comm, &p, &ctx, &why) != KVX_OK) {
        kvx_failure_format(&why, line, sizeof(line));
        fprintf(stderr, "kvx-bench: rank %d: kvx_ctx_create: %s\n", bench_rank, line);
        return NULL;
    }
    return ctx;
}

void **bench_ctx_buffers(kvx_ctx_t *ctx, unsigned layers, unsigned comps)
{
    void **bufs = calloc((size_t)layers * comps, sizeof(void *));

    for (unsigned b = 0; bufs != NULL && b < layers * comps; b++) {
        kvx_ctx_kv_buffer(ctx, b / comps, b % comps, &bufs[b], NULL);
    }
    return bufs;
}

kvx_status_t bench_room_close(kvx_ctx_t *ctx, uint64_t id)
{
    double start = bench_now();
    kvx_status_t st;

    while ((st = kvx_room_close(ctx, id)) == KVX_ERR_BUSY && bench_now() - start < 30) {
        usleep(100);
    }
    return st;
}

int bench_recovery_enabled(void)
{
    const char *v = getenv("OMPI_MCA_orte_enable_recovery");

    return v != NULL && (!strcmp(v, "1") || !strcmp(v, "true"));
}

double bench_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void bench_sleep_us(double us)
{
    if (us > 0) {
        usleep((useconds_t)us);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

double bench_median(const double *v, int n)
{
    double *c = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1)), m;

    if (n <= 0 || c == NULL) {
        free(c);
        return 0;
    }
    memcpy(c, v, sizeof(double) * (size_t)n);
    qsort(c, (size_t)n, sizeof(double), cmp_double);
    m = n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
    free(c);
    return m;
}

double bench_min(const double *v, int n)
{
    double m = n > 0 ? v[0] : 0;

    for (int i = 1; i < n; i++) {
        m = v[i] < m ? v[i] : m;
    }
    return m;
}

double bench_max(const double *v, int n)
{
    double m = n > 0 ? v[0] : 0;

    for (int i = 1; i < n; i++) {
        m = v[i] > m ? v[i] : m;
    }
    return m;
}

bench_stat_t bench_stat(const double *v, int n)
{
    bench_stat_t s = { bench_median(v, n), bench_min(v, n), bench_max(v, n) };

    return s;
}

double bench_ratio(const double *a, const double *b, int n)
{
    double *r = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1)), m;

    for (int i = 0; i < n; i++) {
        r[i] = b[i] > 0 ? a[i] / b[i] : 0;
    }
    m = bench_median(r, n);
    free(r);
    return m;
}

/* Cristian's method: of 16 ping-pongs with rank 0, the one with the shortest
 * round trip says best where rank 0's clock stood in the middle of it. */
double bench_clock_offset(MPI_Comm comm)
{
    int rank, size;
    double offset = 0;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    for (int r = 1; r < size; r++) {
        double best = 1e9;

        for (int i = 0; i < 16; i++) {
            double t0, t1, theirs;

            if (rank == r) {
                t0 = bench_now();
                MPI_Send(&t0, 1, MPI_DOUBLE, 0, 7, comm);
                MPI_Recv(&theirs, 1, MPI_DOUBLE, 0, 7, comm, MPI_STATUS_IGNORE);
                t1 = bench_now();
                if (t1 - t0 < best) {
                    best = t1 - t0;
                    offset = (t0 + t1) / 2 - theirs;
                }
            } else if (rank == 0) {
                MPI_Recv(&t0, 1, MPI_DOUBLE, r, 7, comm, MPI_STATUS_IGNORE);
                t1 = bench_now();
                MPI_Send(&t1, 1, MPI_DOUBLE, r, 7, comm);
            }
        }
    }
    return offset;
}

void bench_fill(void *buf, size_t len, uint64_t seed)
{
    uint64_t *w = buf;

    for (size_t i = 0; i < len / 8; i++) {
        w[i] = bench_word(seed, i);
    }
}

size_t bench_check(const void *buf, size_t len, uint64_t seed)
{
    const uint64_t *w = buf;
    size_t bad = 0;

    for (size_t i = 0; i < len / 8; i++) {
        bad += w[i] != bench_word(seed, i);
    }
    return bad;
}
