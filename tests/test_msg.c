/*
 * test_msg.c - control messages: what is built decodes back; what is
 * malformed is refused with a reason, never trusted.
 */
#include <criterion/criterion.h>
#include <kvx.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/msg.h"
#include "util/failure.h"

static const msg_limits_t limits = { 8, 100 };

Test(msg, prealloc_round_trip)
{
    uint32_t pages[] = { 3, 9, 27, 81 };
    size_t len;
    void *m = msg_new_prealloc(5, 42, 777, 3, 1, pages, 4, &len);
    char why[128];
    msg_t d;
    uint32_t got[4];

    cr_assert_eq(msg_decode(m, len, &limits, &d, why, sizeof(why)), KVX_OK, "%s", why);
    cr_expect_eq(d.hdr.type, MSG_PREALLOC);
    cr_expect_eq(d.hdr.src_rank, 5);
    cr_expect_eq(d.hdr.room, 42);
    cr_expect_eq(d.hdr.nonce, 777);
    cr_expect_eq(d.u.prealloc.npages, 4);
    cr_expect_eq(d.u.prealloc.aux_slot, 3);
    memcpy(got, d.pages, sizeof(got));
    cr_expect_arr_eq(got, pages, sizeof(pages));
    free(m);
}

Test(msg, agreed_round_trip_and_bad_counts)
{
    msg_agreed_room_t rooms[3] = { { 42, 7 }, { 43, 8 }, { 1ull << 40, 9 } }, got[3];
    size_t len;
    char *m = msg_new_agreed(6, rooms, 3, &len);
    uint32_t count;
    char why[128];
    msg_t d;

    cr_assert_eq(msg_decode(m, len, &limits, &d, why, sizeof(why)), KVX_OK, "%s", why);
    cr_expect_eq(d.hdr.type, MSG_AGREED);
    cr_expect_eq(d.u.agreed.count, 3);
    memcpy(got, d.rooms, sizeof(got));
    cr_expect_arr_eq(got, rooms, sizeof(rooms));
    /* One byte short, and a count the length does not carry: refused. */
    cr_expect_eq(msg_decode(m, len - 1, &limits, &d, why, sizeof(why)), KVX_ERR_PROTOCOL);
    count = 4;
    memcpy(m + sizeof(msg_hdr_t), &count, sizeof(count));
    cr_expect_eq(msg_decode(m, len, &limits, &d, why, sizeof(why)), KVX_ERR_PROTOCOL);
    cr_expect(strstr(why, "AGREED") != NULL, "%s", why);
    count = 0;
    memcpy(m + sizeof(msg_hdr_t), &count, sizeof(count));
    cr_expect_eq(msg_decode(m, len, &limits, &d, why, sizeof(why)), KVX_ERR_PROTOCOL);
    free(m);
}

Test(msg, fail_round_trip_keeps_the_origin)
{
    kvx_failure_t f, *g;
    size_t len;
    void *m;
    char why[128];
    msg_t d;

    failure_set_room(&f, 42, KVX_ERR_UCX, KVX_STAGE_POST, "Connection reset by remote peer",
                     "put to decode[1].tp0 (rank 9) failed");
    f.origin_rank = 5;
    f.origin_role = KVX_ROLE_PREFILL;
    f.origin_instance = 0;
    f.origin_tp_rank = 2;
    f.flags = KVX_FAILURE_INJECTED;
    m = msg_new_fail(5, 42, 1, &f, &len);
    cr_assert_eq(msg_decode(m, len, &limits, &d, why, sizeof(why)), KVX_OK, "%s", why);
    g = &d.u.failure;
    cr_expect_eq(g->origin_rank, 5);
    cr_expect_eq(g->origin_tp_rank, 2);
    cr_expect_eq(g->stage, KVX_STAGE_POST);
    cr_expect_eq(g->status, KVX_ERR_UCX);
    cr_expect_eq(g->flags, KVX_FAILURE_INJECTED);
    cr_expect_str_eq(g->text, f.text);
    cr_expect_str_eq(g->foreign, f.foreign);
    free(m);
}

