/* Fuzz target: a name link (names/seg:NAME -> "<id>") with any target text, and the id
 * counter (ids) with any contents: lookups, listing and the next creation must cope. */
#include "fuzz_registry.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_registry_init();
    fuzz_seed("ids", 1);
    if (size < 1 || size > 300)
        return 0;
    char target[300];
    size_t n = 0;
    for (size_t i = 1; i < size; i++)
        if (data[i])
            target[n++] = (char)data[i];
    target[n] = '\0';
    segid_t sid;
    struct seg_info list[4];
    size_t count, corrupt;
    if (data[0] & 1) {
        /* The id counter: the next segment must still get an id nobody has. */
        fuzz_write("ids", (const uint8_t *)target, n);
        segid_t made;
        if (seg_alloc("g", UINT64_C(0x3d0000000000), 1 << 20, 0600, &made) == 0) {
            if (made == fuzz_seg || made == fuzz_vas)
                abort();
            seg_delete(made);
        }
        return 0;
    }
    if (!n)
        return 0;
    unlink(fuzz_path("names/seg:h"));
    if (symlink(target, fuzz_path("names/seg:h")) != 0)
        return 0;
    seg_find("h", &sid);
    seg_list(list, 4, &count, &corrupt);
    unlink(fuzz_path("names/seg:h"));
    return 0;
}
