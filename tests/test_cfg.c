/*
 * test_cfg.c - parsing of every configuration type, malformed values, and
 * the unknown-variable warning.
 */
#include <criterion/criterion.h>
#include <kvx.h>
#include <string.h>

#include "util/cfg.h"
#include "util/log.h"

static char why[256];

Test(cfg_int, accepts_decimal_hex_and_range)
{
    long long v = -1;

    cr_expect_eq(cfg_parse_int("42", 0, 100, &v, why, sizeof(why)), KVX_OK);
    cr_expect_eq(v, 42);
    cr_expect_eq(cfg_parse_int("0x10", 0, 100, &v, why, sizeof(why)), KVX_OK);
    cr_expect_eq(v, 16);
    cr_expect_eq(cfg_parse_int("-3", -5, 5, &v, why, sizeof(why)), KVX_OK);
    cr_expect_eq(v, -3);
}

Test(cfg_int, rejects_junk_range_and_empty_without_touching_output)
{
    const char *bad[] = { "", "12x", "abc", "101", "-1", " 5", "5 ", "99999999999999999999" };
    long long v = 7;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_expect_eq(cfg_parse_int(bad[i], 0, 100, &v, why, sizeof(why)), KVX_ERR_CONFIG, "%s",
                     bad[i]);
        cr_expect_str_eq(why, "an integer from 0 to 100");
    }
    cr_expect_eq(v, 7);
}

Test(cfg_size, units_are_powers_of_1024)
{
    struct {
        const char *s;
        uint64_t v;
    } good[] = { { "4096", 4096 },         { "64k", 65536 },     { "64K", 65536 },
                 { "2M", 2u << 20 },       { "2MiB", 2u << 20 }, { "1G", 1ull << 30 },
                 { "1.5GiB", 3ull << 29 }, { "1t", 1ull << 40 }, { "0", 0 },
                 { "512b", 512 } };

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        uint64_t v = 1;

        cr_expect_eq(cfg_parse_size(good[i].s, &v, why, sizeof(why)), KVX_OK, "%s", good[i].s);
        cr_expect_eq(v, good[i].v, "%s -> %llu", good[i].s, (unsigned long long)v);
    }
}

Test(cfg_size, rejects_malformed)
{
    const char *bad[] = { "", "k", "-1", "12q", "1.2.3", "64 k", "1e400", "inf", "nan" };
    uint64_t v = 9;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_expect_eq(cfg_parse_size(bad[i], &v, why, sizeof(why)), KVX_ERR_CONFIG, "%s", bad[i]);
        cr_expect(strstr(why, "64k") != NULL);
    }
    cr_expect_eq(v, 9);
}

Test(cfg_time, units_and_bare_seconds)
{
    struct {
        const char *s;
        uint64_t ns;
    } good[] = { { "300", 300000000000ull },
                 { "300s", 300000000000ull },
                 { "500ms", 500000000ull },
                 { "250us", 250000ull },
                 { "1.5s", 1500000000ull },
                 { "2m", 120000000000ull },
                 { "10ns", 10 },
                 { "0", 0 } };

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        uint64_t ns = 1;

        cr_expect_eq(cfg_parse_time(good[i].s, &ns, why, sizeof(why)), KVX_OK, "%s", good[i].s);
        cr_expect_eq(ns, good[i].ns, "%s", good[i].s);
    }
}

Test(cfg_time, rejects_malformed)
{
    const char *bad[] = { "", "s", "5 s", "5h", "-2s", "abc", "1..5s" };
    uint64_t ns = 3;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_expect_eq(cfg_parse_time(bad[i], &ns, why, sizeof(why)), KVX_ERR_CONFIG, "%s", bad[i]);
        cr_expect(strstr(why, "500ms") != NULL);
    }
    cr_expect_eq(ns, 3);
}

Test(cfg_bool, all_spellings)
{
    const char *yes[] = { "1", "y", "YES", "true", "On" };
    const char *no[] = { "0", "n", "no", "FALSE", "off" };
    int b;

    for (size_t i = 0; i < 5; i++) {
        b = 0;
        cr_expect_eq(cfg_parse_bool(yes[i], &b, why, sizeof(why)), KVX_OK);
        cr_expect_eq(b, 1, "%s", yes[i]);
        b = 1;
        cr_expect_eq(cfg_parse_bool(no[i], &b, why, sizeof(why)), KVX_OK);
        cr_expect_eq(b, 0, "%s", no[i]);
    }
    cr_expect_eq(cfg_parse_bool("maybe", &b, why, sizeof(why)), KVX_ERR_CONFIG);
    cr_expect_eq(cfg_parse_bool("", &b, why, sizeof(why)), KVX_ERR_CONFIG);
    cr_expect(strstr(why, "yes/no") != NULL);
}

