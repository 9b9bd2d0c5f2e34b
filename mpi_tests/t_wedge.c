/*
 * t_wedge.c - a rank killed while it writes into a peer's queues must not
 * stall that peer's rooms with other instances (mpirun --enable-recovery).
 *
 * Layout prefill:2x1,decode:1x1. Both prefill instances send rooms to the
 * decode in waves, back to back; a thread of prefill[1] SIGKILLs its process
 * at a random moment of the flood, so that it dies, now and then, in the
 * middle of a message: between claiming a slot of the decode's
 * shared-memory receive queue and marking it written. When every sender
 * shares one UCX worker (KVX_WORKER_GROUPS=1) that slot blocks every later
 * message of prefill[0] too, and its rooms stay TRANSFERRING until
 * KVX_TRANSFER_TIMEOUT. With a worker group per peer instance they go on.
 *
 * Checked on the survivors (result files, as in t_kill): every room of
 * prefill[0], before and after the kill, concludes SUCCESS on both sides
 * within a bound, byte-exact on the decode; rooms of prefill[1] end SUCCESS
 * or FAILED with the "lost" reason; the kill happened while waves remained.
 */
#include <kvx.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

int tl_rank, tl_failures;

#define WAVES    200 /* waves of rooms, ~5 ms each here; the kill comes in the first third */
#define PER_WAVE 4   /* rooms per prefill instance and wave */
#define PAGES    16

static tl_job_t job;
static int is_decode;

static uint64_t room_id(int prefill, int wave, int k)
{
    return 20000 + (uint64_t)wave * 100 + (uint64_t)prefill * 10 + (uint64_t)k;
}

/* The pages of slot k of a prefill instance: on the decode each instance
 * has its own, so that pages a lost writer leaves quarantined are never
 * granted again; on a prefill its own pool. */
static void slot_pages(int prefill, int k, uint32_t *pages)
{
    int base = is_decode ? (prefill * PER_WAVE + k) * PAGES : k * PAGES;

    for (int p = 0; p < PAGES; p++) {
        pages[p] = (uint32_t)(base + (PAGES - 1 - p));
    }
}

/* The sentence of this thread's last refused call. */
static const char *last_error(void)
{
    static kvx_failure_t f;

    kvx_last_error(&f);
    return f.text;
}

static volatile int sent_wave = -1; /* the last wave whose pages prefill[1] handed over */

static void *killer(void *arg)
{
    char path[4096];
    int wave;
    FILE *f;

    (void)arg;
    srand((unsigned)getpid() ^ (unsigned)(tl_now() * 1e6));
    usleep((useconds_t)(30000 + rand() % 300000)); /* somewhere in the flood, */
    wave = __atomic_load_n(&sent_wave, __ATOMIC_ACQUIRE);
    while (__atomic_load_n(&sent_wave, __ATOMIC_ACQUIRE) == wave) {
        usleep(100); /* just after a hand-over, */
    }
    usleep((useconds_t)(rand() % 1500)); /* while its messages leave */
    snprintf(path, sizeof(path), "%s/kill_time", getenv("KVXT_OUT"));
    f = fopen(path, "w");
    if (f != NULL) {
        fprintf(f, "%.6f\n", tl_now());
        fclose(f);
    }
    kill(getpid(), SIGKILL);
    return NULL;
}

/* Agreement rounds over this rank's rooms until each concluded or limit s. */
static int conclude(const uint64_t *ids, int n, kvx_agreed_t *out, double limit)
{
    double start = tl_now();

    for (;;) {
        int done = 1;
        kvx_status_t st = tl_agree_round(job.ctx, ids, (size_t)n, out);

        if (st != KVX_OK) {
            TL_CHECK(0, "agree: %s", kvx_status_name(st));
            return 0;
        }
        for (int i = 0; i < n; i++) {
            done &= out[i].status == KVX_OK &&
                    (out[i].state == KVX_ROOM_SUCCESS || out[i].state == KVX_ROOM_FAILED);
        }
        if (done || tl_now() - start > limit) {
            return done;
        }
        usleep(500);
    }
}

static void close_room(uint64_t room)
{
    double start = tl_now();

    while (kvx_room_close(job.ctx, room) == KVX_ERR_BUSY &&
           tl_now() - start < 10 * tl_timeout_scale()) {
        usleep(5000);
    }
}

