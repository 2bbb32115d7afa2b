/* Moves of a block while another thread's C library works on it: fread copies a file into
 * it, memset clears it, memcmp checks it. Those functions keep their state in registers,
 * and may keep the distance between their two ends there, which no move can patch: a move
 * that stopped the thread inside one and patched only the pointer made the copy go on from
 * the wrong place (bzip2 -d under 100 moves a second: "data integrity error"). Such a move
 * is refused now, and every read must find the file's bytes. Before, about one move in 70
 * here spoiled a read. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <exomem/error.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#define LEN 5000    /* a buffer of bzip2's size: fread copies it with vector loops */
#define MOVES 3000

unsigned char *block;   /* global, not static: read again after every move */
static unsigned char bytes[LEN];
static atomic_int stop;
static atomic_long reads, wrong;

static void *reader(void *arg)
{
    FILE *f = arg;
    while (!atomic_load(&stop)) {
        rewind(f);
        memset(block, 0, LEN);
        if (fread(block, 1, LEN, f) != LEN || memcmp(block, bytes, LEN) != 0)
            atomic_fetch_add(&wrong, 1);
        atomic_fetch_add(&reads, 1);
    }
    return NULL;
}

int main(void)
{
    FILE *f = tmpfile();
    CHECK(f);
    srand(1);
    for (int i = 0; i < LEN; i++)
        bytes[i] = (unsigned char)rand();
    CHECK(fwrite(bytes, 1, LEN, f) == LEN && fflush(f) == 0);
    block = malloc(LEN);
    CHECK(block);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, reader, f) == 0);
    int moved = 0, refused = 0, busy = 0;
    for (int i = 0; i < MOVES; i++) {
        int rc = exo_carat_move(block, NULL, NULL);
        CHECK(rc == 0 || rc == -EXO_EAGAIN);
        moved += rc == 0;
        refused += rc != 0;
        /* the refusal says why */
        busy += rc != 0 && strstr(exomem_last_error(), "in the C library") != NULL;
    }
    atomic_store(&stop, 1);
    CHECK(pthread_join(th, NULL) == 0);
    printf("move_libc_copy: %d moved, %d refused, %ld reads, %ld wrong\n", moved, refused,
           atomic_load(&reads), atomic_load(&wrong));
    CHECK(atomic_load(&wrong) == 0);
    CHECK(moved >= MOVES / 10 && atomic_load(&reads) > 0 && busy > 0);
    /* Counted by cause: these are the refusals whose message named the C library. */
    struct exo_carat_stats st;
    exo_carat_get_stats(&st);
    CHECK(st.refused_by[EXO_CARAT_REFUSED_LIBC] == (uint64_t)busy);
    CHECK(st.moves_refused <= (uint64_t)refused && st.moves == (uint64_t)moved);
    free(block);
    fclose(f);
    return 0;
}
