/*
 * test_join.c - the join handshake (core/base/join.c) and the job's door
 * for joining instances (core/link/rendezvous.c), over real sockets: a
 * joiner that proves the key is welcomed; a wrong key, a malformed frame,
 * a slow joiner, a joiner killed at each stage of the handshake, a crowd
 * that takes every slot: refused or dropped with a log line naming its
 * address, and the next good joiner still gets in.
 */
#include <criterion/criterion.h>
#include <kvx.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/base/join.h"
#include "core/link/rendezvous.h"
#include "util/log.h"
#include "util/time.h"

static const uint8_t key[JOIN_KEY_BYTES] = { 1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,
                                             12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
                                             23, 24, 25, 26, 27, 28, 29, 30, 31, 32 };
static const uint8_t job_nonce[JOIN_NONCE_BYTES] = { 0xa5, 0x5a, 7 };

static join_hello_t hello_of(const char *name)
{
    join_hello_t h;

    memset(&h, 0, sizeof(h));
    memset(h.nonce, 0x11, sizeof(h.nonce));
    h.role = KVX_ROLE_DECODE;
    h.tp_size = 2;
    h.kv.layers = 32;
    h.kv.page_size = 16;
    h.kv.kv_heads = 8;
    h.kv.head_dim = 128;
    h.kv.dtype = KVX_DTYPE_BF16;
    h.kv.attn = KVX_ATTN_MHA;
    h.kv.page_layout = KVX_PAGE_NHD;
    h.num_pages = 4096;
    h.aux_item_size = 64;
    h.place = -1;
    snprintf(h.name, sizeof(h.name), "%s", name);
    return h;
}

/* ---- frames ---------------------------------------------------------------- */

Test(join, hello_round_trip_and_every_flipped_byte_breaks_the_proof)
{
    join_hello_t h = hello_of("decode-spare-3"), got;
    uint8_t frame[JOIN_FRAME_MAX];
    size_t n = join_hello_encode(&h, key, job_nonce, frame);
    join_type_t type;
    uint32_t len;
    char why[256];

    cr_assert_eq(join_header_decode(frame, &type, &len, why, sizeof(why)), 0, "%s", why);
    cr_assert_eq(type, JOIN_HELLO);
    cr_assert_eq(len + JOIN_HEADER, n);
    cr_assert_eq(
        join_hello_decode(frame + JOIN_HEADER, len, key, job_nonce, &got, why, sizeof(why)), 0,
        "%s", why);
    cr_expect_eq(got.role, KVX_ROLE_DECODE);
    cr_expect_eq(got.tp_size, 2);
    cr_expect_eq(got.kv.layers, 32);
    cr_expect_eq(got.kv.page_layout, KVX_PAGE_NHD);
    cr_expect_eq(got.num_pages, 4096);
    cr_expect_eq(got.aux_item_size, 64);
    cr_expect_str_eq(got.name, "decode-spare-3");
    cr_expect_eq(memcmp(got.nonce, h.nonce, JOIN_NONCE_BYTES), 0);

    for (size_t i = JOIN_HEADER; i < n; i++) {
        frame[i] ^= 0x40;
        cr_expect_neq(
            join_hello_decode(frame + JOIN_HEADER, len, key, job_nonce, &got, why, sizeof(why)), 0,
            "byte %zu flipped and the hello still decodes", i);
        cr_expect_str_eq(why, "the joiner did not prove it holds the job key", "byte %zu", i);
        frame[i] ^= 0x40;
    }
}

