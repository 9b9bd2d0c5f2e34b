/*
 * join.h - the join handshake's wire format: what an instance that joins a
 * running job and the job's rendezvous (link/rendezvous.c) say over TCP, the
 * proofs that both hold the job's key, and the key file.
 *
 * Five frames, each a 12-byte header (magic "KVXJ", version, type, body
 * length, little-endian) and a body of at most JOIN_BODY_MAX bytes, or
 * JOIN_DESC_MAX for the two frames only a proven side sends:
 *
 *   job    -> joiner  CHALLENGE  the job's nonce (32 bytes, fresh per connection)
 *   joiner -> job     HELLO      the joiner's nonce, its proof, what it is
 *   job    -> joiner  WELCOME    the job's proof, the place the joiner takes and
 *                                the doors of the ranks it will talk to
 *                     or REFUSE  a status and one sentence saying why
 * and when the hello named its place (a rank of a joining instance):
 *   joiner -> job     DESC       its proof and its bootstrap descriptor
 *   job    -> joiner  DESC       the job rank's, or REFUSE
 *
 * A proof is HMAC-SHA256 under the job key over a label, both nonces (the
 * sender's last) and the frame's fields, so neither side's proof can be
 * replayed on another connection or turned into the other side's.
 */
#ifndef KVX_CORE_JOIN_H
#define KVX_CORE_JOIN_H

#include <kvx.h>

#include <stddef.h>
#include <stdint.h>

#define JOIN_MAGIC       0x4a58564bu /* "KVXJ" on the wire */
#define JOIN_VERSION     1u
#define JOIN_HEADER      12u
#define JOIN_BODY_MAX    1024u
#define JOIN_FRAME_MAX   (JOIN_HEADER + JOIN_BODY_MAX)
#define JOIN_DESC_MAX    (1u << 20) /* a welcome's or descriptor's body */
#define JOIN_DOORS_MAX   4096u
#define JOIN_ADDR_MAX    80u /* "[v6 address]:port" with its NUL */
#define JOIN_KEY_BYTES   32u
#define JOIN_NONCE_BYTES 32u
#define JOIN_MAC_BYTES   32u
#define JOIN_NAME_MAX    64u  /* a joiner's name, NUL included */
#define JOIN_TEXT_MAX    256u /* a refusal's sentence, NUL included */

typedef enum join_type {
    JOIN_CHALLENGE = 1,
    JOIN_HELLO = 2,
    JOIN_WELCOME = 3,
    JOIN_REFUSE = 4,
    JOIN_DESC = 5
} join_type_t;

/* What a joining instance says it is: checked against the running job's
 * instances as kvx_ctx_create() checks the instances of one job. */
typedef struct join_hello {
    uint8_t nonce[JOIN_NONCE_BYTES]; /* the joiner's */
    int32_t role;                    /* KVX_ROLE_PREFILL or KVX_ROLE_DECODE */
    int32_t tp_size;
    kvx_kv_layout_t kv;
    uint64_t num_pages, aux_item_size, page_stride;
    int32_t place;            /* -1: asks for a place; else the instance it was given */
    int32_t tp_rank;          /* with a place: which of its ranks this is */
    uint32_t generation;      /* with a place: the generation it was given */
    char name[JOIN_NAME_MAX]; /* printable ASCII, for the logs */
} join_hello_t;

/* A rank of the job that serves joiners, and where. */
typedef struct join_door {
    int32_t rank;
    char addr[JOIN_ADDR_MAX];
} join_door_t;

/* The place the job gives a joiner and the job as it is now. */
typedef struct join_welcome {
    int32_t instance;    /* the joiner's instance index in its role */
    uint32_t generation; /* its incarnation: 1 for a new place, +1 per replacement */
    int32_t count[2];    /* instances of the job: prefill, decode */
    int32_t tp[2];       /* their TP sizes */
    uint32_t ndoors;     /* the job's doors (none in a descriptor exchange's welcome) */
    join_door_t *doors;  /* decoded: malloc'd, the caller frees it */
} join_welcome_t;

