"""Rows of `bench pragh schemes` runs side by side: ratio to Orig with
min-max over rounds, remote GETs, values moved, queries/s.

usage: python3 skewed.py DIR [DIR ...]   (each DIR holds pragh-schemes.json)
"""
import json
import sys

for d in sys.argv[1:]:
    for r in json.load(open(f"{d}/pragh-schemes.json")):
        lo, hi = r["vs_orig_range"]
        print(
            f"{d:10} {r['scheme']:12} {r['vs_orig']:.3f} [{lo:.2f}-{hi:.2f}]"
            f"  remote GETs {100 * r['remote_gets']:.1f}%  moved {r['values_moved']}"
            f"  {r['throughput_qps']:.0f} q/s"
        )
