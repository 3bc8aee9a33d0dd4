# Ideal's throughput in each round of one process, in order (k queries/s), and max/min.
import json, sys
for d in sys.argv[1:]:
    runs = json.load(open(d + '/pragh-schemes.runs.json'))
    v = [r[0]['throughput_qps'] / 1000 for r in runs]
    print('%-12s %s  max/min %.2f' % (d, ' '.join('%.0f' % x for x in v), max(v) / min(v)))
