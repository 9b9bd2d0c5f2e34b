/*
 * options.c - kvx-demo's command line, and the layout it runs when none is
 * given.
 */
#include "demo.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: kvx-demo [OPTIONS]   (one MPI job, e.g. kvx-run --layout L -- kvx-demo)\n"
            "\n"
            "A prefill/decode serving simulation: a stream of requests whose KV moves from\n"
            "prefill to decode ranks through kvx, every byte verified, every room's outcome\n"
            "agreed by every rank of both instances.\n"
            "\n"
            "  --layout L              prefill:AxB,decode:CxD (default: KVX_LAYOUT, else from\n"
            "                          the world size: 4 ranks -> prefill:1x2,decode:1x2)\n"
            "  --requests N            requests in the stream (default 150)\n"
            "  --prompt-tokens MIN:MAX prompt lengths, uniform from the seed (default 64:1024)\n"
            "  --rate R                requests arrive R per second, evenly (default: all at\n"
            "                          the start)\n"
            "  --concurrency C         rooms in flight per instance (default 16)\n"
            "  --chunk-pages N         pages one prefill step computes; a longer prompt is\n"
            "                          sent in chunks as they are computed (default 64)\n"
            "  --layer-us US           compute time per layer of a prefill step of\n"
            "                          --chunk-pages pages, a busy wait (a shorter step\n"
            "                          takes its share; default 0)\n"
            "  --layerwise             hand each layer of a step over as soon as it is\n"
            "                          computed (kvx_room_send_layers), not the step's\n"
            "                          chunk once every layer is\n"
            "  --page-size P           tokens per page (default 16)\n"
            "  --layers L              layers (default 4)\n"
            "  --kv-heads H            KV heads of the model (default 8)\n"
            "  --head-dim D            elements per head (default 128)\n"
            "  --dtype T               bf16, fp16, fp8 or fp32 (default bf16)\n"
            "  --mla                   one latent per layer (MLA) instead of K and V\n"
            "  --page-layout L         hnd, nhd or head (default hnd; see kvx.h)\n"
            "  --pool-pages N          KV pages per rank (default: what the concurrency\n"
            "                          needs, so that the decode allocator runs near full)\n"
            "  --fault SPEC            inject failures, in the KVX_FAULT syntax (below)\n"
            "  --seed S                seed of the prompt lengths (default 1)\n"
            "  --json FILE             write the summary as JSON (rank 0)\n"
            "  --trace FILE            replay a recorded trace instead of the seeded stream:\n"
            "                          JSON lines with timestamp (ms), input_length,\n"
            "                          output_length (Mooncake) or CSV with the header\n"
            "                          TIMESTAMP,ContextTokens,GeneratedTokens (Azure LLM\n"
            "                          inference); requests arrive on the trace's clock\n"
            "  --trace-speed X         replay X times faster than recorded (default 1)\n"
            "  --trace-limit N         the first N requests of the trace (default all)\n"
            "  --trace-cap T           a longer prompt is capped to T tokens (its first T\n"
            "                          tokens' KV moves), and counted (default 8192, or\n"
            "                          what --pool-pages holds when that is less)\n"
            "  --plot FILE.png         with --trace: latency and GB/s over time (gnuplot)\n"
            "  --time-limit S          stop waiting after S seconds (default 600; with\n"
            "                          --trace or --rate, S seconds after the last arrival)\n"
            "  --end-timeout S         at the end, wait at most S seconds for a rank that says\n"
            "                          nothing (dead, or behind a cut link; default 5)\n"
            "  --progress M            auto, tty (redraw in place), lines or none (default auto:\n"
            "                          tty when the launcher's output is a terminal)\n"
            "  --kill-decode K:N       every TP rank of decode instance K kills itself\n"
            "                          (SIGKILL) after N of its rooms (launch with kvx-run\n"
            "                          --tolerate-failures)\n"
            "  --replace               rank 0 spawns a replacement for a decode instance the\n"
            "                          job lost (MPI_Comm_spawn); it joins the running job\n"
            "                          in its place and the prefill instances route its\n"
            "                          requests to it again; the summary times the gap\n"
            "                          (launch with kvx-run --tolerate-failures --join-key\n"
            "                          FILE; docs/user/join.md)\n"
            "  --replacement-of K, --join-address A, --job-t0 T\n"
            "                          what --replace gives the processes it spawns\n"
            "  -h, --help              this help\n"
            "\n"
            "Exit status 0 only when every room concluded, every rank agreed on every room,\n"
            "no byte differed and every failure was an injected one -- or, when a rank died\n"
            "(effect=kill, or killed from outside; launch with kvx-run --tolerate-failures),\n"
            "the rooms of its instance failed by the loss and every other room succeeded:\n"
            "the ranks left compare outcomes among themselves, and the summary names the\n"
            "lost instance. A dropped message ends in a deadline (KVX_*_TIMEOUT, 300 s by\n"
            "default) whose failure is not an injected one.\n"
            "\n%s",
            kvx_fault_syntax());
}

