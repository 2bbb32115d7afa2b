/* What the parts of kvjmp share: the layout of the store inside its segment, and the client.
 *
 * In the segment (all allocated with seg_malloc, found through the heap's root pointer):
 *   struct kvj_store     magic, the key table, the intent record
 *   struct kvj_table     a chained hash table: one pointer to its bucket array (so a rehash
 *                        publishes the new array with one store) and a count
 *   struct kvj_entry     a key (bytes inline, immutable) and a pointer to its value
 *   struct kvj_val       a string (bytes inline, immutable), a counter, or a hash (a
 *                        nested kvj_table of field -> string entries)
 * Changing a key's value allocates a new kvj_val and swaps the entry's pointer; a counter
 * is changed in place with one aligned store.
 */
#ifndef EXOMEM_KVJMP_INT_H
#define EXOMEM_KVJMP_INT_H

#include "kvjmp.h"

#include <exomem/vas.h>

#include <stdint.h>

#define KVJ_MAGIC UINT64_C(0x31504d4a564b5845) /* "EXKVJMP1" */
#define KVJ_MIN_BUCKETS 16

enum kvj_type { KVJ_STR = 1, KVJ_INT = 2, KVJ_HASH = 3 };

struct kvj_table;

struct kvj_val {
    uint32_t type;
    uint32_t pad;
    uint64_t len;           /* KVJ_STR: bytes */
    int64_t num;            /* KVJ_INT */
    struct kvj_table *hash; /* KVJ_HASH */
    char bytes[];
};

struct kvj_entry {
    struct kvj_entry *next;
    struct kvj_val *val;
    uint64_t hash;
    uint64_t klen;
    char key[];
};

struct kvj_buckets {
    uint64_t n; /* a power of two */
    struct kvj_entry *slot[];
};

struct kvj_table {
    struct kvj_buckets *b;
    uint64_t count;
};

/* The intent record: what the writer in the store is doing (see kvjmp_table.c). */
enum kvj_state {
    KVJ_IDLE = 0,
    KVJ_ARMED = 1,     /* about to store `after` into *slot */
    KVJ_PUBLISHED = 2, /* stored; `garbage` is to be freed */
    KVJ_BUILDING = 3,  /* `fresh` is being built, unpublished */
    KVJ_REHASH = 4,    /* moving table's entries from old_b to new_b */
};

struct kvj_log {
    uint64_t state;
    struct kvj_table *table; /* whose count the change alters */
    void **slot;
    void *before, *after;
    void *fresh;             /* freed (deep) if the change is rolled back */
    uint32_t fresh_kind, garbage_kind; /* KVJ_OBJ_* */
    void *garbage;           /* freed (deep) once the change is published */
    struct kvj_buckets *old_b, *new_b;
    struct kvj_entry *moving;
    void *freeing;           /* an entry unlinked from dying garbage, being freed */
};

enum kvj_obj { KVJ_OBJ_NONE = 0, KVJ_OBJ_VAL = 1, KVJ_OBJ_ENTRY = 2 };

struct kvj_store {
    uint64_t magic;
    uint64_t recoveries;
    struct kvj_table keys;
    struct kvj_log log;
};

/* A writer's context for the table code. */
struct kvj_writer {
    segid_t sid;
    struct kvj_store *st;
    struct kvjmp *client; /* for the crash hook */
    int recovering;       /* finishing a dead writer's change: objects may be freed already */
};

struct kvjmp {
    segid_t sid;
    vhandle_t ro, rw;
    struct kvj_store *st; /* cached once the table exists (its address never changes) */
    uint64_t crash_at;    /* test hook: steps left until SIGKILL (0: off) */
};

/* kvjmp_table.c: everything below needs the write lock (the rw VAS switched in), except
 * the lookups, which need either lock. */
uint64_t kvj_hash(const void *p, size_t n);
struct kvj_entry *kvj_lookup(const struct kvj_table *t, const void *key, size_t klen);
/* Make the store (first writer) or finish what a dead writer left. */
int kvj_prepare(struct kvj_writer *w);
/* Set key's value to v (freshly allocated, unpublished); frees the old value. */
int kvj_put(struct kvj_writer *w, struct kvj_table *t, const void *key, size_t klen,
            struct kvj_val *v);
/* Remove key: 1 if it was there, else 0. */
int kvj_remove(struct kvj_writer *w, struct kvj_table *t, const void *key, size_t klen);
struct kvj_val *kvj_new_str(struct kvj_writer *w, const void *p, size_t n);
struct kvj_val *kvj_new_int(struct kvj_writer *w, int64_t n);
/* A new hash value with an empty table. */
struct kvj_val *kvj_new_hash(struct kvj_writer *w);
/* Free a value never published (and all it holds). */
void kvj_drop_val(struct kvj_writer *w, struct kvj_val *v);
/* Set a counter in place (one store). */
void kvj_set_num(struct kvj_writer *w, struct kvj_val *v, int64_t n);
/* Remove every key. */
int kvj_clear(struct kvj_writer *w);
/* The crash hook: a step of the write path. */
void kvj_step(struct kvj_writer *w);
int kvj_check_store(struct kvj_store *st, struct kvjmp_check_stats *cs);

/* kvjmp_client.c: switching (a failed enter leaves the process at home). */
int kvjmp_enter_read(struct kvjmp *c, const struct kvj_store **st);
int kvjmp_enter_write(struct kvjmp *c, struct kvj_writer *w);
int kvjmp_leave(struct kvjmp *c);
/* Reads while switched in: a value as a string (counters printed into num); a hash's
 * field (NULL if absent); -KVJMP_WRONGTYPE. */
int kvj_string_of(const struct kvj_val *v, char num[24], const char **p, size_t *n);
int kvj_hash_field(const struct kvj_entry *e, const void *f, size_t flen,
                   const struct kvj_val **out);
/* Writes while switched in read-write. */
int kvj_do_set(struct kvj_writer *w, const void *key, size_t klen, const void *val, size_t vlen);
int kvj_do_incr(struct kvj_writer *w, const void *key, size_t klen, int64_t *out);
int kvj_do_hset(struct kvj_writer *w, const void *key, size_t klen, const void *f, size_t flen,
                const void *val, size_t vlen);

#endif
