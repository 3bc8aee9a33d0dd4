"""Routing by the slot table (issue 59): the SLOTS op and the LSLT wire form,
homes that are slot owners (not ``v % machines``), WRONG_HOME answers that
make the client fetch the table again and retry a bounded number of times,
and tables the client must refuse."""

from __future__ import annotations

import struct
import threading

import pytest

from fakeserver import SECRET, FakeCluster
from locus_client import ROUTE_RETRIES_MAX, Client, ConfigError, LocusError, ProtocolError, SlotTable
from locus_client import protocol as p
from locus_client.slots import (
    REPLICATION_MAX,
    SLOTS_DEFAULT,
    SLOTS_MAX,
    TABLE_BYTES_MAX,
    TABLE_ENCODED_BYTES_MAX,
    TABLE_HEADER_BYTES,
)

VERTEX_OPS = ("put", "neighbors", "insert_edge", "delete_edge", "khop", "where", "delete_vertex")


@pytest.fixture
def cluster():
    with FakeCluster(machines=3) as c:
        yield c


@pytest.fixture
def client(cluster):
    with Client(cluster.addresses, SECRET, timeout=5) as c:
        yield c


def exercise(client: Client, v: int) -> None:
    """One request of every routed op about ``v``."""
    client.put(v, [v + 1])
    assert client.neighbors(v) == [v + 1]
    assert client.insert_edge(v, 1 << 31) is True
    assert client.delete_edge(v, 1 << 31) is True
    client.khop(v, 1, 1)
    client.where(v)
    assert client.delete_vertex(v) == [v + 1]


def routed_to(cluster: FakeCluster) -> dict[tuple[str, int], list[int]]:
    """(op, vertex) -> servers it was sent to, in order."""
    out: dict[tuple[str, int], list[int]] = {}
    for op in VERTEX_OPS:
        for server, f in cluster.ops(op):
            out.setdefault((op, f["vertex"]), []).append(server)
    return out


def run_bounded(fn, seconds: float = 20.0):
    """Runs ``fn`` in a thread and fails (instead of hanging) if it does not
    end within ``seconds``: an unbounded retry loop is a failure here."""
    box: dict[str, object] = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"the call did not end within {seconds} s: endless retrying?"
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box.get("value")


# ---------------------------------------------------------------- the table


def test_a_new_clusters_table_is_not_v_mod_machines():
    t = SlotTable.uniform(SLOTS_DEFAULT, 3)
    assert (t.epoch, t.machines, t.slots) == (1, 3, 4096)
    assert t.owner_of(4097) == 1 and 4097 % 3 == 2
    assert t.owner_of(4095) == 0 and t.owner_of(4096) == 0
    assert SlotTable.decode(t.encode()) == t
    raw = t.encode()
    assert raw[:4] == b"LSLT" and len(raw) == 20 + 4096
    moved = t.with_owners({1: 2})
    assert (moved.epoch, moved.owner_of(4097), moved.owner_of(1)) == (2, 2, 2)


def table_bytes(magic=b"LSLT", version=1, machines=3, epoch=9, slots=4, owners=b"\x00\x01\x02\x00") -> bytes:
    return struct.pack("<4sHHQI", magic, version, machines, epoch, slots) + owners


@pytest.mark.parametrize(
    "raw,byte,why",
    [
        (table_bytes()[:19], 19, "19 bytes, shorter than the 20-byte header"),
        (table_bytes(magic=b"LSLX"), 0, "magic b'LSLX', not \"LSLT\""),
        (table_bytes(version=3), 4, "version 3, this client reads 1 and 2"),
        (table_bytes(version=0), 4, "version 0, this client reads 1 and 2"),
        (table_bytes(version=2), 24, "no replication byte after the owners (version 2)"),
        (table_bytes(machines=0), 6, "machines = 0: expected 1..=128"),
        (table_bytes(machines=129), 6, "machines = 129: expected 1..=128"),
        (table_bytes(slots=0, owners=b""), 6, "slots = 0: expected 1..=65536"),
        (table_bytes(slots=65537, owners=b""), 6, "slots = 65537: expected 1..=65536"),
        (table_bytes(slots=5), 20, "4 owner bytes for 5 slots"),
        (table_bytes(owners=b"\x00\x01\x02\x00\x00"), 20, "5 owner bytes for 4 slots"),
        (table_bytes(owners=b"\x00\x01\x00\x03"), 23, "slot 3's owner 3 is not below 3 machines"),
    ],
)
def test_a_malformed_table_is_refused_naming_the_byte(raw, byte, why):
    body = struct.pack("<I", len(raw)) + raw
    with pytest.raises(ProtocolError) as e:
        p.decode_reply(p.Op.SLOTS, p.Op.SLOTS | p.REPLY_BIT, body)
    assert str(e.value) == f"malformed slots body: slot table, byte {byte}: {why}"
    assert e.value.code == p.ErrorCode.MALFORMED


