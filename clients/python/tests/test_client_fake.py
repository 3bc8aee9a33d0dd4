"""The client against a fake cluster (fakeserver.py): routing by home,
pooling, deadlines, error replies, loading (validation first, batching
limits) and the cluster file."""

from __future__ import annotations

import threading
import time

import pytest

import locus_client.config as config_mod
import locus_client.edges as edges_mod
from fakeserver import SECRET, FakeCluster
from locus_client import AuthError, Client, ConfigError, KhopResult, LocusError, LocusTimeout, SlotTable
from locus_client import protocol as p
from locus_client.slots import SLOTS_DEFAULT


@pytest.fixture
def cluster():
    with FakeCluster(machines=3) as c:
        yield c


@pytest.fixture
def client(cluster):
    with Client(cluster.addresses, SECRET, timeout=5) as c:
        yield c


def reference(edge_pairs, undirected=True):
    """Adjacency lists as LOAD stores them: arrival order, duplicates skipped."""
    adj: dict[int, list[int]] = {}
    for u, v in edge_pairs:
        pairs = [(u, v), (v, u)] if undirected else [(u, v)]
        if undirected and u == v:
            continue
        for a, b in pairs:
            lst = adj.setdefault(a, [])
            if b not in lst:
                lst.append(b)
        if not undirected:
            adj.setdefault(v, [])
    return adj


def test_requests_go_to_the_home_and_migrate_to_the_target(cluster, client):
    assert client.machines == 3
    for v in range(9):
        client.put(v, [v + 1])
        assert client.insert_edge(v, 100) is True
        assert client.insert_edge(v, 100) is False
        assert client.neighbors(v) == [v + 1, 100]
        assert client.neighbors(v, k=1) == [v + 1]
        assert client.delete_edge(v, 100) is True
        assert client.delete_edge(v, 100) is False
        client.khop(v, 1, 1)
        client.where(v)
    for op in ("put", "insert_edge", "neighbors", "delete_edge", "khop", "where"):
        sent = cluster.ops(op)
        assert sent and all(server == f["vertex"] % 3 for server, f in sent), op
    r = client.migrate(4, 2)  # home 1
    assert r == {"from": 1, "to": 2, "parts": 1, "bytes": 12}
    assert cluster.ops("migrate") == [(2, {"vertex": 4})]
    assert client.where(4) == (1, 2, True)
    assert client.where(4).holder == 2
    assert client.where(77).found is False
    with pytest.raises(ValueError, match="to = 3"):
        client.migrate(4, 3)


def test_connections_are_pooled(cluster, client):
    client.put(1, [2])
    for _ in range(30):
        assert client.neighbors(1) == [2]
    client.stats()
    assert [s.connections for s in cluster.servers] == [1, 1, 1]


def test_pool_is_thread_safe_and_bounded(cluster):
    with Client(cluster.addresses, SECRET, timeout=5, idle_max=2) as c:
        for v in range(30):
            c.put(v, [v, v + 1])
        errors = []

        def work(seed):
            try:
                for i in range(40):
                    v = (seed * 7 + i) % 30
                    assert c.neighbors(v) == [v, v + 1]
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors, errors
        # Six threads need at most six connections at once; only two stay idle per server.
        assert all(len(pool) <= 2 for pool in c._idle)


def test_a_server_that_never_answers_times_out_within_the_bound(cluster, client):
    client.put(0, [1])
    cluster.servers[0].silent = True
    t0 = time.monotonic()
    with pytest.raises(LocusTimeout, match=r"server 0 \(127\.0\.0\.1:\d+\): no answer within 1\.3 s") as e:
        client.neighbors(0, timeout=0.3)
    elapsed = time.monotonic() - t0
    assert 1.2 <= elapsed < 2.5, elapsed
    assert isinstance(e.value, TimeoutError) and isinstance(e.value, ConnectionError)
    # The deadline went on the wire: 300 ms.
    assert cluster.ops("neighbors")[-1][1] == {"vertex": 0, "k": 0}
    cluster.servers[0].silent = False
    # The half-read connection was dropped, not reused: a new one answers.
    assert client.neighbors(0) == [1]
    assert cluster.servers[0].connections == 2


