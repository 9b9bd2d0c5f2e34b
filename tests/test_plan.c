/*
 * test_plan.c - transfer plans: runs merge only when contiguous on both
 * sides; pieces and put counts for known layouts; pairs for TP ratios.
 */
#include <criterion/criterion.h>
#include <kvx.h>

#include "core/plan.h"

static kvl_t geometry(unsigned kv_heads, int tp, kvx_page_layout_t layout, unsigned page_size)
{
    kvx_kv_layout_t kv = { 2, page_size, kv_heads, 64, KVX_DTYPE_BF16, KVX_ATTN_MHA, layout };
    kvl_t k;
    kvx_failure_t why;

    cr_assert_eq(kvl_init(&k, &kv, tp, "test", &why), KVX_OK, "%s", why.text);
    return k;
}

Test(plan_runs, merge_only_when_contiguous_on_both_sides)
{
    uint32_t src[] = { 10, 11, 12, 13, 20, 21, 30 };
    uint32_t dst[] = { 5, 6, 8, 9, 10, 11, 12 };
    plan_run_t runs[7];
    size_t n = plan_runs(src, dst, 7, runs);

    /* 10,11 -> 5,6 | 12,13 -> 8,9 (dst jumps) | 20,21 -> 10,11 (src jumps) | 30 -> 12 */
    cr_assert_eq(n, 4);
    cr_expect_eq(runs[0].src, 10);
    cr_expect_eq(runs[0].dst, 5);
    cr_expect_eq(runs[0].count, 2);
    cr_expect_eq(runs[1].src, 12);
    cr_expect_eq(runs[1].dst, 8);
    cr_expect_eq(runs[1].count, 2);
    cr_expect_eq(runs[2].count, 2);
    cr_expect_eq(runs[3].src, 30);
    cr_expect_eq(runs[3].count, 1);
}

Test(plan_runs, fully_contiguous_is_one_run_and_reversed_is_not)
{
    uint32_t a[64], b[64], rev[64];
    plan_run_t runs[64];

    for (uint32_t i = 0; i < 64; i++) {
        a[i] = 100 + i;
        b[i] = 7 + i;
        rev[i] = 200 - i;
    }
    cr_expect_eq(plan_runs(a, b, 64, runs), 1);
    cr_expect_eq(runs[0].count, 64);
    cr_expect_eq(plan_runs(a, rev, 64, runs), 64);
    cr_expect_eq(plan_runs(a, b, 0, runs), 0);
}

Test(plan_pieces, homogeneous_hnd_run_is_one_put)
{
    kvl_t k = geometry(8, 2, KVX_PAGE_HND, 16);
    plan_pair_t pair;
    plan_geom_t g;
    plan_run_t run = { 3, 40, 10 };
    plan_iter_t it;
    size_t so, doff, len, n = 0;

    plan_pair(&k, 1, &k, 1, &pair);
    cr_assert(pair.writes);
    cr_expect_eq(pair.nheads, 4);
    plan_geom_init(&g, &k, 100, &k, 100, &pair);
    cr_expect_eq(plan_run_pieces(&g, 10), 1);
    plan_iter_init(&it, &g, &run);
    while (plan_iter_next(&it, &so, &doff, &len)) {
        n++;
        cr_expect_eq(so, 3 * k.page_bytes);
        cr_expect_eq(doff, 40 * k.page_bytes);
        cr_expect_eq(len, 10 * k.page_bytes);
    }
    cr_expect_eq(n, 1);
}

Test(plan_pieces, put_count_for_known_inputs)
{
    /* 2 -> 1 with HND: the decode page holds both halves, so each page of a
     * run is its own piece; with HEAD_MAJOR one piece per head. */
    kvl_t p = geometry(4, 2, KVX_PAGE_HND, 16), d = geometry(4, 1, KVX_PAGE_HND, 16);
    kvl_t ph = geometry(4, 2, KVX_PAGE_HEAD_MAJOR, 16),
          dh = geometry(4, 1, KVX_PAGE_HEAD_MAJOR, 16);
    plan_pair_t pair;
    plan_geom_t g;

    plan_pair(&p, 1, &d, 0, &pair);
    cr_assert(pair.writes);
    cr_expect_eq(pair.src_head, 0);
    cr_expect_eq(pair.dst_head, 2);
    cr_expect_eq(pair.nheads, 2);
    plan_geom_init(&g, &p, 64, &d, 64, &pair);
    cr_expect_eq(plan_run_pieces(&g, 10), 10);
    plan_pair(&ph, 1, &dh, 0, &pair);
    plan_geom_init(&g, &ph, 64, &dh, 64, &pair);
    cr_expect_eq(plan_run_pieces(&g, 10), 2);
    cr_expect_eq(plan_run_pieces(&g, 60), 2);
}

Test(plan_pieces, pieces_cover_exactly_the_bytes_of_the_heads)
{
    kvl_t p = geometry(4, 1, KVX_PAGE_NHD, 8), d = geometry(4, 2, KVX_PAGE_NHD, 8);
    plan_pair_t pair;
    plan_geom_t g;
    plan_run_t run = { 0, 0, 3 };
    plan_iter_t it;
    size_t so, doff, len, total = 0, n = 0;

    plan_pair(&p, 0, &d, 1, &pair);
    cr_assert(pair.writes);
    cr_expect_eq(pair.src_head, 2);
    cr_expect_eq(pair.dst_head, 0);
    plan_geom_init(&g, &p, 16, &d, 16, &pair);
    plan_iter_init(&it, &g, &run);
    while (plan_iter_next(&it, &so, &doff, &len)) {
        /* NHD: the two heads of one token are contiguous on both sides. */
        cr_expect_eq(len, 2 * 64 * 2);
        cr_expect_eq(so % (4 * 128), 2 * 128);
        n++;
        total += len;
    }
    cr_expect_eq(n, 3 * 8);
    cr_expect_eq(total, 3 * d.page_bytes);
}

Test(plan_pair, every_decode_head_has_exactly_one_writer)
{
    struct {
        unsigned heads;
        int ptp, dtp;
    } cases[] = { { 8, 2, 1 }, { 8, 1, 2 }, { 8, 4, 2 }, { 8, 2, 4 }, { 8, 4, 1 },
                  { 2, 4, 1 }, { 2, 1, 4 }, { 2, 4, 8 }, { 1, 4, 2 }, { 4, 4, 4 } };

    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        kvl_t p = geometry(cases[c].heads, cases[c].ptp, KVX_PAGE_HND, 16);
        kvl_t d = geometry(cases[c].heads, cases[c].dtp, KVX_PAGE_HND, 16);

        for (int dr = 0; dr < d.tp; dr++) {
            unsigned covered = 0, aux_writers = 0;

            for (int pr = 0; pr < p.tp; pr++) {
                plan_pair_t pair;

                plan_pair(&p, pr, &d, dr, &pair);
                if (pair.writes) {
                    covered += pair.nheads;
                    cr_expect_leq(pair.dst_head + pair.nheads, d.heads);
                    cr_expect_leq(pair.src_head + pair.nheads, p.heads);
                }
                aux_writers += pair.aux_writer;
            }
            cr_expect_eq(covered, d.heads, "heads %u, %d->%d, decode %d: %u heads written",
                         cases[c].heads, cases[c].ptp, cases[c].dtp, dr, covered);
            cr_expect_eq(aux_writers, 1);
        }
    }
}
