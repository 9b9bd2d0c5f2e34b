/*
 * kvx_mpi.c - MPI helpers.
 */
#include "config.h"

#include "kvx_mpi.h"

#include <stdio.h>
#include <string.h>

void kmpi_error_string(int rc, char *buf, size_t len)
{
    char text[MPI_MAX_ERROR_STRING];
    int n = 0;

    if (MPI_Error_string(rc, text, &n) != MPI_SUCCESS) {
        snprintf(text, sizeof(text), "MPI error %d", rc);
    }
    snprintf(buf, len, "%s", text);
}

void kmpi_version(char *buf, size_t len)
{
    char text[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;

    /* MPI_Get_library_version may be called before MPI_Init (MPI-3). */
    if (MPI_Get_library_version(text, &n) != MPI_SUCCESS) {
        snprintf(buf, len, "unknown");
        return;
    }
    text[strcspn(text, "\n,")] = '\0';
    snprintf(buf, len, "%s", text);
}
