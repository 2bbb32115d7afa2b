/* The fuzz targets' registry (fuzz_registry.h). */
#include "fuzz_registry.h"
#include "seg/registry.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

segid_t fuzz_seg;
vasid_t fuzz_vas;
static char root[256];

static void remove_root(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (root[0] && system(cmd) != 0)
        fprintf(stderr, "fuzz: could not remove %s\n", root);
}

void fuzz_registry_init(void)
{
    if (root[0])
        return;
    /* Under EXOMEM_FUZZ_DIR when set (tests/test_fuzz.sh's work directory), else /dev/shm. */
    const char *dir = getenv("EXOMEM_FUZZ_DIR");
    snprintf(root, sizeof root, "%s/exomem-fuzz-%d-XXXXXX", dir && *dir ? dir : "/dev/shm",
             (int)getpid());
    if (!mkdtemp(root)) {
        perror("fuzz: mkdtemp");
        exit(1);
    }
    setenv("EXOMEM_ROOT", root, 1);
    setenv("EXOMEM_LOCK_TIMEOUT", "100", 1);
    atexit(remove_root);
    if (seg_alloc("f", UINT64_C(0x3c0000000000), 1 << 20, 0600, &fuzz_seg) != 0 ||
        vas_create("fv", 0600, &fuzz_vas) != 0 || seg_attach(fuzz_vas, fuzz_seg, SEG_RDWR) != 0) {
        fprintf(stderr, "fuzz: cannot make the registry: %s\n", exomem_last_error());
        exit(1);
    }
}

const char *fuzz_path(const char *rel)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    return path;
}

void fuzz_write(const char *rel, const uint8_t *data, size_t size)
{
    int fd = open(fuzz_path(rel), O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size)) {
        perror("fuzz: write");
        exit(1);
    }
    close(fd);
}

size_t fuzz_read(const char *rel, uint8_t *buf, size_t cap)
{
    int fd = open(fuzz_path(rel), O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, cap) : -1;
    if (fd >= 0)
        close(fd);
    return n > 0 ? (size_t)n : 0;
}

void fuzz_seed(const char *rel, uint8_t mode)
{
    static int done;
    const char *dir = getenv("EXOMEM_FUZZ_SEEDS");
    if (done++ || !dir)
        return;
    static uint8_t buf[65537];
    buf[0] = mode;
    size_t n = fuzz_read(rel, buf + 1, sizeof buf - 1);
    char out[512];
    snprintf(out, sizeof out, "%s/seed-%c", dir, mode ? 's' : 'r');
    FILE *f = fopen(out, "we");
    if (f) {
        fwrite(buf, 1, n + 1, f);
        fclose(f);
    }
}

void fuzz_seal(uint8_t *rec, size_t size)
{
    if (size >= 8)   /* the library's own sealing: checksum in the last 8 bytes */
        exo_record_seal(rec, size);
}