def test_error_reply_is_a_locus_error_and_keeps_the_connection(cluster, client):
    with pytest.raises(LocusError) as e:
        client.neighbors(5)
    err = e.value
    assert (err.code, err.code_name, err.server) == (4, "UNKNOWN_VERTEX", 2)
    assert err.message == f"server 2 ({cluster.addresses[2]}): vertex 5 has no entry"
    assert "UNKNOWN_VERTEX" in str(err)
    with pytest.raises(LocusError, match="UNKNOWN_VERTEX"):
        client.khop(5)
    client.put(5, [])
    assert client.neighbors(5) == []
    assert cluster.servers[2].connections == 1


def test_argument_checks(client):
    for bad in [lambda: client.neighbors(-1), lambda: client.neighbors(1 << 32),
                lambda: client.khop(1, hops=0), lambda: client.khop(1, hops=9),
                lambda: client.khop(1, k=0), lambda: client.khop(1, k=1_000_001),
                lambda: client.neighbors(1, timeout=0), lambda: client.neighbors(1, timeout=3601)]:
        with pytest.raises(ValueError):
            bad()
    with pytest.raises(TypeError):
        client.neighbors("1")


def test_khop_result(cluster, client):
    client.put(1, [2, 3, 2])
    client.put(2, [4, 1])
    client.put(3, [4])
    r = client.khop(1, hops=2, k=2)
    assert isinstance(r, KhopResult)
    # frontier [1] -> [2, 3] -> [4, 1, 4]
    assert (r.distinct, r.with_repeats) == ([1, 4], 3)
    assert r.remote_rate == 0.25
    assert cluster.ops("khop")[-1] == (1, {"vertex": 1, "hops": 2, "k": 2})


def test_stats_and_ping_reach_every_server(cluster, client):
    client.put(3, [1])
    stats = client.stats()
    assert [s["server"] for s in stats] == [0, 1, 2]
    assert stats[0]["keys"] == 1
    rtts = client.ping()
    assert len(rtts) == 3 and all(t >= 0 for t in rtts)


def test_a_restarted_server_is_reconnected_transparently(cluster, client):
    client.put(0, [1])
    assert client.neighbors(0) == [1]
    cluster.servers[0].drop_connections()
    assert client.neighbors(0) == [1]  # idempotent: the dead pooled connection is replaced
    cluster.servers[0].drop_connections()
    assert client.insert_edge(0, 2) is True  # the liveness check caught the closed connection
    assert cluster.servers[0].connections == 3


