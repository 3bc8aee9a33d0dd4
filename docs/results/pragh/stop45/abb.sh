#!/usr/bin/env bash
# abb.sh: locus-bo (committed idle driver plus backoff-diag.diff) with LOCUS_DIAG_BACKOFF unset (off) and set (bo), alternating; then uniform, all schemes, on the committed binary.
set -u
mkdir -p eb
for r in 1 2 3 4 5 6; do
  if [ $((r % 2)) -eq 1 ]; then order="off bo"; else order="bo off"; fi
  for v in $order; do
    if [ $v = bo ]; then e="LOCUS_DIAG_BACKOFF=1"; else e="LOCUS_DIAG_NONE=1"; fi
    env $e timeout 600 ./locus-bo bench pragh schemes --preset quick --schemes Ideal,Replica --runs 1 --out eb/$v-$r > eb/$v-$r.log 2>&1
    echo "$(date +%T) schemes round $r $v rc=$?"
  done
done
timeout 1500 ./locus-idle bench pragh uniform --preset quick --runs 3 --out uniform-quick-3 > uniform-quick-3.log 2>&1
echo "$(date +%T) uniform-quick-3 rc=$?"
echo finished
