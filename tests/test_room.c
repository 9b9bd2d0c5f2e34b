/*
 * test_room.c - the room machines (the prefill's sender, the decode's
 * receiver, the protocol between them, deadlines, drain and quarantine)
 * driven through the kvx_room_* calls on a prefill and a decode context in
 * one process (tests/room_pair.h), over the stand-in transport
 * (tests/fake_ucx.h). Each test walks a room through its transitions
 * message by message, completing puts and passing deadlines when it says,
 * and checks the states, the failure records (status, stage, origin, text)
 * and the bytes that landed. No MPI, no UCX, no thread, no sleep.
 */
#include <criterion/criterion.h>
#include <kvx.h>

#include "core/base/msg.h"
#include "core/link/peer.h"
#include "core/room/room.h"
#include "core/room/sender.h"
#include "core/xfer/target.h"
#include "room_steps.h"
#include "util/failure.h"
#include "util/time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- success ----------------------------------------------------------- */

Test(success, one_room_message_by_message, .init = pair_setup, .fini = pair_teardown)
{
    char aux[PAIR_AUX_SIZE];
    size_t aux_len = 0;
    kvx_room_info_t info;

    cr_assert_eq(d_open(7, DST, 3, 1), KVX_OK);
    cr_expect_eq(pair_state(pr.D, 7), KVX_ROOM_BOOTSTRAPPING);
    cr_assert_eq(p_open(7, 3), KVX_OK);
    cr_expect_eq(pair_state(pr.P, 7), KVX_ROOM_BOOTSTRAPPING);

    next(pr.P, MSG_PREALLOC);
    cr_expect_eq(pair_state(pr.P, 7), KVX_ROOM_WAITING_FOR_INPUT);
    next(pr.D, MSG_ACCEPT);
    cr_expect_eq(pair_state(pr.D, 7), KVX_ROOM_WAITING_FOR_INPUT);

    cr_assert_eq(p_chunk(7, SRC, 2, NULL), KVX_OK);
    cr_expect_eq(pair_state(pr.P, 7), KVX_ROOM_TRANSFERRING);
    next(pr.D, MSG_START);
    cr_expect_eq(pair_state(pr.D, 7), KVX_ROOM_TRANSFERRING);
    cr_expect(pair_landed(&pr, SRC, DST, 2), "the first chunk landed");
    cr_expect(pair_page_zero(&pr, 6), "the last page is not written yet");

    cr_assert_eq(p_chunk(7, SRC + 2, 1, "hello"), KVX_OK);
    cr_expect_eq(pair_state(pr.P, 7), KVX_ROOM_TRANSFERRING, "SUCCESS waits for RECEIVED");
    next(pr.D, MSG_DONE);
    cr_expect_eq(pair_state(pr.D, 7), KVX_ROOM_SUCCESS);
    cr_expect(pair_landed(&pr, SRC, DST, 3));
    for (uint32_t p = 0; p < PAIR_PAGES; p++) {
        if (p != 3 && p != 5 && p != 6) {
            cr_expect(pair_page_zero(&pr, p), "page %u untouched", p);
        }
    }
    next(pr.P, MSG_RECEIVED);
    cr_expect_eq(pair_state(pr.P, 7), KVX_ROOM_SUCCESS);
    cr_expect_eq(fake_pending(NULL), 0);

    pair_as(pr.D);
    cr_expect_eq(kvx_room_aux(pr.D, 7, aux, sizeof(aux), &aux_len), KVX_OK);
    cr_expect_eq(aux_len, 5);
    cr_expect_eq(memcmp(aux, "hello", 5), 0);
    info = pair_info(pr.P, 7);
    /* 4 buffers x (runs 0-1 -> 3 and 1 -> 5, then 2 -> 6), and the aux row. */
    cr_expect_eq(info.puts, 13);
    cr_expect_eq(info.bytes, 3 * 4 * 32 + sizeof(msg_aux_header_t) + 5);
    cr_expect_eq(info.puts, fake_ucx.puts);
    cr_expect_eq(fake_ucx.flushes, 1);
    info = pair_info(pr.D, 7);
    cr_expect_eq(info.writers, 1);
    cr_expect_eq(info.writers_done, 1);
    cr_expect_eq(info.pages, KVX_PAGES_RELEASED);

    cr_expect_eq(room_close(pr.P, 7), KVX_OK);
    cr_expect_eq(room_close(pr.D, 7), KVX_OK);
    cr_expect_eq(pair_rooms(pr.P), 0);
    cr_expect_eq(pair_rooms(pr.D), 0);
    cr_expect_eq(pr.P->bad_msgs + pr.D->bad_msgs, 0);
}

