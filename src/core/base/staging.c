/*
 * staging.c - the staging area's ring of slots (see staging.h).
 *
 * Bytes are taken at the head and freed from the tail: the oldest slot
 * still taken. When the end of the area is reached the head wraps to 0,
 * and until the tail follows (the oldest slot is from the new lap) only the
 * gap between head and tail is free.
 */
#include "config.h"

#include "core/base/staging.h"
#include "util/failure.h"

#include <stdlib.h>
#include <string.h>

kvx_status_t staging_ring_init(staging_t *s, void *base, size_t size, unsigned cap)
{
    memset(s, 0, sizeof(*s));
    s->slots = calloc(cap, sizeof(*s->slots));
    if (s->slots == NULL) {
        return KVX_ERR_NO_MEMORY;
    }
    s->base = base;
    s->size = size;
    s->cap = cap;
    return KVX_OK;
}

kvx_status_t staging_init(staging_t *s, kucx_ctx_t *u, size_t size, unsigned cap,
                          kvx_failure_t *why)
{
    void *base = NULL;
    kvx_status_t status;

    if (size > 0 && posix_memalign(&base, 4096, size) != 0) {
        failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_INIT, NULL,
                    "cannot allocate a staging area of %zu bytes (KVX_STAGING_BYTES)", size);
        return KVX_ERR_NO_MEMORY;
    }
    status = staging_ring_init(s, base, size, cap);
    if (status != KVX_OK) {
        free(base);
        failure_set(why, status, KVX_STAGE_INIT, NULL, "no memory for %u staging slots", cap);
        return status;
    }
    if (size > 0) {
        status = kucx_region_map(u, base, size, UCS_MEMORY_TYPE_HOST, &s->region, why);
        if (status != KVX_OK) {
            staging_cleanup(s, u);
        }
    }
    return status;
}

void staging_cleanup(staging_t *s, kucx_ctx_t *u)
{
    if (s->region.memh != NULL) {
        kucx_region_unmap(u, &s->region);
    }
    free(s->base);
    free(s->slots);
    memset(s, 0, sizeof(*s));
}

staging_slot_t *staging_get(staging_t *s, size_t len)
{
    const staging_slot_t *oldest = s->count > 0 ? &s->slots[s->first] : NULL;
    size_t tail = oldest != NULL ? oldest->off : 0;
    int wrapped = oldest != NULL && oldest->lap != s->lap;
    staging_slot_t *slot;
    size_t off;

    if (s->count == s->cap || len > s->size) {
        return NULL;
    }
    if (oldest == NULL) {
        s->head = 0;
    }
    if (wrapped ? tail - s->head >= len : s->size - s->head >= len) {
        off = s->head;
    } else if (!wrapped && len <= tail) {
        /* The end of the area is too short: start the next lap at 0. */
        s->lap++;
        off = 0;
    } else {
        return NULL;
    }
    slot = &s->slots[(s->first + s->count) % s->cap];
    s->count++;
    slot->off = off;
    slot->len = len;
    slot->lap = s->lap;
    slot->busy = 1;
    slot->owner = NULL;
    s->head = off + len;
    return slot;
}

void staging_release(staging_t *s, staging_slot_t *slot)
{
    slot->busy = 0;
    while (s->count > 0 && !s->slots[s->first].busy) {
        s->first = (s->first + 1) % s->cap;
        s->count--;
    }
}
