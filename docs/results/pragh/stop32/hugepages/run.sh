#!/bin/bash
# Ideal at quick, 5 rounds, 4 KiB pages vs madvise(MADV_HUGEPAGE) on every region, alternating.
for i in 1 2 3 4 5; do
  for mode in base thp; do
    out=/work/scratch/s32thp/$mode-$i; mkdir -p $out
    if [ $mode = thp ]; then export LOCUS_DIAG_THP=1; else unset LOCUS_DIAG_THP; fi
    ( sleep 12; grep AnonHugePages /proc/meminfo > $out/huge.txt ) &
    /work/scratch/locus-s32thp bench pragh schemes --preset quick --runs 1 --schemes Ideal,Split+Cache,Replica --out $out > $out/log 2>&1
    wait
  done
done
