/* exomem error codes.
 *
 * Every exomem call returns 0 on success or a negative error code, and also sets errno.
 * Where a standard errno value fits, the code equals it (EXO_EACCES == EACCES). Codes that
 * say more than any errno value are numbered from EXO_EBASE; for those, errno is set to the
 * closest standard value (exomem_errno() tells which), so perror() still says something true.
 */
#ifndef EXOMEM_ERROR_H
#define EXOMEM_ERROR_H

#include <errno.h>

#ifdef __cplusplus
extern "C" {
#endif

enum exomem_error {
    EXO_OK = 0,
    EXO_EPERM = EPERM,               /* operation needs the owner or root */
    EXO_ENOENT = ENOENT,             /* no segment or VAS of that name or id */
    EXO_EINTR = EINTR,               /* interrupted by a signal */
    EXO_EIO = EIO,                   /* the registry or a pager store could not be used */
    EXO_ENOMEM = ENOMEM,             /* out of memory or address space */
    EXO_EACCES = EACCES,             /* permission denied by the object's mode */
    EXO_EBUSY = EBUSY,               /* lock held by another process (try-switch, delete) */
    EXO_EEXIST = EEXIST,             /* an object of that name exists already */
    EXO_EINVAL = EINVAL,             /* an argument is invalid */
    EXO_ENOSPC = ENOSPC,             /* the registry's file system is full */
    EXO_ENAMETOOLONG = ENAMETOOLONG, /* name longer than EXOMEM_NAME_MAX */
    EXO_ENOTSUP = ENOTSUP,           /* the kernel or the build lacks a needed mechanism */
    EXO_EAGAIN = EAGAIN,             /* the object changed under the call: try again */

    EXO_EBASE = 1000,
    EXO_EBADNAME = EXO_EBASE,        /* name empty, starts with '.', or has a '/' or other char */
    EXO_EALIGN,                      /* base or size not a multiple of the page size */
    EXO_ESIZE,                       /* size 0, or base+size past the user address space */
    EXO_EOVERLAP,                    /* range overlaps a mapping of the caller, or a segment */
    EXO_ECORRUPT,                    /* a registry file or heap is truncated or corrupt */
    EXO_EVERSION,                    /* a registry file of an unknown format version */
    EXO_EDETACHED,                   /* handle is not (or no longer) attached */
    EXO_EPAGESIZE,                   /* page size not one of 4K, 2M, 1G */
    EXO_ENOHUGE,                     /* no hugetlbfs mount or huge page pool for that size */
    EXO_EINUSE,                      /* object in use: segment in a VAS, VAS current */
    EXO_ENOTMAPPED,                  /* segment not visible in the current address space */
    EXO_ETOOMANY,                    /* too many segments in a VAS or VASes attached */
    EXO_ENOHEAP,                     /* VAS has no heap segment (vas_malloc) */
    EXO_ELAST
};

/* Short English explanation of an exomem error code (either sign); never NULL. Never fails or
 * blocks; thread-safe (the text is constant). */
const char *exomem_strerror(int code);

/* The errno value that exomem sets for an error code (either sign). Never fails or blocks. */
int exomem_errno(int code);

/* A sentence about the last failure in this thread, naming the object and the cause
 * (e.g. "segment 's0': base 0x7f00... overlaps mapping 7f00...-7f01... [heap]");
 * empty string if the last call succeeded or set no detail. The in-segment heap's calls
 * (alloc.h) are the exception: like malloc, a successful one leaves the message as it was,
 * so that the allocation fast path writes nothing it does not need to. The message is per
 * thread: thread-safe, never blocks. */
const char *exomem_last_error(void);

/* Report a failure the way exomem's own calls do, for libraries and applications built on
 * exomem (apps/ uses it): sets errno to exomem_errno(code), stores the sentence (printf
 * format; NULL stores exomem_strerror(code)) for exomem_last_error() in this thread, and
 * returns -code, so `return exomem_set_error(EXO_EINVAL, "...", ...);` reads as exomem's
 * calls do (-EXO_EINVAL for EXO_EINVAL). code may have either sign. Never fails or blocks;
 * thread-safe (the message is per thread). */
int exomem_set_error(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif
