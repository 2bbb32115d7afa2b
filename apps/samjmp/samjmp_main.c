/* samjmp: one command per pipeline stage; each run is a separate process that finds the
 * records where the previous stage left them (see samjmp.h and docs/spacejmp-apps.md). */
#include "samjmp.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Far from where the kernel, libraries and sanitizers put their mappings; 1 GiB-aligned. */
#define DEFAULT_BASE UINT64_C(0x480000000000)
#define MIN_CHUNK (UINT64_C(16) << 20)
#define MAX_CHUNK (UINT64_C(1) << 30)

/* A new VAS store's chunk size for input `path`: every chunk is populated in full when a
 * stage switches in, so the half-used last one costs; about a sixteenth of the records'
 * size (SAM text is about their size, BAM about a quarter), a power of two in
 * [16 MiB, 1 GiB], keeps that small and leaves room within VAS_SEGS_MAX chunks. */
static uint64_t chunk_for(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return MIN_CHUNK;
    size_t n = strlen(path);
    uint64_t est = (uint64_t)st.st_size * (n > 4 && strcmp(path + n - 4, ".sam") == 0 ? 1 : 4);
    uint64_t c = MIN_CHUNK;
    while (c < est / 16 && c < MAX_CHUNK)
        c *= 2;
    return c;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: samjmp [--mmap DIR] [--base ADDR] [--chunk-mib N] COMMAND ...\n"
            "  (--chunk-mib: a new store's chunk size; default from the input's size)\n"
            "  load FILE STORE      parse SAM/BAM FILE into STORE (made if missing)\n"
            "  sort [-n] STORE      coordinate sort (samtools sort's order; -n: by name)\n"
            "  index STORE          per-reference spans, counts and linear index\n"
            "  flagstat STORE       as samtools flagstat\n"
            "  idxstats STORE       as samtools idxstats (after index)\n"
            "  pileup STORE         depth at every position, as samtools depth -a (after sort)\n"
            "  view [-h] [--input-order] STORE   records as SAM on stdout (-h: header too)\n"
            "  info STORE           chunks, bytes used, records, stages done\n"
            "  drop STORE           delete the store\n"
            "STORE is a VAS of segments at ADDR (default 0x%llx, one per 1 GiB) holding raw\n"
            "pointers, or with --mmap a file DIR/STORE.sjm mapped anywhere, holding offsets.\n"
            "Exit status: 0 done, 1 failed, 2 usage.\n",
            (unsigned long long)DEFAULT_BASE);
}

static int fail(const char *cmd, int rc)
{
    fprintf(stderr, "samjmp %s: %s\n", cmd, *exomem_last_error() ? exomem_last_error()
                                                                 : exomem_strerror(rc));
    return 1;
}

int main(int argc, char **argv)
{
    struct sj_where w = { .mmap_dir = NULL, .base = DEFAULT_BASE, .chunk_size = 0 };
    static const struct option opts[] = {
        { "mmap", required_argument, NULL, 'm' }, { "base", required_argument, NULL, 'b' },
        { "chunk-mib", required_argument, NULL, 'c' }, { "help", no_argument, NULL, 'H' },
        { NULL, 0, NULL, 0 }
    };
    int c;
    /* '+': options after the command belong to it (view -h). */
    while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'm':
            w.mmap_dir = optarg;
            break;
        case 'b':
            w.base = strtoull(optarg, &end, 0);
            if (*end || !w.base)
                return usage(stderr), 2;
            break;
        case 'c': {
            unsigned long v = strtoul(optarg, &end, 10);
            if (*end || v == 0 || v > 1024)
                return usage(stderr), 2;
            w.chunk_size = (uint64_t)v << 20;
            break;
        }
        case 'H':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind >= argc)
        return usage(stderr), 2;
    const char *cmd = argv[optind++];
    int header = 0, input_order = 0, by_name = 0;
    if (strcmp(cmd, "sort") == 0 && optind < argc && strcmp(argv[optind], "-n") == 0) {
        by_name = 1;
        optind++;
    }
    if (strcmp(cmd, "view") == 0) {
        for (; optind < argc && argv[optind][0] == '-'; optind++) {
            if (strcmp(argv[optind], "-h") == 0)
                header = 1;
            else if (strcmp(argv[optind], "--input-order") == 0)
                input_order = 1;
            else
                return usage(stderr), 2;
        }
    }
    int nargs = strcmp(cmd, "load") == 0 ? 2 : 1;
    if (argc - optind != nargs)
        return usage(stderr), 2;
    const char *store = argv[argc - 1];

    if (strcmp(cmd, "drop") == 0) {
        int rc = sj_drop(store, &w);
        return rc ? fail(cmd, rc) : 0;
    }
    static const char *const known[] = { "load", "sort", "index", "flagstat", "idxstats",
                                         "pileup", "view", "info" };
    int ok = 0;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        ok |= strcmp(cmd, known[i]) == 0;
    if (!ok)
        return usage(stderr), 2;

    struct sj_store s;
    if (w.chunk_size == 0)
        w.chunk_size = strcmp(cmd, "load") == 0 ? chunk_for(argv[optind]) : MIN_CHUNK;
    enum sj_mode mode = strcmp(cmd, "load") == 0 ? SJ_CREATE
                        : strcmp(cmd, "sort") == 0 || strcmp(cmd, "index") == 0 ? SJ_WRITE
                                                                                  : SJ_READ;
    int rc = sj_open(&s, store, &w, mode);
    if (rc)
        return fail(cmd, rc);
    if (mode == SJ_READ)
        sj_stall_point("read"); /* tests: a reader holding the store */
    if (strcmp(cmd, "load") == 0)
        rc = sj_load(&s, argv[optind]);
    else if (strcmp(cmd, "sort") == 0)
        rc = sj_sort(&s, by_name);
    else if (strcmp(cmd, "index") == 0)
        rc = sj_index(&s);
    else if (strcmp(cmd, "flagstat") == 0)
        rc = sj_flagstat(&s, stdout);
    else if (strcmp(cmd, "idxstats") == 0)
        rc = sj_idxstats(&s, stdout);
    else if (strcmp(cmd, "pileup") == 0)
        rc = sj_pileup(&s, stdout);
    else if (strcmp(cmd, "info") == 0)
        rc = sj_info(&s, stdout);
    else
        rc = sj_view(&s, "-", header, input_order);
    if (fflush(stdout) != 0 && rc == 0)
        rc = exomem_set_error(EXO_EIO, "writing the output failed");
    if (rc)
        fail(cmd, rc);
    sj_close(&s);
    return rc ? 1 : 0;
}
