//! `SyncMode::Interval` against a process crash (`kill -9`): a record is
//! acknowledged once written, and the page cache outlives the process, so
//! the reopened log holds every acknowledged record, in order, with no
//! hole. The interval is long, so almost nothing is synced: only the page
//! cache keeps them. See `common/mod.rs` for the round.

mod common;

use common::{for_each_seed, run, MustSurvive, Plan};
use locus_wal::{Crash, SyncMode};

#[test]
fn interval_process_crash_keeps_acknowledged() {
    let plan = Plan {
        sync: SyncMode::Interval {
            interval_ms: 60_000,
        },
        crash: |_| Crash::ProcessCrash,
        must_survive: MustSurvive::EveryAcknowledged,
        rounds: 3,
        writers: 3,
        records_per_writer: 30,
        segment_bytes_max: 2048,
        checkpoint_every: None,
        ops_max: 70,
    };
    let (c, seeds) = for_each_seed(32, |seed| run(&plan, seed));
    if seeds >= 32 {
        assert!(c.stopped > 0, "{c:?}");
        assert_eq!(c.acked_lost, 0, "{c:?}");
    }
}
