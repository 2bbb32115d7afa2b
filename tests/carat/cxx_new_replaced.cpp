/* A program that replaces C++'s operator new (built by exomem-c++ in test_carat.sh, twice):
 * - with -DPOOL, by a bump allocator over a static array, whose blocks free() cannot take:
 *   the blocks new makes are not tracked (the pool, a global, is), a move of one is refused
 *   and changes nothing, and a pointer to a malloc'd block stored in one is still patched
 *   when that block moves;
 * - with -DHEADER, by malloc with a 16-byte header in front: the malloc inside operator
 *   new is what is tracked (the whole block, made at that line), a move patches the
 *   program's pointer 16 bytes into it, and delete frees the copy.
 * The runtime learns which operator new the program calls from the dynamic loader
 * (src/carat/cxx_new.c). */
#include "carat_check.h"

#include <exomem/carat.h>
#include <exomem/error.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#if defined(POOL) == defined(HEADER)
#error "build with -DPOOL or -DHEADER"
#endif

/* Not inlined, as if in a file of its own: the call sites then call operator new (the
 * plugin runs after inlining, and an inlined body is just the code it holds). */
#define REPLACEMENT [[gnu::noinline]]

#ifdef POOL
alignas(64) static unsigned char pool[1 << 20];
static size_t pool_used;

REPLACEMENT void *operator new(size_t n)
{
    n = (n + 15) & ~size_t(15);
    if (n > sizeof pool - pool_used)
        throw std::bad_alloc();
    void *p = pool + pool_used;
    pool_used += n;
    return p;
}
REPLACEMENT void operator delete(void *) noexcept {}
REPLACEMENT void operator delete(void *, size_t) noexcept {}
#else
enum { HEADER_BYTES = 16 };

REPLACEMENT void *operator new(size_t n)
{
    auto *block = static_cast<unsigned char *>(std::malloc(n + HEADER_BYTES));
    if (!block)
        throw std::bad_alloc();
    std::memcpy(block, &n, sizeof n);
    return block + HEADER_BYTES;
}
REPLACEMENT void operator delete(void *p) noexcept
{
    if (p)
        std::free(static_cast<unsigned char *>(p) - HEADER_BYTES);
}
REPLACEMENT void operator delete(void *p, size_t) noexcept
{
    operator delete(p);
}
#endif

namespace {

struct Node {
    Node *next;
    long *numbers;
    long value;
};

/* p has escaped: the optimiser keeps its block (a new and a delete that nothing else sees
 * are removed once operator new is inlined). */
void escape(const void *p)
{
    __asm__ volatile("" : : "r"(p) : "memory");
}

exo_carat_stats stats()
{
    exo_carat_stats s;
    exo_carat_get_stats(&s);
    return s;
}

#ifdef POOL
void pool_blocks_stay()
{
    exo_carat_stats before = stats();
    Node *n = new Node{nullptr, nullptr, 41};
    Node *m = new Node{n, nullptr, 42};
    CHECK(reinterpret_cast<unsigned char *>(n) >= pool &&
          reinterpret_cast<unsigned char *>(m) < pool + sizeof pool);
    CHECK(stats().allocs_total == before.allocs_total);   /* new's blocks: not tracked */
    escape(m);
    /* What holds n is the pool, a global: tracked, never moved. */
    exo_carat_alloc_info info;
    CHECK(exo_carat_alloc_find(n, &info) == 0 && info.kind == EXO_CARAT_GLOBAL &&
          info.base == reinterpret_cast<uintptr_t>(pool));
    void *to = nullptr;
    CHECK(exo_carat_move(n, &to, nullptr) != 0 && to == nullptr);
    CHECK(m->next == n && n->value == 41);

    /* A malloc'd block, pointed to from a pool block: the move patches that slot. */
    long *numbers = static_cast<long *>(std::malloc(8 * sizeof(long)));
    CHECK(numbers != nullptr);
    for (int i = 0; i < 8; i++)
        numbers[i] = 100 + i;
    n->numbers = numbers;
    int rc = exo_carat_move(numbers, &to, nullptr);
    if (rc)
        std::fprintf(stderr, "cxx_new_replaced: move: %s\n", exomem_last_error());
    CHECK(rc == 0);
    CHECK(n->numbers == to && n->numbers[7] == 107);
    std::free(n->numbers);
    delete m;
    delete n;
}
#else
void header_blocks_move()
{
    exo_carat_stats before = stats();
    Node *n = new Node{nullptr, nullptr, 43};
    Node *m = new Node{n, nullptr, 44};
    escape(m);
    /* Tracked once each, by the malloc inside operator new: its whole block. */
    CHECK(stats().allocs_total - before.allocs_total == 2);
    exo_carat_alloc_info info;
    CHECK(exo_carat_alloc_find(n, &info) == 0);
    CHECK(info.base + HEADER_BYTES == reinterpret_cast<uintptr_t>(n));
    CHECK(info.site && std::strstr(info.site, "cxx_new_replaced.cpp"));
    void *to = nullptr;
    int rc = exo_carat_move(n, &to, nullptr);
    if (rc)
        std::fprintf(stderr, "cxx_new_replaced: move: %s\n", exomem_last_error());
    CHECK(rc == 0);
    CHECK(m->next == n &&
          reinterpret_cast<uintptr_t>(n) == reinterpret_cast<uintptr_t>(to) + HEADER_BYTES);
    size_t header;
    std::memcpy(&header, to, sizeof header);
    CHECK(header == sizeof(Node) && n->value == 43);
    exo_carat_stats moved = stats();
    delete m->next;
    delete m;
    CHECK(stats().frees_total - moved.frees_total == 2);
}
#endif

}   // namespace

int main()
{
#ifdef POOL
    pool_blocks_stay();
    std::printf("cxx_new_replaced (pool): ok\n");
#else
    header_blocks_move();
    std::printf("cxx_new_replaced (header): ok\n");
#endif
    return 0;
}
