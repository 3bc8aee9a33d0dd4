"""Integration tests against a real Locus cluster; they run only when
LOCUS_CLUSTER_FILE names its cluster file (the secret comes from the file or
LOCUS_SECRET).

They load a small seeded graph at fresh vertex ids (from BASE up, a random
base per run so reruns and other users of the cluster do not collide;
LOCUS_TEST_BASE fixes it, and must then name ids no earlier run used: the
tests expect vertices BASE..BASE+999 to have no entries) and check every answer against a Python reference
with the semantics of docs/protocol.md:

- LOAD merges neighbours in arrival order, skipping ones already there, so
  the reference builds each list the same way;
- KHOP: frontier = [v]; each hop replaces the frontier by the first k
  neighbours (stored order) of each frontier vertex, repeats kept; the reply
  has the distinct vertices of the last frontier, increasing, and its size
  counting repeats.

The loaded graph is never changed by these tests (insert/delete use other
fresh vertices), except that one vertex is migrated, which must not change
its neighbours.
"""

from __future__ import annotations

import os
import random

import pytest

from locus_client import Client, LocusError, LocusUnavailable

CLUSTER_FILE = os.environ.get("LOCUS_CLUSTER_FILE")
pytestmark = pytest.mark.skipif(not CLUSTER_FILE, reason="set LOCUS_CLUSTER_FILE to a running cluster's file")

GRAPH_SEED = 20261124
VERTICES = 60
EDGES = 240
TIMEOUT_S = 30.0


def run_base() -> int:
    if os.environ.get("LOCUS_TEST_BASE"):
        return int(os.environ["LOCUS_TEST_BASE"])
    # 3e9 + up to 1e9: far from ids a demo graph uses, below u32::MAX - 1.
    return 3_000_000_000 + random.SystemRandom().randrange(1_000_000) * 1000


BASE = run_base()


def graph_lines(base: int) -> tuple[list[str], list[tuple[int, int]]]:
    """A seeded edge file (with comments, a blank line, a duplicate, a reversed
    duplicate and a self loop) and its edges."""
    rng = random.Random(GRAPH_SEED)
    pairs = []
    for _ in range(EDGES):
        # Skewed: low ids are hubs, so k cuts lists and frontiers repeat.
        u = int(VERTICES * rng.random() ** 2)
        v = rng.randrange(VERTICES)
        pairs.append((base + u, base + v))
    pairs += [pairs[0], (pairs[1][1], pairs[1][0]), (base + 7, base + 7)]
    lines = ["# seeded test graph", "% and a second comment style", ""]
    lines += [f"{u} {v}" if i % 2 else f"{u}\t{v}  " for i, (u, v) in enumerate(pairs)]
    return lines, pairs


def reference_adjacency(pairs: list[tuple[int, int]]) -> dict[int, list[int]]:
    """Undirected, self loops dropped, each list in arrival order without duplicates."""
    adj: dict[int, list[int]] = {}
    for u, v in pairs:
        if u == v:
            continue
        for a, b in ((u, v), (v, u)):
            lst = adj.setdefault(a, [])
            if b not in lst:
                lst.append(b)
    return adj


def reference_khop(adj: dict[int, list[int]], v: int, hops: int, k: int) -> tuple[list[int], int]:
    frontier = [v]
    for _ in range(hops):
        frontier = [u for x in frontier for u in adj.get(x, [])[:k]]
    return sorted(set(frontier)), len(frontier)


@pytest.fixture(scope="module")
def client():
    with Client.from_cluster_file(CLUSTER_FILE, timeout=TIMEOUT_S) as c:
        yield c


@pytest.fixture(scope="module")
def loaded(client, tmp_path_factory):
    lines, pairs = graph_lines(BASE)
    path = tmp_path_factory.mktemp("locus") / "graph.txt"
    path.write_text("\n".join(lines) + "\n")
    adj = reference_adjacency(pairs)
    progress = []
    r = client.load_edges(path, undirected=True, batch_edges=7, progress=lambda s, t: progress.append((s, t)))
    print(f"loaded the test graph at base {BASE}: {r}")
    return adj, r, progress


def test_load_reports_what_it_added(loaded):
    adj, r, progress = loaded
    stored = sum(len(lst) for lst in adj.values())
    assert r["edges"] == stored, f"base {BASE}"
    sent = 2 * sum(1 for u, v in graph_lines(BASE)[1] if u != v)  # both directions, no self loops
    assert r["edges_sent"] == sent
    assert r["batches"] >= sent // 7
    assert progress[-1] == (sent, sent)


def test_neighbors_match_the_reference_in_stored_order(client, loaded):
    adj, _, _ = loaded
    for v, lst in adj.items():
        assert client.neighbors(v) == lst, f"vertex {v} (base {BASE})"
        assert client.neighbors(v, k=2) == lst[:2], f"vertex {v} (base {BASE})"


