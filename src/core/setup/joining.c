/*
 * joining.c - instances that join a running job (joining.h).
 *
 * A job started with a key (KVX_JOIN_KEY_FILE) sets aside KVX_JOIN_MAX
 * places for instances of its last role (the role whose world ranks come
 * last in its layout, so that a joined instance's job ranks follow the
 * world's and no rank moves), and every rank of its first role serves a door
 * (core/link/rendezvous.c) from its progress thread. A joiner is an MPI job
 * of its own whose layout names one instance. Its world rank 0 asks world
 * rank 0's door for a place (first contact) and gets the job's shape and
 * every door; then each of its ranks exchanges descriptors with every door
 * and makes its peers as a job's bootstrap does. A door rank that sends to
 * the new instance counts it usable (kvx_ctx_pair_status() KVX_OK) once
 * every rank of it that it talks to has joined; until then KVX_ERR_BUSY.
 */
#include "config.h"

#include "core/base/join.h"
#include "core/ctx/ctx.h"
#include "core/link/peer.h"
#include "core/link/rendezvous.h"
#include "core/setup/bootstrap.h"
#include "core/setup/joining.h"
#include "mpi/kvx_mpi.h"
#include "util/failure.h"
#include "util/ident.h"
#include "util/log.h"
#include "util/time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct join_state {
    uint8_t key[JOIN_KEY_BYTES];
    int door_open;
    rdv_t door;
    int next_place;        /* world rank 0: the place it gives next */
    int *expect, *have;    /* [place]: ranks of it this rank talks to, and joined */
    uint32_t *gen;         /* [place]: its incarnation here, 0 before the first */
    uint64_t changes_seen; /* ctx->peers_changed when the peers were last looked at */
    int rescan;            /* a place became a pair: look at its peers next tick */
    join_welcome_t place;  /* a joiner: what the job gave it */
};

static kvx_role_t joining_last(const joblayout_t *job)
{
    return job->first == KVX_ROLE_PREFILL ? KVX_ROLE_DECODE : KVX_ROLE_PREFILL;
}

int joining_is_joiner(const kvx_ctx_t *ctx)
{
    return ctx->cfg.join != NULL && ctx->cfg.join[0] != '\0';
}

static kvx_status_t joining_state(kvx_ctx_t *ctx, kvx_failure_t *why)
{
    char text[512];

    if (ctx->join != NULL) {
        return KVX_OK;
    }
    ctx->join = calloc(1, sizeof(*ctx->join));
    if (ctx->join == NULL) {
        failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_INIT, NULL, "no memory");
        return KVX_ERR_NO_MEMORY;
    }
    ctx->join->door.fd = -1;
    if (ctx->cfg.join_key_file == NULL || ctx->cfg.join_key_file[0] == '\0') {
        failure_set(why, KVX_ERR_CONFIG, KVX_STAGE_INIT, NULL,
                    "KVX_JOIN=%s needs the job's key: set KVX_JOIN_KEY_FILE", ctx->cfg.join);
        return KVX_ERR_CONFIG;
    }
    if (join_key_load(ctx->cfg.join_key_file, ctx->join->key, text, sizeof(text)) != 0) {
        failure_set(why, KVX_ERR_CONFIG, KVX_STAGE_INIT, NULL, "%s", text);
        return KVX_ERR_CONFIG;
    }
    return KVX_OK;
}

kvx_status_t joining_own_layout(kvx_ctx_t *ctx, const char *layout, kvx_failure_t *why)
{
    kvx_role_t role;
    char name[16];
    int count, tp, n = 0;

    if (layout == NULL || sscanf(layout, "%15[a-z]:%dx%d%n", name, &count, &tp, &n) != 3 ||
        layout[n] != '\0' ||
        ((role = strcmp(name, "prefill") == 0  ? KVX_ROLE_PREFILL
                 : strcmp(name, "decode") == 0 ? KVX_ROLE_DECODE
                                               : KVX_ROLE_NONE) == KVX_ROLE_NONE) ||
        count != 1 || tp != ctx->size) {
        failure_set(why, KVX_ERR_LAYOUT, KVX_STAGE_INIT, NULL,
                    "a joiner's layout names its one instance, \"decode:1x%d\" or "
                    "\"prefill:1x%d\" over its %d ranks, not \"%s\"",
                    ctx->size, ctx->size, ctx->size, layout != NULL ? layout : "");
        return KVX_ERR_LAYOUT;
    }
    memset(&ctx->job, 0, sizeof(ctx->job));
    ctx->job.count[role] = 1;
    ctx->job.tp[role] = tp;
    ctx->job.first = role;
    ctx->job.world_size = ctx->size;
    ctx->role = role;
    ctx->instance = -1; /* until the job gives it a place */
    ctx->tp_rank = ctx->rank;
    return joining_state(ctx, why);
}

