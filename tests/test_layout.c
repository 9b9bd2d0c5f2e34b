/*
 * test_layout.c - job layout strings and KV layout checks: what users type
 * wrong, and the exact reasons they read.
 */
#include <criterion/criterion.h>
#include <kvx.h>
#include <string.h>

#include "core/base/joblayout.h"
#include "core/base/kvlayout.h"

Test(joblayout, parses_and_places_ranks)
{
    joblayout_t l;
    kvx_failure_t why;
    kvx_role_t role;
    int inst, tp;

    cr_assert_eq(joblayout_parse("prefill:2x4,decode:1x8", 16, &l, &why), KVX_OK);
    joblayout_locate(&l, 5, &role, &inst, &tp);
    cr_expect_eq(role, KVX_ROLE_PREFILL);
    cr_expect_eq(inst, 1);
    cr_expect_eq(tp, 1);
    joblayout_locate(&l, 9, &role, &inst, &tp);
    cr_expect_eq(role, KVX_ROLE_DECODE);
    cr_expect_eq(inst, 0);
    cr_expect_eq(tp, 1);
    cr_expect_eq(joblayout_rank(&l, KVX_ROLE_DECODE, 0, 7), 15);
    cr_expect_eq(joblayout_rank(&l, KVX_ROLE_PREFILL, 1, 3), 7);
}

Test(joblayout, decode_first_order_is_kept)
{
    joblayout_t l;
    kvx_failure_t why;
    kvx_role_t role;
    int inst, tp;

    cr_assert_eq(joblayout_parse("decode:1x2,prefill:1x1", 3, &l, &why), KVX_OK);
    joblayout_locate(&l, 2, &role, &inst, &tp);
    cr_expect_eq(role, KVX_ROLE_PREFILL);
    cr_expect_eq(joblayout_rank(&l, KVX_ROLE_DECODE, 0, 1), 1);
}

Test(joblayout, errors_name_the_problem)
{
    struct {
        const char *text;
        int world;
        const char *expect;
    } bad[] = {
        { "prefill:1x2,decode:1x2", 3,
          "layout 'prefill:1x2,decode:1x2' needs 4 ranks but the world has 3" },
        { "prefill:0x2,decode:1x2", 2,
          "prefill needs at least 1 instance of TP at least 1, not 0x2" },
        { "prefill:1x2", 2, "layout 'prefill:1x2' has no decode instances" },
        { "junk", 2, "layout 'junk': expected prefill:AxB,decode:CxD" },
        { "prefill:1x1,prefill:1x1", 2, "role prefill appears twice" },
        { "prefill:1x1,decode:1x1,", 2, "expected prefill:AxB" },
        { "prefill:1y1,decode:1x1", 2, "expected prefill:AxB" },
        { "", 2, "no job layout: set KVX_LAYOUT" },
        { NULL, 2, "no job layout" },
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        joblayout_t l;
        kvx_failure_t why;

        cr_expect_eq(joblayout_parse(bad[i].text, bad[i].world, &l, &why), KVX_ERR_LAYOUT);
        cr_expect(strstr(why.text, bad[i].expect) != NULL, "'%s' gave: %s",
                  bad[i].text ? bad[i].text : "(null)", why.text);
        cr_expect_eq(why.status, KVX_ERR_LAYOUT);
    }
}

static kvx_kv_layout_t base(void)
{
    kvx_kv_layout_t kv = { 4, 16, 8, 128, KVX_DTYPE_BF16, KVX_ATTN_MHA, KVX_PAGE_HND };
    return kv;
}

Test(kvlayout, geometry_per_rank)
{
    kvx_kv_layout_t kv = base();
    kvx_failure_t why;
    kvl_t k;

    cr_assert_eq(kvl_init(&k, &kv, 4, "prefill[0]", &why), KVX_OK);
    cr_expect_eq(k.heads, 2);
    cr_expect_eq(k.page_bytes, 16 * 2 * 128 * 2);
    cr_expect_eq(kvl_first_head(&k, 3), 6);
    kv.kv_heads = 2;
    cr_assert_eq(kvl_init(&k, &kv, 8, "decode[0]", &why), KVX_OK);
    cr_expect_eq(k.heads, 1);
    cr_expect_eq(kvl_first_head(&k, 5), 1, "8 ranks over 2 heads: ranks 4..7 hold head 1");
    kv.kv_heads = 6;
    cr_expect_eq(kvl_init(&k, &kv, 4, "decode[1]", &why), KVX_ERR_INVALID_PARAM);
    cr_expect_str_eq(why.text, "decode[1]: kv_heads=6 cannot be split over TP 4 (neither divides "
                               "the other)");
}

