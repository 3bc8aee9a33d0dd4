#!/bin/bash
# Before (s33a) and after (s33b) the striped counters, Ideal alone, alternating, 12 rounds of 3 runs.
mkdir -p ab
for round in $(seq 1 12); do
  for b in s33a s33b; do
    ./locus-$b bench pragh schemes --preset quick --schemes Ideal --runs 3 --out ab/$b-r$round > ab/$b-r$round.log 2>&1
    ./pp/target/release/pp 1 > ab/$b-r$round.pp 2>&1
  done
done
