/*
 * test_topo_local.c - this machine, and applying a choice to this process:
 * a node without a GPU uses its TCP interface (eth0 here) and skips binding
 * with a message; a user's UCX_NET_DEVICES is kept; a topology that is not
 * this machine's, or KVX_BIND=none, binds nothing; HWLOC_THISSYSTEM=1 lets
 * a GPU rank be bound to its GPU's CPUs and NUMA node.
 */
#include "config.h" /* _GNU_SOURCE: sched_getaffinity, CPU_* */

#include <criterion/criterion.h>
#include <sched.h>
#include <string.h>

#include "topo_test.h"

static topo_t *load(const char *xml_rel)
{
    topo_t *topo;
    kvx_failure_t why;

    cr_assert_eq(topo_test_load(xml_rel, NULL, &topo, &why), KVX_OK, "%s", why.text);
    return topo;
}

static void apply(const topo_t *topo, const kvx_topo_choice_t *c, const char *bind,
                  topo_applied_t *a)
{
    char var[64];
    const char *env[] = { var, NULL };
    kvx_cfg_t cfg;
    kvx_failure_t why;

    snprintf(var, sizeof(var), "KVX_BIND=%s", bind);
    topo_test_cfg(env, &cfg);
    cr_assert_eq(topo_apply(topo, c, &cfg, a, &why), KVX_OK, "%s", why.text);
    cfg_cleanup(&cfg);
}

Test(topo_local, no_gpu_uses_the_tcp_interface_eth0)
{
    topo_t *topo = load(NULL);
    kvx_topo_choice_t c;

    if (topo->ngpus > 0 || topo->nnics == 0 || !topo->tcp ||
        strcmp(topo->nics[0].info.name, "eth0") != 0) {
        topo_destroy(topo);
        cr_skip_test("this machine is not the GPU-less one with eth0 the tests were written on");
    }
    cr_expect_str_eq(topo->source, "this machine");
    cr_expect_eq(topo->thissystem, 1);
    cr_expect_str_eq(topo->nics[0].info.ucx_name, "eth0", "TCP is named without a port");
    cr_expect_eq(topo->nics[0].info.port, 0);
    cr_assert_eq(topo_choose(topo, NULL, 0, &c, NULL), KVX_OK);
    cr_expect_eq(c.gpu, -1);
    cr_expect_str_eq(c.ucx_net_devices, "eth0");
    cr_expect_eq(c.gdr_advised, 0);
    cr_expect_eq(strncmp(c.reason, "no GPU: uses eth0, on its NUMA node 0", 37), 0, "%s", c.reason);
    /* Any local rank: there is one NIC. */
    cr_assert_eq(topo_choose(topo, NULL, 5, &c, NULL), KVX_OK);
    cr_expect_str_eq(c.ucx_net_devices, "eth0");
    topo_destroy(topo);
}

Test(topo_local, no_gpu_sets_ucx_net_devices_and_skips_binding)
{
    topo_t *topo = load(NULL);
    cpu_set_t before, after;
    kvx_topo_choice_t c;
    topo_applied_t a;
    char expect[1400];

    if (topo->ngpus > 0 || topo->nnics == 0) {
        topo_destroy(topo);
        cr_skip_test("this machine has a GPU or no NIC");
    }
    unsetenv("UCX_NET_DEVICES");
    cr_assert_eq(sched_getaffinity(0, sizeof(before), &before), 0);
    cr_assert_eq(topo_choose(topo, NULL, 0, &c, NULL), KVX_OK);
    apply(topo, &c, "cpu+mem", &a);
    cr_expect_eq(a.net_set, 1);
    cr_expect_eq(a.net_user, 0);
    cr_expect_str_eq(getenv("UCX_NET_DEVICES"), c.ucx_net_devices);
    cr_expect_str_eq(a.ucx_net_devices, c.ucx_net_devices);
    snprintf(expect, sizeof(expect), "UCX_NET_DEVICES=%s: %s", c.ucx_net_devices, c.reason);
    cr_expect_str_eq(a.net_text, expect);
    cr_expect_eq(a.cpu_bound, 0);
    cr_expect_eq(a.mem_bound, 0);
    cr_expect_str_eq(a.bind_text, "no GPU: binding skipped, the launcher's binding stays");
    cr_assert_eq(sched_getaffinity(0, sizeof(after), &after), 0);
    cr_expect(CPU_EQUAL(&before, &after));
    topo_destroy(topo);
}

