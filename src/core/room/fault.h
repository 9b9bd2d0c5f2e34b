/*
 * fault.h - injected faults (KVX_FAULT rules).
 */
#ifndef KVX_CORE_FAULT_H
#define KVX_CORE_FAULT_H

#include <kvx.h>

#include "core/ctx/ctx.h"

#include <stdint.h>

typedef enum fault_effect {
    FAULT_NONE = 0,
    FAULT_FAIL,
    FAULT_DELAY,
    FAULT_DROP,
    FAULT_KILL,
    FAULT_STALL,  /* holds the calling thread (and the locks it holds); never returned */
    FAULT_CORRUPT /* stage verify, decode: flips a byte of what landed before it is checked */
} fault_effect_t;

typedef struct fault_action {
    fault_effect_t effect;
    kvx_failure_t failure; /* FAULT_FAIL: the injected failure, tagged injected */
    uint64_t delay_ns;     /* FAULT_DELAY */
} fault_action_t;

kvx_status_t fault_parse(const char *spec, struct fault_set **set_p, kvx_failure_t *why);
void fault_free(struct fault_set *set);
/* Evaluates the rules at a stage of room id (once per room and stage:
 * *seen, the room's fault_seen, keeps the stages done). FAULT_KILL does not
 * return. */
fault_effect_t fault_eval(kvx_ctx_t *ctx, kvx_stage_t stage, uint64_t id, unsigned *seen,
                          fault_action_t *act);
/* The cheap test every hook makes first: fault_at(ctx, stage, room->id,
 * &room->fault_seen, &act). */
static inline fault_effect_t fault_at(kvx_ctx_t *ctx, kvx_stage_t stage, uint64_t id,
                                      unsigned *seen, fault_action_t *act)
{
    if (__builtin_expect(ctx->faults == NULL, 1)) {
        return FAULT_NONE;
    }
    return fault_eval(ctx, stage, id, seen, act);
}

#endif