const char *demo_config_value(const char *name)
{
    for (size_t i = 0; i < kvx_config_count(); i++) {
        kvx_config_var_t var;

        if (kvx_config_var(i, &var) == KVX_OK && strcmp(var.name, name) == 0) {
            return var.value != NULL && var.value[0] != '\0' ? var.value : NULL;
        }
    }
    return NULL;
}

/* Half the ranks prefill, half decode, in instances of the largest TP size
 * (a power of two, at most 8) that divides the half; an odd world gives
 * the extra rank to prefill, TP 1. */
static int default_layout(int world_size, char *buf, size_t len)
{
    int half = world_size / 2, tp = 1;

    if (world_size < 2) {
        return -1;
    }
    if (world_size % 2 != 0) {
        snprintf(buf, len, "prefill:%dx1,decode:%dx1", half + 1, half);
        return 0;
    }
    while (tp < 8 && half % (2 * tp) == 0) {
        tp *= 2;
    }
    snprintf(buf, len, "prefill:%dx%d,decode:%dx%d", half / tp, tp, half / tp, tp);
    return 0;
}

static int parse_uint(const char *arg, unsigned long long lo, unsigned long long hi,
                      unsigned long long *out)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(arg, &end, 0);
    if (*arg == '\0' || *arg == '-' || *end != '\0' || errno != 0 || v < lo || v > hi) {
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_range(const char *arg, unsigned *lo, unsigned *hi)
{
    char buf[64], *colon;
    unsigned long long a, b;

    snprintf(buf, sizeof(buf), "%s", arg);
    colon = strchr(buf, ':');
    if (colon == NULL) {
        return -1;
    }
    *colon = '\0';
    if (parse_uint(buf, 1, 1u << 24, &a) != 0 || parse_uint(colon + 1, 1, 1u << 24, &b) != 0 ||
        a > b) {
        return -1;
    }
    *lo = (unsigned)a;
    *hi = (unsigned)b;
    return 0;
}

static int parse_enum(const char *arg, const char *const *names, int n)
{
    for (int i = 0; i < n; i++) {
        if (strcmp(arg, names[i]) == 0) {
            return i;
        }
    }
    return -1;
}

static void defaults(demo_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->requests = 150;
    o->min_tokens = 64;
    o->max_tokens = 1024;
    o->concurrency = 16;
    o->chunk_pages = 64;
    o->kv.layers = 4;
    o->kv.page_size = 16;
    o->kv.kv_heads = 8;
    o->kv.head_dim = 128;
    o->kv.dtype = KVX_DTYPE_BF16;
    o->kv.attn = KVX_ATTN_MHA;
    o->kv.page_layout = KVX_PAGE_HND;
    o->seed = 1;
    o->time_limit = 600;
    o->trace_speed = 1;
    o->trace_limit = 1000000;
    o->trace_cap = 8192;
    o->end_timeout = 5;
    o->kill_instance = -1;
    o->replacement_of = -1;
}

/* --kill-decode K:N */
static int parse_kill(const char *arg, demo_opts_t *o)
{
    unsigned long long k, n;
    char buf[64], *colon;

    snprintf(buf, sizeof(buf), "%s", arg);
    if ((colon = strchr(buf, ':')) == NULL) {
        return -1;
    }
    *colon = '\0';
    if (parse_uint(buf, 0, 4095, &k) != 0 || parse_uint(colon + 1, 0, 1u << 24, &n) != 0) {
        return -1;
    }
    o->kill_instance = (int)k;
    o->kill_after = (unsigned)n;
    return 0;
}

static int parse_t0(const char *arg, double *out)
{
    char *end;
    double v = strtod(arg, &end);

    if (*arg == '\0' || *end != '\0' || !(v > 0)) {
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_speed(const char *arg, double *out)
{
    char *end;
    double v = strtod(arg, &end);

    if (*arg == '\0' || *end != '\0' || !(v >= 1e-3 && v <= 1e6)) {
        return -1;
    }
    *out = v;
    return 0;
}

/* A number option: parsed into v, checked against [lo, hi], stored. */
#define DEMO_NUMBER(field, type, lo, hi)        \
    do {                                        \
        if (parse_uint(arg, lo, hi, &v) != 0) { \
            return -1;                          \
        }                                       \
        field = (type)v;                        \
        return 0;                               \
    } while (0)

/* A word option: its index in names, stored. */
#define DEMO_WORD(field, type, names)                                    \
    do {                                                                 \
        int e_ = parse_enum(arg, names, sizeof(names) / sizeof(*names)); \
        field = (type)e_;                                                \
        return e_ < 0 ? -1 : 0;                                          \
    } while (0)

/* One option; 0 when it was well formed. */
static int parse_one(int c, const char *arg, demo_opts_t *o)
{
    static const char *const dtypes[] = { "bf16", "fp16", "fp8", "fp32" };
    static const char *const layouts[] = { "hnd", "nhd", "head" };
    static const char *const modes[] = { "auto", "tty", "lines", "none" };
    unsigned long long v = 0;

    switch (c) {
    case 'L':
        o->layout = arg;
        return 0;
    case 'r':
        o->synthetic = 1;
        DEMO_NUMBER(o->requests, unsigned, 1, 1000000);
    case 't':
        o->synthetic = 1;
        return parse_range(arg, &o->min_tokens, &o->max_tokens);
    case 'c':
        DEMO_NUMBER(o->concurrency, unsigned, 1, 4096);
    case 'k':
        DEMO_NUMBER(o->chunk_pages, unsigned, 1, 1u << 20);
    case 'P':
        DEMO_NUMBER(o->kv.page_size, unsigned, 1, 1u << 16);
    case 'l':
        DEMO_NUMBER(o->kv.layers, unsigned, 1, 1024);
    case 'H':
        DEMO_NUMBER(o->kv.kv_heads, unsigned, 1, 1024);
    case 'D':
        DEMO_NUMBER(o->kv.head_dim, unsigned, 1, 4096);
    case 'T':
        DEMO_WORD(o->kv.dtype, kvx_dtype_t, dtypes);
    case 'm':
        o->kv.attn = KVX_ATTN_MLA;
        return 0;
    case 'y':
        DEMO_WORD(o->kv.page_layout, kvx_page_layout_t, layouts);
    case 'p':
        DEMO_NUMBER(o->pool_pages, size_t, 1, 1u << 30);
    case 'f':
        o->fault = arg;
        return 0;
    case 's':
        DEMO_NUMBER(o->seed, uint64_t, 0, UINT64_MAX);
    case 'j':
        o->json = arg;
        return 0;
    case 'x':
        DEMO_NUMBER(o->time_limit, double, 1, 86400);
    case 'e':
        DEMO_NUMBER(o->end_timeout, double, 1, 3600);
    case 'g':
        DEMO_WORD(o->progress, demo_progress_mode_t, modes);
    case 'R':
        o->trace = arg;
        return 0;
    case 'S':
        return parse_speed(arg, &o->trace_speed);
    case 'N':
        DEMO_NUMBER(o->trace_limit, size_t, 1, 1000000);
    case 'C':
        DEMO_NUMBER(o->trace_cap, uint32_t, 1, 1u << 24);
    case 'o':
        o->plot = arg;
        return 0;
    case 'U':
        DEMO_NUMBER(o->layer_us, double, 0, 10000000);
    case 'W':
        o->layerwise = 1;
        return 0;
    case 'K':
        return parse_kill(arg, o);
    case 'A':
        o->synthetic = 1;
        return parse_speed(arg, &o->rate);
    case 'Q':
        o->replace = 1;
        return 0;
    case 'Z':
        DEMO_NUMBER(o->replacement_of, int, 0, 4095);
    case 'J':
        o->join_address = arg;
        return 0;
    case '0':
        return parse_t0(arg, &o->job_t0);
    default:
        return -1;
    }
}

/* What the options cannot mean together. NULL when they are fine. */
static const char *check(demo_opts_t *o)
{
    if (o->kv.attn == KVX_ATTN_MLA) {
        o->kv.kv_heads = 1;
    }
    if (o->trace != NULL && o->synthetic) {
        return "--requests, --prompt-tokens and --rate shape the seeded stream; a --trace brings "
               "its own (--trace-limit, --trace-cap, --trace-speed)";
    }
    if (o->rate > 0) {
        o->time_limit += (o->requests - 1) / o->rate; /* counted from the last arrival */
    }
    if (o->replacement_of >= 0 && (o->join_address == NULL || o->job_t0 <= 0)) {
        return "--replacement-of is for the processes kvx-demo --replace spawns";
    }
    if (o->trace == NULL && o->plot != NULL) {
        return "--plot draws a --trace replay over time";
    }
    if (o->trace == NULL && o->pool_pages != 0 &&
        o->pool_pages < (o->max_tokens + (size_t)o->kv.page_size - 1) / o->kv.page_size) {
        return "--pool-pages cannot hold the longest prompt (--prompt-tokens, --page-size)";
    }
    return NULL;
}

int demo_opts_parse(int argc, char **argv, int rank, int world_size, demo_opts_t *o)
{
    static const struct option longs[] = { { "layout", 1, 0, 'L' },
                                           { "requests", 1, 0, 'r' },
                                           { "prompt-tokens", 1, 0, 't' },
                                           { "concurrency", 1, 0, 'c' },
                                           { "chunk-pages", 1, 0, 'k' },
                                           { "page-size", 1, 0, 'P' },
                                           { "layers", 1, 0, 'l' },
                                           { "kv-heads", 1, 0, 'H' },
                                           { "head-dim", 1, 0, 'D' },
                                           { "dtype", 1, 0, 'T' },
                                           { "mla", 0, 0, 'm' },
                                           { "page-layout", 1, 0, 'y' },
                                           { "pool-pages", 1, 0, 'p' },
                                           { "fault", 1, 0, 'f' },
                                           { "seed", 1, 0, 's' },
                                           { "json", 1, 0, 'j' },
                                           { "time-limit", 1, 0, 'x' },
                                           { "progress", 1, 0, 'g' },
                                           { "trace", 1, 0, 'R' },
                                           { "trace-speed", 1, 0, 'S' },
                                           { "trace-limit", 1, 0, 'N' },
                                           { "trace-cap", 1, 0, 'C' },
                                           { "plot", 1, 0, 'o' },
                                           { "end-timeout", 1, 0, 'e' },
                                           { "layer-us", 1, 0, 'U' },
                                           { "layerwise", 0, 0, 'W' },
                                           { "kill-decode", 1, 0, 'K' },
                                           { "replace", 0, 0, 'Q' },
                                           { "rate", 1, 0, 'A' },
                                           /* Given by --replace to the processes it spawns. */
                                           { "replacement-of", 1, 0, 'Z' },
                                           { "join-address", 1, 0, 'J' },
                                           { "job-t0", 1, 0, '0' },
                                           { "help", 0, 0, 'h' },
                                           { 0, 0, 0, 0 } };
    const char *why = NULL;
    int c, idx;

    defaults(o);
    o->argc = argc;
    o->argv = argv;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longs, &idx)) != -1) {
        if (c == 'h') {
            if (rank == 0) {
                usage(stdout);
            }
            return 1;
        }
        if (c == '?' || parse_one(c, optarg, o) != 0) {
            if (rank == 0) {
                fprintf(stderr, "kvx-demo: bad option or value: %s (try --help)\n",
                        argv[optind - 1]);
            }
            return 2;
        }
    }
    if (optind < argc) {
        why = "unexpected arguments (try --help)";
    } else if ((why = check(o)) == NULL && o->layout == NULL &&
               (o->layout = demo_config_value("KVX_LAYOUT")) == NULL) {
        if (default_layout(world_size, o->layout_buf, sizeof(o->layout_buf)) != 0) {
            why = "needs at least 2 ranks (one prefill, one decode)";
        }
        o->layout = o->layout_buf;
    }
    if (why != NULL) {
        if (rank == 0) {
            fprintf(stderr, "kvx-demo: %s\n", why);
        }
        return 2;
    }
    return 0;
}
