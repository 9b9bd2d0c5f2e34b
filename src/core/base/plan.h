/*
 * plan.h - transfer plans: who writes what to whom, merged into as few puts
 * as the two pools' layouts allow.
 *
 * A plan has three levels:
 *  - pairs: for a prefill rank p and a decode rank d of a room, whether they
 *    talk (they share a KV head), whether p writes to d, and which heads
 *    (source head offset, destination head offset, count);
 *  - runs: consecutive source pages that map to consecutive destination
 *    pages, merged into one run;
 *  - pieces: the byte ranges of one run that are contiguous on both sides,
 *    found by folding the (head, token, page) dimensions of both layouts:
 *    one put per piece per (layer, component).
 */
#ifndef KVX_CORE_PLAN_H
#define KVX_CORE_PLAN_H

#include "core/base/kvlayout.h"

#include <stddef.h>
#include <stdint.h>

typedef struct plan_pair {
    int talks;         /* p and d share a head: they exchange control messages */
    int writes;        /* p writes pages into d */
    int aux_writer;    /* p writes d's aux row (exactly one writer of each d) */
    unsigned src_head; /* first head in p's pool */
    unsigned dst_head; /* first head in d's pool */
    unsigned nheads;   /* heads p writes into d */
} plan_pair_t;

/* The relation of prefill TP rank p and decode TP rank d. Each head a decode
 * rank holds is written by exactly one prefill rank: when several prefill
 * ranks hold it (replicated heads, MLA), decode rank d takes the (d mod n)-th. */
void plan_pair(const kvl_t *prefill, int p, const kvl_t *decode, int d, plan_pair_t *pair);

typedef struct plan_run {
    uint32_t src, dst; /* first page on each side */
    uint32_t count;    /* pages */
} plan_run_t;

/* Merges src[i] -> dst[i] into runs (at most n); returns the number of runs. */
size_t plan_runs(const uint32_t *src, const uint32_t *dst, size_t n, plan_run_t *runs);

/* How pieces of a pair are cut; built once per (room, target). */
#define PLAN_DIMS 3
typedef struct plan_geom {
    size_t block;               /* bytes of the innermost contiguous unit */
    int ndims;                  /* outer dimensions, innermost first */
    int dim_is_page[PLAN_DIMS]; /* which dimension counts pages (extent varies per run) */
    size_t extent[PLAN_DIMS];   /* extent of non-page dimensions */
    size_t sstride[PLAN_DIMS], dstride[PLAN_DIMS];
    size_t sbase, dbase;    /* byte offset of the pair's first head */
    size_t spage, dpage;    /* page strides, to place a run */
    size_t pair_page_bytes; /* bytes the pair moves per page: its heads of one page */
} plan_geom_t;

void plan_geom_init(plan_geom_t *g, const kvl_t *src, size_t src_pages, const kvl_t *dst,
                    size_t dst_pages, const plan_pair_t *pair);

/* Iterates the pieces of one run. */
typedef struct plan_iter {
    const plan_geom_t *g;
    size_t len; /* bytes per piece (after folding) */
    int first;  /* first dimension not folded */
    size_t extent[PLAN_DIMS];
    size_t idx[PLAN_DIMS];
    size_t soff, doff; /* offsets of the run's first byte */
    int done;
} plan_iter_t;

void plan_iter_init(plan_iter_t *it, const plan_geom_t *g, const plan_run_t *run);
/* The same, with pieces that need only be contiguous on the given sides
 * (PLAN_SRC, PLAN_DST or both). Whatever the sides, the pieces in order
 * hold the run's bytes in one order -- the source layout's, restricted to
 * the pair's heads -- so a side that gathers pieces contiguous in its
 * pool and a side that scatters pieces contiguous in its own agree on
 * every byte's place. */
#define PLAN_SRC 1
#define PLAN_DST 2
void plan_iter_init_sides(plan_iter_t *it, const plan_geom_t *g, const plan_run_t *run, int sides);
/* Next piece: byte offsets in the source and destination buffers and its
 * length. Returns 0 when there are no more. */
int plan_iter_next(plan_iter_t *it, size_t *src_off, size_t *dst_off, size_t *len);
/* Pieces a run of count pages takes (what plan_iter yields). */
size_t plan_run_pieces(const plan_geom_t *g, uint32_t count);

/*
 * How a pair's runs travel, chosen from the two layouts alone, so that the
 * prefill and the decode rank choose the same without telling each other.
 * UCX puts are contiguous on both sides, so a run whose pieces are
 * contiguous on one side only is carried whole by one side's copy:
 *  - DIRECT: one put per piece, from pool to pool (both sides contiguous,
 *    or the pieces are whole pages or whole head runs);
 *  - PACK: the remote side of a run is contiguous but the local one is not
 *    (the decode rank holds a part of the prefill rank's heads): the sender
 *    packs the pieces into registered staging memory, one put per run;
 *  - UNPACK: the local side is contiguous but the remote side interleaves
 *    other writers' heads within every token (NHD, prefill TP > decode TP):
 *    one data message per run, which the decode rank unpacks into its pages.
 * A packed put or a data message carries at most PLAN_MAX_OP bytes (whole
 * pages); a run longer than that takes one per PLAN_MAX_OP.
 *  - STAGED: not chosen from the layouts but by the memory path
 *    (cuda_stage.c): the sender gathers the run into host staging memory
 *    through a copy engine, sends it as one data message, and the decode
 *    rank scatters it into its pool through its own.
 */
typedef enum plan_mode { PLAN_DIRECT = 0, PLAN_PACK, PLAN_UNPACK, PLAN_STAGED } plan_mode_t;

#define PLAN_MAX_OP ((size_t)4 << 20)

plan_mode_t plan_mode(const plan_geom_t *g);
const char *plan_mode_name(plan_mode_t mode);
/* Are a run's bytes contiguous in the source pool, in the order plan_iter
 * yields the pieces? Then a data message carries them straight from there. */
int plan_src_contiguous(const plan_geom_t *g);
/* The most bytes one packed put or data message carries. */
size_t plan_max_op(const plan_geom_t *g);
/* Pages one packed put or data message carries at most (at least 1). */
uint32_t plan_op_pages(const plan_geom_t *g);
/* Operations (puts, or data messages) a run of count pages takes per
 * (layer, component) in the given mode. */
size_t plan_run_ops(const plan_geom_t *g, plan_mode_t mode, uint32_t count);

#endif
