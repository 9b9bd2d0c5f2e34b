/*
 * verify.c - digests of the KV a writer sent and of what landed (verify.h).
 *
 * XXH3 (libxxhash, with its default secret) hashes each block -- 4 KiB
 * and more at usual geometries, where it runs at memory speed -- and the
 * block's hash, mixed with its coordinates, is summed into its unit's.
 */
#include "config.h"

#include "core/xfer/verify.h"
#include "mem/mem.h"
#include "util/mix.h"
#include "util/time.h"

#include <stdlib.h>
#include <xxhash.h>

struct verify_dev {
    mem_copier_t *copier;
    uint64_t limit_ns; /* a read-back that takes longer fails (no endless wait) */
    char *buf;         /* host copy of the last span read back */
    size_t cap;
};

kvx_status_t verify_dev_create(int dev, uint64_t limit_ns, verify_dev_t **vd_p, kvx_failure_t *why)
{
    verify_dev_t *vd = calloc(1, sizeof(*vd));
    kvx_status_t status;

    *vd_p = NULL;
    if (vd == NULL) {
        failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_INIT, NULL, "no memory for KVX_VERIFY");
        return KVX_ERR_NO_MEMORY;
    }
    status = mem_copier_create(KVX_MEM_CUDA, dev, &vd->copier, why);
    if (status != KVX_OK) {
        free(vd);
        return status;
    }
    vd->limit_ns = limit_ns;
    *vd_p = vd;
    return KVX_OK;
}

void verify_dev_destroy(verify_dev_t *vd)
{
    if (vd != NULL) {
        mem_copier_destroy(vd->copier);
        free(vd->buf);
        free(vd);
    }
}

/* Copies len bytes of device memory to host and waits for them. */
static kvx_status_t verify_dev_copy(verify_dev_t *vd, void *dst, const void *src, size_t len,
                                    kvx_failure_t *why)
{
    uint64_t ticket = 0;
    kvx_status_t status = mem_copier_copy(vd->copier, dst, src, len, why);

    uint64_t done = 0, deadline = kvx_now_ns() + vd->limit_ns;

    if (status == KVX_OK) {
        status = mem_copier_fence(vd->copier, &ticket, why);
    }
    while (status == KVX_OK && (status = mem_copier_poll(vd->copier, &done, why)) == KVX_OK &&
           done < ticket) {
        if (kvx_now_ns() > deadline) {
            failure_set(why, KVX_ERR_TIMEOUT, KVX_STAGE_VERIFY, NULL,
                        "a copy of %zu bytes of the pool did not complete within %.1f s", len,
                        kvx_ns_to_s(vd->limit_ns));
            return KVX_ERR_TIMEOUT;
        }
    }
    return status;
}

/* The host copy of [src, src + len) of device memory, valid until the next
 * read; NULL on error (why). */
static const char *verify_dev_read(verify_dev_t *vd, const char *src, size_t len,
                                   kvx_failure_t *why)
{
    if (len > vd->cap) {
        char *grown = realloc(vd->buf, len);

        if (grown == NULL) {
            failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_VERIFY, NULL,
                        "no memory to read %zu bytes of the pool back", len);
            return NULL;
        }
        vd->buf = grown;
        vd->cap = len;
    }
    return verify_dev_copy(vd, vd->buf, src, len, why) == KVX_OK ? vd->buf : NULL;
}

kvx_status_t verify_dev_xor(verify_dev_t *vd, void *dev_byte, unsigned char bits,
                            kvx_failure_t *why)
{
    unsigned char b;
    kvx_status_t status = verify_dev_copy(vd, &b, dev_byte, 1, why);

    b ^= bits;
    return status == KVX_OK ? verify_dev_copy(vd, dev_byte, &b, 1, why) : status;
}

/* The run of consecutive decode pages that starts at pos: its length. */
static size_t verify_run(const verify_units_t *u, size_t pos)
{
    size_t n = 1;

    while (pos + n < u->npages && n < VERIFY_UNIT_PAGES && u->dst[pos + n] == u->dst[pos] + n) {
        n++;
    }
    return n;
}

size_t verify_count(const verify_units_t *u)
{
    size_t runs = 0;

    for (size_t pos = 0; pos < u->npages; pos += verify_run(u, pos)) {
        runs++;
    }
    return runs * u->layers * u->comps;
}

/* Sample: each unit on its own, with chance 1 in rate, drawn from (room,
 * unit): a room's bytes are checked in that proportion on average. */
static int verify_pick(const verify_units_t *u, size_t k)
{
    uint64_t h = kvx_mix64(u->room ^ kvx_mix64(0x6b76785f76657269ull + k));

    return u->rate <= 1 || h % u->rate == 0;
}

int verify_selected(const verify_units_t *u, size_t k)
{
    return u->mode >= 2 || verify_pick(u, k);
}

size_t verify_checked(const verify_units_t *u)
{
    size_t K = verify_count(u), n = 0;

    for (size_t k = 0; k < K; k++) {
        n += verify_selected(u, k);
    }
    return n;
}

