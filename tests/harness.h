/* A small test harness: each test is one program; a failed check prints where and why and
 * exits 1; exit 77 means skipped (CTest SKIP_RETURN_CODE). */
#ifndef EXOMEM_TEST_HARNESS_H
#define EXOMEM_TEST_HARNESS_H

#include <exomem/exomem.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#define TEST_SKIP_CODE 77

#define CHECK(cond) do { if (!(cond)) { \
    fprintf(stderr, "%s:%d: CHECK failed: %s (errno %d, last error: %s)\n", __FILE__, __LINE__, \
            #cond, errno, exomem_last_error()); exit(1); } } while (0)

#define CHECK_EQ(a, b) do { long long _a = (long long)(a), _b = (long long)(b); if (_a != _b) { \
    fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %lld, expected %s == %lld\n", __FILE__, \
            __LINE__, #a, _a, #b, _b); exit(1); } } while (0)

/* expr must return 0. */
#define CHECK_OK(expr) do { int _rc = (expr); if (_rc != 0) { \
    fprintf(stderr, "%s:%d: %s returned %d (%s): %s\n", __FILE__, __LINE__, #expr, _rc, \
            exomem_strerror(_rc), exomem_last_error()); exit(1); } } while (0)

/* expr must fail with exomem code `code` (positive), and errno must agree. */
#define CHECK_ERR(expr, code) do { errno = 0; int _rc = (expr); if (_rc != -(code)) { \
    fprintf(stderr, "%s:%d: %s returned %d (%s), expected %d (%s); last error: %s\n", \
            __FILE__, __LINE__, #expr, _rc, exomem_strerror(_rc), -(code), \
            exomem_strerror(code), exomem_last_error()); exit(1); } \
    if (errno != exomem_errno(code)) { fprintf(stderr, "%s:%d: %s set errno %d, expected %d\n", \
            __FILE__, __LINE__, #expr, errno, exomem_errno(code)); exit(1); } } while (0)

#define SKIP(...) do { fprintf(stderr, "SKIP: "); fprintf(stderr, __VA_ARGS__); \
    fprintf(stderr, "\n"); exit(TEST_SKIP_CODE); } while (0)

/* Make a private registry (EXOMEM_ROOT) under /dev/shm, world-accessible so that tests can
 * drop privileges, removed at exit by the process that made it. Call before any exomem
 * call. Returns its path. */
const char *test_root_setup(void);

/* A 1 GiB-aligned base address for test segment i, in a range that neither the kernel's
 * mmap placement nor the sanitizers' shadow memory uses. */
uint64_t test_base(int i);

/* Run fn(arg) in a child process; returns the child's exit status (0 when fn returned),
 * or 128+signal if it died by a signal. */
int test_in_child(void (*fn)(void *), void *arg);

/* Run this test program again as a fresh process (execv of /proc/self/exe, so nothing is
 * inherited but the environment) with `role` as its argument and, when env_name is not NULL,
 * env_name=env_value added to its environment; exits 1 unless it exits 0. */
void test_run_self(const char *role, const char *env_name, const char *env_value);

/* Does touching addr fault (SIGSEGV or SIGBUS)? Probes with a read (or a write when
 * `write`), recovering through a temporary signal handler. */
int test_faults(const void *addr, int write);

#endif
