/*
 * raw.c - the baseline: UCP puts of the same bytes between the same ranks,
 * with nothing of kvx in between.
 *
 * The context is set up as kvx sets up its own (src/ucx/ucx_ctx.c): the
 * user's UCX_* variables, v2 protocols unless UCX_PROTO_ENABLE is set,
 * features RMA, AM and WAKEUP, a worker in serialized thread mode, puts on
 * memory allocated as kvx's pool (page-aligned, or by UCX with
 * KVX_POOL_ALLOC=ucx) with the source's memory handle, fast-completion puts
 * where every lane stays on this host, and the endpoint's error mode chosen
 * as KVX_EP_ERR_MODE=auto chooses it (peer mode unless every lane is shared
 * memory, or as KVX_EP_ERR_MODE says). It is created after kvx's context, so
 * UCX_NET_DEVICES is what kvx chose.
 *
 * A room is its puts and one flush of the endpoint; the target progresses
 * its worker (on shared memory UCX emulates puts with active messages only
 * the target's progress completes) until an 8-byte flag, put after the last
 * flush completed, says every room has landed. By default both sides spin
 * in ucp_worker_progress, as ucx_perftest does (--raw-wait spin). With
 * --raw-wait kvx they wait as kvx's progress thread does (KVX_PROGRESS):
 * adaptive spins 256 empty progress calls, then sleeps on the worker's
 * event fd (at most 10 ms, kvx's tick); busy never sleeps. On a machine
 * with fewer cores than busy threads that decides who runs (two spinning
 * processes that share a core each burn a whole time slice while the
 * shared-memory FIFO between them is full or empty), and it shows what the
 * event fd's wakeups cost.
 */
#include "bench.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>

#define RAW_FLAG_BYTES 64
#define RAW_SPINS      256 /* kvx's PROGRESS_SPINS */
#define RAW_SLEEP_MS   10  /* the longest a kvx progress thread sleeps */

struct raw {
    MPI_Comm comm;
    int rank; /* 0 initiator, 1 target */
    ucp_context_h context;
    ucp_worker_h worker;
    ucp_ep_h ep;
    ucp_rkey_h rkey;
    void *src, *dst; /* dst is followed by the flag */
    size_t src_len, dst_len;
    ucp_mem_h src_memh, dst_memh;
    int fast;      /* every lane is shared memory: fast-completion puts, as kvx */
    int ucx_owned; /* src and dst are UCX's (KVX_POOL_ALLOC=ucx) */
    void *rkey_buf;
    uint64_t remote_dst;
    uint64_t seq;      /* streams so far: the flag's next value */
    uint64_t flag_src; /* the initiator's copy of the flag */
    int flushed, errors;
    int peer_mode; /* the endpoint's error handling */
    int efd;       /* the worker's event fd, -1 to spin */
    unsigned idle; /* empty progress calls in a row */
    char tls[320];
};

static void raw_error(const char *what, ucs_status_t st)
{
    fprintf(stderr, "kvx-bench: rank %d: %s: %s\n", bench_rank, what, ucs_status_string(st));
}

/* Whether a KVX_* variable is set to value here (kvx reads it, so it is
 * asked, not read from the environment). */
static int raw_config_is(const char *name, const char *value)
{
    for (size_t i = 0; i < kvx_config_count(); i++) {
        kvx_config_var_t v;

        kvx_config_var(i, &v);
        if (!strcmp(v.name, name)) {
            return !strcmp(v.value != NULL ? v.value : v.default_value, value);
        }
    }
    return 0;
}

