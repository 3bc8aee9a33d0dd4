"""`locus analytics run --output` against networkx (issue 12, requirement 5;
issue 63 for SSSP).

For each graph, runs Locus's BFS (from vertex 0 and from the hub), WCC and
PageRank on the far backend with two threads, reads the per-vertex results
it writes, and compares them with networkx on the same directed edges:
BFS depths with `single_source_shortest_path_length` (exact; each parent,
the third column, one level up along an edge), WCC labels
with the smallest id of `weakly_connected_components` (exact), PageRank
with `pagerank` (damping 0.85, uniform dangling mass; Locus runs 100
iterations, networkx converges to tol 1e-13; relative difference at most
1e-6). Graphs are MultiDiGraphs, so duplicate edges count twice in
PageRank as they do in Locus. SSSP (from 0 and the hub, delta 1 and 16)
is compared exactly with `single_source_dijkstra_path_length` on the
edges' integer weights (a third column; 1 where the file has none, as
Locus gives), on a DiGraph keeping the lightest of parallel edges, both
as given and with `--symmetrize` (an undirected Graph, lightest weight
per pair). A weighted file runs the other algorithms with
`--ignore-weights`. TC's per-vertex counts and total equal
`triangles` on the undirected simple graph (exact). BC from all sources
and from the list [0, hub] is compared with `betweenness_centrality` and
`betweenness_centrality_subset` (normalized=False, on a DiGraph) within
1e-9 relative (1e-9 absolute below 1): Locus sums the same quotients in
another order. networkx's DiGraph drops duplicate edges, which Locus
counts as more paths, so BC runs as given only on files without
duplicates, and always with --symmetrize (duplicates removed). Exits
non-zero on the first difference.

Usage: check_fargraph_networkx.py LOCUS_BINARY GRAPH[:VERTEX_COUNT] ...
"""

import subprocess
import sys
import tempfile
from pathlib import Path

import networkx as nx


def load(path, vertex_count):
    g = nx.MultiDiGraph()
    edges = []
    weights = []
    for line in Path(path).read_text().splitlines():
        t = line.strip()
        if not t or t[0] in "#%":
            continue
        f = list(map(int, t.split()))
        edges.append((f[0], f[1]))
        weights.append(f[2] if len(f) > 2 else None)
    n = vertex_count or (max(max(e) for e in edges) + 1)
    g.add_nodes_from(range(n))
    g.add_edges_from(edges)
    weighted = any(w is not None for w in weights)
    wedges = [(s, d, 1 if w is None else w) for (s, d), w in zip(edges, weights)]
    return g, n, wedges, weighted


def lightest(n, wedges, undirected):
    """A (Di)Graph on 0..n keeping the lightest weight of parallel edges."""
    g = nx.Graph() if undirected else nx.DiGraph()
    g.add_nodes_from(range(n))
    for s, d, w in wedges:
        if undirected and s == d:
            continue
        if not g.has_edge(s, d) or g[s][d]["weight"] > w:
            g.add_edge(s, d, weight=w)
    return g


def check_bc(binary, path, vc, name, n, wedges, hub, out):
    """BC scores equal networkx's to 1e-9 relative; returns the worst."""
    pairs = [(s, d) for s, d, _ in wedges]
    modes = [True] if len(set(pairs)) != len(pairs) else [False, True]
    worst = 0.0
    for undirected in modes:
        g = nx.DiGraph()
        g.add_nodes_from(range(n))
        for s, d in pairs:
            if not (undirected and s == d):
                g.add_edge(s, d)
                if undirected:
                    g.add_edge(d, s)
        how = "symmetrized" if undirected else "directed"
        sym = ["--symmetrize"] if undirected else []
        for sources in ("all", f"0,{hub}" if hub != 0 else "0"):
            if sources == "all":
                want = nx.betweenness_centrality(g, normalized=False)
            else:
                srcs = [int(x) for x in sources.split(",")]
                want = nx.betweenness_centrality_subset(g, srcs, list(g.nodes), normalized=False)
            # A bare number is a count to sample; one vertex is --root V.
            pick = ["--sources", sources] if "," in sources or sources == "all" \
                else ["--root", sources]
            got, _ = locus(binary, path, vc, "bc", out, [*pick, *sym, "--ignore-weights"])
            for v in range(n):
                err = abs(got[v] - want[v])
                worst = max(worst, err / max(1.0, abs(want[v])))
                if err > 1e-9 * max(1.0, abs(want[v])):
                    fail(name, f"BC score from {sources} ({how})", v, got[v], want[v])
    return worst


