//! The conformance suite on the in-process fabric, with the latency model on
//! (so pipelining and ordering are exercised with real modelled delays), and
//! through both decorators (which must not change semantics).

use locus_fabric::conformance::Cluster;
use locus_fabric::counting::Counting;
use locus_fabric::faulty::Faulty;
use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_fabric::{Fabric, MachineId};

struct One<F>(F);

impl<F: Fabric> Cluster for One<F> {
    type F = F;
    fn node(&self, _machine: MachineId) -> &F {
        &self.0
    }
}

fn modelled() -> One<LocalFabric> {
    One(LocalFabric::new(LocalConfig::with_machines(4)).unwrap())
}

mod with_model {
    use super::*;
    locus_fabric::conformance_suite!(modelled());
}

mod without_model {
    use super::*;
    locus_fabric::conformance_suite!(One(LocalFabric::new(
        LocalConfig::with_machines(3).without_model()
    )
    .unwrap()));
}

mod counting {
    use super::*;
    locus_fabric::conformance_suite!(One(Counting::new(modelled().0)));
}

mod faulty_without_faults {
    use super::*;
    locus_fabric::conformance_suite!(One(Faulty::new(modelled().0)));
}

/// A list posted through the counting decorator is counted as its requests
/// are, exactly, also when the list is refused part way.
#[test]
fn a_list_is_counted_as_the_requests_posted() {
    use locus_fabric::counting::Locality;
    use locus_fabric::{Port, WorkRequest};
    let f = Counting::new(
        LocalFabric::new(LocalConfig {
            inflight_ops_max: 8,
            ..LocalConfig::with_machines(2)
        })
        .unwrap(),
    );
    let r = f.register(1, "r", 64).unwrap().id;
    let mut p = f.port(0).unwrap();
    let mut list: Vec<_> = (0..5).map(|i| WorkRequest::read(i, 1, r, 0, 8)).collect();
    p.post_many(&mut list).unwrap();
    assert_eq!(p.totals().ops(Locality::Remote), 5);
    // Room for three more: the fourth is refused, the last two are left.
    let mut list: Vec<_> = (0..6)
        .map(|i| WorkRequest::write(10 + i, 1, r, 0, vec![0; 8]))
        .collect();
    assert!(p.post_many(&mut list).is_err());
    assert_eq!(list.len(), 2);
    assert_eq!(p.totals().ops(Locality::Remote), 8);
    assert_eq!(f.counters().total().ops_total(Locality::Remote), 8);
    assert_eq!(p.inflight(), 8);
}
