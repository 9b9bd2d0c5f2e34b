/*
 * t_exit.c - a kvx program whose ranks end as told, for kvx-run's exit
 * status under --tolerate-failures (mpi_tests/launch/kvx-run.sh).
 *
 *   t_exit [RANK=STATUS|RANK=kill ...]
 *
 * Every rank creates a context (the layout from KVX_LAYOUT) and destroys
 * it; then a rank named RANK=kill kills itself with SIGKILL, a rank named
 * RANK=STATUS finalizes MPI and exits STATUS, and every other rank exits 0.
 */
#include <kvx.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    kvx_ctx_params_t p;
    kvx_failure_t why;
    kvx_ctx_t *ctx;
    int rank, status = 0, kill_me = 0;
    char line[512];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 1; i < argc; i++) {
        char *eq = strchr(argv[i], '=');

        if (eq == NULL || atoi(argv[i]) != rank) {
            continue;
        }
        kill_me = strcmp(eq + 1, "kill") == 0;
        status = kill_me ? 0 : atoi(eq + 1);
    }
    kvx_ctx_params_init(&p);
    p.kv.layers = 1;
    p.kv.page_size = 4;
    p.kv.kv_heads = 2;
    p.kv.head_dim = 8;
    p.num_pages = 4;
    if (kvx_ctx_create(MPI_COMM_WORLD, &p, &ctx, &why) != KVX_OK) {
        kvx_failure_format(&why, line, sizeof(line));
        fprintf(stderr, "t_exit: rank %d: kvx_ctx_create: %s\n", rank, line);
        MPI_Abort(MPI_COMM_WORLD, 99);
    }
    kvx_ctx_destroy(ctx);
    if (kill_me) {
        printf("t_exit: rank %d: killing itself\n", rank);
        fflush(stdout);
        raise(SIGKILL);
    }
    MPI_Finalize();
    printf("t_exit: rank %d: exit %d\n", rank, status);
    return status;
}