/* ---- the joiner --------------------------------------------------------- */

static void joining_hello(kvx_ctx_t *ctx, join_hello_t *h, int place, uint32_t generation)
{
    char host[64] = "?";

    memset(h, 0, sizeof(*h));
    h->role = ctx->role;
    h->tp_size = ctx->tp_size;
    h->kv = ctx->kv;
    h->num_pages = ctx->num_pages;
    h->aux_item_size = ctx->aux_item_size;
    h->page_stride = ctx->my.page_stride;
    h->place = place;
    h->tp_rank = ctx->tp_rank;
    h->generation = generation;
    gethostname(host, sizeof(host) - 1);
    snprintf(h->name, sizeof(h->name), "%.40s:%d", host, (int)getpid());
}

/* The welcome of world rank 0's first contact, to every rank of the world. */
static kvx_status_t joining_share(kvx_ctx_t *ctx, join_welcome_t *w, kvx_failure_t *why)
{
    int32_t fixed[7] = { w->instance, (int32_t)w->generation, w->count[0], w->count[1], w->tp[0],
                         w->tp[1],    (int32_t)w->ndoors };
    kvx_status_t status = KVX_MPI_CALL(MPI_Bcast(fixed, 7, MPI_INT32_T, 0, ctx->world));

    if (status == KVX_OK && ctx->rank != 0) {
        w->instance = fixed[0];
        w->generation = (uint32_t)fixed[1];
        w->count[0] = fixed[2];
        w->count[1] = fixed[3];
        w->tp[0] = fixed[4];
        w->tp[1] = fixed[5];
        w->ndoors = (uint32_t)fixed[6];
        w->doors = calloc(w->ndoors > 0 ? w->ndoors : 1, sizeof(*w->doors));
    }
    status = bootstrap_agree(ctx->world,
                             status == KVX_OK && w->doors == NULL && w->ndoors > 0
                                 ? (failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_INIT, NULL,
                                                "no memory for %u doors", w->ndoors),
                                    KVX_ERR_NO_MEMORY)
                                 : status,
                             why);
    if (status == KVX_OK && w->ndoors > 0) {
        status = KVX_MPI_CALL(
            MPI_Bcast(w->doors, (int)(w->ndoors * sizeof(*w->doors)), MPI_BYTE, 0, ctx->world));
    }
    return status;
}

kvx_status_t joining_contact(kvx_ctx_t *ctx, kvx_failure_t *why)
{
    join_welcome_t *w = &ctx->join->place;
    kvx_status_t status = KVX_OK;
    joblayout_t job;
    kvx_role_t role = ctx->role;
    int total;

    if (ctx->rank == 0) {
        join_hello_t h;

        joining_hello(ctx, &h, -1, 0);
        status = rdv_join(ctx->cfg.join, ctx->join->key, &h, ctx->cfg.join_timeout, w, why);
        if (status == KVX_OK && (w->tp[role - 1] != ctx->tp_size || w->ndoors == 0)) {
            failure_set(why, KVX_ERR_PROTOCOL, KVX_STAGE_BOOTSTRAP, NULL,
                        "the job at %s gave a place of TP %d with %u doors to an instance of "
                        "TP %d",
                        ctx->cfg.join, w->tp[role - 1], w->ndoors, ctx->tp_size);
            status = KVX_ERR_PROTOCOL;
        }
    }
    status = bootstrap_agree(ctx->world, status, why);
    if (status == KVX_OK) {
        status = joining_share(ctx, w, why);
    }
    if (status != KVX_OK) {
        return status;
    }
    memset(&job, 0, sizeof(job));
    job.count[KVX_ROLE_PREFILL] = w->count[0];
    job.count[KVX_ROLE_DECODE] = w->count[1];
    job.tp[KVX_ROLE_PREFILL] = w->tp[0];
    job.tp[KVX_ROLE_DECODE] = w->tp[1];
    job.first = role == KVX_ROLE_DECODE ? KVX_ROLE_PREFILL : KVX_ROLE_DECODE;
    total = job.count[KVX_ROLE_PREFILL] * job.tp[KVX_ROLE_PREFILL] +
            job.count[KVX_ROLE_DECODE] * job.tp[KVX_ROLE_DECODE];
    job.world_size = total;
    ctx->job = job;
    ctx->instance = w->instance;
    ctx->rank = joblayout_rank(&job, role, ctx->instance, ctx->tp_rank);
    ctx->rank_cap = total;
    for (int r = 0; r < 3; r++) {
        ctx->inst_cap[r] = job.count[r];
    }
    /* Its rooms' nonces start past every earlier incarnation's. */
    ctx->next_nonce = (uint64_t)(w->generation - 1) << 24;
    ident_set_rank(ctx->rank);
    ident_set_role(ctx->role, ctx->instance, ctx->tp_rank, ctx->tp_size);
    kvx_info("joined the job at %s as %s[%d], generation %u: job rank %d of %d, %u doors",
             ctx->cfg.join, kvx_role_name(role), ctx->instance, w->generation, ctx->rank, total,
             w->ndoors);
    return KVX_OK;
}

