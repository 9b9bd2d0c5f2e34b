/*
 * kvx-topo - the GPUs and NICs of a node as kvx sees them: the GPU x NIC
 * path classes (like nvidia-smi topo -m), each GPU's NUMA node and CPUs, and
 * the NICs each GPU uses (its UCX_NET_DEVICES).
 *
 *   kvx-topo               this machine (or KVX_TOPO_XML)
 *   kvx-topo --xml FILE    another machine, from `lstopo --of xml`
 *   kvx-topo --json        the same, as JSON
 *
 * KVX_NET_DEVICES and KVX_GPU_NIC_MAP are applied, so it shows what a
 * context would do. Uses the public API only.
 */
#include <kvx.h>

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOPO_RANKS_MAX 64 /* ranks without a GPU shown: one per NUMA node */

static void usage(FILE *out)
{
    fprintf(out, "usage: kvx-topo [--xml FILE] [--json]\n"
                 "  --xml FILE  read an hwloc XML topology (lstopo --of xml) instead of\n"
                 "              this machine (default: KVX_TOPO_XML, else this machine)\n"
                 "  --json      print JSON instead of tables\n"
                 "  -h, --help  this help\n");
}

/* ---- tables --------------------------------------------------------------- */

static void print_header(const kvx_topo_t *topo)
{
    size_t ngpus = kvx_topo_gpu_count(topo), nnics = kvx_topo_nic_count(topo);
    kvx_topo_nic_t nic;
    int tcp = nnics > 0 && kvx_topo_nic(topo, 0, &nic) == KVX_OK && nic.tcp;

    printf("# kvx-topo %s: %s\n", kvx_version(), kvx_topo_source(topo));
    printf("# %zu GPU%s, %zu NIC%s%s\n", ngpus, ngpus == 1 ? "" : "s", nnics, nnics == 1 ? "" : "s",
           tcp         ? " (TCP interfaces: no RDMA device found)"
           : nnics > 0 ? " (RDMA ports)"
                       : "");
    printf("# path classes as in nvidia-smi topo -m: PIX at most one PCIe switch,\n"
           "#   PXB several PCIe bridges, PHB a PCIe host bridge, NODE host bridges\n"
           "#   of one NUMA node, SYS across NUMA nodes\n");
}

static void print_matrix(const kvx_topo_t *topo)
{
    size_t ngpus = kvx_topo_gpu_count(topo), nnics = kvx_topo_nic_count(topo);

    if (ngpus == 0 || nnics == 0) {
        return;
    }
    printf("#\n# GPU x NIC path classes\n%-7s", "");
    for (size_t n = 0; n < nnics; n++) {
        char name[32];

        snprintf(name, sizeof(name), "NIC%zu", n);
        printf(n + 1 < nnics ? " %-5s" : " %s", name);
    }
    printf("\n");
    for (size_t g = 0; g < ngpus; g++) {
        char name[32];

        snprintf(name, sizeof(name), "GPU%zu", g);
        printf("%-7s", name);
        for (size_t n = 0; n < nnics; n++) {
            kvx_topo_path_t path;

            kvx_topo_path(topo, g, n, &path);
            printf(n + 1 < nnics ? " %-5s" : " %s", kvx_topo_path_name(path));
        }
        printf("\n");
    }
}

static void print_nics(const kvx_topo_t *topo)
{
    printf("#\n# %-6s %-16s %-5s %-13s %s\n", "NIC", "device", "kind", "bus id", "NUMA");
    for (size_t n = 0; n < kvx_topo_nic_count(topo); n++) {
        kvx_topo_nic_t nic;
        char name[32];

        kvx_topo_nic(topo, n, &nic);
        snprintf(name, sizeof(name), "NIC%zu", n);
        printf("  %-6s %-16s %-5s %-13s %d\n", name, nic.ucx_name, nic.tcp ? "tcp" : "rdma",
               nic.busid[0] != '\0' ? nic.busid : "-", nic.numa);
    }
}

