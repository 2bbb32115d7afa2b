/* A thread stopped inside the C library holding the address of a block's last usable word:
 * the move is refused. That word is the next malloc chunk's first field, so the address is
 * also the next chunk's, the one glibc's malloc keeps in registers for the heap's top or a
 * free neighbour. Patched, it pointed the arena's top into the copy, and malloc then carved
 * new blocks out of memory the copy and another arena owned (SQLite's fuzzcheck at 10,000
 * moves a second aborted in glibc's checks). The two cannot be told apart, so a thread in
 * the library holding it refuses the move, like an address derived from the block: here a
 * read() blocked on an empty pipe into the block's last word. Once the read has returned
 * the move goes ahead, and the word it read is in the copy. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <exomem/error.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int fds[2];
static unsigned char *last_word;
static atomic_int reader_tid;

static void *read_into_last_word(void *arg)
{
    (void)arg;
    atomic_store(&reader_tid, (int)syscall(SYS_gettid));
    ssize_t n = read(fds[0], last_word, 8);
    return (void *)(intptr_t)n;
}

/* Is the thread blocked in read(2)? Its /proc syscall line starts with the call's number.
 * Read with open and read, not stdio: a FILE allocated after the block would lie right
 * past it, and its address, stale on this thread's stack, would refuse every move. */
static int in_read(int tid)
{
    char path[64], line[64] = "";
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, line, sizeof line - 1);
    close(fd);
    return n > 2 && strncmp(line, "0 ", 2) == 0;
}

int main(void)
{
    unsigned char *b = malloc(1000);
    CHECK(b);
    size_t usable = malloc_usable_size(b);
    for (size_t i = 0; i < usable; i++)
        b[i] = (unsigned char)(i * 7 + 1);
    last_word = b + usable - 8;
    CHECK(pipe(fds) == 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, read_into_last_word, NULL) == 0);
    while (!atomic_load(&reader_tid) || !in_read(atomic_load(&reader_tid)))
        usleep(1000);

    void *nb = NULL;
    CHECK(exo_carat_move(b, &nb, NULL) == -EXO_EAGAIN);
    CHECK(nb == NULL);
    CHECK(strstr(exomem_last_error(), "malloc's own") != NULL);
    for (size_t i = 0; i < usable; i++)
        CHECK(b[i] == (unsigned char)(i * 7 + 1));   /* refused: nothing changed */

    const char word[8] = "12345678";
    CHECK(write(fds[1], word, 8) == 8);
    void *n;
    CHECK(pthread_join(t, &n) == 0);
    CHECK((intptr_t)n == 8);
    CHECK(exo_carat_move(b, &nb, NULL) == 0);
    b = nb;
    CHECK(memcmp(b + usable - 8, word, 8) == 0);
    for (size_t i = 0; i + 8 < usable; i++)
        CHECK(b[i] == (unsigned char)(i * 7 + 1));
    free(b);
    close(fds[0]);
    close(fds[1]);
    printf("move_next_chunk: ok\n");
    return 0;
}
