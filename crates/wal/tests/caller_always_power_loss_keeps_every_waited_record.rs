//! `Flusher::Caller` with `SyncMode::Always` against a power loss (W1-W4):
//! one actor appends, waits, flushes, checkpoints and reads back; the disk
//! crashes before a seeded operation (often a flush's `fdatasync`, after
//! its write, or inside a rotation or a checkpoint), sometimes tearing each
//! file's unsynced tail; the reopened log holds every record whose `wait`
//! (or `flush`) returned Ok, in order, whole, with no hole. Four crashes
//! per seed, each recovery the next round's start. See `common/actor.rs`.

#[allow(dead_code)] // the threaded rounds are other tests'
mod common;

use common::actor::{run, Plan, Weights};
use common::for_each_seed;
use locus_wal::{Crash, SyncMode};
use rand::Rng;

#[test]
fn caller_always_power_loss_keeps_every_waited_record() {
    let plan = Plan {
        sync: SyncMode::Always,
        crash: |rng| {
            if rng.gen_bool(0.5) {
                Crash::PowerLoss
            } else {
                Crash::PowerLossTorn { seed: rng.gen() }
            }
        },
        rounds: 4,
        steps: 120,
        weights: Weights {
            append: 40,
            wait: 30,
            flush: 6,
            flush_and_sync: 2,
            checkpoint: 3,
            read_back: 2,
        },
        // A rotation every 15 records or so.
        segment_bytes_max: 2048,
        ops_max: 120,
    };
    let (c, seeds) = for_each_seed(256, |seed| run(&plan, seed).map(|o| o.coverage));
    if seeds >= 256 {
        // The cases this test is for were reached, and it checked something.
        assert!(
            c.crashed_at_sync > 0 && c.crashed_in_checkpoint > 0,
            "{c:?}"
        );
        assert!(c.torn_cut > 0 && c.recovered_from_checkpoint > 0, "{c:?}");
        assert!(c.acked > 1000, "{c:?}");
    }
}
