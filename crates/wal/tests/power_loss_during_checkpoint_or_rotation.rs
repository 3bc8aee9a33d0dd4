//! W3 and W4 against a power loss: with `SyncMode::Always`, writers append
//! while a checkpointer rotates the log, writes a checkpoint of every record
//! appended so far (after the rotation, as `durable.rs` does, D3), commits
//! it and removes the segments before it; small segments also rotate by
//! themselves. The disk stops at a seeded operation, often inside a
//! checkpoint or a rotation, the power goes (sometimes tearing), and
//! recovery still finds every acknowledged record, in the checkpoint or in
//! the segments after it, with no hole. See `common/mod.rs` for the round.

mod common;

use common::{for_each_seed, run, MustSurvive, Plan};
use locus_wal::{Crash, SyncMode};
use rand::Rng;

#[test]
fn power_loss_during_checkpoint_or_rotation() {
    let plan = Plan {
        sync: SyncMode::Always,
        crash: |rng| {
            if rng.gen_bool(0.5) {
                Crash::PowerLoss
            } else {
                Crash::PowerLossTorn { seed: rng.gen() }
            }
        },
        must_survive: MustSurvive::EveryAcknowledged,
        rounds: 3,
        writers: 3,
        records_per_writer: 30,
        segment_bytes_max: 1500,
        checkpoint_every: Some((4, 16)),
        ops_max: 150,
    };
    let (c, seeds) = for_each_seed(32, |seed| run(&plan, seed));
    if seeds >= 32 {
        assert!(
            c.checkpoints > 0 && c.recovered_from_checkpoint > 0,
            "{c:?}"
        );
        assert!(
            c.stopped_in_checkpoint > 0 && c.stopped_in_rotation > 0,
            "{c:?}"
        );
        assert_eq!(c.acked_lost, 0, "{c:?}");
    }
}
