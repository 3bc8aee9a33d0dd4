"""A blocking, thread-safe client of a Locus cluster.

Connections: one authenticated TCP connection per request in flight, kept
for reuse in a small per-server pool (``idle_max`` idle connections each).
A connection is opened lazily, runs the handshake (auth.py), sends HELLO
first and learns the cluster's room for servers and its frame limit from
the reply.

Servers: those of the cluster file (or ``addresses``), ids 0..n-1, then
servers added to the running cluster since (``locus cluster add-server``):
when a slot table names an owner past the servers known, the client asks
SERVERS (the server that sent the table first, then the others) and adds
the addresses past the ones it knows, as the Rust client does. HELLO's
machine count is the cluster's room (``[cluster] max_servers``): at least
the servers known, the same at every server.

Routing: requests about vertex ``v`` go to its home, the owner of its slot
``v % slots`` in the cluster's slot table (slots.py), as the servers route
updates themselves (one hop saved); ``migrate(v, to)`` goes to ``to``, which
runs the migration as the target (Pragh 4.1). The table is fetched with
SLOTS on first use (asking the servers in turn until one answers) and kept
as a hint: a server that does not home the vertex answers WRONG_HOME, and
the client fetches the table again from that server and retries, at most
``ROUTE_RETRIES_MAX`` times per operation (never endlessly: the last refusal
is raised). ``routing()`` counts fetches and retries. If no server answers
SLOTS, homes are a new cluster's (``v % SLOTS_DEFAULT % servers`` over the
servers listed), which the servers correct with WRONG_HOME where wrong.

Deadlines: every request carries ``deadline_ms`` (the call's ``timeout`` or
the client's); the client waits for the reply at most that plus one second
(``GRACE_S``), then drops the connection: a late reply on a reused
connection would answer the wrong request.
"""

from __future__ import annotations

import json
import math
import operator
import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Sequence

from . import _io, auth
from .config import normalize_addresses, parse_address, read_cluster_file
from .edges import adjacency, batches, read_edges
from .errors import AuthError, ConfigError, LocusError, LocusTimeout, LocusUnavailable, ProtocolError
from .protocol import (
    LIST_ABSENT,
    LISTS_VERTICES_MAX,
    DEADLINE_MS_MAX,
    FRAME_BYTES_MAX,
    HEADER_BYTES,
    HOPS_MAX,
    K_MAX,
    U32_MAX,
    VERSION,
    ErrorCode,
    ErrorReply,
    Op,
    decode_reply,
    encode_request,
    unpack_header,
)
from .slots import SLOTS_DEFAULT, MoveHint, SlotTable

__all__ = ["Client", "KhopResult", "Location", "Routing", "CLIENT_NAME", "ROUTE_RETRIES_MAX"]

CLIENT_NAME = "locus-python/0.1.0"
#: Seconds the client waits past a request's deadline for the server's answer
#: (a DEADLINE error reply) before it gives up on the connection.
GRACE_S = 1.0
#: Idle connections kept per server.
IDLE_MAX_DEFAULT = 4
#: Retries of one operation after WRONG_HOME answers (each after fetching the
#: slot table again); past them the operation fails with that answer. As the
#: Rust client's ``ROUTE_RETRIES_MAX``. A retry that finds the table unchanged
#: waits first (a slot move in flight), 1 ms doubling to ``ROUTE_BACKOFF_MAX_S``.
ROUTE_RETRIES_MAX = 10
#: The longest wait before one retry, in seconds.
ROUTE_BACKOFF_MAX_S = 0.064
#: Error codes after which the server closes the connection (docs/protocol.md,
#: Errors). TOO_LARGE and MALFORMED close it only when the header was at fault,
#: which the client cannot tell, so it drops the connection on those too.
_CLOSING_CODES = frozenset(
    {ErrorCode.MALFORMED, ErrorCode.UNSUPPORTED_VERSION, ErrorCode.TOO_LARGE, ErrorCode.BUSY, ErrorCode.NOT_READY}
)
#: Requests safe to resend on a fresh connection when a pooled one turns out
#: to have been closed by the server before it answered.
#: Requests that update a vertex (coordinated by its home, so routed by the
#: migration index's write decision).
_UPDATES = frozenset({Op.PUT, Op.INSERT_EDGE, Op.DELETE_EDGE, Op.DELETE_VERTEX})
_IDEMPOTENT = frozenset({Op.PING, Op.NEIGHBORS, Op.STALE_NEIGHBORS, Op.KHOP, Op.WHERE, Op.STATS, Op.PUT, Op.SLOTS, Op.SERVERS})


