# Per round: each scheme's throughput, background CPU share, CPU seconds by thread group
# over its measured window, worker preemptions and remote GETs.
import json, sys
runs = json.load(open(sys.argv[1]))
only = sys.argv[2].split(',') if len(sys.argv) > 2 else None
for i, rnd in enumerate(runs):
    for r in rnd:
        if only and r['scheme'] not in only:
            continue
        cpu = {k: round(v, 2) for k, v in r['measure_cpu_s'].items() if v > 0}
        print(i, r['scheme'], int(r['throughput_qps']), 'bg %.3f' % r['measure_background_share'],
              cpu, 'preempted', r['measure_worker_preempted'], 'remote GETs %.2f%%' % (100 * r['remote_gets']))
