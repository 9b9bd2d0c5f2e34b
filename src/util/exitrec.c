/*
 * exitrec.c - a rank's exit status for kvx-run (exitrec.h).
 */
#include "config.h"

#include "util/exitrec.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t exitrec_lock = PTHREAD_MUTEX_INITIALIZER;
static char exitrec_path[PATH_MAX];
static int exitrec_armed;

/* At exit: the status into a file of its own, renamed into place, so that
 * kvx-run never reads half a line. */
static void exitrec_write(int status, void *arg)
{
    char tmp[PATH_MAX + 8];
    FILE *f;

    (void)arg;
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", exitrec_path) >= (int)sizeof(tmp)) {
        return;
    }
    f = fopen(tmp, "w");
    if (f == NULL) {
        return;
    }
    fprintf(f, "%d\n", status);
    if (fclose(f) == 0) {
        rename(tmp, exitrec_path);
    }
}

void exitrec_arm(const char *dir, int world_rank)
{
    pthread_mutex_lock(&exitrec_lock);
    if (snprintf(exitrec_path, sizeof(exitrec_path), "%s/rank.%d", dir, world_rank) <
            (int)sizeof(exitrec_path) &&
        !exitrec_armed) {
        exitrec_armed = on_exit(exitrec_write, NULL) == 0;
    }
    pthread_mutex_unlock(&exitrec_lock);
}
