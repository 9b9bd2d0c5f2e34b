/*
 * plan.c - pairs, runs and pieces (see plan.h).
 */
#include "config.h"

#include "core/base/plan.h"

#include <string.h>

/* The prefill rank that writes model head h into decode rank d. */
static int plan_writer_of(const kvl_t *prefill, unsigned h, int d)
{
    unsigned H = prefill->kv.kv_heads;
    int holders;

    if (H >= (unsigned)prefill->tp) {
        return (int)(h / prefill->heads);
    }
    holders = prefill->tp / (int)H;
    return (int)h * holders + d % holders;
}

void plan_pair(const kvl_t *prefill, int p, const kvl_t *decode, int d, plan_pair_t *pair)
{
    unsigned pfirst = kvl_first_head(prefill, p), pend = pfirst + prefill->heads;
    unsigned dfirst = kvl_first_head(decode, d), dend = dfirst + decode->heads;
    unsigned lo = pfirst > dfirst ? pfirst : dfirst, hi = pend < dend ? pend : dend;
    unsigned h;

    memset(pair, 0, sizeof(*pair));
    if (lo >= hi) {
        return;
    }
    pair->talks = 1;
    /* Heads p holds that d needs form one range; p writes the part of it
     * that it is the chosen writer of, which is the whole range or none:
     * a prefill rank holding several heads is their only holder. */
    for (h = lo; h < hi && plan_writer_of(prefill, h, d) != p; h++) {
    }
    if (h == hi) {
        return;
    }
    pair->writes = 1;
    pair->src_head = lo - pfirst;
    pair->dst_head = lo - dfirst;
    pair->nheads = hi - lo;
    pair->aux_writer = plan_writer_of(prefill, dfirst, d) == p;
}

size_t plan_runs(const uint32_t *src, const uint32_t *dst, size_t n, plan_run_t *runs)
{
    size_t nruns = 0;

    for (size_t i = 0; i < n; i++) {
        plan_run_t *last = nruns ? &runs[nruns - 1] : NULL;

        if (last != NULL && src[i] == last->src + last->count &&
            dst[i] == last->dst + last->count) {
            last->count++;
        } else {
            runs[nruns].src = src[i];
            runs[nruns].dst = dst[i];
            runs[nruns].count = 1;
            nruns++;
        }
    }
    return nruns;
}

/* Dimensions of a layout from innermost to outermost. */
enum { PLAN_HEAD, PLAN_TOKEN, PLAN_PAGE };

static void plan_order(kvx_page_layout_t layout, int order[PLAN_DIMS])
{
    static const int hnd[] = { PLAN_TOKEN, PLAN_HEAD, PLAN_PAGE };
    static const int nhd[] = { PLAN_HEAD, PLAN_TOKEN, PLAN_PAGE };
    static const int head_major[] = { PLAN_TOKEN, PLAN_PAGE, PLAN_HEAD };
    const int *o = layout == KVX_PAGE_NHD ? nhd : layout == KVX_PAGE_HEAD_MAJOR ? head_major : hnd;

    memcpy(order, o, sizeof(int) * PLAN_DIMS);
}

static size_t plan_stride(const kvl_strides_t *s, int dim)
{
    return dim == PLAN_HEAD ? s->head : dim == PLAN_TOKEN ? s->token : s->page;
}

void plan_geom_init(plan_geom_t *g, const kvl_t *src, size_t src_pages, const kvl_t *dst,
                    size_t dst_pages, const plan_pair_t *pair)
{
    kvl_strides_t ss = kvl_strides(src, src_pages), ds = kvl_strides(dst, dst_pages);
    int order[PLAN_DIMS];

    memset(g, 0, sizeof(*g));
    plan_order(src->kv.page_layout, order);
    g->block = src->row;
    g->ndims = PLAN_DIMS;
    for (int i = 0; i < PLAN_DIMS; i++) {
        int dim = order[i];

        g->dim_is_page[i] = dim == PLAN_PAGE;
        g->extent[i] = dim == PLAN_HEAD ? pair->nheads : dim == PLAN_TOKEN ? src->kv.page_size : 0;
        g->sstride[i] = plan_stride(&ss, dim);
        g->dstride[i] = plan_stride(&ds, dim);
    }
    g->sbase = pair->src_head * ss.head;
    g->dbase = pair->dst_head * ds.head;
    g->spage = ss.page;
    g->dpage = ds.page;
    g->pair_page_bytes = (size_t)pair->nheads * src->kv.page_size * src->row;
}

/* Folds inner dimensions that are contiguous on the given sides into one
 * piece. */
