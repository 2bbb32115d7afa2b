/* A small list of reserved ranges; segments per process number in the tens. */
#include "seg/claims.h"
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>

struct claim {
    uint64_t lo, hi;
};

static pthread_mutex_t claims_lock = PTHREAD_MUTEX_INITIALIZER;
static struct claim *claims;
static size_t nclaims, capclaims;

int exo_claims_add(uint64_t lo, uint64_t hi)
{
    pthread_mutex_lock(&claims_lock);
    if (nclaims == capclaims) {
        size_t cap = capclaims ? capclaims * 2 : 16;
        struct claim *grown = realloc(claims, cap * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&claims_lock);
            return -EXO_ENOMEM;
        }
        claims = grown;
        capclaims = cap;
    }
    claims[nclaims++] = (struct claim){lo, hi};
    pthread_mutex_unlock(&claims_lock);
    return 0;
}

void exo_claims_remove(uint64_t lo, uint64_t hi)
{
    pthread_mutex_lock(&claims_lock);
    for (size_t i = 0; i < nclaims; i++) {
        if (claims[i].lo == lo && claims[i].hi == hi) {
            claims[i] = claims[--nclaims];
            break;
        }
    }
    pthread_mutex_unlock(&claims_lock);
}

bool exo_claims_cover(uint64_t lo, uint64_t hi)
{
    pthread_mutex_lock(&claims_lock);
    uint64_t pos = lo;
    bool progress = true;
    while (pos < hi && progress) {
        progress = false;
        for (size_t i = 0; i < nclaims; i++) {
            if (claims[i].lo <= pos && pos < claims[i].hi) {
                pos = claims[i].hi;
                progress = true;
            }
        }
    }
    pthread_mutex_unlock(&claims_lock);
    return pos >= hi;
}
