/*
 * rendezvous.c - the job's door for joining instances, and the joiner's
 * side of the handshake (rendezvous.h). Every socket of the job's side is
 * non-blocking and every connection has a deadline; the joiner's side waits
 * in poll() with what is left of its own.
 */
#include "config.h"

#include "core/link/rendezvous.h"
#include "util/failure.h"
#include "util/log.h"
#include "util/time.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum {
    RDV_STAGE_CHALLENGE,   /* sending the challenge */
    RDV_STAGE_HEADER,      /* reading the hello's header */
    RDV_STAGE_BODY,        /* reading its body */
    RDV_STAGE_REPLY,       /* sending the welcome or the refusal */
    RDV_STAGE_DESC_HEADER, /* reading the joiner's descriptor's header */
    RDV_STAGE_DESC_BODY,   /* reading its body */
    RDV_STAGE_LAST         /* sending this rank's descriptor or a refusal */
};

static const char *const rdv_stage_name[] = {
    "the challenge",         "the hello's header", "the hello",      "the reply",
    "the descriptor header", "the descriptor",     "the last reply",
};

static void rdv_name(const struct sockaddr *sa, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;

    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        port = ntohs(in->sin_port);
        snprintf(buf, len, "%s:%u", host, port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        port = ntohs(in6->sin6_port);
        snprintf(buf, len, "[%s]:%u", host, port);
    } else {
        snprintf(buf, len, "(family %d)", sa->sa_family);
    }
}

/* Splits "HOST:PORT", "[V6]:PORT", "HOST", ":PORT" into host and port. */
static int rdv_split(const char *spec, char *host, size_t hlen, char *port, size_t plen)
{
    const char *colon;

    snprintf(port, plen, "0");
    if (spec[0] == '[') {
        const char *end = strchr(spec, ']');

        if (end == NULL || (size_t)(end - spec - 1) >= hlen || (end[1] != '\0' && end[1] != ':')) {
            return -1;
        }
        memcpy(host, spec + 1, (size_t)(end - spec - 1));
        host[end - spec - 1] = '\0';
        colon = end[1] == ':' ? end + 1 : NULL;
    } else {
        colon = strrchr(spec, ':');
        if (colon != NULL && strchr(spec, ':') != colon) {
            return -1; /* a bare IPv6 address needs brackets */
        }
        size_t n = colon != NULL ? (size_t)(colon - spec) : strlen(spec);

        if (n >= hlen) {
            return -1;
        }
        memcpy(host, spec, n);
        host[n] = '\0';
    }
    if (colon != NULL) {
        char *end;
        long p = strtol(colon + 1, &end, 10);

        if (colon[1] == '\0' || *end != '\0' || p < 0 || p > 65535) {
            return -1;
        }
        snprintf(port, plen, "%ld", p);
    }
    if (host[0] == '\0') {
        snprintf(host, hlen, "127.0.0.1");
    }
    return 0;
}

/* A numeric address, or an interface's first IPv4 address. */
static int rdv_resolve(const char *host, const char *port, struct sockaddr_storage *ss,
                       socklen_t *len)
{
    struct addrinfo hints, *res = NULL;
    struct ifaddrs *ifs = NULL;
    int found = -1;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
    if (getaddrinfo(host, port, &hints, &res) == 0 && res != NULL) {
        memcpy(ss, res->ai_addr, res->ai_addrlen);
        *len = res->ai_addrlen;
        freeaddrinfo(res);
        return 0;
    }
    if (getifaddrs(&ifs) != 0) {
        return -1;
    }
    for (struct ifaddrs *i = ifs; i != NULL && found != 0; i = i->ifa_next) {
        if (i->ifa_addr != NULL && i->ifa_addr->sa_family == AF_INET &&
            strcmp(i->ifa_name, host) == 0) {
            struct sockaddr_in *in = (struct sockaddr_in *)ss;

            memcpy(in, i->ifa_addr, sizeof(*in));
            in->sin_port = htons((uint16_t)atoi(port));
            *len = sizeof(*in);
            found = 0;
        }
    }
    freeifaddrs(ifs);
    return found;
}

