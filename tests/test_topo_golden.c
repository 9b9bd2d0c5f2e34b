/*
 * test_topo_golden.c - every stored topology against the expectations
 * derived by hand from lstopo (tests/data/topo/NAME.expect, each saying how):
 * the NIC columns, each GPU's NUMA node and CPUs, the path class matrix,
 * the NICs each GPU uses with the GPUDirect advice, and what ranks without a
 * GPU use.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <string.h>

#include "topo_test.h"

#define GOLDEN_WORDS 40

typedef struct golden {
    const char *name;
    topo_t *topo;
    size_t line;
    size_t gpus, paths, uses; /* lines seen of each kind */
} golden_t;

static const topo_gpu_t *golden_gpu(golden_t *g, const char *busid)
{
    const topo_gpu_t *gpu = topo_gpu_find(g->topo, busid);

    cr_assert_not_null(gpu, "%s:%zu: no GPU %s", g->name, g->line, busid);
    return gpu;
}

static void golden_nics(golden_t *g, char **w, size_t n)
{
    cr_assert_eq(n - 1, g->topo->nnics, "%s:%zu: %zu NICs expected, %zu found", g->name, g->line,
                 n - 1, g->topo->nnics);
    for (size_t i = 1; i < n; i++) {
        cr_expect_str_eq(g->topo->nics[i - 1].info.ucx_name, w[i], "%s:%zu: NIC%zu", g->name,
                         g->line, i - 1);
    }
}

static void golden_gpu_line(golden_t *g, char **w, size_t n)
{
    const topo_gpu_t *gpu = golden_gpu(g, w[1]);

    cr_assert_eq(n, 6, "%s:%zu: gpu BUSID numa N cpuset LIST", g->name, g->line);
    cr_expect_eq(gpu->info.numa, atoi(w[3]), "%s:%zu: NUMA node of %s", g->name, g->line, w[1]);
    cr_expect_str_eq(gpu->info.cpuset, w[5], "%s:%zu: CPUs of %s", g->name, g->line, w[1]);
    g->gpus++;
}

static void golden_path(golden_t *g, char **w, size_t n)
{
    const topo_gpu_t *gpu = golden_gpu(g, w[1]);
    size_t row = (size_t)(gpu - g->topo->gpus);

    cr_assert_eq(n - 2, g->topo->nnics, "%s:%zu: one class per NIC", g->name, g->line);
    for (size_t i = 0; i < g->topo->nnics; i++) {
        cr_expect_str_eq(kvx_topo_path_name(topo_path_of(g->topo, row, i)), w[i + 2],
                         "%s:%zu: %s to NIC%zu (%s)", g->name, g->line, w[1], i,
                         g->topo->nics[i].info.ucx_name);
    }
    g->paths++;
}

static void golden_use(golden_t *g, char **w, size_t n)
{
    const topo_gpu_t *gpu = golden_gpu(g, w[1]);

    cr_assert_eq(n, 5, "%s:%zu: use BUSID DEVICES gdr yes|no", g->name, g->line);
    cr_expect_str_eq(gpu->info.ucx_net_devices, w[2], "%s:%zu: NICs of %s", g->name, g->line, w[1]);
    cr_expect_eq(gpu->info.gdr_advised, strcmp(w[4], "yes") == 0, "%s:%zu: GPUDirect of %s",
                 g->name, g->line, w[1]);
    g->uses++;
}

static void golden_nogpu(golden_t *g, char **w, size_t n)
{
    kvx_topo_choice_t c;

    cr_assert_eq(n, 5, "%s:%zu: nogpu RANK DEVICES numa N", g->name, g->line);
    cr_assert_eq(topo_choose(g->topo, NULL, atoi(w[1]), &c, NULL), KVX_OK);
    cr_expect_eq(c.gpu, -1);
    cr_expect_str_eq(c.ucx_net_devices, w[2], "%s:%zu: local rank %s", g->name, g->line, w[1]);
    cr_expect_eq(c.numa, atoi(w[4]), "%s:%zu: NUMA node of local rank %s", g->name, g->line, w[1]);
}