Test(join, a_hello_for_another_challenge_or_key_is_refused)
{
    join_hello_t h = hello_of("replay"), got;
    uint8_t frame[JOIN_FRAME_MAX], other[JOIN_NONCE_BYTES], wrong[JOIN_KEY_BYTES];
    size_t n = join_hello_encode(&h, key, job_nonce, frame);
    char why[256];

    memcpy(other, job_nonce, sizeof(other));
    other[31] ^= 1;
    memcpy(wrong, key, sizeof(wrong));
    wrong[0] ^= 0x80;
    cr_expect_neq(join_hello_decode(frame + JOIN_HEADER, (uint32_t)(n - JOIN_HEADER), key, other,
                                    &got, why, sizeof(why)),
                  0);
    cr_expect_neq(join_hello_decode(frame + JOIN_HEADER, (uint32_t)(n - JOIN_HEADER), wrong,
                                    job_nonce, &got, why, sizeof(why)),
                  0);
    cr_expect_str_eq(why, "the joiner did not prove it holds the job key");
    /* Every length short of the whole is refused, never read past. */
    for (size_t len = 0; len < n - JOIN_HEADER; len++) {
        cr_expect_neq(join_hello_decode(frame + JOIN_HEADER, (uint32_t)len, key, job_nonce, &got,
                                        why, sizeof(why)),
                      0, "%zu bytes", len);
    }
}

/* A hello with a proof but a field out of its limits names the field. */
Test(join, fields_out_of_their_limits_are_named)
{
    join_hello_t h, got;
    uint8_t frame[JOIN_FRAME_MAX];
    char why[256];
    size_t n;

    h = hello_of("x");
    h.kv.layers = 0;
    n = join_hello_encode(&h, key, job_nonce, frame);
    cr_expect_neq(join_hello_decode(frame + JOIN_HEADER, (uint32_t)(n - JOIN_HEADER), key,
                                    job_nonce, &got, why, sizeof(why)),
                  0);
    cr_expect_str_eq(why, "hello: layers 0 is outside 1..65536");

    h = hello_of("x");
    h.role = 7;
    n = join_hello_encode(&h, key, job_nonce, frame);
    join_hello_decode(frame + JOIN_HEADER, (uint32_t)(n - JOIN_HEADER), key, job_nonce, &got, why,
                      sizeof(why));
    cr_expect_str_eq(why, "hello: role 7 is outside 1..2");

    h = hello_of("x");
    h.kv.dtype = (kvx_dtype_t)9;
    n = join_hello_encode(&h, key, job_nonce, frame);
    join_hello_decode(frame + JOIN_HEADER, (uint32_t)(n - JOIN_HEADER), key, job_nonce, &got, why,
                      sizeof(why));
    cr_expect_str_eq(why, "hello: dtype 9 is outside 0..3");

    h = hello_of("bad\tname");
    n = join_hello_encode(&h, key, job_nonce, frame);
    join_hello_decode(frame + JOIN_HEADER, (uint32_t)(n - JOIN_HEADER), key, job_nonce, &got, why,
                      sizeof(why));
    cr_expect_str_eq(why, "hello: the name holds byte 0x09");
}

Test(join, headers_are_checked)
{
    uint8_t frame[JOIN_FRAME_MAX];
    join_type_t type;
    uint32_t len;
    char why[256];

    join_challenge_encode(job_nonce, frame);
    cr_expect_eq(join_header_decode(frame, &type, &len, why, sizeof(why)), 0);
    cr_expect_eq(type, JOIN_CHALLENGE);
    /* Only the frames of a proven side may be large. */
    frame[8] = 0;
    frame[9] = 0x10; /* 4096 bytes */
    cr_expect_neq(join_header_decode(frame, &type, &len, why, sizeof(why)), 0);
    cr_expect_str_eq(why, "a join frame of 4096 bytes, at most 1024");
    frame[6] = JOIN_DESC;
    cr_expect_eq(join_header_decode(frame, &type, &len, why, sizeof(why)), 0, "%s", why);
    join_challenge_encode(job_nonce, frame);
    join_header_decode(frame, &type, &len, why, sizeof(why));
    cr_expect_eq(len, JOIN_NONCE_BYTES);
    memcpy(frame, "GET / HTTP/1.1\r\n", 12);
    cr_expect_neq(join_header_decode(frame, &type, &len, why, sizeof(why)), 0);
    cr_expect_str_eq(why, "not a kvx join frame (magic 0x20544547)");
    join_challenge_encode(job_nonce, frame);
    frame[4] = 9;
    join_header_decode(frame, &type, &len, why, sizeof(why));
    cr_expect_str_eq(why, "join protocol version 9, this kvx speaks 1");
    join_challenge_encode(job_nonce, frame);
    frame[8] = 0xff;
    frame[9] = 0xff;
    join_header_decode(frame, &type, &len, why, sizeof(why));
    cr_expect_str_eq(why, "a join frame of 65535 bytes, at most 1024");
}

