/*
 * t_badinput.c - bad input through the public API (issue 9): every call
 * answers the status kvx.h documents for it, a refusal that has a reason
 * logs it (checked word for word in the lines the call wrote), and a
 * refused call writes nothing: no room is opened, no page or aux byte is
 * written, no output parameter and no room counter changes.
 *
 *   t_badinput rooms    2 ranks, KVX_LAYOUT=prefill:1x1,decode:1x1: NULL,
 *                       foreign and stale context handles; every room call
 *                       with bad arguments, in the wrong state, on closed
 *                       and reused room ids; agreement calls; every call
 *                       after destroy, also once a new context exists
 *   t_badinput create   4 ranks, KVX_LAYOUT=prefill:1x2,decode:1x2: foreign
 *                       communicators (MPI_COMM_NULL, MPI_COMM_SELF, halves
 *                       of a split, a subset, an intercommunicator), NULL
 *                       pointers on one rank, invalid KVX_* variables and
 *                       parameters: the same status and reason on every rank
 *                       that called, within seconds, and nothing left behind
 *   t_badinput layers   2 ranks, prefill:1x1,decode:1x1: every refused
 *                       kvx_room_send_layers(), and a layer left missing
 *   t_badinput events   2 ranks, prefill:1x1,decode:1x1, a CUDA pool on
 *                       the stand-in runtime whose events never complete
 *                       (KVXT_FAKE_CUDA_POLLS huge): a room handed over
 *                       behind an event fails at the prefill's transfer
 *                       deadline naming the hand-over; a room aborted
 *                       behind one fails with the abort on both sides and
 *                       closes at once
 *
 * Each row of the matrix is printed ("badinput: call | input -> status |
 * reason"). Where kvx.h lists no status for an input the test asserts what
 * the library answers and says so ("undocumented").
 */
#include <kvx.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvcuda.h"
#include "testlib.h"

int tl_rank, tl_failures;

#define CANARY     0xa5
#define POOL_FILL  0xc5
#define NUM_PAGES  16
#define PAGE_SIZE  4
#define AUX_SLOTS  4
#define AUX_ITEM   8
#define ROOM_LIMIT 10.0 /* seconds a room may take to reach a state */

/* ---- the lines a call logs ------------------------------------------------
 * kvx logs a refusal's reason (kvx.h has no per-call reason record for room
 * calls): while a call runs, this rank's stderr goes to a file, and what the
 * call wrote is read back. */

static int cap_fd = -1, cap_saved = -1;
static off_t cap_pos;
static char cap_text[16384];

static void cap_init(void)
{
    char path[4096];

    snprintf(path, sizeof(path), "%s/kvxt-badinput-XXXXXX",
             getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp");
    cap_fd = mkstemp(path);
    if (cap_fd >= 0) {
        unlink(path);
    }
    cap_saved = dup(2);
    TL_CHECK(cap_fd >= 0 && cap_saved >= 0, "cannot capture stderr");
}

static void cap_begin(void)
{
    fflush(stderr);
    dup2(cap_fd, 2);
}

static const char *cap_end(void)
{
    off_t end;
    ssize_t n;

    fflush(stderr);
    dup2(cap_saved, 2);
    end = lseek(cap_fd, 0, SEEK_END);
    if (end - cap_pos >= (off_t)sizeof(cap_text)) {
        cap_pos = end - (off_t)sizeof(cap_text) + 1;
    }
    n = pread(cap_fd, cap_text, (size_t)(end - cap_pos), cap_pos);
    cap_text[n > 0 ? n : 0] = '\0';
    cap_pos = end;
    return cap_text;
}

/* One row of the matrix: the status must be want, and the lines the call
 * logged must hold reason (when not NULL). */
static void row(int line, const char *call, const char *input, kvx_status_t got, kvx_status_t want,
                const char *logged, const char *reason)
{
    TL_CHECK(got == want, "line %d: %s(%s) returned %s, want %s", line, call, input,
             kvx_status_name(got), kvx_status_name(want));
    if (reason != NULL) {
        TL_CHECK(strstr(logged, reason) != NULL, "line %d: %s(%s): no '%s' in what it logged: %s",
                 line, call, input, reason, logged);
    }
    printf("badinput: rank %d | %s | %s -> %s | %s\n", tl_rank, call, input, kvx_status_name(got),
           reason != NULL ? reason : "-");
}

#define EXPECT(want, reason, call, input, expr)                   \
    do {                                                          \
        kvx_status_t st_;                                         \
        cap_begin();                                              \
        st_ = (expr);                                             \
        row(__LINE__, call, input, st_, want, cap_end(), reason); \
    } while (0)

/* Was a refused call's output left alone? */
static int untouched(const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (((const unsigned char *)p)[i] != CANARY) {
            return 0;
        }
    }
    return 1;
}

#define UNTOUCHED(x, what) TL_CHECK(untouched(&(x), sizeof(x)), "%s was written", what)

/* ---- rooms --------------------------------------------------------------- */

typedef tl_job_t job_t;

static void job_params(kvx_ctx_params_t *p)
{
    kvx_ctx_params_init(p);
    p->kv.layers = 2;
    p->kv.page_size = PAGE_SIZE;
    p->kv.kv_heads = 2;
    p->kv.head_dim = 8;
    p->num_pages = NUM_PAGES;
    p->aux_slots = AUX_SLOTS;
    p->aux_item_size = AUX_ITEM;
}

static void job_start(job_t *j)
{
    kvx_ctx_params_t p;

    job_params(&p);
    tl_job_start(j, &p);
    for (unsigned b = 0; b < 4; b++) {
        memset(j->bufs[b], POOL_FILL, NUM_PAGES * j->page_bytes);
    }
}

/* Pages [first, first + n) of every buffer still hold the pool's fill. */
static int pages_unwritten(const job_t *j, uint32_t first, uint32_t n)
{
    for (unsigned b = 0; b < 4; b++) {
        const unsigned char *p = (const unsigned char *)j->bufs[b] + first * j->page_bytes;

        for (size_t i = 0; i < n * j->page_bytes; i++) {
            if (p[i] != POOL_FILL) {
                return 0;
            }
        }
    }
    return 1;
}

static kvx_room_state_t wait_state(kvx_ctx_t *ctx, uint64_t id, kvx_room_state_t want)
{
    return tl_wait_state(ctx, id, want, ROOM_LIMIT);
}

/* Closes a room, waiting while its pages drain. */
static kvx_status_t close_room(kvx_ctx_t *ctx, uint64_t id)
{
    double t0 = tl_now();
    kvx_status_t st;

    while ((st = kvx_room_close(ctx, id)) == KVX_ERR_BUSY && tl_now() - t0 < ROOM_LIMIT) {
        usleep(1000);
    }
    return st;
}

/* Every call on a handle that is not a live context. */
static void bad_handle(kvx_ctx_t *h, const char *what)
{
    kvx_identity_t id;
    kvx_failure_t f;
    kvx_room_state_t st;
    kvx_room_info_t info;
    kvx_agree_t *ag;
    unsigned first, count;
    void *buf;
    size_t len;
    uint32_t page = 0;
    char aux[AUX_ITEM];

    memset(&id, CANARY, sizeof(id));
    memset(&f, CANARY, sizeof(f));
    memset(&st, CANARY, sizeof(st));
    memset(&info, CANARY, sizeof(info));
    memset(&ag, CANARY, sizeof(ag));
    memset(&first, CANARY, sizeof(first));
    memset(&count, CANARY, sizeof(count));
    memset(&buf, CANARY, sizeof(buf));
    memset(&len, CANARY, sizeof(len));
    memset(aux, CANARY, sizeof(aux));
    EXPECT(KVX_ERR_INVALID_HANDLE, NULL, "kvx_ctx_identity", what, kvx_ctx_identity(h, &id));
    EXPECT(KVX_ERR_INVALID_HANDLE, NULL, "kvx_ctx_heads", what, kvx_ctx_heads(h, &first, &count));
    EXPECT(KVX_ERR_INVALID_HANDLE, NULL, "kvx_ctx_kv_buffer", what,
           kvx_ctx_kv_buffer(h, 0, 0, &buf, &len));
    EXPECT(KVX_ERR_INVALID_HANDLE, NULL, "kvx_ctx_pair_status", what,
           kvx_ctx_pair_status(h, 0, &f));
    EXPECT(KVX_ERR_INVALID_HANDLE, NULL, "kvx_room_recv_open", what,
           kvx_room_recv_open(h, 1, 0, &page, 1, -1));
    EXPECT(KVX_ERR_INVALID_HANDLE, NULL, "kvx_room_send_open", what,
           kvx_room_send_open(h, 1, 0, 1));
    EXPECT(KVX_ERR_INVALID_HANDLE, NULL, "kvx_room_send_chunk", what,
           kvx_room_send_chunk(h, 1, &page, 1, NULL, 0));
    EXPECT(KVX_ERR_INVALID_HANDLE, NULL, "kvx_room_poll", what, kvx_room_poll(h, 1, &st));
    EXPECT(KVX_ERR_INVALID_HANDLE, NULL, "kvx_room_failure", what, kvx_room_failure(h, 1, &f));
    EXPECT(KVX_ERR_INVALID_HANDLE, NULL, "kvx_room_abort", what, kvx_room_abort(h, 1, "x"));
    EXPECT(KVX_ERR_INVALID_HANDLE, NULL, "kvx_room_aux", what,
           kvx_room_aux(h, 1, aux, sizeof(aux), &len));
    EXPECT(KVX_ERR_INVALID_HANDLE, NULL, "kvx_room_info", what, kvx_room_info(h, 1, &info));
    EXPECT(KVX_ERR_INVALID_HANDLE, NULL, "kvx_room_close", what, kvx_room_close(h, 1));
    EXPECT(KVX_ERR_INVALID_HANDLE, NULL, "kvx_agree_start", what, kvx_agree_start(h, NULL, 0, &ag));
    EXPECT(KVX_ERR_INVALID_HANDLE, NULL, "kvx_ctx_destroy", what, kvx_ctx_destroy(h));
    TL_CHECK(kvx_ctx_tp_comm(h) == MPI_COMM_NULL, "%s: kvx_ctx_tp_comm is not MPI_COMM_NULL", what);
    TL_CHECK(kvx_ctx_page_bytes(h) == 0, "%s: kvx_ctx_page_bytes is not 0", what);
    UNTOUCHED(id, "identity");
    UNTOUCHED(f, "failure");
    UNTOUCHED(st, "state");
    UNTOUCHED(info, "info");
    UNTOUCHED(ag, "agree handle");
    UNTOUCHED(first, "first head");
    UNTOUCHED(count, "head count");
    UNTOUCHED(buf, "buffer");
    UNTOUCHED(len, "length");
    UNTOUCHED(aux, "aux buffer");
}

