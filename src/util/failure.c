/*
 * failure.c - the failure record: filling it at its origin, choosing a root
 * cause, formatting it on one line.
 */
#include "config.h"

#include "failure.h"
#include "ident.h"

#include <stdio.h>
#include <string.h>

void failure_vset(kvx_failure_t *f, kvx_status_t status, kvx_stage_t stage, const char *foreign,
                  const char *fmt, va_list ap)
{
    const kvx_ident_t *me = ident_get();

    memset(f, 0, sizeof(*f));
    f->status = status;
    f->stage = stage;
    f->origin_rank = me->rank;
    f->origin_role = me->role;
    f->origin_instance = me->instance;
    f->origin_tp_rank = me->tp_rank;
    if (foreign != NULL) {
        snprintf(f->foreign, sizeof(f->foreign), "%s", foreign);
    }
    vsnprintf(f->text, sizeof(f->text), fmt, ap);
}

void failure_set(kvx_failure_t *f, kvx_status_t status, kvx_stage_t stage, const char *foreign,
                 const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    failure_vset(f, status, stage, foreign, fmt, ap);
    va_end(ap);
}

void failure_set_room(kvx_failure_t *f, uint64_t room_id, kvx_status_t status, kvx_stage_t stage,
                      const char *foreign, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    failure_vset(f, status, stage, foreign, fmt, ap);
    va_end(ap);
    f->room_id = room_id;
    f->has_room = 1;
}

/* The last refusal of each thread: a record per thread, no lock. */
static __thread kvx_failure_t failure_last;

void failure_set_last(const kvx_failure_t *f)
{
    failure_last = *f;
}

void failure_set_last_text(kvx_status_t status, uint64_t room_id, int has_room, const char *fmt,
                           ...)
{
    va_list ap;

    va_start(ap, fmt);
    failure_vset(&failure_last, status, KVX_STAGE_INIT, NULL, fmt, ap);
    va_end(ap);
    failure_last.room_id = room_id;
    failure_last.has_room = has_room;
}

kvx_status_t kvx_last_error(kvx_failure_t *failure_p)
{
    if (failure_p != NULL) {
        *failure_p = failure_last;
    }
    return failure_last.status;
}

void failure_copy(kvx_failure_t *dst, const kvx_failure_t *src)
{
    if (dst != NULL && dst != src) {
        *dst = *src;
    }
}

int failure_compare(const kvx_failure_t *a, const kvx_failure_t *b)
{
    if (a->stage != b->stage) {
        return a->stage < b->stage ? -1 : 1;
    }
    if (a->origin_rank != b->origin_rank) {
        return a->origin_rank < b->origin_rank ? -1 : 1;
    }
    return 0;
}

int kvx_failure_format(const kvx_failure_t *f, char *buf, size_t len)
{
    char origin[96], head[160], tail[64] = "";

    if (f == NULL) {
        return snprintf(buf, len, "(no failure)");
    }
    ident_format(origin, sizeof(origin), f->origin_rank, f->origin_role, f->origin_instance,
                 f->origin_tp_rank);
    if (f->has_room) {
        snprintf(head, sizeof(head), "room %llu FAILED", (unsigned long long)f->room_id);
    } else {
        snprintf(head, sizeof(head), "%s", kvx_status_name(f->status));
    }
    if (f->count > 1) {
        snprintf(tail, sizeof(tail), " (%u ranks failed it)", f->count);
    }
    return snprintf(buf, len, "%s at %s on %s: %.*s%s%.*s%s%s", head, kvx_stage_name(f->stage),
                    origin, (int)sizeof(f->text), f->text, f->foreign[0] ? ": " : "",
                    (int)sizeof(f->foreign), f->foreign,
                    (f->flags & KVX_FAILURE_INJECTED) ? " [injected]" : "", tail);
}
