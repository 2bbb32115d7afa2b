/* The per-user default registry (no EXOMEM_ROOT): each user gets /dev/shm/exomem-<uid>, made
 * 0700 with private subdirectories and files, and a default directory that another user
 * prepared (owned by them, a symbolic link, or writable by others) is refused with
 * EXO_EACCES, nothing written into it. A missing EXOMEM_ROOT directory is made 0700 too, and
 * a group's directory (2770) gives group-shared subdirectories and files.
 *
 * The user is nobody (65534); root plays the other user. The parent never calls exomem (its
 * configuration would be read once and inherited): each case runs in a child that drops to
 * nobody first. Everything made is removed at exit. */
#include "harness.h"

#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NOBODY 65534
#define NOGROUP 65534
#define OWN_ROOT "/dev/shm/exomem-65534"
#define MIB (UINT64_C(1) << 20)

static char explicit_root[64];
static char group_root[64];

static void cleanup(void)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s %s %s", OWN_ROOT, explicit_root, group_root);
    if (system(cmd) != 0)
        fprintf(stderr, "cleanup: %s failed\n", cmd);
}

static void become_nobody(void)
{
    CHECK_OK(setgroups(0, NULL));
    CHECK_OK(setgid(NOGROUP));
    CHECK_OK(setuid(NOBODY));
}

static mode_t mode_of(const char *dir, const char *rel)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    struct stat st;
    CHECK_OK(lstat(p, &st));
    return st.st_mode & 07777;
}

static uid_t owner_of(const char *path)
{
    struct stat st;
    CHECK_OK(lstat(path, &st));
    return st.st_uid;
}

/* nobody's first segment in the default registry: refused with `want` (0: succeeds). */
static void alloc_as_nobody(void *arg)
{
    int want = *(const int *)arg;
    unsetenv("EXOMEM_ROOT");
    become_nobody();
    segid_t sid = 0;
    if (want) {
        CHECK_ERR(seg_alloc("mine", test_base(0), MIB, 0600, &sid), want);
        if (want == EXO_EACCES) { /* the message names the directory and the way out */
            CHECK(strstr(exomem_last_error(), OWN_ROOT) != NULL);
            CHECK(strstr(exomem_last_error(), "EXOMEM_ROOT") != NULL);
        }
        return;
    }
    CHECK(strcmp(exomem_root(), OWN_ROOT) == 0);
    CHECK_OK(seg_alloc("mine", test_base(0), MIB, 0600, &sid));
    vasid_t vid;
    CHECK_OK(vas_create("v", 0600, &vid));
    CHECK_OK(seg_find("mine", &sid));
}

/* The attacker's directory must be left exactly as it was: empty. */
static void check_empty(const char *dir)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A %s)\"", dir);
    CHECK_EQ(system(cmd), 0);
}

static void prepared_by_another_user(void)
{
    int want = EXO_EACCES;
    /* Owned by root, open to all: the classic trap. */
    CHECK_OK(mkdir(OWN_ROOT, 0777));
    CHECK_OK(chmod(OWN_ROOT, 0777));
    CHECK_EQ(test_in_child(alloc_as_nobody, &want), 0);
    check_empty(OWN_ROOT);
    CHECK_OK(rmdir(OWN_ROOT));

    /* A link to a directory of root's. */
    char target[] = "/dev/shm/exomem-trap-XXXXXX";
    CHECK(mkdtemp(target) != NULL);
    CHECK_OK(chmod(target, 0777));
    CHECK_OK(symlink(target, OWN_ROOT));
    CHECK_EQ(test_in_child(alloc_as_nobody, &want), 0);
    check_empty(target);
    CHECK_OK(unlink(OWN_ROOT));
    CHECK_OK(rmdir(target));

    /* nobody's own, but writable by others (left so, or prepared and chowned). */
    CHECK_OK(mkdir(OWN_ROOT, 0777));
    CHECK_OK(chmod(OWN_ROOT, 0777));
    CHECK_OK(chown(OWN_ROOT, NOBODY, NOGROUP));
    CHECK_EQ(test_in_child(alloc_as_nobody, &want), 0);
    check_empty(OWN_ROOT);
    CHECK_OK(rmdir(OWN_ROOT));
}

static void made_fresh(void)
{
    int want = 0;
    CHECK_EQ(test_in_child(alloc_as_nobody, &want), 0);
    CHECK_EQ(owner_of(OWN_ROOT), NOBODY);
    CHECK_EQ(mode_of(OWN_ROOT, "."), 0700);
    CHECK_EQ(mode_of(OWN_ROOT, "segs"), 0700);
    CHECK_EQ(mode_of(OWN_ROOT, "vases"), 0700);
    CHECK_EQ(mode_of(OWN_ROOT, "names"), 0700);
    CHECK_EQ(mode_of(OWN_ROOT, "lock"), 0600);
    CHECK_EQ(mode_of(OWN_ROOT, "ids"), 0600);
    /* The same user's next process finds what the first one made. */
    want = EXO_EEXIST;
    CHECK_EQ(test_in_child(alloc_as_nobody, &want), 0);
}

static void alloc_in(void *arg)
{
    setenv("EXOMEM_ROOT", (const char *)arg, 1);
    become_nobody();
    segid_t sid;
    CHECK_OK(seg_alloc("s", test_base(1), MIB, 0660, &sid));
}

/* A missing EXOMEM_ROOT is made private; a group's directory keeps the group's sharing. */
static void explicit_roots(void)
{
    snprintf(explicit_root, sizeof explicit_root, "/dev/shm/exomem-explicit-%d", (int)getpid());
    CHECK_EQ(test_in_child(alloc_in, explicit_root), 0);
    CHECK_EQ(mode_of(explicit_root, "."), 0700);
    CHECK_EQ(mode_of(explicit_root, "segs"), 0700);

    snprintf(group_root, sizeof group_root, "/dev/shm/exomem-group-%d", (int)getpid());
    CHECK_OK(mkdir(group_root, 0700));
    CHECK_OK(chown(group_root, 0, NOGROUP));
    CHECK_OK(chmod(group_root, 02770));
    CHECK_EQ(test_in_child(alloc_in, group_root), 0);
    CHECK_EQ(mode_of(group_root, "segs"), 03770);
    CHECK_EQ(mode_of(group_root, "names"), 03770);
    CHECK_EQ(mode_of(group_root, "lock"), 0660);
    CHECK_EQ(mode_of(group_root, "ids"), 0660);
}

int main(void)
{
    if (geteuid() != 0)
        SKIP("needs root to act as two users\n");
    if (access(OWN_ROOT, F_OK) == 0)
        SKIP("%s exists already (a real registry of nobody's?): left alone\n", OWN_ROOT);
    atexit(cleanup);
    prepared_by_another_user();
    made_fresh();
    explicit_roots();
    printf("test_default_registry: ok\n");
    return 0;
}
