/* Loops that walk a heap array while it is moved under them, as bzip2's fallbackQSort3
 * does: a three-way quicksort partition whose inner loops walk v[unLo] up and v[unHi] down.
 * Built with guards, loop strength reduction turned v[unHi] into two registers: 4 * hi, and
 * a base v - 4 * (hi - unHi) that runs down from v, megabytes below the block after a long
 * run of equal keys. No move can tell such a base from any other number: after a move the
 * loop went on swapping elements of the old block. exomem-cc builds code that may be moved
 * without that pass (llvm/Plugin.cpp): the array must come out sorted, with every value it
 * had. test_carat.sh builds this with guards. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define N (1 << 16)
#define MOVES 300     /* moves done while the sorts run */

static int *volatile array;   /* the block moved; the sorter reads it again for each sort */
static atomic_int stop;
static atomic_long sorts;

#define SWAP(a, b) do { int t_ = (a); (a) = (b); (b) = t_; } while (0)

/* fallbackQSort3's partition and recursion (bzip2 1.0.8, blocksort.c), on the values. */
__attribute__((noinline)) static void qsort3(int *v, int lo, int hi)
{
    while (hi > lo) {
        int med = v[(lo + hi) >> 1];
        int unLo = lo, ltLo = lo, unHi = hi, gtHi = hi, n;
        while (1) {
            while (1) {
                if (unLo > unHi)
                    break;
                n = v[unLo] - med;
                if (n == 0) {
                    SWAP(v[unLo], v[ltLo]);
                    ltLo++;
                    unLo++;
                    continue;
                }
                if (n > 0)
                    break;
                unLo++;
            }
            while (1) {
                if (unLo > unHi)
                    break;
                n = v[unHi] - med;
                if (n == 0) {
                    SWAP(v[unHi], v[gtHi]);
                    gtHi--;
                    unHi--;
                    continue;
                }
                if (n < 0)
                    break;
                unHi--;
            }
            if (unLo > unHi)
                break;
            SWAP(v[unLo], v[unHi]);
            unLo++;
            unHi--;
        }
        /* the equal keys at both ends go to the middle */
        int k = ltLo - lo < unLo - ltLo ? ltLo - lo : unLo - ltLo;
        for (int i = 0; i < k; i++)
            SWAP(v[lo + i], v[unLo - k + i]);
        int m = hi - gtHi < gtHi - unHi ? hi - gtHi : gtHi - unHi;
        for (int i = 0; i < m; i++)
            SWAP(v[unLo + i], v[hi - m + 1 + i]);
        int below = lo + unLo - ltLo - 1, above = hi - (gtHi - unHi) + 1;
        qsort3(v, lo, below);
        lo = above;
    }
}

static void *sorter(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        /* The first partition (around v[N / 2] = 1) walks the upper half down in one run
         * of bigger keys, then swaps below it: the run that kept its base below the block. */
        int *v = array;
        for (int i = 0; i < N; i++)
            v[i] = i == 0 || i > N / 2 ? 2 : i == N / 2;
        qsort3(array, 0, N - 1);
        v = array;
        for (int i = 0; i < N; i++)
            CHECK(v[i] == (i < N / 2 - 1 ? 0 : i == N / 2 - 1 ? 1 : 2));
        atomic_fetch_add(&sorts, 1);
    }
    return NULL;
}

int main(void)
{
    array = malloc(N * sizeof(int));
    CHECK(array);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, sorter, NULL) == 0);
    long moves = 0;
    while (moves < MOVES) {
        int rc = exo_carat_move(array, NULL, NULL);
        CHECK(rc == 0 || rc == -EXO_EAGAIN);
        moves += rc == 0;
    }
    atomic_store(&stop, 1);
    CHECK(pthread_join(t, NULL) == 0);
    free(array);
    printf("move_loop_base: ok (%ld moves, %ld sorts)\n", moves, atomic_load(&sorts));
    return 0;
}