kvx_status_t joining_bootstrap(kvx_ctx_t *ctx, kvx_failure_t *why)
{
    join_welcome_t *w = &ctx->join->place;
    void **descs = calloc(w->ndoors, sizeof(void *));
    size_t *lens = calloc(w->ndoors, sizeof(size_t));
    void *mine = NULL;
    size_t mine_len = 0;
    kvx_status_t status = descs == NULL || lens == NULL ? KVX_ERR_NO_MEMORY : KVX_OK;
    int n = 0;

    if (status != KVX_OK) {
        failure_set(why, status, KVX_STAGE_BOOTSTRAP, NULL, "no memory");
    } else {
        status = bootstrap_desc(ctx, &mine, &mine_len, why);
    }
    for (uint32_t i = 0; status == KVX_OK && i < w->ndoors; i++) {
        join_hello_t h;
        join_welcome_t dw;

        joining_hello(ctx, &h, ctx->instance, w->generation);
        status = rdv_join_desc(w->doors[i].addr, ctx->join->key, &h, mine, mine_len,
                               ctx->cfg.join_timeout, &dw, &descs[n], &lens[n], why);
        free(dw.doors);
        n += status == KVX_OK;
    }
    free(mine);
    /* The doors made their peers of this rank: a rank that failed is lost to
     * them as any peer is (it never answers). */
    status = bootstrap_agree(ctx->world, status, why);
    if (status == KVX_OK) {
        status = bootstrap_run_joined(ctx, descs, lens, n, why);
    }
    for (int i = 0; i < n; i++) {
        free(descs[i]);
    }
    free(descs);
    free(lens);
    return status;
}

/* ---- the job's doors ---------------------------------------------------- */

/* Is a joined place's incarnation gone here: one of its peers lost or said
 * goodbye (an instance that lost a rank cannot go on)? Names it in how. */
static int joining_gone(kvx_ctx_t *ctx, int c, char *how, size_t len)
{
    kvx_role_t last = joining_last(&ctx->job);

    for (int i = 0; i < ctx->npeers; i++) {
        const peer_t *p = &ctx->peers[i];

        if (!p->retired && p->role == last && p->instance == c && (p->lost || p->bye)) {
            if (how != NULL) {
                snprintf(how, len, "%s[%d] is gone: %s %s%s", kvx_role_name(last), c, p->name,
                         p->bye ? "left" : "was lost: ", p->bye ? "" : p->lost_how);
            }
            return 1;
        }
    }
    return 0;
}

/* Is every peer of a world place here lost, none of them having said
 * goodbye (and at least one)? A world instance is replaced when it died,
 * not when it left: then the job is likely ending. */
static int joining_all_lost(kvx_ctx_t *ctx, int c)
{
    kvx_role_t last = joining_last(&ctx->job);
    int n = 0;

    for (int i = 0; i < ctx->npeers; i++) {
        const peer_t *p = &ctx->peers[i];

        if (!p->retired && p->role == last && p->instance == c) {
            if (!p->lost || p->bye) {
                return 0;
            }
            n++;
        }
    }
    return n > 0;
}

