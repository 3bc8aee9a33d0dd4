# Per round: the host's core-to-core handoff and dependent-read probe around
# the round's windows, and each scheme's queries/s (thousands).
import json, sys
runs = json.load(open(sys.argv[1]))
for i, rnd in enumerate(runs):
    x = rnd[0]
    cells = ' '.join('%s %.1f' % (r['scheme'], r['throughput_qps'] / 1e3) for r in rnd)
    print('round %d handoff %4.0f ns probe %.2f ns | %s' % (
        i, x['measure_host_handoff_ns'], x['measure_host_probe_ns'], cells))
