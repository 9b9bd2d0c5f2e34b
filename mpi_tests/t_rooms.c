/*
 * t_rooms.c - many rooms, byte-exact: the data path test.
 *
 * Rooms are spread over the job's prefill and decode instances. Each room
 * has a random page count, randomly fragmented destination (and source)
 * pages, and is handed over in 1..max chunks. Prefill ranks compute the KV
 * pattern of kvpattern.h into their pages; decode ranks check every byte of
 * the heads they hold and the aux row. Rooms run in waves of --concurrency.
 *
 * --page-layout takes a list (hnd,nhd,head): the whole test runs once per
 * page layout, each with a context of its own. --contiguous gives every room
 * consecutive pages on both sides (one run); --no-verify neither computes
 * nor checks the pattern, for measuring throughput.
 *
 * --mem cuda puts every rank's pool in CUDA memory (--cuda-ranks LO:HI only
 * world ranks LO..HI), on device world rank % devices: kvx allocates it, or
 * with --cuda-pool buffers|slab the test does. Prefill ranks compute the
 * pattern in host mirrors and copy each room's pages to the device before
 * handing them over; decode ranks copy them back before checking. Without
 * a CUDA device every rank exits 77 (skip) with the reason. --expect-path
 * checks the memory path the job agreed on.
 *
 * --corrupt: the case makes every decode rank flip a byte of each room
 * after it landed (KVX_FAULT=stage=verify,role=decode,effect=corrupt) and
 * sets KVX_VERIFY. Each wave is then agreed, and every room must end agreed
 * FAILED with KVX_ERR_CORRUPT at stage verify, origin a decode rank of the
 * room, on every rank of both instances -- every room with KVX_VERIFY=full;
 * with sample, as many as the rate says (within 4 standard deviations of
 * the expectation computed from each room's units), and each room agreed
 * SUCCESS must show the flipped bytes on every decode rank. Failed rooms must
 * close within 20 s (their pages released, not quarantined).
 *
 * --layerwise hands each room over with kvx_room_send_layers(), in groups of
 * 1..3 layers per chunk and in two orders (send_layerwise()); on host pools
 * each (chunk, layers) is computed just before its hand-over, so a layer
 * posted early would land the stale bytes of an earlier room.
 *
 * KVXT_ROOMS_MAX, when set, caps --rooms (tests/sanitize.sh sets it: a
 * sanitized rank is 5-50 times slower, and what a sanitizer finds lies in
 * the paths, which a few waves of rooms walk as well as many).
 *
 * Exit 0 only when every room succeeded on every rank and no byte differed.
 * Usage: t_rooms [--rooms N] [--pages MIN:MAX] [--chunks MAX] [--concurrency C]
 *                [--layers L] [--page-size P] [--kv-heads H] [--head-dim D]
 *                [--dtype bf16|fp16|fp8|fp32] [--mla] [--page-layout hnd|nhd|head[,...]]
 *                [--contiguous] [--no-verify] [--seed S]
 *                [--mem host|cuda] [--cuda-ranks LO:HI] [--cuda-pool kvx|buffers|slab]
 *                [--expect-path direct|staged] [--expect-landing direct|staged]
 *                [--corrupt] [--layerwise]
 * (the job layout comes from KVX_LAYOUT)
 * --expect-landing direct: every byte a decode rank received in data messages
 * was received by UCX straight into its pages (stats kind msg_direct), and
 * some were; staged: none was.
 */
#include <kvx.h>

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvcuda.h"
#include "kvpattern.h"

typedef struct opts {
    int rooms, min_pages, max_pages, max_chunks, concurrency;
    uint64_t seed;
    kvx_kv_layout_t kv;
    kvx_page_layout_t layouts[3];
    int nlayouts;
    int contiguous, verify, corrupt;
    int cuda_lo, cuda_hi; /* world ranks whose pools are CUDA memory (lo > hi: none) */
    int cuda_pool;        /* 0: kvx allocates; 1: caller's buffers; 2: caller's slab */
    const char *expect_path;
    const char *expect_landing;
} opts_t;

/* This rank's CUDA pool: kvx's device buffers and the host mirrors the
 * pattern is computed in and checked on. */
typedef struct devpool {
    int on;
    void **dev, **host;
    unsigned nb;     /* buffers */
    void *owned[64]; /* device memory the test gave kvx */
    int nowned;
} devpool_t;

typedef struct slot {
    uint64_t id;
    int mine;  /* this rank takes part */
    int other; /* the other side's instance */
    size_t npages;
    int nchunks;
    uint32_t *pages;
} slot_t;

static int rank, failures, verify = 1;
/* --layerwise: rooms go out in hand-overs of layer ranges (0: whole chunks). */
static unsigned layerwise;

/* --corrupt: how KVX_VERIFY checks, and the tallies of this rank (rooms
 * are counted on decode tp0; expect and var sum each room's chance of being
 * caught and its variance). */
static struct {
    int on, mode; /* 1 sample, 2 full */
    unsigned rate;
    int caught, seen;
    int origin; /* rooms agreed FAILED with this rank as the origin */
    double expect, var;
} cor;
/* Prefill ranks each decode rank must wait for, and whether this prefill
 * rank writes at all (MLA: only ranks below the decode TP do). */
static unsigned expect_writers;
static int expect_silent;

#define FAIL(...)                                    \
    do {                                             \
        fprintf(stderr, "t_rooms: rank %d: ", rank); \
        fprintf(stderr, __VA_ARGS__);                \
        fprintf(stderr, "\n");                       \
        failures++;                                  \
    } while (0)

