/*
 * t_partition.c - rooms between two hosts while the data network between them
 * fails. mpi_tests/netns/t_kvx_netfault.sh runs it with the prefill instance
 * on one network-namespace host and the decode instance on another
 * (KVX_LAYOUT=prefill:1x2,decode:1x2) and faults the data link under it.
 *
 *   t_partition cut DIR [BOUND]   rooms flow in waves until the script cuts
 *                     the data link (link down, or every packet dropped): every
 *                     rank fails the rooms in flight, locally and agreed by its
 *                     instance, within BOUND seconds (default 2) of the fault,
 *                     with a reason that names a rank across the cut as lost;
 *                     every TP rank of an instance holds the same outcome and
 *                     root cause for every room; rooms that ended SUCCESS are
 *                     byte-exact.
 *   t_partition flap DIR [SECONDS]  rooms flow for SECONDS (default 5) after
 *                     they started while the script takes the link down and
 *                     brings it back: every room ends SUCCESS byte-exact or
 *                     FAILED with a reason, the same on every TP rank of its
 *                     instance, and no wave of rooms stays open 10 s (a hang).
 *
 * With the script, through DIR (one directory every host sees): rank 0
 * creates DIR/flowing once rooms flow; the script writes into DIR/fault the
 * wall-clock times (CLOCK_REALTIME, seconds) just before and just after its
 * fault command. MPI runs over the control link, which stays up, so every
 * rank meets the others at the end: rank 0 prints one line per rank, checks
 * them, and the exit status says whether all held.
 */
#include <kvx.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

int tl_rank, tl_failures;

#define WAVE       8    /* rooms in flight together */
#define PAGES      16   /* per room */
#define BLOCKS     4    /* page blocks of WAVE rooms, used in turn */
#define WAVE_LIMIT 10.0 /* s: a wave still open after this counts as a hang */
#define CUT_LIMIT  30.0 /* s: cut gives up waiting for the fault */
#define MAX_WAVES  1000
#define FIRST_ROOM 1000 /* the first room's id */

typedef struct job {
    tl_job_t t;                                 /* the context, its pages' geometry */
    double opened[MAX_WAVES], ended[MAX_WAVES]; /* when each wave's rooms opened, concluded */
} job_t;

/* What one rank saw; rank 0 gathers them. Times are CLOCK_REALTIME. */
typedef struct seen {
    double first_failed, first_agreed, flowing_at;
    int success, failed, bad_reason, mismatched, hung, waves, quarantined;
    int inflight, inflight_ok; /* rooms open when the fault began; of them SUCCESS */
    uint64_t outcome_hash;     /* every room's id, agreed state and root cause */
    uint64_t first_room;       /* the first FAILED room */
    char reason[384];          /* its root cause, as agreed */
    char host[32];
    char states[MAX_WAVES * WAVE]; /* per room: 'S' SUCCESS, 'F' FAILED, 0 not concluded */
} seen_t;

static double wall_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
    }
    return h;
}