def test_a_table_past_the_limit_is_too_large():
    body = struct.pack("<I", TABLE_BYTES_MAX + 1) + bytes(TABLE_BYTES_MAX + 1)
    with pytest.raises(ProtocolError, match=f"past the limit of {TABLE_BYTES_MAX}") as e:
        p.decode_reply(p.Op.SLOTS, p.Op.SLOTS | p.REPLY_BIT, body)
    assert e.value.code == p.ErrorCode.TOO_LARGE
    # The largest table fits.
    big = SlotTable.uniform(1 << 16, 128)
    frame = p.encode_reply(p.Op.SLOTS, 1, big.fields())
    h, body = p.split_frame(frame)
    assert SlotTable.from_fields(p.decode_reply(p.Op.SLOTS, h.op, body)) == big


# ------------------------------------------------------- replication (issue 60)

#: ``a_version_2_table_is_pinned_for_the_other_clients`` in
#: crates/placement/src/slots/tests.rs encodes this table to these bytes.
RUST_V2 = bytes.fromhex(
    "4c534c54020004000700000001000000050000000001020301"  # header, owners
    "03"  # R
    "01000000020102"  # slot 0: primary epoch 1, backups 1 and 2
    "020000000102"  # slot 1: primary epoch 2, backup 2
    "0100000000"  # slot 2: no backup
    "07000000020001"  # slot 3: primary epoch 7, backups 0 and 1
    "010000000103"  # slot 4: backup 3
)


def test_a_version_2_table_from_rust_decodes():
    t = SlotTable.decode(RUST_V2)
    assert (t.epoch, t.machines, t.slots, t.replication) == (1 << 32 | 7, 4, 5, 3)
    assert t.owners == (0, 1, 2, 3, 1)
    assert t.backups == ((1, 2), (2,), (), (0, 1), (3,))
    assert t.primary_epochs == (1, 2, 1, 7, 1)
    assert t.backups_of(5 + 3) == (0, 1) and t.owner_of(5 + 3) == 3
    assert t.encode() == RUST_V2
    assert t == SlotTable(1 << 32 | 7, 4, t.owners, 3, t.backups, t.primary_epochs)


def test_a_table_without_replication_keeps_version_1_and_its_defaults():
    t = SlotTable.decode(table_bytes())
    assert (t.replication, t.backups, t.primary_epochs) == (1, ((),) * 4, (1,) * 4)
    assert t.encode() == table_bytes() and "replication" not in t.fields()
    # R = 1 with a slot failed over once still round-trips, as version 2.
    failed_over = SlotTable(9, 3, [0, 1, 2, 0], 1, None, [1, 2, 1, 1])
    raw = failed_over.encode()
    assert raw[4] == 2 and len(raw) == 20 + 4 + 1 + 4 * 5
    assert SlotTable.decode(raw) == failed_over
    assert SlotTable.from_fields(failed_over.fields()) == failed_over
    assert REPLICATION_MAX == 3 and TABLE_ENCODED_BYTES_MAX == 20 + 1 + 8 * SLOTS_MAX