Test(success, puts_complete_later, .init = pair_setup, .fini = pair_teardown)
{
    fake_ucx.put_mode = FAKE_DEFER;
    fake_ucx.flush_mode = FAKE_DEFER;
    open_both(7);
    cr_assert_eq(p_chunk(7, SRC, 3, "x"), KVX_OK);
    pair_deliver(&pr);
    /* 0 -> 3 and 1-2 -> 5-6 in 4 buffers, the aux put and the flush. */
    cr_expect_eq(fake_inflight(), 10, "%u in flight", fake_inflight());
    cr_expect_eq(pair_state(pr.D, 7), KVX_ROOM_TRANSFERRING);
    cr_expect_eq(pair_complete(&pr, UCS_OK), 10);
    next(pr.D, MSG_DONE);
    next(pr.P, MSG_RECEIVED);
    cr_expect_eq(pair_state(pr.D, 7), KVX_ROOM_SUCCESS);
    cr_expect_eq(pair_state(pr.P, 7), KVX_ROOM_SUCCESS);
    cr_expect(pair_landed(&pr, SRC, DST, 3));
}

Test(success, flow_control_resumes_a_queued_target, .init = pair_setup, .fini = pair_teardown)
{
    unsigned rounds = 0;

    pr.P->cfg.max_inflight_ops = 2;
    fake_ucx.put_mode = FAKE_DEFER;
    open_both(7);
    cr_assert_eq(p_chunk(7, SRC, 3, NULL), KVX_OK);
    cr_expect_eq(fake_inflight(), 2, "the window holds two puts");
    while (pair_complete(&pr, UCS_OK) > 0) {
        cr_expect_leq(fake_inflight(), 2);
        rounds++;
    }
    cr_expect_eq(rounds, 5, "9 puts (8 of pages, the aux row), two at a time: %u rounds", rounds);
    pair_deliver(&pr);
    cr_expect_eq(pair_state(pr.D, 7), KVX_ROOM_SUCCESS);
    cr_expect_eq(pair_state(pr.P, 7), KVX_ROOM_SUCCESS);
    cr_expect(pair_landed(&pr, SRC, DST, 3));
}

Test(success, grant_before_the_prefill_opens, .init = pair_setup, .fini = pair_teardown)
{
    cr_assert_eq(d_open(7, DST, 3, -1), KVX_OK);
    next(pr.P, MSG_PREALLOC);
    cr_expect_eq(pair_rooms(pr.P), 1, "kept in an unopened room");
    cr_expect_eq(pair_state(pr.P, 7), KVX_ROOM_FAILED + 1, "not open for the application");
    cr_assert_eq(p_open(7, 3), KVX_OK);
    cr_expect_eq(pair_state(pr.P, 7), KVX_ROOM_WAITING_FOR_INPUT, "the grant was replayed");
    cr_assert_eq(p_chunk(7, SRC, 3, NULL), KVX_OK);
    pair_deliver(&pr);
    cr_expect_eq(pair_state(pr.D, 7), KVX_ROOM_SUCCESS);
    cr_expect_eq(pair_state(pr.P, 7), KVX_ROOM_SUCCESS);
    cr_expect(pair_landed(&pr, SRC, DST, 3));
}

/* ---- failures, stage by stage ------------------------------------------ */

