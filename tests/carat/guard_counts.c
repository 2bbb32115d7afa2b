/* Functions shaped for each guard optimisation; test_carat.sh reads the plugin's counts for
 * this module (built with -O2) and checks that each optimisation found its case. */
#include <stddef.h>

void consume(long v);

/* merge: a[i] over 0..n walks a range the loop bounds: one range check before the loop. */
long sum(const long *a, long n)
{
    long s = 0;
    for (long i = 0; i < n; i++)
        s += a[i];
    return s;
}

/* redundant: the second and third accesses of p[0] are covered by the first. */
long twice(long *p)
{
    long x = p[0];
    consume(x);
    p[0] = x + 1;
    consume(p[0]);
    return p[0];
}

/* hoist: the call's stack check is the same on every iteration, and *q is loop-invariant. */
void report_each(const long *q, long n)
{
    for (long i = 0; i < n; i++)
        consume(*q + i);
}

/* value range: an access to a local array at a constant index is inside the object. */
long local_array(long v)
{
    volatile long buf[4];
    buf[2] = v;
    return buf[2];
}

/* coalesce: three fields of one struct read in one block: one check over all 24 bytes. */
struct point3 {
    long x, y, z;
};

long manhattan(const struct point3 *p)
{
    return p->x + p->y + p->z;
}
