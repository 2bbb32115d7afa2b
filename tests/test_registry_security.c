/* The registry as a security boundary: another local user (nobody) who may write the
 * registry's directories attacks root's objects, and each attack fails to hang, stall,
 * redirect or deny root's calls:
 *  (a) a FIFO planted where a record belongs: listed as corrupt, never opened for waiting;
 *  (b) the registry lock held: root's calls give up after EXOMEM_LOCK_TIMEOUT with
 *      EXO_EBUSY naming the holder, instead of waiting forever;
 *  (c) the id counter forged ("-5", or set back): new objects still get fresh ids that no
 *      segment or VAS has;
 *  (d) a name link made to point at root's object: not followed.
 * And a registry directory the caller cannot read is an error, not an empty list.
 * Every call runs under alarm(): a regression fails instead of hanging. */
#include "harness.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOBODY 65534
#define MIB (UINT64_C(1) << 20)

static const char *root_dir;

static void become_nobody(void)
{
    CHECK_OK(setgroups(0, NULL));
    CHECK_OK(setgid(NOBODY));
    CHECK_OK(setuid(NOBODY));
    CHECK(geteuid() == NOBODY);
}

static void path_of(char *buf, size_t len, const char *rel)
{
    snprintf(buf, len, "%s/%s", root_dir, rel);
}

/* (a) nobody plants a FIFO as segs/990 and a name for it. */
static void plant_fifo(void *arg)
{
    (void)arg;
    become_nobody();
    char p[4096], n[4096];
    path_of(p, sizeof p, "segs/990");
    CHECK_OK(mkfifo(p, 0666));
    path_of(n, sizeof n, "names/seg:trap");
    CHECK_OK(symlink("990", n));
}

/* (b) nobody holds the registry lock until killed. */
static void hold_lock(void *arg)
{
    int *ready = arg;
    become_nobody();
    char p[4096];
    path_of(p, sizeof p, "lock");
    int fd = open(p, O_RDONLY);
    CHECK(fd >= 0);
    CHECK_OK(flock(fd, LOCK_EX));
    CHECK(write(ready[1], "x", 1) == 1);
    pause();
}

/* (c) nobody forges the id counter. */
static void forge_ids(void *arg)
{
    become_nobody();
    char p[4096];
    path_of(p, sizeof p, "ids");
    int fd = open(p, O_WRONLY | O_TRUNC);
    CHECK(fd >= 0);
    const char *text = arg;
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
}

/* (d) nobody names root's segment "mine". */
static segid_t victim;
static void retarget(void *arg)
{
    (void)arg;
    become_nobody();
    char n[4096], target[32];
    path_of(n, sizeof n, "names/seg:mine");
    snprintf(target, sizeof target, "%llu", (unsigned long long)victim);
    CHECK_OK(symlink(target, n));
}

int main(void)
{
    setenv("EXOMEM_LOCK_TIMEOUT", "1000", 1); /* read once, with EXOMEM_ROOT */
    root_dir = test_root_setup();
    segid_t s0;
    CHECK_OK(seg_alloc("s0", test_base(0), MIB, 0644, &s0));
    victim = s0;

    /* (a) */
    CHECK_EQ(test_in_child(plant_fifo, NULL), 0);
    alarm(20);
    struct seg_info segs[8];
    size_t count, corrupt;
    CHECK_OK(seg_list(segs, 8, &count, &corrupt));
    CHECK_EQ(count, 1);
    CHECK_EQ(corrupt, 1);
    segid_t trap;
    CHECK_OK(seg_find("trap", &trap)); /* nobody's name for nobody's "object" */
    CHECK_EQ(trap, 990);
    struct seg_info si;
    CHECK_ERR(seg_ctl(trap, SEG_CTL_INFO, &si), EXO_ECORRUPT);
    CHECK(strstr(exomem_last_error(), "not a regular file") != NULL);
    alarm(0);

    /* (b) */
    int ready[2];
    CHECK_OK(pipe(ready));
    fflush(NULL);
    pid_t holder = fork();
    CHECK(holder >= 0);
    if (holder == 0) {
        hold_lock(ready);
        _exit(0);
    }
    char c;
    CHECK(read(ready[0], &c, 1) == 1);
    alarm(20);
    segid_t s1;
    CHECK_ERR(seg_alloc("s1", test_base(1), MIB, 0600, &s1), EXO_EBUSY);
    CHECK(strstr(exomem_last_error(), "held by") != NULL);
    char pid_text[32];
    snprintf(pid_text, sizeof pid_text, "process %d", (int)holder);
    CHECK(strstr(exomem_last_error(), pid_text) != NULL);
    CHECK_ERR(seg_list(segs, 8, &count, &corrupt), EXO_EBUSY);
    alarm(0);
    kill(holder, SIGKILL);
    waitpid(holder, NULL, 0);
    CHECK_OK(seg_alloc("s1", test_base(1), MIB, 0600, &s1));

    /* (c) a forged "-5", then a counter set back to 1: fresh ids all the same. */
    char ids[4096];
    path_of(ids, sizeof ids, "ids");
    CHECK_OK(chmod(ids, 0666)); /* today's default: the attack must be harmless even so */
    CHECK_EQ(test_in_child(forge_ids, "-5\n"), 0);
    vasid_t v0;
    CHECK_OK(vas_create("v0", 0600, &v0));
    CHECK(v0 > s1 && v0 != 990);
    CHECK_EQ(test_in_child(forge_ids, "1\n"), 0);
    segid_t s2;
    CHECK_OK(seg_alloc("s2", test_base(2), MIB, 0600, &s2));
    CHECK(s2 != s0 && s2 != s1 && s2 != v0 && s2 != 990);

    /* (d) */
    CHECK_EQ(test_in_child(retarget, NULL), 0);
    segid_t found;
    CHECK_ERR(seg_find("mine", &found), EXO_ECORRUPT);
    CHECK_OK(seg_find("s0", &found));
    CHECK_EQ(found, s0);

    /* An unreadable segs/ directory: an error, not an empty list (as nobody; root reads
     * anything). */
    char segs_dir[4096];
    path_of(segs_dir, sizeof segs_dir, "segs");
    CHECK_OK(chmod(segs_dir, 01770));
    pid_t lister = fork();
    if (lister == 0) {
        become_nobody();
        alarm(20);
        size_t n = 99, bad = 99;
        int rc = seg_list(segs, 8, &n, &bad);
        _exit(rc == -EXO_EACCES ? 0 : 1);
    }
    int status;
    CHECK(waitpid(lister, &status, 0) == lister);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_OK(chmod(segs_dir, 01777));

    /* Clean up what nobody planted, then root's objects. */
    char p[4096];
    path_of(p, sizeof p, "segs/990");
    unlink(p);
    path_of(p, sizeof p, "names/seg:trap");
    unlink(p);
    path_of(p, sizeof p, "names/seg:mine");
    unlink(p);
    CHECK_OK(vas_delete(v0));
    CHECK_OK(seg_delete(s2));
    CHECK_OK(seg_delete(s1));
    CHECK_OK(seg_delete(s0));
    printf("test_registry_security: ok\n");
    return 0;
}
