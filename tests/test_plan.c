/*
 * test_plan.c - transfer plans: runs merge only when contiguous on both
 * sides; pieces and put counts for known layouts; pairs for TP ratios.
 */
#include <criterion/criterion.h>
#include <kvx.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/plan.h"

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

/* The writing pair of prefill rank p and decode rank d, with its geometry. */
static plan_mode_t pair_mode(const kvl_t *pk, int p, const kvl_t *dk, int d, plan_geom_t *g)
{
    plan_pair_t pair;

    plan_pair(pk, p, dk, d, &pair);
    cr_assert(pair.writes, "prefill %d does not write decode %d", p, d);
    plan_geom_init(g, pk, 256, dk, 256, &pair);
    return plan_mode(g);
}

static kvl_t geometry_mla(int tp, kvx_page_layout_t layout, unsigned page_size)
{
    kvx_kv_layout_t kv = { 2, page_size, 1, 576, KVX_DTYPE_BF16, KVX_ATTN_MLA, layout };
    kvl_t k;
    kvx_failure_t why;

    cr_assert_eq(kvl_init(&k, &kv, tp, "test", &why), KVX_OK, "%s", why.text);
    return k;
}

/* The table include/kvx.h documents: mode and operations per run of count
 * pages per (layer, component), for each layout and TP ratio. ops -1 means
 * one per page of the run, 0 means one per head the pair moves. */
static const struct mode_case {
    unsigned heads;
    int ptp, dtp;
    kvx_page_layout_t layout;
    plan_mode_t mode;
    int ops;
} mode_cases[] = {
    { 8, 1, 1, KVX_PAGE_HND, PLAN_DIRECT, 1 },
    { 8, 1, 2, KVX_PAGE_HND, PLAN_PACK, 1 },
    { 8, 2, 4, KVX_PAGE_HND, PLAN_PACK, 1 },
    { 8, 2, 1, KVX_PAGE_HND, PLAN_DIRECT, -1 },
    { 8, 4, 2, KVX_PAGE_HND, PLAN_DIRECT, -1 },
    { 8, 4, 1, KVX_PAGE_HND, PLAN_DIRECT, -1 },
    { 2, 4, 2, KVX_PAGE_HND, PLAN_DIRECT, 1 },
    { 2, 4, 1, KVX_PAGE_HND, PLAN_DIRECT, -1 },
    { 2, 1, 4, KVX_PAGE_HND, PLAN_PACK, 1 },
    { 8, 1, 1, KVX_PAGE_NHD, PLAN_DIRECT, 1 },
    { 8, 1, 2, KVX_PAGE_NHD, PLAN_PACK, 1 },
    { 8, 2, 4, KVX_PAGE_NHD, PLAN_PACK, 1 },
    { 8, 2, 1, KVX_PAGE_NHD, PLAN_UNPACK, 1 },
    { 8, 4, 2, KVX_PAGE_NHD, PLAN_UNPACK, 1 },
    { 8, 4, 1, KVX_PAGE_NHD, PLAN_UNPACK, 1 },
    { 2, 4, 2, KVX_PAGE_NHD, PLAN_DIRECT, 1 },
    { 2, 4, 1, KVX_PAGE_NHD, PLAN_UNPACK, 1 },
    { 2, 1, 4, KVX_PAGE_NHD, PLAN_PACK, 1 },
    { 8, 1, 1, KVX_PAGE_HEAD_MAJOR, PLAN_DIRECT, 0 },
    { 8, 1, 2, KVX_PAGE_HEAD_MAJOR, PLAN_DIRECT, 0 },
    { 8, 2, 1, KVX_PAGE_HEAD_MAJOR, PLAN_DIRECT, 0 },
    { 8, 4, 2, KVX_PAGE_HEAD_MAJOR, PLAN_DIRECT, 0 },
    { 2, 4, 1, KVX_PAGE_HEAD_MAJOR, PLAN_DIRECT, 0 },
    { 2, 1, 4, KVX_PAGE_HEAD_MAJOR, PLAN_DIRECT, 0 },
};