/* Getters and helpers with bad arguments on a live context. */
static void bad_getters(job_t *j)
{
    kvx_failure_t f;
    kvx_config_var_t var;
    unsigned count;
    void *buf;
    size_t len;

    memset(&f, CANARY, sizeof(f));
    memset(&var, CANARY, sizeof(var));
    memset(&count, CANARY, sizeof(count));
    memset(&buf, CANARY, sizeof(buf));
    memset(&len, CANARY, sizeof(len));
    /* kvx.h documents KVX_OK and KVX_ERR_INVALID_HANDLE only. */
    EXPECT(KVX_ERR_INVALID_PARAM, NULL, "kvx_ctx_identity", "identity_p NULL (undocumented)",
           kvx_ctx_identity(j->ctx, NULL));
    EXPECT(KVX_ERR_INVALID_PARAM, NULL, "kvx_ctx_heads", "first_p NULL (undocumented)",
           kvx_ctx_heads(j->ctx, NULL, &count));
    EXPECT(KVX_ERR_INVALID_PARAM, NULL, "kvx_ctx_kv_buffer", "layer 2 of 2",
           kvx_ctx_kv_buffer(j->ctx, 2, 0, &buf, &len));
    EXPECT(KVX_ERR_INVALID_PARAM, NULL, "kvx_ctx_kv_buffer", "component 2 of 2",
           kvx_ctx_kv_buffer(j->ctx, 0, 2, &buf, &len));
    EXPECT(KVX_ERR_INVALID_PARAM, NULL, "kvx_ctx_kv_buffer", "buffer_p NULL",
           kvx_ctx_kv_buffer(j->ctx, 0, 0, NULL, &len));
    EXPECT(KVX_ERR_INVALID_PARAM, NULL, "kvx_ctx_pair_status", "instance 1 of 1",
           kvx_ctx_pair_status(j->ctx, 1, &f));
    EXPECT(KVX_ERR_INVALID_PARAM, NULL, "kvx_ctx_pair_status", "instance -1",
           kvx_ctx_pair_status(j->ctx, -1, &f));
    EXPECT(KVX_ERR_INVALID_PARAM, NULL, "kvx_config_var", "index kvx_config_count()",
           kvx_config_var(kvx_config_count(), &var));
    EXPECT(KVX_ERR_INVALID_PARAM, NULL, "kvx_config_var", "var_p NULL", kvx_config_var(0, NULL));
    UNTOUCHED(f, "pair failure");
    UNTOUCHED(var, "config var");
    UNTOUCHED(count, "head count");
    UNTOUCHED(buf, "buffer");
    UNTOUCHED(len, "length");
    /* Invalid enum values: a name, never NULL. */
    TL_CHECK(kvx_status_string((kvx_status_t)-99) != NULL, "status string of -99");
    TL_CHECK(kvx_status_name((kvx_status_t)42) != NULL, "status name of 42");
    TL_CHECK(kvx_role_name((kvx_role_t)9) != NULL, "role name of 9");
    TL_CHECK(kvx_room_state_name((kvx_room_state_t)-1) != NULL, "state name of -1");
    TL_CHECK(kvx_stage_name((kvx_stage_t)(KVX_STAGE_COUNT + 3)) != NULL, "stage name");
    TL_CHECK(strcmp(kvx_topo_path_name((kvx_topo_path_t)99), "?") == 0, "path name of 99");
    kvx_ctx_params_init(NULL);
}

/* No room [first, end) exists: each open was refused. */
static void no_rooms(job_t *j, uint64_t first, uint64_t end)
{
    kvx_room_state_t st;

    for (uint64_t r = first; r < end; r++) {
        memset(&st, CANARY, sizeof(st));
        TL_CHECK(kvx_room_poll(j->ctx, r, &st) == KVX_ERR_NO_ROOM, "refused room %llu exists",
                 (unsigned long long)r);
        UNTOUCHED(st, "state of a refused room");
    }
}

/* Decode: opens refused before any room exists; none may open a room, and
 * none may send a grant (rooms 100.., checked by the prefill after). */
#define REFUSED_FIRST 100

static void decode_refused_opens(job_t *j)
{
    uint32_t range[2] = { 8, 99 }, dup[3] = { 8, 9, 8 }, many[NUM_PAGES + 1], one = 9;
    uint64_t id = REFUSED_FIRST;

    for (uint32_t i = 0; i <= NUM_PAGES; i++) {
        many[i] = i;
    }
    EXPECT(KVX_ERR_INVALID_PARAM, "4 pages (NULL): a room needs 1 to 16 pages",
           "kvx_room_recv_open", "pages NULL", kvx_room_recv_open(j->ctx, id++, 0, NULL, 4, -1));
    EXPECT(KVX_ERR_INVALID_PARAM, "0 pages: a room needs 1 to 16 pages", "kvx_room_recv_open",
           "npages 0", kvx_room_recv_open(j->ctx, id++, 0, &one, 0, -1));
    EXPECT(KVX_ERR_INVALID_PARAM, "17 pages: a room needs 1 to 16 pages", "kvx_room_recv_open",
           "17 pages, pool of 16 (too many)",
           kvx_room_recv_open(j->ctx, id++, 0, many, NUM_PAGES + 1, -1));
    EXPECT(KVX_ERR_PAGE_RANGE, "page 99 (index 1) is outside the pool of 16 pages",
           "kvx_room_recv_open", "page 99", kvx_room_recv_open(j->ctx, id++, 0, range, 2, -1));
    EXPECT(KVX_ERR_INVALID_PARAM, "page 8 (index 2) appears twice (pool of 16 pages)",
           "kvx_room_recv_open", "pages 8,9,8", kvx_room_recv_open(j->ctx, id++, 0, dup, 3, -1));
    EXPECT(KVX_ERR_INVALID_PARAM, "aux slot -2 is not one of the 4 aux slots (or -1 for none)",
           "kvx_room_recv_open", "aux slot -2", kvx_room_recv_open(j->ctx, id++, 0, &one, 1, -2));
    EXPECT(KVX_ERR_INVALID_PARAM, "aux slot 4 is not one of the 4 aux slots (or -1 for none)",
           "kvx_room_recv_open", "aux slot 4", kvx_room_recv_open(j->ctx, id++, 0, &one, 1, 4));
    EXPECT(KVX_ERR_INVALID_PARAM, "there is no prefill instance 1 (the job has 1)",
           "kvx_room_recv_open", "prefill instance 1",
           kvx_room_recv_open(j->ctx, id++, 1, &one, 1, -1));
    EXPECT(KVX_ERR_INVALID_PARAM, "there is no prefill instance -1 (the job has 1)",
           "kvx_room_recv_open", "prefill instance -1",
           kvx_room_recv_open(j->ctx, id++, -1, &one, 1, -1));
    EXPECT(KVX_ERR_INVALID_PARAM, "a decode rank cannot open a send room", "kvx_room_send_open",
           "on a decode rank", kvx_room_send_open(j->ctx, id++, 0, 1));
    no_rooms(j, REFUSED_FIRST, id);
}

