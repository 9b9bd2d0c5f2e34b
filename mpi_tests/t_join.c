/*
 * t_join.c - a decode instance joins a running job (docs/user/join.md).
 *
 *   t_join job ROOMS JOINED     the running job, prefill:1x1,decode:1x1 with a
 *                               job key: prefill[0] sends ROOMS rooms to
 *                               decode[0]; once decode[1] has joined
 *                               (kvx_ctx_pair_status), every other new room
 *                               goes to it, JOINED in all
 *   t_join job ROOMS JOINED KILLED
 *                               the same, and decode[1] dies after KILLED rooms:
 *                               its next room must fail (KVX_ERR_PEER_LOST), the
 *                               place's pair status say it is gone, and the next
 *                               joiner takes the place (generation 2) and JOINED
 *                               rooms, under the same room ids
 *   t_join joiner JOINED [PLACE [die]]
 *                               the joiner, its own mpirun (KVX_LAYOUT=decode:1x1,
 *                               KVX_JOIN=the job's address): joins as decode[PLACE]
 *                               (1), receives JOINED rooms, and with "die" then
 *                               kills itself (SIGKILL), writing when to killed_at;
 *                               with "linger" waits 6 s before it leaves
 *   t_join job ROOMS CYCLES PER cycles, t_join joiner-cycles CYCLES PER
 *                               a joiner that joins as decode[1], takes PER rooms
 *                               and leaves, CYCLES times in one process: each
 *                               incarnation gets the place again; the job's
 *                               memory and descriptors do not grow with them
 *   t_join world-kill KILLED JOINED
 *                               decode[0] of the job's own world takes KILLED
 *                               rooms and dies; its next room must fail, and a
 *                               replacement (t_join joiner JOINED 0) takes
 *                               decode[0] again, generation 2, and JOINED rooms
 *   t_join refused STATUS TEXT [PAGE_SIZE]
 *                               a joiner the job must refuse: kvx_ctx_create()
 *                               fails with STATUS and a reason holding TEXT
 *
 * Every room is 4 pages of the kvpattern.h content of its id, checked byte
 * by byte on the decode rank that receives it; room ids say where a room
 * goes (decode[0]: 1..ROOMS, decode[k]: 1000k+1..), so each side
 * opens its rooms in order without asking the other.
 */
#include "kvpattern.h"
#include "testlib.h"

#include <kvx.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <malloc.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

int tl_rank, tl_failures;
static tl_job_t J;

#define JOIN_PAGES 4

static void params(kvx_ctx_params_t *p, unsigned page_size)
{
    kvx_ctx_params_init(p);
    p->kv.layers = 2;
    p->kv.page_size = page_size;
    p->kv.kv_heads = 2;
    p->kv.head_dim = 16;
    p->kv.dtype = KVX_DTYPE_BF16;
    p->num_pages = 64;
}

/* A joiner that must be refused: the status and the reason's words. */
static void refused(const char *status, const char *text, unsigned page_size)
{
    kvx_ctx_params_t p;
    kvx_failure_t why;
    kvx_ctx_t *ctx = NULL;
    kvx_status_t st;
    char line[512];

    params(&p, page_size);
    st = kvx_ctx_create(MPI_COMM_WORLD, &p, &ctx, &why);
    kvx_failure_format(&why, line, sizeof(line));
    TL_CHECK(
        st != KVX_OK && strcmp(kvx_status_name(st), status) == 0 && strstr(why.text, text) != NULL,
        "kvx_ctx_create: %s (%s); wanted %s with \"%s\"", kvx_status_name(st), line, status, text);
    printf("t_join refused: %s\n", line);
    if (st == KVX_OK) {
        kvx_ctx_destroy(ctx);
    }
}

static void start(void)
{
    kvx_ctx_params_t p;

    params(&p, 4);
    tl_job_start(&J, &p);
}

/* kvx_ctx_join_address(): the door of a prefill rank of the job (world rank
 * 0's is what it wrote to KVX_JOIN_ADDRESS_FILE), none on a decode rank. */
