/*
 * joblayout.c - parsing "prefill:AxB,decode:CxD" and placing ranks.
 */
#include "config.h"

#include "core/base/joblayout.h"
#include "util/failure.h"
#include "util/ident.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JOBLAYOUT_FORM                                                                          \
    "expected prefill:AxB,decode:CxD (A prefill instances of TP B, then C decode instances of " \
    "TP D)"

static int joblayout_number(const char **p, int *out)
{
    char *end;
    long v;

    if (!isdigit((unsigned char)**p)) {
        return -1;
    }
    errno = 0;
    v = strtol(*p, &end, 10);
    if (errno != 0 || v > INT_MAX / 1024) {
        return -1;
    }
    *p = end;
    *out = (int)v;
    return 0;
}

/* Parses one "role:AxB" group at *p. */
static kvx_status_t joblayout_group(const char *text, const char **p, joblayout_t *l,
                                    kvx_role_t *role_p, kvx_failure_t *why)
{
    kvx_role_t role;
    int count, tp;

    if (strncmp(*p, "prefill:", 8) == 0) {
        role = KVX_ROLE_PREFILL;
        *p += 8;
    } else if (strncmp(*p, "decode:", 7) == 0) {
        role = KVX_ROLE_DECODE;
        *p += 7;
    } else {
        failure_set(why, KVX_ERR_LAYOUT, KVX_STAGE_INIT, NULL, "layout '%s': %s", text,
                    JOBLAYOUT_FORM);
        return KVX_ERR_LAYOUT;
    }
    if (joblayout_number(p, &count) != 0 || **p != 'x' || (++*p, joblayout_number(p, &tp)) != 0 ||
        (**p != ',' && **p != '\0')) {
        failure_set(why, KVX_ERR_LAYOUT, KVX_STAGE_INIT, NULL, "layout '%s': %s", text,
                    JOBLAYOUT_FORM);
        return KVX_ERR_LAYOUT;
    }
    if (l->count[role] != 0) {
        failure_set(why, KVX_ERR_LAYOUT, KVX_STAGE_INIT, NULL, "layout '%s': role %s appears twice",
                    text, kvx_role_name(role));
        return KVX_ERR_LAYOUT;
    }
    if (count < 1 || tp < 1) {
        failure_set(why, KVX_ERR_LAYOUT, KVX_STAGE_INIT, NULL,
                    "layout '%s': %s needs at least 1 instance of TP at least 1, not %dx%d", text,
                    kvx_role_name(role), count, tp);
        return KVX_ERR_LAYOUT;
    }
    l->count[role] = count;
    l->tp[role] = tp;
    *role_p = role;
    return KVX_OK;
}

kvx_status_t joblayout_parse(const char *text, int world_size, joblayout_t *layout,
                             kvx_failure_t *why)
{
    joblayout_t l;
    const char *p = text;
    kvx_role_t role;
    long ranks;

    memset(&l, 0, sizeof(l));
    if (text == NULL || *text == '\0') {
        failure_set(why, KVX_ERR_LAYOUT, KVX_STAGE_INIT, NULL,
                    "no job layout: set KVX_LAYOUT or kvx_ctx_params_t.layout; %s", JOBLAYOUT_FORM);
        return KVX_ERR_LAYOUT;
    }
    for (int g = 0; g < 2; g++) {
        if (joblayout_group(text, &p, &l, &role, why) != KVX_OK) {
            return KVX_ERR_LAYOUT;
        }
        if (g == 0) {
            l.first = role;
        }
        if (g == 0 && *p == ',') {
            p++;
        } else if (g == 0) {
            failure_set(
                why, KVX_ERR_LAYOUT, KVX_STAGE_INIT, NULL, "layout '%s' has no %s instances; %s",
                text, kvx_role_name(role == KVX_ROLE_PREFILL ? KVX_ROLE_DECODE : KVX_ROLE_PREFILL),
                JOBLAYOUT_FORM);
            return KVX_ERR_LAYOUT;
        }
    }
    if (*p != '\0') {
        failure_set(why, KVX_ERR_LAYOUT, KVX_STAGE_INIT, NULL, "layout '%s': %s", text,
                    JOBLAYOUT_FORM);
        return KVX_ERR_LAYOUT;
    }
    ranks = (long)l.count[KVX_ROLE_PREFILL] * l.tp[KVX_ROLE_PREFILL] +
            (long)l.count[KVX_ROLE_DECODE] * l.tp[KVX_ROLE_DECODE];
    if (ranks != world_size) {
        failure_set(why, KVX_ERR_LAYOUT, KVX_STAGE_INIT, NULL,
                    "layout '%s' needs %ld ranks but the world has %d", text, ranks, world_size);
        return KVX_ERR_LAYOUT;
    }
    l.world_size = world_size;
    *layout = l;
    return KVX_OK;
}

static kvx_role_t joblayout_other(kvx_role_t role)
{
    return role == KVX_ROLE_PREFILL ? KVX_ROLE_DECODE : KVX_ROLE_PREFILL;
}

static int joblayout_base(const joblayout_t *l, kvx_role_t role)
{
    kvx_role_t other = joblayout_other(role);

    return role == l->first ? 0 : l->count[other] * l->tp[other];
}

void joblayout_locate(const joblayout_t *l, int world_rank, kvx_role_t *role_p, int *instance_p,
                      int *tp_rank_p)
{
    kvx_role_t role = l->first;
    int offset = world_rank;

    if (offset >= l->count[role] * l->tp[role]) {
        offset -= l->count[role] * l->tp[role];
        role = joblayout_other(role);
    }
    *role_p = role;
    *instance_p = offset / l->tp[role];
    *tp_rank_p = offset % l->tp[role];
}

int joblayout_rank(const joblayout_t *l, kvx_role_t role, int instance, int tp_rank)
{
    return joblayout_base(l, role) + instance * l->tp[role] + tp_rank;
}

int joblayout_color(const joblayout_t *l, kvx_role_t role, int instance)
{
    return joblayout_rank(l, role, instance, 0);
}

char *joblayout_name(const joblayout_t *l, int world_rank, char *buf, size_t len)
{
    kvx_role_t role;
    int instance, tp_rank;

    joblayout_locate(l, world_rank, &role, &instance, &tp_rank);
    return ident_format(buf, len, world_rank, role, instance, tp_rank);
}
