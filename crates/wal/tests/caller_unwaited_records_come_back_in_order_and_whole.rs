//! `Flusher::Caller`, records appended but never waited for: they may
//! survive a crash or not (a later `wait`, `flush` or rotation may have
//! carried them to the disk, a power loss may tear them), but recovery
//! never returns one out of order, torn, or after a hole, and never loses
//! one it must keep. Both sync modes, every kind of crash, few waits. See
//! `common/actor.rs`.

#[allow(dead_code)] // the threaded rounds are other tests'
mod common;

use common::actor::{run, Plan, Weights};
use common::for_each_seed;
use locus_wal::{Crash, SyncMode};
use rand::Rng;

#[test]
fn caller_unwaited_records_come_back_in_order_and_whole() {
    for sync in [SyncMode::Always, SyncMode::Interval { interval_ms: 1 }] {
        let plan = Plan {
            sync,
            crash: |rng| match rng.gen_range(0..3) {
                0 => Crash::ProcessCrash,
                1 => Crash::PowerLoss,
                _ => Crash::PowerLossTorn { seed: rng.gen() },
            },
            rounds: 4,
            steps: 150,
            weights: Weights {
                append: 60,
                wait: 4,
                flush: 4,
                flush_and_sync: 2,
                checkpoint: 1,
                read_back: 1,
            },
            segment_bytes_max: 1024,
            ops_max: 50,
        };
        let (c, seeds) = for_each_seed(256, |seed| run(&plan, seed).map(|o| o.coverage));
        if seeds >= 256 {
            // Unacknowledged records went both ways, and torn tails were cut.
            assert!(
                c.unacked_survived > 0 && c.unacked_lost > 0,
                "{sync:?}: {c:?}"
            );
            assert!(c.torn_cut > 0, "{sync:?}: {c:?}");
        }
    }
}
