/*
 * test_copier.c - src/mem: copy engines keep their bytes back until their
 * batch completed (host: memcpy; CUDA: the fake runtime), the CUDA runtime
 * says why it is unavailable, and pointer checks name what memory is wrong.
 *
 * The CUDA tests load tests/.libs/libfakecudart.so (tests/fake_cudart.c),
 * a stand-in runtime whose device memory crashes when touched directly;
 * they are skipped in a build without CUDA. Each test runs in a process of
 * its own, so each loads the runtime afresh.
 */
#include <criterion/criterion.h>
#include <kvx.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "mem/mem.h"

/* Loads the fake runtime, or skips. */
static void fake_open(void)
{
    const char *top = getenv("top_builddir");
    char path[1024];
    kvx_failure_t why;

#ifndef KVX_HAVE_CUDA
    cr_skip_test("built without CUDA");
#endif
    snprintf(path, sizeof(path), "%s/tests/.libs/libfakecudart.so", top != NULL ? top : ".");
    cr_assert_eq(mem_cuda_open(path, &why), KVX_OK, "%s", why.text);
}

Test(copier, host_bytes_land_only_once_their_batch_completed)
{
    mem_copier_t *c;
    kvx_failure_t why;
    char src[64], dst[64];
    uint64_t t1, t2, done;

    memset(src, 'a', sizeof(src));
    memset(dst, 0, sizeof(dst));
    cr_assert_eq(mem_copier_create(KVX_MEM_HOST, -1, &c, &why), KVX_OK);
    cr_expect_str_eq(mem_copier_name(c), "memcpy");
    cr_assert_eq(mem_copier_copy(c, dst, src, 32, &why), KVX_OK);
    cr_assert_eq(mem_copier_poll(c, &done, &why), KVX_OK);
    cr_expect_eq(done, 0);
    cr_expect_eq(dst[0], 0, "an unfenced copy landed");
    cr_assert_eq(mem_copier_fence(c, &t1, &why), KVX_OK);
    cr_expect_eq(t1, 1);
    cr_assert_eq(mem_copier_copy(c, dst + 32, src, 32, &why), KVX_OK);
    cr_expect_eq(dst[0], 0, "a copy landed before a poll");
    cr_assert_eq(mem_copier_poll(c, &done, &why), KVX_OK);
    cr_expect_eq(done, 1);
    cr_expect_eq(dst[0], 'a');
    cr_expect_eq(dst[32], 0, "a copy of a later, unfenced batch landed");
    cr_assert_eq(mem_copier_fence(c, &t2, &why), KVX_OK);
    cr_assert_eq(mem_copier_fence(c, &t2, &why), KVX_OK);
    cr_expect_eq(t2, 2, "an empty fence made a batch");
    cr_assert_eq(mem_copier_wait(c, t2, &why), KVX_OK);
    cr_expect_eq(dst[63], 'a');
    cr_expect_eq(mem_copier_wait(c, 3, &why), KVX_ERR_INTERNAL);
    mem_copier_destroy(c);
}

Test(copier, host_memory_on_a_numa_node_is_zeroed)
{
    void *p;
    int placed = -1;
    kvx_failure_t why;

    cr_assert_eq(mem_host_alloc(1 << 20, 0, &p, &placed, &why), KVX_OK);
    cr_expect(placed == 0 || placed == 1);
    cr_expect_eq(((char *)p)[12345], 0);
    mem_host_free(p, 1 << 20);
}

Test(copier, cuda_copies_through_the_fake_runtime)
{
    mem_copier_t *c;
    kvx_failure_t why;
    char src[4096], back[4096];
    void *dev;
    uint64_t t, done = 0;
    int polls = 0;

    fake_open();
    for (size_t i = 0; i < sizeof(src); i++) {
        src[i] = (char)(i * 7);
    }
    memset(back, 0, sizeof(back));
    cr_assert_eq(mem_cuda_alloc(1, sizeof(src), &dev, &why), KVX_OK, "%s", why.text);
    cr_assert_eq(mem_copier_create(KVX_MEM_CUDA, 1, &c, &why), KVX_OK, "%s", why.text);
    cr_expect_str_eq(mem_copier_name(c), "cudaMemcpyAsync on CUDA device 1");
    cr_assert_eq(mem_copier_copy(c, dev, src, sizeof(src), &why), KVX_OK);
    cr_assert_eq(mem_copier_copy(c, back, dev, sizeof(back), &why), KVX_OK);
    cr_assert_eq(mem_copier_fence(c, &t, &why), KVX_OK);
    while (done < t && polls < 100) {
        cr_assert_eq(mem_copier_poll(c, &done, &why), KVX_OK);
        cr_expect(done == t || back[1] == 0, "bytes landed before their event completed");
        polls++;
    }
    cr_expect_gt(polls, 1, "the fake's event completed at the first query");
    cr_expect_eq(memcmp(src, back, sizeof(src)), 0);
    mem_copier_destroy(c);
    mem_cuda_free(1, dev);
}

