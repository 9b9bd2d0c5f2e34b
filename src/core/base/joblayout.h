/*
 * joblayout.h - how the MPI world splits into prefill and decode instances.
 */
#ifndef KVX_CORE_JOBLAYOUT_H
#define KVX_CORE_JOBLAYOUT_H

#include <kvx.h>

typedef struct joblayout {
    int count[3];     /* instances per role, indexed by kvx_role_t */
    int tp[3];        /* TP size per role */
    kvx_role_t first; /* the role whose ranks come first */
    int world_size;
} joblayout_t;

/* Parses "prefill:AxB,decode:CxD" (either order, each role once) and checks
 * it covers world_size ranks. Errors name the string and what is wrong. */
kvx_status_t joblayout_parse(const char *text, int world_size, joblayout_t *layout,
                             kvx_failure_t *why);

/* Where a world rank sits. */
void joblayout_locate(const joblayout_t *layout, int world_rank, kvx_role_t *role_p,
                      int *instance_p, int *tp_rank_p);

/* The world rank of (role, instance, tp rank). */
int joblayout_rank(const joblayout_t *layout, kvx_role_t role, int instance, int tp_rank);

/* A number unique to each instance (for MPI_Comm_split). */
int joblayout_color(const joblayout_t *layout, kvx_role_t role, int instance);

/* "decode[1].tp0 (rank 9)" for a world rank. */
char *joblayout_name(const joblayout_t *layout, int world_rank, char *buf, size_t len);

#endif
