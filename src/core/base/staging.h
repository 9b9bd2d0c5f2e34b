/*
 * staging.h - a rank's staging area: registered host memory handed out as a
 * ring of slots. A prefill rank packs strided pieces into a slot to put
 * them with one put, and keeps the header of each data message in one; a
 * decode rank lands rendezvous data messages in slots before unpacking
 * them into its pages. Slots are released in any order and their bytes are
 * reused in order, so nothing is allocated per operation.
 */
#ifndef KVX_CORE_STAGING_H
#define KVX_CORE_STAGING_H

#include "core/base/msg.h"
#include "ucx/kvx_ucx.h"

#include <stddef.h>

typedef struct staging_slot {
    size_t off, len; /* bytes [off, off + len) of the area */
    unsigned lap;    /* the ring's lap when it was taken */
    int busy;
    void *owner;                     /* what it serves (a target, a landing) */
    unsigned char hdr[MSG_DATA_LEN]; /* a data message's header, kept until it completes */
} staging_slot_t;

typedef struct staging {
    char *base;  /* NULL: no area */
    size_t size; /* bytes of the area */
    kucx_region_t region;
    staging_slot_t *slots; /* a ring: [first, first + count) are taken, oldest first */
    unsigned cap, first, count;
    size_t head;  /* where the next slot's bytes start */
    unsigned lap; /* times the bytes wrapped around */
} staging_t;

/* Sets up the ring over [base, base + size) with cap slots (base may be NULL
 * with size 0: slots for headers only). Registers nothing. */
kvx_status_t staging_ring_init(staging_t *s, void *base, size_t size, unsigned cap);
/* Allocates and registers an area of size bytes with cap slots. */
kvx_status_t staging_init(staging_t *s, kucx_ctx_t *u, size_t size, unsigned cap,
                          kvx_failure_t *why);
void staging_cleanup(staging_t *s, kucx_ctx_t *u);
/* A slot of len contiguous bytes (0 is allowed), or NULL until enough
 * older slots are released. */
staging_slot_t *staging_get(staging_t *s, size_t len);
void staging_release(staging_t *s, staging_slot_t *slot);

static inline void *staging_at(const staging_t *s, const staging_slot_t *slot)
{
    return s->base + slot->off;
}

#endif
