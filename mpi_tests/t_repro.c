/*
 * t_repro.c - regression tests of findings in src/core (issues 9, 16), one
 * mode each, on 2 ranks (KVX_LAYOUT=prefill:1x1,decode:1x1; closegrant also
 * on 3). Each mode is a make check case (mpi_tests/cases/repro_*.mpi) and
 * runs under ASan and TSan too
 * (tests/sanitize.sh), where the memory errors showed. Each says what once
 * went wrong.
 *
 *   noaux     A context without an aux pool (aux_slots 0) is created and
 *             destroyed; bootstrap.c once passed a NULL rkey buffer to
 *             memcpy (UBSan aborted creation).
 *   stall     The decode rank is stopped for 2 s between two rooms; the
 *             room opened after it runs again must end (SUCCESS, or FAILED
 *             with a reason): it once stayed BOOTSTRAPPING until
 *             KVX_BOOTSTRAP_TIMEOUT. The mode reports the state after 20 s.
 *   inflight  kvx_ctx_destroy() on the prefill while puts to a stopped decode
 *             are in flight (needs UCX_TLS=tcp,self, KVX_SHUTDOWN_TIMEOUT=1s,
 *             KVX_PEER_TIMEOUT=500ms): UCX once completed the puts from
 *             ucp_worker_destroy() after the rooms were freed (ASan:
 *             heap-use-after-free in sender_put_cb).
 *   reslot    One round of agreement concludes room 1 and gives its slot to
 *             room 2, opened on the decode only since the last round (so it
 *             is BOOTSTRAPPING): kvx_agree_test() reports room 2 KVX_OK with
 *             room 1's agreed SUCCESS (agree_report() reads the round's
 *             res[] at the room's new slot), though kvx_room_info() says it
 *             is not agreed. kvx-demo's scheduler, which opens rooms while
 *             others conclude, met it; it reads kvx_room_info() instead.
 *   expire    A decode room that fails on its own deadline has its pages
 *             QUARANTINED in the same tick: room_tick() samples now, then
 *             room_expire() -> room_fail() sets room->entered to a later
 *             kvx_now_ns(), and receiver_tick(ctx, room, now) computes
 *             now - room->entered, which wraps (uint64_t) past
 *             KVX_DRAIN_TIMEOUT. The prefill's DONE is dropped
 *             (KVX_FAULT), so only the decode's transfer deadline fires;
 *             expected: DRAINING, then RELEASED once the prefill confirms
 *             (or QUARANTINED after KVX_DRAIN_TIMEOUT, 5 s).
 *
 *   byeroom   The decode destroys its context while a room the prefill
 *             opened is BOOTSTRAPPING (the decode never opened it): the
 *             decode's goodbye (MSG_BYE) fails nothing, so the room waits
 *             for KVX_BOOTSTRAP_TIMEOUT instead of failing with
 *             KVX_ERR_SHUTDOWN. The mode gives it 2 s. (peer_on_bye()
 *             now fails the rooms the peer had a part in.)
 *   reuse     The prefill aborts a room and closes it at once; the decode
 *             tells the prefill the failure back (room_fail notifies the
 *             other side of every failure, also of one it was told), the
 *             prefill keeps that FAIL for the closed id as an early message,
 *             and the next room with the same id fails at open with the old
 *             room's reason, on both sides. The mode expects SUCCESS.
 *             (The prefill now drops messages of a closed room's decode
 *             incarnation: sender_msg_stale().)
 *   closegrant
 *             The prefill opens a room and closes it before the decode's
 *             grant came (the room fails, stage abort); then two rounds of
 *             agreement end on the prefill; then the decode opens the room.
 *             The closed room keeps answering grants until they all came
 *             (room_may_free()): the decode's room fails at once with the
 *             prefill's reason, its pages are released (the prefill says
 *             nothing was written), and the id runs again with the same
 *             pages. The end of a round (room_sweep()) once freed the closed
 *             room; the grant then found no room, and the decode waited
 *             for its own KVX_BOOTSTRAP_TIMEOUT (a timeout, not the abort)
 *             with its pages held. The case sets KVX_BOOTSTRAP_TIMEOUT=30s
 *             and gives the decode 10 s. With a prefill instance of TP 2
 *             (repro_closegrant_tp.mpi, 3 ranks) the closed room also takes
 *             part in rounds until 2 x KVX_TP_TIMEOUT after its open, which
 *             kept it that long: that case sets KVX_TP_TIMEOUT=1s, and
 *             "closegrant 2.5" waits 2.5 s before the rounds.
 *
 * By hand, from a build directory:
 *   mpi_tests/run-mpi.sh ../mpi_tests/cases/repro_inflight.mpi
 * or with mpirun, from build/ or build-asan/:
 *   KVX_LAYOUT=prefill:1x1,decode:1x1 mpirun -np 2 mpi_tests/t_repro noaux
 *   KVX_LAYOUT=prefill:1x1,decode:1x1 mpirun -np 2 mpi_tests/t_repro stall
 *   KVX_LAYOUT=prefill:1x1,decode:1x1 UCX_TLS=tcp,self KVX_SHUTDOWN_TIMEOUT=1s \
 *       KVX_PEER_TIMEOUT=500ms mpirun -np 2 -x UCX_TLS mpi_tests/t_repro inflight
 *   KVX_LAYOUT=prefill:1x1,decode:1x1 mpirun -np 2 mpi_tests/t_repro reslot
 *   KVX_LAYOUT=prefill:1x1,decode:1x1 KVX_TRANSFER_TIMEOUT=1s \
 *       KVX_FAULT=stage=completion,role=prefill,effect=drop \
 *       mpirun -np 2 -x KVX_TRANSFER_TIMEOUT -x KVX_FAULT mpi_tests/t_repro expire
 *   KVX_LAYOUT=prefill:1x1,decode:1x1 KVX_BOOTSTRAP_TIMEOUT=30s \
 *       mpirun -np 2 -x KVX_BOOTSTRAP_TIMEOUT mpi_tests/t_repro closegrant
 * (as root add --allow-run-as-root; each exits 0 when the finding stays fixed)
 */
