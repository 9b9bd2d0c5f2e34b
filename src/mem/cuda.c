/*
 * cuda.c - the CUDA runtime, loaded with dlopen so that one kvx build runs
 * on nodes with and without a GPU.
 */
#include "config.h"

#include "mem.h"

#include <stdio.h>

void mem_cuda_version(char *buf, size_t len)
{
#ifdef KVX_HAVE_CUDA
    snprintf(buf, len, "built with CUDA headers; runtime not probed");
#else
    snprintf(buf, len, "not built");
#endif
}
