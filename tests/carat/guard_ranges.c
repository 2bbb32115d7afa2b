/* Value range with variable indices (GuardOpt.cpp): an index whose range keeps the access
 * inside a global needs no guard; one that may leave it keeps its guard. test_carat.sh
 * builds this module with only the value-range optimisation and checks the counts: of the
 * four loads, the two table reads with a bounded index lose their guards. */
static const int len_table[256] = { 1, 2, 3 };
static const unsigned short ctype_table[256] = { 1 };

/* *p is guarded; len_table[*p] is not: a byte indexes 256 entries. */
int enc_len(const unsigned char *p)
{
    return len_table[*p];
}

/* Not guarded: the condition keeps code below 256 here. */
int ctype(unsigned code, unsigned t)
{
    if (code < 256)
        return ctype_table[code] & t;
    return 0;
}

/* Guarded: code may lie past the table. */
int unchecked(unsigned code)
{
    return ctype_table[code];
}
