/*
 * ucx_ep.c - endpoints to peer workers.
 *
 * Endpoints are created without UCX error handling: on shared memory UCX's
 * peer error mode drops the shared-memory transports (measured here: 1 GiB
 * of 2 MiB puts went from 4.6 GB/s over sysv/cma to 0.95 GB/s over tcp/lo).
 * kvx detects dead peers with its own keepalive instead (src/core/peer.c).
 */
#include "config.h"

#include "kvx_ucx.h"
#include "util/failure.h"

#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

kvx_status_t kucx_ep_create(kucx_ctx_t *u, kucx_plane_t plane, const void *address, ucp_ep_h *ep_p,
                            kvx_failure_t *why)
{
    ucp_ep_params_t p = { 0 };
    ucs_status_t rc;
    ucp_ep_h ep;

    p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    p.address = (const ucp_address_t *)address;
    p.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    rc = ucp_ep_create(u->worker[plane], &p, &ep);
    if (rc != UCS_OK) {
        kvx_error("ucp_ep_create failed: %s", ucs_status_string(rc));
        failure_set(why, kucx_status(rc), KVX_STAGE_BOOTSTRAP, ucs_status_string(rc),
                    "cannot create a UCX endpoint");
        return kucx_status(rc);
    }
    *ep_p = ep;
    return KVX_OK;
}

int kucx_ep_close(kucx_ctx_t *u, kucx_plane_t plane, ucp_ep_h ep, uint64_t timeout_ns)
{
    ucp_request_param_t p = { 0 };
    struct timespec t0, t;
    void *req;
    int done;

    /* Flush mode: FORCE needs peer error handling on both sides, which kvx's
     * endpoints do not use (ucx_ep.c's header says why). */
    req = ucp_ep_close_nbx(ep, &p);
    if (req == NULL || UCS_PTR_IS_ERR(req)) {
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        ucp_worker_progress(u->worker[plane]);
        done = ucp_request_check_status(req) != UCS_INPROGRESS;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while (!done && (uint64_t)(t.tv_sec - t0.tv_sec) * 1000000000ull + (uint64_t)t.tv_nsec -
                              (uint64_t)t0.tv_nsec <
                          timeout_ns);
    if (done) {
        ucp_request_free(req);
    }
    /* Not done: the worker's destruction completes it. */
    return done;
}

void kucx_ep_transports(ucp_ep_h ep, char *buf, size_t len)
{
    char *text = NULL;
    size_t text_len = 0, o = 0;
    FILE *f = open_memstream(&text, &text_len);

    buf[0] = '\0';
    if (f == NULL) {
        return;
    }
    ucp_ep_print_info(ep, f);
    fclose(f);
    /* Lines look like "#  lane[0]:  3:sysv/memory.0 md[2] -> ...": keep the
     * transport/device of each lane. */
    for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        char *lane = strstr(line, "lane[");
        char tl[64];

        if (lane == NULL || sscanf(lane, "lane[%*d]: %*d:%63s", tl) != 1) {
            continue;
        }
        o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s%s", o ? " " : "", tl);
    }
    free(text);
}
