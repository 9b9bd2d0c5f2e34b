/*
 * protocol.h - inbound control messages: decoded, checked, dispatched.
 */
#ifndef KVX_CORE_PROTOCOL_H
#define KVX_CORE_PROTOCOL_H

#include <kvx.h>

#include "core/base/msg.h"
#include "core/link/peer.h"
#include "ucx/kvx_ucx.h"

#include <stddef.h>

/* The active-message handler: decodes, checks and dispatches a message. */
ucs_status_t protocol_am_cb(void *arg, const void *header, size_t header_length, void *data,
                            size_t length, const ucp_am_recv_param_t *param);
/* Handles one decoded message (also used to replay early messages). */
void protocol_dispatch(kvx_ctx_t *ctx, peer_t *peer, const msg_t *m, const void *buf, size_t len);

#endif
