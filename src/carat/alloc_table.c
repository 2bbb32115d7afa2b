/* The allocation table as a treap (a binary search tree on base addresses whose nodes also
 * keep heap order on random priorities, so it stays balanced on average without rebalancing
 * code), with a hash by base and a small cache of recent answers in front of it for "which
 * allocation contains this address", and page bitmaps (page_index.c) that find the small
 * blocks inside which an address lies; the treap holds only the big ones. The escape sets
 * are in escape_set.c. */
#include "carat/alloc_table.h"
#include "carat/carat_mem.h"
#include "carat/page_index.h"
#include "carat/shadow.h"
#include "internal.h"
#include "os/os.h"

#include <exomem/access.h>
#include <string.h>

static uint32_t next_prio(void)
{
    static uint64_t x = 0x9e3779b97f4a7c15ull;   /* xorshift: only needs to look random */
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return (uint32_t)(x >> 32);
}

/* Split tree n into keys < key (*l) and keys >= key (*r). */
static void split(struct alloc *n, uintptr_t key, struct alloc **l, struct alloc **r)
{
    if (!n) {
        *l = *r = NULL;
    } else if (n->base < key) {
        split(n->right, key, &n->right, r);
        *l = n;
    } else {
        split(n->left, key, l, &n->left);
        *r = n;
    }
}

/* Join two trees where every key of l is below every key of r. */
static struct alloc *join(struct alloc *l, struct alloc *r)
{
    if (!l)
        return r;
    if (!r)
        return l;
    if (l->prio > r->prio) {
        l->right = join(l->right, r);
        return l;
    }
    r->left = join(l, r->left);
    return r;
}

static struct alloc *insert_node(struct alloc *root, struct alloc *n)
{
    if (!root)
        return n;
    if (n->prio > root->prio) {
        split(root, n->base, &n->left, &n->right);
        return n;
    }
    if (n->base < root->base)
        root->left = insert_node(root->left, n);
    else
        root->right = insert_node(root->right, n);
    return root;
}

unsigned exo_carat_escape_bucket(uint64_t n)
{
    unsigned b = n ? 1u + (unsigned)(63 - __builtin_clzll(n)) : 0;
    return b < EXO_CARAT_ESCAPE_BUCKETS ? b : EXO_CARAT_ESCAPE_BUCKETS - 1;
}

/* ---- the hash by base ---- */


/* The head word of a heap block at base (alloc_table.h), or NULL if it has none. */
static uintptr_t *head_of(const struct alloc_table *t, uintptr_t base)
{
    return t->by_head && !(base & 15) ? exo_carat_shadow_word(base - 8) : NULL;
}

/* The nodes' arena: at a fixed place above the shadow's reservation, without memory behind
 * it until used. The shadow also holds the program's own integers (the lanes of stores
 * the plugin cannot tell from pointers), so a word with the tag may be anything: it is
 * read as a node only if it points at a node's place in the arena, and freed nodes there
 * keep base 0, so that a stale or chance word names no block. */
#define ARENA_LO 0x410000100000ull
#define ARENA_LEN (64ull << 30)

int exo_carat_alloc_table_use_heads(struct alloc_table *t)
{
    if (t->by_head)
        return 0;
    int rc = exo_os_reserve_fixed(ARENA_LO, ARENA_LEN);
    if (rc == 0 && (rc = exo_os_protect(ARENA_LO, ARENA_LEN, EXO_ACCESS_RW)) != 0)
        exo_os_unmap(ARENA_LO, ARENA_LEN);
    if (rc)
        return rc;
    t->arena_lo = t->arena_next = ARENA_LO;
    t->arena_end = ARENA_LO + ARENA_LEN;
    t->by_head = true;
    return 0;
}

/* Also read without the lock (exo_carat_alloc_table_pending_at): the arena only grows. */
static bool in_arena(const struct alloc_table *t, uintptr_t p)
{
    uintptr_t next = __atomic_load_n(&t->arena_next, __ATOMIC_RELAXED);
    return p - t->arena_lo < next - t->arena_lo && !(p % sizeof(struct alloc));
}

/* A zeroed node: from the arena once heads are on (or from the runtime's allocator). */
static struct alloc *node_alloc(struct alloc_table *t)
{
    struct alloc *n = NULL;
    if (t->by_head && t->nspare)
        n = t->spare[--t->nspare];
    else if (t->by_head && t->arena_next < t->arena_end) {
        n = (struct alloc *)t->arena_next;
        __atomic_store_n(&t->arena_next, t->arena_next + sizeof *n, __ATOMIC_RELAXED);
    }
    if (!n)
        return exo_carat_mem_alloc(sizeof *n);
    memset(n, 0, sizeof *n);
    return n;
}

