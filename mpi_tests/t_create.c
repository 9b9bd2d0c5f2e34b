/*
 * t_create.c - context creation on 5 ranks: every failure is the same status
 * and reason on every rank, and a KV layout mismatch between a prefill and a
 * decode instance marks that pair unusable -- its rooms fail at open with the
 * reason naming both values and both instances -- while other pairs work.
 */
#include <kvx.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, size, failures;

#define CHECK(cond, ...)                                             \
    do {                                                             \
        if (!(cond)) {                                               \
            fprintf(stderr, "t_create: rank %d: %s: ", rank, #cond); \
            fprintf(stderr, __VA_ARGS__);                            \
            fprintf(stderr, "\n");                                   \
            failures++;                                              \
        }                                                            \
    } while (0)

static void base(kvx_ctx_params_t *p, const char *layout)
{
    kvx_ctx_params_init(p);
    p->layout = layout;
    p->kv.layers = 2;
    p->kv.page_size = 16;
    p->kv.kv_heads = 2;
    p->kv.head_dim = 16;
    p->num_pages = 8;
    p->aux_slots = 4;
    p->aux_item_size = 8;
}

/* Every rank must hold the same line; rank 0 checks it against want. */
static void same_everywhere(const char *what, const char *line, const char *want)
{
    char *all = NULL;

    if (rank == 0) {
        all = malloc(512 * (size_t)size);
    }
    MPI_Gather(line, 512, MPI_CHAR, all, 512, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 0; r < size; r++) {
            CHECK(strcmp(all + 512 * r, all) == 0, "%s: rank %d says '%s', rank 0 '%s'", what, r,
                  all + 512 * r, all);
        }
        CHECK(strstr(all, want) != NULL, "%s: '%s' lacks '%s'", what, all, want);
        printf("%-12s every rank: %s\n", what, all);
        free(all);
    }
}

/* Creation that must fail the same way everywhere. */
static void expect_create_fails(const char *what, kvx_ctx_params_t *p, kvx_status_t status,
                                const char *want)
{
    kvx_ctx_t *ctx = NULL;
    kvx_failure_t why;
    char line[512] = "";
    kvx_status_t st = kvx_ctx_create(MPI_COMM_WORLD, p, &ctx, &why);

    CHECK(st == status, "%s: create returned %s", what, kvx_status_name(st));
    if (st == KVX_OK) {
        kvx_ctx_destroy(ctx);
        return;
    }
    kvx_failure_format(&why, line, sizeof(line));
    same_everywhere(what, line, want);
}

/* decode[1] differs by one property; decode[0] matches the prefill. */
static void expect_pair_mismatch(const char *what, void (*mutate)(kvx_kv_layout_t *),
                                 const char *want)
{
    kvx_ctx_params_t p;
    kvx_identity_t id;
    kvx_failure_t why;
    kvx_ctx_t *ctx;
    char line[512] = "";
    uint32_t page = 3;

    base(&p, "prefill:1x1,decode:2x2");
    if (rank >= 3) {
        mutate(&p.kv);
    }
    if (strcmp(what, "aux") == 0 && rank >= 3) {
        p.aux_item_size = 4;
    }
    if (kvx_ctx_create(MPI_COMM_WORLD, &p, &ctx, &why) != KVX_OK) {
        kvx_failure_format(&why, line, sizeof(line));
        CHECK(0, "%s: create failed: %s", what, line);
        return;
    }
    kvx_ctx_identity(ctx, &id);
    if (id.role == KVX_ROLE_PREFILL) {
        CHECK(kvx_ctx_pair_status(ctx, 0, NULL) == KVX_OK, "%s: pair with decode[0]", what);
        CHECK(kvx_ctx_pair_status(ctx, 1, &why) == KVX_ERR_KV_MISMATCH, "%s: pair status", what);
        CHECK(kvx_room_send_open(ctx, 7, 1, 1) == KVX_ERR_KV_MISMATCH, "%s: send_open", what);
        CHECK(kvx_room_poll(ctx, 7, NULL) == KVX_ERR_NO_ROOM, "%s: a refused room exists", what);
    } else {
        kvx_status_t pst = kvx_ctx_pair_status(ctx, 0, &why);

        CHECK(pst == (id.instance == 1 ? KVX_ERR_KV_MISMATCH : KVX_OK), "%s: pair status %s", what,
              kvx_status_name(pst));
        if (id.instance == 1) {
            CHECK(kvx_room_recv_open(ctx, 7, 0, &page, 1, -1) == KVX_ERR_KV_MISMATCH,
                  "%s: recv_open", what);
        }
    }
    if (id.role == KVX_ROLE_DECODE && id.instance == 0) {
        /* Ranks that do not touch the broken pair report what rank 1 reports. */
        kvx_ctx_pair_status(ctx, 0, NULL);
        snprintf(line, sizeof(line), "-");
    } else {
        snprintf(line, sizeof(line), "%s", why.text);
    }
    {
        char *all = rank == 0 ? malloc(512 * (size_t)size) : NULL;

        MPI_Gather(line, 512, MPI_CHAR, all, 512, MPI_CHAR, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            for (int r = 0; r < size; r++) {
                if (strcmp(all + 512 * r, "-") != 0) {
                    CHECK(strcmp(all + 512 * r, want) == 0, "%s: rank %d: '%s', want '%s'", what, r,
                          all + 512 * r, want);
                }
            }
            printf("%-12s prefill[0] and decode[1] ranks: %s\n", what, want);
            free(all);
        }
    }
    kvx_ctx_destroy(ctx);
}