@dataclass(frozen=True)
class KhopResult:
    """What a k-hop query found and cost (docs/protocol.md, KHOP)."""

    distinct: list[int]
    with_repeats: int
    elapsed_ns: int
    local_ops: int
    remote_ops: int
    local_bytes: int
    remote_bytes: int

    @property
    def remote_rate(self) -> float:
        """Share of the query's one-sided operations that went to other machines."""
        ops = self.local_ops + self.remote_ops
        return self.remote_ops / ops if ops else 0.0


class Location(NamedTuple):
    """Where a vertex's part 0 lives (WHERE)."""

    home: int
    holder: int
    found: bool


class Routing(NamedTuple):
    """How the client has followed the cluster's slot table (as the Rust ``Routing``)."""

    #: The epoch of the table held (0: none fetched yet).
    table_epoch: int
    #: Tables fetched with SLOTS.
    table_fetches: int
    #: Operations sent again after a WRONG_HOME answer.
    retries: int
    #: Updates sent to a slot's new home by a move's migration index before
    #: the table named it.
    hinted: int = 0


class _Stale(Exception):
    """A pooled connection was closed by the server before it answered."""


class _Conn:
    """One authenticated connection; used by one thread at a time (pool checkout)."""

    def __init__(self, sock: socket.socket, server: int):
        self.sock = sock
        self.server = server
        self.next_id = 1
        self.frame_bytes_max = FRAME_BYTES_MAX
        self.reused = False
        # False from the first byte sent until the whole reply is read: a
        # connection that fails in between is never reused.
        self.clean = True

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def alive(self) -> bool:
        """Whether an idle connection is still open: the server sends nothing
        unasked, so a readable idle socket means it was closed (or is broken)."""
        try:
            self.sock.setblocking(False)
            try:
                self.sock.recv(1, socket.MSG_PEEK)  # b"": closed; bytes: out of step
            finally:
                self.sock.setblocking(True)
        except BlockingIOError:
            return True  # nothing to read: still open
        except OSError:
            pass
        return False

    def call(self, op: Op, fields: Mapping[str, Any], deadline_ms: int, end: float) -> dict | ErrorReply:
        id = self.next_id
        self.next_id += 1
        frame = encode_request(op, id, deadline_ms, fields)
        if len(frame) > self.frame_bytes_max:
            # Nothing was sent; the connection stays usable.
            raise ValueError(
                f"{op.lower} request is {len(frame)} bytes, past server {self.server}'s frame limit "
                f"of {self.frame_bytes_max} bytes"
            )
        self.clean = False
        try:
            _io.send_all(self.sock, frame, end)
            head = _io.recv_exact(self.sock, HEADER_BYTES, end)
        except (_io.PeerClosed, ConnectionResetError, BrokenPipeError) as e:
            if self.reused and (not isinstance(e, _io.PeerClosed) or e.got == 0):
                raise _Stale() from e
            raise
        h = unpack_header(head, self.frame_bytes_max)
        if h.version != VERSION:
            raise ProtocolError(f"reply in protocol version {h.version}, this client speaks {VERSION}")
        if h.id != id:
            raise ProtocolError(f"reply to request {h.id} where {id} was expected (replies come in order)")
        body = _io.recv_exact(self.sock, h.body_len, end)
        reply = decode_reply(op, h.op, body)
        self.clean = True
        return reply


def _vertex(v: Any, name: str = "vertex") -> int:
    try:
        x = operator.index(v)
    except TypeError:
        raise TypeError(f"{name} must be an int, not {type(v).__name__}") from None
    if not 0 <= x <= U32_MAX:
        raise ValueError(f"{name} = {x} is not a u32 vertex id (0..{U32_MAX})")
    return x


