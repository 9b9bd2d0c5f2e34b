/*
 * msg.c - building and checking control messages.
 */
#include "config.h"

#include "msg.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *msg_type_name(unsigned type)
{
    static const char *const names[] = { "?",    "PREALLOC", "ACCEPT",  "START",
                                         "DONE", "FAIL",     "DRAINED", "PING",
                                         "BYE",  "RECEIVED", "VERDICT", "DATA" };

    return type < MSG_TYPE_MAX ? names[type] : "?";
}

static void msg_init(msg_hdr_t *h, msg_type_t type, int src_rank, uint64_t room, uint64_t nonce,
                     size_t len)
{
    h->magic = MSG_MAGIC;
    h->version = MSG_VERSION;
    h->type = (uint16_t)type;
    h->length = (uint32_t)len;
    h->src_rank = src_rank;
    h->room = room;
    h->nonce = nonce;
}

static void *msg_alloc(msg_type_t type, int src_rank, uint64_t room, uint64_t nonce, size_t body,
                       size_t *len_p)
{
    size_t len = sizeof(msg_hdr_t) + body;
    msg_hdr_t *h = calloc(1, len);

    if (h == NULL) {
        return NULL;
    }
    msg_init(h, type, src_rank, room, nonce, len);
    *len_p = len;
    return h;
}

void msg_put_data(void *buf, int src_rank, uint64_t room, uint64_t nonce, const msg_data_t *d)
{
    msg_hdr_t h;

    memset(&h, 0, sizeof(h));
    msg_init(&h, MSG_DATA, src_rank, room, nonce, MSG_DATA_LEN);
    memcpy(buf, &h, sizeof(h));
    memcpy((char *)buf + sizeof(h), d, sizeof(*d));
}

void *msg_new(msg_type_t type, int src_rank, uint64_t room, uint64_t nonce, size_t *len_p)
{
    return msg_alloc(type, src_rank, room, nonce, 0, len_p);
}

void *msg_new_prealloc(int src_rank, uint64_t room, uint64_t nonce, int64_t aux_slot, int writes,
                       const uint32_t *pages, size_t npages, size_t *len_p)
{
    size_t body = sizeof(msg_prealloc_t) + (writes ? npages * sizeof(uint32_t) : 0);
    char *m = msg_alloc(MSG_PREALLOC, src_rank, room, nonce, body, len_p);
    msg_prealloc_t p = { aux_slot, (uint32_t)npages, (uint32_t)(writes != 0) };

    if (m == NULL) {
        return NULL;
    }
    memcpy(m + sizeof(msg_hdr_t), &p, sizeof(p));
    if (writes) {
        memcpy(m + sizeof(msg_hdr_t) + sizeof(p), pages, npages * sizeof(uint32_t));
    }
    return m;
}

void *msg_new_done(int src_rank, uint64_t room, uint64_t nonce, uint64_t bytes, uint64_t puts,
                   size_t *len_p)
{
    char *m = msg_alloc(MSG_DONE, src_rank, room, nonce, sizeof(msg_done_t), len_p);
    msg_done_t d = { bytes, puts };

    if (m != NULL) {
        memcpy(m + sizeof(msg_hdr_t), &d, sizeof(d));
    }
    return m;
}

void *msg_new_fail(int src_rank, uint64_t room, uint64_t nonce, const kvx_failure_t *f,
                   size_t *len_p)
{
    return msg_new_failure(MSG_FAIL, src_rank, room, nonce, f, len_p);
}

void *msg_new_failure(msg_type_t type, int src_rank, uint64_t room, uint64_t nonce,
                      const kvx_failure_t *f, size_t *len_p)
{
    char *m = msg_alloc(type, src_rank, room, nonce, sizeof(msg_failure_t), len_p);
    msg_failure_t w;

    if (m == NULL) {
        return NULL;
    }
    memset(&w, 0, sizeof(w));
    w.status = f->status;
    w.stage = f->stage;
    w.origin_rank = f->origin_rank;
    w.origin_role = f->origin_role;
    w.origin_instance = f->origin_instance;
    w.origin_tp_rank = f->origin_tp_rank;
    w.flags = f->flags;
    w.count = f->count;
    w.has_room = (uint32_t)f->has_room;
    w.room_id = f->room_id;
    memcpy(w.foreign, f->foreign, sizeof(w.foreign));
    memcpy(w.text, f->text, sizeof(w.text));
    memcpy(m + sizeof(msg_hdr_t), &w, sizeof(w));
    return m;
}

static kvx_status_t msg_bad(char *why, size_t why_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static kvx_status_t msg_bad(char *why, size_t why_len, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, why_len, fmt, ap);
    va_end(ap);
    return KVX_ERR_PROTOCOL;
}

static int msg_status_valid(int32_t s)
{
    return s >= KVX_ERR_INTERNAL && s <= KVX_INPROGRESS;
}

