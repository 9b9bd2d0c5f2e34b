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
    RDV_STAGE_CHALLENGE, /* sending the challenge */
    RDV_STAGE_HEADER,    /* reading the hello's header */
    RDV_STAGE_BODY,      /* reading its body */
    RDV_STAGE_REPLY      /* sending the welcome or the refusal */
};

static const char *const rdv_stage_name[] = { "the challenge", "the hello's header", "the hello",
                                              "the reply" };

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
             rdv_admit_t admit, void *arg, char *why, size_t why_len)
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
    r->arg = arg;
    return 0;
}

static void rdv_drop(rdv_t *r, rdv_conn_t *c, const char *fmt, const char *what)
{
    kvx_warn("rendezvous %s: dropped %s: %s %s (%zu of %zu bytes)", r->addr, c->peer, fmt, what,
             c->done, c->len);
    close(c->fd);
    c->fd = -1;
    r->dropped++;
}

/* The reply to a hello, or to a frame that is not one. */
static void rdv_reply(rdv_t *r, rdv_conn_t *c, kvx_status_t status, const join_hello_t *hello,
                      const join_welcome_t *w, const char *text)
{
    if (status == KVX_OK) {
        c->len = join_welcome_encode(w, r->key, c->nonce, hello->nonce, c->buf);
        r->welcomed++;
        kvx_info("rendezvous %s: welcomed %s (\"%s\", %s, TP %d) as %s[%d], generation %u", r->addr,
                 c->peer, hello->name, kvx_role_name((kvx_role_t)hello->role), hello->tp_size,
                 kvx_role_name((kvx_role_t)hello->role), w->instance, w->generation);
    } else {
        join_refuse_t rf;

        memset(&rf, 0, sizeof(rf));
        rf.status = status;
        snprintf(rf.text, sizeof(rf.text), "%s", text);
        c->len = join_refuse_encode(&rf, c->buf);
        r->refused++;
        kvx_warn("rendezvous %s: refused %s: %s", r->addr, c->peer, text);
    }
    c->done = 0;
    c->stage = RDV_STAGE_REPLY;
}

/* A whole hello is in c->buf. */
static void rdv_hello(rdv_t *r, rdv_conn_t *c, uint32_t body_len)
{
    join_hello_t hello;
    join_welcome_t w;
    char why[JOIN_TEXT_MAX];
    kvx_status_t status;

    if (join_hello_decode(c->buf + JOIN_HEADER, body_len, r->key, c->nonce, &hello, why,
                          sizeof(why)) != 0) {
        rdv_reply(r, c, KVX_ERR_PROTOCOL, NULL, NULL, why);
        return;
    }
    memset(&w, 0, sizeof(w));
    why[0] = '\0';
    status = r->admit(r->arg, &hello, c->peer, &w, why, sizeof(why));
    rdv_reply(r, c, status, &hello, &w, why[0] ? why : "refused by the job");
}

