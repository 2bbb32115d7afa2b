/* kvjmp: make, serve, check or query a key-value store that clients jump into.
 *
 *   kvjmp create NAME [BASE [SIZE]] [thp]
 *                                     segment at BASE (default 0x3c0000000000), SIZE bytes
 *                                     (default 1 GiB; suffixes K, M, G); thp: on
 *                                     transparent huge pages (KVJMP_THP)
 *   kvjmp destroy NAME
 *   kvjmp serve NAME SOCKET           a RESP server for redis-cli/redis-benchmark (SIGINT,
 *                                     SIGTERM stop it)
 *   kvjmp check NAME                  check the store's invariants, print its statistics
 *   kvjmp cmd NAME COMMAND [ARG...]   run one command, print the raw RESP reply
 */
#include "kvjmp.h"

#include <exomem/error.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile int stop_serving;

static void on_signal(int sig)
{
    (void)sig;
    stop_serving = 1;
}

static uint64_t parse_size(const char *s)
{
    char *end;
    uint64_t v = strtoull(s, &end, 0);
    switch (*end) {
    case 'G': case 'g': v <<= 10; /* fall through */
    case 'M': case 'm': v <<= 10; /* fall through */
    case 'K': case 'k': v <<= 10; end++; break;
    default: break;
    }
    if (*end || v == 0) {
        fprintf(stderr, "kvjmp: bad number %s\n", s);
        exit(2);
    }
    return v;
}

static int usage(void)
{
    fprintf(stderr, "usage: kvjmp create NAME [BASE [SIZE]] [thp] | destroy NAME | serve NAME SOCKET"
                    " | check NAME | cmd NAME COMMAND [ARG...]\n");
    return 2;
}

static int failed(const char *what, int rc)
{
    fprintf(stderr, "kvjmp %s: %s (%s)\n", what, exomem_strerror(rc), exomem_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return usage();
    const char *op = argv[1], *name = argv[2];
    int rc;
    if (strcmp(op, "create") == 0 && argc <= 6) {
        unsigned flags = 0;
        if (argc > 3 && strcmp(argv[argc - 1], "thp") == 0) {
            flags = KVJMP_THP;
            argc--;
        }
        uint64_t base = argc > 3 ? parse_size(argv[3]) : UINT64_C(0x3c0000000000);
        uint64_t size = argc > 4 ? parse_size(argv[4]) : UINT64_C(1) << 30;
        return (rc = kvjmp_create_ex(name, base, size, flags)) ? failed(op, rc) : 0;
    }
    if (strcmp(op, "destroy") == 0 && argc == 3)
        return (rc = kvjmp_destroy(name)) ? failed(op, rc) : 0;
    if (strcmp(op, "serve") == 0 && argc == 4) {
        struct sigaction sa = { .sa_handler = on_signal };
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        signal(SIGPIPE, SIG_IGN);
        return (rc = kvjmp_serve(name, argv[3], &stop_serving)) ? failed(op, rc) : 0;
    }
    struct kvjmp *c;
    if (strcmp(op, "check") == 0 && argc == 3) {
        struct kvjmp_check_stats st;
        if ((rc = kvjmp_open(name, &c)) != 0 || (rc = kvjmp_check(c, &st)) != 0)
            return failed(op, rc);
        printf("keys %llu objects %llu heap_allocations %llu recoveries %llu\n",
               (unsigned long long)st.keys, (unsigned long long)st.objects,
               (unsigned long long)st.heap_allocs, (unsigned long long)st.recoveries);
        return kvjmp_close(c) ? 1 : 0;
    }
    if (strcmp(op, "cmd") == 0 && argc >= 4) {
        int n = argc - 3;
        size_t *len = calloc((size_t)n, sizeof *len);
        for (int i = 0; len && i < n; i++)
            len[i] = strlen(argv[3 + i]);
        struct kvjmp_buf out = { 0 };
        if (!len || (rc = kvjmp_open(name, &c)) != 0)
            return failed(op, len ? rc : -EXO_ENOMEM);
        if ((rc = kvjmp_exec(c, n, (const char *const *)argv + 3, len, &out)) != 0)
            return failed(op, rc);
        fwrite(out.data, 1, out.len, stdout);
        kvjmp_buf_free(&out);
        free(len);
        return kvjmp_close(c) ? 1 : 0;
    }
    return usage();
}
