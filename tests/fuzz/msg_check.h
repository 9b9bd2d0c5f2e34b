/*
 * msg_check.h - the property every byte string must have against
 * msg_decode(), shared by the libFuzzer target (fuzz_msg.c) and the seed
 * corpus tool (msg_corpus.c).
 */
#ifndef KVX_TESTS_FUZZ_MSG_CHECK_H
#define KVX_TESTS_FUZZ_MSG_CHECK_H

#include "core/base/msg.h"

#include <stddef.h>

/* The limits every input is decoded against: a world of 16 ranks and a
 * pool of 1000 pages (not a power of two, so the bound is a real bound). */
#define MSG_CHECK_WORLD     16
#define MSG_CHECK_MAX_PAGES 1000

extern const msg_limits_t msg_check_limits;

/*
 * Decodes buf and checks what must hold either way:
 *  - refused: the status is KVX_ERR_PROTOCOL and the reason is a
 *    non-empty, terminated string;
 *  - accepted: every field is within the limits, and the builder of its
 *    type rebuilds the same bytes (except what the decoder normalizes: a
 *    FAIL's has_room becomes 0/1 and its padding 0).
 * Returns 1 when accepted (*type_p is its type), 0 when refused, -1 when a
 * property does not hold (err says which).
 */
int msg_check(const void *buf, size_t len, unsigned *type_p, char *err, size_t err_len);

#endif
