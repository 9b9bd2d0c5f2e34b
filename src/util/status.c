/*
 * status.c - names and messages of statuses, roles, states and stages, all
 * generated from the tables in include/kvx.h.
 */
#include "config.h"

#include <kvx.h>

const char *kvx_status_string(kvx_status_t status)
{
    switch (status) {
#define KVX_STATUS_STRING_(name, value, msg) \
    case KVX_##name:                         \
        return msg;
        KVX_STATUS_MAP(KVX_STATUS_STRING_)
#undef KVX_STATUS_STRING_
    }
    return "unknown status";
}

const char *kvx_status_name(kvx_status_t status)
{
    switch (status) {
#define KVX_STATUS_NAME_(name, value, msg) \
    case KVX_##name:                       \
        return "KVX_" #name;
        KVX_STATUS_MAP(KVX_STATUS_NAME_)
#undef KVX_STATUS_NAME_
    }
    return "KVX_UNKNOWN_STATUS";
}

const char *kvx_stage_name(kvx_stage_t stage)
{
    static const char *const names[] = {
#define KVX_STAGE_STRING_(name, str) str,
        KVX_STAGE_MAP(KVX_STAGE_STRING_)
#undef KVX_STAGE_STRING_
    };
    if ((unsigned)stage >= KVX_STAGE_COUNT) {
        return "unknown-stage";
    }
    return names[stage];
}

const char *kvx_role_name(kvx_role_t role)
{
    switch (role) {
    case KVX_ROLE_PREFILL:
        return "prefill";
    case KVX_ROLE_DECODE:
        return "decode";
    case KVX_ROLE_NONE:
        break;
    }
    return "none";
}

const char *kvx_room_state_name(kvx_room_state_t state)
{
    switch (state) {
    case KVX_ROOM_FAILED:
        return "FAILED";
    case KVX_ROOM_BOOTSTRAPPING:
        return "BOOTSTRAPPING";
    case KVX_ROOM_WAITING_FOR_INPUT:
        return "WAITING_FOR_INPUT";
    case KVX_ROOM_TRANSFERRING:
        return "TRANSFERRING";
    case KVX_ROOM_SUCCESS:
        return "SUCCESS";
    }
    return "UNKNOWN";
}