static int raw_context(raw_t *raw)
{
    ucp_params_t params = { 0 };
    ucp_worker_params_t wparams = { 0 };
    ucp_config_t *config;
    ucs_status_t st;

    if ((st = ucp_config_read(NULL, NULL, &config)) != UCS_OK) {
        raw_error("ucp_config_read", st);
        return -1;
    }
    if (getenv("UCX_PROTO_ENABLE") == NULL) {
        ucp_config_modify(config, "PROTO_ENABLE", "y");
    }
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    params.features = UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
    params.mt_workers_shared = 0;
    st = ucp_init(&params, config, &raw->context);
    ucp_config_release(config);
    if (st != UCS_OK) {
        raw_error("ucp_init", st);
        return -1;
    }
    wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    if ((st = ucp_worker_create(raw->context, &wparams, &raw->worker)) != UCS_OK) {
        raw_error("ucp_worker_create", st);
        return -1;
    }
    raw->efd = -1;
    if (!bench_raw_spin && !raw_config_is("KVX_PROGRESS", "busy") &&
        ucp_worker_get_efd(raw->worker, &raw->efd) != UCS_OK) {
        raw->efd = -1;
    }
    return 0;
}

/* Progresses the worker; after RAW_SPINS empty calls in a row sleeps on
 * its event fd, as kvx's adaptive progress thread does. */
static void raw_progress(raw_t *raw)
{
    struct pollfd pfd = { raw->efd, POLLIN, 0 };

    if (ucp_worker_progress(raw->worker) > 0 || raw->efd < 0) {
        raw->idle = 0;
        return;
    }
    if (++raw->idle >= RAW_SPINS) {
        raw->idle = 0;
        if (ucp_worker_arm(raw->worker) == UCS_OK) {
            poll(&pfd, 1, RAW_SLEEP_MS);
        }
    }
}

/* Memory as kvx's pool: page-aligned memory registered with UCX, or with
 * KVX_POOL_ALLOC=ucx memory UCX allocates and registers (as ucx_perftest's
 * buffers: shared-memory transports put into it directly). */
static int raw_map(raw_t *raw, void **buf, size_t len, ucp_mem_h *memh)
{
    ucp_mem_map_params_t p = { 0 };
    ucp_mem_attr_t attr = { 0 };
    int by_ucx = raw_config_is("KVX_POOL_ALLOC", "ucx");
    ucs_status_t st;

    *buf = NULL;
    if (!by_ucx && posix_memalign(buf, 4096, len) != 0) {
        fprintf(stderr, "kvx-bench: rank %d: cannot allocate %zu bytes\n", bench_rank, len);
        return -1;
    }
    p.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                   UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    p.address = *buf;
    p.length = len;
    p.memory_type = UCS_MEMORY_TYPE_HOST;
    p.flags = by_ucx ? UCP_MEM_MAP_ALLOCATE : 0;
    if ((st = ucp_mem_map(raw->context, &p, memh)) != UCS_OK) {
        raw_error("ucp_mem_map", st);
        return -1;
    }
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
    if (by_ucx && (st = ucp_mem_query(*memh, &attr)) != UCS_OK) {
        raw_error("ucp_mem_query", st);
        ucp_mem_unmap(raw->context, *memh);
        return -1;
    }
    raw->ucx_owned = by_ucx;
    *buf = by_ucx ? attr.address : *buf;
    memset(*buf, 0, len);
    return 0;
}

static void raw_lanes(ucp_ep_h ep, char *buf, size_t len)
{
    char *text = NULL, *save = NULL;
    size_t text_len = 0, o = 0;
    FILE *f = open_memstream(&text, &text_len);

    buf[0] = '\0';
    if (f == NULL) {
        return;
    }
    ucp_ep_print_info(ep, f);
    fclose(f);
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *lane = strstr(line, "lane["), tl[64];

        if (lane != NULL && sscanf(lane, "lane[%*d]: %*d:%63s", tl) == 1 && o < len) {
            o += (size_t)snprintf(buf + o, len - o, "%s%s", o ? " " : "", tl);
        }
    }
    free(text);
}

static int raw_all_shm(const char *tls)
{
    static const char *const shm[] = { "sysv/", "posix/", "cma/", "xpmem/", "knem/", "self/" };
    char copy[320], *save = NULL;
    int lanes = 0;

    snprintf(copy, sizeof(copy), "%s", tls);
    for (char *tl = strtok_r(copy, " ", &save); tl != NULL; tl = strtok_r(NULL, " ", &save)) {
        int known = 0;

        for (size_t i = 0; i < sizeof(shm) / sizeof(shm[0]); i++) {
            known |= !strncmp(tl, shm[i], strlen(shm[i]));
        }
        if (!known) {
            return 0;
        }
        lanes++;
    }
    return lanes > 0;
}

