/* What pstore.c and pstore_kv.c share: the file header (page 0 of the store) and the open
 * store. */
#ifndef EXOMEM_PSTORE_INT_H
#define EXOMEM_PSTORE_INT_H

#include "pstore.h"

#include <exomem/alloc.h>

#include <stdint.h>

#define PSTORE_MAGIC UINT64_C(0x3145524f54535045) /* "EPSTORE1" */
#define PSTORE_VERSION 1

/* Page 0 of the file and of the mapping; the heap follows from page 1. */
struct pstore_header {
    uint64_t magic;
    uint32_t version;
    uint32_t page_size;
    uint64_t base;
    uint64_t size;
    uint64_t hash;  /* of the fields above */
    void *root;     /* the application's root pointer */
    void *table;    /* the key-value table (struct kv_table) */
};

struct pstore {
    struct pstore_header *hdr; /* == base */
    char *base;
    size_t size, ps, npages;
    int fd, log_fd;
    char *path, *log_path;
    seg_heap *heap;
    exo_vm_region *region;
    uint64_t *pending; /* bitmap: dirty pages not yet committed */
    int crash_point;
    struct pstore_stats st;
};

/* Make the empty key-value table of a new store (pstore_kv.c). */
int pstore_kv_init(struct pstore *p);

/* Check the table's structure (pstore_kv.c). */
int pstore_kv_check(struct pstore *p);

#endif