static void print_gpus(const kvx_topo_t *topo)
{
    size_t ngpus = kvx_topo_gpu_count(topo);

    if (ngpus == 0) {
        printf("#\n# no GPU\n");
        return;
    }
    printf("#\n# %-6s %-13s %-5s %-16s %-5s %-4s %s\n", "GPU", "bus id", "NUMA", "CPUs", "path",
           "GDR", "NICs used (UCX_NET_DEVICES)");
    for (size_t g = 0; g < ngpus; g++) {
        kvx_topo_gpu_t gpu;
        char name[32];

        kvx_topo_gpu(topo, g, &gpu);
        snprintf(name, sizeof(name), "GPU%zu", g);
        printf("  %-6s %-13s %-5d %-16s %-5s %-4s %s\n", name, gpu.busid, gpu.numa, gpu.cpuset,
               kvx_topo_path_name(gpu.path), gpu.gdr_advised ? "yes" : "no",
               gpu.ucx_net_devices[0] != '\0' ? gpu.ucx_net_devices : "-");
    }
    for (size_t g = 0; g < ngpus; g++) {
        kvx_topo_gpu_t gpu;

        kvx_topo_gpu(topo, g, &gpu);
        printf("# GPU%zu %s\n", g, gpu.reason);
    }
}

/* Ranks without a GPU, by local rank, until a NUMA node comes round again. */
static size_t host_choices(const kvx_topo_t *topo, kvx_topo_choice_t *out, size_t max)
{
    size_t n = 0;

    for (int r = 0; (size_t)r < max; r++) {
        kvx_topo_choice_t c;
        int seen = 0;

        if (kvx_topo_choose(topo, NULL, r, &c, NULL) != KVX_OK) {
            break;
        }
        for (size_t i = 0; i < n; i++) {
            seen |= out[i].numa == c.numa;
        }
        if (seen) {
            break;
        }
        out[n++] = c;
    }
    return n;
}

static void print_hosts(const kvx_topo_choice_t *hosts, size_t n)
{
    printf("#\n# ranks without a GPU, by local rank\n");
    printf("# %-6s %-5s %-16s %s\n", "rank", "NUMA", "CPUs", "NICs used (UCX_NET_DEVICES)");
    for (size_t i = 0; i < n; i++) {
        printf("  %-6zu %-5d %-16s %s\n", i, hosts[i].numa, hosts[i].cpuset,
               hosts[i].ucx_net_devices[0] != '\0' ? hosts[i].ucx_net_devices : "-");
    }
    for (size_t i = 0; i < n; i++) {
        printf("# rank %zu %s\n", i, hosts[i].reason);
    }
}

/* ---- JSON ----------------------------------------------------------------- */

/*
 * The document is built as a jansson tree and printed once. jansson refuses a
 * string that is not UTF-8 (json_string returns NULL, and setting it fails);
 * each setter returns nonzero then, and the callers OR the results so that a
 * broken member fails the command instead of vanishing from the output.
 */
static int set_str(json_t *obj, const char *key, const char *value)
{
    return json_object_set_new(obj, key, json_string(value)) != 0;
}

/* A NUMA node or a port; null when negative (none). */
static int set_int(json_t *obj, const char *key, int value)
{
    return json_object_set_new(obj, key, value >= 0 ? json_integer(value) : json_null()) != 0;
}

static int set_nic_head(json_t *obj, const kvx_topo_nic_t *nic)
{
    return set_str(obj, "name", nic->name) | set_int(obj, "port", nic->tcp ? -1 : (int)nic->port);
}

/* A GPU's NICs in the order it uses them, with its path to each. */
static json_t *json_gpu_nics(const kvx_topo_t *topo, size_t g, size_t count, int *bad)
{
    json_t *arr = json_array();

    for (size_t i = 0; i < count; i++) {
        json_t *obj = json_object();
        kvx_topo_path_t path;
        kvx_topo_nic_t nic;
        size_t n;

        kvx_topo_gpu_nic(topo, g, i, &n);
        kvx_topo_nic(topo, n, &nic);
        kvx_topo_path(topo, g, n, &path);
        *bad |= set_nic_head(obj, &nic) | set_str(obj, "path", kvx_topo_path_name(path));
        *bad |= json_array_append_new(arr, obj) != 0;
    }
    return arr;
}

static json_t *json_gpus(const kvx_topo_t *topo, int *bad)
{
    json_t *arr = json_array();

    for (size_t g = 0; g < kvx_topo_gpu_count(topo); g++) {
        json_t *obj = json_object(), *nics;
        kvx_topo_gpu_t gpu;

        kvx_topo_gpu(topo, g, &gpu);
        *bad |= set_str(obj, "busid", gpu.busid) | set_int(obj, "numa", gpu.numa) |
                set_str(obj, "cpuset", gpu.cpuset);
        nics = json_gpu_nics(topo, g, gpu.nic_count, bad);
        *bad |= json_object_set_new(obj, "nics", nics) != 0;
        *bad |= set_str(obj, "ucx_net_devices", gpu.ucx_net_devices) |
                set_str(obj, "path", kvx_topo_path_name(gpu.path));
        *bad |= json_object_set_new(obj, "gdr_advised", json_boolean(gpu.gdr_advised)) != 0;
        *bad |= set_str(obj, "model", gpu.model) | set_str(obj, "reason", gpu.reason);
        *bad |= json_array_append_new(arr, obj) != 0;
    }
    return arr;
}