Test(join, welcome_proves_the_job_holds_the_key)
{
    join_door_t doors[2] = { { 0, "127.0.0.1:4000" }, { 3, "[::1]:4001" } };
    join_welcome_t w = { 2, 3, { 1, 3 }, { 4, 2 }, 2, doors }, got;
    uint8_t frame[JOIN_FRAME_MAX], joiner[JOIN_NONCE_BYTES], wrong[JOIN_KEY_BYTES];
    size_t n;
    char why[256];

    memset(joiner, 0x33, sizeof(joiner));
    n = join_welcome_encode(&w, key, job_nonce, joiner, frame);
    cr_assert_eq(join_welcome_decode(frame + JOIN_HEADER, (uint32_t)(n - JOIN_HEADER), key,
                                     job_nonce, joiner, &got, why, sizeof(why)),
                 0, "%s", why);
    cr_expect_eq(got.instance, 2);
    cr_expect_eq(got.generation, 3);
    cr_expect_eq(got.count[1], 3);
    cr_expect_eq(got.tp[0], 4);
    cr_assert_eq(got.ndoors, 2);
    cr_expect_eq(got.doors[1].rank, 3);
    cr_expect_str_eq(got.doors[1].addr, "[::1]:4001");
    cr_expect_eq(n, join_welcome_size(&w));
    free(got.doors);
    memcpy(wrong, key, sizeof(wrong));
    wrong[5] ^= 1;
    cr_expect_neq(join_welcome_decode(frame + JOIN_HEADER, (uint32_t)(n - JOIN_HEADER), wrong,
                                      job_nonce, joiner, &got, why, sizeof(why)),
                  0);
    cr_expect_str_eq(why, "the job did not prove it holds the job key");
    /* The hello's proof is not a welcome's: the labels differ. */
    joiner[0] ^= 1;
    cr_expect_neq(join_welcome_decode(frame + JOIN_HEADER, (uint32_t)(n - JOIN_HEADER), key,
                                      job_nonce, joiner, &got, why, sizeof(why)),
                  0);
}

Test(join, refusal_round_trip)
{
    join_refuse_t r = { KVX_ERR_KV_MISMATCH, "decode[0] has 32 layers, the joiner 16" }, got;
    uint8_t frame[JOIN_FRAME_MAX];
    size_t n = join_refuse_encode(&r, frame);
    char why[256];

    cr_assert_eq(join_refuse_decode(frame + JOIN_HEADER, (uint32_t)(n - JOIN_HEADER), &got, why,
                                    sizeof(why)),
                 0, "%s", why);
    cr_expect_eq(got.status, KVX_ERR_KV_MISMATCH);
    cr_expect_str_eq(got.text, r.text);
    cr_expect_neq(join_refuse_decode(frame + JOIN_HEADER, (uint32_t)(n - JOIN_HEADER - 1), &got,
                                     why, sizeof(why)),
                  0);
}

/* ---- the key file ---------------------------------------------------------- */

static char *key_file(const char *text, mode_t mode)
{
    static char path[64];
    int fd;

    snprintf(path, sizeof(path), "/tmp/kvxt-joinkey.XXXXXX");
    fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    fchmod(fd, mode);
    close(fd);
    return path;
}

