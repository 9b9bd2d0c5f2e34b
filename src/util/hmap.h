/*
 * hmap.h - a map from 64-bit keys to pointers (open addressing, linear
 * probing, backward-shift deletion). Rooms are found by id with it.
 */
#ifndef KVX_UTIL_HMAP_H
#define KVX_UTIL_HMAP_H

#include <kvx.h>

#include <stddef.h>
#include <stdint.h>

typedef struct hmap_slot {
    uint64_t key;
    void *value; /* NULL marks an empty slot */
} hmap_slot_t;

typedef struct hmap {
    hmap_slot_t *slots;
    size_t capacity; /* a power of two */
    size_t count;
} hmap_t;

kvx_status_t hmap_init(hmap_t *m, size_t capacity_hint);
void hmap_cleanup(hmap_t *m);
void *hmap_get(const hmap_t *m, uint64_t key);
/* Inserts or replaces; value must not be NULL. */
kvx_status_t hmap_put(hmap_t *m, uint64_t key, void *value);
/* Removes key; returns its value or NULL. */
void *hmap_remove(hmap_t *m, uint64_t key);

/* Iteration: for (size_t i = 0; i < m->capacity; i++) if (m->slots[i].value) ...
 * (do not insert or remove while iterating). */

#endif
