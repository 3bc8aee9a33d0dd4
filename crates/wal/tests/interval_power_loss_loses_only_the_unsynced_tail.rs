//! `SyncMode::Interval` against a power loss: acknowledged records may be
//! lost, but only those acknowledged after the last sync of a segment
//! began (D1: "at most `interval_ms` of it"), and what survives is a prefix
//! of what was appended, never a hole and never a corrupt log, torn or not.
//! The interval is long, so syncs come from rotations (small segments) and
//! losses are common. See `common/mod.rs` for the round.

mod common;

use common::{for_each_seed, run, MustSurvive, Plan};
use locus_wal::{Crash, SyncMode};
use rand::Rng;

#[test]
fn interval_power_loss_loses_only_the_unsynced_tail() {
    let plan = Plan {
        sync: SyncMode::Interval {
            interval_ms: 60_000,
        },
        crash: |rng| {
            if rng.gen_bool(0.5) {
                Crash::PowerLoss
            } else {
                Crash::PowerLossTorn { seed: rng.gen() }
            }
        },
        must_survive: MustSurvive::AcknowledgedBeforeTheLastSync,
        rounds: 3,
        writers: 3,
        records_per_writer: 30,
        segment_bytes_max: 2048,
        checkpoint_every: None,
        ops_max: 70,
    };
    let (c, seeds) = for_each_seed(32, |seed| run(&plan, seed));
    if seeds >= 32 {
        // A power loss did take acknowledged records (so the check above
        // was not vacuous), and some torn tails were cut.
        assert!(c.acked_lost > 0, "{c:?}");
        assert!(c.torn_cut > 0, "{c:?}");
    }
}
