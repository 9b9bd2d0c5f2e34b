/*
 * ucx_ep.c - endpoints to peer workers.
 *
 * Error handling is chosen per endpoint (bootstrap.c). Without it UCX aborts
 * the whole process on a transport error (seen: "Fatal: unexpected error:
 * Endpoint timeout" over TCP when a peer went away), so every endpoint with
 * a network lane uses peer error mode, which costs nothing there (1 GiB of
 * 2 MiB puts over TCP: 1.08 GB/s without, 1.11 GB/s with). On shared memory
 * peer mode has no transport unless UCX_{POSIX,SYSV}_ERROR_HANDLING=y, and
 * then it costs (7.83 vs 6.84 GB/s): endpoints whose lanes are all shared
 * memory go without, and kvx finds dead local peers itself (peer.c).
 */
#include "config.h"

#include "kvx_ucx.h"
#include "util/failure.h"

#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

kvx_status_t kucx_ep_create(kucx_ctx_t *u, int group, kucx_plane_t plane, const void *address,
                            kucx_err_cb_t err_cb, void *err_arg, ucp_ep_h *ep_p, kvx_failure_t *why)
{
    ucp_ep_params_t p = { 0 };
    ucs_status_t rc;
    ucp_ep_h ep;

    p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    p.address = (const ucp_address_t *)address;
    p.err_mode = err_cb != NULL ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    if (err_cb != NULL) {
        p.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
        p.err_handler.cb = err_cb;
        p.err_handler.arg = err_arg;
    }
    rc = ucp_ep_create(kucx_worker(u, group, plane)->worker, &p, &ep);
    if (rc != UCS_OK) {
        kvx_error("ucp_ep_create failed: %s", ucs_status_string(rc));
        failure_set(why, kucx_status(rc), KVX_STAGE_BOOTSTRAP, ucs_status_string(rc),
                    "cannot create a UCX endpoint");
        return kucx_status(rc);
    }
    kucx_worker(u, group, plane)->used = 1;
    *ep_p = ep;
    return KVX_OK;
}

void kucx_ep_cancel(ucp_ep_h ep)
{
    ucp_request_param_t p = { 0 };
    void *req;

    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_EP_CLOSE_FLAG_FORCE;
    req = ucp_ep_close_nbx(ep, &p);
    if (req != NULL && !UCS_PTR_IS_ERR(req)) {
        ucp_request_free(req);
    }
}

int kucx_ep_is_shm(ucp_ep_h ep)
{
    static const char *const shm[] = { "sysv/", "posix/", "cma/", "xpmem/", "knem/", "self/" };
    char tls[512], *save = NULL;
    int lanes = 0;

    kucx_ep_transports(ep, tls, sizeof(tls));
    for (char *tl = strtok_r(tls, " ", &save); tl != NULL; tl = strtok_r(NULL, " ", &save)) {
        int known = 0;

        for (size_t i = 0; i < sizeof(shm) / sizeof(shm[0]); i++) {
            known |= strncmp(tl, shm[i], strlen(shm[i])) == 0;
        }
        if (!known) {
            return 0;
        }
        lanes++;
    }
    return lanes > 0;
}

int kucx_ep_native_rma(ucp_ep_h ep)
{
    char *text = NULL;
    size_t text_len = 0;
    FILE *f = open_memstream(&text, &text_len);
    char *save = NULL;
    int rma = 0;

    if (f == NULL) {
        return 1; /* cannot tell: puts, as UCX would choose */
    }
    ucp_ep_print_info(ep, f);
    fclose(f);
    /* A lane with an RMA role reads "... -> md[1]/cma/sysdev[255] rma_bw#0"
     * (or "rma"); over TCP UCX 1.13 lists only "am am_bw#0 keepalive
     * wireup" and emulates puts with active messages. */
    for (char *line = strtok_r(text, "\n", &save); line != NULL && !rma;
         line = strtok_r(NULL, "\n", &save)) {
        char *arrow = strstr(line, "lane[") != NULL ? strstr(line, "->") : NULL;

        /* With peer error handling on shared memory the lanes carry no RMA
         * role, yet puts go straight through them: "put[0]: 0..<short>..". */
        rma = (arrow != NULL && strstr(arrow, " rma") != NULL) || strstr(line, " put[") != NULL;
    }
    free(text);
    return rma;
}

int kucx_ep_close(kucx_ctx_t *u, int group, kucx_plane_t plane, ucp_ep_h ep, int force,
                  uint64_t timeout_ns)
{
    ucp_request_param_t p = { 0 };
    struct timespec t0, t;
    void *req;
    int done;

    /* FORCE (cancel what is outstanding) needs peer error handling: the
     * caller asks for it only on such endpoints. */
    if (force) {
        p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = UCP_EP_CLOSE_FLAG_FORCE;
    }
    req = ucp_ep_close_nbx(ep, &p);
    if (req == NULL || UCS_PTR_IS_ERR(req)) {
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        ucp_worker_progress(kucx_worker(u, group, plane)->worker);
        done = ucp_request_check_status(req) != UCS_INPROGRESS;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while (!done && (uint64_t)(t.tv_sec - t0.tv_sec) * 1000000000ull + (uint64_t)t.tv_nsec -
                              (uint64_t)t0.tv_nsec <
                          timeout_ns);
    /* Released either way: one still in progress is freed by UCX when the
     * worker's destruction completes it. */
    ucp_request_free(req);
    return done;
}

void kucx_ep_transports(ucp_ep_h ep, char *buf, size_t len)
{
    char *text = NULL;
    size_t text_len = 0, o = 0;
    FILE *f = open_memstream(&text, &text_len);
    char *save = NULL;

    buf[0] = '\0';
    if (f == NULL) {
        return;
    }
    ucp_ep_print_info(ep, f);
    fclose(f);
    /* Lines look like "#  lane[0]:  3:sysv/memory.0 md[2] -> ...": keep the
     * transport/device of each lane. */
    for (char *line = strtok_r(text, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        char *lane = strstr(line, "lane[");
        char tl[64];

        if (lane == NULL || sscanf(lane, "lane[%*d]: %*d:%63s", tl) != 1) {
            continue;
        }
        o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s%s", o ? " " : "", tl);
    }
    free(text);
}
