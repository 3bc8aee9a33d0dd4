#!/usr/bin/env python3
"""Runs a command; every 100 ms records each thread's comm, schedstat (cpu ns, wait ns, slices)
and voluntary/nonvoluntary switches. Output lines to stdout of the command are timestamped."""
import os, sys, time, subprocess, threading, json
out = open(sys.argv[1], 'w')
cmd = sys.argv[2:]
t0 = time.time()
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
def reader():
    for line in p.stdout:
        out.write(json.dumps({'t': time.time()-t0, 'line': line.rstrip()}) + '\n')
threading.Thread(target=reader, daemon=True).start()
while p.poll() is None:
    snap = {}
    try:
        for tid in os.listdir(f'/proc/{p.pid}/task'):
            try:
                b = f'/proc/{p.pid}/task/{tid}/'
                comm = open(b+'comm').read().strip()
                ss = open(b+'schedstat').read().split()
                st = open(b+'status').read()
                vol = int(st.split('voluntary_ctxt_switches:')[1].split()[0])
                nv = int(st.split('nonvoluntary_ctxt_switches:')[1].split()[0])
                snap[tid] = [comm, int(ss[0]), int(ss[1]), int(ss[2]), vol, nv]
            except Exception:
                pass
    except Exception:
        pass
    try:
        rss = int(open(f'/proc/{p.pid}/status').read().split('VmRSS:')[1].split()[0])
    except Exception:
        rss = 0
    out.write(json.dumps({'t': time.time()-t0, 'snap': snap, 'rss_kb': rss}) + '\n')
    time.sleep(0.1)
out.close()
