"""Blocking socket reads and writes bounded by an absolute deadline.

A socket timeout bounds one call, not a whole exchange: a peer that trickles
one byte a second would never time out. So every read and write here takes
``end`` (a ``time.monotonic()`` instant) and re-arms the timeout with what is
left of it before each system call.
"""

from __future__ import annotations

import socket
import time


def remaining(end: float) -> float:
    """Seconds left until ``end``; raises ``TimeoutError`` if none."""
    left = end - time.monotonic()
    if left <= 0:
        raise TimeoutError("timed out")
    return left


def recv_exact(sock: socket.socket, n: int, end: float) -> bytes:
    """Exactly ``n`` bytes, or ``ConnectionError`` if the peer closes first
    (``TimeoutError`` if ``end`` passes). ``n`` is bounded by the caller."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        sock.settimeout(remaining(end))
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise PeerClosed(got, n)
        got += k
    return bytes(buf)


def send_all(sock: socket.socket, data: bytes, end: float) -> None:
    # Since Python 3.5 the timeout of sendall bounds the whole call.
    sock.settimeout(remaining(end))
    sock.sendall(data)


class PeerClosed(ConnectionError):
    """The peer closed the connection; ``got`` of ``wanted`` bytes had arrived."""

    def __init__(self, got: int, wanted: int):
        super().__init__(f"the peer closed the connection ({got} of {wanted} expected bytes arrived)")
        self.got = got
        self.wanted = wanted
