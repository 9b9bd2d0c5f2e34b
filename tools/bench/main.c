/*
 * kvx-bench - kvx's throughput, agreement latency and failure detection,
 * each next to a baseline, measured on the machine it runs on. Runs under
 * mpirun; rank 0 prints an OSU / nccl-tests style report.
 *
 *   kvx-bench put     rooms of contiguous runs vs raw ucp_put_nbx + flush
 *   kvx-bench pages   16 KiB pages, 0/25/50/100% of destination pages scattered
 *   kvx-bench hetero  TP 1->1, 2->1, 1->2, 4->2 at equal bytes
 *   kvx-bench agree   agreement rounds vs one MPI_Allreduce of the same bytes
 *   kvx-bench fault   an injected failure and a killed peer to FAILED agreed
 *   kvx-bench verify  the put shape with KVX_VERIFY off, sample and full
 *   kvx-bench layerwise  each layer sent as it is computed vs one chunk at the end
 *
 * kvx-bench --help lists the options. Exit status: 0 when every row's
 * correctness column passed, 1 when one failed, 2 for bad usage.
 */
#include "bench.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bench_rank, bench_size, bench_raw_spin = 1;

static const char usage_text[] =
    "usage: mpirun -np N kvx-bench put|pages|hetero|agree|fault|verify|layerwise [options]\n"
    "\n"
    "  put      rooms of one contiguous run each (K and V of one layer), from\n"
    "           --min to --max bytes, against ucp_put_nbx + flush of the same\n"
    "           bytes on a UCP context of its own with kvx's UCX settings\n"
    "           (2 ranks: prefill:1x1,decode:1x1)\n"
    "  pages    16 KiB pages, --scatter percent of the destination pages\n"
    "           scattered; GB/s and puts per room against contiguous (2 ranks)\n"
    "  hetero   --layouts P:D at equal bytes against 1:1 (max P+D ranks)\n"
    "  agree    agreement of --rooms rooms per round at --tp sizes, against one\n"
    "           MPI_Allreduce of the same bytes; --failed percent of rooms\n"
    "           failed by a prefill rank (2 x max TP ranks)\n"
    "  fault    time from an injected failure, and from a killed peer, to\n"
    "           FAILED agreed on every rank (prefill:1x2,decode:1x2, 4 ranks;\n"
    "           the kill needs mpirun --enable-recovery --mca async_mpi_finalize 1)\n"
    "  verify   put's rooms, over consecutive and over every other page, on\n"
    "           three contexts side by side: KVX_VERIFY off, sample and full\n"
    "           (2 ranks)\n"
    "\n"
    "common options\n"
    "  -h, --help        this help\n"
    "  --json FILE       write the rows as JSON\n"
    "  --plot FILE.png   draw them with gnuplot (when gnuplot is installed)\n"
    "  --reps N          measured repetitions per point, median reported (5)\n"
    "  --window N        rooms in flight per rank (4)\n"
    "  --poll-us US      sleep of an application thread waiting for rooms (20)\n"
    "  --raw-wait spin|kvx  the raw UCP baseline spins in ucp_worker_progress as\n"
    "                    ucx_perftest does (spin), or waits as kvx's progress\n"
    "                    thread does (kvx: KVX_PROGRESS) (spin)\n"
    "put      --min SIZE (64k) --max SIZE (64M) --total SIZE bytes per point (1G);\n"
    "         pages of 32 KiB, or of --min / 2 where that is smaller\n"
    "verify   the same, sizes by factors of 4 (--max 4M by default)\n"
    "pages    --pages N per room (128) --layers L (4) --rooms N per point (32)\n"
    "         --scatter LIST (0,25,50,100)\n"
    "hetero   --layouts LIST (1:1,2:1,1:2,4:2) --pages N (64) --layers L (4)\n"
    "         --rooms N (32) --page-layout hnd|nhd|head (hnd)\n"
    "agree    --tp LIST (2,4,8) --rooms LIST (1,4,16,64,256,1024,4096)\n"
    "         --failed LIST of percents (0,1)\n"
    "layerwise --room-pages LIST (4,16,64) --layers L (8) --balance LIST of\n"
    "         compute/transfer per layer (1,4) --compute spin|sleep: a layer's\n"
    "         compute holds a core, as a forward pass holds the GPU, or frees it,\n"
    "         as the CPU is while the GPU computes (spin)\n"
    "fault    --kinds injected,killed (killed only under --enable-recovery)\n"
    "         --rooms N per wave (8) --interval-us US between rounds (200)\n"
    "         --force-kill (kill even without --enable-recovery)\n"
    "SIZE takes k, M, G (binary); LIST is comma-separated.\n";

