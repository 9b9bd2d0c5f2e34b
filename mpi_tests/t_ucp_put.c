/*
 * t_ucp_put.c - plain MPI + UCP, no kvx: every rank puts a pattern into its right
 * neighbour's registered buffer, flushes, and the neighbour checks every byte.
 * With mpi_tests/netns/hosts.sh it proves that UCX moves pages between
 * namespace "hosts" over TCP on the data interface, and shows what a data fault
 * looks like from UCX while MPI (on the control interface) still works.
 *
 *   t_ucp_put [-s SIZE] [-n ITERS] [-T SECONDS] [-d DEADLINE] [-p] [-l IFACE]
 *             [-m MARKER] [-x]
 *
 *   -s SIZE      bytes per put, a multiple of 8 (default 4 MiB)
 *   -n ITERS     iterations (default 4); 0: until the data path fails or -T passes
 *   -T SECONDS   with -n 0, how long to keep putting (default 60)
 *   -d DEADLINE  a flush not done after DEADLINE seconds is a stall (default 10)
 *   -p           endpoints use UCP_ERR_HANDLING_MODE_PEER, so UCX may itself
 *                report a peer it cannot reach (and how long that takes)
 *   -l IFACE     every lane of an endpoint to a rank on another host must be
 *                tcp/IFACE: not shared memory, not another interface, not lo
 *   -m MARKER    rank 0 creates this file once the first iteration is verified
 *                (a script waits for it before injecting a fault)
 *   -x           a fault is expected: pass only when the data path failed (stall
 *                or error) and every rank agreed on that over MPI
 *
 * Each iteration: put SIZE bytes to the right neighbour (into one of two halves of
 * its buffer, so a neighbour one iteration ahead never overwrites bytes still
 * being checked), flush with a deadline, agree over MPI on whether every rank's
 * flush completed, then check the bytes the left neighbour put. Over TCP a put
 * moves only while the target progresses its worker, so every wait here (flush,
 * MPI agreement) keeps calling ucp_worker_progress().
 */
#include "config.h"

#include <errno.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#define HOST_LEN 64

/* What every rank publishes over MPI before any endpoint exists. */
typedef struct {
    uint64_t base; /* remote address of the two-half receive buffer */
    uint32_t rkey_len;
    uint32_t addr_len;
    char host[HOST_LEN];
} peer_hdr_t;

/* How one rank's data path ended, gathered by rank 0. */
typedef struct {
    int status; /* ucs_status_t; UCS_INPROGRESS for a stall */
    int iters;  /* iterations verified */
    double last_ok;
    double failed_at;
    int ep_error; /* what the endpoint's error handler (-p) reported, UCS_OK if nothing */
    double ep_error_at;
} outcome_t;

static struct {
    size_t size;
    long iters;
    double total_s, deadline_s;
    int peer_mode, expect_fault;
    const char *iface, *marker;
} opt = { 4 << 20, 4, 60, 10, 0, 0, NULL, NULL };

static int rank, size, failures;
static ucp_context_h ctx;
static ucp_worker_h worker;
static volatile ucs_status_t ep_error = UCS_OK;
static double ep_error_at;

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void fail(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    fprintf(stderr, "t_ucp_put: rank %d: ", rank);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    failures++;
}

static void ep_err_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)arg;
    (void)ep;
    if (ep_error == UCS_OK) {
        ep_error = status;
        ep_error_at = now();
    }
}

static int parse(int argc, char **argv)
{
    int c;

    while ((c = getopt(argc, argv, "s:n:T:d:pl:m:x")) != -1) {
        switch (c) {
        case 's':
            opt.size = strtoull(optarg, NULL, 0);
            break;
        case 'n':
            opt.iters = strtol(optarg, NULL, 0);
            break;
        case 'T':
            opt.total_s = strtod(optarg, NULL);
            break;
        case 'd':
            opt.deadline_s = strtod(optarg, NULL);
            break;
        case 'p':
            opt.peer_mode = 1;
            break;
        case 'l':
            opt.iface = optarg;
            break;
        case 'm':
            opt.marker = optarg;
            break;
        case 'x':
            opt.expect_fault = 1;
            break;
        default:
            return -1;
        }
    }
    return opt.size == 0 || opt.size % 8 != 0 || optind != argc ? -1 : 0;
}

