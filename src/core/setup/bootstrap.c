/*
 * bootstrap.c - the collective part of context creation: every rank
 * publishes its place, KV layout, worker address and pool descriptors; every
 * prefill/decode instance pair is validated; endpoints are created between
 * the ranks that can ever exchange pages (and between TP siblings, for
 * liveness).
 */
#include "config.h"

#include "core/base/join.h"
#include "core/ctx/ctx.h"
#include "core/ctx/pool.h"
#include "core/link/peer.h"
#include "core/room/receiver.h"
#include "core/room/room.h"
#include "core/room/unpack.h"
#include "core/setup/bootstrap.h"
#include "core/xfer/pack.h"
#include "core/xfer/target.h"
#include "mpi/kvx_mpi.h"
#include "util/failure.h"
#include "util/log.h"
#include "util/time.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What every rank tells every other rank, fixed size; role is
 * KVX_ROLE_NONE for a rank this one has heard nothing of (a rank of another
 * joined instance). */
typedef struct rank_info {
    int32_t role, instance, tp_rank, tp_size;
    int32_t rank; /* its job rank */
    kvx_kv_layout_t kv;
    uint64_t num_pages, aux_slots, aux_item_size, aux_stride;
    uint64_t page_stride;
    uint64_t layout_hash;
    uint32_t blob_len;
    int32_t pid;
    char machine[96];         /* boot id and PID namespace: equal means kill(pid, 0) works */
    char netns[48];           /* network namespace: with machine equal, the same host */
    char door[JOIN_ADDR_MAX]; /* where it takes joiners (setup/joining.c), or "" */
} rank_info_t;

/* What makes two processes share a kernel and a PID namespace. */
static void bootstrap_machine(char *buf, size_t len)
{
    char boot[48] = "", ns[48] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    ssize_t n;

    if (f != NULL) {
        if (fgets(boot, sizeof(boot), f) == NULL) {
            boot[0] = '\0';
        }
        fclose(f);
    }
    boot[strcspn(boot, "\n")] = '\0';
    n = readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
    ns[n > 0 ? n : 0] = '\0';
    snprintf(buf, len, "%s/%s", boot, ns);
}

/* The network namespace, "net:[INODE]" (empty when unreadable). Processes of
 * one machine in different network namespaces talk over a network that can
 * fail silently, as hosts do (mpi_tests/netns/hosts.sh makes such hosts). */
static void bootstrap_netns(char *buf, size_t len)
{
    ssize_t n = readlink("/proc/self/ns/net", buf, len - 1);

    buf[n > 0 ? n : 0] = '\0';
}

kvx_status_t bootstrap_agree(MPI_Comm comm, kvx_status_t status, kvx_failure_t *why)
{
    int rank, mine, first;

    MPI_Comm_rank(comm, &rank);
    mine = status != KVX_OK ? rank : INT_MAX;
    if (KVX_MPI_CALL(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm)) != KVX_OK) {
        failure_set(why, KVX_ERR_MPI, KVX_STAGE_INIT, NULL, "cannot agree on the outcome");
        return KVX_ERR_MPI;
    }
    if (first == INT_MAX) {
        return KVX_OK;
    }
    /* The lowest failing rank's reason becomes everyone's. */
    if (KVX_MPI_CALL(MPI_Bcast(why, sizeof(*why), MPI_BYTE, first, comm)) != KVX_OK) {
        failure_set(why, KVX_ERR_MPI, KVX_STAGE_INIT, NULL, "cannot share the failure reason");
        return KVX_ERR_MPI;
    }
    return why->status;
}

static uint64_t bootstrap_hash(const kvx_ctx_t *ctx)
{
    const joblayout_t *j = &ctx->job;
    uint64_t h = 1469598103934665603ull;
    int v[5] = { j->count[KVX_ROLE_PREFILL], j->tp[KVX_ROLE_PREFILL], j->count[KVX_ROLE_DECODE],
                 j->tp[KVX_ROLE_DECODE], (int)j->first };

    for (size_t i = 0; i < sizeof(v); i++) {
        h = (h ^ ((const unsigned char *)v)[i]) * 1099511628211ull;
    }
    return h;
}

/* ---- blobs: worker address and pool descriptors ---------------------- */

typedef struct blob_writer {
    char *buf;
    size_t len, cap;
} blob_writer_t;

static int blob_put(blob_writer_t *w, const void *data, size_t len)
{
    if (w->len + len > w->cap) {
        size_t cap = (w->cap + len) * 2;
        char *buf = realloc(w->buf, cap);

        if (buf == NULL) {
            return -1;
        }
        w->buf = buf;
        w->cap = cap;
    }
    if (len > 0) { /* a context without aux slots has no aux key: data is NULL */
        memcpy(w->buf + w->len, data, len);
    }
    w->len += len;
    return 0;
}

static int blob_put_bytes(blob_writer_t *w, const void *data, uint32_t len)
{
    return blob_put(w, &len, sizeof(len)) || blob_put(w, data, len);
}

static kvx_status_t bootstrap_blob(kvx_ctx_t *ctx, blob_writer_t *w, kvx_failure_t *why)
{
    pool_t *pool = &ctx->pool;
    uint32_t n = (uint32_t)pool->nregions, nb = (uint32_t)pool->nbufs;
    int err = 0;

    uint32_t ngroups = (uint32_t)ctx->ucx.ngroups;

    /* Each worker group's addresses: a peer connects to the group that
     * serves its instance (ctx_group_of()). */
    err |= blob_put(w, &ngroups, sizeof(ngroups));
    for (int g = 0; g < ctx->ucx.ngroups; g++) {
        for (int plane = 0; plane < KUCX_PLANES; plane++) {
            void *addr;
            size_t addr_len;
            kvx_status_t status =
                kucx_worker_address(&ctx->ucx, g, (kucx_plane_t)plane, &addr, &addr_len);

            if (status != KVX_OK) {
                failure_set(why, status, KVX_STAGE_BOOTSTRAP, NULL,
                            "cannot get a UCX worker address");
                return status;
            }
            err |= blob_put_bytes(w, addr, (uint32_t)addr_len);
            kucx_worker_address_free(&ctx->ucx, g, (kucx_plane_t)plane, addr);
        }
    }
    err |= blob_put(w, &n, sizeof(n));
    for (int r = 0; r < pool->nregions; r++) {
        err |= blob_put_bytes(w, pool->regions[r].rkey_buf, (uint32_t)pool->regions[r].rkey_len);
    }
    err |= blob_put(w, &nb, sizeof(nb));
    for (int b = 0; b < pool->nbufs; b++) {
        uint64_t a = (uint64_t)(uintptr_t)pool->buf[b];
        uint32_t region = (uint32_t)pool->buf_region[b];

        err |= blob_put(w, &a, sizeof(a)) | blob_put(w, &region, sizeof(region));
    }
    {
        uint64_t aux = (uint64_t)(uintptr_t)pool->aux;

        err |= blob_put(w, &aux, sizeof(aux));
        err |= blob_put_bytes(w, pool->aux_region.rkey_buf, (uint32_t)pool->aux_region.rkey_len);
    }
    if (err) {
        failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_BOOTSTRAP, NULL, "no memory for the blob");
        return KVX_ERR_NO_MEMORY;
    }
    return KVX_OK;
}

