/*
 * kvx_ucx.h - kvx's wrapper of UCX: one checking macro, and the handful of
 * UCP operations the core uses (context/worker, endpoints, registered
 * memory, puts, flushes, active messages). Every function returns a
 * kvx_status_t; on error the wrapper logs the call and UCX's message.
 *
 * Threading: the worker is created UCS_THREAD_MODE_SERIALIZED; callers hold
 * the context lock around every call (the core does).
 */
#ifndef KVX_UCX_KVX_UCX_H
#define KVX_UCX_KVX_UCX_H

#include <kvx.h>
#include <ucp/api/ucp.h>

#include "util/log.h"

/*
 * Calls a UCX function returning ucs_status_t; on error logs the call and
 * UCX's message and makes the expression's status a kvx status.
 * Usage: status = KVX_UCS_CALL(ucp_init(...));
 */
#define KVX_UCS_CALL(call)                                                  \
    ({                                                                      \
        ucs_status_t kucs_rc_ = (call);                                     \
        kvx_status_t kucs_st_ = KVX_OK;                                     \
        if (kucs_rc_ != UCS_OK && kucs_rc_ != UCS_INPROGRESS) {             \
            kvx_error("%s failed: %s", #call, ucs_status_string(kucs_rc_)); \
            kucs_st_ = kucx_status(kucs_rc_);                               \
        }                                                                   \
        kucs_st_;                                                           \
    })

/* The kvx status for a UCX status. */
kvx_status_t kucx_status(ucs_status_t status);

/* "1.13.1" (run time library version). */
void kucx_version(char *buf, size_t len);

/* ---- context and worker ------------------------------------------------ */

/*
 * kvx runs two workers per peer instance: bulk puts on the data worker,
 * control messages on the control worker. Each worker has its own receive
 * queues (shared-memory FIFO, sockets, QPs), so a keepalive or a failure
 * notice never waits behind megabytes of puts (measured: 150-750 ms behind
 * 64 MiB of emulated puts on one shared-memory FIFO, longer than the peer
 * timeout).
 *
 * The pair is repeated for each instance this rank talks to (a "worker
 * group"): UCX's shared-memory FIFO is one queue that every sender claims
 * slots of, and a sender killed between claiming a slot and marking it
 * written blocks every later message of every sender on that worker (seen:
 * a SIGKILLed decode rank left the prefill's data worker waiting forever,
 * and rooms with the surviving decode instance stalled). With a group per
 * peer instance a dead instance wedges only its own group.
 */
typedef enum kucx_plane { KUCX_DATA = 0, KUCX_CTRL = 1, KUCX_PLANES } kucx_plane_t;

typedef struct kucx_ctx kucx_ctx_t;

typedef ucs_status_t (*kucx_am_cb_t)(void *arg, const void *header, size_t header_length,
                                     void *data, size_t length, const ucp_am_recv_param_t *param);

typedef struct kucx_worker {
    kucx_ctx_t *u;
    ucp_worker_h worker;
    int efd;  /* event fd, -1 when wakeup is unavailable */
    int used; /* an endpoint was created on it (kucx_progress()) */
} kucx_worker_t;

struct kucx_ctx {
    ucp_context_h context;
    int ngroups;
    kucx_worker_t *w;     /* ngroups x KUCX_PLANES, group-major (kucx_worker()) */
    void *pfds;           /* struct pollfd[ngroups x KUCX_PLANES] for kucx_wait() */
    kucx_am_cb_t data_cb; /* the data handler every data worker calls */
    void *data_arg;
    uint64_t memory_types; /* UCS_BIT(ucs_memory_type_t) the context can access */
    int abandoned;         /* kucx_workers_abandon(): the context is never cleaned up */
    unsigned passes;       /* kucx_progress() calls, for the unused workers' turn */
};

static inline kucx_worker_t *kucx_worker(kucx_ctx_t *u, int group, kucx_plane_t plane)
{
    return &u->w[group * KUCX_PLANES + plane];
}

/* Creates a UCP context (RMA + AM + wakeup) and ngroups (at least 1) pairs
 * of workers. */
kvx_status_t kucx_ctx_init(kucx_ctx_t *u, int ngroups, kvx_failure_t *why);
void kucx_ctx_cleanup(kucx_ctx_t *u);
/* The memory types (UCS_BIT(ucs_memory_type_t)) a UCP context of this
 * process's configuration can access, without keeping one (for tools). */
kvx_status_t kucx_probe_memory_types(uint64_t *types_p, kvx_failure_t *why);
/* "host, cuda, cuda-managed": the names of the types in a mask. */
void kucx_memory_types_name(uint64_t types, char *buf, size_t len);
/* Destroys the workers (completing, with an error, any operation they still
 * hold); the context stays for kucx_region_unmap(). kucx_ctx_cleanup() calls
 * it when needed. */
void kucx_workers_destroy(kucx_ctx_t *u);
/* Forgets the workers without destroying them, and makes kucx_ctx_cleanup()
 * leave the context: for endpoints UCX cannot tear down (src/core/setup/
 * bootstrap.c says which). Their memory stays allocated until the process
 * exits; nothing progresses them any more. The context stays usable for
 * kucx_region_unmap(). */
void kucx_workers_abandon(kucx_ctx_t *u);
/* Progresses every worker, control workers first. */
unsigned kucx_progress(kucx_ctx_t *u);
/* Do all workers have event fds (may the progress thread sleep)? */
int kucx_can_sleep(const kucx_ctx_t *u);
/* KVX_OK when every worker is armed (safe to sleep on the efds), KVX_ERR_BUSY
 * when events are pending. */
kvx_status_t kucx_arm(kucx_ctx_t *u);
/* Sleeps until a worker's event fd is readable or timeout_ms passed; poll()'s
 * result. Called without the lock: it reads only the fds. */
int kucx_wait(kucx_ctx_t *u, int timeout_ms);
/* Wakes a thread sleeping in kucx_wait(). */
void kucx_signal(kucx_ctx_t *u);
kvx_status_t kucx_worker_address(kucx_ctx_t *u, int group, kucx_plane_t plane, void **addr_p,
                                 size_t *len_p);
void kucx_worker_address_free(kucx_ctx_t *u, int group, kucx_plane_t plane, void *addr);

/* Control messages arrive on the control workers. */
kvx_status_t kucx_set_am_handler(kucx_ctx_t *u, unsigned id, kucx_am_cb_t cb, void *arg);
/* The same for messages that carry bulk data, on the data workers: each
 * arrives whole, eager (data valid during the callback) or rendezvous (the
 * callback gets a descriptor for kucx_am_recv_data() or
 * kucx_am_data_release(), which know the worker it came from). */
kvx_status_t kucx_set_am_data_handler(kucx_ctx_t *u, unsigned id, kucx_am_cb_t cb, void *arg);

/* ---- endpoints --------------------------------------------------------- */

/* An endpoint's transport error (peer error mode only). */
typedef void (*kucx_err_cb_t)(void *arg, ucp_ep_h ep, ucs_status_t status);

/* Creates an endpoint; with err_cb, in peer error mode (a transport error is
 * reported to err_cb instead of aborting the process). */
kvx_status_t kucx_ep_create(kucx_ctx_t *u, int group, kucx_plane_t plane, const void *address,
                            kucx_err_cb_t err_cb, void *err_arg, ucp_ep_h *ep_p,
                            kvx_failure_t *why);
/* Force-closes a peer-mode endpoint without waiting (callable from its error
 * callback); the request, if any, is released. */
void kucx_ep_cancel(ucp_ep_h ep);
/* Do all of the endpoint's lanes use shared memory (or self)? */
int kucx_ep_is_shm(ucp_ep_h ep);
/* Does a lane of the endpoint do RMA in hardware or the kernel (shared
 * memory, CMA, RDMA)? Without one UCX emulates every put with active
 * messages, whose target side then aborts the process when the initiator
 * dies (UCX 1.13 over TCP): kvx sends data messages instead (pack.c). */
int kucx_ep_native_rma(ucp_ep_h ep);
/* Closes an endpoint after flushing it, progressing the worker for at most
 * timeout_ns. Returns 0 when the close did not finish: destroying the worker
 * then completes it (and whatever the endpoint still held). */
int kucx_ep_close(kucx_ctx_t *u, int group, kucx_plane_t plane, ucp_ep_h ep, int force,
                  uint64_t timeout_ns);
/* The transports an endpoint uses, e.g. "sysv/memory cma/memory", into buf. */
void kucx_ep_transports(ucp_ep_h ep, char *buf, size_t len);

/* ---- registered memory --------------------------------------------------- */

typedef struct kucx_region {
    void *base;
    size_t length;
    ucp_mem_h memh;
    void *rkey_buf; /* packed rkey */
    size_t rkey_len;
} kucx_region_t;

kvx_status_t kucx_region_map(kucx_ctx_t *u, void *base, size_t length, ucs_memory_type_t type,
                             kucx_region_t *r, kvx_failure_t *why);
void kucx_region_unmap(kucx_ctx_t *u, kucx_region_t *r);
kvx_status_t kucx_rkey_unpack(ucp_ep_h ep, const void *packed, ucp_rkey_h *rkey_p);
void kucx_rkey_destroy(ucp_rkey_h rkey);

/* ---- transfers ------------------------------------------------------------ */

/* Every UCX request kvx posts carries this in its user area (ucp_init's
 * request_size), so completions know what they completed without kvx
 * allocating anything per operation. */
typedef struct kucx_req {
    size_t len;
} kucx_req_t;

/* Completion callback of puts, flushes and sends: status is UCS_OK or why it failed. */
typedef void (*kucx_done_cb_t)(void *request, ucs_status_t status, void *user_data);

/* Posts a put. KVX_OK: completed at once (cb not called). KVX_INPROGRESS: cb
 * will be called from progress. Error: not posted. *ucs_p gets UCX's status. */
kvx_status_t kucx_put(ucp_ep_h ep, int fast, const void *buf, size_t len, ucp_mem_h memh,
                      uint64_t raddr, ucp_rkey_h rkey, kucx_done_cb_t cb, void *user,
                      ucs_status_t *ucs_p);
/* Flushes every operation on ep to remote completion; same return rules. */
kvx_status_t kucx_flush(ucp_ep_h ep, kucx_done_cb_t cb, void *user, ucs_status_t *ucs_p);
/* Sends an eager active message (header + payload are copied or held until
 * cb); same return rules. */
kvx_status_t kucx_am_send(ucp_ep_h ep, unsigned id, const void *buf, size_t len, kucx_done_cb_t cb,
                          void *user, ucs_status_t *ucs_p);
/* Sends an active message carrying len bytes of registered memory (memh
 * may be NULL), eager or rendezvous as UCX chooses: buf must not change
 * and header must stay valid until cb (UCX 1.13 does not copy a header).
 * Same return rules; the request records len like a put's. */
kvx_status_t kucx_am_send_data(ucp_ep_h ep, unsigned id, const void *header, size_t header_len,
                               const void *buf, size_t len, ucp_mem_h memh, kucx_done_cb_t cb,
                               void *user, ucs_status_t *ucs_p);
/* The same, always by rendezvous: the receiver's handler gets a descriptor
 * and chooses where the data lands (kvx's staging for CUDA pages). */
kvx_status_t kucx_am_send_rndv(ucp_ep_h ep, unsigned id, const void *header, size_t header_len,
                               const void *buf, size_t len, ucp_mem_h memh, kucx_done_cb_t cb,
                               void *user, ucs_status_t *ucs_p);
/* Completion of kucx_am_recv_data(). */
typedef void (*kucx_recv_cb_t)(void *request, ucs_status_t status, size_t length, void *user);
/* Receives a rendezvous message's data into buf (memh may be NULL). Same
 * return rules; UCX owns desc from here on, whatever the outcome. */
kvx_status_t kucx_am_recv_data(kucx_ctx_t *u, void *desc, void *buf, size_t len, ucp_mem_h memh,
                               kucx_recv_cb_t cb, void *user, ucs_status_t *ucs_p);
/* Drops a rendezvous message kept by returning UCS_INPROGRESS from the
 * handler; the sender's request completes. */
void kucx_am_data_release(kucx_ctx_t *u, void *desc);
/* ucp_am_recv_data_nbx() with kvx's return rules (inside src/ucx). */
kvx_status_t kucx_recv_posted(ucp_worker_h worker, void *desc, void *buf, size_t len,
                              ucp_mem_h memh, kucx_recv_cb_t cb, void *user, ucs_status_t *ucs_p);
void kucx_request_free(void *request);
/* The length recorded with a put request. */
static inline size_t kucx_request_len(void *request)
{
    return ((kucx_req_t *)request)->len;
}

#endif