static void raw_ep_err(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    raw_t *raw = arg;

    (void)ep;
    raw_error("endpoint error", status);
    raw->errors++;
}

static int raw_ep(raw_t *raw, const void *addr, int same_host)
{
    /* KVX_EP_ERR_MODE: 0 auto, 1 peer, 2 none. */
    int mode = raw_config_is("KVX_EP_ERR_MODE", "peer")   ? 1
               : raw_config_is("KVX_EP_ERR_MODE", "none") ? 2
                                                          : 0;

    for (int peer = mode == 1 || (mode == 0 && !same_host);; peer = 1) {
        ucp_ep_params_t p = { 0 };
        ucs_status_t st;

        p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
        p.address = addr;
        p.err_mode = peer ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
        if (peer) {
            p.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
            p.err_handler.cb = raw_ep_err;
            p.err_handler.arg = raw;
        }
        if ((st = ucp_ep_create(raw->worker, &p, &raw->ep)) != UCS_OK) {
            raw_error("ucp_ep_create", st);
            return -1;
        }
        raw_lanes(raw->ep, raw->tls, sizeof(raw->tls));
        raw->fast = raw_all_shm(raw->tls);
        if (peer || mode != 0 || raw_all_shm(raw->tls)) {
            raw->peer_mode = peer;
            return 0;
        }
        /* A local peer over a network transport: peer mode, as kvx does. */
        ucp_ep_destroy(raw->ep);
    }
}

/* Progresses the worker until every rank of the raw's comm got here. */
static void raw_sync(raw_t *raw)
{
    MPI_Request req;
    int done = 0;

    MPI_Ibarrier(raw->comm, &req);
    while (!done) {
        ucp_worker_progress(raw->worker);
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    }
}

/* The target publishes its worker address, destination and key. */
static int raw_connect(raw_t *raw)
{
    char host[MPI_MAX_PROCESSOR_NAME] = { 0 }, peer_host[MPI_MAX_PROCESSOR_NAME] = { 0 };
    ucp_address_t *addr = NULL;
    size_t addr_len = 0, rkey_len = 0;
    uint64_t hdr[3] = { 0 };
    char *blob = NULL;
    MPI_Request req;
    int n, ok = 1, done = 0;

    MPI_Get_processor_name(host, &n);
    MPI_Sendrecv(host, sizeof(host), MPI_CHAR, 1 - raw->rank, 1, peer_host, sizeof(peer_host),
                 MPI_CHAR, 1 - raw->rank, 1, raw->comm, MPI_STATUS_IGNORE);
    if (raw->rank == 1) {
        ok = ucp_worker_get_address(raw->worker, &addr, &addr_len) == UCS_OK &&
             ucp_rkey_pack(raw->context, raw->dst_memh, &raw->rkey_buf, &rkey_len) == UCS_OK;
        hdr[0] = (uintptr_t)raw->dst;
        hdr[1] = ok ? addr_len : 0;
        hdr[2] = ok ? rkey_len : 0;
        blob = malloc(addr_len + rkey_len + 1);
        memcpy(blob, addr, addr_len);
        memcpy(blob + addr_len, raw->rkey_buf, rkey_len);
        MPI_Send(hdr, 3, MPI_UINT64_T, 0, 2, raw->comm);
        MPI_Send(blob, (int)(addr_len + rkey_len), MPI_BYTE, 0, 3, raw->comm);
        ucp_worker_release_address(raw->worker, addr);
    } else {
        MPI_Recv(hdr, 3, MPI_UINT64_T, 1, 2, raw->comm, MPI_STATUS_IGNORE);
        blob = malloc(hdr[1] + hdr[2] + 1);
        MPI_Recv(blob, (int)(hdr[1] + hdr[2]), MPI_BYTE, 1, 3, raw->comm, MPI_STATUS_IGNORE);
        raw->remote_dst = hdr[0];
        ok = hdr[1] > 0 && raw_ep(raw, blob, !strcmp(host, peer_host)) == 0 &&
             ucp_ep_rkey_unpack(raw->ep, blob + hdr[1], &raw->rkey) == UCS_OK;
    }
    free(blob);
    /* The target progresses while the initiator connects: an endpoint to a
     * local peer over a network transport is destroyed and made again in
     * peer mode (raw_ep), and ucp_ep_destroy() waits for the peer. */
    MPI_Iallreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, raw->comm, &req);
    while (!done) {
        ucp_worker_progress(raw->worker);
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    }
    return ok ? 0 : -1;
}

