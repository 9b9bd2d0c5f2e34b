/*
 * cfg.c - the table of KVX_* variables and their parsers.
 *
 * To add a variable: add a field to kvx_cfg_t and one row here. kvx-info -c
 * prints the table; cfg_load() fills the struct; nothing else reads KVX_*.
 */
#include "config.h"

#include "cfg.h"
#include "failure.h"
#include "log.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

extern char **environ;

typedef struct cfg_row {
    const char *name;
    cfg_type_t type;
    const char *default_value;
    const char *help;
    size_t offset;             /* of the field in kvx_cfg_t */
    const char *const *values; /* CFG_ENUM: accepted values, NULL-terminated */
    long long min, max;        /* CFG_INT: accepted range */
} cfg_row_t;

static const char *const cfg_log_levels[] = { "error", "warn", "info", "debug", "trace", NULL };
/* In cfg_progress_t order. */
static const char *const cfg_progress_modes[] = { "adaptive", "busy", "caller", NULL };
static const char *const cfg_ep_err_modes[] = { "auto", "peer", "none", NULL };
/* In cfg_mem_path_t order. */
static const char *const cfg_mem_paths[] = { "auto", "direct", "staged", NULL };
static const char *const cfg_write_modes[] = { "auto", "put", "message", NULL };
static const char *const cfg_pool_allocs[] = { "host", "ucx", NULL };
static const char *const cfg_verify_modes[] = { "off", "sample", "full", NULL };
/* In cfg_bind_t order. */
static const char *const cfg_bind_modes[] = { "none", "cpu", "cpu+mem", NULL };

#define CFG_FIELD(field) offsetof(kvx_cfg_t, field)

