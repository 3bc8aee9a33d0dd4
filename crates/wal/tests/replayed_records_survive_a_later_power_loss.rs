//! A process crash keeps written, unsynced records in the page cache; the
//! next start replays them (the server serves them again) and begins a new
//! segment. Those records must then survive a later power loss, and the
//! segment they are in, no longer the newest, must not end torn (W3 across
//! restarts): recovery makes the newest segment it read durable before it
//! starts the next. Found by `caller_flush_is_deterministic` (seed 25).

use std::path::PathBuf;
use std::sync::Arc;

use locus_wal::{Crash, Entry, Flusher, MemStorage, SyncMode, Wal, WalConfig};

fn cfg(disk: &MemStorage) -> WalConfig {
    WalConfig {
        storage: Arc::new(disk.clone()),
        dir: PathBuf::from("/data/server-0"),
        sync: SyncMode::Interval {
            interval_ms: 60_000,
        },
        identity: "server 0 of 1".into(),
        segment_bytes_max: 64 << 20,
    }
}

/// Opens the log on `disk` with `flusher`, returning it and the records replayed.
fn open(disk: &MemStorage, flusher: Flusher) -> (Wal, Vec<Vec<u8>>) {
    let mut recs = Vec::new();
    let (w, _) = Wal::open_with(cfg(disk), flusher, |e| {
        if let Entry::Record(b) = e {
            recs.push(b.to_vec());
        }
        Ok(())
    })
    .unwrap_or_else(|e| panic!("{flusher:?}: {e}"));
    (w, recs)
}

#[test]
fn replayed_records_survive_a_later_power_loss() {
    let want: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 40]).collect();
    for flusher in [Flusher::Thread, Flusher::Caller] {
        for torn in [None, Some(7), Some(8), Some(9)] {
            let disk = MemStorage::new();
            let (w, _) = open(&disk, flusher);
            for r in &want {
                w.append_and_wait(r).unwrap();
            }
            // kill -9: written, never synced (the interval is a minute).
            let disk = disk.crash(Crash::ProcessCrash);
            drop(w);
            let (w, recs) = open(&disk, flusher);
            assert_eq!(recs, want, "{flusher:?}: the page cache kept them");
            w.append_and_wait(b"after the restart").unwrap();
            let how = match torn {
                None => Crash::PowerLoss,
                Some(seed) => Crash::PowerLossTorn { seed },
            };
            let disk = disk.crash(how);
            drop(w);
            let (_, recs) = open(&disk, flusher);
            assert!(
                recs.starts_with(&want),
                "{flusher:?}, {how:?}: records the last start replayed are gone: {} of {} left",
                recs.len(),
                want.len()
            );
        }
    }
}
