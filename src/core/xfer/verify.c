/*
 * verify.c - digests of the KV a writer sent and of what landed (verify.h).
 *
 * XXH3 (libxxhash) hashes each row: at head_dim 128 in bf16 a row is 256
 * bytes, for which XXH3 runs at several GB/s per core; the seed carries the
 * row's coordinates, and the unit's digest is the sum of its rows' hashes.
 */
#include "config.h"

#include "core/xfer/verify.h"
#include "util/mix.h"

#include <xxhash.h>

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

/* Sample: units k with (k + off) % rate == 0; when none of the K units is
 * one of those, the unit fallback. Both drawn from the room id. */
static int verify_pick(const verify_units_t *u, size_t k, size_t K)
{
    uint64_t h = kvx_mix64(u->room ^ 0x6b76785f76657269ull);
    size_t rate = u->rate > 1 ? u->rate : 1, off = (size_t)(h % rate);
    size_t first = (rate - off) % rate;

    if (first < K) {
        return (k + off) % rate == 0;
    }
    return k == (size_t)((h >> 32) % K);
}

int verify_selected(const verify_units_t *u, size_t k)
{
    return u->mode >= 2 || verify_pick(u, k, verify_count(u));
}

size_t verify_checked(const verify_units_t *u)
{
    size_t K = verify_count(u), n = 0;

    if (u->mode >= 2) {
        return K;
    }
    for (size_t k = 0; k < K; k++) {
        n += verify_pick(u, k, K);
    }
    return n;
}

/* The seed of the rows of (layer, comp): distinct for every row of a room,
 * since an odd multiplier is a bijection on 64 bits. */
static uint64_t verify_seed(uint64_t base, size_t pos, unsigned head, unsigned token)
{
    uint64_t coord = ((uint64_t)pos << 32) | ((uint64_t)(head & 0xffffu) << 16) | (token & 0xffffu);

    return base + coord * 0x9e3779b97f4a7c15ull;
}

static uint64_t verify_base(const verify_units_t *u, unsigned layer, unsigned comp)
{
    uint64_t key[3] = { u->room, layer, comp };

    return XXH3_64bits(key, sizeof(key));
}

/* One unit: positions [pos, pos + n) of (layer, comp). Rows are visited in
 * the order this side's memory holds them (the sum does not care). */
static uint64_t verify_one(const verify_units_t *u, const verify_side_t *s, unsigned layer,
                           unsigned comp, size_t pos, size_t n)
{
    kvl_strides_t st = kvl_strides(s->kvl, s->num_pages);
    const char *buf = s->bufs[layer * u->comps + comp];
    unsigned tokens = s->kvl->kv.page_size;
    uint64_t base = verify_base(u, layer, comp), sum = 0;
    size_t row = s->kvl->row;
    int token_inner = st.token < st.head;

    for (size_t i = pos; i < pos + n; i++) {
        const char *page = buf + (size_t)s->pages[i] * st.page;

        for (unsigned a = 0; a < (token_inner ? u->nheads : tokens); a++) {
            for (unsigned b = 0; b < (token_inner ? tokens : u->nheads); b++) {
                unsigned h = token_inner ? a : b, t = token_inner ? b : a;
                const char *r = page + (size_t)(s->first_head + h) * st.head + (size_t)t * st.token;

                sum += XXH3_64bits_withSeed(r, row, verify_seed(base, i, h, t));
            }
        }
    }
    return sum;
}

void verify_digest(const verify_units_t *u, const verify_side_t *side, uint64_t *out)
{
    size_t K = verify_count(u), k = 0, j = 0;

    for (size_t pos = 0, n; pos < u->npages; pos += n) {
        n = verify_run(u, pos);
        for (unsigned l = 0; l < u->layers; l++) {
            for (unsigned c = 0; c < u->comps; c++, k++) {
                if (u->mode >= 2 || verify_pick(u, k, K)) {
                    out[j++] = verify_one(u, side, l, c, pos, n);
                }
            }
        }
    }
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