def test_khop_matches_the_reference(client, loaded):
    adj, _, _ = loaded
    starts = sorted(adj)[:12]
    for v in starts:
        for hops, k in [(1, 1), (2, 1), (2, 2), (2, 3), (2, 100), (3, 2)]:
            r = client.khop(v, hops, k)
            distinct, with_repeats = reference_khop(adj, v, hops, k)
            assert r.distinct == distinct, f"khop({v}, {hops}, {k}) base {BASE}"
            assert r.with_repeats == with_repeats, f"khop({v}, {hops}, {k}) base {BASE}"
            assert r.local_ops + r.remote_ops >= 1
            assert 0.0 <= r.remote_rate <= 1.0


def test_lists_reads_many_vertices_at_once(client, loaded):
    adj, _, _ = loaded
    vs = sorted(adj)[:50] + [BASE + 999_999]
    for server in range(client.machines):
        got = client.lists(server, vs)
        assert got[:-1] == [adj[v] for v in vs[:-1]]
        assert got[-1] is None, "no entry"


def test_unknown_vertex(client, loaded):
    unknown = BASE + 900
    with pytest.raises(LocusError) as e:
        client.neighbors(unknown)
    assert e.value.code_name == "UNKNOWN_VERTEX" and e.value.code == 4
    home = client.slot_table().owner_of(unknown)  # the slot's owner, not unknown % machines
    assert e.value.server == home
    with pytest.raises(LocusError) as e:
        client.khop(unknown, 2, 10)
    assert e.value.code_name == "UNKNOWN_VERTEX"
    where_home, _, found = client.where(unknown)
    assert (where_home, found) == (home, False)


def test_the_cluster_serves_the_slot_table_the_client_routes_by(client, loaded):
    t = client.refresh_slot_table()
    assert t.epoch >= 1 and t.machines >= client.machines
    assert set(t.owners) <= set(range(client.machines))
    adj, _, _ = loaded
    for v in list(adj)[:10]:
        assert client.where(v).home == t.owner_of(v), v  # the server's home is the table's
    r = client.routing()
    assert r.table_epoch == t.epoch and r.table_fetches >= 2
    # Loading and reading a stable cluster never needed a retry.
    assert r.retries == 0


def test_insert_and_delete_edge(client, loaded):
    v, u, w = BASE + 500, BASE + 501, BASE + 502
    # DELETE_EDGE of a vertex with no entry changes nothing (docs/protocol.md).
    assert client.delete_edge(v, u) is False
    with pytest.raises(LocusError, match="UNKNOWN_VERTEX"):
        client.neighbors(v)
    # INSERT_EDGE creates the entry.
    assert client.insert_edge(v, u) is True
    assert client.insert_edge(v, u) is False
    assert client.insert_edge(v, w) is True
    assert sorted(client.neighbors(v)) == [u, w]
    assert client.delete_edge(v, u) is True
    assert client.delete_edge(v, u) is False
    assert client.neighbors(v) == [w]
    # Directed: the reverse edge was not made.
    with pytest.raises(LocusError, match="UNKNOWN_VERTEX"):
        client.neighbors(u)
    client.put(v, [u, w, u + 10])
    assert client.neighbors(v) == [u, w, u + 10]


def test_delete_vertex_on_a_cluster(client, loaded):
    v, a, b = BASE + 600, BASE + 601, BASE + 602
    for x, y in [(v, a), (a, v), (v, b), (b, v), (a, b)]:
        client.insert_edge(x, y)
    # One direction: v's own list goes, a -> v stays.
    assert client.delete_vertex(v) == [a, b]
    assert client.delete_vertex(v) is None
    with pytest.raises(LocusError, match="UNKNOWN_VERTEX"):
        client.neighbors(v)
    with pytest.raises(LocusError, match="UNKNOWN_VERTEX"):
        client.khop(v, 1, 10)
    assert client.neighbors(a) == [v, b]
    # Both directions: the neighbours' edges to it go too.
    client.put(v, [a, b])
    assert client.delete_vertex_both(v) == ([a, b], 2)
    assert client.neighbors(a) == [b] and client.neighbors(b) == []
    # A removed vertex comes back when an edge is inserted.
    assert client.insert_edge(v, a) is True
    assert client.neighbors(v) == [a]


def test_stats_has_one_object_per_server(client):
    stats = client.stats()
    assert len(stats) == client.machines
    for i, s in enumerate(stats):
        assert isinstance(s, dict)
        assert s["server"] == i
    # STATS "machines" is the cluster's room for servers (HELLO's; 8 for
    # `locus cluster up` on etcd), the same everywhere and at least the
    # servers the client knows.
    rooms = {s["machines"] for s in stats}
    assert len(rooms) == 1 and rooms.pop() >= client.machines


def test_ping_every_server(client):
    assert len(client.ping()) == client.machines


