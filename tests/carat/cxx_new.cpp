/* C++'s operator new and delete, tracked like malloc and free (built by exomem-c++ in
 * test_carat.sh, with the escape log and with the shadow). C++ only because what it checks
 * is what clang emits for C++: the mangled operators, invokes with landing pads, array
 * cookies. Checked:
 * - every form of new (plain, array, aligned, nothrow) and of delete (sized too) is counted
 *   once, and each block is found with its site;
 * - an object whose constructor throws is given back by the landing pad's delete;
 * - moves: a list node made by new (every path to it leads to the copy, then deleted
 *   through the new address), a std::vector's buffer (its three pointers, the end one
 *   past the block, lead to the copy; it grows afterwards), an over-aligned object (the
 *   copy keeps its alignment), and an array with a cookie (the program holds base + 8),
 *   whose delete[] then runs every destructor. */
#include "carat_check.h"

#include <exomem/carat.h>
#include <exomem/error.h>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>
#include <vector>

namespace {

struct Node {
    Node *next;
    long value;
};

struct alignas(64) Wide {
    Wide *self;
    char bytes[100];
};

int destroyed;
struct Counted {   /* a destructor: new[] keeps the element count in front of the array */
    Counted *peer = nullptr;
    ~Counted() { destroyed++; }
};

struct Throws {
    Node *held;
    explicit Throws(Node *n) : held(n) { throw std::runtime_error("constructor"); }
};

exo_carat_stats stats()
{
    exo_carat_stats s;
    exo_carat_get_stats(&s);
    return s;
}

/* The tracked block holding p: its base. Its site names site_file (this file, or the
 * allocator's header where a container calls operator new). */
uintptr_t tracked_base(const void *p, const char *site_file = "cxx_new.cpp")
{
    exo_carat_alloc_info info;
    CHECK(exo_carat_alloc_find(p, &info) == 0);
    if (!info.site || !std::strstr(info.site, site_file))
        std::fprintf(stderr, "cxx_new: %p: the block at %#lx (kind %d) was made at %s\n", p,
                     (unsigned long)info.base, info.kind, info.site ? info.site : "(none)");
    CHECK(info.kind == EXO_CARAT_HEAP);
    CHECK(info.site && std::strstr(info.site, site_file));
    return info.base;
}

void *move_block(const void *p)
{
    void *to = nullptr;
    int rc = exo_carat_move(p, &to, nullptr);
    if (rc)
        std::fprintf(stderr, "cxx_new: move: %s\n", exomem_last_error());
    CHECK(rc == 0 && to != nullptr);
    return to;
}

/* Each form counted once, and found. */
void every_form()
{
    exo_carat_stats before = stats();
    Node *one = new Node{nullptr, 1};
    Node *many = new Node[8]();
    Wide *wide = new Wide();
    Node *quiet = new (std::nothrow) Node{nullptr, 2};
    long *longs = new long[3]();
    CHECK(quiet != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(wide) % 64 == 0);
    CHECK(tracked_base(one) == reinterpret_cast<uintptr_t>(one));
    CHECK(tracked_base(many + 7) == reinterpret_cast<uintptr_t>(many));
    CHECK(tracked_base(wide) == reinterpret_cast<uintptr_t>(wide));
    CHECK(tracked_base(quiet) == reinterpret_cast<uintptr_t>(quiet));
    CHECK(tracked_base(longs + 2) == reinterpret_cast<uintptr_t>(longs));
    exo_carat_stats made = stats();
    CHECK(made.allocs_total - before.allocs_total == 5);
    CHECK(made.allocations - before.allocations == 5);
    delete one;
    delete[] many;
    delete wide;
    ::operator delete(quiet, sizeof *quiet);   /* the sized form */
    delete[] longs;
    exo_carat_stats after = stats();
    CHECK(after.frees_total - made.frees_total == 5);
    CHECK(after.allocations == before.allocations);
    exo_carat_alloc_info info;
    CHECK(exo_carat_alloc_find(one, &info) != 0 || info.base != reinterpret_cast<uintptr_t>(one));
}

/* new Throws: the landing pad deletes the half-made object. */
void constructor_throws()
{
    exo_carat_stats before = stats();
    Node keep{nullptr, 3};
    bool caught = false;
    try {
        Throws *t = new Throws(&keep);
        (void)t;
    } catch (const std::runtime_error &) {
        caught = true;
    }
    CHECK(caught);
    exo_carat_stats after = stats();
    /* The exception object is allocated by the C++ library (not tracked); the object is. */
    CHECK(after.allocs_total - before.allocs_total == 1);
    CHECK(after.frees_total - before.frees_total == 1);
    CHECK(after.allocations == before.allocations);
}

/* What the moves made, freed only when they are all done: a move is refused while a
 * stopped thread (here the caller's own stack) holds an address near the block that no
 * tracked block owns, such as a freed block's left in a dead slot (src/carat/move_patch.h,
 * DERIVED_REACH). */
struct Moved {
    Node *list;
    Wide *wide;
    Counted *counted;
};

/* A list of nodes made by new: the middle one is moved. */
Node *move_list_node()
{
    Node *head = nullptr;
    for (long i = 0; i < 16; i++)
        head = new Node{head, i};
    Node *middle = head;
    for (int i = 0; i < 8; i++)
        middle = middle->next;
    Node *held = middle;   /* a second path: this frame's own copy of the pointer */
    void *to = move_block(middle);
    Node *n = head;
    for (int i = 0; i < 8; i++)
        n = n->next;
    CHECK(n == to && held == to && held->value == 7 && held->next->value == 6);
    return head;
}

/* An over-aligned object keeps its alignment; the pointer it holds to itself follows. */
Wide *move_aligned()
{
    Wide *w = new Wide();
    w->self = w;
    std::memset(w->bytes, 5, sizeof w->bytes);
    void *to = move_block(w);
    CHECK(w == to && reinterpret_cast<uintptr_t>(w) % 64 == 0);
    CHECK(w->self == w && w->bytes[99] == 5);
    return w;
}

/* new[] of a type with a destructor: the program holds the block's base + 8 (after the
 * count). */
Counted *move_array_with_cookie()
{
    Counted *arr = new Counted[5];
    uintptr_t base = tracked_base(arr);
    CHECK(reinterpret_cast<uintptr_t>(arr) == base + sizeof(size_t));
    for (int i = 0; i < 5; i++)
        arr[i].peer = &arr[(i + 1) % 5];
    void *to = move_block(arr);
    CHECK(reinterpret_cast<uintptr_t>(arr) == reinterpret_cast<uintptr_t>(to) + sizeof(size_t));
    CHECK(arr[4].peer == &arr[0] && arr[0].peer == &arr[1]);
    return arr;
}

/* A vector's buffer: begin, end and the end of its storage lead to the copy. */
void move_vector_buffer()
{
    std::vector<Node *> v;
    v.reserve(10);
    Node a{nullptr, 10}, b{&a, 11};
    for (int i = 0; i < 7; i++)
        v.push_back(i % 2 ? &a : &b);
    Node **old = v.data();
    CHECK(tracked_base(old, "new_allocator.h") == reinterpret_cast<uintptr_t>(old));
    void *to = move_block(old);
    CHECK(v.data() == to && v.size() == 7 && v.capacity() == 10);
    CHECK(v[0] == &b && v[1] == &a && v[6] == &b && v[6]->next == &a);
    for (int i = 0; i < 20; i++)   /* past its capacity: the copy is what grows */
        v.push_back(&a);
    CHECK(v.size() == 27 && v[5] == &a && v[26] == &a);
}

/* The moved blocks deleted through their new addresses: every node of the list, and
 * delete[] finds the count in the copy and runs each destructor. */
void release(const Moved &m)
{
    exo_carat_stats before = stats();
    int nodes = 0;
    for (Node *n = m.list; n;) {
        Node *next = n->next;
        delete n;
        n = next;
        nodes++;
    }
    CHECK(nodes == 16);
    delete m.wide;
    destroyed = 0;
    delete[] m.counted;
    CHECK(destroyed == 5);
    CHECK(stats().frees_total - before.frees_total == 16 + 1 + 1);
}

}   // namespace

int main()
{
    Moved m;
    m.list = move_list_node();
    m.wide = move_aligned();
    m.counted = move_array_with_cookie();
    move_vector_buffer();   /* last: its frees are its own */
    release(m);
    every_form();
    constructor_throws();
    std::printf("cxx_new: ok\n");
    return 0;
}