#include <kvx.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int rank, peer_pid;

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static kvx_ctx_t *create(size_t num_pages, unsigned page_size, size_t aux_slots)
{
    kvx_ctx_params_t p;
    kvx_failure_t why;
    kvx_ctx_t *ctx;
    char line[512];
    int pid = getpid(), size;

    kvx_ctx_params_init(&p);
    p.kv.layers = 2;
    p.kv.page_size = page_size;
    p.kv.kv_heads = 8;
    p.kv.head_dim = 128;
    p.num_pages = num_pages;
    p.aux_slots = aux_slots;
    p.aux_item_size = aux_slots > 0 ? 8 : 0;
    if (kvx_ctx_create(MPI_COMM_WORLD, &p, &ctx, &why) != KVX_OK) {
        kvx_failure_format(&why, line, sizeof(line));
        fprintf(stderr, "t_repro: rank %d: kvx_ctx_create: %s\n", rank, line);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size == 2) { /* (only closegrant runs on more ranks) */
        MPI_Sendrecv(&pid, 1, MPI_INT, 1 - rank, 0, &peer_pid, 1, MPI_INT, 1 - rank, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    return ctx;
}

static kvx_role_t role_of(kvx_ctx_t *ctx)
{
    kvx_identity_t id;

    kvx_ctx_identity(ctx, &id);
    return id.role;
}

/* Opens room id on this side with pages 0..n-1 (the prefill hands them
 * over at once) and polls it for at most limit seconds. */
static kvx_room_state_t run_room(kvx_ctx_t *ctx, uint64_t id, size_t n, double limit)
{
    uint32_t *pages = malloc(n * sizeof(uint32_t));
    kvx_room_state_t st = KVX_ROOM_BOOTSTRAPPING;
    double t0 = now_s();

    for (size_t i = 0; i < n; i++) {
        pages[i] = (uint32_t)i;
    }
    if (role_of(ctx) == KVX_ROLE_DECODE) {
        kvx_room_recv_open(ctx, id, 0, pages, n, -1);
    } else {
        kvx_room_send_open(ctx, id, 0, n);
        kvx_room_send_chunk(ctx, id, pages, n, NULL, 0);
    }
    while (now_s() - t0 < limit && kvx_room_poll(ctx, id, &st) == KVX_OK &&
           st != KVX_ROOM_SUCCESS && st != KVX_ROOM_FAILED) {
        usleep(1000);
    }
    free(pages);
    return st;
}

/* The decode stops itself; the prefill wakes it after secs seconds. */
static void stop_decode(kvx_ctx_t *ctx, unsigned secs)
{
    if (role_of(ctx) == KVX_ROLE_DECODE) {
        raise(SIGSTOP);
    } else {
        sleep(secs);
        kill(peer_pid, SIGCONT);
    }
}

static int repro_noaux(void)
{
    kvx_ctx_t *ctx = create(16, 16, 0);

    printf("t_repro: rank %d: a context without aux slots was created (expected)\n", rank);
    kvx_ctx_destroy(ctx);
    return 0;
}

static int repro_stall(void)
{
    kvx_ctx_t *ctx = create(16, 16, 1);
    kvx_room_state_t before = run_room(ctx, 1, 4, 10), after;

    kvx_room_close(ctx, 1);
    MPI_Barrier(MPI_COMM_WORLD);
    stop_decode(ctx, 2);
    MPI_Barrier(MPI_COMM_WORLD);
    sleep(1);
    after = run_room(ctx, 2, 4, 20);
    printf("t_repro: rank %d: room 1 before the stall %s; room 2 after it %s 20 s later "
           "(expected SUCCESS, or FAILED with a reason)\n",
           rank, kvx_room_state_name(before), kvx_room_state_name(after));
    kvx_room_close(ctx, 2);
    kvx_ctx_destroy(ctx);
    return after == KVX_ROOM_SUCCESS || after == KVX_ROOM_FAILED ? 0 : 1;
}

static int repro_inflight(void)
{
    kvx_ctx_t *ctx = create(256, 16, 1);
    kvx_role_t role = role_of(ctx);
    uint32_t *pages = malloc(256 * sizeof(uint32_t));
    kvx_room_state_t st = KVX_ROOM_BOOTSTRAPPING;

    for (uint32_t i = 0; i < 256; i++) {
        pages[i] = i;
    }
    if (role == KVX_ROLE_DECODE) {
        kvx_room_recv_open(ctx, 1, 0, pages, 256, -1);
        while (kvx_room_poll(ctx, 1, &st) == KVX_OK && st < KVX_ROOM_WAITING_FOR_INPUT) {
            usleep(100);
        }
    } else {
        kvx_room_send_open(ctx, 1, 0, 256);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (role == KVX_ROLE_DECODE) {
        raise(SIGSTOP); /* the prefill wakes it once it destroyed its context */
    } else {
        usleep(300000);
        kvx_room_send_chunk(ctx, 1, pages, 256, NULL, 0);
        usleep(100000);
    }
    kvx_ctx_destroy(ctx);
    printf("t_repro: rank %d: destroyed (expected, without a memory error)\n", rank);
    if (role == KVX_ROLE_PREFILL) {
        kill(peer_pid, SIGCONT);
    }
    free(pages);
    return 0;
}

/* One round over ids[0..n), waited for. */
static kvx_agreed_t agree_once(kvx_ctx_t *ctx, const uint64_t *ids, size_t n)
{
    kvx_agreed_t out[2] = { { KVX_ERR_INTERNAL, KVX_ROOM_FAILED },
                            { KVX_ERR_INTERNAL, KVX_ROOM_FAILED } };
    kvx_agree_t *a;

    if (n <= 2 && kvx_agree_start(ctx, ids, n, &a) == KVX_OK) {
        kvx_agree_wait(a, out);
        kvx_agree_free(a);
    }
    return out[n > 0 ? n - 1 : 0];
}

static int repro_reslot(void)
{
    kvx_ctx_t *ctx = create(16, 16, 1);
    kvx_role_t role = role_of(ctx);
    uint64_t ids[2] = { 1, 2 };
    uint32_t pages[4] = { 8, 9, 10, 11 };
    kvx_room_state_t one = run_room(ctx, 1, 4, 10), two = KVX_ROOM_FAILED;
    kvx_room_info_t info = { 0 };
    kvx_agreed_t out;

    agree_once(ctx, ids, 1); /* room 1 gets slot 0 */
    if (role == KVX_ROLE_DECODE) {
        kvx_room_recv_open(ctx, 2, 0, pages, 4, -1); /* the prefill never opens it */
    }
    out = agree_once(ctx, ids, role == KVX_ROLE_DECODE ? 2 : 1);
    if (role == KVX_ROLE_DECODE) {
        kvx_room_poll(ctx, 2, &two);
        kvx_room_info(ctx, 2, &info);
        printf("t_repro: rank %d: room 1 %s; room 2, %s and agreed=%d by kvx_room_info(), was "
               "reported %s %s (expected KVX_INPROGRESS)\n",
               rank, kvx_room_state_name(one), kvx_room_state_name(two), info.agreed,
               kvx_status_name(out.status), kvx_room_state_name(out.state));
        kvx_room_close(ctx, 2);
    }
    kvx_room_close(ctx, 1);
    MPI_Barrier(MPI_COMM_WORLD);
    kvx_ctx_destroy(ctx);
    return role == KVX_ROLE_DECODE && out.status != KVX_INPROGRESS ? 1 : 0;
}

static int repro_expire(void)
{
    static const char *const pages_names[] = { "IN_USE", "DRAINING", "RELEASED", "QUARANTINED" };
    kvx_ctx_t *ctx = create(16, 16, 1);
    kvx_room_state_t st = run_room(ctx, 1, 4, 10);
    kvx_room_info_t info = { 0 };
    kvx_pages_state_t first;
    double t0 = now_s();
    int bad = 0;

    if (role_of(ctx) == KVX_ROLE_DECODE) {
        kvx_room_info(ctx, 1, &info);
        first = info.pages;
        while (info.pages == KVX_PAGES_DRAINING && now_s() - t0 < 8) {
            usleep(1000);
            kvx_room_info(ctx, 1, &info);
        }
        printf("t_repro: rank %d: room 1 %s; its pages were %s when it failed and %s %.3f s "
               "later (expected DRAINING, then RELEASED, or QUARANTINED after 5 s)\n",
               rank, kvx_room_state_name(st), pages_names[first & 3], pages_names[info.pages & 3],
               now_s() - t0);
        bad = first != KVX_PAGES_DRAINING;
    }
    kvx_room_close(ctx, 1);
    MPI_Barrier(MPI_COMM_WORLD);
    kvx_ctx_destroy(ctx);
    return bad;
}

/* Polls a room until it is SUCCESS or FAILED, for at most limit seconds. */
static kvx_room_state_t repro_wait(kvx_ctx_t *ctx, uint64_t id, double limit)
{
    kvx_room_state_t st = KVX_ROOM_BOOTSTRAPPING;
    double t0 = now_s();

    while (now_s() - t0 < limit && kvx_room_poll(ctx, id, &st) == KVX_OK &&
           st != KVX_ROOM_SUCCESS && st != KVX_ROOM_FAILED) {
        usleep(1000);
    }
    return st;
}

static int repro_byeroom(void)
{
    kvx_ctx_t *ctx = create(16, 16, 1);
    kvx_room_state_t st = KVX_ROOM_BOOTSTRAPPING;
    kvx_failure_t f;
    int rc = 0;

    if (role_of(ctx) == KVX_ROLE_PREFILL) {
        kvx_room_send_open(ctx, 1, 0, 4);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (role_of(ctx) == KVX_ROLE_PREFILL) {
        st = repro_wait(ctx, 1, 2.0);
        rc = st == KVX_ROOM_FAILED && kvx_room_failure(ctx, 1, &f) == KVX_OK &&
                     f.status == KVX_ERR_SHUTDOWN
                 ? 0
                 : 1;
        printf("t_repro: rank %d: a room the decode never opened is %s 2 s after the decode "
               "began to destroy its context (expected FAILED with KVX_ERR_SHUTDOWN)\n",
               rank, kvx_room_state_name(st));
    }
    kvx_ctx_destroy(ctx);
    return rc;
}

static int repro_reuse(void)
{
    kvx_ctx_t *ctx = create(16, 16, 1);
    kvx_role_t role = role_of(ctx);
    uint32_t pages[2] = { 0, 1 };
    kvx_room_state_t st;
    char line[512] = "";
    kvx_failure_t f;

    if (role == KVX_ROLE_DECODE) {
        kvx_room_recv_open(ctx, 7, 0, pages, 2, -1);
    } else {
        kvx_room_send_open(ctx, 7, 0, 2);
        while (kvx_room_poll(ctx, 7, &st) == KVX_OK && st < KVX_ROOM_WAITING_FOR_INPUT) {
            usleep(100);
        }
        kvx_room_abort(ctx, 7, "the first request with this id");
        while (kvx_room_close(ctx, 7) == KVX_ERR_BUSY) {
            usleep(1000);
        }
    }
    if (role == KVX_ROLE_DECODE) {
        repro_wait(ctx, 7, 10);
        while (kvx_room_close(ctx, 7) == KVX_ERR_BUSY) {
            usleep(1000);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    usleep(100000);
    MPI_Barrier(MPI_COMM_WORLD);
    /* The same id again: a retry of the request. */
    if (role == KVX_ROLE_DECODE) {
        kvx_room_recv_open(ctx, 7, 0, pages, 2, -1);
    } else {
        kvx_room_send_open(ctx, 7, 0, 2);
        kvx_room_send_chunk(ctx, 7, pages, 2, NULL, 0);
    }
    st = repro_wait(ctx, 7, 10);
    if (st == KVX_ROOM_FAILED && kvx_room_failure(ctx, 7, &f) == KVX_OK) {
        kvx_failure_format(&f, line, sizeof(line));
    }
    printf("t_repro: rank %d: the room reusing id 7 is %s %s(expected SUCCESS)\n", rank,
           kvx_room_state_name(st), line);
    kvx_room_close(ctx, 7);
    kvx_ctx_destroy(ctx);
    return st == KVX_ROOM_SUCCESS ? 0 : 1;
}

/* Prints and counts what differs from what a user relies on. */
static int repro_expect(int ok, const char *what)
{
    printf("t_repro: rank %d: %s: %s\n", rank, ok ? "ok" : "WRONG", what);
    return ok ? 0 : 1;
}

static int repro_closegrant(double wait_s)
{
    static const char reason[] = "closed by the application while BOOTSTRAPPING";
    kvx_ctx_t *ctx = create(16, 16, 1);
    kvx_role_t role = role_of(ctx);
    uint32_t pages[4] = { 0, 1, 2, 3 };
    kvx_room_state_t st = KVX_ROOM_BOOTSTRAPPING;
    kvx_room_info_t info = { 0 };
    kvx_failure_t f = { 0 };
    kvx_stats_t s0, s1;
    kvx_agreed_t out;
    char line[512] = "";
    double t0, took = 0;
    int bad = 0;

    kvx_ctx_stats(ctx, &s0);
    if (role == KVX_ROLE_PREFILL) {
        bad += repro_expect(kvx_room_send_open(ctx, 9, 0, 4) == KVX_OK, "room 9 opened");
        bad += repro_expect(kvx_room_poll(ctx, 9, &st) == KVX_OK && st == KVX_ROOM_BOOTSTRAPPING,
                            "room 9 is BOOTSTRAPPING before the decode opened it");
        bad += repro_expect(kvx_room_close(ctx, 9) == KVX_OK, "kvx_room_close(9) says KVX_OK");
        bad += repro_expect(kvx_room_poll(ctx, 9, &st) == KVX_ERR_NO_ROOM,
                            "room 9 is gone for the application once closed");
        /* Under TP the closed room takes part in rounds until
         * 2 x KVX_TP_TIMEOUT after it was opened: wait_s may wait that out. */
        usleep((useconds_t)(wait_s * 1e6));
        for (int r = 0; r < 2; r++) {
            out = agree_once(ctx, NULL, 0);
            (void)out;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (role == KVX_ROLE_DECODE) {
        t0 = now_s();
        bad += repro_expect(kvx_room_recv_open(ctx, 9, 0, pages, 4, 0) == KVX_OK,
                            "room 9 opened (pages 0-3, aux slot 0)");
        st = repro_wait(ctx, 9, 10);
        took = now_s() - t0;
        if (st == KVX_ROOM_FAILED && kvx_room_failure(ctx, 9, &f) == KVX_OK) {
            kvx_failure_format(&f, line, sizeof(line));
        }
        printf("t_repro: rank %d: room 9 is %s after %.3f s: %s\n", rank, kvx_room_state_name(st),
               took, line);
        bad += repro_expect(st == KVX_ROOM_FAILED && took < 5,
                            "room 9 FAILED within 5 s (not at a deadline)");
        bad += repro_expect(f.status == KVX_ERR_ABORTED && f.stage == KVX_STAGE_ABORT &&
                                f.origin_role == KVX_ROLE_PREFILL && f.origin_rank >= 0 &&
                                f.origin_rank < rank && strstr(f.text, reason) != NULL,
                            "the root cause is the prefill's close (KVX_ERR_ABORTED, stage abort, "
                            "from a prefill rank, \"closed by the application while "
                            "BOOTSTRAPPING\")");
        t0 = now_s();
        while (kvx_room_info(ctx, 9, &info) == KVX_OK && info.pages == KVX_PAGES_DRAINING &&
               now_s() - t0 < 10) {
            usleep(1000);
        }
        bad += repro_expect(info.pages == KVX_PAGES_RELEASED,
                            "its pages are RELEASED (the prefill said nothing was written)");
        bad += repro_expect(kvx_room_close(ctx, 9) == KVX_OK, "kvx_room_close(9) says KVX_OK");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    /* The request again, with the same id and pages. */
    if (role == KVX_ROLE_DECODE) {
        kvx_status_t so = kvx_room_recv_open(ctx, 9, 0, pages, 4, 0);

        snprintf(line, sizeof(line), "room 9 opened again: %s", kvx_status_name(so));
        bad += repro_expect(so == KVX_OK, line);
    } else {
        kvx_status_t so = kvx_room_send_open(ctx, 9, 0, 4);
        kvx_status_t sc = kvx_room_send_chunk(ctx, 9, pages, 4, "aux-row", 8);

        snprintf(line, sizeof(line), "room 9 opened again and its pages handed over: %s, %s",
                 kvx_status_name(so), kvx_status_name(sc));
        bad += repro_expect(so == KVX_OK && sc == KVX_OK, line);
    }
    st = repro_wait(ctx, 9, 20);
    line[0] = '\0';
    if (st == KVX_ROOM_FAILED && kvx_room_failure(ctx, 9, &f) == KVX_OK) {
        kvx_failure_format(&f, line, sizeof(line));
    }
    printf("t_repro: rank %d: room 9 again is %s %s\n", rank, kvx_room_state_name(st), line);
    bad += repro_expect(st == KVX_ROOM_SUCCESS, "room 9 again, same pages and aux slot: SUCCESS");
    {
        kvx_status_t sc = kvx_room_close(ctx, 9);

        snprintf(line, sizeof(line), "kvx_room_close(9 again) says KVX_OK (%s)",
                 kvx_status_name(sc));
        bad += repro_expect(sc == KVX_OK, line);
    }
    kvx_ctx_stats(ctx, &s1);
    printf("t_repro: rank %d: stats: opened %llu closed %llu succeeded %llu failed %llu "
           "pages quarantined %llu (src %llu) released %llu, rejected messages %llu\n",
           rank, (unsigned long long)(s1.rooms_opened - s0.rooms_opened),
           (unsigned long long)(s1.rooms_closed - s0.rooms_closed),
           (unsigned long long)(s1.rooms_succeeded - s0.rooms_succeeded),
           (unsigned long long)(s1.rooms_failed - s0.rooms_failed),
           (unsigned long long)(s1.pages_quarantined - s0.pages_quarantined),
           (unsigned long long)(s1.src_pages_quarantined - s0.src_pages_quarantined),
           (unsigned long long)(s1.pages_released - s0.pages_released),
           (unsigned long long)(s1.messages_rejected - s0.messages_rejected));
    bad += repro_expect(
        s1.rooms_opened - s0.rooms_opened == 2 && s1.rooms_closed - s0.rooms_closed == 2 &&
            s1.rooms_succeeded - s0.rooms_succeeded == 1 && s1.rooms_failed - s0.rooms_failed == 1,
        "counted: 2 opened, 2 closed, 1 succeeded, 1 failed");
    bad += repro_expect(s1.pages_quarantined == s0.pages_quarantined &&
                            s1.src_pages_quarantined == s0.src_pages_quarantined &&
                            s1.messages_rejected == s0.messages_rejected,
                        "no page quarantined, no message rejected");
    if (role == KVX_ROLE_DECODE) {
        bad += repro_expect(s1.pages_released - s0.pages_released == 4,
                            "counted: the 4 pages of the failed room released");
    }
    kvx_ctx_destroy(ctx);
    return bad != 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int rc = 2;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (strcmp(mode, "noaux") == 0) {
        rc = repro_noaux();
    } else if (strcmp(mode, "stall") == 0) {
        rc = repro_stall();
    } else if (strcmp(mode, "inflight") == 0) {
        rc = repro_inflight();
    } else if (strcmp(mode, "reslot") == 0) {
        rc = repro_reslot();
    } else if (strcmp(mode, "expire") == 0) {
        rc = repro_expire();
    } else if (strcmp(mode, "byeroom") == 0) {
        rc = repro_byeroom();
    } else if (strcmp(mode, "reuse") == 0) {
        rc = repro_reuse();
    } else if (strcmp(mode, "closegrant") == 0) {
        rc = repro_closegrant(argc > 2 ? atof(argv[2]) : 0);
    } else {
        fprintf(stderr,
                "usage: t_repro noaux|stall|inflight|reslot|expire|byeroom|reuse|closegrant (see "
                "mpi_tests/t_repro.c)\n");
    }
    /* Every rank's verdict is the job's: mpirun reports the first that failed. */
    MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
