/*
 * bootstrap.h - context creation's exchange: descriptors, pair checks, peers and endpoints.
 */
#ifndef KVX_CORE_BOOTSTRAP_H
#define KVX_CORE_BOOTSTRAP_H

#include <kvx.h>

/* Exchanges descriptors, validates pairs, creates peers and endpoints. */
kvx_status_t bootstrap_run(kvx_ctx_t *ctx, kvx_failure_t *why);
void bootstrap_cleanup(kvx_ctx_t *ctx);
/* Force-closes every endpoint: UCX completes what it still held (with an
 * error) through the usual callbacks. The endpoints of a peer lost across
 * the network whose endpoints UCX still holds as healthy are left open (UCX
 * 1.13 aborts when it closes them, bootstrap.c): returns how many peers'
 * were, and then the workers must not be destroyed either. */
int bootstrap_close_endpoints(kvx_ctx_t *ctx);
/* Same status and reason on every rank of comm: the lowest failing rank's. */
kvx_status_t bootstrap_agree(MPI_Comm comm, kvx_status_t status, kvx_failure_t *why);

#endif
