/*
 * topo_test.h - helpers of the topology tests: files of the source tree, and
 * loading a topology under a given set of KVX_* variables.
 */
#ifndef KVX_TESTS_TOPO_TEST_H
#define KVX_TESTS_TOPO_TEST_H

#include <criterion/criterion.h>
#include <kvx.h>
#include <stdio.h>
#include <stdlib.h>

#include "topo/topo.h"
#include "util/cfg.h"

#define TOPO_P4D     "tests/data/topologies/aws-p4d.24xlarge.xml"
#define TOPO_P5      "tests/data/topologies/aws-p5.48xlarge.xml"
#define TOPO_LASSEN  "tests/data/topologies/llnl-lassen.xml"
#define TOPO_PXB     "tests/data/topo/synthetic-pxb.xml"
#define TOPO_SNC_TCP "tests/data/topo/synthetic-snc-tcp.xml"

/* A file of the source tree (the harness exports top_srcdir); the last four
 * results stay valid. */
static inline const char *topo_test_path(const char *rel)
{
    static char paths[4][4096];
    static unsigned next;
    const char *top = getenv("top_srcdir");
    char *out = paths[next++ % 4];

    snprintf(out, sizeof(paths[0]), "%s/%s", top != NULL ? top : ".", rel);
    return out;
}

/* The configuration of env, a NULL-terminated list of "KVX_...=value" (NULL
 * for none); free it with cfg_cleanup(). */
static inline void topo_test_cfg(const char *const *env, kvx_cfg_t *cfg)
{
    char *envp[16] = { NULL };

    for (size_t n = 0; env != NULL && env[n] != NULL && n < 15; n++) {
        envp[n] = (char *)env[n];
    }
    cr_assert_eq(cfg_load(cfg, envp, NULL, NULL, NULL), KVX_OK);
}

/* Loads xml_rel (a file of the source tree; NULL for this machine or
 * KVX_TOPO_XML) under env. */
static inline kvx_status_t topo_test_load(const char *xml_rel, const char *const *env,
                                          topo_t **topo_p, kvx_failure_t *why)
{
    kvx_cfg_t cfg;
    kvx_status_t status;

    topo_test_cfg(env, &cfg);
    status = topo_create(&cfg, xml_rel != NULL ? topo_test_path(xml_rel) : NULL, topo_p, why);
    cfg_cleanup(&cfg);
    return status;
}

#endif