/* Waits for a UCP request, progressing the worker, at most deadline_s seconds.
 * A request still running at the deadline is left alone: UCS_INPROGRESS. */
static ucs_status_t wait_req(ucs_status_ptr_t req, double deadline_s)
{
    double t0 = now();
    ucs_status_t status;

    if (req == NULL || UCS_PTR_IS_ERR(req)) {
        return UCS_PTR_STATUS(req);
    }
    while ((status = ucp_request_check_status(req)) == UCS_INPROGRESS) {
        ucp_worker_progress(worker);
        if (now() - t0 > deadline_s) {
            return UCS_INPROGRESS;
        }
    }
    ucp_request_free(req);
    return status;
}

/* Whether every rank says yes: MPI_Allreduce(MIN) that keeps the UCP worker
 * progressing meanwhile. */
static int agree_all(int mine)
{
    MPI_Request mreq;
    int all, done = 0;

    MPI_Iallreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &mreq);
    while (!done) {
        ucp_worker_progress(worker);
        MPI_Test(&mreq, &done, MPI_STATUS_IGNORE);
    }
    return all;
}

static int ucp_setup(void)
{
    ucp_params_t params = { 0 };
    ucp_worker_params_t wparams = { 0 };
    ucs_status_t status;

    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_RMA;
    status = ucp_init(&params, NULL, &ctx);
    if (status != UCS_OK) {
        fail("ucp_init: %s", ucs_status_string(status));
        return -1;
    }
    wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
    status = ucp_worker_create(ctx, &wparams, &worker);
    if (status != UCS_OK) {
        fail("ucp_worker_create: %s", ucs_status_string(status));
        return -1;
    }
    return 0;
}

/* Gathers every rank's header, rkey and worker address into one buffer:
 * blobs + offs[r] is rank r's peer_hdr_t, followed by its rkey and address. */
static char *exchange(const void *mine, int len, int **offs_p)
{
    int *lens = malloc(sizeof(int) * size), *offs = malloc(sizeof(int) * size);
    char *blobs;
    int total = 0;

    MPI_Allgather(&len, 1, MPI_INT, lens, 1, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++) {
        offs[r] = total;
        total += lens[r];
    }
    blobs = malloc(total);
    MPI_Allgatherv(mine, len, MPI_BYTE, blobs, lens, offs, MPI_BYTE, MPI_COMM_WORLD);
    free(lens);
    *offs_p = offs;
    return blobs;
}

/* The lanes of an endpoint as ucp_ep_print_info() names them ("tcp/data0.0", ...),
 * one per line of *lanes_p; returns how many do not use tcp/IFACE. */