int rdv_open(rdv_t *r, const char *spec, const uint8_t key[JOIN_KEY_BYTES], uint64_t timeout_ns,
             rdv_admit_t admit, rdv_describe_t describe, void *arg, char *why, size_t why_len)
{
    char host[RDV_ADDR_MAX], port[8];
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    int one = 1;

    memset(r, 0, sizeof(*r));
    r->fd = -1;
    for (int i = 0; i < RDV_CONNS; i++) {
        r->conn[i].fd = -1;
    }
    if (spec == NULL) {
        spec = "";
    }
    if (rdv_split(spec, host, sizeof(host), port, sizeof(port)) != 0) {
        snprintf(why, why_len,
                 "cannot read the listen address \"%s\" (HOST:PORT, [V6]:PORT, "
                 "HOST or :PORT)",
                 spec);
        return -1;
    }
    if (rdv_resolve(host, port, &ss, &len) != 0) {
        snprintf(why, why_len,
                 "\"%s\" is neither a numeric address nor an interface with an "
                 "IPv4 address",
                 host);
        return -1;
    }
    r->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (r->fd < 0 || setsockopt(r->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(r->fd, (struct sockaddr *)&ss, len) != 0 || listen(r->fd, RDV_CONNS) != 0) {
        char name[RDV_ADDR_MAX];

        rdv_name((struct sockaddr *)&ss, name, sizeof(name));
        snprintf(why, why_len, "cannot listen at %s: %s", name, strerror(errno));
        if (r->fd >= 0) {
            close(r->fd);
        }
        r->fd = -1;
        return -1;
    }
    len = sizeof(ss);
    getsockname(r->fd, (struct sockaddr *)&ss, &len);
    rdv_name((struct sockaddr *)&ss, r->addr, sizeof(r->addr));
    memcpy(r->key, key, JOIN_KEY_BYTES);
    r->timeout = timeout_ns;
    r->admit = admit;
    r->describe = describe;
    r->arg = arg;
    return 0;
}

/* Frees a connection's slot. */
static void rdv_free(rdv_conn_t *c)
{
    close(c->fd);
    c->fd = -1;
    if (c->buf != c->small) {
        free(c->buf);
    }
    c->buf = c->small;
    c->cap = sizeof(c->small);
}

/* A frame of len bytes in c->buf; 0, or -1 (no memory). */
static int rdv_room(rdv_conn_t *c, size_t len)
{
    uint8_t *big;

    if (len <= c->cap) {
        return 0;
    }
    big = malloc(len);
    if (big == NULL) {
        return -1;
    }
    if (c->buf != c->small) {
        free(c->buf);
    }
    c->buf = big;
    c->cap = len;
    return 0;
}

static void rdv_drop(rdv_t *r, rdv_conn_t *c, const char *fmt, const char *what)
{
    kvx_warn("rendezvous %s: dropped %s: %s %s (%zu of %zu bytes)", r->addr, c->peer, fmt, what,
             c->done, c->len);
    rdv_free(c);
    r->dropped++;
}

static void rdv_refuse(rdv_t *r, rdv_conn_t *c, kvx_status_t status, const char *text)
{
    join_refuse_t rf;

    memset(&rf, 0, sizeof(rf));
    rf.status = status;
    snprintf(rf.text, sizeof(rf.text), "%s", text);
    c->len = join_refuse_encode(&rf, c->small);
    if (c->buf != c->small) {
        memcpy(c->buf, c->small, c->len);
    }
    r->refused++;
    kvx_warn("rendezvous %s: refused %s: %s", r->addr, c->peer, text);
    c->done = 0;
    c->then_desc = 0;
    c->stage = c->stage >= RDV_STAGE_DESC_HEADER ? RDV_STAGE_LAST : RDV_STAGE_REPLY;
}

/* A whole hello is in c->buf. */
static void rdv_hello(rdv_t *r, rdv_conn_t *c, uint32_t body_len)
{
    join_welcome_t w;
    char why[JOIN_TEXT_MAX];
    kvx_status_t status;

    if (join_hello_decode(c->buf + JOIN_HEADER, body_len, r->key, c->nonce, &c->hello, why,
                          sizeof(why)) != 0) {
        rdv_refuse(r, c, KVX_ERR_PROTOCOL, why);
        return;
    }
    memset(&w, 0, sizeof(w));
    why[0] = '\0';
    status = r->admit(r->arg, &c->hello, c->peer, &w, why, sizeof(why));
    if (status == KVX_OK && rdv_room(c, join_welcome_size(&w)) != 0) {
        status = KVX_ERR_NO_MEMORY;
        snprintf(why, sizeof(why), "no memory for the welcome");
    }
    if (status != KVX_OK) {
        rdv_refuse(r, c, status, why[0] ? why : "refused by the job");
        return;
    }
    c->len = join_welcome_encode(&w, r->key, c->nonce, c->hello.nonce, c->buf);
    c->done = 0;
    c->stage = RDV_STAGE_REPLY;
    c->then_desc = c->hello.place >= 0;
    if (!c->then_desc) {
        r->welcomed++;
        kvx_info("rendezvous %s: welcomed %s (\"%s\", %s, TP %d) as %s[%d], generation %u", r->addr,
                 c->peer, c->hello.name, kvx_role_name((kvx_role_t)c->hello.role), c->hello.tp_size,
                 kvx_role_name((kvx_role_t)c->hello.role), w.instance, w.generation);
    }
}

/* A whole descriptor is in c->buf. */
static void rdv_desc(rdv_t *r, rdv_conn_t *c, uint32_t body_len)
{
    const uint8_t *desc;
    size_t len, reply_len = 0;
    void *reply = NULL;
    char why[JOIN_TEXT_MAX] = "";
    kvx_status_t status;

    if (join_desc_decode(c->buf + JOIN_HEADER, body_len, 1, r->key, c->nonce, c->hello.nonce, &desc,
                         &len, why, sizeof(why)) != 0) {
        rdv_refuse(r, c, KVX_ERR_PROTOCOL, why);
        return;
    }
    status =
        r->describe(r->arg, &c->hello, c->peer, desc, len, &reply, &reply_len, why, sizeof(why));
    if (status == KVX_OK && (reply_len > JOIN_DESC_MAX - JOIN_MAC_BYTES ||
                             rdv_room(c, JOIN_HEADER + JOIN_MAC_BYTES + reply_len) != 0)) {
        status = KVX_ERR_NO_MEMORY;
        snprintf(why, sizeof(why), "no room for a descriptor of %zu bytes", reply_len);
    }
    if (status != KVX_OK) {
        free(reply);
        c->stage = RDV_STAGE_LAST;
        rdv_refuse(r, c, status, why[0] ? why : "refused by the job");
        return;
    }
    c->len = join_desc_encode(reply, reply_len, 0, r->key, c->nonce, c->hello.nonce, c->buf);
    free(reply);
    c->done = 0;
    c->stage = RDV_STAGE_LAST;
    r->welcomed++;
    kvx_info("rendezvous %s: welcomed %s (\"%s\") as %s[%d].tp%d, generation %u", r->addr, c->peer,
             c->hello.name, kvx_role_name((kvx_role_t)c->hello.role), c->hello.place,
             c->hello.tp_rank, c->hello.generation);
}

/* A header is in c->buf: the frame the stage waits for, or a refusal. */
static void rdv_header(rdv_t *r, rdv_conn_t *c, join_type_t want)
{
    join_type_t type = 0;
    uint32_t body_len = 0;
    char why[JOIN_TEXT_MAX];
    int bad = join_header_decode(c->buf, &type, &body_len, why, sizeof(why)) != 0;

    if (!bad && type != want) {
        snprintf(why, sizeof(why), "a frame of type %d where a %s belongs", (int)type,
                 want == JOIN_HELLO ? "hello" : "descriptor");
        bad = 1;
    }
    if (!bad && rdv_room(c, JOIN_HEADER + body_len) != 0) {
        snprintf(why, sizeof(why), "no memory for a frame of %u bytes", body_len);
        bad = 1;
    }
    if (bad) {
        rdv_refuse(r, c, KVX_ERR_PROTOCOL, why);
    } else if (body_len == 0) {
        (want == JOIN_HELLO ? rdv_hello : rdv_desc)(r, c, 0);
    } else {
        c->stage = want == JOIN_HELLO ? RDV_STAGE_BODY : RDV_STAGE_DESC_BODY;
        c->len = JOIN_HEADER + body_len;
    }
}

/* The stage after this one's bytes are all sent or read. */
static void rdv_next(rdv_t *r, rdv_conn_t *c)
{
    switch (c->stage) {
    case RDV_STAGE_CHALLENGE:
    case RDV_STAGE_REPLY:
        if (c->stage == RDV_STAGE_REPLY && !c->then_desc) {
            break;
        }
        c->stage = c->stage == RDV_STAGE_CHALLENGE ? RDV_STAGE_HEADER : RDV_STAGE_DESC_HEADER;
        c->len = JOIN_HEADER;
        c->done = 0;
        return;
    case RDV_STAGE_HEADER:
        rdv_header(r, c, JOIN_HELLO);
        return;
    case RDV_STAGE_BODY:
        rdv_hello(r, c, (uint32_t)(c->len - JOIN_HEADER));
        return;
    case RDV_STAGE_DESC_HEADER:
        rdv_header(r, c, JOIN_DESC);
        return;
    case RDV_STAGE_DESC_BODY:
        rdv_desc(r, c, (uint32_t)(c->len - JOIN_HEADER));
        return;
    default:
        break;
    }
    shutdown(c->fd, SHUT_WR);
    rdv_free(c);
}

/* Moves one connection as far as its socket allows; 1 if it moved. */
static unsigned rdv_step(rdv_t *r, rdv_conn_t *c, uint64_t now)
{
    unsigned moved = 0;

    while (c->fd >= 0) {
        int sending = c->stage == RDV_STAGE_CHALLENGE || c->stage == RDV_STAGE_REPLY ||
                      c->stage == RDV_STAGE_LAST;
        ssize_t n =
            sending ? send(c->fd, c->buf + c->done, c->len - c->done, MSG_NOSIGNAL | MSG_DONTWAIT)
                    : recv(c->fd, c->buf + c->done, c->len - c->done, MSG_DONTWAIT);

        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            break;
        }
        if (n <= 0) {
            rdv_drop(r, c, n == 0 ? "closed by the joiner in" : strerror(errno),
                     rdv_stage_name[c->stage]);
            return 1;
        }
        moved = 1;
        c->done += (size_t)n;
        if (c->done == c->len) {
            rdv_next(r, c);
        }
    }
    if (c->fd >= 0 && now >= c->deadline) {
        char limit[48];

        snprintf(limit, sizeof(limit), "not done within %.1f s, in",
                 (double)r->timeout / (double)KVX_NS_PER_S);
        rdv_drop(r, c, limit, rdv_stage_name[c->stage]);
        return 1;
    }
    return moved;
}