static json_t *json_nics(const kvx_topo_t *topo, int *bad)
{
    json_t *arr = json_array();

    for (size_t n = 0; n < kvx_topo_nic_count(topo); n++) {
        json_t *obj = json_object();
        kvx_topo_nic_t nic;

        kvx_topo_nic(topo, n, &nic);
        *bad |= set_nic_head(obj, &nic) | set_str(obj, "kind", nic.tcp ? "tcp" : "rdma") |
                set_str(obj, "busid", nic.busid) | set_int(obj, "numa", nic.numa);
        *bad |= json_array_append_new(arr, obj) != 0;
    }
    return arr;
}

static json_t *json_hosts(const kvx_topo_choice_t *hosts, size_t n, int *bad)
{
    json_t *arr = json_array();

    for (size_t i = 0; i < n; i++) {
        json_t *obj = json_object();

        *bad |= json_object_set_new(obj, "local_rank", json_integer((json_int_t)i)) != 0;
        *bad |= set_int(obj, "numa", hosts[i].numa) | set_str(obj, "cpuset", hosts[i].cpuset) |
                set_str(obj, "ucx_net_devices", hosts[i].ucx_net_devices) |
                set_str(obj, "reason", hosts[i].reason);
        *bad |= json_array_append_new(arr, obj) != 0;
    }
    return arr;
}

/* One line of compact JSON on stdout; 0, or -1 when it could not be built. */
static int print_json(const kvx_topo_t *topo, const kvx_topo_choice_t *hosts, size_t nhosts)
{
    json_t *doc = json_object(), *gpus, *nics, *no_gpu;
    int bad = 0;

    /* Built first: each may set bad, which is then read. */
    gpus = json_gpus(topo, &bad);
    nics = json_nics(topo, &bad);
    no_gpu = json_hosts(hosts, nhosts, &bad);
    bad |= json_object_set_new(doc, "gpus", gpus) != 0;
    bad |= json_object_set_new(doc, "nics", nics) != 0;
    bad |= json_object_set_new(doc, "no_gpu", no_gpu) != 0;
    bad |= set_str(doc, "source", kvx_topo_source(topo));
    if (!bad) {
        bad = json_dumpf(doc, stdout, JSON_COMPACT) != 0 || putchar('\n') == EOF;
    }
    json_decref(doc);
    if (bad) {
        fprintf(stderr, "kvx-topo: cannot write the JSON (a name that is not UTF-8?)\n");
        return -1;
    }
    return 0;
}

/* ---- main ----------------------------------------------------------------- */

int main(int argc, char **argv)
{
    static const struct option options[] = { { "xml", required_argument, NULL, 'x' },
                                             { "json", no_argument, NULL, 'j' },
                                             { "help", no_argument, NULL, 'h' },
                                             { NULL, 0, NULL, 0 } };
    kvx_topo_choice_t hosts[TOPO_RANKS_MAX];
    const char *xml = NULL;
    int json = 0, opt;
    kvx_topo_t *topo;
    kvx_failure_t why;
    size_t nhosts;
    int rc = 0;

    while ((opt = getopt_long(argc, argv, "x:jh", options, NULL)) != -1) {
        switch (opt) {
        case 'x':
            xml = optarg;
            break;
        case 'j':
            json = 1;
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
    if (kvx_topo_create(xml, &topo, &why) != KVX_OK) {
        char line[512];

        kvx_failure_format(&why, line, sizeof(line));
        fprintf(stderr, "kvx-topo: %s\n", line);
        return 1;
    }
    nhosts = host_choices(topo, hosts, TOPO_RANKS_MAX);
    if (json) {
        rc = print_json(topo, hosts, nhosts) == 0 ? 0 : 1;
    } else {
        print_header(topo);
        print_matrix(topo);
        print_nics(topo);
        print_gpus(topo);
        print_hosts(hosts, nhosts);
        printf("# OK\n");
    }
    kvx_topo_destroy(topo);
    return rc;
}