static void check_join_address(void)
{
    const char *path = tl_config_value("KVX_JOIN_ADDRESS_FILE");
    char addr[128], line[128] = "";
    kvx_status_t st = kvx_ctx_join_address(J.ctx, addr, sizeof(addr));
    FILE *f;

    if (J.id.role != KVX_ROLE_PREFILL) {
        TL_CHECK(st == KVX_ERR_STATE, "a decode rank's join address: %s", kvx_status_name(st));
        return;
    }
    TL_CHECK(st == KVX_OK, "a prefill rank's join address: %s", kvx_status_name(st));
    TL_CHECK(kvx_ctx_join_address(J.ctx, line, 4) == KVX_ERR_INVALID_PARAM && line[0] == '\0',
             "a join address into 4 bytes is not refused, or wrote");
    if (J.id.world_rank == 0 && path[0] != '\0' && (f = fopen(path, "r")) != NULL) {
        if (fgets(line, sizeof(line), f) != NULL) {
            line[strcspn(line, "\n")] = '\0';
        }
        fclose(f);
        TL_CHECK(st == KVX_OK && strcmp(line, addr) == 0,
                 "the join address is %s, KVX_JOIN_ADDRESS_FILE says %s", addr, line);
    }
}

/* Sends room id to decode[decode] and waits until it concluded: its state,
 * and its reason in f when it FAILED. */
static kvx_room_state_t send_room(uint64_t id, int decode, kvx_failure_t *f)
{
    uint32_t pages[JOIN_PAGES];
    kvx_room_state_t st;
    kvx_status_t cs;
    double t0;

    for (unsigned i = 0; i < JOIN_PAGES; i++) {
        pages[i] = i;
    }
    memset(f, 0, sizeof(*f));
    kvp_pages(&J.g, J.bufs, J.comps, id, pages, JOIN_PAGES, 0, 1);
    TL_CHECK(kvx_room_send_open(J.ctx, id, decode, JOIN_PAGES) == KVX_OK, "send_open %llu",
             (unsigned long long)id);
    TL_CHECK(kvx_room_send_chunk(J.ctx, id, pages, JOIN_PAGES, NULL, 0) == KVX_OK,
             "send_chunk %llu", (unsigned long long)id);
    st = tl_wait_state(J.ctx, id, KVX_ROOM_SUCCESS, 60);
    if (st == KVX_ROOM_FAILED) {
        kvx_room_failure(J.ctx, id, f);
    }
    t0 = tl_now();
    while ((cs = kvx_room_close(J.ctx, id)) == KVX_ERR_BUSY && tl_now() - t0 < 30) {
        usleep(1000);
    }
    TL_CHECK(cs == KVX_OK || st == KVX_ROOM_FAILED, "close %llu: %s", (unsigned long long)id,
             kvx_status_name(cs));
    return st;
}

static void send_ok(uint64_t id, int decode)
{
    kvx_failure_t f;
    kvx_room_state_t st = send_room(id, decode, &f);
    char line[512];

    kvx_failure_format(&f, line, sizeof(line));
    TL_CHECK(st == KVX_ROOM_SUCCESS, "room %llu to decode[%d] is %s: %s", (unsigned long long)id,
             decode, kvx_room_state_name(st), line);
}

/* The decode side of rooms [first, first + n): each opened, landed, checked. */
static void receive(uint64_t first, int n)
{
    for (int k = 0; k < n; k++) {
        uint64_t id = first + (uint64_t)k;
        uint32_t pages[JOIN_PAGES];
        kvx_room_state_t st;
        kvx_status_t cs;
        size_t bad;
        double t0;

        for (unsigned i = 0; i < JOIN_PAGES; i++) {
            pages[i] = (uint32_t)(8 + (k % 4) * JOIN_PAGES + i);
        }
        memset(J.bufs[0], 0, J.page_bytes); /* page 0 is not one of them */
        TL_CHECK(kvx_room_recv_open(J.ctx, id, 0, pages, JOIN_PAGES, -1) == KVX_OK,
                 "recv_open %llu", (unsigned long long)id);
        st = tl_wait_state(J.ctx, id, KVX_ROOM_SUCCESS, 120);
        if (st != KVX_ROOM_SUCCESS) {
            char line[512];

            TL_CHECK(0, "room %llu is %s: %s", (unsigned long long)id, kvx_room_state_name(st),
                     tl_failure_line(J.ctx, id, line, sizeof(line)));
        }
        bad = kvp_pages(&J.g, J.bufs, J.comps, id, pages, JOIN_PAGES, 0, 0);
        TL_CHECK(bad == 0, "room %llu: %zu bytes differ from what was sent", (unsigned long long)id,
                 bad);
        t0 = tl_now();
        while ((cs = kvx_room_close(J.ctx, id)) == KVX_ERR_BUSY && tl_now() - t0 < 30) {
            usleep(1000);
        }
        TL_CHECK(cs == KVX_OK, "close %llu: %s", (unsigned long long)id, kvx_status_name(cs));
    }
}

