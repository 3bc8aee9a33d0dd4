#!/usr/bin/env python3
"""Platform baseline for the TCP fabric's round trip: a 24-byte ping-pong
between two processes over loopback with TCP_NODELAY. Prints the median in us.

    python3 scripts/loopback_rtt.py [rounds]
"""
import os
import socket
import sys
import time

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(1)
port = listener.getsockname()[1]
if os.fork() == 0:
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        data = conn.recv(64)
        if not data:
            os._exit(0)
        conn.sendall(data)
client = socket.create_connection(("127.0.0.1", port))
client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
samples = []
for _ in range(rounds):
    t = time.perf_counter()
    client.sendall(b"x" * 24)
    client.recv(64)
    samples.append(time.perf_counter() - t)
client.close()
os.wait()
samples.sort()
print(f"loopback round trip, median of {rounds}: {samples[len(samples) // 2] * 1e6:.1f} us")
