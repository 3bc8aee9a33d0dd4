//! `run_ops` splits a run into one lane per thread by start machine and
//! lets workers help with each other's lanes: whatever the threads and the
//! machines, every operation runs exactly once and is measured once.

use locus_fabric::counting::Counting;
use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_store::{Store, StoreConfig};
use locus_workloads::traversal::{run_ops, Op, TwoHop};

const Q: TwoHop = TwoHop {
    k: usize::MAX,
    pipelined: false,
};

/// A ring of `n` vertices (each points at the next two) on `machines` machines.
fn ring(machines: usize, n: u32) -> (Counting<LocalFabric>, Store<Counting<LocalFabric>>) {
    let fabric = Counting::new(
        LocalFabric::new(LocalConfig::with_machines(machines).without_model()).unwrap(),
    );
    let store = Store::create(fabric.clone(), StoreConfig::default()).unwrap();
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
        let r = run_ops(&store, fabric.counters(), threads, &ops, Q, &|_| {}).unwrap();
        let at = format!("{machines} machines, {threads} threads");
        assert_eq!(r.queries.queries as usize, queries, "{at}");
        assert_eq!(r.update_latencies_us.len(), ops.len() - queries, "{at}");
        assert_eq!(r.done_at_s.len(), ops.len(), "{at}");
        assert!(r.done_at_s.windows(2).all(|w| w[0] <= w[1]), "{at}");
        // Every insert ran: each vertex has its ring edges and the
        // distinct edges sent to it (an edge present already is not added).
        let mut w = store.worker(0).unwrap();
        for v in 0..N {
            let mut got = Vec::new();
            w.neighbors(v, usize::MAX, &mut got).unwrap();
            got.sort_unstable();
            let mut want = vec![(v + 1) % N, (v + 2) % N];
            want.extend(ops.iter().filter_map(|o| match o {
                Op::InsertEdge(x, u) if *x == v => Some(*u),
                _ => None,
            }));
            want.sort_unstable();
            want.dedup();
            assert_eq!(got, want, "{at}: vertex {v}");
        }
    }
}
