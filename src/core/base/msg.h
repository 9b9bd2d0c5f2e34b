/*
 * msg.h - kvx's control messages between peers (UCX active messages).
 *
 * Every message kvx receives is decoded by msg_decode() and nothing else:
 * it checks magic, version, type, lengths, ranks and page ids before any
 * field is used. A message that fails is counted and logged with its
 * source, never trusted.
 */
#ifndef KVX_CORE_MSG_H
#define KVX_CORE_MSG_H

#include <kvx.h>

#include <stddef.h>
#include <stdint.h>

#define MSG_AM_ID   7
#define MSG_DATA_ID 8           /* active messages that carry KV data (MSG_DATA) */
#define MSG_MAGIC   0x4b565831u /* "KVX1" */
#define MSG_VERSION 1

typedef enum msg_type {
    MSG_PREALLOC = 1, /* decode -> prefill: room opened; pages and aux slot granted */
    MSG_ACCEPT,       /* prefill -> decode: room opened on the prefill, grant accepted */
    MSG_START,        /* prefill -> decode: pages are flowing */
    MSG_DONE,         /* prefill -> decode: every put of this writer is remotely complete */
    MSG_FAIL,         /* either way: the room failed; carries the root cause */
    MSG_DRAINED,      /* prefill -> decode: nothing of this room is in flight any more */
    MSG_PING,         /* keepalive; to a TP sibling its nonce is the sender's agreement
                         rounds started (agree_rounds()), so out-of-step rounds are seen */
    MSG_BYE,          /* the sender is shutting down and will not write again */
    MSG_RECEIVED,     /* decode -> prefill: the room is SUCCESS on this decode rank */
    MSG_VERDICT,      /* decode -> prefill: the decode instance agreed FAILED; its root cause */
    MSG_DATA,         /* prefill -> decode, on MSG_DATA_ID: KV data for the decode to unpack */
    MSG_AUX,          /* prefill -> decode, on MSG_DATA_ID: the aux row, when pages are messages */
    MSG_AGREED,       /* decode -> prefill: rooms the decode instance agreed SUCCESS */
    MSG_TP_BREAK,     /* TP sibling -> sibling: the instance's TP ranks are out of step and
                         run no collective any more; carries the reason (room 0, nonce 0) */
    MSG_TYPE_MAX
} msg_type_t;

/* Fixed header of every message. */
typedef struct msg_hdr {
    uint32_t magic;
    uint16_t version;
    uint16_t type;
    uint32_t length;  /* of the whole message */
    int32_t src_rank; /* world rank of the sender */
    uint64_t room;
    uint64_t nonce; /* the decode room's incarnation (0 outside rooms) */
} msg_hdr_t;

/* How a PREALLOC asks the prefill rank to deliver its pages. */
enum {
    MSG_WRITES_NONE = 0,     /* control only: it writes nothing to this decode rank */
    MSG_WRITES_PUTS = 1,     /* puts (or data messages where the plan mode is UNPACK) */
    MSG_WRITES_MESSAGES = 2, /* every page and the aux row as data messages (KVX_WRITES) */
};

/* Body of MSG_PREALLOC, followed by npages uint32 page ids (when it writes). */
typedef struct msg_prealloc {
    int64_t aux_slot; /* -1: none (or this prefill rank is not the aux writer) */
    uint32_t npages;
    uint32_t writes; /* MSG_WRITES_* */
    uint32_t verify; /* KVX_VERIFY of the decode rank: 0 off, 1 sample, 2 full (digests asked) */
    uint32_t verify_rate; /* sample: one unit in this many */
} msg_prealloc_t;

/* Body of MSG_DONE, followed by ndigests uint64: the digests of the units
 * the grant asked for (verify.h), in unit order. */
typedef struct msg_done {
    uint64_t bytes;
    uint64_t puts;
    uint32_t verify;   /* the mode the writer digested in; 0: it did not (or was not asked) */
    uint32_t ndigests; /* at most MSG_DIGESTS_MAX */
    uint64_t aux;      /* the aux row's digest, when has_aux */
    uint32_t has_aux;
    uint32_t reserved; /* 0 */
} msg_done_t;

#define MSG_DIGESTS_MAX (1u << 24)

/* Body of MSG_DATA. Header and body travel as the active message's header,
 * the data as its payload: the writer's heads of the room's pages at
 * positions [pos, pos + npages) of the decode's page list, for one (layer,
 * component), laid out as in the writer's pool. */
typedef struct msg_data {
    uint32_t layer, comp;
    uint32_t pos, npages;
} msg_data_t;