Test(join, key_file_must_be_private_and_hex)
{
    const char *hex = "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20\n";
    uint8_t got[JOIN_KEY_BYTES];
    char why[512], expect[512], link[80];
    char *p = key_file(hex, 0600);

    cr_expect_eq(join_key_load(p, got, why, sizeof(why)), 0, "%s", why);
    cr_expect_eq(memcmp(got, key, sizeof(got)), 0);
    chmod(p, 0640);
    cr_expect_neq(join_key_load(p, got, why, sizeof(why)), 0);
    snprintf(expect, sizeof(expect),
             "the job key file %s must be owned by uid %u and readable by no one else (it is "
             "uid %u, mode 640)",
             p, (unsigned)geteuid(), (unsigned)geteuid());
    cr_expect_str_eq(why, expect);
    /* A link is not followed: someone else's file could stand behind it. */
    chmod(p, 0600);
    snprintf(link, sizeof(link), "%s.link", p);
    cr_assert_eq(symlink(p, link), 0);
    cr_expect_neq(join_key_load(link, got, why, sizeof(why)), 0);
    cr_expect(strstr(why, "cannot open the job key file") != NULL, "%s", why);
    unlink(link);
    unlink(p);
    p = key_file("0102", 0600);
    cr_expect_neq(join_key_load(p, got, why, sizeof(why)), 0);
    cr_expect(strstr(why, "must hold 64 hex digits") != NULL, "%s", why);
    unlink(p);
    p = key_file("zz02030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20", 0600);
    cr_expect_neq(join_key_load(p, got, why, sizeof(why)), 0);
    cr_expect(strstr(why, "non-hex") != NULL, "%s", why);
    unlink(p);
}

/* ---- the rendezvous, over real sockets ------------------------------------- */

/* The job's side: a thread polls the door every millisecond, as a
 * progress thread does; the admit refuses a joiner whose layers differ. */
typedef struct door {
    rdv_t rdv;
    pthread_t thread;
    pthread_mutex_t lock;
    volatile int stop;
    int admitted;
} door_t;

static kvx_status_t door_admit(void *arg, const join_hello_t *h, const char *peer,
                               join_welcome_t *w, char *why, size_t why_len)
{
    door_t *d = arg;

    if (h->kv.layers != 32) {
        snprintf(why, why_len, "decode[0] has 32 layers, %s (%s) has %u", h->name, peer,
                 h->kv.layers);
        return KVX_ERR_KV_MISMATCH;
    }
    w->instance = 1 + d->admitted++;
    w->generation = 1;
    w->count[0] = 1;
    w->count[1] = 1 + d->admitted;
    w->tp[0] = 1;
    w->tp[1] = 2;
    return KVX_OK;
}

/* The descriptor exchange: the job rank's reply is the joiner's bytes
 * reversed; a descriptor that starts with 'X' is refused. */
static kvx_status_t door_describe(void *arg, const join_hello_t *h, const char *peer,
                                  const uint8_t *desc, size_t len, void **reply, size_t *reply_len,
                                  char *why, size_t why_len)
{
    uint8_t *r;

    (void)arg;
    if (len > 0 && desc[0] == 'X') {
        snprintf(why, why_len, "%s[%d].tp%d (%s) sent a descriptor this rank refuses",
                 kvx_role_name((kvx_role_t)h->role), h->place, h->tp_rank, peer);
        return KVX_ERR_PROTOCOL;
    }
    r = malloc(len + 1);
    for (size_t i = 0; i < len; i++) {
        r[i] = desc[len - 1 - i];
    }
    *reply = r;
    *reply_len = len;
    return KVX_OK;
}

static void *door_run(void *arg)
{
    door_t *d = arg;

    while (!d->stop) {
        pthread_mutex_lock(&d->lock);
        rdv_poll(&d->rdv, kvx_now_ns());
        pthread_mutex_unlock(&d->lock);
        usleep(1000);
    }
    return NULL;
}

static char log_path[64];