Test(prealloc, pages_held_by_an_open_room_are_refused, .init = pair_setup, .fini = pair_teardown)
{
    const uint32_t a[2] = { 2, 3 }, b[2] = { 3, 4 }, c[1] = { 8 };
    kvx_failure_t f;

    cr_assert_eq(d_open(1, a, 2, 0), KVX_OK);
    cr_expect_eq(d_open(2, b, 2, -1), KVX_ERR_BUSY);
    expect_failure(last_error(), KVX_ERR_BUSY, KVX_STAGE_PREALLOC, 1,
                   "page 3 (index 0) is held by room 1, which is still open");
    cr_expect_eq(d_open(2, b + 1, 1, 0), KVX_ERR_BUSY);
    f = last_error();
    cr_expect_str_eq(f.text, "aux slot 0 is held by room 1, which is still open");
    cr_expect_eq(d_open(2, c, 1, -1), KVX_ERR_PAGE_RANGE);
    f = last_error();
    cr_expect_str_eq(f.text, "page 8 (index 0) is outside the pool of 8 pages");
    cr_expect_eq(pair_state(pr.D, 2), KVX_ROOM_FAILED + 1, "no room 2");
    /* The refused grants held nothing: page 4 is free. */
    cr_expect_eq(d_open(2, b + 1, 1, -1), KVX_OK);
}

Test(prealloc, the_prefill_refuses_a_grant_that_does_not_fit, .init = pair_setup,
     .fini = pair_teardown)
{
    const uint32_t two[2] = { 1, 2 }, bad[3] = { 1, 2, 99 };
    uint64_t nonce = ((uint64_t)1 << 32) | 77;
    size_t len;
    void *m;

    cr_assert_eq(p_open(7, 3), KVX_OK);
    /* A page no pool of the job has is refused on the wire (msg_decode). */
    pair_as(pr.D);
    m = msg_new_prealloc(1, 7, nonce, -1, MSG_WRITES_PUTS, bad, 3, &len);
    inject(pr.P, m, len);
    cr_expect_eq(pr.P->bad_msgs, 1);
    cr_expect_eq(pair_state(pr.P, 7), KVX_ROOM_BOOTSTRAPPING);
    /* A grant of another size than the room is refused by the room. */
    pair_as(pr.D);
    m = msg_new_prealloc(1, 7, nonce, -1, MSG_WRITES_PUTS, two, 2, &len);
    inject(pr.P, m, len);
    cr_expect_eq(pair_state(pr.P, 7), KVX_ROOM_FAILED);
    expect_failure(pair_failure(pr.P, 7), KVX_ERR_INVALID_PARAM, KVX_STAGE_PREALLOC, 0,
                   "decode[0].tp0 (rank 1) granted 2 pages but the prefill announced 3");
    /* The decode hears why, and that nothing was written. */
    fake_msg_free(take(pr.D, MSG_FAIL));
    fake_msg_free(take(pr.D, MSG_DRAINED));
    cr_expect_eq(fake_ucx.puts, 0);
}

Test(prealloc, injected_refusal_reaches_the_decode, .fini = pair_teardown)
{
    pair_init(&pr, "stage=prealloc,effect=fail", NULL);
    cr_assert_eq(d_open(7, DST, 3, 1), KVX_OK);
    cr_assert_eq(p_open(7, 3), KVX_OK);
    pair_deliver(&pr);
    expect_failure(pair_failure(pr.P, 7), KVX_ERR_INJECTED, KVX_STAGE_PREALLOC, 0,
                   "injected failure (rule 'stage=prealloc,effect=fail')");
    /* The first failure recorded is the root cause on both sides. */
    expect_failure(pair_failure(pr.D, 7), KVX_ERR_INJECTED, KVX_STAGE_PREALLOC, 0,
                   "injected failure (rule 'stage=prealloc,effect=fail')");
    cr_expect_eq(pair_info(pr.D, 7).pages, KVX_PAGES_RELEASED, "DRAINED came");
    cr_expect_eq(room_close(pr.D, 7), KVX_OK);
    cr_expect_eq(room_close(pr.P, 7), KVX_OK);
}