static size_t expected_ops(const struct mode_case *c, const plan_geom_t *g, uint32_t count)
{
    /* HEAD_MAJOR folds token and page; its outermost dimension is the head. */
    return c->ops == -1 ? count : c->ops == 0 ? g->extent[2] : (size_t)c->ops;
}

Test(plan_mode, every_layout_and_tp_ratio_takes_the_documented_puts)
{
    static const unsigned page_sizes[] = { 1, 16, 64 };
    static const uint32_t counts[] = { 1, 7, 64 };

    for (size_t i = 0; i < sizeof(mode_cases) / sizeof(mode_cases[0]); i++) {
        const struct mode_case *c = &mode_cases[i];

        for (size_t ps = 0; ps < 3; ps++) {
            kvl_t pk = geometry(c->heads, c->ptp, c->layout, page_sizes[ps]);
            kvl_t dk = geometry(c->heads, c->dtp, c->layout, page_sizes[ps]);

            for (int d = 0; d < dk.tp; d++) {
                for (int p = 0; p < pk.tp; p++) {
                    plan_pair_t pair;
                    plan_geom_t g;
                    plan_mode_t mode;

                    plan_pair(&pk, p, &dk, d, &pair);
                    if (!pair.writes) {
                        continue;
                    }
                    mode = pair_mode(&pk, p, &dk, d, &g);
                    /* One token per page: a per-token piece is a page. */
                    if (page_sizes[ps] == 1 && c->mode == PLAN_UNPACK) {
                        cr_expect_eq(mode, PLAN_DIRECT, "case %zu, page size 1", i);
                        continue;
                    }
                    cr_expect_eq(mode, c->mode, "case %zu (%u heads, %s %d->%d): %s, not %s", i,
                                 c->heads, kvl_page_layout_name(c->layout), c->ptp, c->dtp,
                                 plan_mode_name(mode), plan_mode_name(c->mode));
                    for (size_t n = 0; n < 3; n++) {
                        cr_expect_eq(plan_run_ops(&g, mode, counts[n]),
                                     expected_ops(c, &g, counts[n]),
                                     "case %zu, page size %u, %u pages: %zu ops", i, page_sizes[ps],
                                     counts[n], plan_run_ops(&g, mode, counts[n]));
                    }
                }
            }
        }
    }
}

Test(plan_mode, mla_is_one_put_per_run_in_every_layout)
{
    static const int tps[][2] = { { 1, 1 }, { 2, 1 }, { 1, 2 }, { 4, 2 }, { 2, 4 } };

    for (int layout = KVX_PAGE_HND; layout <= KVX_PAGE_HEAD_MAJOR; layout++) {
        for (size_t i = 0; i < sizeof(tps) / sizeof(tps[0]); i++) {
            kvl_t pk = geometry_mla(tps[i][0], (kvx_page_layout_t)layout, 64);
            kvl_t dk = geometry_mla(tps[i][1], (kvx_page_layout_t)layout, 64);

            for (int d = 0; d < dk.tp; d++) {
                unsigned writers = 0;

                for (int p = 0; p < pk.tp; p++) {
                    plan_pair_t pair;
                    plan_geom_t g;

                    plan_pair(&pk, p, &dk, d, &pair);
                    cr_expect(pair.talks);
                    if (!pair.writes) {
                        continue;
                    }
                    writers++;
                    cr_expect_eq(p, d % pk.tp, "MLA: decode %d is written by prefill %d", d, p);
                    cr_expect_eq(pair_mode(&pk, p, &dk, d, &g), PLAN_DIRECT);
                    cr_expect_eq(plan_run_ops(&g, PLAN_DIRECT, 50), 1);
                }
                cr_expect_eq(writers, 1, "MLA %d->%d: decode %d has %u writers", tps[i][0],
                             tps[i][1], d, writers);
            }
        }
    }
}

