/*
 * room_steps.c - the steps of tests/room_steps.h.
 */
#include <criterion/criterion.h>
#include <kvx.h>

#include "core/base/msg.h"
#include "core/room/room.h"
#include "room_steps.h"
#include "util/failure.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

pair_t pr;

void pair_setup(void)
{
    pair_init(&pr, NULL, NULL);
}

void pair_teardown(void)
{
    pair_fini(&pr);
}

/* ---- the calls, as the rank they are made on ---------------------------- */

kvx_status_t d_open(uint64_t id, const uint32_t *pages, size_t n, int64_t aux_slot)
{
    pair_as(pr.D);
    return kvx_room_recv_open(pr.D, id, 0, pages, n, aux_slot);
}

kvx_status_t p_open(uint64_t id, size_t total)
{
    pair_as(pr.P);
    return kvx_room_send_open(pr.P, id, 0, total);
}

kvx_status_t p_chunk(uint64_t id, const uint32_t *pages, size_t n, const char *aux)
{
    pair_as(pr.P);
    return kvx_room_send_chunk(pr.P, id, pages, n, aux, aux != NULL ? strlen(aux) : 0);
}

kvx_status_t room_close(kvx_ctx_t *ctx, uint64_t id)
{
    pair_as(ctx);
    return kvx_room_close(ctx, id);
}

kvx_status_t room_abort(kvx_ctx_t *ctx, uint64_t id, const char *reason)
{
    pair_as(ctx);
    return kvx_room_abort(ctx, id, reason);
}

kvx_failure_t last_error(void)
{
    kvx_failure_t f;

    memset(&f, 0, sizeof(f));
    kvx_last_error(&f);
    return f;
}

uint64_t d_nonce(uint64_t id)
{
    room_t *room = room_find(pr.D, id);

    cr_assert_not_null(room, "decode room %llu", (unsigned long long)id);
    return room->nonce;
}

/* Takes the oldest message to ctx, which must be of the type. */
fake_msg_t *take(kvx_ctx_t *to, int type)
{
    fake_msg_t *m;

    pair_flush(&pr);
    m = fake_take(to);
    cr_assert_not_null(m, "a %s in flight", msg_type_name((msg_type_t)type));
    cr_assert_eq(fake_msg_type(m), type, "%s in flight, not %s",
                 msg_type_name((msg_type_t)fake_msg_type(m)), msg_type_name((msg_type_t)type));
    return m;
}

/* Delivers the oldest message to ctx, which must be of the type. */
void next(kvx_ctx_t *to, int type)
{
    int got = pair_deliver_one(&pr, to);

    cr_expect_eq(got, type, "delivered %s to the %s, expected %s",
                 got < 0 ? "nothing" : msg_type_name((msg_type_t)got),
                 to == pr.P ? "prefill" : "decode", msg_type_name((msg_type_t)type));
}

/* Delivers a message made here (as if sent by the other side). */
void inject(kvx_ctx_t *to, void *buf, size_t len)
{
    fake_msg_t m = { NULL, to, buf, len, NULL, 0 };

    cr_assert_not_null(buf);
    pair_deliver_msg(&pr, &m);
    free(buf);
}

void expect_failure(kvx_failure_t f, kvx_status_t status, kvx_stage_t stage, int origin,
                    const char *text)
{
    cr_expect_eq(f.status, status, "status %s, expected %s", kvx_status_name(f.status),
                 kvx_status_name(status));
    cr_expect_eq(f.stage, stage, "stage %s, expected %s", kvx_stage_name(f.stage),
                 kvx_stage_name(stage));
    cr_expect_eq(f.origin_rank, origin, "origin rank %d, expected %d", f.origin_rank, origin);
    cr_expect_eq(f.origin_role, origin == 0 ? KVX_ROLE_PREFILL : KVX_ROLE_DECODE);
    if (text != NULL) {
        cr_expect_str_eq(f.text, text);
    }
}

void pass(kvx_ctx_t *ctx, uint64_t ns)
{
    pair_advance(ns);
    pair_heard(ctx);
    pair_tick(&pr, ctx);
}

int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

const uint32_t SRC[3] = { 0, 1, 2 };
const uint32_t DST[3] = { 3, 5, 6 };

/* Opens room id on both sides and exchanges the grant: both WAITING_FOR_INPUT. */
void open_both(uint64_t id)
{
    cr_assert_eq(d_open(id, DST, 3, 1), KVX_OK);
    cr_assert_eq(p_open(id, 3), KVX_OK);
    next(pr.P, MSG_PREALLOC);
    next(pr.D, MSG_ACCEPT);
    cr_assert_eq(pair_state(pr.P, id), KVX_ROOM_WAITING_FOR_INPUT);
    cr_assert_eq(pair_state(pr.D, id), KVX_ROOM_WAITING_FOR_INPUT);
}

/* Hands over the first two pages: both TRANSFERRING. */
void start_both(uint64_t id)
{
    open_both(id);
    cr_assert_eq(p_chunk(id, SRC, 2, NULL), KVX_OK);
    next(pr.D, MSG_START);
    cr_assert_eq(pair_state(pr.P, id), KVX_ROOM_TRANSFERRING);
    cr_assert_eq(pair_state(pr.D, id), KVX_ROOM_TRANSFERRING);
}