Test(post, a_refused_put_fails_both_sides, .init = pair_setup, .fini = pair_teardown)
{
    const char *text = "put to decode[0].tp0 (rank 1) failed";

    open_both(7);
    fake_ucx.put_mode = FAKE_REFUSE;
    fake_ucx.refuse_ucs = UCS_ERR_NO_RESOURCE;
    cr_expect_eq(p_chunk(7, SRC, 3, NULL), KVX_OK, "the chunk was taken; the room failed");
    expect_failure(pair_failure(pr.P, 7), KVX_ERR_UCX, KVX_STAGE_POST, 0, text);
    cr_expect_str_eq(pair_failure(pr.P, 7).foreign, ucs_status_string(UCS_ERR_NO_RESOURCE));
    next(pr.D, MSG_START);
    next(pr.D, MSG_FAIL);
    expect_failure(pair_failure(pr.D, 7), KVX_ERR_UCX, KVX_STAGE_POST, 0, text);
    cr_expect_eq(pair_info(pr.D, 7).pages, KVX_PAGES_DRAINING);
    next(pr.D, MSG_DRAINED);
    cr_expect_eq(pair_info(pr.D, 7).pages, KVX_PAGES_RELEASED);
    cr_expect(pair_page_zero(&pr, 3) && pair_page_zero(&pr, 5) && pair_page_zero(&pr, 6));
    cr_expect_eq(p_chunk(7, SRC, 1, NULL), KVX_ERR_STATE, "a failed room takes no chunk");
}

Test(post, an_endpoint_error_loses_the_peer, .init = pair_setup, .fini = pair_teardown)
{
    kvx_failure_t f;

    start_both(7);
    fake_ucx.put_mode = FAKE_REFUSE;
    fake_ucx.refuse_ucs = UCS_ERR_ENDPOINT_TIMEOUT;
    cr_expect_eq(p_chunk(7, SRC + 2, 1, NULL), KVX_OK);
    /* The loss is recorded first: it is the root cause, not the put. */
    f = pair_failure(pr.P, 7);
    expect_failure(f, KVX_ERR_PEER_LOST, KVX_STAGE_TRANSFER, 0,
                   "peer decode[0].tp0 (rank 1) lost: UCX reported Endpoint timeout on the data "
                   "endpoint");
    cr_expect(pr.P->peers[0].lost && pr.P->peers[0].ep_failed);
    pair_flush(&pr);
    cr_expect_eq(fake_pending(pr.D), 0, "nothing is sent to a lost peer");
}

Test(completion, a_failed_put_completion, .init = pair_setup, .fini = pair_teardown)
{
    const char *text = "put to decode[0].tp0 (rank 1) failed";

    fake_ucx.put_mode = FAKE_DEFER;
    fake_ucx.flush_mode = FAKE_DEFER;
    open_both(7);
    cr_assert_eq(p_chunk(7, SRC, 3, NULL), KVX_OK);
    cr_expect_eq(pair_complete(&pr, UCS_ERR_IO_ERROR), 10);
    expect_failure(pair_failure(pr.P, 7), KVX_ERR_UCX, KVX_STAGE_POST, 0, text);
    cr_expect_str_eq(pair_failure(pr.P, 7).foreign, ucs_status_string(UCS_ERR_IO_ERROR));
    pair_deliver(&pr);
    expect_failure(pair_failure(pr.D, 7), KVX_ERR_UCX, KVX_STAGE_POST, 0, text);
    /* The flush failed too: nothing confirms the pages are safe. */
    cr_expect_eq(pair_info(pr.D, 7).pages, KVX_PAGES_DRAINING);
    /* The decode's FAIL, told back, makes the prefill flush again; this
     * flush confirms: DRAINED. */
    cr_expect_eq(fake_inflight(), 1, "a second flush");
    cr_expect_eq(pair_complete(&pr, UCS_OK), 1);
    next(pr.D, MSG_DRAINED);
    cr_expect_eq(pair_info(pr.D, 7).pages, KVX_PAGES_RELEASED);
    cr_expect_eq(room_close(pr.P, 7), KVX_OK, "nothing references the room any more");
    cr_expect_eq(room_close(pr.D, 7), KVX_OK);
}

