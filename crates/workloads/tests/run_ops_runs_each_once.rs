//! `run_ops` splits a run into one lane per thread by start machine and
//! lets workers help with each other's lanes: whatever the threads and the
//! machines, every operation runs exactly once and is measured once.

use locus_fabric::counting::Counting;
use locus_fabric::counting::Locality;
use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_fabric::OpKind;
use locus_store::{Store, StoreConfig};
use locus_workloads::traversal::{run_ops, Op, TwoHop};

const Q: TwoHop = TwoHop {
    k: usize::MAX,
    pipelined: false,
};

/// A ring of `n` vertices (each points at the next two) on `machines` machines.
fn ring(machines: usize, n: u32) -> (Counting<LocalFabric>, Store<Counting<LocalFabric>>) {
    ring_with(machines, n, StoreConfig::default())
}

fn ring_with(
    machines: usize,
    n: u32,
    config: StoreConfig,
) -> (Counting<LocalFabric>, Store<Counting<LocalFabric>>) {
    let fabric = Counting::new(
        LocalFabric::new(LocalConfig::with_machines(machines).without_model()).unwrap(),
    );
    let store = Store::create(fabric.clone(), config).unwrap();
    // Each value written by its home (another machine's would be forwarded
    // to a service this test does not start).
    let mut workers: Vec<_> = (0..machines as u8)
        .map(|m| store.worker(m).unwrap())
        .collect();
    for v in 0..n {
        workers[store.owner(v) as usize]
            .put(v, &[(v + 1) % n, (v + 2) % n])
            .unwrap();
    }
    drop(workers);
    (fabric, store)
}

/// Checks every vertex of a ring of `n` against its ring edges plus the
/// edges `extra(v)` gives (repeats and edges already there count once).
fn assert_lists(
    store: &Store<Counting<LocalFabric>>,
    n: u32,
    at: &str,
    extra: impl Fn(u32) -> Vec<u32>,
) {
    let mut w = store.worker(0).unwrap();
    for v in 0..n {
        let mut got = Vec::new();
        w.neighbors(v, usize::MAX, &mut got).unwrap();
        got.sort_unstable();
        let mut want = vec![(v + 1) % n, (v + 2) % n];
        want.extend(extra(v));
        want.sort_unstable();
        want.dedup();
        assert_eq!(got, want, "{at}: vertex {v}");
    }
}

#[test]
fn every_operation_runs_once_whatever_the_threads_and_machines() {
    const N: u32 = 500;
    for (machines, threads) in [(1, 2), (3, 2), (4, 3), (5, 1)] {
        let (fabric, store) = ring(machines, N);
        // Each vertex's two-hop neighbourhood has four entries (with
        // repeats); every tenth operation adds an edge to a vertex.
        let ops: Vec<Op> = (0..2_000u32)
            .map(|i| {
                if i % 10 == 9 {
                    Op::InsertEdge(i % N, (i * 7) % N)
                } else {
                    Op::TwoHop(i % N)
                }
            })
            .collect();
        let queries = ops.iter().filter(|o| matches!(o, Op::TwoHop(_))).count();
        let r = run_ops(
            &store.clone().into(),
            fabric.counters(),
            threads,
            &ops,
            Q,
            &|_| {},
        )
        .unwrap();
        let at = format!("{machines} machines, {threads} threads");
        assert_eq!(r.queries.queries as usize, queries, "{at}");
        assert_eq!(r.update_latencies_us.len(), ops.len() - queries, "{at}");
        assert_eq!(r.done_at_s.len(), ops.len(), "{at}");
        assert!(r.done_at_s.windows(2).all(|w| w[0] <= w[1]), "{at}");
        // Every insert ran: each vertex has its ring edges and the
        // distinct edges sent to it (an edge present already is not added).
        assert_lists(&store, N, &at, |v| {
            ops.iter()
                .filter_map(|o| match o {
                    Op::InsertEdge(x, u) if *x == v => Some(*u),
                    _ => None,
                })
                .collect()
        });
    }
}