static void door_open(door_t *d, uint64_t timeout_ns)
{
    char why[256];
    int fd;

    snprintf(log_path, sizeof(log_path), "/tmp/kvxt-joinlog.XXXXXX");
    fd = mkstemp(log_path);
    cr_assert_geq(fd, 0);
    close(fd);
    log_configure(KVX_LOG_INFO, log_path);
    memset(d, 0, sizeof(*d));
    pthread_mutex_init(&d->lock, NULL);
    cr_assert_eq(
        rdv_open(&d->rdv, NULL, key, timeout_ns, door_admit, door_describe, d, why, sizeof(why)), 0,
        "%s", why);
    cr_assert(strncmp(d->rdv.addr, "127.0.0.1:", 10) == 0, "listens at %s", d->rdv.addr);
    cr_assert_eq(pthread_create(&d->thread, NULL, door_run, d), 0);
}

static void door_close(door_t *d)
{
    d->stop = 1;
    pthread_join(d->thread, NULL);
    rdv_close(&d->rdv);
    unlink(log_path);
}

/* Counters read under the door's lock. */
static void door_counts(door_t *d, uint64_t *welcomed, uint64_t *refused, uint64_t *dropped)
{
    pthread_mutex_lock(&d->lock);
    *welcomed = d->rdv.welcomed;
    *refused = d->rdv.refused;
    *dropped = d->rdv.dropped;
    pthread_mutex_unlock(&d->lock);
}

/* Waits (bounded) until the door has dropped n joiners. */
static void door_wait_dropped(door_t *d, uint64_t n, double seconds)
{
    uint64_t end = kvx_now_ns() + (uint64_t)(seconds * 1e9), w, r, dr = 0;

    while (kvx_now_ns() < end) {
        door_counts(d, &w, &r, &dr);
        if (dr >= n) {
            return;
        }
        usleep(2000);
    }
    cr_assert_fail("the door dropped %llu joiners, not %llu, within %.1f s", (unsigned long long)dr,
                   (unsigned long long)n, seconds);
}

/* The log holds a line with both strings. */
static int log_has(const char *a, const char *b)
{
    char line[1024];
    FILE *f = fopen(log_path, "r");
    int found = 0;

    while (f != NULL && !found && fgets(line, sizeof(line), f) != NULL) {
        found = strstr(line, a) != NULL && (b == NULL || strstr(line, b) != NULL);
    }
    if (f != NULL) {
        fclose(f);
    }
    return found;
}

static int raw_connect(const char *addr)
{
    struct sockaddr_in in;
    char host[64];
    const char *colon = strrchr(addr, ':');
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    memset(&in, 0, sizeof(in));
    in.sin_family = AF_INET;
    snprintf(host, sizeof(host), "%.*s", (int)(colon - addr), addr);
    inet_pton(AF_INET, host, &in.sin_addr);
    in.sin_port = htons((uint16_t)atoi(colon + 1));
    cr_assert_eq(connect(fd, (struct sockaddr *)&in, sizeof(in)), 0, "%s", strerror(errno));
    return fd;
}

/* This side's address of a connected socket, as the door logs it. */
static void raw_name(int fd, char *buf, size_t len)
{
    struct sockaddr_in in;
    socklen_t n = sizeof(in);
    char host[INET_ADDRSTRLEN] = "?";

    getsockname(fd, (struct sockaddr *)&in, &n);
    inet_ntop(AF_INET, &in.sin_addr, host, sizeof(host));
    snprintf(buf, len, "%s:%u", host, (unsigned)ntohs(in.sin_port));
}

static void good_joiner(door_t *d, int expect_instance)
{
    join_hello_t h = hello_of("spare");
    join_welcome_t w;
    kvx_failure_t why;

    memset(&why, 0, sizeof(why));
    cr_assert_eq(rdv_join(d->rdv.addr, key, &h, 5 * KVX_NS_PER_S, &w, &why), KVX_OK, "%s",
                 why.text);
    cr_expect_eq(w.instance, expect_instance);
    cr_expect_eq(w.generation, 1);
    cr_expect_eq(w.tp[1], 2);
    free(w.doors);
}