static void golden_line(golden_t *g, char *line)
{
    char *w[GOLDEN_WORDS], *save = NULL;
    size_t n = 0;

    for (char *t = strtok_r(line, " \t\n", &save); t != NULL && n < GOLDEN_WORDS;
         t = strtok_r(NULL, " \t\n", &save)) {
        w[n++] = t;
    }
    if (n == 0 || w[0][0] == '#') {
        return;
    }
    if (strcmp(w[0], "nics") == 0) {
        golden_nics(g, w, n);
    } else if (strcmp(w[0], "gpu") == 0) {
        golden_gpu_line(g, w, n);
    } else if (strcmp(w[0], "path") == 0) {
        golden_path(g, w, n);
    } else if (strcmp(w[0], "use") == 0) {
        golden_use(g, w, n);
    } else if (strcmp(w[0], "nogpu") == 0) {
        golden_nogpu(g, w, n);
    } else {
        cr_assert_fail("%s:%zu: unknown line '%s'", g->name, g->line, w[0]);
    }
}

static void golden_check(const char *name, const char *xml_rel)
{
    char expect_rel[256], line[4096];
    golden_t g = { name, NULL, 0, 0, 0, 0 };
    kvx_failure_t why;
    FILE *f;

    cr_assert_eq(topo_test_load(xml_rel, NULL, &g.topo, &why), KVX_OK, "%s: %s", name, why.text);
    snprintf(expect_rel, sizeof(expect_rel), "tests/data/topo/%s.expect", name);
    f = fopen(topo_test_path(expect_rel), "r");
    cr_assert_not_null(f, "cannot open %s", expect_rel);
    while (fgets(line, sizeof(line), f) != NULL) {
        g.line++;
        golden_line(&g, line);
    }
    fclose(f);
    cr_expect_eq(g.gpus, g.topo->ngpus, "%s: every GPU has a gpu line", name);
    cr_expect_eq(g.paths, g.topo->ngpus, "%s: every GPU has a path line", name);
    cr_expect_eq(g.uses, g.topo->ngpus, "%s: every GPU has a use line", name);
    topo_destroy(g.topo);
}

Test(topo_golden, aws_p4d)
{
    golden_check("aws-p4d.24xlarge", TOPO_P4D);
}

Test(topo_golden, aws_p5)
{
    golden_check("aws-p5.48xlarge", TOPO_P5);
}

Test(topo_golden, llnl_lassen)
{
    golden_check("llnl-lassen", TOPO_LASSEN);
}

Test(topo_golden, synthetic_pxb)
{
    golden_check("synthetic-pxb", TOPO_PXB);
}

Test(topo_golden, synthetic_snc_tcp)
{
    golden_check("synthetic-snc-tcp", TOPO_SNC_TCP);
}

/* A topology added to the test data without expectations would be tested
 * by nothing: every XML there needs its .expect file. */
Test(topo_golden, every_stored_topology_has_expectations)
{
    DIR *dir = opendir(topo_test_path("tests/data/topologies"));
    struct dirent *e;
    size_t xmls = 0;

    cr_assert_not_null(dir);
    while ((e = readdir(dir)) != NULL) {
        char rel[512];
        size_t len = strlen(e->d_name);
        FILE *f;

        if (len < 5 || strcmp(e->d_name + len - 4, ".xml") != 0) {
            continue;
        }
        xmls++;
        snprintf(rel, sizeof(rel), "tests/data/topo/%.*s.expect", (int)(len - 4), e->d_name);
        f = fopen(topo_test_path(rel), "r");
        cr_expect_not_null(f, "%s has no %s", e->d_name, rel);
        if (f != NULL) {
            fclose(f);
        }
    }
    closedir(dir);
    cr_expect_eq(xmls, 3, "the three shared topologies are stored");
}
