/*
 * fuzz_msg.c - libFuzzer target for msg_decode(), the one function that
 * reads what peers send (src/core/base/msg.c).
 *
 * Built with clang -fsanitize=fuzzer,address,undefined by its own rule in
 * Makefile.am, and run for a bounded time by tests/fuzz/run-fuzz.sh under
 * make check, starting from the seeds in tests/fuzz/corpus/msg/. Any
 * out-of-bounds read, undefined behaviour, or broken property of
 * msg_check() (a malformed message accepted, a field out of its limits, a
 * message the builders cannot rebuild) stops the fuzzer with the input.
 */
#include "config.h"

#include "msg_check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];

    if (msg_check(data, size, NULL, err, sizeof(err)) < 0) {
        fprintf(stderr, "fuzz_msg: %s\n", err);
        abort();
    }
    return 0;
}