static double wall_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The joiner kills itself, as a crash would, after saying when. */
static void die(void)
{
    char path[4096];
    FILE *f;

    snprintf(path, sizeof(path), "%s/killed_at", getenv("KVXT_OUT"));
    f = fopen(path, "w");
    if (f != NULL) {
        fprintf(f, "%.6f\n", wall_now());
        fclose(f);
    }
    fflush(stdout);
    kill(getpid(), SIGKILL);
}

/* When the joiner that was killed died (CLOCK_REALTIME, written by it). */
static double killed_at(void)
{
    char path[4096];
    double t = 0;
    FILE *f;

    snprintf(path, sizeof(path), "%s/joiner-1/killed_at", getenv("KVXT_OUT"));
    if (access(path, R_OK) != 0) { /* a world rank killed itself: the job's own */
        snprintf(path, sizeof(path), "%s/killed_at", getenv("KVXT_OUT"));
    }
    f = fopen(path, "r");
    if (f != NULL) {
        if (fscanf(f, "%lf", &t) != 1) {
            t = 0;
        }
        fclose(f);
    }
    return t;
}

/* prefill[0]: rooms to decode[0] until a joiner is usable, then every other
 * room to it. With killed > 0, decode[1] dies after its killed rooms: the
 * next one to it must fail as a lost peer, and its replacement takes its
 * share. */
static void prefill(int rooms, int joined, int killed)
{
    double t0 = tl_now(), last = t0, limit = 120 * tl_timeout_scale(), lost_at = 0;
    int to0 = 0, sent = 0, target = 1, want = killed > 0 ? killed + 1 : joined;
    int alt = 0; /* the joiner's turn */
    kvx_failure_t why;

    MPI_Comm tp = kvx_ctx_tp_comm(J.ctx);

    while (to0 < rooms || target > 0) {
        /* Every TP rank of the prefill instance opens the same rooms: the
         * decisions are theirs together (usable on all; tp0's clock). */
        int mine = target > 0 && kvx_ctx_pair_status(J.ctx, target, &why) == KVX_OK, usable;
        int clock[2] = { tl_now() - last > 0.1, tl_now() - t0 < limit };

        MPI_Allreduce(&mine, &usable, 1, MPI_INT, MPI_MIN, tp);
        MPI_Bcast(clock, 2, MPI_INT, 0, tp);

        if (usable && sent == 0 && (alt || to0 >= rooms)) {
            uint64_t epoch = 0;

            /* Each join, and each loss, moves the membership epoch (and so
             * does decode[0] leaving, should it have run out of rooms). */
            uint64_t expect = lost_at > 0 ? 3u : 1u;

            kvx_ctx_membership(J.ctx, &epoch);
            TL_CHECK(epoch == expect || (epoch == expect + 1 && to0 >= rooms),
                     "membership epoch %llu when decode[1] %s", (unsigned long long)epoch,
                     lost_at > 0 ? "was replaced" : "joined");
            printf("t_join: decode[%d] usable %.3f s after the first room, %d rooms to "
                   "decode[0] before\n",
                   target, tl_now() - t0, to0);
        }
        if (usable && (alt || to0 >= rooms)) {
            alt = 0;
            uint64_t id = 1000 * (uint64_t)target + 1 + (uint64_t)sent++;

            if (killed > 0 && sent == want) {
                kvx_failure_t f;
                kvx_status_t st;
                kvx_room_state_t rs = send_room(id, 1, &f);
                char line[512];

                kvx_failure_format(&f, line, sizeof(line));
                TL_CHECK(rs == KVX_ROOM_FAILED && f.status == KVX_ERR_PEER_LOST,
                         "room %llu to the killed decode[1] is %s: %s", (unsigned long long)id,
                         kvx_room_state_name(rs), line);
                lost_at = tl_now();
                printf("t_join: room %llu to the killed decode[1]: %s\n", (unsigned long long)id,
                       line);
                /* The place is no pair until its next incarnation joins. */
                st = kvx_ctx_pair_status(J.ctx, 1, &f);
                TL_CHECK(st == KVX_ERR_PEER_LOST && strstr(f.text, "decode[1] is gone") != NULL,
                         "decode[1] after its loss: %s (%s)", kvx_status_name(st), f.text);
                killed = 0;
                sent = 0;
                want = joined;
            } else {
                send_ok(id, target);
                if (sent == 1 && lost_at > 0) {
                    double k = killed_at();

                    printf("t_join: recovery: first SUCCESS on decode[1], generation 2, %.3f s "
                           "after the loss was seen, %.3f s after the kill\n",
                           tl_now() - lost_at, k > 0 ? wall_now() - k : -1.0);
                }
                if (sent == want) {
                    target = 0;
                }
            }
            last = tl_now();
        } else if (to0 < rooms && (usable || target == 0 || clock[0])) {
            /* Alternating with a usable joiner; while one is awaited, one
             * room in 100 ms: the job goes on. */
            send_ok(1 + (uint64_t)to0++, 0);
            alt = 1;
            last = tl_now();
        } else if (clock[1]) {
            usleep(5000);
        } else {
            TL_CHECK(0, "decode[%d] did not join within %.0f s (%s)", target, limit, why.text);
            break;
        }
    }
}

