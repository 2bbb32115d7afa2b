/* Implementation of tests/harness.h; linked into every C test. */
#include "harness.h"
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char root_path[256];
static pid_t root_owner;

static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char sub[4096];
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            struct stat st;
            if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
                remove_tree(sub);
            else
                unlink(sub);
        }
        closedir(d);
    }
    rmdir(path);
}

static void root_cleanup(void)
{
    if (getpid() == root_owner && root_path[0])
        remove_tree(root_path);
}

const char *test_root_setup(void)
{
    /* The pid in the name lets the suite's cleanup tell a crashed test's leftover from a
     * registry still in use (tests/cleanup_roots.sh). */
    snprintf(root_path, sizeof root_path, "/dev/shm/exomem-test-%d-XXXXXX", (int)getpid());
    if (!mkdtemp(root_path)) {
        perror("mkdtemp");
        exit(1);
    }
    chmod(root_path, 01777);
    root_owner = getpid();
    atexit(root_cleanup);
    setenv("EXOMEM_ROOT", root_path, 1);
    /* The library reads its environment once: a test that used it before this call would
     * work in the default registry, shared with real users. Refuse that loudly. */
    if (strcmp(exo_config()->root, root_path) != 0) {
        fprintf(stderr, "test_root_setup: the library read EXOMEM_ROOT (%s) before the test "
                "set it; call test_root_setup() first\n", exo_config()->root);
        exit(1);
    }
    return root_path;
}

uint64_t test_base(int i)
{
    return UINT64_C(0x300000000000) + (uint64_t)i * (UINT64_C(1) << 34);
}

int test_in_child(void (*fn)(void *), void *arg)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(1);
    }
    if (pid == 0) {
        fn(arg);
        fflush(NULL);
        _exit(0);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        ;
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

void test_run_self(const char *role, const char *env_name, const char *env_value)
{
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (env_name)
            setenv(env_name, env_value, 1);
        char *args[] = {program_invocation_short_name, (char *)role, NULL};
        execv("/proc/self/exe", args);
        perror("execv");
        _exit(127);
    }
    int status;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "%s process failed (status %#x)\n", role, status);
        exit(1);
    }
}

static sigjmp_buf probe_jmp;

static void probe_handler(int sig)
{
    siglongjmp(probe_jmp, sig);
}

int test_faults(const void *addr, int write)
{
    struct sigaction sa, old_segv, old_bus;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = probe_handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
    int faulted = 0;
    if (sigsetjmp(probe_jmp, 1) == 0) {
        volatile char *p = (volatile char *)addr;
        if (write) {
            char c = *p;
            *p = c;
        } else {
            (void)*p;
        }
    } else {
        faulted = 1;
    }
    sigaction(SIGSEGV, &old_segv, NULL);
    sigaction(SIGBUS, &old_bus, NULL);
    return faulted;
}