static void rdv_accept(rdv_t *r, uint64_t now)
{
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        int fd = accept4(r->fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        rdv_conn_t *c = NULL;
        char peer[RDV_ADDR_MAX];
        int one = 1;

        if (fd < 0) {
            return; /* EAGAIN, or an error the next poll meets again */
        }
        rdv_name((struct sockaddr *)&ss, peer, sizeof(peer));
        for (int i = 0; i < RDV_CONNS && c == NULL; i++) {
            c = r->conn[i].fd < 0 ? &r->conn[i] : NULL;
        }
        if (c == NULL || join_random(c->nonce, JOIN_NONCE_BYTES) != 0) {
            kvx_warn("rendezvous %s: refused %s: %s", r->addr, peer,
                     c == NULL ? "every handshake slot is taken" : "no random nonce");
            close(fd);
            r->dropped++;
            continue;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c->fd = fd;
        c->buf = c->small;
        c->cap = sizeof(c->small);
        c->then_desc = 0;
        c->stage = RDV_STAGE_CHALLENGE;
        c->deadline = now + r->timeout;
        c->len = join_challenge_encode(c->nonce, c->small);
        c->done = 0;
        snprintf(c->peer, sizeof(c->peer), "%s", peer);
        kvx_debug("rendezvous %s: connection from %s", r->addr, peer);
    }
}

unsigned rdv_poll(rdv_t *r, uint64_t now)
{
    unsigned moved = 0;

    if (r->fd < 0) {
        return 0;
    }
    rdv_accept(r, now);
    for (int i = 0; i < RDV_CONNS; i++) {
        if (r->conn[i].fd >= 0) {
            moved += rdv_step(r, &r->conn[i], now);
        }
    }
    return moved;
}

void rdv_close(rdv_t *r)
{
    for (int i = 0; i < RDV_CONNS; i++) {
        if (r->conn[i].fd >= 0) {
            rdv_free(&r->conn[i]);
        }
    }
    if (r->fd >= 0) {
        close(r->fd);
        r->fd = -1;
    }
    memset(r->key, 0, sizeof(r->key));
}

/* ---- the joiner's side --------------------------------------------------- */

/* Waits until fd is ready for events or the deadline passes. */
static kvx_status_t rdv_wait(int fd, short events, uint64_t deadline)
{
    for (;;) {
        uint64_t now = kvx_now_ns();
        struct pollfd p = { fd, events, 0 };
        int n;

        if (now >= deadline) {
            return KVX_ERR_TIMEOUT;
        }
        n = poll(&p, 1, (int)((deadline - now + KVX_NS_PER_MS - 1) / KVX_NS_PER_MS));
        if (n > 0) {
            return KVX_OK;
        }
        if (n < 0 && errno != EINTR) {
            return KVX_ERR_IO;
        }
    }
}

static kvx_status_t rdv_io(int fd, uint8_t *buf, size_t len, int sending, uint64_t deadline)
{
    size_t done = 0;

    while (done < len) {
        kvx_status_t status = rdv_wait(fd, sending ? POLLOUT : POLLIN, deadline);
        ssize_t n;

        if (status != KVX_OK) {
            return status;
        }
        n = sending ? send(fd, buf + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT)
                    : recv(fd, buf + done, len - done, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            continue;
        }
        if (n <= 0) {
            return KVX_ERR_IO;
        }
        done += (size_t)n;
    }
    return KVX_OK;
}

/* Reads one frame into *buf_p (malloc'd, header included): its type and body
 * length. */
static kvx_status_t rdv_read_frame(int fd, uint8_t **buf_p, join_type_t *type, uint32_t *len,
                                   uint64_t deadline, char *why, size_t why_len)
{
    uint8_t head[JOIN_HEADER];
    kvx_status_t status = rdv_io(fd, head, JOIN_HEADER, 0, deadline);

    *buf_p = NULL;
    if (status != KVX_OK) {
        return status;
    }
    if (join_header_decode(head, type, len, why, why_len) != 0) {
        return KVX_ERR_PROTOCOL;
    }
    *buf_p = malloc(JOIN_HEADER + *len);
    if (*buf_p == NULL) {
        snprintf(why, why_len, "no memory for a frame of %u bytes", *len);
        return KVX_ERR_NO_MEMORY;
    }
    memcpy(*buf_p, head, JOIN_HEADER);
    return rdv_io(fd, *buf_p + JOIN_HEADER, *len, 0, deadline);
}

static const char *rdv_what(kvx_status_t status)
{
    return status == KVX_ERR_TIMEOUT ? "no answer in time" : "the connection failed";
}

/* Connects to addr within the deadline: the socket, or -1 with why. */
static int rdv_connect(const char *addr, uint64_t deadline, uint64_t timeout_ns, kvx_failure_t *why)
{
    char host[RDV_ADDR_MAX], port[8];
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss), elen = sizeof(int);
    kvx_status_t status;
    int fd, err = 0;

    if (rdv_split(addr, host, sizeof(host), port, sizeof(port)) != 0 ||
        rdv_resolve(host, port, &ss, &len) != 0 || strcmp(port, "0") == 0) {
        failure_set(why, KVX_ERR_CONFIG, KVX_STAGE_BOOTSTRAP, NULL,
                    "cannot read the job's address \"%s\" (HOST:PORT)", addr);
        return -1;
    }
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        failure_set(why, KVX_ERR_IO, KVX_STAGE_BOOTSTRAP, strerror(errno),
                    "cannot make a socket to join the job at %s", addr);
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&ss, len) != 0 && errno != EINPROGRESS) {
        err = errno;
    } else if ((status = rdv_wait(fd, POLLOUT, deadline)) != KVX_OK) {
        close(fd);
        failure_set(why, status, KVX_STAGE_BOOTSTRAP, NULL,
                    "cannot connect to the job at %s within %.1f s", addr,
                    (double)timeout_ns / (double)KVX_NS_PER_S);
        return -1;
    } else {
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen);
    }
    if (err != 0) {
        close(fd);
        failure_set(why, KVX_ERR_IO, KVX_STAGE_BOOTSTRAP, strerror(err),
                    "cannot connect to the job at %s", addr);
        return -1;
    }
    return fd;
}

