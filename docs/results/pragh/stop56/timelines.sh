#!/bin/sh
# Stop 56: two more runs of each timeline experiment (run 1 is stale.sh's),
# after stale.sh, so that each recovery time is a median of three runs.
set -e
B=target/release/locus
D=docs/results/pragh/stop56
while ! grep -q "end scope" $D/stale.log; do sleep 10; done
for i in 2 3; do
  for e in eager-deferred dynamic; do
    date -u +"%H:%M:%S start $e-$i"
    $B bench pragh $e --preset quick --out $D/$e-$i > $D/$e-$i.log 2>&1
    date -u +"%H:%M:%S end $e-$i"
  done
done