/* Moves one connection as far as its socket allows; 1 if it moved. */
static unsigned rdv_step(rdv_t *r, rdv_conn_t *c, uint64_t now)
{
    unsigned moved = 0;

    while (c->fd >= 0) {
        int sending = c->stage == RDV_STAGE_CHALLENGE || c->stage == RDV_STAGE_REPLY;
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
        if (c->done < c->len) {
            continue;
        }
        if (c->stage == RDV_STAGE_CHALLENGE) {
            c->stage = RDV_STAGE_HEADER;
            c->len = JOIN_HEADER;
            c->done = 0;
        } else if (c->stage == RDV_STAGE_HEADER) {
            join_type_t type;
            uint32_t body_len;
            char why[JOIN_TEXT_MAX];
            int bad = join_header_decode(c->buf, &type, &body_len, why, sizeof(why)) != 0;

            if (!bad && type != JOIN_HELLO) {
                snprintf(why, sizeof(why), "a frame of type %d where a hello belongs", (int)type);
                bad = 1;
            }
            if (bad) {
                rdv_reply(r, c, KVX_ERR_PROTOCOL, NULL, NULL, why);
            } else if (body_len == 0) {
                rdv_hello(r, c, 0);
            } else {
                c->stage = RDV_STAGE_BODY;
                c->len = JOIN_HEADER + body_len;
            }
        } else if (c->stage == RDV_STAGE_BODY) {
            rdv_hello(r, c, (uint32_t)(c->len - JOIN_HEADER));
        } else {
            shutdown(c->fd, SHUT_WR);
            close(c->fd);
            c->fd = -1;
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
        c->stage = RDV_STAGE_CHALLENGE;
        c->deadline = now + r->timeout;
        c->len = join_challenge_encode(c->nonce, c->buf);
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
            close(r->conn[i].fd);
            r->conn[i].fd = -1;
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

/* Reads one frame: its type and body into buf + JOIN_HEADER. */
static kvx_status_t rdv_read_frame(int fd, uint8_t *buf, join_type_t *type, uint32_t *len,
                                   uint64_t deadline, char *why, size_t why_len)
{
    kvx_status_t status = rdv_io(fd, buf, JOIN_HEADER, 0, deadline);

    if (status != KVX_OK) {
        return status;
    }
    if (join_header_decode(buf, type, len, why, why_len) != 0) {
        return KVX_ERR_PROTOCOL;
    }
    return rdv_io(fd, buf + JOIN_HEADER, *len, 0, deadline);
}

static const char *rdv_what(kvx_status_t status)
{
    return status == KVX_ERR_TIMEOUT ? "no answer in time" : "the connection failed";
}

kvx_status_t rdv_join(const char *addr, const uint8_t key[JOIN_KEY_BYTES], join_hello_t *hello,
                      uint64_t timeout_ns, join_welcome_t *welcome, kvx_failure_t *why)
{
    uint64_t deadline = kvx_now_ns() + timeout_ns;
    char host[RDV_ADDR_MAX], port[8], text[JOIN_TEXT_MAX] = "";
    uint8_t buf[JOIN_FRAME_MAX], job_nonce[JOIN_NONCE_BYTES];
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    join_type_t type;
    uint32_t body_len;
    kvx_status_t status;
    int fd, err = 0;
    socklen_t elen = sizeof(err);

    if (rdv_split(addr, host, sizeof(host), port, sizeof(port)) != 0 ||
        rdv_resolve(host, port, &ss, &len) != 0 || strcmp(port, "0") == 0) {
        failure_set(why, KVX_ERR_CONFIG, KVX_STAGE_BOOTSTRAP, NULL,
                    "cannot read the job's address \"%s\" (HOST:PORT)", addr);
        return KVX_ERR_CONFIG;
    }
    if (join_random(hello->nonce, JOIN_NONCE_BYTES) != 0) {
        failure_set(why, KVX_ERR_IO, KVX_STAGE_BOOTSTRAP, NULL, "no random nonce");
        return KVX_ERR_IO;
    }
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        failure_set(why, KVX_ERR_IO, KVX_STAGE_BOOTSTRAP, strerror(errno),
                    "cannot make a socket to join the job at %s", addr);
        return KVX_ERR_IO;
    }
    if (connect(fd, (struct sockaddr *)&ss, len) != 0 && errno != EINPROGRESS) {
        err = errno;
    } else if ((status = rdv_wait(fd, POLLOUT, deadline)) != KVX_OK) {
        close(fd);
        failure_set(why, status, KVX_STAGE_BOOTSTRAP, NULL,
                    "cannot connect to the job at %s within %.1f s", addr,
                    (double)timeout_ns / (double)KVX_NS_PER_S);
        return status;
    } else {
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen);
    }
    if (err != 0) {
        close(fd);
        failure_set(why, KVX_ERR_IO, KVX_STAGE_BOOTSTRAP, strerror(err),
                    "cannot connect to the job at %s", addr);
        return KVX_ERR_IO;
    }
    status = rdv_read_frame(fd, buf, &type, &body_len, deadline, text, sizeof(text));
    if (status == KVX_OK &&
        (type != JOIN_CHALLENGE ||
         join_challenge_decode(buf + JOIN_HEADER, body_len, job_nonce, text, sizeof(text)) != 0)) {
        status = KVX_ERR_PROTOCOL;
    }
    if (status == KVX_OK) {
        size_t n = join_hello_encode(hello, key, job_nonce, buf);

        status = rdv_io(fd, buf, n, 1, deadline);
    }
    if (status == KVX_OK) {
        status = rdv_read_frame(fd, buf, &type, &body_len, deadline, text, sizeof(text));
    }
    close(fd);
    if (status == KVX_OK && type == JOIN_WELCOME) {
        if (join_welcome_decode(buf + JOIN_HEADER, body_len, key, job_nonce, hello->nonce, welcome,
                                text, sizeof(text)) == 0) {
            return KVX_OK;
        }
        status = KVX_ERR_PROTOCOL;
    } else if (status == KVX_OK && type == JOIN_REFUSE) {
        join_refuse_t rf;

        if (join_refuse_decode(buf + JOIN_HEADER, body_len, &rf, text, sizeof(text)) == 0) {
            failure_set(why, (kvx_status_t)rf.status, KVX_STAGE_BOOTSTRAP, NULL,
                        "the job at %s refused: %s", addr, rf.text);
            return (kvx_status_t)rf.status;
        }
        status = KVX_ERR_PROTOCOL;
    } else if (status == KVX_OK) {
        snprintf(text, sizeof(text), "a frame of type %d where a reply belongs", (int)type);
        status = KVX_ERR_PROTOCOL;
    }
    failure_set(why, status, KVX_STAGE_BOOTSTRAP, NULL, "joining the job at %s: %s", addr,
                status == KVX_ERR_PROTOCOL ? text : rdv_what(status));
    return status;
}
