/*
 * test_topo_override.c - KVX_NET_DEVICES and KVX_GPU_NIC_MAP replace the
 * automatic choice, for the GPUs they name, with what they name; bus ids in
 * CUDA's and nvidia-smi's spellings find their GPU; every rank computes the
 * same assignment.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "topo_test.h"

static topo_t *load(const char *xml_rel, const char *const *env)
{
    topo_t *topo;
    kvx_failure_t why;

    cr_assert_eq(topo_test_load(xml_rel, env, &topo, &why), KVX_OK, "%s", why.text);
    return topo;
}

Test(topo_override, gpu_nic_map_replaces_named_gpus_only)
{
    const char *env[] = { "KVX_GPU_NIC_MAP=0000:53:00.0=rdmap147s0:1;0000:64:00.0=rdmap96s0",
                          NULL };
    topo_t *topo = load(TOPO_P5, env);
    const topo_gpu_t *g0 = topo_gpu_find(topo, "0000:53:00.0");
    const topo_gpu_t *g1 = topo_gpu_find(topo, "0000:64:00.0");
    const topo_gpu_t *g2 = topo_gpu_find(topo, "0000:75:00.0");

    cr_expect_str_eq(g0->info.ucx_net_devices, "rdmap147s0:1");
    cr_expect_eq(g0->info.path, KVX_TOPO_PATH_SYS, "the map may choose a far NIC");
    cr_expect_eq(g0->info.gdr_advised, 0);
    cr_expect_eq(g0->info.overridden, 1);
    cr_expect_str_eq(g0->info.reason, "uses the NICs KVX_GPU_NIC_MAP chooses, at SYS from it; "
                                      "GPUDirect RDMA not advised beyond PXB");
    /* A bare RDMA device name means all its active ports. */
    cr_expect_str_eq(g1->info.ucx_net_devices, "rdmap96s0:1");
    cr_expect_eq(g1->info.gdr_advised, 1);
    cr_expect_str_eq(g2->info.ucx_net_devices,
                     "rdmap113s0:1,rdmap114s0:1,rdmap115s0:1,rdmap116s0:1");
    cr_expect_eq(g2->info.overridden, 0);
    topo_destroy(topo);
}

Test(topo_override, gpu_nic_map_accepts_cuda_and_nvidia_smi_bus_ids)
{
    const char *env[] = { "KVX_GPU_NIC_MAP=00000000:A8:00.0=rdmap201s0:1;ca:00.0=rdmap79s0:1",
                          NULL };
    topo_t *topo = load(TOPO_P5, env);

    cr_expect_str_eq(topo_gpu_find(topo, "0000:a8:00.0")->info.ucx_net_devices, "rdmap201s0:1");
    cr_expect_str_eq(topo_gpu_find(topo, "0000:ca:00.0")->info.ucx_net_devices, "rdmap79s0:1");
    topo_destroy(topo);
}

Test(topo_override, bus_id_spellings_find_the_gpu)
{
    topo_t *topo = load(TOPO_P5, NULL);
    const char *spellings[] = { "0000:a8:00.0", "0000:A8:00.0", "00000000:A8:00.0", "a8:00.0",
                                "0:a8:0.0" };

    for (size_t i = 0; i < sizeof(spellings) / sizeof(spellings[0]); i++) {
        kvx_topo_choice_t c;
        kvx_failure_t why;

        cr_assert_eq(topo_choose(topo, spellings[i], 0, &c, &why), KVX_OK, "%s: %s", spellings[i],
                     why.text);
        cr_expect_eq(c.gpu, 5, "%s", spellings[i]);
        cr_expect_str_eq(c.ucx_net_devices, "rdmap164s0:1,rdmap165s0:1,rdmap166s0:1,rdmap167s0:1");
    }
    topo_destroy(topo);
}

Test(topo_override, net_devices_apply_to_every_rank)
{
    const char *env[] = { "KVX_NET_DEVICES=mlx5_3:1,mlx5_0", NULL };
    topo_t *topo = load(TOPO_LASSEN, env);
    kvx_topo_choice_t c;

    for (size_t g = 0; g < topo->ngpus; g++) {
        cr_expect_str_eq(topo->gpus[g].info.ucx_net_devices, "mlx5_3:1,mlx5_0:1");
        cr_expect_eq(topo->gpus[g].info.path, KVX_TOPO_PATH_SYS, "the farther of the two");
        cr_expect_eq(topo->gpus[g].info.overridden, 1);
    }
    cr_assert_eq(topo_choose(topo, NULL, 3, &c, NULL), KVX_OK);
    cr_expect_str_eq(c.ucx_net_devices, "mlx5_3:1,mlx5_0:1");
    cr_expect_str_eq(c.reason, "no GPU: uses the NICs KVX_NET_DEVICES chooses");
    topo_destroy(topo);
}

Test(topo_override, gpu_nic_map_wins_over_net_devices)
{
    const char *env[] = { "KVX_NET_DEVICES=mlx5_1:1", "KVX_GPU_NIC_MAP=0035:03:00.0=mlx5_2:1",
                          NULL };
    topo_t *topo = load(TOPO_LASSEN, env);

    cr_expect_str_eq(topo_gpu_find(topo, "0004:04:00.0")->info.ucx_net_devices, "mlx5_1:1");
    cr_expect_str_eq(topo_gpu_find(topo, "0035:03:00.0")->info.ucx_net_devices, "mlx5_2:1");
    cr_expect_str_eq(topo_gpu_find(topo, "0035:04:00.0")->info.ucx_net_devices, "mlx5_1:1");
    topo_destroy(topo);
}

Test(topo_override, bare_name_takes_every_active_port)
{
    const char *env[] = { "KVX_NET_DEVICES=mlx5_1,mlx5_0", NULL };
    topo_t *topo = load(TOPO_PXB, env);

    cr_expect_str_eq(topo->gpus[0].info.ucx_net_devices, "mlx5_1:1,mlx5_1:2,mlx5_0:1");
    topo_destroy(topo);
}

Test(topo_override, repeated_devices_are_used_once)
{
    const char *env[] = { "KVX_NET_DEVICES=mlx5_0:1,mlx5_0,mlx5_0:1", NULL };
    topo_t *topo = load(TOPO_PXB, env);

    cr_expect_str_eq(topo->gpus[1].info.ucx_net_devices, "mlx5_0:1");
    cr_expect_eq(topo->gpus[1].info.nic_count, 1);
    topo_destroy(topo);
}

/* Every rank loads the same topology and must reach the same answer
 * without talking to the others. */
Test(topo_override, assignment_is_the_same_on_every_load)
{
    const char *files[] = { TOPO_P4D, TOPO_P5, TOPO_LASSEN, TOPO_PXB };

    for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
        topo_t *a = load(files[f], NULL), *b = load(files[f], NULL);

        cr_assert_eq(a->ngpus, b->ngpus);
        for (size_t g = 0; g < a->ngpus; g++) {
            kvx_topo_choice_t c;

            cr_expect_str_eq(a->gpus[g].info.ucx_net_devices, b->gpus[g].info.ucx_net_devices);
            cr_assert_eq(topo_choose(b, a->gpus[g].info.busid, 7, &c, NULL), KVX_OK);
            cr_expect_eq(c.gpu, (int)g);
            cr_expect_str_eq(c.ucx_net_devices, a->gpus[g].info.ucx_net_devices);
            cr_expect_str_eq(c.cpuset, a->gpus[g].info.cpuset);
        }
        topo_destroy(a);
        topo_destroy(b);
    }
}
