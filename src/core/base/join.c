/*
 * join.c - the join handshake's frames, proofs and key file (join.h).
 *
 * The proofs are HMAC-SHA256 from nettle (Debian's nettle-dev, GnuTLS's
 * crypto library): a small library with no global state, and memeql_sec()
 * compares proofs in constant time.
 */
#include "config.h"

#include "core/base/join.h"

#include <errno.h>
#include <fcntl.h>
#include <nettle/hmac.h>
#include <nettle/memops.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

static const char JOIN_LABEL_HELLO[] = "kvx-join-hello";
static const char JOIN_LABEL_WELCOME[] = "kvx-join-welcome";
static const char JOIN_LABEL_DESC_JOINER[] = "kvx-join-desc-joiner";
static const char JOIN_LABEL_DESC_JOB[] = "kvx-join-desc-job";

static int join_fail(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;

    if (why != NULL && len > 0) {
        va_start(ap, fmt);
        vsnprintf(why, len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* ---- little-endian cursor ---------------------------------------------- */

typedef struct wr {
    uint8_t *p;
} wr_t;

/* Writes the low bytes of v, least significant first. */
static void wr_le(wr_t *w, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) {
        *w->p++ = (uint8_t)(v >> (8 * i));
    }
}

static void wr_u32(wr_t *w, uint32_t v)
{
    wr_le(w, v, 4);
}

static void wr_u64(wr_t *w, uint64_t v)
{
    wr_le(w, v, 8);
}

static void wr_bytes(wr_t *w, const void *b, size_t n)
{
    memcpy(w->p, b, n);
    w->p += n;
}

typedef struct rd {
    const uint8_t *p, *end;
} rd_t;

static int rd_le(rd_t *r, uint64_t *v, int bytes)
{
    if (r->end - r->p < bytes) {
        return -1;
    }
    *v = 0;
    for (int i = 0; i < bytes; i++) {
        *v |= (uint64_t)r->p[i] << (8 * i);
    }
    r->p += bytes;
    return 0;
}

static int rd_u32(rd_t *r, uint32_t *v)
{
    uint64_t u = 0;
    int rc = rd_le(r, &u, 4);

    *v = (uint32_t)u;
    return rc;
}

static int rd_u64(rd_t *r, uint64_t *v)
{
    return rd_le(r, v, 8);
}

static int rd_bytes(rd_t *r, void *b, size_t n)
{
    if ((size_t)(r->end - r->p) < n) {
        return -1;
    }
    memcpy(b, r->p, n);
    r->p += n;
    return 0;
}

/* ---- frames ------------------------------------------------------------- */

static size_t join_frame(uint8_t *out, join_type_t type, size_t body_len)
{
    wr_t w = { out };

    wr_u32(&w, JOIN_MAGIC);
    wr_u32(&w, JOIN_VERSION | (uint32_t)type << 16);
    wr_u32(&w, (uint32_t)body_len);
    return JOIN_HEADER + body_len;
}

int join_header_decode(const uint8_t *buf, join_type_t *type, uint32_t *body_len, char *why,
                       size_t why_len)
{
    rd_t r = { buf, buf + JOIN_HEADER };
    uint32_t magic, vt, len;

    rd_u32(&r, &magic);
    rd_u32(&r, &vt);
    rd_u32(&r, &len);
    if (magic != JOIN_MAGIC) {
        return join_fail(why, why_len, "not a kvx join frame (magic 0x%08x)", magic);
    }
    if ((vt & 0xffff) != JOIN_VERSION) {
        return join_fail(why, why_len, "join protocol version %u, this kvx speaks %u", vt & 0xffff,
                         JOIN_VERSION);
    }
    if ((vt >> 16) < JOIN_CHALLENGE || (vt >> 16) > JOIN_DESC) {
        return join_fail(why, why_len, "unknown join frame type %u", vt >> 16);
    }
    /* Only a side that proved the key sends the large frames. */
    uint32_t max =
        (vt >> 16) == JOIN_WELCOME || (vt >> 16) == JOIN_DESC ? JOIN_DESC_MAX : JOIN_BODY_MAX;

    if (len > max) {
        return join_fail(why, why_len, "a join frame of %u bytes, at most %u", len, max);
    }
    *type = (join_type_t)(vt >> 16);
    *body_len = len;
    return 0;
}

/* HMAC-SHA256(key, label || first || second || fields). */
static void join_mac(const uint8_t key[JOIN_KEY_BYTES], const char *label, const uint8_t *first,
                     const uint8_t *second, const uint8_t *fields, size_t len,
                     uint8_t mac[JOIN_MAC_BYTES])
{
    struct hmac_sha256_ctx h;

    hmac_sha256_set_key(&h, JOIN_KEY_BYTES, key);
    hmac_sha256_update(&h, strlen(label) + 1, (const uint8_t *)label);
    hmac_sha256_update(&h, JOIN_NONCE_BYTES, first);
    hmac_sha256_update(&h, JOIN_NONCE_BYTES, second);
    hmac_sha256_update(&h, len, fields);
    hmac_sha256_digest(&h, JOIN_MAC_BYTES, mac);
}

size_t join_challenge_encode(const uint8_t nonce[JOIN_NONCE_BYTES], uint8_t *out)
{
    memcpy(out + JOIN_HEADER, nonce, JOIN_NONCE_BYTES);
    return join_frame(out, JOIN_CHALLENGE, JOIN_NONCE_BYTES);
}

int join_challenge_decode(const uint8_t *body, uint32_t len, uint8_t nonce[JOIN_NONCE_BYTES],
                          char *why, size_t why_len)
{
    if (len != JOIN_NONCE_BYTES) {
        return join_fail(why, why_len, "a challenge of %u bytes, not %u", len, JOIN_NONCE_BYTES);
    }
    memcpy(nonce, body, JOIN_NONCE_BYTES);
    return 0;
}

/* The hello's body: nonce, proof, then the fields the proof covers. */
#define HELLO_FIELDS_AT (JOIN_NONCE_BYTES + JOIN_MAC_BYTES)

size_t join_hello_encode(const join_hello_t *h, const uint8_t key[JOIN_KEY_BYTES],
                         const uint8_t job_nonce[JOIN_NONCE_BYTES], uint8_t *out)
{
    uint8_t *body = out + JOIN_HEADER;
    size_t name_len = strnlen(h->name, JOIN_NAME_MAX - 1);
    wr_t w = { body + HELLO_FIELDS_AT };

    memcpy(body, h->nonce, JOIN_NONCE_BYTES);
    wr_u32(&w, (uint32_t)h->role);
    wr_u32(&w, (uint32_t)h->tp_size);
    wr_u32(&w, h->kv.layers);
    wr_u32(&w, h->kv.page_size);
    wr_u32(&w, h->kv.kv_heads);
    wr_u32(&w, h->kv.head_dim);
    wr_u32(&w, (uint32_t)h->kv.dtype);
    wr_u32(&w, (uint32_t)h->kv.attn);
    wr_u32(&w, (uint32_t)h->kv.page_layout);
    wr_u64(&w, h->num_pages);
    wr_u64(&w, h->aux_item_size);
    wr_u64(&w, h->page_stride);
    wr_u32(&w, (uint32_t)(h->place + 1));
    wr_u32(&w, (uint32_t)h->tp_rank);
    wr_u32(&w, h->generation);
    wr_u32(&w, (uint32_t)name_len);
    wr_bytes(&w, h->name, name_len);
    join_mac(key, JOIN_LABEL_HELLO, job_nonce, h->nonce, body + HELLO_FIELDS_AT,
             (size_t)(w.p - body) - HELLO_FIELDS_AT, body + JOIN_NONCE_BYTES);
    return join_frame(out, JOIN_HELLO, (size_t)(w.p - body));
}

/* Each field of a hello must lie within these (inclusive). */
typedef struct join_limit {
    const char *what;
    uint64_t lo, hi;
} join_limit_t;

static int join_check(const join_limit_t *l, uint64_t v, char *why, size_t why_len)
{
    if (v < l->lo || v > l->hi) {
        return join_fail(why, why_len, "hello: %s %llu is outside %llu..%llu", l->what,
                         (unsigned long long)v, (unsigned long long)l->lo,
                         (unsigned long long)l->hi);
    }
    return 0;
}

int join_hello_decode(const uint8_t *body, uint32_t len, const uint8_t key[JOIN_KEY_BYTES],
                      const uint8_t job_nonce[JOIN_NONCE_BYTES], join_hello_t *h, char *why,
                      size_t why_len)
{
    static const join_limit_t limits[] = {
        { "role", KVX_ROLE_PREFILL, KVX_ROLE_DECODE },
        { "TP size", 1, 4096 },
        { "layers", 1, 1u << 16 },
        { "page size", 1, 1u << 20 },
        { "KV heads", 1, 1u << 16 },
        { "head dim", 1, 1u << 16 },
        { "dtype", KVX_DTYPE_BF16, KVX_DTYPE_FP32 },
        { "attention", KVX_ATTN_MHA, KVX_ATTN_MLA },
        { "page layout", KVX_PAGE_HND, KVX_PAGE_HEAD_MAJOR },
        { "pages", 1, 1ull << 40 },
        { "aux item size", 0, 1ull << 30 },
        { "page stride", 0, 1ull << 40 },
        { "place + 1", 0, 1u << 16 },
        { "TP rank", 0, 4095 },
        { "generation", 0, 1u << 31 },
        { "name length", 0, JOIN_NAME_MAX - 1 },
    };
    enum { NV = sizeof(limits) / sizeof(limits[0]) };
    uint8_t mac[JOIN_MAC_BYTES];
    uint64_t v[NV];
    rd_t r = { body + HELLO_FIELDS_AT, body + len };

    if (len < HELLO_FIELDS_AT) {
        return join_fail(why, why_len, "a hello of %u bytes is too short", len);
    }
    join_mac(key, JOIN_LABEL_HELLO, job_nonce, body, body + HELLO_FIELDS_AT, len - HELLO_FIELDS_AT,
             mac);
    if (!memeql_sec(mac, body + JOIN_NONCE_BYTES, JOIN_MAC_BYTES)) {
        return join_fail(why, why_len, "the joiner did not prove it holds the job key");
    }
    memset(h, 0, sizeof(*h));
    memcpy(h->nonce, body, JOIN_NONCE_BYTES);
    for (int i = 0; i < NV; i++) {
        uint32_t u = 0;
        int wide = i >= 9 && i < 12; /* pages, aux item size, page stride */
        int bad = wide ? rd_u64(&r, &v[i]) : rd_u32(&r, &u);

        if (!wide) {
            v[i] = u;
        }
        if (bad) {
            return join_fail(why, why_len, "hello: ends before its %s", limits[i].what);
        }
        if (join_check(&limits[i], v[i], why, why_len) != 0) {
            return -1;
        }
    }
    if (v[12] > 0 && v[13] >= v[1]) {
        return join_fail(why, why_len, "hello: TP rank %llu of an instance of TP %llu",
                         (unsigned long long)v[13], (unsigned long long)v[1]);
    }
    if (rd_bytes(&r, h->name, (size_t)v[NV - 1]) != 0) {
        return join_fail(why, why_len, "hello: ends inside its name");
    }
    if (r.p != r.end) {
        return join_fail(why, why_len, "hello: %zu bytes after its name", (size_t)(r.end - r.p));
    }
    for (uint64_t i = 0; i < v[NV - 1]; i++) {
        if (h->name[i] < 0x20 || h->name[i] > 0x7e) {
            return join_fail(why, why_len, "hello: the name holds byte 0x%02x",
                             (unsigned char)h->name[i]);
        }
    }
    h->role = (int32_t)v[0];
    h->tp_size = (int32_t)v[1];
    h->kv.layers = (unsigned)v[2];
    h->kv.page_size = (unsigned)v[3];
    h->kv.kv_heads = (unsigned)v[4];
    h->kv.head_dim = (unsigned)v[5];
    h->kv.dtype = (kvx_dtype_t)v[6];
    h->kv.attn = (kvx_attn_t)v[7];
    h->kv.page_layout = (kvx_page_layout_t)v[8];
    h->num_pages = v[9];
    h->aux_item_size = v[10];
    h->page_stride = v[11];
    h->place = (int32_t)v[12] - 1;
    h->tp_rank = (int32_t)v[13];
    h->generation = (uint32_t)v[14];
    return 0;
}

#define WELCOME_FIELDS 28u /* without the doors */

size_t join_welcome_size(const join_welcome_t *w)
{
    size_t n = JOIN_HEADER + JOIN_MAC_BYTES + WELCOME_FIELDS;

    for (uint32_t i = 0; i < w->ndoors; i++) {
        n += 8 + strnlen(w->doors[i].addr, JOIN_ADDR_MAX - 1);
    }
    return n;
}

size_t join_welcome_encode(const join_welcome_t *wl, const uint8_t key[JOIN_KEY_BYTES],
                           const uint8_t job_nonce[JOIN_NONCE_BYTES],
                           const uint8_t joiner_nonce[JOIN_NONCE_BYTES], uint8_t *out)
{
    uint8_t *body = out + JOIN_HEADER;
    wr_t w = { body + JOIN_MAC_BYTES };

    wr_u32(&w, (uint32_t)wl->instance);
    wr_u32(&w, wl->generation);
    for (int i = 0; i < 2; i++) {
        wr_u32(&w, (uint32_t)wl->count[i]);
        wr_u32(&w, (uint32_t)wl->tp[i]);
    }
    wr_u32(&w, wl->ndoors);
    for (uint32_t i = 0; i < wl->ndoors; i++) {
        size_t n = strnlen(wl->doors[i].addr, JOIN_ADDR_MAX - 1);

        wr_u32(&w, (uint32_t)wl->doors[i].rank);
        wr_u32(&w, (uint32_t)n);
        wr_bytes(&w, wl->doors[i].addr, n);
    }
    join_mac(key, JOIN_LABEL_WELCOME, joiner_nonce, job_nonce, body + JOIN_MAC_BYTES,
             (size_t)(w.p - body) - JOIN_MAC_BYTES, body);
    return join_frame(out, JOIN_WELCOME, (size_t)(w.p - body));
}

/* The doors of a welcome, after its fixed fields. */
static int join_doors_decode(rd_t *r, uint32_t n, join_door_t **doors_p, char *why, size_t why_len)
{
    join_door_t *doors;

    /* Counted before anything is allocated for them: each takes 8 bytes. */
    if (n > JOIN_DOORS_MAX || (size_t)n * 8 > (size_t)(r->end - r->p)) {
        return join_fail(why, why_len, "welcome: %u doors, at most %u in %zu bytes", n,
                         JOIN_DOORS_MAX, (size_t)(r->end - r->p));
    }
    doors = n > 0 ? calloc(n, sizeof(*doors)) : NULL;
    if (n > 0 && doors == NULL) {
        return join_fail(why, why_len, "welcome: no memory for %u doors", n);
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t rank, len;

        if (rd_u32(r, &rank) != 0 || rd_u32(r, &len) != 0 || len >= JOIN_ADDR_MAX ||
            (int32_t)rank < 0 || rd_bytes(r, doors[i].addr, len) != 0) {
            free(doors);
            return join_fail(why, why_len, "welcome: door %u is malformed", i);
        }
        doors[i].rank = (int32_t)rank;
        for (uint32_t c = 0; c < len; c++) {
            unsigned char b = (unsigned char)doors[i].addr[c];

            if (b < 0x21 || b > 0x7e) {
                free(doors);
                return join_fail(why, why_len, "welcome: door %u's address holds byte 0x%02x", i,
                                 b);
            }
        }
    }
    if (r->p != r->end) {
        free(doors);
        return join_fail(why, why_len, "welcome: %zu bytes after its doors",
                         (size_t)(r->end - r->p));
    }
    *doors_p = doors;
    return 0;
}

int join_welcome_decode(const uint8_t *body, uint32_t len, const uint8_t key[JOIN_KEY_BYTES],
                        const uint8_t job_nonce[JOIN_NONCE_BYTES],
                        const uint8_t joiner_nonce[JOIN_NONCE_BYTES], join_welcome_t *wl, char *why,
                        size_t why_len)
{
    uint8_t mac[JOIN_MAC_BYTES];
    rd_t r = { body + JOIN_MAC_BYTES, body + len };
    join_door_t *doors = NULL;
    uint32_t v[7];

    memset(wl, 0, sizeof(*wl));
    if (len < JOIN_MAC_BYTES + WELCOME_FIELDS) {
        return join_fail(why, why_len, "a welcome of %u bytes, at least %u", len,
                         JOIN_MAC_BYTES + WELCOME_FIELDS);
    }
    join_mac(key, JOIN_LABEL_WELCOME, joiner_nonce, job_nonce, body + JOIN_MAC_BYTES,
             len - JOIN_MAC_BYTES, mac);
    if (!memeql_sec(mac, body, JOIN_MAC_BYTES)) {
        return join_fail(why, why_len, "the job did not prove it holds the job key");
    }
    for (int i = 0; i < 7; i++) {
        rd_u32(&r, &v[i]);
    }
    if ((int32_t)v[0] < 0 || v[1] == 0 || (int32_t)v[2] < 0 || (int32_t)v[4] < 0 ||
        (int32_t)v[3] < 1 || (int32_t)v[5] < 1) {
        return join_fail(why, why_len, "welcome: instance %d, generation %u, job %dx%d,%dx%d",
                         (int32_t)v[0], v[1], (int32_t)v[2], (int32_t)v[3], (int32_t)v[4],
                         (int32_t)v[5]);
    }
    if (join_doors_decode(&r, v[6], &doors, why, why_len) != 0) {
        return -1;
    }
    wl->instance = (int32_t)v[0];
    wl->generation = v[1];
    for (int i = 0; i < 2; i++) {
        wl->count[i] = (int32_t)v[2 + 2 * i];
        wl->tp[i] = (int32_t)v[3 + 2 * i];
    }
    wl->ndoors = v[6];
    wl->doors = doors;
    return 0;
}

size_t join_desc_encode(const void *desc, size_t len, int from_joiner,
                        const uint8_t key[JOIN_KEY_BYTES],
                        const uint8_t job_nonce[JOIN_NONCE_BYTES],
                        const uint8_t joiner_nonce[JOIN_NONCE_BYTES], uint8_t *out)
{
    uint8_t *body = out + JOIN_HEADER;

    memcpy(body + JOIN_MAC_BYTES, desc, len);
    join_mac(key, from_joiner ? JOIN_LABEL_DESC_JOINER : JOIN_LABEL_DESC_JOB,
             from_joiner ? job_nonce : joiner_nonce, from_joiner ? joiner_nonce : job_nonce,
             body + JOIN_MAC_BYTES, len, body);
    return join_frame(out, JOIN_DESC, JOIN_MAC_BYTES + len);
}

int join_desc_decode(const uint8_t *body, uint32_t len, int from_joiner,
                     const uint8_t key[JOIN_KEY_BYTES], const uint8_t job_nonce[JOIN_NONCE_BYTES],
                     const uint8_t joiner_nonce[JOIN_NONCE_BYTES], const uint8_t **desc,
                     size_t *desc_len, char *why, size_t why_len)
{
    uint8_t mac[JOIN_MAC_BYTES];

    if (len < JOIN_MAC_BYTES) {
        return join_fail(why, why_len, "a descriptor of %u bytes is too short", len);
    }
    join_mac(key, from_joiner ? JOIN_LABEL_DESC_JOINER : JOIN_LABEL_DESC_JOB,
             from_joiner ? job_nonce : joiner_nonce, from_joiner ? joiner_nonce : job_nonce,
             body + JOIN_MAC_BYTES, len - JOIN_MAC_BYTES, mac);
    if (!memeql_sec(mac, body, JOIN_MAC_BYTES)) {
        return join_fail(why, why_len, "the descriptor's proof is wrong");
    }
    *desc = body + JOIN_MAC_BYTES;
    *desc_len = len - JOIN_MAC_BYTES;
    return 0;
}

size_t join_refuse_encode(const join_refuse_t *rf, uint8_t *out)
{
    uint8_t *body = out + JOIN_HEADER;
    size_t n = strnlen(rf->text, JOIN_TEXT_MAX - 1);
    wr_t w = { body };

    wr_u32(&w, (uint32_t)rf->status);
    wr_u32(&w, (uint32_t)n);
    wr_bytes(&w, rf->text, n);
    return join_frame(out, JOIN_REFUSE, 8 + n);
}

int join_refuse_decode(const uint8_t *body, uint32_t len, join_refuse_t *rf, char *why,
                       size_t why_len)
{
    rd_t r = { body, body + len };
    uint32_t status, n;

    if (rd_u32(&r, &status) != 0 || rd_u32(&r, &n) != 0 || n >= JOIN_TEXT_MAX ||
        n != (uint32_t)(r.end - r.p)) {
        return join_fail(why, why_len, "a malformed refusal of %u bytes", len);
    }
    if ((int32_t)status >= 0 || (int32_t)status < -1000) {
        return join_fail(why, why_len, "a refusal with status %d", (int32_t)status);
    }
    rf->status = (int32_t)status;
    memcpy(rf->text, r.p, n);
    rf->text[n] = '\0';
    for (uint32_t i = 0; i < n; i++) {
        if (rf->text[i] < 0x20 || rf->text[i] > 0x7e) {
            rf->text[i] = '?';
        }
    }
    return 0;
}

/* ---- the key file ------------------------------------------------------- */

static int join_hex(int c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

int join_key_load(const char *path, uint8_t key[JOIN_KEY_BYTES], char *why, size_t why_len)
{
    char text[2 * JOIN_KEY_BYTES + 2];
    struct stat st;
    ssize_t n;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);

    if (fd < 0) {
        return join_fail(why, why_len, "cannot open the job key file %s: %s", path,
                         strerror(errno));
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return join_fail(why, why_len, "the job key file %s is not a regular file", path);
    }
    if (st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
        close(fd);
        return join_fail(why, why_len,
                         "the job key file %s must be owned by uid %u and readable by no one "
                         "else (it is uid %u, mode %03o)",
                         path, (unsigned)geteuid(), (unsigned)st.st_uid,
                         (unsigned)(st.st_mode & 0777));
    }
    n = read(fd, text, sizeof(text));
    close(fd);
    if (n == (ssize_t)sizeof(text) - 1 && text[n - 1] == '\n') {
        n--;
    }
    if (n != 2 * JOIN_KEY_BYTES) {
        return join_fail(why, why_len, "the job key file %s must hold %u hex digits", path,
                         2 * JOIN_KEY_BYTES);
    }
    for (unsigned i = 0; i < JOIN_KEY_BYTES; i++) {
        int hi = join_hex(text[2 * i]), lo = join_hex(text[2 * i + 1]);

        if (hi < 0 || lo < 0) {
            memset(key, 0, JOIN_KEY_BYTES);
            return join_fail(why, why_len, "the job key file %s holds a non-hex character", path);
        }
        key[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

int join_random(uint8_t *buf, size_t len)
{
    size_t got = 0;

    while (got < len) {
        ssize_t n = getrandom(buf + got, len - got, 0);

        if (n < 0 && errno != EINTR) {
            return -1;
        }
        got += n > 0 ? (size_t)n : 0;
    }
    return 0;
}