/* prefill[0] when decode[0], an instance of the job's own world, dies after
 * killed rooms: its next room fails as a lost peer, its pair status says it
 * is gone, and a replacement takes decode[0] again (generation 2) and
 * joined rooms, under the same room ids. */
static void prefill_world(int killed, int joined)
{
    double limit = 120 * tl_timeout_scale(), lost_at, w0;
    uint64_t epoch = 0;
    kvx_failure_t f;
    kvx_room_state_t rs;
    kvx_status_t st;
    char line[512];

    for (int k = 1; k <= killed; k++) {
        send_ok((uint64_t)k, 0);
    }
    rs = send_room((uint64_t)killed + 1, 0, &f);
    kvx_failure_format(&f, line, sizeof(line));
    TL_CHECK(rs == KVX_ROOM_FAILED && f.status == KVX_ERR_PEER_LOST,
             "room %d to the killed decode[0] is %s: %s", killed + 1, kvx_room_state_name(rs),
             line);
    lost_at = tl_now();
    printf("t_join: room %d to the killed decode[0]: %s\n", killed + 1, line);
    st = kvx_ctx_pair_status(J.ctx, 0, &f);
    TL_CHECK(st == KVX_ERR_PEER_LOST && strstr(f.text, "decode[0] is gone") != NULL,
             "decode[0] after its loss: %s (%s)", kvx_status_name(st), f.text);
    w0 = tl_now();
    while (kvx_ctx_pair_status(J.ctx, 0, &f) != KVX_OK && tl_now() - w0 < limit) {
        usleep(2000);
    }
    TL_CHECK(tl_now() - w0 < limit, "no replacement of decode[0] within %.0f s (%s)", limit,
             f.text);
    kvx_ctx_membership(J.ctx, &epoch);
    TL_CHECK(epoch == 2, "membership epoch %llu after the loss and the replacement",
             (unsigned long long)epoch);
    for (int k = 1; k <= joined && tl_failures == 0; k++) {
        send_ok((uint64_t)k, 0);
        if (k == 1) {
            double kt = killed_at();

            printf("t_join: recovery: first SUCCESS on decode[0], generation 2, %.3f s after "
                   "the loss was seen, %.3f s after the kill\n",
                   tl_now() - lost_at, kt > 0 ? wall_now() - kt : -1.0);
        }
    }
}

/* What this process holds: its heap in use and resident memory (kB), open
 * descriptors, and mappings of System V shared memory (UCX's shared-memory
 * transports map their peers' segments). */
typedef struct usage {
    long heap_kb, rss_kb;
    int fds, sysv_maps;
} usage_t;

static usage_t usage_now(void)
{
    usage_t u = { (long)(mallinfo2().uordblks / 1024), 0, 0, 0 };
    char line[512];
    FILE *f = fopen("/proc/self/status", "r");
    DIR *d = opendir("/proc/self/fd");

    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        sscanf(line, "VmRSS: %ld", &u.rss_kb);
    }
    if (f != NULL) {
        fclose(f);
    }
    while (d != NULL && readdir(d) != NULL) {
        u.fds++;
    }
    if (d != NULL) {
        closedir(d);
    }
    f = fopen("/proc/self/maps", "r");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        u.sysv_maps += strstr(line, "/SYSV") != NULL;
    }
    if (f != NULL) {
        fclose(f);
    }
    return u;
}

