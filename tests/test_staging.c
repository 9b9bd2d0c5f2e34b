/*
 * test_staging.c - the staging ring: slots never overlap, bytes are reused
 * once released whatever the order, and a full ring says so.
 */
#include <criterion/criterion.h>
#include <kvx.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/staging.h"

Test(staging, slots_never_overlap_under_random_use)
{
    enum { SIZE = 4096, CAP = 16, STEPS = 200000 };
    staging_t s;
    staging_slot_t *live[CAP];
    unsigned nlive = 0, got = 0, full = 0;
    unsigned char owner[SIZE];
    uint64_t rng = 12345;

    cr_assert_eq(staging_ring_init(&s, malloc(SIZE), SIZE, CAP), KVX_OK);
    memset(owner, 0, sizeof(owner));
    for (unsigned step = 0; step < STEPS; step++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        if ((rng >> 33) % 2 == 0 && nlive > 0) {
            unsigned i = (unsigned)((rng >> 40) % nlive);
            staging_slot_t *slot = live[i];

            for (size_t b = slot->off; b < slot->off + slot->len; b++) {
                owner[b] = 0;
            }
            staging_release(&s, slot);
            live[i] = live[--nlive];
        } else {
            size_t len = (size_t)((rng >> 45) % 1500);
            staging_slot_t *slot = staging_get(&s, len);

            if (slot == NULL) {
                full++;
                continue;
            }
            got++;
            cr_assert_leq(slot->off + slot->len, SIZE);
            for (size_t b = slot->off; b < slot->off + slot->len; b++) {
                cr_assert_eq(owner[b], 0, "byte %zu handed out twice (step %u)", b, step);
                owner[b] = 1;
            }
            live[nlive++] = slot;
        }
    }
    cr_expect_gt(got, STEPS / 4);
    cr_expect_gt(full, 0);
    /* Everything released: the whole area is one slot again. */
    while (nlive > 0) {
        staging_release(&s, live[--nlive]);
    }
    cr_expect_eq(s.count, 0);
    cr_expect_not_null(staging_get(&s, SIZE));
    free(s.base);
    free(s.slots);
}

Test(staging, a_full_ring_waits_and_a_release_in_any_order_frees)
{
    staging_t s;
    staging_slot_t *a, *b, *c;

    cr_assert_eq(staging_ring_init(&s, malloc(100), 100, 3), KVX_OK);
    a = staging_get(&s, 40);
    b = staging_get(&s, 40);
    cr_assert(a != NULL && b != NULL);
    cr_expect_null(staging_get(&s, 30), "only 20 bytes are left at the end");
    cr_expect_null(staging_get(&s, 101));
    c = staging_get(&s, 0); /* a header-only slot */
    cr_assert_not_null(c);
    cr_expect_null(staging_get(&s, 0), "every slot is taken");
    /* Releasing the newest first frees nothing until the oldest goes. */
    staging_release(&s, c);
    staging_release(&s, b);
    cr_expect_null(staging_get(&s, 30));
    staging_release(&s, a);
    a = staging_get(&s, 100);
    cr_expect_not_null(a);
    cr_expect_eq(a->off, 0);
    free(s.base);
    free(s.slots);
}

Test(staging, the_head_wraps_when_the_tail_has_moved)
{
    staging_t s;
    staging_slot_t *a, *b, *c;

    cr_assert_eq(staging_ring_init(&s, malloc(100), 100, 8), KVX_OK);
    a = staging_get(&s, 50);
    b = staging_get(&s, 40);
    staging_release(&s, a);
    /* 10 free at the end, 50 at the start: 30 wraps to 0. */
    c = staging_get(&s, 30);
    cr_assert_not_null(c);
    cr_expect_eq(c->off, 0);
    cr_expect_null(staging_get(&s, 30), "20 left before the tail at 50");
    cr_expect_not_null(staging_get(&s, 20));
    staging_release(&s, b);
    free(s.base);
    free(s.slots);
}