typedef struct blob_reader {
    const char *p, *end;
} blob_reader_t;

static const void *blob_get(blob_reader_t *r, size_t len)
{
    const void *at = r->p;

    if ((size_t)(r->end - r->p) < len) {
        return NULL;
    }
    r->p += len;
    return at;
}

static const void *blob_get_bytes(blob_reader_t *r, uint32_t *len_p)
{
    const uint32_t *len = blob_get(r, sizeof(uint32_t));
    uint32_t n;

    if (len == NULL) {
        return NULL;
    }
    memcpy(&n, len, sizeof(n));
    *len_p = n;
    return blob_get(r, n);
}

/* ---- validation -------------------------------------------------------- */

/* Every rank of an instance must hold the same layout; the first rank that
 * differs from its instance's TP rank 0 fails creation everywhere. */
static kvx_status_t bootstrap_check_instances(kvx_ctx_t *ctx, const rank_info_t *info,
                                              kvx_failure_t *why)
{
    for (int r = 0; r < ctx->rank_cap; r++) {
        const rank_info_t *me = &info[r];
        int lead;
        char a[64], b[64];

        if (me->role == KVX_ROLE_NONE) {
            continue;
        }
        lead = joblayout_rank(&ctx->job, (kvx_role_t)me->role, me->instance, 0);
        /* A joined instance's layout names only itself: its place was
         * checked by the job's door. */
        if (ctx->join == NULL && me->layout_hash != info[0].layout_hash) {
            failure_set(why, KVX_ERR_LAYOUT, KVX_STAGE_INIT, NULL,
                        "rank %d was given a different job layout than rank 0", r);
            return KVX_ERR_LAYOUT;
        }
        if (info[lead].role == KVX_ROLE_NONE || !kvl_equal(&me->kv, &info[lead].kv) ||
            me->num_pages != info[lead].num_pages ||
            me->aux_item_size != info[lead].aux_item_size ||
            me->page_stride != info[lead].page_stride) {
            failure_set(why, KVX_ERR_INVALID_PARAM, KVX_STAGE_INIT, NULL,
                        "%s and %s of the same instance were given different KV layouts, page "
                        "counts, page strides or aux sizes",
                        joblayout_name(&ctx->job, r, a, sizeof(a)),
                        joblayout_name(&ctx->job, lead, b, sizeof(b)));
            return KVX_ERR_INVALID_PARAM;
        }
    }
    return KVX_OK;
}

static kvx_status_t bootstrap_geometry(kvx_ctx_t *ctx, const rank_info_t *info, kvx_failure_t *why)
{
    for (int role = KVX_ROLE_PREFILL; role <= KVX_ROLE_DECODE; role++) {
        int n = ctx->job.count[role];

        ctx->kvls[role] = calloc((size_t)ctx->inst_cap[role], sizeof(kvl_t));
        if (ctx->kvls[role] == NULL) {
            failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_INIT, NULL, "no memory");
            return KVX_ERR_NO_MEMORY;
        }
        for (int i = 0; i < n; i++) {
            const rank_info_t *lead = &info[joblayout_rank(&ctx->job, (kvx_role_t)role, i, 0)];
            char who[32];

            if (lead->role == KVX_ROLE_NONE) {
                continue; /* another joined instance: this rank never talks to it */
            }
            snprintf(who, sizeof(who), "%s[%d]", kvx_role_name((kvx_role_t)role), i);
            /* Each instance checked its own geometry before; this cannot fail
             * unless ranks disagree, which was checked too. */
            if (kvl_init(&ctx->kvls[role][i], &lead->kv, ctx->job.tp[role], who, why) != KVX_OK) {
                return why->status;
            }
            ctx->kvls[role][i].page_stride = (size_t)lead->page_stride;
        }
    }
    return KVX_OK;
}

/* Marks each instance of the other role usable or not for this rank. */
static kvx_status_t bootstrap_pairs(kvx_ctx_t *ctx, const rank_info_t *info, kvx_failure_t *why)
{
    kvx_role_t other = ctx_other_role(ctx);
    int n = ctx->job.count[other];

    ctx->pair_fail = calloc((size_t)ctx->inst_cap[other], sizeof(kvx_failure_t));
    if (ctx->pair_fail == NULL) {
        failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_INIT, NULL, "no memory");
        return KVX_ERR_NO_MEMORY;
    }
    for (int i = 0; i < n; i++) {
        int pi = ctx->role == KVX_ROLE_PREFILL ? ctx->instance : i;
        int di = ctx->role == KVX_ROLE_PREFILL ? i : ctx->instance;
        const rank_info_t *p = &info[joblayout_rank(&ctx->job, KVX_ROLE_PREFILL, pi, 0)];
        const rank_info_t *d = &info[joblayout_rank(&ctx->job, KVX_ROLE_DECODE, di, 0)];
        kvx_failure_t *f = &ctx->pair_fail[i];

        if (kvl_check_pair(&ctx->kvls[KVX_ROLE_PREFILL][pi], pi, p->aux_item_size,
                           &ctx->kvls[KVX_ROLE_DECODE][di], di, d->aux_item_size, f) != KVX_OK) {
            char line[512];

            kvx_failure_format(f, line, sizeof(line));
            kvx_warn("rooms between prefill[%d] and decode[%d] will fail: %s", pi, di, line);
        } else {
            f->status = KVX_OK;
        }
    }
    return KVX_OK;
}

