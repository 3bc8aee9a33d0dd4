//! A traversal run that cannot complete says what failed where: the first
//! failed operation with its machine and worker thread and the store's
//! error, or the pool that could not start.

use locus_fabric::counting::Counting;
use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_fabric::FabricError;
use locus_store::{Store, StoreConfig, StoreError};
use locus_workloads::traversal::{run_ops, run_two_hop, Op, TwoHop};
use locus_workloads::WorkloadError;

const MACHINES: usize = 2;
const Q: TwoHop = TwoHop {
    k: 4,
    pipelined: false,
};

/// A cluster whose value regions hold only a few values.
fn tiny_cluster() -> (Counting<LocalFabric>, Store<Counting<LocalFabric>>) {
    let fabric = Counting::new(
        LocalFabric::new(LocalConfig::with_machines(MACHINES).without_model()).unwrap(),
    );
    let store = Store::create(
        fabric.clone(),
        StoreConfig {
            buckets_per_machine: 16,
            value_region_bytes: 4096,
            ..StoreConfig::default()
        },
    )
    .unwrap();
    (fabric, store)
}

#[test]
fn a_full_value_region_fails_the_run_naming_the_operation_machine_and_thread() {
    let (fabric, store) = tiny_cluster();
    store.worker(0).unwrap().put(0, &[1, 2, 3]).unwrap();
    // Each insert rewrites vertex 0's value out of place; retired blocks wait
    // out the reclaim lease, so the region fills up.
    let ops: Vec<Op> = (1..2_000).map(|u| Op::InsertEdge(0, u)).collect();
    let e = run_ops(
        &store.clone().into(),
        fabric.counters(),
        1,
        &ops,
        Q,
        &|_| {},
    )
    .unwrap_err();
    match &e {
        WorkloadError::Op {
            op: Op::InsertEdge(0, _),
            machine: 0,
            thread,
            source: StoreError::RegionFull { machine: 0, .. },
        } => assert!(thread.starts_with("locus-worker-"), "{thread}"),
        other => panic!("expected a failed insert on machine 0, got {other:?}"),
    }
    let msg = e.to_string();
    assert!(
        msg.contains("InsertEdge(0,")
            && msg.contains("machine 0")
            && msg.contains("value_region_bytes"),
        "{msg}"
    );
}

#[test]
fn a_pool_without_threads_is_refused() {
    let (fabric, store) = tiny_cluster();
    let e = run_two_hop(
        &store.clone().into(),
        fabric.counters(),
        0,
        &[0],
        Q,
        &|_| {},
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            WorkloadError::Pool {
                threads: 0,
                source: FabricError::Config(_)
            }
        ),
        "{e:?}"
    );
}