static void job_start(job_t *j)
{
    kvx_ctx_params_t p;

    memset(j, 0, sizeof(*j));
    kvx_ctx_params_init(&p);
    p.kv.layers = 2;
    p.kv.page_size = 16;
    p.kv.kv_heads = 4;
    p.kv.head_dim = 64;
    p.num_pages = BLOCKS * WAVE * PAGES;
    p.aux_slots = BLOCKS * WAVE;
    p.aux_item_size = sizeof(uint64_t);
    tl_job_start(&j->t, &p);
    if (j->t.id.prefill_instances != 1 || j->t.id.decode_instances != 1) {
        fprintf(stderr, "t_partition: needs one prefill and one decode instance\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

static int is_prefill(const job_t *j)
{
    return j->t.id.role == KVX_ROLE_PREFILL;
}

static uint32_t *room_pages(int block, int i, uint32_t *pages)
{
    for (int p = 0; p < PAGES; p++) {
        pages[p] = (uint32_t)((block * WAVE + i) * PAGES + p);
    }
    return pages;
}

typedef struct wave {
    uint64_t ids[WAVE];
    int block; /* its pages: block * WAVE * PAGES onwards */
} wave_t;

static void wave_init(wave_t *w, int k)
{
    for (int i = 0; i < WAVE; i++) {
        w->ids[i] = FIRST_ROOM + (uint64_t)k * WAVE + (uint64_t)i;
    }
    w->block = k % BLOCKS;
}

/* The decode grants the pages; the prefill computes them and sends them in
 * two chunks. A room that already failed (its peer is lost) refuses chunks. */
static void open_wave(job_t *j, const wave_t *w)
{
    uint32_t pages[PAGES];

    for (int i = 0; i < WAVE; i++) {
        uint64_t id = w->ids[i], aux = kvp_aux(id);
        kvx_status_t st;

        room_pages(w->block, i, pages);
        if (!is_prefill(j)) {
            st = kvx_room_recv_open(j->t.ctx, id, 0, pages, PAGES, w->block * WAVE + i);
            TL_CHECK(st == KVX_OK, "recv_open %llu: %s", (unsigned long long)id,
                     kvx_status_name(st));
            continue;
        }
        st = kvx_room_send_open(j->t.ctx, id, 0, PAGES);
        TL_CHECK(st == KVX_OK, "send_open %llu: %s", (unsigned long long)id, kvx_status_name(st));
        kvp_pages(&j->t.g, j->t.bufs, 2, id, pages, PAGES, 0, 1);
        st = kvx_room_send_chunk(j->t.ctx, id, pages, PAGES / 2, NULL, 0);
        if (st == KVX_OK) {
            st = kvx_room_send_chunk(j->t.ctx, id, pages + PAGES / 2, PAGES / 2, &aux, sizeof(aux));
        }
        TL_CHECK(st == KVX_OK || st == KVX_ERR_STATE, "send_chunk %llu: %s", (unsigned long long)id,
                 kvx_status_name(st));
    }
}

/* Notes when this rank first saw one of the wave's rooms FAILED. */
static void note_failed(job_t *j, const wave_t *w, seen_t *s)
{
    for (int i = 0; w != NULL && i < WAVE && s->first_failed == 0; i++) {
        kvx_room_state_t rs;

        if (kvx_room_poll(j->t.ctx, w->ids[i], &rs) == KVX_OK && rs == KVX_ROOM_FAILED) {
            s->first_failed = wall_now();
        }
    }
}

/* Polls and agrees until every room of the wave concluded on every TP rank
 * of this instance, noting when this rank first saw a room FAILED, locally
 * (in this wave or in ahead, the one the decode granted ahead) and agreed.
 * Returns 0 when WAVE_LIMIT passed first (a hang). */
static int conclude_wave(job_t *j, const wave_t *w, const wave_t *ahead, kvx_agreed_t *out,
                         seen_t *s)
{
    MPI_Comm tp = kvx_ctx_tp_comm(j->t.ctx);
    double start = wall_now();

    for (;;) {
        int done = 1, all = 0, hung;
        kvx_status_t st;

        note_failed(j, w, s);
        note_failed(j, ahead, s);
        st = tl_agree_round(j->t.ctx, w->ids, WAVE, out);
        TL_CHECK(st == KVX_OK, "agreement round: %s", kvx_status_name(st));
        for (int i = 0; i < WAVE; i++) {
            done &= out[i].status == KVX_OK &&
                    (out[i].state == KVX_ROOM_SUCCESS || out[i].state == KVX_ROOM_FAILED);
            if (out[i].status == KVX_OK && out[i].state == KVX_ROOM_FAILED &&
                s->first_agreed == 0) {
                /* Agreed FAILED is FAILED here too. */
                s->first_agreed = wall_now();
                s->first_failed = s->first_failed ? s->first_failed : s->first_agreed;
            }
        }
        done = done ? 1 : wall_now() - start > WAVE_LIMIT ? 2 : 0;
        MPI_Allreduce(&done, &all, 1, MPI_INT, MPI_MIN, tp);
        if (all >= 1) {
            hung = done == 2;
            MPI_Allreduce(MPI_IN_PLACE, &hung, 1, MPI_INT, MPI_MAX, tp);
            return !hung;
        }
        usleep(200);
    }
}

/* Does the reason name a rank of the other instance as lost? */
static int names_lost_peer(const job_t *j, const char *text)
{
    const char *other = is_prefill(j) ? "decode" : "prefill";
    int first = is_prefill(j) ? j->t.id.prefill_tp : 0;
    int n = is_prefill(j) ? j->t.id.decode_tp : j->t.id.prefill_tp;
    char want[96];

    for (int t = 0; t < n; t++) {
        snprintf(want, sizeof(want), "peer %s[0].tp%d (rank %d) lost: ", other, t, first + t);
        if (strstr(text, want) != NULL) {
            return 1;
        }
    }
    return 0;
}

/* A FAILED room: its agreed root cause, checked (on a cut it must name a
 * rank across the cut as lost) and added to what this rank saw. */
static void failed_room(job_t *j, uint64_t id, int cut, seen_t *s)
{
    kvx_failure_t f;
    char line[512] = "";

    s->failed++;
    if (kvx_room_failure(j->t.ctx, id, &f) != KVX_OK || f.text[0] == '\0') {
        TL_CHECK(0, "room %llu FAILED without a reason", (unsigned long long)id);
        s->bad_reason++;
        return;
    }
    f.count = 0; /* each instance counts its own ranks */
    kvx_failure_format(&f, line, sizeof(line));
    s->outcome_hash = hash_bytes(s->outcome_hash, line, strlen(line));
    if (cut && !names_lost_peer(j, f.text)) {
        TL_CHECK(0, "room %llu: the reason names no lost peer across the cut: %s",
                 (unsigned long long)id, line);
        s->bad_reason++;
    }
    if (s->first_room == 0) {
        s->first_room = id;
        snprintf(s->reason, sizeof(s->reason), "%s", line);
    }
}

/* Checks each room's outcome (unless the test aborted it), adds it to what
 * this rank saw, closes it. Returns 1 when a room left its pages
 * quarantined: they cannot be granted again. */
static int finish_wave(job_t *j, const wave_t *w, const kvx_agreed_t *out, int cut, int counted,
                       seen_t *s)
{
    uint32_t pages[PAGES];
    int quarantined = 0;

    for (int i = 0; i < WAVE; i++) {
        uint64_t id = w->ids[i];
        double start = wall_now();
        kvx_status_t st;

        if (counted) {
            s->outcome_hash = hash_bytes(s->outcome_hash, &id, sizeof(id));
            s->outcome_hash = hash_bytes(s->outcome_hash, &out[i].state, sizeof(out[i].state));
            s->states[id - FIRST_ROOM] = out[i].state == KVX_ROOM_SUCCESS ? 'S' : 'F';
        }
        if (counted && out[i].state == KVX_ROOM_SUCCESS) {
            s->success++;
            if (!is_prefill(j)) {
                uint64_t aux = 0;
                size_t len = 0, bad = kvp_pages(&j->t.g, j->t.bufs, 2, id,
                                                room_pages(w->block, i, pages), PAGES, 0, 0);

                bad += kvx_room_aux(j->t.ctx, id, &aux, sizeof(aux), &len) != KVX_OK ||
                       aux != kvp_aux(id);
                TL_CHECK(bad == 0, "room %llu: %zu bytes differ", (unsigned long long)id, bad);
                s->mismatched += (int)bad;
            }
        } else if (counted) {
            failed_room(j, id, cut, s);
        }
        while ((st = kvx_room_close(j->t.ctx, id)) == KVX_ERR_BUSY && wall_now() - start < 10) {
            usleep(1000);
        }
        quarantined |= st == KVX_ERR_QUARANTINED;
        TL_CHECK(st == KVX_OK || st == KVX_ERR_QUARANTINED, "close %llu: %s",
                 (unsigned long long)id, kvx_status_name(st));
    }
    s->quarantined += quarantined;
    return quarantined;
}

static void mark_flowing(const char *dir, seen_t *s)
{
    char path[4096];
    FILE *f;

    snprintf(path, sizeof(path), "%s/flowing", dir);
    f = fopen(path, "w");
    TL_CHECK(f != NULL, "cannot create %s", path);
    if (f != NULL) {
        fclose(f);
    }
    s->flowing_at = wall_now();
}

/* MAX of *val over the world, polling the rooms of ahead meanwhile: a
 * blocking collective would hide when they fail. */
static void world_max(job_t *j, int *val, const wave_t *ahead, seen_t *s)
{
    MPI_Request req;
    int flag = 0;

    MPI_Iallreduce(MPI_IN_PLACE, val, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req);
    while (!flag) {
        note_failed(j, ahead, s);
        MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        if (!flag) {
            usleep(200);
        }
    }
}

/* Waves of rooms until the cut failed some (cut) or arg seconds after they
 * started to flow (flap). The decode grants each wave one wave ahead, as a
 * decode server grants pages before the prefill computes them, so both
 * sides always hold rooms in flight. */
static void run_waves(job_t *j, int cut, double arg, const char *dir, seen_t *s)
{
    wave_t cur, next;
    kvx_agreed_t out[WAVE];
    seen_t before;
    double start = wall_now();
    int stop = 0, failed = 0;

    wave_init(&cur, 0);
    if (!is_prefill(j)) {
        j->opened[0] = wall_now();
        open_wave(j, &cur);
    }
    while (!stop) {
        int ok, k = s->waves;

        wave_init(&next, k + 1);
        j->opened[is_prefill(j) ? k : k + 1] = wall_now();
        open_wave(j, is_prefill(j) ? &cur : &next);
        ok = conclude_wave(j, &cur, is_prefill(j) ? NULL : &next, out, s);
        j->ended[k] = wall_now();
        s->hung += !ok;
        TL_CHECK(ok, "rooms %llu..%llu still open after %.0f s", (unsigned long long)cur.ids[0],
                 (unsigned long long)cur.ids[WAVE - 1], WAVE_LIMIT);
        stop = finish_wave(j, &cur, out, cut, 1, s);
        if (++s->waves == 3 && tl_rank == 0) {
            mark_flowing(dir, s);
        }
        failed = s->failed > 0;
        stop |= !ok || s->waves + 1 >= MAX_WAVES || (cut && failed) ||
                (cut && wall_now() - start > CUT_LIMIT) ||
                (!cut && s->flowing_at > 0 && wall_now() - s->flowing_at > arg);
        world_max(j, &stop, is_prefill(j) ? NULL : &next, s);
        cur = next;
    }
    /* The wave the decode granted ahead: on a cut its rooms fail by
     * themselves, the peers being lost; otherwise the test aborts them, and
     * what that makes of them (here, or on a TP sibling that aborts first)
     * is not the test's. */
    before = *s;
    world_max(j, &failed, is_prefill(j) ? NULL : &cur, s);
    if (!is_prefill(j) && cut && failed) {
        s->hung += !conclude_wave(j, &cur, NULL, out, s);
        j->ended[s->waves] = wall_now();
        finish_wave(j, &cur, out, cut, 1, s);
    } else if (!is_prefill(j)) {
        for (int i = 0; i < WAVE; i++) {
            kvx_room_abort(j->t.ctx, cur.ids[i], "the test is over");
        }
        before.hung += !conclude_wave(j, &cur, NULL, out, s);
        *s = before;
        j->opened[s->waves] = 0;
        finish_wave(j, &cur, out, cut, 0, s);
    }
}

/* The rooms this rank held open while the fault began (their wave opened
 * before the fault command ended and concluded after it started), and how
 * many of them ended SUCCESS. */
static void count_inflight(const job_t *j, double t0, double t1, seen_t *s)
{
    for (int k = 0; k <= s->waves && k < MAX_WAVES && t0 > 0; k++) {
        if (j->opened[k] > 0 && j->opened[k] < t1 && j->ended[k] > t0) {
            for (int i = 0; i < WAVE; i++) {
                s->inflight++;
                s->inflight_ok += s->states[(size_t)k * WAVE + (size_t)i] == 'S';
            }
        }
    }
}

/* DIR/fault: the wall-clock times just before and just after the fault
 * command and, after a flap, just after the link came back (else 0). The
 * script writes it once the fault is made, also when the rooms already
 * ended (they failed before it): waits for it up to 10 s. */
static void read_fault(const char *dir, double t[3])
{
    char path[4096];
    double start = wall_now();
    int n = 0;

    snprintf(path, sizeof(path), "%s/fault", dir);
    do {
        FILE *f = fopen(path, "r");

        t[0] = t[1] = t[2] = 0;
        if (f != NULL) {
            n = fscanf(f, "%lf %lf %lf", &t[0], &t[1], &t[2]);
            fclose(f);
        }
        if (n < 2) {
            t[0] = t[1] = 0;
            usleep(50000);
        }
    } while (n < 2 && wall_now() - start < 10);
}

/* How the two instances concluded the rooms both hold. Across a cut they
 * cannot always agree: a decode that received every page concludes SUCCESS
 * while the prefill, not hearing so before the cut, fails the room. */
static void report_sides(const seen_t *p, const seen_t *d)
{
    int n[4] = { 0, 0, 0, 0 }; /* same, S on decode only, F on decode only, one side only */

    for (size_t i = 0; i < sizeof(p->states); i++) {
        if (p->states[i] == 0 || d->states[i] == 0) {
            n[3] += p->states[i] != d->states[i];
        } else {
            n[p->states[i] == d->states[i] ? 0 : d->states[i] == 'S' ? 1 : 2]++;
        }
    }
    printf("# instances: %d rooms concluded alike on both; %d SUCCESS on the decode but FAILED on "
           "the prefill; %d FAILED on the decode but SUCCESS on the prefill; %d held by one "
           "side only\n",
           n[0], n[1], n[2], n[3]);
}

/* Rank 0: one line per rank, and the checks across ranks. */
static void report(const job_t *j, const seen_t *all, int size, int cut, double bound,
                   const double t[3])
{
    TL_CHECK(t[0] > 0, "no fault time: did the script fault the link?");
    TL_CHECK(cut || t[2] > 0, "no time the link came back: did the script restore it?");
    printf("# fault command ran from %.3f to %.3f s after the rooms started to flow",
           t[0] - all[0].flowing_at, t[1] - all[0].flowing_at);
    if (!cut) {
        printf("; the link was back %.3f s after the fault", t[2] - t[0]);
    }
    printf("\n# %-4s %-4s %-16s %5s %7s %6s %9s %9s %9s %9s  %s\n", "rank", "host", "instance",
           "waves", "SUCCESS", "FAILED", "in flight", "of them S", "fault->F", "->agreed",
           "first failed room: agreed root cause");
    for (int r = 0; r < size; r++) {
        const seen_t *s = &all[r];
        double lf = s->first_failed > 0 && t[0] > 0 ? s->first_failed - t[0] : -1;
        double af = s->first_agreed > 0 && t[0] > 0 ? s->first_agreed - t[0] : -1;
        int prefill = r < j->t.id.prefill_tp;
        int tp = prefill ? r : r - j->t.id.prefill_tp;

        printf("  %-4d %-4s %-7s[0].tp%-4d %5d %7d %6d %9d %9d %8.3fs %8.3fs  %s\n", r, s->host,
               prefill ? "prefill" : "decode", tp, s->waves, s->success, s->failed, s->inflight,
               s->inflight_ok, lf, af, s->first_room ? s->reason : "-");
        if (cut) {
            TL_CHECK(s->failed > 0, "rank %d failed no room after the cut", r);
            TL_CHECK(s->first_failed >= t[0] || s->first_failed == 0,
                     "rank %d: a room FAILED %.3f s before the fault", r, t[0] - s->first_failed);
            TL_CHECK(lf >= 0 && lf <= bound, "rank %d: FAILED %.3f s after the fault (bound %.1f)",
                     r, lf, bound);
            TL_CHECK(af >= 0 && af <= bound,
                     "rank %d: agreed FAILED %.3f s after the fault (bound %.1f)", r, af, bound);
        } else {
            TL_CHECK(s->inflight > 0, "rank %d held no room while the link was down", r);
        }
        /* Every TP rank of an instance concluded every room alike. */
        TL_CHECK(s->outcome_hash == all[prefill ? 0 : j->t.id.prefill_tp].outcome_hash,
                 "rank %d concluded rooms differently from its instance's tp0", r);
    }
    report_sides(&all[0], &all[j->t.id.prefill_tp]);
}

int main(int argc, char **argv)
{
    static job_t j;
    seen_t mine, *all = NULL;
    int cut, size, total = 0;
    double arg, t[3];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &tl_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 3 || (strcmp(argv[1], "cut") != 0 && strcmp(argv[1], "flap") != 0)) {
        fprintf(stderr, "usage: t_partition cut DIR [BOUND] | flap DIR [SECONDS]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    cut = strcmp(argv[1], "cut") == 0;
    arg = argc > 3 ? atof(argv[3]) : cut ? 2.0 : 5.0;
    memset(&mine, 0, sizeof(mine));
    gethostname(mine.host, sizeof(mine.host) - 1);
    job_start(&j);
    run_waves(&j, cut, arg, argv[2], &mine);
    /* The script wrote the fault's times while the rooms still flowed. */
    read_fault(argv[2], t);
    count_inflight(&j, t[0], cut ? t[1] : t[2], &mine);
    if (tl_rank == 0) {
        all = calloc((size_t)size, sizeof(seen_t));
    }
    MPI_Gather(&mine, sizeof(mine), MPI_BYTE, all, sizeof(mine), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (tl_rank == 0) {
        report(&j, all, size, cut, arg, t);
    }
    free(all);
    kvx_ctx_destroy(j.t.ctx);
    MPI_Allreduce(&tl_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (tl_rank == 0) {
        printf("%s\n", total == 0 ? "PASS" : "FAIL");
    }
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