/* First contact (world rank 0) or the welcome before a descriptor exchange. */
static kvx_status_t joining_admit(void *arg, const join_hello_t *h, const char *peer,
                                  join_welcome_t *w, char *why, size_t why_len)
{
    kvx_ctx_t *ctx = arg;
    struct join_state *js = ctx->join;
    kvx_role_t last = joining_last(&ctx->job);
    kvl_t k;
    kvx_failure_t f;

    (void)peer;
    if (h->role != (int32_t)last || h->tp_size != ctx->job.tp[last]) {
        snprintf(why, why_len, "this job takes %s instances of TP %d, not a %s instance of TP %d",
                 kvx_role_name(last), ctx->job.tp[last], kvx_role_name((kvx_role_t)h->role),
                 h->tp_size);
        return KVX_ERR_LAYOUT;
    }
    w->count[0] = ctx->job.count[KVX_ROLE_PREFILL];
    w->count[1] = ctx->job.count[KVX_ROLE_DECODE];
    w->tp[0] = ctx->job.tp[KVX_ROLE_PREFILL];
    w->tp[1] = ctx->job.tp[KVX_ROLE_DECODE];
    w->generation = 0;
    if (h->place >= 0) {
        w->instance = h->place;
        w->generation = h->generation > 0 ? h->generation : 1;
        return KVX_OK;
    }
    if (ctx->rank != 0) {
        snprintf(why, why_len, "this rank gives no places: ask world rank 0's door");
        return KVX_ERR_INVALID_PARAM;
    }
    /* The joiner's geometry against this rank's instance, as creation
     * checks a pair: a mismatch names both values. */
    if (kvl_init(&k, &h->kv, h->tp_size, "the joiner", &f) != KVX_OK ||
        (ctx->role == KVX_ROLE_PREFILL
             ? kvl_check_pair(&ctx->my, ctx->instance, ctx->aux_item_size, &k, js->next_place,
                              h->aux_item_size, &f)
             : kvl_check_pair(&k, js->next_place, h->aux_item_size, &ctx->my, ctx->instance,
                              ctx->aux_item_size, &f)) != KVX_OK) {
        snprintf(why, why_len, "%s", f.text);
        return f.status;
    }
    /* A place whose incarnation is gone is given again, one generation on:
     * a joined one when any of its ranks left or was lost, one of the
     * world's when all its ranks were lost (a live one is still in the
     * job's MPI world). */
    for (int c = 0; c < js->next_place; c++) {
        int world = c < ctx->inst_cap[last] - (int)ctx->cfg.join_max;

        /* A generation numbers its rooms' nonces from (g - 1) << 24: 255 fit. */
        if (js->gen[c] > 0 && js->gen[c] < 255 && joining_gone(ctx, c, NULL, 0) &&
            (!world || joining_all_lost(ctx, c))) {
            w->instance = c;
            w->generation = js->gen[c] + 1;
            break;
        }
    }
    if (w->generation == 0 && js->next_place >= ctx->inst_cap[last]) {
        snprintf(why, why_len,
                 "every one of this job's KVX_JOIN_MAX=%lld places is held by a live instance",
                 ctx->cfg.join_max);
        return KVX_ERR_BUSY;
    }
    if (w->generation == 0) {
        w->instance = js->next_place++;
        w->generation = 1;
    }
    w->count[last - 1] =
        w->instance + 1 > w->count[last - 1] ? w->instance + 1 : w->count[last - 1];
    w->ndoors = (uint32_t)ctx->ndoors;
    w->doors = ctx->doors;
    return KVX_OK;
}

/* How many ranks of a joining instance this rank talks to. */
static int joining_expect(kvx_ctx_t *ctx, int c)
{
    kvx_role_t last = joining_last(&ctx->job);
    int n = 0;

    for (int t = 0; t < ctx->job.tp[last]; t++) {
        plan_pair_t pair;

        if (ctx->role == KVX_ROLE_PREFILL) {
            plan_pair(&ctx->my, ctx->tp_rank, &ctx->kvls[last][c], t, &pair);
        } else {
            plan_pair(&ctx->kvls[last][c], t, &ctx->my, ctx->tp_rank, &pair);
        }
        n += pair.talks;
    }
    return n;
}