Test(completion, a_failed_flush_quarantines_the_pages, .init = pair_setup, .fini = pair_teardown)
{
    const char *text = "flush of puts to decode[0].tp0 (rank 1) failed";

    fake_ucx.flush_mode = FAKE_DEFER;
    start_both(7);
    cr_assert_eq(p_chunk(7, SRC + 2, 1, NULL), KVX_OK);
    cr_expect_eq(fake_inflight(), 1, "the flush");
    cr_expect_eq(pair_complete(&pr, UCS_ERR_IO_ERROR), 1);
    expect_failure(pair_failure(pr.P, 7), KVX_ERR_UCX, KVX_STAGE_COMPLETION, 0, text);
    next(pr.D, MSG_FAIL);
    cr_expect_eq(fake_pending(pr.D), 0, "no DONE, no DRAINED");
    next(pr.P, MSG_FAIL); /* its own record, told back: the first one stays */
    cr_expect_eq(pair_failure(pr.P, 7).stage, KVX_STAGE_COMPLETION);
    expect_failure(pair_failure(pr.D, 7), KVX_ERR_UCX, KVX_STAGE_COMPLETION, 0, text);
    cr_expect_eq(pair_info(pr.D, 7).pages, KVX_PAGES_DRAINING);
    cr_expect_eq(room_close(pr.D, 7), KVX_ERR_BUSY, "a writer may still write");
    pass(pr.D, PAIR_DRAIN_TIMEOUT + KVX_NS_PER_S);
    cr_expect_eq(pair_info(pr.D, 7).pages, KVX_PAGES_QUARANTINED);
    cr_expect_eq(room_close(pr.D, 7), KVX_ERR_QUARANTINED);
    cr_expect_eq(d_open(8, DST + 1, 1, -1), KVX_ERR_QUARANTINED, "page 5 is never reused");
    cr_expect(starts_with(last_error().text, "page 5 (index 0) is quarantined: room 7 was closed"));
}

Test(completion, injected_failure_on_the_decode, .fini = pair_teardown)
{
    const char *text = "injected failure (rule 'stage=completion,effect=fail')";

    pair_init(&pr, NULL, "stage=completion,effect=fail");
    open_both(7);
    cr_assert_eq(p_chunk(7, SRC, 3, NULL), KVX_OK);
    pair_deliver(&pr);
    expect_failure(pair_failure(pr.D, 7), KVX_ERR_INJECTED, KVX_STAGE_COMPLETION, 1, text);
    expect_failure(pair_failure(pr.P, 7), KVX_ERR_INJECTED, KVX_STAGE_COMPLETION, 1, text);
    /* DONE proved the writer had nothing in flight. */
    cr_expect_eq(pair_info(pr.D, 7).pages, KVX_PAGES_RELEASED);
}

Test(aux, injected_failure_before_the_aux_put, .fini = pair_teardown)
{
    pair_init(&pr, "stage=aux,effect=fail", NULL);
    open_both(7);
    cr_assert_eq(p_chunk(7, SRC, 3, "aux"), KVX_OK);
    expect_failure(pair_failure(pr.P, 7), KVX_ERR_INJECTED, KVX_STAGE_AUX, 0,
                   "injected failure (rule 'stage=aux,effect=fail')");
    pair_deliver(&pr);
    expect_failure(pair_failure(pr.D, 7), KVX_ERR_INJECTED, KVX_STAGE_AUX, 0, NULL);
    cr_expect_eq(fake_ucx.flushes, 1, "the puts posted were flushed before DRAINED");
    cr_expect_eq(pair_info(pr.D, 7).pages, KVX_PAGES_RELEASED);
}

Test(post, an_injected_delay_holds_the_puts, .fini = pair_teardown)
{
    pair_init(&pr, "stage=post,effect=delay:100", NULL);
    open_both(7);
    cr_assert_eq(p_chunk(7, SRC, 3, NULL), KVX_OK);
    next(pr.D, MSG_START);
    cr_expect_eq(fake_ucx.puts, 0, "held");
    pass(pr.P, 50 * KVX_NS_PER_MS);
    cr_expect_eq(fake_ucx.puts, 0, "still held");
    pass(pr.P, 60 * KVX_NS_PER_MS);
    cr_expect_eq(fake_ucx.puts, 9, "resumed by the tick");
    pair_deliver(&pr);
    cr_expect_eq(pair_state(pr.D, 7), KVX_ROOM_SUCCESS);
    cr_expect_eq(pair_state(pr.P, 7), KVX_ROOM_SUCCESS);
    cr_expect(pair_landed(&pr, SRC, DST, 3));
}