def test_a_replicated_table_travels_in_a_slots_reply():
    t = SlotTable.decode(RUST_V2)
    frame = p.encode_reply(p.Op.SLOTS, 1, dict(t.fields(), hints=[]))
    h, body = p.split_frame(frame)
    f = p.decode_reply(p.Op.SLOTS, h.op, body)
    assert (f["replication"], f["backups"][3], f["primary_epochs"][3]) == (3, [0, 1], 7)
    assert SlotTable.from_fields(f) == t


def test_a_move_keeps_backups_refuses_one_and_bumps_the_primary_epoch():
    t = SlotTable.decode(RUST_V2)
    moved = t.with_owners({2: 0})
    assert (moved.epoch, moved.owners[2], moved.primary_epochs[2]) == (t.epoch + 1, 0, 2)
    assert moved.backups == t.backups
    with pytest.raises(ValueError, match="onto its backup 1"):
        t.with_owners({0: 1})
    plain = SlotTable.uniform(4, 2).with_owners({1: 0})
    assert plain.primary_epochs == (1,) * 4 and plain.encode()[4] == 1, "R = 1 stays version 1"


#: 3 machines, slots owned by 0 and 1, R = 3, slot 0 backed by 1 and 2 at
#: primary epoch 4, slot 1 by 2: the table of Rust's
#: ``a_malformed_version_2_table_names_the_byte``, with the same offsets.
V2 = SlotTable(9, 3, [0, 1], 3, [[1, 2], [2]], [4, 1]).encode()
R_AT = TABLE_HEADER_BYTES + 2
S0 = R_AT + 1
S1 = S0 + 5 + 2


def with_byte(at: int, v: int) -> bytes:
    b = bytearray(V2)
    b[at] = v
    return bytes(b)


@pytest.mark.parametrize(
    "raw,byte,why",
    [
        (with_byte(R_AT, 0), R_AT, "replication = 0: expected 1..=3"),
        (with_byte(R_AT, 4), R_AT, "replication = 4: expected 1..=3"),
        (with_byte(R_AT, 2), S0 + 4, "slot 0 has 2 backups, more than R - 1 = 1"),
        (V2[:S0] + bytes(4) + V2[S0 + 4 :], S0, "slot 0's primary epoch is 0, not at least 1"),
        (with_byte(S0 + 5, 0), S0 + 5, "slot 0's backup 0 is its owner"),
        (with_byte(S0 + 6, 1), S0 + 6, "slot 0's backup 1 is named twice"),
        (with_byte(S1 + 5, 3), S1 + 5, "slot 1's backup 3 is not below 3 machines"),
        (with_byte(TABLE_HEADER_BYTES + 1, 5), TABLE_HEADER_BYTES + 1, "slot 1's owner 5 is not below 3 machines"),
        (V2 + b"\x00", len(V2), "1 bytes past the last slot"),
        (V2[: TABLE_HEADER_BYTES + 1], TABLE_HEADER_BYTES, "1 owner bytes for 2 slots"),
        (V2[:R_AT], R_AT, "no replication byte after the owners (version 2)"),
        (V2[: S0 + 3], S0 + 3, f"slot 0's entry at byte {S0}: 3 bytes left, 5 needed"),
        (V2[: S0 + 6], S0 + 6, f"slot 0's 2 backups at byte {S0 + 5}: 1 bytes left"),
    ],
)
def test_a_malformed_version_2_table_names_the_byte(raw, byte, why):
    with pytest.raises(ProtocolError) as e:
        SlotTable.decode(raw)
    assert str(e.value) == f"slot table, byte {byte}: {why}"


@pytest.mark.parametrize("good", [V2, RUST_V2], ids=["v2", "rust_v2"])
def test_every_truncation_and_byte_of_a_version_2_table_decodes_or_fails_cleanly(good):
    for n in range(len(good)):
        with pytest.raises(ProtocolError):
            SlotTable.decode(good[:n])
    for at in range(len(good)):
        for v in (0, 1, 2, 3, 4, 0x7F, 0x80, 0xFF, good[at] ^ 1):
            b = bytearray(good)
            b[at] = v
            try:
                t = SlotTable.decode(bytes(b))
            except ProtocolError:
                continue
            # A decoded table passed every check of the constructor too.
            assert SlotTable.decode(t.encode()) == t


