/*
 * test_hmap.c - the room map against a plain array, under random inserts
 * and removals (backward-shift deletion is where bugs hide).
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

#include "util/hmap.h"

Test(hmap, matches_a_reference_under_random_operations)
{
    enum { KEYS = 2000, OPS = 200000 };
    static void *ref[KEYS];
    hmap_t m;
    uint64_t s = 12345;
    size_t count = 0;

    cr_assert_eq(hmap_init(&m, 4), KVX_OK);
    for (int op = 0; op < OPS; op++) {
        uint64_t key;

        s = s * 6364136223846793005ull + 1442695040888963407ull;
        /* Sequential room ids collide in the low bits: use them as keys. */
        key = (s >> 33) % KEYS;
        if ((s >> 20) & 1) {
            void *v = (void *)(uintptr_t)(key + 1);

            count += ref[key] == NULL;
            ref[key] = v;
            cr_assert_eq(hmap_put(&m, key * 1024, v), KVX_OK);
        } else {
            void *was = hmap_remove(&m, key * 1024);

            cr_assert_eq(was, ref[key], "remove %llu", (unsigned long long)key);
            count -= ref[key] != NULL;
            ref[key] = NULL;
        }
        if (op % 997 == 0) {
            for (int k = 0; k < KEYS; k++) {
                cr_assert_eq(hmap_get(&m, (uint64_t)k * 1024), ref[k]);
            }
            cr_assert_eq(m.count, count);
        }
    }
    hmap_cleanup(&m);
}