static const cfg_row_t cfg_table[] = {
    { "KVX_LOG_LEVEL", CFG_ENUM, "warn", "Lowest level of log lines written.", CFG_FIELD(log_level),
      cfg_log_levels, 0, 0 },
    { "KVX_LOG_FILE", CFG_STRING, "",
      "Log file instead of stderr; %h, %p and %r become host, pid and world rank.",
      CFG_FIELD(log_file), NULL, 0, 0 },
    { "KVX_LAYOUT", CFG_STRING, "",
      "Job layout when the application gives none: prefill:AxB,decode:CxD (A prefill instances "
      "of TP B, then C decode instances of TP D).",
      CFG_FIELD(layout), NULL, 0, 0 },
    { "KVX_BOOTSTRAP_TIMEOUT", CFG_TIME, "300s",
      "Deadline of a room in BOOTSTRAPPING: until the other side has opened it.",
      CFG_FIELD(bootstrap_timeout), NULL, 0, 0 },
    { "KVX_WAITING_TIMEOUT", CFG_TIME, "300s",
      "Deadline of a room in WAITING_FOR_INPUT: until the prefill hands over its first pages.",
      CFG_FIELD(waiting_timeout), NULL, 0, 0 },
    { "KVX_TRANSFER_TIMEOUT", CFG_TIME, "300s",
      "Deadline of a room in TRANSFERRING: until every page and the aux row have landed.",
      CFG_FIELD(transfer_timeout), NULL, 0, 0 },
    { "KVX_KEEPALIVE_INTERVAL", CFG_TIME, "100ms",
      "How often a rank tells each peer it is alive when it has nothing else to say.",
      CFG_FIELD(keepalive_interval), NULL, 0, 0 },
    { "KVX_PEER_TIMEOUT", CFG_TIME, "1.5s",
      "A peer on another host (or in another network namespace) silent this long is lost and its "
      "rooms fail with the reason; one on this host is lost as soon as its process is gone, or "
      "when silent 10 times this long.",
      CFG_FIELD(peer_timeout), NULL, 0, 0 },
    { "KVX_SHUTDOWN_TIMEOUT", CFG_TIME, "60s",
      "How long context destroy waits for live peers to say goodbye.", CFG_FIELD(shutdown_timeout),
      NULL, 0, 0 },
    { "KVX_DRAIN_TIMEOUT", CFG_TIME, "5s",
      "How long a failed room's pages wait for every writer to confirm it stopped before they "
      "are quarantined (never reused).",
      CFG_FIELD(drain_timeout), NULL, 0, 0 },
    { "KVX_TP_TIMEOUT", CFG_TIME, "30s",
      "How long the TP ranks of an instance may be out of step: a room that only some of them "
      "hold, or an agreement round that only some of them started, fails with "
      "KVX_ERR_OUT_OF_STEP on every rank after this long.",
      CFG_FIELD(tp_timeout), NULL, 0, 0 },
    { "KVX_FAULT", CFG_STRING, "",
      "Fault injection rules, ';'-separated, e.g. "
      "stage=post,role=prefill,tp=1,every=20,effect=fail "
      "(see kvx-info -f).",
      CFG_FIELD(fault), NULL, 0, 0 },
    { "KVX_MAX_INFLIGHT_BYTES", CFG_SIZE, "64M",
      "Bytes of puts in flight to one peer before further puts wait.",
      CFG_FIELD(max_inflight_bytes), NULL, 0, 0 },
    { "KVX_MAX_INFLIGHT_OPS", CFG_INT, "1024",
      "Puts in flight to one peer before further puts wait.", CFG_FIELD(max_inflight_ops), NULL, 1,
      1 << 20 },
    { "KVX_WORKER_GROUPS", CFG_INT, "16",
      "UCX worker pairs (data, control) of a rank: one for its TP siblings and one per "
      "instance of the other role, at most this many (further instances share them). A rank "
      "killed while writing into a worker's shared-memory queue blocks that queue for every "
      "sender: apart, a dead instance cannot stall the others. 1: one pair for all peers.",
      CFG_FIELD(worker_groups), NULL, 1, 1024 },
    { "KVX_EP_ERR_MODE", CFG_ENUM, "auto",
      "UCX error handling of endpoints: auto (peer mode wherever a lane crosses a network, none "
      "on shared memory, where it costs bandwidth), peer, or none (UCX then aborts the process "
      "on a transport error).",
      CFG_FIELD(ep_err_mode), cfg_ep_err_modes, 0, 0 },
    { "KVX_WRITES", CFG_ENUM, "auto",
      "How a decode rank asks each prefill rank to deliver its pages: auto (one-sided puts where "
      "the endpoint has a native RMA transport -- RDMA, or shared memory for runs under 64 KiB "
      "per layer and component -- and data messages where UCX would emulate puts, as over TCP, "
      "and on one host for larger runs that land contiguous in a host pool, which UCX then "
      "receives straight into the pages with one CMA read), put, or message. The decode rank "
      "chooses, per room and writer.",
      CFG_FIELD(writes), cfg_write_modes, 0, 0 },
    { "KVX_POOL_ALLOC", CFG_ENUM, "host",
      "Who allocates the host pool kvx allocates itself: host (page-aligned memory of this "
      "process) or ucx (ucp_mem_map ALLOCATE: shared memory UCX's shared-memory transports put "
      "into directly, about 3x faster on one host; but UCX 1.13 then aborts a surviving rank in "
      "ucp_ep_set_failed when a peer dies mid-transfer).",
      CFG_FIELD(pool_alloc), cfg_pool_allocs, 0, 0 },
    { "KVX_VERIFY", CFG_ENUM, "off",
      "Whether a decode rank checks the KV that landed against the writer's XXH3 digests before "
      "a room may be SUCCESS: off, sample (each unit of (layer, component, up to 64 consecutive "
      "pages) with chance 1 in KVX_VERIFY_SAMPLE, and the aux row) or full. A mismatch fails "
      "the room with KVX_ERR_CORRUPT at stage verify. CUDA pools are read back to be digested.",
      CFG_FIELD(verify), cfg_verify_modes, 0, 0 },
    { "KVX_VERIFY_SAMPLE", CFG_INT, "32",
      "With KVX_VERIFY=sample: each unit is checked with chance 1 in this many, drawn from the "
      "room id and the unit (the same on both sides). 32 keeps sample within about 5 % of "
      "off where full halves the throughput (docs/perf/notes/2026-12-02-verify.md).",
      CFG_FIELD(verify_sample), NULL, 1, 1 << 20 },
    { "KVX_PROGRESS", CFG_ENUM, "adaptive",
      "Who progresses UCX and how the progress thread waits: adaptive (the thread spins briefly, "
      "then sleeps on the UCX event fd; kvx_room_poll progresses too), busy (the thread never "
      "sleeps; one core per rank) or caller (for an application that polls its rooms in a loop: "
      "every room call progresses, a poll unless a pass ran since it last polled that room, and "
      "the thread dozes while the calls go on, taking over within 2 ms of the last one).",
      CFG_FIELD(progress), cfg_progress_modes, 0, 0 },
    { "KVX_STAGING_BYTES", CFG_SIZE, "32M",
      "Registered host memory a rank sets aside, when its TP ratio or the staged path needs it, "
      "to pack strided heads into one put (prefill) or land data it unpacks into its pages "
      "(decode); on the staged path it is page-locked and on the GPU's NUMA node; at least 8M.",
      CFG_FIELD(staging_bytes), NULL, 0, 0 },
    { "KVX_MEM_PATH", CFG_ENUM, "auto",
      "How pages move between pools: auto (puts between the pools when UCX can access every "
      "pool's memory, else every rank stages through host memory), direct (creation fails where "
      "UCX cannot access CUDA memory), or staged (always; for host pools a test of that path).",
      CFG_FIELD(mem_path), cfg_mem_paths, 0, 0 },
    { "KVX_CUDA_LIBRARY", CFG_STRING, "",
      "The CUDA runtime to load (a libcudart path or name) instead of the one kvx was built "
      "with, then libcudart.so.N from the loader path.",
      CFG_FIELD(cuda_library), NULL, 0, 0 },
    { "KVX_METRICS_FILE", CFG_STRING, "",
      "Prometheus text file the progress thread rewrites (atomically) every "
      "KVX_METRICS_INTERVAL and at destroy; %h, %p and %r become host, pid and world rank.",
      CFG_FIELD(metrics_file), NULL, 0, 0 },
    { "KVX_RUN_STATUS_DIR", CFG_STRING, "",
      "Set by kvx-run --tolerate-failures: a rank with a context writes its exit status to "
      "DIR/rank.N (N its world rank) when it exits, as mpirun --enable-recovery reports 0 "
      "whatever the ranks did; a rank killed or aborted writes none.",
      CFG_FIELD(run_status_dir), NULL, 0, 0 },
    { "KVX_METRICS_INTERVAL", CFG_TIME, "5s",
      "How often KVX_METRICS_FILE is written (at least 100ms).", CFG_FIELD(metrics_interval), NULL,
      0, 0 },
    { "KVX_HEALTH_PROGRESS_TIMEOUT", CFG_TIME, "2s",
      "A progress thread that has not ticked this long makes the rank UNHEALTHY.",
      CFG_FIELD(health_progress), NULL, 0, 0 },
    { "KVX_HEALTH_STALL_TIMEOUT", CFG_TIME, "60s",
      "A room in one state this long makes the rank DEGRADED (no progress).",
      CFG_FIELD(health_stall), NULL, 0, 0 },
    { "KVX_HEALTH_QUARANTINE_PAGES", CFG_INT, "0",
      "Quarantined pages the rank tolerates (DEGRADED) before it is UNHEALTHY; 0: a tenth of "
      "its pool.",
      CFG_FIELD(health_quarantine), NULL, 0, 1ll << 40 },
    { "KVX_JOIN_KEY_FILE", CFG_STRING, "",
      "The job key (64 hex digits in a file only its owner may read): with it set, the job "
      "takes instances that join it (docs/user/join.md), and a joiner proves it holds the same.",
      CFG_FIELD(join_key_file), NULL, 0, 0 },
    { "KVX_JOIN_LISTEN", CFG_STRING, "127.0.0.1:0",
      "Where the ranks that serve joiners listen: HOST:PORT, [V6]:PORT, HOST, :PORT; HOST an "
      "address or an interface name; port 0 picks a free one.",
      CFG_FIELD(join_listen), NULL, 0, 0 },
    { "KVX_JOIN_ADDRESS_FILE", CFG_STRING, "",
      "World rank 0 of a job that takes joiners writes its address here (atomically), for "
      "joiners' KVX_JOIN.",
      CFG_FIELD(join_address_file), NULL, 0, 0 },
    { "KVX_JOIN", CFG_STRING, "",
      "This job is an instance that joins the running job at HOST:PORT (its KVX_LAYOUT names "
      "only itself), with the key of KVX_JOIN_KEY_FILE.",
      CFG_FIELD(join), NULL, 0, 0 },
    { "KVX_JOIN_TIMEOUT", CFG_TIME, "10s",
      "Deadline of one join handshake, on both sides: a joiner slower than this is dropped.",
      CFG_FIELD(join_timeout), NULL, 0, 0 },
    { "KVX_JOIN_MAX", CFG_INT, "4",
      "Instances that may join a job over its life (each keeps its place once left).",
      CFG_FIELD(join_max), NULL, 0, 64 },

    /* ---- topology (src/topo) ---- */
    { "KVX_TOPO_XML", CFG_STRING, "",
      "hwloc XML topology to use instead of discovering this machine (lstopo --of xml).",
      CFG_FIELD(topo_xml), NULL, 0, 0 },
    { "KVX_NET_DEVICES", CFG_LIST, "",
      "NICs every rank uses instead of the closest ones: dev:port for RDMA, names for TCP.",
      CFG_FIELD(net_devices), NULL, 0, 0 },
    { "KVX_GPU_NIC_MAP", CFG_STRING, "",
      "NICs per GPU instead of the closest ones: busid=dev:port[,dev:port];busid=...",
      CFG_FIELD(gpu_nic_map), NULL, 0, 0 },
    { "KVX_BIND", CFG_ENUM, "cpu+mem",
      "Binding of a rank with a GPU: to the GPU's local cores, and memory to its NUMA node.",
      CFG_FIELD(bind), cfg_bind_modes, 0, 0 },
    /* ---- end of topology ---- */
};

