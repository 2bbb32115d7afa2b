/* Fuzz target: a segment record (segs/<id>) as anyone who may write the registry could
 * leave it. Input byte 0 chooses whether the rest is sealed with a valid checksum (so that
 * mutations reach the checks behind it); the record is then read through the public calls
 * that read it. Every input must give an error code or a success, never a crash. */
#include "fuzz_registry.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t rec[4096];
    fuzz_registry_init();
    fuzz_seed("segs/1", 1);
    if (size < 1 || size - 1 > sizeof rec)
        return 0;
    memcpy(rec, data + 1, size - 1);
    if (data[0] & 1)
        fuzz_seal(rec, size - 1);
    fuzz_write("segs/1", rec, size - 1);
    segid_t sid;
    struct seg_info info, list[4];
    struct seg_backing backing;
    size_t count, corrupt;
    vhandle_t vh;
    seg_find("f", &sid);
    seg_ctl(fuzz_seg, SEG_CTL_INFO, &info);
    seg_list(list, 4, &count, &corrupt);
    seg_backing(fuzz_seg, &backing);
    if (vas_attach(fuzz_vas, &vh) == 0 && vas_switch(vh) == 0) {
        vas_switch(VAS_HOME);
        vas_detach(vh);
    } else if (vh > 0) {
        vas_detach(vh);
    }
    return 0;
}