Test(plan_mode, packed_pieces_tile_the_remote_run_and_unpacked_the_local_one)
{
    /* HND and NHD 1 -> 2: the pieces of a run fill the destination range
     * [first, first + count * pair_page_bytes) exactly once, which is what
     * lets the sender pack them into one put. NHD 2 -> 1: the source pieces
     * fill the source range, so one data message carries the run. */
    static const kvx_page_layout_t layouts[] = { KVX_PAGE_HND, KVX_PAGE_NHD };

    for (size_t l = 0; l < 2; l++) {
        for (int dir = 0; dir < 2; dir++) {
            kvl_t one = geometry(8, 1, layouts[l], 16), two = geometry(8, 2, layouts[l], 16);
            const kvl_t *pk = dir == 0 ? &one : &two, *dk = dir == 0 ? &two : &one;
            plan_run_t run = { 5, 9, 6 };
            plan_geom_t g;
            plan_iter_t it;
            size_t so, doff, len, covered = 0;
            plan_mode_t mode = pair_mode(pk, dir, dk, 1 - dir, &g);
            size_t base = dir == 0 ? g.dbase + run.dst * g.dpage : g.sbase + run.src * g.spage;
            unsigned char seen[6 * 8 * 16 * 128] = { 0 };

            if (dir == 1 && layouts[l] == KVX_PAGE_HND) {
                cr_expect_eq(mode, PLAN_DIRECT);
                continue;
            }
            cr_expect_eq(mode, dir == 0 ? PLAN_PACK : PLAN_UNPACK);
            plan_iter_init(&it, &g, &run);
            while (plan_iter_next(&it, &so, &doff, &len)) {
                size_t at = (dir == 0 ? doff : so) - base;

                cr_assert_leq(at + len, run.count * g.pair_page_bytes);
                for (size_t b = 0; b < len; b++) {
                    cr_assert_eq(seen[at + b], 0, "byte %zu covered twice", at + b);
                    seen[at + b] = 1;
                }
                covered += len;
            }
            cr_expect_eq(covered, run.count * g.pair_page_bytes);
        }
    }
}

Test(plan_mode, long_runs_take_one_operation_per_max_op)
{
    kvl_t pk = geometry(8, 1, KVX_PAGE_NHD, 16), dk = geometry(8, 2, KVX_PAGE_NHD, 16);
    plan_geom_t g;
    uint32_t per_op;

    cr_assert_eq(pair_mode(&pk, 0, &dk, 1, &g), PLAN_PACK);
    /* 4 heads x 16 tokens x 64 bf16 = 8 KiB per page: 512 pages per 4 MiB. */
    per_op = plan_op_pages(&g);
    cr_expect_eq(per_op, PLAN_MAX_OP / (4 * 16 * 128));
    cr_expect_eq(plan_run_ops(&g, PLAN_PACK, per_op), 1);
    cr_expect_eq(plan_run_ops(&g, PLAN_PACK, per_op + 1), 2);
    cr_expect_eq(plan_run_ops(&g, PLAN_PACK, 3 * per_op), 3);
}

/* The staged path gathers the pieces contiguous in the source pool and
 * scatters the pieces contiguous in the destination pool: both orders must
 * put every byte where one put per piece of both sides would. */