/* ---- peers --------------------------------------------------------------- */

/* Does this rank talk to world rank r (other role: shares a head; same
 * instance: a TP sibling)? */
static int bootstrap_talks(kvx_ctx_t *ctx, int r, plan_pair_t *pair)
{
    kvx_role_t role;
    int inst, tp;

    memset(pair, 0, sizeof(*pair));
    joblayout_locate(&ctx->job, r, &role, &inst, &tp);
    if (r == ctx->rank) {
        return 0;
    }
    if (role == ctx->role) {
        return inst == ctx->instance;
    }
    if (ctx->pair_fail[inst].status != KVX_OK) {
        return 0;
    }
    if (ctx->role == KVX_ROLE_PREFILL) {
        plan_pair(&ctx->my, ctx->tp_rank, &ctx->kvls[KVX_ROLE_DECODE][inst], tp, pair);
    } else {
        plan_pair(&ctx->kvls[KVX_ROLE_PREFILL][inst], tp, &ctx->my, ctx->tp_rank, pair);
    }
    return pair->talks;
}

static kvx_status_t bootstrap_ep_pair(kvx_ctx_t *ctx, peer_t *peer, const void *addr,
                                      const void *caddr, int peer_mode, kvx_failure_t *why)
{
    kucx_err_cb_t cb = peer_mode ? peer_ep_error : NULL;
    kvx_status_t status =
        kucx_ep_create(&ctx->ucx, peer->group, KUCX_DATA, addr, cb, peer, &peer->ep, why);

    if (status == KVX_OK) {
        status =
            kucx_ep_create(&ctx->ucx, peer->group, KUCX_CTRL, caddr, cb, peer, &peer->cep, why);
    }
    peer->peer_mode = peer_mode;
    return status;
}

/* The endpoints to a peer, in UCX peer error mode unless every lane is
 * shared memory (src/ucx/ucx_ep.c says why), or as KVX_EP_ERR_MODE says. */
static kvx_status_t bootstrap_endpoints(kvx_ctx_t *ctx, peer_t *peer, const void *addr,
                                        const void *caddr, kvx_failure_t *why)
{
    int mode = ctx->cfg.ep_err_mode; /* 0 auto, 1 peer, 2 none */
    kvx_status_t status = bootstrap_ep_pair(ctx, peer, addr, caddr,
                                            mode == 1 || (mode == 0 && !peer->same_machine), why);

    if (status != KVX_OK || mode != 0 || peer->peer_mode ||
        (kucx_ep_is_shm(peer->ep) && kucx_ep_is_shm(peer->cep))) {
        return status;
    }
    /* A local peer reached over a network transport (UCX_TLS without shared
     * memory, say): fresh endpoints close at once. */
    kucx_ep_close(&ctx->ucx, peer->group, KUCX_DATA, peer->ep, 0, KVX_NS_PER_S);
    kucx_ep_close(&ctx->ucx, peer->group, KUCX_CTRL, peer->cep, 0, KVX_NS_PER_S);
    return bootstrap_ep_pair(ctx, peer, addr, caddr, 1, why);
}

/* Reads a peer's blob: its endpoint and, if this rank writes to it, its
 * pool's addresses and keys. */
static kvx_status_t bootstrap_peer(kvx_ctx_t *ctx, peer_t *peer, const rank_info_t *info,
                                   const char *blob, size_t blob_len, int writes,
                                   kvx_failure_t *why)
{
    blob_reader_t rd = { blob, blob + blob_len };
    uint32_t alen, calen, n, nb, klen, ngroups, mine;
    const void *addr = NULL, *caddr = NULL;
    kvx_status_t status;
    const void *p;

    if ((p = blob_get(&rd, sizeof(ngroups))) == NULL) {
        goto err_blob;
    }
    memcpy(&ngroups, p, sizeof(ngroups));
    if (ngroups < 1 || ngroups > 1u << 16) {
        goto err_blob;
    }
    /* The peer's group that serves this rank's instance. */
    mine = (uint32_t)ctx_group_of((int)ngroups, peer->role, ctx->role, ctx->instance);
    for (uint32_t g = 0; g < ngroups; g++) {
        const void *a = blob_get_bytes(&rd, &alen), *c = blob_get_bytes(&rd, &calen);

        if (a == NULL || c == NULL) {
            goto err_blob;
        }
        if (g == mine) {
            addr = a;
            caddr = c;
        }
    }
    peer->group = ctx_group_of(ctx->ucx.ngroups, ctx->role, peer->role, peer->instance);
    status = bootstrap_endpoints(ctx, peer, addr, caddr, why);
    if (status != KVX_OK) {
        snprintf(why->text, sizeof(why->text), "cannot connect to %s", peer->name);
        return status;
    }
    peer->num_pages = info->num_pages;
    peer->aux_slots = info->aux_slots;
    peer->aux_stride = info->aux_stride;
    if ((p = blob_get(&rd, sizeof(n))) == NULL) {
        goto err_blob;
    }
    memcpy(&n, p, sizeof(n));
    peer->nregions = (int)n;
    peer->rkeys = calloc(n, sizeof(*peer->rkeys));
    if (peer->rkeys == NULL && n > 0) {
        goto err_nomem;
    }
    for (uint32_t i = 0; i < n; i++) {
        const void *key = blob_get_bytes(&rd, &klen);

        if (key == NULL) {
            goto err_blob;
        }
        /* A pool UCX cannot access (staged CUDA memory) has no key. */
        if (writes && klen > 0 && kucx_rkey_unpack(peer->ep, key, &peer->rkeys[i]) != KVX_OK) {
            goto err_rkey;
        }
    }
    if ((p = blob_get(&rd, sizeof(nb))) == NULL) {
        goto err_blob;
    }
    memcpy(&nb, p, sizeof(nb));
    peer->buf_addr = calloc(nb, sizeof(*peer->buf_addr));
    peer->buf_rkey = calloc(nb, sizeof(*peer->buf_rkey));
    if ((peer->buf_addr == NULL || peer->buf_rkey == NULL) && nb > 0) {
        goto err_nomem;
    }
    for (uint32_t b = 0; b < nb; b++) {
        const char *e = blob_get(&rd, sizeof(uint64_t) + sizeof(uint32_t));
        uint32_t region;

        if (e == NULL) {
            goto err_blob;
        }
        memcpy(&peer->buf_addr[b], e, sizeof(uint64_t));
        memcpy(&region, e + sizeof(uint64_t), sizeof(region));
        if (region >= n) {
            goto err_blob;
        }
        peer->buf_rkey[b] = peer->rkeys[region];
    }
    if ((p = blob_get(&rd, sizeof(uint64_t))) == NULL ||
        (memcpy(&peer->aux_addr, p, sizeof(uint64_t)), (p = blob_get_bytes(&rd, &klen)) == NULL)) {
        goto err_blob;
    }
    if (writes && klen > 0 && kucx_rkey_unpack(peer->ep, p, &peer->aux_rkey) != KVX_OK) {
        goto err_rkey;
    }
    return KVX_OK;

err_blob:
    failure_set(why, KVX_ERR_PROTOCOL, KVX_STAGE_BOOTSTRAP, NULL,
                "the bootstrap descriptor of %s is malformed", peer->name);
    return KVX_ERR_PROTOCOL;
err_nomem:
    failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_BOOTSTRAP, NULL, "no memory for %s", peer->name);
    return KVX_ERR_NO_MEMORY;