Test(completion, a_lost_done_ends_at_the_decode_deadline, .fini = pair_teardown)
{
    kvx_failure_t f;

    pair_init(&pr, "stage=completion,effect=drop", NULL);
    open_both(7);
    cr_assert_eq(p_chunk(7, SRC, 3, NULL), KVX_OK);
    next(pr.D, MSG_START);
    cr_expect_eq(fake_pending(NULL), 0, "no DONE");
    cr_expect(pair_landed(&pr, SRC, DST, 3), "the pages are there all the same");
    pass(pr.D, PAIR_TRANSFER_TIMEOUT + KVX_NS_PER_S);
    f = pair_failure(pr.D, 7);
    expect_failure(f, KVX_ERR_TIMEOUT, KVX_STAGE_TRANSFER, 1, NULL);
    cr_expect_eq(pair_info(pr.D, 7).pages, KVX_PAGES_DRAINING, "not QUARANTINED in that tick");
    next(pr.P, MSG_FAIL);
    expect_failure(pair_failure(pr.P, 7), KVX_ERR_TIMEOUT, KVX_STAGE_TRANSFER, 1, f.text);
    /* The prefill counts its DONE as sent: it has nothing to drain. */
    next(pr.D, MSG_FAIL);
    cr_expect_eq(fake_pending(NULL), 0);
    pass(pr.D, PAIR_DRAIN_TIMEOUT + KVX_NS_PER_S);
    cr_expect_eq(pair_info(pr.D, 7).pages, KVX_PAGES_QUARANTINED);
}

/* ---- deadlines (a clock passed to the tickers, not a sleep) ------------- */

Test(deadline, bootstrap_on_the_decode, .init = pair_setup, .fini = pair_teardown)
{
    kvx_failure_t f;

    cr_assert_eq(d_open(7, DST, 3, -1), KVX_OK);
    next(pr.P, MSG_PREALLOC);
    pass(pr.D, PAIR_BOOTSTRAP_TIMEOUT - KVX_NS_PER_S);
    cr_expect_eq(pair_state(pr.D, 7), KVX_ROOM_BOOTSTRAPPING, "before the deadline");
    pass(pr.D, 2 * KVX_NS_PER_S);
    f = pair_failure(pr.D, 7);
    expect_failure(f, KVX_ERR_TIMEOUT, KVX_STAGE_BOOTSTRAP, 1, NULL);
    cr_expect(starts_with(f.text, "BOOTSTRAPPING for 1"), "%s", f.text);
    cr_expect(strstr(f.text, "s waiting for the prefill to open the room (state deadline)"), "%s",
              f.text);
    cr_expect_eq(pair_info(pr.D, 7).pages, KVX_PAGES_DRAINING);
    /* The prefill, without the room, says nothing is in flight; it keeps
     * the FAIL for the room it opens next with the id. */
    next(pr.P, MSG_FAIL);
    next(pr.D, MSG_DRAINED);
    cr_expect_eq(pair_info(pr.D, 7).pages, KVX_PAGES_RELEASED);
    cr_assert_eq(p_open(7, 3), KVX_OK);
    cr_expect_eq(pair_state(pr.P, 7), KVX_ROOM_FAILED, "the kept FAIL failed it at open");
    cr_expect_str_eq(pair_failure(pr.P, 7).text, f.text);
}

Test(deadline, bootstrap_on_the_prefill, .init = pair_setup, .fini = pair_teardown)
{
    kvx_failure_t f;

    cr_assert_eq(p_open(7, 3), KVX_OK);
    pass(pr.P, PAIR_BOOTSTRAP_TIMEOUT + KVX_NS_PER_S);
    f = pair_failure(pr.P, 7);
    expect_failure(f, KVX_ERR_TIMEOUT, KVX_STAGE_BOOTSTRAP, 0, NULL);
    cr_expect(strstr(f.text, "s waiting for the decode's pre-allocation (state deadline)"), "%s",
              f.text);
    /* No grant came: the FAIL names no incarnation of the decode's room. */
    fake_msg_free(take(pr.D, MSG_FAIL));
    cr_expect_eq(fake_pending(NULL), 0);
}

