/* Environment knobs, read once per process; the only getenv() calls in the library.
 *   EXOMEM_ROOT          registry directory (default /dev/shm/exomem)
 *   EXOMEM_SWITCH        park | remap: the default switch engine
 *   EXOMEM_PARK_LIMIT    bytes of parked segments before LRU eviction (default 64G)
 *   EXOMEM_HUGETLBFS_2M  hugetlbfs mount for 2M-page segments (default: found in mounts)
 *   EXOMEM_HUGETLBFS_1G  hugetlbfs mount for 1G-page segments (default: found in mounts)
 *   EXOMEM_TMPFS_HUGE    tmpfs (huge=advise/within_size/always) for SEG_THP segments
 */
#include "internal.h"

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

static void config_load(void)
{
    copy_env(config.root, sizeof config.root, "EXOMEM_ROOT", "/dev/shm/exomem");
    size_t n = strlen(config.root);
    while (n > 1 && config.root[n - 1] == '/')
        config.root[--n] = '\0';

    const char *sw = getenv("EXOMEM_SWITCH");
    config.engine = (sw && !strcmp(sw, "remap")) ? VAS_ENGINE_REMAP : VAS_ENGINE_PARK;

    config.park_limit = UINT64_C(64) << 30;
    const char *lim = getenv("EXOMEM_PARK_LIMIT");
    uint64_t v;
    if (lim && exo_parse_size(lim, &v) == 0)
        config.park_limit = v;

    copy_env(config.hugetlbfs_2m, sizeof config.hugetlbfs_2m, "EXOMEM_HUGETLBFS_2M", "");
    copy_env(config.hugetlbfs_1g, sizeof config.hugetlbfs_1g, "EXOMEM_HUGETLBFS_1G", "");
    copy_env(config.tmpfs_huge, sizeof config.tmpfs_huge, "EXOMEM_TMPFS_HUGE", "");
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