static void prefill_refused_opens(job_t *j)
{
    uint32_t one = 1;
    uint64_t id = REFUSED_FIRST;

    EXPECT(KVX_ERR_INVALID_PARAM, "there is no decode instance 1 (the job has 1)",
           "kvx_room_send_open", "decode instance 1", kvx_room_send_open(j->ctx, id++, 1, 4));
    EXPECT(KVX_ERR_INVALID_PARAM,
           "npages_total=0: a room sends 1 to 16 pages (the pool of decode[0])",
           "kvx_room_send_open", "npages_total 0", kvx_room_send_open(j->ctx, id++, 0, 0));
    EXPECT(KVX_ERR_INVALID_PARAM,
           "npages_total=17: a room sends 1 to 16 pages (the pool of decode[0])",
           "kvx_room_send_open", "npages_total 17, decode pool 16 (too many)",
           kvx_room_send_open(j->ctx, id++, 0, NUM_PAGES + 1));
    EXPECT(KVX_ERR_INVALID_PARAM, "npages_total=4294967296: a room sends 1 to 16 pages",
           "kvx_room_send_open", "npages_total 2^32",
           kvx_room_send_open(j->ctx, id++, 0, (size_t)UINT32_MAX + 1));
    EXPECT(KVX_ERR_INVALID_PARAM, "a prefill rank cannot open a receive room", "kvx_room_recv_open",
           "on a prefill rank", kvx_room_recv_open(j->ctx, id++, 0, &one, 1, -1));
    no_rooms(j, REFUSED_FIRST, id);
}

/* Prefill: the decode's refused opens sent no grant: a room the prefill
 * opens with each of their ids stays BOOTSTRAPPING. */
static void prefill_no_grants(job_t *j)
{
    kvx_room_state_t st;

    for (uint64_t r = REFUSED_FIRST; r < REFUSED_FIRST + 10; r++) {
        TL_CHECK(kvx_room_send_open(j->ctx, r, 0, 1) == KVX_OK, "send_open %llu",
                 (unsigned long long)r);
    }
    usleep(300000);
    for (uint64_t r = REFUSED_FIRST; r < REFUSED_FIRST + 10; r++) {
        TL_CHECK(kvx_room_poll(j->ctx, r, &st) == KVX_OK && st == KVX_ROOM_BOOTSTRAPPING,
                 "room %llu of a refused recv_open is %s: a grant was sent", (unsigned long long)r,
                 kvx_room_state_name(st));
        TL_CHECK(kvx_room_close(j->ctx, r) == KVX_OK, "close %llu", (unsigned long long)r);
    }
    printf("badinput: rank %d: 10 refused recv_open sent no grant (rooms stay BOOTSTRAPPING)\n",
           tl_rank);
    /* A closed room kept to answer late grants gives its id to a new room
     * (and is freed: LeakSanitizer and valgrind check). */
    TL_CHECK(kvx_room_send_open(j->ctx, REFUSED_FIRST, 0, 1) == KVX_OK, "reopen %d", REFUSED_FIRST);
    TL_CHECK(kvx_room_close(j->ctx, REFUSED_FIRST) == KVX_OK, "close %d again", REFUSED_FIRST);
}

/* The room's counters, compared before and after a refused chunk. */
static void chunk_refused(job_t *j, int line, const char *input, const uint32_t *pages, size_t n,
                          const void *aux, size_t aux_len, kvx_status_t want, const char *reason)
{
    kvx_room_info_t before, after;
    kvx_status_t st;

    kvx_room_info(j->ctx, 1, &before);
    cap_begin();
    st = kvx_room_send_chunk(j->ctx, 1, pages, n, aux, aux_len);
    row(line, "kvx_room_send_chunk", input, st, want, cap_end(), reason);
    kvx_room_info(j->ctx, 1, &after);
    TL_CHECK(after.pages_sent == before.pages_sent && after.puts == before.puts &&
                 after.bytes == before.bytes && after.state == before.state,
             "line %d: a refused chunk moved the room: pages_sent %zu->%zu puts %llu->%llu "
             "state %s->%s",
             line, before.pages_sent, after.pages_sent, (unsigned long long)before.puts,
             (unsigned long long)after.puts, kvx_room_state_name(before.state),
             kvx_room_state_name(after.state));
}

static void prefill_refused_chunks(job_t *j)
{
    uint32_t four[4] = { 4, 5, 6, 7 }, five[5] = { 4, 5, 6, 7, 8 }, range[2] = { 4, 16 };
    uint64_t aux = 0;
    char big[AUX_ITEM + 1] = { 0 };

    chunk_refused(j, __LINE__, "pages NULL", NULL, 2, NULL, 0, KVX_ERR_INVALID_PARAM,
                  "a chunk needs at least one page");
    chunk_refused(j, __LINE__, "npages 0", four, 0, NULL, 0, KVX_ERR_INVALID_PARAM,
                  "a chunk needs at least one page");
    chunk_refused(j, __LINE__, "5 pages of 4 announced", five, 5, NULL, 0, KVX_ERR_TOO_MANY_PAGES,
                  "chunk of 5 pages after 0: the room announced 4");
    chunk_refused(j, __LINE__, "source page 16", range, 2, NULL, 0, KVX_ERR_PAGE_RANGE,
                  "source page 16 (chunk index 1) is outside the pool of 16 pages");
    chunk_refused(j, __LINE__, "aux on a chunk that is not the last", four, 2, &aux, sizeof(aux),
                  KVX_ERR_AUX, "aux of 8 bytes on a chunk that is not the last (aux_item_size=8)");
    chunk_refused(j, __LINE__, "aux of 9 bytes, aux_item_size 8", four, 4, big, sizeof(big),
                  KVX_ERR_AUX, "aux of 9 bytes does not fit (aux_item_size=8)");
    chunk_refused(j, __LINE__, "aux NULL, aux_len 8", four, 4, NULL, sizeof(aux),
                  KVX_ERR_INVALID_PARAM, "aux is NULL but aux_len is 8");
}

/* Room 1: opened on both sides, refused calls while it waits, then sent,
 * then refused calls on the finished room, closed, and refused as closed. */
