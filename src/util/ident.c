/*
 * ident.c - the process identity used by log lines and failure origins.
 */
#include "config.h"

#include "ident.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static kvx_ident_t ident;
static pthread_once_t ident_once = PTHREAD_ONCE_INIT;

/* The launcher tells each process its rank before MPI_Init; knowing it early
 * lets log files (KVX_LOG_FILE=...%r) be named per rank from the first line. */
static int ident_rank_from_launcher(void)
{
    const char *v = getenv("OMPI_COMM_WORLD_RANK");

    if (v == NULL) {
        v = getenv("PMIX_RANK");
    }
    if (v == NULL) {
        v = getenv("PMI_RANK");
    }
    if (v == NULL) {
        v = getenv("SLURM_PROCID");
    }
    return v != NULL && *v != '\0' ? atoi(v) : -1;
}

static void ident_init(void)
{
    ident.rank = ident_rank_from_launcher();
    ident.role = KVX_ROLE_NONE;
    ident.instance = -1;
    ident.tp_rank = -1;
    ident.tp_size = 0;
    ident.pid = (int)getpid();
    if (gethostname(ident.host, sizeof(ident.host)) != 0) {
        snprintf(ident.host, sizeof(ident.host), "unknown-host");
    }
    ident.host[sizeof(ident.host) - 1] = '\0';
}

const kvx_ident_t *ident_get(void)
{
    pthread_once(&ident_once, ident_init);
    return &ident;
}

void ident_set_rank(int rank)
{
    pthread_once(&ident_once, ident_init);
    ident.rank = rank;
}

void ident_set_role(kvx_role_t role, int instance, int tp_rank, int tp_size)
{
    pthread_once(&ident_once, ident_init);
    ident.role = role;
    ident.instance = instance;
    ident.tp_rank = tp_rank;
    ident.tp_size = tp_size;
}

char *ident_format(char *buf, size_t len, int rank, kvx_role_t role, int instance, int tp_rank)
{
    if (role == KVX_ROLE_NONE) {
        if (rank < 0) {
            snprintf(buf, len, "an unknown rank");
        } else {
            snprintf(buf, len, "rank %d", rank);
        }
    } else if (instance < 0) { /* an instance that joins, before its place */
        snprintf(buf, len, "a joining %s's tp%d (rank %d)", kvx_role_name(role), tp_rank, rank);
    } else {
        snprintf(buf, len, "%s[%d].tp%d (rank %d)", kvx_role_name(role), instance, tp_rank, rank);
    }
    return buf;
}
