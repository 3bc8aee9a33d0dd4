"""Decoders are total: random bytes and mutated golden frames give a value
or a ProtocolError, never another exception (IndexError, struct.error,
UnicodeDecodeError, MemoryError from a huge count...). Seeded; a failure
names its seed and case."""

import json
import os
import random
import struct

import pytest

from locus_client import protocol as p

GOLDEN = os.path.join(os.path.dirname(__file__), "..", "..", "golden", "frames.json")
with open(GOLDEN, encoding="utf-8") as f:
    FRAMES = json.load(f)
SEEDS = range(8)
CASES_PER_SEED = 600  # 4,800 mutated frames and as many random byte strings


def decode_all_ways(data: bytes, hint: dict) -> None:
    """Feeds ``data`` to every decoder that could see it; only ProtocolError may escape."""
    try:
        h, body = p.split_frame(data)
    except p.ProtocolError:
        h, body = None, data[p.HEADER_BYTES :]
    ops = [h.op] if h is not None else []
    ops += [p.op_from_name(hint["op"]), random.Random(len(data)).randrange(256)]
    for op_byte in ops:
        for fn in (
            lambda: p.decode_request(op_byte, body),
            lambda: p.decode_control(op_byte, body),
            lambda: p.decode_reply(p.op_from_name(hint["op"]), op_byte, body),
            lambda: p.decode_reply(p.op_from_name(hint["op"]), p.ERROR_OP, body),
            lambda: p.decode_reply(op_byte & 0x7F, op_byte, body),
        ):
            try:
                fn()
            except p.ProtocolError:
                pass


def mutate(rng: random.Random, raw: bytes) -> bytes:
    b = bytearray(raw)
    for _ in range(rng.randint(1, 4)):
        what = rng.randrange(6)
        i = rng.randrange(len(b) + 1)
        if what == 0 and b:  # flip bits
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        elif what == 1:  # insert bytes
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif what == 2 and b:  # delete bytes
            del b[i : i + rng.randint(1, 8)]
        elif what == 3:  # truncate
            del b[i:]
        elif what == 4 and len(b) >= p.HEADER_BYTES + 4:  # a huge count or length in the body
            j = rng.randrange(p.HEADER_BYTES, len(b) - 3)
            b[j : j + 4] = struct.pack("<I", rng.choice([0xFFFF_FFFF, 1 << 20, (1 << 20) + 1, 1 << 22, 0x7FFF]))
        elif len(b) >= p.HEADER_BYTES:  # keep the header consistent with a changed body
            b[4:8] = struct.pack("<I", len(b) - p.HEADER_BYTES)
    return bytes(b)


@pytest.mark.parametrize("seed", SEEDS)
def test_mutated_golden_frames_raise_only_protocol_error(seed):
    rng = random.Random(seed)
    for case in range(CASES_PER_SEED):
        e = rng.choice(FRAMES)
        data = mutate(rng, bytes.fromhex(e["hex"]))
        try:
            decode_all_ways(data, e)
        except Exception as err:  # pragma: no cover - the message is the point
            pytest.fail(f"seed {seed} case {case} ({e['name']}, {data.hex()}): {err!r}")


@pytest.mark.parametrize("seed", SEEDS)
def test_random_bytes_raise_only_protocol_error(seed):
    rng = random.Random(1000 + seed)
    for case in range(CASES_PER_SEED):
        n = rng.choice([rng.randrange(16), rng.randrange(64), rng.randrange(300)])
        data = bytes(rng.randrange(256) for _ in range(n))
        if rng.random() < 0.5 and n >= p.HEADER_BYTES:
            # A valid header over random bytes reaches the body decoders.
            data = p.pack_header(rng.randrange(256), n - p.HEADER_BYTES, 0) + data[p.HEADER_BYTES :]
        e = rng.choice(FRAMES)
        try:
            decode_all_ways(data, e)
        except Exception as err:  # pragma: no cover
            pytest.fail(f"seed {seed} case {case} ({data.hex()}): {err!r}")