# ---------------------------------------------------------------- routing


def test_routing_follows_the_table_not_v_mod_machines(cluster, client):
    cluster.check_homes = True  # a misrouted request would be refused
    vertices = [0, 1, 2, 4095, 4096, 4097, 4098, 8191, 12289]
    for v in vertices:
        exercise(client, v)
    sent = routed_to(cluster)
    for v in vertices:
        for op in VERTEX_OPS:
            assert sent[(op, v)] == [v % 4096 % 3], (op, v)
    assert sent[("put", 4097)] == [1]  # 4097 % 3 would be 2
    assert client.home(4097) == 1
    assert cluster.wrong_homes == 0
    assert client.routing() == (1, 1, 0, 0)  # one fetch, no retries, no hint followed
    assert [s for s, _ in cluster.ops("slots")] == [0]


def test_routing_follows_a_non_uniform_table(cluster, client):
    owners = [2, 2, 0, 1, 0, 1, 2, 0]
    cluster.table = SlotTable(5, 3, owners)
    cluster.check_homes = True
    for v in range(20):
        exercise(client, v)
    sent = routed_to(cluster)
    for v in range(20):
        assert {s for op in VERTEX_OPS for s in sent[(op, v)]} == {owners[v % 8]}, v
    assert client.routing()[:3] == (5, 1, 0)
    r = client.load_edges([(u, (u * 5 + 1) % 30) for u in range(30)], batch_edges=4)
    loads = cluster.ops("load")
    assert r["batches"] == len(loads) > 0
    for server, f in loads:
        assert all(owners[v % 8] == server for v, _ in f["vertices"]), (server, f)
    assert cluster.wrong_homes == 0


def test_wrong_home_makes_the_client_refetch_and_retry(cluster, client):
    cluster.check_homes = True
    client.put(4097, [1, 2])  # fetches the table at epoch 1: 4097 on server 1
    assert client.routing()[:3] == (1, 1, 0)
    cluster.table = cluster.table.with_owners({1: 2})  # slot 1 moves to server 2, epoch 2
    assert client.neighbors(4097) == [1, 2]
    assert routed_to(cluster)[("neighbors", 4097)] == [1, 2]  # refused by 1, answered by 2
    assert [s for s, _ in cluster.ops("slots")] == [0, 1]  # refetched from the server that refused
    assert client.routing()[:3] == (2, 2, 1)
    # The new table holds: the next request goes straight to server 2.
    assert client.insert_edge(4097, 3) is True
    assert routed_to(cluster)[("insert_edge", 4097)] == [2]
    assert client.routing()[:3] == (2, 2, 1)
    assert cluster.wrong_homes == 1


def test_a_stale_server_table_is_corrected_and_an_older_epoch_never_replaces_a_newer(cluster, client):
    cluster.check_homes = True
    cluster.table = SlotTable.uniform(SLOTS_DEFAULT, 3, epoch=2).with_owners({1: 2})  # epoch 3
    cluster.servers[0].own_table = SlotTable.uniform(SLOTS_DEFAULT, 3)  # server 0 lags at epoch 1
    client.put(4097, [5])
    assert routed_to(cluster)[("put", 4097)] == [1, 2]
    assert client.routing()[:3] == (3, 2, 1)
    assert client.refresh_slot_table(0).epoch == 3  # server 0's epoch 1 is fetched, not kept
    assert client.routing()[:3] == (3, 3, 1)
    assert client.home(4097) == 2


def test_a_server_that_keeps_refusing_fails_after_its_retries(cluster, client):
    assert ROUTE_RETRIES_MAX == 10
    client.put(4097, [1])
    cluster.servers[1].refuse_all = True
    with pytest.raises(LocusError) as e:
        run_bounded(lambda: client.neighbors(4097))
    err = e.value
    assert (err.code_name, err.server) == ("WRONG_HOME", 1)
    assert "refused again after 10 retries" in err.message and "table epoch 1" in err.message
    assert routed_to(cluster)[("neighbors", 4097)] == [1] * 11  # the first try and 10 retries
    assert client.routing()[:3] == (1, 11, 10)  # a fetch before each retry
    # Counted per operation: the next one gets its own 10 retries.
    with pytest.raises(LocusError, match="WRONG_HOME"):
        run_bounded(lambda: client.put(4097, [2]))
    assert client.routing().retries == 20
    cluster.servers[1].refuse_all = False
    assert client.neighbors(4097) == [1]