Test(topo_local, user_ucx_net_devices_is_kept)
{
    topo_t *topo = load(TOPO_P5);
    kvx_topo_choice_t c;
    topo_applied_t a;

    setenv("UCX_NET_DEVICES", "mlx5_7:1", 1);
    cr_assert_eq(topo_choose(topo, "0000:53:00.0", 0, &c, NULL), KVX_OK);
    apply(topo, &c, "none", &a);
    cr_expect_eq(a.net_set, 0);
    cr_expect_eq(a.net_user, 1);
    cr_expect_str_eq(getenv("UCX_NET_DEVICES"), "mlx5_7:1");
    cr_expect_str_eq(a.ucx_net_devices, "mlx5_7:1");
    cr_expect_eq(strncmp(a.net_text,
                         "UCX_NET_DEVICES=mlx5_7:1 is set by the user and kept (kvx would use "
                         "'rdmap79s0:1,rdmap80s0:1,rdmap81s0:1,rdmap82s0:1': GPU 0000:53:00.0 ",
                         135),
                 0, "%s", a.net_text);
    topo_destroy(topo);
}

/* A second context in the same process may replace kvx's own value. */
Test(topo_local, kvx_replaces_its_own_value)
{
    topo_t *topo = load(TOPO_P5);
    kvx_topo_choice_t c;
    topo_applied_t a;

    unsetenv("UCX_NET_DEVICES");
    cr_assert_eq(topo_choose(topo, "0000:53:00.0", 0, &c, NULL), KVX_OK);
    apply(topo, &c, "none", &a);
    cr_assert_eq(topo_choose(topo, "0000:64:00.0", 0, &c, NULL), KVX_OK);
    apply(topo, &c, "none", &a);
    cr_expect_eq(a.net_set, 1);
    cr_expect_str_eq(getenv("UCX_NET_DEVICES"), "rdmap96s0:1,rdmap97s0:1,rdmap98s0:1,rdmap99s0:1");
    topo_destroy(topo);
}

Test(topo_local, topology_of_another_machine_binds_nothing)
{
    topo_t *topo = load(TOPO_P5);
    cpu_set_t before, after;
    kvx_topo_choice_t c;
    topo_applied_t a;

    unsetenv("UCX_NET_DEVICES");
    cr_assert_eq(sched_getaffinity(0, sizeof(before), &before), 0);
    cr_expect_eq(topo->thissystem, 0);
    cr_assert_eq(topo_choose(topo, "0000:53:00.0", 0, &c, NULL), KVX_OK);
    apply(topo, &c, "cpu+mem", &a);
    cr_expect_eq(a.cpu_bound, 0);
    cr_expect_str_eq(a.bind_text, "the topology is not this machine's: binding skipped "
                                  "(HWLOC_THISSYSTEM=1 asserts that it is)");
    cr_expect_str_eq(getenv("UCX_NET_DEVICES"), "rdmap79s0:1,rdmap80s0:1,rdmap81s0:1,rdmap82s0:1");
    cr_assert_eq(sched_getaffinity(0, sizeof(after), &after), 0);
    cr_expect(CPU_EQUAL(&before, &after));
    topo_destroy(topo);
}

Test(topo_local, kvx_bind_none_binds_nothing)
{
    topo_t *topo;
    kvx_topo_choice_t c;
    topo_applied_t a;

    setenv("HWLOC_THISSYSTEM", "1", 1);
    topo = load(TOPO_PXB);
    cr_assert_eq(topo_choose(topo, "0000:03:00.0", 0, &c, NULL), KVX_OK);
    apply(topo, &c, "none", &a);
    cr_expect_eq(a.cpu_bound, 0);
    cr_expect_str_eq(a.bind_text, "KVX_BIND=none: binding skipped");
    topo_destroy(topo);
}

/* HWLOC_THISSYSTEM=1 makes hwloc take the synthetic file (CPUs 0-7, NUMA
 * node 0) for this machine: the rank is bound to the GPU's CPUs that exist
 * here, and its memory to node 0. */
static void bind_here(const char *mode, int mem)
{
    topo_t *topo;
    cpu_set_t after;
    kvx_topo_choice_t c;
    topo_applied_t a;
    char expect[256];

    setenv("HWLOC_THISSYSTEM", "1", 1);
    topo = load(TOPO_PXB);
    cr_expect_eq(topo->thissystem, 1);
    cr_assert_eq(topo_choose(topo, "0000:07:00.0", 0, &c, NULL), KVX_OK);
    apply(topo, &c, mode, &a);
    cr_expect_eq(a.cpu_bound, 1);
    cr_expect_eq(a.mem_bound, mem);
    snprintf(expect, sizeof(expect), "bound to the CPUs 0-7 of GPU 0000:07:00.0%s",
             mem ? ", memory to their NUMA node" : "");
    cr_expect_str_eq(a.bind_text, expect);
    cr_assert_eq(sched_getaffinity(0, sizeof(after), &after), 0);
    for (int cpu = 8; cpu < CPU_SETSIZE; cpu++) {
        cr_expect(!CPU_ISSET(cpu, &after), "CPU %d is not one of the GPU's", cpu);
    }
    topo_destroy(topo);
}

Test(topo_local, binds_cores_and_memory_near_the_gpu)
{
    bind_here("cpu+mem", 1);
}

Test(topo_local, binds_cores_only)
{
    bind_here("cpu", 0);
}
