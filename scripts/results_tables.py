#!/usr/bin/env python3
"""Rewrites the generated tables of a results page from the JSON beside it.

    scripts/results_tables.py PAGE...      # pragh, netmigrate, fargraph, cluster, sparql or all
    scripts/results_tables.py --check PAGE # exit 1 if the page is not what the JSON gives

A page `docs/results/PAGE.md` holds each generated table between two marker
lines, `<!-- table:NAME:begin -->` and `<!-- table:NAME:end -->`; everything
between them is replaced, everything else is left as written. The numbers come
only from the JSON files under `docs/results/PAGE/` (what `scripts/reproduce
PAGE` writes); the paper's numbers are fixed text here, each with its figure or
table. A JSON file or field that is missing stops the script with the file and
the field named. Standard library only.
"""

import json
import os
import re
import shlex
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "docs", "results")


class Fail(Exception):
    """A file or field the tables need is not there."""


# ---------------------------------------------------------------- JSON access


class J:
    """A JSON value and where it came from, so that a missing field names its
    file and path."""

    def __init__(self, value, where):
        self.v = value
        self.where = where

    def __getitem__(self, key):
        if isinstance(key, int):
            if not isinstance(self.v, list) or not -len(self.v) <= key < len(self.v):
                raise Fail(f"{self.where}: no element [{key}]")
            return J(self.v[key], f"{self.where}[{key}]")
        if not isinstance(self.v, dict):
            raise Fail(f"{self.where}: expected an object with field '{key}'")
        if key not in self.v:
            raise Fail(f"{self.where}: field '{key}' is missing")
        return J(self.v[key], f"{self.where}.{key}")

    def has(self, key):
        return isinstance(self.v, dict) and key in self.v and self.v[key] is not None

    def num(self):
        if isinstance(self.v, bool) or not isinstance(self.v, (int, float)):
            raise Fail(f"{self.where}: expected a number, found {json.dumps(self.v)}")
        return float(self.v)

    def opt_num(self):
        """A number, or None where the JSON has null (e.g. never recovered)."""
        return None if self.v is None else self.num()

    def str(self):
        if not isinstance(self.v, str):
            raise Fail(f"{self.where}: expected a string, found {json.dumps(self.v)}")
        return self.v

    def list(self):
        if not isinstance(self.v, list):
            raise Fail(f"{self.where}: expected a list")
        return [J(x, f"{self.where}[{i}]") for i, x in enumerate(self.v)]

    def nums(self):
        return [x.num() for x in self.list()]

    def find(self, **match):
        """The one element of a list whose fields equal `match`."""
        hits = [x for x in self.list() if all(isinstance(x.v, dict) and x.v.get(k) == v for k, v in match.items())]
        what = ", ".join(f"{k}={v}" for k, v in match.items())
        if len(hits) != 1:
            raise Fail(f"{self.where}: {'no' if not hits else len(hits)} rows with {what}")
        return J(hits[0].v, f"{self.where.split('[')[0]} (row {what})")

    def rows(self, **match):
        return [x for x in self.list() if all(isinstance(x.v, dict) and x.v.get(k) == v for k, v in match.items())]


def load(rel):
    """docs/results/REL as a J."""
    path = os.path.join(RESULTS, rel)
    if not os.path.exists(path):
        raise Fail(f"docs/results/{rel}: file missing (scripts/reproduce writes it)")
    with open(path) as f:
        try:
            return J(json.load(f), f"docs/results/{rel}")
        except json.JSONDecodeError as e:
            raise Fail(f"docs/results/{rel}: not JSON ({e})")


def load_opt(rel):
    return load(rel) if os.path.exists(os.path.join(RESULTS, rel)) else None


def run_files(page, stem):
    """`STEM.json`, `STEM-2.json`, ... under docs/results/PAGE/, in order: the
    runs of an experiment that writes one run per invocation."""
    d = os.path.join(RESULTS, page)
    pat = re.compile(re.escape(stem) + r"(?:-(\d+))?\.json$")
    found = []
    for name in os.listdir(d) if os.path.isdir(d) else []:
        m = pat.fullmatch(name)
        if m:
            found.append((int(m.group(1) or 1), f"{page}/{name}"))
    if not found:
        raise Fail(f"docs/results/{page}/{stem}.json: file missing (scripts/reproduce writes it)")
    return [rel for _, rel in sorted(found)]


# ----------------------------------------------------------------- formatting


def f0(x):
    return f"{x:,.0f}"


def f1(x):
    return f"{x:,.1f}"


def f2(x):
    return f"{x:.2f}"


def f3(x):
    return f"{x:.3f}"


def rng(v, lo, hi, fmt, unit=""):
    """`v` with its [min-max], the range left out when it is one value."""
    if lo is None or fmt(lo) == fmt(hi):
        return f"{fmt(v)}{unit}"
    return f"{fmt(v)}{unit} [{fmt(lo)}-{fmt(hi)}]"


def pct(x, d=1):
    return f"{100 * x:.{d}f}%"


def share(x):
    """A share that may be small: three decimals under 1%."""
    return pct(x, 3 if 0 < x < 0.01 else 1)


def n_runs(n):
    return f"{n} run" if n == 1 else f"{n} runs"


def pct_rng(v, lo, hi, d=1):
    return rng(100 * v, None if lo is None else 100 * lo, None if hi is None else 100 * hi, lambda x: f"{x:.{d}f}", "%")


def mr(row, field, fmt, unit="", scale=1.0):
    """A `bench pragh` row's field with its `FIELD_range` (median of the
    row's runs, min-max over them)."""
    v = row[field].num() * scale
    lo, hi = (x * scale for x in row[field + "_range"].nums())
    return rng(v, lo, hi, fmt, unit)


def mr_pct(row, field, d=1):
    return mr(row, field, lambda x: f"{x:.{d}f}", "%", 100.0)


def ms(obj, fmt, unit="", scale=1.0):
    """A {median, min, max} object."""
    return rng(obj["median"].num() * scale, obj["min"].num() * scale, obj["max"].num() * scale, fmt, unit)


def ms_pct(obj, d=1):
    return ms(obj, lambda x: f"{x:.{d}f}", "%", 100.0)


def ml(values, fmt, unit=""):
    """Median [min-max] of a list."""
    return rng(statistics.median(values), min(values), max(values), fmt, unit)


def runs_of(row):
    n = int(row["runs"].num())
    return f"median of {n} runs" if n > 1 else "1 run"