static void room_one(job_t *j)
{
    uint32_t dst[4] = { 0, 1, 2, 3 }, src[4] = { 4, 5, 6, 7 }, other[2] = { 8, 9 };
    int prefill = j->id.role == KVX_ROLE_PREFILL;
    kvx_room_info_t info;
    kvx_failure_t f;
    uint64_t aux = kvp_aux(1), got = 0;
    unsigned char small[4];
    size_t len;

    if (!prefill) {
        TL_CHECK(kvx_room_recv_open(j->ctx, 1, 0, dst, 4, 0) == KVX_OK, "recv_open 1");
        EXPECT(KVX_ERR_ROOM_EXISTS, "room id is still open (", "kvx_room_recv_open",
               "room 1 again (open)", kvx_room_recv_open(j->ctx, 1, 0, other, 2, 1));
        TL_CHECK(kvx_room_info(j->ctx, 1, &info) == KVX_OK && info.npages == 4,
                 "the refused recv_open changed room 1 (%zu pages)", info.npages);
        EXPECT(KVX_ERR_INVALID_PARAM, "send_chunk on a receiving room", "kvx_room_send_chunk",
               "on a receiving room", kvx_room_send_chunk(j->ctx, 1, src, 1, NULL, 0));
    } else {
        kvp_pages(&j->g, j->bufs, 2, 1, src, 4, 0, 1);
        TL_CHECK(kvx_room_send_open(j->ctx, 1, 0, 4) == KVX_OK, "send_open 1");
        EXPECT(KVX_ERR_ROOM_EXISTS, "room id is still open (", "kvx_room_send_open",
               "room 1 again (open)", kvx_room_send_open(j->ctx, 1, 0, 4));
        TL_CHECK(wait_state(j->ctx, 1, KVX_ROOM_WAITING_FOR_INPUT) == KVX_ROOM_WAITING_FOR_INPUT,
                 "room 1 not granted");
        EXPECT(KVX_ERR_NO_ROOM, NULL, "kvx_room_send_chunk", "room 77 (never opened)",
               kvx_room_send_chunk(j->ctx, 77, src, 1, NULL, 0));
        prefill_refused_chunks(j);
    }
    memset(small, CANARY, sizeof(small));
    memset(&f, CANARY, sizeof(f));
    EXPECT(KVX_ERR_STATE, NULL, "kvx_room_failure", "room not failed",
           kvx_room_failure(j->ctx, 1, &f));
    EXPECT(KVX_ERR_STATE, NULL, "kvx_room_aux", "room not SUCCESS",
           kvx_room_aux(j->ctx, 1, small, sizeof(small), &len));
    UNTOUCHED(f, "failure of a room that did not fail");
    UNTOUCHED(small, "aux buffer");
    MPI_Barrier(MPI_COMM_WORLD);
    if (!prefill) {
        /* A refused chunk posts nothing: the pages keep the pool's fill. */
        usleep(100000);
        TL_CHECK(pages_unwritten(j, 0, 4), "room 1's pages were written by refused chunks");
        TL_CHECK(kvx_room_info(j->ctx, 1, &info) == KVX_OK &&
                     info.state == KVX_ROOM_WAITING_FOR_INPUT,
                 "room 1 is %s after refused chunks", kvx_room_state_name(info.state));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (prefill) {
        TL_CHECK(kvx_room_send_chunk(j->ctx, 1, src, 2, NULL, 0) == KVX_OK, "chunk 1");
        TL_CHECK(kvx_room_send_chunk(j->ctx, 1, src + 2, 2, &aux, sizeof(aux)) == KVX_OK,
                 "chunk 2");
    }
    TL_CHECK(wait_state(j->ctx, 1, KVX_ROOM_SUCCESS) == KVX_ROOM_SUCCESS, "room 1 not SUCCESS");
    if (prefill) {
        EXPECT(KVX_ERR_STATE, "room is SUCCESS with 4 of 4 pages handed over: no more chunks",
               "kvx_room_send_chunk", "after the last chunk",
               kvx_room_send_chunk(j->ctx, 1, src, 1, NULL, 0));
        EXPECT(KVX_ERR_STATE, NULL, "kvx_room_aux", "on a prefill room",
               kvx_room_aux(j->ctx, 1, small, sizeof(small), &len));
    } else {
        len = 0;
        EXPECT(KVX_ERR_AUX, NULL, "kvx_room_aux", "buffer of 4 for 8 bytes",
               kvx_room_aux(j->ctx, 1, small, sizeof(small), &len));
        UNTOUCHED(small, "a too small aux buffer");
        /* Written although the call failed (kvx.h: outputs only on success),
         * so that the caller learns the size it needs. */
        TL_CHECK(len == sizeof(aux), "aux length %zu", len);
        TL_CHECK(kvx_room_aux(j->ctx, 1, &got, sizeof(got), &len) == KVX_OK && got == aux,
                 "aux of room 1");
        TL_CHECK(kvp_pages(&j->g, j->bufs, 2, 1, dst, 4, 0, 0) == 0, "room 1's bytes");
    }
    EXPECT(KVX_ERR_STATE, NULL, "kvx_room_abort", "SUCCESS room",
           kvx_room_abort(j->ctx, 1, "late"));
    EXPECT(KVX_ERR_STATE, NULL, "kvx_room_failure", "SUCCESS room",
           kvx_room_failure(j->ctx, 1, &f));
    UNTOUCHED(f, "failure of a SUCCESS room");
    TL_CHECK(kvx_room_close(j->ctx, 1) == KVX_OK, "close 1");
}

/* Every room call on a closed room id. */
static void room_closed(job_t *j, uint64_t id)
{
    kvx_room_state_t st;
    kvx_room_info_t info;
    kvx_failure_t f;
    char aux[AUX_ITEM];
    size_t len;
    uint32_t page = 4;

    memset(&st, CANARY, sizeof(st));
    memset(&info, CANARY, sizeof(info));
    memset(&f, CANARY, sizeof(f));
    memset(aux, CANARY, sizeof(aux));
    memset(&len, CANARY, sizeof(len));
    EXPECT(KVX_ERR_NO_ROOM, NULL, "kvx_room_poll", "closed room", kvx_room_poll(j->ctx, id, &st));
    EXPECT(KVX_ERR_NO_ROOM, NULL, "kvx_room_info", "closed room", kvx_room_info(j->ctx, id, &info));
    EXPECT(KVX_ERR_NO_ROOM, NULL, "kvx_room_failure", "closed room",
           kvx_room_failure(j->ctx, id, &f));
    EXPECT(KVX_ERR_NO_ROOM, NULL, "kvx_room_abort", "closed room", kvx_room_abort(j->ctx, id, "x"));
    EXPECT(KVX_ERR_NO_ROOM, NULL, "kvx_room_aux", "closed room",
           kvx_room_aux(j->ctx, id, aux, sizeof(aux), &len));
    EXPECT(KVX_ERR_NO_ROOM, NULL, "kvx_room_send_chunk", "closed room",
           kvx_room_send_chunk(j->ctx, id, &page, 1, NULL, 0));
    EXPECT(KVX_ERR_NO_ROOM, NULL, "kvx_room_close", "closed room", kvx_room_close(j->ctx, id));
    UNTOUCHED(st, "state");
    UNTOUCHED(info, "info");
    UNTOUCHED(f, "failure");
    UNTOUCHED(aux, "aux buffer");
    UNTOUCHED(len, "aux length");
}

/* Room 2: aborted by the prefill before any page; room 3: aborted by the
 * decode (no reason given) before the prefill opened it. */
static void room_aborts(job_t *j)
{
    uint32_t dst[4] = { 4, 5, 6, 7 }, src[4] = { 0, 1, 2, 3 }, lone = 8;
    int prefill = j->id.role == KVX_ROLE_PREFILL;
    kvx_failure_t f;
    char small[AUX_ITEM];
    size_t len;

    if (prefill) {
        TL_CHECK(kvx_room_send_open(j->ctx, 2, 0, 4) == KVX_OK, "send_open 2");
        TL_CHECK(wait_state(j->ctx, 2, KVX_ROOM_WAITING_FOR_INPUT) == KVX_ROOM_WAITING_FOR_INPUT,
                 "room 2 not granted");
        EXPECT(KVX_OK, "aborted by the prefill: bad input test", "kvx_room_abort",
               "WAITING_FOR_INPUT room", kvx_room_abort(j->ctx, 2, "bad input test"));
        EXPECT(KVX_OK, NULL, "kvx_room_abort", "FAILED room (again)",
               kvx_room_abort(j->ctx, 2, "again"));
        EXPECT(KVX_ERR_STATE, "room is FAILED with 0 of 4 pages handed over: no more chunks",
               "kvx_room_send_chunk", "FAILED room",
               kvx_room_send_chunk(j->ctx, 2, src, 4, NULL, 0));
    } else {
        TL_CHECK(kvx_room_recv_open(j->ctx, 2, 0, dst, 4, 1) == KVX_OK, "recv_open 2");
        TL_CHECK(kvx_room_recv_open(j->ctx, 3, 0, &lone, 1, -1) == KVX_OK, "recv_open 3");
        EXPECT(KVX_OK, "aborted by the decode: no reason given", "kvx_room_abort", "reason NULL",
               kvx_room_abort(j->ctx, 3, NULL));
        TL_CHECK(wait_state(j->ctx, 2, KVX_ROOM_SUCCESS) == KVX_ROOM_FAILED, "room 2 not FAILED");
        memset(small, CANARY, sizeof(small));
        EXPECT(KVX_ERR_STATE, NULL, "kvx_room_aux", "FAILED room",
               kvx_room_aux(j->ctx, 2, small, sizeof(small), &len));
        UNTOUCHED(small, "aux buffer of a FAILED room");
    }
    TL_CHECK(kvx_room_failure(j->ctx, 2, &f) == KVX_OK && f.status == KVX_ERR_ABORTED &&
                 f.stage == KVX_STAGE_ABORT && f.origin_rank == 0 &&
                 strcmp(f.text, "aborted by the prefill: bad input test") == 0,
             "room 2's failure: %s, stage %s, rank %d: %s", kvx_status_name(f.status),
             kvx_stage_name(f.stage), f.origin_rank, f.text);
    TL_CHECK(close_room(j->ctx, 2) == KVX_OK, "close 2");
    MPI_Barrier(MPI_COMM_WORLD);
    if (prefill) {
        /* The decode's abort came before this rank opened the room. */
        TL_CHECK(kvx_room_send_open(j->ctx, 3, 0, 1) == KVX_OK, "send_open 3");
        TL_CHECK(wait_state(j->ctx, 3, KVX_ROOM_SUCCESS) == KVX_ROOM_FAILED, "room 3 not FAILED");
    }
    TL_CHECK(kvx_room_failure(j->ctx, 3, &f) == KVX_OK && f.status == KVX_ERR_ABORTED &&
                 f.origin_rank == 1 &&
                 strcmp(f.text, "aborted by the decode: no reason given") == 0,
             "room 3's failure: %s, rank %d: %s", kvx_status_name(f.status), f.origin_rank, f.text);
    TL_CHECK(close_room(j->ctx, 3) == KVX_OK, "close 3");
    if (!prefill) {
        TL_CHECK(pages_unwritten(j, 4, 5), "pages of the aborted rooms 2 and 3 were written");
    }
}

/* A room id is reusable once closed on both sides. */
static void room_reuse(job_t *j, uint64_t rid)
{
    uint32_t dst[2] = { 0, 1 }, src[2] = { 9, 10 };
    uint64_t aux = kvp_aux(1001), got = 0;
    size_t len;

    if (j->id.role == KVX_ROLE_PREFILL) {
        kvp_pages(&j->g, j->bufs, 2, 1001, src, 2, 0, 1);
        TL_CHECK(kvx_room_send_open(j->ctx, rid, 0, 2) == KVX_OK, "send_open %llu (reused)",
                 (unsigned long long)rid);
        TL_CHECK(kvx_room_send_chunk(j->ctx, rid, src, 2, &aux, sizeof(aux)) == KVX_OK,
                 "chunk of room %llu (reused)", (unsigned long long)rid);
    } else {
        TL_CHECK(kvx_room_recv_open(j->ctx, rid, 0, dst, 2, 3) == KVX_OK, "recv_open %llu (reused)",
                 (unsigned long long)rid);
    }
    TL_CHECK(wait_state(j->ctx, rid, KVX_ROOM_SUCCESS) == KVX_ROOM_SUCCESS,
             "room %llu (reused) not SUCCESS", (unsigned long long)rid);
    if (j->id.role == KVX_ROLE_DECODE) {
        TL_CHECK(kvp_pages(&j->g, j->bufs, 2, 1001, dst, 2, 0, 0) == 0, "reused room's bytes");
        TL_CHECK(kvx_room_aux(j->ctx, rid, &got, sizeof(got), &len) == KVX_OK && got == aux,
                 "reused room's aux");
    }
    TL_CHECK(close_room(j->ctx, rid) == KVX_OK, "close reused");
    printf("badinput: rank %d: room id %llu reused after close: SUCCESS, byte-exact\n", tl_rank,
           (unsigned long long)rid);
}

/* Agreement calls with bad arguments and in the wrong order (TP size 1). */
static void bad_agree(job_t *j)
{
    uint64_t ids[1] = { 999 };
    kvx_agreed_t out[1];
    kvx_agree_t *a, *b;

    memset(&a, CANARY, sizeof(a));
    EXPECT(KVX_ERR_INVALID_PARAM, NULL, "kvx_agree_start", "rooms NULL, n 2",
           kvx_agree_start(j->ctx, NULL, 2, &a));
    EXPECT(KVX_ERR_INVALID_PARAM, NULL, "kvx_agree_start", "agree_p NULL",
           kvx_agree_start(j->ctx, ids, 1, NULL));
    UNTOUCHED(a, "agree handle");
    TL_CHECK(kvx_agree_start(j->ctx, ids, 1, &a) == KVX_OK, "agree_start");
    memset(&b, CANARY, sizeof(b));
    EXPECT(KVX_ERR_BUSY, NULL, "kvx_agree_start", "a round in progress",
           kvx_agree_start(j->ctx, ids, 1, &b));
    UNTOUCHED(b, "agree handle of a refused round");
    EXPECT(KVX_ERR_BUSY, NULL, "kvx_agree_free", "round in progress", kvx_agree_free(a));
    EXPECT(KVX_ERR_INVALID_PARAM, NULL, "kvx_agree_test", "out NULL, n 1", kvx_agree_test(a, NULL));
    EXPECT(KVX_ERR_INVALID_PARAM, NULL, "kvx_agree_test", "agree NULL", kvx_agree_test(NULL, out));
    TL_CHECK(kvx_agree_wait(a, out) == KVX_OK && out[0].status == KVX_ERR_NO_ROOM,
             "agreement on an unknown room: %s", kvx_status_name(out[0].status));
    EXPECT(KVX_OK, NULL, "kvx_agree_free", "finished round", kvx_agree_free(a));
    EXPECT(KVX_ERR_INVALID_PARAM, NULL, "kvx_agree_free", "NULL", kvx_agree_free(NULL));
}

static int mode_rooms(void)
{
    static char foreign[512];
    kvx_ctx_t *stale;
    job_t j, k;

    bad_handle(NULL, "NULL");
    bad_handle((kvx_ctx_t *)foreign, "foreign pointer");
    job_start(&j);
    bad_getters(&j);
    if (j.id.role == KVX_ROLE_DECODE) {
        decode_refused_opens(&j);
    } else {
        prefill_refused_opens(&j);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (j.id.role == KVX_ROLE_PREFILL) {
        prefill_no_grants(&j);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    room_one(&j);
    room_closed(&j, 1);
    MPI_Barrier(MPI_COMM_WORLD);
    room_aborts(&j);
    MPI_Barrier(MPI_COMM_WORLD);
    room_reuse(&j, 1);
    bad_agree(&j);
    MPI_Barrier(MPI_COMM_WORLD);
    if (j.id.role == KVX_ROLE_DECODE) {
        TL_CHECK(pages_unwritten(&j, 4, NUM_PAGES - 4), "pages 4..15 were written");
    }
    stale = j.ctx;
    TL_CHECK(kvx_ctx_destroy(j.ctx) == KVX_OK, "destroy");
    bad_handle(stale, "destroyed context");
    /* A new context must not make the stale handle live again. */
    job_start(&k);
    TL_CHECK(k.ctx != stale, "the new context has the destroyed one's address");
    bad_handle(stale, "destroyed context, a new one live");
    TL_CHECK(kvx_ctx_identity(k.ctx, &k.id) == KVX_OK, "identity of the new context");
    TL_CHECK(kvx_ctx_destroy(k.ctx) == KVX_OK, "destroy the new context");
    return 0;
}

/* ---- layer-wise hand-overs ------------------------------------------------ */

/* kvx_room_send_layers() on room 40, refused: nothing of the room moves. */
static void layers_refused(job_t *j, int line, const char *input, const uint32_t *pages, size_t n,
                           unsigned l0, unsigned nl, void *ready, const void *aux, size_t aux_len,
                           kvx_status_t want, const char *reason)
{
    kvx_room_info_t before, after;
    kvx_status_t st;

    kvx_room_info(j->ctx, 40, &before);
    cap_begin();
    st = kvx_room_send_layers(j->ctx, 40, pages, n, l0, nl, ready, aux, aux_len);
    row(line, "kvx_room_send_layers", input, st, want, cap_end(), reason);
    kvx_room_info(j->ctx, 40, &after);
    TL_CHECK(after.pages_sent == before.pages_sent && after.puts == before.puts &&
                 after.bytes == before.bytes && after.state == before.state,
             "line %d: a refused hand-over moved the room: puts %llu->%llu state %s->%s", line,
             (unsigned long long)before.puts, (unsigned long long)after.puts,
             kvx_room_state_name(before.state), kvx_room_state_name(after.state));
}

#define LAYERS_OK(pages, n, l0, nl, aux, aux_len)                                              \
    TL_CHECK(kvx_room_send_layers(j->ctx, 40, pages, n, l0, nl, NULL, aux, aux_len) == KVX_OK, \
             "send_layers(%u+%u) of room 40", (unsigned)(l0), (unsigned)(nl))

/* Room 40 of 4 pages and 2 layers, handed over as (layer 0: 2 pages, 2
 * pages), (layer 1: 4 pages) between refused hand-overs; SUCCESS and
 * byte-exact. Room 41 hands over layer 0 only: it fails at the transfer
 * deadline (KVX_TRANSFER_TIMEOUT, 2 s in the case) saying which layers. */
static void layers_rooms(job_t *j)
{
    uint32_t dst[4] = { 0, 1, 2, 3 }, src[4] = { 4, 5, 6, 7 }, other[2] = { 8, 9 };
    uint32_t three[3] = { 6, 7, 8 };
    int prefill = j->id.role == KVX_ROLE_PREFILL;
    uint64_t aux = kvp_aux(40), got = 0;
    kvx_failure_t f;
    size_t len;
    int fake_event;

    if (!prefill) {
        TL_CHECK(kvx_room_recv_open(j->ctx, 40, 0, dst, 4, 0) == KVX_OK, "recv_open 40");
        EXPECT(KVX_ERR_INVALID_PARAM, "send_layers on a receiving room", "kvx_room_send_layers",
               "on a receiving room",
               kvx_room_send_layers(j->ctx, 40, src, 1, 0, 1, NULL, NULL, 0));
    } else {
        kvp_pages(&j->g, j->bufs, 2, 40, src, 4, 0, 1);
        TL_CHECK(kvx_room_send_open(j->ctx, 40, 0, 4) == KVX_OK, "send_open 40");
        TL_CHECK(wait_state(j->ctx, 40, KVX_ROOM_WAITING_FOR_INPUT) == KVX_ROOM_WAITING_FOR_INPUT,
                 "room 40 not granted");
        layers_refused(j, __LINE__, "first_layer 2", src, 2, 2, 1, NULL, NULL, 0,
                       KVX_ERR_INVALID_PARAM, "layers 2..2: the model has layers 0..1");
        layers_refused(j, __LINE__, "layers 1+2", src, 2, 1, 2, NULL, NULL, 0,
                       KVX_ERR_INVALID_PARAM, "layers 1..2: the model has layers 0..1");
        layers_refused(j, __LINE__, "nlayers 0", src, 2, 0, 0, NULL, NULL, 0, KVX_ERR_INVALID_PARAM,
                       "nlayers is 0");
        layers_refused(j, __LINE__, "an event on a host pool", src, 2, 0, 1, &fake_event, NULL, 0,
                       KVX_ERR_INVALID_PARAM,
                       "a ready event needs a CUDA pool: this pool is host memory");
        layers_refused(j, __LINE__, "pages NULL", NULL, 2, 0, 1, NULL, NULL, 0,
                       KVX_ERR_INVALID_PARAM, "a chunk needs at least one page");
        LAYERS_OK(src, 2, 0, 1, NULL, 0);
        layers_refused(j, __LINE__, "layers 0+2 at 2 and 0 pages", src + 2, 2, 0, 2, NULL, NULL, 0,
                       KVX_ERR_INVALID_PARAM,
                       "layers 0..1 are not at the same page: layer 0 has 2 pages handed over, "
                       "layer 1 has 0");
        layers_refused(j, __LINE__, "layer 1 named with other pages", other, 2, 1, 1, NULL, NULL, 0,
                       KVX_ERR_INVALID_PARAM,
                       "source page 8 (chunk index 0) for layer 1 at page 0, where an earlier "
                       "hand-over named page 4");
        layers_refused(j, __LINE__, "3 pages of layer 0 after 2", three, 3, 0, 1, NULL, NULL, 0,
                       KVX_ERR_TOO_MANY_PAGES,
                       "3 pages of layers 0..0 after 2: the room announced 4");
        LAYERS_OK(src + 2, 2, 0, 1, NULL, 0);
        layers_refused(j, __LINE__, "layer 0 again", src, 1, 0, 1, NULL, NULL, 0,
                       KVX_ERR_TOO_MANY_PAGES,
                       "1 pages of layers 0..0 after 4: the room announced 4 (every page of them "
                       "was handed over)");
        layers_refused(j, __LINE__, "aux before the last", src, 2, 1, 1, NULL, &aux, sizeof(aux),
                       KVX_ERR_AUX, "aux of 8 bytes on a chunk that is not the last");
        LAYERS_OK(src, 2, 1, 1, NULL, 0);
        LAYERS_OK(src + 2, 2, 1, 1, &aux, sizeof(aux));
        TL_CHECK(wait_state(j->ctx, 40, KVX_ROOM_SUCCESS) == KVX_ROOM_SUCCESS,
                 "room 40 not SUCCESS");
        EXPECT(KVX_ERR_STATE, "room is SUCCESS with 4 of 4 pages handed over: no more chunks",
               "kvx_room_send_layers", "after the last",
               kvx_room_send_layers(j->ctx, 40, src, 1, 0, 1, NULL, NULL, 0));
    }
    if (!prefill) {
        TL_CHECK(wait_state(j->ctx, 40, KVX_ROOM_SUCCESS) == KVX_ROOM_SUCCESS,
                 "room 40 not SUCCESS");
        TL_CHECK(kvx_room_aux(j->ctx, 40, &got, sizeof(got), &len) == KVX_OK && got == aux,
                 "aux of room 40");
        TL_CHECK(kvp_pages(&j->g, j->bufs, 2, 40, dst, 4, 0, 0) == 0, "room 40's bytes");
    }
    TL_CHECK(close_room(j->ctx, 40) == KVX_OK, "close 40");
    MPI_Barrier(MPI_COMM_WORLD);
    if (!prefill) {
        TL_CHECK(kvx_room_recv_open(j->ctx, 41, 0, dst, 4, 0) == KVX_OK, "recv_open 41");
    } else {
        TL_CHECK(kvx_room_send_open(j->ctx, 41, 0, 4) == KVX_OK, "send_open 41");
        TL_CHECK(kvx_room_send_layers(j->ctx, 41, src, 4, 0, 1, NULL, NULL, 0) == KVX_OK,
                 "send_layers(0+1) of room 41");
    }
    for (double t0 = tl_now(); tl_now() - t0 < 20.0; usleep(1000)) {
        kvx_room_state_t st = KVX_ROOM_BOOTSTRAPPING;

        if (kvx_room_poll(j->ctx, 41, &st) != KVX_OK || st == KVX_ROOM_FAILED) {
            break;
        }
    }
    TL_CHECK(kvx_room_failure(j->ctx, 41, &f) == KVX_OK && f.status == KVX_ERR_TIMEOUT,
             "room 41 failed %s: %s", kvx_status_name(f.status), f.text);
    /* The prefill's own deadline names the layers; the decode's may fire
     * first (then it waited for its writer). */
    TL_CHECK(!prefill || f.origin_role != KVX_ROLE_PREFILL ||
                 strstr(f.text, "the application to hand over the rest of 1 layer (1..1; 4 of 8 "
                                "(page, layer)s handed over)") != NULL,
             "room 41's reason: %s", f.text);
    printf("badinput: rank %d | room 41 with layer 1 missing | %s | %s\n", tl_rank,
           kvx_status_name(f.status), f.text);
    TL_CHECK(close_room(j->ctx, 41) == KVX_OK, "close 41");
}

static int mode_layers(void)
{
    job_t j;

    job_start(&j);
    layers_rooms(&j);
    MPI_Barrier(MPI_COMM_WORLD);
    TL_CHECK(kvx_ctx_destroy(j.ctx) == KVX_OK, "destroy");
    return 0;
}

/* Pages [first, first + n) of every buffer of a CUDA pool still hold the
 * fill (read back through the runtime: the stand-in maps device memory
 * PROT_NONE). */
static int device_unwritten(const job_t *j, uint32_t first, uint32_t n)
{
    size_t len = n * j->page_bytes;
    unsigned char *host = malloc(len);
    int ok = host != NULL;

    for (unsigned b = 0; ok && b < 4; b++) {
        kvc_copy(host, (const unsigned char *)j->bufs[b] + first * j->page_bytes, len);
        for (size_t i = 0; ok && i < len; i++) {
            ok = host[i] == POOL_FILL;
        }
    }
    free(host);
    return ok;
}

/* Waits until room id is FAILED here; its failure in f. */
static int wait_failed(job_t *j, uint64_t id, kvx_failure_t *f)
{
    memset(f, 0, sizeof(*f));
    return wait_state(j->ctx, id, KVX_ROOM_SUCCESS) == KVX_ROOM_FAILED && /* or SUCCESS */
           kvx_room_failure(j->ctx, id, f) == KVX_OK;
}

/* Room 42: every (page, layer) handed over behind an event that never
 * completes. The prefill's transfer deadline (2 s; the decode's is 6 s, set
 * before the context) fires first and names the hand-over; both sides hold
 * that reason. Nothing was posted: the decode's pages still hold the fill. */
static void events_deadline(job_t *j, void *event, const uint32_t *pages)
{
    int prefill = j->id.role == KVX_ROLE_PREFILL;
    uint64_t aux = 42;
    kvx_failure_t f;

    if (!prefill) {
        TL_CHECK(kvx_room_recv_open(j->ctx, 42, 0, pages, 4, 0) == KVX_OK, "recv_open 42");
    } else {
        TL_CHECK(kvx_room_send_open(j->ctx, 42, 0, 4) == KVX_OK, "send_open 42");
        TL_CHECK(kvx_room_send_layers(j->ctx, 42, pages, 4, 0, 2, event, &aux, sizeof(aux)) ==
                     KVX_OK,
                 "send_layers(0+2) of room 42 behind an event");
    }
    TL_CHECK(wait_failed(j, 42, &f) && f.status == KVX_ERR_TIMEOUT &&
                 f.origin_role == KVX_ROLE_PREFILL &&
                 strstr(f.text, "waiting for the ready event of hand-over 1 of 1 (layers 0..1, "
                                "pages 0..3) to complete: cudaEventQuery says not ready") != NULL,
             "room 42: %s from %s: %s", kvx_status_name(f.status), kvx_role_name(f.origin_role),
             f.text);
    printf("badinput: rank %d | room 42 behind an event that never completes | %s | %s\n", tl_rank,
           kvx_status_name(f.status), f.text);
    TL_CHECK(close_room(j->ctx, 42) == KVX_OK, "close 42");
    TL_CHECK(prefill || device_unwritten(j, 0, 4), "room 42 wrote the decode's pages");
}

/* Room 43: aborted by the prefill while its hand-over waits for the event:
 * FAILED with the abort's reason on both sides, closed at once (nothing was
 * posted, so nothing drains). */
static void events_abort(job_t *j, void *event, const uint32_t *pages)
{
    int prefill = j->id.role == KVX_ROLE_PREFILL;
    kvx_failure_t f;
    double t0;

    if (!prefill) {
        TL_CHECK(kvx_room_recv_open(j->ctx, 43, 0, pages, 4, 0) == KVX_OK, "recv_open 43");
    } else {
        TL_CHECK(kvx_room_send_open(j->ctx, 43, 0, 4) == KVX_OK, "send_open 43");
        TL_CHECK(kvx_room_send_layers(j->ctx, 43, pages, 4, 0, 1, event, NULL, 0) == KVX_OK,
                 "send_layers(0+1) of room 43 behind an event");
        TL_CHECK(kvx_room_abort(j->ctx, 43, "t_badinput: aborted behind an event") == KVX_OK,
                 "abort 43");
    }
    TL_CHECK(wait_failed(j, 43, &f) && f.stage == KVX_STAGE_ABORT &&
                 f.origin_role == KVX_ROLE_PREFILL &&
                 strstr(f.text, "t_badinput: aborted behind an event") != NULL,
             "room 43: %s at %s from %s: %s", kvx_status_name(f.status), kvx_stage_name(f.stage),
             kvx_role_name(f.origin_role), f.text);
    printf("badinput: rank %d | room 43 aborted behind an event | %s | %s\n", tl_rank,
           kvx_status_name(f.status), f.text);
    t0 = tl_now();
    TL_CHECK(close_room(j->ctx, 43) == KVX_OK, "close 43");
    printf("badinput: rank %d | room 43 closed after %.1f ms\n", tl_rank, (tl_now() - t0) * 1e3);
    TL_CHECK(prefill || device_unwritten(j, 4, 4), "room 43 wrote the decode's pages");
}

static int mode_events(void)
{
    uint32_t first[4] = { 0, 1, 2, 3 }, second[4] = { 4, 5, 6, 7 };
    kvx_ctx_params_t p;
    void *stream = NULL, *event = NULL;
    char why[256];
    int ok;
    job_t j;

    ok = kvc_open(why, sizeof(why)) == 0 && kvc.devices > 0;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!ok) {
        printf("SKIP: rank %d: no CUDA runtime: %s\n", tl_rank, why);
        return 77;
    }
    if (tl_rank == 1) {
        setenv("KVX_TRANSFER_TIMEOUT", "6s", 1); /* the decode's: the prefill's fires first */
    }
    job_params(&p);
    p.mem_type = KVX_MEM_CUDA;
    p.cuda_device = 0;
    tl_job_start(&j, &p);
    if (j.id.role == KVX_ROLE_PREFILL) {
        TL_CHECK(kvc.stream_create(&stream, 1) == 0 && kvc.event_create(&event, 2) == 0 &&
                     kvc.event_record(event, stream) == 0,
                 "an event recorded on a stream");
    } else {
        unsigned char *fill = malloc(NUM_PAGES * j.page_bytes);

        TL_CHECK(fill != NULL, "no memory");
        for (unsigned b = 0; fill != NULL && b < 4; b++) {
            memset(fill, POOL_FILL, NUM_PAGES * j.page_bytes);
            kvc_copy(j.bufs[b], fill, NUM_PAGES * j.page_bytes);
        }
        free(fill);
    }
    events_deadline(&j, event, first);
    MPI_Barrier(MPI_COMM_WORLD);
    events_abort(&j, event, second);
    MPI_Barrier(MPI_COMM_WORLD);
    TL_CHECK(kvx_ctx_destroy(j.ctx) == KVX_OK, "destroy");
    /* kvx holds the event until its rooms concluded: freed only now, the
     * stream first (the stand-in's record on it still names the event). */
    if (event != NULL) {
        kvc.stream_destroy(stream);
        kvc.event_destroy(event);
    }
    return 0;
}

/* ---- creation ------------------------------------------------------------ */

/* The room tests' parameters, with a smaller pool. */
static void create_params(kvx_ctx_params_t *p)
{
    job_params(p);
    p->num_pages = 8;
    p->aux_slots = 2;
}

/* Every rank of comm must hold the same line. */
static void same_over(MPI_Comm comm, const char *what, const char *line)
{
    char mine[512] = { 0 }, *all;
    int size;

    MPI_Comm_size(comm, &size);
    snprintf(mine, sizeof(mine), "%s", line);
    all = malloc(sizeof(mine) * (size_t)size);
    MPI_Allgather(mine, sizeof(mine), MPI_CHAR, all, sizeof(mine), MPI_CHAR, comm);
    for (int r = 1; r < size; r++) {
        TL_CHECK(strcmp(all + sizeof(mine) * r, all) == 0, "%s: rank %d says '%s', rank 0 '%s'",
                 what, r, all + sizeof(mine) * r, all);
    }
    free(all);
}

/* One creation that must fail: status, reason, nothing handed out, within
 * seconds, and the same on every rank of same: the whole reason line when
 * the ranks agreed on it, the reason's text when each refused alone
 * (local: the line names the rank). */
static void create_fails(const char *what, MPI_Comm comm, MPI_Comm same, int local,
                         const kvx_ctx_params_t *p, int null_ctx_p, kvx_status_t want,
                         const char *reason)
{
    kvx_ctx_t *ctx;
    kvx_failure_t why;
    char line[512] = "";
    double t0 = tl_now(), took;
    kvx_status_t st;

    memset(&ctx, CANARY, sizeof(ctx));
    memset(&why, 0, sizeof(why));
    st = kvx_ctx_create(comm, p, null_ctx_p ? NULL : &ctx, &why);
    took = tl_now() - t0;
    kvx_failure_format(&why, line, sizeof(line));
    TL_CHECK(st == want, "%s: create returned %s, want %s (%s)", what, kvx_status_name(st),
             kvx_status_name(want), line);
    TL_CHECK(why.status == want, "%s: reason carries %s", what, kvx_status_name(why.status));
    TL_CHECK(strstr(line, reason) != NULL, "%s: reason '%s' lacks '%s'", what, line, reason);
    TL_CHECK(took < 10.0, "%s: creation took %.1f s to fail", what, took);
    if (st == KVX_OK) {
        kvx_ctx_destroy(ctx);
    } else {
        UNTOUCHED(ctx, "ctx_p of a failed creation");
    }
    same_over(same, what, local ? why.text : line);
    printf("badinput: rank %d | kvx_ctx_create | %s -> %s | %s\n", tl_rank, what,
           kvx_status_name(st), line);
}

/* The value of a variable in this process's environment, or NULL. */
static const char *env_value(const char *name)
{
    extern char **environ;
    size_t n = strlen(name);

    for (char **e = environ; *e != NULL; e++) {
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') {
            return *e + n + 1;
        }
    }
    return NULL;
}

/* A KVX_* variable set on one rank (all when on_rank is -1) for one create,
 * then restored. */
static void create_env_fails(const char *what, const char *name, const char *value, int on_rank,
                             kvx_status_t want, const char *reason)
{
    const char *was = env_value(name);
    char *saved = was != NULL ? strdup(was) : NULL;
    kvx_ctx_params_t p;

    create_params(&p);
    if (on_rank < 0 || on_rank == tl_rank) {
        setenv(name, value, 1);
    }
    create_fails(what, MPI_COMM_WORLD, MPI_COMM_WORLD, 0, &p, 0, want, reason);
    if (saved != NULL) {
        setenv(name, saved, 1);
    } else {
        unsetenv(name);
    }
    free(saved);
}

static void create_comms(void)
{
    kvx_ctx_params_t p;
    MPI_Comm half, three, inter;
    kvx_ctx_t *ctx;
    kvx_identity_t id;
    int size;

    MPI_Comm_size(MPI_COMM_WORLD, &size);
    create_params(&p);
    create_fails("world MPI_COMM_NULL", MPI_COMM_NULL, MPI_COMM_WORLD, 1, &p, 0,
                 KVX_ERR_INVALID_PARAM, "world is MPI_COMM_NULL");
    create_fails("MPI_COMM_SELF, 4-rank layout", MPI_COMM_SELF, MPI_COMM_WORLD, 1, &p, 0,
                 KVX_ERR_LAYOUT,
                 "layout 'prefill:1x2,decode:1x2' needs 4 ranks but the world has 1");
    MPI_Comm_split(MPI_COMM_WORLD, tl_rank / 2, tl_rank, &half);
    create_fails("half of a split, 4-rank layout", half, half, 0, &p, 0, KVX_ERR_LAYOUT,
                 "layout 'prefill:1x2,decode:1x2' needs 4 ranks but the world has 2");
    MPI_Comm_split(MPI_COMM_WORLD, tl_rank < 3 ? 0 : MPI_UNDEFINED, tl_rank, &three);
    if (three != MPI_COMM_NULL) {
        /* Rank 3 is not in it and does not call. */
        create_fails("3 of 4 ranks, 4-rank layout", three, three, 0, &p, 0, KVX_ERR_LAYOUT,
                     "layout 'prefill:1x2,decode:1x2' needs 4 ranks but the world has 3");
        MPI_Comm_free(&three);
    }
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, tl_rank < 2 ? 2 : 0, 7, &inter);
    create_fails("intercommunicator", inter, MPI_COMM_WORLD, 1, &p, 0, KVX_ERR_INVALID_PARAM,
                 "world is an intercommunicator; kvx needs an intracommunicator");
    MPI_Comm_free(&inter);
    /* A communicator that is not the whole job works when the layout
     * matches it: two jobs of two ranks side by side. */
    p.layout = "prefill:1x1,decode:1x1";
    TL_CHECK(kvx_ctx_create(half, &p, &ctx, NULL) == KVX_OK, "create on half of a split");
    TL_CHECK(kvx_ctx_identity(ctx, &id) == KVX_OK && id.world_size == 2 &&
                 id.world_rank == tl_rank % 2,
             "identity on half of a split: rank %d of %d", id.world_rank, id.world_size);
    TL_CHECK(kvx_ctx_destroy(ctx) == KVX_OK, "destroy on half of a split");
    printf("badinput: rank %d | kvx_ctx_create | half of a split, 2-rank layout -> KVX_OK | "
           "rank %d of 2\n",
           tl_rank, id.world_rank);
    MPI_Comm_free(&half);
    MPI_Barrier(MPI_COMM_WORLD);
}

