/*
 * mem.h - memory kvx moves: host pools and, when built with CUDA, GPU pools.
 */
#ifndef KVX_MEM_MEM_H
#define KVX_MEM_MEM_H

#include <kvx.h>

#include <stddef.h>

/* "not built", or the CUDA runtime/driver versions, or why CUDA cannot be
 * used on this node. */
void mem_cuda_version(char *buf, size_t len);

#endif
