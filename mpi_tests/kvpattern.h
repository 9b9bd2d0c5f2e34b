/*
 * kvpattern.h - the deterministic KV content tests (and kvx-demo) compute on
 * prefill ranks and verify on decode ranks: every element of (room, layer,
 * component, token, head, byte) has a value no other element shares by
 * accident, and its address follows the layout documented in kvx.h -- not
 * kvx's internal plan code, so the tests check kvx against its documentation.
 */
#ifndef KVX_TESTS_KVPATTERN_H
#define KVX_TESTS_KVPATTERN_H

#include <kvx.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct kvp_geom {
    kvx_kv_layout_t kv;
    unsigned heads;      /* heads this rank holds */
    unsigned first_head; /* first model head it holds */
    size_t num_pages;
    size_t elem; /* bytes per element */
} kvp_geom_t;

static inline size_t kvp_elem(kvx_dtype_t d)
{
    return d == KVX_DTYPE_FP8 ? 1 : d == KVX_DTYPE_FP32 ? 4 : 2;
}

/* Byte offset of (page, local head, token) inside one (layer, component) buffer. */
static inline size_t kvp_offset(const kvp_geom_t *g, size_t page, unsigned h, unsigned t)
{
    size_t row = (size_t)g->kv.head_dim * g->elem, P = g->kv.page_size, H = g->heads;

    switch (g->kv.page_layout) {
    case KVX_PAGE_NHD:
        return ((page * P + t) * H + h) * row;
    case KVX_PAGE_HEAD_MAJOR:
        return ((h * g->num_pages + page) * P + t) * row;
    default:
        return ((page * H + h) * P + t) * row;
    }
}

static inline uint64_t kvp_mix(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185ull;
    x ^= x >> 27;
    x *= 0x81dadef4bc2dd44dull;
    x ^= x >> 33;
    return x;
}

/* Fills one head-row (head_dim elements) of (room, layer, comp, token, head). */
static inline void kvp_fill_row(unsigned char *dst, size_t len, uint64_t room, unsigned layer,
                                unsigned comp, size_t token, unsigned head)
{
    uint64_t s = kvp_mix(room * 0x9e3779b97f4a7c15ull ^ ((uint64_t)layer << 48) ^
                         ((uint64_t)comp << 44) ^ ((uint64_t)head << 32) ^ token);

    for (size_t i = 0; i < len; i += 8) {
        uint64_t v = kvp_mix(s + i);
        size_t n = len - i < 8 ? len - i : 8;

        memcpy(dst + i, &v, n);
    }
}

/* Counts bytes of a row that differ from the pattern. */
static inline size_t kvp_check_row(const unsigned char *src, size_t len, uint64_t room,
                                   unsigned layer, unsigned comp, size_t token, unsigned head)
{
    unsigned char want[4096];
    size_t bad = 0;

    for (size_t o = 0; o < len; o += sizeof(want)) {
        size_t n = len - o < sizeof(want) ? len - o : sizeof(want);

        kvp_fill_row(want, n, room, layer, comp, token, head);
        for (size_t i = 0; i < n; i++) {
            bad += src[o + i] != want[i];
        }
    }
    return bad;
}

/* Writes (fill != 0) or checks the room's tokens [tok0, tok0 + n*page_size)
 * held in pages[0..n) for layers [l0, l0 + nl), every component and head of
 * this rank. Returns mismatched bytes (0 when filling). */
static inline size_t kvp_pages_layers(const kvp_geom_t *g, void *const *bufs, unsigned comps,
                                      uint64_t room, const uint32_t *pages, size_t n, size_t tok0,
                                      unsigned l0, unsigned nl, int fill)
{
    size_t row = (size_t)g->kv.head_dim * g->elem, bad = 0;

    for (unsigned l = l0; l < l0 + nl; l++) {
        for (unsigned c = 0; c < comps; c++) {
            unsigned char *buf = bufs[l * comps + c];

            for (size_t i = 0; i < n; i++) {
                for (unsigned h = 0; h < g->heads; h++) {
                    for (unsigned t = 0; t < g->kv.page_size; t++) {
                        unsigned char *p = buf + kvp_offset(g, pages[i], h, t);
                        size_t token = tok0 + i * g->kv.page_size + t;

                        if (fill) {
                            kvp_fill_row(p, row, room, l, c, token, g->first_head + h);
                        } else {
                            bad += kvp_check_row(p, row, room, l, c, token, g->first_head + h);
                        }
                    }
                }
            }
        }
    }
    return bad;
}

/* The same for every layer. */
static inline size_t kvp_pages(const kvp_geom_t *g, void *const *bufs, unsigned comps,
                               uint64_t room, const uint32_t *pages, size_t n, size_t tok0,
                               int fill)
{
    return kvp_pages_layers(g, bufs, comps, room, pages, n, tok0, 0, g->kv.layers, fill);
}

/* The aux payload of a room: its "first output token", derived from the id. */
static inline uint64_t kvp_aux(uint64_t room)
{
    return kvp_mix(room ^ 0xa0a0a0a0ull) & 0xffffffffull;
}

#endif