err_rkey:
    failure_set(why, KVX_ERR_UCX, KVX_STAGE_BOOTSTRAP, NULL, "cannot unpack the remote keys of %s",
                peer->name);
    return KVX_ERR_UCX;
}

/* Does anything still refer to a retired peer: a room's target or source,
 * a message in the outbox, an operation in flight? */
static int bootstrap_referred(kvx_ctx_t *ctx, const peer_t *p)
{
    size_t pos = 0;
    room_t *room;

    if (p->inflight_ops > 0) {
        return 1;
    }
    for (const outmsg_t *m = ctx->out_head; m != NULL; m = m->next) {
        if (m->peer == p) {
            return 1;
        }
    }
    while ((room = room_next(ctx, &pos)) != NULL) {
        for (unsigned t = 0; t < room->ntargets; t++) {
            if (room->targets[t].peer == p) {
                return 1;
            }
        }
        for (unsigned s = 0; s < room->nsources; s++) {
            if (room->sources[s].peer == p) {
                return 1;
            }
        }
    }
    return 0;
}

/* A slot for a new peer: the next one, or one a retired incarnation left
 * that nothing refers to any more; NULL when there is none. */
static peer_t *bootstrap_slot(kvx_ctx_t *ctx)
{
    if (ctx->npeers < ctx->peer_cap) {
        return &ctx->peers[ctx->npeers++];
    }
    for (int i = 0; i < ctx->npeers; i++) {
        peer_t *p = &ctx->peers[i];

        if (p->retired && !bootstrap_referred(ctx, p)) {
            free(p->rkeys);
            free(p->buf_addr);
            free(p->buf_rkey);
            free(p->agreed);
            return p;
        }
    }
    return NULL;
}

/* Adds world or job rank r, which this rank talks to, as a peer. */
static kvx_status_t bootstrap_add_peer(kvx_ctx_t *ctx, int r, const rank_info_t *info,
                                       const rank_info_t *self, const char *blob,
                                       const plan_pair_t *pair, kvx_failure_t *why)
{
    peer_t *peer = bootstrap_slot(ctx);
    kvx_status_t status;

    if (peer == NULL) {
        failure_set(why, KVX_ERR_BUSY, KVX_STAGE_BOOTSTRAP, NULL,
                    "no free peer slot for rank %d: rooms of replaced incarnations are still "
                    "open here (close them)",
                    r);
        return KVX_ERR_BUSY;
    }
    memset(peer, 0, sizeof(*peer));
    peer->ctx = ctx;
    peer->rank = r;
    joblayout_locate(&ctx->job, r, &peer->role, &peer->instance, &peer->tp_rank);
    joblayout_name(&ctx->job, r, peer->name, sizeof(peer->name));
    peer->kvl = &ctx->kvls[peer->role][peer->instance];
    peer->last_heard = kvx_now_ns();
    peer->pid = info->pid;
    peer->same_machine = info->machine[0] != '/' && strcmp(info->machine, self->machine) == 0;
    peer->same_host =
        peer->same_machine && info->netns[0] != '\0' && strcmp(info->netns, self->netns) == 0;
    ctx->peer_by_rank[r] = peer;
    status = bootstrap_peer(ctx, peer, info, blob, info->blob_len,
                            ctx->role == KVX_ROLE_PREFILL && pair->writes, why);
    if (status != KVX_OK) {
        return status;
    }
    /* Without native RMA UCX emulates puts with active messages, and
     * the emulation's target aborts the process when the initiator
     * dies: pages then travel as kvx's own data messages (pack.c). */
    if (peer->role != ctx->role) {
        peer->msg_writes =
            ctx->cfg.writes == 2 || (ctx->cfg.writes == 0 && !kucx_ep_native_rma(peer->ep));
        /* All lanes on this host: puts ask for fast completion, which
         * UCX 1.13's v2 protocols copy straight into memory UCX
         * allocated (KVX_POOL_ALLOC=ucx) instead of emulating puts above
         * 32 KiB with active messages. */
        peer->put_in_host = kucx_ep_is_shm(peer->ep);
    }
    return KVX_OK;
}

/* The peers among the ranks this one knows; blob[r] is rank r's. */
static kvx_status_t bootstrap_peers(kvx_ctx_t *ctx, const rank_info_t *info,
                                    const char *const *blob, const rank_info_t *self,
                                    kvx_failure_t *why)
{
    plan_pair_t pair;

    /* As many again as the joined places hold, for their replacements while
     * rooms of the replaced ones are still open. */
    size_t cap = ctx->rank_cap > 0 ? (size_t)ctx->rank_cap : 1;

    ctx->peer_cap = ctx->rank_cap + (ctx->rank_cap - ctx->size > 0 ? ctx->rank_cap - ctx->size : 0);
    ctx->peer_by_rank = calloc(cap, sizeof(peer_t *));
    ctx->peers = calloc((size_t)(ctx->peer_cap > 0 ? ctx->peer_cap : 1), sizeof(peer_t));
    if (ctx->peer_by_rank == NULL || ctx->peers == NULL) {
        failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_BOOTSTRAP, NULL, "no memory for peers");
        return KVX_ERR_NO_MEMORY;
    }
    for (int r = 0; r < ctx->rank_cap; r++) {
        kvx_status_t status;

        if (info[r].role == KVX_ROLE_NONE || !bootstrap_talks(ctx, r, &pair)) {
            continue;
        }
        status = bootstrap_add_peer(ctx, r, &info[r], self, blob[r], &pair, why);
        if (status != KVX_OK) {
            return status;
        }
    }
    return KVX_OK;
}

