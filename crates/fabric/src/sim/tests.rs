//! Unit tests of `sim.rs`.

use super::*;
use crate::MACHINES_MAX;

#[test]
fn rng_matches_the_reference_implementations() {
    // SplitMix64 of 0, from the reference C implementation.
    let mut x = 0;
    assert_eq!(splitmix64(&mut x), 0xE220_A839_7B1D_CDAF);
    // xoshiro256** from state [1, 2, 3, 4] (reference values, as in rand_xoshiro).
    let mut r = SimRng { s: [1, 2, 3, 4] };
    let expected = [11520, 0, 1509978240, 1215971899390074240];
    for e in expected {
        assert_eq!(r.next_u64(), e);
    }
    let mut r = SimRng::new(7);
    assert!((0..1000).all(|_| r.below(3) < 3));
    assert_ne!(SimRng::stream(7, 0), SimRng::stream(7, 1));
}

#[test]
fn config_limits() {
    assert!(SimConfig::default().validate().is_ok());
    let bad = [
        SimConfig {
            machines: 0,
            ..SimConfig::default()
        },
        SimConfig {
            machines: MACHINES_MAX + 1,
            ..SimConfig::default()
        },
        SimConfig {
            steps_max: 0,
            ..SimConfig::default()
        },
        SimConfig {
            clock_step_ns: 0,
            ..SimConfig::default()
        },
        SimConfig {
            inflight_ops_max: 0,
            ..SimConfig::default()
        },
    ];
    for c in bad {
        assert!(Sim::new(c).is_err());
    }
    assert!(Sim::new(SimConfig {
        machines: MACHINES_MAX,
        ..SimConfig::default()
    })
    .is_ok());
}

#[test]
fn failure_display_starts_with_the_seed() {
    let f = SimFailure {
        seed: 42,
        steps: 7,
        actor_steps: vec![3, 4],
        kind: SimFailureKind::Panicked {
            actor: 1,
            message: "boom".into(),
        },
    };
    assert!(f
        .to_string()
        .starts_with("seed 42: actor 1 panicked at step 7: boom"));
    assert_eq!(format!("{f:?}"), f.to_string());
}