#define CFG_ROWS (sizeof(cfg_table) / sizeof(cfg_table[0]))

/* ---- parsers ---------------------------------------------------------- */

static int cfg_blank(const char *s)
{
    return s == NULL || *s == '\0';
}

kvx_status_t cfg_parse_int(const char *s, long long min, long long max, long long *out, char *why,
                           size_t why_len)
{
    char *end;
    long long v;

    errno = 0;
    v = cfg_blank(s) || isspace((unsigned char)s[0]) ? 0 : strtoll(s, &end, 0);
    if (cfg_blank(s) || isspace((unsigned char)s[0]) || errno != 0 || *end != '\0' || v < min ||
        v > max) {
        snprintf(why, why_len, "an integer from %lld to %lld", min, max);
        return KVX_ERR_CONFIG;
    }
    *out = v;
    return KVX_OK;
}

/* A non-negative decimal number followed by a unit from units[]. */
typedef struct cfg_unit {
    const char *suffix;
    double scale;
} cfg_unit_t;

static kvx_status_t cfg_parse_scaled(const char *s, const cfg_unit_t *units, double bare_scale,
                                     double *out)
{
    char *end;
    double v;

    if (cfg_blank(s) || !(isdigit((unsigned char)s[0]) || s[0] == '.')) {
        return KVX_ERR_CONFIG;
    }
    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || end == s || !isfinite(v) || v < 0) {
        return KVX_ERR_CONFIG;
    }
    if (*end == '\0') {
        *out = v * bare_scale;
        return KVX_OK;
    }
    for (const cfg_unit_t *u = units; u->suffix != NULL; u++) {
        if (strcasecmp(end, u->suffix) == 0) {
            *out = v * u->scale;
            return KVX_OK;
        }
    }
    return KVX_ERR_CONFIG;
}

