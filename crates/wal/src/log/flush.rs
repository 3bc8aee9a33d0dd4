//! Making the pending group durable: a [`Writer`] holds the open segment
//! and writes a group, syncs and rotates; the flusher thread drives it.
//! What it has made durable is published in `State` only afterwards, so a
//! waiter is never woken for a group that failed (W1).

use std::io::Write;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{create_segment, segment_path, Inner, Lsn, State, SyncMode};
use crate::storage::StorageFile;

/// The open segment and what of the log is on disk.
pub(super) struct Writer {
    file: Box<dyn StorageFile>,
    /// The open segment's number.
    pub(super) segment: u64,
    /// Bytes written to the open segment after its header.
    seg_bytes: u64,
    /// Highest LSN handed to a write (published once the write returned).
    written: Lsn,
    /// Highest LSN written and synced.
    synced: Lsn,
    last_sync: Instant,
    /// The group being written: swapped with `State::pending`, so both
    /// buffers are reused.
    group: Vec<u8>,
}

impl Writer {
    /// A writer of segment `segment`, just created with its header.
    pub(super) fn new(file: Box<dyn StorageFile>, segment: u64) -> Writer {
        Writer {
            file,
            segment,
            seg_bytes: 0,
            written: 0,
            synced: 0,
            last_sync: Instant::now(),
            group: Vec::new(),
        }
    }

    /// Takes the whole pending group out of `st` (the caller holds its lock).
    fn take(&mut self, st: &mut State) {
        self.group.clear();
        std::mem::swap(&mut self.group, &mut st.pending);
        if !self.group.is_empty() {
            self.written = st.next - 1;
        }
    }

    /// Writes the group taken with one write; syncs if `sync`, `rotate` or
    /// a full segment ask for it and something written is not yet synced
    /// (a segment ends synced before the next one begins: W3); then starts
    /// the next segment if `rotate` or the segment is full.
    fn commit(&mut self, inner: &Inner, sync: bool, rotate: bool) -> Result<(), String> {
        let cfg = &inner.cfg;
        let path = segment_path(&cfg.dir, self.segment);
        let mut result = Ok(());
        if !self.group.is_empty() {
            result = self
                .file
                .write_all(&self.group)
                .map_err(|e| format!("cannot write {}: {e}", path.display()));
            self.seg_bytes += self.group.len() as u64;
            inner.stats.groups.fetch_add(1, Ordering::Relaxed);
            inner
                .stats
                .bytes
                .fetch_add(self.group.len() as u64, Ordering::Relaxed);
        }
        let full = self.seg_bytes >= cfg.segment_bytes_max;
        if result.is_ok() && self.synced < self.written && (sync || rotate || full) {
            result = self
                .file
                .sync_data()
                .map_err(|e| format!("cannot fdatasync {}: {e}", path.display()));
            inner.stats.syncs.fetch_add(1, Ordering::Relaxed);
            self.last_sync = Instant::now();
            if result.is_ok() {
                self.synced = self.written;
            }
        }
        if result.is_ok() && (rotate || full) {
            match create_segment(&*cfg.storage, &cfg.dir, self.segment + 1, &cfg.identity) {
                Ok(f) => {
                    self.file = f;
                    self.segment += 1;
                    self.seg_bytes = 0;
                }
                Err(e) => result = Err(e.to_string()),
            }
        }
        result
    }
}

impl State {
    /// Publishes what `w` made durable, or poisons the log with the error
    /// of `result`: then the published watermarks stay where they were and
    /// nothing of the group is acknowledged. False if it poisoned.
    fn publish(&mut self, w: &Writer, result: Result<(), String>, rotated: bool) -> bool {
        if let Err(e) = result {
            // A failed fsync is not retried: the kernel may have dropped
            // the dirty pages.
            tracing::error!("write-ahead log failed, refusing every later update: {e}");
            self.failed = Some(e);
            return false;
        }
        self.written = w.written;
        self.synced = w.synced;
        self.segment = w.segment;
        if rotated {
            self.rotations += 1;
        }
        true
    }
}

/// The flusher thread: takes the pending group, writes it, syncs per the
/// mode, rotates when asked or when the segment is full, wakes the waiters.
pub(super) fn thread(inner: &Inner, mut w: Writer) {
    let interval = match inner.cfg.sync {
        SyncMode::Always => None,
        SyncMode::Interval { interval_ms } => Some(Duration::from_millis(interval_ms)),
    };
    loop {
        let (rotate, stop) = {
            let mut st = inner.st.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if !st.pending.is_empty() || st.want_rotate || st.stop {
                    break;
                }
                match interval {
                    Some(iv) if w.synced < w.written => {
                        let left = iv.saturating_sub(w.last_sync.elapsed());
                        if left.is_zero() {
                            break;
                        }
                        st = inner
                            .work
                            .wait_timeout(st, left)
                            .unwrap_or_else(|p| p.into_inner())
                            .0;
                    }
                    _ => st = inner.work.wait(st).unwrap_or_else(|p| p.into_inner()),
                }
            }
            w.take(&mut st);
            (std::mem::take(&mut st.want_rotate), st.stop)
        };
        let due = match interval {
            None => !w.group.is_empty(),
            Some(iv) => w.synced < w.written && w.last_sync.elapsed() >= iv,
        };
        let result = w.commit(inner, due || stop, rotate);
        let mut st = inner.st.lock().unwrap_or_else(|p| p.into_inner());
        let ok = st.publish(&w, result, rotate);
        let exit = !ok || stop && st.pending.is_empty();
        drop(st);
        inner.done.notify_all();
        if exit {
            return;
        }
    }
}