static void plan_fold_sides(const plan_geom_t *g, const size_t extent[PLAN_DIMS], int sides,
                            size_t *len_p, int *first_p)
{
    size_t len = g->block;
    int i;

    for (i = 0; i < g->ndims; i++) {
        if (extent[i] == 1) {
            continue;
        }
        if (((sides & PLAN_SRC) && g->sstride[i] != len) ||
            ((sides & PLAN_DST) && g->dstride[i] != len)) {
            break;
        }
        len *= extent[i];
    }
    *len_p = len;
    *first_p = i;
}

void plan_iter_init(plan_iter_t *it, const plan_geom_t *g, const plan_run_t *run)
{
    plan_iter_init_sides(it, g, run, PLAN_SRC | PLAN_DST);
}

void plan_iter_init_sides(plan_iter_t *it, const plan_geom_t *g, const plan_run_t *run, int sides)
{
    memset(it, 0, sizeof(*it));
    it->g = g;
    for (int i = 0; i < g->ndims; i++) {
        it->extent[i] = g->dim_is_page[i] ? run->count : g->extent[i];
    }
    plan_fold_sides(g, it->extent, sides, &it->len, &it->first);
    it->soff = g->sbase + run->src * g->spage;
    it->doff = g->dbase + run->dst * g->dpage;
    it->done = run->count == 0;
}

int plan_iter_next(plan_iter_t *it, size_t *src_off, size_t *dst_off, size_t *len)
{
    const plan_geom_t *g = it->g;
    size_t s = it->soff, d = it->doff;
    int i;

    if (it->done) {
        return 0;
    }
    for (i = it->first; i < g->ndims; i++) {
        s += it->idx[i] * g->sstride[i];
        d += it->idx[i] * g->dstride[i];
    }
    *src_off = s;
    *dst_off = d;
    *len = it->len;
    /* Odometer over the dimensions that were not folded. */
    for (i = it->first; i < g->ndims; i++) {
        if (++it->idx[i] < it->extent[i]) {
            return 1;
        }
        it->idx[i] = 0;
    }
    it->done = 1;
    return 1;
}

/* Pieces of a run of count pages when only the given sides must be
 * contiguous. */
static size_t plan_pieces_sides(const plan_geom_t *g, uint32_t count, int sides)
{
    size_t extent[PLAN_DIMS], len, n = 1;
    int first;

    if (count == 0) {
        return 0;
    }
    for (int i = 0; i < g->ndims; i++) {
        extent[i] = g->dim_is_page[i] ? count : g->extent[i];
    }
    plan_fold_sides(g, extent, sides, &len, &first);
    for (int i = first; i < g->ndims; i++) {
        n *= extent[i];
    }
    return n;
}

size_t plan_run_pieces(const plan_geom_t *g, uint32_t count)
{
    return plan_pieces_sides(g, count, PLAN_SRC | PLAN_DST);
}

plan_mode_t plan_mode(const plan_geom_t *g)
{
    /* Two pages tell whether the page dimension folds too; the page stride
     * is the same for every run, so what holds for two holds for any count. */
    int src_contig = plan_pieces_sides(g, 2, PLAN_SRC) == 1;
    int dst_contig = plan_pieces_sides(g, 2, PLAN_DST) == 1;

    if (plan_run_pieces(g, 2) == 1 || g->pair_page_bytes > PLAN_MAX_OP) {
        return PLAN_DIRECT;
    }
    if (dst_contig && !src_contig) {
        return PLAN_PACK;
    }
    /* Several pieces within one page of a contiguous source: the decode
     * page interleaves writers within every token. Whole pages (HND) stay
     * direct puts, which land without any copy. */
    if (src_contig && !dst_contig && plan_run_pieces(g, 1) > 1) {
        return PLAN_UNPACK;
    }
    return PLAN_DIRECT;
}

int plan_src_contiguous(const plan_geom_t *g)
{
    return plan_pieces_sides(g, 2, PLAN_SRC) == 1;
}

size_t plan_max_op(const plan_geom_t *g)
{
    return (size_t)plan_op_pages(g) * g->pair_page_bytes;
}

const char *plan_mode_name(plan_mode_t mode)
{
    return mode == PLAN_PACK     ? "packed"
           : mode == PLAN_UNPACK ? "unpacked"
           : mode == PLAN_STAGED ? "staged"
                                 : "direct";
}

uint32_t plan_op_pages(const plan_geom_t *g)
{
    size_t n = g->pair_page_bytes > 0 ? PLAN_MAX_OP / g->pair_page_bytes : 1;

    return n == 0 ? 1 : n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

size_t plan_run_ops(const plan_geom_t *g, plan_mode_t mode, uint32_t count)
{
    uint32_t per_op = plan_op_pages(g);

    if (mode == PLAN_DIRECT) {
        return plan_run_pieces(g, count);
    }
    return (count + (size_t)per_op - 1) / per_op;
}