Test(msg, tp_break_round_trip_and_ping_rounds)
{
    kvx_failure_t f;
    size_t len;
    void *m;
    char why[128];
    msg_t d;

    failure_set(&f, KVX_ERR_OUT_OF_STEP, KVX_STAGE_AGREE, NULL,
                "agreement rounds out of step in decode[0]: tp0 is in round 13, tp1 in round 12");
    f.origin_rank = 2;
    m = msg_new_failure(MSG_TP_BREAK, 2, 0, 0, &f, &len);
    cr_assert_eq(msg_decode(m, len, &limits, &d, why, sizeof(why)), KVX_OK, "%s", why);
    cr_expect_eq(d.hdr.type, MSG_TP_BREAK);
    cr_expect_eq(d.u.failure.status, KVX_ERR_OUT_OF_STEP);
    cr_expect_eq(d.u.failure.stage, KVX_STAGE_AGREE);
    cr_expect_eq(d.u.failure.origin_rank, 2);
    cr_expect_str_eq(d.u.failure.text, f.text);
    cr_expect_str_eq(msg_type_name(MSG_TP_BREAK), "TP_BREAK");
    /* One byte short is refused. */
    cr_expect_eq(msg_decode(m, len - 1, &limits, &d, why, sizeof(why)), KVX_ERR_PROTOCOL);
    free(m);
    /* A PING to a TP sibling carries its rounds in the nonce. */
    m = msg_new(MSG_PING, 3, 0, 12, &len);
    cr_assert_eq(msg_decode(m, len, &limits, &d, why, sizeof(why)), KVX_OK, "%s", why);
    cr_expect_eq(d.hdr.nonce, 12);
    free(m);
}

/* Each mutation of a valid message must be refused with its reason. */
Test(msg, malformed_messages_are_refused)
{
    uint32_t pages[] = { 1, 2 };
    size_t len;
    char *good = msg_new_prealloc(1, 7, 1, -1, 1, pages, 2, &len);
    char buf[512], why[128];
    msg_t d;
    struct {
        size_t off;
        uint32_t value;
        size_t width;
        const char *expect;
    } cases[] = {
        { 0, 0xdeadbeef, 4, "bad magic" },
        { 4, 9, 2, "protocol version 9" },
        { 6, 99, 2, "unknown message type 99" },
        { 6, 0, 2, "unknown message type 0" },
        { 8, 1000, 4, "says 1000 bytes" },
        { 12, 8, 4, "outside the world of 8" },
        { 12, (uint32_t)-1, 4, "outside the world" },
        { 32 + 8, 0, 4, "grants 0 pages" },
        { 32 + 8, 101, 4, "grants 101 pages" },
        { 32 + 12, 3, 4, "writes=3" },
        { 32 + 8, 3, 4, "has a body" }, /* claims 3 pages, carries 2 */
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memcpy(buf, good, len);
        memcpy(buf + cases[i].off, &cases[i].value, cases[i].width);
        cr_expect_eq(msg_decode(buf, len, &limits, &d, why, sizeof(why)), KVX_ERR_PROTOCOL,
                     "case %zu accepted", i);
        cr_expect(strstr(why, cases[i].expect) != NULL, "case %zu: %s", i, why);
    }
    for (size_t cut = 0; cut < len; cut++) {
        cr_expect_eq(msg_decode(good, cut, &limits, &d, why, sizeof(why)), KVX_ERR_PROTOCOL);
    }
    cr_expect_eq(msg_decode(NULL, 0, &limits, &d, why, sizeof(why)), KVX_ERR_PROTOCOL);
    free(good);
}

Test(msg, fail_with_unterminated_text_or_bad_enums_is_refused)
{
    kvx_failure_t f;
    size_t len;
    char *m, why[128];
    msg_t d;
    msg_failure_t w;

    failure_set_room(&f, 1, KVX_ERR_TIMEOUT, KVX_STAGE_WAIT, NULL, "late");
    m = msg_new_fail(0, 1, 1, &f, &len);
    memcpy(&w, m + sizeof(msg_hdr_t), sizeof(w));
    memset(w.text, 'x', sizeof(w.text));
    memcpy(m + sizeof(msg_hdr_t), &w, sizeof(w));
    cr_expect_eq(msg_decode(m, len, &limits, &d, why, sizeof(why)), KVX_ERR_PROTOCOL);
    cr_expect(strstr(why, "unterminated") != NULL, "%s", why);
    free(m);
    m = msg_new_fail(0, 1, 1, &f, &len);
    memcpy(&w, m + sizeof(msg_hdr_t), sizeof(w));
    w.stage = 77;
    memcpy(m + sizeof(msg_hdr_t), &w, sizeof(w));
    cr_expect_eq(msg_decode(m, len, &limits, &d, why, sizeof(why)), KVX_ERR_PROTOCOL);
    w.stage = KVX_STAGE_WAIT;
    w.status = KVX_OK;
    memcpy(m + sizeof(msg_hdr_t), &w, sizeof(w));
    cr_expect_eq(msg_decode(m, len, &limits, &d, why, sizeof(why)), KVX_ERR_PROTOCOL);
    cr_expect(strstr(why, "not an error") != NULL, "%s", why);
    free(m);
}

