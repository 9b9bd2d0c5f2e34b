/*
 * topo_version.c - the hwloc versions kvx was built with and runs with.
 */
#include "config.h"

#include "topo.h"

#include <hwloc.h>
#include <stdio.h>

void topo_version(char *buf, size_t len)
{
    unsigned run = hwloc_get_api_version();

    /* hwloc exposes its API version (2.8.0 for every 2.8+ release), not the
     * release number; pkg-config told configure the release. */
    snprintf(buf, len, "API %u.%u.%u at run time, %u.%u.%u at build time (hwloc %s)", run >> 16,
             (run >> 8) & 0xff, run & 0xff, HWLOC_API_VERSION >> 16,
             (HWLOC_API_VERSION >> 8) & 0xff, HWLOC_API_VERSION & 0xff, KVX_HWLOC_RELEASE);
}
