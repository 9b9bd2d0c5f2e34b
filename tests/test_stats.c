/*
 * test_stats.c - histogram bucketing, the Prometheus text of a context's
 * counters (exact lines, and tests/check-prom.py's verdict on it), and the
 * atomic write of a metrics file.
 */
#include <criterion/criterion.h>
#include <kvx.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/ctx/stats.h"

#define LABELS "role=\"prefill\",instance=\"0\",tp=\"1\",rank=\"1\",host=\"h\\\"x\""

Test(stats, buckets_ascend_and_end_unbounded)
{
    for (unsigned i = 1; i < KVX_STATS_BUCKETS; i++) {
        cr_expect_gt(kvx_stats_bucket_bound(i), kvx_stats_bucket_bound(i - 1), "bucket %u", i);
    }
    cr_expect_eq(kvx_stats_bucket_bound(0), 1e-4);
    cr_expect(isinf(kvx_stats_bucket_bound(KVX_STATS_BUCKETS - 1)));
    cr_expect_eq(kvx_stats_bucket_bound(KVX_STATS_BUCKETS), -1);
}

Test(stats, observations_land_in_their_bucket)
{
    kvx_histogram_t h;

    memset(&h, 0, sizeof(h));
    stats_hist_add(&h, 1e-4);      /* on a bound: that bucket (le is <=) */
    stats_hist_add(&h, 1.0001e-4); /* just above: the next */
    stats_hist_add(&h, 60);        /* the last finite bound */
    stats_hist_add(&h, 61);        /* +Inf */
    stats_hist_add(&h, -1);        /* a clock step: instant */
    stats_hist_add(&h, NAN);
    cr_expect_eq(h.bucket[0], 3);
    cr_expect_eq(h.bucket[1], 1);
    cr_expect_eq(h.bucket[KVX_STATS_BUCKETS - 2], 1);
    cr_expect_eq(h.bucket[KVX_STATS_BUCKETS - 1], 1);
    cr_expect_eq(h.count, 6);
    cr_expect_float_eq(h.sum, 1e-4 + 1.0001e-4 + 60 + 61, 1e-9);
}

Test(stats, status_dimension_covers_every_error)
{
    /* The most negative status of the table has its own index. */
    int lowest = 0;
#define LOWEST_(name, value, msg) lowest = value < lowest ? value : lowest;
    KVX_STATUS_MAP(LOWEST_)
#undef LOWEST_
    cr_expect_eq(KVX_STATS_STATUSES, -lowest + 1);
    cr_expect_eq(KVX_STATS_STATUSES, -KVX_ERR_CORRUPT + 1);
}

/* A snapshot with something in every part, and its text. */
static char *sample_text(size_t *len_p)
{
    static kvx_stats_t s;
    kvx_health_t h;
    char labels[256];
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    memset(&s, 0, sizeof(s));
    memset(&h, 0, sizeof(h));
    s.rooms_opened = 5;
    s.rooms_closed = 4;
    s.rooms_succeeded = 3;
    s.rooms_failed = 2;
    s.failures[KVX_STAGE_POST][KVX_ROLE_PREFILL][-KVX_ERR_INJECTED] = 2;
    s.bytes[KVX_XFER_PUT] = 4096;
    s.ops[KVX_XFER_PUT] = 2;
    stats_hist_add(&s.room_success_seconds, 0.0002);
    stats_hist_add(&s.room_success_seconds, 0.003);
    stats_hist_add(&s.room_success_seconds, 2);
    h.verdict = KVX_HEALTH_DEGRADED;
    h.reasons = KVX_HEALTH_PEER_LOST;
    h.peers_lost = 1;
    stats_prom_labels(labels, sizeof(labels), KVX_ROLE_PREFILL, 0, 1, 1, "h\"x");
    cr_assert_str_eq(labels, LABELS);
    stats_prom_write(f, &s, &h, labels, 5, 1700000000.5);
    cr_assert_eq(fclose(f), 0);
    *len_p = len;
    return text;
}

