/*
 * time.h - clocks. Deadlines use the monotonic clock in nanoseconds.
 */
#ifndef KVX_UTIL_TIME_H
#define KVX_UTIL_TIME_H

#include <stdint.h>
#include <time.h>

#define KVX_NS_PER_US 1000ull
#define KVX_NS_PER_MS 1000000ull
#define KVX_NS_PER_S  1000000000ull

/* Added to every reading of the clock: always 0 in the library. The unit
 * tests of the room machines (tests/room_pair.c) move time forward with it,
 * so that every deadline and every timestamp the core takes agree without
 * a sleep. */
extern uint64_t kvx_clock_skew_ns;

static inline uint64_t kvx_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * KVX_NS_PER_S + (uint64_t)ts.tv_nsec + kvx_clock_skew_ns;
}

static inline double kvx_ns_to_s(uint64_t ns)
{
    return (double)ns / (double)KVX_NS_PER_S;
}

#endif
