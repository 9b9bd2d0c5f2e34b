/*
 * fault.c - deterministic fault injection (KVX_FAULT, kvx_ctx_params_t.fault).
 *
 * Rules are separated by ';', fields by ','. A rule names a stage and an
 * effect, and optionally selects ranks and rooms:
 *
 *   stage=post,role=prefill,instance=0,tp=1,every=20,effect=fail
 *   stage=any,prob=0.05,seed=7,effect=fail
 *   stage=post,role=decode,tp=0,after=100,effect=kill
 *
 * Each hook evaluates the rules once per room and stage. every=N fires on the
 * N-th, 2N-th... matching room; after=N only after N matching rooms; prob=P
 * fires with probability P, decided by a hash of (seed, rule, room, rank) so
 * the same run makes the same decisions; stage=any picks, per room, one of
 * the stages the room meets. With no rule set, every hook costs one pointer
 * test (fault_at() in ctx.h).
 */
#include "config.h"

#include "core/ctx/ctx.h"
#include "core/room/fault.h"
#include "util/failure.h"
#include "util/log.h"
#include "util/mix.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define FAULT_ANY (-1)

typedef struct fault_rule {
    int stage;                    /* kvx_stage_t or FAULT_ANY */
    int role, instance, tp, rank; /* -1: any */
    int64_t room;                 /* -1: any */
    uint64_t every, after;        /* 0: unused */
    double prob;                  /* < 0: unused */
    uint64_t seed;
    fault_effect_t effect;
    kvx_status_t code; /* FAULT_FAIL */
    uint64_t delay_ns; /* FAULT_DELAY */
    uint64_t seen;     /* matching evaluations so far */
    char text[160];    /* the rule as written */
} fault_rule_t;

typedef struct fault_set {
    fault_rule_t *rules;
    size_t n;
} fault_set_t;

/* Stages a rule may name; "any" is handled apart. */
static const kvx_stage_t fault_stages[] = { KVX_STAGE_BOOTSTRAP,  KVX_STAGE_PREALLOC,
                                            KVX_STAGE_POST,       KVX_STAGE_AUX,
                                            KVX_STAGE_COMPLETION, KVX_STAGE_NOTIFY,
                                            KVX_STAGE_AGREE };
#define FAULT_NSTAGES (sizeof(fault_stages) / sizeof(fault_stages[0]))

const char *kvx_fault_syntax(void)
{
    return "KVX_FAULT: rules separated by ';', fields by ','\n"
           "  stage=bootstrap|prealloc|post|aux|completion|verify|notify|agree|any (required)\n"
           "  effect=fail[:STATUS]|delay:MS|drop|kill|stall:MS|corrupt        (required)\n"
           "  selectors: role=prefill|decode instance=N tp=N rank=N room=ID\n"
           "  triggers:  every=N (every N-th matching room) after=N (after N matching rooms)\n"
           "             prob=P seed=S (deterministic: a hash of seed, rule, room and rank)\n"
           "  drop applies to messages (prealloc, completion, aux, notify), not to post:\n"
           "  a put that silently vanishes cannot be detected by any transport.\n"
           "  notify: a failure notice (FAIL); on a decode rank that succeeded, delay or\n"
           "  drop hold its RECEIVED and later outcome notices (fail does nothing there).\n"
           "  stall holds the thread that evaluates the rule (with the context lock) for MS:\n"
           "  a stuck progress thread, for health checks.\n"
           "  verify (a decode rank with KVX_VERIFY on, once a writer's pages landed; not one\n"
           "  of any's): corrupt flips one byte of what landed before it is checked.\n"
           "  example: stage=post,role=prefill,tp=1,every=20,effect=fail;"
           "stage=any,prob=0.05,seed=7,effect=fail\n";
}

static int fault_number(const char *v, long long lo, long long hi, long long *out)
{
    char *end;
    long long x;

    errno = 0;
    x = strtoll(v, &end, 0);
    if (*v == '\0' || *end != '\0' || errno != 0 || x < lo || x > hi) {
        return -1;
    }
    *out = x;
    return 0;
}

