#!/usr/bin/env bash
# ab3.sh BIN OUT ROUNDS VARIANT... : one process per (round, variant), variants rotated per round.
bin=$1; out=$2; rounds=$3; shift 3; vars=("$@"); n=${#vars[@]}
mkdir -p $out
for r in $(seq 1 $rounds); do
  for j in $(seq 0 $((n-1))); do
    v=${vars[$(( (j + r) % n ))]}
    d=$out/$v-$r
    LOCUS_DIAG_SPLIT=$v $bin bench pragh uniform --preset quick --schemes Orig,Split --runs 1 --out $d > $d.log 2>&1
    echo "$(date +%T) round $r $v done"
  done
done
