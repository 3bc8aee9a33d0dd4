#!/usr/bin/env bash
# abx.sh: one diag binary, idle-driver halves switched by env: off, exec, coord, both; rotated order.
set -u
mkdir -p ex exu
run() { # variant cmd...
  local v=$1; shift
  case $v in
    off) env "$@" ;;
    exec) env LOCUS_DIAG_IDLE_EXEC=1 "$@" ;;
    coord) env LOCUS_DIAG_IDLE_COORD=1 "$@" ;;
    both) env LOCUS_DIAG_IDLE_EXEC=1 LOCUS_DIAG_IDLE_COORD=1 "$@" ;;
  esac
}
orders=("off exec coord both" "both coord exec off" "exec off both coord" "coord both off exec" "off exec coord both")
for r in 1 2 3 4 5; do
  for v in ${orders[$((r-1))]}; do
    run $v timeout 600 ./locus-diag bench pragh schemes --preset quick --schemes Ideal,Orig,Split+Cache,Replica --runs 1 --out ex/$v-$r > ex/$v-$r.log 2>&1
    echo "$(date +%T) schemes round $r $v rc=$?"
  done
done
for r in 1 2 3; do
  for v in ${orders[$((r-1))]}; do
    run $v timeout 900 ./locus-diag bench pragh uniform --preset quick --schemes Orig,Split --runs 6 --out exu/$v-$r > exu/$v-$r.log 2>&1
    echo "$(date +%T) uniform round $r $v rc=$?"
  done
done
echo finished
