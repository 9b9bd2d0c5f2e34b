/*
 * ident.h - who this process is: host, pid, world rank and, once a context
 * exists, role, instance and TP rank. Log lines and failure origins use it.
 */
#ifndef KVX_UTIL_IDENT_H
#define KVX_UTIL_IDENT_H

#include <kvx.h>

typedef struct kvx_ident {
    int rank;        /* world rank, -1 before it is known */
    kvx_role_t role; /* KVX_ROLE_NONE before a context exists */
    int instance;
    int tp_rank;
    int tp_size;
    int pid;
    char host[64];
} kvx_ident_t;

/* The process identity; initialized on first use from the launcher's
 * environment (Open MPI, PMIx, MPICH, Slurm rank variables). */
const kvx_ident_t *ident_get(void);

/* Records this rank's place in the job (called by context creation). */
void ident_set_rank(int rank);
void ident_set_role(kvx_role_t role, int instance, int tp_rank, int tp_size);

/* "prefill[0].tp2 (rank 5)", or "rank 5" when the role is unknown. Returns
 * buf. */
char *ident_format(char *buf, size_t len, int rank, kvx_role_t role, int instance, int tp_rank);

#endif
