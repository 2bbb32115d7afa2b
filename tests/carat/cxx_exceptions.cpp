/* C++ exceptions through frames built with the plugin (exomem-c++, both escape modes):
 * - a frame whose stack object's address escapes is left by an exception, not a return:
 *   its object is released by the next return of a frame above it, as after a longjmp;
 * - the blocks an unwound frame owned through a unique_ptr are deleted by the landing pad
 *   (counted as frees), and the ones it held by a bare pointer stay live (listed in a
 *   global, freed at the end);
 * - after each throw, blocks pointed to from stack objects are moved, every one: the
 *   blocks that stay and the copies the earlier moves freed leave the heap the copies come
 *   from full of free blocks of that size at the wrong address modulo 256 (a move keeps
 *   it). With 64 tries for a fitting block (move.c's COPY_TRIES before 2026-11-27), every
 *   run had a move refused three times in a row. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <exomem/error.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>

namespace {

struct Frame {
    Frame *up;
    long *block;
    long depth;
};

Frame *volatile deepest;   /* a stack object's address, escaped */
constexpr int ROUNDS = 100, DEPTH = 20;
long *kept[ROUNDS * (DEPTH + 1)];
int nkept;

exo_carat_stats stats()
{
    exo_carat_stats s;
    exo_carat_get_stats(&s);
    return s;
}

/* Down to depth 0, which throws: each frame has a stack object whose address escapes, a
 * block it owns (deleted by the unwinding) and one that outlives it. */
[[gnu::noinline]] void descend(Frame *up, int depth)
{
    Frame here{up, nullptr, depth};
    deepest = &here;
    std::unique_ptr<long[]> owned(new long[4]());
    owned[0] = depth;
    here.block = owned.get();
    long *stays = static_cast<long *>(std::malloc(64));
    CHECK(stays != nullptr);
    stays[0] = depth;
    kept[nkept++] = stays;
    if (depth == 0)
        throw std::runtime_error("bottom");
    descend(&here, depth - 1);
}

/* A block pointed to from a stack object moved, at each depth: the object's slot leads to
 * the copy. The sum of the blocks' values. */
[[gnu::noinline]] long move_from_stack(int depth)
{
    Frame frames[3] = {};
    deepest = &frames[1];
    long *block = static_cast<long *>(std::malloc(64));
    CHECK(block != nullptr);
    block[0] = 7;
    frames[2].block = block;
    void *to = nullptr;
    int rc, tries = 0;
    while ((rc = exo_carat_move(block, &to, nullptr)) == -EXO_EAGAIN && ++tries < 3) {
    }
    if (rc)
        std::fprintf(stderr, "cxx_exceptions: move: %s\n", exomem_last_error());
    CHECK(rc == 0);
    CHECK(frames[2].block == to && block == to);
    long sum = frames[2].block[0] + (depth ? move_from_stack(depth - 1) : 0);
    std::free(frames[2].block);
    return sum;
}

}   // namespace

int main()
{
    for (int round = 0; round < ROUNDS; round++) {
        exo_carat_stats before = stats();
        bool caught = false;
        try {
            descend(nullptr, DEPTH);
        } catch (const std::runtime_error &) {
            caught = true;
        }
        CHECK(caught);
        exo_carat_stats after = stats();
        CHECK(after.frees_total - before.frees_total == DEPTH + 1);   /* the unique_ptrs' */
        CHECK(after.allocs_total - before.allocs_total == 2 * (DEPTH + 1));
        exo_carat_alloc_info info;
        long *last = kept[nkept - 1];
        CHECK(exo_carat_alloc_find(last, &info) == 0 && info.base == (uintptr_t)last);

        Frame *unwound = deepest;
        CHECK(move_from_stack(5) == 6 * 7);
        /* The frames the exception left are gone now that a frame above them returned. */
        CHECK(exo_carat_alloc_find(unwound, &info) != 0 || info.kind != EXO_CARAT_STACK ||
              info.base != (uintptr_t)unwound);
    }
    for (int i = 0; i < nkept; i++)
        std::free(kept[i]);
    std::printf("cxx_exceptions: ok\n");
    return 0;
}