static void create_pointers_and_params(void)
{
    kvx_ctx_params_t p;
    void *bufs[4] = { &p, NULL, &p, &p };
    char who[64];

    create_params(&p);
    create_fails("ctx_p NULL everywhere", MPI_COMM_WORLD, MPI_COMM_WORLD, 0, &p, 1,
                 KVX_ERR_INVALID_PARAM, "on rank 0: ctx_p is NULL");
    create_fails("ctx_p NULL on rank 2", MPI_COMM_WORLD, MPI_COMM_WORLD, 0, &p, tl_rank == 2,
                 KVX_ERR_INVALID_PARAM, "on rank 2: ctx_p is NULL");
    create_fails("params NULL on rank 1", MPI_COMM_WORLD, MPI_COMM_WORLD, 0,
                 tl_rank == 1 ? NULL : &p, 0, KVX_ERR_INVALID_PARAM, "on rank 1: params is NULL");
    p.layout = tl_rank == 3 ? "prefill:2x1,decode:1x2" : NULL;
    create_fails("another layout on rank 3", MPI_COMM_WORLD, MPI_COMM_WORLD, 0, &p, 0,
                 KVX_ERR_LAYOUT, "rank 3 was given a different job layout than rank 0");
    create_params(&p);
    p.layout = "prefill:1x2,decode";
    create_fails("params.layout junk", MPI_COMM_WORLD, MPI_COMM_WORLD, 0, &p, 0, KVX_ERR_LAYOUT,
                 "layout 'prefill:1x2,decode'");
    create_params(&p);
    p.fault = tl_rank == 0 ? "stage=nowhere" : NULL;
    create_fails("params.fault junk on rank 0", MPI_COMM_WORLD, MPI_COMM_WORLD, 0, &p, 0,
                 KVX_ERR_CONFIG, "(rank 0): fault rule 'stage=nowhere'");
    create_params(&p);
    if (tl_rank == 2) {
        p.kv.dtype = (kvx_dtype_t)99;
    }
    snprintf(who, sizeof(who), "decode[0]: invalid dtype (99)");
    create_fails("kv.dtype 99 on rank 2", MPI_COMM_WORLD, MPI_COMM_WORLD, 0, &p, 0,
                 KVX_ERR_INVALID_PARAM, who);
    create_params(&p);
    p.kv.attn = (kvx_attn_t)7;
    create_fails("kv.attn 7", MPI_COMM_WORLD, MPI_COMM_WORLD, 0, &p, 0, KVX_ERR_INVALID_PARAM,
                 "attention kind (7)");
    create_params(&p);
    p.kv.page_layout = (kvx_page_layout_t)42;
    create_fails("kv.page_layout 42", MPI_COMM_WORLD, MPI_COMM_WORLD, 0, &p, 0,
                 KVX_ERR_INVALID_PARAM, "page layout (42)");
    create_params(&p);
    p.mem_type = (kvx_mem_type_t)7;
    create_fails("mem_type 7", MPI_COMM_WORLD, MPI_COMM_WORLD, 0, &p, 0, KVX_ERR_INVALID_PARAM,
                 "mem_type 7 is neither KVX_MEM_HOST nor KVX_MEM_CUDA");
    create_params(&p);
    p.buffers = bufs;
    p.slab = &p;
    create_fails("buffers and slab", MPI_COMM_WORLD, MPI_COMM_WORLD, 0, &p, 0,
                 KVX_ERR_INVALID_PARAM, "give either buffers or slab, not both");
    p.slab = NULL;
    create_fails("buffers[1] NULL", MPI_COMM_WORLD, MPI_COMM_WORLD, 0, &p, 0, KVX_ERR_INVALID_PARAM,
                 "buffers[1] (layer 0, component 1) is NULL");
    create_params(&p);
    p.aux_item_size = 0;
    create_fails("aux_slots without aux_item_size", MPI_COMM_WORLD, MPI_COMM_WORLD, 0, &p, 0,
                 KVX_ERR_INVALID_PARAM, "aux_slots=2 and aux_item_size=0: give both or neither");
}

