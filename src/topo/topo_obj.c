/*
 * topo_obj.c - helpers every stage of src/topo shares: recording a failure,
 * cut sentences, finding a GPU, listing GPUs and NICs. Below the stages
 * (discover, path, assign, override, choice, bind), which topo.c runs.
 */
#include "config.h"

#include "topo_obj.h"
#include "util/failure.h"
#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

kvx_status_t topo_fail(kvx_failure_t *reason_p, kvx_status_t status, const char *foreign,
                       const char *fmt, ...)
{
    kvx_failure_t f;
    va_list ap;

    va_start(ap, fmt);
    failure_vset(&f, status, KVX_STAGE_INIT, foreign, fmt, ap);
    va_end(ap);
    if (f.foreign[0] != '\0') {
        kvx_error("%s (%s)", f.text, f.foreign);
    } else {
        kvx_error("%s", f.text);
    }
    failure_copy(reason_p, &f);
    return status;
}

void topo_text(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

topo_gpu_t *topo_gpu_find(const topo_t *topo, const char *busid)
{
    for (size_t g = 0; g < topo->ngpus; g++) {
        if (strcmp(topo->gpus[g].info.busid, busid) == 0) {
            return &topo->gpus[g];
        }
    }
    return NULL;
}

void topo_list_nics(const topo_t *topo, char *out, size_t len)
{
    size_t o = (size_t)snprintf(out, len, topo->nnics > 0 ? "its NICs: " : "it has no NIC");

    for (size_t i = 0; i < topo->nnics && o < len; i++) {
        o += (size_t)snprintf(out + o, len - o, "%s%s", i > 0 ? ", " : "",
                              topo->nics[i].info.ucx_name);
    }
}

void topo_list_gpus(const topo_t *topo, char *out, size_t len)
{
    size_t o = (size_t)snprintf(out, len, topo->ngpus > 0 ? "its GPUs: " : "it has no GPU");

    for (size_t g = 0; g < topo->ngpus && o < len; g++) {
        o +=
            (size_t)snprintf(out + o, len - o, "%s%s", g > 0 ? ", " : "", topo->gpus[g].info.busid);
    }
}
