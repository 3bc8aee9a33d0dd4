#!/bin/bash
# Stop 53: the fixed mmap threshold against glibc's default (sliding) one, alternating, same binary (eqwarm, c16a3de).
cd /tmp/ab52
for i in 1 2 3 4 5 6; do
  /tmp/locus-eqwarm bench pragh uniform --preset quick --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab52/m_sliding_$i > /tmp/ab52/m_sliding_$i.log 2>&1
  echo "sliding $i $(date -u +%T)"
  GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072 /tmp/locus-eqwarm bench pragh uniform --preset quick --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab52/m_fixed_$i > /tmp/ab52/m_fixed_$i.log 2>&1
  echo "fixed $i $(date -u +%T)"
done
