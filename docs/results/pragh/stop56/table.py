"""Stop 56 tables: scope rows (median [min-max] of the run's rounds) and
the timelines' recovery times (median [min-max] over the runs given).

python3 table.py scope DIR                 # DIR/pragh-scope.json
python3 table.py put-heavy DIR             # DIR/pragh-put-heavy.json
python3 table.py timeline NAME DIR...      # NAME: eager-deferred or dynamic
"""
import json
import statistics as st
import sys


def rng(r, f, fmt="{:.2f}"):
    lo, hi = r[f + "_range"]
    return (fmt + " [" + fmt + "-" + fmt + "]").format(r[f], lo, hi)


def table(path, columns, cells):
    """A markdown table of the rows in `path`, one line of `cells(row)` each."""
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for r in json.load(open(path)):
        print("| " + " | ".join(cells(r)) + " |")


def scope(d):
    table(f"{d}/pragh-scope.json",
          ["scope", "scheme", "queries/s", "vs Orig", "vs Ideal", "remote GETs", "values away", "replicas / graph"],
          lambda r: [f"{r['scope']:,}", r["scheme"], rng(r, "throughput_qps", "{:,.0f}"), rng(r, "vs_orig"),
                     f"{100 * r['vs_ideal']:.1f}%", f"{100 * r['remote_gets']:.1f}%",
                     f"{100 * r['migrated_fraction']:.2f}%", f"{100 * r['replica_share']:.0f}%"])


def put_heavy(d):
    table(f"{d}/pragh-put-heavy.json",
          ["scheme", "queries/s", "vs Orig", "remote GETs", "values away", "updates forwarded",
           "update p50 / p99 / p99.9 us"],
          lambda r: [r["scheme"], rng(r, "throughput_qps", "{:,.0f}"), rng(r, "vs_orig"),
                     f"{100 * r['remote_gets']:.1f}%", f"{100 * r['migrated_fraction']:.2f}%",
                     f"{100 * r['forwarded_share']:.1f}%",
                     f"{r['update_p50_us']:.1f} / {r['update_p99_us']:.0f} / {r['update_p999_us']:.0f}"])


def timeline(name, dirs):
    runs = [json.load(open(f"{d}/pragh-{name}.json")) for d in dirs]
    keys = [(t["scheme"], t["mode"]) for t in runs[0]]
    print(f"| scheme | mode | recovery after each switch, s: median [min-max] of {len(runs)} runs | peak queries/s | migrations approved |")
    print("|---|---|---|---|---|")
    for k in keys:
        ts = [next(t for t in run if (t["scheme"], t["mode"]) == k) for run in runs]
        phases = len(ts[0]["recover_s"])
        cells = []
        for i in range(phases):
            xs = [t["recover_s"][i] for t in ts]
            if any(x is None for x in xs):
                cells.append("not recovered in " + str(sum(x is None for x in xs)) + " runs")
                continue
            cells.append(f"{st.median(xs):.1f} [{min(xs):.1f}-{max(xs):.1f}]")
        peaks = [max(p["throughput_qps"] for p in t["points"]) for t in ts]
        migs = [t["migrations_approved"] for t in ts]
        print(f"| {k[0]} | {k[1]} | {', '.join(cells)} | {st.median(peaks):,.0f} [{min(peaks):,.0f}-{max(peaks):,.0f}] | "
              f"{st.median(migs):,.0f} [{min(migs):,}-{max(migs):,}] |")


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "scope":
        scope(sys.argv[2])
    elif what == "put-heavy":
        put_heavy(sys.argv[2])
    else:
        timeline(sys.argv[2], sys.argv[3:])