static kvx_status_t joining_describe(void *arg, const join_hello_t *h, const char *peer,
                                     const uint8_t *desc, size_t len, void **reply,
                                     size_t *reply_len, char *why, size_t why_len)
{
    kvx_ctx_t *ctx = arg;
    struct join_state *js = ctx->join;
    kvx_role_t last = joining_last(&ctx->job);
    kvx_failure_t f;
    int talks = 0, c = h->place;
    kvx_status_t status;

    if (c >= 0 && c < ctx->inst_cap[last] && js->gen[c] > 0 && h->generation != js->gen[c]) {
        char how[128];

        if (h->generation < js->gen[c]) {
            snprintf(why, why_len, "generation %u of %s[%d] is older than its generation %u here",
                     h->generation, kvx_role_name(last), c, js->gen[c]);
            return KVX_ERR_INVALID_PARAM;
        }
        /* A later incarnation: the earlier one's peers go, its rooms fail. */
        snprintf(how, sizeof(how), "replaced by generation %u of %s[%d] (from %s)", h->generation,
                 kvx_role_name(last), c, peer);
        bootstrap_retire(ctx, last, c, how);
        js->expect[c] = js->have[c] = 0;
        js->gen[c] = 0;
    }
    status = bootstrap_take_joined(ctx, h, desc, len, &talks, &f);

    if (status == KVX_OK) {
        status = bootstrap_desc(ctx, reply, reply_len, &f);
    }
    if (status != KVX_OK) {
        snprintf(why, why_len, "%s", f.text);
        return status;
    }
    if (js->gen[c] == 0) {
        js->gen[c] = h->generation;
        js->expect[c] = joining_expect(ctx, c);
    }
    js->have[c] += talks;
    if (js->have[c] < js->expect[c]) {
        failure_set(&ctx->pair_fail[c], KVX_ERR_BUSY, KVX_STAGE_BOOTSTRAP, NULL,
                    "%s[%d] is joining: %d of the %d ranks this rank talks to have joined",
                    kvx_role_name(last), c, js->have[c], js->expect[c]);
    } else if (talks || js->expect[c] == 0) {
        memset(&ctx->pair_fail[c], 0, sizeof(ctx->pair_fail[c]));
        ctx->membership++;
        js->rescan = 1; /* it may have left already */
        kvx_info("%s[%d] joined (from %s): the job has %d %s instances", kvx_role_name(last), c,
                 peer, ctx->job.count[last], kvx_role_name(last));
    }
    return KVX_OK;
}

kvx_status_t joining_prepare(kvx_ctx_t *ctx, kvx_failure_t *why)
{
    kvx_role_t last = joining_last(&ctx->job);
    char text[256];
    kvx_status_t status;

    if (joining_is_joiner(ctx)) {
        return KVX_OK; /* joining_contact() gave the capacity */
    }
    ctx->rank_cap = ctx->size;
    for (int r = 0; r < 3; r++) {
        ctx->inst_cap[r] = ctx->job.count[r];
    }
    if (ctx->cfg.join_key_file == NULL || ctx->cfg.join_key_file[0] == '\0') {
        return KVX_OK;
    }
    status = joining_state(ctx, why);
    if (status != KVX_OK) {
        return status;
    }
    ctx->inst_cap[last] += (int)ctx->cfg.join_max;
    ctx->rank_cap += (int)ctx->cfg.join_max * ctx->job.tp[last];
    ctx->join->next_place = ctx->job.count[last];
    ctx->join->expect = calloc((size_t)ctx->inst_cap[last], sizeof(int));
    ctx->join->have = calloc((size_t)ctx->inst_cap[last], sizeof(int));
    ctx->join->gen = calloc((size_t)ctx->inst_cap[last], sizeof(uint32_t));
    if (ctx->join->expect == NULL || ctx->join->have == NULL || ctx->join->gen == NULL) {
        failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_INIT, NULL, "no memory");
        return KVX_ERR_NO_MEMORY;
    }
    /* The world's own instances are generation 1: one that is gone whole
     * is given to a replacement as any joined place. */
    for (int c = 0; c < ctx->job.count[last]; c++) {
        ctx->join->gen[c] = 1;
    }
    if (ctx->role == last || ctx->cfg.join_max == 0) {
        return KVX_OK;
    }
    if (rdv_open(&ctx->join->door, ctx->cfg.join_listen, ctx->join->key, ctx->cfg.join_timeout,
                 joining_admit, joining_describe, ctx, text, sizeof(text)) != 0) {
        failure_set(why, KVX_ERR_CONFIG, KVX_STAGE_INIT, NULL, "KVX_JOIN_LISTEN=%s: %s",
                    ctx->cfg.join_listen, text);
        return KVX_ERR_CONFIG;
    }
    ctx->join->door_open = 1;
    snprintf(ctx->door_addr, sizeof(ctx->door_addr), "%s", ctx->join->door.addr);
    kvx_info("takes joiners at %s (%lld places for %s instances)", ctx->door_addr,
             ctx->cfg.join_max, kvx_role_name(last));
    return KVX_OK;
}

