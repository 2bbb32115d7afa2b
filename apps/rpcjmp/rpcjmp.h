/* rpcjmp: switching address spaces as an alternative to local RPC (SpaceJMP, Figure 7).
 *
 * A *store* is a server's data: an array of records addressed by key, in one segment
 * ("<name>.data") at a fixed, 1 GiB-aligned base, listed read-write in VAS "<name>.rw" and
 * read-only in VAS "<name>.ro". Two ways to reach a record:
 *
 *   switching   a client switches into the store's VAS (the ".ro" VAS to read: shared
 *               segment lock, readers together; the ".rw" VAS to write: exclusive lock),
 *               copies the payload out or in, and switches home (rpcjmp_jmp_*);
 *   messages    a client sends a request to a server process and waits for the response
 *               (rpcjmp_call_*) over a channel: a pipe pair, a UNIX stream socket, a UNIX
 *               SOCK_SEQPACKET socket, or a pair of busy-polled single-producer /
 *               single-consumer rings of cache-line slots in a shared mapping (the URPC
 *               analogue). The server (rpcjmp_server_*) is switched into the ".rw" VAS while
 *               it serves, so it holds the exclusive lock until a client releases it.
 *
 * A record keeps two versions of its value and a commit word naming the current one; a
 * writer fills the other version and then publishes it with one atomic store. A writer
 * killed midway (even with SIGKILL while switched in) therefore leaves the old value, never
 * a torn one, and the kernel drops its segment lock with the process.
 *
 * Calls return 0 (or a count) or a negative exomem code (-EXO_..., error.h) and set errno
 * and exomem_last_error(), as the library does. Objects (jmp clients, servers, channels)
 * are used by one thread at a time. Switching changes what the whole process sees (see
 * exomem/vas.h): a process that switches must not touch the store's addresses from another
 * thread meanwhile.
 */
#ifndef EXOMEM_RPCJMP_H
#define EXOMEM_RPCJMP_H

#include <exomem/exomem.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define RPCJMP_PAYLOAD_MAX 65536u                   /* largest value of a record */
#define RPCJMP_BASE_DEFAULT UINT64_C(0x3a0000000000) /* 1 GiB aligned, above mmap's area */
#define RPCJMP_RECORDS_DEFAULT 32u
#define RPCJMP_NAME_MAX 48                          /* store names leave room for suffixes */

/* ---- records (in a mapped store; the caller has it switched in) ---- */

/* Bytes one record takes in the segment (two versions of RPCJMP_PAYLOAD_MAX bytes and
 * their headers, rounded to 4 KiB). */
size_t rpcjmp_record_stride(void);

/* Copy up to `cap` bytes of record `key`'s current value to buf; return how many (the
 * lesser of cap and the value's length). The caller holds the store's lock (shared or
 * exclusive). Never fails; never blocks. */
size_t rpcjmp_record_read(const void *base, unsigned key, void *buf, size_t cap);

/* The other version's buffer of record `key`: fill up to RPCJMP_PAYLOAD_MAX bytes there,
 * then rpcjmp_record_commit() them. The caller holds the store's lock exclusively. */
void *rpcjmp_record_begin(void *base, unsigned key);

/* Publish `len` bytes written at rpcjmp_record_begin() as key's value (one atomic store).
 * len must be at most RPCJMP_PAYLOAD_MAX (else nothing changes). Never blocks. */
void rpcjmp_record_commit(void *base, unsigned key, size_t len);

/* rpcjmp_record_begin + memcpy + rpcjmp_record_commit; len <= RPCJMP_PAYLOAD_MAX. */
void rpcjmp_record_write(void *base, unsigned key, const void *buf, size_t len);

/* What a record holds now, for checking it: its commit count (1 for the first value), the
 * current value's length and a pointer to its bytes in the segment. */
struct rpcjmp_record_view {
    uint64_t seq;
    size_t len;
    const uint8_t *data;
};

/* Fill *view for record `key`. -EXO_ECORRUPT when the current version's header does not
 * carry the commit count (what a torn commit would leave) or a length past
 * RPCJMP_PAYLOAD_MAX. Never blocks. */
int rpcjmp_record_peek(const void *base, unsigned key, struct rpcjmp_record_view *view);

/* ---- the store in the registry ---- */

/* Create store `name` (at most RPCJMP_NAME_MAX characters of [A-Za-z0-9._-]) of `nrecords`
 * records at `base` (0: RPCJMP_BASE_DEFAULT; a multiple of 1 GiB switches fastest), mode
 * 0600, every record's first value RPCJMP_PAYLOAD_MAX bytes of rpcjmp_fill(key, 1, ...).
 * -EXO_EINVAL (nrecords 0 or name NULL), -EXO_ENAMETOOLONG, and seg_alloc()'s and
 * vas_create()'s errors (-EXO_EEXIST, -EXO_EOVERLAP, ...); on failure nothing is left.
 * Blocks on the registry lock. Switches this process into the store and home again. */
int rpcjmp_store_create(const char *name, uint64_t base, unsigned nrecords);

/* Delete store `name`'s VASes and segment. -EXO_ENOENT (no such store; what exists is still
 * deleted), -EXO_EBUSY (a process has it switched in). Blocks on the registry lock. */
int rpcjmp_store_delete(const char *name);

/* The deterministic bytes a value of record `key` at commit `seq` has in tests and
 * benchmarks (a cheap generator, so both sides can check a copy). */
void rpcjmp_fill(unsigned key, uint64_t seq, void *buf, size_t len);

/* ---- clients that switch ---- */

struct rpcjmp_jmp {
    vhandle_t ro, rw;       /* attachments of "<name>.ro" and "<name>.rw" */
    uint8_t *base;
    unsigned nrecords;
};

