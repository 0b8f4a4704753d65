/* A native program the model builds in its workspace and runs confined, written from
 * the kernel's interface, against three listeners on the host: agentplane's own port,
 * a second agentplane, and a plain loopback service (the test's target), plus a UDP
 * socket.
 *
 *   probe connect   every address that names the host's loopback (127.0.0.1,
 *                   127.0.0.2, 0.0.0.0, ::1, ::, ::ffff:127.0.0.1) x every port x
 *                   every way to open a TCP connection: connect(), sendto() and
 *                   sendmsg() with MSG_FASTOPEN (no connect), TCP_FASTOPEN_CONNECT;
 *                   UDP datagrams to the UDP port; io_uring; nested namespaces by
 *                   unshare, clone and clone3.
 *   probe proxy     the way out: CONNECT through the egress proxy to each port, and a
 *                   plain GET for agentplane's /v1/keys.
 *
 * params.h (written by the model) defines OWN_PORT, SECOND_PORT, TARGET_PORT,
 * UDP_PORT and PROXY_PORT. Every line it prints is `key: value`, read by the test.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "params.h"

#ifndef TCP_FASTOPEN_CONNECT
#define TCP_FASTOPEN_CONNECT 30
#endif

static const char *ADDRS[] = {"127.0.0.1", "127.0.0.2", "0.0.0.0", "::1", "::",
                              "::ffff:127.0.0.1"};
#define N_ADDRS (sizeof ADDRS / sizeof ADDRS[0])

/* Fills `ss` for `addr`:`port`; returns the family. */
static int address(const char *addr, int port, struct sockaddr_storage *ss, socklen_t *len) {
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    if (inet_pton(AF_INET, addr, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        *len = sizeof *v4;
        return AF_INET;
    }
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    inet_pton(AF_INET6, addr, &v6->sin6_addr);
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    *len = sizeof *v6;
    return AF_INET6;
}

static const char REQUEST[] = "GET /v1/agents HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";

/* One way to open a connection; returns 1 when it reached something. */
static int attempt(int method, const char *addr, int port) {
    struct sockaddr_storage ss;
    socklen_t len;
    int family = address(addr, port, &ss, &len);
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return 0;
    }
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int reached = 0;
    if (method == 0) {
        reached = connect(fd, (struct sockaddr *)&ss, len) == 0;
    } else if (method == 1) {
        reached = sendto(fd, REQUEST, sizeof REQUEST - 1, MSG_FASTOPEN, (struct sockaddr *)&ss,
                         len) >= 0;
    } else if (method == 2) {
        struct iovec iov = {(void *)REQUEST, sizeof REQUEST - 1};
        struct msghdr msg = {0};
        msg.msg_name = &ss;
        msg.msg_namelen = len;
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        reached = sendmsg(fd, &msg, MSG_FASTOPEN) >= 0;
    } else {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_FASTOPEN_CONNECT, &one, sizeof one);
        reached = connect(fd, (struct sockaddr *)&ss, len) == 0 &&
                  write(fd, REQUEST, sizeof REQUEST - 1) > 0;
    }
    if (reached) {
        char buf[64];
        if (read(fd, buf, sizeof buf) <= 0) {
            /* Connected to something that answered nothing: still reached. */
        }
    }
    close(fd);
    return reached;
}

static const char *errname(int e) {
    switch (e) {
    case EPERM: return "EPERM";
    case ENOSYS: return "ENOSYS";
    case EACCES: return "EACCES";
    case EINVAL: return "EINVAL";
    default: return strerror(e);
    }
}

/* Descriptors open above the standard streams: what the program inherited. */
static int open_descriptors(void) {
    int open = 0;
    for (int fd = 3; fd < 1024; fd++) {
        if (fcntl(fd, F_GETFD) != -1) {
            open++;
            printf("open-fd: %d\n", fd);
        }
    }
    return open;
}