def test_load_validates_the_whole_file_first(cluster, client, tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("# comment\n0 1\n1 2\n\n% another\n2 x3\n3 4\n")
    with pytest.raises(ValueError) as e:
        client.load_edges(path)
    msg = str(e.value)
    assert f"{path}:6: not an unsigned integer: 'x3' in line '2 x3'" in msg
    for text, why in [("1 2 3\n", "expected two vertex ids, found 3"), ("7\n", "expected two vertex ids, found 1"),
                      ("1 -2\n", "not an unsigned integer"), ("1 4294967295\n", "destination vertex id 4294967295 exceeds the maximum 4294967294"),
                      ("99999999999999999999999 1\n", "source vertex id 99999999999999999999999 exceeds")]:
        path.write_text("0 1\n" + text)
        with pytest.raises(ValueError, match=f"{path}:2: {why}"):
            client.load_edges(path)
    assert cluster.ops("load") == []
    with pytest.raises(ValueError, match="cannot open"):
        client.load_edges(tmp_path / "missing.txt")


def test_load_batches_by_home_and_limit(cluster, client, tmp_path):
    pairs = [(u, (u * 7 + 3) % 40) for u in range(40)] + [(5, 6), (6, 5), (5, 6), (9, 9), (0, 39)]
    path = tmp_path / "g.txt"
    path.write_text("# u v\n" + "".join(f"{u}\t{v}\r\n" for u, v in pairs))
    seen = []
    r = client.load_edges(path, batch_edges=5, progress=lambda sent, total: seen.append((sent, total)))
    ref = reference(pairs)
    total = sum(2 for u, v in pairs if u != v)
    assert r["edges_sent"] == total and seen[-1] == (total, total)
    assert [s for s, _ in seen] == sorted(s for s, _ in seen)
    assert r["edges"] == sum(len(x) for x in ref.values())
    assert r["batches"] == len(cluster.ops("load")) >= total // 5
    for server, f in cluster.ops("load"):
        assert sum(len(ids) for _, ids in f["vertices"]) <= 5
        assert all(v % 3 == server for v, _ in f["vertices"])
    for v, lst in ref.items():
        assert client.neighbors(v) == lst, v


def test_load_counts_a_vertex_changed_in_several_batches_once(cluster, client):
    # Vertex 0 has 12 neighbours: with 5 ids a batch its list changes in
    # three batches, and is still one vertex changed.
    pairs = [(0, u) for u in range(1, 13)]
    r = client.load_edges(pairs, batch_edges=5)
    assert r["vertices"] == 13, r
    assert sum(1 for server, f in cluster.ops("load") for v, _ in f["vertices"] if v == 0) >= 3
    # Loading again changes nothing.
    assert client.load_edges(pairs, batch_edges=5)["vertices"] == 0


def test_delete_vertex_returns_its_list_and_both_directions_cleans_neighbours(cluster, client):
    client.load_edges([(1, 2), (1, 3), (2, 3)])
    assert client.delete_vertex(9) is None
    had, removed = client.delete_vertex_both(1)
    assert sorted(had) == [2, 3] and removed == 2
    assert client.neighbors(2) == [3] and client.neighbors(3) == [2]
    with pytest.raises(LocusError, match="UNKNOWN_VERTEX"):
        client.neighbors(1)
    assert client.delete_vertex(2) == [3]
    assert client.neighbors(3) == [2]  # one direction only: 3 -> 2 stays
    assert client.delete_vertex_both(1) == (None, 0)


def test_load_splits_to_fit_the_frame_limit():
    with FakeCluster(machines=2, frame_bytes_max=4096) as cluster, Client(cluster.addresses, SECRET) as c:
        pairs = [(0, u) for u in range(1, 3001)]  # a star: vertex 0 has 3,000 neighbours
        r = c.load_edges(pairs)
        assert r["edges"] == 6000
        assert max(s.max_frame_seen for s in cluster.servers) <= 4096
        assert cluster.store[0] == list(range(1, 3001))  # split over batches, order kept
        assert c.neighbors(0, k=1000) == list(range(1, 1001))
        with pytest.raises(LocusError, match="TOO_LARGE"):
            c.neighbors(0)  # 3,000 ids do not fit a 4 KiB reply
        with pytest.raises(ValueError, match="frame limit of 4096"):
            c.put(0, list(range(2000)))
        assert c.neighbors(0, k=2) == [1, 2]  # the connection survived the refused PUT


def test_load_respects_the_vertex_limit(cluster, client, monkeypatch):
    monkeypatch.setattr(edges_mod, "LOAD_VERTICES_MAX", 4)
    r = client.load_edges([f"{v} {v + 30}" for v in range(30)], batch_edges=1000)
    for _, f in cluster.ops("load"):
        assert len(f["vertices"]) <= 4
    assert r["vertices"] == 60


def test_directed_load_keeps_self_loops_and_creates_sinks(cluster, client):
    pairs = [(1, 2), (2, 2), (2, 3), (1, 2)]
    client.load_edges(pairs, undirected=False)
    assert client.neighbors(1) == [2]
    assert client.neighbors(2) == [2, 3]
    assert client.neighbors(3) == []


def test_batches_unit():
    adj = {1: list(range(10)), 2: [], 3: [7]}
    got = list(edges_mod.batches(adj, 4, p.FRAME_BYTES_MAX))
    assert got == [[(1, [0, 1, 2, 3])], [(1, [4, 5, 6, 7])], [(1, [8, 9]), (2, []), (3, [7])]]
    with pytest.raises(ValueError):
        list(edges_mod.batches(adj, 0, p.FRAME_BYTES_MAX))


def test_hello_that_disagrees_with_the_cluster_file(cluster):
    cluster.hello_machines = 2  # room for fewer servers than the file lists
    with Client(cluster.addresses, SECRET) as c:
        with pytest.raises(ConfigError, match=r"says the cluster has room for 2 servers, but addresses lists 3 "
                                              r"servers; the file is stale"):
            c.ping()
    cluster.hello_machines = 8
    cluster.servers[1].hello_machines = 4  # servers that disagree on the room
    with Client(cluster.addresses, SECRET) as c:
        with pytest.raises(ConfigError, match=r"server 1 \(.*\) says the cluster has room for 4 servers, but "
                                              r"another server said 8"):
            c.ping()
    cluster.servers[1].hello_machines = None
    cluster.hello_machines = None
    swapped = [cluster.addresses[1], cluster.addresses[0], cluster.addresses[2]]
    with Client(swapped, SECRET) as c:
        with pytest.raises(ConfigError, match="says it is server 1, but addresses lists it as server 0"):
            c.ping()


def test_hello_room_past_the_servers_listed_is_the_clusters_room(cluster):
    # `locus cluster up` makes room for 8 servers; the file lists 2 of them.
    cluster.hello_machines = 8
    cluster.table = SlotTable(1, 8, [s % 2 for s in range(SLOTS_DEFAULT)])
    cluster.check_homes = True
    with Client(cluster.addresses[:2], SECRET, timeout=5) as c:
        assert c.machines == 2  # the servers known, not the room
        for v in (0, 1, 4097, 8190):
            c.put(v, [v + 1])
            assert c.neighbors(v) == [v + 1]
        assert all(server == f["vertex"] % 2 for server, f in cluster.ops("put"))
        assert len(c.ping()) == 2 and [s["server"] for s in c.stats()] == [0, 1]
        with pytest.raises(ValueError, match=r"to = 2, must be a server id in 0\.\.1"):
            c.migrate(0, 2)
        assert cluster.ops("servers") == []  # no owner past the servers known: nothing to learn
        assert cluster.servers[2].connections == 0
        assert cluster.wrong_homes == 0


needs_toml = pytest.mark.skipif(config_mod.tomllib is None, reason="Python 3.10 without tomli reads no TOML")


def write_cluster(path, addresses, secret="from-file", ids=None):
    ids = list(range(len(addresses))) if ids is None else ids
    text = f'[cluster]\nsecret = "{secret}"\nname = "test"\n\n'
    for i, a in zip(ids, addresses):
        text += f'[[server]]\nid = {i}\nclient = "{a}"\nfabric = "127.0.0.1:1"\n\n'
    path.write_text(text)


@needs_toml
def test_cluster_file_and_secret_precedence(cluster, tmp_path, monkeypatch):
    f = tmp_path / "cluster.toml"
    write_cluster(f, cluster.addresses, secret=SECRET)
    monkeypatch.delenv("LOCUS_SECRET", raising=False)
    with Client.from_cluster_file(f) as c:
        assert c.addresses == cluster.addresses
        c.put(1, [2])
    monkeypatch.setenv("LOCUS_SECRET", "env-wins")
    with Client.from_cluster_file(f) as c:
        with pytest.raises(AuthError, match="refused"):
            c.ping()
    with Client.from_cluster_file(f, secret=SECRET) as c:  # explicit wins over the environment
        assert c.neighbors(1) == [2]
    monkeypatch.setenv("LOCUS_SECRET", "")  # empty: ignored
    with Client.from_cluster_file(f) as c:
        assert c.neighbors(1) == [2]


@needs_toml
@pytest.mark.parametrize("ids,why", [([0, 2, 1, 1], "appears more than once"), ([1, 2, 3], "not in 0..2"),
                                     ([0, "1"], "not in 0..1")])
def test_cluster_file_ids_must_be_0_to_n_minus_1(tmp_path, ids, why):
    f = tmp_path / "c.toml"
    write_cluster(f, ["127.0.0.1:1"] * len(ids), ids=ids)
    if ids == [0, "1"]:
        f.write_text(f.read_text().replace("id = 1", 'id = "1"'))
    with pytest.raises(ValueError, match=f"{f}.*{why}"):
        Client.from_cluster_file(f)


@needs_toml
def test_cluster_file_errors_name_the_file(tmp_path, monkeypatch):
    monkeypatch.delenv("LOCUS_SECRET", raising=False)
    f = tmp_path / "c.toml"
    for text, why in [("[cluster\n", "not valid TOML"), ('[cluster]\nsecret = "s"\n', "no \\[\\[server\\]\\]"),
                      ('[[server]]\nid = 0\nclient = "x"\n', "not host:port"),
                      ('[[server]]\nid = 0\nclient = "h:1"\n', "no cluster secret"),
                      ('[[server]]\nid = 0\n', "needs both id")]:
        f.write_text(text)
        with pytest.raises(ConfigError, match=f"{f}.*{why}"):
            Client.from_cluster_file(f)
    with pytest.raises(ConfigError, match="cannot read"):
        Client.from_cluster_file(tmp_path / "none.toml")


def test_closed_client_refuses_requests(cluster):
    c = Client(cluster.addresses, SECRET)
    c.put(1, [1])
    c.close()
    with pytest.raises(RuntimeError, match="closed"):
        c.neighbors(1)
