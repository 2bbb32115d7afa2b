/* kvjmp: a key-value store that clients jump into (SpaceJMP, section 5.3, "Redis_JMP").
 *
 * The store is one lockable segment holding a hash table of keys whose values are strings,
 * counters (64-bit integers) or hashes of strings, all allocated with the segment's own heap
 * (seg_malloc), so the raw pointers in it are valid in every process (fixed base). There is
 * no server process: a client attaches two VASes that list the segment, one read-only and
 * one read-write, and for every request switches into one of them, runs the command on the
 * table itself and switches home again. Read-only commands (GET, MGET, EXISTS, HGET) take
 * the segment's lock shared, so readers run in parallel; writers (SET, DEL, INCR, HSET) take
 * it exclusively, and only they grow (rehash) a table. A reply is built in the client's own
 * memory (its scratch: the caller's buffer, outside the segment), so a GET needs no write
 * access.
 *
 * Crash consistency: every change is prepared off to the side and published with one aligned
 * pointer (or counter) store, after an intent record in the store says what is being done.
 * The next writer (and a reader that finds a record left behind, by first taking the write
 * lock) finishes or rolls back what a killed writer left: a reader sees every key with its
 * old or its new value. The heap stays consistent (it repairs itself after a holder died);
 * a writer killed inside seg_malloc or just after it leaks that one allocation, nothing
 * more. A multi-field HSET or a multi-key DEL is applied field by field (key by key): a
 * crash in the middle leaves the fields before it applied.
 *
 * Calls return 0 (or a count, or 1/0 for found/missing where said) or a negative exomem
 * code (-EXO_..., errno set, exomem_last_error() says why). A client handle is for one
 * thread at a time (vas_switch() changes the whole process: one client per process).
 * Calls block while another process holds a conflicting lock on the store's segment.
 */
#ifndef EXOMEM_KVJMP_H
#define EXOMEM_KVJMP_H

#include <exomem/seg.h>

#include <stddef.h>
#include <stdint.h>

struct kvjmp;

/* A growable byte buffer in process memory (a client's scratch, a connection's output). */
struct kvjmp_buf {
    char *data;
    size_t len, cap;
};

/* Create store `name` (its segment "kvjmp.NAME" of `size` bytes at `base`, which should be
 * 1 GiB-aligned with a 1 GiB size for the cheapest switches, and the VASes "kvjmp.NAME.ro"
 * and "kvjmp.NAME.rw") with mode 0600. The table itself is made by the first writer.
 * -EXO_EEXIST if it exists; the errors of seg_alloc() and vas_create(). */
int kvjmp_create(const char *name, uint64_t base, uint64_t size);

/* kvjmp_create() with options: KVJMP_THP puts the segment on transparent huge pages
 * (SEG_THP; -EXO_ENOHUGE where the system cannot). Why it matters: a process has one
 * mapping per segment, so its switches between the read-only and the read-write VAS (a
 * client mixing GET and SET) change the protection of the whole populated segment, one
 * page-table entry per page: ~50 ms for 1 GiB of 4 KiB pages here, ~0.2 ms with 2 MiB
 * ones. A client that only reads or only writes never pays it. */
#define KVJMP_THP 1u
int kvjmp_create_ex(const char *name, uint64_t base, uint64_t size, unsigned flags);

/* Delete the store's VASes and segment. -EXO_ENOENT, -EXO_EBUSY while a client has it
 * switched in, and seg_delete()'s errors. */
int kvjmp_destroy(const char *name);

/* Attach store `name` as a client (both VASes; see vas_attach(): this maps and populates the
 * segment). -EXO_ENOENT, -EXO_ENOMEM and vas_attach()'s errors. */
int kvjmp_open(const char *name, struct kvjmp **out);

/* Detach and free the client. Never blocks on the store's lock. */
int kvjmp_close(struct kvjmp *c);

/* ---- typed commands (Redis semantics) ---- */

/* GET: copy up to `cap` bytes of the string value into buf and its full length into *vlen;
 * returns 1 if found, 0 if missing, -KVJMP_WRONGTYPE for a hash. A counter reads as its
 * decimal string. Takes the shared lock (blocks while a writer is in). */
int kvjmp_get(struct kvjmp *c, const void *key, size_t klen, void *buf, size_t cap,
              size_t *vlen);
/* SET: store a string value (any bytes). */
int kvjmp_set(struct kvjmp *c, const void *key, size_t klen, const void *val, size_t vlen);
/* DEL of one key: 1 if it existed, else 0. */
int kvjmp_del(struct kvjmp *c, const void *key, size_t klen);
/* INCR: add 1 to the integer value (a missing key counts as 0); the new value in *out.
 * KVJMP_NOTINT if the value is not a decimal integer, KVJMP_OVERFLOW past INT64_MAX. */
int kvjmp_incr(struct kvjmp *c, const void *key, size_t klen, int64_t *out);
/* EXISTS of one key: 1 or 0. */
int kvjmp_exists(struct kvjmp *c, const void *key, size_t klen);
/* HSET of one field: 1 if the field is new, 0 if updated. */
int kvjmp_hset(struct kvjmp *c, const void *key, size_t klen, const void *field, size_t flen,
               const void *val, size_t vlen);
/* HGET: as kvjmp_get() for a field of a hash. */
int kvjmp_hget(struct kvjmp *c, const void *key, size_t klen, const void *field, size_t flen,
               void *buf, size_t cap, size_t *vlen);

/* Command failures besides exomem's own codes, returned negated (-KVJMP_...) by the typed
 * calls; errno is not set for them (they are answers, not failures of the library). */
enum {
    KVJMP_WRONGTYPE = 1001, /* the key holds another kind of value */
    KVJMP_NOTINT = 1002,    /* INCR of a value that is not an integer */
    KVJMP_OVERFLOW = 1003,  /* INCR past INT64_MAX */
};

/* ---- generic execution, as a Redis server would ----
 *
 * Run one command (argv[0] is its name, any case; arguments are byte strings) and append
 * its reply, RESP2-encoded exactly as redis-server 7.0 answers, to `out`. Supported: GET,
 * SET (without options), DEL, INCR, MGET, EXISTS, HSET, HGET, PING, ECHO, DBSIZE,
 * CONFIG GET (answers for save and appendonly), FLUSHALL; others get an error reply.
 * Returns 0 when a reply was appended (also an error reply), else a negative exomem code
 * (out of memory, lock or switch failure) and appends nothing. */
int kvjmp_exec(struct kvjmp *c, int argc, const char *const *argv, const size_t *argvlen,
               struct kvjmp_buf *out);

/* ---- checks and test hooks ---- */

struct kvjmp_check_stats {
    uint64_t keys;         /* keys in the table */
    uint64_t objects;      /* heap allocations reachable from the store */
    uint64_t heap_allocs;  /* live allocations in the segment's heap */
    uint64_t recoveries;   /* intent records finished or rolled back so far */
};

/* Take the write lock (finishing what a dead writer left), walk the whole store and check
 * its invariants: every entry in its bucket with the right hash, counts right, every
 * pointer a live allocation of the heap, the heap consistent. 0 or -EXO_ECORRUPT (the
 * message says what is wrong). Fills st when not NULL. */
int kvjmp_check(struct kvjmp *c, struct kvjmp_check_stats *st);

/* Test hook: kill this process with SIGKILL at the n-th ordered step of the write path
 * (counted from this call; 0 disarms). Steps are the stores that make a change visible. */
void kvjmp_crash_at(struct kvjmp *c, uint64_t n);

/* ---- the RESP server (kvjmp_server.c) ---- */

/* Serve store `name` on UNIX socket `path` (made anew; removed on return) until *stop
 * becomes nonzero (checked at least every 100 ms): one process, poll(), pipelining, each
 * request run with kvjmp_exec() (so it switches in and out like any client). Returns 0 or
 * a negative code (socket or store failure). Blocks. */
int kvjmp_serve(const char *name, const char *path, volatile int *stop);

/* ---- RESP2 (kvjmp_resp.c) ---- */

/* Append to b; 0 or -EXO_ENOMEM. */
int kvjmp_buf_put(struct kvjmp_buf *b, const void *p, size_t n);
void kvjmp_buf_free(struct kvjmp_buf *b);

/* Length of the complete RESP reply at the start of p[0..n): >0, 0 if incomplete, -1 if
 * malformed. */
long kvjmp_resp_reply_len(const char *p, size_t n);

/* Parse one request (a RESP array of bulk strings, or an inline command line) from
 * p[0..n): returns the bytes it took (>0), 0 if incomplete, -1 if malformed. argv[i] points
 * into p; at most max arguments (-1 beyond). */
long kvjmp_resp_parse_request(char *p, size_t n, int max, int *argc, const char **argv,
                              size_t *argvlen);

/* Append a command as a RESP array of bulk strings. */
int kvjmp_resp_put_command(struct kvjmp_buf *b, int argc, const char *const *argv,
                           const size_t *argvlen);

/* A blocking RESP client on a UNIX socket (for tests and benchmarks): connect (-1 and errno
 * on failure), send one command and read its whole reply into `reply` (replacing its
 * contents): 0 or -1 (errno). */
int kvjmp_resp_connect(const char *path);
int kvjmp_resp_call(int fd, int argc, const char *const *argv, const size_t *argvlen,
                    struct kvjmp_buf *reply);

#endif