static int parse_size(const char *s, size_t *out)
{
    char *end;
    double v = strtod(s, &end);
    double mul = 1;

    switch (*end) {
    case 'k':
    case 'K':
        mul = 1024.0;
        end++;
        break;
    case 'm':
    case 'M':
        mul = 1024.0 * 1024.0;
        end++;
        break;
    case 'g':
    case 'G':
        mul = 1024.0 * 1024.0 * 1024.0;
        end++;
        break;
    default:
        break;
    }
    if (end == s || *end != '\0' || v <= 0) {
        return -1;
    }
    *out = (size_t)(v * mul);
    return 0;
}

/* "1,4,16" or, with pairs, "2:1,1:2" (stored as P * 1000 + D). */
static int parse_list(const char *s, bench_list_t *l, int pairs)
{
    char buf[256], *save = NULL;

    snprintf(buf, sizeof(buf), "%s", s);
    l->n = 0;
    for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        double v = strtod(tok, &end);

        if (pairs && *end == ':') {
            v = v * 1000 + strtod(end + 1, &end);
        }
        if (end == tok || *end != '\0' || v < 0 || l->n == BENCH_MAX_LIST) {
            return -1;
        }
        l->v[l->n++] = v;
    }
    return l->n > 0 ? 0 : -1;
}

static int parse_kinds(const char *s, int *kinds)
{
    *kinds = 0;
    if (strstr(s, "injected") != NULL) {
        *kinds |= BENCH_KIND_INJECTED;
    }
    if (strstr(s, "killed") != NULL) {
        *kinds |= BENCH_KIND_KILLED;
    }
    return *kinds != 0 ? 0 : -1;
}

static void defaults(bench_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->reps = 5;
    o->window = 4;
    o->poll_us = 20;
    o->min_size = 64 << 10;
    o->max_size = 64 << 20;
    o->total = 1u << 30;
    o->page_layout = KVX_PAGE_HND;
    o->interval_us = 200;
    o->raw_spin = 1;
    parse_list("0,25,50,100", &o->scatter, 0);
    parse_list("2,4,8", &o->tp, 0);
    parse_list("0,1", &o->failed, 0);
    parse_list("1:1,2:1,1:2,4:2", &o->layouts, 1);
    parse_list("4,16,64", &o->room_pages, 0);
    parse_list("1,4", &o->balances, 0);
}

/* Defaults that depend on the subcommand, for what the user left alone. */
static void sub_defaults(bench_opts_t *o)
{
    int pages = !strcmp(o->sub, "pages");

    if (o->layers == 0) {
        o->layers = !strcmp(o->sub, "layerwise") ? 8 : 4;
    }
    if (o->pages == 0) {
        o->pages = pages ? 128 : 64;
    }
    if (o->nrooms.n == 0) {
        parse_list(!strcmp(o->sub, "agree")   ? "1,4,16,64,256,1024,4096"
                   : !strcmp(o->sub, "fault") ? "8"
                                              : "32",
                   &o->nrooms, 0);
    }
    o->rooms = (int)o->nrooms.v[0];
    if (o->kinds == 0) {
        o->kinds = BENCH_KIND_INJECTED | (bench_recovery_enabled() ? BENCH_KIND_KILLED : 0);
    }
}