/* Attach store `name`'s two VASes. -EXO_ENOENT, -EXO_EINVAL, vas_attach()'s errors. Never
 * blocks on segment locks. */
int rpcjmp_jmp_open(const char *name, struct rpcjmp_jmp *j);

/* Switch into the ".ro" VAS (shared lock), copy up to cap bytes of record key's value to
 * buf, switch home; returns the bytes copied. -EXO_EINVAL (key out of range), vas_switch()'s
 * errors. BLOCKS while a writer (or a server) holds the store. Returns home. */
long rpcjmp_jmp_read(struct rpcjmp_jmp *j, unsigned key, void *buf, size_t cap);

/* Switch into the ".rw" VAS (exclusive lock), make buf[0..len) record key's value, switch
 * home. -EXO_EINVAL (key out of range, len > RPCJMP_PAYLOAD_MAX), vas_switch()'s errors.
 * BLOCKS while another process holds the store. Returns home. */
int rpcjmp_jmp_write(struct rpcjmp_jmp *j, unsigned key, const void *buf, size_t len);

/* Detach both VASes (switching home first if needed). Never blocks. */
void rpcjmp_jmp_close(struct rpcjmp_jmp *j);

/* ---- channels: one client end and one server end ---- */

enum rpcjmp_transport {
    RPCJMP_PIPE = 1,        /* two pipes */
    RPCJMP_STREAM,          /* socketpair(AF_UNIX, SOCK_STREAM) or a connected socket */
    RPCJMP_SEQPACKET,       /* socketpair(AF_UNIX, SOCK_SEQPACKET): one message per call */
    RPCJMP_RING,            /* two SPSC rings of 64-byte slots in a shared mapping, polled */
};

#define RPCJMP_RING_SLOTS 64    /* slots per ring (56 payload bytes each): 3.5 KiB */

struct rpcjmp_ring_pair;

struct rpcjmp_chan {
    int transport;
    int rfd, wfd;                   /* pipes and sockets (the same fd for sockets) */
    struct rpcjmp_ring_pair *rings; /* RPCJMP_RING: the shared mapping */
    int side;                       /* RPCJMP_RING: 0 client, 1 server */
    unsigned tx, rx, rx_off;        /* RPCJMP_RING: next slot to fill / to read, and how
                                       much of the slot being read is consumed */
    uint8_t *bounce;                /* RPCJMP_SEQPACKET server end: a whole message */
    size_t bounce_len, bounce_off;
    int timeout_ms;                 /* RPCJMP_RING: longest wait for the peer; 0: no limit
                                       (the client end's default is 10000) */
    bool bound;                     /* RPCJMP_RING: this process's pid is in the mapping */
};

/* Make a connected pair of ends of `transport` in this process; fork, and let each process
 * close the end it does not use with rpcjmp_chan_close(). -EXO_EINVAL (unknown transport),
 * -EXO_ENOMEM, -EXO_EIO (pipe, socketpair, memfd_create or mmap failed; the message says
 * why). Never blocks. */
int rpcjmp_chan_pair(int transport, struct rpcjmp_chan *client, struct rpcjmp_chan *server);

/* Wrap a connected SOCK_STREAM socket (e.g. accepted from a listening UNIX socket) as an
 * end. Takes ownership of fd. -EXO_EINVAL (fd < 0). Never blocks. */
int rpcjmp_chan_from_socket(int fd, bool server, struct rpcjmp_chan *ch);

/* Close an end (fds, the mapping). Never blocks. */
void rpcjmp_chan_close(struct rpcjmp_chan *ch);

/* The transport's short name ("pipe", "stream", "seqpacket", "ring"), or "?" */
const char *rpcjmp_transport_name(int transport);

/* ---- clients that send messages ---- */

/* Ask the server for up to cap bytes of record key; returns the bytes received. -EXO_EIO
 * (the channel broke, a ring peer did not answer within timeout_ms, or a malformed
 * response), or the server's error (-EXO_EINVAL for a bad key). BLOCKS until the
 * server answers. */
long rpcjmp_call_read(struct rpcjmp_chan *ch, unsigned key, void *buf, size_t cap);

/* Ask the server to make buf[0..len) record key's value. Errors as rpcjmp_call_read(), and
 * -EXO_EINVAL for len > RPCJMP_PAYLOAD_MAX. BLOCKS until the server answers. */
int rpcjmp_call_write(struct rpcjmp_chan *ch, unsigned key, const void *buf, size_t len);

/* Ask the server to switch home, releasing the store's lock until its next request (so
 * that switching clients can enter). Errors as rpcjmp_call_read(). BLOCKS. */
int rpcjmp_call_release(struct rpcjmp_chan *ch);

/* Tell the server this client is done (it returns from rpcjmp_server_serve()). Blocks only
 * as long as a full ring or pipe does. */
int rpcjmp_call_close(struct rpcjmp_chan *ch);

/* ---- the server ---- */

struct rpcjmp_server {
    vhandle_t rw;
    uint8_t *base;
    unsigned nrecords;
    bool in;                /* switched into the store */
    uint64_t served;        /* requests answered */
};

/* Attach store `name`'s ".rw" VAS for serving. Errors as rpcjmp_jmp_open(). */
int rpcjmp_server_open(const char *name, struct rpcjmp_server *s);

/* Answer ch's requests until the client closes it (returns 0) or it breaks (-EXO_EIO,
 * also for a malformed request). Switches into the store at the first request and home on a release
 * request and at the end. BLOCKS: on the channel, and in vas_switch() while a switching
 * client holds the store. */
int rpcjmp_server_serve(struct rpcjmp_server *s, struct rpcjmp_chan *ch);

/* Switch home and detach. Never blocks. */
void rpcjmp_server_close(struct rpcjmp_server *s);

#endif
