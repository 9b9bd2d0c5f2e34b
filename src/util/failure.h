/*
 * failure.h - recording failure records (kvx_failure_t) at their origin.
 */
#ifndef KVX_UTIL_FAILURE_H
#define KVX_UTIL_FAILURE_H

#include <kvx.h>

#include <stdarg.h>

/* Fills *f as a failure recorded here, now, by this process: the origin is
 * the process identity. foreign may be NULL; fmt is the sentence. */
void failure_set(kvx_failure_t *f, kvx_status_t status, kvx_stage_t stage, const char *foreign,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void failure_vset(kvx_failure_t *f, kvx_status_t status, kvx_stage_t stage, const char *foreign,
                  const char *fmt, va_list ap);

/* Same, tagged with a room. */
void failure_set_room(kvx_failure_t *f, uint64_t room_id, kvx_status_t status, kvx_stage_t stage,
                      const char *foreign, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* Records why a call of this thread refused (kvx_last_error() reads it). */
void failure_set_last(const kvx_failure_t *f);
/* Same, for a refusal that has no record of its own yet. */
void failure_set_last_text(kvx_status_t status, uint64_t room_id, int has_room, const char *fmt,
                           ...) __attribute__((format(printf, 4, 5)));

/* Copies src to *dst when dst is not NULL (optional reason parameters). */
void failure_copy(kvx_failure_t *dst, const kvx_failure_t *src);

/* Root-cause order: earlier stage first, then lower origin rank. Returns <0
 * when a should be chosen over b. */
int failure_compare(const kvx_failure_t *a, const kvx_failure_t *b);

#endif