static void bootstrap_log_transports(kvx_ctx_t *ctx)
{
    if (!kvx_log_enabled(KVX_LOG_INFO)) {
        return;
    }
    for (int i = 0; i < ctx->npeers; i++) {
        char tls[256], ctls[256];

        kucx_ep_transports(ctx->peers[i].ep, tls, sizeof(tls));
        kucx_ep_transports(ctx->peers[i].cep, ctls, sizeof(ctls));
        kvx_info("peer %s: data over %s (pages as %s); control over %s; UCX error handling %s",
                 ctx->peers[i].name, tls[0] ? tls : "(wireup pending)",
                 ctx->peers[i].role == ctx->role ? "-"
                 : ctx->peers[i].msg_writes      ? "data messages"
                                                 : "puts",
                 ctls[0] ? ctls : "(wireup pending)", ctx->peers[i].peer_mode ? "peer" : "none");
    }
}

/* This rank's own rank_info. */
static void bootstrap_mine(kvx_ctx_t *ctx, rank_info_t *mine, size_t blob_len)
{
    memset(mine, 0, sizeof(*mine));
    mine->role = ctx->role;
    mine->instance = ctx->instance;
    mine->tp_rank = ctx->tp_rank;
    mine->tp_size = ctx->tp_size;
    mine->rank = ctx->rank;
    mine->kv = ctx->kv;
    mine->num_pages = ctx->num_pages;
    mine->page_stride = ctx->my.page_stride;
    mine->aux_slots = ctx->pool.aux_slots;
    mine->aux_item_size = ctx->aux_item_size;
    mine->aux_stride = ctx->pool.aux_stride;
    mine->layout_hash = bootstrap_hash(ctx);
    mine->pid = (int32_t)getpid();
    bootstrap_machine(mine->machine, sizeof(mine->machine));
    bootstrap_netns(mine->netns, sizeof(mine->netns));
    snprintf(mine->door, sizeof(mine->door), "%s", ctx->door_addr);
    mine->blob_len = (uint32_t)blob_len;
}

/* The doors of the ranks that take joiners, for the welcome of world rank
 * 0's (setup/joining.c). */
static kvx_status_t bootstrap_doors(kvx_ctx_t *ctx, const rank_info_t *info)
{
    int n = 0;

    for (int r = 0; r < ctx->rank_cap; r++) {
        n += info[r].role != KVX_ROLE_NONE && info[r].door[0] != '\0';
    }
    if (n == 0) {
        return KVX_OK;
    }
    ctx->doors = calloc((size_t)n, sizeof(*ctx->doors));
    if (ctx->doors == NULL) {
        return KVX_ERR_NO_MEMORY;
    }
    for (int r = 0; r < ctx->rank_cap; r++) {
        if (info[r].role != KVX_ROLE_NONE && info[r].door[0] != '\0') {
            ctx->doors[ctx->ndoors].rank = r;
            memcpy(ctx->doors[ctx->ndoors].addr, info[r].door, JOIN_ADDR_MAX);
            ctx->doors[ctx->ndoors].addr[JOIN_ADDR_MAX - 1] = '\0';
            ctx->ndoors++;
        }
    }
    return KVX_OK;
}

/* A descriptor from a door (a rank of the running job, to a joiner): its
 * rank_info and blob, checked for what this rank relies on. */
static kvx_status_t bootstrap_read_desc(kvx_ctx_t *ctx, const void *desc, size_t len,
                                        rank_info_t *ri, kvx_failure_t *why)
{
    if (len < sizeof(*ri)) {
        failure_set(why, KVX_ERR_PROTOCOL, KVX_STAGE_BOOTSTRAP, NULL,
                    "a joined rank's descriptor of %zu bytes is too short", len);
        return KVX_ERR_PROTOCOL;
    }
    memcpy(ri, desc, sizeof(*ri));
    ri->machine[sizeof(ri->machine) - 1] = '\0';
    ri->netns[sizeof(ri->netns) - 1] = '\0';
    ri->door[sizeof(ri->door) - 1] = '\0';
    if (ri->blob_len != len - sizeof(*ri) || ri->rank < 0 || ri->rank >= ctx->rank_cap ||
        (ri->role != KVX_ROLE_PREFILL && ri->role != KVX_ROLE_DECODE) || ri->instance < 0 ||
        ri->instance >= ctx->inst_cap[ri->role] || ri->tp_rank < 0 ||
        ri->tp_size != ctx->job.tp[ri->role] || ri->tp_rank >= ri->tp_size ||
        joblayout_rank(&ctx->job, (kvx_role_t)ri->role, ri->instance, ri->tp_rank) != ri->rank) {
        failure_set(why, KVX_ERR_PROTOCOL, KVX_STAGE_BOOTSTRAP, NULL,
                    "a joined rank's descriptor is malformed (rank %d, %s[%d].tp%d of TP %d, "
                    "%u bytes of blob in %zu)",
                    ri->rank, kvx_role_name((kvx_role_t)ri->role), ri->instance, ri->tp_rank,
                    ri->tp_size, ri->blob_len, len);
        return KVX_ERR_PROTOCOL;
    }
    return KVX_OK;
}

