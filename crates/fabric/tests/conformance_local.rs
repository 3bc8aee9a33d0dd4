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
