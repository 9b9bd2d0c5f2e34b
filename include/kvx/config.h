/*
 * kvx/config.h - configuration introspection: every KVX_* environment
 * variable kvx reads, one row each, as kvx-info -c prints them.
 *
 * Included by kvx.h; a program may include either. Uses kvx.h's status
 * codes and failure records.
 */
#ifndef KVX_CONFIG_H
#define KVX_CONFIG_H

#include <kvx.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Configuration: every KVX_* environment variable, one row each.             */
/* ------------------------------------------------------------------------ */

/** One configuration variable, as kvx-info -c prints it. */
typedef struct kvx_config_var {
    const char *name;          /**< "KVX_TRANSFER_TIMEOUT" */
    const char *type;          /**< "time", "size", "int", "bool", "enum", "list", "string" */
    const char *default_value; /**< as text */
    const char *accepted;      /**< the accepted form ("300s, 500ms, 1.5s", "none|cpu|cpu+mem") */
    const char *help;          /**< one sentence */
    const char *value;         /**< the value in this process's environment, or NULL */
} kvx_config_var_t;

/** Number of configuration variables. Thread safe. */
KVX_API size_t kvx_config_count(void);

/**
 * The index-th configuration variable.
 * @return KVX_OK, or KVX_ERR_INVALID_PARAM when index >= kvx_config_count()
 *         or var_p is NULL.
 */
KVX_API kvx_status_t kvx_config_var(size_t index, kvx_config_var_t *var_p);

/**
 * Parses every KVX_* variable of this process's environment as a context
 * would, and warns (through the logger) about unknown KVX_* names.
 * @param reason_p  optional; on KVX_ERR_CONFIG, which variable and why
 * @return KVX_OK or KVX_ERR_CONFIG.
 */
KVX_API kvx_status_t kvx_config_check(kvx_failure_t *reason_p);

#ifdef __cplusplus
}
#endif

#endif /* KVX_CONFIG_H */