class Client:
    """A client of one Locus cluster. Thread-safe; use as a context manager or call ``close()``.

    ``addresses`` are the servers' client listeners ("host:port"), as a list
    indexed by server id or a dict {id: address} with ids 0..n-1; servers
    added to the cluster later are learned with SERVERS. ``secret``
    is the cluster secret; ``timeout`` (seconds) the default deadline of a
    request.
    """

    def __init__(
        self,
        addresses: Sequence[str] | Mapping[int, str],
        secret: str | bytes,
        timeout: float = 10.0,
        *,
        idle_max: int = IDLE_MAX_DEFAULT,
        source: str = "addresses",
    ):
        self._source = source
        # By server id: the file's, then those learned with SERVERS (appended
        # under the lock, never changed or removed).
        self._addresses = normalize_addresses(addresses, source)
        self._endpoints = [parse_address(a) for a in self._addresses]
        #: Servers listed in the file (a new cluster's homes).
        self._file_servers = len(self._addresses)
        self._secret = auth.secret_bytes(secret)
        self._timeout = self._check_timeout(timeout)
        if idle_max < 0:
            raise ValueError(f"idle_max = {idle_max}, must be >= 0")
        self._idle_max = idle_max
        self._lock = threading.Lock()
        self._idle: list[list[_Conn]] = [[] for _ in self._addresses]
        self._frame_limits: list[int] = [FRAME_BYTES_MAX] * len(self._addresses)
        # The cluster's room for servers, as the first HELLO said.
        self._room: int | None = None
        # The slot table as last fetched: a hint the servers check.
        self._table: SlotTable | None = None
        self._table_fetches = 0
        self._retries = 0
        self._hinted = 0
        # The migration index of each server's leaving moves, as its last
        # SLOTS reply gave it: where updates of a slot it handed go.
        self._hints: dict[int, list[MoveHint]] = {}
        self._closed = False

    @classmethod
    def from_cluster_file(cls, path: str | os.PathLike, secret: str | None = None, timeout: float = 10.0) -> Client:
        """A client of the cluster a cluster file describes. The secret is
        ``secret`` if given, else ``LOCUS_SECRET`` if set, else ``[cluster] secret``."""
        addresses, resolved = read_cluster_file(path, secret)
        return cls(addresses, resolved, timeout, source=os.fspath(path))

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Closes every idle connection; connections in use close when their call ends."""
        with self._lock:
            self._closed = True
            idle = [c for pool in self._idle for c in pool]
            for pool in self._idle:
                pool.clear()
        for c in idle:
            c.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def addresses(self) -> list[str]:
        """The client addresses known, by server id (the file's, then any learned)."""
        with self._lock:
            return list(self._addresses)

    @property
    def machines(self) -> int:
        """Servers the client knows (ids ``0..machines``): the file's, and those
        added since that a slot table named (as the Rust ``Client::machines``).
        Greets a server first (connects if needed), so a cluster file that
        does not fit the cluster fails here."""
        self._ensure_room(None)
        with self._lock:
            return len(self._addresses)

    def home(self, v: int, timeout: float | None = None) -> int:
        """The home server of vertex ``v``: its slot's owner in the slot table
        held, fetched on first use. If no server answers SLOTS, a new
        cluster's home (``v % SLOTS_DEFAULT % servers`` over the servers
        listed), which the servers correct with WRONG_HOME where it is wrong."""
        v = _vertex(v)
        try:
            return self.slot_table(timeout).owner_of(v)
        except (LocusUnavailable, LocusError):
            return v % SLOTS_DEFAULT % self._file_servers

    def slot_table(self, timeout: float | None = None) -> SlotTable:
        """The slot table held, fetched with SLOTS if none is."""
        with self._lock:
            table = self._table
        return table if table is not None else self.refresh_slot_table(0, timeout)

    def refresh_slot_table(self, first: int = 0, timeout: float | None = None) -> SlotTable:
        """Fetches the slot table, asking server ``first`` and then the others
        in turn until one answers; keeps it unless the table held is newer.
        A table naming an owner past the servers known makes the client ask
        SERVERS (``learn_servers``) first.

        Raises the last server's ``LocusUnavailable`` or ``LocusError`` if
        none answers, ``ProtocolError`` for a malformed table or SERVERS reply
        (naming the server and the byte) and ``ConfigError`` for a table that
        does not fit the servers known, even after asking SERVERS."""
        self._ensure_room(timeout)  # HELLO first: the servers must be the file's
        with self._lock:
            n = len(self._addresses)
        last: LocusUnavailable | LocusError | None = None
        for i in range(n):
            s = (first + i) % n
            try:
                fields = self._call(s, Op.SLOTS, {}, timeout)
            except (LocusUnavailable, LocusError) as e:
                last = e
                continue
            table = SlotTable.from_fields(fields)  # checked by the decoder already
            where = f"server {s} ({self._addresses[s]})"
            known = self._known()
            if table.machines < known:
                raise ConfigError(
                    f"{where}: its slot table (epoch {table.epoch}) has owners below {table.machines}, but "
                    f"{self._known_text(known)}; the file is stale"
                )
            beyond = max(table.owners)
            failed = ""
            if beyond >= known:
                # A server added after the file was read: learn its address.
                try:
                    known = self.learn_servers(s, timeout)
                except (LocusUnavailable, LocusError) as e:
                    failed = f" (no server answered SERVERS: {e})"
            if beyond >= known:
                raise ConfigError(
                    f"{where}: its slot table (epoch {table.epoch}) homes vertices on server {beyond}, but "
                    f"{self._known_text(known)} (0..{known - 1}) and SERVERS names no more{failed}; "
                    "the file is stale"
                )
            hints = [MoveHint.from_fields(h) for h in fields.get("hints", []) if h["from"] == s]
            with self._lock:
                self._table_fetches += 1
                self._hints[s] = hints
                if self._table is None or self._table.epoch < table.epoch:
                    self._table = table
                return self._table
        assert last is not None, "a cluster has at least one server"
        raise last

    def learn_servers(self, first: int = 0, timeout: float | None = None) -> int:
        """Asks server ``first`` (then the others in turn) which servers it
        knows with SERVERS, and adds those past the ones known (ids are dense:
        only id == servers known is added, in id order). Returns how many
        servers are known now.

        Raises the last server's ``LocusUnavailable`` or ``LocusError`` if
        none answers, and ``ProtocolError`` for a malformed reply or address."""
        n = self._known()
        last: LocusUnavailable | LocusError | None = None
        for i in range(n):
            s = (first + i) % n
            try:
                listed = self._call(s, Op.SERVERS, {}, timeout)["servers"]
            except (LocusUnavailable, LocusError) as e:
                last = e
                continue
            new: list[tuple[str, tuple[str, int]]] = []
            with self._lock:
                have = len(self._addresses)
            for entry in listed:
                sid, addr = entry["id"], entry["client"]
                if sid != have + len(new):
                    continue  # known already (or past a gap: not routable)
                try:
                    endpoint = parse_address(addr, f"server {sid}'s address")
                except ConfigError as e:
                    raise ProtocolError(
                        f"server {s} ({self._addresses[s]}): malformed servers body: {e}"
                    ) from None
                new.append((addr, endpoint))
            with self._lock:
                # Another thread may have learned some meanwhile: append only past them.
                for k, (addr, endpoint) in enumerate(new):
                    if have + k == len(self._addresses):
                        self._addresses.append(addr)
                        self._endpoints.append(endpoint)
                        self._idle.append([])
                        self._frame_limits.append(FRAME_BYTES_MAX)
                return len(self._addresses)
        assert last is not None, "a cluster has at least one server"
        raise last

    def routing(self) -> Routing:
        """How the client has followed the slot table so far."""
        with self._lock:
            epoch = self._table.epoch if self._table is not None else 0
            return Routing(epoch, self._table_fetches, self._retries, self._hinted)

    # ------------------------------------------------------------ requests

    def neighbors(self, v: int, k: int = 0, timeout: float | None = None) -> list[int]:
        """Up to ``k`` neighbours of ``v`` in stored order (0: all)."""
        v = _vertex(v)
        k = _vertex(k, "k")
        return self._routed(v, Op.NEIGHBORS, {"vertex": v, "k": k}, timeout)["ids"]

    def neighbors_stale_ok(self, v: int, k: int = 0, timeout: float | None = None) -> tuple[list[int], bool, int]:
        """Up to ``k`` neighbours of ``v`` (0: all), read by a backup of its slot
        if one answers (its copy may lag the primary: ``--read stale-ok``), else
        at its primary as :meth:`neighbors` reads. Returns ``(ids, from_backup,
        server)``: whether a backup's copy answered, and which server read."""
        v = _vertex(v)
        k = _vertex(k, "k")
        for b in self.slot_table(timeout).backups_of(v):
            try:
                r = self._call(b, Op.STALE_NEIGHBORS, {"vertex": v, "k": k}, timeout)
            except (LocusUnavailable, LocusTimeout):
                continue
            return r["ids"], r["from_backup"], b
        return self.neighbors(v, k, timeout), False, self.home(v, timeout)

    def lists(self, server: int, vertices: Sequence[int], timeout: float | None = None) -> list[list[int] | None]:
        """The whole lists of ``vertices`` in their order (``None``: no entry), read by
        server ``server`` with its reads posted together (any server reads any
        vertex), one LISTS request per ``LISTS_VERTICES_MAX`` vertices."""
        vs = [_vertex(v) for v in vertices]
        out: list[list[int] | None] = []
        for i in range(0, len(vs), LISTS_VERTICES_MAX):
            chunk = vs[i:i + LISTS_VERTICES_MAX]
            r = self._call(server, Op.LISTS, {"vertices": chunk}, timeout)
            if len(r["lens"]) != len(chunk):
                raise ProtocolError(
                    f"server {server}: LISTS answered {len(r['lens'])} lists for {len(chunk)} vertices",
                    ErrorCode.MALFORMED,
                )
            at = 0
            for n in r["lens"]:
                if n == LIST_ABSENT:
                    out.append(None)
                else:
                    out.append(r["ids"][at:at + n])
                    at += n
        return out

    def put(self, v: int, ids: Sequence[int], timeout: float | None = None) -> None:
        """Replaces ``v``'s adjacency list."""
        v = _vertex(v)
        self._routed(v, Op.PUT, {"vertex": v, "ids": ids}, timeout)

    def insert_edge(self, v: int, u: int, timeout: float | None = None) -> bool:
        """Adds the directed edge ``v -> u``; whether the list changed."""
        v, u = _vertex(v), _vertex(u, "neighbor")
        return self._routed(v, Op.INSERT_EDGE, {"vertex": v, "neighbor": u}, timeout)["changed"]

    def delete_edge(self, v: int, u: int, timeout: float | None = None) -> bool:
        """Removes the directed edge ``v -> u``; whether the list changed."""
        v, u = _vertex(v), _vertex(u, "neighbor")
        return self._routed(v, Op.DELETE_EDGE, {"vertex": v, "neighbor": u}, timeout)["changed"]

    def delete_vertex(self, v: int, timeout: float | None = None) -> list[int] | None:
        """Removes vertex ``v`` (its whole list); the list it had, or None if it
        had no entry. Edges of other vertices pointing at ``v`` stay (see
        ``delete_vertex_both``)."""
        v = _vertex(v)
        r = self._routed(v, Op.DELETE_VERTEX, {"vertex": v}, timeout)
        return r["ids"] if r["found"] else None

    def delete_vertex_both(self, v: int, timeout: float | None = None) -> tuple[list[int] | None, int]:
        """Removes vertex ``v`` of a graph storing both directions of every edge:
        ``u -> v`` from each neighbour ``u`` first, then ``v``, then ``u -> v``
        for any neighbour added meanwhile (so an interrupted call can be run
        again). Returns the list ``v`` had (None: no entry) and the reverse
        edges removed."""
        v = _vertex(v)
        try:
            first = self.neighbors(v, 0, timeout)
        except LocusError as e:
            if e.code != ErrorCode.UNKNOWN_VERTEX:
                raise
            first = []
        removed = sum(self.delete_edge(u, v, timeout) for u in first)
        had = self.delete_vertex(v, timeout)
        seen = set(first)
        removed += sum(self.delete_edge(u, v, timeout) for u in (had or []) if u not in seen)
        return had, removed

    def khop(self, v: int, hops: int = 2, k: int = 100, timeout: float | None = None) -> KhopResult:
        """A k-hop traversal from ``v``, run by its home server."""
        v = _vertex(v)
        if not 1 <= operator.index(hops) <= HOPS_MAX:
            raise ValueError(f"hops = {hops}, must be 1..={HOPS_MAX}")
        if not 1 <= operator.index(k) <= K_MAX:
            raise ValueError(f"k = {k}, must be 1..={K_MAX}")
        r = self._routed(v, Op.KHOP, {"vertex": v, "hops": hops, "k": k}, timeout)
        return KhopResult(**r)

    def where(self, v: int, timeout: float | None = None) -> Location:
        """(home, holder, found) of ``v``'s part 0."""
        v = _vertex(v)
        r = self._routed(v, Op.WHERE, {"vertex": v}, timeout)
        return Location(r["home"], r["holder"], r["found"])

    def migrate(self, v: int, to: int, timeout: float | None = None) -> dict[str, int]:
        """Moves ``v``'s value to server ``to`` (sent to ``to``, which runs it as the target).
        Returns {"from", "to", "parts", "bytes"}."""
        v = _vertex(v)
        self._ensure_room(timeout)
        machines = self._known()
        if isinstance(to, bool) or not isinstance(to, int) or not 0 <= to < machines:
            raise ValueError(f"to = {to!r}, must be a server id in 0..{machines - 1}")
        return self._call(to, Op.MIGRATE, {"vertex": v}, timeout)

    def stats(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """STATS of every server, by server id (docs/protocol.md, section 6)."""
        out = []
        for s in range(self._known()):
            text = self._call(s, Op.STATS, {}, timeout)["json"]
            try:
                doc = json.loads(text)
            except ValueError as e:
                raise ProtocolError(f"server {s} ({self._addresses[s]}): STATS is not JSON: {e}") from None
            if not isinstance(doc, dict):
                raise ProtocolError(f"server {s} ({self._addresses[s]}): STATS is not a JSON object")
            out.append(doc)
        return out

    def ping(self, timeout: float | None = None) -> list[float]:
        """Pings every server; round-trip seconds by server id (a new connection's setup not counted)."""
        out = []
        for s in range(self._known()):
            self._warm(s, timeout)
            t0 = time.perf_counter()
            self._call(s, Op.PING, {}, timeout)
            out.append(time.perf_counter() - t0)
        return out

    def load_edges(
        self,
        path_or_iterable: str | os.PathLike | Iterable[Any],
        undirected: bool = True,
        batch_edges: int = 65536,
        progress: Callable[[int, int], None] | None = None,
        timeout: float | None = None,
    ) -> dict[str, int]:
        """Loads a text edge list (a path, or an iterable of lines or (u, v) pairs).

        The whole input is checked first: a malformed line raises ``ValueError``
        naming it and nothing is sent. Edges are grouped by the home of their
        source in the slot table (undirected: both directions, self loops
        dropped) and sent as
        LOAD batches of at most ``batch_edges`` neighbour ids. ``progress(sent,
        total)`` is called after each batch with neighbour ids sent so far.

        Returns {"edges": edges the servers added, "vertices": vertices they
        changed, "batches": LOAD requests sent, "edges_sent": neighbour ids sent}.
        A batch is applied whole or not at all, but an error part-way leaves
        the earlier batches applied; loading the same file again is harmless
        (LOAD skips neighbours a vertex already has). A batch refused with
        WRONG_HOME (the table changed during the load) is not retried, as in
        the Rust loader: the error is raised; ``refresh_slot_table()`` and
        loading again finish the load.
        """
        if isinstance(batch_edges, bool) or not isinstance(batch_edges, int) or batch_edges < 1:
            raise ValueError(f"batch_edges = {batch_edges!r}, must be an int >= 1")
        edges = read_edges(path_or_iterable)
        self._ensure_room(timeout)
        homes, total = adjacency(edges, undirected, self._load_table(timeout))
        del edges
        sent = edges_added = n_batches = 0
        changed: set[int] = set()
        for server, adj in enumerate(homes):
            if not adj:
                continue
            self._warm(server, timeout)  # learns the server's frame limit
            for batch in batches(adj, batch_edges, self._frame_limits[server]):
                r = self._call(server, Op.LOAD, {"vertices": batch}, timeout)
                n_batches += 1
                edges_added += r["edges_added"]
                # A vertex may be in several batches: count it once.
                changed.update(v for (v, _), c in zip(batch, r["changed"]) if c)
                sent += sum(len(ids) for _, ids in batch)
                if progress is not None:
                    progress(sent, total)
        return {"edges": edges_added, "vertices": len(changed), "batches": n_batches, "edges_sent": sent}

    def _load_table(self, timeout: float | None) -> SlotTable:
        """The table a load batches by: the slot table, or (no server answers
        SLOTS) a new cluster's homes, as ``home`` falls back to."""
        try:
            return self.slot_table(timeout)
        except (LocusUnavailable, LocusError):
            return SlotTable.uniform(SLOTS_DEFAULT, self._file_servers, epoch=0)

    # ------------------------------------------------------------ machinery

    @staticmethod
    def _check_timeout(timeout: float) -> float:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout):
            raise ValueError(f"timeout = {timeout!r}, must be a number of seconds")
        if not 0 < timeout <= DEADLINE_MS_MAX / 1000:
            raise ValueError(f"timeout = {timeout} s, must be in (0, {DEADLINE_MS_MAX // 1000}] seconds")
        return float(timeout)

    def _budget(self, timeout: float | None) -> tuple[float, int, float]:
        """(timeout s, deadline_ms, monotonic end of the wait) of one call."""
        t = self._timeout if timeout is None else self._check_timeout(timeout)
        deadline_ms = min(max(math.ceil(t * 1000), 1), DEADLINE_MS_MAX)
        return t, deadline_ms, time.monotonic() + t + GRACE_S

    def _routed(self, v: int, op: Op, fields: Mapping[str, Any], timeout: float | None) -> Any:
        """Sends a request about vertex ``v`` to its home; on WRONG_HOME fetches
        the table again (from the server that refused) and retries, at most
        ROUTE_RETRIES_MAX times, then raises the last refusal. A home that
        cannot be connected to (it may have left the cluster; nothing was
        sent) sends the client to the other servers for a newer table, and the
        request goes to the new home if the table moved ``v``; a home that is
        just down stays an error."""
        retries = 0
        update = op in _UPDATES
        by_hint = update
        while True:
            server = self.home(v, timeout)
            target = self._hinted_home(v, server, timeout) if by_hint else None
            if target is not None:
                with self._lock:
                    self._hinted += 1
                try:
                    return self._call(target, op, fields, timeout)
                except (LocusError, LocusUnavailable) as e:
                    # A false positive, a hint gone stale (the move was
                    # rolled back), or a new home that is down: ask the home
                    # by the table (which refreshes the hint).
                    refused = isinstance(e, LocusError) and e.code == ErrorCode.WRONG_HOME
                    unsent = isinstance(e, LocusUnavailable) and e.reason.startswith("cannot connect")
                    if not (refused or unsent):
                        raise
                    with self._lock:
                        self._retries += 1
                    by_hint = False
                    continue
            by_hint = update
            try:
                return self._call(server, op, fields, timeout)
            except LocusUnavailable as e:
                if not e.reason.startswith("cannot connect") or retries >= ROUTE_RETRIES_MAX:
                    raise
                before = self.routing().table_epoch
                try:
                    table = self.refresh_slot_table((server + 1) % len(self._addresses), timeout)
                except (LocusUnavailable, LocusError):
                    raise e from None
                if table.epoch <= before or self.home(v, timeout) == server:
                    raise
                retries += 1
                with self._lock:
                    self._retries += 1
                continue
            except LocusError as e:
                if e.code != ErrorCode.WRONG_HOME:
                    raise
                if retries >= ROUTE_RETRIES_MAX:
                    epoch = self.routing().table_epoch
                    raise LocusError(
                        e.code, e.code_name,
                        f"{e.message} (refused again after {retries} retries, each after fetching the slot "
                        f"table again; table epoch {epoch})",
                        e.server,
                    ) from None
                retries += 1
                with self._lock:
                    self._retries += 1
            before = self.routing().table_epoch
            if self.refresh_slot_table(server, timeout).epoch <= before:
                time.sleep(min(0.001 * (1 << min(retries - 1, 16)), ROUTE_BACKOFF_MAX_S))

    def _hinted_home(self, v: int, home: int, timeout: float | None) -> int | None:
        """Where an update of ``v`` goes by the migration index of ``home``'s
        moves (NetMigrate Fig. 3's write decision), if not to ``home``."""
        with self._lock:
            hints = self._hints.get(home, [])
        if not hints:
            return None
        slot = self.slot_table(timeout).slot_of(v)
        for h in hints:
            if h.update_goes_to_target(slot):
                return h.target
        return None

    def _call(self, server: int, op: Op, fields: Mapping[str, Any], timeout: float | None) -> Any:
        t, deadline_ms, end = self._budget(timeout)
        for attempt in range(2):
            conn = self._checkout(server, t, deadline_ms, end)
            try:
                reply = conn.call(op, fields, deadline_ms, end)
            except _Stale as e:
                conn.close()
                self._drop_idle(server)  # its siblings are likely stale too (server restarted)
                if attempt == 0 and op in _IDEMPOTENT:
                    continue
                raise self._wrap(e.__cause__ or e, server, t, "connection closed before the reply (the request may or may not have been applied)") from None
            except BaseException as e:
                if conn.clean:
                    self._checkin(conn)  # e.g. a request too large to send: nothing was sent
                    raise
                conn.close()
                raise self._wrap(e, server, t, f"{op.lower} failed") from None
            if isinstance(reply, ErrorReply):
                if reply.code in _CLOSING_CODES:
                    conn.close()
                else:
                    self._checkin(conn)
                raise LocusError(reply.code, reply.code_name, reply.message, server)
            self._checkin(conn)
            return reply
        raise AssertionError("unreachable: the second attempt returns or raises")

    def _wrap(self, e: BaseException, server: int, t: float, what: str) -> BaseException:
        """The exception to raise for a failed exchange with ``server``."""
        addr = self._addresses[server]
        if isinstance(e, ProtocolError):
            return ProtocolError(f"server {server} ({addr}): {e}; connection closed", e.code)
        if isinstance(e, TimeoutError):
            return LocusTimeout(
                server, addr, f"no answer within {t + GRACE_S:g} s (deadline {t:g} s + {GRACE_S:g} s grace); "
                "the connection was dropped"
            )
        if isinstance(e, OSError):
            return LocusUnavailable(server, addr, f"{what}: {e}")
        return e  # LocusError, AuthError, ConfigError, KeyboardInterrupt...

    def _checkout(self, server: int, t: float, deadline_ms: int, end: float) -> _Conn:
        while True:
            with self._lock:
                if self._closed:
                    raise RuntimeError("the client is closed")
                conn = self._idle[server].pop() if self._idle[server] else None
            if conn is None:
                return self._open(server, t, deadline_ms, end)
            if conn.alive():
                conn.reused = True
                return conn
            conn.close()

    def _checkin(self, conn: _Conn) -> None:
        with self._lock:
            if not self._closed and len(self._idle[conn.server]) < self._idle_max:
                self._idle[conn.server].append(conn)
                return
        conn.close()

    def _drop_idle(self, server: int) -> None:
        with self._lock:
            idle, self._idle[server] = self._idle[server], []
        for c in idle:
            c.close()

    def _warm(self, server: int, timeout: float | None) -> None:
        """Makes sure an idle, greeted connection to ``server`` exists."""
        t, deadline_ms, end = self._budget(timeout)
        self._checkin(self._checkout(server, t, deadline_ms, end))

    def _open(self, server: int, t: float, deadline_ms: int, end: float) -> _Conn:
        addr = self._addresses[server]
        peer = f"server {server} ({addr})"
        try:
            sock = socket.create_connection(self._endpoints[server], timeout=_io.remaining(end))
        except OSError as e:
            raise self._wrap(e, server, t, "cannot connect (is it running?)") from None
        conn = _Conn(sock, server)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            auth.handshake(sock, self._secret, end, auth.KIND_CLIENT, peer)
        except (AuthError, ProtocolError):
            conn.close()  # their messages name the server already
            raise
        except BaseException as e:
            conn.close()
            raise self._wrap(e, server, t, "handshake failed") from None
        try:
            hello = conn.call(Op.HELLO, {"client": CLIENT_NAME}, deadline_ms, end)
        except BaseException as e:
            conn.close()
            raise self._wrap(e, server, t, "connection setup failed") from None
        if isinstance(hello, ErrorReply):
            conn.close()
            raise LocusError(hello.code, hello.code_name, hello.message, server)
        try:
            self._adopt_hello(server, hello)
        except ConfigError:
            conn.close()
            raise
        conn.frame_bytes_max = min(hello["frame_bytes_max"], FRAME_BYTES_MAX)
        with self._lock:
            self._frame_limits[server] = conn.frame_bytes_max
        return conn

    def _adopt_hello(self, server: int, hello: Mapping[str, Any]) -> None:
        """Checks a HELLO reply against the servers known: the server's id, and
        its machine count, the cluster's room for servers, which must be at
        least the servers known and the same at every server (the first HELLO
        fixes it)."""
        addr = self._addresses[server]
        if hello["server_id"] != server:
            raise ConfigError(
                f"{addr} says it is server {hello['server_id']}, but {self._source} lists it as server {server}; "
                "requests would go to the wrong machine"
            )
        room = hello["machines"]
        with self._lock:
            known = len(self._addresses)
            held = self._room
            if held is not None and room != held:
                raise ConfigError(
                    f"server {server} ({addr}) says the cluster has room for {room} servers, but another "
                    f"server said {held}; {self._source} mixes servers of different clusters?"
                )
            if room < known:
                raise ConfigError(
                    f"server {server} ({addr}) says the cluster has room for {room} servers, but "
                    f"{self._known_text(known)}; the file is stale or names another cluster's servers"
                )
            self._room = room

    def _known(self) -> int:
        """Servers known (ids 0..n-1)."""
        with self._lock:
            return len(self._addresses)

    def _known_text(self, known: int) -> str:
        if known == self._file_servers:
            return f"{self._source} lists {known} servers"
        return (
            f"the client knows {known} servers ({self._file_servers} listed in {self._source}, "
            "the others learned with SERVERS)"
        )

    def _ensure_room(self, timeout: float | None) -> int:
        """The cluster's room for servers, greeting a server first if none has been."""
        if self._room is not None:
            return self._room
        last: LocusUnavailable | None = None
        for s in range(self._file_servers):
            try:
                self._warm(s, timeout)
            except LocusUnavailable as e:
                last = e
                continue
            assert self._room is not None, "a greeted connection sets the room"
            return self._room
        assert last is not None
        raise last
