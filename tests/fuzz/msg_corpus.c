/*
 * msg_corpus.c - the seed corpus of the msg_decode() fuzzer.
 *
 *   msg_corpus write DIR   writes one valid message of every kind into DIR,
 *                          built by msg.c's builders (make fuzz-corpus)
 *   msg_corpus check DIR   every file in DIR must decode and round-trip
 *                          (msg_check), and every message type must have one
 *
 * The seeds are checked in (tests/fuzz/corpus/msg/); check runs under make
 * check with or without clang, so a change of the message format that
 * leaves the seeds behind fails until they are written again.
 */
#include "config.h"

#include "msg_check.h"
#include "util/failure.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct seed {
    const char *name;
    void *buf;
    size_t len;
} seed_t;

#define MAX_SEEDS 32

/* A DATA or AUX header (they travel with a payload of their own). */
static void seed_data(seed_t *s, const char *name, msg_type_t type, uint32_t layer, uint32_t comp,
                      uint32_t pos, uint32_t npages)
{
    msg_data_t d = { layer, comp, pos, npages };

    s->name = name;
    s->buf = malloc(MSG_DATA_LEN);
    if (s->buf != NULL) {
        msg_put_data(s->buf, type, 1, 42, 0x500000001ull, &d);
        s->len = MSG_DATA_LEN;
    }
}

static int seeds_build(seed_t *s)
{
    static const uint32_t pages[] = { 7, 8, 9, 10, 500, 3, 999, 0 };
    static const msg_agreed_room_t agreed[] = { { 42, 0x500000001ull }, { 43, 0x500000002ull } };
    uint32_t many[64];
    kvx_failure_t f;
    int n = 0;

    for (unsigned i = 0; i < 64; i++) {
        many[i] = (i * 37u) % MSG_CHECK_MAX_PAGES;
    }
    s[n].name = "prealloc-writer";
    s[n].buf = msg_new_prealloc(3, 42, 0x500000001ull, 2, 1, pages, 8, &s[n].len);
    n++;
    s[n].name = "prealloc-writer-64";
    s[n].buf = msg_new_prealloc(15, 1ull << 40, 0x500000002ull, -1, 1, many, 64, &s[n].len);
    n++;
    s[n].name = "prealloc-control";
    s[n].buf = msg_new_prealloc(4, 43, 0x400000003ull, -1, 0, pages, 8, &s[n].len);
    n++;
    s[n].name = "prealloc-messages";
    s[n].buf = msg_new_prealloc(3, 45, 0x500000005ull, 1, MSG_WRITES_MESSAGES, pages, 8, &s[n].len);
    n++;
    s[n].name = "prealloc-verify";
    s[n].buf = msg_new_prealloc(3, 46, 0x500000006ull, 0, 1, pages, 8, &s[n].len);
    if (s[n].buf != NULL) {
        msg_prealloc_verify(s[n].buf, 1, 8);
    }
    n++;
    s[n].name = "accept";
    s[n].buf = msg_new(MSG_ACCEPT, 0, 42, 0x500000001ull, &s[n].len);
    n++;
    s[n].name = "start";
    s[n].buf = msg_new(MSG_START, 1, 42, 0x500000001ull, &s[n].len);
    n++;
    s[n].name = "done";
    s[n].buf = msg_new_done(0, 42, 0x500000001ull, 1u << 20, 96, &s[n].len);
    n++;
    {
        static const uint64_t digests[] = { 0x0123456789abcdefull, 0xfedcba9876543210ull, 7 };
        msg_done_t d = { 1u << 16, 12, 2, 3, 0x5eed5eed5eed5eedull, 1, 0 };

        s[n].name = "done-digests";
        s[n].buf = msg_new_done_digests(0, 46, 0x500000006ull, &d, digests, 3, &s[n].len);
        n++;
    }
    failure_set_room(&f, 42, KVX_ERR_UCX, KVX_STAGE_POST, "Connection reset by remote peer",
                     "put to decode[1].tp0 (rank 9) failed");
    f.origin_rank = 5;
    f.origin_role = KVX_ROLE_PREFILL;
    f.origin_instance = 1;
    f.origin_tp_rank = 2;
    s[n].name = "fail-ucx";
    s[n].buf = msg_new_fail(5, 42, 0x500000001ull, &f, &s[n].len);
    n++;
    failure_set_room(&f, 44, KVX_ERR_TIMEOUT, KVX_STAGE_WAIT, NULL,
                     "WAITING_FOR_INPUT for 300.000 s waiting for the prefill's first pages");
    f.origin_rank = 9;
    f.origin_role = KVX_ROLE_DECODE;
    f.flags = KVX_FAILURE_INJECTED;
    f.count = 2;
    s[n].name = "fail-timeout-injected";
    s[n].buf = msg_new_fail(9, 44, 0x900000004ull, &f, &s[n].len);
    n++;
    s[n].name = "drained";
    s[n].buf = msg_new(MSG_DRAINED, 2, 42, 0x500000001ull, &s[n].len);
    n++;
    s[n].name = "ping";
    s[n].buf = msg_new(MSG_PING, 6, 0, 0, &s[n].len);
    n++;
    s[n].name = "bye";
    s[n].buf = msg_new(MSG_BYE, 7, 0, 0, &s[n].len);
    n++;
    s[n].name = "received";
    s[n].buf = msg_new(MSG_RECEIVED, 2, 42, 0x500000001ull, &s[n].len);
    n++;
    s[n].name = "verdict";
    s[n].buf = msg_new_failure(MSG_VERDICT, 2, 44, 0x900000004ull, &f, &s[n].len);
    n++;
    failure_set(&f, KVX_ERR_OUT_OF_STEP, KVX_STAGE_AGREE, NULL,
                "agreement rounds out of step in decode[0]: tp0 is in round 13, tp1 in round 12");
    f.origin_rank = 2;
    f.origin_role = KVX_ROLE_DECODE;
    f.origin_tp_rank = 0;
    s[n].name = "tp-break";
    s[n].buf = msg_new_failure(MSG_TP_BREAK, 2, 0, 0, &f, &s[n].len);
    n++;
    s[n].name = "ping-rounds";
    s[n].buf = msg_new(MSG_PING, 3, 0, 12, &s[n].len);
    n++;
    s[n].name = "agreed";
    s[n].buf = msg_new_agreed(2, agreed, 2, &s[n].len);
    n++;
    seed_data(&s[n++], "data", MSG_DATA, 1, 0, 3, 5);
    seed_data(&s[n++], "aux", MSG_AUX, 0, 0, 0, 0);
    for (int i = 0; i < n; i++) {
        if (s[i].buf == NULL) {
            fprintf(stderr, "msg_corpus: no memory\n");
            return -1;
        }
    }
    return n;
}

