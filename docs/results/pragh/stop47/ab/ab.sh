#!/bin/sh
# Alternates the two binaries: vc (clock only) and rb (clock + replica batches).
for i in 1 2; do
  for b in vc rb; do
    /tmp/locus-$b bench pragh schemes --preset quick --schemes Orig,Split+Cache,Replica --runs 3 --out $b$i > $b$i.out 2> $b$i.err
    echo "$b$i done $(date +%T)"
  done
done
