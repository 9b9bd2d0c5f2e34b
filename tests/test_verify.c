/*
 * test_verify.c - KVX_VERIFY digests: the writer's and the decode's agree on
 * the same rows whatever the page ids, pool strides and TP slices; a flipped
 * byte or a row in the wrong place changes exactly the unit it is in; the
 * sample is deterministic, at its rate, and never empty.
 */
#include <criterion/criterion.h>
#include <kvx.h>
#include <stdlib.h>
#include <string.h>

#include "core/xfer/verify.h"

#define NPAGES 9  /* pages of the room */
#define POOL   40 /* pages of each pool */

static kvl_t geometry(unsigned kv_heads, int tp, kvx_page_layout_t layout)
{
    kvx_kv_layout_t kv = { 3, 4, kv_heads, 16, KVX_DTYPE_BF16, KVX_ATTN_MHA, layout };
    kvl_t k;
    kvx_failure_t why;

    cr_assert_eq(kvl_init(&k, &kv, tp, "test", &why), KVX_OK, "%s", why.text);
    return k;
}

/* A pool of POOL pages per (layer, component), buffers page_stride apart. */
typedef struct pool {
    kvl_t k;
    void *bufs[6];
} pool_t;

static void pool_init(pool_t *p, const kvl_t *k, size_t page_stride)
{
    p->k = *k;
    p->k.page_stride = page_stride;
    for (int b = 0; b < 6; b++) {
        p->bufs[b] = calloc(1, POOL * page_stride + POOL * k->page_bytes);
    }
}

static void pool_free(pool_t *p)
{
    for (int b = 0; b < 6; b++) {
        free(p->bufs[b]);
    }
}

static char *row_at(const pool_t *p, unsigned layer, unsigned comp, uint32_t page, unsigned head,
                    unsigned token)
{
    kvl_strides_t s = kvl_strides(&p->k, POOL);

    return (char *)p->bufs[layer * 2 + comp] + page * s.page + head * s.head + token * s.token;
}

/* Fills the source rows of model heads [0, 4) with a pattern of their
 * coordinates, and copies the heads [first, first + n) into the decode's
 * pool at its pages (the transfer). */
static void fill_and_move(const pool_t *src, const uint32_t *spages, const pool_t *dst,
                          const uint32_t *dpages, unsigned first, unsigned n)
{
    for (unsigned l = 0; l < 3; l++) {
        for (unsigned c = 0; c < 2; c++) {
            for (unsigned i = 0; i < NPAGES; i++) {
                for (unsigned h = 0; h < src->k.heads; h++) {
                    for (unsigned t = 0; t < 4; t++) {
                        char *r = row_at(src, l, c, spages[i], h, t);

                        for (size_t b = 0; b < src->k.row; b++) {
                            r[b] = (char)(l * 131 + c * 71 + i * 31 + h * 17 + t * 7 + b);
                        }
                        if (h >= first && h < first + n) {
                            memcpy(row_at(dst, l, c, dpages[i], h - first, t), r, src->k.row);
                        }
                    }
                }
            }
        }
    }
}

static const uint32_t spages[NPAGES] = { 3, 4, 5, 9, 10, 30, 31, 32, 0 };
/* The decode's pages: runs 7-9, 20-22, 2 and 38-39 (four units per layer and component). */
static const uint32_t dpages[NPAGES] = { 7, 8, 9, 20, 21, 22, 2, 38, 39 };

static void digests_of(const verify_units_t *u, const pool_t *p, const uint32_t *pages,
                       unsigned first_head, uint64_t *out)
{
    verify_side_t side = { &p->k, POOL, p->bufs, pages, first_head, NULL };
    kvx_failure_t why;

    cr_assert_eq(verify_digest(u, &side, out, &why), KVX_OK);
}

