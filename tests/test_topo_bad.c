/*
 * test_topo_bad.c - bad input gives a clear error and binds nothing: a
 * missing or malformed XML, a bus id the node does not have (or that is not
 * a bus id), overrides that are malformed or name an absent GPU or NIC.
 * Each case runs the calls a context makes (create, choose, apply) and
 * checks the sentence, and that neither UCX_NET_DEVICES nor the CPU binding
 * changed.
 */
#include "config.h" /* _GNU_SOURCE: sched_getaffinity, CPU_* */

#include <criterion/criterion.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "topo_test.h"

/* What a context does; the first error stops it. */
static kvx_status_t context_sequence(const char *xml_rel, const char *const *env, const char *busid,
                                     kvx_failure_t *why)
{
    topo_t *topo = NULL;
    kvx_topo_choice_t choice;
    kvx_cfg_t cfg;
    kvx_status_t status;

    topo_test_cfg(env, &cfg);
    status = topo_create(&cfg, xml_rel != NULL ? topo_test_path(xml_rel) : NULL, &topo, why);
    if (status == KVX_OK) {
        status = topo_choose(topo, busid, 0, &choice, why);
    }
    if (status == KVX_OK) {
        status = topo_apply(topo, &choice, &cfg, NULL, why);
    }
    topo_destroy(topo);
    cfg_cleanup(&cfg);
    return status;
}

/* Runs the sequence, expects status and a sentence starting with text, and
 * that nothing was bound or set. */
static void expect_rejected(const char *xml_rel, const char *const *env, const char *busid,
                            kvx_status_t status, const char *text)
{
    cpu_set_t before, after;
    kvx_failure_t why;

    unsetenv("UCX_NET_DEVICES");
    cr_assert_eq(sched_getaffinity(0, sizeof(before), &before), 0);
    memset(&why, 0, sizeof(why));
    cr_expect_eq(context_sequence(xml_rel, env, busid, &why), status, "%s", why.text);
    cr_expect_eq(why.status, status);
    cr_expect_eq(why.stage, KVX_STAGE_INIT);
    cr_expect_eq(strncmp(why.text, text, strlen(text)), 0, "got: %s\nexpected: %s...", why.text,
                 text);
    cr_expect_null(getenv("UCX_NET_DEVICES"), "UCX_NET_DEVICES must stay unset");
    cr_assert_eq(sched_getaffinity(0, sizeof(after), &after), 0);
    cr_expect(CPU_EQUAL(&before, &after), "the CPU binding must not change");
}

Test(topo_bad, missing_xml_from_kvx_topo_xml)
{
    const char *env[] = { "KVX_TOPO_XML=/nonexistent/topo.xml", NULL };
    topo_t *topo;
    kvx_failure_t why;

    expect_rejected(NULL, env, NULL, KVX_ERR_TOPO,
                    "cannot read the topology file '/nonexistent/topo.xml' (KVX_TOPO_XML)");
    cr_assert_eq(topo_test_load(NULL, env, &topo, &why), KVX_ERR_TOPO);
    cr_expect_str_eq(why.foreign, "No such file or directory");
}

Test(topo_bad, missing_xml_given)
{
    expect_rejected("tests/data/topologies/no-such.xml", NULL, NULL, KVX_ERR_TOPO,
                    "cannot read the topology file '");
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

static void expect_malformed(const char *text)
{
    char path[] = "/tmp/kvx-topo-XXXXXX", env_var[64], expect[128];
    const char *env[] = { env_var, NULL };
    int fd = mkstemp(path);

    cr_assert_geq(fd, 0);
    close(fd);
    write_file(path, text);
    snprintf(env_var, sizeof(env_var), "KVX_TOPO_XML=%s", path);
    snprintf(expect, sizeof(expect), "'%s' (KVX_TOPO_XML) is not an hwloc XML topology", path);
    expect_rejected(NULL, env, NULL, KVX_ERR_TOPO, expect);
    unlink(path);
}

Test(topo_bad, truncated_xml)
{
    expect_malformed("<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n<object type=\"Mach");
}

Test(topo_bad, not_xml)
{
    expect_malformed("this is not XML\n");
}

Test(topo_bad, empty_file)
{
    expect_malformed("");
}

Test(topo_bad, xml_that_is_not_a_topology)
{
    expect_malformed("<?xml version=\"1.0\"?>\n<kvx/>\n");
}

Test(topo_bad, bus_id_not_on_the_machine)
{
    expect_rejected(TOPO_P5, NULL, "0000:99:00.0", KVX_ERR_TOPO, "the GPU 0000:99:00.0 is not in ");
}

Test(topo_bad, bus_id_on_this_machine_without_gpu)
{
    topo_t *topo;
    kvx_topo_choice_t c;
    kvx_failure_t why;

    cr_assert_eq(topo_test_load(NULL, NULL, &topo, &why), KVX_OK);
    if (topo->ngpus > 0) {
        topo_destroy(topo);
        cr_skip_test("this machine has GPUs");
    }
    cr_expect_eq(topo_choose(topo, "0000:53:00.0", 0, &c, &why), KVX_ERR_TOPO);
    cr_expect_str_eq(why.text, "the GPU 0000:53:00.0 is not in this machine (it has no GPU)");
    topo_destroy(topo);
}

Test(topo_bad, malformed_bus_ids)
{
    const char *bad[] = { "GPU0",          "0000:53:00", "0000:53:00.8",  "0000:53:20.0",
                          "0000:153:00.0", "53-00.0",    "0000:53:00.0 ", ":53:00.0" };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char expect[128];

        snprintf(expect, sizeof(expect), "'%s' is not a PCI bus id", bad[i]);
        expect_rejected(TOPO_P5, NULL, bad[i], KVX_ERR_INVALID_PARAM, expect);
    }
}