static kvx_status_t bootstrap_exchange(kvx_ctx_t *ctx, rank_info_t *info, void *const *extra,
                                       const size_t *extra_len, int nextra, kvx_failure_t *why)
{
    blob_writer_t w = { NULL, 0, 0 };
    rank_info_t mine, *winfo = calloc((size_t)ctx->size, sizeof(rank_info_t));
    int *lens = NULL, *displs = NULL;
    char *blobs = NULL;
    const char **blob = NULL;
    long total = 0;
    kvx_status_t status = bootstrap_blob(ctx, &w, why);

    bootstrap_mine(ctx, &mine, w.len);
    if (status == KVX_OK && winfo == NULL) {
        failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_BOOTSTRAP, NULL, "no memory");
        status = KVX_ERR_NO_MEMORY;
    }
    status = bootstrap_agree(ctx->world, status, why);
    if (status != KVX_OK) {
        goto out;
    }
    status = KVX_MPI_CALL(
        MPI_Allgather(&mine, sizeof(mine), MPI_BYTE, winfo, sizeof(mine), MPI_BYTE, ctx->world));
    if (status != KVX_OK) {
        failure_set(why, status, KVX_STAGE_BOOTSTRAP, NULL, "cannot exchange rank descriptors");
        goto out;
    }
    lens = calloc((size_t)ctx->size, sizeof(int));
    displs = calloc((size_t)ctx->size, sizeof(int));
    for (int r = 0; lens != NULL && displs != NULL && r < ctx->size; r++) {
        lens[r] = (int)winfo[r].blob_len;
        displs[r] = (int)total;
        total += lens[r];
    }
    blobs = malloc(total > 0 ? (size_t)total : 1);
    status = bootstrap_agree(ctx->world,
                             lens == NULL || displs == NULL || blobs == NULL || total > INT_MAX
                                 ? (failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_BOOTSTRAP, NULL,
                                                "no memory for %ld bytes of descriptors", total),
                                    KVX_ERR_NO_MEMORY)
                                 : KVX_OK,
                             why);
    if (status != KVX_OK) {
        goto out;
    }
    status = KVX_MPI_CALL(
        MPI_Allgatherv(w.buf, (int)w.len, MPI_BYTE, blobs, lens, displs, MPI_BYTE, ctx->world));
    if (status != KVX_OK) {
        failure_set(why, status, KVX_STAGE_BOOTSTRAP, NULL, "cannot exchange pool descriptors");
        goto out;
    }
    blob = calloc((size_t)ctx->rank_cap, sizeof(*blob));
    if (blob == NULL) {
        failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_BOOTSTRAP, NULL, "no memory");
        status = KVX_ERR_NO_MEMORY;
        goto out;
    }
    /* In a job of one world its ranks are the job's; a joined instance's
     * world holds only its own, and its peers' come from the doors. */
    for (int r = 0; r < ctx->size; r++) {
        info[winfo[r].rank] = winfo[r];
        blob[winfo[r].rank] = blobs + displs[r];
    }
    for (int i = 0; i < nextra && status == KVX_OK; i++) {
        rank_info_t ri;

        status = bootstrap_read_desc(ctx, extra[i], extra_len[i], &ri, why);
        if (status == KVX_OK) {
            info[ri.rank] = ri;
            blob[ri.rank] = (const char *)extra[i] + sizeof(ri);
        }
    }
    if (status == KVX_OK) {
        status = bootstrap_check_instances(ctx, info, why);
    }
    if (status == KVX_OK) {
        status = bootstrap_geometry(ctx, info, why);
    }
    if (status == KVX_OK) {
        status = bootstrap_pairs(ctx, info, why);
    }
    if (status == KVX_OK) {
        status = bootstrap_doors(ctx, info);
    }
    if (status == KVX_OK) {
        status = bootstrap_peers(ctx, info, blob, &info[ctx->rank], why);
    }
    if (status == KVX_OK) {
        status = kucx_set_am_data_handler(&ctx->ucx, MSG_DATA_ID, unpack_am_cb, ctx);
        if (status != KVX_OK) {
            failure_set(why, status, KVX_STAGE_BOOTSTRAP, NULL,
                        "cannot set the data message handler");
        }
    }
    if (status == KVX_OK) {
        status = pack_setup(ctx, why);
    }
out:
    free(w.buf);
    free(winfo);
    free(blob);
    free(lens);
    free(displs);
    free(blobs);
    return status;
}

kvx_status_t bootstrap_run(kvx_ctx_t *ctx, kvx_failure_t *why)
{
    return bootstrap_run_joined(ctx, NULL, NULL, 0, why);
}

kvx_status_t bootstrap_run_joined(kvx_ctx_t *ctx, void *const *descs, const size_t *lens, int n,
                                  kvx_failure_t *why)
{
    rank_info_t *info = calloc((size_t)ctx->rank_cap, sizeof(rank_info_t));
    kvx_status_t status;
    size_t max_pages = 0;

    if (info == NULL) {
        failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_BOOTSTRAP, NULL, "no memory");
        return bootstrap_agree(ctx->world, KVX_ERR_NO_MEMORY, why);
    }
    status = bootstrap_exchange(ctx, info, descs, lens, n, why);
    for (int r = 0; r < ctx->rank_cap; r++) {
        max_pages = info[r].num_pages > max_pages ? info[r].num_pages : max_pages;
    }
    ctx->limits.world_size = ctx->rank_cap;
    ctx->limits.max_pages = max_pages;
    free(info);
    if (status == KVX_OK) {
        bootstrap_log_transports(ctx);
    }
    return status;
}

/* A peer lost by silence across the network (a cut link, a dead host):
 * UCX still holds its endpoints as healthy, with puts it will never see
 * acknowledged. UCX 1.13 cannot tear such a TCP endpoint down: both a
 * forced close (ucp_ep_close_nbx -> uct_tcp_ep_flush) and destroying the
 * worker (-> uct_tcp_ep_destroy) first complete the requests on the UCP side
 * and then invoke their completions again from the TCP endpoint's queue of
 * unacknowledged puts, and abort the process ("uct_iface.h:884 Assertion
 * `comp->count > 0' failed ... status=-16"). A peer on this host is not one:
 * its endpoints fail when it dies (UCX reports the reset). */
static int bootstrap_unreachable(const peer_t *peer)
{
    return peer->lost && peer->peer_mode && !peer->ep_failed && !peer->same_host;
}

