/*
 * msg_check.c - what must hold for any bytes a peer may send: msg_decode()
 * either refuses them with a reason, or accepts them with every field
 * within its limits, and then the builders of msg.c rebuild the same bytes:
 * the decoder neither dropped nor invented anything.
 */
#include "config.h"

#include "msg_check.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const msg_limits_t msg_check_limits = { MSG_CHECK_WORLD, MSG_CHECK_MAX_PAGES };

static int msg_check_bad(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int msg_check_bad(char *err, size_t err_len, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
    return -1;
}

static int msg_check_failure(const kvx_failure_t *f, char *err, size_t err_len)
{
    if (f->status >= 0 || f->status < KVX_ERR_CORRUPT) {
        return msg_check_bad(err, err_len, "FAIL accepted with status %d", (int)f->status);
    }
    if ((int)f->stage < 0 || f->stage >= KVX_STAGE_COUNT) {
        return msg_check_bad(err, err_len, "FAIL accepted with stage %d", (int)f->stage);
    }
    if ((int)f->origin_role < KVX_ROLE_NONE || f->origin_role > KVX_ROLE_DECODE) {
        return msg_check_bad(err, err_len, "FAIL accepted with role %d", (int)f->origin_role);
    }
    if (strnlen(f->foreign, sizeof(f->foreign)) == sizeof(f->foreign) ||
        strnlen(f->text, sizeof(f->text)) == sizeof(f->text)) {
        return msg_check_bad(err, err_len, "FAIL accepted with an unterminated string");
    }
    if (f->has_room != 0 && f->has_room != 1) {
        return msg_check_bad(err, err_len, "FAIL accepted with has_room %d", f->has_room);
    }
    return 0;
}

/* Every field of an accepted message is within the limits. */
static int msg_check_fields(const msg_t *m, const char *buf, size_t len, char *err, size_t err_len)
{
    const msg_hdr_t *h = &m->hdr;
    size_t want = sizeof(msg_hdr_t);

    if (h->magic != MSG_MAGIC || h->version != MSG_VERSION || h->type == 0 ||
        h->type >= MSG_TYPE_MAX || h->length != len) {
        return msg_check_bad(err, err_len,
                             "accepted a header with magic 0x%08x version %u type %u "
                             "length %u (%zu bytes)",
                             h->magic, h->version, h->type, h->length, len);
    }
    if (h->src_rank < 0 || h->src_rank >= msg_check_limits.world_size) {
        return msg_check_bad(err, err_len, "accepted source rank %d", h->src_rank);
    }
    if (h->type == MSG_PREALLOC) {
        const msg_prealloc_t *p = &m->u.prealloc;

        if (p->npages == 0 || p->npages > msg_check_limits.max_pages ||
            p->writes > MSG_WRITES_MESSAGES || p->aux_slot < -1 || p->verify > 2 ||
            (p->verify == 1 && p->verify_rate == 0)) {
            return msg_check_bad(err, err_len,
                                 "accepted PREALLOC of %u pages, writes=%u, aux %lld, verify=%u "
                                 "(1 in %u)",
                                 p->npages, p->writes, (long long)p->aux_slot, p->verify,
                                 p->verify_rate);
        }
        want += sizeof(*p) + (p->writes ? (size_t)p->npages * sizeof(uint32_t) : 0);
        if (m->pages != buf + sizeof(msg_hdr_t) + sizeof(*p)) {
            return msg_check_bad(err, err_len, "PREALLOC's pages do not follow its body");
        }
    } else if (h->type == MSG_AGREED) {
        const msg_agreed_t *a = &m->u.agreed;

        if (a->count == 0 || a->count > MSG_AGREED_MAX || a->reserved != 0) {
            return msg_check_bad(err, err_len, "accepted AGREED of %u rooms (reserved %u)",
                                 a->count, a->reserved);
        }
        want += sizeof(*a) + (size_t)a->count * sizeof(msg_agreed_room_t);
        if (m->rooms != buf + sizeof(msg_hdr_t) + sizeof(*a)) {
            return msg_check_bad(err, err_len, "AGREED's rooms do not follow its body");
        }
    } else if (h->type == MSG_DONE) {
        const msg_done_t *d = &m->u.done;

        if (d->verify > 2 || d->has_aux > 1 || d->reserved != 0 || d->ndigests > MSG_DIGESTS_MAX) {
            return msg_check_bad(err, err_len, "accepted DONE with verify=%u, %u digests, aux %u",
                                 d->verify, d->ndigests, d->has_aux);
        }
        want += sizeof(msg_done_t) + (size_t)d->ndigests * sizeof(uint64_t);
        if (m->digests != buf + sizeof(msg_hdr_t) + sizeof(*d)) {
            return msg_check_bad(err, err_len, "DONE's digests do not follow its body");
        }
    } else if (h->type == MSG_DATA) {
        want += sizeof(msg_data_t);
    } else if (h->type == MSG_AUX) {
        const msg_data_t *d = &m->u.data;

        want += sizeof(msg_data_t);
        if (d->layer != 0 || d->comp != 0 || d->pos != 0 || d->npages != 0) {
            return msg_check_bad(err, err_len, "accepted AUX with a body that is not zero");
        }
    } else if (h->type == MSG_FAIL || h->type == MSG_VERDICT || h->type == MSG_TP_BREAK) {
        want += sizeof(msg_failure_t);
        if (msg_check_failure(&m->u.failure, err, err_len) != 0) {
            return -1;
        }
    }
    if (want != len) {
        return msg_check_bad(err, err_len, "accepted %s of %zu bytes; its fields say %zu",
                             msg_type_name(h->type), len, want);
    }
    return 0;
}

/* Rebuilds a decoded message with the builder of its type. */
static void *msg_check_rebuild(const msg_t *m, size_t *len_p)
{
    const msg_hdr_t *h = &m->hdr;
    uint32_t *pages;
    void *out;

    switch (h->type) {
    case MSG_PREALLOC:
        /* The pages are unaligned in the buffer: the builder gets a copy. */
        pages = malloc((size_t)m->u.prealloc.npages * sizeof(uint32_t));
        if (pages == NULL) {
            return NULL;
        }
        if (m->u.prealloc.writes) {
            memcpy(pages, m->pages, (size_t)m->u.prealloc.npages * sizeof(uint32_t));
        }
        out = msg_new_prealloc(h->src_rank, h->room, h->nonce, m->u.prealloc.aux_slot,
                               (int)m->u.prealloc.writes, pages, m->u.prealloc.npages, len_p);
        free(pages);
        if (out != NULL) {
            msg_prealloc_verify(out, m->u.prealloc.verify, m->u.prealloc.verify_rate);
        }
        return out;
    case MSG_DONE: {
        /* The digests are unaligned in the buffer: the builder gets a copy. */
        uint64_t *digests = malloc(((size_t)m->u.done.ndigests + 1) * sizeof(uint64_t));

        if (digests == NULL) {
            return NULL;
        }
        memcpy(digests, m->digests, (size_t)m->u.done.ndigests * sizeof(uint64_t));
        out = msg_new_done_digests(h->src_rank, h->room, h->nonce, &m->u.done, digests,
                                   m->u.done.ndigests, len_p);
        free(digests);
        return out;
    }
    case MSG_AGREED: {
        /* The rooms are unaligned in the buffer: the builder gets a copy. */
        msg_agreed_room_t *rooms = malloc((size_t)m->u.agreed.count * sizeof(*rooms));

        if (rooms == NULL) {
            return NULL;
        }
        memcpy(rooms, m->rooms, (size_t)m->u.agreed.count * sizeof(*rooms));
        out = msg_new_agreed(h->src_rank, rooms, m->u.agreed.count, len_p);
        free(rooms);
        if (out != NULL) {
            /* The builder writes room and nonce 0 in the header; keep the
             * sender's (the decoder ignores them). */
            memcpy((char *)out + offsetof(msg_hdr_t, room), &h->room, sizeof(h->room));
            memcpy((char *)out + offsetof(msg_hdr_t, nonce), &h->nonce, sizeof(h->nonce));
        }
        return out;
    }
    case MSG_FAIL:
    case MSG_VERDICT:
    case MSG_TP_BREAK:
        return msg_new_failure((msg_type_t)h->type, h->src_rank, h->room, h->nonce, &m->u.failure,
                               len_p);
    case MSG_DATA:
    case MSG_AUX:
        out = malloc(MSG_DATA_LEN);
        if (out != NULL) {
            msg_put_data(out, (msg_type_t)h->type, h->src_rank, h->room, h->nonce, &m->u.data);
            *len_p = MSG_DATA_LEN;
        }
        return out;
    default:
        return msg_new((msg_type_t)h->type, h->src_rank, h->room, h->nonce, len_p);
    }
}

/* The decoder keeps every byte of a FAIL or VERDICT but its padding. */
static void msg_check_normalize(char *buf, size_t len)
{
    msg_failure_t w;

    if (len != sizeof(msg_hdr_t) + sizeof(w)) {
        return;
    }
    memcpy(&w, buf + sizeof(msg_hdr_t), sizeof(w));
    w.pad = 0;
    memcpy(buf + sizeof(msg_hdr_t), &w, sizeof(w));
}

static int msg_check_round_trip(const msg_t *m, const void *buf, size_t len, char *err,
                                size_t err_len)
{
    size_t rlen = 0;
    char *rebuilt = msg_check_rebuild(m, &rlen);
    char *want;
    int rc = 0;

    if (rebuilt == NULL) {
        return msg_check_bad(err, err_len, "no memory to rebuild a %s", msg_type_name(m->hdr.type));
    }
    want = malloc(len);
    if (want == NULL) {
        free(rebuilt);
        return msg_check_bad(err, err_len, "no memory");
    }
    memcpy(want, buf, len);
    if (m->hdr.type == MSG_FAIL || m->hdr.type == MSG_VERDICT || m->hdr.type == MSG_TP_BREAK) {
        msg_check_normalize(want, len);
    }
    if (rlen != len) {
        rc = msg_check_bad(err, err_len, "%s of %zu bytes rebuilt as %zu bytes",
                           msg_type_name(m->hdr.type), len, rlen);
    } else {
        for (size_t i = 0; i < len && rc == 0; i++) {
            if (want[i] != rebuilt[i]) {
                rc = msg_check_bad(err, err_len, "%s of %zu bytes rebuilt differently at byte %zu",
                                   msg_type_name(m->hdr.type), len, i);
            }
        }
    }
    free(want);
    free(rebuilt);
    return rc;
}

int msg_check(const void *buf, size_t len, unsigned *type_p, char *err, size_t err_len)
{
    char why[256];
    msg_t m;
    kvx_status_t status;

    memset(&m, 0, sizeof(m));
    memset(why, 0x55, sizeof(why));
    status = msg_decode(buf, len, &msg_check_limits, &m, why, sizeof(why));
    if (status != KVX_OK) {
        if (status != KVX_ERR_PROTOCOL) {
            return msg_check_bad(err, err_len, "refused with status %d, not KVX_ERR_PROTOCOL",
                                 (int)status);
        }
        if (memchr(why, '\0', sizeof(why)) == NULL || why[0] == '\0') {
            return msg_check_bad(err, err_len, "refused without a terminated reason");
        }
        return 0;
    }
    if (msg_check_fields(&m, buf, len, err, err_len) != 0 ||
        msg_check_round_trip(&m, buf, len, err, err_len) != 0) {
        return -1;
    }
    if (type_p != NULL) {
        *type_p = m.hdr.type;
    }
    return 1;
}
