/*
 * gnuplot.c - a PNG drawn by gnuplot (gnuplot.h).
 */
#include "gnuplot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A file for name.XXXXXX in $TMPDIR (else /tmp), opened for writing. */
static FILE *temp_file(const char *name, char *path, size_t len)
{
    const char *dir = getenv("TMPDIR");
    int fd;

    snprintf(path, len, "%s/%s.XXXXXX", dir != NULL && dir[0] != '\0' ? dir : "/tmp", name);
    if ((fd = mkstemp(path)) < 0) {
        path[0] = '\0';
        return NULL;
    }
    return fdopen(fd, "w");
}

/* The script with DATA replaced by the data file, after the terminal. */
static void write_script(FILE *f, const char *script, const char *data, const char *png, int width,
                         int height)
{
    fprintf(f, "set terminal pngcairo size %d,%d noenhanced\nset output '%s'\n", width, height,
            png);
    for (const char *p = script; *p != '\0';) {
        if (!strncmp(p, "DATA", 4)) {
            fprintf(f, "'%s'", data);
            p += 4;
        } else {
            fputc(*p++, f);
        }
    }
    fputc('\n', f);
}

const char *gnuplot_png(const char *png, int width, int height, const char *script,
                        const char *data, size_t len)
{
    char dpath[512], gpath[512], cmd[1100];
    const char *result = "NOT written (cannot create temporary files)";
    FILE *d, *g;

    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        return "not written: gnuplot is not installed (Debian: apt-get install gnuplot-nox)";
    }
    d = temp_file("kvx-plot-data", dpath, sizeof(dpath));
    g = temp_file("kvx-plot-script", gpath, sizeof(gpath));
    if (d != NULL && g != NULL) {
        fwrite(data, 1, len, d);
        write_script(g, script, dpath, png, width, height);
    }
    if (d != NULL && fclose(d) == 0 && g != NULL && fclose(g) == 0) {
        snprintf(cmd, sizeof(cmd), "gnuplot '%s'", gpath);
        result = system(cmd) == 0 ? "written" : "NOT written (gnuplot failed)";
    } else if (g != NULL) {
        fclose(g);
    }
    if (dpath[0] != '\0') {
        unlink(dpath);
    }
    if (gpath[0] != '\0') {
        unlink(gpath);
    }
    return result;
}