static int connects(void) {
    printf("open-fds: %d\n", open_descriptors());
    const char *methods[] = {"connect", "sendto-fastopen", "sendmsg-fastopen",
                             "fastopen-connect"};
    int ports[] = {OWN_PORT, SECOND_PORT, TARGET_PORT};
    long tried = 0, reached = 0;
    for (unsigned a = 0; a < N_ADDRS; a++) {
        for (unsigned p = 0; p < 3; p++) {
            for (int m = 0; m < 4; m++) {
                tried++;
                if (attempt(m, ADDRS[a], ports[p])) {
                    reached++;
                    printf("reached: %s %s %d\n", methods[m], ADDRS[a], ports[p]);
                }
            }
        }
    }
    printf("tried-connect: %ld\nreached-count: %ld\n", tried, reached);

    long sent = 0;
    for (unsigned a = 0; a < N_ADDRS; a++) {
        struct sockaddr_storage ss;
        socklen_t len;
        int family = address(ADDRS[a], UDP_PORT, &ss, &len);
        int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd >= 0) {
            if (sendto(fd, "udp", 3, 0, (struct sockaddr *)&ss, len) == 3) {
                sent++;
            }
            close(fd);
        }
    }
    printf("udp-sent: %ld\n", sent);

    long params[15] = {0};
    long ring = syscall(__NR_io_uring_setup, 8, params);
    printf("io_uring: %s\n", ring >= 0 ? "opened" : errname(errno));

    printf("unshare-user: %s\n", unshare(CLONE_NEWUSER) == 0 ? "made" : errname(errno));
    printf("unshare-net: %s\n", unshare(CLONE_NEWNET) == 0 ? "made" : errname(errno));
    long child = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
    if (child == 0) {
        _exit(0);
    }
    if (child > 0) {
        waitpid((pid_t)child, NULL, 0);
    }
    printf("clone-newuser: %s\n", child > 0 ? "made" : errname(errno));
    struct {
        unsigned long long flags, pidfd, child_tid, parent_tid, exit_signal, stack,
            stack_size, tls;
    } args = {CLONE_NEWUSER | CLONE_NEWNET, 0, 0, 0, SIGCHLD, 0, 0, 0};
    long child3 = syscall(__NR_clone3, &args, sizeof args);
    if (child3 == 0) {
        _exit(0);
    }
    if (child3 > 0) {
        waitpid((pid_t)child3, NULL, 0);
    }
    printf("clone3: %s\n", child3 > 0 ? "made" : errname(errno));
    return 0;
}

/* Asks the proxy for `request`; prints `key: <status code> <first body line>`. */
static void through_proxy(const char *key, const char *request) {
    struct sockaddr_storage ss;
    socklen_t len;
    address("127.0.0.1", PROXY_PORT, &ss, &len);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (fd < 0 || connect(fd, (struct sockaddr *)&ss, len) != 0) {
        printf("%s: no proxy %s\n", key, errname(errno));
        if (fd >= 0) close(fd);
        return;
    }
    write(fd, request, strlen(request));
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = 0;
    int code = 0;
    sscanf(buf, "HTTP/1.%*d %d", &code);
    if (code == 200 && strncmp(request, "CONNECT", 7) == 0) {
        /* Tunnelled: now speak to the destination itself. */
        write(fd, REQUEST, sizeof REQUEST - 1);
        n = read(fd, buf, sizeof buf - 1);
        buf[n > 0 ? n : 0] = 0;
    }
    char *body = strstr(buf, "\r\n\r\n");
    char line[128] = "";
    if (body) {
        sscanf(body + 4, "%127[^\n]", line);
    }
    printf("%s: %d %s\n", key, code, line);
    close(fd);
}

static int proxy(void) {
    char request[256];
    snprintf(request, sizeof request, "CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", TARGET_PORT);
    through_proxy("proxy-target", request);
    snprintf(request, sizeof request, "CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", OWN_PORT);
    through_proxy("proxy-own", request);
    snprintf(request, sizeof request, "CONNECT [::1]:%d HTTP/1.1\r\n\r\n", OWN_PORT);
    through_proxy("proxy-own-v6", request);
    snprintf(request, sizeof request, "CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", SECOND_PORT);
    through_proxy("proxy-second", request);
    snprintf(request, sizeof request, "CONNECT localhost:%d HTTP/1.1\r\n\r\n", TARGET_PORT);
    through_proxy("proxy-target-by-name", request);
    snprintf(request, sizeof request,
             "POST http://127.0.0.1:%d/v1/keys HTTP/1.1\r\nHost: 127.0.0.1\r\n"
             "content-length: 0\r\n\r\n",
             OWN_PORT);
    through_proxy("proxy-get-own", request);
    return 0;
}

/* 200 connections to the proxy at once, saying nothing: how many the server closed
 * at once; then, with them gone, whether the proxy still lets the target through. */
static int flood(void) {
    enum { N = 200 };
    int fds[N];
    struct sockaddr_storage ss;
    socklen_t len;
    address("127.0.0.1", PROXY_PORT, &ss, &len);
    for (int i = 0; i < N; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fds[i] >= 0 && connect(fds[i], (struct sockaddr *)&ss, len) != 0) {
            close(fds[i]);
            fds[i] = -1;
        }
    }
    usleep(1000000);
    int closed = 0;
    for (int i = 0; i < N; i++) {
        char b;
        if (fds[i] >= 0 && recv(fds[i], &b, 1, MSG_DONTWAIT) == 0) {
            closed++;
        }
        if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
    printf("flood-closed: %d\n", closed);
    usleep(200000);
    char request[256];
    snprintf(request, sizeof request, "CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", TARGET_PORT);
    through_proxy("flood-after", request);
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) {
        return 2;
    }
    if (strcmp(argv[1], "connect") == 0) {
        return connects();
    }
    if (strcmp(argv[1], "proxy") == 0) {
        return proxy();
    }
    if (strcmp(argv[1], "flood") == 0) {
        return flood();
    }
    return 2;
}