static int corpus_write(const char *dir)
{
    seed_t seeds[MAX_SEEDS];
    int n = seeds_build(seeds), rc = 0;

    for (int i = 0; i < n; i++) {
        char path[4096];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, seeds[i].name);
        f = fopen(path, "wb");
        if (f == NULL || fwrite(seeds[i].buf, 1, seeds[i].len, f) != seeds[i].len) {
            fprintf(stderr, "msg_corpus: cannot write %s\n", path);
            rc = 1;
        }
        if (f != NULL && fclose(f) != 0) {
            rc = 1;
        }
        free(seeds[i].buf);
    }
    if (n < 0) {
        return 1;
    }
    printf("msg_corpus: %d seeds written to %s\n", n, dir);
    return rc;
}

/* Reads a whole file; NULL when it cannot. */
static char *read_file(const char *path, size_t *len_p)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long len;

    if (f == NULL) {
        return NULL;
    }
    if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)len + 1)) != NULL) {
        if (fread(buf, 1, (size_t)len, f) != (size_t)len) {
            free(buf);
            buf = NULL;
        }
        *len_p = (size_t)len;
    }
    fclose(f);
    return buf;
}

static int corpus_check(const char *dir)
{
    int have[MSG_TYPE_MAX] = { 0 }, rc = 0, n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;

    if (d == NULL) {
        fprintf(stderr, "msg_corpus: cannot open %s\n", dir);
        return 1;
    }
    while ((e = readdir(d)) != NULL) {
        char path[4096], err[256];
        unsigned type = 0;
        size_t len = 0;
        char *buf;

        if (e->d_name[0] == '.') {
            continue;
        }
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        buf = read_file(path, &len);
        if (buf == NULL) {
            fprintf(stderr, "msg_corpus: cannot read %s\n", path);
            rc = 1;
            continue;
        }
        switch (msg_check(buf, len, &type, err, sizeof(err))) {
        case 1:
            have[type]++;
            n++;
            break;
        case 0:
            printf("msg_corpus: seed %s is not a valid message (run make fuzz-corpus)\n",
                   e->d_name);
            rc = 1;
            break;
        default:
            printf("msg_corpus: seed %s: %s\n", e->d_name, err);
            rc = 1;
            break;
        }
        free(buf);
    }
    closedir(d);
    for (unsigned t = 1; t < MSG_TYPE_MAX; t++) {
        if (have[t] == 0) {
            printf("msg_corpus: no seed of type %s in %s (add one to msg_corpus.c, run make "
                   "fuzz-corpus)\n",
                   msg_type_name(t), dir);
            rc = 1;
        }
    }
    if (rc == 0) {
        printf("ok: %d seeds in %s decode and round-trip, every message type has one\n", n, dir);
    }
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "write") == 0) {
        return corpus_write(argv[2]);
    }
    if (argc == 3 && strcmp(argv[1], "check") == 0) {
        return corpus_check(argv[2]);
    }
    fprintf(stderr, "usage: msg_corpus write|check DIR\n");
    return 2;
}