def test_migrate_moves_the_value_and_keeps_the_neighbours(client, loaded):
    adj, _, _ = loaded
    m = client.machines
    if m < 2:
        pytest.skip("migration needs at least two servers")
    v = max(adj, key=lambda x: len(adj[x]))  # a hub: several parts' worth is not needed, a value is
    home, holder, found = client.where(v)
    assert (home, found) == (client.slot_table().owner_of(v), True)
    to = (holder + 1) % m
    r = client.migrate(v, to)
    assert (r["from"], r["to"]) == (holder, to), r
    assert r["parts"] >= 1 and r["bytes"] > 0, r
    assert client.where(v) == (home, to, True)
    assert client.neighbors(v) == adj[v]
    distinct, with_repeats = reference_khop(adj, v, 2, 3)
    k = client.khop(v, 2, 3)
    assert (k.distinct, k.with_repeats) == (distinct, with_repeats)
    again = client.migrate(v, to)
    assert again["parts"] == 0 and again["to"] == to, again


def test_a_malformed_file_loads_nothing(client, tmp_path):
    first = BASE + 800
    path = tmp_path / "bad.txt"
    path.write_text(f"{first} {first + 1}\n{first + 1} {first + 2}\n{first} oops\n")
    with pytest.raises(ValueError, match=f"{path}:3: not an unsigned integer: 'oops'"):
        client.load_edges(path)
    with pytest.raises(LocusError, match="UNKNOWN_VERTEX"):
        client.neighbors(first)


LOCUS_BIN = os.environ.get("LOCUS_BIN")


@pytest.mark.skipif(not LOCUS_BIN, reason="set LOCUS_BIN to the locus binary to add a server")
def test_a_server_added_while_the_client_runs_is_followed(client, loaded):
    """Runs last: `cluster add-server --wait` gives the cluster a server the
    client's file did not list; the client finds it through the slot table and
    SERVERS, and every answer stays the same. Then server 0 leaves."""
    import subprocess

    adj, _, _ = loaded
    before = client.machines
    out = subprocess.run(
        [LOCUS_BIN, "cluster", "add-server", "--dir", os.path.dirname(CLUSTER_FILE),
         "--wait", "--batch-slots", "64", "--lifetime-s", "600", "--json"],
        capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    t = client.refresh_slot_table()
    assert before in t.owners, "slots moved to the new server"
    assert client.machines == before + 1
    for v, lst in adj.items():
        assert client.neighbors(v) == lst, f"vertex {v} (base {BASE})"
    for v in sorted(adj)[:6]:
        r = client.khop(v, 2, 3)
        assert (r.distinct, r.with_repeats) == reference_khop(adj, v, 2, 3)
    # An update to a vertex the new server homes (a fresh id in one of its
    # slots) is acknowledged there and read back.
    first = BASE + 960
    v = next(first + i for i in range(t.slots) if t.owner_of(first + i) == before)
    assert client.insert_edge(v, BASE + 950)
    assert client.where(v).home == before
    assert client.neighbors(v) == [BASE + 950]
    assert client.delete_vertex(v) == [BASE + 950]
    # Server 0 leaves. The client still holds a table naming it: its next
    # update to one of server 0's vertices finds it gone, asks the others for
    # the table, and goes to the new home (nothing was sent to the gone one).
    w = next(first + i for i in range(t.slots) if client.slot_table().owner_of(first + i) == 0)
    out = subprocess.run(
        [LOCUS_BIN, "cluster", "remove-server", "--dir", os.path.dirname(CLUSTER_FILE),
         "--id", "0", "--wait", "--batch-slots", "256", "--json"],
        capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    retries = client.routing().retries
    assert client.insert_edge(w, BASE + 951)
    assert client.routing().retries > retries
    assert client.where(w).home != 0
    assert client.neighbors(w) == [BASE + 951]


def test_stale_ok_reads_say_where_they_read(client, loaded):
    """``neighbors_stale_ok`` (``--read stale-ok``) reads a backup of the
    vertex's slot if the cluster has replication, else the primary; either
    way it says which, and STALE_NEIGHBORS sent to any server answers (from
    its backup copy only if it backs the slot)."""
    from locus_client.protocol import Op

    adj, _, _ = loaded
    t = client.slot_table()
    for v in sorted(adj)[:10]:
        ids, from_backup, server = client.neighbors_stale_ok(v)
        assert ids == adj[v]
        if t.backups_of(v):
            assert from_backup and server in t.backups_of(v)
        else:
            assert not from_backup and server == t.owner_of(v)
        answered = 0
        for s in range(client.machines):
            try:
                r = client._call(s, Op.STALE_NEIGHBORS, {"vertex": v, "k": 0}, TIMEOUT_S)
            except LocusUnavailable:
                continue  # a server an earlier test stopped
            answered += 1
            assert r["ids"] == adj[v]
            assert r["from_backup"] == (s in t.backups_of(v))
        assert answered > 0
