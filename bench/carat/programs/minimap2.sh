# minimap2 2.24 (Debian 2.24+dfsg-3): the section's multi-threaded program. Its reads are
# mapped by a pool of threads (kthread.c: a reading, a mapping and a writing step, the
# mapping step on -t threads), so a move stops threads that are in the middle of their
# work, which no other program here does. Debian's test (debian/test_script) maps the two
# mitochondrial genomes of test/ directly and through a saved index. Upstream has no test
# suite, so the suite adds checks of its own on reads simulated with dwgsim, whose names
# carry where each read came from: long reads and short read pairs, mapped with one thread
# and with three (more threads than this machine's two processors, so that the mapping
# threads are preempted anywhere), and through a saved index, must give the same
# alignments, and at least 99% of the reads must map where they came from.
DEB_SOURCE=minimap2
QUICK=no
# Not one of the programs the issue names: evaluate.py runs it after them.
EXTRA=yes

# A random reference, the same every time (awk's srand(13)), of NSEQ sequences of LEN bases.
make_reference() {
  awk -v nseq="$1" -v len="$2" 'BEGIN { srand(13); split("ACGT", b, "");
    for (c = 1; c <= nseq; c++) { print ">chr" c; line = "";
      for (i = 0; i < len; i++) { line = line b[int(rand() * 4) + 1];
        if (length(line) == 60) { print line; line = "" } }
      if (line != "") print line } }'
}

# Debian's minimap2 builds its SIMD kernels through SIMDe (libsimde-dev); the Makefile's
# CFLAGS (-O2 -g) are replaced by the mode's.
build_program() {
  make -j"$JOBS" CC="$CC" CFLAGS="$CFLAGS" LDFLAGS="$LDFLAGS" minimap2
  make_reference 2 2000000 >ref.fa
  # The suite's reads (1,000 long ones; 2,000 pairs of 100 bases) and the workload's
  # (10,000 long ones), not timed. dwgsim's -z seeds its random numbers.
  dwgsim -N 1000 -1 2000 -2 0 -e 0.03 -E 0 -r 0.002 -R 0.3 -y 0 -z 5 ref.fa suite-long \
    >/dev/null 2>&1
  dwgsim -N 2000 -1 100 -2 100 -e 0.01 -E 0.01 -r 0.001 -y 0 -z 6 ref.fa suite-sr >/dev/null 2>&1
  dwgsim -N 10000 -1 2000 -2 0 -e 0.03 -E 0 -r 0.002 -R 0.3 -y 0 -z 7 ref.fa work >/dev/null 2>&1
}

# The alignment lines of a SAM file: its @PG header line names the command, which differs.
alignments() { grep -v '^@PG' "$1"; }

# Of the primary alignments in SAM file $1 (flags 256 and 2048 unset, mapped), those whose
# start lies within 50 bases of where dwgsim took the read from (its name: contig, the first
# read's start, the second's start, ...); at least 99% of all reads must be such.
check_placed() {
  awk -v file="$1" '
    /^@/ { next }
    { f = $2; secondary = int(f / 256) % 2; supplementary = int(f / 2048) % 2 }
    secondary || supplementary { next }
    { n++; split($1, name, "_"); mate2 = int(f / 128) % 2
      want = mate2 ? name[3] : name[2]; d = $4 - want
      if ($3 == name[1] && d > -50 && d < 50) ok++ }
    END { printf "%s: %d of %d reads placed where they came from\n", file, ok, n
          exit !(n > 0 && ok >= 0.99 * n) }' "$1"
}

run_suite() {
  # Debian's test: the two genomes, directly and through a saved index.
  ./minimap2 -a test/MT-human.fa test/MT-orang.fa >mt.sam
  ./minimap2 -d MT-human.mmi test/MT-human.fa
  ./minimap2 -a MT-human.mmi test/MT-orang.fa >mt-index.sam
  cmp <(alignments mt.sam) <(alignments mt-index.sam)
  grep -q $'^MT_orang\t0\tMT_human\t' mt.sam
  # Simulated long reads and short pairs: one thread, three, and through an index.
  ./minimap2 -d ref.mmi ref.fa
  ./minimap2 -d ref-sr.mmi -x sr ref.fa
  for t in 1 3; do
    ./minimap2 -t "$t" -a ref.fa suite-long.bwa.read1.fastq.gz >long-t"$t".sam
    ./minimap2 -t "$t" -ax sr ref.fa suite-sr.bwa.read1.fastq.gz suite-sr.bwa.read2.fastq.gz \
      >sr-t"$t".sam
  done
  ./minimap2 -t 3 -a ref.mmi suite-long.bwa.read1.fastq.gz >long-index.sam
  ./minimap2 -t 3 -ax sr ref-sr.mmi suite-sr.bwa.read1.fastq.gz suite-sr.bwa.read2.fastq.gz \
    >sr-index.sam
  for kind in long sr; do
    cmp <(alignments "$kind"-t1.sam) <(alignments "$kind"-t3.sam)
    cmp <(alignments "$kind"-t1.sam) <(alignments "$kind"-index.sam)
    check_placed "$kind"-t3.sam
  done
  echo "minimap2: all checks passed"
}

# 10,000 simulated reads of 2,000 bases mapped with two threads (the suite checks the
# alignments; here they are discarded).
run_workload() {
  ./minimap2 -t 2 -a ref.fa work.bwa.read1.fastq.gz 2>/dev/null >/dev/null
}