def test_other_errors_are_not_retried(cluster, client):
    with pytest.raises(LocusError, match="UNKNOWN_VERTEX"):
        client.neighbors(4097)
    assert routed_to(cluster)[("neighbors", 4097)] == [1]
    assert client.routing()[:3] == (1, 1, 0)


def test_a_malformed_table_from_a_server_is_a_protocol_error(cluster, client):
    bad = table_bytes(owners=b"\x00\x01\x00\x03")
    cluster.servers[0].slots_body = struct.pack("<I", len(bad)) + bad
    with pytest.raises(ProtocolError) as e:
        client.neighbors(1)
    assert str(e.value) == (
        f"server 0 ({cluster.addresses[0]}): malformed slots body: slot table, byte 23: "
        "slot 3's owner 3 is not below 3 machines; connection closed"
    )
    assert cluster.ops("neighbors") == []  # nothing was sent by a guessed route
    assert client.routing()[:3] == (0, 0, 0)


def test_without_slots_answers_the_client_falls_back_to_a_new_clusters_homes(cluster, client):
    for s in cluster.servers:
        s.slots_error = p.ErrorCode.UNKNOWN_OP  # an older server
    cluster.check_homes = True
    client.put(4097, [3])
    assert routed_to(cluster)[("put", 4097)] == [1]
    assert [s for s, _ in cluster.ops("slots")] == [0, 1, 2]  # each asked in turn
    assert client.routing()[:3] == (0, 0, 0)
    r = client.load_edges([(4097, 5), (8194, 4)])
    assert r["edges"] == 4 and cluster.wrong_homes == 0


def test_a_table_that_does_not_fit_the_cluster_file_is_refused(cluster, client):
    cluster.table = SlotTable(4, 2, [0, 1, 0, 1])
    with pytest.raises(ConfigError, match=r"has owners below 2, but addresses lists 3 servers; the file is stale"):
        client.neighbors(1)
    cluster.table = SlotTable(4, 4, [0, 1, 3, 1])
    with pytest.raises(ConfigError, match=r"homes vertices on server 3, but addresses lists 3 servers \(0\.\.2\)"):
        client.neighbors(1)


# ---------------------------------------------------------------- added servers


@pytest.fixture
def grown():
    """Three fake servers with room for 8, whose table homes vertices on the
    first two only: a client given the first two addresses (the cluster file
    as ``locus cluster up --servers 2`` wrote it) sees server 2 as added."""
    with FakeCluster(machines=3) as c:
        c.hello_machines = 8
        c.table = SlotTable(1, 8, [s % 2 for s in range(SLOTS_DEFAULT)])
        c.check_homes = True
        yield c


def test_a_table_naming_an_added_server_makes_the_client_learn_it(grown):
    with Client(grown.addresses[:2], SECRET, timeout=5) as client:
        client.put(4097, [7])  # slot 1: server 1
        assert client.machines == 2 and client.routing()[:3] == (1, 1, 0)
        grown.table = grown.table.with_owners({1: 2})  # slot 1 moves to the added server, epoch 2
        assert client.neighbors(4097) == [7]
        assert routed_to(grown)[("neighbors", 4097)] == [1, 2]  # refused by 1, answered by 2
        assert grown.ops("servers") == [(1, {})]  # asked of the server that sent the table
        assert client.machines == 3 and client.addresses == grown.addresses
        assert grown.servers[2].connections == 1  # HELLO checked: server 2, room 8
        assert client.routing()[:3] == (2, 2, 1)
        # Learned once: the next requests go straight to server 2, and every
        # per-server call now covers it.
        assert client.insert_edge(4097, 8) is True
        assert routed_to(grown)[("insert_edge", 4097)] == [2]
        assert len(client.ping()) == 3 and [s["server"] for s in client.stats()] == [0, 1, 2]
        assert client.migrate(4097, 2)["to"] == 2
        assert grown.ops("servers") == [(1, {})]
        assert grown.wrong_homes == 1


