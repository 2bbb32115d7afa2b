/* The CARAT test programs are built by exomem-cc at test time (test_carat.sh), without the
 * test harness: this is their check macro. */
#ifndef CARAT_CHECK_H
#define CARAT_CHECK_H
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)
#endif
