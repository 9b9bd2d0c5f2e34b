/*
 * exitrec.h - a rank's exit status, written where kvx-run reads it.
 *
 * Under mpirun --enable-recovery (kvx-run --tolerate-failures) Open MPI
 * 4.1's mpirun exits 0 even when every rank exited 1, so kvx-run sets
 * KVX_RUN_STATUS_DIR and each rank that created a context writes its exit
 * status there when the process exits: DIR/rank.N (N its world rank) holds
 * the status and a newline. A rank killed by a signal, or ended by
 * MPI_Abort or _exit, writes nothing -- which is what kvx-run reports.
 */
#ifndef KVX_UTIL_EXITREC_H
#define KVX_UTIL_EXITREC_H

/* Records this process's exit status in dir (at most once per process,
 * with the world rank of the last call). Thread safe. */
void exitrec_arm(const char *dir, int world_rank);

#endif
