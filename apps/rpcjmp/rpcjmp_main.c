/* rpcjmp: a store of records reached by switching into its VAS or through a server process
 * on a UNIX socket (SpaceJMP's Figure 7 as a tool). See rpcjmp.h and docs/spacejmp-apps.md. */
#include "rpcjmp.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: rpcjmp create NAME [RECORDS [BASE]]   make a store (default %u records at "
            "0x%llx)\n"
            "       rpcjmp delete NAME\n"
            "       rpcjmp serve NAME SOCKET              answer requests on a UNIX stream "
            "socket until SIGINT/SIGTERM\n"
            "       rpcjmp get NAME KEY [LEN] [SOCKET]    print up to LEN bytes (default all) "
            "of record KEY's value\n"
            "       rpcjmp put NAME KEY TEXT [SOCKET]     make TEXT record KEY's value\n"
            "get and put switch into the store's VAS, or with SOCKET ask the server there.\n",
            RPCJMP_RECORDS_DEFAULT, (unsigned long long)RPCJMP_BASE_DEFAULT);
}

static int fail(const char *what, long rc)
{
    fprintf(stderr, "rpcjmp: %s: %s (%s)\n", what, exomem_strerror((int)rc),
            exomem_last_error());
    return 1;
}

static int unix_socket(const char *path, struct sockaddr_un *sa)
{
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof sa->sun_path) {
        fprintf(stderr, "rpcjmp: socket path too long: %s\n", path);
        return -1;
    }
    strcpy(sa->sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        perror("rpcjmp: socket");
    return fd;
}

static volatile sig_atomic_t stop;
static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static int serve(const char *name, const char *path)
{
    struct rpcjmp_server s;
    long rc = rpcjmp_server_open(name, &s);
    if (rc)
        return fail(name, rc);
    struct sockaddr_un sa;
    int lfd = unix_socket(path, &sa);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(lfd, 8) != 0) {
        if (lfd >= 0)
            perror("rpcjmp: bind/listen");
        rpcjmp_server_close(&s);
        return 1;
    }
    struct sigaction act = { .sa_handler = on_signal }; /* no SA_RESTART: accept() returns */
    sigaction(SIGINT, &act, NULL);
    sigaction(SIGTERM, &act, NULL);
    signal(SIGPIPE, SIG_IGN);
    fprintf(stderr, "rpcjmp: serving store %s on %s\n", name, path);
    while (!stop) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue; /* EINTR from a signal: the loop checks stop */
        struct rpcjmp_chan ch;
        rpcjmp_chan_from_socket(fd, true, &ch);
        if ((rc = rpcjmp_server_serve(&s, &ch)))
            fprintf(stderr, "rpcjmp: a client: %s\n", exomem_last_error());
        rpcjmp_chan_close(&ch);
    }
    close(lfd);
    unlink(path);
    fprintf(stderr, "rpcjmp: served %llu requests\n", (unsigned long long)s.served);
    rpcjmp_server_close(&s);
    return 0;
}

/* get or put, by switching (path NULL) or through the server at path. */
static int get_put(const char *name, unsigned key, bool put, const void *text, size_t len,
                   const char *path)
{
    static unsigned char buf[RPCJMP_PAYLOAD_MAX];
    long rc;
    if (!path) {
        struct rpcjmp_jmp j;
        if ((rc = rpcjmp_jmp_open(name, &j)))
            return fail(name, rc);
        rc = put ? rpcjmp_jmp_write(&j, key, text, len) : rpcjmp_jmp_read(&j, key, buf, len);
        rpcjmp_jmp_close(&j);
    } else {
        struct sockaddr_un sa;
        int fd = unix_socket(path, &sa);
        if (fd < 0)
            return 1;
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
            perror("rpcjmp: connect");
            close(fd);
            return 1;
        }
        struct rpcjmp_chan ch;
        rpcjmp_chan_from_socket(fd, false, &ch);
        rc = put ? rpcjmp_call_write(&ch, key, text, len) : rpcjmp_call_read(&ch, key, buf, len);
        rpcjmp_call_close(&ch);
        rpcjmp_chan_close(&ch);
    }
    if (rc < 0)
        return fail(put ? "put" : "get", rc);
    if (!put && fwrite(buf, 1, (size_t)rc, stdout) != (size_t)rc)
        return 1;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 || strcmp(argv[1], "--help") ? stderr : stdout);
        return argc >= 2 && !strcmp(argv[1], "--help") ? 0 : 2;
    }
    const char *cmd = argv[1], *name = argv[2];
    long rc;
    if (!strcmp(cmd, "create") && argc <= 5) {
        unsigned n = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 0) : RPCJMP_RECORDS_DEFAULT;
        uint64_t base = argc > 4 ? strtoull(argv[4], NULL, 0) : 0;
        return (rc = rpcjmp_store_create(name, base, n)) ? fail(name, rc) : 0;
    }
    if (!strcmp(cmd, "delete") && argc == 3)
        return (rc = rpcjmp_store_delete(name)) ? fail(name, rc) : 0;
    if (!strcmp(cmd, "serve") && argc == 4)
        return serve(name, argv[3]);
    if (!strcmp(cmd, "get") && argc >= 4 && argc <= 6) {
        size_t len = argc > 4 ? strtoul(argv[4], NULL, 0) : RPCJMP_PAYLOAD_MAX;
        return get_put(name, (unsigned)strtoul(argv[3], NULL, 0), false, NULL,
                       len > RPCJMP_PAYLOAD_MAX ? RPCJMP_PAYLOAD_MAX : len,
                       argc > 5 ? argv[5] : NULL);
    }
    if (!strcmp(cmd, "put") && (argc == 5 || argc == 6))
        return get_put(name, (unsigned)strtoul(argv[3], NULL, 0), true, argv[4],
                       strlen(argv[4]), argc > 5 ? argv[5] : NULL);
    usage(stderr);
    return 2;
}
