"""A small fake Locus cluster for the client's tests: the server side of the
handshake, HELLO, and a dict-backed store answering every request with the
framing of docs/protocol.md. Each fake server is a listener on 127.0.0.1
port 0 with a thread per connection; the servers of one cluster share one
store (so a misrouted request is caught by the request log, not by a
missing entry) and one log of (server, op, fields).

Homes follow a slot table (``FakeCluster.table``, a new cluster's 4096 slots
by default), which SLOTS serves. ``check_homes`` makes the servers refuse
requests about vertices they do not home with WRONG_HOME, as a real server
with durability does; a server's own ``table`` (what it serves and checks)
may differ from the cluster's, as a server's may mid-move; ``refuse_all``
refuses every vertex request; ``slots_body`` / ``slots_error`` make SLOTS
answer raw bytes or an error.

HELLO says the cluster's room for servers: ``FakeCluster.hello_machines``
(a server's own ``hello_machines`` wins), else the servers made. SERVERS
lists the cluster's servers (``servers_listed`` of them, all by default,
as a server that learned of added ones would); ``servers_body`` /
``servers_error`` make it answer raw bytes or an error. A client given only
some of the cluster's addresses sees the others as servers added later.
"""

from __future__ import annotations

import hmac
import json
import os
import socket
import struct
import threading
import time

from locus_client import auth
from locus_client import protocol as p
from locus_client.slots import SLOTS_DEFAULT, SlotTable

SECRET = "fake secret é"