int bootstrap_close_endpoints(kvx_ctx_t *ctx)
{
    char names[512];
    size_t o = 0;
    int left = 0;

    names[0] = '\0';
    for (int i = 0; i < ctx->npeers; i++) {
        peer_t *peer = &ctx->peers[i];
        int data_closed = 1;
        int unreachable = bootstrap_unreachable(peer);

        /* A lost peer's endpoint may hold puts that can never complete:
         * in peer error mode a forced close cancels them; otherwise
         * destroying the worker completes them (bootstrap_cleanup()). An
         * unreachable peer's endpoints are left open, with their keys. */
        int stuck = (peer->lost && !peer->peer_mode) || unreachable;

        /* Data messages to a peer that died on shared memory never complete
         * (a rendezvous waits for the dead receiver), and UCX 1.13 crashes
         * destroying a worker that still holds such a send: it describes
         * the leaked request with ucp_proto_config_info_str(), which reads
         * freed protocol state (SEGV under ASan and TSan in demo_kill.mpi,
         * rank 0). Receives of data messages from a dead peer (ctx->landing)
         * never complete either, and purging them crashes it too (SEGV in
         * uct_md_mem_dereg, the decode of kill_prefill_msgs.mpi). Such
         * workers are left like an unreachable peer's; no others: left
         * workers keep UCX's async thread running to exit
         * (tests/supp/tsan.supp, docs/user/failures.md). */
        if (unreachable || (stuck && (peer->inflight_ops > 0 || ctx->landing > 0))) {
            left++;
            if (o < sizeof(names)) {
                o += (size_t)snprintf(names + o, sizeof(names) - o, "%s%s", o ? ", " : "",
                                      peer->name);
            }
        }

        /* Keys go before their endpoint, once nothing uses them; those of
         * an endpoint that failed too (closed when UCX reported it), or
         * UCX complains of rkeys not returned when the worker goes. */
        if (peer->inflight_ops == 0 && !stuck) {
            for (int r = 0; r < peer->nregions && peer->rkeys != NULL; r++) {
                kucx_rkey_destroy(peer->rkeys[r]);
                peer->rkeys[r] = NULL;
            }
            kucx_rkey_destroy(peer->aux_rkey);
            peer->aux_rkey = NULL;
        }
        if (stuck || peer->ep_failed) {
            continue; /* ep_failed: closed when UCX reported the error */
        }
        if (peer->ep != NULL) {
            data_closed = kucx_ep_close(&ctx->ucx, peer->group, KUCX_DATA, peer->ep, peer->lost,
                                        KVX_NS_PER_S);
            peer->ep = NULL;
        }
        if (peer->cep != NULL) {
            kucx_ep_close(&ctx->ucx, peer->group, KUCX_CTRL, peer->cep, peer->lost, KVX_NS_PER_S);
            peer->cep = NULL;
        }
        if (!data_closed) {
            kvx_warn("closing the endpoint to %s did not finish", peer->name);
        }
    }
    if (left > 0) {
        kvx_info("destroy: left open the endpoints to %s (unreachable, or lost with operations "
                 "in flight), and so the UCX workers and context (UCX 1.13 aborts or crashes "
                 "when it closes them)",
                 names);
    }
    return left;
}

void bootstrap_cleanup(kvx_ctx_t *ctx)
{
    unpack_cleanup(ctx);
    for (int i = 0; i < ctx->npeers; i++) {
        peer_t *peer = &ctx->peers[i];

        /* Keys of a lost peer with operations in flight cannot be destroyed
         * (before the endpoint, after the operations): they are left. */
        free(peer->rkeys);
        free(peer->buf_addr);
        free(peer->buf_rkey);
        free(peer->agreed);
    }
    pack_cleanup(ctx);
    free(ctx->peers);
    free(ctx->peer_by_rank);
    free(ctx->pair_fail);
    free(ctx->doors);
    ctx->doors = NULL;
    ctx->ndoors = 0;
    for (int role = 0; role < 3; role++) {
        free(ctx->kvls[role]);
        ctx->kvls[role] = NULL;
    }
    ctx->peers = NULL;
    ctx->peer_by_rank = NULL;
    ctx->pair_fail = NULL;
    ctx->npeers = 0;
}

kvx_status_t bootstrap_desc(kvx_ctx_t *ctx, void **desc, size_t *len, kvx_failure_t *why)
{
    blob_writer_t w = { NULL, 0, 0 };
    rank_info_t mine;
    kvx_status_t status = bootstrap_blob(ctx, &w, why);
    char *d;

    if (status != KVX_OK) {
        free(w.buf);
        return status;
    }
    bootstrap_mine(ctx, &mine, w.len);
    d = malloc(sizeof(mine) + w.len);
    if (d == NULL) {
        free(w.buf);
        failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_BOOTSTRAP, NULL, "no memory");
        return KVX_ERR_NO_MEMORY;
    }
    memcpy(d, &mine, sizeof(mine));
    memcpy(d + sizeof(mine), w.buf, w.len);
    free(w.buf);
    *desc = d;
    *len = sizeof(mine) + w.len;
    return KVX_OK;
}

/* The joiner's instance's geometry: recorded by its first rank, the same
 * for the others. */
static kvx_status_t bootstrap_joined_geometry(kvx_ctx_t *ctx, const rank_info_t *ri,
                                              kvx_failure_t *why)
{
    kvl_t *k = &ctx->kvls[ri->role][ri->instance];
    char who[32];

    snprintf(who, sizeof(who), "%s[%d]", kvx_role_name((kvx_role_t)ri->role), ri->instance);
    if (k->tp == 0) {
        if (kvl_init(k, &ri->kv, ri->tp_size, who, why) != KVX_OK) {
            memset(k, 0, sizeof(*k));
            return why->status;
        }
        k->page_stride = (size_t)ri->page_stride;
        return KVX_OK;
    }
    if (!kvl_equal(&k->kv, &ri->kv) || k->page_stride != ri->page_stride) {
        failure_set(why, KVX_ERR_INVALID_PARAM, KVX_STAGE_INIT, NULL,
                    "%s.tp%d was given a different KV layout or page stride than its siblings", who,
                    ri->tp_rank);
        return KVX_ERR_INVALID_PARAM;
    }
    return KVX_OK;
}

