/*
 * t_tp.c - the scheduler contract under TP (include/kvx.h, "The scheduler
 * contract"): what a scheduler can get wrong ends on every rank in bounded
 * time with one outcome and a precise reason, or is refused at the call.
 * One mode per case (mpi_tests/cases/tp_*.mpi); each says what went wrong
 * before.
 *
 *   pages    (prefill:1x1,decode:1x1, KVX_DRAIN_TIMEOUT=1s) A page or aux slot
 *            granted to an open room, or quarantined, is refused at
 *            kvx_room_recv_open with the room holding it; a closed room's
 *            pages are free again.
 *            Before, both opens returned KVX_OK (silent KV corruption).
 *   reasons  (prefill:1x2,decode:1x2) aux=NULL with aux_len 2 is
 *            KVX_ERR_INVALID_PARAM "aux is NULL but aux_len is 2" (was: "does
 *            not fit"); kvx_last_error() gives every refusal's sentence; a
 *            round in progress writes KVX_INPROGRESS into every entry (a
 *            zeroed kvx_agreed_t read as "agreed FAILED").
 *   skew     (prefill:1x2,decode:1x2, KVX_TP_TIMEOUT=2s) decode tp0 starts one
 *            round more than tp1: both decode ranks and both prefill ranks
 *            end the room FAILED with KVX_ERR_OUT_OF_STEP "tp0 is in round 2,
 *            tp1 in round 1". Before, tp0's kvx_agree_test() was
 *            KVX_INPROGRESS forever.
 *   reuse    (prefill:1x2,decode:1x2, KVX_BOOTSTRAP_TIMEOUT=20s) the decode agrees
 *            room 900 SUCCESS, closes it and opens the id again at once; the
 *            prefill closes its room 300 ms later and opens the id again: the
 *            second room succeeds. Before, the prefill dropped the new grant
 *            ("about another incarnation") and both waited out the bootstrap
 *            deadline.
 *   aux      (prefill:1x2,decode:1x2) prefill tp1 passes no aux (room 600) or
 *            another first token (601) than tp0: the decode instance agrees
 *            FAILED (KVX_ERR_AUX) naming both decode ranks, what each holds
 *            and from which writer, and so do the prefill ranks. Before, both
 *            agreed SUCCESS and decode tp1 read 0 bytes (or tok2).
 *   unheld   (prefill:1x2,decode:1x2, KVX_TP_TIMEOUT=2s) decode tp1 never opens
 *            room 801; decode tp0 closes room 802 (SUCCESS) before its
 *            instance agreed. 801 ends FAILED on every rank that holds it
 *            ("decode[0].tp1 (rank 3) never opened room 801"), 802 agreed
 *            SUCCESS on tp1. Before, both stayed KVX_INPROGRESS forever.
 *   unheld_prefill (prefill:1x2,decode:1x2, KVX_TP_TIMEOUT=2s,
 *            KVX_BOOTSTRAP_TIMEOUT=60s) prefill tp1 does not open room 1001
 *            until the three other ranks concluded it; room 1002 is opened
 *            everywhere. 1001 ends agreed FAILED on all four ranks with one
 *            record (status, stage, origin prefill[0].tp1, "prefill[0].tp1
 *            (rank 1) never opened room 1001") within 30 s (times
 *            KVXT_TIMEOUT_SCALE); 1002 agreed SUCCESS, byte-exact. Before,
 *            prefill tp0 concluded FAILED at once with its own record while
 *            the decode ranks waited out KVX_BOOTSTRAP_TIMEOUT for tp1's pages.
 *   unheld_late (prefill:1x2,decode:1x2, KVX_TP_TIMEOUT=4s) decode tp1 opens
 *            room 801 only after the three other ranks concluded it and
 *            closed it: it concludes FAILED within 1 s (times
 *            KVXT_TIMEOUT_SCALE, at most 3 s) with the record the others
 *            hold, "decode[0].tp1 (rank 3) never opened room 801", origin
 *            decode[0].tp1. Before, it waited KVX_TP_TIMEOUT and then named
 *            decode[0].tp0 as the rank that never opened the room. Then
 *            every rank opens 801 again, and a third time with decode tp1
 *            five rounds before tp0: both succeed, byte-exact.
 *   silent   (prefill:1x2,decode:1x2, KVX_PEER_TIMEOUT=1s) room 1101 is SUCCESS
 *            everywhere, but the decode runs no round until the prefill
 *            concluded: the prefill instance agrees FAILED after 10 x
 *            KVX_PEER_TIMEOUT, KVX_ERR_TIMEOUT "no word from decode[0] about
 *            room 1101 for 10 x KVX_PEER_TIMEOUT (10.0 s)", and the decode
 *            instance, running rounds later, agrees FAILED with that record.
 *            Before, the prefill concluded SUCCESS alone and the decode too,
 *            though it was never asked.
 *   gone     (prefill:1x2,decode:1x1, one KV head, KVX_SHUTDOWN_TIMEOUT=2s)
 *            prefill tp1 holds a replica of the head and writes nothing; it
 *            opens rooms 1201 and 1202 only after the decode had them SUCCESS
 *            (1201 agreed, 1202 only locally: its RECEIVED is all the prefill
 *            hears) and destroyed its context. Its chunks are taken, both
 *            rooms are SUCCESS on tp1, and both prefill ranks agree SUCCESS.
 *            Before, the late open failed the room at once ("decode[0].tp0
 *            (rank 2) is shutting down"), though the decode's AGREED or
 *            RECEIVED was kept for it: the prefill instance agreed FAILED a
 *            room the decode had SUCCESS (CI: tp_gqa_4to2).
 *
 * By hand, from build/:  mpi_tests/run-mpi.sh ../mpi_tests/cases/tp_skew.mpi
 */
#include "testlib.h"

#include <mpi.h>
#include <signal.h>

int tl_rank, tl_failures;

static tl_job_t J;

static void start_heads(size_t num_pages, unsigned kv_heads)
{
    kvx_ctx_params_t p;

    kvx_ctx_params_init(&p);
    p.kv.layers = 2;
    p.kv.page_size = 4;
    p.kv.kv_heads = kv_heads;
    p.kv.head_dim = 16;
    p.num_pages = num_pages;
    p.aux_slots = 8;
    p.aux_item_size = 16;
    tl_job_start(&J, &p);
}

