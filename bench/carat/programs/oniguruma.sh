# oniguruma 6.9.8 (Debian's libonig): the package's own `make check` (test/: the Oniguruma
# API in UTF-8, syntax, options, EUC-JP, UTF-16, regset and backward-search checks, and the
# POSIX API; sample/: the fifteen sample programs), built static so that the tests link the
# library built in this mode.
# needs: autoconf automake libtool
DEB_SOURCE=libonig
QUICK=no

# The check programs of test/ and sample/ (their TESTS, as configure resolved them).
onig_check_programs() {
  sed -n '/^TESTS = /,/[^\\]$/p' "$1/Makefile" | sed 's/^TESTS = //;s/\$(EXEEXT)//g;s/\\//g'
}

build_program() {
  # The Debian tarball ships configure.ac only.
  [ -x configure ] || autoreconf -fi
  # Debian's configure flag (the POSIX API too), but no shared library.
  ./configure --disable-shared --enable-binary-compatible-posix-api=yes \
    CC="$CC" CFLAGS="$CFLAGS" LDFLAGS="$LDFLAGS"
  make -j"$JOBS"
  # shellcheck disable=SC2046
  make -j"$JOBS" -C test $(onig_check_programs test)
  # shellcheck disable=SC2046
  make -j"$JOBS" -C sample $(onig_check_programs sample)
  onig_workload_source >workload.c
  "$CC" $CFLAGS -Isrc workload.c src/.libs/libonig.a $LDFLAGS -o workload
}

# Every test program exits non-zero when one of its cases fails; make check fails then.
# Leak reports are off for the ASan peer: sample/callback_each_match never frees its regexes
# and regions before it exits (a sample's habit, not a fault of the library).
run_suite() {
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" make check
}

# Six regexes (a backreference, Unicode properties, case folding, alternations and counted
# repeats) searched for every match over 4 MB of generated UTF-8 text, twice; the
# number of matches is checked.
run_workload() {
  ./workload 4000000 2 365210
}

onig_workload_source() {
  cat <<'EOF'
/* CARAT evaluation workload: a few regexes searched over a generated text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "oniguruma.h"

static unsigned long seed = 12345;
static unsigned rnd(void) { seed = seed * 6364136223846793005UL + 1442695040888963407UL; return (unsigned)(seed >> 33); }

int main(int argc, char **argv) {
  static const char *words[] = {"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog",
    "regular", "expression", "matching", "Running", "testing", "Oniguruma", "engine", "café",
    "naïve", "über", "Straße", "and", "or", "not", "while", "loop"};
  static const char *pats[] = {
    "\\b(\\w+)\\s+\\1\\b",                  /* a doubled word: backreference */
    "[A-Z][a-z]+ing\\b",                    /* capitalised -ing word */
    "(\\d{3})-(\\d{4})",                    /* phone-like numbers */
    "[\\w.]+@\\w+\\.(?:com|org|net)",       /* e-mail-like addresses */
    "(?i)stra(?:ss|ß)e|\\p{Lu}\\p{Ll}+é",   /* case-insensitive, Unicode properties */
    "(?:a|e|i|o|u){2,}[^aeiou\\s]+",        /* vowel runs */
  };
  size_t n = argc > 1 ? strtoul(argv[1], 0, 10) : 4000000, len = 0;
  int reps = argc > 2 ? atoi(argv[2]) : 5;
  unsigned long expect = argc > 3 ? strtoul(argv[3], 0, 10) : 0;
  char *text = malloc(n + 64);
  while (len < n) {
    unsigned r = rnd() % 100;
    char buf[64];
    if (r < 3) snprintf(buf, sizeof buf, "%03u-%04u ", rnd() % 1000, rnd() % 10000);
    else if (r < 5) snprintf(buf, sizeof buf, "%s.%s@%s.%s ", words[rnd() % 24], words[rnd() % 24], words[rnd() % 24], (const char *[]){"com", "org", "net", "de"}[rnd() % 4]);
    else if (r < 7) { const char *w = words[rnd() % 24]; snprintf(buf, sizeof buf, "%s %s ", w, w); }
    else snprintf(buf, sizeof buf, "%s%s", words[rnd() % 24], r % 13 == 0 ? ".\n" : " ");
    size_t l = strlen(buf);
    memcpy(text + len, buf, l);
    len += l;
  }
  text[len] = 0;
  OnigEncoding enc = ONIG_ENCODING_UTF8;
  onig_initialize(&enc, 1);
  OnigRegion *region = onig_region_new();
  unsigned long total = 0;
  for (int rep = 0; rep < reps; rep++)
    for (size_t p = 0; p < sizeof pats / sizeof *pats; p++) {
      regex_t *reg;
      OnigErrorInfo einfo;
      const UChar *pat = (const UChar *)pats[p];
      int r = onig_new(&reg, pat, pat + strlen(pats[p]), ONIG_OPTION_DEFAULT, enc, ONIG_SYNTAX_RUBY, &einfo);
      if (r != ONIG_NORMAL) { fprintf(stderr, "onig_new %zu: %d\n", p, r); return 1; }
      const UChar *s = (const UChar *)text, *end = s + len, *start = s;
      unsigned long count = 0, sum = 0;
      while (start <= end) {
        r = onig_search(reg, s, end, start, end, region, ONIG_OPTION_NONE);
        if (r == ONIG_MISMATCH) break;
        if (r < 0) { fprintf(stderr, "onig_search %zu: %d\n", p, r); return 1; }
        count++;
        sum += (unsigned long)(region->end[region->num_regs - 1] - region->beg[0]);
        start = s + (region->end[0] > region->beg[0] ? region->end[0] : region->beg[0] + 1);
      }
      if (rep == 0) printf("pattern %zu: %lu matches, %lu\n", p, count, sum);
      total += count;
      onig_region_clear(region);
      onig_free(reg);
    }
  printf("total %lu\n", total);
  if (expect && total != expect) { fprintf(stderr, "workload: %lu matches, expected %lu\n", total, expect); return 1; }
  onig_region_free(region, 1);
  onig_end();
  free(text);
  return 0;
}
EOF
}