kvx_status_t cfg_parse_size(const char *s, uint64_t *out, char *why, size_t why_len)
{
    static const cfg_unit_t units[] = {
        { "b", 1.0 },      { "k", 0x1p10 },   { "kb", 0x1p10 },  { "kib", 0x1p10 },
        { "m", 0x1p20 },   { "mb", 0x1p20 },  { "mib", 0x1p20 }, { "g", 0x1p30 },
        { "gb", 0x1p30 },  { "gib", 0x1p30 }, { "t", 0x1p40 },   { "tb", 0x1p40 },
        { "tib", 0x1p40 }, { NULL, 0 },
    };
    double v;

    if (cfg_parse_scaled(s, units, 1.0, &v) != KVX_OK || v >= 0x1p63) {
        snprintf(why, why_len,
                 "a size in bytes, optionally with a unit: 4096, 64k, 2M, 1G, 1.5GiB");
        return KVX_ERR_CONFIG;
    }
    *out = (uint64_t)v;
    return KVX_OK;
}

kvx_status_t cfg_parse_time(const char *s, uint64_t *ns_out, char *why, size_t why_len)
{
    static const cfg_unit_t units[] = {
        { "ns", 1.0 }, { "us", 1e3 }, { "ms", 1e6 }, { "s", 1e9 }, { "m", 60e9 }, { NULL, 0 },
    };
    double v;

    if (cfg_parse_scaled(s, units, 1e9, &v) != KVX_OK || v >= 0x1p63) {
        snprintf(why, why_len,
                 "a time in seconds, optionally with a unit: 300, 300s, 500ms, 250us, 1.5s, 2m");
        return KVX_ERR_CONFIG;
    }
    *ns_out = (uint64_t)v;
    return KVX_OK;
}