/* Cycles of a joiner that takes decode[1], receives per rooms and leaves
 * (fewer under the sanitizers' KVXT_TIMEOUT_SCALE, at least 20). */
static int cycles_of(int n)
{
    int k = n / (int)tl_timeout_scale();

    return k < 20 ? 20 : k;
}

/* prefill[0] under joiners that come and go: each incarnation of decode[1]
 * takes per rooms (the same ids every time), then leaves; decode[0]'s rooms
 * go on. Its memory and descriptors after the tenth and the last must not
 * grow with the cycles. */
static void prefill_cycles(int rooms, int cycles, int per)
{
    double t0 = tl_now(), limit = 60 * tl_timeout_scale(), last = 0;
    usage_t u10 = { 0, 0, 0, 0 }, u;
    int to0 = 0;
    kvx_failure_t why;
    kvx_health_t h;

    for (int c = 1; c <= cycles && tl_failures == 0; c++) {
        double wait0 = tl_now();

        /* The previous incarnation left; wait for the next. */
        while (kvx_ctx_pair_status(J.ctx, 1, &why) != KVX_OK && tl_now() - wait0 < limit) {
            if (to0 < rooms && tl_now() - last > 0.1) {
                send_ok(1 + (uint64_t)to0++, 0);
                last = tl_now();
            }
            usleep(2000);
        }
        TL_CHECK(tl_now() - wait0 < limit, "cycle %d: decode[1] did not join within %.0f s (%s)", c,
                 limit, why.text);
        for (int k = 0; k < per && tl_failures == 0; k++) {
            send_ok(1001 + (uint64_t)k, 1);
        }
        /* Until it has said goodbye (its pair status no longer OK). */
        wait0 = tl_now();
        while (kvx_ctx_pair_status(J.ctx, 1, &why) == KVX_OK && tl_now() - wait0 < limit) {
            usleep(2000);
        }
        {
            /* 2 a cycle, and 1 when decode[0] (of the world) has left: it
             * finishes its rooms before the cycles end. */
            uint64_t epoch = 0;
            int gone0 = kvx_ctx_pair_status(J.ctx, 0, NULL) == KVX_ERR_PEER_LOST, gone1;

            kvx_ctx_membership(J.ctx, &epoch);
            gone1 = kvx_ctx_pair_status(J.ctx, 0, NULL) == KVX_ERR_PEER_LOST;
            TL_CHECK(epoch == 2 * (uint64_t)c + (uint64_t)gone0 ||
                         epoch == 2 * (uint64_t)c + (uint64_t)gone1,
                     "membership epoch %llu after %d joins and leaves", (unsigned long long)epoch,
                     c);
        }
        if (c == 10) {
            u10 = usage_now();
        }
    }
    while (to0 < rooms) {
        send_ok(1 + (uint64_t)to0++, 0);
    }
    u = usage_now();
    kvx_ctx_health(J.ctx, &h);
    printf("t_join: %d incarnations of decode[1] in %.1f s; after the 10th and the last: heap "
           "%ld -> %ld kB, resident %ld -> %ld kB, %d -> %d descriptors, %d -> %d System V "
           "mappings; peers lost now %u\n",
           cycles, tl_now() - t0, u10.heap_kb, u.heap_kb, u10.rss_kb, u.rss_kb, u10.fds, u.fds,
           u10.sysv_maps, u.sysv_maps, h.peers_lost);
    /* kvx's heap and descriptors must not grow with the incarnations.
     * (UCX 1.13's shared-memory transports keep each departed peer's
     * segments mapped until the workers go: docs/user/join.md.) */
    TL_CHECK(u.fds <= u10.fds + 2, "descriptors grew from %d to %d over %d cycles", u10.fds, u.fds,
             cycles - 10);
    TL_CHECK(u.heap_kb <= u10.heap_kb + 512, "the heap grew from %ld kB to %ld kB over %d cycles",
             u10.heap_kb, u.heap_kb, cycles - 10);
    TL_CHECK(h.peers_lost == 0, "health counts %u peers lost (%s)", h.peers_lost, h.lost_peers);
}

/* The joiner's side of prefill_cycles(). */
static void joiner_cycles(int cycles, int per)
{
    for (int c = 1; c <= cycles && tl_failures == 0; c++) {
        start();
        TL_CHECK(J.id.instance == 1, "cycle %d: joined as decode[%d]", c, J.id.instance);
        receive(1001, per);
        kvx_ctx_destroy(J.ctx);
    }
}

