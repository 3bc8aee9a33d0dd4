#!/bin/bash
# Stop 53: does the first-loaded scheme's loss follow glibc's sliding mmap threshold (a freed
# large block raises it, so later large blocks come from the reused heap)? eqwarm (c16a3de) with
# the threshold fixed at its default, 128 KiB: every large block a fresh mapping.
cd /tmp/ab52
for i in 1 2 3 4 5 6 7 8; do
  GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072 /tmp/locus-eqwarm bench pragh uniform --preset quick --schemes Orig,Orig-again,Split --runs 6 --out /tmp/ab52/t_fixedmmap_$i > /tmp/ab52/t_fixedmmap_$i.log 2>&1
  echo "fixedmmap $i $(date -u +%T)"
done
