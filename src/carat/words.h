/* The shadow taken from a run of 8-byte words (words.c): the words that lie in an address
 * range kept, the others zero. Four words at a time where the processor has AVX2; the
 * library itself is built for the baseline x86-64. Neither end need be 8-byte aligned. No
 * lock; not instrumented (it reads the program's memory as the program is about to). */
#ifndef EXOMEM_CARAT_WORDS_H
#define EXOMEM_CARAT_WORDS_H

#include <stdint.h>

/* Store into to[i] each word src[i] that lies in [lo, lo + span), and 0 for the others. */
void exo_carat_words_keep_in(unsigned char *to, const unsigned char *src, uint64_t words,
                             uintptr_t lo, uintptr_t span);

#endif