def check_sssp(binary, path, vc, name, n, wedges, roots, out):
    """SSSP distances equal networkx's Dijkstra, directed and symmetrized."""
    for undirected in (False, True):
        g = lightest(n, wedges, undirected)
        how = "symmetrized" if undirected else "directed"
        for root in roots:
            want = nx.single_source_dijkstra_path_length(g, root, weight="weight")
            for delta in ("1", "16"):
                extra = ["--root", str(root), "--delta", delta]
                if undirected:
                    extra.append("--symmetrize")
                got, _ = locus(binary, path, vc, "sssp", out, extra)
                for v in range(n):
                    if got[v] != want.get(v, -1):
                        fail(name, f"SSSP distance from {root} (delta {delta}, {how})", v,
                             got[v], want.get(v, -1))


def locus(binary, graph, vertex_count, algo, out, extra=()):
    cmd = [binary, "analytics", "run", "--algo", algo, "--graph", graph, "--backend", "far",
           "--threads", "2", "--output", out, *extra]
    if vertex_count:
        cmd += ["--vertex-count", str(vertex_count)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed:\n{p.stderr}")
    rows = {}
    parents.clear()
    for line in Path(out).read_text().splitlines():
        if line.startswith("#"):
            continue
        t = line.split()
        v, x = int(t[0]), t[1]
        rows[v] = float(x) if algo in ("pagerank", "bc") else int(x)
        if algo == "bfs":
            parents[v] = int(t[2])
    return rows, p.stdout


# BFS's third column of the last bfs run: the parent (-1: not reached).
parents = {}


def fail(name, what, v, got, want):
    sys.exit(f"{name}: {what} of vertex {v}: locus {got}, networkx {want}")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "out.txt")
        for arg in sys.argv[2:]:
            path, _, vc = arg.partition(":")
            vc = int(vc) if vc else None
            name = Path(path).name
            g, n, wedges, weighted = load(path, vc)
            drop = ["--ignore-weights"] if weighted else []
            hub = max(range(n), key=lambda v: (g.out_degree(v), -v))
            for root in sorted({0, hub}):
                got, _ = locus(binary, path, vc, "bfs", out, ["--root", str(root), *drop])
                want = nx.single_source_shortest_path_length(g, root)
                for v in range(n):
                    if got[v] != want.get(v, -1):
                        fail(name, f"BFS depth from {root}", v, got[v], want.get(v, -1))
                    p = parents[v]
                    ok = (p == -1) if got[v] == -1 else (p == root) if v == root else (
                        g.has_edge(p, v) and got[p] == got[v] - 1)
                    if not ok:
                        fail(name, f"BFS parent from {root} (one level up, along an edge)", v,
                             p, "a valid parent")
            got, _ = locus(binary, path, vc, "wcc", out, drop)
            for comp in nx.weakly_connected_components(g):
                label = min(comp)
                for v in comp:
                    if got[v] != label:
                        fail(name, "WCC label", v, got[v], label)
            got, _ = locus(binary, path, vc, "pagerank", out, ["--iterations", "100", "--precision", "f64", *drop])
            want = nx.pagerank(g, alpha=0.85, max_iter=1000, tol=1e-13)
            worst = 0.0
            for v in range(n):
                rel = abs(got[v] - want[v]) / want[v]
                worst = max(worst, rel)
                if rel > 1e-6:
                    fail(name, "PageRank", v, got[v], want[v])
            check_sssp(binary, path, vc, name, n, wedges, sorted({0, hub}), out)
            simple = nx.Graph(g)
            simple.remove_edges_from(nx.selfloop_edges(simple))
            want = nx.triangles(simple)
            got, stdout = locus(binary, path, vc, "tc", out, drop)
            for v in range(n):
                if got[v] != want[v]:
                    fail(name, "triangles", v, got[v], want[v])
            total = sum(want.values()) // 3
            bc_worst = check_bc(binary, path, vc, name, n, wedges, hub, out)
            if f"result          {total} triangles" not in stdout:
                sys.exit(f"{name}: the summary does not say {total} triangles:\n{stdout}")
            print(f"{name}: {n} vertices, {g.number_of_edges()} edges"
                  f"{' (weighted)' if weighted else ''}: BFS depths and parents from "
                  f"{sorted({0, hub})}, WCC ({nx.number_weakly_connected_components(g)} "
                  f"components), SSSP from {sorted({0, hub})} directed and symmetrized, "
                  f"TC ({total} triangles) equal; PageRank within {worst:.1e}, "
                  f"BC within {bc_worst:.1e} relative")


if __name__ == "__main__":
    main()