static void create_env(void)
{
    create_env_fails("KVX_LAYOUT junk", "KVX_LAYOUT", "prefill:1xA,decode:1x2", -1, KVX_ERR_LAYOUT,
                     "layout 'prefill:1xA,decode:1x2'");
    create_env_fails("KVX_LAYOUT junk on rank 3", "KVX_LAYOUT", "decode", 3, KVX_ERR_LAYOUT,
                     "on rank 3: layout 'decode'");
    create_env_fails("KVX_FAULT junk", "KVX_FAULT", "effect=explode", -1, KVX_ERR_CONFIG,
                     "fault rule 'effect=explode'");
    create_env_fails("KVX_PEER_TIMEOUT malformed on rank 1", "KVX_PEER_TIMEOUT", "soon", 1,
                     KVX_ERR_CONFIG, "on rank 1: KVX_PEER_TIMEOUT='soon' is not valid: expected");
    create_env_fails("KVX_SHUTDOWN_TIMEOUT malformed", "KVX_SHUTDOWN_TIMEOUT", "1.5x", -1,
                     KVX_ERR_CONFIG, "KVX_SHUTDOWN_TIMEOUT='1.5x' is not valid: expected");
    create_env_fails("KVX_MAX_INFLIGHT_BYTES malformed", "KVX_MAX_INFLIGHT_BYTES", "12QB", -1,
                     KVX_ERR_CONFIG, "KVX_MAX_INFLIGHT_BYTES='12QB' is not valid: expected");
    create_env_fails("KVX_MAX_INFLIGHT_OPS malformed", "KVX_MAX_INFLIGHT_OPS", "many", -1,
                     KVX_ERR_CONFIG, "KVX_MAX_INFLIGHT_OPS='many' is not valid: expected");
    create_env_fails("KVX_EP_ERR_MODE junk", "KVX_EP_ERR_MODE", "sometimes", -1, KVX_ERR_CONFIG,
                     "KVX_EP_ERR_MODE='sometimes' is not valid: expected");
}