Test(cfg_enum, case_insensitive_and_lists_choices)
{
    static const char *const values[] = { "none", "cpu", "cpu+mem", NULL };
    int v = -1;

    cr_expect_eq(cfg_parse_enum("CPU+mem", values, &v, why, sizeof(why)), KVX_OK);
    cr_expect_eq(v, 2);
    cr_expect_eq(cfg_parse_enum("gpu", values, &v, why, sizeof(why)), KVX_ERR_CONFIG);
    cr_expect_str_eq(why, "one of none|cpu|cpu+mem");
    cr_expect_eq(v, 2);
}

Test(cfg_list, items_and_malformed)
{
    cfg_list_t l;
    const char *bad[] = { ",", "a,", ",a", "a,,b" };

    cr_expect_eq(cfg_parse_list("mlx5_0:1,mlx5_1:1,eth0", &l, why, sizeof(why)), KVX_OK);
    cr_assert_eq(l.count, 3);
    cr_expect_str_eq(l.items[0], "mlx5_0:1");
    cr_expect_str_eq(l.items[2], "eth0");
    cfg_list_free(&l);
    cr_expect_eq(cfg_parse_list("", &l, why, sizeof(why)), KVX_OK);
    cr_expect_eq(l.count, 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_expect_eq(cfg_parse_list(bad[i], &l, why, sizeof(why)), KVX_ERR_CONFIG, "%s", bad[i]);
    }
}

Test(cfg_load, defaults_parse_with_their_own_parsers)
{
    char *env[] = { NULL };
    kvx_cfg_t cfg;

    cr_assert_eq(cfg_load(&cfg, env, NULL, NULL, NULL), KVX_OK);
    cr_expect_eq(cfg.log_level, KVX_LOG_WARN);
    cr_expect_str_eq(cfg.log_file, "");
    cfg_cleanup(&cfg);
}

Test(cfg_load, environment_overrides_defaults)
{
    char *env[] = { "KVX_LOG_LEVEL=debug", "KVX_LOG_FILE=/tmp/kvx.%r.log", "PATH=/bin", NULL };
    kvx_cfg_t cfg;

    cr_assert_eq(cfg_load(&cfg, env, NULL, NULL, NULL), KVX_OK);
    cr_expect_eq(cfg.log_level, KVX_LOG_DEBUG);
    cr_expect_str_eq(cfg.log_file, "/tmp/kvx.%r.log");
    cfg_cleanup(&cfg);
}

Test(cfg_load, malformed_value_names_variable_and_accepted_form)
{
    char *env[] = { "KVX_LOG_LEVEL=loud", NULL };
    kvx_cfg_t cfg;
    kvx_failure_t why_f;
    char line[512];

    cr_assert_eq(cfg_load(&cfg, env, NULL, NULL, &why_f), KVX_ERR_CONFIG);
    cr_expect_eq(why_f.status, KVX_ERR_CONFIG);
    cr_expect_eq(why_f.stage, KVX_STAGE_INIT);
    cr_expect_str_eq(
        why_f.text,
        "KVX_LOG_LEVEL='loud' is not valid: expected one of error|warn|info|debug|trace");
    kvx_failure_format(&why_f, line, sizeof(line));
    cr_expect(strstr(line, "KVX_ERR_CONFIG at init") == line, "%s", line);
}

typedef struct warned {
    int n;
    char name[64], nearest[64];
} warned_t;

static void record_warning(const char *name, const char *nearest, void *arg)
{
    warned_t *w = arg;

    w->n++;
    snprintf(w->name, sizeof(w->name), "%s", name);
    snprintf(w->nearest, sizeof(w->nearest), "%s", nearest);
}

Test(cfg_load, unknown_variable_is_warned_with_nearest_name)
{
    char *env[] = { "KVX_LOG_LEVL=info", "KVXT_RUN_ID=x", "XKVX_FOO=1", NULL };
    kvx_cfg_t cfg;
    warned_t w = { 0 };

    cr_assert_eq(cfg_load(&cfg, env, record_warning, &w, NULL), KVX_OK);
    cr_expect_eq(w.n, 1);
    cr_expect_str_eq(w.name, "KVX_LOG_LEVL");
    cr_expect_str_eq(w.nearest, "KVX_LOG_LEVEL");
    cr_expect_eq(cfg.log_level, KVX_LOG_WARN, "a misspelled name must not be applied");
    cfg_cleanup(&cfg);
}

Test(cfg_public, every_row_is_listed_with_help_and_accepted_form)
{
    size_t n = kvx_config_count();
    kvx_config_var_t var;

    cr_assert_gt(n, 0);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(kvx_config_var(i, &var), KVX_OK);
        cr_expect_eq(strncmp(var.name, "KVX_", 4), 0);
        cr_expect_gt(strlen(var.help), 10);
        cr_expect_gt(strlen(var.accepted), 2);
        cr_expect_str_eq(cfg_nearest(var.name), var.name);
    }
    cr_expect_eq(kvx_config_var(n, &var), KVX_ERR_INVALID_PARAM);
    cr_expect_eq(kvx_config_var(0, NULL), KVX_ERR_INVALID_PARAM);
}
