/*
 * mix.h - splitmix64's finalizer: spreads a 64-bit key over all 64 bits, for
 * the deterministic draws of fault injection and of KVX_VERIFY's sample.
 */
#ifndef KVX_UTIL_MIX_H
#define KVX_UTIL_MIX_H

#include <stdint.h>

static inline uint64_t kvx_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

#endif
