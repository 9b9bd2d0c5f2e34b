/*
 * log.c - formatting and writing log lines.
 */
#include "config.h"

#include "log.h"
#include "ident.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

int kvx_log_level_current = KVX_LOG_WARN;

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *log_stream; /* NULL means stderr */

const char *log_level_name(int level)
{
    static const char *const names[] = { "error", "warn", "info", "debug", "trace" };

    if (level < 0 || level > KVX_LOG_TRACE) {
        return "?";
    }
    return names[level];
}

void log_expand_pattern(const char *pattern, char *out, size_t len)
{
    const kvx_ident_t *me = ident_get();
    size_t o = 0;

    out[0] = '\0';
    for (const char *p = pattern; *p != '\0' && o + 1 < len; p++) {
        char piece[80] = { *p, '\0' };

        if (p[0] == '%' && p[1] == 'h') {
            snprintf(piece, sizeof(piece), "%s", me->host);
            p++;
        } else if (p[0] == '%' && p[1] == 'p') {
            snprintf(piece, sizeof(piece), "%d", me->pid);
            p++;
        } else if (p[0] == '%' && p[1] == 'r') {
            /* Before the rank is known (no launcher variable) the file is
             * named with an x, so that it is still one file per process. */
            if (me->rank >= 0) {
                snprintf(piece, sizeof(piece), "%d", me->rank);
            } else {
                snprintf(piece, sizeof(piece), "x%d", me->pid);
            }
            p++;
        }
        o += (size_t)snprintf(out + o, len - o, "%s", piece);
    }
    out[o < len ? o : len - 1] = '\0';
}

void log_configure(int level, const char *file_pattern)
{
    FILE *stream = NULL;

    if (file_pattern != NULL && file_pattern[0] != '\0') {
        char path[4096];

        log_expand_pattern(file_pattern, path, sizeof(path));
        stream = fopen(path, "a");
        if (stream == NULL) {
            fprintf(stderr, "kvx: cannot open KVX_LOG_FILE %s; logging to stderr\n", path);
        } else {
            setvbuf(stream, NULL, _IOLBF, 0);
        }
    }
    pthread_mutex_lock(&log_lock);
    if (log_stream != NULL) {
        fclose(log_stream);
    }
    log_stream = stream;
    kvx_log_level_current = level;
    pthread_mutex_unlock(&log_lock);
}

static size_t log_prefix(char *buf, size_t len, int level)
{
    const kvx_ident_t *me = ident_get();
    struct timeval tv;
    struct tm tm;
    char who[96] = "";
    size_t n;

    gettimeofday(&tv, NULL);
    localtime_r(&tv.tv_sec, &tm);
    n = strftime(buf, len, "[%Y-%m-%dT%H:%M:%S", &tm);
    if (me->role != KVX_ROLE_NONE) {
        snprintf(who, sizeof(who), " %s[%d].tp%d", kvx_role_name(me->role), me->instance,
                 me->tp_rank);
    }
    if (me->rank >= 0) {
        n += (size_t)snprintf(buf + n, len - n, ".%06ld %s:%d r%d%s] %s ", (long)tv.tv_usec,
                              me->host, me->pid, me->rank, who, log_level_name(level));
    } else {
        n += (size_t)snprintf(buf + n, len - n, ".%06ld %s:%d r?%s] %s ", (long)tv.tv_usec,
                              me->host, me->pid, who, log_level_name(level));
    }
    return n < len ? n : len - 1;
}

void log_emit(int level, int has_room, uint64_t room, const char *file, int line, const char *fmt,
              ...)
{
    char buf[2048];
    size_t n = log_prefix(buf, sizeof(buf), level);
    va_list ap;

    if (has_room) {
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "room %llu: ", (unsigned long long)room);
    }
    va_start(ap, fmt);
    if (n < sizeof(buf)) {
        n += (size_t)vsnprintf(buf + n, sizeof(buf) - n, fmt, ap);
    }
    va_end(ap);
    if (level >= KVX_LOG_DEBUG && n < sizeof(buf)) {
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, " (%s:%d)", file, line);
    }
    if (n >= sizeof(buf) - 1) {
        n = sizeof(buf) - 2;
    }
    buf[n++] = '\n';
    pthread_mutex_lock(&log_lock);
    fwrite(buf, 1, n, log_stream != NULL ? log_stream : stderr);
    pthread_mutex_unlock(&log_lock);
}