def test_counts_are_checked_before_allocation():
    # A LOAD claiming 2^20 vertices in 8 bytes: MALFORMED without building a list.
    body = struct.pack("<II", 1000, 1 << 20)
    with pytest.raises(p.ProtocolError, match="needs at least"):
        p.decode_request(p.Op.LOAD, body)
    with pytest.raises(p.ProtocolError, match="past the limit") as e:
        p.decode_request(p.Op.LOAD, struct.pack("<II", 1000, (1 << 20) + 1))
    assert e.value.code == p.ErrorCode.TOO_LARGE
    with pytest.raises(p.ProtocolError, match="past the limit"):
        p.decode_request(p.Op.PUT, struct.pack("<III", 1000, 1, (4 << 20) + 1))
    with pytest.raises(p.ProtocolError, match="past the limit"):
        p.decode_reply(p.Op.STATS, p.Op.STATS | p.REPLY_BIT, struct.pack("<I", (1 << 20) + 1))
    with pytest.raises(p.ProtocolError, match="past the limit"):
        p.decode_reply(p.Op.NEIGHBORS, p.ERROR_OP, struct.pack("<HH", 4, 4097) + b"x" * 4097)
    with pytest.raises(p.ProtocolError, match="past the limit"):
        p.decode_control(p.Op.TRACK, struct.pack("<I", (1 << 20) + 1))


def test_header_checks():
    with pytest.raises(p.ProtocolError, match="magic"):
        p.unpack_header(b"XK" + bytes(14))
    with pytest.raises(p.ProtocolError, match="past the limit") as e:
        p.unpack_header(p.pack_header(p.Op.PING, 4097 - 16, 0), frame_bytes_max=4096)
    assert e.value.code == p.ErrorCode.TOO_LARGE
    assert p.unpack_header(p.pack_header(p.Op.PING, 4096 - 16, 7), 4096) == (1, 2, 4080, 7)
    # The version is the caller's to check (a server answers UNSUPPORTED_VERSION).
    assert p.unpack_header(p.pack_header(p.Op.PING, 0, 0, version=2)).version == 2
    with pytest.raises(p.ProtocolError):
        p.unpack_header(b"LK\x01")


def test_field_ranges():
    ok = struct.pack("<I", 1000)
    with pytest.raises(p.ProtocolError, match="deadline_ms") as e:
        p.decode_request(p.Op.PING, struct.pack("<I", 0))
    assert e.value.code == p.ErrorCode.MALFORMED
    with pytest.raises(p.ProtocolError, match="deadline_ms"):
        p.decode_request(p.Op.PING, struct.pack("<I", 3_600_001))
    for hops, k in [(0, 1), (9, 1), (1, 0), (1, 1_000_001)]:
        with pytest.raises(p.ProtocolError) as e:
            p.decode_request(p.Op.KHOP, ok + struct.pack("<IBI", 1, hops, k))
        assert e.value.code == p.ErrorCode.INVALID
    assert p.decode_request(p.Op.KHOP, ok + struct.pack("<IBI", 1, 8, 1_000_000))[1]["hops"] == 8
    with pytest.raises(p.ProtocolError, match="trailing"):
        p.decode_request(p.Op.PING, ok + b"\0")
    with pytest.raises(p.ProtocolError, match="UTF-8"):
        p.decode_request(p.Op.HELLO, ok + b"\x01\x00\xff")
    with pytest.raises(p.ProtocolError) as e:
        p.decode_request(p.Op.REGISTER, ok)  # a control op is not a request
    assert e.value.code == p.ErrorCode.UNKNOWN_OP
    with pytest.raises(p.ProtocolError, match="at least 4096"):
        p.decode_reply(p.Op.HELLO, 0x81, struct.pack("<BHI", 0, 1, 4095) + b"\0\0")
    with pytest.raises(p.ProtocolError, match="does not answer"):
        p.decode_reply(p.Op.PING, 0x83, b"")
    with pytest.raises(p.ProtocolError, match="expected 0 or 1"):
        p.decode_reply(p.Op.INSERT_EDGE, 0x85, b"\x02")
    # Unknown error codes still decode (a newer server).
    assert p.decode_reply(p.Op.PING, p.ERROR_OP, b"\x63\x00\x00\x00").code_name == "OTHER"