Test(rendezvous, a_joiner_with_the_key_is_welcomed_and_a_mismatch_refused_with_both_values)
{
    door_t d;
    join_hello_t h = hello_of("small-model");
    join_welcome_t w;
    kvx_failure_t why;
    uint64_t welcomed, refused, dropped;

    door_open(&d, 5 * KVX_NS_PER_S);
    good_joiner(&d, 1);
    good_joiner(&d, 2);
    h.kv.layers = 16;
    cr_expect_eq(rdv_join(d.rdv.addr, key, &h, 5 * KVX_NS_PER_S, &w, &why), KVX_ERR_KV_MISMATCH);
    cr_expect(strstr(why.text, "refused: decode[0] has 32 layers, small-model (127.0.0.1:") !=
                      NULL &&
                  strstr(why.text, ") has 16") != NULL,
              "%s", why.text);
    door_counts(&d, &welcomed, &refused, &dropped);
    cr_expect_eq(welcomed, 2);
    cr_expect_eq(refused, 1);
    cr_expect_eq(dropped, 0);
    cr_expect(log_has("welcomed 127.0.0.1:", "(\"spare\", decode, TP 2) as decode[2]"));
    door_close(&d);
}

Test(rendezvous, a_wrong_key_is_refused_and_logged_with_the_peer_address)
{
    door_t d;
    join_hello_t h = hello_of("intruder");
    join_welcome_t w;
    kvx_failure_t why;
    uint8_t wrong[JOIN_KEY_BYTES];
    uint64_t welcomed, refused, dropped;

    memcpy(wrong, key, sizeof(wrong));
    wrong[17] ^= 4;
    door_open(&d, 5 * KVX_NS_PER_S);
    cr_expect_eq(rdv_join(d.rdv.addr, wrong, &h, 5 * KVX_NS_PER_S, &w, &why), KVX_ERR_PROTOCOL);
    cr_expect(strstr(why.text, "refused: the joiner did not prove it holds the job key") != NULL,
              "%s", why.text);
    door_counts(&d, &welcomed, &refused, &dropped);
    cr_expect_eq(welcomed, 0);
    cr_expect_eq(refused, 1);
    cr_expect(log_has("refused 127.0.0.1:", "did not prove it holds the job key"));
    good_joiner(&d, 1);
    door_close(&d);
}

Test(rendezvous, malformed_frames_are_refused_with_the_reason)
{
    door_t d;
    uint8_t buf[JOIN_FRAME_MAX], bad[JOIN_HEADER];
    join_refuse_t rf;
    char why[256], me[80];
    ssize_t n, got = 0;
    int fd;

    door_open(&d, 5 * KVX_NS_PER_S);
    fd = raw_connect(d.rdv.addr);
    raw_name(fd, me, sizeof(me));
    memcpy(bad, "GET / HTTP/1", JOIN_HEADER);
    cr_assert_eq(write(fd, bad, sizeof(bad)), (ssize_t)sizeof(bad));
    /* The challenge, then a refusal; then the door closes. */
    while ((n = read(fd, buf + got, sizeof(buf) - (size_t)got)) > 0) {
        got += n;
    }
    close(fd);
    cr_assert_geq(got, JOIN_HEADER + JOIN_NONCE_BYTES + JOIN_HEADER + 8);
    {
        const uint8_t *reply = buf + JOIN_HEADER + JOIN_NONCE_BYTES;
        join_type_t type;
        uint32_t len;

        cr_assert_eq(join_header_decode(reply, &type, &len, why, sizeof(why)), 0, "%s", why);
        cr_assert_eq(type, JOIN_REFUSE);
        cr_assert_eq(join_refuse_decode(reply + JOIN_HEADER, len, &rf, why, sizeof(why)), 0);
        cr_expect_eq(rf.status, KVX_ERR_PROTOCOL);
        cr_expect_str_eq(rf.text, "not a kvx join frame (magic 0x20544547)");
    }
    cr_expect(log_has(me, "refused"), "no log line names %s", me);
    good_joiner(&d, 1);
    door_close(&d);
}