static void node_free(struct alloc_table *t, struct alloc *n)
{
    if (!in_arena(t, (uintptr_t)n)) {
        exo_carat_mem_free(n, sizeof *n);
        return;
    }
    n->base = 0;   /* names no block any more */
    if (t->nspare == t->spare_cap) {
        uint32_t cap = t->spare_cap ? 2 * t->spare_cap : 1024;
        struct alloc **bigger = exo_carat_mem_alloc(cap * sizeof *bigger);
        if (!bigger)
            return;   /* leaked in the arena: it still reads as no block's */
        if (t->nspare)
            memcpy(bigger, t->spare, t->nspare * sizeof *bigger);
        exo_carat_mem_free(t->spare, t->spare_cap * sizeof *t->spare);
        t->spare = bigger;
        t->spare_cap = cap;
    }
    t->spare[t->nspare++] = n;
}

/* The node base's head word names, pending or not, or NULL. */
static struct alloc *named_by_head(const struct alloc_table *t, uintptr_t base)
{
    const uintptr_t *h = head_of(t, base);
    uintptr_t w = h ? __atomic_load_n(h, __ATOMIC_RELAXED) : 0;
    if ((w & ALLOC_HEAD_TAG) && in_arena(t, w & ~ALLOC_HEAD_TAG)) {
        struct alloc *n = (struct alloc *)(w & ~ALLOC_HEAD_TAG);
        if (__atomic_load_n(&n->base, __ATOMIC_RELAXED) == base)
            return n;
    }
    return NULL;
}

/* The tracked node at base. A pending one (pending.c) is not in the table yet. */
static struct alloc *by_base_get(const struct alloc_table *t, uintptr_t base)
{
    struct alloc *n = named_by_head(t, base);
    if (n && n->index != INDEX_PENDING)
        return n;
    return exo_carat_addr_map_get(&t->by_base, base);
}

uintptr_t *exo_carat_alloc_table_head(const struct alloc_table *t, uintptr_t base)
{
    return head_of(t, base);
}

struct alloc *exo_carat_alloc_table_pending_at(const struct alloc_table *t, uintptr_t base)
{
    struct alloc *n = named_by_head(t, base);
    return n && n->index == INDEX_PENDING ? n : NULL;
}

struct alloc *exo_carat_alloc_table_node_new(struct alloc_table *t)
{
    struct alloc *n = t->by_head ? node_alloc(t) : NULL;
    if (n && !in_arena(t, (uintptr_t)n)) {   /* the arena is used up: no head can name it */
        exo_carat_mem_free(n, sizeof *n);
        n = NULL;
    }
    return n;
}

/* Room for one more element in an array of n elements of elem bytes: doubled when full
 * (first elements the first time). -EXO_ENOMEM leaves it as it was. Lock held. */
static int grow_array(void **arr, uint32_t *cap, uint32_t n, size_t elem, uint32_t first)
{
    if (n < *cap)
        return 0;
    uint32_t bigger_cap = *cap ? 2 * *cap : first;
    void *bigger = exo_carat_mem_alloc(bigger_cap * elem);
    if (!bigger)
        return -EXO_ENOMEM;
    if (n)
        memcpy(bigger, *arr, n * elem);
    exo_carat_mem_free(*arr, *cap * elem);
    *arr = bigger;
    *cap = bigger_cap;
    return 0;
}

/* List n in heads. -EXO_ENOMEM. */
static int heads_push(struct alloc_table *t, struct alloc *n)
{
    void *heads = t->heads;
    if (grow_array(&heads, &t->heads_cap, t->nheads, sizeof *t->heads, 1024))
        return -EXO_ENOMEM;
    t->heads = heads;
    n->prio = t->nheads;
    t->heads[t->nheads++] = n;
    return 0;
}

/* Name n where by_base_get finds it: its head word, or the hash (room reserved). */
static void by_base_add(struct alloc_table *t, struct alloc *n)
{
    uintptr_t *h = head_of(t, n->base);
    bool may_head = h && n->kind == EXO_CARAT_HEAP && n->index == INDEX_PAGES &&
                    in_arena(t, (uintptr_t)n);
    uintptr_t word = exo_carat_alloc_table_head_word(n);
    if (h && *h == word) {   /* a pending node's, named already */
        if (may_head && heads_push(t, n) == 0)
            return;
        *h = 0;   /* in the hash after all (it went into the tree, or no memory) */
    } else if (may_head && !*h && heads_push(t, n) == 0) {
        *h = word;
        return;
    }
    exo_carat_addr_map_put(&t->by_base, n->base, n);
}