raw_t *raw_create(MPI_Comm comm, size_t src_len, size_t dst_len)
{
    raw_t *raw = calloc(1, sizeof(*raw));
    int ok;

    raw->comm = comm;
    MPI_Comm_rank(comm, &raw->rank);
    raw->src_len = src_len;
    raw->dst_len = dst_len;
    ok = raw_context(raw) == 0;
    if (ok && raw->rank == 0) {
        ok = raw_map(raw, &raw->src, src_len, &raw->src_memh) == 0;
    } else if (ok) {
        ok = raw_map(raw, &raw->dst, dst_len + RAW_FLAG_BYTES, &raw->dst_memh) == 0;
    }
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm);
    if (!ok || raw_connect(raw) != 0) {
        raw_destroy(raw);
        return NULL;
    }
    return raw;
}

void raw_destroy(raw_t *raw)
{
    if (raw == NULL) {
        return;
    }
    if (raw->rkey != NULL) {
        ucp_rkey_destroy(raw->rkey);
    }
    if (raw->ep != NULL) {
        ucp_request_param_t p = { 0 };
        void *req = ucp_ep_close_nbx(raw->ep, &p);

        while (req != NULL && !UCS_PTR_IS_ERR(req) &&
               ucp_request_check_status(req) == UCS_INPROGRESS) {
            ucp_worker_progress(raw->worker);
        }
        if (req != NULL && !UCS_PTR_IS_ERR(req)) {
            ucp_request_free(req);
        }
    }
    if (raw->worker != NULL) {
        raw_sync(raw);
    }
    if (raw->rkey_buf != NULL) {
        ucp_rkey_buffer_release(raw->rkey_buf);
    }
    if (raw->src_memh != NULL) {
        ucp_mem_unmap(raw->context, raw->src_memh);
    }
    if (raw->dst_memh != NULL) {
        ucp_mem_unmap(raw->context, raw->dst_memh);
    }
    if (raw->worker != NULL) {
        ucp_worker_destroy(raw->worker);
    }
    if (raw->context != NULL) {
        ucp_cleanup(raw->context);
    }
    if (!raw->ucx_owned) { /* else UCX's, freed by ucp_mem_unmap() above */
        free(raw->src);
        free(raw->dst);
    }
    free(raw);
}

void *raw_src(raw_t *raw)
{
    return raw->src;
}

void *raw_dst(raw_t *raw)
{
    return raw->dst;
}

const char *raw_transports(raw_t *raw)
{
    if (raw->ep != NULL) {
        size_t n;

        /* Wireup may have replaced the lanes seen at creation. */
        raw_lanes(raw->ep, raw->tls, sizeof(raw->tls) - 32);
        n = strlen(raw->tls);
        snprintf(raw->tls + n, sizeof(raw->tls) - n, " (error handling %s)",
                 raw->peer_mode ? "peer" : "none");
    }
    return raw->tls;
}

static void raw_put_cb(void *request, ucs_status_t status, void *user)
{
    raw_t *raw = user;

    if (status != UCS_OK) {
        raw_error("put", status);
        raw->errors++;
    }
    ucp_request_free(request);
}

static void raw_flush_cb(void *request, ucs_status_t status, void *user)
{
    raw_t *raw = user;

    if (status != UCS_OK) {
        raw_error("flush", status);
        raw->errors++;
    }
    raw->flushed++;
    ucp_request_free(request);
}

