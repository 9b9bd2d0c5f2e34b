/*
 * test_topo.c - the small pieces of src/topo (bus id spelling, path class
 * names) and the public kvx_topo_* view.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "topo_test.h"

Test(topo_busid, spellings_normalize_to_lower_case_with_domain)
{
    struct {
        const char *in, *out;
    } good[] = { { "0000:53:00.0", "0000:53:00.0" },     { "00000000:B3:00.0", "0000:b3:00.0" },
                 { "0035:04:00.0", "0035:04:00.0" },     { "b3:00.0", "0000:b3:00.0" },
                 { "0:3:1f.7", "0000:03:1f.7" },         { "ABCD:ef:01.1", "abcd:ef:01.1" },
                 { "00010000:01:00.0", "10000:01:00.0" } };
    const char *bad[] = { "",
                          "0000:53:00",
                          "x000:53:00.0",
                          "0000:53:00.0.0",
                          "0000:53:00.9",
                          "0000:53:40.0",
                          "000000000:53:00.0",
                          "0000::00.0",
                          NULL };
    char out[32];

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        cr_expect_eq(topo_busid_parse(good[i].in, out, sizeof(out)), 0, "%s", good[i].in);
        cr_expect_str_eq(out, good[i].out, "%s", good[i].in);
    }
    for (size_t i = 0; bad[i] != NULL; i++) {
        cr_expect_eq(topo_busid_parse(bad[i], out, sizeof(out)), -1, "%s", bad[i]);
    }
    cr_expect_eq(topo_busid_parse(NULL, out, sizeof(out)), -1);
}

Test(topo_path, names_in_nvidia_smi_order)
{
    const char *names[] = { "PIX", "PXB", "PHB", "NODE", "SYS" };

    for (int p = KVX_TOPO_PATH_PIX; p <= KVX_TOPO_PATH_SYS; p++) {
        cr_expect_str_eq(kvx_topo_path_name((kvx_topo_path_t)p), names[p]);
    }
    cr_expect_str_eq(kvx_topo_path_name((kvx_topo_path_t)5), "?");
    cr_expect_str_eq(kvx_topo_path_name((kvx_topo_path_t)-1), "?");
}

/* A rank without a GPU takes a NIC on its NUMA node, else one near it (its
 * package, or a set of nodes including it), else any; the path says which. */
Test(topo_choice, rank_without_gpu_prefers_its_node_then_its_package)
{
    struct {
        kvx_topo_path_t path;
        const char *reason;
    } expect[] = {
        { KVX_TOPO_PATH_NODE,
          "no GPU: uses eth0, on its NUMA node 0 (1 of 1 NIC as near, by local rank 0)" },
        { KVX_TOPO_PATH_NODE,
          "no GPU: uses eth0, near its NUMA node 1 (1 of 1 NIC as near, by local rank 1)" },
        { KVX_TOPO_PATH_SYS,
          "no GPU: uses eth0, away from its NUMA node 2 (1 of 1 NIC as near, by local rank 2)" },
    };
    topo_t *topo;
    kvx_failure_t why;

    cr_assert_eq(topo_test_load(TOPO_SNC_TCP, NULL, &topo, &why), KVX_OK, "%s", why.text);
    cr_expect_eq(topo->tcp, 1);
    for (int r = 0; r < 3; r++) {
        kvx_topo_choice_t c;

        cr_assert_eq(topo_choose(topo, NULL, r, &c, NULL), KVX_OK);
        cr_expect_eq(c.path, expect[r].path, "local rank %d", r);
        cr_expect_str_eq(c.reason, expect[r].reason);
        cr_expect_eq(c.gdr_advised, 0);
    }
    topo_destroy(topo);
}

Test(topo_cfg, rows_and_defaults)
{
    kvx_cfg_t cfg;

    topo_test_cfg(NULL, &cfg);
    cr_expect_str_eq(cfg.topo_xml, "");
    cr_expect_eq(cfg.net_devices.count, 0);
    cr_expect_str_eq(cfg.gpu_nic_map, "");
    cr_expect_eq(cfg.bind, CFG_BIND_CPU_MEM);
    cfg_cleanup(&cfg);
}