static void start(size_t num_pages)
{
    start_heads(num_pages, 2);
}

static int decode(void)
{
    return J.id.role == KVX_ROLE_DECODE;
}

/* The last refusal's status and whether its sentence holds every needle. */
static int last_says(kvx_status_t want, const char *a, const char *b)
{
    kvx_failure_t f;
    kvx_status_t st = kvx_last_error(&f);
    int ok = st == want && f.status == want && strstr(f.text, a) != NULL &&
             (b == NULL || strstr(f.text, b) != NULL);

    if (!ok) {
        fprintf(stderr, "rank %d: last error %s \"%s\", wanted %s with \"%s\" and \"%s\"\n",
                tl_rank, kvx_status_name(st), f.text, kvx_status_name(want), a, b ? b : "");
    }
    return ok;
}

static int failure_says(uint64_t id, kvx_status_t want, const char *needle)
{
    kvx_failure_t f;
    char line[512];
    int ok = kvx_room_failure(J.ctx, id, &f) == KVX_OK && f.status == want &&
             strstr(f.text, needle) != NULL;

    if (!ok) {
        fprintf(stderr, "rank %d: room %llu: %s; wanted %s with \"%s\"\n", tl_rank,
                (unsigned long long)id, tl_failure_line(J.ctx, id, line, sizeof(line)),
                kvx_status_name(want), needle);
    }
    return ok;
}

/* The prefill side of a room of n pages (source pages 0..n-1), aux optional. */
static void send_room(uint64_t id, size_t n, const void *aux, size_t aux_len)
{
    uint32_t pages[16];

    for (size_t i = 0; i < n; i++) {
        pages[i] = (uint32_t)i;
    }
    TL_CHECK(kvx_room_send_open(J.ctx, id, 0, n) == KVX_OK, "send_open %llu",
             (unsigned long long)id);
    TL_CHECK(kvx_room_send_chunk(J.ctx, id, pages, n, aux, aux_len) == KVX_OK, "send_chunk %llu",
             (unsigned long long)id);
}

/* The instance that agrees after the other one concluded: once both pass
 * the barrier, 1 s for the other's record (its VERDICT) to arrive, then
 * rounds until ids are agreed (at most 20 s). Returns whether they were. */
static int agree_after_barrier(const uint64_t *ids, size_t n, kvx_agreed_t *out)
{
    MPI_Barrier(MPI_COMM_WORLD);
    usleep(1000000);
    return tl_agree_all(J.ctx, ids, n, out, 20);
}

/* Opens a room of 2 pages on every rank (decode: into pages, no aux slot)
 * and waits until it is SUCCESS here. */
static void open_success(uint64_t id, const uint32_t *pages)
{
    kvx_room_state_t st;

    if (decode()) {
        TL_CHECK(kvx_room_recv_open(J.ctx, id, 0, pages, 2, -1) == KVX_OK, "open %llu",
                 (unsigned long long)id);
    } else {
        send_room(id, 2, NULL, 0);
    }
    st = tl_wait_state(J.ctx, id, KVX_ROOM_SUCCESS, 20);
    TL_CHECK(st == KVX_ROOM_SUCCESS, "room %llu is %s", (unsigned long long)id,
             kvx_room_state_name(st));
}

/* Closes a room, waiting while it drains; returns the final status. */
static kvx_status_t close_room(uint64_t id, double limit)
{
    double t0 = tl_now();
    kvx_status_t st;

    while ((st = kvx_room_close(J.ctx, id)) == KVX_ERR_BUSY && tl_now() - t0 < limit) {
        usleep(1000);
    }
    return st;
}

static int agreed(uint64_t id, kvx_room_state_t *state_p)
{
    kvx_room_info_t info;

    if (kvx_room_info(J.ctx, id, &info) != KVX_OK || !info.agreed) {
        return 0;
    }
    *state_p = info.agreed_state;
    return 1;
}

/* ---- pages --------------------------------------------------------------- */

/* Stops a process of this machine and waits until it is stopped. */
static void stop_process(int pid)
{
    char path[64], stat[256] = "";
    double t0 = tl_now();

    kill(pid, SIGSTOP);
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    while (tl_now() - t0 < 5) {
        FILE *f = fopen(path, "r");
        const char *state;

        if (f != NULL && fgets(stat, sizeof(stat), f) != NULL &&
            (state = strrchr(stat, ')')) != NULL && state[2] == 'T') {
            fclose(f);
            return;
        }
        if (f != NULL) {
            fclose(f);
        }
        usleep(1000);
    }
    TL_CHECK(0, "process %d did not stop", pid);
}

