/* pstore: a persistent key-value store on the command line.
 *
 *   pstore FILE create [--base ADDR] [--size MiB]
 *   pstore FILE OP...      with OP one of: put KEY VALUE | get KEY | del KEY | list | count
 *                          | commit | info | check
 *
 * The operations of one invocation run in order on the open store; changes reach the file
 * only at `commit` (an invocation that ends without one drops them, as a crash would). For
 * example `pstore s.db put a 1 put b 2 commit get a`. `info` prints the address the store
 * is mapped at, which is the same in every run. Exit status: 0, 1 on an error, 2 on usage,
 * 3 when `get` or `del` did not find the key.
 */
#include "pstore.h"

#include <exomem/error.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_BASE UINT64_C(0x380000000000) /* clear of mmap's placements and of ASan */
#define DEFAULT_SIZE_MIB 64

static int usage(void)
{
    fprintf(stderr, "usage: pstore FILE create [--base ADDR] [--size MiB]\n"
                    "       pstore FILE OP...   OP: put KEY VALUE | get KEY | del KEY | list"
                    " | count | commit | info | check\n");
    return 2;
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "pstore: %s: %s (%s)\n", what, exomem_strerror(rc), exomem_last_error());
    return 1;
}

static int print_pair(const void *k, size_t kl, const void *v, size_t vl, void *arg)
{
    (void)arg;
    printf("%.*s\t%.*s\n", (int)kl, (const char *)k, (int)vl, (const char *)v);
    return 0;
}

static int create(const char *path, int argc, char **argv)
{
    uint64_t base = DEFAULT_BASE;
    unsigned long long mib = DEFAULT_SIZE_MIB;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--base") && i + 1 < argc)
            base = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--size") && i + 1 < argc)
            mib = strtoull(argv[++i], NULL, 0);
        else
            return usage();
    }
    int rc = pstore_create(path, base, (size_t)mib << 20);
    if (rc)
        return fail("create", rc);
    printf("created %s: %llu MiB at %#" PRIx64 "\n", path, mib, base);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return usage();
    const char *path = argv[1];
    if (!strcmp(argv[2], "create"))
        return create(path, argc - 3, argv + 3);
    struct pstore *p;
    int rc = pstore_open(path, NULL, &p);
    if (rc)
        return fail("open", rc);
    struct pstore_stats st;
    pstore_get_stats(p, &st);
    if (st.recovered)
        fprintf(stderr, "pstore: %s an interrupted commit\n",
                st.recovered > 0 ? "replayed" : "discarded");
    int status = 0;
    for (int i = 2; i < argc && status == 0; i++) {
        const char *op = argv[i];
        const void *val;
        size_t vlen;
        if (!strcmp(op, "put") && i + 2 < argc) {
            rc = pstore_put(p, argv[i + 1], strlen(argv[i + 1]), argv[i + 2], strlen(argv[i + 2]));
            i += 2;
            if (rc)
                status = fail("put", rc);
        } else if ((!strcmp(op, "get") || !strcmp(op, "del")) && i + 1 < argc) {
            const char *key = argv[++i];
            rc = op[0] == 'g' ? pstore_get(p, key, strlen(key), &val, &vlen)
                              : pstore_del(p, key, strlen(key));
            if (rc == -EXO_ENOENT) {
                fprintf(stderr, "pstore: no key '%s'\n", key);
                status = 3;
            } else if (rc) {
                status = fail(op, rc);
            } else if (op[0] == 'g') {
                printf("%.*s\n", (int)vlen, (const char *)val);
            }
        } else if (!strcmp(op, "list")) {
            pstore_each(p, print_pair, NULL);
        } else if (!strcmp(op, "count")) {
            printf("%zu\n", pstore_count(p));
        } else if (!strcmp(op, "commit")) {
            if ((rc = pstore_commit(p)) != 0)
                status = fail("commit", rc);
            pstore_get_stats(p, &st);
            fprintf(stderr, "pstore: committed %" PRIu64 " dirty pages\n", st.last_commit_pages);
        } else if (!strcmp(op, "info")) {
            printf("base %p size %zu keys %zu engine %s checksum %016" PRIx64 "\n",
                   pstore_base(p), pstore_size(p), pstore_count(p),
                   exo_vm_engine_name(pstore_engine(p)), pstore_checksum(p));
        } else if (!strcmp(op, "check")) {
            if ((rc = pstore_check(p)) != 0)
                status = fail("check", rc);
            else
                printf("consistent\n");
        } else {
            status = usage();
        }
    }
    pstore_close(p);
    return status;
}
