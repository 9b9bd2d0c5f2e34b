/*
 * kvx-info - what this kvx is and how it is configured.
 *
 *   kvx-info -v   versions of kvx, MPI, UCX, hwloc and CUDA
 *   kvx-info -c   every KVX_* variable: default, current value, accepted form, help
 *   kvx-info -p   the memory path a context would take with host and with CUDA
 *                 pools (kvx_mem_path_probe(): UCX's memory types, KVX_MEM_PATH)
 *   kvx-info -f   the grammar of fault-injection rules (KVX_FAULT)
 *
 * Uses the public API only.
 */
#include <kvx.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out, "usage: kvx-info [-v] [-c] [-p] [-f]\n"
                 "  -v  print the versions of kvx and of MPI, UCX, hwloc and CUDA\n"
                 "  -c  print every KVX_* variable with its default, value and help\n"
                 "  -p  print the memory path (direct or staged) of host and CUDA pools, and why\n"
                 "  -f  print the grammar of fault-injection rules (KVX_FAULT)\n"
                 "  -h, --help  this help\n"
                 "With no option, -v and -p are assumed.\n");
}

static void print_versions(void)
{
    kvx_versions_t v;

    if (kvx_versions(&v) != KVX_OK) {
        fprintf(stderr, "kvx-info: cannot read versions\n");
        exit(1);
    }
    printf("kvx    %s\n", v.kvx);
    printf("MPI    %s\n", v.mpi);
    printf("UCX    %s\n", v.ucx);
    printf("hwloc  %s\n", v.hwloc);
    printf("CUDA   %s\n", v.cuda);
}

/* The path a context of this process would take on its own with each
 * kind of pool (a job stages when any of its ranks would). */
static void print_paths(void)
{
    static const kvx_mem_type_t types[] = { KVX_MEM_HOST, KVX_MEM_CUDA };
    static const char *const names[] = { "host", "CUDA" };

    for (size_t i = 0; i < 2; i++) {
        kvx_mem_path_t path;
        char why[512];
        kvx_status_t st = kvx_mem_path_probe(types[i], &path, why, sizeof(why));

        if (st == KVX_OK) {
            printf("path   %s pools: %s: %s\n", names[i], kvx_mem_path_name(path), why);
        } else {
            printf("path   %s pools: no path (%s): %s\n", names[i], kvx_status_name(st), why);
        }
    }
}

static int print_config(void)
{
    kvx_failure_t why;
    int bad = 0;

    printf("# %zu kvx configuration variables (environment)\n", kvx_config_count());
    for (size_t i = 0; i < kvx_config_count(); i++) {
        kvx_config_var_t var;

        kvx_config_var(i, &var);
        printf("#\n# %s\n#   type %s; accepted: %s\n", var.help, var.type, var.accepted);
        printf("%s=%s", var.name, var.value != NULL ? var.value : var.default_value);
        printf("%s\n", var.value != NULL ? "    # set in the environment" : "    # default");
    }
    if (kvx_config_check(&why) != KVX_OK) {
        char line[512];

        kvx_failure_format(&why, line, sizeof(line));
        fprintf(stderr, "kvx-info: %s\n", line);
        bad = 1;
    }
    return bad;
}

int main(int argc, char **argv)
{
    static const struct option longs[] = { { "help", 0, 0, 'h' }, { 0, 0, 0, 0 } };
    int versions = 0, config = 0, paths = 0, faults = 0, opt, rc = 0;

    while ((opt = getopt_long(argc, argv, "vcpfh", longs, NULL)) != -1) {
        switch (opt) {
        case 'v':
            versions = 1;
            break;
        case 'c':
            config = 1;
            break;
        case 'p':
            paths = 1;
            break;
        case 'f':
            faults = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        usage(stderr);
        return 2;
    }
    if (!versions && !config && !paths && !faults) {
        versions = paths = 1;
    }
    if (versions) {
        print_versions();
    }
    if (paths) {
        print_paths();
    }
    if (config) {
        rc = print_config();
    }
    if (faults) {
        fputs(kvx_fault_syntax(), stdout);
    }
    return rc;
}