static void mode_pages(void)
{
    int pids[2], me = getpid();
    uint32_t p56[] = { 5, 6 }, p67[] = { 6, 7 }, p77[] = { 7, 7 }, p6[] = { 6 }, p7[] = { 7 },
             p1011[] = { 10, 11 };
    kvx_room_state_t st;

    start(64);
    MPI_Allgather(&me, 1, MPI_INT, pids, 1, MPI_INT, MPI_COMM_WORLD);
    /* A SUCCESS room's pages are free again once it is closed. */
    if (decode()) {
        TL_CHECK(kvx_room_recv_open(J.ctx, 9710, 0, p1011, 2, -1) == KVX_OK, "open 9710");
        st = tl_wait_state(J.ctx, 9710, KVX_ROOM_SUCCESS, 20);
        TL_CHECK(st == KVX_ROOM_SUCCESS, "9710 is %s", kvx_room_state_name(st));
        TL_CHECK(kvx_room_close(J.ctx, 9710) == KVX_OK, "close 9710");
        TL_CHECK(kvx_room_recv_open(J.ctx, 9711, 0, p1011, 2, -1) == KVX_OK,
                 "pages 10, 11 of a closed room are free again");
    } else {
        send_room(9710, 2, NULL, 0);
        st = tl_wait_state(J.ctx, 9710, KVX_ROOM_SUCCESS, 20);
        TL_CHECK(st == KVX_ROOM_SUCCESS, "9710 is %s", kvx_room_state_name(st));
        kvx_room_close(J.ctx, 9710);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (decode()) {
        TL_CHECK(close_room(9711, 10) == KVX_OK, "close 9711");
        TL_CHECK(kvx_room_recv_open(J.ctx, 9700, 0, p56, 2, 1) == KVX_OK, "open 9700");
        TL_CHECK(kvx_room_recv_open(J.ctx, 9701, 0, p67, 2, -1) == KVX_ERR_BUSY,
                 "page 6 granted twice");
        TL_CHECK(last_says(KVX_ERR_BUSY, "page 6", "held by room 9700"), "reason of 9701");
        TL_CHECK(kvx_room_poll(J.ctx, 9701, &st) == KVX_ERR_NO_ROOM, "9701 is not open");
        TL_CHECK(kvx_room_recv_open(J.ctx, 9704, 0, p1011, 2, 1) == KVX_ERR_BUSY,
                 "aux slot 1 granted twice");
        TL_CHECK(last_says(KVX_ERR_BUSY, "aux slot 1", "held by room 9700"), "reason of 9704");
        TL_CHECK(kvx_room_recv_open(J.ctx, 9702, 0, p77, 2, -1) == KVX_ERR_INVALID_PARAM,
                 "page 7 twice in one grant");
        TL_CHECK(last_says(KVX_ERR_INVALID_PARAM, "page 7", "twice"), "reason of 9702");
        /* The refused grants held nothing: page 7 is free. */
        TL_CHECK(kvx_room_recv_open(J.ctx, 9703, 0, p7, 1, -1) == KVX_OK, "page 7 is free");
        TL_CHECK(close_room(9703, 10) == KVX_OK, "close 9703");
        /* A writer that never confirms: 9700's pages are quarantined, and
         * stay refused. */
        stop_process(pids[0]);
        TL_CHECK(kvx_room_abort(J.ctx, 9700, "test") == KVX_OK, "abort 9700");
        st = (kvx_room_state_t)close_room(9700, 10);
        kill(pids[0], SIGCONT);
        TL_CHECK((kvx_status_t)st == KVX_ERR_QUARANTINED, "close 9700: %s",
                 kvx_status_name((kvx_status_t)st));
        TL_CHECK(kvx_room_recv_open(J.ctx, 9705, 0, p6, 1, -1) == KVX_ERR_QUARANTINED,
                 "quarantined page 6 granted again");
        TL_CHECK(last_says(KVX_ERR_QUARANTINED, "page 6", "room 9700"), "reason of 9705");
        TL_CHECK(kvx_room_recv_open(J.ctx, 9706, 0, p1011, 2, 1) == KVX_ERR_QUARANTINED,
                 "quarantined aux slot 1 granted again");
        TL_CHECK(last_says(KVX_ERR_QUARANTINED, "aux slot 1", "quarantined"), "reason of 9706");
        /* Pages 10, 11 were not held by the refused grants. */
        TL_CHECK(kvx_room_recv_open(J.ctx, 9707, 0, p1011, 2, 2) == KVX_OK, "open 9707");
        TL_CHECK(close_room(9707, 10) == KVX_OK, "close 9707");
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* ---- reasons ------------------------------------------------------------- */

static void mode_reasons(void)
{
    uint32_t pages[] = { 0, 1 };
    uint64_t id = 500;
    kvx_room_state_t st;
    kvx_agreed_t out[1];
    char aux[4] = { 't', 'o', 'k', '1' }, got[16];
    size_t len = 0;

    kvx_agreed_t init = KVX_AGREED_INIT;

    start(64);
    TL_CHECK(init.status == KVX_INPROGRESS, "KVX_AGREED_INIT reads not agreed");
    TL_CHECK(kvx_room_poll(J.ctx, 424242, &st) == KVX_ERR_NO_ROOM, "poll of no room");
    TL_CHECK(last_says(KVX_ERR_NO_ROOM, "no room 424242", NULL), "reason of the poll");
    if (decode()) {
        TL_CHECK(kvx_room_recv_open(J.ctx, id, 0, pages, 2, J.id.tp_rank) == KVX_OK, "open");
    } else {
        TL_CHECK(kvx_room_send_open(J.ctx, id, 0, 2) == KVX_OK, "send_open");
        TL_CHECK(kvx_room_send_chunk(J.ctx, id, pages, 2, NULL, 2) == KVX_ERR_INVALID_PARAM,
                 "aux NULL with aux_len 2");
        TL_CHECK(last_says(KVX_ERR_INVALID_PARAM, "aux is NULL but aux_len is 2", NULL),
                 "reason of the chunk");
        TL_CHECK(kvx_room_send_chunk(J.ctx, id, pages, 2, aux, sizeof(aux)) == KVX_OK, "chunk");
    }
    st = tl_wait_state(J.ctx, id, KVX_ROOM_SUCCESS, 20);
    TL_CHECK(st == KVX_ROOM_SUCCESS, "room is %s", kvx_room_state_name(st));
    if (decode()) {
        kvx_agree_t *a;
        kvx_status_t s;

        /* tp1 starts its round late: tp0's first test finds it in progress,
         * and every entry must say so. */
        if (J.id.tp_rank == 1) {
            usleep(300000);
        }
        memset(out, 0, sizeof(out));
        TL_CHECK(kvx_agree_start(J.ctx, &id, 1, &a) == KVX_OK, "agree_start");
        s = kvx_agree_test(a, out);
        if (J.id.tp_rank == 0) {
            TL_CHECK(s == KVX_INPROGRESS, "first test: %s", kvx_status_name(s));
            TL_CHECK(out[0].status == KVX_INPROGRESS, "an entry of a round in progress reads %s/%s",
                     kvx_status_name(out[0].status), kvx_room_state_name(out[0].state));
        }
        TL_CHECK(kvx_agree_wait(a, out) == KVX_OK, "agree_wait");
        kvx_agree_free(a);
        TL_CHECK(kvx_room_aux(J.ctx, id, got, sizeof(got), &len) == KVX_OK && len == sizeof(aux) &&
                     memcmp(got, aux, len) == 0,
                 "aux of %zu bytes", len);
        TL_CHECK(kvx_room_aux(J.ctx, id, got, 1, &len) == KVX_ERR_AUX, "aux into 1 byte");
        TL_CHECK(last_says(KVX_ERR_AUX, "4 bytes", "holds 1"), "reason of the aux");
    }
    TL_CHECK(tl_agree_all(J.ctx, &id, 1, out, 20) && out[0].state == KVX_ROOM_SUCCESS, "agreed %s",
             kvx_room_state_name(out[0].state));
    TL_CHECK(close_room(id, 10) == KVX_OK, "close");
    TL_CHECK(kvx_room_close(J.ctx, id) == KVX_ERR_NO_ROOM, "close twice");
    TL_CHECK(last_says(KVX_ERR_NO_ROOM, "kvx_room_close", "no room 500"), "reason of close");
    MPI_Barrier(MPI_COMM_WORLD);
}

/* ---- skew ---------------------------------------------------------------- */

static void mode_skew(void)
{
    uint32_t pages[] = { 0, 1 };
    uint64_t id = 700;
    kvx_room_state_t st;
    kvx_agreed_t out[1];
    const char *why = "tp0 is in round 2, tp1 in round 1";

    start(64);
    open_success(id, pages);
    if (decode()) {
        kvx_status_t s = tl_agree_round(J.ctx, &id, 1, out);

        TL_CHECK(s == KVX_OK, "round 1: %s", kvx_status_name(s));
        if (J.id.tp_rank == 0) {
            /* One round more than tp1 (a loop that stops on local conditions). */
            kvx_agree_t *a;
            double t0 = tl_now();

            TL_CHECK(kvx_agree_start(J.ctx, &id, 1, &a) == KVX_OK, "round 2");
            while ((s = kvx_agree_test(a, out)) == KVX_INPROGRESS && tl_now() - t0 < 20) {
                usleep(1000);
            }
            TL_CHECK(s == KVX_ERR_OUT_OF_STEP, "round 2 ended %s after %.1f s", kvx_status_name(s),
                     tl_now() - t0);
            if (s != KVX_INPROGRESS) {
                kvx_agree_free(a);
            }
        } else {
            double t0 = tl_now();

            while (!agreed(id, &st) && tl_now() - t0 < 20) {
                usleep(1000);
            }
            TL_CHECK(agreed(id, &st) && st == KVX_ROOM_FAILED, "tp1: not agreed FAILED");
            s = tl_agree_round(J.ctx, &id, 1, out);
            TL_CHECK(s == KVX_ERR_OUT_OF_STEP, "a round after the break: %s", kvx_status_name(s));
        }
        TL_CHECK(agreed(id, &st) && st == KVX_ROOM_FAILED, "decode: not agreed FAILED");
        MPI_Barrier(MPI_COMM_WORLD);
    } else {
        /* The prefill instance agrees only once the decode instance broke:
         * a prefill instance whose every target reported the room received
         * may agree SUCCESS before (kvx.h, the scheduler contract). */
        TL_CHECK(agree_after_barrier(&id, 1, out) && out[0].state == KVX_ROOM_FAILED,
                 "prefill agreed %s", kvx_room_state_name(out[0].state));
    }
    TL_CHECK(failure_says(id, KVX_ERR_OUT_OF_STEP, why), "the reason");
    close_room(id, 10);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* ---- reuse --------------------------------------------------------------- */

static void mode_reuse(void)
{
    uint32_t first[] = { 0, 1 }, second[] = { 2, 3 };
    uint64_t id = 900;
    kvx_room_state_t st;
    kvx_agreed_t out[1];
    double t0;

    start(64);
    open_success(id, first);
    if (decode()) {
        /* Agreed, closed and opened again at once with other pages. */
        TL_CHECK(tl_agree_all(J.ctx, &id, 1, out, 20) && out[0].state == KVX_ROOM_SUCCESS,
                 "first room agreed %s", kvx_room_state_name(out[0].state));
        TL_CHECK(kvx_room_close(J.ctx, id) == KVX_OK, "close");
        TL_CHECK(kvx_room_recv_open(J.ctx, id, 0, second, 2, -1) == KVX_OK, "open again");
    } else {
        /* The prefill closes its room 300 ms later, then opens the id again. */
        usleep(300000);
        TL_CHECK(kvx_room_close(J.ctx, id) == KVX_OK, "close");
        send_room(id, 2, NULL, 0);
    }
    t0 = tl_now();
    st = tl_wait_state(J.ctx, id, KVX_ROOM_SUCCESS, 15);
    TL_CHECK(st == KVX_ROOM_SUCCESS, "second room is %s after %.1f s (%s)", kvx_room_state_name(st),
             tl_now() - t0,
             st == KVX_ROOM_FAILED ? tl_failure_line(J.ctx, id, (char[512]){ 0 }, 512) : "");
    TL_CHECK(tl_agree_all(J.ctx, &id, 1, out, 20) && out[0].state == KVX_ROOM_SUCCESS,
             "second room agreed %s", kvx_room_state_name(out[0].state));
    close_room(id, 10);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* ---- aux ----------------------------------------------------------------- */

static void mode_aux(void)
{
    uint32_t pages[] = { 0, 1 };
    uint64_t ids[2] = { 600, 601 };
    kvx_room_state_t st;
    kvx_agreed_t out[2];
    char tok[4] = { 't', 'o', 'k', '1' }, tok2[4] = { 't', 'o', 'k', '2' };
    const char *why0 = "decode[0].tp0 (rank 2) has 4 bytes 746f6b31 from prefill[0].tp0 (rank 0)";
    const char *why1 = "decode[0].tp1 (rank 3) has 0 bytes from prefill[0].tp1 (rank 1)";
    const char *why2 = "decode[0].tp1 (rank 3) has 4 bytes 746f6b32 from prefill[0].tp1 (rank 1)";

    start(64);
    /* 600: prefill tp1 passes no aux; 601: another first token. */
    for (int r = 0; r < 2; r++) {
        if (decode()) {
            TL_CHECK(kvx_room_recv_open(J.ctx, ids[r], 0, pages + r, 1, r) == KVX_OK, "open");
        } else if (J.id.tp_rank == 0) {
            send_room(ids[r], 1, tok, sizeof(tok));
        } else {
            send_room(ids[r], 1, r == 0 ? NULL : tok2, r == 0 ? 0 : sizeof(tok2));
        }
        st = tl_wait_state(J.ctx, ids[r], KVX_ROOM_SUCCESS, 20);
        TL_CHECK(st == KVX_ROOM_SUCCESS, "room %llu is %s", (unsigned long long)ids[r],
                 kvx_room_state_name(st));
    }
    if (decode()) {
        TL_CHECK(tl_agree_all(J.ctx, ids, 2, out, 20), "decode agreement");
        MPI_Barrier(MPI_COMM_WORLD);
    } else {
        /* As in skew: the prefill instance agrees after the decode's verdict. */
        TL_CHECK(agree_after_barrier(ids, 2, out), "prefill agreement");
    }
    for (int r = 0; r < 2; r++) {
        TL_CHECK(out[r].status == KVX_OK && out[r].state == KVX_ROOM_FAILED, "room %llu agreed %s",
                 (unsigned long long)ids[r], kvx_room_state_name(out[r].state));
        TL_CHECK(failure_says(ids[r], KVX_ERR_AUX, why0), "tp0's aux in the reason");
        TL_CHECK(failure_says(ids[r], KVX_ERR_AUX, r == 0 ? why1 : why2), "tp1's in the reason");
        close_room(ids[r], 10);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* ---- unheld -------------------------------------------------------------- */

static void mode_unheld(void)
{
    uint32_t pages801[] = { 0, 1 }, pages802[] = { 2, 3 };
    uint64_t ids[2] = { 801, 802 }, mine[2];
    size_t n = 0;
    kvx_room_state_t st;
    kvx_agreed_t out[2];
    double t0;
    int done = 0, all = 0;
    const char *why = "decode[0].tp1 (rank 3) never opened room 801";

    start(64);
    if (decode()) {
        if (J.id.tp_rank == 0) {
            TL_CHECK(kvx_room_recv_open(J.ctx, 801, 0, pages801, 2, -1) == KVX_OK, "open 801");
        }
        TL_CHECK(kvx_room_recv_open(J.ctx, 802, 0, pages802, 2, -1) == KVX_OK, "open 802");
        st = tl_wait_state(J.ctx, 802, KVX_ROOM_SUCCESS, 20);
        TL_CHECK(st == KVX_ROOM_SUCCESS, "802 is %s", kvx_room_state_name(st));
        if (J.id.tp_rank == 0) {
            /* Closed before the instance agreed (it is SUCCESS here). */
            TL_CHECK(kvx_room_close(J.ctx, 802) == KVX_OK, "close 802");
            mine[n++] = 801;
        } else {
            mine[n++] = 802;
        }
    } else {
        send_room(801, 2, NULL, 0);
        send_room(802, 2, NULL, 0);
        mine[n++] = 801;
        mine[n++] = 802;
    }
    /* Every rank runs rounds until it sees its rooms concluded (the same
     * number of rounds on all ranks). */
    t0 = tl_now();
    while (!all && tl_now() - t0 < 30) {
        kvx_status_t s = tl_agree_round(J.ctx, mine, n, out);

        done = s == KVX_OK;
        for (size_t i = 0; i < n; i++) {
            done &= agreed(mine[i], &st);
        }
        MPI_Allreduce(&done, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        usleep(2000);
    }
    TL_CHECK(all, "rooms not concluded within 30 s");
    for (size_t i = 0; i < n; i++) {
        kvx_room_state_t want = ids[0] == mine[i] ? KVX_ROOM_FAILED : KVX_ROOM_SUCCESS;

        TL_CHECK(agreed(mine[i], &st) && st == want, "room %llu: agreed %s, want %s",
                 (unsigned long long)mine[i], agreed(mine[i], &st) ? kvx_room_state_name(st) : "-",
                 kvx_room_state_name(want));
        if (mine[i] == 801) {
            TL_CHECK(failure_says(801, KVX_ERR_OUT_OF_STEP, why), "the reason");
        }
    }
    for (size_t i = 0; i < n; i++) {
        close_room(mine[i], 10);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* ---- unheld_prefill ------------------------------------------------------ */

/* Rounds on every rank of the world (the same number on all: the decision to
 * stop is a collective) until each rank's rooms in ids are agreed, or limit
 * seconds. Returns 1 when every rank saw them agreed; *at_p is when this
 * rank first saw all of its own agreed (tl_now()). */
static int agree_world(const uint64_t *ids, size_t n, double limit, double *at_p)
{
    double t0 = tl_now();
    kvx_agreed_t out[4];
    kvx_room_state_t st;
    int all = 0;

    *at_p = 0;
    while (!all && tl_now() - t0 < limit) {
        int done = tl_agree_round(J.ctx, ids, n, out) == KVX_OK;

        for (size_t i = 0; i < n; i++) {
            done &= agreed(ids[i], &st);
        }
        if (done && *at_p == 0) {
            *at_p = tl_now();
        }
        MPI_Allreduce(&done, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        usleep(2000);
    }
    return all;
}

/* Every rank's record equals rank 0's, held in *f (status, stage, origin,
 * sentence); returns 1 if so. */
static int same_as_rank0(const kvx_failure_t *f, uint64_t id)
{
    kvx_failure_t f0 = *f;
    int same;

    MPI_Bcast(&f0, sizeof(f0), MPI_BYTE, 0, MPI_COMM_WORLD);
    same = f->status == f0.status && f->stage == f0.stage && f->origin_rank == f0.origin_rank &&
           f->origin_role == f0.origin_role && f->origin_instance == f0.origin_instance &&
           f->origin_tp_rank == f0.origin_tp_rank && strcmp(f->text, f0.text) == 0;
    TL_CHECK(same, "room %llu: record %s %s rank %d \"%s\", rank 0 has %s %s rank %d \"%s\"",
             (unsigned long long)id, kvx_status_name(f->status), kvx_stage_name(f->stage),
             f->origin_rank, f->text, kvx_status_name(f0.status), kvx_stage_name(f0.stage),
             f0.origin_rank, f0.text);
    return same;
}

/* Every rank's record of the room must equal rank 0's: status, stage, origin
 * and sentence (count may differ: it counts the ranks of one instance); the
 * origin is prefill[0].tp<origin_tp>, at the agree stage. */
static void same_record(uint64_t id, kvx_status_t want, const char *needle, int origin_tp)
{
    kvx_failure_t f;

    memset(&f, 0, sizeof(f));
    TL_CHECK(failure_says(id, want, needle), "room %llu: the reason", (unsigned long long)id);
    kvx_room_failure(J.ctx, id, &f);
    same_as_rank0(&f, id);
    TL_CHECK(f.origin_role == KVX_ROLE_PREFILL && f.origin_instance == 0 &&
                 f.origin_tp_rank == origin_tp && f.stage == KVX_STAGE_AGREE,
             "room %llu: origin %s[%d].tp%d (rank %d) at %s, want prefill[0].tp%d at agree",
             (unsigned long long)id, kvx_role_name(f.origin_role), f.origin_instance,
             f.origin_tp_rank, f.origin_rank, kvx_stage_name(f.stage), origin_tp);
}

static void mode_unheld_prefill(void)
{
    uint32_t pr[] = { 0, 1 }, ps[] = { 2, 3 };
    uint64_t r = 1001, s = 1002, aux = kvp_aux(s), got = 0, mine[2];
    int late, ok;
    size_t n = 0, len = 0;
    double t0, at, limit = 30 * tl_timeout_scale();
    kvx_room_state_t st;
    kvx_status_t cs;
    const char *why = "prefill[0].tp1 (rank 1) never opened room 1001";

    start(64);
    late = !decode() && J.id.tp_rank == 1;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = tl_now();
    if (decode()) {
        TL_CHECK(kvx_room_recv_open(J.ctx, r, 0, pr, 2, -1) == KVX_OK, "open 1001");
        TL_CHECK(kvx_room_recv_open(J.ctx, s, 0, ps, 2, 1) == KVX_OK, "open 1002");
    } else {
        kvp_pages(&J.g, J.bufs, J.comps, r, pr, 2, 0, 1);
        kvp_pages(&J.g, J.bufs, J.comps, s, ps, 2, 0, 1);
        if (!late) {
            send_room(r, 2, NULL, 0);
        }
        TL_CHECK(kvx_room_send_open(J.ctx, s, 0, 2) == KVX_OK, "send_open 1002");
        TL_CHECK(kvx_room_send_chunk(J.ctx, s, ps, 2, &aux, sizeof(aux)) == KVX_OK,
                 "send_chunk 1002");
    }
    if (!late) {
        mine[n++] = r;
    }
    mine[n++] = s;
    /* Every rank runs rounds until the rooms it holds are agreed. */
    ok = agree_world(mine, n, limit, &at);
    TL_CHECK(ok, "rooms not agreed on every rank within %.0f s", limit);
    TL_CHECK(at > 0 && at - t0<limit, "rank %d concluded its rooms after %.1f s", tl_rank, at> 0
                 ? at - t0
                 : tl_now() - t0);
    if (!late) {
        TL_CHECK(agreed(r, &st) && st == KVX_ROOM_FAILED, "1001 agreed %s",
                 agreed(r, &st) ? kvx_room_state_name(st) : "-");
    }
    if (!late && at > 0) {
        printf("rank %d: rooms 1001, 1002 concluded after %.1f s\n", tl_rank, at - t0);
    }
    TL_CHECK(agreed(s, &st) && st == KVX_ROOM_SUCCESS, "1002 agreed %s",
             agreed(s, &st) ? kvx_room_state_name(st) : "-");
    if (decode()) {
        TL_CHECK(kvp_pages(&J.g, J.bufs, J.comps, s, ps, 2, 0, 0) == 0, "1002: bytes differ");
        TL_CHECK(kvx_room_aux(J.ctx, s, &got, sizeof(got), &len) == KVX_OK && len == sizeof(aux) &&
                     got == aux,
                 "1002: aux of %zu bytes", len);
    }
    /* Prefill tp1 opens 1001 late: the decode's word kept for it (and the
     * lists of its instance) conclude it with the same record. */
    if (late) {
        TL_CHECK(kvx_room_send_open(J.ctx, r, 0, 2) == KVX_OK, "late send_open 1001");
        cs = kvx_room_send_chunk(J.ctx, r, pr, 2, NULL, 0);
        TL_CHECK(cs == KVX_OK || cs == KVX_ERR_STATE, "late send_chunk 1001: %s",
                 kvx_status_name(cs));
    }
    ok = agree_world(&r, 1, limit, &at);
    TL_CHECK(ok, "1001 not agreed on every rank within %.0f s of the late open", limit);
    TL_CHECK(agreed(r, &st) && st == KVX_ROOM_FAILED, "1001 agreed %s",
             agreed(r, &st) ? kvx_room_state_name(st) : "-");
    same_record(r, KVX_ERR_OUT_OF_STEP, why, 1);
    close_room(r, 10);
    close_room(s, 10);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* ---- unheld_late --------------------------------------------------------- */

/* Opens id on every rank, decode tp0 after `rounds` rounds the others run
 * holding it: it is agreed SUCCESS everywhere, byte-exact, and closed. */
static void open_again(uint64_t id, const uint32_t *pages, const char *nth, int rounds)
{
    int tp0 = decode() && J.id.tp_rank == 0, ok;
    kvx_room_state_t st;
    double at;

    MPI_Barrier(MPI_COMM_WORLD);
    if (decode() && !(tp0 && rounds > 0)) {
        TL_CHECK(kvx_room_recv_open(J.ctx, id, 0, pages, 2, -1) == KVX_OK, "open 801 %s", nth);
    } else if (!decode()) {
        kvp_pages(&J.g, J.bufs, J.comps, id, pages, 2, 0, 1);
        send_room(id, 2, NULL, 0);
    }
    for (int k = 0; k < rounds; k++) {
        kvx_agreed_t out[1];

        tl_agree_round(J.ctx, &id, tp0 ? 0 : 1, out);
        usleep(2000);
    }
    if (rounds > 0) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (tp0) {
            TL_CHECK(kvx_room_recv_open(J.ctx, id, 0, pages, 2, -1) == KVX_OK, "open 801 %s", nth);
        }
    }
    ok = agree_world(&id, 1, 30 * tl_timeout_scale(), &at);
    TL_CHECK(ok, "801 opened %s not agreed within %.0f s", nth, 30 * tl_timeout_scale());
    TL_CHECK(agreed(id, &st) && st == KVX_ROOM_SUCCESS, "801 opened %s agreed %s", nth,
             agreed(id, &st) ? kvx_room_state_name(st) : "-");
    if (decode()) {
        TL_CHECK(kvp_pages(&J.g, J.bufs, J.comps, id, pages, 2, 0, 0) == 0,
                 "801 opened %s: bytes differ", nth);
    }
    TL_CHECK(close_room(id, 10) == KVX_OK, "close 801 opened %s", nth);
    MPI_Barrier(MPI_COMM_WORLD);
}

static void mode_unheld_late(void)
{
    uint32_t pages[] = { 0, 1 };
    uint64_t id = 801;
    int late, ok;
    double t_late, at, limit = 30 * tl_timeout_scale();
    double bound = tl_timeout_scale() < 3 ? tl_timeout_scale() : 3; /* KVX_TP_TIMEOUT is 4 s */
    kvx_room_state_t st;
    kvx_failure_t f;
    const char *why = "decode[0].tp1 (rank 3) never opened room 801";

    memset(&f, 0, sizeof(f));
    start(64);
    late = decode() && J.id.tp_rank == 1;
    if (decode() && !late) {
        TL_CHECK(kvx_room_recv_open(J.ctx, id, 0, pages, 2, -1) == KVX_OK, "open 801");
    } else if (!decode()) {
        send_room(id, 2, NULL, 0);
    }
    /* The three holders conclude it (decode tp0 after KVX_TP_TIMEOUT, the
     * prefill with its verdict), keep their record and close it, as a
     * scheduler does. */
    ok = agree_world(&id, late ? 0 : 1, limit, &at);
    TL_CHECK(ok, "801 not agreed by its holders within %.0f s", limit);
    if (!late) {
        TL_CHECK(agreed(id, &st) && st == KVX_ROOM_FAILED, "801 agreed %s",
                 agreed(id, &st) ? kvx_room_state_name(st) : "-");
        TL_CHECK(failure_says(id, KVX_ERR_OUT_OF_STEP, why), "the holders' reason");
        kvx_room_failure(J.ctx, id, &f);
        TL_CHECK(close_room(id, 10) == KVX_OK, "close 801");
    }
    /* Decode tp1 opens it late: its sibling's conclusion, kept for it,
     * concludes it at once with the same record (before, it waited
     * KVX_TP_TIMEOUT and then named decode[0].tp0 as the rank that never
     * opened the room). */
    MPI_Barrier(MPI_COMM_WORLD);
    t_late = tl_now();
    if (late) {
        TL_CHECK(kvx_room_recv_open(J.ctx, id, 0, pages, 2, -1) == KVX_OK, "late open 801");
    }
    ok = agree_world(&id, late ? 1 : 0, limit, &at);
    TL_CHECK(ok, "the late 801 not agreed within %.0f s", limit);
    if (late) {
        TL_CHECK(agreed(id, &st) && st == KVX_ROOM_FAILED, "late 801 agreed %s",
                 agreed(id, &st) ? kvx_room_state_name(st) : "-");
        TL_CHECK(at > 0 && at - t_late < bound,
                 "the late open concluded after %.2f s (bound %.1f s, KVX_TP_TIMEOUT 4 s)",
                 (at > 0 ? at : tl_now()) - t_late, bound);
        printf("rank %d: the late open of 801 concluded after %.3f s\n", tl_rank, at - t_late);
        TL_CHECK(failure_says(id, KVX_ERR_OUT_OF_STEP, why), "the late rank's reason");
        kvx_room_failure(J.ctx, id, &f);
    }
    same_as_rank0(&f, id);
    TL_CHECK(
        f.origin_role == KVX_ROLE_DECODE && f.origin_tp_rank == 1 && f.stage == KVX_STAGE_AGREE,
        "801: origin %s[%d].tp%d at %s, want decode[0].tp1 at agree", kvx_role_name(f.origin_role),
        f.origin_instance, f.origin_tp_rank, kvx_stage_name(f.stage));
    if (late) {
        TL_CHECK(close_room(id, 10) == KVX_OK, "close the late 801");
    }
    /* The id is used again by every rank: the conclusions kept for a late
     * rank do not touch the new room. And a third time, decode tp1 first
     * and tp0 five rounds later: tp0's conclusion of the first 801 is gone
     * with its second open (else tp1 would conclude the third at once with
     * it). */
    open_again(id, pages, "a second time", 0);
    open_again(id, pages, "a third time", 5);
}

/* ---- silent -------------------------------------------------------------- */

static void mode_silent(void)
{
    uint32_t pages[] = { 0, 1 };
    uint64_t id = 1101;
    kvx_agreed_t out[1];
    double t0, took, limit = 40 * tl_timeout_scale();
    const char *why = "no word from decode[0] about room 1101 for 10 x KVX_PEER_TIMEOUT (10.0 s)";

    start(64);
    open_success(id, pages);
    if (!decode()) {
        /* The decode runs no round (it waits in the barrier below; its
         * progress thread keeps the peers alive): the prefill must not take
         * its own receipts for the decode's SUCCESS. */
        t0 = tl_now();
        TL_CHECK(tl_agree_all(J.ctx, &id, 1, out, limit) && out[0].state == KVX_ROOM_FAILED,
                 "prefill agreed %s", kvx_room_state_name(out[0].state));
        took = tl_now() - t0;
        TL_CHECK(took > 9 && took < limit, "prefill concluded after %.1f s, want about 10 s", took);
        printf("rank %d: room 1101 concluded after %.1f s\n", tl_rank, took);
        MPI_Barrier(MPI_COMM_WORLD);
    } else {
        /* The decode agrees after the prefill's record was sent. */
        TL_CHECK(agree_after_barrier(&id, 1, out) && out[0].state == KVX_ROOM_FAILED,
                 "decode agreed %s", kvx_room_state_name(out[0].state));
    }
    same_record(id, KVX_ERR_TIMEOUT, why, 0);
    close_room(id, 10);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* ---- gone --------------------------------------------------------------- */

static void mode_gone(void)
{
    uint32_t pages[] = { 0, 1 }, pages2[] = { 2, 3 };
    uint64_t ids[] = { 1201, 1202 };
    kvx_agreed_t out[2];
    kvx_room_info_t info;
    kvx_room_state_t st;
    double limit = 20 * tl_timeout_scale();
    char line[512];
    int late;

    start_heads(64, 1);
    late = !decode() && J.id.tp_rank == 1;
    if (decode()) {
        /* overwritten by the transfers */
        kvp_pages(&J.g, J.bufs, J.comps, ids[0], pages, 2, 0, 1);
        kvp_pages(&J.g, J.bufs, J.comps, ids[1], pages2, 2, 0, 1);
        TL_CHECK(kvx_room_recv_open(J.ctx, ids[0], 0, pages, 2, -1) == KVX_OK, "open 1201");
        TL_CHECK(tl_agree_all(J.ctx, ids, 1, out, limit) && out[0].state == KVX_ROOM_SUCCESS,
                 "decode agreed %s", kvx_room_state_name(out[0].state));
        /* 1202, opened after the last round, is never agreed here: only its
         * RECEIVED reaches the prefill. */
        TL_CHECK(kvx_room_recv_open(J.ctx, ids[1], 0, pages2, 2, -1) == KVX_OK, "open 1202");
        st = tl_wait_state(J.ctx, ids[1], KVX_ROOM_SUCCESS, limit);
        TL_CHECK(st == KVX_ROOM_SUCCESS, "room 1202 is %s on the decode", kvx_room_state_name(st));
        TL_CHECK(kvp_pages(&J.g, J.bufs, J.comps, ids[0], pages, 2, 0, 0) == 0, "1201: bytes");
        TL_CHECK(kvp_pages(&J.g, J.bufs, J.comps, ids[1], pages2, 2, 0, 0) == 0, "1202: bytes");
        /* Says goodbye to the prefill ranks, then waits KVX_SHUTDOWN_TIMEOUT
         * for theirs, which come only at the end. */
        kvx_ctx_destroy(J.ctx);
        J.ctx = NULL;
    } else if (!late) {
        kvp_pages(&J.g, J.bufs, J.comps, ids[0], pages, 2, 0, 1);
        kvp_pages(&J.g, J.bufs, J.comps, ids[1], pages2, 2, 0, 1);
        send_room(ids[0], 2, NULL, 0); /* from pages 0, 1 */
        TL_CHECK(kvx_room_send_open(J.ctx, ids[1], 0, 2) == KVX_OK, "send_open 1202");
        TL_CHECK(kvx_room_send_chunk(J.ctx, ids[1], pages2, 2, NULL, 0) == KVX_OK,
                 "send_chunk 1202");
        for (int i = 0; i < 2; i++) {
            st = tl_wait_state(J.ctx, ids[i], KVX_ROOM_SUCCESS, limit);
            TL_CHECK(st == KVX_ROOM_SUCCESS, "room %llu is %s on tp0", (unsigned long long)ids[i],
                     kvx_room_state_name(st));
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (decode()) {
        return;
    }
    for (int i = 0; late && i < 2; i++) {
        TL_CHECK(kvx_room_send_open(J.ctx, ids[i], 0, 2) == KVX_OK, "late send_open %llu",
                 (unsigned long long)ids[i]);
        TL_CHECK(kvx_room_send_chunk(J.ctx, ids[i], i ? pages2 : pages, 2, NULL, 0) == KVX_OK,
                 "late send_chunk %llu: %s", (unsigned long long)ids[i],
                 tl_failure_line(J.ctx, ids[i], line, sizeof(line)));
    }
    /* What a scheduler that polls the room's own state reads, too. */
    for (int i = 0; i < 2; i++) {
        st = tl_wait_state(J.ctx, ids[i], KVX_ROOM_SUCCESS, limit);
        TL_CHECK(st == KVX_ROOM_SUCCESS, "room %llu is %s on tp%d", (unsigned long long)ids[i],
                 kvx_room_state_name(st), J.id.tp_rank);
    }
    TL_CHECK(tl_agree_all(J.ctx, ids, 2, out, limit) && out[0].state == KVX_ROOM_SUCCESS &&
                 out[1].state == KVX_ROOM_SUCCESS,
             "prefill tp%d agreed %s, %s: %s", J.id.tp_rank, kvx_room_state_name(out[0].state),
             kvx_room_state_name(out[1].state), tl_failure_line(J.ctx, ids[0], line, sizeof(line)));
    TL_CHECK(kvx_room_info(J.ctx, ids[0], &info) == KVX_OK && (!late || info.puts == 0),
             "prefill tp1 made %llu puts: it should hold a replica", (unsigned long long)info.puts);
    close_room(ids[0], 10);
    close_room(ids[1], 10);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int bad = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &tl_rank);
    if (strcmp(mode, "pages") == 0) {
        mode_pages();
    } else if (strcmp(mode, "reasons") == 0) {
        mode_reasons();
    } else if (strcmp(mode, "skew") == 0) {
        mode_skew();
    } else if (strcmp(mode, "reuse") == 0) {
        mode_reuse();
    } else if (strcmp(mode, "aux") == 0) {
        mode_aux();
    } else if (strcmp(mode, "unheld") == 0) {
        mode_unheld();
    } else if (strcmp(mode, "unheld_prefill") == 0) {
        mode_unheld_prefill();
    } else if (strcmp(mode, "unheld_late") == 0) {
        mode_unheld_late();
    } else if (strcmp(mode, "silent") == 0) {
        mode_silent();
    } else if (strcmp(mode, "gone") == 0) {
        mode_gone();
    } else {
        if (tl_rank == 0) {
            fprintf(stderr,
                    "usage: t_tp pages|reasons|skew|reuse|aux|unheld|unheld_prefill|unheld_late|"
                    "silent|gone\n");
        }
        MPI_Finalize();
        return 2;
    }
    if (J.ctx != NULL) {
        kvx_ctx_destroy(J.ctx);
    }
    MPI_Allreduce(&tl_failures, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (tl_rank == 0) {
        printf("t_tp %s: %s (%d failed checks)\n", mode, bad ? "FAIL" : "ok", bad);
    }
    MPI_Finalize();
    return bad ? 1 : 0;
}
