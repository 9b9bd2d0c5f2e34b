/*
 * kvgen.c - the KV cache a prefill rank "computes" and a decode rank checks.
 *
 * Element d of head h of token t of component c (K, V, or MLA's latent) of
 * layer l of room r has a value that depends on all six, so that any byte
 * that lands in the wrong room, layer, component, token, head or place
 * differs. Rank placement follows the layouts documented in kvx.h with the
 * model's head numbers, so heterogeneous TP is checked head by head: a
 * decode rank holding heads 4..7 expects exactly what the prefill ranks
 * holding them computed.
 */
#include "demo.h"

#include <stdlib.h>
#include <string.h>

int demo_kv_init(demo_kv_t *g, kvx_ctx_t *ctx, const kvx_kv_layout_t *kv, size_t num_pages)
{
    static const size_t elem[] = {
        [KVX_DTYPE_BF16] = 2, [KVX_DTYPE_FP16] = 2, [KVX_DTYPE_FP8] = 1, [KVX_DTYPE_FP32] = 4
    };

    memset(g, 0, sizeof(*g));
    g->kv = *kv;
    g->comps = kv->attn == KVX_ATTN_MLA ? 1 : 2;
    g->num_pages = num_pages;
    g->elem = elem[kv->dtype];
    g->row = (size_t)kv->head_dim * g->elem;
    if (kvx_ctx_heads(ctx, &g->first_head, &g->heads) != KVX_OK ||
        (g->bufs = calloc((size_t)kv->layers * g->comps, sizeof(void *))) == NULL) {
        return -1;
    }
    for (unsigned b = 0; b < kv->layers * g->comps; b++) {
        if (kvx_ctx_kv_buffer(ctx, b / g->comps, b % g->comps, &g->bufs[b], NULL) != KVX_OK) {
            return -1;
        }
    }
    return 0;
}

void demo_kv_cleanup(demo_kv_t *g)
{
    free(g->bufs);
    g->bufs = NULL;
}

uint32_t demo_first_token(uint64_t room)
{
    return (uint32_t)(demo_mix(room ^ 0x70ce70ce70ce70ceull) % 128256u); /* a Llama 3 vocabulary */
}

/* The values of one head of one token: each 8 bytes (4 bf16 elements, 8
 * fp8, 2 fp32) are one multiplicative hash of (row seed, their place), so
 * every element depends on its dim too, at the cost of one multiply per
 * 8 bytes. */
static void kv_row(const demo_kv_t *g, uint64_t seed, unsigned char *dst)
{
    size_t w, words = g->row / 8;

    for (w = 0; w < words; w++) {
        uint64_t v = (seed + w * 0x9e3779b97f4a7c15ull) * 0xd6e8feb86659fd93ull;

        v ^= v >> 32;
        memcpy(dst + 8 * w, &v, 8);
    }
    if (g->row % 8 != 0) {
        uint64_t v = (seed + w * 0x9e3779b97f4a7c15ull) * 0xd6e8feb86659fd93ull;

        v ^= v >> 32;
        memcpy(dst + 8 * w, &v, g->row % 8);
    }
}

static uint64_t row_seed(uint64_t room, unsigned layer, unsigned comp, size_t token, unsigned head)
{
    return demo_mix(demo_mix(room) + (((uint64_t)layer << 40) | ((uint64_t)comp << 39) |
                                      ((uint64_t)head << 28) | (uint64_t)token));
}

/* Where (page, local head h, token t of the page) starts in a buffer. */
static size_t kv_offset(const demo_kv_t *g, size_t page, unsigned h, unsigned t)
{
    size_t P = g->kv.page_size, H = g->heads;

    switch (g->kv.page_layout) {
    case KVX_PAGE_NHD:
        return ((page * P + t) * H + h) * g->row;
    case KVX_PAGE_HEAD_MAJOR:
        return ((h * g->num_pages + page) * P + t) * g->row;
    default:
        return ((page * H + h) * P + t) * g->row;
    }
}

static uint64_t differing(const unsigned char *a, const unsigned char *b, size_t n)
{
    uint64_t bad = 0;

    if (memcmp(a, b, n) != 0) {
        for (size_t i = 0; i < n; i++) {
            bad += a[i] != b[i];
        }
    }
    return bad;
}

/* The buffers [b0, b1) (layer * comps + component) of those pages. */
static uint64_t kv_buffers(const demo_kv_t *g, uint64_t room, const uint32_t *pages, size_t first,
                           size_t n, unsigned b0, unsigned b1, int check)
{
    unsigned char want[16384];
    uint64_t bad = 0;

    for (unsigned b = b0; b < b1; b++) {
        unsigned char *buf = g->bufs[b];

        for (size_t i = first; i < first + n; i++) {
            for (unsigned h = 0; h < g->heads; h++) {
                for (unsigned t = 0; t < g->kv.page_size; t++) {
                    unsigned char *at = buf + kv_offset(g, pages[i], h, t);
                    uint64_t seed = row_seed(room, b / g->comps, b % g->comps,
                                             i * g->kv.page_size + t, g->first_head + h);

                    kv_row(g, seed, check ? want : at);
                    bad += check ? differing(at, want, g->row) : 0;
                }
            }
        }
    }
    return bad;
}

uint64_t demo_kv_pages(const demo_kv_t *g, uint64_t room, const uint32_t *pages, size_t first,
                       size_t n, int check)
{
    return kv_buffers(g, room, pages, first, n, 0, g->kv.layers * g->comps, check);
}

void demo_kv_layer(const demo_kv_t *g, uint64_t room, const uint32_t *pages, size_t first, size_t n,
                   unsigned layer)
{
    kv_buffers(g, room, pages, first, n, layer * g->comps, (layer + 1) * g->comps, 0);
}
