/*
 * stream.c - a stream of rooms from prefill instance 0 to decode instance 0,
 * at most a window of rooms open on a rank at once, as a serving engine
 * would run them: the decode pre-allocates, the prefill hands its pages over
 * in one chunk with an 8-byte aux row (the room id), and each side closes a
 * room as soon as it is SUCCESS and opens the next one in its place.
 *
 * The first window of rooms is opened on both sides, and granted, before
 * the clock starts: the clock covers data that is ready on the prefill and
 * pages that are waiting on the decode. It stops on a decode rank when its
 * last room is SUCCESS there (the data has landed and the decode knows it),
 * not when a put completes on the prefill.
 */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

typedef struct lane {
    int room; /* index of the room open in this lane, -1 for none */
} lane_t;

typedef struct stream {
    kvx_ctx_t *ctx;
    const stream_spec_t *s;
    stream_result_t *r;
    kvx_identity_t id;
    lane_t *lanes;
    int done;
    double t_last;
} stream_t;

static void stream_error(stream_t *st, const char *fmt, const char *what, uint64_t room)
{
    if (st->r->error[0] == '\0') {
        snprintf(st->r->error, sizeof(st->r->error), fmt, what, (unsigned long long)room);
    }
}

/* Opens room index in lane j: the decode grants, the prefill announces. */
static void stream_open(stream_t *st, int j, int index)
{
    const stream_spec_t *s = st->s;
    uint64_t id = s->first_id + (uint64_t)index;
    int slot = index % s->nslots;
    kvx_status_t rc;

    if (st->id.role == KVX_ROLE_DECODE) {
        rc = kvx_room_recv_open(st->ctx, id, 0, s->dst[slot], s->npages, j);
    } else {
        rc = kvx_room_send_open(st->ctx, id, 0, s->npages);
    }
    st->lanes[j].room = rc == KVX_OK ? index : -1;
    if (rc != KVX_OK) {
        /* The lane is lost: its rooms from here on count as done (failed). */
        stream_error(st, "open: %s (room %llu)", kvx_status_name(rc), id);
        st->done += (s->nrooms - 1 - index) / s->window + 1;
    }
}

/* The prefill hands the room's pages over in one chunk. */
static void stream_send(stream_t *st, int j)
{
    const stream_spec_t *s = st->s;
    int index = st->lanes[j].room;
    uint64_t id = s->first_id + (uint64_t)index;
    kvx_status_t rc;

    if (index < 0 || st->id.role != KVX_ROLE_PREFILL) {
        return;
    }
    rc = kvx_room_send_chunk(st->ctx, id, s->src[index % s->nslots], s->npages, &id, sizeof(id));
    if (rc != KVX_OK) {
        stream_error(st, "send_chunk: %s (room %llu)", kvx_status_name(rc), id);
    }
}

/* A room that ended: checked, counted, closed; its lane takes the next. */
static void stream_conclude(stream_t *st, int j, kvx_room_state_t state)
{
    const stream_spec_t *s = st->s;
    int index = st->lanes[j].room;
    uint64_t id = s->first_id + (uint64_t)index, aux = 0;
    size_t len = 0;
    kvx_failure_t f;
    char line[256];

    st->t_last = bench_now();
    if (state == KVX_ROOM_SUCCESS) {
        st->r->ok_rooms++;
    } else if (kvx_room_failure(st->ctx, id, &f) == KVX_OK) {
        kvx_failure_format(&f, line, sizeof(line));
        stream_error(st, "%s (room %llu)", line, id);
    }
    if (state == KVX_ROOM_SUCCESS && st->id.role == KVX_ROLE_DECODE &&
        (kvx_room_aux(st->ctx, id, &aux, sizeof(aux), &len) != KVX_OK || aux != id)) {
        st->r->bad_aux++;
    }
    bench_room_close(st->ctx, id);
    st->done++;
    st->lanes[j].room = -1;
    if (index + s->window < s->nrooms) {
        stream_open(st, j, index + s->window);
        stream_send(st, j);
    }
}

