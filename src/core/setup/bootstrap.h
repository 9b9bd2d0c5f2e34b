/*
 * bootstrap.h - context creation's exchange: descriptors, pair checks, peers and endpoints.
 */
#ifndef KVX_CORE_BOOTSTRAP_H
#define KVX_CORE_BOOTSTRAP_H

#include <kvx.h>

#include "core/base/join.h"

/* Exchanges descriptors, validates pairs, creates peers and endpoints. */
kvx_status_t bootstrap_run(kvx_ctx_t *ctx, kvx_failure_t *why);
/* Same, for an instance that joins a running job: its world holds only its
 * own ranks; the n descriptors of the job's ranks came from their doors. */
kvx_status_t bootstrap_run_joined(kvx_ctx_t *ctx, void *const *descs, const size_t *lens, int n,
                                  kvx_failure_t *why);
/* This rank's descriptor as the bootstrap exchanges it (malloc'd). */
kvx_status_t bootstrap_desc(kvx_ctx_t *ctx, void **desc, size_t *len, kvx_failure_t *why);
/* The peers of a joined instance that a later incarnation replaces: lost
 * with how (their rooms fail), their endpoints and keys released, their
 * rank no longer theirs, their slots free once nothing refers to them. */
void bootstrap_retire(kvx_ctx_t *ctx, kvx_role_t role, int instance, const char *how);
/* A rank of a joining instance at this rank's door, hello and descriptor
 * proven: checked as creation checks the ranks of one job (both values named
 * on a mismatch), its instance's geometry recorded, and made a peer with its
 * endpoints when this rank talks to it (*talks). The instance's place is
 * counted in the job from here. */
kvx_status_t bootstrap_take_joined(kvx_ctx_t *ctx, const join_hello_t *hello, const void *desc,
                                   size_t len, int *talks, kvx_failure_t *why);
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
