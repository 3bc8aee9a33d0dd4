//! `Flusher::Caller` is deterministic: the bytes on a `MemStorage` after a
//! sequence of appends, waits, flushes, checkpoints and a crash are a
//! function of that sequence alone (no thread decides when a group is
//! written or synced). Each seed's rounds (`common/actor.rs`) run twice and
//! must leave the same files, byte for byte, both what each crash kept and
//! what the closed disk held, and the same recoveries; different seeds
//! must not all leave the same (the comparison sees something).

#[allow(dead_code)] // the threaded rounds are other tests'
mod common;

use std::collections::BTreeSet;

use common::actor::{run, Plan, Weights};
use common::for_each_seed;
use locus_wal::{Crash, SyncMode};
use rand::Rng;

#[test]
fn caller_flush_is_deterministic() {
    for sync in [SyncMode::Always, SyncMode::Interval { interval_ms: 1 }] {
        let plan = Plan {
            sync,
            crash: |rng| match rng.gen_range(0..3) {
                0 => Crash::ProcessCrash,
                1 => Crash::PowerLoss,
                _ => Crash::PowerLossTorn { seed: rng.gen() },
            },
            rounds: 3,
            steps: 100,
            weights: Weights {
                append: 40,
                wait: 20,
                flush: 6,
                flush_and_sync: 3,
                checkpoint: 2,
                read_back: 1,
            },
            segment_bytes_max: 1500,
            ops_max: 100,
        };
        let digests = std::sync::Mutex::new(BTreeSet::new());
        let (_, seeds) = for_each_seed(64, |seed| {
            let a = run(&plan, seed)?;
            let b = run(&plan, seed)?;
            for (round, (x, y)) in a.trace.iter().zip(&b.trace).enumerate() {
                if x != y {
                    let what = if x.kept != y.kept {
                        "the files the crash kept"
                    } else if x.closed != y.closed {
                        "the files of the closed disk"
                    } else {
                        "the recovery"
                    };
                    return Err(format!(
                        "seed {seed}: round {round} ({}): two runs differ in {what}",
                        x.crash
                    ));
                }
            }
            digests
                .lock()
                .unwrap()
                .insert(format!("{:?}", a.trace.last().map(|t| &t.kept)));
            Ok(a.coverage)
        });
        let distinct = digests.lock().unwrap().len();
        if seeds >= 64 {
            assert!(
                distinct > 32,
                "{sync:?}: {distinct} distinct disks of {seeds} seeds"
            );
        }
    }
}
