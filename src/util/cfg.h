/*
 * cfg.h - kvx's configuration: every KVX_* environment variable is one row of
 * one table (cfg.c), parsed into one struct. No other file reads KVX_*
 * variables (tests/check-getenv.sh enforces it).
 */
#ifndef KVX_UTIL_CFG_H
#define KVX_UTIL_CFG_H

#include <kvx.h>

#include <stdint.h>

typedef struct cfg_list {
    size_t count;
    char **items;
} cfg_list_t;

/* KVX_BIND: how a rank is bound near its GPU. */
typedef enum cfg_bind { CFG_BIND_NONE = 0, CFG_BIND_CPU, CFG_BIND_CPU_MEM } cfg_bind_t;

/* KVX_PROGRESS, in cfg.c's order. */
typedef enum cfg_progress {
    CFG_PROGRESS_ADAPTIVE = 0, /* the thread spins briefly, then sleeps; polls progress too */
    CFG_PROGRESS_BUSY,         /* the thread alone, never sleeping */
    CFG_PROGRESS_CALLER        /* every room call progresses; the thread dozes meanwhile */
} cfg_progress_t;

/* KVX_MEM_PATH: how KV pages move between pools. */
typedef enum cfg_mem_path {
    CFG_MEM_PATH_AUTO = 0,
    CFG_MEM_PATH_DIRECT,
    CFG_MEM_PATH_STAGED
} cfg_mem_path_t;

typedef struct kvx_cfg {
    int log_level;               /* KVX_LOG_LEVEL */
    char *log_file;              /* KVX_LOG_FILE */
    char *layout;                /* KVX_LAYOUT */
    uint64_t bootstrap_timeout;  /* KVX_BOOTSTRAP_TIMEOUT, ns */
    uint64_t waiting_timeout;    /* KVX_WAITING_TIMEOUT, ns */
    uint64_t transfer_timeout;   /* KVX_TRANSFER_TIMEOUT, ns */
    uint64_t keepalive_interval; /* KVX_KEEPALIVE_INTERVAL, ns */
    uint64_t peer_timeout;       /* KVX_PEER_TIMEOUT, ns */
    uint64_t shutdown_timeout;   /* KVX_SHUTDOWN_TIMEOUT, ns */
    uint64_t drain_timeout;      /* KVX_DRAIN_TIMEOUT, ns */
    uint64_t tp_timeout;         /* KVX_TP_TIMEOUT, ns */
    char *fault;                 /* KVX_FAULT */
    uint64_t max_inflight_bytes; /* KVX_MAX_INFLIGHT_BYTES */
    long long max_inflight_ops;  /* KVX_MAX_INFLIGHT_OPS */
    long long worker_groups;     /* KVX_WORKER_GROUPS */
    int progress;                /* KVX_PROGRESS: cfg_progress_t */
    int ep_err_mode;             /* KVX_EP_ERR_MODE: 0 auto, 1 peer, 2 none */
    int writes;                  /* KVX_WRITES: 0 auto, 1 put, 2 message */
    int pool_alloc;              /* KVX_POOL_ALLOC: 0 host, 1 ucx */
    int verify;                  /* KVX_VERIFY: 0 off, 1 sample, 2 full */
    long long verify_sample;     /* KVX_VERIFY_SAMPLE: one unit in this many */
    uint64_t staging_bytes;      /* KVX_STAGING_BYTES */
    int mem_path;                /* KVX_MEM_PATH, a cfg_mem_path_t */
    char *cuda_library;          /* KVX_CUDA_LIBRARY */
    char *metrics_file;          /* KVX_METRICS_FILE */
    char *run_status_dir;        /* KVX_RUN_STATUS_DIR (kvx-run) */
    uint64_t metrics_interval;   /* KVX_METRICS_INTERVAL, ns */
    uint64_t health_progress;    /* KVX_HEALTH_PROGRESS_TIMEOUT, ns */
    uint64_t health_stall;       /* KVX_HEALTH_STALL_TIMEOUT, ns */
    long long health_quarantine; /* KVX_HEALTH_QUARANTINE_PAGES, 0: a tenth of the pool */
    char *join_key_file;         /* KVX_JOIN_KEY_FILE */
    char *join_listen;           /* KVX_JOIN_LISTEN */
    char *join_address_file;     /* KVX_JOIN_ADDRESS_FILE */
    char *join;                  /* KVX_JOIN */
    uint64_t join_timeout;       /* KVX_JOIN_TIMEOUT, ns */
    long long join_max;          /* KVX_JOIN_MAX */

    /* ---- topology (src/topo) ---- */
    char *topo_xml;         /* KVX_TOPO_XML */
    cfg_list_t net_devices; /* KVX_NET_DEVICES */
    char *gpu_nic_map;      /* KVX_GPU_NIC_MAP */
    int bind;               /* KVX_BIND, a cfg_bind_t */
    /* ---- end of topology ---- */
} kvx_cfg_t;

typedef enum cfg_type {
    CFG_INT,
    CFG_SIZE,
    CFG_TIME,
    CFG_BOOL,
    CFG_ENUM,
    CFG_LIST,
    CFG_STRING
} cfg_type_t;

/* Parsers, one per type. On error they fill *why with the accepted form. */
kvx_status_t cfg_parse_int(const char *s, long long min, long long max, long long *out, char *why,
                           size_t why_len);
kvx_status_t cfg_parse_size(const char *s, uint64_t *out, char *why, size_t why_len);
kvx_status_t cfg_parse_time(const char *s, uint64_t *ns_out, char *why, size_t why_len);
kvx_status_t cfg_parse_bool(const char *s, int *out, char *why, size_t why_len);
kvx_status_t cfg_parse_enum(const char *s, const char *const *values, int *out, char *why,
                            size_t why_len);
kvx_status_t cfg_parse_list(const char *s, cfg_list_t *out, char *why, size_t why_len);
void cfg_list_free(cfg_list_t *list);

/* Parses the KVX_* variables of envp (an environ-style array) into *cfg; the
 * first malformed value stops it with KVX_ERR_CONFIG and a reason naming the
 * variable and the accepted form. Unknown KVX_* names are reported through
 * warn (may be NULL) with the nearest known name. */
typedef void (*cfg_warn_fn_t)(const char *name, const char *nearest, void *arg);
kvx_status_t cfg_load(kvx_cfg_t *cfg, char *const *envp, cfg_warn_fn_t warn, void *warn_arg,
                      kvx_failure_t *reason_p);
void cfg_cleanup(kvx_cfg_t *cfg);

/* The nearest known variable name to name (edit distance). */
const char *cfg_nearest(const char *name);

/* The process configuration, parsed from environ once (thread safe). If it
 * was malformed, status_p/reason_p say why and defaults are returned. */
const kvx_cfg_t *cfg_global(kvx_status_t *status_p, kvx_failure_t *reason_p);

/* Warns through the logger about every unknown KVX_* name in environ (done
 * once per context creation, and by kvx_config_check). */
void cfg_warn_unknown_env(void);

#endif
