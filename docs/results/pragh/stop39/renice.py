#!/usr/bin/env python3
"""Runs a command; every 20 ms sets the niceness of its threads whose name starts with one of
PREFIXES (comma-separated, first argument) to NICE (second argument)."""
import os, sys, time, subprocess
prefixes = tuple(sys.argv[1].split(',')); nice = int(sys.argv[2]); cmd = sys.argv[3:]
p = subprocess.Popen(cmd)
done = set()
while p.poll() is None:
    try:
        for tid in os.listdir(f'/proc/{p.pid}/task'):
            if tid in done: continue
            try:
                comm = open(f'/proc/{p.pid}/task/{tid}/comm').read().strip()
            except OSError:
                continue
            if comm.startswith(prefixes):
                try:
                    os.setpriority(os.PRIO_PROCESS, int(tid), nice); done.add(tid)
                except OSError:
                    pass
    except OSError:
        pass
    time.sleep(0.02)
sys.exit(p.returncode)
