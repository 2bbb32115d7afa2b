/* A segment record in format 1 (written by builds before the record gained pool_pages) is
 * still read: listed, attached with its data, and deleted. A format-1-sized file with a bad
 * checksum is still reported as corrupt, with the current format's message. */
#include "harness.h"
#include "seg/registry.h"
#include "seg/segment.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define MIB (UINT64_C(1) << 20)

/* Rewrite segment sid's record (rec, as loaded) as format 1 would have written it. */
static void downgrade(segid_t sid, const struct exo_seg_rec *recp, const char *root,
                      int break_checksum)
{
    struct exo_seg_rec rec = *recp;
    const size_t head = offsetof(struct exo_seg_rec, pool_pages);
    unsigned char old[sizeof rec];
    memcpy(old, &rec, head);
    uint32_t v1 = 1;
    memcpy(old + 8, &v1, sizeof v1);
    exo_record_seal(old, head + sizeof(uint64_t));
    if (break_checksum)
        old[head - 1] ^= 0x5a;
    char path[4096];
    snprintf(path, sizeof path, "%s/segs/%llu", root, (unsigned long long)sid);
    FILE *f = fopen(path, "wb"); /* truncates: a format 1 record is shorter */
    CHECK(f != NULL);
    CHECK_EQ(fwrite(old, 1, head + sizeof(uint64_t), f), head + sizeof(uint64_t));
    CHECK_EQ(fclose(f), 0);
}

int main(void)
{
    const char *root = test_root_setup();
    segid_t sid;
    CHECK_OK(seg_alloc("old", test_base(1), 2 * MIB, 0600, &sid));
    vasid_t vid;
    CHECK_OK(vas_create("oldv", 0600, &vid));
    CHECK_OK(seg_attach(vid, sid, SEG_RDWR));
    vhandle_t vh;
    CHECK_OK(vas_attach(vid, &vh));
    CHECK_OK(vas_switch(vh));
    strcpy((char *)(uintptr_t)test_base(1), "written before the downgrade");
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK_OK(vas_detach(vh));

    struct exo_seg_rec current;
    CHECK_OK(exo_seg_load(sid, &current));
    downgrade(sid, &current, root, 0);
    struct seg_info info[4];
    size_t n, corrupt;
    CHECK_OK(seg_list(info, 4, &n, &corrupt));
    CHECK_EQ(n, 1);
    CHECK_EQ(corrupt, 0);
    CHECK_EQ(info[0].size, 2 * MIB);
    CHECK_OK(vas_attach(vid, &vh));
    CHECK_OK(vas_switch(vh));
    CHECK(strcmp((char *)(uintptr_t)test_base(1), "written before the downgrade") == 0);
    CHECK_OK(vas_switch(VAS_HOME));
    CHECK_OK(vas_detach(vh));

    downgrade(sid, &current, root, 1);
    CHECK_OK(seg_list(info, 4, &n, &corrupt));
    CHECK_EQ(n, 0);
    CHECK_EQ(corrupt, 1);
    struct exo_seg_rec rec;
    CHECK_ERR(exo_seg_load(sid, &rec), EXO_ECORRUPT);
    CHECK(strstr(exomem_last_error(), "wrong size") != NULL);

    downgrade(sid, &current, root, 0); /* repaired: it can be deleted the normal way */
    CHECK_OK(vas_delete(vid));
    CHECK_OK(seg_delete(sid));
    CHECK_ERR(seg_find("old", &sid), EXO_ENOENT);
    printf("test_format1: ok\n");
    return 0;
}