static uint64_t rng_next(uint64_t *s)
{
    *s += 0x9e3779b97f4a7c15ull;
    return kvp_mix(*s);
}

static void usage_exit(void)
{
    fprintf(stderr, "see the comment at the top of mpi_tests/t_rooms.c\n");
    exit(2);
}

/* "hnd,nhd,head": the page layouts to run, in order. */
static void parse_layouts(const char *arg, opts_t *o)
{
    char buf[64], *save = NULL;

    snprintf(buf, sizeof(buf), "%s", arg);
    o->nlayouts = 0;
    for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        if (o->nlayouts == 3) {
            usage_exit();
        }
        o->layouts[o->nlayouts++] = !strcmp(tok, "nhd")    ? KVX_PAGE_NHD
                                    : !strcmp(tok, "head") ? KVX_PAGE_HEAD_MAJOR
                                    : !strcmp(tok, "hnd")  ? KVX_PAGE_HND
                                                           : (usage_exit(), KVX_PAGE_HND);
    }
    if (o->nlayouts == 0) {
        usage_exit();
    }
}

static void parse(int argc, char **argv, opts_t *o)
{
    static const struct option longs[] = { { "rooms", 1, 0, 'r' },
                                           { "pages", 1, 0, 'p' },
                                           { "chunks", 1, 0, 'c' },
                                           { "concurrency", 1, 0, 'C' },
                                           { "layers", 1, 0, 'l' },
                                           { "page-size", 1, 0, 'P' },
                                           { "kv-heads", 1, 0, 'H' },
                                           { "head-dim", 1, 0, 'D' },
                                           { "dtype", 1, 0, 't' },
                                           { "mla", 0, 0, 'm' },
                                           { "page-layout", 1, 0, 'L' },
                                           { "seed", 1, 0, 's' },
                                           { "contiguous", 0, 0, 'g' },
                                           { "no-verify", 0, 0, 'n' },
                                           { "mem", 1, 0, 'M' },
                                           { "cuda-ranks", 1, 0, 'R' },
                                           { "cuda-pool", 1, 0, 'A' },
                                           { "expect-path", 1, 0, 'E' },
                                           { "corrupt", 0, 0, 'X' },
                                           { "layerwise", 0, 0, 'W' },
                                           { "expect-landing", 1, 0, 'J' },
                                           { 0, 0, 0, 0 } };
    const char *cap;
    int c, max;

    memset(o, 0, sizeof(*o));
    o->rooms = 1000;
    o->min_pages = 1;
    o->max_pages = 64;
    o->max_chunks = 8;
    o->concurrency = 16;
    o->seed = 1;
    o->kv.layers = 2;
    o->kv.page_size = 16;
    o->kv.kv_heads = 4;
    o->kv.head_dim = 32;
    o->kv.dtype = KVX_DTYPE_BF16;
    o->nlayouts = 1;
    o->verify = 1;
    o->cuda_lo = 1;
    o->cuda_hi = 0;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 'r':
            o->rooms = atoi(optarg);
            break;
        case 'p':
            if (sscanf(optarg, "%d:%d", &o->min_pages, &o->max_pages) != 2) {
                usage_exit();
            }
            break;
        case 'c':
            o->max_chunks = atoi(optarg);
            break;
        case 'C':
            o->concurrency = atoi(optarg);
            break;
        case 'l':
            o->kv.layers = (unsigned)atoi(optarg);
            break;
        case 'P':
            o->kv.page_size = (unsigned)atoi(optarg);
            break;
        case 'H':
            o->kv.kv_heads = (unsigned)atoi(optarg);
            break;
        case 'D':
            o->kv.head_dim = (unsigned)atoi(optarg);
            break;
        case 't':
            o->kv.dtype = !strcmp(optarg, "fp16")   ? KVX_DTYPE_FP16
                          : !strcmp(optarg, "fp8")  ? KVX_DTYPE_FP8
                          : !strcmp(optarg, "fp32") ? KVX_DTYPE_FP32
                                                    : KVX_DTYPE_BF16;
            break;
        case 'm':
            o->kv.attn = KVX_ATTN_MLA;
            o->kv.kv_heads = 1;
            break;
        case 'L':
            parse_layouts(optarg, o);
            break;
        case 'g':
            o->contiguous = 1;
            break;
        case 'n':
            o->verify = 0;
            break;
        case 'M':
            o->cuda_lo = 0;
            o->cuda_hi = !strcmp(optarg, "cuda") ? 1 << 30 : -1;
            break;
        case 'R':
            if (sscanf(optarg, "%d:%d", &o->cuda_lo, &o->cuda_hi) != 2) {
                usage_exit();
            }
            break;
        case 'A':
            o->cuda_pool = !strcmp(optarg, "buffers") ? 1 : !strcmp(optarg, "slab") ? 2 : 0;
            break;
        case 'W':
            layerwise = 1;
            break;
        case 'E':
            o->expect_path = optarg;
            break;
        case 'J':
            o->expect_landing = optarg;
            break;
        case 'X':
            o->corrupt = 1;
            break;
        case 's':
            o->seed = strtoull(optarg, NULL, 0);
            break;
        default:
            usage_exit();
        }
    }
    cap = getenv("KVXT_ROOMS_MAX");
    max = cap != NULL ? atoi(cap) : 0;
    if (max > 0 && o->rooms > max) {
        o->rooms = max;
    }
}

