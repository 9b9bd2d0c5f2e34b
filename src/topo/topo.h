/*
 * topo.h - kvx's wrapper of hwloc: GPU/NIC discovery and affinity.
 */
#ifndef KVX_TOPO_TOPO_H
#define KVX_TOPO_TOPO_H

#include <kvx.h>

#include <stddef.h>

/* hwloc's API version at run time and at build time. */
void topo_version(char *buf, size_t len);

#endif
