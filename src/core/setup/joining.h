/*
 * joining.h - instances that join a running job (docs/user/join.md): the
 * door every rank of the job's first role serves, the first contact world
 * rank 0 answers, and the joiner's side of creation.
 */
#ifndef KVX_CORE_JOINING_H
#define KVX_CORE_JOINING_H

#include <kvx.h>

/* A joiner (KVX_JOIN set): its own layout names one instance of one role,
 * "decode:1xT" over a world of T ranks; sets the context's role and TP
 * place. 0 when this is not a joiner. */
int joining_is_joiner(const kvx_ctx_t *ctx);
kvx_status_t joining_own_layout(kvx_ctx_t *ctx, const char *layout, kvx_failure_t *why);
/* A joiner's world rank 0 asks the job for a place; every rank of the
 * joiner's world takes it (collective; the outcome is agreed). */
kvx_status_t joining_contact(kvx_ctx_t *ctx, kvx_failure_t *why);
/* How many ranks and instances the context's arrays hold; with a job key,
 * the places of joiners too, and a door on this rank when it is of the
 * job's first role. Before the bootstrap, on every rank. */
kvx_status_t joining_prepare(kvx_ctx_t *ctx, kvx_failure_t *why);
/* The bootstrap of a joiner: descriptors with every door, then its peers. */
kvx_status_t joining_bootstrap(kvx_ctx_t *ctx, kvx_failure_t *why);
/* The progress thread's ticker: the door, every tick (1-10 ms), so that a
 * job that takes joiners pays no syscall per progress round. */
void joining_tick(kvx_ctx_t *ctx, uint64_t now);
/* After creation: world rank 0 writes its door's address to
 * KVX_JOIN_ADDRESS_FILE. */
void joining_publish(kvx_ctx_t *ctx);
/* Closes the door and frees what joining holds (after the progress thread). */
void joining_cleanup(kvx_ctx_t *ctx);

#endif