/* An allocator that fragments: pages are taken at random from the free set.
 * Every rank of an instance runs the same sequence, so they agree. */
typedef struct alloc {
    uint32_t *free;
    size_t nfree;
    uint64_t rng;
} alloc_t;

static void alloc_init(alloc_t *a, size_t n, uint64_t seed)
{
    a->free = malloc(n * sizeof(uint32_t));
    for (size_t i = 0; i < n; i++) {
        a->free[i] = (uint32_t)i;
    }
    a->nfree = n;
    a->rng = seed;
}

static uint32_t *alloc_take(alloc_t *a, size_t n)
{
    uint32_t *pages = malloc(n * sizeof(uint32_t));

    for (size_t i = 0; i < n; i++) {
        size_t j = rng_next(&a->rng) % a->nfree;

        pages[i] = a->free[j];
        a->free[j] = a->free[--a->nfree];
    }
    return pages;
}

static void alloc_give(alloc_t *a, uint32_t *pages, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        a->free[a->nfree++] = pages[i];
    }
    free(pages);
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Waits until every room of the wave this rank takes part in is terminal. */
static void wait_wave(kvx_ctx_t *ctx, slot_t *w, int n, double limit)
{
    double start = now_s();
    int pending = 1;

    while (pending) {
        pending = 0;
        for (int i = 0; i < n; i++) {
            kvx_room_state_t st;

            if (!w[i].mine) {
                continue;
            }
            if (kvx_room_poll(ctx, w[i].id, &st) != KVX_OK) {
                FAIL("room %llu vanished", (unsigned long long)w[i].id);
                w[i].mine = 0;
                continue;
            }
            pending |= st != KVX_ROOM_SUCCESS && st != KVX_ROOM_FAILED;
        }
        if (pending && now_s() - start > limit) {
            FAIL("rooms still pending after %.0f s", limit);
            return;
        }
        if (pending) {
            usleep(50);
        }
    }
}

/* Copies the room's pages between the host mirrors and the device pool:
 * whole pages, or each head's part of them in HEAD_MAJOR. */
/* Copies layers [l0, l0 + nl) of the pages between the host mirrors and
 * the device: at once, or queued on stream (not NULL) when to the device. */
static void dev_copy_layers(const devpool_t *d, const kvp_geom_t *g, unsigned comps,
                            const uint32_t *pages, size_t n, unsigned l0, unsigned nl,
                            int to_device, void *stream)
{
    int per_head = g->kv.page_layout == KVX_PAGE_HEAD_MAJOR;
    size_t row = (size_t)g->kv.head_dim * g->elem;
    size_t len = (size_t)g->kv.page_size * row * (per_head ? 1 : g->heads);

    for (unsigned b = l0 * comps; d->on && b < (l0 + nl) * comps; b++) {
        for (size_t i = 0; i < n; i++) {
            for (unsigned h = 0; h < (per_head ? g->heads : 1); h++) {
                size_t off = kvp_offset(g, pages[i], h, 0);
                char *dev = (char *)d->dev[b] + off, *host = (char *)d->host[b] + off;

                if (stream != NULL) {
                    kvc_copy_async(dev, host, len, stream);
                } else {
                    kvc_copy(to_device ? (void *)dev : host, to_device ? host : dev, len);
                }
            }
        }
    }
}

static void dev_sync(const devpool_t *d, const kvp_geom_t *g, unsigned comps, const uint32_t *pages,
                     size_t n, int to_device)
{
    dev_copy_layers(d, g, comps, pages, n, 0, g->kv.layers, to_device, NULL);
}

/* --layerwise on a CUDA pool: each hand-over's copy to the device is queued
 * on one stream and an event recorded after it, which kvx waits for. The
 * events are a ring: one is recorded again long after its room ended. */
#define EVENT_RING 4096
static void *dev_stream, *dev_events[EVENT_RING];
static unsigned dev_next_event;

static void *dev_stream_get(void)
{
    int rc;

    if (dev_stream == NULL && (rc = kvc.stream_create(&dev_stream, 1)) != 0) {
        fprintf(stderr, "cudaStreamCreateWithFlags failed: %s\n", kvc.error_string(rc));
        exit(1);
    }
    return dev_stream;
}

static void *dev_ready_event(void)
{
    void **e = &dev_events[dev_next_event++ % EVENT_RING];
    int rc;

    if (*e == NULL && (rc = kvc.event_create(e, 2 /* cudaEventDisableTiming */)) != 0) {
        fprintf(stderr, "cudaEventCreateWithFlags failed: %s\n", kvc.error_string(rc));
        exit(1);
    }
    if ((rc = kvc.event_record(*e, dev_stream_get())) != 0) {
        fprintf(stderr, "cudaEventRecord failed: %s\n", kvc.error_string(rc));
        exit(1);
    }
    return *e;
}

/* Every wave slot this rank holds, agreed on every TP rank of its instance
 * (the rounds are collective over the instance). */
