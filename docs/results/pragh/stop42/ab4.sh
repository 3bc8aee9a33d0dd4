#!/usr/bin/env bash
# ab4.sh BIN OUT ROUNDS MEASURE_S VARIANT... ; variant = fwd|rev|off-fwd|off-rev
bin=$1; out=$2; rounds=$3; ms=$4; shift 4; vars=("$@"); n=${#vars[@]}
mkdir -p $out
for r in $(seq 1 $rounds); do
  for j in $(seq 0 $((n-1))); do
    v=${vars[$(( (j + r) % n ))]}
    d=$out/$v-$r
    envs=()
    case $v in *rev*) envs+=(LOCUS_DIAG_REVERSE=1);; esac
    case $v in off*) envs+=(LOCUS_DIAG_SPLIT=off);; esac
    env "${envs[@]}" $bin bench pragh uniform --preset quick --schemes Orig,Split --runs 1 --measure-s $ms --out $d > $d.log 2>&1
    echo "$(date +%T) round $r $v done"
  done
done
