#!/usr/bin/env bash
# Make the SAM and BAM files that bench_samjmp reads (SpaceJMP Figures 11-12):
#   a random reference (seeded awk, so the same every time), reads simulated from it with
#   dwgsim (the descendant of wgsim that Debian packages; wgsim itself is not packaged),
#   aligned with minimap2 -ax sr, and converted to BAM with samtools.
# usage: make_sam_data.sh OUTDIR READS [TIME_LIMIT_SECONDS]
#   READS is the number of reads (READS/2 pairs of 100 bp). Writes OUTDIR/reads-READS.sam and
#   .bam (and ref.fa) and prints the SAM's path. Files already there are reused, so a second
#   run costs nothing; a run that dies leaves only its temporary directory, removed next time.
# Exit status: 0 made or reused, 1 failed or over the time limit (default 600 s).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OUTDIR READS [TIME_LIMIT_SECONDS]" >&2; exit 2; }
out=$1
reads=$2
limit=${3:-600}
case $reads in '' | *[!0-9]*) echo "$0: READS must be a number" >&2; exit 2 ;; esac
for tool in dwgsim minimap2 samtools; do
    command -v "$tool" >/dev/null || { echo "$0: $tool is missing (apt-get install $tool)" >&2; exit 1; }
done
mkdir -p "$out"
sam=$out/reads-$reads.sam
bam=$out/reads-$reads.bam
if [ -s "$sam" ] && [ -s "$bam" ]; then
    echo "$sam"
    exit 0
fi

# A reference of 8 sequences, 10 Mbp in all; awk's srand(11) makes it the same each time.
ref=$out/ref.fa
if [ ! -s "$ref" ]; then
    awk 'BEGIN { srand(11); split("ACGT", b, "");
                 for (c = 1; c <= 8; c++) { print ">chr" c; line = "";
                   for (i = 0; i < 1250000; i++) { line = line b[int(rand() * 4) + 1];
                     if (length(line) == 60) { print line; line = "" } }
                   if (line != "") print line } }' >"$ref.tmp"
    mv "$ref.tmp" "$ref"
fi

rm -rf "$out"/tmp-*
tmp=$(mktemp -d "$out/tmp-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
pairs=$(((reads + 1) / 2))
timeout "$limit" dwgsim -N "$pairs" -1 100 -2 100 -z 7 -y 0.02 "$ref" "$tmp/sim" >/dev/null 2>&1
timeout "$limit" minimap2 -t 2 -ax sr "$ref" "$tmp/sim.bwa.read1.fastq.gz" \
    "$tmp/sim.bwa.read2.fastq.gz" 2>/dev/null >"$tmp/reads.sam"
timeout "$limit" samtools view -@ 2 -b -o "$tmp/reads.bam" "$tmp/reads.sam"
mv "$tmp/reads.bam" "$bam"
mv "$tmp/reads.sam" "$sam"
echo "$sam"
