/* The allocation table as a treap (a binary search tree on base addresses whose nodes also
 * keep heap order on random priorities, so it stays balanced on average without rebalancing
 * code), and the escape sets as open-addressing hash sets of slot addresses. Insertions,
 * removals and "which allocation contains this address" are O(log n) expected. */
#include "carat/alloc_table.h"
#include "carat/carat_mem.h"
#include "internal.h"

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

/* Remove the node with base key from the tree at *link; returns it (or NULL). */
static struct alloc *remove_node(struct alloc **link, uintptr_t key)
{
    while (*link && (*link)->base != key)
        link = key < (*link)->base ? &(*link)->left : &(*link)->right;
    struct alloc *n = *link;
    if (n)
        *link = join(n->left, n->right);
    return n;
}

unsigned exo_carat_escape_bucket(uint64_t n)
{
    unsigned b = n ? 1u + (unsigned)(63 - __builtin_clzll(n)) : 0;
    return b < EXO_CARAT_ESCAPE_BUCKETS ? b : EXO_CARAT_ESCAPE_BUCKETS - 1;
}

static void drop(struct alloc_table *t, struct alloc *n)
{
    if (n == t->worst) {
        t->worst = NULL;
        t->worst_stale = true;
    }
    t->escape_hist[exo_carat_escape_bucket(n->escapes.count)]++;
    exo_carat_escape_set_free(t, &n->escapes);
    t->bytes -= sizeof *n;
    t->count--;
    exo_carat_mem_free(n, sizeof *n);
}

int exo_carat_alloc_table_insert(struct alloc_table *t, uintptr_t base, uintptr_t size, int kind,
                       const char *site)
{
    struct alloc *old = remove_node(&t->root, base);
    if (old)
        drop(t, old);
    struct alloc *n = exo_carat_mem_alloc(sizeof *n);
    if (!n)
        return -EXO_ENOMEM;
    n->base = base;
    n->size = size ? size : 1;   /* malloc(0) still hands out a unique address */
    n->kind = kind;
    n->site = site;
    /* The block may have been asked for with this alignment (posix_memalign): a move keeps
     * it. Judged once, at the first address, so that moves do not ratchet it up. */
    n->align = 16;
    while (n->align < 4096 && !(base & n->align))
        n->align <<= 1;
    n->prio = next_prio();
    t->root = insert_node(t->root, n);
    t->count++;
    if (kind == EXO_CARAT_HEAP && !t->worst && !t->worst_stale)
        t->worst = n;
    t->bytes += sizeof *n;
    if (t->bytes > t->peak_bytes)
        t->peak_bytes = t->bytes;
    if (t->count == 1 || base < t->lo)
        t->lo = base;
    if (t->count == 1 || base + n->size > t->hi)
        t->hi = base + n->size;
    return 0;
}

bool exo_carat_alloc_table_remove(struct alloc_table *t, uintptr_t base)
{
    struct alloc *n = remove_node(&t->root, base);
    if (!n)
        return false;
    drop(t, n);
    return true;   /* lo/hi stay as they were: a filter may be loose, never too tight */
}