kvx_status_t cfg_parse_bool(const char *s, int *out, char *why, size_t why_len)
{
    static const char *const yes[] = { "1", "y", "yes", "true", "on", NULL };
    static const char *const no[] = { "0", "n", "no", "false", "off", NULL };

    for (int i = 0; !cfg_blank(s) && yes[i] != NULL; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = 1;
            return KVX_OK;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = 0;
            return KVX_OK;
        }
    }
    snprintf(why, why_len, "a boolean: 1/0, y/n, yes/no, true/false, on/off");
    return KVX_ERR_CONFIG;
}

static void cfg_enum_accepted(const char *const *values, char *buf, size_t len)
{
    size_t o = 0;

    buf[0] = '\0';
    for (int i = 0; values[i] != NULL && o < len; i++) {
        o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? "|" : "", values[i]);
    }
}

kvx_status_t cfg_parse_enum(const char *s, const char *const *values, int *out, char *why,
                            size_t why_len)
{
    char accepted[256];

    for (int i = 0; !cfg_blank(s) && values[i] != NULL; i++) {
        if (strcasecmp(s, values[i]) == 0) {
            *out = i;
            return KVX_OK;
        }
    }
    cfg_enum_accepted(values, accepted, sizeof(accepted));
    snprintf(why, why_len, "one of %s", accepted);
    return KVX_ERR_CONFIG;
}

void cfg_list_free(cfg_list_t *list)
{
    for (size_t i = 0; i < list->count; i++) {
        free(list->items[i]);
    }
    free(list->items);
    list->items = NULL;
    list->count = 0;
}

kvx_status_t cfg_parse_list(const char *s, cfg_list_t *out, char *why, size_t why_len)
{
    cfg_list_t list = { 0, NULL };
    const char *p = s != NULL ? s : "";

    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        char **items;

        /* An empty item (",a", "a,,b", "a,") is a typo, not a wish. */
        if (n == 0 || (p[n] == ',' && p[n + 1] == '\0')) {
            goto err_malformed;
        }
        items = realloc(list.items, (list.count + 1) * sizeof(*items));
        if (items == NULL) {
            goto err_malformed;
        }
        list.items = items;
        list.items[list.count] = strndup(p, n);
        if (list.items[list.count] == NULL) {
            goto err_malformed;
        }
        list.count++;
        p += n + (p[n] == ',');
    }
    *out = list;
    return KVX_OK;

err_malformed:
    cfg_list_free(&list);
    snprintf(why, why_len, "a comma-separated list of non-empty items: a,b,c");
    return KVX_ERR_CONFIG;
}

/* ---- the table -------------------------------------------------------- */

static const char *cfg_type_name(cfg_type_t type)
{
    static const char *const names[] = { "int", "size", "time", "bool", "enum", "list", "string" };
    return names[type];
}

static void cfg_accepted(const cfg_row_t *row, char *buf, size_t len)
{
    char why[256];
    long long i;
    uint64_t u;
    int b;
    cfg_list_t l;

    /* Each parser describes its accepted form when given no value. */
    switch (row->type) {
    case CFG_INT:
        cfg_parse_int(NULL, row->min, row->max, &i, why, sizeof(why));
        break;
    case CFG_SIZE:
        cfg_parse_size(NULL, &u, why, sizeof(why));
        break;
    case CFG_TIME:
        cfg_parse_time(NULL, &u, why, sizeof(why));
        break;
    case CFG_BOOL:
        cfg_parse_bool(NULL, &b, why, sizeof(why));
        break;
    case CFG_ENUM:
        cfg_enum_accepted(row->values, why, sizeof(why));
        break;
    case CFG_LIST:
        cfg_parse_list(",", &l, why, sizeof(why));
        break;
    case CFG_STRING:
        snprintf(why, sizeof(why), "any text");
        break;
    }
    snprintf(buf, len, "%s", why);
}

