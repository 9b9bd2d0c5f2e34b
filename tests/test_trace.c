/*
 * test_trace.c - kvx-demo's trace reader (examples/demo/trace.c): the heads
 * of the two public traces (tests/data/traces/) read as recorded, and every
 * kind of bad input refused with the file, the line and the reason.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "demo.h"

static char err[512];

static const char *data_path(const char *rel)
{
    static char path[4096];
    const char *top = getenv("top_srcdir");

    snprintf(path, sizeof(path), "%s/tests/data/traces/%s", top != NULL ? top : ".", rel);
    return path;
}

/* text in a temporary file, whose path is returned. */
static const char *temp_trace(const char *text)
{
    static char path[64];
    int fd;

    snprintf(path, sizeof(path), "/tmp/kvxt-trace.XXXXXX");
    fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

/* Reads text; returns the reader's status, with the rows in t. */
static int read_text(const char *text, size_t limit, demo_trace_t *t, char *path, size_t len)
{
    const char *p = temp_trace(text);
    int rc;

    memset(t, 0, sizeof(*t));
    snprintf(path, len, "%s", p);
    rc = demo_trace_read(path, limit, t, err, sizeof(err));
    unlink(path);
    return rc;
}

static void expect_refused(const char *text, const char *why)
{
    demo_trace_t t;
    char path[64], want[640];

    cr_expect_eq(read_text(text, 1000, &t, path, sizeof(path)), -1, "accepted: %s", text);
    snprintf(want, sizeof(want), "%s:%s", path, why);
    cr_expect_str_eq(err, want, "for: %s\nsaid: %s", text, err);
    free(t.rows);
}

/* The first rows of the real files, as they are there. */
#define AZURE_HEADER "TIMESTAMP,ContextTokens,GeneratedTokens\n"
#define AZURE_1      "2023-11-16 18:17:03.9799600,4808,10\n"
#define AZURE_2      "2023-11-16 18:17:04.0319600,3180,8\n"
#define MOON_1 \
    "{\"timestamp\": 0, \"input_length\": 40160, \"output_length\": 6, \"hash_ids\": [0]}\n"
#define MOON_2 \
    "{\"timestamp\": 40, \"input_length\": 23769, \"output_length\": 3, \"hash_ids\": [1]}\n"

Test(trace_read, the_azure_head_as_recorded)
{
    demo_trace_t t = { 0 };

    cr_assert_eq(demo_trace_read(data_path("azure-llm-2023-code.head400.csv"), 1000000, &t, err,
                                 sizeof(err)),
                 0, "%s", err);
    cr_expect_eq(t.format, DEMO_TRACE_CSV);
    cr_expect_eq(t.n, 400);
    cr_expect_eq(t.rows[0].t_ms, 0);
    cr_expect_eq(t.rows[0].input, 4808);
    cr_expect_eq(t.rows[0].output, 10);
    cr_expect(fabs(t.rows[1].t_ms - 52.0) < 1e-3, "%f", t.rows[1].t_ms);
    /* 2023-11-16 18:20:49.0860090,5442,11: 225.106049 s after the first */
    cr_expect(fabs(t.rows[399].t_ms - 225106.049) < 1e-3, "%f", t.rows[399].t_ms);
    cr_expect_eq(t.rows[399].input, 5442);
    cr_expect_eq(t.rows[399].output, 11);
    free(t.rows);
}

Test(trace_read, the_mooncake_head_as_recorded_and_the_limit)
{
    demo_trace_t t = { 0 };

    cr_assert_eq(demo_trace_read(data_path("mooncake-synthetic.head400.jsonl"), 1000000, &t, err,
                                 sizeof(err)),
                 0, "%s", err);
    cr_expect_eq(t.format, DEMO_TRACE_JSONL);
    cr_expect_eq(t.n, 400);
    cr_expect_eq(t.rows[2].t_ms, 40);
    cr_expect_eq(t.rows[2].input, 23769);
    cr_expect_eq(t.rows[2].output, 3);
    cr_expect_eq(t.rows[399].t_ms, 109429);
    cr_expect_eq(t.rows[399].input, 26224);
    cr_expect_eq(t.rows[399].output, 526);
    free(t.rows);
    memset(&t, 0, sizeof(t));
    cr_assert_eq(
        demo_trace_read(data_path("mooncake-synthetic.head400.jsonl"), 10, &t, err, sizeof(err)), 0,
        "%s", err);
    cr_expect_eq(t.n, 10);
    free(t.rows);
}

Test(trace_read, tolerates_crlf_bom_blank_lines_and_other_column_orders)
{
    demo_trace_t t;
    char path[64];

    cr_assert_eq(read_text("\xef\xbb\xbfGeneratedTokens, TIMESTAMP ,ContextTokens\r\n"
                           "10,2023-11-16 18:17:03.9799600,4808\r\n\r\n"
                           "8,2023-11-16 18:17:04.0319600,3180\r\n",
                           1000, &t, path, sizeof(path)),
                 0, "%s", err);
    cr_expect_eq(t.n, 2);
    cr_expect_eq(t.rows[1].input, 3180);
    cr_expect_eq(t.rows[1].output, 8);
    cr_expect(fabs(t.rows[1].t_ms - 52.0) < 1e-3);
    free(t.rows);
    cr_assert_eq(read_text("\n" MOON_1 "\n" MOON_2, 1000, &t, path, sizeof(path)), 0, "%s", err);
    cr_expect_eq(t.n, 2);
    free(t.rows);
}

Test(trace_read, refuses_empty_files_and_other_formats)
{
    expect_refused("", "1: no requests: the file is empty");
    expect_refused("\n \n", "2: no requests: nothing but blank lines");
    expect_refused(AZURE_HEADER, "2: no requests after the header");
    expect_refused("TIMESTAMP,ContextTokens\n" AZURE_1,
                   "1: not a trace: neither a JSON object (JSON lines with timestamp, "
                   "input_length, output_length) nor the CSV header "
                   "TIMESTAMP,ContextTokens,GeneratedTokens");
}

Test(trace_read, refuses_malformed_json_lines_naming_the_line)
{
    expect_refused(MOON_1 "{\"timestamp\": 40, \"input_length\": 23769, \"output_le\n",
                   "2: not JSON: premature end of input near '\"output_le' (column 51)");
    expect_refused(MOON_1 "[40, 23769, 3]\n", "2: not a JSON object");
    expect_refused(MOON_1 "{\"timestamp\": 40, \"output_length\": 3}\n",
                   "2: no \"input_length\" (JSON lines need timestamp, input_length, "
                   "output_length)");
    expect_refused(MOON_1 "{\"input_length\": 5, \"output_length\": 3}\n",
                   "2: no \"timestamp\" (JSON lines need timestamp, input_length, output_length)");
    expect_refused(MOON_1 "{\"timestamp\": 40, \"input_length\": 23769, \"output_length\": -3}\n",
                   "2: \"output_length\" is negative (-3)");
    expect_refused("{\"timestamp\": -1, \"input_length\": 5, \"output_length\": 3}\n",
                   "1: \"timestamp\" is negative (-1)");
    expect_refused("{\"timestamp\": \"0\", \"input_length\": 5, \"output_length\": 3}\n",
                   "1: \"timestamp\" is not a number of milliseconds");
    expect_refused(MOON_1 "{\"timestamp\": 40, \"input_length\": 12.5, \"output_length\": 3}\n",
                   "2: \"input_length\" is not a whole number of tokens");
    expect_refused(MOON_1 "{\"timestamp\": 40, \"input_length\": 0, \"output_length\": 3}\n",
                   "2: \"input_length\" is 0, not in [1, 1073741824]");
    expect_refused(MOON_2 MOON_1, "2: timestamp goes back by 40.000 ms from the previous row: a "
                                  "trace must be sorted by arrival");
}

Test(trace_read, refuses_malformed_csv_rows_naming_the_line)
{
    expect_refused(AZURE_HEADER AZURE_1 "2023-11-16 18:17:04.0319600,-3180,8\n",
                   "3: ContextTokens is negative (-3180)");
    expect_refused(AZURE_HEADER AZURE_1 "2023-11-16 18:17:04.0319600,3180,8x\n",
                   "3: GeneratedTokens is not a whole number of tokens: '8x'");
    expect_refused(AZURE_HEADER AZURE_1 "2023-11-16 18:17:04.0319600,3180\n",
                   "3: 2 fields, the header has at least 3");
    expect_refused(AZURE_HEADER "2023-11-16 18:17,4808,10\n",
                   "2: TIMESTAMP is not a time like 2023-11-16 18:17:03.9799600: "
                   "'2023-11-16 18:17'");
    expect_refused(AZURE_HEADER AZURE_2 AZURE_1, "3: timestamp goes back by 52.000 ms from the "
                                                 "previous row: a trace must be sorted by arrival");
}

Test(trace_read, says_when_the_file_cannot_be_opened)
{
    demo_trace_t t = { 0 };

    cr_expect_eq(demo_trace_read("/nonexistent/trace.csv", 10, &t, err, sizeof(err)), -1);
    cr_expect_str_eq(err, "/nonexistent/trace.csv: cannot open: No such file or directory");
}