int main(int argc, char **argv)
{
    int provided, job = argc > 1 && strcmp(argv[1], "job") == 0;
    char line[160];

    if (argc < 3 || (!job && strcmp(argv[1], "joiner") != 0 && strcmp(argv[1], "refused") &&
                     strcmp(argv[1], "joiner-cycles") && strcmp(argv[1], "world-kill"))) {
        fprintf(stderr, "usage: t_join job ROOMS JOINED [KILLED|CYCLES PER cycles] | t_join "
                        "joiner JOINED [PLACE [die|linger]] | t_join joiner-cycles CYCLES PER | "
                        "t_join world-kill KILLED JOINED | t_join refused STATUS TEXT "
                        "[PAGE_SIZE]\n");
        return 2;
    }
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &tl_rank);
    if (strcmp(argv[1], "refused") == 0) {
        refused(argv[2], argc > 3 ? argv[3] : "", argc > 4 ? (unsigned)atoi(argv[4]) : 4);
        tl_result(tl_failures ? "t_join refused: FAILED" : "t_join refused: ok");
        MPI_Finalize();
        return tl_failures ? 1 : 0;
    }
    if (strcmp(argv[1], "world-kill") == 0 && argc > 3) {
        start();
        if (J.id.role == KVX_ROLE_PREFILL) {
            prefill_world(atoi(argv[2]), atoi(argv[3]));
        } else {
            receive(1, atoi(argv[2]));
            die(); /* decode[0], of the job's world */
        }
        kvx_ctx_destroy(J.ctx);
        tl_result(tl_failures ? "t_join world-kill: FAILED" : "t_join world-kill: ok");
        MPI_Finalize();
        return tl_failures ? 1 : 0;
    }
    if (strcmp(argv[1], "joiner-cycles") == 0) {
        joiner_cycles(cycles_of(atoi(argv[2])), atoi(argv[3]));
        tl_result(tl_failures ? "t_join joiner-cycles: FAILED" : "t_join joiner-cycles: ok");
        MPI_Finalize();
        return tl_failures ? 1 : 0;
    }
    start();
    check_join_address();
    if (job && J.id.role == KVX_ROLE_PREFILL && argc > 5 && strcmp(argv[5], "cycles") == 0) {
        prefill_cycles(atoi(argv[2]), cycles_of(atoi(argv[3])), atoi(argv[4]));
    } else if (job && J.id.role == KVX_ROLE_PREFILL) {
        prefill(atoi(argv[2]), atoi(argv[3]), argc > 4 ? atoi(argv[4]) : 0);
    } else if (job) {
        receive(1, atoi(argv[2]));
    } else {
        int want = argc > 3 ? atoi(argv[3]) : 1;

        TL_CHECK(J.id.role == KVX_ROLE_DECODE && J.id.instance == want,
                 "the joiner is %s[%d], not decode[%d]", kvx_role_name(J.id.role), J.id.instance,
                 want);
        receive(1000 * (uint64_t)J.id.instance + 1, atoi(argv[2]));
        if (argc > 4 && strcmp(argv[4], "die") == 0) {
            die();
        }
        if (argc > 4 && strcmp(argv[4], "linger") == 0) {
            sleep(6 * (unsigned)tl_timeout_scale()); /* the job's ranks leave first */
        }
    }
    {
        /* The job's ranks leave before a lingering joiner: the goodbye is
         * answered at once, not when the joiner leaves. */
        double d0 = tl_now();

        kvx_ctx_destroy(J.ctx);
        /* (A decode rank of the job waits for its prefill ranks' goodbye,
         * as in any job: only theirs is timed.) */
        if (job && J.id.role == KVX_ROLE_PREFILL) {
            printf("t_join: rank %d destroyed its context in %.3f s\n", tl_rank, tl_now() - d0);
            /* Not held until a lingering joiner leaves (6 s). */
            TL_CHECK(tl_now() - d0 < 3 * tl_timeout_scale(), "destroy took %.1f s", tl_now() - d0);
        }
    }
    snprintf(line, sizeof(line), "t_join %s: %s", job ? "job" : "joiner",
             tl_failures ? "FAILED" : "ok");
    tl_result(line);
    MPI_Finalize();
    return tl_failures ? 1 : 0;
}