static kvx_status_t cfg_set(kvx_cfg_t *cfg, const cfg_row_t *row, const char *value, char *why,
                            size_t why_len)
{
    void *field = (char *)cfg + row->offset;
    kvx_status_t status = KVX_OK;
    long long i;
    uint64_t u;
    int b;

    switch (row->type) {
    case CFG_INT:
        status = cfg_parse_int(value, row->min, row->max, &i, why, why_len);
        if (status == KVX_OK) {
            *(long long *)field = i;
        }
        break;
    case CFG_SIZE:
    case CFG_TIME:
        status = row->type == CFG_SIZE ? cfg_parse_size(value, &u, why, why_len)
                                       : cfg_parse_time(value, &u, why, why_len);
        if (status == KVX_OK) {
            *(uint64_t *)field = u;
        }
        break;
    case CFG_BOOL:
    case CFG_ENUM:
        status = row->type == CFG_BOOL ? cfg_parse_bool(value, &b, why, why_len)
                                       : cfg_parse_enum(value, row->values, &b, why, why_len);
        if (status == KVX_OK) {
            *(int *)field = b;
        }
        break;
    case CFG_LIST:
        cfg_list_free((cfg_list_t *)field);
        status = cfg_parse_list(value, (cfg_list_t *)field, why, why_len);
        break;
    case CFG_STRING: {
        char *copy = strdup(value);

        if (copy == NULL) {
            snprintf(why, why_len, "out of memory");
            return KVX_ERR_NO_MEMORY;
        }
        free(*(char **)field);
        *(char **)field = copy;
        break;
    }
    }
    return status;
}

static const char *cfg_env_lookup(char *const *envp, const char *name)
{
    size_t n = strlen(name);

    for (char *const *e = envp; e != NULL && *e != NULL; e++) {
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') {
            return *e + n + 1;
        }
    }
    return NULL;
}

static size_t cfg_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t prev[64], cur[64];

    if (la >= 63 || lb >= 63) {
        return (size_t)-1;
    }
    for (size_t j = 0; j <= lb; j++) {
        prev[j] = j;
    }
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;

            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, (lb + 1) * sizeof(size_t));
    }
    return prev[lb];
}

const char *cfg_nearest(const char *name)
{
    const char *best = cfg_table[0].name;
    size_t best_d = (size_t)-1;

    for (size_t r = 0; r < CFG_ROWS; r++) {
        size_t d = cfg_edit_distance(name, cfg_table[r].name);

        if (d < best_d) {
            best_d = d;
            best = cfg_table[r].name;
        }
    }
    return best;
}

static const cfg_row_t *cfg_find(const char *name, size_t len)
{
    for (size_t r = 0; r < CFG_ROWS; r++) {
        if (strlen(cfg_table[r].name) == len && strncmp(cfg_table[r].name, name, len) == 0) {
            return &cfg_table[r];
        }
    }
    return NULL;
}

static void cfg_check_unknown(char *const *envp, cfg_warn_fn_t warn, void *arg)
{
    for (char *const *e = envp; warn != NULL && e != NULL && *e != NULL; e++) {
        const char *eq = strchr(*e, '=');
        size_t len = eq != NULL ? (size_t)(eq - *e) : strlen(*e);
        char name[128];

        if (strncmp(*e, "KVX_", 4) != 0 || cfg_find(*e, len) != NULL) {
            continue;
        }
        snprintf(name, sizeof(name), "%.*s", (int)len, *e);
        warn(name, cfg_nearest(name), arg);
    }
}

void cfg_cleanup(kvx_cfg_t *cfg)
{
    for (size_t r = 0; r < CFG_ROWS; r++) {
        void *field = (char *)cfg + cfg_table[r].offset;

        if (cfg_table[r].type == CFG_STRING) {
            free(*(char **)field);
            *(char **)field = NULL;
        } else if (cfg_table[r].type == CFG_LIST) {
            cfg_list_free((cfg_list_t *)field);
        }
    }
}

