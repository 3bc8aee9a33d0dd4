#!/bin/sh
# Stop 56: the four quick-preset experiments whose sections dated from
# 2026-11-23, rerun with this build, one after another, nothing else running.
# Run from the repository root. (A first pass, scope-eb97a96/, ran scope with
# the landed binary: its rows are kept, but it failed drawing the host chart,
# which is fixed in this stop, before it wrote its meta file.)
set -e
B=target/release/locus
D=docs/results/pragh/stop56
for e in put-heavy eager-deferred dynamic scope; do
  date -u +"%H:%M:%S start $e"
  $B bench pragh $e --preset quick --out $D/$e > $D/$e.log 2>&1
  date -u +"%H:%M:%S end $e"
done
