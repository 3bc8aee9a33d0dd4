//! `Flusher::Caller` with `SyncMode::Interval` against a process crash
//! (`kill -9`): `wait` writes the pending group in the caller and
//! acknowledges it once written, and the page cache outlives the process,
//! so the reopened log holds every record whose `wait` (or `flush`)
//! returned Ok, in order, with no hole, though most of them were never
//! synced (caller mode never syncs on a clock: only `flush_and_sync` and
//! rotations do, and the interval of 1 ms is not used). See
//! `common/actor.rs`.

#[allow(dead_code)] // the threaded rounds are other tests'
mod common;

use common::actor::{run, Plan, Weights};
use common::for_each_seed;
use locus_wal::{Crash, SyncMode};

#[test]
fn caller_interval_process_crash_keeps_every_waited_record() {
    let plan = Plan {
        sync: SyncMode::Interval { interval_ms: 1 },
        crash: |_| Crash::ProcessCrash,
        rounds: 4,
        steps: 120,
        weights: Weights {
            append: 40,
            wait: 30,
            flush: 6,
            flush_and_sync: 1,
            checkpoint: 1,
            read_back: 2,
        },
        segment_bytes_max: 4096,
        ops_max: 80,
    };
    let (c, seeds) = for_each_seed(256, |seed| run(&plan, seed).map(|o| o.coverage));
    if seeds >= 256 {
        assert!(c.crashed_mid_round > 0, "{c:?}");
        // Acknowledged records that only the page cache kept.
        assert!(c.acked_unsynced > 100, "{c:?}");
    }
}