kvx_status_t bootstrap_take_joined(kvx_ctx_t *ctx, const join_hello_t *h, const void *desc,
                                   size_t len, int *talks, kvx_failure_t *why)
{
    kvx_role_t last = ctx->job.first == KVX_ROLE_PREFILL ? KVX_ROLE_DECODE : KVX_ROLE_PREFILL;
    joblayout_t job = ctx->job;
    rank_info_t ri, self;
    plan_pair_t pair;
    kvx_failure_t *f;
    int c = h->place, rank, old = ctx->job.count[last];
    kvx_status_t status;

    *talks = 0;
    if (h->role != (int32_t)last || c < 0 || c >= ctx->inst_cap[last] ||
        h->tp_size != ctx->job.tp[last]) {
        failure_set(why, KVX_ERR_INVALID_PARAM, KVX_STAGE_BOOTSTRAP, NULL,
                    "no place %s[%d] of TP %d here: this job takes %s instances of TP %d at "
                    "places below %d",
                    kvx_role_name((kvx_role_t)h->role), c, h->tp_size, kvx_role_name(last),
                    ctx->job.tp[last], ctx->inst_cap[last]);
        return KVX_ERR_INVALID_PARAM;
    }
    job.count[last] = c + 1 > old ? c + 1 : old;
    rank = joblayout_rank(&job, last, c, h->tp_rank);
    /* An instance of the world is replaced (generation 2 on), never joined. */
    if (rank >= ctx->rank_cap || (rank < ctx->size && h->generation < 2)) {
        failure_set(why, KVX_ERR_INVALID_PARAM, KVX_STAGE_BOOTSTRAP, NULL,
                    "%s[%d] is an instance of this job's world, not a place for a joiner",
                    kvx_role_name(last), c);
        return KVX_ERR_INVALID_PARAM;
    }
    /* The descriptor is read against the layout that holds the place. */
    ctx->job = job;
    status = bootstrap_read_desc(ctx, desc, len, &ri, why);
    ctx->job.count[last] = old;
    if (status != KVX_OK) {
        return status;
    }
    if (ri.rank != rank || ri.role != h->role || ri.instance != c || ri.tp_rank != h->tp_rank) {
        failure_set(why, KVX_ERR_PROTOCOL, KVX_STAGE_BOOTSTRAP, NULL,
                    "the descriptor of rank %d (%s[%d].tp%d) is not the hello's %s[%d].tp%d",
                    ri.rank, kvx_role_name((kvx_role_t)ri.role), ri.instance, ri.tp_rank,
                    kvx_role_name((kvx_role_t)h->role), c, h->tp_rank);
        return KVX_ERR_PROTOCOL;
    }
    if (ctx->peer_by_rank[rank] != NULL) {
        failure_set(why, KVX_ERR_BUSY, KVX_STAGE_BOOTSTRAP, NULL, "%s has joined already",
                    ctx->peer_by_rank[rank]->name);
        return KVX_ERR_BUSY;
    }
    status = bootstrap_joined_geometry(ctx, &ri, why);
    if (status != KVX_OK) {
        return status;
    }
    f = &ctx->pair_fail[c];
    status = ctx->role == KVX_ROLE_PREFILL
                 ? kvl_check_pair(&ctx->kvls[KVX_ROLE_PREFILL][ctx->instance], ctx->instance,
                                  ctx->aux_item_size, &ctx->kvls[last][c], c, ri.aux_item_size, f)
                 : kvl_check_pair(&ctx->kvls[last][c], c, ri.aux_item_size,
                                  &ctx->kvls[KVX_ROLE_DECODE][ctx->instance], ctx->instance,
                                  ctx->aux_item_size, f);
    for (int i = old; i < c; i++) {
        if (ctx->pair_fail[i].status == KVX_OK && ctx->kvls[last][i].tp == 0) {
            failure_set(&ctx->pair_fail[i], KVX_ERR_BUSY, KVX_STAGE_BOOTSTRAP, NULL,
                        "%s[%d] has not joined", kvx_role_name(last), i);
        }
    }
    ctx->job.count[last] = job.count[last];
    if (status != KVX_OK) {
        *why = *f;
        return status;
    }
    if (ctx->role == KVX_ROLE_PREFILL) {
        plan_pair(&ctx->my, ctx->tp_rank, &ctx->kvls[last][c], ri.tp_rank, &pair);
    } else {
        plan_pair(&ctx->kvls[last][c], ri.tp_rank, &ctx->my, ctx->tp_rank, &pair);
    }
    if (!pair.talks) {
        return KVX_OK;
    }
    bootstrap_mine(ctx, &self, 0);
    status = bootstrap_add_peer(ctx, rank, &ri, &self, (const char *)desc + sizeof(ri), &pair, why);
    if (status != KVX_OK) {
        if (ctx->peer_by_rank[rank] != NULL) {
            ctx->peer_by_rank[rank]->lost = 1; /* its endpoints may be half made */
        }
        return status;
    }
    ctx->peer_by_rank[rank]->nonce_floor = h->generation > 1 ? (h->generation - 1) << 24 : 0;
    if (ri.num_pages > ctx->limits.max_pages) {
        ctx->limits.max_pages = ri.num_pages;
    }
    *talks = 1;
    return KVX_OK;
}

void bootstrap_retire(kvx_ctx_t *ctx, kvx_role_t role, int instance, const char *how)
{
    for (int i = 0; i < ctx->npeers; i++) {
        peer_t *p = &ctx->peers[i];

        if (p->retired || p->role != role || p->instance != instance) {
            continue;
        }
        if (!p->lost) {
            peer_mark_lost(ctx, p, how); /* its rooms fail with how */
        }
        if (p->inflight_ops == 0) {
            for (int r = 0; r < p->nregions && p->rkeys != NULL; r++) {
                kucx_rkey_destroy(p->rkeys[r]);
                p->rkeys[r] = NULL;
            }
            kucx_rkey_destroy(p->aux_rkey);
            p->aux_rkey = NULL;
        }
        /* One that said goodbye closed its side: a flush completes. One lost
         * without UCX error handling may hold puts that never complete: its
         * endpoints are left to the workers' destruction (as at destroy). */
        if (!p->ep_failed && (p->bye || p->peer_mode)) {
            int done = 1;

            if (p->ep != NULL) {
                done &= kucx_ep_close(&ctx->ucx, p->group, KUCX_DATA, p->ep, p->peer_mode,
                                      100 * KVX_NS_PER_MS);
            }
            if (p->cep != NULL) {
                done &= kucx_ep_close(&ctx->ucx, p->group, KUCX_CTRL, p->cep, p->peer_mode,
                                      100 * KVX_NS_PER_MS);
            }
            if (!done) {
                kvx_warn("closing the endpoints of %s did not finish within 100 ms", p->name);
            }
        }
        p->ep = p->cep = NULL;
        p->ep_failed = 1;
        p->retired = 1;
        if (ctx->peer_by_rank[p->rank] == p) {
            ctx->peer_by_rank[p->rank] = NULL;
        }
        kvx_info("peer %s retired: %s", p->name, how);
    }
    memset(&ctx->kvls[role][instance], 0, sizeof(kvl_t));
}
