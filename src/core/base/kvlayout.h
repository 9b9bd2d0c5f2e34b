/*
 * kvlayout.h - the KV geometry of one instance as one of its ranks holds it:
 * heads per rank, page bytes, and where each (page, head, token) lives.
 */
#ifndef KVX_CORE_KVLAYOUT_H
#define KVX_CORE_KVLAYOUT_H

#include <kvx.h>

#include <stddef.h>

typedef struct kvl {
    kvx_kv_layout_t kv;
    int tp;             /* TP size of the instance */
    unsigned heads;     /* KV heads each rank holds */
    unsigned comps;     /* 2 (K, V) or 1 (MLA latent) */
    size_t elem;        /* bytes per element */
    size_t row;         /* bytes of one head of one token: head_dim * elem */
    size_t page_bytes;  /* bytes of one page of one (layer, component) */
    size_t page_stride; /* bytes from one page to the next in a buffer (HND,
                           NHD): page_bytes unless the pool interleaves */
} kvl_t;

/* Derives the per-rank geometry of an instance of TP tp; errors (zero
 * sizes, heads not divisible by TP or TP not by heads, bad enums) name who
 * ("prefill[0]") and the values. */
kvx_status_t kvl_init(kvl_t *k, const kvx_kv_layout_t *kv, int tp, const char *who,
                      kvx_failure_t *why);

/* The first model head a TP rank holds. With more ranks than heads, heads
 * are replicated: rank r holds head r / (tp / kv_heads). */
unsigned kvl_first_head(const kvl_t *k, int tp_rank);

/* Byte strides inside one (layer, component) buffer of num_pages pages;
 * the page stride of HND and NHD is k->page_stride. */
typedef struct kvl_strides {
    size_t page, head, token;
} kvl_strides_t;
kvl_strides_t kvl_strides(const kvl_t *k, size_t num_pages);

/* Checks that a prefill and a decode instance can exchange pages; the first
 * difference becomes *why, naming both instances and both values, e.g.
 * "page size mismatch: prefill[0] has page_size=16, decode[0] has page_size=32". */
kvx_status_t kvl_check_pair(const kvl_t *prefill, int prefill_instance, size_t prefill_aux,
                            const kvl_t *decode, int decode_instance, size_t decode_aux,
                            kvx_failure_t *why);

/* Compares the layouts two ranks of one instance hold ("" when equal). */
int kvl_equal(const kvx_kv_layout_t *a, const kvx_kv_layout_t *b);

const char *kvl_dtype_name(kvx_dtype_t dtype);
const char *kvl_attn_name(kvx_attn_t attn);
const char *kvl_page_layout_name(kvx_page_layout_t layout);

#endif