static void by_base_remove(struct alloc_table *t, const struct alloc *n)
{
    uintptr_t *h = head_of(t, n->base);
    if (h && *h == exo_carat_alloc_table_head_word(n)) {
        *h = 0;
        struct alloc *last = t->heads[--t->nheads];
        t->heads[n->prio] = last;
        last->prio = n->prio;
        return;
    }
    uint32_t i = exo_carat_addr_map_find(&t->by_base, n->base);
    if (i != UINT32_MAX)
        exo_carat_addr_map_remove_at(&t->by_base, i);
}

static unsigned cache_index(uintptr_t addr)
{
    return (unsigned)((addr >> 12) * 0x9e3779b97f4a7c15ull >> 54) & (ALLOC_TABLE_CACHE - 1);
}

/* Clear the cache entries naming n, before it is freed, resized or moved. An address of n
 * can only be cached at the index of its page. */
static void forget_cached(struct alloc_table *t, const struct alloc *n)
{
    if (n->size / 4096 + 2 >= ALLOC_TABLE_CACHE) {
        for (unsigned i = 0; i < ALLOC_TABLE_CACHE; i++)
            if (t->cache[i].node == n)
                t->cache[i] = (struct cache_entry){ 0, 0, NULL };
        return;
    }
    for (uintptr_t pg = n->base & ~(uintptr_t)4095; pg < n->base + n->size; pg += 4096)
        if (t->cache[cache_index(pg)].node == n)
            t->cache[cache_index(pg)] = (struct cache_entry){ 0, 0, NULL };
}

uint64_t exo_carat_alloc_table_bytes(const struct alloc_table *t)
{
    return t->bytes + t->by_base.bytes + (uint64_t)t->heads_cap * sizeof *t->heads +
           (uint64_t)t->spare_cap * sizeof *t->spare +
           t->pages.map.bytes + t->pages.bits_bytes +
           (uint64_t)t->odd_cap * sizeof *t->odd;
}

/* ---- the index by interior address: page lists for small blocks, the tree for the rest ---- */

void exo_carat_alloc_table_note_peak(struct alloc_table *t)
{
    if (exo_carat_alloc_table_bytes(t) > t->peak_bytes)
        t->peak_bytes = exo_carat_alloc_table_bytes(t);
}

/* ---- the sorted array of small unaligned blocks ---- */

/* The number of blocks starting at or below addr (the index after the last of them).
 * Without branches on the data (a conditional move a step): the addresses looked up are
 * random, and a mispredicted branch at every step cost more than the search. */
static uint32_t odd_upto(const struct alloc_table *t, uintptr_t addr)
{
    uint32_t n = t->nodd;
    if (!n || addr < t->odd[0].base)
        return 0;
    const struct odd_block *b = t->odd;
    while (n > 1) {
        uint32_t half = n / 2;
        b = b[half].base <= addr ? b + half : b;
        n -= half;
    }
    return (uint32_t)(b - t->odd) + (b->base <= addr);
}

static int odd_add(struct alloc_table *t, struct alloc *n)
{
    void *odd = t->odd;
    if (grow_array(&odd, &t->odd_cap, t->nodd, sizeof *t->odd, 64))
        return -EXO_ENOMEM;
    t->odd = odd;
    uint32_t i = odd_upto(t, n->base);
    memmove(&t->odd[i + 1], &t->odd[i], (t->nodd - i) * sizeof *t->odd);
    t->odd[i] = (struct odd_block){ n->base, n->size, n };
    t->nodd++;
    if (n->base + n->size > t->odd_end)
        t->odd_end = n->base + n->size;   /* not lowered on removal: loose, never tight */
    return 0;
}

static void odd_remove(struct alloc_table *t, const struct alloc *n)
{
    for (uint32_t i = odd_upto(t, n->base); i-- > 0 && t->odd[i].base == n->base;)
        if (t->odd[i].node == n) {
            memmove(&t->odd[i], &t->odd[i + 1], (t->nodd - i - 1) * sizeof *t->odd);
            t->nodd--;
            return;
        }
}