struct alloc *exo_carat_alloc_table_find(const struct alloc_table *t, uintptr_t addr)
{
    if (addr < t->lo || addr >= t->hi)
        return NULL;
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

void exo_carat_alloc_table_rebase(struct alloc_table *t, struct alloc *a, uintptr_t new_base)
{
    /* Unlink a itself (not another node with its base), then drop any stale allocation
     * recorded at the new base (a block freed where we could not see it). */
    struct alloc **link = &t->root;
    while (*link && *link != a)
        link = a->base < (*link)->base ? &(*link)->left : &(*link)->right;
    if (*link)
        *link = join(a->left, a->right);
    struct alloc *stale = remove_node(&t->root, new_base);
    if (stale)
        drop(t, stale);
    a->base = new_base;
    a->left = a->right = NULL;
    t->root = insert_node(t->root, a);
    if (new_base < t->lo)
        t->lo = new_base;
    if (new_base + a->size > t->hi)
        t->hi = new_base + a->size;
}

static bool each_node(struct alloc *n, bool (*fn)(struct alloc *, void *), void *arg)
{
    if (!n)
        return false;
    return each_node(n->left, fn, arg) || fn(n, arg) || each_node(n->right, fn, arg);
}

void exo_carat_alloc_table_each(struct alloc_table *t, bool (*fn)(struct alloc *, void *), void *arg)
{
    each_node(t->root, fn, arg);
}

static void clear_node(struct alloc_table *t, struct alloc *n)
{
    if (!n)
        return;
    clear_node(t, n->left);
    clear_node(t, n->right);
    drop(t, n);
}

void exo_carat_alloc_table_clear(struct alloc_table *t)
{
    clear_node(t, t->root);
    t->root = NULL;
}

/* ---- escape sets ---- */

static uint32_t slot_hash(uintptr_t slot, uint32_t cap)
{
    return (uint32_t)((slot >> 3) * 0x9e3779b97f4a7c15ull >> 32) & (cap - 1);
}

static void set_put(struct escape_set *s, struct escape_slot e)
{
    uint32_t i = slot_hash(e.slot, s->cap);
    while (s->slots[i].slot && s->slots[i].slot != e.slot)
        i = (i + 1) & (s->cap - 1);
    if (!s->slots[i].slot)
        s->count++;
    s->slots[i] = e;
}

int exo_carat_escape_set_add(struct alloc_table *t, struct escape_set *s, uintptr_t slot,
                             uintptr_t value, bool in_alloc)
{
    if ((uint64_t)(s->count + 1) * 4 > (uint64_t)s->cap * 3) {   /* keep load under 3/4 */
        uint32_t cap = s->cap ? s->cap * 2 : 4;
        struct escape_set bigger = { exo_carat_mem_alloc(cap * sizeof *s->slots), cap, 0 };
        if (!bigger.slots)
            return -EXO_ENOMEM;
        for (uint32_t i = 0; i < s->cap; i++)
            if (s->slots[i].slot)
                set_put(&bigger, s->slots[i]);
        t->bytes += (uint64_t)(cap - s->cap) * sizeof *s->slots;
        if (t->bytes > t->peak_bytes)
            t->peak_bytes = t->bytes;
        exo_carat_mem_free(s->slots, s->cap * sizeof *s->slots);
        *s = bigger;
    }
    set_put(s, (struct escape_slot){ slot, value, in_alloc });
    return 0;
}

void exo_carat_escape_set_remove(struct escape_set *s, uintptr_t slot)
{
    if (!s->cap)
        return;
    uint32_t i = slot_hash(slot, s->cap);
    while (s->slots[i].slot && s->slots[i].slot != slot)
        i = (i + 1) & (s->cap - 1);
    if (!s->slots[i].slot)
        return;
    s->slots[i].slot = 0;
    s->count--;
    /* Re-place the rest of the probe run so lookups never stop at the new hole. */
    for (uint32_t j = (i + 1) & (s->cap - 1); s->slots[j].slot; j = (j + 1) & (s->cap - 1)) {
        struct escape_slot e = s->slots[j];
        s->slots[j].slot = 0;
        s->count--;
        set_put(s, e);
    }
}

bool exo_carat_escape_set_holds(const struct escape_set *s, uintptr_t slot, uintptr_t value)
{
    if (!s->cap)
        return false;
    for (uint32_t i = slot_hash(slot, s->cap); s->slots[i].slot; i = (i + 1) & (s->cap - 1))
        if (s->slots[i].slot == slot)
            return s->slots[i].value == value;
    return false;
}

void exo_carat_escape_set_free(struct alloc_table *t, struct escape_set *s)
{
    t->bytes -= (uint64_t)s->cap * sizeof *s->slots;
    exo_carat_mem_free(s->slots, s->cap * sizeof *s->slots);
    memset(s, 0, sizeof *s);
}

void exo_carat_alloc_table_consider(struct alloc_table *t, struct alloc *a)
{
    if (a->kind == EXO_CARAT_HEAP && !t->worst_stale &&
        (!t->worst || a->escapes.count > t->worst->escapes.count))
        t->worst = a;
}

static bool pick_worst(struct alloc *a, void *arg)
{
    struct alloc **best = arg;
    if (a->kind == EXO_CARAT_HEAP && (!*best || a->escapes.count > (*best)->escapes.count))
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