static int mode_create(void)
{
    int threads = tl_thread_count(), size;
    kvx_ctx_params_t p;
    kvx_ctx_t *ctx;

    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 4) {
        fprintf(stderr, "t_badinput create needs 4 ranks\n");
        return 2;
    }
    create_pointers_and_params();
    create_env();
    TL_CHECK(tl_thread_count() == threads, "failed creations left %d threads behind",
             tl_thread_count() - threads);
    create_comms();
    /* What failed left nothing in the way of a context that works. */
    create_params(&p);
    TL_CHECK(kvx_ctx_create(MPI_COMM_WORLD, &p, &ctx, NULL) == KVX_OK, "create after failures");
    TL_CHECK(kvx_ctx_destroy(ctx) == KVX_OK, "destroy after failures");
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    kvx_ctx_params_t p;
    kvx_failure_t why;
    kvx_ctx_t *ctx;
    kvx_status_t before_init, after_fin;
    int total = 0, rc = 2;

    /* Before MPI_Init: a clear KVX_ERR_MPI, nothing else. */
    create_params(&p);
    memset(&ctx, CANARY, sizeof(ctx));
    before_init = kvx_ctx_create(MPI_COMM_WORLD, &p, &ctx, &why);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &tl_rank);
    setvbuf(stdout, NULL, _IOLBF, 0);
    TL_CHECK(before_init == KVX_ERR_MPI && strstr(why.text, "MPI is not initialized") != NULL,
             "create before MPI_Init: %s: %s", kvx_status_name(before_init), why.text);
    UNTOUCHED(ctx, "ctx_p of a create before MPI_Init");
    printf("badinput: rank %d | kvx_ctx_create | before MPI_Init -> %s | %s\n", tl_rank,
           kvx_status_name(before_init), why.text);
    cap_init();
    if (strcmp(mode, "rooms") == 0) {
        rc = mode_rooms();
    } else if (strcmp(mode, "create") == 0) {
        rc = mode_create();
    } else if (strcmp(mode, "layers") == 0) {
        rc = mode_layers();
    } else if (strcmp(mode, "events") == 0) {
        rc = mode_events();
    } else {
        fprintf(stderr,
                "usage: t_badinput rooms|create|layers|events (see mpi_tests/t_badinput.c)\n");
    }
    MPI_Allreduce(&tl_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (tl_rank == 0) {
        printf("t_badinput %s: %s\n", mode, rc == 0 && total == 0 ? "PASS" : "FAIL");
    }
    MPI_Finalize();
    after_fin = kvx_ctx_create(MPI_COMM_WORLD, &p, &ctx, &why);
    TL_CHECK(after_fin == KVX_ERR_MPI, "create after MPI_Finalize: %s", kvx_status_name(after_fin));
    return rc != 0 ? rc : total != 0 || tl_failures != 0 ? 1 : 0;
}