/* The key of a block of (layer, comp): distinct for every block of a room,
 * since an odd multiplier is a bijection on 64 bits. */
static uint64_t verify_key(uint64_t base, size_t pos, unsigned head, unsigned token)
{
    uint64_t coord = ((uint64_t)pos << 32) | ((uint64_t)(head & 0xffffu) << 16) | (token & 0xffffu);

    return base + coord * 0x9e3779b97f4a7c15ull;
}

static uint64_t verify_base(const verify_units_t *u, unsigned layer, unsigned comp)
{
    uint64_t key[3] = { u->room, layer, comp };

    return XXH3_64bits(key, sizeof(key));
}

/* One unit: positions [pos, pos + n) of (layer, comp), in blocks that are
 * contiguous on every side of a pair (the page layout is the instances'
 * common one): the page_size rows of one head of one page (HND,
 * HEAD_MAJOR), or the pair's heads of one token (NHD). A device pool is read
 * back a page's span at a time (HND, NHD) or a block at a time (HEAD_MAJOR,
 * whose heads lie num_pages pages apart). */
static kvx_status_t verify_one(const verify_units_t *u, const verify_side_t *s, unsigned layer,
                               unsigned comp, size_t pos, size_t n, uint64_t *sum_p,
                               kvx_failure_t *why)
{
    kvl_strides_t st = kvl_strides(s->kvl, s->num_pages);
    const char *buf = s->bufs[layer * u->comps + comp];
    unsigned tokens = s->kvl->kv.page_size;
    uint64_t base = verify_base(u, layer, comp), sum = 0;
    size_t row = s->kvl->row;
    int nhd = s->kvl->kv.page_layout == KVX_PAGE_NHD;
    int per_block = s->kvl->kv.page_layout == KVX_PAGE_HEAD_MAJOR;
    unsigned nblocks = nhd ? tokens : u->nheads;
    size_t stride = nhd ? st.token : st.head, len = (nhd ? u->nheads : tokens) * row;

    for (size_t i = pos; i < pos + n; i++) {
        const char *page = buf + (size_t)s->pages[i] * st.page + (size_t)s->first_head * st.head;

        if (s->dev != NULL && !per_block &&
            (page = verify_dev_read(s->dev, page, (nblocks - 1) * stride + len, why)) == NULL) {
            return why->status;
        }
        for (unsigned b = 0; b < nblocks; b++) {
            const char *block = page + (size_t)b * stride;
            uint64_t h;

            if (s->dev != NULL && per_block &&
                (block = verify_dev_read(s->dev, block, len, why)) == NULL) {
                return why->status;
            }
            h = XXH3_64bits(block, len);
            sum += kvx_mix64(h ^ verify_key(base, i, nhd ? 0xffffu : b, nhd ? b : 0xffffu));
        }
    }
    *sum_p = sum;
    return KVX_OK;
}

kvx_status_t verify_digest(const verify_units_t *u, const verify_side_t *side, uint64_t *out,
                           kvx_failure_t *why)
{
    size_t k = 0, j = 0;

    for (size_t pos = 0, n; pos < u->npages; pos += n) {
        n = verify_run(u, pos);
        for (unsigned l = 0; l < u->layers; l++) {
            for (unsigned c = 0; c < u->comps; c++, k++) {
                kvx_status_t status;

                if (verify_selected(u, k) &&
                    (status = verify_one(u, side, l, c, pos, n, &out[j++], why)) != KVX_OK) {
                    return status;
                }
            }
        }
    }
    return KVX_OK;
}

void verify_unit(const verify_units_t *u, size_t k, unsigned *layer, unsigned *comp, size_t *pos,
                 size_t *n)
{
    size_t per_run = (size_t)u->layers * u->comps, run = k / per_run, p = 0, len = 0;

    for (size_t r = 0; r <= run && p < u->npages; r++) {
        p += len;
        len = verify_run(u, p);
    }
    *layer = (unsigned)(k % per_run / u->comps);
    *comp = (unsigned)(k % u->comps);
    *pos = p;
    *n = len;
}

uint64_t verify_aux(uint64_t room, const void *payload, size_t len)
{
    return XXH3_64bits_withSeed(payload, len, room);
}

unsigned char *verify_pick_byte(const verify_units_t *u, const verify_side_t *side, uint64_t salt,
                                unsigned *layer, unsigned *comp, size_t *pos)
{
    kvl_strides_t st = kvl_strides(side->kvl, side->num_pages);
    uint64_t h = kvx_mix64(u->room ^ salt);
    unsigned head = (unsigned)(h % u->nheads),
             token = (unsigned)((h >> 16) % side->kvl->kv.page_size);
    size_t byte = (size_t)((h >> 32) % side->kvl->row);

    *pos = (size_t)(kvx_mix64(h) % u->npages);
    *layer = (unsigned)((h >> 8) % u->layers);
    *comp = (unsigned)((h >> 24) % u->comps);
    return (unsigned char *)side->bufs[*layer * u->comps + *comp] +
           (size_t)side->pages[*pos] * st.page + (size_t)(side->first_head + head) * st.head +
           (size_t)token * st.token + byte;
}
