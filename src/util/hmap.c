/*
 * hmap.c - open-addressing map from 64-bit keys to pointers.
 */
#include "config.h"

#include "hmap.h"

#include <stdlib.h>
#include <string.h>

/* Room ids are chosen by callers and are often sequential: mix them. */
static size_t hmap_index(const hmap_t *m, uint64_t key)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    key *= 0xc4ceb9fe1a85ec53ull;
    key ^= key >> 33;
    return (size_t)key & (m->capacity - 1);
}

kvx_status_t hmap_init(hmap_t *m, size_t capacity_hint)
{
    size_t cap = 16;

    while (cap < capacity_hint * 2) {
        cap *= 2;
    }
    m->slots = calloc(cap, sizeof(*m->slots));
    if (m->slots == NULL) {
        return KVX_ERR_NO_MEMORY;
    }
    m->capacity = cap;
    m->count = 0;
    return KVX_OK;
}

void hmap_cleanup(hmap_t *m)
{
    free(m->slots);
    memset(m, 0, sizeof(*m));
}

void *hmap_get(const hmap_t *m, uint64_t key)
{
    for (size_t i = hmap_index(m, key);; i = (i + 1) & (m->capacity - 1)) {
        if (m->slots[i].value == NULL) {
            return NULL;
        }
        if (m->slots[i].key == key) {
            return m->slots[i].value;
        }
    }
}

static kvx_status_t hmap_grow(hmap_t *m)
{
    hmap_t bigger;

    if (hmap_init(&bigger, m->capacity) != KVX_OK) {
        return KVX_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < m->capacity; i++) {
        if (m->slots[i].value != NULL) {
            hmap_put(&bigger, m->slots[i].key, m->slots[i].value);
        }
    }
    free(m->slots);
    *m = bigger;
    return KVX_OK;
}

kvx_status_t hmap_put(hmap_t *m, uint64_t key, void *value)
{
    size_t i;

    if ((m->count + 1) * 2 > m->capacity && hmap_grow(m) != KVX_OK) {
        return KVX_ERR_NO_MEMORY;
    }
    for (i = hmap_index(m, key); m->slots[i].value != NULL; i = (i + 1) & (m->capacity - 1)) {
        if (m->slots[i].key == key) {
            m->slots[i].value = value;
            return KVX_OK;
        }
    }
    m->slots[i].key = key;
    m->slots[i].value = value;
    m->count++;
    return KVX_OK;
}

void *hmap_remove(hmap_t *m, uint64_t key)
{
    size_t mask = m->capacity - 1, i = hmap_index(m, key), j;
    void *value;

    while (m->slots[i].value != NULL && m->slots[i].key != key) {
        i = (i + 1) & mask;
    }
    if (m->slots[i].value == NULL) {
        return NULL;
    }
    value = m->slots[i].value;
    /* Backward-shift: move later entries of the probe run into the hole so
     * lookups never need tombstones. */
    for (j = (i + 1) & mask; m->slots[j].value != NULL; j = (j + 1) & mask) {
        size_t home = hmap_index(m, m->slots[j].key);

        if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
            m->slots[i] = m->slots[j];
            i = j;
        }
    }
    m->slots[i].value = NULL;
    m->count--;
    return value;
}
