#!/bin/bash
# Uniform starts, Pragh's schemes that migrate beside Orig: the policy before
# (rate threshold only) and after (significance rule), interleaved.
for i in 1 2 3; do
  for b in before after; do
    if [ $b = before ]; then bin=/work/scratch/locus-before; else bin=/work/main/target/release/locus; fi
    $bin bench pragh uniform --preset quick --schemes Orig,Split,Split+Cache,Replica --json > uniform-$b-$i.json 2> uniform-$b-$i.log
    $bin bench pragh schemes --preset quick --schemes Orig,Split,Split+Cache,Replica --json > schemes-$b-$i.json 2> schemes-$b-$i.log
  done
done
echo done > finished
