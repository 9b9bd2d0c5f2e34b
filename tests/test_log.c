/*
 * test_log.c - the logger: line format, file patterns, and that a disabled
 * level costs no formatting.
 */
#include <criterion/criterion.h>
#include <kvx.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/ident.h"
#include "util/log.h"

static int evaluated;

static const char *side_effect(void)
{
    evaluated++;
    return "x";
}

Test(log, disabled_level_does_not_evaluate_arguments)
{
    log_configure(KVX_LOG_WARN, NULL);
    evaluated = 0;
    kvx_debug("%s", side_effect());
    kvx_trace("%s", side_effect());
    kvx_rinfo(7, "%s", side_effect());
    cr_expect_eq(evaluated, 0);
}

Test(log, pattern_substitutes_host_pid_rank)
{
    char out[256], expect[256];
    const kvx_ident_t *me;

    ident_set_rank(12);
    me = ident_get();
    log_expand_pattern("/tmp/kvx-%h-%p-%r.log", out, sizeof(out));
    snprintf(expect, sizeof(expect), "/tmp/kvx-%s-%d-12.log", me->host, me->pid);
    cr_expect_str_eq(out, expect);
    log_expand_pattern("100%", out, sizeof(out));
    cr_expect_str_eq(out, "100%");
    log_expand_pattern("%h%h%h%h%h%h", out, 8);
    cr_expect_eq(strlen(out), 7);
}

static char *read_file(const char *path)
{
    static char buf[8192];
    FILE *f = fopen(path, "r");
    size_t n;

    cr_assert_not_null(f);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

Test(log, line_carries_time_host_pid_rank_role_level_room)
{
    char path[] = "/tmp/kvx-test-log-XXXXXX";
    int fd = mkstemp(path);
    regex_t re;
    char pattern[512];
    const kvx_ident_t *me;
    char *text;

    cr_assert_geq(fd, 0);
    close(fd);
    ident_set_rank(5);
    ident_set_role(KVX_ROLE_PREFILL, 1, 3, 4);
    me = ident_get();
    log_configure(KVX_LOG_INFO, path);
    kvx_rwarn(42, "page %d out of range", 900);
    kvx_info("plain line");
    kvx_debug("not written");
    log_configure(KVX_LOG_WARN, NULL);
    text = read_file(path);
    unlink(path);

    snprintf(pattern, sizeof(pattern),
             "^\\[[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6} %s:%d r5 "
             "prefill\\[1\\]\\.tp3\\] warn room 42: page 900 out of range\n"
             "\\[[^\n]* r5 prefill\\[1\\]\\.tp3\\] info plain line\n$",
             me->host, me->pid);
    cr_assert_eq(regcomp(&re, pattern, REG_EXTENDED), 0);
    cr_expect_eq(regexec(&re, text, 0, NULL, 0), 0, "log was:\n%s", text);
    regfree(&re);
}