static int lanes_of(ucp_ep_h ep, const char *iface, char **lanes_p)
{
    char *info = NULL, *lanes = calloc(1, 1), *line, *save = NULL;
    size_t len = 0, llen = 0;
    FILE *f = open_memstream(&info, &len);
    int bad = 0;

    ucp_ep_print_info(ep, f);
    fclose(f);
    for (line = strtok_r(info, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *p = strstr(line, "lane[");
        char tl[128];
        size_t n;

        if (p == NULL || (p = strchr(p, ':')) == NULL || sscanf(p + 1, " %*d:%127s", tl) != 1) {
            continue;
        }
        n = iface ? strlen(iface) : 0;
        if (iface && (strncmp(tl, "tcp/", 4) != 0 || strncmp(tl + 4, iface, n) != 0 ||
                      (tl[4 + n] != '\0' && tl[4 + n] != '.'))) {
            bad++;
        }
        lanes = realloc(lanes, llen + strlen(tl) + 2);
        llen += sprintf(lanes + llen, "%s%s", llen ? " " : "", tl);
    }
    free(info);
    *lanes_p = lanes;
    return bad;
}

static void fill(uint64_t *buf, size_t words, int from, long iter)
{
    for (size_t i = 0; i < words; i++) {
        buf[i] = ((uint64_t)from << 48) ^ ((uint64_t)iter << 32) ^ i;
    }
}

static size_t check(const uint64_t *buf, size_t words, int from, long iter)
{
    size_t bad = 0;

    for (size_t i = 0; i < words; i++) {
        bad += buf[i] != (((uint64_t)from << 48) ^ ((uint64_t)iter << 32) ^ i);
    }
    return bad;
}

int main(int argc, char **argv)
{
    int right, left, *offs, total_fail = 0;
    char host[HOST_LEN] = { 0 };
    ucp_mem_map_params_t mparams = { 0 };
    ucp_ep_params_t eparams = { 0 };
    ucp_request_param_t rparam = { 0 };
    ucp_mem_h memh;
    ucp_address_t *waddr;
    size_t waddr_len, rkey_len;
    void *rkey_buf;
    ucp_rkey_h rkey;
    ucp_ep_h ep;
    uint64_t *src, *dst = NULL;
    peer_hdr_t hdr, *peer;
    char *blob, *blobs;
    outcome_t out = { .status = UCS_OK }, *outs = NULL;
    double t_start, t_end;
    long it;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (parse(argc, argv) != 0) {
        if (rank == 0) {
            fprintf(stderr, "usage: t_ucp_put [-s SIZE] [-n ITERS] [-T S] [-d S] [-p] [-l IFACE] "
                            "[-m MARKER] [-x]\n");
        }
        MPI_Finalize();
        return 2;
    }
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;
    gethostname(host, sizeof(host) - 1);
    if (ucp_setup() != 0) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    /* Register the two-half receive buffer; publish it, its rkey and our address. */
    src = malloc(opt.size);
    if (posix_memalign((void **)&dst, 4096, 2 * opt.size) != 0 || src == NULL) {
        fail("cannot allocate %zu bytes", 3 * opt.size);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(dst, 0, 2 * opt.size);
    mparams.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mparams.address = dst;
    mparams.length = 2 * opt.size;
    if (ucp_mem_map(ctx, &mparams, &memh) != UCS_OK ||
        ucp_rkey_pack(ctx, memh, &rkey_buf, &rkey_len) != UCS_OK ||
        ucp_worker_get_address(worker, &waddr, &waddr_len) != UCS_OK) {
        fail("cannot register memory or get the worker address");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(&hdr, 0, sizeof(hdr));
    hdr.base = (uintptr_t)dst;
    hdr.rkey_len = rkey_len;
    hdr.addr_len = waddr_len;
    memcpy(hdr.host, host, sizeof(hdr.host));
    blob = malloc(sizeof(hdr) + rkey_len + waddr_len);
    memcpy(blob, &hdr, sizeof(hdr));
    memcpy(blob + sizeof(hdr), rkey_buf, rkey_len);
    memcpy(blob + sizeof(hdr) + rkey_len, waddr, waddr_len);
    blobs = exchange(blob, sizeof(hdr) + rkey_len + waddr_len, &offs);

    /* One endpoint, to the right neighbour. */
    peer = (peer_hdr_t *)(blobs + offs[right]);
    eparams.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    eparams.address = (ucp_address_t *)((char *)(peer + 1) + peer->rkey_len);
    if (opt.peer_mode) {
        eparams.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
        eparams.err_mode = UCP_ERR_HANDLING_MODE_PEER;
        eparams.err_handler.cb = ep_err_cb;
    }
    if (ucp_ep_create(worker, &eparams, &ep) != UCS_OK ||
        ucp_ep_rkey_unpack(ep, peer + 1, &rkey) != UCS_OK) {
        fail("cannot connect to rank %d", right);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    t_start = now();
    out.last_ok = t_start;
    for (it = 0; opt.iters == 0 || it < opt.iters; it++) {
        uint64_t raddr = peer->base + (it % 2) * opt.size;
        ucs_status_t st;
        size_t bad;

        if (opt.iters == 0 && now() - t_start > opt.total_s) {
            break;
        }
        fill(src, opt.size / 8, rank, it);
        st = wait_req(ucp_put_nbx(ep, src, opt.size, raddr, rkey, &rparam), opt.deadline_s);
        if (st == UCS_OK) {
            st = wait_req(ucp_ep_flush_nbx(ep, &rparam), opt.deadline_s);
        }
        if (st != UCS_OK && out.status == UCS_OK) {
            out.status = st;
            out.failed_at = now();
        }
        if (!agree_all(st == UCS_OK)) {
            break;
        }
        bad = check(dst + (it % 2) * (opt.size / 8), opt.size / 8, left, it);
        if (bad != 0) {
            fail("iteration %ld: %zu of %zu words from rank %d are wrong", it, bad, opt.size / 8,
                 left);
        }
        out.iters++;
        out.last_ok = now();
        if (it == 0) {
            char *lanes;
            int off = lanes_of(ep, strcmp(peer->host, host) ? opt.iface : NULL, &lanes);

            printf("rank %d (%s) -> rank %d (%s): lanes %s\n", rank, host, right, peer->host,
                   lanes);
            fflush(stdout);
            if (off != 0) {
                fail("an endpoint to another host has lanes off tcp/<iface>: %s", lanes);
            }
            free(lanes);
            if (rank == 0 && opt.marker != NULL) {
                FILE *m = fopen(opt.marker, "w");

                if (m == NULL || fclose(m) != 0) {
                    fail("cannot create the marker file: %s", strerror(errno));
                }
            }
        }
    }
    t_end = out.last_ok;
    out.ep_error = ep_error;
    out.ep_error_at = ep_error_at;
    if (ep_error != UCS_OK && out.status == UCS_OK) {
        out.status = ep_error;
        out.failed_at = ep_error_at;
    }

    /* Tell rank 0 how each rank's data path ended: this travels over MPI. */
    if (rank == 0) {
        outs = malloc(sizeof(*outs) * size);
    }
    MPI_Gather(&out, sizeof(out), MPI_BYTE, outs, sizeof(out), MPI_BYTE, 0, MPI_COMM_WORLD);
    MPI_Allreduce(&failures, &total_fail, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        int faulted = 0;

        for (int r = 0; r < size; r++) {
            if (outs[r].status != UCS_OK) {
                faulted++;
                printf("rank %d: data path failed at %.3f, %.3f s after its last good "
                       "iteration (%d verified): %s\n",
                       r, outs[r].failed_at, outs[r].failed_at - outs[r].last_ok, outs[r].iters,
                       outs[r].status == UCS_INPROGRESS ? "stall: flush not done in time"
                                                        : ucs_status_string(outs[r].status));
            }
            if (outs[r].ep_error != UCS_OK) {
                printf("rank %d: endpoint error handler called at %.3f: %s\n", r,
                       outs[r].ep_error_at, ucs_status_string(outs[r].ep_error));
            }
        }
        printf("# %d ranks, %zu bytes per put, %d iterations verified on rank 0 in %.3f s "
               "(%.1f MB/s per rank)\n",
               size, opt.size, outs[0].iters, t_end - t_start,
               outs[0].iters * (double)opt.size / (t_end - t_start) / 1e6);
        if (opt.expect_fault && faulted == 0) {
            printf("t_ucp_put: a fault was expected, but every put completed\n");
            total_fail++;
        } else if (!opt.expect_fault && faulted != 0) {
            total_fail++;
        }
        if (faulted != 0) {
            printf("the data-path failure was agreed over MPI by all %d ranks\n", size);
        }
        printf("%s\n", total_fail == 0 ? "PASS" : "FAIL");
        free(outs);
    }
    MPI_Bcast(&total_fail, 1, MPI_INT, 0, MPI_COMM_WORLD);

    /* After a failure the endpoint and its requests may never finish: leave UCX
     * as it is (the process ends anyway) rather than hang in its teardown. */
    if (agree_all(out.status == UCS_OK && ep_error == UCS_OK)) {
        ucp_rkey_destroy(rkey);
        rparam.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        rparam.flags = UCP_EP_CLOSE_FLAG_FORCE;
        wait_req(ucp_ep_close_nbx(ep, &rparam), opt.deadline_s);
        agree_all(1);
        ucp_rkey_buffer_release(rkey_buf);
        ucp_worker_release_address(worker, waddr);
        ucp_mem_unmap(ctx, memh);
        ucp_worker_destroy(worker);
        ucp_cleanup(ctx);
    }
    free(blob);
    free(blobs);
    free(offs);
    free(src);
    free(dst);
    MPI_Finalize();
    return total_fail == 0 ? 0 : 1;
}