Test(deadline, waiting_for_the_first_pages, .init = pair_setup, .fini = pair_teardown)
{
    kvx_failure_t f;

    open_both(7);
    pass(pr.D, PAIR_WAITING_TIMEOUT + KVX_NS_PER_S);
    f = pair_failure(pr.D, 7);
    expect_failure(f, KVX_ERR_TIMEOUT, KVX_STAGE_WAIT, 1, NULL);
    cr_expect(strstr(f.text, "s waiting for the prefill's first pages (state deadline)"), "%s",
              f.text);
    next(pr.P, MSG_FAIL);
    expect_failure(pair_failure(pr.P, 7), KVX_ERR_TIMEOUT, KVX_STAGE_WAIT, 1, f.text);
    next(pr.D, MSG_FAIL);
    next(pr.D, MSG_DRAINED);
    cr_expect_eq(pair_info(pr.D, 7).pages, KVX_PAGES_RELEASED);
}

Test(deadline, waiting_for_the_first_chunk, .init = pair_setup, .fini = pair_teardown)
{
    kvx_failure_t f;

    open_both(7);
    pass(pr.P, PAIR_WAITING_TIMEOUT + KVX_NS_PER_S);
    f = pair_failure(pr.P, 7);
    expect_failure(f, KVX_ERR_TIMEOUT, KVX_STAGE_WAIT, 0, NULL);
    cr_expect(starts_with(f.text, "WAITING_FOR_INPUT for 2"), "%s", f.text);
    cr_expect(strstr(f.text, "s waiting for the application's first chunk (state deadline)"), "%s",
              f.text);
    pair_deliver(&pr);
    cr_expect_str_eq(pair_failure(pr.D, 7).text, f.text);
    cr_expect_eq(pair_info(pr.D, 7).pages, KVX_PAGES_RELEASED);
}

Test(deadline, transfer_on_the_decode, .init = pair_setup, .fini = pair_teardown)
{
    kvx_failure_t f;

    start_both(7);
    pass(pr.D, PAIR_TRANSFER_TIMEOUT + KVX_NS_PER_S);
    f = pair_failure(pr.D, 7);
    expect_failure(f, KVX_ERR_TIMEOUT, KVX_STAGE_TRANSFER, 1, NULL);
    cr_expect(strstr(f.text, "s waiting for every writer to complete (state deadline)"), "%s",
              f.text);
    next(pr.P, MSG_FAIL);
    expect_failure(pair_failure(pr.P, 7), KVX_ERR_TIMEOUT, KVX_STAGE_TRANSFER, 1, f.text);
    cr_expect_eq(fake_ucx.flushes, 1, "the failed room's puts were flushed");
    next(pr.D, MSG_FAIL); /* its own record, told back */
    next(pr.D, MSG_DRAINED);
    cr_expect_eq(pair_info(pr.D, 7).pages, KVX_PAGES_RELEASED);
}

Test(deadline, transfer_on_the_prefill, .init = pair_setup, .fini = pair_teardown)
{
    kvx_failure_t f;

    fake_ucx.put_mode = FAKE_DEFER;
    start_both(7);
    pass(pr.P, PAIR_TRANSFER_TIMEOUT + KVX_NS_PER_S);
    f = pair_failure(pr.P, 7);
    expect_failure(f, KVX_ERR_TIMEOUT, KVX_STAGE_TRANSFER, 0, NULL);
    /* Page 2 of the room was never handed over: that is what it waits for
     * (the puts of pages 0 and 1 are still deferred too). */
    cr_expect(strstr(f.text, "s waiting for the application to hand over the rest of 2 layers "
                             "(0..1; 4 of 6 (page, layer)s handed over) (state deadline)"),
              "%s", f.text);
    cr_expect_eq(room_close(pr.P, 7), KVX_ERR_BUSY, "UCX may still read the source pages");
}