Test(rendezvous, a_slow_joiner_is_dropped_at_the_deadline_and_blocks_no_one)
{
    door_t d;
    char me[80];
    uint64_t welcomed, refused, dropped;
    int fd;

    door_open(&d, 400 * KVX_NS_PER_MS);
    fd = raw_connect(d.rdv.addr);
    raw_name(fd, me, sizeof(me));
    cr_assert_eq(write(fd, "KVX", 3), 3); /* then nothing: a slowloris */
    good_joiner(&d, 1);                   /* gets in while the slow one waits */
    door_wait_dropped(&d, 1, 30);
    door_counts(&d, &welcomed, &refused, &dropped);
    cr_expect_eq(welcomed, 1);
    cr_expect_eq(dropped, 1);
    cr_expect(log_has(me, "not done within 0.4 s, in the hello's header (3 of 12 bytes)"),
              "no drop line names %s", me);
    close(fd);
    door_close(&d);
}

Test(rendezvous, a_crowd_that_takes_every_slot_is_turned_away_and_then_drained)
{
    door_t d;
    int fds[RDV_CONNS + 1];
    uint64_t welcomed, refused, dropped;

    door_open(&d, 500 * KVX_NS_PER_MS);
    for (int i = 0; i <= RDV_CONNS; i++) {
        fds[i] = raw_connect(d.rdv.addr);
        usleep(5000); /* each accepted in turn */
    }
    door_wait_dropped(&d, 1, 30); /* the ninth, at once */
    cr_expect(log_has("every handshake slot is taken", NULL));
    door_wait_dropped(&d, RDV_CONNS + 1, 30); /* the rest at their deadline */
    good_joiner(&d, 1);
    door_counts(&d, &welcomed, &refused, &dropped);
    cr_expect_eq(dropped, RDV_CONNS + 1);
    for (int i = 0; i <= RDV_CONNS; i++) {
        close(fds[i]);
    }
    door_close(&d);
}

/* A joiner process killed at a stage: 0 after connecting, 1 after reading
 * the challenge, 2 halfway through its hello. */
static void killed_joiner(door_t *d, int stage)
{
    int ready[2];
    pid_t pid;
    char c;

    cr_assert_eq(pipe(ready), 0);
    pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        uint8_t buf[JOIN_FRAME_MAX];
        join_hello_t h = hello_of("doomed");
        int fd = raw_connect(d->rdv.addr);
        size_t n = 0;

        if (stage >= 1) {
            while (n < JOIN_HEADER + JOIN_NONCE_BYTES) {
                ssize_t k = read(fd, buf + n, JOIN_HEADER + JOIN_NONCE_BYTES - n);

                if (k <= 0) {
                    _exit(3);
                }
                n += (size_t)k;
            }
        }
        if (stage >= 2) {
            n = join_hello_encode(&h, key, buf + JOIN_HEADER, buf);
            if (write(fd, buf, n / 2) != (ssize_t)(n / 2)) {
                _exit(4);
            }
        }
        if (write(ready[1], "r", 1) != 1) {
            _exit(5);
        }
        pause();
        _exit(0);
    }
    close(ready[1]);
    cr_assert_eq(read(ready[0], &c, 1), 1, "the joiner did not reach stage %d", stage);
    close(ready[0]);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

Test(rendezvous, a_joiner_killed_at_each_stage_costs_a_log_line)
{
    door_t d;
    uint64_t welcomed, refused, dropped;

    door_open(&d, 5 * KVX_NS_PER_S);
    for (int stage = 0; stage < 3; stage++) {
        killed_joiner(&d, stage);
        door_wait_dropped(&d, (uint64_t)stage + 1, 30);
        good_joiner(&d, stage + 1);
    }
    door_counts(&d, &welcomed, &refused, &dropped);
    cr_expect_eq(welcomed, 3);
    cr_expect_eq(refused, 0);
    cr_expect_eq(dropped, 3);
    cr_expect(log_has("closed by the joiner in the hello's header (0 of 12 bytes)", NULL));
    cr_expect(log_has("closed by the joiner in the hello (", NULL));
    door_close(&d);
}

