/* Fuzz target: a VAS record (vases/<id>), sealed or not (input byte 0), read through the
 * public calls that read it: find, info, list, attach and switch. */
#include "fuzz_registry.h"

#include <stdio.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t rec[65536];
    static char rel[32];
    fuzz_registry_init();
    if (!rel[0])
        snprintf(rel, sizeof rel, "vases/%llu", (unsigned long long)fuzz_vas);
    fuzz_seed(rel, 1);
    if (size < 1 || size - 1 > sizeof rec)
        return 0;
    memcpy(rec, data + 1, size - 1);
    if (data[0] & 1)
        fuzz_seal(rec, size - 1);
    fuzz_write(rel, rec, size - 1);
    vasid_t vid;
    static struct vas_info info, list[2];
    size_t count, corrupt;
    vhandle_t vh = 0;
    vas_find("fv", &vid);
    vas_ctl(VAS_CTL_INFO, fuzz_vas, &info);
    vas_list(list, 2, &count, &corrupt);
    if (vas_attach(fuzz_vas, &vh) == 0) {
        if (vas_switch(vh) == 0)
            vas_switch(VAS_HOME);
        vas_detach(vh);
    }
    return 0;
}
