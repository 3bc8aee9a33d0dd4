//! Plain in-memory versions of the four algorithms, written for obviousness
//! rather than speed: the tests' yardstick for the engine on every backend.

use std::collections::VecDeque;

use locus_graph::Edge;

use crate::algo::{radii_samples, PAGERANK_DAMPING, UNREACHED};

fn adjacency(vertices: usize, edges: &[Edge]) -> Vec<Vec<u32>> {
    let mut out = vec![Vec::new(); vertices];
    for &(s, d) in edges {
        out[s as usize].push(d);
    }
    out
}

/// Depth of every vertex from `root` along edge directions, by a FIFO queue.
pub fn bfs_depth(vertices: usize, edges: &[Edge], root: u32) -> Vec<u32> {
    let adj = adjacency(vertices, edges);
    let mut depth = vec![UNREACHED; vertices];
    depth[root as usize] = 0;
    let mut queue = VecDeque::from([root]);
    while let Some(u) = queue.pop_front() {
        for &w in &adj[u as usize] {
            if depth[w as usize] == UNREACHED {
                depth[w as usize] = depth[u as usize] + 1;
                queue.push_back(w);
            }
        }
    }
    depth
}

/// The smallest vertex id of each vertex's weakly connected component, by union-find.
pub fn wcc(vertices: usize, edges: &[Edge]) -> Vec<u32> {
    let mut parent: Vec<u32> = (0..vertices as u32).collect();
    fn find(p: &mut [u32], mut x: u32) -> u32 {
        while p[x as usize] != x {
            p[x as usize] = p[p[x as usize] as usize];
            x = p[x as usize];
        }
        x
    }
    for &(s, d) in edges {
        let (a, b) = (find(&mut parent, s), find(&mut parent, d));
        // The smaller root wins, so every root is its component's smallest id.
        if a < b {
            parent[b as usize] = a;
        } else if b < a {
            parent[a as usize] = b;
        }
    }
    (0..vertices as u32).map(|v| find(&mut parent, v)).collect()
}

/// PageRank: `iterations` rounds of rank = (1-d)/V + d * (incoming shares +
/// dangling mass / V), starting from 1/V; scores normalised to sum to 1.
pub fn pagerank(vertices: usize, edges: &[Edge], iterations: u32) -> Vec<f64> {
    let n = vertices as f64;
    let mut deg = vec![0u64; vertices];
    for &(s, _) in edges {
        deg[s as usize] += 1;
    }
    let mut rank = vec![1.0 / n; vertices];
    for _ in 0..iterations {
        let dangling: f64 = (0..vertices)
            .filter(|&v| deg[v] == 0)
            .map(|v| rank[v])
            .sum();
        let mut incoming = vec![0.0f64; vertices];
        for &(s, d) in edges {
            incoming[d as usize] += rank[s as usize] / deg[s as usize] as f64;
        }
        for v in 0..vertices {
            rank[v] =
                (1.0 - PAGERANK_DAMPING) / n + PAGERANK_DAMPING * (incoming[v] + dangling / n);
        }
    }
    let total: f64 = rank.iter().sum();
    rank.iter().map(|r| r / total).collect()
}

/// Radii: for each vertex, the largest BFS distance to it from any of the
/// samples [`radii_samples`] picks ([`UNREACHED`] if no sample reaches it),
/// by one separate BFS per sample.
pub fn radii(vertices: usize, edges: &[Edge], seed: u64) -> Vec<u32> {
    let mut radius = vec![UNREACHED; vertices];
    for s in radii_samples(vertices as u64, seed) {
        for (v, d) in bfs_depth(vertices, edges, s).into_iter().enumerate() {
            if d != UNREACHED {
                radius[v] = if radius[v] == UNREACHED {
                    d
                } else {
                    radius[v].max(d)
                };
            }
        }
    }
    radius
}

/// Weight of a lightest path from `root` to every vertex (`weights[k]` is
/// `edges[k]`'s), by Dijkstra with a binary heap.
pub fn sssp(vertices: usize, edges: &[Edge], weights: &[u32], root: u32) -> Vec<u32> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut adj: Vec<Vec<(u32, u32)>> = vec![Vec::new(); vertices];
    for (&(s, d), &w) in edges.iter().zip(weights) {
        adj[s as usize].push((d, w));
    }
    let mut dist = vec![u64::MAX; vertices];
    dist[root as usize] = 0;
    let mut heap = BinaryHeap::from([Reverse((0u64, root))]);
    while let Some(Reverse((d, u))) = heap.pop() {
        if d > dist[u as usize] {
            continue;
        }
        for &(x, w) in &adj[u as usize] {
            let nd = d + u64::from(w);
            if nd < dist[x as usize] {
                dist[x as usize] = nd;
                heap.push(Reverse((nd, x)));
            }
        }
    }
    dist.into_iter()
        .map(|d| if d == u64::MAX { UNREACHED } else { d as u32 })
        .collect()
}

/// Triangles through each vertex of the undirected simple graph of `edges`
/// (both directions, no self loops, no duplicates): for every vertex, the
/// pairs of its neighbours that are adjacent.
pub fn triangles(vertices: usize, edges: &[Edge]) -> Vec<u64> {
    use std::collections::BTreeSet;
    let mut adj: Vec<BTreeSet<u32>> = vec![BTreeSet::new(); vertices];
    for &(s, d) in edges {
        if s != d {
            adj[s as usize].insert(d);
            adj[d as usize].insert(s);
        }
    }
    (0..vertices)
        .map(|v| {
            let n: Vec<u32> = adj[v].iter().copied().collect();
            let mut c = 0u64;
            for (i, &a) in n.iter().enumerate() {
                for &b in &n[i + 1..] {
                    c += u64::from(adj[a as usize].contains(&b));
                }
            }
            c
        })
        .collect()
}

/// Brandes's betweenness from each of `sources` on the directed edges (a
/// duplicate edge is another path), summed, the source's own dependency
/// left out: a FIFO BFS counting paths, then dependencies in reverse BFS
/// order, `sigma(u) / sigma(v) * (1 + delta(v))` per edge to a successor.
pub fn bc(vertices: usize, edges: &[Edge], sources: &[u32]) -> Vec<f64> {
    let adj = adjacency(vertices, edges);
    let mut score = vec![0.0f64; vertices];
    for &s in sources {
        let mut depth = vec![UNREACHED; vertices];
        let mut sigma = vec![0.0f64; vertices];
        let mut order = Vec::with_capacity(vertices);
        depth[s as usize] = 0;
        sigma[s as usize] = 1.0;
        let mut queue = VecDeque::from([s]);
        while let Some(u) = queue.pop_front() {
            order.push(u);
            for &v in &adj[u as usize] {
                if depth[v as usize] == UNREACHED {
                    depth[v as usize] = depth[u as usize] + 1;
                    queue.push_back(v);
                }
                if depth[v as usize] == depth[u as usize] + 1 {
                    sigma[v as usize] += sigma[u as usize];
                }
            }
        }
        let mut delta = vec![0.0f64; vertices];
        for &u in order.iter().rev() {
            for &v in &adj[u as usize] {
                if depth[v as usize] == depth[u as usize] + 1 {
                    delta[u as usize] +=
                        sigma[u as usize] / sigma[v as usize] * (1.0 + delta[v as usize]);
                }
            }
            if u != s {
                score[u as usize] += delta[u as usize];
            }
        }
    }
    score
}
