#!/bin/bash
# Interleaved: recent-table sizes, Ideal + Split+Cache + Replica, one run per binary per round.
for round in 1 2 3; do
  for b in 256 1024 4096; do
    ./locus-slots$b bench pragh schemes --preset quick --schemes Ideal,Split+Cache,Replica --runs 1 --out slots/$b-r$round > slots/$b-r$round.log 2>&1
  done
done
