/*
 * rendezvous.h - the running job's door for instances that join it: a TCP
 * listener one rank serves without ever blocking (rdv_poll() from its
 * progress thread), and the joiner's side of the handshake (rdv_join()).
 * The frames are core/base/join.h's.
 *
 * A connection is refused or dropped, with a log line naming its address,
 * when the joiner proves no key, sends a malformed frame, closes early,
 * or has not finished its hello within the timeout (a slow joiner holds
 * one of RDV_CONNS slots for at most that long; one that finds every slot
 * held is closed at once). Nothing else of the job changes.
 */
#ifndef KVX_CORE_RENDEZVOUS_H
#define KVX_CORE_RENDEZVOUS_H

#include "core/base/join.h"

#include <kvx.h>

#include <stddef.h>
#include <stdint.h>

#define RDV_CONNS    8 /* handshakes served at once */
#define RDV_ADDR_MAX JOIN_ADDR_MAX

/* Decides on a joiner whose hello proved the key and passed its limits:
 * KVX_OK fills the welcome (its doors stay the callee's); any other status
 * refuses with why. A hello that names its place goes on to the exchange of
 * descriptors: describe reads the joiner's and gives this rank's (malloc'd,
 * freed by the door), or refuses. Both run in rdv_poll()'s caller, so they
 * must not block either. */
typedef kvx_status_t (*rdv_admit_t)(void *arg, const join_hello_t *hello, const char *peer,
                                    join_welcome_t *welcome, char *why, size_t why_len);
typedef kvx_status_t (*rdv_describe_t)(void *arg, const join_hello_t *hello, const char *peer,
                                       const uint8_t *desc, size_t len, void **reply,
                                       size_t *reply_len, char *why, size_t why_len);

typedef struct rdv_conn {
    int fd;        /* -1: the slot is free */
    int stage;     /* RDV_STAGE_* (rendezvous.c) */
    int then_desc; /* the welcome is followed by the exchange of descriptors */
    uint64_t deadline;
    uint8_t nonce[JOIN_NONCE_BYTES];
    join_hello_t hello;
    uint8_t small[JOIN_FRAME_MAX];
    uint8_t *buf; /* small, or a malloc'd frame of cap bytes */
    size_t cap;
    size_t len, done; /* bytes of this stage, and so far */
    char peer[RDV_ADDR_MAX];
} rdv_conn_t;

typedef struct rdv {
    int fd; /* the listening socket, -1 when closed */
    char addr[RDV_ADDR_MAX];
    uint8_t key[JOIN_KEY_BYTES];
    uint64_t timeout;
    rdv_admit_t admit;
    rdv_describe_t describe;
    void *arg;
    rdv_conn_t conn[RDV_CONNS];
    uint64_t welcomed, refused, dropped; /* joiners so far */
} rdv_t;

/* Listens at spec: "HOST:PORT", "HOST" (any port), ":PORT" (loopback),
 * "[V6]:PORT"; HOST is a numeric address or an interface name (its first
 * IPv4 address); NULL or "" is 127.0.0.1 with any port. r->addr then says
 * where it listens. 0, or -1 with why. */
int rdv_open(rdv_t *r, const char *spec, const uint8_t key[JOIN_KEY_BYTES], uint64_t timeout_ns,
             rdv_admit_t admit, rdv_describe_t describe, void *arg, char *why, size_t why_len);
/* Accepts, reads and answers what is ready and drops what is late; never
 * blocks. Returns how many connections moved. */
unsigned rdv_poll(rdv_t *r, uint64_t now);
/* Closes the listener and every connection. */
void rdv_close(rdv_t *r);

/* The joiner's side: connects to addr ("HOST:PORT"), answers the challenge
 * with hello (its nonce is drawn here) and reads the reply, all within
 * timeout_ns. KVX_OK with the welcome (free its doors); the refusal's status
 * and sentence; KVX_ERR_TIMEOUT, KVX_ERR_IO or KVX_ERR_PROTOCOL with what
 * went wrong. A hello that names its place sends desc after the welcome
 * and returns the job rank's in *reply (malloc'd). */
kvx_status_t rdv_join(const char *addr, const uint8_t key[JOIN_KEY_BYTES], join_hello_t *hello,
                      uint64_t timeout_ns, join_welcome_t *welcome, kvx_failure_t *why);
kvx_status_t rdv_join_desc(const char *addr, const uint8_t key[JOIN_KEY_BYTES], join_hello_t *hello,
                           const void *desc, size_t desc_len, uint64_t timeout_ns,
                           join_welcome_t *welcome, void **reply, size_t *reply_len,
                           kvx_failure_t *why);

#endif