static void agree_wave(kvx_ctx_t *ctx, const slot_t *w, int n, double limit)
{
    uint64_t ids[256];
    kvx_agreed_t out[256];
    MPI_Comm tp = kvx_ctx_tp_comm(ctx);
    double start = now_s();
    size_t m = 0;

    for (int i = 0; i < n && m < 256; i++) {
        if (w[i].mine) {
            ids[m++] = w[i].id;
        }
    }
    for (;;) {
        kvx_agree_t *a;
        int done = 1, all = 0;

        if (kvx_agree_start(ctx, ids, m, &a) != KVX_OK) {
            FAIL("kvx_agree_start failed");
            return;
        }
        done = kvx_agree_wait(a, out) == KVX_OK;
        kvx_agree_free(a);
        for (size_t i = 0; i < m; i++) {
            done &= out[i].status == KVX_OK &&
                    (out[i].state == KVX_ROOM_SUCCESS || out[i].state == KVX_ROOM_FAILED);
        }
        done = done ? 1 : now_s() - start > limit ? 2 : 0;
        MPI_Allreduce(&done, &all, 1, MPI_INT, MPI_MIN, tp);
        if (all >= 1) {
            MPI_Allreduce(MPI_IN_PLACE, &done, 1, MPI_INT, MPI_MAX, tp);
            if (done == 2) {
                FAIL("a wave not agreed within %.0f s", limit);
            }
            return;
        }
        usleep(200);
    }
}

/* The chance that KVX_VERIFY catches a byte flipped in one of a room's
 * units on one decode rank: sample checks each unit with chance 1 in rate. */
static double corrupt_chance(void)
{
    return cor.mode == 2 ? 1.0 : 1.0 / cor.rate;
}

/* --corrupt: the room's agreed outcome must be FAILED at verify with the
 * decode's record, or (sample) SUCCESS with the flipped bytes in it. */
/* --expect-landing: where the data messages a decode rank received landed
 * (KVX_XFER_MSG_DIRECT is the share UCX received straight into the pages). */
