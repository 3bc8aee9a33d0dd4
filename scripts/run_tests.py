#!/usr/bin/env python3
"""Runs every test binary of the workspace, JOBS at a time (the README's test
command, through scripts/test).

`cargo test --workspace` runs its test binaries one after another; most of
Locus's slow ones wait (real processes, leases, etcd) rather than compute, so
two at once on a 2-core host take about half the wall time. Each binary runs
as cargo runs it (its package's directory as the working directory), with
its output kept and printed only if it fails; a summary line per binary says
how long it took. The doc tests run last, through cargo.

Usage: scripts/run_tests.py [--jobs N]   (default: LOCUS_TEST_JOBS, else 2)
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

# Binaries known to take longest go first, so that the last one to start is
# a short one (names as cargo reports them; the rest keep cargo's order).
SLOW_FIRST = [
    "cli",
    "sim_cluster",
    "snapshot_cut",
    "elastic_processes",
    "sim_linearizability",
    "faults_bench",
    "bench_over_processes",
    "rdf_cli",
]


def test_binaries():
    """(name, package directory, executable) of every test binary."""
    out = subprocess.run(
        ["cargo", "test", "--workspace", "--no-run", "--message-format=json"],
        check=True,
        stdout=subprocess.PIPE,
    ).stdout.decode()
    found = []
    for line in out.splitlines():
        try:
            m = json.loads(line)
        except json.JSONDecodeError:
            continue
        if (
            m.get("reason") == "compiler-artifact"
            and m.get("executable")
            and m["profile"]["test"]
        ):
            found.append(
                (
                    m["target"]["name"],
                    os.path.dirname(m["manifest_path"]),
                    m["executable"],
                )
            )
    rank = {n: i for i, n in enumerate(SLOW_FIRST)}
    found.sort(key=lambda b: rank.get(b[0], len(SLOW_FIRST)))
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("LOCUS_TEST_JOBS", "2")))
    args = ap.parse_args()
    if args.jobs < 1:
        sys.exit(f"--jobs {args.jobs}: at least 1")
    binaries = test_binaries()
    print(f"running {len(binaries)} test binaries, {args.jobs} at a time", flush=True)
    lock = threading.Lock()
    failed = []
    start = time.monotonic()

    def run(b):
        name, cwd, exe = b
        t0 = time.monotonic()
        p = subprocess.run(
            [exe, "-q"], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        took = time.monotonic() - t0
        with lock:
            status = "ok" if p.returncode == 0 else f"FAILED (exit {p.returncode})"
            print(
                f"  {name} ({os.path.basename(cwd)}): {status} in {took:.1f} s"
                f" [{time.monotonic() - start:.0f} s]",
                flush=True,
            )
            if p.returncode != 0:
                failed.append(name)
                sys.stdout.write(p.stdout.decode(errors="replace"))
                sys.stdout.flush()

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        list(pool.map(run, binaries))
    print(f"test binaries took {time.monotonic() - start:.0f} s", flush=True)
    doc = subprocess.run(["cargo", "test", "--workspace", "--doc", "-q"])
    if doc.returncode != 0:
        failed.append("doc tests")
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")
    print("every test passed")


if __name__ == "__main__":
    main()
