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

static void json_str(const char *s)
{
    putchar('"');
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '"' || c == '\\') {
            printf("\\%c", c);
        } else if (c < 0x20) {
            printf("\\u%04x", c);
        } else {
            putchar(c);
        }
    }
    putchar('"');
}

/* "key":"value", after a comma unless first. */
static void json_field_str(const char *key, const char *value, int first)
{
    printf("%s\"%s\":", first ? "" : ",", key);
    json_str(value);
}

/* ,"key":value, null when negative (no NUMA node, no port). */
static void json_field_int(const char *key, int value)
{
    if (value >= 0) {
        printf(",\"%s\":%d", key, value);
    } else {
        printf(",\"%s\":null", key);
    }
}

static void json_nic_head(const kvx_topo_nic_t *nic)
{
    json_field_str("name", nic->name, 1);
    json_field_int("port", nic->tcp ? -1 : (int)nic->port);
}

/* A GPU's NICs in the order it uses them, with its path to each. */
static void json_gpu_nics(const kvx_topo_t *topo, size_t g, size_t count)
{
    printf(",\"nics\":[");
    for (size_t i = 0; i < count; i++) {
        kvx_topo_path_t path;
        kvx_topo_nic_t nic;
        size_t n;

        kvx_topo_gpu_nic(topo, g, i, &n);
        kvx_topo_nic(topo, n, &nic);
        kvx_topo_path(topo, g, n, &path);
        printf("%s{", i > 0 ? "," : "");
        json_nic_head(&nic);
        json_field_str("path", kvx_topo_path_name(path), 0);
        printf("}");
    }
    printf("]");
}

static void json_gpus(const kvx_topo_t *topo)
{
    printf("\"gpus\":[");
    for (size_t g = 0; g < kvx_topo_gpu_count(topo); g++) {
        kvx_topo_gpu_t gpu;

        kvx_topo_gpu(topo, g, &gpu);
        printf("%s{", g > 0 ? "," : "");
        json_field_str("busid", gpu.busid, 1);
        json_field_int("numa", gpu.numa);
        json_field_str("cpuset", gpu.cpuset, 0);
        json_gpu_nics(topo, g, gpu.nic_count);
        json_field_str("ucx_net_devices", gpu.ucx_net_devices, 0);
        json_field_str("path", kvx_topo_path_name(gpu.path), 0);
        printf(",\"gdr_advised\":%s", gpu.gdr_advised ? "true" : "false");
        json_field_str("model", gpu.model, 0);
        json_field_str("reason", gpu.reason, 0);
        printf("}");
    }
    printf("]");
}

static void json_nics(const kvx_topo_t *topo)
{
    printf(",\"nics\":[");
    for (size_t n = 0; n < kvx_topo_nic_count(topo); n++) {
        kvx_topo_nic_t nic;

        kvx_topo_nic(topo, n, &nic);
        printf("%s{", n > 0 ? "," : "");
        json_nic_head(&nic);
        json_field_str("kind", nic.tcp ? "tcp" : "rdma", 0);
        json_field_str("busid", nic.busid, 0);
        json_field_int("numa", nic.numa);
        printf("}");
    }
    printf("]");
}

static void json_hosts(const kvx_topo_choice_t *hosts, size_t n)
{
    printf(",\"no_gpu\":[");
    for (size_t i = 0; i < n; i++) {
        printf("%s{\"local_rank\":%zu", i > 0 ? "," : "", i);
        json_field_int("numa", hosts[i].numa);
        json_field_str("cpuset", hosts[i].cpuset, 0);
        json_field_str("ucx_net_devices", hosts[i].ucx_net_devices, 0);
        json_field_str("reason", hosts[i].reason, 0);
        printf("}");
    }
    printf("]");
}

static void print_json(const kvx_topo_t *topo, const kvx_topo_choice_t *hosts, size_t nhosts)
{
    printf("{");
    json_gpus(topo);
    json_nics(topo);
    json_hosts(hosts, nhosts);
    json_field_str("source", kvx_topo_source(topo), 0);
    printf("}\n");
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
        print_json(topo, hosts, nhosts);
    } else {
        print_header(topo);
        print_matrix(topo);
        print_nics(topo);
        print_gpus(topo);
        print_hosts(hosts, nhosts);
        printf("# OK\n");
    }
    kvx_topo_destroy(topo);
    return 0;
}
