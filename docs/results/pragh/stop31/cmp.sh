#!/bin/sh
# Interleaved: before/after binaries, uniform quick, Orig and Split.
cd /work/scratch
for i in 1 2 3; do
  for b in $*; do
    ./$b bench pragh uniform --preset quick --schemes Orig,Split --runs 3 --out prof/cmp-$b-$i >/dev/null 2>&1
  done
done
