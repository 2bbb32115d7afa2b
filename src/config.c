/* Environment knobs, read once per process; the only getenv() calls in the library.
 *   EXOMEM_ROOT          registry directory (default /dev/shm/exomem-<euid>, per user)
 *   EXOMEM_SWITCH        park | remap | keep: the default switch engine
 *   EXOMEM_PARK_LIMIT    bytes of parked segments before LRU eviction (default 64G)
 *   EXOMEM_HUGETLBFS_2M  hugetlbfs mount for 2M-page segments (default: found in mounts)
 *   EXOMEM_HUGETLBFS_1G  hugetlbfs mount for 1G-page segments (default: found in mounts)
 *   EXOMEM_TMPFS_HUGE    tmpfs (huge=advise/within_size/always) for SEG_THP segments
 *   EXOMEM_LOCK_TIMEOUT  milliseconds to wait for the registry lock (default 10000)
 *   EXOMEM_VM_DISABLE_UFFD  1: act as if the kernel had no userfaultfd (tests the fallbacks)
 *   EXOMEM_FAULT         kind:N:errno, testing only: the Nth system call of that kind in
 *                        this process fails with that errno (src/os/os.h, os_fault.c)
 */
#include "internal.h"
#include "os/os.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct exo_config config;
static pthread_once_t config_once = PTHREAD_ONCE_INIT;

int exo_parse_size(const char *s, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return -EXO_EINVAL;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno)
        return -EXO_EINVAL;
    unsigned shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    case 'T': shift = 40; end++; break;
    default: break;
    }
    if (shift && (*end == 'i' || *end == 'I'))
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end != '\0')
        return -EXO_EINVAL;
    if (shift && v > (UINT64_MAX >> shift))
        return -EXO_EINVAL;
    *out = (uint64_t)v << shift;
    return 0;
}

static void copy_env(char *dst, size_t len, const char *name, const char *fallback)
{
    const char *v = getenv(name);
    snprintf(dst, len, "%s", (v && *v) ? v : fallback);
}

/* EXOMEM_FAULT=kind:N:errno (errno by number or as ENOSPC, EIO, ENOMEM, EINTR, EACCES).
 * A malformed value is ignored with a line on stderr: it is a testing knob, and a test
 * that sets it wrong must see why nothing failed. */
static void arm_fault(const char *spec)
{
    static const struct { const char *name; int err; } errnos[] = {
        {"ENOSPC", ENOSPC}, {"EIO", EIO}, {"ENOMEM", ENOMEM}, {"EINTR", EINTR},
        {"EACCES", EACCES}, {"EPERM", EPERM}, {"EBUSY", EBUSY},
    };
    if (!spec || !*spec)
        return;
    char kind_name[32], err[32];
    unsigned long nth;
    int kind = -1;
    if (sscanf(spec, "%31[a-z]:%lu:%31[A-Z0-9]", kind_name, &nth, err) != 3 ||
        (kind = exo_os_fault_kind_parse(kind_name)) < 0) {
        fprintf(stderr, "exomem: EXOMEM_FAULT=%s is not kind:N:errno; ignored\n", spec);
        return;
    }
    int e = atoi(err);
    for (size_t i = 0; i < sizeof errnos / sizeof errnos[0]; i++)
        if (!strcmp(errnos[i].name, err))
            e = errnos[i].err;
    if (e <= 0) {
        fprintf(stderr, "exomem: EXOMEM_FAULT=%s: unknown errno %s; ignored\n", spec, err);
        return;
    }
    exo_os_fault_arm(kind, nth, e);
}

static void config_load(void)
{
    /* Without EXOMEM_ROOT each user has a registry of their own (docs/spacejmp.md): sharing
     * one between users is a choice made by naming a directory, never the default. */
    char own[64];
    snprintf(own, sizeof own, "/dev/shm/exomem-%u", (unsigned)exo_os_euid());
    const char *env_root = getenv("EXOMEM_ROOT");
    config.root_is_default = !env_root || !*env_root;
    copy_env(config.root, sizeof config.root, "EXOMEM_ROOT", own);
    size_t n = strlen(config.root);
    while (n > 1 && config.root[n - 1] == '/')
        config.root[--n] = '\0';

    const char *sw = getenv("EXOMEM_SWITCH");
    config.engine = VAS_ENGINE_PARK;
    if (sw && !strcmp(sw, "remap"))
        config.engine = VAS_ENGINE_REMAP;
    else if (sw && !strcmp(sw, "keep"))
        config.engine = VAS_ENGINE_KEEP;

    config.park_limit = UINT64_C(64) << 30;
    const char *lim = getenv("EXOMEM_PARK_LIMIT");
    uint64_t v;
    if (lim && exo_parse_size(lim, &v) == 0)
        config.park_limit = v;

    copy_env(config.hugetlbfs_2m, sizeof config.hugetlbfs_2m, "EXOMEM_HUGETLBFS_2M", "");
    copy_env(config.hugetlbfs_1g, sizeof config.hugetlbfs_1g, "EXOMEM_HUGETLBFS_1G", "");
    copy_env(config.tmpfs_huge, sizeof config.tmpfs_huge, "EXOMEM_TMPFS_HUGE", "");
    copy_env(config.paged_dir, sizeof config.paged_dir, "EXOMEM_PAGED_DIR", "/var/tmp");

    config.lock_timeout_ms = 10000;
    const char *wait = getenv("EXOMEM_LOCK_TIMEOUT");
    uint64_t ms;
    if (wait && exo_parse_size(wait, &ms) == 0 && ms <= 3600000)
        config.lock_timeout_ms = (long)ms;

    const char *off = getenv("EXOMEM_VM_DISABLE_UFFD");
    config.vm_disable_uffd = off && *off && strcmp(off, "0") != 0;

    /* CARAT: move the worst-case allocation this many times a second (docs/carat.md). */
    const char *moves = getenv("EXOMEM_CARAT_MOVES");
    char *end;
    config.carat_moves = moves ? strtod(moves, &end) : 0;
    if (!moves || end == moves || *end)
        config.carat_moves = 0;

    /* CARAT: keep this many old copies of moved blocks, filled, to catch pointers a move
     * missed (docs/carat.md); at most 4096. */
    const char *quarantine = getenv("EXOMEM_CARAT_QUARANTINE");
    uint64_t kept;
    if (quarantine && exo_parse_size(quarantine, &kept) == 0 && kept <= 4096)
        config.carat_quarantine = (uint32_t)kept;

    /* CARAT: append each process's counters to this file at exit (docs/carat.md). */
    config.carat_report = getenv("EXOMEM_CARAT_REPORT");

    arm_fault(getenv("EXOMEM_FAULT"));
}

const struct exo_config *exo_config(void)
{
    pthread_once(&config_once, config_load);
    return &config;
}

EXO_API const char *exomem_root(void)
{
    return exo_config()->root;
}
