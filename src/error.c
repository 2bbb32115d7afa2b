/* Error codes: their messages, their errno values, and the per-thread detail message. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_detail[512];

struct code_entry {
    int code;
    int err;
    const char *text;
};

static const struct code_entry codes[] = {
    {EXO_OK, 0, "success"},
    {EXO_EPERM, EPERM, "operation allowed only to the owner or root"},
    {EXO_ENOENT, ENOENT, "no segment or address space of that name or id"},
    {EXO_EINTR, EINTR, "interrupted by a signal"},
    {EXO_EIO, EIO, "input/output error (the registry, or a pager store)"},
    {EXO_ENOMEM, ENOMEM, "out of memory or address space"},
    {EXO_EACCES, EACCES, "permission denied by the object's mode"},
    {EXO_EBUSY, EBUSY, "a segment lock is held by another process"},
    {EXO_EEXIST, EEXIST, "an object of that name exists already"},
    {EXO_EINVAL, EINVAL, "invalid argument"},
    {EXO_ENOSPC, ENOSPC, "no space left for the segment's memory"},
    {EXO_ENAMETOOLONG, ENAMETOOLONG, "name longer than 63 characters"},
    {EXO_ENOTSUP, ENOTSUP, "the kernel lacks a mechanism this needs"},
    {EXO_EAGAIN, EAGAIN, "the object changed during the call; try again"},
    {EXO_EBADNAME, EINVAL, "name must be 1-63 characters of [A-Za-z0-9._-], not starting with '.'"},
    {EXO_EALIGN, EINVAL, "base or size is not a multiple of the page size"},
    {EXO_ESIZE, EINVAL, "size is zero or the range leaves the user address space"},
    {EXO_EOVERLAP, EEXIST, "range overlaps an existing mapping or segment"},
    {EXO_ECORRUPT, EBADMSG, "registry file or heap is truncated or corrupt"},
    {EXO_EVERSION, EPROTO, "registry file has an unknown format version"},
    {EXO_EDETACHED, EBADF, "address space handle is not attached"},
    {EXO_EPAGESIZE, EINVAL, "page size must be 4K, 2M or 1G"},
    {EXO_ENOHUGE, ENOMEM, "no hugetlbfs mount or huge pages for that page size"},
    {EXO_EINUSE, EBUSY, "object is in use (segment listed in a VAS, or VAS current)"},
    {EXO_ENOTMAPPED, EFAULT, "segment is not visible in the current address space"},
    {EXO_ETOOMANY, E2BIG, "too many segments in the VAS or address spaces attached"},
    {EXO_ENOHEAP, EFAULT, "the current address space has no heap segment"},
};

static const struct code_entry *lookup(int code)
{
    if (code < 0)
        code = -code;
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (codes[i].code == code)
            return &codes[i];
    return NULL;
}

EXO_API const char *exomem_strerror(int code)
{
    const struct code_entry *e = lookup(code);
    if (e)
        return e->text;
    if (code < 0)
        code = -code;
    return code < EXO_EBASE ? strerror(code) : "unknown exomem error";
}

EXO_API int exomem_errno(int code)
{
    const struct code_entry *e = lookup(code);
    if (e)
        return e->err;
    if (code < 0)
        code = -code;
    return code < EXO_EBASE ? code : EINVAL;
}

EXO_API const char *exomem_last_error(void)
{
    return last_detail;
}

void exo_clear_error(void)
{
    last_detail[0] = '\0';
}

static int record_failure(int code, const char *fmt, va_list ap)
{
    if (code < 0)
        code = -code;
    if (fmt)
        vsnprintf(last_detail, sizeof last_detail, fmt, ap);
    else
        snprintf(last_detail, sizeof last_detail, "%s", exomem_strerror(code));
    errno = exomem_errno(code);
    return -code;
}

int exo_fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = record_failure(code, fmt, ap);
    va_end(ap);
    return rc;
}

EXO_API int exomem_set_error(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = record_failure(code, fmt, ap);
    va_end(ap);
    return rc;
}