static kvx_status_t msg_decode_failure(const char *body, kvx_failure_t *f, char *why,
                                       size_t why_len)
{
    msg_failure_t w;

    memcpy(&w, body, sizeof(w));
    if (!msg_status_valid(w.status) || w.status >= 0) {
        return msg_bad(why, why_len, "FAIL carries status %d, not an error", w.status);
    }
    if (w.stage < 0 || w.stage >= KVX_STAGE_COUNT) {
        return msg_bad(why, why_len, "FAIL carries stage %d", w.stage);
    }
    if (w.origin_role < KVX_ROLE_NONE || w.origin_role > KVX_ROLE_DECODE) {
        return msg_bad(why, why_len, "FAIL carries role %d", w.origin_role);
    }
    if (memchr(w.foreign, '\0', sizeof(w.foreign)) == NULL ||
        memchr(w.text, '\0', sizeof(w.text)) == NULL) {
        return msg_bad(why, why_len, "FAIL carries an unterminated string");
    }
    memset(f, 0, sizeof(*f));
    f->status = (kvx_status_t)w.status;
    f->stage = (kvx_stage_t)w.stage;
    f->origin_rank = w.origin_rank;
    f->origin_role = (kvx_role_t)w.origin_role;
    f->origin_instance = w.origin_instance;
    f->origin_tp_rank = w.origin_tp_rank;
    f->flags = w.flags;
    f->count = w.count;
    f->has_room = w.has_room != 0;
    f->room_id = w.room_id;
    memcpy(f->foreign, w.foreign, sizeof(f->foreign));
    memcpy(f->text, w.text, sizeof(f->text));
    return KVX_OK;
}

/* Body length each type must have (PREALLOC: its fixed part). */
static size_t msg_body_len(unsigned type)
{
    switch (type) {
    case MSG_PREALLOC:
        return sizeof(msg_prealloc_t);
    case MSG_DONE:
        return sizeof(msg_done_t);
    case MSG_FAIL:
    case MSG_VERDICT:
        return sizeof(msg_failure_t);
    case MSG_DATA:
        return sizeof(msg_data_t);
    default:
        return 0;
    }
}

kvx_status_t msg_decode(const void *buf, size_t len, const msg_limits_t *limits, msg_t *msg,
                        char *why, size_t why_len)
{
    const char *body = (const char *)buf + sizeof(msg_hdr_t);
    size_t want;
    msg_hdr_t h;

    if (buf == NULL || len < sizeof(msg_hdr_t)) {
        return msg_bad(why, why_len, "message of %zu bytes is shorter than a header", len);
    }
    memcpy(&h, buf, sizeof(h));
    if (h.magic != MSG_MAGIC) {
        return msg_bad(why, why_len, "bad magic 0x%08x", h.magic);
    }
    if (h.version != MSG_VERSION) {
        return msg_bad(why, why_len, "protocol version %u, this kvx speaks %u", h.version,
                       MSG_VERSION);
    }
    if (h.type == 0 || h.type >= MSG_TYPE_MAX) {
        return msg_bad(why, why_len, "unknown message type %u", h.type);
    }
    if (h.length != len) {
        return msg_bad(why, why_len, "%s says %u bytes but %zu arrived", msg_type_name(h.type),
                       h.length, len);
    }
    if (h.src_rank < 0 || h.src_rank >= limits->world_size) {
        return msg_bad(why, why_len, "%s from rank %d, outside the world of %d",
                       msg_type_name(h.type), h.src_rank, limits->world_size);
    }
    want = sizeof(msg_hdr_t) + msg_body_len(h.type);
    if (h.type == MSG_PREALLOC && len >= want) {
        msg_prealloc_t p;

        memcpy(&p, body, sizeof(p));
        if (p.npages == 0 || p.npages > limits->max_pages) {
            return msg_bad(why, why_len, "PREALLOC grants %u pages; at most %zu fit the pool",
                           p.npages, limits->max_pages);
        }
        if (p.writes > 1 || p.aux_slot < -1) {
            return msg_bad(why, why_len, "PREALLOC has writes=%u aux_slot=%lld", p.writes,
                           (long long)p.aux_slot);
        }
        want += p.writes ? (size_t)p.npages * sizeof(uint32_t) : 0;
        msg->u.prealloc = p;
        msg->pages = body + sizeof(p);
    }
    if (len != want) {
        return msg_bad(why, why_len, "%s of %zu bytes, expected %zu", msg_type_name(h.type), len,
                       want);
    }
    if (h.type == MSG_DONE) {
        memcpy(&msg->u.done, body, sizeof(msg->u.done));
    } else if (h.type == MSG_DATA) {
        memcpy(&msg->u.data, body, sizeof(msg->u.data));
        if (msg->u.data.npages == 0 || msg->u.data.npages > limits->max_pages ||
            msg->u.data.pos > limits->max_pages - msg->u.data.npages) {
            return msg_bad(why, why_len, "DATA for pages [%u, +%u) of a pool of %zu",
                           msg->u.data.pos, msg->u.data.npages, limits->max_pages);
        }
    } else if ((h.type == MSG_FAIL || h.type == MSG_VERDICT) &&
               msg_decode_failure(body, &msg->u.failure, why, why_len) != KVX_OK) {
        return KVX_ERR_PROTOCOL;
    }
    msg->hdr = h;
    return KVX_OK;
}