static void joining_bye_send(peer_t *peer)
{
    size_t len;
    void *bye = msg_new(MSG_BYE, peer->ctx->rank, 0, 0, &len);

    if (bye != NULL && !peer->lost) {
        peer_send(peer->ctx, peer, bye, len);
    } else {
        free(bye);
    }
}

static void joining_bye_flushed(void *request, ucs_status_t status, void *user)
{
    (void)status;
    kucx_request_free(request);
    joining_bye_send(user);
}

/* A joined instance that leaves while the job goes on waits, as any
 * destroy does, until every peer said goodbye: a door rank answers its
 * goodbye once nothing it sent to it is in flight (the flush); and so does
 * a joiner that outlives the job's ranks. Between the ranks of one world
 * the goodbyes cross as they always did. */
static void joining_answer_byes(kvx_ctx_t *ctx)
{
    kvx_role_t last = joining_last(&ctx->job);
    int joiner = joining_is_joiner(ctx);

    for (int i = 0; i < ctx->npeers; i++) {
        peer_t *p = &ctx->peers[i];
        ucs_status_t ucs;
        /* (On a door rank: a joined peer, or a replacement of a world one.) */
        int across = joiner ? p->role != ctx->role
                            : p->role == last && (p->rank >= ctx->size || p->nonce_floor > 0);

        if (!p->bye || p->bye_answered || p->retired || !across) {
            continue;
        }
        p->bye_answered = 1;
        if (p->lost || p->ep_failed ||
            kucx_flush(p->ep, joining_bye_flushed, p, &ucs) != KVX_INPROGRESS) {
            joining_bye_send(p);
        }
    }
}

void joining_tick(kvx_ctx_t *ctx, uint64_t now)
{
    struct join_state *js = ctx->join;
    kvx_role_t last = joining_last(&ctx->job);
    char how[256];

    if (js == NULL) {
        return;
    }
    if (js->door_open) {
        rdv_poll(&js->door, now);
    }
    /* The peers are walked only after one was lost or said goodbye (or a
     * place became a pair), not every tick. */
    if (js->changes_seen == ctx->peers_changed && !js->rescan) {
        return;
    }
    js->changes_seen = ctx->peers_changed;
    js->rescan = 0;
    if (!ctx->stopping) {
        joining_answer_byes(ctx);
    }
    /* A joined instance that is gone is no pair any more: rooms to it are
     * refused with why until a later incarnation has joined. */
    for (int c = 0; c < ctx->job.count[last] && js->door_open; c++) {
        if (js->gen[c] > 0 && ctx->pair_fail[c].status == KVX_OK &&
            joining_gone(ctx, c, how, sizeof(how))) {
            failure_set(&ctx->pair_fail[c], KVX_ERR_PEER_LOST, KVX_STAGE_BOOTSTRAP, NULL, "%s",
                        how);
            ctx->membership++;
            kvx_info("%s; its place may be given again", how);
        }
    }
}

void joining_publish(kvx_ctx_t *ctx)
{
    const char *path = ctx->cfg.join_address_file;
    char tmp[4096];
    FILE *f;

    if (ctx->rank != 0 || ctx->join == NULL || !ctx->join->door_open || path == NULL ||
        path[0] == '\0') {
        return;
    }
    snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
    f = fopen(tmp, "w");
    if (f == NULL || fprintf(f, "%s\n", ctx->door_addr) < 0 || fclose(f) != 0 ||
        rename(tmp, path) != 0) {
        kvx_warn("cannot write the join address to KVX_JOIN_ADDRESS_FILE=%s", path);
        unlink(tmp);
    }
}

void joining_cleanup(kvx_ctx_t *ctx)
{
    struct join_state *js = ctx->join;

    if (js == NULL) {
        return;
    }
    if (js->door_open) {
        rdv_close(&js->door);
    }
    free(js->expect);
    free(js->have);
    free(js->gen);
    free(js->place.doors);
    memset(js->key, 0, sizeof(js->key));
    free(js);
    ctx->join = NULL;
}
