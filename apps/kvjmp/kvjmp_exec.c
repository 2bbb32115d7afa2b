/* kvjmp_exec(): one command, answered in RESP2 as redis-server 7.0 answers it. The reply is
 * built in process memory (the caller's buffer), so read-only commands run under the
 * shared lock. Each command switches in once and out once. */
#include "kvjmp_int.h"

#include <exomem/error.h>

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define E_WRONGTYPE "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
#define E_NOTINT "-ERR value is not an integer or out of range\r\n"
#define E_OVERFLOW "-ERR increment or decrement would overflow\r\n"
#define E_SYNTAX "-ERR syntax error\r\n"

struct cmd_ctx {
    struct kvjmp *c;
    int argc;
    const char *const *argv;
    const size_t *len;
    struct kvjmp_buf *out;
};

static int put_str(struct kvjmp_buf *b, const char *s)
{
    return kvjmp_buf_put(b, s, strlen(s));
}

static int put_int(struct kvjmp_buf *b, long long v)
{
    char h[32];
    return kvjmp_buf_put(b, h, (size_t)snprintf(h, sizeof h, ":%lld\r\n", v));
}

static int put_bulk(struct kvjmp_buf *b, const char *p, size_t n)
{
    char h[32];
    int rc = kvjmp_buf_put(b, h, (size_t)snprintf(h, sizeof h, "$%zu\r\n", n));
    if (rc == 0)
        rc = kvjmp_buf_put(b, p, n);
    return rc ? rc : kvjmp_buf_put(b, "\r\n", 2);
}

static int put_array(struct kvjmp_buf *b, long long n)
{
    char h[32];
    return kvjmp_buf_put(b, h, (size_t)snprintf(h, sizeof h, "*%lld\r\n", n));
}

/* A command's failure as its reply: command errors become error replies; exomem's own
 * codes (no memory, switch failures) are returned. */
static int put_failure(struct kvjmp_buf *b, int rc)
{
    switch (-rc) {
    case KVJMP_WRONGTYPE:
        return put_str(b, E_WRONGTYPE);
    case KVJMP_NOTINT:
        return put_str(b, E_NOTINT);
    case KVJMP_OVERFLOW:
        return put_str(b, E_OVERFLOW);
    default:
        return rc;
    }
}

/* The value of a string read (GET, MGET element): bulk, nil, or (wrong type) err_reply. */
static int put_value(struct kvjmp_buf *b, const struct kvj_entry *e, int nil_for_wrongtype)
{
    if (!e)
        return put_str(b, "$-1\r\n");
    char num[24];
    const char *p;
    size_t n;
    if (kvj_string_of(e->val, num, &p, &n) != 0)
        return nil_for_wrongtype ? put_str(b, "$-1\r\n") : put_str(b, E_WRONGTYPE);
    return put_bulk(b, p, n);
}

static int cmd_get(struct cmd_ctx *x, const struct kvj_store *st)
{
    return put_value(x->out, st ? kvj_lookup(&st->keys, x->argv[1], x->len[1]) : NULL, 0);
}

static int cmd_mget(struct cmd_ctx *x, const struct kvj_store *st)
{
    int rc = put_array(x->out, x->argc - 1);
    for (int i = 1; i < x->argc && rc == 0; i++)
        rc = put_value(x->out, st ? kvj_lookup(&st->keys, x->argv[i], x->len[i]) : NULL, 1);
    return rc;
}

static int cmd_exists(struct cmd_ctx *x, const struct kvj_store *st)
{
    long long n = 0;
    for (int i = 1; i < x->argc && st; i++)
        n += kvj_lookup(&st->keys, x->argv[i], x->len[i]) != NULL;
    return put_int(x->out, n);
}