/* Pages of some layers never handed over: the deadline says which. */
Test(deadline, transfer_with_layers_missing, .init = pair_setup, .fini = pair_teardown)
{
    kvx_failure_t f;

    start_both(7);
    cr_assert_eq(kvx_room_send_layers(pr.P, 7, SRC + 2, 1, 1, 1, NULL, NULL, 0), KVX_OK);
    pass(pr.P, PAIR_TRANSFER_TIMEOUT + KVX_NS_PER_S);
    f = pair_failure(pr.P, 7);
    expect_failure(f, KVX_ERR_TIMEOUT, KVX_STAGE_TRANSFER, 0, NULL);
    cr_expect(strstr(f.text, "waiting for the application to hand over the rest of 1 layer (0..0; "
                             "5 of 6 (page, layer)s handed over) (state deadline)"),
              "%s", f.text);
}

Test(deadline, none_once_every_page_is_delivered, .init = pair_setup, .fini = pair_teardown)
{

    open_both(7);
    cr_assert_eq(p_chunk(7, SRC, 3, NULL), KVX_OK);
    /* DONE went out; the decode's RECEIVED is held back. */
    pass(pr.P, PAIR_TRANSFER_TIMEOUT + KVX_NS_PER_S);
    cr_expect_eq(pair_state(pr.P, 7), KVX_ROOM_TRANSFERRING, "the decode decides");
    pair_as(pr.P);
    cr_expect_eq(kvx_room_abort(pr.P, 7, "late"), KVX_ERR_STATE);
    cr_expect_str_eq(last_error().text,
                     "abort refused: every page was delivered; the decode decides the outcome");
    pair_deliver(&pr);
    cr_expect_eq(pair_state(pr.P, 7), KVX_ROOM_SUCCESS);
}

/* The prefill's closed incarnations (sender_bury()): the latest
 * KVX_DEAD_NONCES of them are stale (their late messages are dropped), an
 * older one is not, a nonce buried twice takes one place, and every entry
 * stays found as entries come and go. The nonces are pseudo-random (as
 * rank << 32 | count spreads too evenly to make the set probe): entries
 * share slots, and an eviction that broke a probe run would lose one. */
static uint64_t bury_one(uint64_t nonce)
{
    room_t room;
    target_t t;

    memset(&room, 0, sizeof(room));
    memset(&t, 0, sizeof(t));
    room.side = KVX_ROLE_PREFILL;
    room.targets = &t;
    room.ntargets = 1;
    t.nonce = nonce;
    sender_bury(pr.P, &room);
    return nonce;
}

static int stale(uint64_t nonce)
{
    return sender_msg_stale(pr.P, NULL, &pr.P->peers[1], nonce);
}

Test(stale, the_latest_closed_incarnations, .init = pair_setup, .fini = pair_teardown)
{
    enum { N = 4 * KVX_DEAD_NONCES };
    uint64_t *nonce = malloc(N * sizeof(uint64_t)), x = 88172645463325252ull;

    cr_assert_not_null(nonce);
    for (int k = 0; k < N; k++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        nonce[k] = x;
    }
    bury_one(nonce[0]);
    bury_one(nonce[0]);
    for (int k = 1; k < KVX_DEAD_NONCES; k++) {
        bury_one(nonce[k]);
    }
    for (int k = 0; k < KVX_DEAD_NONCES; k++) {
        cr_assert_eq(stale(nonce[k]), 1, "nonce %d of %d", k, KVX_DEAD_NONCES);
    }
    cr_expect_eq(stale(nonce[KVX_DEAD_NONCES]), 0, "never buried");
    /* Three times over: every nonce evicts the oldest; the last
     * KVX_DEAD_NONCES stay found, the rest are gone. */
    for (int k = KVX_DEAD_NONCES; k < N; k++) {
        bury_one(nonce[k]);
        cr_assert_eq(stale(nonce[k - KVX_DEAD_NONCES]), 0, "nonce %d evicted", k - KVX_DEAD_NONCES);
        cr_assert_eq(stale(nonce[k - KVX_DEAD_NONCES + 1]), 1, "nonce %d kept",
                     k - KVX_DEAD_NONCES + 1);
    }
    for (int k = 0; k < N; k++) {
        cr_assert_eq(stale(nonce[k]), k >= N - KVX_DEAD_NONCES, "nonce %d", k);
    }
    cr_expect_eq(stale(0), 0, "a FAIL before the grant names no incarnation");
    free(nonce);
}