Test(plan_iter, gather_and_scatter_orders_agree_for_every_layout_and_ratio)
{
    static const kvx_page_layout_t layouts[] = { KVX_PAGE_HND, KVX_PAGE_NHD, KVX_PAGE_HEAD_MAJOR };
    static const int ratios[][2] = { { 1, 1 }, { 2, 1 }, { 1, 2 }, { 4, 1 }, { 2, 4 } };
    enum { PAGES = 12 };
    plan_run_t run = { 2, 5, 6 };

    for (size_t l = 0; l < 3; l++) {
        for (size_t r = 0; r < sizeof(ratios) / sizeof(ratios[0]); r++) {
            kvl_t pk = geometry(4, ratios[r][0], layouts[l], 4);
            kvl_t dk = geometry(4, ratios[r][1], layouts[l], 4);

            for (int p = 0; p < ratios[r][0]; p++) {
                for (int d = 0; d < ratios[r][1]; d++) {
                    size_t sb = PAGES * pk.page_bytes, db = PAGES * dk.page_bytes;
                    unsigned char *src = malloc(sb), *want = calloc(1, db), *got = calloc(1, db);
                    unsigned char *staged = malloc(sb);
                    size_t so, doff, n, off = 0, back = 0;
                    plan_pair_t pair;
                    plan_geom_t g;
                    plan_iter_t it;

                    plan_pair(&pk, p, &dk, d, &pair);
                    if (!pair.writes) {
                        free(src), free(want), free(got), free(staged);
                        continue;
                    }
                    plan_geom_init(&g, &pk, PAGES, &dk, PAGES, &pair);
                    for (size_t i = 0; i < sb; i++) {
                        src[i] = (unsigned char)(i * 131 + i / 251);
                    }
                    plan_iter_init(&it, &g, &run);
                    while (plan_iter_next(&it, &so, &doff, &n)) {
                        memcpy(want + doff, src + so, n);
                    }
                    plan_iter_init_sides(&it, &g, &run, PLAN_SRC);
                    while (plan_iter_next(&it, &so, &doff, &n)) {
                        memcpy(staged + off, src + so, n);
                        off += n;
                    }
                    cr_expect_eq(off, run.count * g.pair_page_bytes);
                    plan_iter_init_sides(&it, &g, &(plan_run_t){ 0, run.dst, run.count }, PLAN_DST);
                    while (plan_iter_next(&it, &so, &doff, &n)) {
                        memcpy(got + doff, staged + back, n);
                        back += n;
                    }
                    cr_expect_eq(back, off);
                    cr_expect_eq(memcmp(got, want, db), 0,
                                 "layout %zu, %d->%d, prefill %d decode %d: bytes misplaced", l,
                                 ratios[r][0], ratios[r][1], p, d);
                    free(src), free(want), free(got), free(staged);
                }
            }
        }
    }
}

/* A data message carries a run's pieces back to back in plan_iter order;
 * plan_src_contiguous() says when those are the run's bytes as they lie
 * in the source pool (sent from there), else the sender gathers them. */
Test(plan_mode, src_contiguous_means_pieces_follow_each_other_in_the_source)
{
    static const unsigned page_sizes[] = { 1, 16 };
    int seen[2] = { 0, 0 };

    for (size_t i = 0; i < sizeof(mode_cases) / sizeof(mode_cases[0]); i++) {
        const struct mode_case *c = &mode_cases[i];

        for (size_t ps = 0; ps < 2; ps++) {
            kvl_t pk = geometry(c->heads, c->ptp, c->layout, page_sizes[ps]);
            kvl_t dk = geometry(c->heads, c->dtp, c->layout, page_sizes[ps]);

            for (int d = 0; d < dk.tp; d++) {
                for (int p = 0; p < pk.tp; p++) {
                    plan_run_t run = { 5, 9, 7 };
                    plan_pair_t pair;
                    plan_geom_t g;
                    plan_iter_t it;
                    size_t so, doff, n, first = 0, at = 0;
                    int follow = 1, contig;

                    plan_pair(&pk, p, &dk, d, &pair);
                    if (!pair.writes) {
                        continue;
                    }
                    pair_mode(&pk, p, &dk, d, &g);
                    plan_iter_init(&it, &g, &run);
                    while (plan_iter_next(&it, &so, &doff, &n)) {
                        first = at == 0 ? so : first;
                        follow &= so == first + at;
                        at += n;
                    }
                    contig = plan_src_contiguous(&g);
                    cr_expect_eq(at, (size_t)run.count * g.pair_page_bytes, "case %zu", i);
                    cr_expect_eq(contig, follow, "case %zu (%s %d->%d, page size %u)", i,
                                 kvl_page_layout_name(c->layout), c->ptp, c->dtp, page_sizes[ps]);
                    seen[contig]++;
                }
            }
        }
    }
    cr_expect(seen[0] > 0 && seen[1] > 0, "both kinds: %d strided, %d contiguous", seen[0],
              seen[1]);
}