/* STATUS in "fail:STATUS": KVX_ERR_UCX, ERR_UCX or a negative number. */
static int fault_status(const char *v, kvx_status_t *out)
{
    long long n;

#define FAULT_STATUS_(name, value, msg)                                                 \
    if (value < 0 && (strcasecmp(v, "KVX_" #name) == 0 || strcasecmp(v, #name) == 0)) { \
        *out = (kvx_status_t)value;                                                     \
        return 0;                                                                       \
    }
    KVX_STATUS_MAP(FAULT_STATUS_)
#undef FAULT_STATUS_
    if (fault_number(v, KVX_ERR_INTERNAL, -1, &n) == 0) {
        *out = (kvx_status_t)n;
        return 0;
    }
    return -1;
}

static int fault_effect(fault_rule_t *r, const char *v)
{
    long long ms;

    if (strcmp(v, "fail") == 0 || strncmp(v, "fail:", 5) == 0) {
        r->effect = FAULT_FAIL;
        r->code = KVX_ERR_INJECTED;
        return v[4] == ':' ? fault_status(v + 5, &r->code) : 0;
    }
    if (strncmp(v, "delay:", 6) == 0 && fault_number(v + 6, 0, 3600000, &ms) == 0) {
        r->effect = FAULT_DELAY;
        r->delay_ns = (uint64_t)ms * 1000000ull;
        return 0;
    }
    if (strcmp(v, "drop") == 0) {
        r->effect = FAULT_DROP;
        return 0;
    }
    if (strcmp(v, "kill") == 0) {
        r->effect = FAULT_KILL;
        return 0;
    }
    if (strcmp(v, "corrupt") == 0) {
        r->effect = FAULT_CORRUPT;
        return 0;
    }
    if (strncmp(v, "stall:", 6) == 0 && fault_number(v + 6, 0, 3600000, &ms) == 0) {
        r->effect = FAULT_STALL;
        r->delay_ns = (uint64_t)ms * 1000000ull;
        return 0;
    }
    return -1;
}

static int fault_stage(fault_rule_t *r, const char *v)
{
    if (strcmp(v, "any") == 0) {
        r->stage = FAULT_ANY;
        return 0;
    }
    if (strcmp(v, "verify") == 0) {
        /* Not one of "any"'s stages: it is met only with KVX_VERIFY on. */
        r->stage = KVX_STAGE_VERIFY;
        return 0;
    }
    for (size_t i = 0; i < FAULT_NSTAGES; i++) {
        if (strcmp(v, kvx_stage_name(fault_stages[i])) == 0) {
            r->stage = (int)fault_stages[i];
            return 0;
        }
    }
    return -1;
}

/* One field "key=value"; returns -1 with *why_p set on error. */
static int fault_field(fault_rule_t *r, char *field, const char **why_p)
{
    char *eq = strchr(field, '=');
    long long n;
    char *end;

    if (eq == NULL) {
        *why_p = "a field is not key=value";
        return -1;
    }
    *eq = '\0';
    const char *k = field, *v = eq + 1;

    if (strcmp(k, "stage") == 0) {
        *why_p = "stage must be bootstrap, prealloc, post, aux, completion, verify, notify, agree "
                 "or any";
        return fault_stage(r, v);
    }
    if (strcmp(k, "effect") == 0) {
        *why_p = "effect must be fail, fail:STATUS, delay:MS, drop, kill, stall:MS or corrupt";
        return fault_effect(r, v);
    }
    if (strcmp(k, "role") == 0) {
        *why_p = "role must be prefill or decode";
        r->role = strcmp(v, "prefill") == 0  ? KVX_ROLE_PREFILL
                  : strcmp(v, "decode") == 0 ? KVX_ROLE_DECODE
                                             : -2;
        return r->role == -2 ? -1 : 0;
    }
    if (strcmp(k, "prob") == 0) {
        *why_p = "prob must be a number from 0 to 1";
        errno = 0;
        r->prob = strtod(v, &end);
        return *v == '\0' || *end != '\0' || errno != 0 || !(r->prob >= 0 && r->prob <= 1) ? -1 : 0;
    }
    *why_p = "instance, tp, rank, room, every, after and seed take non-negative integers";
    if (fault_number(v, 0, INT64_MAX, &n) != 0) {
        return -1;
    }
    if (strcmp(k, "instance") == 0 && n <= INT32_MAX) {
        r->instance = (int)n;
    } else if (strcmp(k, "tp") == 0 && n <= INT32_MAX) {
        r->tp = (int)n;
    } else if (strcmp(k, "rank") == 0 && n <= INT32_MAX) {
        r->rank = (int)n;
    } else if (strcmp(k, "room") == 0) {
        r->room = n;
    } else if (strcmp(k, "every") == 0 && n > 0) {
        r->every = (uint64_t)n;
    } else if (strcmp(k, "after") == 0) {
        r->after = (uint64_t)n;
    } else if (strcmp(k, "seed") == 0) {
        r->seed = (uint64_t)n;
    } else {
        *why_p = "unknown key (stage, effect, role, instance, tp, rank, room, every, after, prob, "
                 "seed) or every=0";
        return -1;
    }
    return 0;
}

static int fault_rule_parse(fault_rule_t *r, const char *text, kvx_failure_t *why)
{
    char buf[sizeof(r->text)], *save = NULL;
    const char *reason = "";

    memset(r, 0, sizeof(*r));
    r->stage = -2; /* not given yet */
    r->role = r->instance = r->tp = r->rank = -1;
    r->room = -1;
    r->prob = -1;
    snprintf(r->text, sizeof(r->text), "%s", text);
    snprintf(buf, sizeof(buf), "%s", text);
    for (char *f = strtok_r(buf, ",", &save); f != NULL; f = strtok_r(NULL, ",", &save)) {
        if (fault_field(r, f, &reason) != 0) {
            goto err;
        }
    }
    reason = "a rule needs stage= and effect=";
    if (r->stage == -2 || r->effect == FAULT_NONE) {
        goto err;
    }
    reason = "drop is for messages; a put that vanishes silently cannot be detected: use fail or "
             "delay at stage post";
    if (r->effect == FAULT_DROP && r->stage == KVX_STAGE_POST) {
        goto err;
    }
    reason = "corrupt flips a byte of landed KV before the decode checks it: stage=verify only; "
             "verify takes corrupt, fail or kill";
    if ((r->effect == FAULT_CORRUPT) != (r->stage == KVX_STAGE_VERIFY) &&
        !(r->stage == KVX_STAGE_VERIFY && (r->effect == FAULT_FAIL || r->effect == FAULT_KILL))) {
        goto err;
    }
    return 0;
err:
    failure_set(why, KVX_ERR_CONFIG, KVX_STAGE_INIT, NULL, "fault rule '%s': %s", text, reason);
    return -1;
}

kvx_status_t fault_parse(const char *spec, fault_set_t **set_p, kvx_failure_t *why)
{
    fault_set_t *set;
    char *copy, *save = NULL;
    size_t cap = 1;

    *set_p = NULL;
    if (spec == NULL || *spec == '\0') {
        return KVX_OK;
    }
    for (const char *p = spec; *p != '\0'; p++) {
        cap += *p == ';';
    }
    set = calloc(1, sizeof(*set));
    copy = strdup(spec);
    if (set == NULL || copy == NULL || (set->rules = calloc(cap, sizeof(fault_rule_t))) == NULL) {
        free(set);
        free(copy);
        failure_set(why, KVX_ERR_NO_MEMORY, KVX_STAGE_INIT, NULL, "no memory for fault rules");
        return KVX_ERR_NO_MEMORY;
    }
    for (char *r = strtok_r(copy, ";", &save); r != NULL; r = strtok_r(NULL, ";", &save)) {
        if (strspn(r, " \t") == strlen(r)) {
            continue;
        }
        if (strlen(r) >= sizeof(set->rules[0].text) ||
            fault_rule_parse(&set->rules[set->n], r, why) != 0) {
            if (strlen(r) >= sizeof(set->rules[0].text)) {
                failure_set(why, KVX_ERR_CONFIG, KVX_STAGE_INIT, NULL,
                            "fault rule '%.40s...' is "
                            "too long",
                            r);
            }
            free(copy);
            fault_free(set);
            return KVX_ERR_CONFIG;
        }
        set->n++;
    }
    free(copy);
    *set_p = set;
    return KVX_OK;
}

void fault_free(fault_set_t *set)
{
    if (set != NULL) {
        free(set->rules);
        free(set);
    }
}

/* A number in [0, 1) fixed by (seed, rule, room, rank, salt). */
static double fault_draw(const fault_rule_t *r, size_t index, uint64_t room, int rank,
                         uint64_t salt)
{
    uint64_t h =
        kvx_mix64(r->seed ^ kvx_mix64(index + 1) ^ kvx_mix64(room * 0x9e3779b97f4a7c15ull) ^
                  kvx_mix64((uint64_t)rank << 20) ^ salt);

    return (double)(h >> 11) * 0x1p-53;
}

static int fault_selects(const kvx_ctx_t *ctx, const fault_rule_t *r, uint64_t id)
{
    return (r->role < 0 || r->role == (int)ctx->role) &&
           (r->instance < 0 || r->instance == ctx->instance) &&
           (r->tp < 0 || r->tp == ctx->tp_rank) && (r->rank < 0 || r->rank == ctx->rank) &&
           (r->room < 0 || (uint64_t)r->room == id);
}

/* Does rule i fire at this stage of this room? */
static int fault_fires(kvx_ctx_t *ctx, fault_rule_t *r, size_t i, kvx_stage_t stage, uint64_t id)
{
    if (r->stage == FAULT_ANY) {
        /* One stage per room, drawn once: the rule fires if the room meets it. */
        size_t pick = (size_t)(fault_draw(r, i, id, ctx->rank, 0x5eed) * FAULT_NSTAGES);

        if (fault_stages[pick] != stage) {
            return 0;
        }
    } else if (r->stage != (int)stage) {
        return 0;
    }
    if (!fault_selects(ctx, r, id)) {
        return 0;
    }
    r->seen++;
    if (r->after > 0 && r->seen <= r->after) {
        return 0;
    }
    if (r->every > 0 && (r->seen - r->after) % r->every != 0) {
        return 0;
    }
    return r->prob < 0 || fault_draw(r, i, id, ctx->rank, 0) < r->prob;
}

static void fault_sleep(uint64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

fault_effect_t fault_eval(kvx_ctx_t *ctx, kvx_stage_t stage, uint64_t id, unsigned *seen,
                          fault_action_t *act)
{
    fault_set_t *set = ctx->faults;

    if (*seen & (1u << stage)) {
        return FAULT_NONE;
    }
    *seen |= 1u << stage;
    for (size_t i = 0; i < set->n; i++) {
        fault_rule_t *r = &set->rules[i];

        if (!fault_fires(ctx, r, i, stage, id)) {
            continue;
        }
        memset(act, 0, sizeof(*act));
        act->effect = r->effect;
        switch (r->effect) {
        case FAULT_KILL:
            kvx_rerror(id, "injected: killing this rank at stage %s (rule '%s')",
                       kvx_stage_name(stage), r->text);
            kill(getpid(), SIGKILL);
            pause();
            break;
        case FAULT_FAIL:
            failure_set_room(&act->failure, id, r->code, stage, NULL,
                             "injected failure (rule '%s')", r->text);
            act->failure.flags |= KVX_FAILURE_INJECTED;
            break;
        case FAULT_STALL:
            kvx_rwarn(id, "injected: holding this thread for %llu ms at stage %s",
                      (unsigned long long)(r->delay_ns / 1000000), kvx_stage_name(stage));
            fault_sleep(r->delay_ns);
            return FAULT_NONE;
        case FAULT_DELAY:
            act->delay_ns = r->delay_ns;
            kvx_rinfo(id, "injected: %llu ms delay at stage %s",
                      (unsigned long long)(r->delay_ns / 1000000), kvx_stage_name(stage));
            break;
        default:
            break;
        }
        return r->effect;
    }
    return FAULT_NONE;
}
