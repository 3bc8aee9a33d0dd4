"""The client side of the handshake (docs/protocol.md, section 1) against
fake servers on 127.0.0.1: each runs one connection in a thread; every wait
is bounded."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from fakeserver import SECRET, FakeCluster, recv_exact, server_handshake
from locus_client import AuthError, Client, LocusTimeout, LocusUnavailable, ProtocolError, auth

WAIT_S = 5.0


class OneShot:
    """A listener that runs ``handler(conn)`` on its first connection, in a thread."""

    def __init__(self, handler):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.result = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(handler,), daemon=True)
        self.thread.start()

    def _run(self, handler):
        try:
            self.listener.settimeout(WAIT_S)
            conn, _ = self.listener.accept()
            with conn:
                conn.settimeout(WAIT_S)
                self.result = handler(conn)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e
        finally:
            self.listener.close()

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=WAIT_S)

    def join(self):
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive(), "fake server still running"
        if self.error is not None:
            raise self.error
        return self.result


def client_handshake(server: OneShot, secret: str, bound_s: float = WAIT_S):
    with server.connect() as sock:
        auth.handshake(sock, secret, time.monotonic() + bound_s, auth.KIND_CLIENT, peer="server 0 (test)")


def test_right_secret_passes_and_both_proofs_check():
    server = OneShot(lambda conn: server_handshake(conn, SECRET))
    client_handshake(server, SECRET)
    assert server.join() is True  # the server verified the client's proof


def test_wrong_secret_gets_the_servers_reason():
    server = OneShot(lambda conn: server_handshake(conn, SECRET))
    with pytest.raises(AuthError, match="refused the handshake: wrong cluster secret") as e:
        client_handshake(server, "not the secret")
    assert e.value.reason.startswith("wrong cluster secret")
    assert "server 0 (test)" in str(e.value)
    assert server.join() is False


def test_kind_is_part_of_the_proof():
    # A proof for the client listener (kind 2) is refused by a fabric listener (kind 1).
    server = OneShot(lambda conn: server_handshake(conn, SECRET, kind=auth.KIND_FABRIC))
    with pytest.raises(AuthError):
        client_handshake(server, SECRET)
    assert server.join() is False


def test_server_with_a_wrong_proof_is_rejected():
    server = OneShot(lambda conn: server_handshake(conn, SECRET, bad_mac=True))
    with pytest.raises(AuthError, match="proof is wrong"):
        client_handshake(server, SECRET)
    server.join()


def test_garbage_instead_of_a_challenge_is_a_clear_error():
    server = OneShot(lambda conn: conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n"))
    with pytest.raises(ProtocolError, match="did not open with the Locus handshake.*client port"):
        client_handshake(server, SECRET)
    server.join()


def test_unknown_status_byte_is_a_protocol_error():
    def handler(conn):
        conn.sendall(auth.AUTH_MAGIC + bytes(32))
        recv_exact(conn, 64)
        conn.sendall(b"\x07")

    server = OneShot(handler)
    with pytest.raises(ProtocolError, match="status 0x07"):
        client_handshake(server, SECRET)
    server.join()


def test_refusal_with_undecodable_reason_still_reports():
    def handler(conn):
        conn.sendall(auth.AUTH_MAGIC + bytes(32))
        recv_exact(conn, 64)
        conn.sendall(b"\x01" + struct.pack("<H", 3) + b"\xffok")

    server = OneShot(handler)
    with pytest.raises(AuthError, match="ok"):
        client_handshake(server, SECRET)
    server.join()


def test_silent_server_times_out_within_the_bound():
    release = threading.Event()

    def handler(conn):
        release.wait(WAIT_S)  # says nothing

    server = OneShot(handler)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        client_handshake(server, SECRET, bound_s=0.3)
    assert time.monotonic() - t0 < 2.0
    release.set()
    server.join()


def test_trickling_server_cannot_stretch_the_bound():
    # One byte at a time, each inside a per-call timeout: the absolute deadline still fires.
    stop = threading.Event()

    def handler(conn):
        for b in auth.AUTH_MAGIC + bytes(32):
            if stop.wait(0.1):
                return
            conn.sendall(bytes([b]))

    server = OneShot(handler)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        client_handshake(server, SECRET, bound_s=0.5)
    assert time.monotonic() - t0 < 2.0
    stop.set()
    server.join()


def test_server_closing_mid_handshake_is_a_connection_error():
    server = OneShot(lambda conn: conn.sendall(auth.AUTH_MAGIC + bytes(10)))
    with pytest.raises(ConnectionError):
        client_handshake(server, SECRET)
    server.join()


def test_empty_secret_is_refused_before_connecting():
    with pytest.raises(ValueError, match="empty"):
        auth.secret_bytes("")


def test_client_reports_auth_errors_and_timeouts_with_the_server():
    with FakeCluster(machines=1) as cluster:
        with Client(cluster.addresses, "wrong", timeout=2) as c:
            with pytest.raises(AuthError, match=r"server 0 \(127\.0\.0\.1:\d+\) refused"):
                c.ping()
        with Client(cluster.addresses, SECRET, timeout=2) as c:
            assert len(c.ping()) == 1
    silent = OneShot(lambda conn: time.sleep(1.5))
    with Client([f"127.0.0.1:{silent.port}"], SECRET, timeout=0.2) as c:
        t0 = time.monotonic()
        with pytest.raises(LocusTimeout, match=r"server 0 \(127\.0\.0\.1:\d+\): no answer within 1\.2 s"):
            c.ping()
        assert time.monotonic() - t0 < 1.4
    silent.join()


def test_unreachable_server_names_itself():
    s = socket.create_server(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with Client([f"127.0.0.1:{port}"], SECRET, timeout=1) as c:
        with pytest.raises(LocusUnavailable, match=rf"server 0 \(127\.0\.0\.1:{port}\): cannot connect") as e:
            c.ping()
    assert isinstance(e.value, ConnectionError)
    assert e.value.server == 0
