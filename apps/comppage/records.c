/* Text records (records.h). */
#include "records.h"

#include <stdio.h>
#include <string.h>

static const char *const names[] = {"alice", "bob", "carol", "dave", "erin", "frank",
                                    "grace", "heidi", "ivan", "judy", "mallory", "oscar"};
static const char *const cities[] = {"Berlin", "Tokyo", "Lagos", "Lima", "Oslo", "Pune"};

void comppage_record(uint64_t id, uint64_t version, char out[COMPPAGE_RECORD])
{
    uint64_t h = (id + 1) * 0x9E3779B97F4A7C15u;
    memset(out, ' ', COMPPAGE_RECORD);
    int n = snprintf(out, COMPPAGE_RECORD,
                     "{\"id\":%llu,\"version\":%llu,\"name\":\"%s-%llu\",\"city\":\"%s\","
                     "\"balance\":%llu,\"visits\":%llu,\"note\":\"customer since %llu\"}",
                     (unsigned long long)id, (unsigned long long)version,
                     names[h % 12], (unsigned long long)(h >> 52),
                     cities[(h >> 8) % 6], (unsigned long long)((h >> 20) % 100000),
                     (unsigned long long)version, (unsigned long long)(1990 + (h >> 40) % 35));
    if (n >= 0 && n < COMPPAGE_RECORD)
        out[n] = ' '; /* padded with spaces, as fixed-width rows are */
    out[COMPPAGE_RECORD - 1] = '\n';
}

bool comppage_record_ok(const char rec[COMPPAGE_RECORD], uint64_t id, uint64_t version)
{
    char want[COMPPAGE_RECORD];
    comppage_record(id, version, want);
    return memcmp(rec, want, COMPPAGE_RECORD) == 0;
}
