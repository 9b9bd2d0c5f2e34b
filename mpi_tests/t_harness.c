/*
 * t_harness.c - proves the multi-rank test harness and the per-rank pieces
 * of the foundation on real MPI ranks.
 *
 *   t_harness log     every rank logs through KVX_LOG_FILE=...%r; rank 0 reads
 *                     every file and checks each line names its own rank,
 *                     pid, host and role
 *   t_harness config  every rank parses the same KVX_* environment; rank 0
 *                     checks they all hold the same values
 */
#include "config.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cfg.h"
#include "util/ident.h"
#include "util/log.h"

#define CHECK(cond, ...)                                                            \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "t_harness: rank %d: check failed: %s: ", rank, #cond); \
            fprintf(stderr, __VA_ARGS__);                                           \
            fprintf(stderr, "\n");                                                  \
            failures++;                                                             \
        }                                                                           \
    } while (0)

static int rank, size, failures;

static int check_log(void)
{
    const char *out = getenv("KVXT_OUT");
    int *pids = malloc(sizeof(int) * size);
    int me = getpid();

    /* Half the ranks play prefill, half decode, so the role tag is checked. */
    ident_set_rank(rank);
    ident_set_role(rank % 2 ? KVX_ROLE_DECODE : KVX_ROLE_PREFILL, rank / 2, 0, 1);
    kvx_warn("harness line from rank %d", rank);
    kvx_rwarn(1000 + rank, "room line from rank %d", rank);
    MPI_Allgather(&me, 1, MPI_INT, pids, 1, MPI_INT, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        CHECK(out != NULL, "KVXT_OUT is not set: run through mpi_tests/run-mpi.sh");
        for (int r = 0; out != NULL && r < size; r++) {
            char path[4096], line[2048], want[256];
            FILE *f;
            int lines = 0;

            snprintf(path, sizeof(path), "%s/log.%d", out, r);
            f = fopen(path, "r");
            CHECK(f != NULL, "rank %d wrote no log file %s", r, path);
            if (f == NULL) {
                continue;
            }
            snprintf(want, sizeof(want), "%s:%d r%d %s[%d].tp0] warn ", ident_get()->host, pids[r],
                     r, r % 2 ? "decode" : "prefill", r / 2);
            while (fgets(line, sizeof(line), f) != NULL) {
                lines++;
                CHECK(strstr(line, want) != NULL, "line of rank %d lacks '%s': %s", r, want, line);
            }
            fclose(f);
            CHECK(lines == 2, "rank %d wrote %d lines, expected 2", r, lines);
            printf("rank %d: 2 log lines, prefix '%s' ok\n", r, want);
        }
    }
    free(pids);
    return 0;
}

static int check_config(void)
{
    kvx_status_t status;
    const kvx_cfg_t *cfg = cfg_global(&status, NULL);
    int mine[2] = { status, cfg->log_level };
    int *all = malloc(sizeof(mine) * size);

    MPI_Gather(mine, 2, MPI_INT, all, 2, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 0; r < size; r++) {
            CHECK(all[2 * r] == KVX_OK, "rank %d could not parse its environment", r);
            CHECK(all[2 * r + 1] == KVX_LOG_ERROR, "rank %d parsed KVX_LOG_LEVEL as %d", r,
                  all[2 * r + 1]);
        }
        printf("%d ranks parsed KVX_LOG_LEVEL=error identically\n", size);
    }
    free(all);
    return 0;
}

int main(int argc, char **argv)
{
    int total = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2 || strcmp(argv[1], "log") == 0) {
        check_log();
    } else if (strcmp(argv[1], "config") == 0) {
        check_config();
    } else {
        fprintf(stderr, "usage: t_harness log|config\n");
        failures++;
    }
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (rank == 0) {
        printf("%s\n", total == 0 ? "PASS" : "FAIL");
    }
    return total == 0 ? 0 : 1;
}