def command(meta, fallback):
    """The command a JSON file came from, as `locus ...` without --out; the
    meta file's record when it has one, else `fallback`."""
    c = None
    if meta is not None:
        if meta.has("machine") and meta["machine"].has("command"):
            c = meta["machine"]["command"].str()
        elif meta.has("command"):
            c = meta["command"].str()
    if c is None:
        return f"`{fallback}`"
    words = shlex.split(c)
    out = ["locus"]
    skip = False
    for w in words[1:]:
        if skip:
            skip = False
        elif w == "--out":
            skip = True
        elif not w.startswith("--out="):
            out.append(w)
    return "`" + " ".join(out) + "`"


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        if len(r) != len(header):
            raise AssertionError(f"row of {len(r)} cells for {len(header)} columns: {r}")
        lines.append("| " + " | ".join(r) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------------- Pragh

SCHEMES = ["Ideal", "Orig", "Shard", "Split", "Cache", "Split+Cache", "Replica"]


def graph_label(meta, fallback):
    if meta is None:
        return fallback
    return f"R-MAT {int(meta['settings']['scale'].num())}"


def timeline(page, stem):
    """Runs of a timeline experiment: {(scheme, mode): [row per run]}."""
    files = run_files(page, stem)
    runs = [load(f) for f in files]
    keys = [(r["scheme"].str(), r["mode"].str()) for r in runs[0].list()]
    out = {}
    for k in keys:
        out[k] = [run.find(scheme=k[0], mode=k[1]) for run in runs]
    return out, len(files), load_opt(files[0][:-5] + ".meta.json")


def recover(rows, phase):
    xs = [r["recover_s"][phase].opt_num() for r in rows]
    done = [x for x in xs if x is not None]
    if not done:
        return "not recovered"
    s = ml(done, f1, " s")
    if len(done) < len(xs):
        s += f" (not recovered in {len(xs) - len(done)} of {len(xs)} runs)"
    return s


def pragh():
    q = load("pragh/pragh-schemes.json")
    qm = load_opt("pragh/pragh-schemes.meta.json")
    f = load("pragh/full/pragh-schemes.json")
    fm = load_opt("pragh/full/pragh-schemes.meta.json")
    p = load("pragh/paper/pragh-schemes.json")
    pm = load_opt("pragh/paper/pragh-schemes.meta.json")
    u = load("pragh/pragh-uniform.json")
    um = load_opt("pragh/pragh-uniform.meta.json")
    pu = load("pragh/paper/pragh-uniform.json")
    pum = load_opt("pragh/paper/pragh-uniform.meta.json")
    s = load("pragh/pragh-scope.json")
    sm = load_opt("pragh/pragh-scope.meta.json")
    ps = load("pragh/paper/pragh-scope.json")
    psm = load_opt("pragh/paper/pragh-scope.meta.json")
    ph = load("pragh/pragh-put-heavy.json")
    phm = load_opt("pragh/pragh-put-heavy.meta.json")
    rb = load("pragh/pragh-replica-budget.json")
    rbm = load_opt("pragh/pragh-replica-budget.meta.json")
    msp = load("pragh/migrate-speed.json")
    ed, ed_n, edm = timeline("pragh", "pragh-eager-deferred")
    dy, dy_n, dym = timeline("pragh", "pragh-dynamic")

    gq, gf, gp = graph_label(qm, "R-MAT 16"), graph_label(fm, "R-MAT 20"), graph_label(pm, "R-MAT 26")
    cq = command(qm, "locus bench pragh schemes --preset quick")
    cf = command(fm, "locus bench pragh schemes --preset full")
    cp = command(pm, "locus bench pragh schemes --preset paper --runs 5 --schemes Ideal,Orig,Split+Cache,Replica")
    sets = [(q, qm, gq, cq), (f, fm, gf, cf), (p, pm, gp, cp)]

    def bound(meta):
        if meta is None or not meta.has("placement_bound"):
            return ""
        return f", bound {pct(meta['placement_bound']['best_single_copy_remote_gets'].num())}"

    rows = []

    def per_scale(fig, paper, cell, which=(0, 1, 2), missing=None):
        first = True
        for i, (d, m, g, c) in enumerate(sets):
            if i in which:
                rows.append([fig if first else "", paper if first else "", cell(d, m, g), c])
                first = False
        for g, why in missing or []:
            rows.append([fig if first else "", paper if first else "", f"not measured at {g}: {why}", "-"])
            first = False

    per_scale("Fig. 10: Ideal / Orig", "26x (3,248K / 123K queries/s)",
              lambda d, m, g: f"{mr(d.find(scheme='Ideal'), 'vs_orig', f2, 'x')} ({g}, {runs_of(d.find(scheme='Ideal'))})")
    per_scale("Table 1: Orig, remote accesses", "86.2%",
              lambda d, m, g: f"{mr_pct(d.find(scheme='Orig'), 'remote_gets')} of GETs ({g})")
    per_scale("Table 1: Shard vs Orig", "1.39x (171K / 123K), 64.4% remote, 85.6% of shards moved",
              lambda d, m, g: (f"{mr(d.find(scheme='Shard'), 'vs_orig', f2, 'x')}, "
                               f"{pct(d.find(scheme='Shard')['remote_gets'].num())} remote GETs, "
                               f"{pct(d.find(scheme='Shard')['migrated_fraction'].num())} of keys moved ({g})"),
              which=(0, 1), missing=[(gp, "Shard's stop-the-world copy needs more than 24 GiB")])
    per_scale("Fig. 10: Split vs Orig", "about 2x (\"almost double\")",
              lambda d, m, g: f"{mr(d.find(scheme='Split'), 'vs_orig', f2, 'x')} ({g})",
              which=(0, 1), missing=[(gp, "the R-MAT 26 command runs Ideal, Orig, Split+Cache and Replica only")])
    per_scale("Fig. 10: Cache vs Orig", "about as Split",
              lambda d, m, g: f"{mr(d.find(scheme='Cache'), 'vs_orig', f2, 'x')} ({g})", which=(0, 1))
    per_scale("Fig. 10: Split+Cache vs Orig", "19x",
              lambda d, m, g: f"{mr(d.find(scheme='Split+Cache'), 'vs_orig', f2, 'x')} ({g})")
    per_scale("Fig. 10: Split+Cache vs Ideal", "72%",
              lambda d, m, g: f"{mr_pct(d.find(scheme='Split+Cache'), 'vs_ideal')} ({g})")
    per_scale("6.1: Split+Cache, remote accesses", "2.0%",
              lambda d, m, g: f"{mr_pct(d.find(scheme='Split+Cache'), 'remote_gets')} of GETs{bound(m)} ({g})")
    per_scale("6.1: vertices migrated (Split+Cache)", "0.13% (78,242 keys, 782 MB)",
              lambda d, m, g: (f"{share(d.find(scheme='Split+Cache')['migrated_fraction'].num())} "
                               f"({d.find(scheme='Split+Cache')['bytes_moved'].num() / 1e6:,.0f} MB moved, {g})"))
    per_scale("Past the paper: Replica vs Ideal", "-",
              lambda d, m, g: (f"{mr_pct(d.find(scheme='Replica'), 'vs_ideal')}, replicas "
                               f"{pct(d.find(scheme='Replica')['replica_share'].num())} of the graph's values ({g})"))

    # 6.1, uniform workload.
    gu, gpu = graph_label(um, "R-MAT 16"), graph_label(pum, "R-MAT 26")
    cu = command(um, "locus bench pragh uniform --preset quick")
    cpu = command(pum, "locus bench pragh uniform --preset paper --scopes 1024 --runs 3 --schemes Orig,Split,Split+Cache")
    pu_scope = int(pu.find(scheme="Orig")["scope"].num())
    rows.append(["6.1 uniform: Shard vs Orig", "1.08x (136K / 126K), remote 85% to 82%",
                 f"{mr(u.find(scheme='Shard'), 'vs_orig', f2, 'x')}, {pct(u.find(scheme='Shard')['remote_gets'].num())} remote GETs "
                 f"({gu}, starts over every vertex)", cu])
    rows.append(["6.1 uniform: Split vs Orig", "1.84x (232K / 126K), 43% fewer remote accesses",
                 f"{mr(pu.find(scheme='Split'), 'vs_orig', f2, 'x')}, {pct(pu.find(scheme='Split')['remote_gets'].num())} remote GETs "
                 f"({gpu}, starts over {pu_scope:,})", cpu])
    rows.append(["", "", f"{mr(u.find(scheme='Split'), 'vs_orig', f3, 'x')}, {pct(u.find(scheme='Split')['migrated_fraction'].num(), 2)} of values moved "
                 f"({gu}, starts over every vertex)", cu])
    rows.append(["6.1 uniform: Split+Cache vs Orig", "12x (1,521K queries/s), 5% remote",
                 f"{mr(pu.find(scheme='Split+Cache'), 'vs_orig', f2, 'x')}, {pct(pu.find(scheme='Split+Cache')['remote_gets'].num())} remote GETs "
                 f"({gpu}, starts over {pu_scope:,})", cpu])
    rows.append(["", "", f"{mr(u.find(scheme='Split+Cache'), 'vs_orig', f2, 'x')}, {pct(u.find(scheme='Split+Cache')['remote_gets'].num())} remote GETs"
                 f"{bound(um)} ({gu}, starts over every vertex)", cu])

    # Fig. 11: scope of starting vertices.
    def scope_cells(d, g):
        sc = sorted({int(r["scope"].num()) for r in d.rows(scheme="Split+Cache")})
        if not sc:
            raise Fail(f"{d.where}: no Split+Cache rows")
        lo, hi = d.find(scheme="Split+Cache", scope=sc[0]), d.find(scheme="Split+Cache", scope=sc[-1])
        speed = f"{mr(lo, 'vs_orig', f2, 'x')} at {sc[0]:,} starts to {mr(hi, 'vs_orig', f2, 'x')} at {sc[-1]:,} ({g}, {len(sc)} scopes)"
        remote = f"{pct(lo['remote_gets'].num())} to {pct(hi['remote_gets'].num())} of GETs ({g})"
        return speed, remote

    gs, gps = graph_label(sm, "R-MAT 16"), graph_label(psm, "R-MAT 26")
    cs = command(sm, "locus bench pragh scope --preset quick")
    cps = command(psm, "locus bench pragh scope --preset paper --runs 3 --schemes Orig,Split+Cache,Replica --warm-s-max 120")
    (s_speed, s_remote), (p_speed, p_remote) = scope_cells(s, gs), scope_cells(ps, gps)
    rows.append(["Fig. 11a: Split+Cache speedup as the scope grows", "falls steadily from 2^10 to 2^26 (no numbers in the text)", p_speed, cps])
    rows.append(["", "", s_speed, cs])
    rows.append(["Fig. 11b: Split+Cache remote accesses as the scope grows", "rise with the scope", p_remote, cps])
    rows.append(["", "", s_remote, cs])

    # Fig. 12: updates.
    cph = command(phm, "locus bench pragh put-heavy --preset quick")
    o, sc_ = ph.find(scheme="Orig"), ph.find(scheme="Split+Cache")
    rows.append(["Fig. 12: updates forwarded (50% updates)", "0.11% of updates; 0.13% of vertices migrated",
                 f"{pct(sc_['forwarded_share'].num())} of updates; {pct(sc_['migrated_fraction'].num(), 2)} of values away; "
                 f"Split+Cache {mr(sc_, 'vs_orig', f2, 'x')} Orig ({graph_label(phm, 'R-MAT 16')})", cph])
    rows.append(["Fig. 12: update p99.9 after migration", "lower than before migration",
                 f"{f0(sc_['update_p999_us'].num())} us (Split+Cache) against Orig's {f0(o['update_p999_us'].num())} us", cph])

    # Fig. 13: migration speed.
    def speed(fabric, threads, payload):
        r = msp.find(fabric=fabric, threads=threads, payload_bytes=payload)
        return rng(r["values_per_s"].num() / 1e6, r["values_per_s_min"].num() / 1e6, r["values_per_s_max"].num() / 1e6, f2, " M/s")

    ms_runs = {len(r["values_per_s_runs"].list()) for r in msp.list()}
    if len(ms_runs) != 1:
        raise Fail(f"{msp.where}: rows with different run counts {sorted(ms_runs)}")
    cms = f"`locus bench migrate-speed --preset quick --runs {ms_runs.pop()}`"
    rows.append(["Fig. 13: one migration thread, payloads under 4 KB", "over 1 M values/s",
                 f"{speed('local', 1, 64)} (64 B), {speed('local', 1, 256)} (256 B), {speed('local', 1, 1024)} (1 KB); in-process fabric", cms])
    rows.append(["Fig. 13: more threads", "over 10 M values/s with 24 threads",
                 f"{speed('local', 2, 64)} with 2 threads (64 B); 24 threads not measured (2 vCPUs)", cms])

    # Fig. 14: eager vs deferred.
    ced = command(edm, "locus bench pragh eager-deferred --preset quick")
    e, dd = ed[("Split+Cache", "eager")], ed[("Split+Cache", "deferred")]
    emig = [r["migrations_approved"].num() for r in e]
    dmig = [r["migrations_approved"].num() for r in dd]
    rows.append(["Fig. 14: eager vs deferred, Split+Cache from a cold start",
                 "eager 239K to 2,142K queries/s at once, 2,362K one interval (10 s) later; deferred 2,362K at the next interval",
                 f"90% of the final level after {recover(e, 0)} (eager) and {recover(dd, 0)} (deferred), 1 s interval; "
                 f"{ml(emig, f0)} against {ml(dmig, f0)} migrations ({n_runs(ed_n)})", ced + (f" ({ed_n} times)" if ed_n > 1 else "")])

    # Fig. 15: dynamic workloads.
    cdy = command(dym, "locus bench pragh dynamic --preset quick")
    for scheme in ["Split+Cache", "Shard", "Replica"]:
        key = next((k for k in dy if k[0] == scheme), None)
        if key is None:
            raise Fail(f"docs/results/pragh/pragh-dynamic.json: no rows with scheme={scheme}")
        phases = len(dy[key][0]["recover_s"].list())
        cells = ", ".join(recover(dy[key], i) for i in range(phases))
        fig = "Fig. 15: recovery after a workload switch" if scheme == "Split+Cache" else ""
        paper = "about 5 s (Split+Cache)" if scheme == "Split+Cache" else ""
        rows.append([fig, paper, f"{scheme}: {cells} ({phases} phases, {n_runs(dy_n)})",
                     cdy + (f" ({dy_n} times)" if dy_n > 1 else "") if scheme == "Split+Cache" else ""])

    # Past the paper: the replica budget.
    crb = command(rbm, "locus bench pragh replica-budget --preset quick")
    reps = sorted(rb.rows(scheme="Replica"), key=lambda r: r["replica_budget_bytes"].num())
    if not reps:
        raise Fail("docs/results/pragh/pragh-replica-budget.json: no rows with scheme=Replica")
    lo, hi = reps[0], reps[-1]
    rows.append(["Past the paper: Replica by its memory budget", "-",
                 f"{mr(lo, 'vs_orig', f2, 'x')} Orig with no replicas, {mr(hi, 'vs_orig', f2, 'x')} with replicas "
                 f"{pct(hi['replica_share'].num(), 0)} of the graph's values ({graph_label(rbm, 'R-MAT 16')})", crb])

    head = table(["Pragh figure", "Pragh's number (R-MAT 26)", "Locus's number, median [min-max]", "command"], rows)

    # Every scheme at each scale.
    detail = []
    for d, m, g, c in sets:
        for name in SCHEMES:
            hits = d.rows(scheme=name)
            if not hits:
                continue
            r = d.find(scheme=name)
            detail.append([name, f"{g} ({n_runs(int(r['runs'].num()))})", mr(r, "throughput_qps", f0), f1(r["p50_us"].num()),
                           pct(r["remote_gets"].num()), mr(r, "vs_orig", f2, "x"), mr_pct(r, "vs_ideal"),
                           share(r["migrated_fraction"].num())])
    schemes = table(["scheme", "graph", "queries/s", "p50 us", "remote GETs", "vs Orig", "vs Ideal", "values away"], detail)
    return {"pragh": head, "pragh-schemes": schemes}


# ----------------------------------------------------------------- NetMigrate

BASELINES = ["source", "rocksteady", "fulva"]
POLICIES = ["netmigrate-long", "netmigrate-medium", "netmigrate-short"]


def nm_med(row, what):
    return statistics.median(row["repeat_" + what].nums())


def nm_cell(row, what, fmt, unit=""):
    return ml(row["repeat_" + what].nums(), fmt, unit)


def closest(d):
    """Each baseline against the NetMigrate policy whose median migration
    time is closest to the baseline's: (baseline, policy, throughput gain,
    p50 change, p99 change), medians of the runs."""
    out = []
    for b in BASELINES:
        br = d.find(label=b)
        bm = nm_med(br, "migration_ms")
        pol = min(POLICIES, key=lambda p: abs(nm_med(d.find(label=p), "migration_ms") - bm))
        pr = d.find(label=pol)
        gain = nm_med(pr, "ops_per_s_migrating") / nm_med(br, "ops_per_s_migrating") - 1
        p50 = nm_med(pr, "p50_us_migrating") / nm_med(br, "p50_us_migrating") - 1
        p99 = nm_med(pr, "p99_us_migrating") / nm_med(br, "p99_us_migrating") - 1
        out.append((b, pol, gain, p50, p99, bm, nm_med(pr, "migration_ms")))
    return out


SHOWN = {"source": "source-based", "rocksteady": "Rocksteady", "fulva": "Fulva"}


def signed(x):
    return f"{100 * x:+.0f}%"


def netmigrate():
    o = load("netmigrate/netmigrate-overall.json")
    om = load_opt("netmigrate/netmigrate-overall.meta.json")
    orr = load("netmigrate/netmigrate-overall-redis.json")
    orm = load_opt("netmigrate/netmigrate-overall-redis.meta.json")
    of = load("netmigrate/full/netmigrate-overall.json")
    ofm = load_opt("netmigrate/full/netmigrate-overall.meta.json")
    fl = load("netmigrate/netmigrate-filters.json")
    flm = load_opt("netmigrate/netmigrate-filters.meta.json")
    gr = load("netmigrate/netmigrate-groups.json")
    grm = load_opt("netmigrate/netmigrate-groups.meta.json")
    bw = load("netmigrate/netmigrate-bandwidth.json")
    bwm = load_opt("netmigrate/netmigrate-bandwidth.meta.json")
    bu = load("netmigrate/netmigrate-budgets.json")
    bum = load_opt("netmigrate/netmigrate-budgets.meta.json")

    def label(meta, fallback):
        if meta is None:
            return fallback
        st = meta["settings"]
        return f"2^{int(st['records'].num()).bit_length() - 1} keys, {st['backend'].str()}, {n_runs(int(st['repeat'].num()))}"

    overall = [(o["rows"], label(om, "quick, built-in"), command(om, "locus bench netmigrate overall --preset quick")),
               (orr["rows"], label(orm, "quick, Redis"), command(orm, "locus bench netmigrate overall --backend redis --preset quick")),
               (of["rows"], label(ofm, "full, built-in"), command(ofm, "locus bench netmigrate overall --preset full"))]
    paper_gain = {"rocksteady": "+78.2% (short vs Rocksteady)", "fulva": "+56.5% (medium vs Fulva)", "source": "+31.9% (long vs source-based)"}
    rows = []
    first = True
    for b in ["rocksteady", "fulva", "source"]:
        for d, g, c in overall:
            cl = next(x for x in closest(d) if x[0] == b)
            rows.append(["Fig. 4: throughput during migration vs " + SHOWN[b] if first else "", paper_gain[b] if first else "",
                         f"{signed(cl[2])} ({cl[1].split('-')[1]} vs {SHOWN[b]}; {g})", c])
            first = False
        first = True
    first = True
    for d, g, c in overall:
        cells = ", ".join(f"{signed(x[3])} vs {SHOWN[x[0]]}" for x in closest(d))
        rows.append(["Fig. 5: p50 at a similar migration time" if first else "", "-49% to -65% (every case)" if first else "",
                     f"{cells} ({g})", c])
        first = False
    first = True
    for d, g, c in overall[:2]:
        cl = {x[0]: x for x in closest(d)}
        rows.append(["Fig. 6: p99 at a similar migration time" if first else "", "-27.0% vs Rocksteady, -39.5% vs Fulva" if first else "",
                     f"{signed(cl['rocksteady'][4])} vs Rocksteady, {signed(cl['fulva'][4])} vs Fulva ({g})", c])
        first = False
    first = True
    for d, g, c in overall:
        times = " / ".join(f"{nm_cell(d.find(label=p), 'migration_ms', f0, ' ms')}" for p in POLICIES)
        rows.append(["Figs. 4-6: migration time, long / medium / short" if first else "", "short < medium < long" if first else "",
                     f"{times} ({g})", c])
        first = False

    # Table 2: filters.
    cfl = command(flm, "locus bench netmigrate filters --preset quick")
    big = sorted({r["bf_bytes"].num() for r in fl["rows"].list()})[-1]
    cbfs = sorted(fl["rows"].rows(bf_bytes=int(big)), key=lambda r: -r["cbf_bytes"].num())
    rows.append(["Table 2: client extra bandwidth, CBF 128 B to 16 B", "0.06%, 0.30%, 1.37%, 3.73%",
                 ", ".join(f"{r['client_extra_pct'].num():.3g}%" for r in cbfs) + f" ({label(flm, 'quick')})", cfl])
    rows.append(["Table 2: throughput, CBF 128 B to 16 B", "564.1, 572.7, 362.5, 197.5 KQPS",
                 ", ".join(nm_cell(r, "ops_per_s_migrating", lambda x: f"{x / 1e3:.1f}", "K") for r in cbfs) + " ops/s", cfl])

    # Table 3: group size.
    cgr = command(grm, "locus bench netmigrate groups --preset quick")
    g16, gmax = gr["rows"].find(keys_per_group=16.0), max(gr["rows"].list(), key=lambda r: r["keys_per_group"].num())
    share = int(gr["rows"].list()[0]["groups"].num() * gr["rows"].list()[0]["keys_per_group"].num()) // int(gmax["keys_per_group"].num())
    rows.append(["Table 3: the largest groups vs the default", "494 vs 567 KQPS (2^21 keys a group, 2^-7 of the shard)",
                 f"{nm_cell(gmax, 'ops_per_s_migrating', lambda x: f'{x / 1e3:.1f}', 'K')} vs {nm_cell(g16, 'ops_per_s_migrating', lambda x: f'{x / 1e3:.1f}', 'K')} ops/s "
                 f"({int(gmax['keys_per_group'].num()):,} keys a group, 1/{share} of the shard, vs 16)", cgr])
    g1 = gr["rows"].find(keys_per_group=1.0)
    rows.append(["Table 3: migration time of tiny groups", "- (the smallest group is 2^11 keys)",
                 f"{nm_cell(g1, 'migration_ms', f0, ' ms')} at 1 key a group, {nm_cell(g16, 'migration_ms', f0, ' ms')} at 16", cgr])

    # Table 4: extra bandwidth.
    cbw = command(bwm, "locus bench netmigrate bandwidth --preset quick --repeat 3")

    def extent(label_, field):
        xs = [r[field].num() for r in bw["rows"].rows(label=label_)]
        if not xs:
            raise Fail(f"{bw.where}.rows: no rows with label={label_}")
        return min(xs), max(xs)

    nc, ns = extent("netmigrate", "client_extra_pct"), extent("netmigrate", "server_extra_pct")
    rows.append(["Table 4: NetMigrate extra bandwidth", "client 0.003-0.05%, server about 10^-5 %",
                 f"client {nc[1]:.4f}% at most, server {ns[1]:.4f}% at most (12 cells)", cbw])
    fc = extent("fulva", "client_extra_pct")
    rows.append(["Table 4: Fulva client-side", "36.9-60.9%", f"{fc[0]:.1f}-{fc[1]:.1f}%", cbw])
    ss = extent("source", "server_extra_pct")
    rows.append(["Table 4: source-based server-side", "0 at 0% writes, 9.8-31.3% with writes", f"{ss[0]:.2f}-{ss[1]:.2f}%", cbw])
    rs, rc = extent("rocksteady", "server_extra_pct"), extent("rocksteady", "client_extra_pct")
    rows.append(["Table 4: Rocksteady", "client 5.5-12.5%, server 0",
                 f"client {rc[1]:.2g}%, server {rs[0]:.2f}-{rs[1]:.2f}% (PriorityPulls count server-side here)", cbw])

    # Tables 5-7: throughput and p50 against each baseline in every cell.
    cbu = command(bum, "locus bench netmigrate budgets --preset quick --repeat 3")
    cells = sorted({(r["write_ratio"].num(), r["source_budget_pct"].num()) for r in bu["rows"].list()})
    above = below_p50 = pairs = 0
    for w, b in cells:
        nmr = bu["rows"].find(label="netmigrate", write_ratio=w, source_budget_pct=b)
        for base in BASELINES:
            br = bu["rows"].find(label=base, write_ratio=w, source_budget_pct=b)
            pairs += 1
            above += nm_med(nmr, "ops_per_s_migrating") > nm_med(br, "ops_per_s_migrating")
            below_p50 += nm_med(nmr, "p50_us_migrating") < nm_med(br, "p50_us_migrating")
    rows.append(["Table 5: NetMigrate's throughput vs each baseline", "highest in every cell (+6.5% to +416%)",
                 f"above in {above} of {pairs} (cell, baseline) pairs ({label(bum, 'quick')})", cbu])
    rows.append(["Table 6: NetMigrate's p50 vs each baseline", "lowest, with source-based's", f"below in {below_p50} of {pairs} pairs", cbu])

    # Correctness.
    files = [o, orr, of, fl, gr, bw, bu]
    failed = sum(r["failed_ops"].num() for d in files for r in d["rows"].list())
    lost = sum(r["lost_ops"].num() for d in files for r in d["rows"].list())
    viol = sum(r["violations"].num() for d in files for r in d["rows"].list())
    nrows = sum(len(d["rows"].list()) for d in files)
    rows.append(["4.3: consistency", "linearizable, no query lost",
                 f"{f0(failed)} failed, {f0(lost)} lost, {f0(viol)} linearizability violations in {nrows} configurations, every run", "all of the above"])

    head = table(["NetMigrate figure", "NetMigrate's number", "Locus's number, median [min-max]", "command"], rows)

    detail = []
    for d, g, c in overall:
        for r in d.list():
            detail.append([r["label"].str(), g, f"{int(r['source_budget_pct'].num())}%", nm_cell(r, "ops_per_s_migrating", f0),
                           nm_cell(r, "p50_us_migrating", f0), nm_cell(r, "p99_us_migrating", f0), nm_cell(r, "migration_ms", f0),
                           f"{r['client_extra_pct'].num():.4f}%", f"{r['server_extra_pct'].num():.4f}%"])
    overall_t = table(["row", "setting", "source budget", "ops/s while migrating", "p50 us", "p99 us", "migration ms", "client extra", "server extra"], detail)
    return {"netmigrate": head, "netmigrate-overall": overall_t}


# ------------------------------------------------------------------ Fargraph+

ALGOS = ["bfs", "wcc", "pagerank", "radii"]


def algo_key(node):
    """The table's key of a report's algorithm: CC was named wcc before issue 63."""
    s = node.str()
    return "wcc" if s == "cc" else s


ALGO_NAME = {"bfs": "BFS", "wcc": "WCC", "pagerank": "PageRank", "radii": "Radii"}


def times(run):
    ts = run["times_s"].nums()
    return statistics.median(ts), min(ts), max(ts)


def shorter(without, with_):
    """How much shorter a run is with a change, in words."""
    d = (without - with_) / without
    return f"{100 * d:.0f}% shorter" if d >= 0 else f"{-100 * d:.0f}% longer"


def fargraph():
    ov = load("fargraph/overall.json")
    ra = load("fargraph/ratio.json")
    ch = load("fargraph/chunk.json")
    bf = load("fargraph/buffering.json")
    th = load("fargraph/threads.json")

    def gl(d):
        return f"R-MAT {int(d['graph']['scale'].num())}, {n_runs(int(d['repeat'].num()))}"

    def cmd(d, exp):
        preset = d["preset"].str()
        rep = int(d["repeat"].num())
        return f"`locus bench fargraph {exp} --preset {preset}" + (f" --repeat {rep}`" if rep != 3 else "`")

    co = cmd(ov, "overall")
    rows = []
    by = {algo_key(a["algo"]): a for a in ov["derived"]["by_algo"].list()}
    for i, algo in enumerate(ALGOS):
        if algo not in by:
            raise Fail(f"{ov.where}.derived.by_algo: no entry with algo={algo}")
        a = by[algo]
        far, far_r = a["median_s"]["far"].num(), a["range_s"]["far"].nums()
        ora, ora_r = a["median_s"]["local"].num(), a["range_s"]["local"].nums()
        rows.append(["Fig. 15: far vs Oracle at far ratio 0.8" if i == 0 else "", "near the Oracle (no number given)" if i == 0 else "",
                     f"{ALGO_NAME[algo]} {a['normalised_to_oracle']['far'].num():.2f}x: far {rng(far, far_r[0], far_r[1], f3, ' s')}, "
                     f"Oracle {rng(ora, ora_r[0], ora_r[1], f3, ' s')} ({gl(ov)})", co if i == 0 else ""])
    rows.append(["Fig. 15: far vs Fastswap (paged)", "up to 11.2x",
                 ", ".join(f"{ALGO_NAME[a]} {by[a]['far_speedup_over_paged'].num():.2f}x" for a in ALGOS) + " (paged with 8-page readahead)", co])
    rows.append(["Fig. 15: far vs Original (disk)", "up to 9.2x",
                 ", ".join(f"{ALGO_NAME[a]} {by[a]['far_speedup_over_disk'].num():.2f}x" for a in ALGOS), co])

    cr = cmd(ra, "ratio")
    rat = {round(r["far_ratio"].num(), 2): r for r in ra["derived"]["by_ratio"].list()}
    for want in (0.8, 0.95):
        if want not in rat:
            raise Fail(f"{ra.where}.derived.by_ratio: no entry with far_ratio={want}")
    r8, r95 = rat[0.8], rat[0.95]
    rows.append(["Fig. 18: BFS as the far ratio grows", "Fastswap rises sharply above 0.8; at 0.95 it does not finish in 10 min (LJ)",
                 f"paged with vertex data {r8['paged_vertices_over_far'].num():.1f}x far at 0.8, {r95['paged_vertices_over_far'].num():.1f}x at 0.95 "
                 f"({r95['paged_vertices_s'].num():.2f} s against {r95['far_s'].num():.3f} s; R-MAT {int(ra['graph']['scale'].num())})", cr])
    rows.append(["", "Fargraph+ stays acceptable",
                 f"far {rat[min(rat)]['far_s'].num():.3f} s at {min(rat):g} to {r95['far_s'].num():.3f} s at 0.95; "
                 f"paged with local vertex data {r95['paged_readahead_over_far'].num():.1f}x far at 0.95", cr])

    cc = cmd(ch, "chunk")
    for algo in ["bfs", "pagerank"]:
        by_chunk = {int(r["report"]["chunk_bytes"].num()): r for r in ch["runs"].list() if algo_key(r["report"]["algo"]) == algo}
        for c in (4096, 262144, 4194304):
            if c not in by_chunk:
                raise Fail(f"{ch.where}.runs: no run with algo={algo}, chunk_bytes={c}")
        cells = []
        for c, name in ((4096, "4 KB"), (262144, "256 KB"), (4194304, "4 MB")):
            m, lo, hi = times(by_chunk[c])
            cells.append(f"{rng(m, lo, hi, f3, ' s')} ({name})")
        rows.append(["Fig. 19: chunk size" if algo == "bfs" else "", "4 KB clearly slower; best at 256 KB (32 KB for BFS on LJ)" if algo == "bfs" else "",
                     f"{ALGO_NAME[algo]}: " + ", ".join(cells) + f" ({gl(ch)})", cc if algo == "bfs" else ""])

    cb = cmd(bf, "buffering")
    for algo in ["bfs", "pagerank"]:
        runs = {bool(r["report"]["buffering"].v): r for r in bf["runs"].list() if algo_key(r["report"]["algo"]) == algo}
        if len(runs) != 2:
            raise Fail(f"{bf.where}.runs: expected a run with and one without buffering for algo={algo}")
        off, on = times(runs[False]), times(runs[True])
        rows.append(["Table 4: double buffering" if algo == "bfs" else "", ("12-14% shorter (BFS)" if algo == "bfs" else "7-19% shorter (PageRank)"),
                     f"{ALGO_NAME[algo]} {shorter(off[0], on[0])}: {rng(*off, f3, ' s')} without, {rng(*on, f3, ' s')} with ({gl(bf)})",
                     cb if algo == "bfs" else ""])

    ct = cmd(th, "threads")
    paper_best = {"bfs": "4.9x", "wcc": "4.6x", "pagerank": "7.1x", "radii": "8.2x"}
    cells = []
    for algo in ALGOS:
        runs = [r for r in th["runs"].list() if algo_key(r["report"]["algo"]) == algo]
        if len(runs) != 3:
            raise Fail(f"{th.where}.runs: expected 3 runs (1, 2 and auto threads) for algo={algo}, found {len(runs)}")
        one, two = times(runs[0])[0], times(runs[1])[0]
        cells.append(f"{ALGO_NAME[algo]} {one / two:.2f}x")
    rows.append(["Figs. 16-17: best speedup over one thread", ", ".join(f"{ALGO_NAME[a]} {paper_best[a]}" for a in ALGOS) + " (32 cores)",
                 ", ".join(cells) + f" with 2 threads (2 vCPUs; {gl(th)})", ct])

    head = table(["Fargraph+ figure", "Fargraph+'s number", "Locus's number, median [min-max]", "command"], rows)

    detail = []
    for algo in ALGOS:
        a = by[algo]
        cells = [ALGO_NAME[algo]]
        for b in ["local", "far", "paged", "disk"]:
            r = a["range_s"][b].nums()
            cells.append(rng(a["median_s"][b].num(), r[0], r[1], f3))
        cells += [f"{a['normalised_to_oracle']['far'].num():.2f}", f"{a['far_speedup_over_paged'].num():.2f}", f"{a['far_speedup_over_disk'].num():.2f}"]
        detail.append(cells)
    overall_t = table(["algorithm", "Oracle (s)", "far (s)", "paged, readahead 8 (s)", "disk (s)", "far / Oracle", "paged / far", "disk / far"], detail)
    return {"fargraph": head, "fargraph-overall": overall_t}


# -------------------------------------------------------------------- cluster


def cluster():
    tcp = load("cluster/pragh-schemes-tcp.json")
    tcpm = load_opt("cluster/pragh-schemes-tcp.meta.json")
    cl = load("cluster/client.json")
    clm = load_opt("cluster/client.meta.json")
    clf = load_opt("cluster/full/client.json")
    clfm = load_opt("cluster/full/client.meta.json")
    du = load("cluster/durability.json")
    dum = load_opt("cluster/durability.meta.json")

    ct = command(tcpm, "locus bench pragh schemes --fabric tcp --runs 3")
    summ = tcp["summary"]
    o, sc, rep = summ.find(scheme="Orig"), summ.find(scheme="Split+Cache"), summ.find(scheme="Replica")
    bound = ""
    if tcpm is not None and tcpm.has("placement_bound"):
        bound = f", bound {pct(tcpm['placement_bound']['best_single_copy_remote_gets'].num())}"
    rows = [
        ["Pragh Table 1: Orig remote accesses, over TCP", "86.2%",
         f"{ms_pct(o['tcp']['remote_rate'])} of operations (in process {ms_pct(o['local']['remote_rate'])})", ct],
        ["Pragh Fig. 10: Split+Cache vs Orig, over TCP", "19x",
         f"{ms(sc['tcp']['vs_orig'], f2, 'x')} (in process {ms(sc['local']['vs_orig'], f2, 'x')})", ct],
        ["Pragh Fig. 10: Split+Cache vs Ideal, over TCP", "72%",
         f"{ms_pct(sc['tcp']['vs_ideal'])} (in process {ms_pct(sc['local']['vs_ideal'])})", ct],
        ["Pragh 6.1: Split+Cache remote accesses, over TCP", "2.0%",
         f"{ms_pct(sc['tcp']['remote_rate'])} of operations{bound}", ct],
        ["Past the paper: Replica vs Ideal, over TCP", "-",
         f"{ms_pct(rep['tcp']['vs_ideal'])} (in process {ms_pct(rep['local']['vs_ideal'])})", ct],
    ]
    cc = command(clm, "locus bench client --servers 1,8 --runs 3")
    for setup, what in (("orig", "no location cache, no coordinator"), ("migrated", "coordinator on, after its moves")):
        one, eight = cl["summary"].find(setup=setup, servers=1), cl["summary"].find(setup=setup, servers=8)
        rows.append([f"Client KHOP 2 x 100 round trip, 8 servers against 1 ({what})", "- (not in the papers)",
                     f"{ms(eight['khop_rtt_us'], f0, ' us')} against {ms(one['khop_rtt_us'], f0, ' us')}: "
                     f"{ms(eight['khop_vs_smallest'], f2, 'x')}", cc])
    cd = command(dum, "locus bench durability --runs 3 --duration-s 10")
    off, always = du["summary"].find(mode="off"), du["summary"].find(mode="always")
    rows.append(["Updates with the log, `sync = always` against none", "- (Pragh 5 leaves durability to the store)",
                 f"{ms(always['updates_per_s'], f0)} against {ms(off['updates_per_s'], f0)} updates/s", cd])
    fa = load_opt("cluster/faults.json")
    fam = load_opt("cluster/faults.meta.json")
    faults = None
    if fa is not None:
        moving = fa["settings"].has("slot_moves") and bool(fa["settings"]["slot_moves"].v)
        cf = command(fam, f"locus bench faults --duration-s {f0(fa['settings']['duration_s'].num())}"
                          f"{' --slot-moves' if moving else ''} --seed {fa['seed'].v}")
        kinds = len(fa["faults_injected"].v)
        windows = fa["windows"].list()
        probes_ok = sum(1 for w in windows if w["probe_ok"].v)
        moved = f"; {f0(fa['slot_moves']['committed'].num())} batches of slots moved" if moving else ""
        rows.append(["Fault lab: one seeded schedule (partitions, pauses, kill -9, etcd and coordinator cut off, a slow link, a server joining and one leaving)"
                     + (", slots moving all along" if moving else ""),
                     "- (not in the papers)",
                     f"{f0(fa['lost_acknowledged_writes'].num())} of {f0(fa['acknowledged_writes'].num())} acknowledged writes lost, "
                     f"{f0(fa['violations'].num())} violations in {f0(fa['keys_checked'].num())} checked histories; "
                     f"{len(windows)} windows of {kinds} kinds, {probes_ok} probes positive{moved}",
                     cf])
        frow = []
        for w in windows:
            frow.append([w["kind"].str(), w["target"].str().replace("|", "\\|"), f"{w['start_ms'].num() / 1000:.1f}",
                         f"{(w['end_ms'].num() - w['start_ms'].num()) / 1000:.1f}", f0(w["ops"].num()),
                         pct(w["availability"].num()), "yes" if w["probe_ok"].v else "**no**"])
        faults = table(["fault", "target", "start s", "held s", "operations", "answered", "probe positive"], frow)
    # Ten schedules of five minutes (issue 61's target): one summary row per run.
    fc = load_opt("cluster/faults-campaign.json")
    campaign = None
    if fc is not None:
        crow_ = []
        tot = {k: 0 for k in ("ops", "acknowledged_writes", "lost_acknowledged_writes", "violations",
                              "keys_checked", "windows", "probes_failed", "batches")}
        for r in fc["runs"].list():
            kinds = r["faults_injected"].v
            vals = {"ops": r["ops"].num(), "acknowledged_writes": r["acknowledged_writes"].num(),
                    "lost_acknowledged_writes": r["lost_acknowledged_writes"].num(),
                    "violations": r["violations"].num(), "keys_checked": r["keys_checked"].num(),
                    "windows": r["windows"].num(), "probes_failed": r["probes_failed"].num(),
                    "batches": r["slot_moves"]["committed"].num()}
            for k, v in vals.items():
                tot[k] += v
            crow_.append([str(r["seed"].v), f0(vals["windows"]), f"{len(kinds)}", f0(vals["ops"]),
                          f0(vals["acknowledged_writes"]), f0(vals["lost_acknowledged_writes"]),
                          f0(vals["violations"]), f0(vals["keys_checked"]), f0(vals["probes_failed"]),
                          f0(vals["batches"])])
        crow_.append(["all", f0(tot["windows"]), "", f0(tot["ops"]), f0(tot["acknowledged_writes"]),
                      f0(tot["lost_acknowledged_writes"]), f0(tot["violations"]), f0(tot["keys_checked"]),
                      f0(tot["probes_failed"]), f0(tot["batches"])])
        campaign = table(["seed", "windows", "kinds", "operations", "acknowledged writes", "lost", "violations",
                          "checked histories", "probes failed", "batches of slots moved"], crow_)
    head = table(["figure", "paper's number", "Locus's number, median [min-max]", "command"], rows)

    crow = []
    for d, meta in [(cl, clm)] + ([(clf, clfm)] if clf is not None else []):
        c = command(meta, "locus bench client --servers 1,8 --runs 3")
        sc_ = f"R-MAT {int(meta['settings']['scale'].num())}" if meta is not None else "-"
        for r in d["summary"].list():
            crow.append([sc_, r["setup"].str(), f0(r["servers"].num()), ms(r["neighbors_rtt_us"], f1, " us"),
                         ms(r["khop_rtt_us"], f0, " us"), ms(r["khop_vs_smallest"], f2, "x"),
                         ms(r["khop_server_us"], f0, " us"), ms_pct(r["khop_remote_rate"]),
                         ms(r["load_stored_edges_per_s"], lambda x: f"{x / 1e6:.2f}", " M"), c])
    client = table(["graph", "setup", "servers", "NEIGHBORS k=100, round trip", "KHOP 2 x 100, round trip",
                    "against 1 server", "KHOP at the server", "remote operations", "bulk load, stored edges/s",
                    "command"], crow)

    trow = []
    for r in summ.list():
        for fab, name in (("local", "in process"), ("tcp", "TCP")):
            x = r[fab]
            trow.append([r["scheme"].str() if fab == "local" else "", name, ms(x["throughput_qps"], f0), ms(x["p50_us"], f1),
                         ms(x["p99_us"], f0), ms_pct(x["remote_rate"]), ms(x["vs_orig"], f2, "x"), ms_pct(x["vs_ideal"]),
                         ms_pct(x["migrated_fraction"])])
    schemes = table(["scheme", "fabric", "queries/s", "p50 us", "p99 us", "remote", "vs Orig", "vs Ideal", "values away"], trow)

    drow = []
    for r in du["summary"].list():
        rpg = r["records_per_group"]
        drow.append([r["mode"].str(), ms(r["updates_per_s"], f0), ms(r["p50_us"], f0), ms(r["p99_us"], f0),
                     "-" if rpg["median"].num() == 0 else ms(rpg, f2)])
    dur = table(["durability", "acknowledged updates/s", "p50 us", "p99 us", "log records per group"], drow)
    out = {"cluster": head, "cluster-client": client, "cluster-schemes": schemes, "cluster-durability": dur}
    if faults is not None:
        out["cluster-faults"] = faults
    if campaign is not None:
        out["cluster-faults-campaign"] = campaign
    return out


# --------------------------------------------------------------------- SPARQL


def sparql():
    d = load("sparql/sparql-mix.json")
    m = load_opt("sparql/sparql-mix.meta.json")
    c = command(m, "locus bench sparql --preset quick")
    s = d["summary"]
    g = f"LUBM-{int(m['settings']['universities'].num())}" if m is not None else "LUBM"
    o, sh, sp, sc, rep = (s.find(scheme=x) for x in ["Orig", "Shard", "Split", "Split+Cache", "Replica"])

    def q(r):
        return r["throughput_qps"]["median"].num()

    rows = [
        ["Fig. 16b: Orig (Wukong) remote accesses", "86%", f"{ms_pct(o['remote_gets'])} of GETs ({g})", c],
        ["Fig. 16a: Split+Cache vs Orig", "2.53x", f"{s.find(scheme='Split+Cache')['vs_orig'].num():.2f}x", c],
        ["Fig. 16b: Split+Cache remote accesses", "10%", f"{ms_pct(sc['remote_gets'])} of GETs", c],
        ["Fig. 16a: Shard vs Orig", "about 1.05x", f"{sh['vs_orig'].num():.2f}x", c],
        ["Fig. 16a: Split vs Shard", "1.52x (407K / 267K)", f"{q(sp) / q(sh):.2f}x ({f0(q(sp))} / {f0(q(sh))})", c],
        ["Fig. 16a: Split+Cache vs Split", "1.58x (642K / 407K)", f"{q(sc) / q(sp):.2f}x ({f0(q(sc))} / {f0(q(sp))})", c],
        ["Past the paper: Replica vs Orig", "-", f"{rep['vs_orig'].num():.2f}x, {ms_pct(rep['remote_gets'])} remote GETs", c],
    ]
    head = table(["Pragh figure", "Pragh's number (LUBM-10240)", "Locus's number, median [min-max]", "command"], rows)
    detail = []
    for r in s.list():
        detail.append([r["scheme"].str(), ms(r["throughput_qps"], f0), ms(r["p50_us"], f1), ms(r["p99_us"], f0),
                       ms_pct(r["remote_rate"]), ms_pct(r["remote_gets"]), ms_pct(r["migrated_fraction"]), f"{r['vs_orig'].num():.2f}x"])
    schemes = table(["scheme", "queries/s", "p50 us", "p99 us", "remote ops", "remote GETs", "values away", "vs Orig"], detail)
    return {"sparql": head, "sparql-schemes": schemes}


# ---------------------------------------------------------------- the pages

PAGES = {"pragh": pragh, "netmigrate": netmigrate, "fargraph": fargraph, "cluster": cluster, "sparql": sparql}


def rewrite(page, check):
    """Replaces every generated table of docs/results/PAGE.md; returns
    whether the page changed (with `check`, it is not written)."""
    path = os.path.join(RESULTS, page + ".md")
    if not os.path.exists(path):
        raise Fail(f"docs/results/{page}.md: page missing")
    with open(path) as f:
        text = f.read()
    tables = PAGES[page]()
    new = text
    for name, body in tables.items():
        pat = re.compile(r"(<!-- table:" + re.escape(name) + r":begin -->\n)(.*?)(<!-- table:" + re.escape(name) + r":end -->)", re.S)
        if not pat.search(new):
            raise Fail(f"docs/results/{page}.md: no markers <!-- table:{name}:begin --> ... <!-- table:{name}:end -->")
        new = pat.sub(lambda m: m.group(1) + body + "\n" + m.group(3), new)
    for name in re.findall(r"<!-- table:([\w-]+):begin -->", new):
        if name not in tables:
            raise Fail(f"docs/results/{page}.md: markers for table '{name}', which this script does not make")
    if new != text and not check:
        with open(path, "w") as f:
            f.write(new)
    return new != text


def main(argv):
    check = "--check" in argv
    pages = [a for a in argv if a != "--check"]
    if not pages or any(p not in PAGES and p != "all" for p in pages):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    if "all" in pages:
        pages = list(PAGES)
    stale = []
    for page in pages:
        try:
            changed = rewrite(page, check)
        except Fail as e:
            print(f"results_tables.py: {e}", file=sys.stderr)
            return 1
        if changed:
            stale.append(page)
        print(f"docs/results/{page}.md: " + ("differs from its JSON" if check and changed else "rewritten" if changed else "up to date"))
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