def test_a_fresh_client_learns_added_servers_before_routing(grown):
    grown.table = grown.table.with_owners({1: 2, 3: 2})
    grown.servers[0].servers_error = p.ErrorCode.UNKNOWN_OP  # asked first, refuses: the next is asked
    with Client(grown.addresses[:2], SECRET, timeout=5) as client:
        client.put(4097, [1])
        client.put(3, [2])
        assert routed_to(grown)[("put", 4097)] == [2] and routed_to(grown)[("put", 3)] == [2]
        assert [s for s, _ in grown.ops("servers")] == [0, 1]
        assert client.routing()[:3] == (2, 1, 0) and grown.wrong_homes == 0
        r = client.load_edges([(4097, 5), (1, 9), (2, 3)])
        assert r["edges"] == 5 and grown.wrong_homes == 0  # 3 -> 2 was there already
        assert {s for s, _ in grown.ops("load")} == {0, 1, 2}


def test_concurrent_learners_add_each_server_once(grown):
    grown.table = grown.table.with_owners({1: 2})
    with Client(grown.addresses[:2], SECRET, timeout=5) as client:
        errors = []
        start = threading.Barrier(6)

        def work(i):
            try:
                start.wait()
                for v in range(i, 4096 * 3, 97):
                    client.put(v, [i])
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors, errors
        assert client.addresses == grown.addresses and len(client._idle) == len(client._frame_limits) == 3
        assert grown.wrong_homes == 0


def test_servers_that_do_not_name_the_owner_mean_a_stale_file(grown):
    grown.table = grown.table.with_owners({1: 2})
    for s in grown.servers:
        s.servers_listed = 2  # none has heard of server 2
    with Client(grown.addresses[:2], SECRET, timeout=5) as client:
        with pytest.raises(ConfigError, match=r"homes vertices on server 2, but addresses lists 2 servers \(0\.\.1\) "
                                              r"and SERVERS names no more; the file is stale"):
            client.neighbors(4097)
        assert grown.ops("servers") == [(0, {})]
        assert client.machines == 2 and grown.ops("neighbors") == []
    # Servers too old for SERVERS: the same error, saying why.
    for s in grown.servers[:2]:
        s.servers_error = p.ErrorCode.UNKNOWN_OP
    with Client(grown.addresses[:2], SECRET, timeout=5) as client:
        with pytest.raises(ConfigError, match=r"no server answered SERVERS: .*UNKNOWN_OP.*the file is stale"):
            client.neighbors(4097)


def test_a_learned_server_with_another_room_is_refused(grown):
    grown.table = grown.table.with_owners({1: 2})
    grown.servers[2].hello_machines = 4
    with Client(grown.addresses[:2], SECRET, timeout=5) as client:
        with pytest.raises(ConfigError, match=r"server 2 \(.*\) says the cluster has room for 4 servers, but another "
                                              r"server said 8"):
            client.neighbors(4097)
        assert client.machines == 3  # learned, but refused on HELLO


@pytest.mark.parametrize(
    "body,why",
    [
        (struct.pack("<I", 129) + bytes(3 * 129), "servers is 129, past the limit of 128"),
        (struct.pack("<IBH", 1, 128, 0), r"malformed servers body: server id 128 is not below 128"),
        (struct.pack("<IBH", 1, 2, 257) + b"a" * 257, "client is 257 bytes, past the limit of 256"),
        (struct.pack("<IBH", 1, 2, 1) + b"\xff", "malformed servers body: client is not UTF-8"),
        (struct.pack("<IBH", 2, 2, 2) + b"a:", r"malformed servers body: servers = 2 needs at least 6 bytes, 5 left"),
        (struct.pack("<IBH", 2, 2, 3) + b"a:1", r"malformed servers body: id needs 1 bytes, 0 left"),
        (struct.pack("<IBH", 1, 2, 3) + b"a:1\x00", "malformed servers body: 1 trailing bytes"),
        (struct.pack("<IBH", 1, 2, 6) + b"nohost", r"malformed servers body: server 2's address: 'nohost' is not "
                                                   "host:port"),
    ],
)
def test_a_malformed_servers_reply_is_a_protocol_error(grown, body, why):
    grown.table = grown.table.with_owners({1: 2})
    grown.servers[0].servers_body = body
    with Client(grown.addresses[:2], SECRET, timeout=5) as client:
        with pytest.raises(ProtocolError, match=rf"server 0 \(127\.0\.0\.1:\d+\): .*{why}"):
            client.neighbors(4097)
        assert client.machines == 2 and grown.ops("neighbors") == []