#define MSG_DATA_LEN (sizeof(msg_hdr_t) + sizeof(msg_data_t))

/* MSG_AUX has a MSG_DATA header (all of msg_data_t zero) and carries the aux
 * row (msg_aux_header_t and the payload) for the decode rank's aux slot. */

/* Body of MSG_AGREED, followed by count msg_agreed_room_t: the rooms one
 * agreement round of the decode instance concluded SUCCESS, for one prefill
 * rank (one message per peer per round). The header's room and nonce are 0. */
typedef struct msg_agreed {
    uint32_t count; /* 1..MSG_AGREED_MAX */
    uint32_t reserved;
} msg_agreed_t;

typedef struct msg_agreed_room {
    uint64_t room;
    uint64_t nonce; /* the decode room's incarnation */
} msg_agreed_room_t;

#define MSG_AGREED_MAX 65536u

/* Body of MSG_FAIL, MSG_VERDICT and MSG_TP_BREAK: a kvx_failure_t in fixed-width fields. */
typedef struct msg_failure {
    int32_t status, stage, origin_rank, origin_role, origin_instance, origin_tp_rank;
    uint32_t flags, count, has_room, pad;
    uint64_t room_id;
    char foreign[128];
    char text[256];
} msg_failure_t;

/* The header of an aux row in a decode aux slot: the room id, the
 * payload's length and the low 32 bits of the decode room's nonce, so the
 * decode can tell the row belongs to this incarnation of the room. */
typedef struct msg_aux_header {
    uint64_t room;
    uint32_t len;
    uint32_t nonce;
} msg_aux_header_t;

/* A decoded message: fields are valid only while the buffer is. */
typedef struct msg {
    msg_hdr_t hdr;
    union {
        msg_prealloc_t prealloc;
        msg_done_t done;
        msg_data_t data;
        kvx_failure_t failure;
        msg_agreed_t agreed;
    } u;
    const void *pages;   /* MSG_PREALLOC: npages uint32 (unaligned; copy with memcpy) */
    const void *rooms;   /* MSG_AGREED: count msg_agreed_room_t (unaligned; copy with memcpy) */
    const void *digests; /* MSG_DONE: ndigests uint64 (unaligned; copy with memcpy) */
} msg_t;

/* Limits a message is checked against. */
typedef struct msg_limits {
    int world_size;
    size_t max_pages; /* pages a PREALLOC may grant (the sender's pool) */
} msg_limits_t;

/* Decodes and checks buf. On KVX_ERR_PROTOCOL, why says what was wrong. */
kvx_status_t msg_decode(const void *buf, size_t len, const msg_limits_t *limits, msg_t *msg,
                        char *why, size_t why_len);

/* Builders: return a malloc'd message (NULL on no memory) and its length. */
void *msg_new(msg_type_t type, int src_rank, uint64_t room, uint64_t nonce, size_t *len_p);
void *msg_new_prealloc(int src_rank, uint64_t room, uint64_t nonce, int64_t aux_slot, int writes,
                       const uint32_t *pages, size_t npages, size_t *len_p);
/* Asks the writer of a PREALLOC built above for digests (KVX_VERIFY). */
void msg_prealloc_verify(void *m, uint32_t verify, uint32_t rate);
void *msg_new_done(int src_rank, uint64_t room, uint64_t nonce, uint64_t bytes, uint64_t puts,
                   size_t *len_p);
/* A DONE with digests: d's verify, aux and has_aux, then n digests. */
void *msg_new_done_digests(int src_rank, uint64_t room, uint64_t nonce, const msg_done_t *d,
                           const uint64_t *digests, size_t n, size_t *len_p);
void *msg_new_fail(int src_rank, uint64_t room, uint64_t nonce, const kvx_failure_t *f,
                   size_t *len_p);
void *msg_new_agreed(int src_rank, const msg_agreed_room_t *rooms, uint32_t n, size_t *len_p);
/* A FAIL or a VERDICT: both carry a failure record. */
void *msg_new_failure(msg_type_t type, int src_rank, uint64_t room, uint64_t nonce,
                      const kvx_failure_t *f, size_t *len_p);
/* Writes a MSG_DATA (or MSG_AUX) header into buf (MSG_DATA_LEN bytes): data
 * messages are posted on the hot path, so nothing is allocated. */
void msg_put_data(void *buf, msg_type_t type, int src_rank, uint64_t room, uint64_t nonce,
                  const msg_data_t *d);

const char *msg_type_name(unsigned type);

#endif