def test_encoders_refuse_what_does_not_fit():
    for bad in [
        lambda: p.encode_neighbors(1, 1000, -1, 0),
        lambda: p.encode_neighbors(1, 1000, 1 << 32, 0),
        lambda: p.encode_put(1, 1000, 1, [1, -2]),
        lambda: p.encode_put(1, 1000, 1, [1, "2"]),
        lambda: p.encode_ping(1, 0),
        lambda: p.encode_ping(1, 3_600_001),
        lambda: p.encode_ping(-1, 1000),
        lambda: p.encode_khop(1, 1000, 1, 256, 1),
        lambda: p.encode_load(1, 1000, [(1, [2])] * ((1 << 20) + 1)),
        lambda: p.encode_control("jobs", {"jobs": [(3, 1)]}),
    ]:
        with pytest.raises(ValueError):
            bad()


def test_strings_are_cut_at_a_character_boundary():
    frame = p.encode_error(1, 4, "é" * 3000)  # 6,000 bytes, cut to 4,096 then back to 4,096 (even)
    h, body = p.split_frame(frame)
    r = p.decode_reply(p.Op.NEIGHBORS, h.op, body)
    assert r.message == "é" * 2048
    frame = p.encode_hello(0, 1000, "a" + "é" * 200)  # 401 bytes, cut to 255
    h, body = p.split_frame(frame)
    assert p.decode_request(h.op, body)[1]["client"] == "a" + "é" * 127


def test_servers_reply_limits():
    op, rop = p.Op.SERVERS, p.Op.SERVERS | p.REPLY_BIT
    assert p.decode_request(op, struct.pack("<I", 1000)) == (1000, {})
    with pytest.raises(p.ProtocolError, match="trailing"):
        p.decode_request(op, struct.pack("<I", 1000) + b"\0")
    # The most a reply may hold: 128 servers, each a name of NAME_MAX bytes.
    most = {"servers": [{"id": i, "client": "é" * 128} for i in range(128)]}
    h, body = p.split_frame(p.encode_reply(op, 3, most))
    assert p.decode_reply(op, h.op, body) == most
    assert p.decode_reply(op, rop, struct.pack("<I", 0)) == {"servers": []}
    # A count past 128 is TOO_LARGE before anything is read; one past the bytes is MALFORMED.
    with pytest.raises(p.ProtocolError, match="servers is 129, past the limit of 128") as e:
        p.decode_reply(op, rop, struct.pack("<I", 129) + bytes(3 * 129))
    assert e.value.code == p.ErrorCode.TOO_LARGE
    with pytest.raises(p.ProtocolError, match="servers = 128 needs at least 384 bytes, 3 left") as e:
        p.decode_reply(op, rop, struct.pack("<IBH", 128, 0, 0))
    assert e.value.code == p.ErrorCode.MALFORMED
    for sid in (128, 255):
        with pytest.raises(p.ProtocolError, match=f"malformed servers body: server id {sid} is not below 128") as e:
            p.decode_reply(op, rop, struct.pack("<IBH", 1, sid, 0))
        assert e.value.code == p.ErrorCode.MALFORMED
    with pytest.raises(p.ProtocolError, match="client is 257 bytes, past the limit of 256") as e:
        p.decode_reply(op, rop, struct.pack("<IBH", 1, 0, 257) + b"a" * 257)
    assert e.value.code == p.ErrorCode.TOO_LARGE
    with pytest.raises(p.ProtocolError, match="client is not UTF-8"):
        p.decode_reply(op, rop, struct.pack("<IBH", 1, 0, 2) + b"\xc3(")
    # The encoder refuses what a decoder would, and cuts long names as the Rust one does.
    for bad in ({"servers": [{"id": 0, "client": "a:1"}] * 129}, {"servers": [{"id": 128, "client": "a:1"}]},
                {"servers": [{"id": -1, "client": "a:1"}]}):
        with pytest.raises(ValueError):
            p.encode_reply(op, 1, bad)
    h, body = p.split_frame(p.encode_reply(op, 1, {"servers": [{"id": 5, "client": "x" * 300}]}))
    assert p.decode_reply(op, h.op, body) == {"servers": [{"id": 5, "client": "x" * 256}]}
    assert p.encode_servers(7, 1000) == p.encode_request("servers", 7, 1000)
