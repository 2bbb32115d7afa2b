/* Whole-buffer file I/O for the applications in apps/, which use exomem's public API only
 * and so do not reach into its src/os layer. */
#ifndef EXOMEM_APP_IO_H
#define EXOMEM_APP_IO_H

#include <stddef.h>
#include <sys/types.h>

/* Read or write exactly len bytes at offset off, retrying EINTR and short transfers.
 * 0, or -1 with errno set: the call's own errno, or EIO when the file ends before len bytes
 * (read) or the kernel accepts no byte (write). Blocks as pread/pwrite do. */
int app_pread_all(int fd, void *buf, size_t len, off_t off);
int app_pwrite_all(int fd, const void *buf, size_t len, off_t off);

#endif
