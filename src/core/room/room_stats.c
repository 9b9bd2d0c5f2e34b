/*
 * room_stats.c - the counters a room's events move (room_stats.h); the
 * transfer time is counted where the state changes (room_set_state()), the
 * health's walk of the room table is room_health() (room.c).
 */
#include "config.h"

#include "core/ctx/ctx.h"
#include "core/ctx/stats.h"
#include "core/room/room.h"
#include "core/room/room_stats.h"
#include "util/time.h"

void stats_room_opened(kvx_ctx_t *ctx, const room_t *room)
{
    ctx->stats->c.rooms_opened++;
}

/* Counts a room's outcome and, for FAILED, its root cause. */
static void stats_outcome(kvx_ctx_t *ctx, const room_t *room, kvx_room_state_t outcome, int agreed)
{
    stats_t *s = ctx->stats;
    uint64_t now = kvx_now_ns();
    double age = kvx_ns_to_s(now > room->opened ? now - room->opened : 0);
    const kvx_failure_t *f = &room->failure;
    unsigned stage = (unsigned)f->stage < KVX_STAGE_COUNT ? (unsigned)f->stage : KVX_STAGE_INIT;
    unsigned role = (unsigned)f->origin_role < 3 ? (unsigned)f->origin_role : KVX_ROLE_NONE;
    int st = f->status < 0 && -f->status < KVX_STATS_STATUSES ? -f->status : 0;

    s->c.rooms_agreed += agreed != 0;
    if (outcome == KVX_ROOM_SUCCESS) {
        s->c.rooms_succeeded++;
        stats_hist_add(&s->c.room_success_seconds, age);
        return;
    }
    s->c.rooms_failed++;
    s->c.failures[stage][role][st]++;
    stats_hist_add(&s->c.room_failed_seconds, age);
    s->last_fail = *f;
    s->last_fail_at = now;
}

void stats_room_concluded(kvx_ctx_t *ctx, const room_t *room)
{
    if (room->user_open && !room->closed) {
        stats_outcome(ctx, room, room->agreed_state, 1);
    }
}

void stats_room_closed(kvx_ctx_t *ctx, const room_t *room, kvx_status_t status)
{
    stats_t *s = ctx->stats;

    s->c.rooms_closed++;
    if (!room->agreed) {
        stats_outcome(ctx, room,
                      room->state == KVX_ROOM_SUCCESS ? KVX_ROOM_SUCCESS : KVX_ROOM_FAILED, 0);
    }
    if (room->side == KVX_ROLE_PREFILL && status == KVX_ERR_QUARANTINED) {
        s->c.src_pages_quarantined += room->nsrc;
    }
}

void stats_pages_quarantined(kvx_ctx_t *ctx, const room_t *room)
{
    ctx->stats->c.pages_quarantined += room->npages;
    ctx->stats->c.rooms_quarantined++;
}

void stats_pages_released(kvx_ctx_t *ctx, const room_t *room)
{
    if (room->user_open) {
        ctx->stats->c.pages_released += room->npages;
    }
}