static void m_page(kvx_kv_layout_t *kv)
{
    kv->page_size = 32;
}
static void m_dtype(kvx_kv_layout_t *kv)
{
    kv->dtype = KVX_DTYPE_FP16;
}
static void m_layers(kvx_kv_layout_t *kv)
{
    kv->layers = 3;
}
static void m_heads(kvx_kv_layout_t *kv)
{
    kv->kv_heads = 4;
}
static void m_dim(kvx_kv_layout_t *kv)
{
    kv->head_dim = 32;
}
static void m_mla(kvx_kv_layout_t *kv)
{
    kv->attn = KVX_ATTN_MLA;
    kv->kv_heads = 1;
}
static void m_layout(kvx_kv_layout_t *kv)
{
    kv->page_layout = KVX_PAGE_NHD;
}
static void m_none(kvx_kv_layout_t *kv)
{
    (void)kv;
}

int main(int argc, char **argv)
{
    kvx_ctx_params_t p;
    int total = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 5) {
        fprintf(stderr, "t_create needs 5 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    expect_pair_mismatch(
        "page_size", m_page,
        "page size mismatch: prefill[0] has page_size=16, decode[1] has page_size=32");
    expect_pair_mismatch("dtype", m_dtype,
                         "dtype mismatch: prefill[0] has dtype=bf16, decode[1] has dtype=fp16");
    expect_pair_mismatch("layers", m_layers,
                         "layer count mismatch: prefill[0] has layers=2, decode[1] has layers=3");
    expect_pair_mismatch(
        "kv_heads", m_heads,
        "KV head count mismatch: prefill[0] has kv_heads=2, decode[1] has kv_heads=4");
    expect_pair_mismatch(
        "head_dim", m_dim,
        "head dim mismatch: prefill[0] has head_dim=16, decode[1] has head_dim=32");
    expect_pair_mismatch(
        "attn", m_mla, "attention kind mismatch: prefill[0] has attn=MHA, decode[1] has attn=MLA");
    expect_pair_mismatch("page_layout", m_layout,
                         "page layout mismatch: prefill[0] has page_layout=HND, decode[1] has "
                         "page_layout=NHD");
    expect_pair_mismatch("aux", m_none,
                         "aux size mismatch: prefill[0] has aux_item_size=8, decode[1] has "
                         "aux_item_size=4");

    base(&p, "prefill:1x2,decode:1x3");
    p.kv.kv_heads = 6;
    {
        kvx_ctx_t *ctx;
        kvx_failure_t why;

        CHECK(kvx_ctx_create(MPI_COMM_WORLD, &p, &ctx, &why) == KVX_OK, "TP 2/3 create");
        CHECK(kvx_ctx_pair_status(ctx, 0, &why) == KVX_ERR_KV_MISMATCH, "TP 2/3 pair");
        CHECK(strcmp(why.text, "TP mismatch: prefill[0] has tp=2, decode[0] has tp=3, and neither "
                               "divides the other") == 0,
              "TP reason: %s", why.text);
        kvx_ctx_destroy(ctx);
    }

    base(&p, "prefill:1x2,decode:1x2");
    expect_create_fails("layout", &p, KVX_ERR_LAYOUT,
                        "KVX_ERR_LAYOUT at init on rank 0: layout 'prefill:1x2,decode:1x2' needs 4 "
                        "ranks but the world has 5");
    base(&p, "prefill:1x2,decode:1x3");
    p.kv.kv_heads = 4;
    expect_create_fails("heads", &p, KVX_ERR_INVALID_PARAM,
                        "decode[0]: kv_heads=4 cannot be split over TP 3");
    base(&p, "prefill:1x2,decode:1x3");
    p.kv.kv_heads = 6;
    if (rank == 3) {
        p.kv.layers = 5;
    }
    expect_create_fails("instance", &p, KVX_ERR_INVALID_PARAM,
                        "decode[0].tp1 (rank 3) and decode[0].tp0 (rank 2) of the same instance "
                        "were given different KV layouts");
    base(&p, "prefill:1x2,decode:1x3");
    p.kv.kv_heads = 6;
    if (rank == 4) {
        p.num_pages = 0;
    }
    expect_create_fails("num_pages", &p, KVX_ERR_INVALID_PARAM,
                        "on decode[0].tp2 (rank 4): num_pages=0");
    expect_create_fails("null", rank == 1 ? NULL : &p, KVX_ERR_INVALID_PARAM,
                        "on rank 1: params is NULL");

    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("%s\n", total == 0 ? "PASS" : "FAIL");
    }
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
