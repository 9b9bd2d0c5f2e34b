/*
 * kvlayout.c - per-rank KV geometry and the prefill/decode pair checks.
 */
#include "config.h"

#include "core/base/kvlayout.h"
#include "util/failure.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *kvl_dtype_name(kvx_dtype_t dtype)
{
    static const char *const names[] = { "bf16", "fp16", "fp8", "fp32" };

    return (unsigned)dtype < 4 ? names[dtype] : "invalid";
}

const char *kvl_attn_name(kvx_attn_t attn)
{
    return attn == KVX_ATTN_MHA ? "MHA" : attn == KVX_ATTN_MLA ? "MLA" : "invalid";
}

const char *kvl_page_layout_name(kvx_page_layout_t layout)
{
    static const char *const names[] = { "HND", "NHD", "HEAD_MAJOR" };

    return (unsigned)layout < 3 ? names[layout] : "invalid";
}

static size_t kvl_elem(kvx_dtype_t dtype)
{
    static const size_t sizes[] = { 2, 2, 1, 4 };

    return sizes[dtype];
}

static kvx_status_t kvl_bad(kvx_failure_t *why, const char *who, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static kvx_status_t kvl_bad(kvx_failure_t *why, const char *who, const char *fmt, ...)
{
    char text[200];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    failure_set(why, KVX_ERR_INVALID_PARAM, KVX_STAGE_INIT, NULL, "%s: %s", who, text);
    return KVX_ERR_INVALID_PARAM;
}

kvx_status_t kvl_init(kvl_t *k, const kvx_kv_layout_t *kv, int tp, const char *who,
                      kvx_failure_t *why)
{
    unsigned heads = kv->attn == KVX_ATTN_MLA ? 1 : kv->kv_heads;

    if ((unsigned)kv->dtype > KVX_DTYPE_FP32 || (unsigned)kv->attn > KVX_ATTN_MLA ||
        (unsigned)kv->page_layout > KVX_PAGE_HEAD_MAJOR) {
        return kvl_bad(why, who, "invalid dtype (%u), attention kind (%u) or page layout (%u)",
                       (unsigned)kv->dtype, (unsigned)kv->attn, (unsigned)kv->page_layout);
    }
    if (kv->layers == 0 || kv->page_size == 0 || kv->head_dim == 0 || heads == 0) {
        return kvl_bad(why, who,
                       "layers, page_size, kv_heads and head_dim must be positive (layers=%u, "
                       "page_size=%u, kv_heads=%u, head_dim=%u)",
                       kv->layers, kv->page_size, kv->kv_heads, kv->head_dim);
    }
    if (kv->attn == KVX_ATTN_MLA && kv->kv_heads > 1) {
        return kvl_bad(why, who, "MLA has one latent per layer: kv_heads must be 1, not %u",
                       kv->kv_heads);
    }
    if (heads % (unsigned)tp != 0 && (unsigned)tp % heads != 0) {
        return kvl_bad(why, who,
                       "kv_heads=%u cannot be split over TP %d (neither divides the other)", heads,
                       tp);
    }
    memset(k, 0, sizeof(*k));
    k->kv = *kv;
    k->kv.kv_heads = heads;
    k->tp = tp;
    k->heads = heads >= (unsigned)tp ? heads / (unsigned)tp : 1;
    k->comps = kv->attn == KVX_ATTN_MLA ? 1 : 2;
    k->elem = kvl_elem(kv->dtype);
    k->row = (size_t)kv->head_dim * k->elem;
    k->page_bytes = (size_t)kv->page_size * k->heads * k->row;
    k->page_stride = k->page_bytes;
    return KVX_OK;
}

unsigned kvl_first_head(const kvl_t *k, int tp_rank)
{
    unsigned heads = k->kv.kv_heads;

    if (heads >= (unsigned)k->tp) {
        return (unsigned)tp_rank * k->heads;
    }
    return (unsigned)tp_rank / ((unsigned)k->tp / heads);
}

kvl_strides_t kvl_strides(const kvl_t *k, size_t num_pages)
{
    size_t tok = k->row, P = k->kv.page_size, H = k->heads;
    kvl_strides_t s;

    switch (k->kv.page_layout) {
    case KVX_PAGE_NHD:
        s.head = tok;
        s.token = H * tok;
        s.page = k->page_stride;
        break;
    case KVX_PAGE_HEAD_MAJOR:
        s.token = tok;
        s.page = P * tok;
        s.head = num_pages * P * tok;
        break;
    case KVX_PAGE_HND:
    default:
        s.token = tok;
        s.head = P * tok;
        s.page = k->page_stride;
        break;
    }
    return s;
}

int kvl_equal(const kvx_kv_layout_t *a, const kvx_kv_layout_t *b)
{
    return a->layers == b->layers && a->page_size == b->page_size && a->kv_heads == b->kv_heads &&
           a->head_dim == b->head_dim && a->dtype == b->dtype && a->attn == b->attn &&
           a->page_layout == b->page_layout;
}

/* One row per property a pair must share: its name and how to print it. */
#define KVL_CHECK_UINT(field, label, name)                                                       \
    if (p->kv.field != d->kv.field) {                                                            \
        failure_set(why, KVX_ERR_KV_MISMATCH, KVX_STAGE_BOOTSTRAP, NULL,                         \
                    "%s mismatch: prefill[%d] has %s=%u, decode[%d] has %s=%u", label, pi, name, \
                    (unsigned)p->kv.field, di, name, (unsigned)d->kv.field);                     \
        return KVX_ERR_KV_MISMATCH;                                                              \
    }
#define KVL_CHECK_NAMED(field, label, name, namefn)                                              \
    if (p->kv.field != d->kv.field) {                                                            \
        failure_set(why, KVX_ERR_KV_MISMATCH, KVX_STAGE_BOOTSTRAP, NULL,                         \
                    "%s mismatch: prefill[%d] has %s=%s, decode[%d] has %s=%s", label, pi, name, \
                    namefn(p->kv.field), di, name, namefn(d->kv.field));                         \
        return KVX_ERR_KV_MISMATCH;                                                              \
    }

kvx_status_t kvl_check_pair(const kvl_t *p, int pi, size_t p_aux, const kvl_t *d, int di,
                            size_t d_aux, kvx_failure_t *why)
{
    KVL_CHECK_NAMED(attn, "attention kind", "attn", kvl_attn_name)
    KVL_CHECK_UINT(page_size, "page size", "page_size")
    KVL_CHECK_NAMED(dtype, "dtype", "dtype", kvl_dtype_name)
    KVL_CHECK_UINT(layers, "layer count", "layers")
    KVL_CHECK_UINT(kv_heads, "KV head count", "kv_heads")
    KVL_CHECK_UINT(head_dim, "head dim", "head_dim")
    KVL_CHECK_NAMED(page_layout, "page layout", "page_layout", kvl_page_layout_name)
    if (p->tp % d->tp != 0 && d->tp % p->tp != 0) {
        failure_set(why, KVX_ERR_KV_MISMATCH, KVX_STAGE_BOOTSTRAP, NULL,
                    "TP mismatch: prefill[%d] has tp=%d, decode[%d] has tp=%d, and neither "
                    "divides the other",
                    pi, p->tp, di, d->tp);
        return KVX_ERR_KV_MISMATCH;
    }
    if (p_aux > d_aux) {
        failure_set(why, KVX_ERR_KV_MISMATCH, KVX_STAGE_BOOTSTRAP, NULL,
                    "aux size mismatch: prefill[%d] has aux_item_size=%zu, decode[%d] has "
                    "aux_item_size=%zu",
                    pi, p_aux, di, d_aux);
        return KVX_ERR_KV_MISMATCH;
    }
    return KVX_OK;
}
