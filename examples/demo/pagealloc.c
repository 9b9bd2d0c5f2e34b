/*
 * pagealloc.c - ids (KV pages, aux slots) from a FIFO queue of free ones.
 *
 * An allocation takes the oldest free ids, a free appends the request's
 * ids in its order. At first every request gets one run of consecutive
 * pages; as requests of different lengths end out of order, the queue
 * becomes a patchwork and requests get their pages in several runs, as in
 * a serving engine that does not sort its free list. The allocator counts
 * the runs, so the summary says how fragmented the pages kvx moved were.
 */
#include "demo.h"

#include <stdlib.h>

int demo_alloc_init(demo_alloc_t *a, size_t n)
{
    a->queue = malloc(n * sizeof(uint32_t));
    if (a->queue == NULL) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        a->queue[i] = (uint32_t)i;
    }
    a->cap = a->count = n;
    a->head = a->lost = 0;
    a->taken = a->runs = 0;
    return 0;
}

void demo_alloc_cleanup(demo_alloc_t *a)
{
    free(a->queue);
    a->queue = NULL;
}

int demo_alloc_take(demo_alloc_t *a, size_t n, uint32_t *out)
{
    if (n > a->count) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        out[i] = a->queue[a->head];
        a->head = (a->head + 1) % a->cap;
        a->runs += i == 0 || out[i] != out[i - 1] + 1;
    }
    a->count -= n;
    a->taken += n;
    return 0;
}

void demo_alloc_give(demo_alloc_t *a, const uint32_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        a->queue[(a->head + a->count) % a->cap] = ids[i];
        a->count++;
    }
}

void demo_alloc_lose(demo_alloc_t *a, size_t n)
{
    a->lost += n;
}