kvx_status_t cfg_load(kvx_cfg_t *cfg, char *const *envp, cfg_warn_fn_t warn, void *warn_arg,
                      kvx_failure_t *reason_p)
{
    kvx_status_t status = KVX_OK;

    memset(cfg, 0, sizeof(*cfg));
    for (size_t r = 0; r < CFG_ROWS; r++) {
        const cfg_row_t *row = &cfg_table[r];
        const char *value = cfg_env_lookup(envp, row->name);
        char why[256];

        /* Defaults go through the same parser, so the table cannot hold a
         * default its own parser rejects (a unit test loads an empty env). */
        status = cfg_set(cfg, row, row->default_value, why, sizeof(why));
        if (status == KVX_OK && value != NULL) {
            status = cfg_set(cfg, row, value, why, sizeof(why));
        }
        if (status != KVX_OK) {
            kvx_failure_t reason;

            failure_set(&reason, KVX_ERR_CONFIG, KVX_STAGE_INIT, NULL,
                        "%s='%s' is not valid: expected %s", row->name,
                        value != NULL ? value : row->default_value, why);
            failure_copy(reason_p, &reason);
            cfg_cleanup(cfg);
            return KVX_ERR_CONFIG;
        }
    }
    cfg_check_unknown(envp, warn, warn_arg);
    return KVX_OK;
}

/* ---- the process configuration ---------------------------------------- */

static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;
static kvx_cfg_t cfg_process;
static kvx_status_t cfg_process_status;
static kvx_failure_t cfg_process_reason;

static void cfg_warn_unknown(const char *name, const char *nearest, void *arg)
{
    kvx_warn("unknown variable %s in the environment is ignored (did you mean %s?)", name, nearest);
}

static void cfg_global_load(void)
{
    kvx_cfg_t defaults;

    cfg_process_status = cfg_load(&cfg_process, environ, NULL, NULL, &cfg_process_reason);
    if (cfg_process_status != KVX_OK) {
        cfg_load(&defaults, NULL, NULL, NULL, NULL);
        cfg_process = defaults;
    }
    /* The logger is configured before the first warning is written. */
    log_configure(cfg_process.log_level, cfg_process.log_file);
    if (cfg_process_status != KVX_OK) {
        char line[512];

        kvx_failure_format(&cfg_process_reason, line, sizeof(line));
        kvx_error("%s", line);
    }
}

void cfg_warn_unknown_env(void)
{
    cfg_check_unknown(environ, cfg_warn_unknown, NULL);
}

const kvx_cfg_t *cfg_global(kvx_status_t *status_p, kvx_failure_t *reason_p)
{
    pthread_once(&cfg_once, cfg_global_load);
    if (status_p != NULL) {
        *status_p = cfg_process_status;
    }
    if (cfg_process_status != KVX_OK) {
        failure_copy(reason_p, &cfg_process_reason);
    }
    return &cfg_process;
}

/* The logger's level must be right from the first line, so the process
 * configuration is read when the library is loaded. */
__attribute__((constructor)) static void cfg_autoload(void)
{
    cfg_global(NULL, NULL);
}

/* ---- public API ------------------------------------------------------- */

size_t kvx_config_count(void)
{
    return CFG_ROWS;
}

static char cfg_accepted_text[CFG_ROWS][256];
static pthread_once_t cfg_accepted_once = PTHREAD_ONCE_INIT;

static void cfg_accepted_fill(void)
{
    for (size_t r = 0; r < CFG_ROWS; r++) {
        cfg_accepted(&cfg_table[r], cfg_accepted_text[r], sizeof(cfg_accepted_text[r]));
    }
}

kvx_status_t kvx_config_var(size_t index, kvx_config_var_t *var_p)
{
    if (index >= CFG_ROWS || var_p == NULL) {
        return KVX_ERR_INVALID_PARAM;
    }
    pthread_once(&cfg_accepted_once, cfg_accepted_fill);
    var_p->name = cfg_table[index].name;
    var_p->type = cfg_type_name(cfg_table[index].type);
    var_p->default_value = cfg_table[index].default_value;
    var_p->accepted = cfg_accepted_text[index];
    var_p->help = cfg_table[index].help;
    var_p->value = cfg_env_lookup(environ, cfg_table[index].name);
    return KVX_OK;
}

kvx_status_t kvx_config_check(kvx_failure_t *reason_p)
{
    kvx_cfg_t cfg;
    kvx_status_t status = cfg_load(&cfg, environ, cfg_warn_unknown, NULL, reason_p);

    if (status == KVX_OK) {
        cfg_cleanup(&cfg);
    }
    return status;
}
