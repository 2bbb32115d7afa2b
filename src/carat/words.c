/* The shadow taken from a run of words (words.h): over every copy out of memory whose
 * stores the shadow did not see. oniguruma saves its match stack, 4 KiB from its own
 * stack, at every match, and spent 11% of its time in the word-at-a-time loop. The version
 * with AVX2 is chosen once, at the first call. Its compare is unsigned, as a signed one
 * with the top bit flipped on both sides. (The copy hook's own test of every copy for a
 * pointer-like word stayed a plain loop: four words at a time changed nothing measurable
 * in SQLite's speedtest1, whose copies are mostly a few words long.) */
#include "carat/words.h"
#include "carat/carat_internal.h"

#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

static inline uintptr_t word_at(const unsigned char *p)
{
    uintptr_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

CARAT_NO_ASAN static void keep_in_plain(unsigned char *to, const unsigned char *src,
                                        uint64_t words, uintptr_t lo, uintptr_t span)
{
    for (uint64_t i = 0; i < words; i++) {
        uintptr_t v = word_at(src + 8 * i);
        v = v - lo < span ? v : 0;
        memcpy(to + 8 * i, &v, sizeof v);
    }
}

#if defined(__x86_64__)
#define AVX2 __attribute__((target("avx2")))

/* All-ones in each lane of v that lies in the range. */
AVX2 static inline __m256i inside(__m256i v, __m256i low, __m256i top, __m256i limit)
{
    return _mm256_cmpgt_epi64(limit, _mm256_xor_si256(_mm256_sub_epi64(v, low), top));
}

CARAT_NO_ASAN AVX2 static void keep_in_avx2(unsigned char *to, const unsigned char *src,
                                            uint64_t words, uintptr_t lo, uintptr_t span)
{
    const __m256i top = _mm256_set1_epi64x(INT64_MIN), low = _mm256_set1_epi64x((long long)lo);
    const __m256i limit = _mm256_set1_epi64x((long long)(span ^ (uint64_t)INT64_MIN));
    uint64_t i = 0;
    for (; i + 4 <= words; i += 4) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(src + 8 * i));
        _mm256_storeu_si256((__m256i *)(void *)(to + 8 * i),
                            _mm256_and_si256(v, inside(v, low, top, limit)));
    }
    keep_in_plain(to + 8 * i, src + 8 * i, words - i, lo, span);
}
#endif

/* Does the processor have AVX2? Asked once, at the first call, which may come before the
 * constructors have run (a program's own copies). */
static int has_avx2(void)
{
    static int known = -1;   /* 1: yes; 0: no; -1: not asked yet */
    int k = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (k < 0) {
#if defined(__x86_64__)
        __builtin_cpu_init();
        k = __builtin_cpu_supports("avx2") ? 1 : 0;
#else
        k = 0;
#endif
        __atomic_store_n(&known, k, __ATOMIC_RELAXED);
    }
    return k;
}

CARAT_NO_ASAN void exo_carat_words_keep_in(unsigned char *to, const unsigned char *src,
                                           uint64_t words, uintptr_t lo, uintptr_t span)
{
#if defined(__x86_64__)
    if (has_avx2()) {
        keep_in_avx2(to, src, words, lo, span);
        return;
    }
#endif
    keep_in_plain(to, src, words, lo, span);
}