/* A reply that is a refusal, or not the frame wanted: its status and why. */
static kvx_status_t rdv_unwanted(const uint8_t *buf, join_type_t type, uint32_t body_len,
                                 const char *addr, kvx_failure_t *why, char *text, size_t text_len)
{
    join_refuse_t rf;

    if (type == JOIN_REFUSE &&
        join_refuse_decode(buf + JOIN_HEADER, body_len, &rf, text, text_len) == 0) {
        failure_set(why, (kvx_status_t)rf.status, KVX_STAGE_BOOTSTRAP, NULL,
                    "the job at %s refused: %s", addr, rf.text);
        return (kvx_status_t)rf.status;
    }
    if (type != JOIN_REFUSE) {
        snprintf(text, text_len, "a frame of type %d where another belongs", (int)type);
    }
    return KVX_ERR_PROTOCOL;
}

kvx_status_t rdv_join_desc(const char *addr, const uint8_t key[JOIN_KEY_BYTES], join_hello_t *hello,
                           const void *desc, size_t desc_len, uint64_t timeout_ns,
                           join_welcome_t *welcome, void **reply, size_t *reply_len,
                           kvx_failure_t *why)
{
    uint64_t deadline = kvx_now_ns() + timeout_ns;
    char text[JOIN_TEXT_MAX] = "";
    uint8_t *buf = NULL, job_nonce[JOIN_NONCE_BYTES];
    join_type_t type = 0;
    uint32_t body_len = 0;
    kvx_status_t status = KVX_OK;
    int fd, welcomed = 0;

    memset(welcome, 0, sizeof(*welcome));
    if (reply != NULL) {
        *reply = NULL;
        *reply_len = 0;
    }
    if (join_random(hello->nonce, JOIN_NONCE_BYTES) != 0) {
        failure_set(why, KVX_ERR_IO, KVX_STAGE_BOOTSTRAP, NULL, "no random nonce");
        return KVX_ERR_IO;
    }
    fd = rdv_connect(addr, deadline, timeout_ns, why);
    if (fd < 0) {
        return why->status;
    }
    status = rdv_read_frame(fd, &buf, &type, &body_len, deadline, text, sizeof(text));
    if (status == KVX_OK &&
        (type != JOIN_CHALLENGE ||
         join_challenge_decode(buf + JOIN_HEADER, body_len, job_nonce, text, sizeof(text)) != 0)) {
        status = KVX_ERR_PROTOCOL;
    }
    if (status == KVX_OK) {
        uint8_t frame[JOIN_FRAME_MAX];
        size_t n = join_hello_encode(hello, key, job_nonce, frame);

        status = rdv_io(fd, frame, n, 1, deadline);
    }
    if (status == KVX_OK) {
        free(buf);
        status = rdv_read_frame(fd, &buf, &type, &body_len, deadline, text, sizeof(text));
    }
    if (status == KVX_OK && type == JOIN_WELCOME) {
        if (join_welcome_decode(buf + JOIN_HEADER, body_len, key, job_nonce, hello->nonce, welcome,
                                text, sizeof(text)) != 0) {
            status = KVX_ERR_PROTOCOL;
        } else {
            welcomed = 1;
        }
    } else if (status == KVX_OK) {
        status = rdv_unwanted(buf, type, body_len, addr, why, text, sizeof(text));
    }
    if (status == KVX_OK && hello->place >= 0) {
        uint8_t *frame = malloc(JOIN_HEADER + JOIN_MAC_BYTES + desc_len);
        size_t n;

        if (frame == NULL || desc_len > JOIN_DESC_MAX - JOIN_MAC_BYTES) {
            free(frame);
            snprintf(text, sizeof(text), "no room for a descriptor of %zu bytes", desc_len);
            status = KVX_ERR_NO_MEMORY;
        } else {
            n = join_desc_encode(desc, desc_len, 1, key, job_nonce, hello->nonce, frame);
            status = rdv_io(fd, frame, n, 1, deadline);
            free(frame);
        }
        if (status == KVX_OK) {
            free(buf);
            status = rdv_read_frame(fd, &buf, &type, &body_len, deadline, text, sizeof(text));
        }
        if (status == KVX_OK && type == JOIN_DESC) {
            const uint8_t *d;
            size_t dlen;

            if (join_desc_decode(buf + JOIN_HEADER, body_len, 0, key, job_nonce, hello->nonce, &d,
                                 &dlen, text, sizeof(text)) != 0 ||
                (*reply = malloc(dlen > 0 ? dlen : 1)) == NULL) {
                status = KVX_ERR_PROTOCOL;
            } else {
                memcpy(*reply, d, dlen);
                *reply_len = dlen;
            }
        } else if (status == KVX_OK) {
            status = rdv_unwanted(buf, type, body_len, addr, why, text, sizeof(text));
        }
    }
    close(fd);
    free(buf);
    if (status != KVX_OK && welcomed) {
        free(welcome->doors);
        memset(welcome, 0, sizeof(*welcome));
    }
    if (status == KVX_OK || (type == JOIN_REFUSE && why->status == status)) {
        return status;
    }
    failure_set(why, status, KVX_STAGE_BOOTSTRAP, NULL, "joining the job at %s: %s", addr,
                status == KVX_ERR_PROTOCOL || status == KVX_ERR_NO_MEMORY ? text
                                                                          : rdv_what(status));
    return status;
}

kvx_status_t rdv_join(const char *addr, const uint8_t key[JOIN_KEY_BYTES], join_hello_t *hello,
                      uint64_t timeout_ns, join_welcome_t *welcome, kvx_failure_t *why)
{
    return rdv_join_desc(addr, key, hello, NULL, 0, timeout_ns, welcome, NULL, NULL, why);
}
