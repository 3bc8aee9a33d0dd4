#!/bin/sh
# Stop 41 A/B at R-MAT 20 (Pragh's 10 s interval): Split+Cache with the coordinator before
# (OLD, 9e7cc1d) and after (NEW) the return-home change, one run each, in ABBA order.
# Usage: ab.sh OLD_BINARY NEW_BINARY OUT_DIR PAIRS
set -eu
old=$1; new=$2; out=$3; pairs=$4
i=1
while [ "$i" -le "$pairs" ]; do
    if [ $((i % 2)) -eq 1 ]; then order="old new"; else order="new old"; fi
    for which in $order; do
        if [ "$which" = old ]; then bin=$old; else bin=$new; fi
        d=$out/$which-$i
        mkdir -p "$d"
        echo "== pair $i: $which ($(date -u +%H:%M:%S))"
        "$bin" bench pragh schemes --preset full --runs 1 --schemes Split+Cache --out "$d" \
            > "$d/run.log" 2>&1
        grep -E "final placement|^Split\+Cache " "$d/run.log" | cut -c1-200
    done
    i=$((i + 1))
done
