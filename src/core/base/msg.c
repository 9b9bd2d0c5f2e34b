/*
 * msg.c - building and checking control messages.
 */
#include "config.h"

#include "core/base/msg.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *msg_type_name(unsigned type)
{
    static const char *const names[] = { "?",       "PREALLOC", "ACCEPT", "START",  "DONE",
                                         "FAIL",    "DRAINED",  "PING",   "BYE",    "RECEIVED",
                                         "VERDICT", "DATA",     "AUX",    "AGREED", "TP_BREAK" };

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

void msg_put_data(void *buf, msg_type_t type, int src_rank, uint64_t room, uint64_t nonce,
                  const msg_data_t *d)
{
    msg_hdr_t h;

    memset(&h, 0, sizeof(h));
    msg_init(&h, type, src_rank, room, nonce, MSG_DATA_LEN);
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
    msg_prealloc_t p = { aux_slot, (uint32_t)npages, (uint32_t)writes, 0, 0 };

    if (m == NULL) {
        return NULL;
    }
    memcpy(m + sizeof(msg_hdr_t), &p, sizeof(p));
    if (writes) {
        memcpy(m + sizeof(msg_hdr_t) + sizeof(p), pages, npages * sizeof(uint32_t));
    }
    return m;
}

void *msg_new_agreed(int src_rank, const msg_agreed_room_t *rooms, uint32_t n, size_t *len_p)
{
    size_t body = sizeof(msg_agreed_t) + (size_t)n * sizeof(msg_agreed_room_t);
    char *m = msg_alloc(MSG_AGREED, src_rank, 0, 0, body, len_p);
    msg_agreed_t a = { n, 0 };

    if (m != NULL) {
        memcpy(m + sizeof(msg_hdr_t), &a, sizeof(a));
        memcpy(m + sizeof(msg_hdr_t) + sizeof(a), rooms, (size_t)n * sizeof(msg_agreed_room_t));
    }
    return m;
}

void msg_prealloc_verify(void *m, uint32_t verify, uint32_t rate)
{
    char *body = (char *)m + sizeof(msg_hdr_t);

    memcpy(body + offsetof(msg_prealloc_t, verify), &verify, sizeof(verify));
    memcpy(body + offsetof(msg_prealloc_t, verify_rate), &rate, sizeof(rate));
}

void *msg_new_done_digests(int src_rank, uint64_t room, uint64_t nonce, const msg_done_t *d,
                           const uint64_t *digests, size_t n, size_t *len_p)
{
    char *m = msg_alloc(MSG_DONE, src_rank, room, nonce, sizeof(msg_done_t) + n * sizeof(uint64_t),
                        len_p);
    msg_done_t body = *d;

    if (m != NULL) {
        body.ndigests = (uint32_t)n;
        body.reserved = 0;
        memcpy(m + sizeof(msg_hdr_t), &body, sizeof(body));
        if (n > 0) {
            memcpy(m + sizeof(msg_hdr_t) + sizeof(body), digests, n * sizeof(uint64_t));
        }
    }
    return m;
}

void *msg_new_done(int src_rank, uint64_t room, uint64_t nonce, uint64_t bytes, uint64_t puts,
                   size_t *len_p)
{
    msg_done_t d = { bytes, puts, 0, 0, 0, 0, 0 };

    return msg_new_done_digests(src_rank, room, nonce, &d, NULL, 0, len_p);
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

/* One of kvx.h's statuses (a new one is valid without touching this). */
static int msg_status_valid(int32_t s)
{
#define MSG_STATUS_IS_(name, value, msg) || s == (value)
    return 0 KVX_STATUS_MAP(MSG_STATUS_IS_);
#undef MSG_STATUS_IS_
}

static kvx_status_t msg_decode_failure(const char *body, const msg_limits_t *limits,
                                       kvx_failure_t *f, char *why, size_t why_len)
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
    /* The origin reaches the application (kvx_room_failure): it must name a
     * rank of this job, or none. */
    if (w.origin_rank < -1 || w.origin_rank >= limits->world_size || w.origin_instance < -1 ||
        w.origin_instance >= limits->world_size || w.origin_tp_rank < -1 ||
        w.origin_tp_rank >= limits->world_size) {
        return msg_bad(why, why_len, "FAIL names origin rank %d, instance %d, tp %d", w.origin_rank,
                       w.origin_instance, w.origin_tp_rank);
    }
    if ((w.flags & ~KVX_FAILURE_INJECTED) != 0 || w.has_room > 1 ||
        w.count > (uint32_t)limits->world_size) {
        return msg_bad(why, why_len, "FAIL has flags 0x%x, has_room %u, count %u", w.flags,
                       w.has_room, w.count);
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
    f->has_room = (int)w.has_room;
    f->room_id = w.room_id;
    memcpy(f->foreign, w.foreign, sizeof(f->foreign));
    memcpy(f->text, w.text, sizeof(f->text));
    return KVX_OK;
}

/* A PREALLOC's fixed part, and the pages that follow it. */
static kvx_status_t msg_decode_prealloc(const char *body, size_t body_len,
                                        const msg_limits_t *limits, msg_prealloc_t *p_out,
                                        char *why, size_t why_len)
{
    msg_prealloc_t p;

    memcpy(&p, body, sizeof(p));
    if (p.npages == 0 || p.npages > limits->max_pages) {
        return msg_bad(why, why_len, "PREALLOC grants %u pages; at most %zu fit the pool", p.npages,
                       limits->max_pages);
    }
    if (p.writes > MSG_WRITES_MESSAGES || p.aux_slot < -1) {
        return msg_bad(why, why_len, "PREALLOC has writes=%u aux_slot=%lld", p.writes,
                       (long long)p.aux_slot);
    }
    if (p.verify > 2 || (p.verify == 1 && p.verify_rate == 0)) {
        return msg_bad(why, why_len, "PREALLOC asks for verify=%u at a rate of 1 in %u", p.verify,
                       p.verify_rate);
    }
    if (body_len != sizeof(p) + (p.writes ? (size_t)p.npages * sizeof(uint32_t) : 0)) {
        return msg_bad(why, why_len, "PREALLOC of %u pages has a body of %zu bytes", p.npages,
                       body_len);
    }
    for (uint32_t i = 0; i < p.npages && p.writes; i++) {
        uint32_t page;

        memcpy(&page, body + sizeof(p) + (size_t)i * sizeof(page), sizeof(page));
        if (page >= limits->max_pages) {
            return msg_bad(why, why_len, "PREALLOC grants page %u; no pool has %zu pages", page,
                           (size_t)page + 1);
        }
    }
    *p_out = p;
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
    case MSG_TP_BREAK:
        return sizeof(msg_failure_t);
    case MSG_AGREED:
        return sizeof(msg_agreed_t);
    case MSG_DATA:
    case MSG_AUX:
        return sizeof(msg_data_t);
    default:
        return 0;
    }
}

kvx_status_t msg_decode(const void *buf, size_t len, const msg_limits_t *limits, msg_t *msg,
                        char *why, size_t why_len)
{
    const char *body = (const char *)buf + sizeof(msg_hdr_t);
    msg_t m;

    if (buf == NULL || len < sizeof(msg_hdr_t)) {
        return msg_bad(why, why_len, "message of %zu bytes is shorter than a header", len);
    }
    memset(&m, 0, sizeof(m));
    memcpy(&m.hdr, buf, sizeof(m.hdr));
    if (m.hdr.magic != MSG_MAGIC) {
        return msg_bad(why, why_len, "bad magic 0x%08x", m.hdr.magic);
    }
    if (m.hdr.version != MSG_VERSION) {
        return msg_bad(why, why_len, "protocol version %u, this kvx speaks %u", m.hdr.version,
                       MSG_VERSION);
    }
    if (m.hdr.type == 0 || m.hdr.type >= MSG_TYPE_MAX) {
        return msg_bad(why, why_len, "unknown message type %u", m.hdr.type);
    }
    if (m.hdr.length != len) {
        return msg_bad(why, why_len, "%s says %u bytes but %zu arrived", msg_type_name(m.hdr.type),
                       m.hdr.length, len);
    }
    if (m.hdr.src_rank < 0 || m.hdr.src_rank >= limits->world_size) {
        return msg_bad(why, why_len, "%s from rank %d, outside the world of %d",
                       msg_type_name(m.hdr.type), m.hdr.src_rank, limits->world_size);
    }
    if (len < sizeof(msg_hdr_t) + msg_body_len(m.hdr.type) ||
        (m.hdr.type != MSG_PREALLOC && m.hdr.type != MSG_AGREED && m.hdr.type != MSG_DONE &&
         len != sizeof(msg_hdr_t) + msg_body_len(m.hdr.type))) {
        return msg_bad(why, why_len, "%s of %zu bytes, expected %zu", msg_type_name(m.hdr.type),
                       len, sizeof(msg_hdr_t) + msg_body_len(m.hdr.type));
    }
    switch (m.hdr.type) {
    case MSG_PREALLOC:
        if (msg_decode_prealloc(body, len - sizeof(msg_hdr_t), limits, &m.u.prealloc, why,
                                why_len) != KVX_OK) {
            return KVX_ERR_PROTOCOL;
        }
        m.pages = body + sizeof(msg_prealloc_t);
        break;
    case MSG_DONE:
        memcpy(&m.u.done, body, sizeof(m.u.done));
        if (m.u.done.verify > 2 || m.u.done.has_aux > 1 || m.u.done.reserved != 0 ||
            m.u.done.ndigests > MSG_DIGESTS_MAX ||
            len != sizeof(msg_hdr_t) + sizeof(msg_done_t) +
                       (size_t)m.u.done.ndigests * sizeof(uint64_t)) {
            return msg_bad(why, why_len, "DONE of %zu bytes with verify=%u, %u digests, has_aux=%u",
                           len, m.u.done.verify, m.u.done.ndigests, m.u.done.has_aux);
        }
        m.digests = body + sizeof(msg_done_t);
        break;
    case MSG_DATA:
        memcpy(&m.u.data, body, sizeof(m.u.data));
        if (m.u.data.npages == 0 || m.u.data.npages > limits->max_pages ||
            m.u.data.pos > limits->max_pages - m.u.data.npages) {
            return msg_bad(why, why_len, "DATA for pages [%u, +%u) of a pool of %zu", m.u.data.pos,
                           m.u.data.npages, limits->max_pages);
        }
        break;
    case MSG_AUX:
        memcpy(&m.u.data, body, sizeof(m.u.data));
        if (m.u.data.layer != 0 || m.u.data.comp != 0 || m.u.data.pos != 0 ||
            m.u.data.npages != 0) {
            return msg_bad(why, why_len, "AUX with layer %u comp %u pages [%u, +%u): must be 0",
                           m.u.data.layer, m.u.data.comp, m.u.data.pos, m.u.data.npages);
        }
        break;
    case MSG_AGREED:
        memcpy(&m.u.agreed, body, sizeof(m.u.agreed));
        if (m.u.agreed.count == 0 || m.u.agreed.count > MSG_AGREED_MAX ||
            m.u.agreed.reserved != 0 ||
            len != sizeof(msg_hdr_t) + sizeof(msg_agreed_t) +
                       (size_t)m.u.agreed.count * sizeof(msg_agreed_room_t)) {
            return msg_bad(why, why_len, "AGREED of %zu bytes naming %u rooms (reserved %u)", len,
                           m.u.agreed.count, m.u.agreed.reserved);
        }
        m.rooms = body + sizeof(msg_agreed_t);
        break;
    case MSG_FAIL:
    case MSG_VERDICT:
    case MSG_TP_BREAK:
        if (msg_decode_failure(body, limits, &m.u.failure, why, why_len) != KVX_OK) {
            return KVX_ERR_PROTOCOL;
        }
        break;
    default:
        break;
    }
    /* Nothing reaches the caller before every check passed. */
    *msg = m;
    return KVX_OK;
}
