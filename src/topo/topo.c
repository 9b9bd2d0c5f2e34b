/*
 * topo.c - the topology object: loading it through hwloc (this machine or
 * an XML file), then discovery, path classes, assignment and overrides.
 */
#include "config.h"

#include "topo.h"
#include "util/failure.h"
#include "util/log.h"

#include <errno.h>
#include <hwloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* hwloc reads the XML file when the backend is set, so a missing file and a
 * malformed one are told apart here, each with the file's name. */
static kvx_status_t topo_load_xml(topo_t *topo, const char *xml, const char *origin,
                                  kvx_failure_t *reason_p)
{
    FILE *f = fopen(xml, "r");

    if (f == NULL) {
        return topo_fail(reason_p, KVX_ERR_TOPO, strerror(errno),
                         "cannot read the topology file '%s'%s", xml, origin);
    }
    fclose(f);
    if (hwloc_topology_set_xml(topo->hw, xml) != 0) {
        return topo_fail(reason_p, KVX_ERR_TOPO, strerror(errno),
                         "'%s'%s is not an hwloc XML topology", xml, origin);
    }
    snprintf(topo->source, sizeof(topo->source), "%s", xml);
    return KVX_OK;
}

static kvx_status_t topo_load(topo_t *topo, const char *xml, const char *origin,
                              kvx_failure_t *reason_p)
{
    kvx_status_t status;

    if (hwloc_topology_init(&topo->hw) != 0) {
        topo->hw = NULL;
        return topo_fail(reason_p, KVX_ERR_TOPO, strerror(errno), "hwloc_topology_init failed");
    }
    /* PCI bridges are kept: the path classes count them. */
    hwloc_topology_set_io_types_filter(topo->hw, HWLOC_TYPE_FILTER_KEEP_ALL);
    snprintf(topo->source, sizeof(topo->source), "this machine");
    if (xml != NULL) {
        status = topo_load_xml(topo, xml, origin, reason_p);
        if (status != KVX_OK) {
            return status;
        }
    }
    if (hwloc_topology_load(topo->hw) != 0) {
        if (xml != NULL) {
            return topo_fail(reason_p, KVX_ERR_TOPO, strerror(errno),
                             "'%s'%s is not an hwloc XML topology (hwloc cannot load it)", xml,
                             origin);
        }
        return topo_fail(reason_p, KVX_ERR_TOPO, strerror(errno),
                         "hwloc could not load the topology of this machine");
    }
    topo->thissystem = hwloc_topology_is_thissystem(topo->hw);
    return KVX_OK;
}

kvx_status_t topo_create(const kvx_cfg_t *cfg, const char *xml_path, topo_t **topo_p,
                         kvx_failure_t *reason_p)
{
    const char *xml = xml_path;
    const char *origin = "";
    kvx_status_t status;
    topo_t *topo;

    if (xml == NULL && cfg->topo_xml != NULL && cfg->topo_xml[0] != '\0') {
        xml = cfg->topo_xml;
        origin = " (KVX_TOPO_XML)";
    }
    topo = calloc(1, sizeof(*topo));
    if (topo == NULL) {
        return topo_fail(reason_p, KVX_ERR_NO_MEMORY, NULL, "out of memory for a topology");
    }
    status = topo_load(topo, xml, origin, reason_p);
    if (status == KVX_OK) {
        status = topo_discover(topo, reason_p);
    }
    if (status == KVX_OK) {
        status = topo_path_fill(topo, reason_p);
    }
    if (status == KVX_OK) {
        status = topo_assign(topo, reason_p);
    }
    if (status == KVX_OK) {
        status = topo_override(topo, cfg, reason_p);
    }
    if (status != KVX_OK) {
        goto err_destroy;
    }
    kvx_debug("topology of %s: %zu GPUs, %zu %s NICs", topo->source, topo->ngpus, topo->nnics,
              topo->tcp ? "TCP" : "RDMA");
    *topo_p = topo;
    return KVX_OK;

err_destroy:
    topo_destroy(topo);
    return status;
}

void topo_destroy(topo_t *topo)
{
    if (topo == NULL) {
        return;
    }
    for (size_t g = 0; g < topo->ngpus; g++) {
        free(topo->gpus[g].rails);
    }
    free(topo->gpus);
    free(topo->nics);
    free(topo->paths);
    free(topo->host_rails);
    if (topo->hw != NULL) {
        hwloc_topology_destroy(topo->hw);
    }
    free(topo);
}
