/*
 * test_room_msgs.c - a room whose pages travel as data messages (the decode
 * asked for them: KVX_WRITES, or an endpoint without native RMA), driven
 * like test_room.c's rooms (tests/room_pair.h, pair_use_messages()). The
 * prefill's side goes through the transfer floor (xfer/pack.c: data
 * messages, the aux row as MSG_AUX) and tells the prefill machine through
 * its ops; the decode's side lands and checks them (room/unpack.c). Checks
 * the bytes that landed, what travelled, and what a refused, late or
 * duplicated data message does to both sides.
 */
#include <criterion/criterion.h>
#include <kvx.h>

#include "core/base/msg.h"
#include "room_steps.h"
#include "util/failure.h"

#include <string.h>

static void setup(void)
{
    pair_setup();
    pair_use_messages(&pr);
}

/* Delivers every message in flight, each DATA one to the decode twice when
 * twice is set (the first one only). */
static void deliver_all(int twice)
{
    fake_msg_t *m;

    pair_flush(&pr);
    while ((m = fake_take(NULL)) != NULL) {
        if (twice && m->hdr != NULL && fake_msg_type(m) == MSG_DATA) {
            fake_msg_t *again = fake_msg_dup(m);

            pair_deliver_msg(&pr, m);
            pair_deliver_msg(&pr, again);
            fake_msg_free(again);
            twice = 0;
        } else {
            pair_deliver_msg(&pr, m);
        }
        fake_msg_free(m);
        pair_flush(&pr);
    }
}

Test(messages, a_room_lands_byte_exact, .init = setup, .fini = pair_teardown)
{
    char aux[PAIR_AUX_SIZE];
    size_t aux_len = 0;
    kvx_room_info_t info;

    open_both(7);
    cr_assert_eq(p_chunk(7, SRC, 3, "hello"), KVX_OK);
    deliver_all(0);
    cr_expect_eq(pair_state(pr.D, 7), KVX_ROOM_SUCCESS);
    cr_expect_eq(pair_state(pr.P, 7), KVX_ROOM_SUCCESS);
    cr_expect(pair_landed(&pr, SRC, DST, 3), "every page landed");
    for (uint32_t p = 0; p < PAIR_PAGES; p++) {
        if (p != DST[0] && p != DST[1] && p != DST[2]) {
            cr_expect(pair_page_zero(&pr, p), "page %u untouched", p);
        }
    }
    /* 4 buffers x 2 runs (0 -> 3, 1-2 -> 5-6) as DATA, the aux row as AUX;
     * no put, no flush. */
    cr_expect_eq(fake_ucx.data_sent, 9, "%u data messages", fake_ucx.data_sent);
    cr_expect_eq(fake_ucx.puts, 0);
    cr_expect_eq(fake_ucx.flushes, 0);
    pair_as(pr.D);
    cr_expect_eq(kvx_room_aux(pr.D, 7, aux, sizeof(aux), &aux_len), KVX_OK);
    cr_expect_eq(aux_len, 5);
    cr_expect_eq(memcmp(aux, "hello", 5), 0);
    info = pair_info(pr.P, 7);
    cr_expect_eq(info.bytes, 3 * 4 * 32 + sizeof(msg_aux_header_t) + 5);
    cr_expect_eq(pair_info(pr.D, 7).pages, KVX_PAGES_RELEASED);
    cr_expect_eq(room_close(pr.P, 7), KVX_OK);
    cr_expect_eq(room_close(pr.D, 7), KVX_OK);
    cr_expect_eq(pair_rooms(pr.P) + pair_rooms(pr.D), 0);
    cr_expect_eq(pr.P->bad_msgs + pr.D->bad_msgs, 0);
}

Test(messages, a_refused_data_message_fails_both_sides, .init = setup, .fini = pair_teardown)
{
    const char *text = "data message to decode[0].tp0 (rank 1) failed";

    open_both(7);
    fake_ucx.data_mode = FAKE_REFUSE;
    fake_ucx.refuse_ucs = UCS_ERR_NO_RESOURCE;
    cr_expect_eq(p_chunk(7, SRC, 3, NULL), KVX_OK, "the chunk was taken; the room failed");
    expect_failure(pair_failure(pr.P, 7), KVX_ERR_UCX, KVX_STAGE_POST, 0, text);
    deliver_all(0);
    expect_failure(pair_failure(pr.D, 7), KVX_ERR_UCX, KVX_STAGE_POST, 0, text);
    cr_expect_eq(pair_info(pr.D, 7).pages, KVX_PAGES_RELEASED);
    cr_expect(pair_page_zero(&pr, DST[0]) && pair_page_zero(&pr, DST[1]) &&
              pair_page_zero(&pr, DST[2]));
}

Test(messages, data_of_a_room_that_failed_is_dropped, .init = setup, .fini = pair_teardown)
{
    const char *text = "aborted by the decode: engine preempted";

    open_both(7);
    cr_assert_eq(p_chunk(7, SRC, 3, NULL), KVX_OK);
    cr_expect_geq(fake_pending(pr.D), 8, "the data messages are in flight");
    /* The decode aborts before any of them lands: none may write its pages. */
    cr_expect_eq(room_abort(pr.D, 7, "engine preempted"), KVX_OK);
    deliver_all(0);
    expect_failure(pair_failure(pr.D, 7), KVX_ERR_ABORTED, KVX_STAGE_ABORT, 1, text);
    expect_failure(pair_failure(pr.P, 7), KVX_ERR_ABORTED, KVX_STAGE_ABORT, 1, text);
    cr_expect(pair_page_zero(&pr, DST[0]) && pair_page_zero(&pr, DST[1]) &&
                  pair_page_zero(&pr, DST[2]),
              "nothing landed after the abort");
    cr_expect_eq(pair_info(pr.D, 7).pages, KVX_PAGES_RELEASED);
    cr_expect_eq(pr.D->bad_msgs, 0, "late data is dropped, not counted as malformed");
}

Test(messages, a_duplicated_data_message_fails_the_room, .init = setup, .fini = pair_teardown)
{
    kvx_failure_t f;

    open_both(7);
    cr_assert_eq(p_chunk(7, SRC, 3, NULL), KVX_OK);
    deliver_all(1);
    /* The writer's bytes overflow what its heads hold in the room: the last
     * message is refused and the room fails on the decode, which tells the
     * prefill. */
    f = pair_failure(pr.D, 7);
    expect_failure(f, KVX_ERR_PROTOCOL, KVX_STAGE_TRANSFER, 1, NULL);
    cr_expect(starts_with(f.text, "prefill[0].tp0 (rank 0) sent DATA of "), "%s", f.text);
    cr_expect(strstr(f.text, "not what its heads hold") != NULL, "%s", f.text);
    expect_failure(pair_failure(pr.P, 7), KVX_ERR_PROTOCOL, KVX_STAGE_TRANSFER, 1, f.text);
    cr_expect_eq(pair_state(pr.P, 7), KVX_ROOM_FAILED);
}