/* The array's block overlapping [base, end), or NULL: the last one starting before end is
 * the only one that can (they do not overlap each other). */
static struct alloc *odd_overlapping(const struct alloc_table *t, uintptr_t base,
                                     uintptr_t end)
{
    uint32_t i = base < t->odd_end ? odd_upto(t, end - 1) : 0;
    return i && t->odd[i - 1].base + t->odd[i - 1].size > base ? t->odd[i - 1].node : NULL;
}

/* Put n where a lookup by an address inside it finds it: the page index if it is small,
 * aligned, and there is memory for its bitmaps, the sorted array if it is small and not
 * aligned, the tree otherwise (which needs no memory). */
static void index_add(struct alloc_table *t, struct alloc *n)
{
    n->index = INDEX_TREE;
    if (n->size <= PAGE_INDEX_SMALL) {
        int r = exo_carat_page_index_add(&t->pages, n->base, n->size);
        if (r == 0)
            n->index = INDEX_PAGES;
        else if (r == -EXO_EINVAL && odd_add(t, n) == 0)
            n->index = INDEX_ODD;
    }
    if (n->index == INDEX_TREE) {
        n->left = n->right = NULL;
        n->prio = next_prio();
        t->root = insert_node(t->root, n);
    }
    exo_carat_alloc_table_note_peak(t);
}

static void index_remove(struct alloc_table *t, struct alloc *n)
{
    if (n->index == INDEX_PAGES) {
        exo_carat_page_index_remove(&t->pages, n->base, n->size);
        return;
    }
    if (n->index == INDEX_ODD) {
        odd_remove(t, n);
        return;
    }
    struct alloc **link = &t->root;   /* n itself, not another node with its base */
    while (*link && *link != n)
        link = n->base < (*link)->base ? &(*link)->left : &(*link)->right;
    if (*link)
        *link = join(n->left, n->right);
}

/* A tree node overlapping [base, end), or NULL. One walk finds the last node starting at
 * or below base and the first after. */
static struct alloc *tree_overlapping(const struct alloc_table *t, uintptr_t base, uintptr_t end)
{
    struct alloc *n = t->root, *below = NULL, *above = NULL;
    while (n) {
        if (n->base <= base) {
            below = n;
            n = n->right;
        } else {
            above = n;
            n = n->left;
        }
    }
    if (below && base - below->base < below->size)
        return below;
    return above && above->base < end ? above : NULL;
}

static void drop(struct alloc_table *t, struct alloc *n)
{
    index_remove(t, n);
    if (n == t->worst) {
        t->worst = NULL;
        t->worst_stale = true;
    }
    t->escape_hist[exo_carat_escape_bucket(n->escapes.count)]++;
    exo_carat_escape_set_free(t, &n->escapes);
    t->bytes -= sizeof *n;
    t->count--;
    forget_cached(t, n);
    by_base_remove(t, n);
    node_free(t, n);
}

/* ---- insert and remove ---- */

void exo_carat_alloc_table_widen(struct alloc_table *t, uintptr_t base, uintptr_t end)
{
    /* Read without the lock by the escape hook's filter (alloc_table.h), and widened
     * without it by threads for their pending blocks (pending.c): a bound is only ever
     * replaced by a wider one, atomically. */
    /* A heap block's chunk header is its too, for the escapes (hooks.c, target_of) */
    base = base > EXO_CARAT_CHUNK_HEADER ? base - EXO_CARAT_CHUNK_HEADER : 0;
    uintptr_t lo = __atomic_load_n(&t->lo, __ATOMIC_RELAXED);
    while (base < lo && !__atomic_compare_exchange_n(&t->lo, &lo, base, true, __ATOMIC_RELAXED,
                                                     __ATOMIC_RELAXED))
        ;
    uintptr_t hi = __atomic_load_n(&t->hi, __ATOMIC_RELAXED);
    while (end > hi && !__atomic_compare_exchange_n(&t->hi, &hi, end, true, __ATOMIC_RELAXED,
                                                    __ATOMIC_RELAXED))
        ;
}

/* A block of the page index overlapping [base, end), or NULL. */
static struct alloc *small_overlapping(struct alloc_table *t, uintptr_t base, uintptr_t end)
{
    for (uintptr_t from = base;;) {
        uintptr_t b = exo_carat_page_index_overlapping(&t->pages, from, end);
        struct alloc *n = b ? by_base_get(t, b) : NULL;
        if (!n || n->base + n->size > base)
            return n;
        /* it ends in base's word, before base: look past that word */
        from = (from | 7) + 1;
        if (from >= end)
            return NULL;
    }
}

