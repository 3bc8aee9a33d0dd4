#!/bin/bash
# Diagnostic (not committed): Pragh's eager mode vs eager for hot keys only (100/s), with lanes.
mkdir -p eager
for round in 1 2 3; do
  for e in 0 100; do
    LOCUS_DIAG_EAGER_MIN=$e ./locus-eagerdiag bench pragh uniform --preset quick --schemes Orig,Split --runs 1 --out eager/u$e-r$round > eager/u$e-r$round.log 2>&1
  done
done
