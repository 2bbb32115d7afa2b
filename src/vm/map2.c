/* MAP2: one piece of shared memory (a memfd, or the caller's shm/segment file) mapped at two
 * addresses. Both views are MAP_SHARED mappings of the same file pages, so a write through
 * one is seen through the other at once; each view keeps its own protection. */
#include "vm/vm_internal.h"
#include "internal.h"
#include "os/os.h"
#include "os/os_vm.h"

#include <string.h>
#include <unistd.h>

static int check_access(int access, const char *which)
{
    if (access == EXO_VM_NOACCESS || access == EXO_VM_READONLY || access == EXO_VM_READWRITE)
        return 0;
    return exo_vm_fail(EXO_EINVAL, "MAP2: access %d of view %s is not an EXO_VM_* value", access,
                   which);
}

static int map_views(int fd, off_t off, size_t len, int access_a, int access_b,
                     exo_vm_map2 *out)
{
    int rc;
    if ((rc = check_access(access_a, "a")) || (rc = check_access(access_b, "b")))
        return rc;
    void *a, *b;
    if ((rc = exo_os_map_shared(fd, off, len, access_a, &a)) != 0)
        return exo_vm_fail(rc, "MAP2: cannot map view a (%zu bytes at offset %lld): %s", len,
                       (long long)off, exomem_strerror(rc));
    if ((rc = exo_os_map_shared(fd, off, len, access_b, &b)) != 0) {
        exo_os_unmap((uintptr_t)a, len);
        return exo_vm_fail(rc, "MAP2: cannot map view b (%zu bytes at offset %lld): %s", len,
                       (long long)off, exomem_strerror(rc));
    }
    out->a = a;
    out->b = b;
    out->len = len;
    out->fd = fd;
    out->owns_fd = 0;
    return 0;
}

static int check_len(size_t len, off_t off)
{
    if (len == 0)
        return exo_vm_fail(EXO_ESIZE, "MAP2: length is zero");
    if (len % exo_vm_page() || off < 0 || (size_t)off % exo_vm_page())
        return exo_vm_fail(EXO_EALIGN, "MAP2: length %#zx or offset %#llx is not page-aligned",
                       len, (long long)off);
    return 0;
}

EXO_API int exo_vm_map2_create(size_t len, int access_a, int access_b, exo_vm_map2 *out)
{
    if (!out)
        return exo_vm_fail(EXO_EINVAL, "exo_vm_map2_create: out is NULL");
    memset(out, 0, sizeof *out);
    out->fd = -1;
    int rc = check_len(len, 0);
    if (rc)
        return rc;
    int fd;
    if ((rc = exo_os_memfd("exomem-map2", len, &fd)) != 0)
        return exo_vm_fail(rc, "MAP2: cannot make a memfd of %zu bytes: %s", len,
                       exomem_strerror(rc));
    if ((rc = map_views(fd, 0, len, access_a, access_b, out)) != 0) {
        exo_os_close(fd);
        out->fd = -1;
        return rc;
    }
    out->owns_fd = 1;
    exo_clear_error();
    return 0;
}

EXO_API int exo_vm_map2_fd(int fd, off_t off, size_t len, int access_a, int access_b,
                           exo_vm_map2 *out)
{
    if (!out)
        return exo_vm_fail(EXO_EINVAL, "exo_vm_map2_fd: out is NULL");
    memset(out, 0, sizeof *out);
    out->fd = -1;
    if (fd < 0)
        return exo_vm_fail(EXO_EINVAL, "exo_vm_map2_fd: fd %d is not open", fd);
    int rc = check_len(len, off);
    if (rc == 0 && (rc = map_views(fd, off, len, access_a, access_b, out)) == 0)
        exo_clear_error();
    return rc;
}

EXO_API int exo_vm_map2_destroy(exo_vm_map2 *m)
{
    if (!m || !m->a)
        return exo_vm_fail(EXO_EINVAL, "exo_vm_map2_destroy: no MAP2 there");
    int rc = exo_os_unmap((uintptr_t)m->a, m->len);
    int rc2 = exo_os_unmap((uintptr_t)m->b, m->len);
    if (m->owns_fd && m->fd >= 0)
        exo_os_close(m->fd);
    m->a = m->b = NULL;
    m->fd = -1;
    m->owns_fd = 0;
    if (rc || rc2)
        return exo_vm_fail(rc ? rc : rc2, "MAP2: unmapping a view failed");
    exo_clear_error();
    return 0;
}