/* Drop every allocation overlapping [base, end): stale, as the allocator gave that memory
 * out again. */
static void drop_overlapping(struct alloc_table *t, uintptr_t base, uintptr_t end)
{
    for (;;) {
        struct alloc *n = small_overlapping(t, base, end);
        if (!n)
            n = odd_overlapping(t, base, end);
        if (!n)
            n = tree_overlapping(t, base, end);
        if (!n)
            return;
        drop(t, n);
    }
}

/* n, filled in, goes into the indexes (room in the hash reserved). */
static void place(struct alloc_table *t, struct alloc *n)
{
    t->count++;
    t->bytes += sizeof *n;
    index_add(t, n);
    by_base_add(t, n);   /* after index_add: which index it is in decides */
    if (n->kind == EXO_CARAT_HEAP && !t->worst && !t->worst_stale)
        t->worst = n;
    /* The only one: the filter starts again from it. Not with heads on, where threads'
     * pending blocks (pending.c) lie inside the filter but not in the table. */
    if (t->count == 1 && !t->by_head) {
        __atomic_store_n(&t->lo, n->base, __ATOMIC_RELAXED);
        __atomic_store_n(&t->hi, n->base + n->size, __ATOMIC_RELAXED);
    }
    exo_carat_alloc_table_widen(t, n->base, n->base + n->size);
}

int exo_carat_alloc_table_insert(struct alloc_table *t, uintptr_t base, uintptr_t size, int kind,
                       const char *site)
{
    drop_overlapping(t, base, base + (size ? size : 1));
    if (exo_carat_addr_map_reserve(&t->by_base))
        return -EXO_ENOMEM;
    struct alloc *n = node_alloc(t);
    if (!n)
        return -EXO_ENOMEM;
    n->base = base;
    n->size = size ? size : 1;   /* malloc(0) still hands out a unique address */
    n->kind = kind;
    n->site = site;
    n->align_shift = exo_carat_align_shift(base);
    n->pinned = 0;
    place(t, n);
    return 0;
}

int exo_carat_alloc_table_adopt(struct alloc_table *t, struct alloc *n)
{
    drop_overlapping(t, n->base, n->base + n->size);
    if (exo_carat_addr_map_reserve(&t->by_base)) {
        uintptr_t *h = head_of(t, n->base);
        if (h && *h == exo_carat_alloc_table_head_word(n))
            *h = 0;
        exo_carat_alloc_table_node_recycle(t, n, false);
        return -EXO_ENOMEM;
    }
    place(t, n);
    return 0;
}

void exo_carat_alloc_table_node_recycle(struct alloc_table *t, struct alloc *n, bool counted)
{
    /* A pending node with escapes of its own thread's may have been the worst case. */
    exo_carat_alloc_table_unconsider(t, n);
    if (counted)
        t->escape_hist[exo_carat_escape_bucket(n->escapes.count)]++;
    exo_carat_escape_set_free(t, &n->escapes);
    node_free(t, n);
}

int exo_carat_alloc_table_resize(struct alloc_table *t, uintptr_t base, uintptr_t size, int kind,
                                 const char *site)
{
    struct alloc *n = by_base_get(t, base);
    if (!n)
        return exo_carat_alloc_table_insert(t, base, size, kind, site);
    size = size ? size : 1;
    if (exo_carat_addr_map_reserve(&t->by_base))   /* it may go from a head word to the hash */
        return -EXO_ENOMEM;
    forget_cached(t, n);
    by_base_remove(t, n);
    index_remove(t, n);
    /* What it grew over was free: any allocation there is stale. */
    drop_overlapping(t, base, base + size);
    n->size = size;
    index_add(t, n);
    by_base_add(t, n);
    exo_carat_alloc_table_widen(t, base, base + size);
    return 0;
}

uintptr_t exo_carat_alloc_table_remove(struct alloc_table *t, uintptr_t base)
{
    struct alloc *n = by_base_get(t, base);
    if (!n)
        return 0;
    uintptr_t size = n->size;
    drop(t, n);
    return size;   /* lo/hi stay as they were: a filter may be loose, never too tight */
}

