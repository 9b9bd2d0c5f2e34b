/*
 * log.h - kvx's logger. Library code prints only through these macros.
 *
 * A line reads
 *   [2026-11-29T15:28:29.123456 host:pid r5 prefill[0].tp1] WARN room 42: text
 * so that logs of many ranks can be merged and grepped by room. A level that
 * is off costs one integer compare: the arguments are not even evaluated.
 */
#ifndef KVX_UTIL_LOG_H
#define KVX_UTIL_LOG_H

#include <stddef.h>
#include <stdint.h>

typedef enum kvx_log_level {
    KVX_LOG_ERROR = 0,
    KVX_LOG_WARN,
    KVX_LOG_INFO,
    KVX_LOG_DEBUG,
    KVX_LOG_TRACE
} kvx_log_level_t;

extern int kvx_log_level_current;

#define kvx_log_enabled(level) ((int)(level) <= kvx_log_level_current)

#define kvx_log_(level, has_room, room, ...)                                        \
    do {                                                                            \
        if (kvx_log_enabled(level)) {                                               \
            log_emit((level), (has_room), (room), __FILE__, __LINE__, __VA_ARGS__); \
        }                                                                           \
    } while (0)

#define kvx_error(...) kvx_log_(KVX_LOG_ERROR, 0, 0, __VA_ARGS__)
#define kvx_warn(...)  kvx_log_(KVX_LOG_WARN, 0, 0, __VA_ARGS__)
#define kvx_info(...)  kvx_log_(KVX_LOG_INFO, 0, 0, __VA_ARGS__)
#define kvx_debug(...) kvx_log_(KVX_LOG_DEBUG, 0, 0, __VA_ARGS__)
#define kvx_trace(...) kvx_log_(KVX_LOG_TRACE, 0, 0, __VA_ARGS__)

/* The same, for a line about one room: "room 42: " is added. */
#define kvx_rerror(room, ...) kvx_log_(KVX_LOG_ERROR, 1, (room), __VA_ARGS__)
#define kvx_rwarn(room, ...)  kvx_log_(KVX_LOG_WARN, 1, (room), __VA_ARGS__)
#define kvx_rinfo(room, ...)  kvx_log_(KVX_LOG_INFO, 1, (room), __VA_ARGS__)
#define kvx_rdebug(room, ...) kvx_log_(KVX_LOG_DEBUG, 1, (room), __VA_ARGS__)
#define kvx_rtrace(room, ...) kvx_log_(KVX_LOG_TRACE, 1, (room), __VA_ARGS__)

void log_emit(int level, int has_room, uint64_t room, const char *file, int line, const char *fmt,
              ...) __attribute__((format(printf, 6, 7)));

/* Sets the level and the destination: file_pattern NULL or "" means stderr;
 * %h, %p and %r in it become host, pid and world rank. */
void log_configure(int level, const char *file_pattern);

/* Expands a KVX_LOG_FILE pattern (exposed for tests). */
void log_expand_pattern(const char *pattern, char *out, size_t len);

/* "error", "warn", ... */
const char *log_level_name(int level);

#endif