Test(kvlayout, pair_mismatches_name_both_values_and_instances)
{
    kvx_kv_layout_t pk = base(), dk = base();
    kvl_t p, d;
    kvx_failure_t why;

    cr_assert_eq(kvl_init(&p, &pk, 2, "p", &why), KVX_OK);
    dk.page_size = 32;
    cr_assert_eq(kvl_init(&d, &dk, 2, "d", &why), KVX_OK);
    cr_expect_eq(kvl_check_pair(&p, 0, 8, &d, 1, 8, &why), KVX_ERR_KV_MISMATCH);
    cr_expect_str_eq(why.text, "page size mismatch: prefill[0] has page_size=16, decode[1] has "
                               "page_size=32");
    dk = base();
    dk.dtype = KVX_DTYPE_FP8;
    kvl_init(&d, &dk, 2, "d", &why);
    kvl_check_pair(&p, 0, 8, &d, 0, 8, &why);
    cr_expect_str_eq(why.text,
                     "dtype mismatch: prefill[0] has dtype=bf16, decode[0] has dtype=fp8");
    dk = base();
    dk.layers = 3;
    kvl_init(&d, &dk, 2, "d", &why);
    kvl_check_pair(&p, 0, 8, &d, 0, 8, &why);
    cr_expect_str_eq(why.text,
                     "layer count mismatch: prefill[0] has layers=4, decode[0] has layers=3");
    dk = base();
    dk.head_dim = 64;
    kvl_init(&d, &dk, 2, "d", &why);
    kvl_check_pair(&p, 0, 8, &d, 0, 8, &why);
    cr_expect_str_eq(why.text,
                     "head dim mismatch: prefill[0] has head_dim=128, decode[0] has head_dim=64");
    dk = base();
    dk.kv_heads = 4;
    kvl_init(&d, &dk, 2, "d", &why);
    kvl_check_pair(&p, 0, 8, &d, 0, 8, &why);
    cr_expect_str_eq(why.text,
                     "KV head count mismatch: prefill[0] has kv_heads=8, decode[0] has kv_heads=4");
    dk = base();
    dk.page_layout = KVX_PAGE_NHD;
    kvl_init(&d, &dk, 2, "d", &why);
    kvl_check_pair(&p, 0, 8, &d, 0, 8, &why);
    cr_expect_str_eq(
        why.text,
        "page layout mismatch: prefill[0] has page_layout=HND, decode[0] has page_layout=NHD");
    dk = base();
    kvl_init(&d, &dk, 2, "d", &why);
    kvl_check_pair(&p, 0, 16, &d, 0, 8, &why);
    cr_expect_str_eq(
        why.text,
        "aux size mismatch: prefill[0] has aux_item_size=16, decode[0] has aux_item_size=8");
    kvl_init(&d, &dk, 8, "d", &why);
    kvl_init(&p, &pk, 4, "p", &why);
    cr_expect_eq(kvl_check_pair(&p, 0, 8, &d, 0, 8, &why), KVX_OK);
    dk.attn = KVX_ATTN_MLA;
    dk.kv_heads = 1;
    kvl_init(&d, &dk, 2, "d", &why);
    kvl_check_pair(&p, 0, 8, &d, 0, 8, &why);
    cr_expect_str_eq(why.text,
                     "attention kind mismatch: prefill[0] has attn=MHA, decode[0] has attn=MLA");
    pk.kv_heads = dk.kv_heads = 6;
    dk.attn = KVX_ATTN_MHA;
    kvl_init(&p, &pk, 2, "p", &why);
    kvl_init(&d, &dk, 3, "d", &why);
    cr_expect_eq(kvl_check_pair(&p, 1, 8, &d, 0, 8, &why), KVX_ERR_KV_MISMATCH);
    cr_expect_str_eq(why.text, "TP mismatch: prefill[1] has tp=2, decode[0] has tp=3, and neither "
                               "divides the other");
}