static void same_rows_same_digests(kvx_page_layout_t layout, size_t dst_stride_pages)
{
    kvl_t pk = geometry(4, 1, layout), dk = geometry(4, 2, layout);
    pool_t src, dst;
    verify_units_t u = { 42, 3, 2, 2, dpages, NPAGES, 2, 8 };
    uint64_t a[64], b[64];
    size_t K = verify_count(&u);

    pool_init(&src, &pk, pk.page_bytes);
    pool_init(&dst, &dk, dst_stride_pages * dk.page_bytes);
    /* decode tp1 holds model heads 2-3: its first pool head is 0 */
    fill_and_move(&src, spages, &dst, dpages, 2, 2);
    cr_assert_eq(K, 4 * 3 * 2, "4 runs x 3 layers x 2 components, got %zu", K);
    cr_assert_eq(verify_checked(&u), K);
    digests_of(&u, &src, spages, 2, a);
    digests_of(&u, &dst, dpages, 0, b);
    for (size_t k = 0; k < K; k++) {
        cr_expect_eq(a[k], b[k], "unit %zu differs", k);
    }

    /* One flipped byte: exactly its unit differs (layer 1, V, page 21 is
     * position 4, in the second run 20-22: unit (1 * 3 + 1) * 2 + 1 = 9). */
    row_at(&dst, 1, 1, 21, 1, 3)[5] ^= 1;
    digests_of(&u, &dst, dpages, 0, b);
    for (size_t k = 0; k < K; k++) {
        cr_expect_eq(a[k] != b[k], k == 9, "unit %zu", k);
    }
    row_at(&dst, 1, 1, 21, 1, 3)[5] ^= 1;

    /* Two rows swapped (the same bytes, in the wrong places): unit 9 again. */
    {
        char tmp[64], *x = row_at(&dst, 1, 1, 21, 0, 0), *y = row_at(&dst, 1, 1, 21, 1, 2);

        memcpy(tmp, x, dk.row);
        memcpy(x, y, dk.row);
        memcpy(y, tmp, dk.row);
        digests_of(&u, &dst, dpages, 0, b);
        for (size_t k = 0; k < K; k++) {
            cr_expect_eq(a[k] != b[k], k == 9, "swap: unit %zu", k);
        }
    }
    {
        /* Undo, then swap the whole of pages 21 and 22 of layer 1 V (every
         * byte right, two pages in each other's place): unit 9 again. */
        char tmp[64], *x = row_at(&dst, 1, 1, 21, 0, 0), *y = row_at(&dst, 1, 1, 21, 1, 2);

        memcpy(tmp, x, dk.row);
        memcpy(x, y, dk.row);
        memcpy(y, tmp, dk.row);
        for (unsigned h = 0; h < 2; h++) {
            for (unsigned t = 0; t < 4; t++) {
                x = row_at(&dst, 1, 1, 21, h, t);
                y = row_at(&dst, 1, 1, 22, h, t);
                memcpy(tmp, x, dk.row);
                memcpy(x, y, dk.row);
                memcpy(y, tmp, dk.row);
            }
        }
        digests_of(&u, &dst, dpages, 0, b);
        for (size_t k = 0; k < K; k++) {
            cr_expect_eq(a[k] != b[k], k == 9, "pages swapped: unit %zu", k);
        }
    }
    {
        unsigned layer, comp;
        size_t pos, n;

        verify_unit(&u, 9, &layer, &comp, &pos, &n);
        cr_expect(layer == 1 && comp == 1 && pos == 3 && n == 3,
                  "unit 9: layer %u comp %u [%zu, +%zu)", layer, comp, pos, n);
    }
    pool_free(&src);
    pool_free(&dst);
}

Test(verify, hnd_tp_slice_and_stride)
{
    same_rows_same_digests(KVX_PAGE_HND, 2);
}

Test(verify, nhd_tp_slice_and_stride)
{
    same_rows_same_digests(KVX_PAGE_NHD, 3);
}

Test(verify, head_major_tp_slice)
{
    same_rows_same_digests(KVX_PAGE_HEAD_MAJOR, 1);
}

Test(verify, another_room_other_digests)
{
    kvl_t pk = geometry(4, 1, KVX_PAGE_HND), dk = geometry(4, 2, KVX_PAGE_HND);
    pool_t src, dst;
    verify_units_t u = { 42, 3, 2, 2, dpages, NPAGES, 2, 8 }, v = u;
    uint64_t a[64], b[64];

    pool_init(&src, &pk, pk.page_bytes);
    pool_init(&dst, &dk, dk.page_bytes);
    fill_and_move(&src, spages, &dst, dpages, 2, 2);
    v.room = 43; /* a stale room's KV, byte for byte, is not this room's */
    digests_of(&u, &src, spages, 2, a);
    digests_of(&v, &dst, dpages, 0, b);
    for (size_t k = 0; k < verify_count(&u); k++) {
        cr_expect_neq(a[k], b[k], "unit %zu", k);
    }
    pool_free(&src);
    pool_free(&dst);
}

Test(verify, runs_cut_at_64_pages)
{
    uint32_t pages[150];
    verify_units_t u = { 1, 1, 1, 1, pages, 150, 2, 8 };
    unsigned layer, comp;
    size_t pos, n;

    for (uint32_t i = 0; i < 150; i++) {
        pages[i] = 1000 + i;
    }
    cr_assert_eq(verify_count(&u), 3);
    verify_unit(&u, 2, &layer, &comp, &pos, &n);
    cr_expect(pos == 128 && n == 22, "[%zu, +%zu)", pos, n);
}

Test(verify, sample_rate_and_deterministic)
{
    uint32_t pages[400];
    verify_units_t u = { 7, 2, 2, 1, pages, 400, 1, 8 };
    size_t total = 0, checked = 0;

    for (uint32_t i = 0; i < 400; i++) {
        pages[i] = 2 * i; /* no two consecutive: one unit per page */
    }
    cr_assert_eq(verify_count(&u), 1600);
    /* 1 in 8 of 1600: 200, binomial sd 13 */
    cr_expect(verify_checked(&u) >= 150 && verify_checked(&u) <= 250, "%zu of 1600",
              verify_checked(&u));
    for (uint64_t room = 0; room < 2000; room++) {
        size_t n = 0;

        u.room = room;
        u.npages = 1 + room % 3;
        for (size_t k = 0; k < verify_count(&u); k++) {
            n += verify_selected(&u, k);
        }
        cr_expect_eq(n, verify_checked(&u)); /* the same draw every time */
        total += verify_count(&u);
        checked += n;
    }
    /* 16000 units: 2000 expected, sd 42 */
    cr_expect(checked >= 1800 && checked <= 2200, "%zu of %zu units", checked, total);
    u.mode = 2;
    cr_expect_eq(verify_checked(&u), verify_count(&u));
}