static void run_decode(void)
{
    double limit = 10 * tl_timeout_scale();
    int lost_wave = -1, after = 0;
    char line[256];

    for (int w = 0; w < WAVES && tl_failures == 0; w++) {
        uint64_t ids[2 * PER_WAVE];
        uint32_t pages[2 * PER_WAVE][PAGES];
        kvx_agreed_t out[2 * PER_WAVE];
        int n = 0;

        for (int i = 0; i < 2; i++) {
            for (int k = 0; k < PER_WAVE && (i == 0 || lost_wave < 0); k++) {
                slot_pages(i, k, pages[n]);
                ids[n] = room_id(i, w, k);
                TL_CHECK(kvx_room_recv_open(job.ctx, ids[n], i, pages[n], PAGES,
                                            i * PER_WAVE + k) == KVX_OK,
                         "recv_open %llu: %s", (unsigned long long)ids[n], last_error());
                n++;
            }
        }
        if (!conclude(ids, n, out, limit)) {
            for (int r = 0; r < n; r++) {
                kvx_room_state_t st = KVX_ROOM_BOOTSTRAPPING;

                kvx_room_poll(job.ctx, ids[r], &st);
                TL_CHECK(out[r].state == KVX_ROOM_SUCCESS || out[r].state == KVX_ROOM_FAILED,
                         "wave %d: room %llu did not conclude in %.0f s: %s%s", w,
                         (unsigned long long)ids[r], limit, kvx_room_state_name(st),
                         lost_wave >= 0 ? " (the dead prefill[1] stalled prefill[0])" : "");
            }
        }
        for (int r = 0; r < n; r++) {
            int from = (int)(ids[r] / 10 % 10);
            char why[512];

            tl_failure_line(job.ctx, ids[r], why, sizeof(why));
            if (from == 0) {
                TL_CHECK(out[r].state == KVX_ROOM_SUCCESS,
                         "wave %d: room %llu of prefill[0]: %s (%s)", w, (unsigned long long)ids[r],
                         kvx_room_state_name(out[r].state), why);
                TL_CHECK(
                    out[r].state != KVX_ROOM_SUCCESS ||
                        kvp_pages(&job.g, job.bufs, job.comps, ids[r], pages[r], PAGES, 0, 0) == 0,
                    "wave %d: room %llu bytes differ", w, (unsigned long long)ids[r]);
                after += lost_wave >= 0;
            } else if (out[r].state == KVX_ROOM_FAILED) {
                TL_CHECK(strstr(why, "prefill[1].tp0 (rank 1)") != NULL &&
                             strstr(why, " lost: ") != NULL,
                         "wave %d: room %llu of prefill[1] failed, not by the loss: %s", w,
                         (unsigned long long)ids[r], why);
                if (lost_wave < 0) {
                    lost_wave = w;
                }
            }
        }
        for (int r = 0; r < n && tl_failures == 0; r++) {
            close_room(ids[r]);
        }
    }
    TL_CHECK(lost_wave >= 0 && after >= PER_WAVE * 5,
             "the kill was not seen in time: lost in wave %d, %d rooms of prefill[0] after it",
             lost_wave, after);
    snprintf(line, sizeof(line),
             "prefill[1] lost in wave %d of %d; %d rooms of prefill[0] SUCCESS after it", lost_wave,
             WAVES, after);
    tl_result_keep(line);
}

static void run_prefill(void)
{
    double limit = 10 * tl_timeout_scale();
    int waves = 0;
    char line[256];

    if (job.id.instance == 1) {
        pthread_t t;

        pthread_create(&t, NULL, killer, NULL);
    }
    for (int w = 0; w < WAVES && tl_failures == 0; w++) {
        uint64_t ids[PER_WAVE];
        uint32_t pages[PER_WAVE][PAGES];
        kvx_agreed_t out[PER_WAVE];

        for (int k = 0; k < PER_WAVE; k++) {
            uint64_t aux;

            ids[k] = room_id(job.id.instance, w, k);
            aux = kvp_aux(ids[k]);
            slot_pages(job.id.instance, k, pages[k]);
            TL_CHECK(kvx_room_send_open(job.ctx, ids[k], 0, PAGES) == KVX_OK, "send_open: %s",
                     last_error());
            kvp_pages(&job.g, job.bufs, job.comps, ids[k], pages[k], PAGES, 0, 1);
            TL_CHECK(kvx_room_send_chunk(job.ctx, ids[k], pages[k], PAGES, &aux, sizeof(aux)) ==
                         KVX_OK,
                     "send_chunk: %s", last_error());
        }
        __atomic_store_n(&sent_wave, w, __ATOMIC_RELEASE);
        conclude(ids, PER_WAVE, out, limit);
        for (int k = 0; k < PER_WAVE; k++) {
            TL_CHECK(out[k].state == KVX_ROOM_SUCCESS, "wave %d: room %llu: %s", w,
                     (unsigned long long)ids[k], kvx_room_state_name(out[k].state));
            close_room(ids[k]);
        }
        waves++;
    }
    if (job.id.instance == 1) {
        pause(); /* the killer comes */
    }
    snprintf(line, sizeof(line), "%d waves of %d rooms SUCCESS", waves, PER_WAVE);
    tl_result_keep(line);
}

int main(int argc, char **argv)
{
    kvx_ctx_params_t p;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &tl_rank);
    kvx_ctx_params_init(&p);
    p.kv.layers = 2;
    p.kv.page_size = 16; /* 4 KiB pages, each its own run: many small messages */
    p.kv.kv_heads = 2;
    p.kv.head_dim = 64;
    p.num_pages = 2 * PER_WAVE * PAGES;
    p.aux_slots = 2 * PER_WAVE;
    p.aux_item_size = 8;
    tl_job_start(&job, &p);
    is_decode = job.id.role == KVX_ROLE_DECODE;
    MPI_Barrier(MPI_COMM_WORLD); /* the last collective on the whole world */
    if (is_decode) {
        run_decode();
    } else {
        run_prefill();
    }
    tl_destroy_and_result(job.ctx);
    MPI_Finalize();
    return tl_failures == 0 ? 0 : 1;
}