Test(copier, cuda_pointer_checks_say_what_the_memory_is)
{
    kvx_failure_t why;
    char host[256];
    void *d0, *d1;
    char busid[32];

    fake_open();
    cr_assert_eq(mem_cuda_alloc(0, 4096, &d0, &why), KVX_OK);
    cr_assert_eq(mem_cuda_alloc(1, 4096, &d1, &why), KVX_OK);
    cr_expect_eq(mem_cuda_check(d0, 4096, 0, "slab", &why), KVX_OK);
    cr_assert_eq(mem_cuda_check(host, sizeof(host), 0, "buffers[2]", &why), KVX_ERR_INVALID_PARAM);
    cr_expect(strstr(why.text, "buffers[2]: its first byte") != NULL, "%s", why.text);
    cr_expect(strstr(why.text, "is host memory, not device memory of CUDA device 0") != NULL, "%s",
              why.text);
    cr_assert_eq(mem_cuda_check(d1, 4096, 0, "slab", &why), KVX_ERR_INVALID_PARAM);
    cr_expect(strstr(why.text, "is memory of CUDA device 1, not of cuda_device 0") != NULL, "%s",
              why.text);
    cr_assert_eq(mem_cuda_check(d0, 8192, 0, "slab", &why), KVX_ERR_INVALID_PARAM);
    cr_expect(strstr(why.text, "slab: its last byte") != NULL, "%s", why.text);
    cr_assert_eq(mem_cuda_pin(host, sizeof(host), 0, &why), KVX_OK);
    cr_assert_eq(mem_cuda_check(host, sizeof(host), 0, "x", &why), KVX_ERR_INVALID_PARAM);
    cr_expect(strstr(why.text, "page-locked host memory") != NULL, "%s", why.text);
    mem_cuda_unpin(host);
    cr_assert_eq(mem_cuda_device(1, busid, sizeof(busid), &why), KVX_OK);
    cr_expect_str_eq(busid, "00000000:54:00.0");
    cr_assert_eq(mem_cuda_device(2, busid, sizeof(busid), &why), KVX_ERR_INVALID_PARAM);
    cr_expect_str_eq(why.text, "cuda_device 2: this node has CUDA devices 0 to 1");
    mem_cuda_free(0, d0);
    mem_cuda_free(1, d1);
}

Test(copier, cuda_without_a_driver_says_why)
{
    const char *top = getenv("top_builddir");
    char path[1024], version[256];
    kvx_failure_t why;

#ifndef KVX_HAVE_CUDA
    cr_skip_test("built without CUDA");
#endif
    setenv("KVXT_FAKE_CUDA_ERROR", "nodriver", 1);
    snprintf(path, sizeof(path), "%s/tests/.libs/libfakecudart.so", top != NULL ? top : ".");
    cr_assert_eq(mem_cuda_open(path, &why), KVX_ERR_CUDA);
    cr_expect_str_eq(why.text, "CUDA unavailable: CUDA driver version is insufficient for CUDA "
                               "runtime version");
    cr_expect_str_eq(why.foreign, "cudaErrorInsufficientDriver");
    cr_expect_eq(mem_cuda_alloc(0, 64, (void **)&top, &why), KVX_ERR_CUDA);
    cr_expect(strncmp(why.text, "CUDA unavailable: ", 18) == 0, "%s", why.text);
    mem_cuda_version(path, version, sizeof(version));
    cr_expect(strstr(version, "no driver: CUDA unavailable: CUDA driver version") != NULL, "%s",
              version);
}

Test(copier, cuda_runtime_missing_says_why)
{
    kvx_failure_t why;

#ifndef KVX_HAVE_CUDA
    cr_skip_test("built without CUDA");
#endif
    cr_assert_eq(mem_cuda_open("/nonexistent/libcudart.so.13", &why), KVX_ERR_CUDA);
    cr_expect(strncmp(why.text, "CUDA unavailable: cannot load the CUDA runtime (", 48) == 0, "%s",
              why.text);
}

Test(copier, cuda_real_runtime_is_there_or_says_why)
{
    kvx_failure_t why;
    kvx_status_t status;

#ifndef KVX_HAVE_CUDA
    cr_skip_test("built without CUDA");
#endif
    status = mem_cuda_open(NULL, &why);
    cr_expect(status == KVX_OK ||
                  (status == KVX_ERR_CUDA && strncmp(why.text, "CUDA unavailable: ", 18) == 0),
              "%s: %s", kvx_status_name(status), why.text);
}
