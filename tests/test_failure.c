/*
 * test_failure.c - failure records: recording at the origin, the one-line
 * format users read, and the root-cause order.
 */
#include <criterion/criterion.h>
#include <kvx.h>
#include <string.h>

#include "util/failure.h"
#include "util/ident.h"

static kvx_failure_t put_failure(void)
{
    kvx_failure_t f;

    ident_set_rank(5);
    ident_set_role(KVX_ROLE_PREFILL, 0, 2, 4);
    failure_set_room(&f, 42, KVX_ERR_UCX, KVX_STAGE_POST, "Connection reset by remote peer",
                     "put to %s failed", "decode[1].tp0 (rank 9)");
    return f;
}

Test(failure, records_the_origin_of_this_process)
{
    kvx_failure_t f = put_failure();

    cr_expect_eq(f.origin_rank, 5);
    cr_expect_eq(f.origin_role, KVX_ROLE_PREFILL);
    cr_expect_eq(f.origin_instance, 0);
    cr_expect_eq(f.origin_tp_rank, 2);
    cr_expect_eq(f.stage, KVX_STAGE_POST);
    cr_expect_eq(f.status, KVX_ERR_UCX);
    cr_expect_eq(f.room_id, 42);
    cr_expect(f.has_room);
}

Test(failure, formats_on_one_line_as_documented)
{
    kvx_failure_t f = put_failure();
    char line[512];
    int n = kvx_failure_format(&f, line, sizeof(line));

    cr_expect_str_eq(line, "room 42 FAILED at post on prefill[0].tp2 (rank 5): put to "
                           "decode[1].tp0 (rank 9) failed: Connection reset by remote peer");
    cr_expect_eq(n, (int)strlen(line));
    cr_expect_null(strchr(line, '\n'));
}

Test(failure, says_injected_and_how_many_ranks_failed)
{
    kvx_failure_t f = put_failure();
    char line[512];

    f.flags |= KVX_FAILURE_INJECTED;
    f.count = 3;
    f.foreign[0] = '\0';
    kvx_failure_format(&f, line, sizeof(line));
    cr_expect_str_eq(line, "room 42 FAILED at post on prefill[0].tp2 (rank 5): put to "
                           "decode[1].tp0 (rank 9) failed [injected] (3 ranks failed it)");
}

Test(failure, without_room_or_role)
{
    kvx_failure_t f;
    char line[512];

    ident_set_rank(3);
    ident_set_role(KVX_ROLE_NONE, -1, -1, 0);
    failure_set(&f, KVX_ERR_LAYOUT, KVX_STAGE_INIT, NULL, "layout 'prefill:2x2' has 4 ranks");
    kvx_failure_format(&f, line, sizeof(line));
    cr_expect_str_eq(line, "KVX_ERR_LAYOUT at init on rank 3: layout 'prefill:2x2' has 4 ranks");
}

Test(failure, truncates_safely_and_reports_full_length)
{
    kvx_failure_t f = put_failure();
    char full[512], small[16];
    int n = kvx_failure_format(&f, full, sizeof(full));

    cr_expect_eq(kvx_failure_format(&f, small, sizeof(small)), n);
    cr_expect_eq(strlen(small), sizeof(small) - 1);
    cr_expect_eq(strncmp(small, full, sizeof(small) - 1), 0);
    cr_expect_eq(kvx_failure_format(&f, NULL, 0), n);
}

Test(failure, long_text_is_cut_not_overflowed)
{
    kvx_failure_t f;
    char big[1000];

    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    failure_set(&f, KVX_ERR_UCX, KVX_STAGE_POST, big, "%s", big);
    cr_expect_eq(strlen(f.text), sizeof(f.text) - 1);
    cr_expect_eq(strlen(f.foreign), sizeof(f.foreign) - 1);
}

Test(failure, root_cause_is_earliest_stage_then_lowest_rank)
{
    kvx_failure_t a = put_failure(), b = put_failure();

    b.stage = KVX_STAGE_COMPLETION;
    cr_expect_lt(failure_compare(&a, &b), 0);
    cr_expect_gt(failure_compare(&b, &a), 0);
    b.stage = a.stage;
    b.origin_rank = 2;
    cr_expect_gt(failure_compare(&a, &b), 0);
    b.origin_rank = a.origin_rank;
    cr_expect_eq(failure_compare(&a, &b), 0);
}

Test(failure, null_record_formats_placeholder)
{
    char line[64];

    kvx_failure_format(NULL, line, sizeof(line));
    cr_expect_str_eq(line, "(no failure)");
}
