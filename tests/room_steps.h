/*
 * room_steps.h - the steps the tests of the room machines share
 * (tests/test_room.c, tests/test_room_events.c): the kvx_room_* calls made
 * as the rank they are made on, message delivery with criterion's checks,
 * and rooms brought to a state. They work on one pair, pr, which
 * pair_setup() builds and pair_teardown() destroys (a test's .init and
 * .fini).
 */
#ifndef KVX_TESTS_ROOM_STEPS_H
#define KVX_TESTS_ROOM_STEPS_H

#include "room_pair.h"

#include <stddef.h>
#include <stdint.h>

extern pair_t pr;

/* The prefill's source pages and the decode's grant of the rooms that
 * open_both() opens (3 pages, aux slot 1). */
extern const uint32_t SRC[3];
extern const uint32_t DST[3];

void pair_setup(void);
void pair_teardown(void);
/* The calls, as the rank they are made on (instance 0 of the other role). */
kvx_status_t d_open(uint64_t id, const uint32_t *pages, size_t n, int64_t aux_slot);
kvx_status_t p_open(uint64_t id, size_t total);
kvx_status_t p_chunk(uint64_t id, const uint32_t *pages, size_t n, const char *aux);
kvx_status_t room_close(kvx_ctx_t *ctx, uint64_t id);
kvx_status_t room_abort(kvx_ctx_t *ctx, uint64_t id, const char *reason);
/* kvx_last_error(): why the last call was refused. */
kvx_failure_t last_error(void);
/* The incarnation (nonce) of the decode's open room id. */
uint64_t d_nonce(uint64_t id);
/* Takes the oldest message to ctx, which must be of the type. */
fake_msg_t *take(kvx_ctx_t *to, int type);
/* Delivers the oldest message to ctx, which must be of the type. */
void next(kvx_ctx_t *to, int type);
/* Delivers a message made here (as if sent by the other side). */
void inject(kvx_ctx_t *to, void *buf, size_t len);
/* Checks a failure record: status, stage, origin (rank 0 is the prefill,
 * rank 1 the decode) and, unless NULL, the text. */
void expect_failure(kvx_failure_t f, kvx_status_t status, kvx_stage_t stage, int origin,
                    const char *text);
int starts_with(const char *s, const char *prefix);
/* Lets ns pass: ctx hears from its peer (it stays alive), then ticks. */
void pass(kvx_ctx_t *ctx, uint64_t ns);
/* Opens room id on both sides and exchanges the grant: both WAITING_FOR_INPUT. */
void open_both(uint64_t id);
/* Hands over the first two pages: both TRANSFERRING. */
void start_both(uint64_t id);

#endif
