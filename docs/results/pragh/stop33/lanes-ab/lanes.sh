#!/bin/bash
# run_ops without (s33c) and with (s33d) lanes, alternating, one run each per round.
mkdir -p lanes
for round in 1 2 3 4; do
  for b in s33c s33d; do
    ./locus-$b bench pragh schemes --preset quick --schemes Ideal,Orig,Split+Cache,Replica --runs 1 --out lanes/$b-r$round > lanes/$b-r$round.log 2>&1
  done
done
