//! `SyncMode::Always` against a power loss (W1, W2, W3): writer threads
//! append and wait, the disk stops at a seeded operation (a write, an
//! `fdatasync`, a rotation's segment creation or directory sync), the power
//! goes (sometimes tearing each file's unsynced tail at a seeded byte), and
//! the reopened log holds every acknowledged record, in order, with no hole,
//! nothing corrupt and nothing never appended. Three crashes per seed, each
//! recovery the next round's start. See `common/mod.rs` for the round.

mod common;

use common::{for_each_seed, run, MustSurvive, Plan};
use locus_wal::{Crash, SyncMode};
use rand::Rng;

#[test]
fn power_loss_keeps_every_acknowledged_record() {
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
        // A rotation every 15 records or so.
        segment_bytes_max: 2048,
        checkpoint_every: None,
        ops_max: 110,
    };
    let (c, seeds) = for_each_seed(32, |seed| run(&plan, seed));
    if seeds >= 32 {
        // The cases this test is for were reached.
        assert!(c.stopped_at_sync > 0 && c.stopped_in_rotation > 0, "{c:?}");
        assert!(c.torn_cut > 0, "{c:?}");
        assert_eq!(c.acked_lost, 0, "{c:?}");
    }
}
