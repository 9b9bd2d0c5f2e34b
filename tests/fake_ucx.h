/*
 * fake_ucx.h - a stand-in for src/ucx (tests/fake_ucx.c) linked into unit
 * tests of the room machines instead of the real wrapper: two contexts in
 * one process, puts that copy bytes straight into the target buffer,
 * flushes, and control messages and eager data messages (a header and
 * its payload, as kucx_am_send_data() sends them) captured in a queue that
 * the test delivers, drops, duplicates or reorders. Nothing here talks to
 * UCX.
 */
#ifndef KVX_TESTS_FAKE_UCX_H
#define KVX_TESTS_FAKE_UCX_H

#include "ucx/kvx_ucx.h"

#include <stddef.h>

struct kvx_ctx;

/* What a put or a flush does when it is posted. */
typedef enum fake_mode {
    FAKE_NOW = 0, /* completes at once (KVX_OK, no callback) */
    FAKE_DEFER,   /* KVX_INPROGRESS: completes when the test says (fake_complete) */
    FAKE_REFUSE,  /* not posted: an error with fake_ucx.refuse_ucs */
} fake_mode_t;

/* An endpoint of the fake: which context it leads to. */
typedef struct fake_ep {
    struct kvx_ctx *to;
    kucx_plane_t plane;
} fake_ep_t;

/* A message in flight: a control message (buf), or a data message (its
 * header in hdr, its payload in buf). */
typedef struct fake_msg {
    struct fake_msg *next;
    struct kvx_ctx *to;
    void *buf;
    size_t len;
    void *hdr; /* NULL for a control message */
    size_t hlen;
} fake_msg_t;

/* An operation posted with KVX_INPROGRESS, waiting for fake_complete(). */
typedef struct fake_op {
    struct fake_op *next;
    int flush;
    kucx_done_cb_t cb;
    void *user;
    void *req;
} fake_op_t;

typedef struct fake_ucx {
    fake_mode_t put_mode, flush_mode;
    fake_mode_t data_mode;   /* data messages: FAKE_NOW (copied, done at once) or FAKE_REFUSE */
    ucs_status_t refuse_ucs; /* why a refused put or flush was refused */
    fake_msg_t *msgs;        /* control messages sent, oldest first */
    fake_op_t *ops;          /* operations in flight, oldest first */
    unsigned puts, flushes, sent, data_sent;
    size_t put_bytes;
} fake_ucx_t;

extern fake_ucx_t fake_ucx;

/* Forgets everything (queues freed) and sets the modes back to FAKE_NOW. */
void fake_reset(void);
/* Messages in flight (to a context, or to any with NULL). */
unsigned fake_pending(const struct kvx_ctx *to);
/* Takes the oldest message to a context (any with NULL) off the queue; the
 * caller frees it (fake_msg_free). NULL when none. */
fake_msg_t *fake_take(const struct kvx_ctx *to);
void fake_msg_free(fake_msg_t *m);
/* A copy of a message (to deliver it twice). */
fake_msg_t *fake_msg_dup(const fake_msg_t *m);
/* The type (msg_type_t) of a message (of its header, for data). */
int fake_msg_type(const fake_msg_t *m);
/* Completes every operation in flight with status, in posting order
 * (callbacks run as from UCX's progress); returns how many. */
unsigned fake_complete(ucs_status_t status);
/* Operations in flight. */
unsigned fake_inflight(void);

#endif