Test(stats, text_holds_the_counters)
{
    size_t len;
    char *t = sample_text(&len);
    static const char *const want[] = {
        "# HELP kvx_rooms_opened_total ",
        "# TYPE kvx_rooms_opened_total counter\n",
        "kvx_rooms_opened_total{" LABELS "} 5\n",
        "kvx_rooms_open{" LABELS "} 1\n",
        "kvx_room_outcomes_total{" LABELS
        ",outcome=\"success\",status=\"KVX_OK\",stage=\"none\",origin_role=\"none\"} 3\n",
        "kvx_room_outcomes_total{" LABELS
        ",outcome=\"failed\",status=\"KVX_ERR_INJECTED\",stage=\"post\",origin_role=\"prefill\"} "
        "2\n",
        "kvx_transfer_bytes_total{" LABELS ",kind=\"put\"} 4096\n",
        "kvx_transfer_ops_total{" LABELS ",kind=\"put\"} 2\n",
        "kvx_transfer_bytes_total{" LABELS ",kind=\"staged_copy\"} 0\n",
        "kvx_transfer_bytes_total{" LABELS ",kind=\"msg_direct\"} 0\n",
        "# TYPE kvx_room_seconds histogram\n",
        /* cumulative in the text */
        "kvx_room_seconds_bucket{" LABELS ",outcome=\"success\",le=\"0.0001\"} 0\n",
        "kvx_room_seconds_bucket{" LABELS ",outcome=\"success\",le=\"0.00025\"} 1\n",
        "kvx_room_seconds_bucket{" LABELS ",outcome=\"success\",le=\"0.005\"} 2\n",
        "kvx_room_seconds_bucket{" LABELS ",outcome=\"success\",le=\"2.5\"} 3\n",
        "kvx_room_seconds_bucket{" LABELS ",outcome=\"success\",le=\"+Inf\"} 3\n",
        "kvx_room_seconds_count{" LABELS ",outcome=\"success\"} 3\n",
        "kvx_room_seconds_sum{" LABELS ",outcome=\"success\"} 2.0032\n",
        "kvx_room_seconds_count{" LABELS ",outcome=\"failed\"} 0\n",
        "kvx_health{" LABELS "} 1\n",
        "kvx_health_reason{" LABELS ",reason=\"peer_lost\"} 1\n",
        "kvx_health_reason{" LABELS ",reason=\"progress_stalled\"} 0\n",
        "kvx_metrics_interval_seconds{" LABELS "} 5\n",
        "kvx_metrics_timestamp_seconds{" LABELS "} 1700000000.5\n",
    };

    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        cr_expect_not_null(strstr(t, want[i]), "missing: %s", want[i]);
    }
    cr_expect_eq(strlen(t), len);
    free(t);
}

/* Runs tests/check-prom.py on text (with args); its exit status, or -1 when
 * it cannot run. */
static int checker(const char *text, const char *args)
{
    const char *top = getenv("top_srcdir");
    char path[] = "/tmp/test_stats.XXXXXX", cmd[8192];
    int fd, rc;

    if (top == NULL || access("/usr/bin/python3", X_OK) != 0) {
        return -1;
    }
    fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s/tests/check-prom.py %s %s >/dev/null", top,
             args, path);
    rc = system(cmd);
    unlink(path);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 99;
}

Test(stats, text_passes_the_format_checker)
{
    size_t len;
    char *t = sample_text(&len);
    int rc = checker(t, "--labels role,instance,tp,rank,host");

    if (rc == -1) {
        cr_skip_test("no top_srcdir or /usr/bin/python3 to run tests/check-prom.py");
    }
    cr_expect_eq(rc, 0, "tests/check-prom.py refused the text");
    free(t);
}

Test(stats, format_checker_refuses_broken_text)
{
    static const char *const bad[] = {
        /* buckets not cumulative */
        "# HELP x_seconds h\n# TYPE x_seconds histogram\nx_seconds_bucket{le=\"1\"} 2\n"
        "x_seconds_bucket{le=\"+Inf\"} 1\nx_seconds_sum 1\nx_seconds_count 1\n",
        /* +Inf differs from _count */
        "# HELP x_seconds h\n# TYPE x_seconds histogram\nx_seconds_bucket{le=\"+Inf\"} 1\n"
        "x_seconds_sum 1\nx_seconds_count 2\n",
        /* a sample before its TYPE */
        "x_total 1\n# HELP x_total h\n# TYPE x_total counter\n",
        /* bad label syntax */
        "# HELP x_total h\n# TYPE x_total counter\nx_total{a=b} 1\n",
        /* a counter not named _total */
        "# HELP x h\n# TYPE x counter\nx 1\n",
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = checker(bad[i], "");

        if (rc == -1) {
            cr_skip_test("no top_srcdir or /usr/bin/python3 to run tests/check-prom.py");
        }
        cr_expect_eq(rc, 1, "the checker accepted broken text %zu", i);
    }
}

Test(stats, file_is_replaced_atomically)
{
    char dir[] = "/tmp/test_stats_dir.XXXXXX", path[256], buf[64];
    struct stat st;
    DIR *d;
    struct dirent *e;
    int entries = 0;
    FILE *f;

    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/m.prom", dir);
    cr_assert_eq(stats_write_atomic(path, "old\n", 4), 0);
    cr_assert_eq(stats_write_atomic(path, "new text\n", 9), 0);
    f = fopen(path, "r");
    cr_assert_not_null(f);
    cr_expect_str_eq(fgets(buf, sizeof(buf), f), "new text\n");
    fclose(f);
    cr_assert_eq(stat(path, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0644, "a collector running as another user reads it");
    d = opendir(dir);
    while ((e = readdir(d)) != NULL) {
        entries += e->d_name[0] != '.';
    }
    closedir(d);
    cr_expect_eq(entries, 1, "no temporary file is left beside it");
    cr_expect_neq(stats_write_atomic("/nonexistent-dir/m.prom", "x", 1), 0);
    unlink(path);
    rmdir(dir);
}
