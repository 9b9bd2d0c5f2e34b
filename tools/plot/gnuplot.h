/*
 * gnuplot.h - a PNG drawn by gnuplot, for kvx-bench --plot and
 * kvx-demo --plot: the data and the script go to temporary files and
 * gnuplot runs on them, when it is installed.
 */
#ifndef KVX_TOOLS_GNUPLOT_H
#define KVX_TOOLS_GNUPLOT_H

#include <stddef.h>

/* Draws png (width x height pixels): the script's commands, in which DATA
 * stands for the data file holding data[0, len) (gnuplot's columns; blocks
 * of it apart by two blank lines are its "index"es). Returns what happened,
 * for the end of a line that names png: "written", "NOT written (gnuplot
 * failed)", or why it was not drawn. Not thread-safe (system()). */
const char *gnuplot_png(const char *png, int width, int height, const char *script,
                        const char *data, size_t len);

#endif