def test_a_move_hint_looks_slots_up_as_the_rust_filters_do():
    # The golden hint: a server's filters with slot 5 handed and slot 3 in
    # flight (crates/client/tests/golden_frames.rs makes them).
    import json
    import os

    from locus_client.slots import MoveHint, _mix64

    assert _mix64(5) == 0x63033B0CA389C35A  # as locus_placement::mix64 (its test pins it)
    golden = os.path.join(os.path.dirname(__file__), "..", "..", "golden", "frames.json")
    with open(golden, encoding="utf-8") as f:
        frame = next(e for e in json.load(f) if e["name"] == "slots_reply_hinted")
    h = MoveHint.from_fields(frame["fields"]["hints"][0])
    assert (h.source, h.target) == (1, 2)
    assert h.handed(5) and h.in_flight(3)
    assert h.update_goes_to_target(5)
    # Few false positives in filters this sparse.
    assert sum(h.handed(s) for s in range(4096)) < 200
    assert sum(h.in_flight(s) for s in range(4096)) < 200
    with pytest.raises(ProtocolError):
        MoveHint(1, 2, b"", b"\x01")


def test_an_update_follows_a_move_hint_to_the_new_home_before_the_table_names_it():
    # Server 0 handed v's slot to server 2 (HANDED): it refuses v's updates
    # and its SLOTS reply carries the move's migration index; server 2
    # serves the slot ahead of the table. The client's update reaches 2
    # after one refusal, by the hint, while the table still names 0.
    from locus_client.slots import MoveHint

    v = 4096 * 3  # slot 0: server 0's in a uniform table of 3
    with FakeCluster(3) as cluster:
        cluster.check_homes = True
        a, b = cluster.servers[0], cluster.servers[2]
        slot = cluster.table.slot_of(v)
        places = MoveHint(0, 2, b"\0", b"\0")._places
        bf = bytearray(64)
        for bit in places(slot, len(bf) * 8):
            bf[bit // 8] |= 1 << (bit % 8)
        fields = dict(cluster.table.fields(), hints=[{"from": 0, "to": 2, "bf": bf.hex(), "cbf": "00" * 64}])
        a.slots_body = p.encode_reply(p.Op.SLOTS, 0, fields)[p.HEADER_BYTES:]
        a.refuse_all = True
        b.own_table = SlotTable.from_fields(dict(cluster.table.fields(), owners=[2] + list(cluster.table.owners[1:])))
        with Client(cluster.addresses, SECRET, timeout=5) as client:
            assert client.insert_edge(v, 7) is True
            # The first SLOTS (from server 0) brought the hint: straight to 2.
            assert [s for s, _ in cluster.ops("insert_edge")] == [2] and cluster.wrong_homes == 0
            r = client.routing()
            assert (r.hinted, r.retries, r.table_epoch) == (1, 0, cluster.table.epoch)
            # Another slot of server 0 is not in the filter: to the table's home.
            a.refuse_all = False
            assert client.insert_edge(v + 3, 8) is True
            assert [s for s, _ in cluster.ops("insert_edge")][-1] == 0
            # A hint the new home refuses (a false positive) costs one
            # refusal, then the table's home answers.
            b.refuse_all = True
            assert client.insert_edge(v, 9) is True
            assert [s for s, _ in cluster.ops("insert_edge")][-1] == 0
            r = client.routing()
            assert (r.hinted, r.retries, cluster.wrong_homes) == (2, 1, 1)