typedef struct join_refuse {
    int32_t status; /* a kvx_status_t */
    char text[JOIN_TEXT_MAX];
} join_refuse_t;

/* The header of a frame: 0 and its type and body length, or -1 with why
 * (bad magic, another version, an unknown type, a body over JOIN_BODY_MAX). */
int join_header_decode(const uint8_t *buf, join_type_t *type, uint32_t *body_len, char *why,
                       size_t why_len);

/* Encoders write a whole frame (header and body) into out, which holds
 * JOIN_FRAME_MAX bytes (a welcome: join_welcome_size(); a descriptor: its
 * length + JOIN_HEADER + JOIN_MAC_BYTES), and return its length. */
size_t join_welcome_size(const join_welcome_t *w);
size_t join_challenge_encode(const uint8_t nonce[JOIN_NONCE_BYTES], uint8_t *out);
size_t join_hello_encode(const join_hello_t *hello, const uint8_t key[JOIN_KEY_BYTES],
                         const uint8_t job_nonce[JOIN_NONCE_BYTES], uint8_t *out);
size_t join_welcome_encode(const join_welcome_t *w, const uint8_t key[JOIN_KEY_BYTES],
                           const uint8_t job_nonce[JOIN_NONCE_BYTES],
                           const uint8_t joiner_nonce[JOIN_NONCE_BYTES], uint8_t *out);
size_t join_refuse_encode(const join_refuse_t *r, uint8_t *out);
/* A descriptor, proven by the joiner (from_joiner) or the job. */
size_t join_desc_encode(const void *desc, size_t len, int from_joiner,
                        const uint8_t key[JOIN_KEY_BYTES],
                        const uint8_t job_nonce[JOIN_NONCE_BYTES],
                        const uint8_t joiner_nonce[JOIN_NONCE_BYTES], uint8_t *out);

/* Decoders read a body (after its header); 0, or -1 with why. The hello's
 * proof is checked before any of its fields is read, and then every field
 * against its limits; the welcome's proof too. */
int join_challenge_decode(const uint8_t *body, uint32_t len, uint8_t nonce[JOIN_NONCE_BYTES],
                          char *why, size_t why_len);
int join_hello_decode(const uint8_t *body, uint32_t len, const uint8_t key[JOIN_KEY_BYTES],
                      const uint8_t job_nonce[JOIN_NONCE_BYTES], join_hello_t *hello, char *why,
                      size_t why_len);
int join_welcome_decode(const uint8_t *body, uint32_t len, const uint8_t key[JOIN_KEY_BYTES],
                        const uint8_t job_nonce[JOIN_NONCE_BYTES],
                        const uint8_t joiner_nonce[JOIN_NONCE_BYTES], join_welcome_t *w, char *why,
                        size_t why_len);
int join_refuse_decode(const uint8_t *body, uint32_t len, join_refuse_t *r, char *why,
                       size_t why_len);
/* Checks a descriptor's proof: 0 with *desc, *desc_len pointing into body. */
int join_desc_decode(const uint8_t *body, uint32_t len, int from_joiner,
                     const uint8_t key[JOIN_KEY_BYTES], const uint8_t job_nonce[JOIN_NONCE_BYTES],
                     const uint8_t joiner_nonce[JOIN_NONCE_BYTES], const uint8_t **desc,
                     size_t *desc_len, char *why, size_t why_len);

/* Reads the job key: a regular file owned by this user that no one else may
 * read or write, holding 64 hex digits (and an optional newline). 0, or -1
 * with why, which names the file and what is wrong with it. */
int join_key_load(const char *path, uint8_t key[JOIN_KEY_BYTES], char *why, size_t why_len);
/* Fills buf with bytes from the kernel's random source; 0 or -1. */
int join_random(uint8_t *buf, size_t len);

#endif
