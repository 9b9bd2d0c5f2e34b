/*
 * time.c - the clock's skew (time.h says who sets it).
 */
#include "config.h"

#include "util/time.h"

uint64_t kvx_clock_skew_ns;