static int parse(int argc, char **argv, bench_opts_t *o)
{
    static const struct option longs[] = { { "json", 1, 0, 'j' },
                                           { "plot", 1, 0, 'p' },
                                           { "reps", 1, 0, 'r' },
                                           { "window", 1, 0, 'w' },
                                           { "poll-us", 1, 0, 'u' },
                                           { "min", 1, 0, 'a' },
                                           { "max", 1, 0, 'b' },
                                           { "total", 1, 0, 't' },
                                           { "pages", 1, 0, 'P' },
                                           { "layers", 1, 0, 'L' },
                                           { "rooms", 1, 0, 'R' },
                                           { "scatter", 1, 0, 's' },
                                           { "layouts", 1, 0, 'y' },
                                           { "page-layout", 1, 0, 'l' },
                                           { "tp", 1, 0, 'T' },
                                           { "failed", 1, 0, 'f' },
                                           { "kinds", 1, 0, 'k' },
                                           { "interval-us", 1, 0, 'i' },
                                           { "force-kill", 0, 0, 'K' },
                                           { "help", 0, 0, 'h' },
                                           { "raw-wait", 1, 0, 'W' },
                                           { "room-pages", 1, 0, 'N' },
                                           { "balance", 1, 0, 'B' },
                                           { "compute", 1, 0, 'C' },
                                           { 0, 0, 0, 0 } };
    int c, bad = 0;

    defaults(o);
    if (argc < 2 || argv[1][0] == '-') {
        return argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) ? 1 : -1;
    }
    o->sub = argv[1];
    if (!strcmp(o->sub, "verify")) {
        o->max_size = 4 << 20; /* three pools side by side */
    }
    optind = 2;
    while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        switch (c) {
        case 'j':
            o->json = optarg;
            break;
        case 'p':
            o->plot = optarg;
            break;
        case 'r':
            bad |= (o->reps = atoi(optarg)) < 1;
            break;
        case 'w':
            bad |= (o->window = atoi(optarg)) < 1;
            break;
        case 'u':
            o->poll_us = atof(optarg);
            break;
        case 'a':
            bad |= parse_size(optarg, &o->min_size);
            break;
        case 'b':
            bad |= parse_size(optarg, &o->max_size);
            break;
        case 't':
            bad |= parse_size(optarg, &o->total);
            break;
        case 'P':
            bad |= (int)(o->pages = (unsigned)atoi(optarg)) < 1;
            break;
        case 'L':
            bad |= (int)(o->layers = (unsigned)atoi(optarg)) < 1;
            break;
        case 'R':
            bad |= parse_list(optarg, &o->nrooms, 0);
            break;
        case 's':
            bad |= parse_list(optarg, &o->scatter, 0);
            break;
        case 'y':
            bad |= parse_list(optarg, &o->layouts, 1);
            break;
        case 'l':
            o->page_layout = !strcmp(optarg, "nhd")    ? KVX_PAGE_NHD
                             : !strcmp(optarg, "head") ? KVX_PAGE_HEAD_MAJOR
                                                       : KVX_PAGE_HND;
            bad |= strcmp(optarg, "nhd") && strcmp(optarg, "head") && strcmp(optarg, "hnd");
            break;
        case 'T':
            bad |= parse_list(optarg, &o->tp, 0);
            break;
        case 'f':
            bad |= parse_list(optarg, &o->failed, 0);
            break;
        case 'k':
            bad |= parse_kinds(optarg, &o->kinds);
            break;
        case 'i':
            o->interval_us = atof(optarg);
            break;
        case 'K':
            o->force_kill = 1;
            break;
        case 'W':
            o->raw_spin = !strcmp(optarg, "spin");
            bad |= o->raw_spin == 0 && strcmp(optarg, "kvx") != 0;
            break;
        case 'N':
            bad |= parse_list(optarg, &o->room_pages, 0);
            for (int i = 0; i < o->room_pages.n; i++) {
                bad |= o->room_pages.v[i] < 1;
            }
            break;
        case 'B':
            bad |= parse_list(optarg, &o->balances, 0);
            break;
        case 'C':
            o->compute_sleep = !strcmp(optarg, "sleep");
            bad |= o->compute_sleep == 0 && strcmp(optarg, "spin") != 0;
            break;
        case 'h':
            return 1;
        default:
            return -1;
        }
    }
    if (bad || optind != argc || o->min_size > o->max_size) {
        return -1;
    }
    sub_defaults(o);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(const bench_opts_t *);
    } subs[] = { { "put", bench_put },
                 { "pages", bench_pages },
                 { "hetero", bench_hetero },
                 { "agree", bench_agree },
                 { "fault", bench_fault },
                 { "verify", bench_verify },
                 { "layerwise", bench_layerwise } };
    bench_opts_t o;
    int rc = 2, p, found = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &bench_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &bench_size);
    p = parse(argc, argv, &o);
    bench_raw_spin = o.raw_spin;
    /* Every rank parses the same arguments, so every rank takes the same
     * branch; a subcommand returns the same status on every live rank. */
    for (size_t i = 0; p == 0 && i < sizeof(subs) / sizeof(subs[0]); i++) {
        if (!strcmp(o.sub, subs[i].name)) {
            found = 1;
            rc = subs[i].run(&o);
        }
    }
    if (!found) {
        if (bench_rank == 0 && p == 0) {
            fprintf(stderr, "kvx-bench: unknown subcommand '%s'\n", o.sub);
        }
        if (bench_rank == 0) {
            fputs(usage_text, p == 1 ? stdout : stderr);
        }
        rc = p == 1 ? 0 : 2;
    }
    MPI_Finalize();
    return rc;
}
