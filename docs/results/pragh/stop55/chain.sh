#!/bin/bash
# Stop 55: after the five schemes runs: the shared test helper's check, three runs of the
# default uniform command, one run of schemes at the full preset (build 6969f66).
cd /tmp/s55
while pgrep -f /tmp/s55/s.sh > /dev/null; do sleep 10; done
echo "test $(date -u +%T)"
(cd /work/main && cargo test -q -p locus-workloads --test run_ops_runs_each_once > /tmp/s55/test.log 2>&1; echo "rc $?" >> /tmp/s55/test.log)
for i in 1 2 3; do
  echo "uniform $i $(date -u +%T)"
  /tmp/locus-55 bench pragh uniform --preset quick --out /tmp/s55/u_$i > /tmp/s55/u_$i.log 2>&1
done
echo "full $(date -u +%T)"
/tmp/locus-55 bench pragh schemes --preset full --out /tmp/s55/f_1 > /tmp/s55/f_1.log 2>&1
echo "end $(date -u +%T)"
