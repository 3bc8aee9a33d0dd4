#!/bin/bash
# Alternates report_count_min 2 (diagnostic binary, env) and 8 (as committed) at R-MAT 26, Split+Cache only.
set -u
cd /work/scratch/s38/paper-rmin
for r in 1 2; do
  for v in min2 min8; do
    if [ $v = min2 ]; then B=/work/scratch/s38/locus-diag; E="LOCUS_DIAG_REPORT_MIN=2"; else B=/work/scratch/s38/locus-38; E="LOCUS_DIAG_UNUSED=1"; fi
    echo "$(date -u +%T) start $v $r" >> times.log
    env $E timeout 1500 $B bench pragh schemes --preset paper --runs 1 --schemes Split+Cache --out out-$v-$r > log-$v-$r 2>&1
    echo "$(date -u +%T) end $v $r rc $?" >> times.log
  done
done
