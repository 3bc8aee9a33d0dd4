"""Every frame of clients/golden/frames.json (made by the Rust encoder,
crates/client/src/proto.rs) is encoded byte for byte from its fields, and
decoded back to them."""

import dataclasses
import json
import os

import pytest

from locus_client import protocol as p

GOLDEN = os.path.join(os.path.dirname(__file__), "..", "..", "golden", "frames.json")

with open(GOLDEN, encoding="utf-8") as f:
    FRAMES = json.load(f)


def plain(x):
    """Tuples to lists, as JSON has them."""
    return json.loads(json.dumps(x))


def encode(e):
    op = p.op_from_name(e["op"])
    if e["kind"] == "request":
        return p.encode_request(op, e["id"], e["deadline_ms"], e["fields"])
    if e["kind"] == "control":
        assert e["id"] == 0
        return p.encode_control(op, e["fields"])
    if "code" in e["fields"]:
        return p.encode_error(e["id"], e["fields"]["code"], e["fields"]["message"])
    return p.encode_reply(op, e["id"], e["fields"])


def decode(e):
    h, body = p.split_frame(bytes.fromhex(e["hex"]))
    assert (h.version, h.id) == (p.VERSION, e["id"])
    op = p.op_from_name(e["op"])
    if e["kind"] == "request":
        assert h.op == op
        deadline_ms, fields = p.decode_request(h.op, body)
        assert deadline_ms == e["deadline_ms"]
        return fields
    if e["kind"] == "control":
        assert h.op == op
        return p.decode_control(h.op, body)
    r = p.decode_reply(op, h.op, body)
    if isinstance(r, p.ErrorReply):
        assert h.op == p.ERROR_OP
        return dataclasses.asdict(r)
    assert h.op == op | p.REPLY_BIT
    return r


def test_every_op_has_a_golden_frame():
    kinds = {(e["kind"], e["op"]) for e in FRAMES}
    for op in p.Op:
        kind = "control" if op.is_control else "request"
        assert (kind, op.lower) in kinds, op
        if not op.is_control:
            assert ("reply", op.lower) in kinds, op
    assert any("code" in e["fields"] for e in FRAMES if e["kind"] == "reply")


@pytest.mark.parametrize("e", FRAMES, ids=[e["name"] for e in FRAMES])
def test_encode_matches_golden(e):
    assert encode(e).hex() == e["hex"]


@pytest.mark.parametrize("e", FRAMES, ids=[e["name"] for e in FRAMES])
def test_decode_matches_golden(e):
    assert plain(decode(e)) == e["fields"]


@pytest.mark.parametrize("e", FRAMES, ids=[e["name"] for e in FRAMES])
def test_truncated_golden_frames_are_protocol_errors(e):
    raw = bytes.fromhex(e["hex"])
    for cut in range(len(raw)):
        with pytest.raises(p.ProtocolError):
            h, body = p.split_frame(raw[:cut])
    # A body cut short, under a header patched to match, does not decode either.
    h, body = p.split_frame(raw)
    for cut in range(len(body)):
        with pytest.raises(p.ProtocolError):
            _decode_body(e, h.op, body[:cut])


def _decode_body(e, op_byte, body):
    op = p.op_from_name(e["op"])
    if e["kind"] == "request":
        return p.decode_request(op_byte, body)
    if e["kind"] == "control":
        return p.decode_control(op_byte, body)
    return p.decode_reply(op, op_byte, body)
