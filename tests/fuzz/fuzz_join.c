/*
 * fuzz_join.c - libFuzzer target for the join handshake's decoders
 * (src/core/base/join.c), what the running job's rendezvous reads from
 * whoever connects, and what a joiner reads back.
 *
 * The first byte picks what the rest is:
 *   0  a frame as the door reads it: header, then the body its type names;
 *   1  the fields of a hello from a joiner that holds the key: the target
 *      proves them itself, so the fuzzer reaches every field check (a
 *      frame of the fuzzer's own cannot carry a valid proof);
 *   2  the fields of a welcome from a job that holds the key, likewise
 *      (with its doors).
 * Properties: no read outside the input (ASan), no undefined behaviour, and
 * whatever decodes is what the encoder writes for the decoded values, within
 * their limits; a refusal's text is printable and terminated.
 */
#include "config.h"

#include "core/base/join.h"

#include <nettle/hmac.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t key[JOIN_KEY_BYTES] = { 7, 7, 7, 7, 1, 2, 3, 4 };
static const uint8_t job_nonce[JOIN_NONCE_BYTES] = { 9, 8, 7, 6, 5 };
static const uint8_t joiner_nonce[JOIN_NONCE_BYTES] = { 1, 3, 5, 7, 9 };

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_join: %s\n", what);
    abort();
}

static void check_hello(const uint8_t *body, uint32_t len)
{
    join_hello_t h;
    uint8_t again[JOIN_FRAME_MAX];
    char why[256];

    if (join_hello_decode(body, len, key, job_nonce, &h, why, sizeof(why)) != 0) {
        if (memchr(why, '\0', sizeof(why)) == NULL) {
            fail("a hello's reason is not terminated");
        }
        return;
    }
    if (h.role < KVX_ROLE_PREFILL || h.role > KVX_ROLE_DECODE || h.tp_size < 1 || h.kv.layers < 1 ||
        h.num_pages < 1 || memchr(h.name, '\0', JOIN_NAME_MAX) == NULL) {
        fail("a hello outside its limits was accepted");
    }
    if (join_hello_encode(&h, key, job_nonce, again) != JOIN_HEADER + len ||
        memcmp(again + JOIN_HEADER, body, len) != 0) {
        fail("an accepted hello is not what the encoder writes for it");
    }
}

static void check_welcome(const uint8_t *body, uint32_t len)
{
    join_welcome_t w;
    char why[256];

    if (join_welcome_decode(body, len, key, job_nonce, joiner_nonce, &w, why, sizeof(why)) != 0) {
        return;
    }
    if (w.instance < 0 || w.generation == 0 || w.tp[0] < 1 || w.tp[1] < 1) {
        fail("a welcome outside its limits was accepted");
    }
    uint8_t *again = malloc(join_welcome_size(&w));

    if (join_welcome_encode(&w, key, job_nonce, joiner_nonce, again) != JOIN_HEADER + len ||
        memcmp(again + JOIN_HEADER, body, len) != 0) {
        fail("an accepted welcome is not what the encoder writes for it");
    }
    free(again);
    free(w.doors);
}

static void check_refuse(const uint8_t *body, uint32_t len)
{
    join_refuse_t r;
    char why[256];

    if (join_refuse_decode(body, len, &r, why, sizeof(why)) != 0) {
        return;
    }
    if (r.status >= 0 || strnlen(r.text, JOIN_TEXT_MAX) >= JOIN_TEXT_MAX) {
        fail("a refusal without a status or a terminated text was accepted");
    }
    for (const char *p = r.text; *p; p++) {
        if (*p < 0x20 || *p > 0x7e) {
            fail("a refusal's text holds an unprintable byte");
        }
    }
}

/* Proves fields as a key holder would: the body is nonce(s), proof, fields. */
static void proven(const uint8_t *fields, size_t n, int welcome)
{
    uint8_t body[JOIN_BODY_MAX];
    size_t at = welcome ? JOIN_MAC_BYTES : JOIN_NONCE_BYTES + JOIN_MAC_BYTES;
    const char *label = welcome ? "kvx-join-welcome" : "kvx-join-hello";
    struct hmac_sha256_ctx h;

    if (n > JOIN_BODY_MAX - at) {
        return;
    }
    if (!welcome) {
        memcpy(body, joiner_nonce, JOIN_NONCE_BYTES);
    }
    memcpy(body + at, fields, n);
    hmac_sha256_set_key(&h, JOIN_KEY_BYTES, key);
    hmac_sha256_update(&h, strlen(label) + 1, (const uint8_t *)label);
    hmac_sha256_update(&h, JOIN_NONCE_BYTES, welcome ? joiner_nonce : job_nonce);
    hmac_sha256_update(&h, JOIN_NONCE_BYTES, welcome ? job_nonce : joiner_nonce);
    hmac_sha256_update(&h, n, fields);
    hmac_sha256_digest(&h, JOIN_MAC_BYTES, body + at - JOIN_MAC_BYTES);
    /* In a buffer of its own length, so ASan sees every overread. */
    uint8_t *exact = malloc(at + n);

    memcpy(exact, body, at + n);
    if (welcome) {
        check_welcome(exact, (uint32_t)(at + n));
    } else {
        check_hello(exact, (uint32_t)(at + n));
    }
    free(exact);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    join_type_t type;
    uint32_t len;
    char why[256];

    if (size < 1) {
        return 0;
    }
    if (data[0] % 3 == 1 || data[0] % 3 == 2) {
        proven(data + 1, size - 1, data[0] % 3 == 2);
        return 0;
    }
    data++;
    size--;
    if (size < JOIN_HEADER || join_header_decode(data, &type, &len, why, sizeof(why)) != 0) {
        return 0;
    }
    if (len > (type == JOIN_WELCOME || type == JOIN_DESC ? JOIN_DESC_MAX : JOIN_BODY_MAX)) {
        fail("a header over the body limit was accepted");
    }
    if (len > size - JOIN_HEADER) {
        return 0; /* the door would wait for the rest */
    }
    /* The body in a buffer of its own length, so ASan sees every overread. */
    uint8_t *body = malloc(len > 0 ? len : 1);

    memcpy(body, data + JOIN_HEADER, len);
    if (type == JOIN_HELLO) {
        check_hello(body, len);
    } else if (type == JOIN_WELCOME) {
        check_welcome(body, len);
    } else if (type == JOIN_REFUSE) {
        check_refuse(body, len);
    } else if (type == JOIN_DESC) {
        const uint8_t *d;
        size_t n;

        if (join_desc_decode(body, len, data[0] & 1, key, job_nonce, joiner_nonce, &d, &n, why,
                             sizeof(why)) == 0 &&
            (d < body || d + n != body + len)) {
            fail("a descriptor outside its frame");
        }
    } else {
        uint8_t nonce[JOIN_NONCE_BYTES];

        join_challenge_decode(body, len, nonce, why, sizeof(why));
    }
    free(body);
    return 0;
}