static int cmd_hget(struct cmd_ctx *x, const struct kvj_store *st)
{
    const struct kvj_val *v = NULL;
    if (st) {
        int rc = kvj_hash_field(kvj_lookup(&st->keys, x->argv[1], x->len[1]), x->argv[2],
                                x->len[2], &v);
        if (rc)
            return put_failure(x->out, rc);
    }
    return v ? put_bulk(x->out, v->bytes, v->len) : put_str(x->out, "$-1\r\n");
}

static int cmd_dbsize(struct cmd_ctx *x, const struct kvj_store *st)
{
    return put_int(x->out, st ? (long long)st->keys.count : 0);
}

static int cmd_set(struct cmd_ctx *x, struct kvj_writer *w)
{
    if (x->argc > 3)
        return put_str(x->out, E_SYNTAX); /* options (EX, NX, ...) are not supported */
    int rc = kvj_do_set(w, x->argv[1], x->len[1], x->argv[2], x->len[2]);
    return rc ? rc : put_str(x->out, "+OK\r\n");
}

static int cmd_del(struct cmd_ctx *x, struct kvj_writer *w)
{
    long long n = 0;
    for (int i = 1; i < x->argc; i++)
        n += kvj_remove(w, &w->st->keys, x->argv[i], x->len[i]);
    return put_int(x->out, n);
}

static int cmd_incr(struct cmd_ctx *x, struct kvj_writer *w)
{
    int64_t v;
    int rc = kvj_do_incr(w, x->argv[1], x->len[1], &v);
    return rc ? put_failure(x->out, rc) : put_int(x->out, v);
}

static int cmd_hset(struct cmd_ctx *x, struct kvj_writer *w)
{
    if (x->argc % 2)
        return 1; /* arity */
    long long added = 0;
    for (int i = 2; i < x->argc; i += 2) {
        int rc = kvj_do_hset(w, x->argv[1], x->len[1], x->argv[i], x->len[i], x->argv[i + 1],
                             x->len[i + 1]);
        if (rc < 0)
            return put_failure(x->out, rc);
        added += rc;
    }
    return put_int(x->out, added);
}

static int cmd_flushall(struct cmd_ctx *x, struct kvj_writer *w)
{
    int rc = kvj_clear(w);
    return rc ? rc : put_str(x->out, "+OK\r\n");
}

/* Commands that need no store. */
static int cmd_ping(struct cmd_ctx *x)
{
    if (x->argc > 2)
        return 1;
    return x->argc == 2 ? put_bulk(x->out, x->argv[1], x->len[1]) : put_str(x->out, "+PONG\r\n");
}

static int cmd_echo(struct cmd_ctx *x)
{
    return put_bulk(x->out, x->argv[1], x->len[1]);
}

/* CONFIG GET for the parameters redis-benchmark asks about; others match nothing. */
static int cmd_config(struct cmd_ctx *x)
{
    if (x->len[1] != 3 || strncasecmp(x->argv[1], "get", 3) != 0)
        return put_str(x->out, "-ERR kvjmp supports only CONFIG GET\r\n");
    static const char *const known[][2] = { { "save", "" }, { "appendonly", "no" } };
    int n = 0;
    for (size_t k = 0; k < 2; k++)
        for (int i = 2; i < x->argc; i++)
            if (x->len[i] == strlen(known[k][0]) &&
                strncasecmp(x->argv[i], known[k][0], x->len[i]) == 0) {
                n++;
                break;
            }
    int rc = put_array(x->out, 2 * n);
    for (size_t k = 0; k < 2 && rc == 0; k++)
        for (int i = 2; i < x->argc; i++)
            if (x->len[i] == strlen(known[k][0]) &&
                strncasecmp(x->argv[i], known[k][0], x->len[i]) == 0) {
                rc = put_bulk(x->out, known[k][0], strlen(known[k][0]));
                if (rc == 0)
                    rc = put_bulk(x->out, known[k][1], strlen(known[k][1]));
                break;
            }
    return rc;
}

enum access { NONE, READ, WRITE };

