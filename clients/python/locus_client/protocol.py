"""The Locus client protocol, version 1 (docs/protocol.md): no I/O here.

Every frame is a 16-byte little-endian header and a body::

     0        2        3        4                 8                               16
     +--------+--------+--------+-----------------+-------------------------------+
     | "LK"   | version|  op    |  body_len (u32) |  request id (u64)             |
     +--------+--------+--------+-----------------+-------------------------------+

A request body starts with ``deadline_ms: u32``; a reply uses ``op | 0x80``,
an error reply ``0xFF`` (``code: u16``, ``message: str``). ``ids`` is
``count: u32`` then ``count`` x u32; ``str`` is ``len: u16`` then UTF-8.

Field order and limits follow crates/client/src/proto.rs, the reference
encoder; clients/golden/frames.json holds its bytes. Fields are plain
dicts keyed as in that file. Decoders check every length against the bytes
left and its limit before anything is allocated, and raise only
``ProtocolError``; encoders raise ``ValueError`` for arguments that do not
fit the protocol (a caller's bug).
"""

from __future__ import annotations

import struct
import sys
from array import array
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from .errors import ProtocolError
from .slots import HINT_FILTER_BYTES_MAX, HINTS_MAX, TABLE_BYTES_MAX, SlotTable

MAGIC = b"LK"
VERSION = 1
HEADER_BYTES = 16
#: Largest frame (header included) unless a server's HELLO says less.
FRAME_BYTES_MAX = 16 << 20
#: Smallest frame limit a server may announce.
FRAME_BYTES_MIN = 4096
#: Ids in one PUT, or in one vertex of a LOAD.
IDS_MAX = 4 << 20
#: Vertices in one LOAD.
LOAD_VERTICES_MAX = 1 << 20
#: Vertices one LISTS request may ask for.
LISTS_VERTICES_MAX = 1 << 16
#: A LISTS reply's length of a vertex with no entry.
LIST_ABSENT = 0xFFFFFFFF
ERROR_MESSAGE_MAX = 4096
STATS_JSON_MAX = 1 << 20
#: Bytes of a HELLO name (client or server).
NAME_MAX = 256
DEADLINE_MS_MAX = 3_600_000
HOPS_MAX = 8
K_MAX = 1_000_000
#: Servers in a cluster (ids 0..127), so entries of a SERVERS reply.
SERVERS_MAX = 128
#: Entries of a control-link list.
CONTROL_LIST_MAX = 1 << 20
ERROR_OP = 0xFF
REPLY_BIT = 0x80
U32_MAX = 0xFFFF_FFFF


class Op(IntEnum):
    """Request ops (0x01..0x3F) and control ops (0x20..)."""

    HELLO = 0x01
    PING = 0x02
    NEIGHBORS = 0x03
    PUT = 0x04
    INSERT_EDGE = 0x05
    DELETE_EDGE = 0x06
    KHOP = 0x07
    LOAD = 0x08
    MIGRATE = 0x09
    WHERE = 0x0A
    STATS = 0x0B
    DELETE_VERTEX = 0x0C
    SLOTS = 0x0D
    SERVERS = 0x0F
    LISTS = 0x10
    STALE_NEIGHBORS = 0x11
    REGISTER = 0x20
    REPORT = 0x21
    HOT = 0x22
    TRACKED = 0x23
    MIGRATED = 0x24
    JOBS = 0x30
    TRACK = 0x31
    COLLECT = 0x32

    @property
    def is_control(self) -> bool:
        return self >= 0x20

    @property
    def lower(self) -> str:
        """Lower-case name, as in frames.json and the Rust `Op::name`."""
        return self.name.lower()


class ErrorCode(IntEnum):
    """Codes of an error reply (docs/protocol.md, section 3, Errors)."""

    MALFORMED = 1
    UNSUPPORTED_VERSION = 2
    UNKNOWN_OP = 3
    UNKNOWN_VERTEX = 4
    TOO_LARGE = 5
    DEADLINE = 6
    FULL = 7
    PEER_UNAVAILABLE = 8
    WRONG_HOME = 9
    INVALID = 10
    BUSY = 11
    INTERNAL = 12
    NOT_READY = 13


