/* The registry: the directory (EXOMEM_ROOT) where segments and VASes persist.
 *
 *   lock              flock: shared for readers, exclusive for changes
 *   ids               the next id (decimal); ids are never reused
 *   segs/<id>         segment record;   segs/<id>.data  its data (4K pages)
 *   vases/<id>        VAS record (its mode is the VAS's permission)
 *   names/seg:<NAME>  symlink to "<id>"; names/vas:<NAME> likewise
 *   pager/<pid>-<n>.stats  a live pager region's statistics (src/pager/publish.c)
 *
 * A new object becomes visible only when its name link is made, after its files are
 * complete, so a crash never leaves a half-made object behind a name. Records end with a
 * 64-bit checksum; a record that is short, of another kind or fails its checksum is
 * EXO_ECORRUPT. */
#ifndef EXOMEM_REGISTRY_H
#define EXOMEM_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define EXO_PATH_MAX 4096

enum exo_kind { EXO_KIND_SEG, EXO_KIND_VAS };

/* Make sure the registry directories exist (creating them when `create`). -EXO_ENOENT if
 * they do not and !create. */
int exo_reg_open(bool create);

/* Reach a registry subdirectory outside the object store ("pager": published pager
 * statistics), made like the others when `create`. -EXO_ENOENT if missing and !create. */
int exo_reg_open_extra(const char *name, bool create);

/* Take the registry lock (exclusive for changes); *fd receives the lock's descriptor. */
int exo_reg_lock(bool exclusive, int *fd);
void exo_reg_unlock(int fd);

/* The next unused id (never one a segment or VAS has); the caller holds the exclusive
 * registry lock. Nothing is written: exo_reg_commit_id() moves the counter past it once the
 * object is complete, so a creation that fails leaves the registry as it was. */
int exo_reg_next_id(uint64_t *id);
int exo_reg_commit_id(uint64_t id);
/* Set the counter back to id when id was the last one handed out and its object is gone
 * again (a seg_clone whose copy failed): best effort, takes the registry lock. */
void exo_reg_forget_id(uint64_t id);

/* Write the path of a registry file ("segs/12.data", ...) into buf. */
int exo_reg_path(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* May the caller delete or re-permission an object owned by `owner` (its owner, or root)? */
bool exo_reg_may_administer(uid_t owner);

/* Check an object name: EXO_EBADNAME or EXO_ENAMETOOLONG, with a message. */
int exo_check_name(const char *name);

/* Resolve, create (-EXO_EEXIST if taken) or remove a name link. */
int exo_name_lookup(enum exo_kind kind, const char *name, uint64_t *id);
int exo_name_link(enum exo_kind kind, const char *name, uint64_t id);
int exo_name_unlink(enum exo_kind kind, const char *name);

/* Ids of all named objects of a kind, sorted; *ids is malloc'd (free it). */
int exo_name_list(enum exo_kind kind, uint64_t **ids, size_t *count);

/* List the named objects of a kind, sorted by id, into out[0..cap) (items of item_size
 * bytes, each filled by load(id, item_buf)); *count gets how many there are, *corrupt (may
 * be NULL) how many could not be loaded. No registry yet means an empty list. */
int exo_reg_list(enum exo_kind kind, int (*load)(uint64_t id, void *item), void *item_buf,
                 size_t item_size, void *out, size_t cap, size_t *count, size_t *corrupt);

/* Records: fixed structs that start with an 8-byte magic and end with a checksum field. */
void exo_record_seal(void *rec, size_t len);
/* Create a new record file atomically (never replacing one) with the given mode. */
int exo_record_create(const char *path, const void *rec, size_t len, mode_t mode);
/* Replace a record's contents in place, in one write (caller holds the registry lock). */
int exo_record_rewrite(const char *path, const void *rec, size_t len);
/* Read and verify a record: -EXO_ENOENT, -EXO_ECORRUPT, -EXO_EVERSION. The version is the
 * uint32 right after the magic. */
int exo_record_read(const char *path, void *rec, size_t len, const char magic[8],
                    uint32_t version);

#endif