/* The allocation containing addr among those not in the page index, or NULL. */
static struct alloc *find_off_pages(const struct alloc_table *t, uintptr_t addr)
{
    /* The array first: it is cheaper; and most addresses are past its blocks (globals lie
     * below the heap) */
    uint32_t i = addr < t->odd_end ? odd_upto(t, addr) : 0;
    if (i && addr - t->odd[i - 1].base < t->odd[i - 1].size)
        return t->odd[i - 1].node;
    struct alloc *n = t->root, *best = NULL;
    while (n) {                    /* the last allocation starting at or below addr */
        if (n->base <= addr) {
            best = n;
            n = n->right;
        } else {
            n = n->left;
        }
    }
    return best && addr - best->base < best->size ? best : NULL;
}

struct alloc *exo_carat_alloc_table_find(struct alloc_table *t, uintptr_t addr)
{
    if (addr < t->lo || addr >= t->hi)
        return NULL;
    struct cache_entry *c = &t->cache[cache_index(addr)];
    if (addr - c->base < c->size)   /* an empty entry has size 0 */
        return c->node;
    struct alloc *a = by_base_get(t, addr);
    if (!a) {
        uintptr_t b = exo_carat_page_index_find(&t->pages, addr);
        if (b && (a = by_base_get(t, b)) && addr - a->base >= a->size)
            a = NULL;   /* it ends before addr, in addr's word */
    }
    if (!a)
        a = find_off_pages(t, addr);
    if (a)
        *c = (struct cache_entry){ a->base, a->size, a };
    return a;
}

struct alloc *exo_carat_alloc_table_at(const struct alloc_table *t, uintptr_t base)
{
    return base - t->lo < t->hi - t->lo ? by_base_get(t, base) : NULL;
}

bool exo_carat_alloc_table_holds(struct alloc_table *t, uintptr_t addr)
{
    if (addr < t->lo || addr >= t->hi)
        return false;
    const struct cache_entry *c = &t->cache[cache_index(addr)];
    if (addr - c->base < c->size)
        return true;
    if (addr & 7)
        return exo_carat_alloc_table_find(t, addr) != NULL;
    /* One bit for the small blocks; the tree has the rest (and no node is read) */
    return exo_carat_page_index_covers(&t->pages, addr) || find_off_pages(t, addr) != NULL;
}

void exo_carat_alloc_table_rebase(struct alloc_table *t, struct alloc *a, uintptr_t new_base,
                                  uintptr_t new_size)
{
    /* Out of every index, drop any stale allocation recorded where it goes (a block freed
     * where we could not see it), back in at the new base. */
    forget_cached(t, a);
    by_base_remove(t, a);   /* first: a head's index is in prio, which the tree uses */
    index_remove(t, a);
    drop_overlapping(t, new_base, new_base + new_size);
    a->base = new_base;
    a->size = new_size;
    /* Room in the hash: a's own entry just left it, or (a head before) reserved here; if
     * that fails, a head word or the list will do, or the hash is past half full. */
    (void)exo_carat_addr_map_reserve(&t->by_base);
    index_add(t, a);
    by_base_add(t, a);
    exo_carat_alloc_table_widen(t, new_base, new_base + a->size);
}

void exo_carat_alloc_table_each(struct alloc_table *t, bool (*fn)(struct alloc *, void *), void *arg)
{
    for (uint32_t i = 0; i < t->by_base.cap; i++)
        if (t->by_base.e[i].value && fn(t->by_base.e[i].value, arg))
            return;
    for (uint32_t i = 0; i < t->nheads; i++)
        if (fn(t->heads[i], arg))
            return;
}

void exo_carat_alloc_table_consider(struct alloc_table *t, struct alloc *a)
{
    if (a->kind == EXO_CARAT_HEAP && !a->pinned && !t->worst_stale &&
        (!t->worst || a->escapes.count > t->worst->escapes.count))
        t->worst = a;
}

void exo_carat_alloc_table_unconsider(struct alloc_table *t, struct alloc *a)
{
    if (t->worst == a)
        t->worst_stale = true;
}

static bool pick_worst(struct alloc *a, void *arg)
{
    struct alloc **best = arg;
    if (a->kind == EXO_CARAT_HEAP && !a->pinned &&
        (!*best || a->escapes.count > (*best)->escapes.count))
        *best = a;
    return false;
}

struct alloc *exo_carat_alloc_table_worst(struct alloc_table *t)
{
    if (t->worst_stale) {
        t->worst = NULL;
        exo_carat_alloc_table_each(t, pick_worst, &t->worst);
        t->worst_stale = false;
    }
    return t->worst;
}
