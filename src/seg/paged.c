/* Paged segments (SEG_PAGED): where their store file goes and the settings record beside
 * the segment's (segs/<id>.paged: budget, policy, unit), which every process that switches
 * the segment in reads to make its pager region (src/vas/switch.c). */
#include "seg/paged.h"
#include "internal.h"
#include "os/os.h"

#include <exomem/pager.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define DEFAULT_BUDGET (UINT64_C(256) << 20)

static int paged_path(uint64_t sid, char *buf, size_t len)
{
    return exo_reg_path(buf, len, "segs/%llu.paged", (unsigned long long)sid);
}

int exo_paged_place(struct exo_seg_rec *rec, const struct seg_opts *opts,
                    struct exo_paged_rec *out)
{
    memset(out, 0, sizeof *out);
    memcpy(out->magic, EXO_PAGED_MAGIC, 8);
    out->version = EXO_PAGED_VERSION;
    out->unit = opts->paged_unit ? opts->paged_unit : EXO_PAGER_UNIT_4K;
    out->policy = opts->paged_policy ? opts->paged_policy : EXO_PAGER_CLOCK;
    out->budget = opts->paged_budget ? opts->paged_budget
                                     : (rec->size < DEFAULT_BUDGET ? rec->size : DEFAULT_BUDGET);
    if (out->unit != EXO_PAGER_UNIT_4K && out->unit != EXO_PAGER_UNIT_2M)
        return exo_fail(EXO_EINVAL, "segment '%s': paged unit %llu is neither 4 KiB nor 2 MiB",
                        rec->name, (unsigned long long)out->unit);
    if (rec->base % out->unit || rec->size % out->unit)
        return exo_fail(EXO_EALIGN, "segment '%s': base and size must be multiples of the "
                        "paged unit (%llu KiB)", rec->name, (unsigned long long)(out->unit >> 10));
    if (out->policy < EXO_PAGER_FIFO || out->policy >= EXO_PAGER_CUSTOM)
        return exo_fail(EXO_EINVAL, "segment '%s': paged policy %u is not FIFO, CLOCK, LRU or "
                        "MRU", rec->name, out->policy);
    if (out->budget < out->unit || out->budget % out->unit)
        return exo_fail(EXO_EINVAL, "segment '%s': paged budget %llu is not a non-zero multiple "
                        "of the unit", rec->name, (unsigned long long)out->budget);
    const char *dir = opts->paged_dir && *opts->paged_dir ? opts->paged_dir
                                                           : exo_config()->paged_dir;
    struct stat st;
    if (dir[0] != '/' || exo_os_stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return exo_fail(EXO_EINVAL, "segment '%s': paged directory '%s' is not an absolute "
                        "path to a directory", rec->name, dir);
    /* Named like the other data files exomem makes (record_sane() checks the shape). */
    uint64_t tag = exo_os_now_ns() ^ ((uint64_t)exo_os_pid() << 40) ^ (rec->id * 0x9E3779B97F4A7C15u);
    if (snprintf(rec->data_path, sizeof rec->data_path, "%s/exomem-%016llx-%llu", dir,
                 (unsigned long long)tag, (unsigned long long)rec->id) >=
        (int)sizeof rec->data_path)
        return exo_fail(EXO_ENAMETOOLONG, "segment '%s': paged directory path too long",
                        rec->name);
    return 0;
}

int exo_paged_save(uint64_t sid, struct exo_paged_rec *rec)
{
    char path[EXO_PATH_MAX];
    int rc = paged_path(sid, path, sizeof path);
    if (rc)
        return rc;
    exo_record_seal(rec, sizeof *rec);
    return exo_record_create(path, rec, sizeof *rec, 0644);
}

void exo_paged_remove(uint64_t sid)
{
    char path[EXO_PATH_MAX];
    if (paged_path(sid, path, sizeof path) == 0)
        exo_os_unlink(path);
}

int exo_paged_load(const struct exo_seg_rec *rec, struct exo_paged_rec *out)
{
    char path[EXO_PATH_MAX];
    int rc = paged_path(rec->id, path, sizeof path);
    if (!rc)
        rc = exo_record_read(path, out, sizeof *out, EXO_PAGED_MAGIC, EXO_PAGED_VERSION);
    if (rc)
        return exo_fail(rc == -EXO_ENOENT ? EXO_ECORRUPT : -rc,
                        "paged segment '%s': its settings (%s) cannot be read", rec->name, path);
    bool ok = (out->unit == EXO_PAGER_UNIT_4K || out->unit == EXO_PAGER_UNIT_2M) &&
              rec->base % out->unit == 0 && rec->size % out->unit == 0 &&
              out->budget >= out->unit && out->budget % out->unit == 0 &&
              out->policy >= EXO_PAGER_FIFO && out->policy < EXO_PAGER_CUSTOM;
    if (!ok)
        return exo_fail(EXO_ECORRUPT, "paged segment '%s': its settings (%s) make no sense",
                        rec->name, path);
    if (out->budget > rec->size)
        out->budget = rec->size;
    return 0;
}