Test(msg, data_header_round_trip_and_range_checks)
{
    msg_limits_t lim = { 8, 100 };
    msg_data_t d = { 3, 1, 90, 10 };
    unsigned char buf[MSG_DATA_LEN];
    char why[200];
    msg_t m;

    msg_put_data(buf, MSG_DATA, 5, 77, 99, &d);
    cr_assert_eq(msg_decode(buf, sizeof(buf), &lim, &m, why, sizeof(why)), KVX_OK, "%s", why);
    cr_expect_eq(m.hdr.type, MSG_DATA);
    cr_expect_eq(m.hdr.src_rank, 5);
    cr_expect_eq(m.hdr.room, 77);
    cr_expect_eq(m.hdr.nonce, 99);
    cr_expect_eq(m.u.data.layer, 3);
    cr_expect_eq(m.u.data.comp, 1);
    cr_expect_eq(m.u.data.pos, 90);
    cr_expect_eq(m.u.data.npages, 10);
    cr_expect_str_eq(msg_type_name(MSG_DATA), "DATA");
    /* Pages past any pool, no pages, a wrapping range: refused. */
    d.pos = 91;
    msg_put_data(buf, MSG_DATA, 5, 77, 99, &d);
    cr_expect_eq(msg_decode(buf, sizeof(buf), &lim, &m, why, sizeof(why)), KVX_ERR_PROTOCOL);
    cr_expect_str_eq(why, "DATA for pages [91, +10) of a pool of 100");
    d.pos = 0;
    d.npages = 0;
    msg_put_data(buf, MSG_DATA, 5, 77, 99, &d);
    cr_expect_eq(msg_decode(buf, sizeof(buf), &lim, &m, why, sizeof(why)), KVX_ERR_PROTOCOL);
    d.pos = UINT32_MAX;
    d.npages = 2;
    msg_put_data(buf, MSG_DATA, 5, 77, 99, &d);
    cr_expect_eq(msg_decode(buf, sizeof(buf), &lim, &m, why, sizeof(why)), KVX_ERR_PROTOCOL);
    cr_expect_eq(msg_decode(buf, sizeof(buf) - 1, &lim, &m, why, sizeof(why)), KVX_ERR_PROTOCOL);
}

/* A grant that asks for data messages keeps its pages; an AUX message is a
 * data header with nothing but zeros in its body. */
Test(msg, messages_grant_and_aux_header)
{
    msg_limits_t lim = { 8, 100 };
    uint32_t pages[] = { 4, 5, 6 }, got[3];
    msg_data_t d = { 0, 0, 0, 0 };
    unsigned char buf[MSG_DATA_LEN];
    char why[200];
    size_t len;
    char *m = msg_new_prealloc(2, 9, 11, 0, MSG_WRITES_MESSAGES, pages, 3, &len);
    msg_t out;

    cr_assert_eq(msg_decode(m, len, &lim, &out, why, sizeof(why)), KVX_OK, "%s", why);
    cr_expect_eq(out.u.prealloc.writes, MSG_WRITES_MESSAGES);
    memcpy(got, out.pages, sizeof(got));
    cr_expect_arr_eq(got, pages, sizeof(got));
    free(m);

    msg_put_data(buf, MSG_AUX, 5, 77, 99, &d);
    cr_assert_eq(msg_decode(buf, sizeof(buf), &lim, &out, why, sizeof(why)), KVX_OK, "%s", why);
    cr_expect_eq(out.hdr.type, MSG_AUX);
    cr_expect_str_eq(msg_type_name(MSG_AUX), "AUX");
    d.npages = 1;
    msg_put_data(buf, MSG_AUX, 5, 77, 99, &d);
    cr_expect_eq(msg_decode(buf, sizeof(buf), &lim, &out, why, sizeof(why)), KVX_ERR_PROTOCOL);
    cr_expect_str_eq(why, "AUX with layer 0 comp 0 pages [0, +1): must be 0");
}
