/*
 * verify.h - digests of the KV a writer sent and of what landed (KVX_VERIFY).
 *
 * The KV one prefill rank writes into one decode rank for a room is cut into
 * units: a run of consecutive decode pages (at most VERIFY_UNIT_PAGES) times
 * one (layer, component). Both sides enumerate the same units from the
 * decode's page list alone, so they need not tell each other. A unit's
 * digest is the sum (mod 2^64) of one XXH3 per block -- the rows of one head
 * of one page (HND, HEAD_MAJOR) or the pair's heads of one token (NHD),
 * contiguous on both sides since the instances share the page layout --
 * mixed with the block's logical coordinates (room, layer, component,
 * position of its page in the room, head of the pair or token): the sum does
 * not depend on the order blocks are visited in, so each side walks its own
 * pool with its own page ids, stride and TP slice, while a byte that is
 * wrong or a row in the wrong place changes the digest.
 */
#ifndef KVX_CORE_VERIFY_H
#define KVX_CORE_VERIFY_H

#include "core/base/kvlayout.h"
#include "util/failure.h"

#include <stddef.h>
#include <stdint.h>

#define VERIFY_UNIT_PAGES 64

/* A pool kvx cannot read (CUDA memory): read back through a copy engine of
 * its own, one page's rows (or, in HEAD_MAJOR, one block) at a time, into a
 * host buffer. */
typedef struct verify_dev verify_dev_t;
/* limit_ns bounds each read-back (KVX_DRAIN_TIMEOUT): a copy that hangs
 * fails the room with KVX_ERR_TIMEOUT instead of holding the progress thread. */
kvx_status_t verify_dev_create(int dev, uint64_t limit_ns, verify_dev_t **vd_p, kvx_failure_t *why);
void verify_dev_destroy(verify_dev_t *vd);
/* Flips bits of one byte of device memory (effect=corrupt). */
kvx_status_t verify_dev_xor(verify_dev_t *vd, void *dev_byte, unsigned char bits,
                            kvx_failure_t *why);

/* What is digested: the pair's rows of a room, as one side holds them. */
typedef struct verify_side {
    const kvl_t *kvl;      /* this side's geometry (page stride included) */
    size_t num_pages;      /* pages of each buffer of this side's pool */
    void *const *bufs;     /* [layer * comps + comp] */
    const uint32_t *pages; /* this side's page of each position of the room */
    unsigned first_head;   /* the pair's first head in this pool */
    verify_dev_t *dev;     /* bufs are device memory, read back through it; NULL: host */
} verify_side_t;

/* The units of a room between one writer and one decode rank. */
typedef struct verify_units {
    uint64_t room;
    unsigned layers, comps, nheads;
    const uint32_t *dst; /* the decode's pages: they cut the runs */
    size_t npages;
    int mode;      /* 1: sample, 2: full (cfg KVX_VERIFY) */
    unsigned rate; /* sample: one unit in rate */
} verify_units_t;

/* Units in all (runs x layers x components). */
size_t verify_count(const verify_units_t *u);
/* Units that are checked: all (full), or each with chance 1 in rate, drawn
 * from (room, unit) (sample). */
size_t verify_checked(const verify_units_t *u);
/* Is unit k (of verify_count()) checked? */
int verify_selected(const verify_units_t *u, size_t k);
/* The digests of the checked units, in unit order, into out[verify_checked()].
 * KVX_OK, or the copy engine's error (a device pool) in *why. */
kvx_status_t verify_digest(const verify_units_t *u, const verify_side_t *side, uint64_t *out,
                           kvx_failure_t *why);
/* Where unit k is: layer, component, first position and pages. */
void verify_unit(const verify_units_t *u, size_t k, unsigned *layer, unsigned *comp, size_t *pos,
                 size_t *n);
/* The digest of an aux row's payload. */
uint64_t verify_aux(uint64_t room, const void *payload, size_t len);
/* The byte of the rows of unit-space that an injected corruption flips
 * (effect=corrupt): a position, head, token and byte of row chosen by
 * salt, in the given side's pool; returns the address. */
unsigned char *verify_pick_byte(const verify_units_t *u, const verify_side_t *side, uint64_t salt,
                                unsigned *layer, unsigned *comp, size_t *pos);

#endif