def error_code_name(code: int) -> str:
    """The name of an error code; "OTHER" for one this client does not know (a newer server)."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return "OTHER"


def op_from_name(name: str) -> Op:
    """The op named like frames.json does ("insert_edge")."""
    try:
        return Op[name.upper()]
    except KeyError:
        raise ValueError(f"no op named {name!r}") from None


# ---------------------------------------------------------------- header


class Header(NamedTuple):
    version: int
    op: int
    body_len: int
    id: int


_HEADER = struct.Struct("<2sBBIQ")


def pack_header(op: int, body_len: int, id: int, version: int = VERSION) -> bytes:
    return _HEADER.pack(MAGIC, version, op, body_len, id)


def unpack_header(b: bytes, frame_bytes_max: int = FRAME_BYTES_MAX) -> Header:
    """Parses a header: checks the length, the magic and that the frame fits
    ``frame_bytes_max``. The version is not checked here (a server answers a
    foreign version with UNSUPPORTED_VERSION, a client drops the connection)."""
    if len(b) != HEADER_BYTES:
        raise ProtocolError(f"a frame header is {HEADER_BYTES} bytes, got {len(b)}")
    magic, version, op, body_len, id = _HEADER.unpack(b)
    if magic != MAGIC:
        raise ProtocolError(
            f"not a Locus frame (magic {magic.hex()}, expected 4c4b \"LK\"): "
            "the peer speaks another protocol"
        )
    max_body = max(frame_bytes_max - HEADER_BYTES, 0)
    if body_len > max_body:
        raise ProtocolError(
            f"frame body is {body_len} bytes, past the limit of {max_body}",
            ErrorCode.TOO_LARGE,
        )
    return Header(version, op, body_len, id)


def split_frame(data: bytes, frame_bytes_max: int = FRAME_BYTES_MAX) -> tuple[Header, bytes]:
    """A whole frame as (header, body); the body must fill the rest exactly."""
    if len(data) < HEADER_BYTES:
        raise ProtocolError(f"a frame is at least {HEADER_BYTES} bytes, got {len(data)}")
    h = unpack_header(bytes(data[:HEADER_BYTES]), frame_bytes_max)
    body = bytes(data[HEADER_BYTES:])
    if len(body) != h.body_len:
        raise ProtocolError(f"header says {h.body_len} body bytes, {len(body)} follow")
    return h, body


# ---------------------------------------------------------------- encoding

_ARRAY_OK = array("I").itemsize == 4
_SWAP = sys.byteorder != "little"


def _frame(op: int, id: int, body: bytes) -> bytes:
    if not 0 <= id <= 0xFFFF_FFFF_FFFF_FFFF:
        raise ValueError(f"request id {id} does not fit a u64")
    return pack_header(op, len(body), id) + body


def _pack(fmt: str, *values: Any, what: str = "field") -> bytes:
    try:
        return struct.pack("<" + fmt, *values)
    except struct.error as e:
        raise ValueError(f"{what} {values} does not fit the protocol ({e})") from None


def _u32_list(ids: Iterable[int], field: str) -> bytes:
    """Raw little-endian u32s (no count)."""
    try:
        if _ARRAY_OK:
            a = array("I", ids)
            if _SWAP:
                a.byteswap()
            return a.tobytes()
        ids = list(ids)
        return struct.pack(f"<{len(ids)}I", *ids)
    except (OverflowError, TypeError, struct.error) as e:
        raise ValueError(f"{field}: every id must be an int in 0..{U32_MAX} ({e})") from None


def _ids(ids: Sequence[int], field: str, max_len: int) -> bytes:
    if len(ids) > max_len:
        raise ValueError(f"{field} has {len(ids)} ids, past the limit of {max_len}")
    return struct.pack("<I", len(ids)) + _u32_list(ids, field)


def _bits(flags: Sequence[bool], field: str) -> bytes:
    if len(flags) > LOAD_VERTICES_MAX:
        raise ValueError(f"{field}: {len(flags)} flags, past the limit of {LOAD_VERTICES_MAX}")
    out = bytearray((len(flags) + 7) // 8)
    for i, f in enumerate(flags):
        if f:
            out[i // 8] |= 1 << (i % 8)
    return struct.pack("<I", len(flags)) + bytes(out)


def _str(s: str, max_bytes: int) -> bytes:
    """A ``str``, cut at a character boundary to at most ``max_bytes`` (as the Rust encoder)."""
    raw = s.encode("utf-8")
    if len(raw) > max_bytes:
        raw = raw[:max_bytes].decode("utf-8", "ignore").encode("utf-8")
    return struct.pack("<H", len(raw)) + raw


def _deadline(deadline_ms: int) -> bytes:
    if not isinstance(deadline_ms, int) or not 1 <= deadline_ms <= DEADLINE_MS_MAX:
        raise ValueError(f"deadline_ms = {deadline_ms!r}, must be 1..={DEADLINE_MS_MAX}")
    return struct.pack("<I", deadline_ms)


def _request_body(op: Op, f: Mapping[str, Any]) -> bytes:
    if op is Op.HELLO:
        return _str(f["client"], NAME_MAX)
    if op in (Op.PING, Op.STATS, Op.SLOTS, Op.SERVERS):
        return b""
    if op in (Op.NEIGHBORS, Op.STALE_NEIGHBORS):
        return _pack("II", f["vertex"], f["k"], what="vertex, k")
    if op is Op.LISTS:
        return _ids(f["vertices"], "vertices", LISTS_VERTICES_MAX)
    if op is Op.PUT:
        return _pack("I", f["vertex"], what="vertex") + _ids(f["ids"], "ids", IDS_MAX)
    if op in (Op.INSERT_EDGE, Op.DELETE_EDGE):
        return _pack("II", f["vertex"], f["neighbor"], what="vertex, neighbor")
    if op is Op.KHOP:
        return _pack("IBI", f["vertex"], f["hops"], f["k"], what="vertex, hops, k")
    if op is Op.LOAD:
        vertices = f["vertices"]
        if len(vertices) > LOAD_VERTICES_MAX:
            raise ValueError(f"LOAD of {len(vertices)} vertices, past the limit of {LOAD_VERTICES_MAX}")
        parts = [struct.pack("<I", len(vertices))]
        for v, ids in vertices:
            parts.append(_pack("I", v, what="vertex"))
            parts.append(_ids(ids, f"ids of vertex {v}", IDS_MAX))
        return b"".join(parts)
    if op in (Op.MIGRATE, Op.WHERE, Op.DELETE_VERTEX):
        return _pack("I", f["vertex"], what="vertex")
    raise ValueError(f"{op!r} is not a client request")


def encode_request(op: int | str, id: int, deadline_ms: int, fields: Mapping[str, Any] | None = None) -> bytes:
    """A request frame; ``fields`` as in frames.json (``{"vertex": 5, "k": 0}``)."""
    o = op_from_name(op) if isinstance(op, str) else Op(op)
    return _frame(o, id, _deadline(deadline_ms) + _request_body(o, fields or {}))


def encode_hello(id: int, deadline_ms: int, client: str) -> bytes:
    return encode_request(Op.HELLO, id, deadline_ms, {"client": client})


def encode_ping(id: int, deadline_ms: int) -> bytes:
    return encode_request(Op.PING, id, deadline_ms)


def encode_neighbors(id: int, deadline_ms: int, vertex: int, k: int = 0) -> bytes:
    return encode_request(Op.NEIGHBORS, id, deadline_ms, {"vertex": vertex, "k": k})


def encode_put(id: int, deadline_ms: int, vertex: int, ids: Sequence[int]) -> bytes:
    return encode_request(Op.PUT, id, deadline_ms, {"vertex": vertex, "ids": ids})


def encode_insert_edge(id: int, deadline_ms: int, vertex: int, neighbor: int) -> bytes:
    return encode_request(Op.INSERT_EDGE, id, deadline_ms, {"vertex": vertex, "neighbor": neighbor})


def encode_delete_edge(id: int, deadline_ms: int, vertex: int, neighbor: int) -> bytes:
    return encode_request(Op.DELETE_EDGE, id, deadline_ms, {"vertex": vertex, "neighbor": neighbor})


def encode_khop(id: int, deadline_ms: int, vertex: int, hops: int, k: int) -> bytes:
    return encode_request(Op.KHOP, id, deadline_ms, {"vertex": vertex, "hops": hops, "k": k})


def encode_load(id: int, deadline_ms: int, vertices: Sequence[tuple[int, Sequence[int]]]) -> bytes:
    return encode_request(Op.LOAD, id, deadline_ms, {"vertices": vertices})


def encode_migrate(id: int, deadline_ms: int, vertex: int) -> bytes:
    return encode_request(Op.MIGRATE, id, deadline_ms, {"vertex": vertex})


def encode_where(id: int, deadline_ms: int, vertex: int) -> bytes:
    return encode_request(Op.WHERE, id, deadline_ms, {"vertex": vertex})


def encode_stats(id: int, deadline_ms: int) -> bytes:
    return encode_request(Op.STATS, id, deadline_ms)


def encode_delete_vertex(id: int, deadline_ms: int, vertex: int) -> bytes:
    return encode_request(Op.DELETE_VERTEX, id, deadline_ms, {"vertex": vertex})


def encode_slots(id: int, deadline_ms: int) -> bytes:
    return encode_request(Op.SLOTS, id, deadline_ms)


def encode_servers(id: int, deadline_ms: int) -> bytes:
    return encode_request(Op.SERVERS, id, deadline_ms)


def encode_reply(op: int | str, id: int, fields: Mapping[str, Any] | None = None) -> bytes:
    """The successful reply to a request of ``op`` (what a server sends)."""
    o = op_from_name(op) if isinstance(op, str) else Op(op)
    f = fields or {}
    if o is Op.HELLO:
        body = _pack("BHI", f["server_id"], f["machines"], f["frame_bytes_max"], what="hello")
        body += _str(f["server"], NAME_MAX)
    elif o in (Op.PING, Op.PUT):
        body = b""
    elif o is Op.SLOTS:
        # Fields as decode_reply gives them; the table checks them.
        table = SlotTable.from_fields(f).encode()
        hints = f.get("hints", [])
        if len(hints) > HINTS_MAX:
            raise ValueError(f"{len(hints)} hints, past the limit of {HINTS_MAX}")
        parts = [struct.pack("<I", len(table)), table, struct.pack("<B", len(hints))]
        for h in hints:
            bf, cbf = bytes.fromhex(h["bf"]), bytes.fromhex(h["cbf"])
            if not 1 <= len(bf) <= HINT_FILTER_BYTES_MAX or not 1 <= len(cbf) <= HINT_FILTER_BYTES_MAX:
                raise ValueError(f"a hint's filters must be 1..{HINT_FILTER_BYTES_MAX} bytes")
            parts += [struct.pack("<BBI", h["from"], h["to"], len(bf)), bf, struct.pack("<I", len(cbf)), cbf]
        body = b"".join(parts)
    elif o is Op.SERVERS:
        servers = f["servers"]
        if len(servers) > SERVERS_MAX:
            raise ValueError(f"servers has {len(servers)} entries, past the limit of {SERVERS_MAX}")
        parts = [struct.pack("<I", len(servers))]
        for s in servers:
            if not isinstance(s["id"], int) or not 0 <= s["id"] < SERVERS_MAX:
                raise ValueError(f"server id {s['id']!r}, must be 0..{SERVERS_MAX - 1}")
            parts.append(struct.pack("<B", s["id"]) + _str(s["client"], NAME_MAX))
        body = b"".join(parts)
    elif o is Op.NEIGHBORS:
        body = _ids(f["ids"], "ids", FRAME_BYTES_MAX // 4)
    elif o is Op.STALE_NEIGHBORS:
        body = bytes([1 if f["from_backup"] else 0]) + _ids(f["ids"], "ids", FRAME_BYTES_MAX // 4)
    elif o is Op.LISTS:
        total = sum(n for n in f["lens"] if n != LIST_ABSENT)
        if total != len(f["ids"]):
            raise ValueError(f"lens add up to {total} ids, ids holds {len(f['ids'])}")
        body = _ids(f["lens"], "lens", LISTS_VERTICES_MAX) + _ids(f["ids"], "ids", FRAME_BYTES_MAX // 4)
    elif o in (Op.INSERT_EDGE, Op.DELETE_EDGE):
        body = bytes([1 if f["changed"] else 0])
    elif o is Op.KHOP:
        body = _pack("6Q", *(f[k] for k in _KHOP_COUNTERS), what="khop counters")
        body += _ids(f["distinct"], "distinct", FRAME_BYTES_MAX // 4)
    elif o is Op.LOAD:
        body = _pack("IQ", f["vertices"], f["edges_added"], what="load") + _bits(f["changed"], "changed")
    elif o is Op.MIGRATE:
        body = _pack("BBIQ", f["from"], f["to"], f["parts"], f["bytes"], what="migrate")
    elif o is Op.WHERE:
        body = _pack("BBB", f["home"], f["holder"], 1 if f["found"] else 0, what="where")
    elif o is Op.STATS:
        raw = f["json"].encode("utf-8")[:STATS_JSON_MAX]
        body = struct.pack("<I", len(raw)) + raw
    elif o is Op.DELETE_VERTEX:
        body = bytes([1 if f["found"] else 0]) + _ids(f["ids"], "ids", FRAME_BYTES_MAX // 4)
    else:
        raise ValueError(f"{o!r} has no reply")
    return _frame(o | REPLY_BIT, id, body)


def encode_error(id: int, code: int, message: str) -> bytes:
    """An error reply (op 0xFF); the message is cut to 4 KiB as the Rust encoder does."""
    return _frame(ERROR_OP, id, _pack("H", int(code), what="code") + _str(message, ERROR_MESSAGE_MAX))


def encode_control(op: int | str, fields: Mapping[str, Any] | None = None) -> bytes:
    """A one-way control-link frame (request id 0, no deadline)."""
    o = op_from_name(op) if isinstance(op, str) else Op(op)
    f = fields or {}

    def entries(key: str, fmt: str, rows: Iterable[Sequence[Any]]) -> bytes:
        rows = list(rows)
        if len(rows) > CONTROL_LIST_MAX:
            raise ValueError(f"{key} has {len(rows)} entries, past the limit of {CONTROL_LIST_MAX}")
        return struct.pack("<I", len(rows)) + b"".join(_pack(fmt, *r, what=key) for r in rows)

    if o is Op.REGISTER:
        body = _pack("B", f["machine"], what="machine")
    elif o is Op.REPORT:
        body = _pack("BQ", f["machine"], f["interval_ms"], what="report")
        body += entries("accesses", "QBI", ((a["key"], a["holder"], a["count"]) for a in f["accesses"]))
    elif o is Op.HOT:
        a = f["access"]
        body = _pack("BQQBI", f["machine"], f["elapsed_ms"], a["key"], a["holder"], a["count"], what="hot")
    elif o is Op.TRACKED:
        body = _pack("BQ", f["machine"], f["interval_ms"], what="tracked")
        body += entries("counts", "QI", f["counts"])
    elif o is Op.MIGRATED:
        body = entries("migrated", "QBB", ((k, to, 1 if ok else 0) for k, to, ok in f["migrated"]))
    elif o is Op.JOBS:
        for kind, _ in f["jobs"]:
            if kind not in (1, 2):
                raise ValueError(f"job kind {kind}, expected 1 (migrate) or 2 (replicate)")
        body = entries("jobs", "BQ", f["jobs"])
    elif o is Op.TRACK:
        body = entries("keys", "Q", ((k,) for k in f["keys"]))
    elif o is Op.COLLECT:
        body = b""
    else:
        raise ValueError(f"{o!r} is not a control op")
    return _frame(o, 0, body)


# ---------------------------------------------------------------- decoding

_KHOP_COUNTERS = ("with_repeats", "elapsed_ns", "local_ops", "remote_ops", "local_bytes", "remote_bytes")


@dataclass(frozen=True)
class ErrorReply:
    """A decoded error reply (op 0xFF)."""

    code: int
    code_name: str
    message: str


class _Dec:
    """Reads little-endian fields, checking each length against what is left."""

    __slots__ = ("b", "pos", "op")

    def __init__(self, b: bytes, op: str):
        self.b = bytes(b)
        self.pos = 0
        self.op = op

    def malformed(self, what: str, code: int = ErrorCode.MALFORMED) -> ProtocolError:
        return ProtocolError(f"malformed {self.op} body: {what}", code)

    def left(self) -> int:
        return len(self.b) - self.pos

    def take(self, n: int, field: str) -> bytes:
        if self.left() < n:
            raise self.malformed(f"{field} needs {n} bytes, {self.left()} left")
        raw = self.b[self.pos : self.pos + n]
        self.pos += n
        return raw

    def fixed(self, fmt: str, size: int, field: str) -> tuple:
        if self.left() < size:
            raise self.malformed(f"{field} needs {size} bytes, {self.left()} left")
        values = struct.unpack_from("<" + fmt, self.b, self.pos)
        self.pos += size
        return values

    def u8(self, field: str) -> int:
        return self.fixed("B", 1, field)[0]

    def u16(self, field: str) -> int:
        return self.fixed("H", 2, field)[0]

    def u32(self, field: str) -> int:
        return self.fixed("I", 4, field)[0]

    def u64(self, field: str) -> int:
        return self.fixed("Q", 8, field)[0]

    def count(self, field: str, max_n: int, unit: int) -> int:
        """A u32 count, checked against ``max_n`` and against the bytes left
        (``unit`` bytes per entry at least) before anything is allocated."""
        n = self.u32(field)
        if n > max_n:
            raise ProtocolError(f"{field} is {n}, past the limit of {max_n}", ErrorCode.TOO_LARGE)
        if n * unit > self.left():
            raise self.malformed(f"{field} = {n} needs at least {n * unit} bytes, {self.left()} left")
        return n

    def ids(self, field: str, max_n: int) -> list[int]:
        n = self.count(field, max_n, 4)
        raw = self.take(4 * n, field)
        if _ARRAY_OK:
            a = array("I")
            a.frombytes(raw)
            if _SWAP:
                a.byteswap()
            return a.tolist()
        return list(struct.unpack(f"<{n}I", raw))

    def str(self, field: str, max_bytes: int) -> str:
        n = self.u16(field)
        if n > max_bytes:
            raise ProtocolError(f"{field} is {n} bytes, past the limit of {max_bytes}", ErrorCode.TOO_LARGE)
        raw = self.take(n, field)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.malformed(f"{field} is not UTF-8") from None

    def bits(self, field: str) -> list[bool]:
        """A bitmap: count u32 (at most LOAD_VERTICES_MAX), ceil(count/8) bytes, unused bits zero."""
        n = self.u32(field)
        if n > LOAD_VERTICES_MAX:
            raise self.malformed(f"{field} = {n}, past the limit of {LOAD_VERTICES_MAX}", ErrorCode.TOO_LARGE)
        raw = self.take((n + 7) // 8, field)
        if n % 8 and raw[n // 8] >> (n % 8):
            raise self.malformed(f"{field}: bits set past its {n} flags")
        return [bool(raw[i // 8] >> (i % 8) & 1) for i in range(n)]

    def flag(self, field: str) -> bool:
        b = self.u8(field)
        if b > 1:
            raise self.malformed(f"{field} = {b}, expected 0 or 1")
        return b == 1

    def finish(self) -> None:
        if self.left():
            raise self.malformed(f"{self.left()} trailing bytes")


def _known_op(op_byte: int, control: bool) -> Op:
    try:
        op = Op(op_byte)
    except ValueError:
        raise ProtocolError(f"unknown op 0x{op_byte:02x}", ErrorCode.UNKNOWN_OP) from None
    if op.is_control != control:
        raise ProtocolError(f"unknown op 0x{op_byte:02x}", ErrorCode.UNKNOWN_OP)
    return op


def _invalid(field: str, value: int, expected: str) -> ProtocolError:
    return ProtocolError(f"{field} = {value}: {expected}", ErrorCode.INVALID)


def decode_request(op_byte: int, body: bytes) -> tuple[int, dict[str, Any]]:
    """A request body of ``op_byte`` as (deadline_ms, fields). Control ops are UNKNOWN_OP here."""
    op = _known_op(op_byte, control=False)
    d = _Dec(body, op.lower)
    deadline_ms = d.u32("deadline_ms")
    if not 1 <= deadline_ms <= DEADLINE_MS_MAX:
        # docs/protocol.md: a deadline of 0 is MALFORMED.
        raise d.malformed(f"deadline_ms = {deadline_ms}, must be 1..={DEADLINE_MS_MAX}")
    f: dict[str, Any]
    if op is Op.HELLO:
        f = {"client": d.str("client", NAME_MAX)}
    elif op in (Op.PING, Op.STATS, Op.SLOTS, Op.SERVERS):
        f = {}
    elif op in (Op.NEIGHBORS, Op.STALE_NEIGHBORS):
        f = {"vertex": d.u32("vertex"), "k": d.u32("k")}
    elif op is Op.LISTS:
        f = {"vertices": d.ids("vertices", LISTS_VERTICES_MAX)}
    elif op is Op.PUT:
        f = {"vertex": d.u32("vertex"), "ids": d.ids("ids", IDS_MAX)}
    elif op in (Op.INSERT_EDGE, Op.DELETE_EDGE):
        f = {"vertex": d.u32("vertex"), "neighbor": d.u32("neighbor")}
    elif op is Op.KHOP:
        f = {"vertex": d.u32("vertex"), "hops": d.u8("hops"), "k": d.u32("k")}
        if not 1 <= f["hops"] <= HOPS_MAX:
            raise _invalid("hops", f["hops"], f"must be 1..={HOPS_MAX}")
        if not 1 <= f["k"] <= K_MAX:
            raise _invalid("k", f["k"], f"must be 1..={K_MAX}")
    elif op is Op.LOAD:
        n = d.count("vertices", LOAD_VERTICES_MAX, 8)
        vertices = []
        for _ in range(n):
            v = d.u32("vertex")
            vertices.append((v, d.ids("ids", IDS_MAX)))
        f = {"vertices": vertices}
    else:  # MIGRATE, WHERE, DELETE_VERTEX
        f = {"vertex": d.u32("vertex")}
    d.finish()
    return deadline_ms, f


def decode_reply(op: int | str, op_byte: int, body: bytes) -> dict[str, Any] | ErrorReply:
    """The reply (op byte ``op_byte``) to a request of ``op``: its fields, or an ``ErrorReply``."""
    try:
        req = op_from_name(op) if isinstance(op, str) else Op(op)
    except ValueError:
        raise ProtocolError(f"unknown op {op!r}", ErrorCode.UNKNOWN_OP) from None
    if op_byte == ERROR_OP:
        d = _Dec(body, "error")
        code = d.u16("code")
        message = d.str("message", ERROR_MESSAGE_MAX)
        d.finish()
        return ErrorReply(code, error_code_name(code), message)
    if req.is_control:
        raise ProtocolError(f"control op {req.lower} has no reply", ErrorCode.UNKNOWN_OP)
    if op_byte != req | REPLY_BIT:
        raise ProtocolError(
            f"malformed {req.lower} body: reply op 0x{op_byte:02x} does not answer op 0x{int(req):02x}"
        )
    d = _Dec(body, req.lower)
    f: dict[str, Any]
    if req is Op.HELLO:
        server_id, machines, frame_bytes_max = d.fixed("BHI", 7, "hello")
        if frame_bytes_max < FRAME_BYTES_MIN:
            raise _invalid("frame_bytes_max", frame_bytes_max, f"must be at least {FRAME_BYTES_MIN}")
        f = {
            "server_id": server_id,
            "machines": machines,
            "frame_bytes_max": frame_bytes_max,
            "server": d.str("server", NAME_MAX),
        }
    elif req in (Op.PING, Op.PUT):
        f = {}
    elif req is Op.NEIGHBORS:
        f = {"ids": d.ids("ids", FRAME_BYTES_MAX // 4)}
    elif req is Op.STALE_NEIGHBORS:
        b = d.u8("from_backup")
        if b not in (0, 1):
            raise d.malformed(f"from_backup = {b}, expected 0 or 1")
        f = {"from_backup": b == 1, "ids": d.ids("ids", FRAME_BYTES_MAX // 4)}
    elif req is Op.LISTS:
        f = {"lens": d.ids("lens", LISTS_VERTICES_MAX), "ids": d.ids("ids", FRAME_BYTES_MAX // 4)}
        total = sum(n for n in f["lens"] if n != LIST_ABSENT)
        if total != len(f["ids"]):
            raise d.malformed(f"the lengths add up to {total} ids, the lists hold {len(f['ids'])}")
    elif req in (Op.INSERT_EDGE, Op.DELETE_EDGE):
        f = {"changed": d.flag("changed")}
    elif req is Op.KHOP:
        f = dict(zip(_KHOP_COUNTERS, d.fixed("6Q", 48, "khop counters")))
        f["distinct"] = d.ids("distinct", FRAME_BYTES_MAX // 4)
    elif req is Op.LOAD:
        f = {"vertices": d.u32("vertices"), "edges_added": d.u64("edges_added"), "changed": d.bits("changed")}
    elif req is Op.MIGRATE:
        f = dict(zip(("from", "to", "parts", "bytes"), d.fixed("BBIQ", 14, "migrate")))
    elif req is Op.WHERE:
        home, holder, found = d.fixed("BBB", 3, "where")
        # As the Rust decoder: any non-zero byte is found.
        f = {"home": home, "holder": holder, "found": found != 0}
    elif req is Op.DELETE_VERTEX:
        f = {"found": d.flag("found"), "ids": d.ids("ids", FRAME_BYTES_MAX // 4)}
        if not f["found"] and f["ids"]:
            raise d.malformed("ids of a vertex that was not found")
    elif req is Op.SLOTS:
        n = d.count("table", TABLE_BYTES_MAX, 1)
        try:
            f = SlotTable.decode(d.take(n, "table")).fields()
        except ProtocolError as e:
            raise d.malformed(str(e)) from None
        # The migration index of the server's leaving moves (hints).
        hints = []
        for _ in range(d.u8("hints")):
            h = {"from": d.u8("from"), "to": d.u8("to")}
            for name in ("bf", "cbf"):
                raw = d.take(d.count(name, HINT_FILTER_BYTES_MAX, 1), name)
                if not raw:
                    raise d.malformed(f"a hint's {name} is empty")
                h[name] = raw.hex()
            hints.append(h)
        f["hints"] = hints
    elif req is Op.SERVERS:
        # Each entry is an id byte and a str: 3 bytes at least.
        n = d.count("servers", SERVERS_MAX, 3)
        servers = []
        for _ in range(n):
            sid = d.u8("id")
            if sid >= SERVERS_MAX:
                raise d.malformed(f"server id {sid} is not below {SERVERS_MAX}")
            servers.append({"id": sid, "client": d.str("client", NAME_MAX)})
        f = {"servers": servers}
    else:  # STATS
        n = d.count("json", STATS_JSON_MAX, 1)
        raw = d.take(n, "json")
        try:
            f = {"json": raw.decode("utf-8")}
        except UnicodeDecodeError:
            raise d.malformed("json is not UTF-8") from None
    d.finish()
    return f


def decode_control(op_byte: int, body: bytes) -> dict[str, Any]:
    """A control-link frame's body as fields (keys as in frames.json)."""
    op = _known_op(op_byte, control=True)
    d = _Dec(body, op.lower)
    f: dict[str, Any]
    if op is Op.REGISTER:
        f = {"machine": d.u8("machine")}
    elif op is Op.REPORT:
        f = {"machine": d.u8("machine"), "interval_ms": d.u64("interval_ms")}
        n = d.count("accesses", CONTROL_LIST_MAX, 13)
        rows = (d.fixed("QBI", 13, "access") for _ in range(n))
        f["accesses"] = [{"key": k, "holder": h, "count": c} for k, h, c in rows]
    elif op is Op.HOT:
        machine, elapsed_ms, key, holder, count = d.fixed("BQQBI", 22, "hot")
        f = {
            "machine": machine,
            "elapsed_ms": elapsed_ms,
            "access": {"key": key, "holder": holder, "count": count},
        }
    elif op is Op.TRACKED:
        f = {"machine": d.u8("machine"), "interval_ms": d.u64("interval_ms")}
        n = d.count("counts", CONTROL_LIST_MAX, 12)
        f["counts"] = [d.fixed("QI", 12, "count") for _ in range(n)]
    elif op is Op.MIGRATED:
        n = d.count("migrated", CONTROL_LIST_MAX, 10)
        rows = []
        for _ in range(n):
            key, to = d.fixed("QB", 9, "migrated")
            rows.append((key, to, d.flag("ok")))
        f = {"migrated": rows}
    elif op is Op.JOBS:
        n = d.count("jobs", CONTROL_LIST_MAX, 9)
        jobs = []
        for _ in range(n):
            kind, key = d.fixed("BQ", 9, "job")
            if kind not in (1, 2):
                raise d.malformed(f"job kind {kind}, expected 1 or 2")
            jobs.append((kind, key))
        f = {"jobs": jobs}
    elif op is Op.TRACK:
        n = d.count("keys", CONTROL_LIST_MAX, 8)
        f = {"keys": [d.u64("key") for _ in range(n)]}
    else:  # COLLECT
        f = {}
    d.finish()
    return f