/* Posts one room: its puts, then a flush of the endpoint. */
static void raw_post_room(raw_t *raw, const raw_put_t *puts, size_t n)
{
    ucp_request_param_t p = { 0 };
    void *req;

    p.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMH;
    p.cb.send = raw_put_cb;
    p.user_data = raw;
    p.memh = raw->src_memh;
    if (raw->fast) {
        p.op_attr_mask |= UCP_OP_ATTR_FLAG_FAST_CMPL;
    }
    for (size_t i = 0; i < n; i++) {
        req = ucp_put_nbx(raw->ep, (char *)raw->src + puts[i].src, puts[i].len,
                          raw->remote_dst + puts[i].dst, raw->rkey, &p);
        if (UCS_PTR_IS_ERR(req)) {
            raw_error("ucp_put_nbx", UCS_PTR_STATUS(req));
            raw->errors++;
        }
    }
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = raw_flush_cb;
    req = ucp_ep_flush_nbx(raw->ep, &p);
    if (req == NULL) {
        raw->flushed++;
    } else if (UCS_PTR_IS_ERR(req)) {
        raw_error("ucp_ep_flush_nbx", UCS_PTR_STATUS(req));
        raw->errors++;
        raw->flushed++;
    }
}

/* The initiator: every room, then the flag, then a flush of the flag. */
static void raw_initiate(raw_t *raw, const raw_put_t *const *slot_puts, const size_t *slot_nputs,
                         int nslots, int nrooms, int window)
{
    int posted = 0, flags;
    ucp_request_param_t p = { 0 };
    void *req;

    raw->flushed = 0;
    while (raw->flushed < nrooms && raw->errors == 0) {
        while (posted < nrooms && posted - raw->flushed < window) {
            raw_post_room(raw, slot_puts[posted % nslots], slot_nputs[posted % nslots]);
            posted++;
        }
        raw_progress(raw);
    }
    raw->flag_src = raw->seq;
    req = ucp_put_nbx(raw->ep, &raw->flag_src, sizeof(raw->flag_src),
                      raw->remote_dst + raw->dst_len, raw->rkey, &p);
    if (UCS_PTR_IS_ERR(req)) {
        raw->errors++;
    } else if (req != NULL) {
        while (ucp_request_check_status(req) == UCS_INPROGRESS) {
            raw_progress(raw);
        }
        ucp_request_free(req);
    }
    flags = raw->flushed;
    raw_post_room(raw, NULL, 0);
    while (raw->flushed == flags) {
        raw_progress(raw);
    }
}

double raw_stream(raw_t *raw, const raw_put_t *const *slot_puts, const size_t *slot_nputs,
                  int nslots, int nrooms, int window)
{
    volatile uint64_t *flag;
    double t0, t;
    int errors;

    raw->seq++;
    raw->errors = 0;
    MPI_Barrier(raw->comm);
    t0 = bench_now();
    if (raw->rank == 0) {
        raw_initiate(raw, slot_puts, slot_nputs, nslots, nrooms, window);
    } else {
        flag = (volatile uint64_t *)((char *)raw->dst + raw->dst_len);
        while (*flag != raw->seq) {
            raw_progress(raw);
        }
    }
    t = bench_now() - t0;
    raw_sync(raw);
    errors = raw->errors;
    MPI_Allreduce(MPI_IN_PLACE, &errors, 1, MPI_INT, MPI_SUM, raw->comm);
    return errors == 0 ? t : -1;
}

void raw_probe_transports(MPI_Comm comm, char *buf, size_t len)
{
    int rank;
    MPI_Comm pair;
    raw_t *raw;

    MPI_Comm_rank(comm, &rank);
    buf[0] = '\0';
    MPI_Comm_split(comm, rank < 2 ? 0 : MPI_UNDEFINED, rank, &pair);
    if (pair == MPI_COMM_NULL) {
        return;
    }
    raw = raw_create(pair, 4096, 4096);
    if (raw != NULL) {
        raw_put_t put = { 0, 0, 4096 };
        const raw_put_t *puts = &put;
        size_t n = 1;

        raw_stream(raw, &puts, &n, 1, 1, 1);
        if (rank == 0) {
            snprintf(buf, len, "%s", raw_transports(raw));
        }
        raw_destroy(raw);
    }
    MPI_Comm_free(&pair);
}