Test(topo_public, p5_through_the_public_api)
{
    kvx_topo_t *topo;
    kvx_topo_gpu_t gpu;
    kvx_topo_nic_t nic;
    kvx_topo_path_t path;
    kvx_topo_choice_t c;
    kvx_failure_t why;
    size_t n;

    cr_assert_eq(kvx_topo_create(topo_test_path(TOPO_P5), &topo, &why), KVX_OK, "%s", why.text);
    cr_expect_eq(kvx_topo_gpu_count(topo), 8);
    cr_expect_eq(kvx_topo_nic_count(topo), 32);
    cr_expect_str_eq(kvx_topo_source(topo), topo_test_path(TOPO_P5));
    cr_assert_eq(kvx_topo_gpu(topo, 7, &gpu), KVX_OK);
    cr_expect_str_eq(gpu.busid, "0000:ca:00.0");
    cr_expect_eq(gpu.nic_count, 4);
    cr_assert_eq(kvx_topo_gpu_nic(topo, 7, 3, &n), KVX_OK);
    cr_assert_eq(kvx_topo_nic(topo, n, &nic), KVX_OK);
    cr_expect_str_eq(nic.name, "rdmap201s0");
    cr_expect_eq(nic.port, 1);
    cr_expect_str_eq(nic.busid, "0000:c9:00.0");
    cr_expect_eq(nic.numa, 1);
    cr_assert_eq(kvx_topo_path(topo, 7, 0, &path), KVX_OK);
    cr_expect_eq(path, KVX_TOPO_PATH_SYS);
    cr_assert_eq(kvx_topo_choose(topo, "0000:ca:00.0", 0, &c, NULL), KVX_OK);
    cr_expect_eq(c.gpu, 7);
    cr_expect_eq(c.numa, 1);
    cr_expect_str_eq(c.cpuset, "48-95");
    kvx_topo_destroy(topo);
}

Test(topo_public, bad_parameters)
{
    kvx_topo_t *topo;
    kvx_topo_gpu_t gpu;
    kvx_topo_nic_t nic;
    kvx_topo_path_t path;
    kvx_topo_choice_t c;
    size_t n;

    cr_expect_eq(kvx_topo_create(NULL, NULL, NULL), KVX_ERR_INVALID_PARAM);
    cr_assert_eq(kvx_topo_create(topo_test_path(TOPO_LASSEN), &topo, NULL), KVX_OK);
    cr_expect_eq(kvx_topo_gpu(topo, 4, &gpu), KVX_ERR_INVALID_PARAM);
    cr_expect_eq(kvx_topo_gpu(topo, 0, NULL), KVX_ERR_INVALID_PARAM);
    cr_expect_eq(kvx_topo_gpu_nic(topo, 0, 1, &n), KVX_ERR_INVALID_PARAM);
    cr_expect_eq(kvx_topo_nic(topo, 4, &nic), KVX_ERR_INVALID_PARAM);
    cr_expect_eq(kvx_topo_path(topo, 0, 4, &path), KVX_ERR_INVALID_PARAM);
    cr_expect_eq(kvx_topo_choose(topo, NULL, 0, NULL, NULL), KVX_ERR_INVALID_PARAM);
    cr_expect_eq(kvx_topo_choose(NULL, NULL, 0, &c, NULL), KVX_ERR_INVALID_PARAM);
    cr_expect_eq(kvx_topo_gpu_count(NULL), 0);
    kvx_topo_destroy(topo);
    kvx_topo_destroy(NULL);
}

Test(topo_public, missing_file_is_an_error_with_a_reason)
{
    kvx_topo_t *topo = NULL;
    kvx_failure_t why;

    cr_expect_eq(kvx_topo_create("/nonexistent.xml", &topo, &why), KVX_ERR_TOPO);
    cr_expect_null(topo, "set only on success");
    cr_expect_str_eq(why.text, "cannot read the topology file '/nonexistent.xml'");
    cr_expect_str_eq(why.foreign, "No such file or directory");
}
