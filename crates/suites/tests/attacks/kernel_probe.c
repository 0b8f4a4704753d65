/* A native program the model builds in its workspace (with `make`, as the shipped
 * engineering agent may) and runs confined, written from the kernel's interface:
 *
 *   probe sockets   every address family 0..63 x every socket type x protocols 0..300
 *                   (MPTCP is 262): socket(); each one opened is reported, and one of
 *                   AF_INET/AF_INET6 tries agentplane's own port and the test's target
 *                   (an HTTP request after connecting). A UNIX socket outside the
 *                   workspace is connected to; a UNIX socket pair is made.
 *   probe devices   mknod of a character and a block device; the capability sets.
 *   probe survive   a setsid child, a double-forked orphan and a setsid grandchild,
 *                   each sleeping 300 s, each holding a lock on a file; then exits.
 *
 * params.h (written by the model) defines OWN_PORT, TARGET_PORT and UNIX_PATH.
 * Every line it prints is `key: value`, read by the test.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/file.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "params.h"

static int try_connect(int fd, int family, int port) {
    if (family == AF_INET) {
        struct sockaddr_in a = {0};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        return connect(fd, (struct sockaddr *)&a, sizeof a);
    }
    struct sockaddr_in6 a = {0};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(port);
    a.sin6_addr = in6addr_loopback;
    return connect(fd, (struct sockaddr *)&a, sizeof a);
}

static void request(int fd) {
    const char *req = "GET /v1/agents HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (write(fd, req, strlen(req)) < 0) {
        return;
    }
    char buf[64];
    (void)read(fd, buf, sizeof buf);
}

static int sockets(void) {
    int types[] = {SOCK_STREAM, SOCK_DGRAM, SOCK_RAW, SOCK_RDM, SOCK_SEQPACKET, 6, 10};
    long tried = 0, opened = 0, own = 0, target = 0;
    for (int family = 0; family < 64; family++) {
        for (unsigned t = 0; t < sizeof types / sizeof types[0]; t++) {
            for (int protocol = 0; protocol <= 300; protocol++) {
                tried++;
                int fd = socket(family, types[t] | SOCK_CLOEXEC, protocol);
                if (fd < 0) {
                    continue;
                }
                opened++;
                printf("opened: %d %d %d\n", family, types[t], protocol);
                if ((family == AF_INET || family == AF_INET6) &&
                    (types[t] == SOCK_STREAM || types[t] == SOCK_SEQPACKET)) {
                    if (try_connect(fd, family, OWN_PORT) == 0) {
                        own++;
                        printf("own-port-reached: %d %d %d\n", family, types[t], protocol);
                        request(fd);
                    }
                    close(fd);
                    fd = socket(family, types[t] | SOCK_CLOEXEC, protocol);
                    if (fd >= 0 && try_connect(fd, family, TARGET_PORT) == 0) {
                        target++;
                        request(fd);
                    }
                }
                if (fd >= 0) {
                    close(fd);
                }
            }
        }
    }
    printf("tried: %ld\nopened-count: %ld\nown-port-count: %ld\ntarget-count: %ld\n", tried,
           opened, own, target);

    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) {
        printf("unix-socket: refused %s\n", strerror(errno));
    } else {
        struct sockaddr_un a = {0};
        a.sun_family = AF_UNIX;
        strncpy(a.sun_path, UNIX_PATH, sizeof a.sun_path - 1);
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
            printf("unix-socket: connected\n");
        } else {
            printf("unix-socket: refused %s\n", strerror(errno));
        }
        close(fd);
    }
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0) {
        printf("unix-pair: ok\n");
    } else {
        printf("unix-pair: refused %s\n", strerror(errno));
    }
    return 0;
}

struct cap_header {
    unsigned version;
    int pid;
};
struct cap_data {
    unsigned effective, permitted, inheritable;
};

static int devices(void) {
    const char *names[] = {"char-device", "block-device"};
    mode_t kinds[] = {S_IFCHR, S_IFBLK};
    dev_t numbers[] = {makedev(1, 3), makedev(7, 0)};
    for (int i = 0; i < 2; i++) {
        if (mknod(names[i], kinds[i] | 0600, numbers[i]) == 0) {
            printf("%s: made\n", names[i]);
        } else {
            printf("%s: refused %s\n", names[i], strerror(errno));
        }
    }
    struct cap_header h = {0x20080522, 0};
    struct cap_data d[2] = {{0}};
    if (syscall(SYS_capget, &h, d) == 0) {
        printf("capabilities: effective %x%08x permitted %x%08x inheritable %x%08x\n",
               d[1].effective, d[0].effective, d[1].permitted, d[0].permitted,
               d[1].inheritable, d[0].inheritable);
    }
    int bounding = 0;
    for (int cap = 0; cap < 64; cap++) {
        if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1) {
            bounding++;
        }
    }
    printf("bounding: %d\n", bounding);
    return 0;
}

/* Writes the pid and holds an exclusive lock on the file for as long as the process
 * lives: the test, outside the PID namespace where the pid means nothing, sees the
 * process gone when it can take the lock. */
static void write_pid(const char *file, pid_t pid) {
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
        dprintf(fd, "%d\n", pid);
        flock(fd, LOCK_EX);
    }
}

static void quiet(void) {
    /* The survivors do not hold the output pipes: nothing would wait for them. */
    freopen("/dev/null", "w", stdout);
    freopen("/dev/null", "w", stderr);
}

static int survive(void) {
    fflush(stdout);
    /* A child in a session of its own. */
    pid_t child = fork();
    if (child == 0) {
        quiet();
        setsid();
        write_pid("setsid.pid", getpid());
        sleep(300);
        _exit(0);
    }
    /* A double fork: the middle process exits, its child is an orphan. */
    pid_t middle = fork();
    if (middle == 0) {
        pid_t orphan = fork();
        if (orphan == 0) {
            quiet();
            write_pid("orphan.pid", getpid());
            sleep(300);
            _exit(0);
        }
        _exit(0);
    }
    /* Both: a setsid child that forks and leaves its own child behind. */
    pid_t daemon = fork();
    if (daemon == 0) {
        quiet();
        setsid();
        if (fork() == 0) {
            write_pid("daemon.pid", getpid());
            sleep(300);
            _exit(0);
        }
        _exit(0);
    }
    /* Wait until every pid is written, then leave them running. */
    for (int i = 0; i < 200; i++) {
        if (access("setsid.pid", F_OK) == 0 && access("orphan.pid", F_OK) == 0 &&
            access("daemon.pid", F_OK) == 0) {
            break;
        }
        usleep(10000);
    }
    /* Said first: killing the parent below ends the program the call ran (make), and
     * then the namespace's init and with it this process, which on a loaded machine
     * can happen before a line printed after the kill is written. */
    printf("survivors: started\n");
    /* Try to kill whatever waits for us: the parent (make, the program the call ran)
     * and PID 1 by number (the namespace's init). The reaper itself is outside the PID
     * namespace: no pid names it. */
    int parent = kill(getppid(), SIGKILL) == 0;
    int one = kill(1, SIGKILL) == 0;
    printf("parent-kill: %s\n", parent || one ? "sent" : "refused");
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) {
        return 2;
    }
    if (strcmp(argv[1], "sockets") == 0) {
        return sockets();
    }
    if (strcmp(argv[1], "devices") == 0) {
        return devices();
    }
    if (strcmp(argv[1], "survive") == 0) {
        return survive();
    }
    return 2;
}