static void check_landing(kvx_ctx_t *ctx, const kvx_identity_t *id, const char *expect)
{
    unsigned long long direct = 0, recv = 0, all_direct;
    kvx_stats_t st;

    if (id->role == KVX_ROLE_DECODE) {
        if (kvx_ctx_stats(ctx, &st) != KVX_OK) {
            FAIL("kvx_ctx_stats");
        }
        direct = st.bytes[KVX_XFER_MSG_DIRECT];
        recv = st.bytes[KVX_XFER_MSG_RECV];
        if (strcmp(expect, "direct") == 0 ? direct != recv : direct != 0) {
            FAIL("landing: %llu of %llu bytes of data messages received straight into the pages, "
                 "expected %s",
                 direct, recv, expect);
        }
    }
    MPI_Allreduce(&direct, &all_direct, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (strcmp(expect, "direct") == 0 && all_direct == 0) {
        FAIL("landing: no decode rank received data straight into its pages");
    }
}

static void finish_corrupt(kvx_ctx_t *ctx, const slot_t *s, const kvx_identity_t *id,
                           const kvp_geom_t *g, void *const *bufs, unsigned comps, uint64_t *bytes)
{
    kvx_role_t role = id->role;
    int decode_instance = role == KVX_ROLE_DECODE ? id->instance : s->other;
    kvx_room_info_t info;
    kvx_failure_t f;

    if (kvx_room_info(ctx, s->id, &info) != KVX_OK || !info.agreed) {
        FAIL("room %llu not agreed", (unsigned long long)s->id);
        return;
    }
    if (role == KVX_ROLE_DECODE && id->tp_rank == 0) {
        double p = 1 - pow(1 - corrupt_chance(), id->decode_tp);

        cor.seen++;
        cor.expect += p;
        cor.var += p * (1 - p);
        cor.caught += info.agreed_state == KVX_ROOM_FAILED;
    }
    if (role == KVX_ROLE_PREFILL) {
        *bytes += info.bytes;
    }
    if (info.agreed_state == KVX_ROOM_FAILED) {
        char line[512] = "(no reason)";

        if (kvx_room_failure(ctx, s->id, &f) == KVX_OK) {
            kvx_failure_format(&f, line, sizeof(line));
        }
        cor.origin += f.origin_rank == rank;
        if (f.status != KVX_ERR_CORRUPT || f.stage != KVX_STAGE_VERIFY ||
            f.origin_role != KVX_ROLE_DECODE || f.origin_instance != decode_instance ||
            strstr(f.text, "match what was sent") == NULL ||
            strstr(f.text, " from prefill[") == NULL) {
            FAIL("room %llu: %s", (unsigned long long)s->id, line);
        }
    } else if (cor.mode == 2) {
        FAIL("room %llu agreed SUCCESS with KVX_VERIFY=full", (unsigned long long)s->id);
    } else if (role == KVX_ROLE_DECODE &&
               kvp_pages(g, bufs, comps, s->id, s->pages, s->npages, 0, 0) == 0) {
        FAIL("room %llu agreed SUCCESS and its bytes are right, but a byte was flipped",
             (unsigned long long)s->id);
    }
    /* A failed room's pages are released once every writer confirmed it
     * stopped (a writer of another head may still be sending): BUSY until
     * then, never QUARANTINED. */
    {
        double start = now_s();
        kvx_status_t st;

        while ((st = kvx_room_close(ctx, s->id)) == KVX_ERR_BUSY && now_s() - start < 20) {
            usleep(500);
        }
        if (st != KVX_OK) {
            FAIL("cannot close room %llu: %s", (unsigned long long)s->id, kvx_status_name(st));
        }
    }
}

static void finish_room(kvx_ctx_t *ctx, slot_t *s, kvx_role_t role, const kvp_geom_t *g,
                        const devpool_t *d, void *const *bufs, unsigned comps, size_t *mismatches,
                        uint64_t *bytes, int *ok)
{
    kvx_room_state_t st = KVX_ROOM_FAILED;
    kvx_room_info_t info;

    kvx_room_poll(ctx, s->id, &st);
    if (st != KVX_ROOM_SUCCESS) {
        kvx_failure_t f;
        char line[512] = "(no reason)";

        if (kvx_room_failure(ctx, s->id, &f) == KVX_OK) {
            kvx_failure_format(&f, line, sizeof(line));
        }
        FAIL("room %llu ended %s: %s", (unsigned long long)s->id, kvx_room_state_name(st), line);
    } else {
        (*ok)++;
    }
    if (role == KVX_ROLE_DECODE && st == KVX_ROOM_SUCCESS) {
        uint64_t aux = 0, want = kvp_aux(s->id);
        size_t len = 0, bad = 0;

        if (verify) {
            dev_sync(d, g, comps, s->pages, s->npages, 0);
            bad = kvp_pages(g, bufs, comps, s->id, s->pages, s->npages, 0, 0);
        }

        if (bad > 0) {
            FAIL("room %llu: %zu bytes differ", (unsigned long long)s->id, bad);
        }
        *mismatches += bad;
        if (kvx_room_aux(ctx, s->id, &aux, sizeof(aux), &len) != KVX_OK || len != sizeof(aux) ||
            aux != want) {
            FAIL("room %llu: aux %llx (%zu bytes), expected %llx", (unsigned long long)s->id,
                 (unsigned long long)aux, len, (unsigned long long)want);
            (*mismatches)++;
        }
    }
    if (kvx_room_info(ctx, s->id, &info) != KVX_OK) {
        FAIL("no info on room %llu", (unsigned long long)s->id);
    } else if (role == KVX_ROLE_PREFILL) {
        *bytes += info.bytes;
        if (expect_silent && info.puts > 0) {
            FAIL("room %llu: %llu puts from a prefill rank that writes nothing",
                 (unsigned long long)s->id, (unsigned long long)info.puts);
        }
    } else if (info.writers != expect_writers ||
               (st == KVX_ROOM_SUCCESS && info.writers_done != info.writers)) {
        FAIL("room %llu: %u writers (%u done), expected %u", (unsigned long long)s->id,
             info.writers, info.writers_done, expect_writers);
    }
    if (kvx_room_close(ctx, s->id) != KVX_OK) {
        FAIL("cannot close room %llu", (unsigned long long)s->id);
    }
}

/* --layerwise: the room's layers in groups of 1..3 (cut from the room id),
 * handed over per (chunk, group): chunk by chunk, each chunk's groups in
 * order, as a chunked prefill computes them -- or, for odd room ids,
 * group by group from the last, each group's chunks in order: every
 * (page, layer) once, in an order far from the pages'. The aux rides on the
 * last hand-over. */
static void send_layerwise(kvx_ctx_t *ctx, const slot_t *s, const kvp_geom_t *g, const devpool_t *d,
                           void *const *bufs, unsigned comps, int compute)
{
    unsigned layers = g->kv.layers;
    unsigned first[64], count[64], ngroups = 0;
    uint64_t h = s->id * 0x9e3779b97f4a7c15ull;
    uint64_t aux = kvp_aux(s->id);
    int total;

    for (unsigned l = 0; l < layers && ngroups < 64; ngroups++) {
        unsigned n = 1 + (unsigned)((h >> (ngroups % 20 * 3)) % 3);

        first[ngroups] = l;
        count[ngroups] = n < layers - l ? n : layers - l;
        l += count[ngroups];
    }
    total = s->nchunks * (int)ngroups;
    for (int k = 0; k < total; k++) {
        int odd = (int)(s->id & 1);
        int c = odd ? k % s->nchunks : k / (int)ngroups;
        unsigned gi = odd ? ngroups - 1 - (unsigned)(k / s->nchunks) : (unsigned)(k % (int)ngroups);
        int per = (int)s->npages / s->nchunks;
        int n = c == s->nchunks - 1 ? (int)s->npages - per * c : per;
        int last = k == total - 1;
        kvx_status_t st;
        void *ready = NULL;

        if (compute) {
            kvp_pages_layers(g, bufs, comps, s->id, s->pages + per * c, (size_t)n,
                             (size_t)(per * c) * g->kv.page_size, first[gi], count[gi], 1);
        }
        if (compute && d->on) {
            dev_copy_layers(d, g, comps, s->pages + per * c, (size_t)n, first[gi], count[gi], 1,
                            dev_stream_get());
            ready = dev_ready_event();
        }
        st = kvx_room_send_layers(ctx, s->id, s->pages + per * c, (size_t)n, first[gi], count[gi],
                                  ready, last ? &aux : NULL, last ? sizeof(aux) : 0);

        if (st != KVX_OK && !(cor.on && st == KVX_ERR_STATE)) {
            FAIL("send_layers %llu (layers %u+%u, chunk %d): %s", (unsigned long long)s->id,
                 first[gi], count[gi], c, kvx_status_string(st));
        }
    }
}

/* The decode grants, the prefill computes and sends in chunks. */
static void start_room(kvx_ctx_t *ctx, slot_t *s, kvx_role_t role, int slot_index,
                       const kvp_geom_t *g, const devpool_t *d, void *const *bufs, unsigned comps)
{
    kvx_status_t st;

    if (role == KVX_ROLE_DECODE) {
        st = kvx_room_recv_open(ctx, s->id, s->other, s->pages, s->npages, slot_index);
        if (st != KVX_OK) {
            FAIL("recv_open %llu: %s", (unsigned long long)s->id, kvx_status_string(st));
            s->mine = 0;
        }
        return;
    }
    st = kvx_room_send_open(ctx, s->id, s->other, s->npages);
    if (st != KVX_OK) {
        FAIL("send_open %llu: %s", (unsigned long long)s->id, kvx_status_string(st));
        s->mine = 0;
        return;
    }
    if (layerwise && verify) {
        /* Each layer of a chunk is computed just before its hand-over (on a
         * CUDA pool: copied to the device on a stream, with an event after
         * it): a layer posted before it was handed over, or before its event
         * completed, lands stale bytes. */
        send_layerwise(ctx, s, g, d, bufs, comps, 1);
        return;
    }
    if (verify) {
        kvp_pages(g, bufs, comps, s->id, s->pages, s->npages, 0, 1);
        dev_sync(d, g, comps, s->pages, s->npages, 1);
    }
    if (layerwise) {
        send_layerwise(ctx, s, g, d, bufs, comps, 0);
        return;
    }
    for (int c = 0, done = 0; c < s->nchunks; c++) {
        int n = c == s->nchunks - 1 ? (int)s->npages - done : (int)s->npages / s->nchunks;
        uint64_t aux = kvp_aux(s->id);
        int last = c == s->nchunks - 1;

        st = kvx_room_send_chunk(ctx, s->id, s->pages + done, (size_t)n, last ? &aux : NULL,
                                 last ? sizeof(aux) : 0);
        /* --corrupt: a decode rank may have failed the room already, having
         * caught the flipped byte from another writer. */
        if (st != KVX_OK && !(cor.on && st == KVX_ERR_STATE)) {
            FAIL("send_chunk %llu: %s", (unsigned long long)s->id, kvx_status_string(st));
        }
        done += n;
    }
}

/* The pages of the room in wave slot i: random free pages, or with
 * --contiguous the slot's own consecutive range. */
static uint32_t *take_pages(const opts_t *o, alloc_t *alloc, size_t n, int i)
{
    uint32_t *pages;

    if (!o->contiguous) {
        return alloc_take(alloc, n);
    }
    pages = malloc(n * sizeof(uint32_t));
    for (size_t k = 0; k < n; k++) {
        pages[k] = (uint32_t)((size_t)i * (size_t)o->max_pages + k);
    }
    return pages;
}

static void give_pages(const opts_t *o, alloc_t *alloc, uint32_t *pages, size_t n)
{
    if (o->contiguous) {
        free(pages);
    } else {
        alloc_give(alloc, pages, n);
    }
}

/* A CUDA pool for this rank when --mem/--cuda-ranks says so: on device
 * rank % devices, kvx's or the test's (buffers or slab, sized for every
 * head so that any TP fits). */
static void dev_params(const opts_t *o, kvx_ctx_params_t *p, devpool_t *d)
{
    unsigned comps = o->kv.attn == KVX_ATTN_MLA ? 1 : 2, nb = o->kv.layers * comps;
    size_t buf =
        p->num_pages * o->kv.page_size * o->kv.kv_heads * o->kv.head_dim * kvp_elem(o->kv.dtype);

    memset(d, 0, sizeof(*d));
    d->on = rank >= o->cuda_lo && rank <= o->cuda_hi;
    if (!d->on) {
        return;
    }
    p->mem_type = KVX_MEM_CUDA;
    p->cuda_device = rank % kvc.devices;
    if (o->cuda_pool == 2) {
        d->owned[d->nowned++] = p->slab = kvc_alloc(p->cuda_device, buf * nb);
    } else if (o->cuda_pool == 1) {
        for (unsigned b = 0; b < nb && b < 64; b++) {
            d->owned[d->nowned++] = kvc_alloc(p->cuda_device, buf);
        }
        p->buffers = d->owned;
    }
}

/* The mirrors, once kvx said where the buffers are; bufs then points at
 * them, so that the pattern is computed and checked in host memory. */
static void dev_mirrors(kvx_ctx_t *ctx, devpool_t *d, void **bufs, unsigned nb)
{
    size_t len = 0;
    void *first;

    if (!d->on) {
        return;
    }
    kvx_ctx_kv_buffer(ctx, 0, 0, &first, &len);
    d->nb = nb;
    d->dev = calloc(nb, sizeof(void *));
    d->host = calloc(nb, sizeof(void *));
    for (unsigned b = 0; b < nb; b++) {
        d->dev[b] = bufs[b];
        d->host[b] = calloc(1, len);
        bufs[b] = d->host[b];
    }
}

static void dev_free(devpool_t *d)
{
    for (unsigned b = 0; d->host != NULL && b < d->nb; b++) {
        free(d->host[b]);
    }
    for (int i = 0; i < d->nowned; i++) {
        kvc.free_(d->owned[i]);
    }
    free(d->dev);
    free(d->host);
}

/* The memory path every rank agreed on, checked against --expect-path. */
static void check_path(const opts_t *o, kvx_ctx_t *ctx)
{
    kvx_mem_path_t path;
    char reason[512];

    if (kvx_ctx_mem_path(ctx, &path, reason, sizeof(reason)) != KVX_OK) {
        FAIL("kvx_ctx_mem_path failed");
        return;
    }
    if (rank == 0) {
        printf("t_rooms: memory path %s: %s\n", kvx_mem_path_name(path), reason);
    }
    if (o->expect_path != NULL && strcmp(o->expect_path, kvx_mem_path_name(path)) != 0) {
        FAIL("memory path %s, expected %s", kvx_mem_path_name(path), o->expect_path);
    }
}

/* One run of the whole test with one page layout; 0 when it passed. */
static int run_layout(const opts_t *o, kvx_page_layout_t layout)
{
    devpool_t d;
    kvx_ctx_params_t params;
    kvx_identity_t id;
    kvx_failure_t why;
    kvx_ctx_t *ctx;
    kvp_geom_t g;
    alloc_t alloc;
    unsigned comps;
    void **bufs;
    slot_t *wave;
    size_t mismatches = 0, tot_mismatch = 0;
    uint64_t bytes = 0, tot_bytes = 0;
    int ok = 0, tot_ok = 0, tot_fail = 0, mine_total = 0, tot_mine = 0, failed;
    int failures_before = failures;
    double t0, t1;
    char line[512];

    kvx_ctx_params_init(&params);
    params.kv = o->kv;
    params.kv.page_layout = layout;
    params.num_pages = (size_t)o->concurrency * (size_t)o->max_pages * 3 / 2 + 8;
    params.aux_slots = (size_t)o->concurrency;
    params.aux_item_size = sizeof(uint64_t);
    dev_params(o, &params, &d);
    if (kvx_ctx_create(MPI_COMM_WORLD, &params, &ctx, &why) != KVX_OK) {
        kvx_failure_format(&why, line, sizeof(line));
        fprintf(stderr, "t_rooms: rank %d: kvx_ctx_create: %s\n", rank, line);
        dev_free(&d);
        return 1;
    }
    kvx_ctx_identity(ctx, &id);
    check_path(o, ctx);
    comps = o->kv.attn == KVX_ATTN_MLA ? 1 : 2;
    {
        unsigned kv = o->kv.attn == KVX_ATTN_MLA ? 1 : o->kv.kv_heads;
        unsigned hp = kv >= (unsigned)id.prefill_tp ? kv / (unsigned)id.prefill_tp : 1;
        unsigned hd = kv >= (unsigned)id.decode_tp ? kv / (unsigned)id.decode_tp : 1;

        expect_writers = hd > hp ? hd / hp : 1;
        expect_silent =
            o->kv.attn == KVX_ATTN_MLA && id.role == KVX_ROLE_PREFILL && id.tp_rank >= id.decode_tp;
    }
    bufs = calloc(o->kv.layers * comps, sizeof(void *));
    for (unsigned b = 0; b < o->kv.layers * comps; b++) {
        kvx_ctx_kv_buffer(ctx, b / comps, b % comps, &bufs[b], NULL);
    }
    dev_mirrors(ctx, &d, bufs, o->kv.layers * comps);
    memset(&g, 0, sizeof(g));
    g.kv = params.kv;
    kvx_ctx_heads(ctx, &g.first_head, &g.heads);
    g.num_pages = params.num_pages;
    g.elem = kvp_elem(o->kv.dtype);
    alloc_init(&alloc, params.num_pages,
               o->seed * 1000003u + (uint64_t)id.role * 101 + id.instance);
    wave = calloc((size_t)o->concurrency, sizeof(slot_t));
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = now_s();
    for (int base = 0; base < o->rooms; base += o->concurrency) {
        int n = o->rooms - base < o->concurrency ? o->rooms - base : o->concurrency;

        for (int i = 0; i < n; i++) {
            int r = base + i;
            uint64_t rng = o->seed * 7919u + (uint64_t)r;
            int pi = r % id.prefill_instances,
                di = (r / id.prefill_instances) % id.decode_instances;
            slot_t *s = &wave[i];

            s->id = 1000000u * o->seed + (uint64_t)r;
            s->npages =
                (size_t)o->min_pages + rng_next(&rng) % (uint64_t)(o->max_pages - o->min_pages + 1);
            s->nchunks = 1 + (int)(rng_next(&rng) % (uint64_t)o->max_chunks);
            s->nchunks = s->nchunks > (int)s->npages ? (int)s->npages : s->nchunks;
            s->mine = id.role == KVX_ROLE_PREFILL ? pi == id.instance : di == id.instance;
            s->other = id.role == KVX_ROLE_PREFILL ? di : pi;
            if (s->mine) {
                s->pages = take_pages(o, &alloc, s->npages, i);
                mine_total++;
                start_room(ctx, s, id.role, i, &g, &d, bufs, comps);
            }
        }
        wait_wave(ctx, wave, n, 60.0);
        if (cor.on) {
            agree_wave(ctx, wave, n, 60.0);
        }
        for (int i = 0; i < n; i++) {
            if (wave[i].mine && cor.on) {
                finish_corrupt(ctx, &wave[i], &id, &g, bufs, comps, &bytes);
            } else if (wave[i].mine) {
                finish_room(ctx, &wave[i], id.role, &g, &d, bufs, comps, &mismatches, &bytes, &ok);
            }
            if (wave[i].pages != NULL) {
                give_pages(o, &alloc, wave[i].pages, wave[i].npages);
                wave[i].pages = NULL;
            }
        }
    }
    t1 = now_s();
    if (cor.mode > 0) {
        kvx_stats_t st;
        unsigned long long units = 0;

        /* KVX_VERIFY checked what landed (a CUDA pool read back): a decode
         * rank that caught a corruption checked units, and some decode rank
         * did. A rank may check none when a sibling's verdict failed each of
         * its rooms before its own check (seen on 1 -> 2 staged, ~1 run in
         * 6 at 40 rooms). */
        memset(&st, 0, sizeof(st));
        if (id.role == KVX_ROLE_DECODE &&
            (kvx_ctx_stats(ctx, &st) != KVX_OK || st.verify_unchecked != 0 ||
             (cor.origin > 0 && st.verify_units == 0))) {
            FAIL("KVX_VERIFY: %llu units checked, %llu writers' parts unchecked, origin of %d "
                 "failures",
                 (unsigned long long)st.verify_units, (unsigned long long)st.verify_unchecked,
                 cor.origin);
        }
        units = id.role == KVX_ROLE_DECODE ? st.verify_units : 0;
        MPI_Allreduce(MPI_IN_PLACE, &units, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        if (units == 0) {
            FAIL("KVX_VERIFY: no decode rank checked a unit");
        }
    }
    if (o->expect_landing != NULL) {
        check_landing(ctx, &id, o->expect_landing);
    }
    failed = failures - failures_before;
    MPI_Reduce(&ok, &tot_ok, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mine_total, &tot_mine, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&failed, &tot_fail, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mismatches, &tot_mismatch, 1, MPI_UNSIGNED_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&bytes, &tot_bytes, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    kvx_ctx_destroy(ctx);
    if (cor.on) {
        double sums[4] = { cor.caught, cor.seen, cor.expect, cor.var }, all[4];

        MPI_Reduce(sums, all, 4, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            double slack = 4 * sqrt(all[3]) + 2;
            int bad = cor.mode == 2 ? all[0] != all[1] : fabs(all[0] - all[2]) > slack;

            printf("t_rooms: %s: corrupted every room: KVX_VERIFY=%s caught %.0f of %.0f "
                   "(expected %.1f, +-%.1f)%s; %.1f MB sent\n",
                   layout == KVX_PAGE_NHD          ? "NHD"
                   : layout == KVX_PAGE_HEAD_MAJOR ? "HEAD_MAJOR"
                                                   : "HND",
                   cor.mode == 2 ? "full" : "sample", all[0], all[1], all[2], slack,
                   bad ? ": FAIL" : "", (double)tot_bytes / 1e6);
            tot_fail += bad;
        }
        cor.caught = cor.seen = cor.origin = 0;
        cor.expect = cor.var = 0;
    }
    if (rank == 0 && !cor.on) {
        printf("t_rooms: %s: %d rooms, %d room-ends on %d ranks, %d SUCCESS, %zu mismatched "
               "bytes%s, %.1f MB in %.2f s (%.2f GB/s)\n",
               layout == KVX_PAGE_NHD          ? "NHD"
               : layout == KVX_PAGE_HEAD_MAJOR ? "HEAD_MAJOR"
                                               : "HND",
               o->rooms, tot_mine, id.world_size, tot_ok, tot_mismatch,
               verify ? "" : " (not verified)", (double)tot_bytes / 1e6, t1 - t0,
               (double)tot_bytes / (t1 - t0) / 1e9);
        /* Exact, for tests that compare it with a network's byte counters. */
        printf("t_rooms: %llu bytes sent by the prefill ranks\n", (unsigned long long)tot_bytes);
        tot_fail += tot_ok != tot_mine || tot_mismatch != 0;
    }
    MPI_Bcast(&tot_fail, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(wave);
    dev_free(&d);
    free(bufs);
    free(alloc.free);
    return tot_fail != 0;
}

/* A KVX_* variable as kvx reads it: its value here, else its default. */
static const char *config_value(const char *name)
{
    kvx_config_var_t v;

    for (size_t i = 0; kvx_config_var(i, &v) == KVX_OK; i++) {
        if (!strcmp(v.name, name)) {
            return v.value != NULL ? v.value : v.default_value;
        }
    }
    return "";
}

int main(int argc, char **argv)
{
    opts_t o;
    int bad = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    parse(argc, argv, &o);
    if (o.cuda_lo <= o.cuda_hi) {
        char why[256] = "";
        kvx_mem_path_t path;
        /* A kvx built without CUDA skips too (a GPU node may run one). */
        int ok = kvx_mem_path_probe(KVX_MEM_CUDA, &path, why, sizeof(why)) != KVX_ERR_UNSUPPORTED &&
                 kvc_open(why, sizeof(why)) == 0,
            all = 0;

        MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!all) {
            if (!ok) {
                printf("SKIP: t_rooms: rank %d: %s\n", rank, why);
            }
            MPI_Finalize();
            return 77;
        }
    }
    verify = o.verify;
    {
        const char *mode = config_value("KVX_VERIFY"), *rate = config_value("KVX_VERIFY_SAMPLE");

        cor.mode = !strcmp(mode, "full") ? 2 : !strcmp(mode, "sample") ? 1 : 0;
        cor.rate = atoi(rate) > 0 ? (unsigned)atoi(rate) : 8;
        cor.on = o.corrupt;
        if (cor.on && (cor.mode == 0 || !verify)) {
            fprintf(stderr,
                    "t_rooms: --corrupt needs KVX_VERIFY=sample or full, and the pattern\n");
            MPI_Finalize();
            return 2;
        }
    }
    for (int l = 0; l < o.nlayouts; l++) {
        bad += run_layout(&o, o.layouts[l]);
    }
    if (rank == 0) {
        printf("%s\n", bad == 0 ? "PASS" : "FAIL");
    }
    MPI_Finalize();
    return bad == 0 ? 0 : 1;
}
