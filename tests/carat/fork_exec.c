/* A multi-threaded program forks and the child execs (as Tcl's `open |cmd` does in SQLite's
 * multi-client tests): the runtime's fork handler runs in the child, which must reach its
 * exec. The handler once walked the thread records, memory a child does not inherit, and
 * every such child died of SIGSEGV before its exec. Also forked while the other thread
 * reallocs (its realloc window open), many times. */
#include "carat_check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

static atomic_int stop;

static void *reallocer(void *arg)
{
    (void)arg;
    void *p = malloc(100);
    CHECK(p);
    while (!atomic_load(&stop)) {
        void *wall = malloc(16);
        void *q = realloc(p, 5000);
        CHECK(q && wall);
        p = realloc(q, 100);
        CHECK(p);
        free(wall);
    }
    free(p);
    return NULL;
}

int main(void)
{
    pthread_t th;
    CHECK(pthread_create(&th, NULL, reallocer, NULL) == 0);
    for (int i = 0; i < 50; i++) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            execl("/bin/true", "true", (char *)NULL);
            _exit(127);
        }
        int status;
        CHECK(waitpid(pid, &status, 0) == pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fprintf(stderr, "fork_exec: child %d: %s %d\n", i,
                    WIFSIGNALED(status) ? "signal" : "exit status",
                    WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    atomic_store(&stop, 1);
    CHECK(pthread_join(th, NULL) == 0);
    puts("fork_exec: ok");
    return 0;
}
