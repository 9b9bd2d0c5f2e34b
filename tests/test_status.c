/*
 * test_status.c - the status, stage, role and room-state tables.
 */
#include <criterion/criterion.h>
#include <kvx.h>
#include <string.h>

typedef struct row {
    kvx_status_t code;
    const char *name;
    const char *msg;
} row_t;

static const row_t rows[] = {
#define ROW_(name, value, msg) { KVX_##name, "KVX_" #name, msg },
    KVX_STATUS_MAP(ROW_)
#undef ROW_
};
#define NROWS (sizeof(rows) / sizeof(rows[0]))

Test(status, every_code_has_its_name_and_message)
{
    for (size_t i = 0; i < NROWS; i++) {
        cr_expect_str_eq(kvx_status_name(rows[i].code), rows[i].name);
        cr_expect_str_eq(kvx_status_string(rows[i].code), rows[i].msg);
        cr_expect(strlen(rows[i].msg) > 0, "%s has an empty message", rows[i].name);
    }
}

Test(status, codes_and_names_are_unique)
{
    for (size_t i = 0; i < NROWS; i++) {
        for (size_t j = i + 1; j < NROWS; j++) {
            cr_expect_neq(rows[i].code, rows[j].code, "%s and %s share a value", rows[i].name,
                          rows[j].name);
            cr_expect_str_neq(rows[i].msg, rows[j].msg);
        }
    }
}

Test(status, ok_is_zero_inprogress_positive_errors_negative)
{
    cr_expect_eq(KVX_OK, 0);
    cr_expect_gt(KVX_INPROGRESS, 0);
    for (size_t i = 0; i < NROWS; i++) {
        if (strncmp(rows[i].name, "KVX_ERR_", 8) == 0) {
            cr_expect_lt(rows[i].code, 0, "%s is not negative", rows[i].name);
        }
    }
}

Test(status, unknown_code_is_named_not_crashed)
{
    cr_expect_str_eq(kvx_status_name((kvx_status_t)-9999), "KVX_UNKNOWN_STATUS");
    cr_expect_str_eq(kvx_status_string((kvx_status_t)12345), "unknown status");
}

Test(status, stages_have_distinct_names_in_room_order)
{
    cr_expect_str_eq(kvx_stage_name(KVX_STAGE_POST), "post");
    cr_expect_str_eq(kvx_stage_name(KVX_STAGE_BOOTSTRAP), "bootstrap");
    cr_expect_str_eq(kvx_stage_name((kvx_stage_t)99), "unknown-stage");
    cr_expect_lt(KVX_STAGE_BOOTSTRAP, KVX_STAGE_PREALLOC);
    cr_expect_lt(KVX_STAGE_PREALLOC, KVX_STAGE_POST);
    cr_expect_lt(KVX_STAGE_POST, KVX_STAGE_COMPLETION);
    for (int i = 0; i < KVX_STAGE_COUNT; i++) {
        for (int j = i + 1; j < KVX_STAGE_COUNT; j++) {
            cr_expect_str_neq(kvx_stage_name((kvx_stage_t)i), kvx_stage_name((kvx_stage_t)j));
        }
    }
}

Test(status, room_states_order_so_that_min_is_agreement)
{
    cr_expect_eq(KVX_ROOM_FAILED, 0);
    cr_expect_lt(KVX_ROOM_FAILED, KVX_ROOM_BOOTSTRAPPING);
    cr_expect_lt(KVX_ROOM_BOOTSTRAPPING, KVX_ROOM_WAITING_FOR_INPUT);
    cr_expect_lt(KVX_ROOM_WAITING_FOR_INPUT, KVX_ROOM_TRANSFERRING);
    cr_expect_lt(KVX_ROOM_TRANSFERRING, KVX_ROOM_SUCCESS);
    cr_expect_str_eq(kvx_room_state_name(KVX_ROOM_WAITING_FOR_INPUT), "WAITING_FOR_INPUT");
    cr_expect_str_eq(kvx_role_name(KVX_ROLE_DECODE), "decode");
}