/* One pass over the lanes; returns how many rooms ended. */
static int stream_poll(stream_t *st)
{
    int ended = 0;

    for (int j = 0; j < st->s->window; j++) {
        kvx_room_state_t state;
        uint64_t id = st->s->first_id + (uint64_t)st->lanes[j].room;

        if (st->lanes[j].room < 0 || kvx_room_poll(st->ctx, id, &state) != KVX_OK) {
            continue;
        }
        if (state == KVX_ROOM_SUCCESS || state == KVX_ROOM_FAILED) {
            stream_conclude(st, j, state);
            ended++;
        }
    }
    return ended;
}

/* Before the clock: the prefill's first rooms are granted. */
static void stream_wait_granted(stream_t *st, double limit)
{
    double start = bench_now();

    for (int j = 0; j < st->s->window && st->id.role == KVX_ROLE_PREFILL; j++) {
        kvx_room_state_t state = KVX_ROOM_BOOTSTRAPPING;
        uint64_t id = st->s->first_id + (uint64_t)st->lanes[j].room;

        while (st->lanes[j].room >= 0 && kvx_room_poll(st->ctx, id, &state) == KVX_OK &&
               state == KVX_ROOM_BOOTSTRAPPING && bench_now() - start < limit) {
            bench_sleep_us(100);
        }
    }
}

/* Rooms still open at the deadline are aborted and closed. */
static void stream_give_up(stream_t *st)
{
    for (int j = 0; j < st->s->window; j++) {
        uint64_t id = st->s->first_id + (uint64_t)st->lanes[j].room;

        if (st->lanes[j].room >= 0) {
            stream_error(st, "%s (room %llu)", "not concluded in time", id);
            kvx_room_abort(st->ctx, id, "kvx-bench: deadline");
            bench_room_close(st->ctx, id);
            st->lanes[j].room = -1;
        }
    }
}

/* What the context sent between two snapshots of its counters: puts,
 * packed puts and data messages, and their bytes. */
static void stream_sent(const kvx_stats_t *a, const kvx_stats_t *b, stream_result_t *r)
{
    static const kvx_xfer_kind_t kinds[] = { KVX_XFER_PUT, KVX_XFER_PACKED_PUT, KVX_XFER_MSG_SENT };

    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        r->puts += b->ops[kinds[k]] - a->ops[kinds[k]];
        r->bytes += b->bytes[kinds[k]] - a->bytes[kinds[k]];
    }
}

void stream_run(kvx_ctx_t *ctx, MPI_Comm comm, const stream_spec_t *s, stream_result_t *r)
{
    stream_t st = { ctx, s, r, { 0 }, NULL, 0, 0 };
    kvx_stats_t *before = malloc(sizeof(*before)), *after = malloc(sizeof(*after));
    int first = s->window < s->nrooms ? s->window : s->nrooms;
    double t0;

    memset(r, 0, sizeof(*r));
    kvx_ctx_identity(ctx, &st.id);
    kvx_ctx_stats(ctx, before);
    st.lanes = malloc(sizeof(lane_t) * (size_t)s->window);
    for (int j = 0; j < s->window; j++) {
        st.lanes[j].room = -1;
    }
    for (int j = 0; j < first; j++) {
        stream_open(&st, j, j);
    }
    stream_wait_granted(&st, s->limit_s);
    MPI_Barrier(comm);
    t0 = bench_now();
    st.t_last = t0;
    for (int j = 0; j < first; j++) {
        stream_send(&st, j);
    }
    while (st.done < s->nrooms) {
        if (stream_poll(&st) == 0) {
            if (bench_now() - t0 > s->limit_s) {
                stream_give_up(&st);
                break;
            }
            bench_sleep_us(s->poll_us);
        }
    }
    r->seconds = st.t_last - t0;
    kvx_ctx_stats(ctx, after);
    stream_sent(before, after, r);
    free(before);
    free(after);
    free(st.lanes);
}