struct command {
    const char *name;
    int arity; /* as Redis: n exactly, -n at least n (the name included) */
    enum access access;
    int (*read)(struct cmd_ctx *, const struct kvj_store *);
    int (*write)(struct cmd_ctx *, struct kvj_writer *);
    int (*plain)(struct cmd_ctx *);
};

static const struct command commands[] = {
    { "get", 2, READ, cmd_get, NULL, NULL },
    { "mget", -2, READ, cmd_mget, NULL, NULL },
    { "exists", -2, READ, cmd_exists, NULL, NULL },
    { "hget", 3, READ, cmd_hget, NULL, NULL },
    { "dbsize", 1, READ, cmd_dbsize, NULL, NULL },
    { "set", -3, WRITE, NULL, cmd_set, NULL },
    { "del", -2, WRITE, NULL, cmd_del, NULL },
    { "incr", 2, WRITE, NULL, cmd_incr, NULL },
    { "hset", -4, WRITE, NULL, cmd_hset, NULL },
    { "flushall", -1, WRITE, NULL, cmd_flushall, NULL },
    { "ping", -1, NONE, NULL, NULL, cmd_ping },
    { "echo", 2, NONE, NULL, NULL, cmd_echo },
    { "config", -3, NONE, NULL, NULL, cmd_config },
};

static int put_arity_error(struct kvjmp_buf *b, const char *name)
{
    char m[128];
    return put_str(b, (snprintf(m, sizeof m, "-ERR wrong number of arguments for '%s' command\r\n",
                                name), m));
}

static int put_unknown(struct cmd_ctx *x)
{
    /* As redis 7.0: the name and the first arguments, quoted, up to 128 bytes of them. */
    char m[512];
    int n = snprintf(m, sizeof m, "-ERR unknown command '%.*s', with args beginning with: ",
                     (int)(x->len[0] > 128 ? 128 : x->len[0]), x->argv[0]);
    size_t args = 0;
    for (int i = 1; i < x->argc && args < 128; i++) {
        int k = snprintf(m + n, sizeof m - (size_t)n, "'%.*s' ",
                         (int)(x->len[i] < 128 - args ? x->len[i] : 128 - args), x->argv[i]);
        args += (size_t)k;
        n += k;
    }
    snprintf(m + n, sizeof m - (size_t)n, "\r\n");
    return put_str(x->out, m);
}

int kvjmp_exec(struct kvjmp *c, int argc, const char *const *argv, const size_t *argvlen,
               struct kvjmp_buf *out)
{
    if (argc < 1)
        return exomem_set_error(EXO_EINVAL, "kvjmp_exec: no command");
    struct cmd_ctx x = { c, argc, argv, argvlen, out };
    const struct command *cmd = NULL;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strlen(commands[i].name) == argvlen[0] &&
            strncasecmp(commands[i].name, argv[0], argvlen[0]) == 0)
            cmd = &commands[i];
    if (!cmd)
        return put_unknown(&x);
    if (cmd->arity > 0 ? argc != cmd->arity : argc < -cmd->arity)
        return put_arity_error(out, cmd->name);
    size_t mark = out->len;
    int rc;
    if (cmd->access == NONE) {
        rc = cmd->plain(&x);
    } else if (cmd->access == READ) {
        const struct kvj_store *st;
        if ((rc = kvjmp_enter_read(c, &st)) != 0)
            return rc;
        rc = cmd->read(&x, st);
        int r2 = kvjmp_leave(c);
        rc = rc ? rc : r2;
    } else {
        struct kvj_writer w;
        if ((rc = kvjmp_enter_write(c, &w)) != 0)
            return rc;
        rc = cmd->write(&x, &w);
        int r2 = kvjmp_leave(c);
        rc = rc ? rc : r2;
    }
    if (rc == 1) { /* an arity rule beyond the table's (HSET pairs, PING) */
        out->len = mark;
        return put_arity_error(out, cmd->name);
    }
    if (rc < 0)
        out->len = mark;
    return rc;
}