Test(rendezvous, listen_addresses)
{
    rdv_t r;
    char why[256];

    cr_expect_eq(
        rdv_open(&r, ":0", key, KVX_NS_PER_S, door_admit, door_describe, NULL, why, sizeof(why)), 0,
        "%s", why);
    cr_expect(strncmp(r.addr, "127.0.0.1:", 10) == 0, "%s", r.addr);
    rdv_close(&r);
    cr_expect_eq(
        rdv_open(&r, "lo", key, KVX_NS_PER_S, door_admit, door_describe, NULL, why, sizeof(why)), 0,
        "%s", why);
    cr_expect(strncmp(r.addr, "127.0.0.1:", 10) == 0, "%s", r.addr);
    rdv_close(&r);
    cr_expect_eq(rdv_open(&r, "[::1]:0", key, KVX_NS_PER_S, door_admit, door_describe, NULL, why,
                          sizeof(why)),
                 0, "%s", why);
    cr_expect(strncmp(r.addr, "[::1]:", 6) == 0, "%s", r.addr);
    rdv_close(&r);
    cr_expect_neq(rdv_open(&r, "no-such-if0", key, KVX_NS_PER_S, door_admit, door_describe, NULL,
                           why, sizeof(why)),
                  0);
    cr_expect_str_eq(why, "\"no-such-if0\" is neither a numeric address nor an interface with an "
                          "IPv4 address");
    cr_expect_neq(rdv_open(&r, "1.2.3.4:99999", key, KVX_NS_PER_S, door_admit, door_describe, NULL,
                           why, sizeof(why)),
                  0);
    cr_expect(strstr(why, "cannot read the listen address") != NULL, "%s", why);
    rdv_close(&r);
}

Test(rendezvous, a_placed_joiner_exchanges_descriptors_and_a_bad_one_is_refused)
{
    door_t d;
    join_hello_t h = hello_of("decode-2-tp1");
    join_welcome_t w;
    kvx_failure_t why;
    const char mine[] = "descriptor of decode[2].tp1";
    void *reply = NULL;
    size_t reply_len = 0;
    uint64_t welcomed, refused, dropped;

    door_open(&d, 5 * KVX_NS_PER_S);
    h.place = 2;
    h.tp_rank = 1;
    h.generation = 1;
    cr_assert_eq(rdv_join_desc(d.rdv.addr, key, &h, mine, sizeof(mine), 5 * KVX_NS_PER_S, &w,
                               &reply, &reply_len, &why),
                 KVX_OK, "%s", why.text);
    cr_assert_eq(reply_len, sizeof(mine));
    for (size_t i = 0; i < sizeof(mine); i++) {
        cr_expect_eq(((uint8_t *)reply)[i], (uint8_t)mine[sizeof(mine) - 1 - i]);
    }
    free(reply);
    free(w.doors);
    cr_expect_eq(
        rdv_join_desc(d.rdv.addr, key, &h, "X", 1, 5 * KVX_NS_PER_S, &w, &reply, &reply_len, &why),
        KVX_ERR_PROTOCOL);
    cr_expect(strstr(why.text, "refused: decode[2].tp1 (127.0.0.1:") != NULL, "%s", why.text);
    cr_expect_null(reply);
    door_counts(&d, &welcomed, &refused, &dropped);
    cr_expect_eq(welcomed, 1);
    cr_expect_eq(refused, 1);
    cr_expect(log_has("welcomed 127.0.0.1:", "as decode[2].tp1, generation 1"));
    door_close(&d);
}