Test(topo_bad, net_devices_names_absent_port)
{
    const char *env[] = { "KVX_NET_DEVICES=mlx5_0:1,mlx5_9:1", NULL };

    expect_rejected(TOPO_LASSEN, env, NULL, KVX_ERR_CONFIG,
                    "KVX_NET_DEVICES names the NIC 'mlx5_9:1', which ");
}

Test(topo_bad, net_devices_names_a_port_that_is_down)
{
    const char *env[] = { "KVX_NET_DEVICES=mlx5_0:2", NULL };

    expect_rejected(TOPO_PXB, env, NULL, KVX_ERR_CONFIG,
                    "KVX_NET_DEVICES names the NIC 'mlx5_0:2', which ");
}

/* With RDMA devices on the node kvx uses RDMA: a TCP interface is absent. */
Test(topo_bad, net_devices_names_tcp_interface_on_rdma_node)
{
    const char *env[] = { "KVX_NET_DEVICES=enp71s0", NULL };
    topo_t *topo;
    kvx_failure_t why;

    cr_assert_eq(topo_test_load(TOPO_P5, env, &topo, &why), KVX_ERR_CONFIG);
    cr_expect(strstr(why.text, "names the NIC 'enp71s0', which ") != NULL, "%s", why.text);
    cr_expect(strstr(why.text, "does not have (its NICs: rdmap79s0:1, rdmap80s0:1") != NULL, "%s",
              why.text);
}

Test(topo_bad, gpu_nic_map_names_absent_gpu)
{
    const char *env[] = { "KVX_GPU_NIC_MAP=0000:53:00.0=rdmap79s0:1;0000:99:00.0=rdmap80s0:1",
                          NULL };
    topo_t *topo;
    kvx_failure_t why;

    expect_rejected(TOPO_P5, env, NULL, KVX_ERR_CONFIG,
                    "KVX_GPU_NIC_MAP names the GPU 0000:99:00.0, which ");
    cr_assert_eq(topo_test_load(TOPO_P5, env, &topo, &why), KVX_ERR_CONFIG);
    cr_expect(strstr(why.text, "(its GPUs: 0000:53:00.0, 0000:64:00.0,") != NULL, "%s", why.text);
}

Test(topo_bad, gpu_nic_map_names_absent_nic)
{
    const char *env[] = { "KVX_GPU_NIC_MAP=0004:04:00.0=mlx5_0:1,mlx5_0:2", NULL };

    expect_rejected(TOPO_LASSEN, env, NULL, KVX_ERR_CONFIG,
                    "KVX_GPU_NIC_MAP names the NIC 'mlx5_0:2', which ");
}

Test(topo_bad, gpu_nic_map_malformed)
{
    const char *bad[] = { "0000:53:00.0",
                          "0000:53:00.0=",
                          "=rdmap79s0:1",
                          "gpu0=rdmap79s0:1",
                          "0000:53:00.0=rdmap79s0:1,",
                          "0000:53:00.0=,rdmap79s0:1",
                          "0000:53:00.0=rdmap79s0:1;",
                          ";0000:53:00.0=rdmap79s0:1",
                          "0000:53:00.0=rdmap79s0:1;;0000:64:00.0=rdmap96s0:1" };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char var[128];
        const char *env[] = { var, NULL };

        snprintf(var, sizeof(var), "KVX_GPU_NIC_MAP=%s", bad[i]);
        expect_rejected(TOPO_P5, env, NULL, KVX_ERR_CONFIG, "KVX_GPU_NIC_MAP");
    }
}

Test(topo_bad, gpu_nic_map_entry_error_quotes_the_entry)
{
    const char *env[] = { "KVX_GPU_NIC_MAP=0000:53:00.0=rdmap79s0:1;gpu1=rdmap96s0:1", NULL };
    topo_t *topo;
    kvx_failure_t why;

    cr_assert_eq(topo_test_load(TOPO_P5, env, &topo, &why), KVX_ERR_CONFIG);
    cr_expect_str_eq(why.text, "KVX_GPU_NIC_MAP entry 'gpu1=rdmap96s0:1' is not valid: expected "
                               "busid=dev:port[,dev:port];busid=...");
}

Test(topo_bad, negative_local_rank)
{
    topo_t *topo;
    kvx_topo_choice_t c;
    kvx_failure_t why;

    cr_assert_eq(topo_test_load(TOPO_P5, NULL, &topo, &why), KVX_OK);
    cr_expect_eq(topo_choose(topo, NULL, -1, &c, &why), KVX_ERR_INVALID_PARAM);
    cr_expect_str_eq(why.text, "the local rank -1 is negative");
    topo_destroy(topo);
}

Test(topo_bad, malformed_kvx_bind_is_a_config_error)
{
    char *env[] = { "KVX_BIND=gpu", NULL };
    kvx_cfg_t cfg;
    kvx_failure_t why;

    cr_expect_eq(cfg_load(&cfg, env, NULL, NULL, &why), KVX_ERR_CONFIG);
    cr_expect_str_eq(why.text, "KVX_BIND='gpu' is not valid: expected one of none|cpu|cpu+mem");
}
