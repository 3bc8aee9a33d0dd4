//! `flush` and `flush_and_sync` with either `Flusher`: under
//! `SyncMode::Interval` (a minute, so no sync comes by itself during the
//! test), `flush` makes every record appended so far written (a process
//! crash keeps it, a power loss need not), and `flush_and_sync` makes them
//! synced, so a power loss keeps them too.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
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

fn recovered(disk: &MemStorage, how: Crash) -> usize {
    let mut n = 0;
    Wal::open(cfg(&disk.crash(how)), |e| {
        n += usize::from(matches!(e, Entry::Record(_)));
        Ok(())
    })
    .unwrap();
    n
}

#[test]
fn flush_and_sync_makes_interval_records_survive_power_loss() {
    for flusher in [Flusher::Thread, Flusher::Caller] {
        let disk = MemStorage::new();
        let (w, _) = Wal::open_with(cfg(&disk), flusher, |_| Ok(())).unwrap();
        assert_eq!(w.flusher(), flusher);
        for i in 0..3u8 {
            w.append(&[i; 20]).unwrap();
        }
        w.flush().unwrap();
        assert_eq!(recovered(&disk, Crash::ProcessCrash), 3, "{flusher:?}");
        assert_eq!(recovered(&disk, Crash::PowerLoss), 0, "{flusher:?}");
        w.flush_and_sync().unwrap();
        assert_eq!(recovered(&disk, Crash::PowerLoss), 3, "{flusher:?}");
        assert_eq!(w.stats().syncs.load(Ordering::Relaxed), 1, "{flusher:?}");
        // Nothing new: no second sync.
        w.flush_and_sync().unwrap();
        assert_eq!(w.stats().syncs.load(Ordering::Relaxed), 1, "{flusher:?}");
    }
}