/// A run made in parts and merged reports what the same operations report
/// in one run: the same counts (queries, GETs, one-sided operations and
/// their remote shares), the latencies of every part, and completion times
/// that follow one another.
#[test]
fn a_run_in_parts_merges_into_the_run_of_all_its_operations() {
    use locus_workloads::traversal::MixReport;
    const N: u32 = 300;
    let ops: Vec<Op> = (0..900u32).map(|i| Op::TwoHop((i * 13) % N)).collect();
    // No location cache: what a run reads does not depend on the runs before.
    let (fabric, store) = ring_with(
        3,
        N,
        StoreConfig {
            cache_bytes_max: 0,
            ..StoreConfig::default()
        },
    );
    let whole = run_ops(
        &store.clone().into(),
        fabric.counters(),
        2,
        &ops,
        Q,
        &|_| {},
    )
    .unwrap();
    let parts: Vec<_> = ops
        .chunks(250)
        .map(|c| run_ops(&store.clone().into(), fabric.counters(), 2, c, Q, &|_| {}).unwrap())
        .collect();
    assert!(MixReport::merge(&[]).is_none());
    let m = MixReport::merge(&parts).unwrap();
    let (a, b) = (&whole.queries, &m.queries);
    assert_eq!(
        (b.queries, b.gets, b.reads, b.results),
        (a.queries, a.gets, a.reads, a.results)
    );
    assert_eq!(
        (b.ops, b.remote_ops, b.remote_gets),
        (a.ops, a.remote_ops, a.remote_gets)
    );
    assert!(a.remote_ops > 0 && a.remote_ops < a.ops, "{a:?}");
    assert!((b.remote_rate - a.remote_rate).abs() < 1e-12);
    assert!((b.remote_get_rate - a.remote_get_rate).abs() < 1e-12);
    let elapsed: f64 = parts.iter().map(|p| p.queries.elapsed_s).sum();
    assert!((b.elapsed_s - elapsed).abs() < 1e-12);
    assert_eq!(m.query_latencies_ns.len(), ops.len());
    assert!(m.query_latencies_ns.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(m.done_at_s.len(), ops.len());
    // Each part's completions come after the part before it ended.
    let first_end = parts[0].queries.elapsed_s;
    assert!(m.done_at_s[250..].iter().all(|&t| t >= first_end));
    assert!(m.done_at_s.windows(2).all(|w| w[0] <= w[1]));
}

/// An undone insert is measured as an update, rewrites its vertex's value
/// (the one-sided writes show it) and leaves every list as it was: an edge
/// it added is gone, an edge that was there already stays.
#[test]
fn an_undone_insert_is_an_update_that_leaves_the_graph_as_it_was() {
    const N: u32 = 200;
    for (machines, threads) in [(1, 1), (3, 2)] {
        let (fabric, store) = ring(machines, N);
        // New edges (v -> v + 5), and edges every vertex has (v -> v + 1).
        let ops: Vec<Op> = (0..400u32)
            .map(|i| match i % 4 {
                0 => Op::InsertUndone(i % N, (i + 5) % N),
                1 => Op::InsertUndone(i % N, (i + 1) % N),
                _ => Op::TwoHop(i % N),
            })
            .collect();
        let writes = || {
            let t = fabric.counters().total();
            t.ops_of(Locality::Local, OpKind::Write) + t.ops_of(Locality::Remote, OpKind::Write)
        };
        let before = writes();
        let r = run_ops(
            &store.clone().into(),
            fabric.counters(),
            threads,
            &ops,
            Q,
            &|_| {},
        )
        .unwrap();
        let at = format!("{machines} machines, {threads} threads");
        assert_eq!(r.queries.queries, 200, "{at}");
        assert_eq!(r.update_latencies_us.len(), 200, "{at}");
        let writes = writes() - before;
        assert!(
            writes >= 100,
            "{at}: {writes} one-sided writes for 100 undone new edges"
        );
        assert_lists(&store, N, &at, |_| Vec::new());
    }
}
