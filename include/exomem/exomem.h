/* exomem: application control of virtual memory on a stock Linux kernel.
 * One header per capability; this one includes them all. */
#ifndef EXOMEM_H
#define EXOMEM_H

#include <exomem/error.h>
#include <exomem/seg.h>
#include <exomem/vas.h>
#include <exomem/alloc.h>
#include <exomem/vm.h>
#include <exomem/pager.h>
#include <exomem/carat.h>

#define EXOMEM_VERSION "0.1.0"

#ifdef __cplusplus
extern "C" {
#endif

/* The registry directory this process uses (EXOMEM_ROOT, else the per-user default
 * /dev/shm/exomem-<uid>), read once per process. Never NULL; never fails or blocks. */
const char *exomem_root(void);

#ifdef __cplusplus
}
#endif
#endif