def recv_exact(conn: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("client closed")
        buf += chunk
    return buf


def server_handshake(conn: socket.socket, secret: str, kind: int = auth.KIND_CLIENT, bad_mac: bool = False) -> bool:
    """The server side of the handshake; False (after a refusal) if the client's proof is wrong."""
    key = secret.encode("utf-8")
    ns = os.urandom(32)
    conn.sendall(auth.AUTH_MAGIC + ns)
    proof = recv_exact(conn, 64)
    nc, mac_c = proof[:32], proof[32:]
    if not hmac.compare_digest(mac_c, auth.client_mac(key, kind, ns, nc)):
        reason = "wrong cluster secret (check [cluster] secret or LOCUS_SECRET)".encode()
        conn.sendall(b"\x01" + struct.pack("<H", len(reason)) + reason)
        return False
    mac_s = auth.server_mac(key, kind, ns, nc)
    if bad_mac:
        mac_s = bytes(b ^ 1 for b in mac_s)
    conn.sendall(b"\x00" + mac_s)
    return True


class FakeServer:
    """One fake server of a ``FakeCluster``."""

    def __init__(self, cluster: FakeCluster, server_id: int):
        self.cluster = cluster
        self.id = server_id
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = "127.0.0.1:%d" % self.listener.getsockname()[1]
        self.connections = 0  # accepted and authenticated
        self.silent = False  # read requests but never answer them
        self.hello_server_id = server_id  # what HELLO claims
        self.frame_bytes_max = cluster.frame_bytes_max
        self.max_frame_seen = 0
        self.own_table: SlotTable | None = None  # None: the cluster's
        self.refuse_all = False  # WRONG_HOME to every vertex request
        self.slots_body: bytes | None = None  # SLOTS answers this body as is
        self.slots_error: int | None = None  # SLOTS answers this error code
        self.hello_machines: int | None = None  # HELLO's room, if not the cluster's
        self.servers_listed: int | None = None  # SERVERS lists the first n servers (None: all)
        self.servers_body: bytes | None = None  # SERVERS answers this body as is
        self.servers_error: int | None = None  # SERVERS answers this error code
        self.conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.listener.close()
        for c in list(self.conns):
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()

    def drop_connections(self) -> None:
        """Closes every open connection (as a restarted server would)."""
        for c in list(self.conns):
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()
        self.conns.clear()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(30)
            if not server_handshake(conn, self.cluster.secret):
                return
            self.connections += 1
            first = True
            while True:
                head = recv_exact(conn, p.HEADER_BYTES)
                try:
                    h = p.unpack_header(head, self.frame_bytes_max)
                except p.ProtocolError as e:
                    conn.sendall(p.encode_error(0, e.code, self._msg(str(e))))
                    return
                body = recv_exact(conn, h.body_len)
                self.max_frame_seen = max(self.max_frame_seen, p.HEADER_BYTES + h.body_len)
                if first and h.op != p.Op.HELLO:
                    conn.sendall(p.encode_error(h.id, p.ErrorCode.NOT_READY, self._msg("HELLO must come first")))
                    return
                first = False
                try:
                    _, fields = p.decode_request(h.op, body)
                except p.ProtocolError as e:
                    conn.sendall(p.encode_error(h.id, e.code, self._msg(str(e))))
                    continue
                op = p.Op(h.op)
                with self.cluster.lock:
                    self.cluster.log.append((self.id, op.lower, fields))
                if self.silent and op != p.Op.HELLO:
                    continue  # never answers: the client's deadline must fire
                reply = self._answer(op, h.id, fields)
                if len(reply) > self.frame_bytes_max:
                    reply = p.encode_error(h.id, p.ErrorCode.TOO_LARGE, self._msg("reply past the frame limit"))
                conn.sendall(reply)
        except (OSError, ConnectionError):
            return
        finally:
            conn.close()

    def _msg(self, text: str) -> str:
        return f"server {self.id} ({self.address}): {text}"

    @property
    def table(self) -> SlotTable:
        """The table this server serves and checks."""
        return self.own_table if self.own_table is not None else self.cluster.table

    def _answer(self, op: p.Op, id: int, f: dict) -> bytes:
        c = self.cluster
        m = c.machines
        err = lambda code, text: p.encode_error(id, code, self._msg(text))  # noqa: E731
        with c.lock:
            home = self.table.owner_of
            if "vertex" in f and op != p.Op.MIGRATE:
                v = f["vertex"]
                if self.refuse_all:
                    c.wrong_homes += 1
                    return err(p.ErrorCode.WRONG_HOME, f"vertex {v} is not homed here (refusing every vertex)")
                if c.check_homes and home(v) != self.id:
                    c.wrong_homes += 1
                    return err(p.ErrorCode.WRONG_HOME, f"vertex {v} is homed on server {home(v)}, not here")
            if op == p.Op.SLOTS:
                if self.slots_error is not None:
                    return err(self.slots_error, "SLOTS refused")
                if self.slots_body is not None:
                    return p.pack_header(p.Op.SLOTS | p.REPLY_BIT, len(self.slots_body), id) + self.slots_body
                return p.encode_reply(op, id, self.table.fields())
            if op == p.Op.SERVERS:
                if self.servers_error is not None:
                    return err(self.servers_error, "SERVERS refused")
                if self.servers_body is not None:
                    return p.pack_header(p.Op.SERVERS | p.REPLY_BIT, len(self.servers_body), id) + self.servers_body
                listed = c.servers[: self.servers_listed] if self.servers_listed is not None else c.servers
                return p.encode_reply(op, id, {"servers": [{"id": x.id, "client": x.address} for x in listed]})
            if op == p.Op.HELLO:
                return p.encode_reply(op, id, {
                    "server_id": self.hello_server_id,
                    "machines": self.hello_machines or c.hello_machines or m,
                    "frame_bytes_max": self.frame_bytes_max, "server": "fake 0.1.0",
                })
            if op in (p.Op.PING, p.Op.PUT):
                if op == p.Op.PUT:
                    c.store[f["vertex"]] = list(f["ids"])
                return p.encode_reply(op, id)
            if op == p.Op.NEIGHBORS:
                if f["vertex"] not in c.store:
                    return err(p.ErrorCode.UNKNOWN_VERTEX, f"vertex {f['vertex']} has no entry")
                ids = c.store[f["vertex"]]
                return p.encode_reply(op, id, {"ids": ids[: f["k"]] if f["k"] else ids})
            if op in (p.Op.INSERT_EDGE, p.Op.DELETE_EDGE):
                lst = c.store.setdefault(f["vertex"], [])
                u = f["neighbor"]
                changed = (u not in lst) if op == p.Op.INSERT_EDGE else (u in lst)
                if changed:
                    lst.append(u) if op == p.Op.INSERT_EDGE else lst.remove(u)
                return p.encode_reply(op, id, {"changed": changed})
            if op == p.Op.KHOP:
                if f["vertex"] not in c.store:
                    return err(p.ErrorCode.UNKNOWN_VERTEX, f"vertex {f['vertex']} has no entry")
                frontier = [f["vertex"]]
                for _ in range(f["hops"]):
                    frontier = [u for x in frontier for u in c.store.get(x, [])[: f["k"]]]
                return p.encode_reply(op, id, {
                    "with_repeats": len(frontier), "elapsed_ns": 1000, "local_ops": 3, "remote_ops": 1,
                    "local_bytes": 30, "remote_bytes": 10, "distinct": sorted(set(frontier)),
                })
            if op == p.Op.LOAD:
                for v, _ in f["vertices"]:
                    if home(v) != self.id:
                        c.wrong_homes += 1
                        return err(p.ErrorCode.WRONG_HOME, f"vertex {v} is homed on server {home(v)}")
                added = 0
                touched: set[int] = set()
                for v, ids in f["vertices"]:
                    created = v not in c.store
                    lst = c.store.setdefault(v, [])
                    before = len(lst)
                    for u in ids:
                        if u not in lst:
                            lst.append(u)
                    added += len(lst) - before
                    if created or len(lst) > before:
                        touched.add(v)
                return p.encode_reply(op, id, {"vertices": len(touched), "edges_added": added,
                                               "changed": [v in touched for v, _ in f["vertices"]]})
            if op == p.Op.DELETE_VERTEX:
                had = c.store.pop(f["vertex"], None)
                return p.encode_reply(op, id, {"found": had is not None, "ids": had or []})
            if op == p.Op.MIGRATE:
                v = f["vertex"]
                if v not in c.store:
                    return err(p.ErrorCode.UNKNOWN_VERTEX, f"vertex {v} has no entry")
                frm = c.holders.get(v, home(v))
                c.holders[v] = self.id
                moved = frm != self.id
                return p.encode_reply(op, id, {"from": frm, "to": self.id, "parts": int(moved),
                                               "bytes": 8 + 4 * len(c.store[v]) if moved else 0})
            if op == p.Op.WHERE:
                v = f["vertex"]
                return p.encode_reply(op, id, {"home": home(v), "holder": c.holders.get(v, home(v)),
                                               "found": v in c.store})
            if op == p.Op.STATS:
                keys = sum(1 for v in c.store if home(v) == self.id)
                return p.encode_reply(op, id, {"json": json.dumps(
                    {"server": self.id, "machines": m, "address": self.address, "keys": keys})})
        raise AssertionError(op)


class FakeCluster:
    """``machines`` fake servers sharing one store."""

    def __init__(self, machines: int = 3, secret: str = SECRET, frame_bytes_max: int = p.FRAME_BYTES_MAX):
        self.machines = machines
        self.secret = secret
        self.frame_bytes_max = frame_bytes_max
        self.hello_machines: int | None = None  # HELLO's room (None: the servers made)
        self.table = SlotTable.uniform(SLOTS_DEFAULT, machines)
        self.check_homes = False  # refuse vertices not homed here (WRONG_HOME)
        self.wrong_homes = 0  # WRONG_HOME answers sent
        self.lock = threading.Lock()
        self.store: dict[int, list[int]] = {}
        self.holders: dict[int, int] = {}
        self.log: list[tuple[int, str, dict]] = []
        self.servers = [FakeServer(self, i) for i in range(machines)]

    @property
    def addresses(self) -> list[str]:
        return [s.address for s in self.servers]

    def ops(self, name: str) -> list[tuple[int, dict]]:
        with self.lock:
            return [(s, f) for s, op, f in self.log if op == name]

    def close(self) -> None:
        for s in self.servers:
            s.close()

    def __enter__(self) -> FakeCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def wait_for(cond, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return cond()
