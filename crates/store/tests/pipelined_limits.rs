//! A pipelined two-hop that cannot post (too many in flight) fails cleanly and
//! leaves the worker usable.

use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_fabric::FabricError;
use locus_store::{HopReads, KhopLimits, Store, StoreConfig, StoreError};

#[test]
fn an_oversized_pipelined_query_leaves_the_worker_usable() {
    let lc = LocalConfig {
        inflight_ops_max: 8,
        ..LocalConfig::with_machines(2).without_model()
    };
    let store = Store::create(LocalFabric::new(lc).unwrap(), StoreConfig::default()).unwrap();
    let hub: Vec<u32> = (100..120).collect();
    store.worker(0).unwrap().put(0, &hub).unwrap();
    store.worker(0).unwrap().put(2, &[100, 101]).unwrap();
    for &u in &hub {
        store
            .worker((u % 2) as u8)
            .unwrap()
            .put(u, &[u + 1000])
            .unwrap();
    }
    let mut w = store.worker(1).unwrap();
    let mut out = Vec::new();
    let e = w
        .k_hop(
            0,
            2,
            usize::MAX,
            HopReads::Pipelined,
            KhopLimits::default(),
            &mut out,
        )
        .unwrap_err();
    assert!(
        matches!(e, StoreError::Fabric(FabricError::TooManyInflight { .. })),
        "{e}"
    );
    out.clear();
    w.k_hop(
        2,
        2,
        usize::MAX,
        HopReads::Pipelined,
        KhopLimits::default(),
        &mut out,
    )
    .unwrap();
    assert_eq!(
        out,
        vec![1100, 1101],
        "the worker still works after the failure"
    );
    out.clear();
    w.k_hop(
        0,
        2,
        usize::MAX,
        HopReads::OneAtATime,
        KhopLimits::default(),
        &mut out,
    )
    .unwrap();
    assert_eq!(out.len(), 20);
}
