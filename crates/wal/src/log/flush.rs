//! Making the pending group durable: a [`Writer`] holds the open segment
//! and writes a group, syncs and rotates. Two drivers run the same
//! `take`, `commit`, `publish`: the flusher thread (`Flusher::Thread`),
//! and the calling thread of `wait`, `flush`, `flush_and_sync` and
//! `rotate` (`Flusher::Caller`, which sleeps on no condition variable).
//! What a commit made durable is published in `State` only afterwards, so
//! nothing of a group that failed is acknowledged (W1).

use std::io::Write;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{create_segment, segment_path, Inner, Lsn, State, SyncMode, Wal};
use crate::storage::StorageFile;
use crate::{Result, WalError};

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
        let (rotate, stop, sync_asked) = {
            let mut st = inner.st.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if !st.pending.is_empty() || st.want_rotate || st.want_sync || st.stop {
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
            let asked = std::mem::take(&mut st.want_sync);
            (std::mem::take(&mut st.want_rotate), st.stop, asked)
        };
        let due = match interval {
            None => !w.group.is_empty(),
            Some(iv) => w.synced < w.written && w.last_sync.elapsed() >= iv,
        };
        let result = w.commit(inner, due || stop || sync_asked, rotate);
        let mut st = inner.st.lock().unwrap_or_else(|p| p.into_inner());
        let ok = st.publish(&w, result, rotate);
        let exit = !ok || (stop && st.pending.is_empty());
        drop(st);
        inner.done.notify_all();
        if exit {
            return;
        }
    }
}

impl Wal {
    /// `wait` with `Flusher::Caller`: if record `lsn` is not durable yet,
    /// flushes here (the record is in the pending group or in the group of
    /// a caller flushing now, whose writer lock this flush waits for).
    pub(super) fn wait_here(&self, lsn: Lsn) -> Result<()> {
        {
            let st = self.state();
            if let Some(r) = self.settled(&st, lsn) {
                return r;
            }
            assert!(
                lsn < st.next,
                "wait for record {lsn}, but only {} were appended",
                st.next - 1
            );
        }
        self.flush_here(false, false)?;
        match self.settled(&self.state(), lsn) {
            Some(r) => r,
            None => {
                unreachable!("record {lsn}, appended before a flush that succeeded, is not durable")
            }
        }
    }

    /// With `Flusher::Caller`: takes the whole pending group and writes it
    /// with one write, syncs it under `SyncMode::Always` or if `sync`, and
    /// starts the next segment if `rotate` (or the segment is full).
    /// Returns the segment new records go to. A failure poisons the log.
    pub(super) fn flush_here(&self, sync: bool, rotate: bool) -> Result<u64> {
        let inner = &*self.inner;
        let mut guard = inner.writer.lock().unwrap_or_else(|p| p.into_inner());
        let w = guard
            .as_mut()
            .expect("with Flusher::Caller the writer lives in Inner::writer");
        {
            let mut st = self.state();
            if let Some(f) = &st.failed {
                return Err(WalError::Failed(f.clone()));
            }
            w.take(&mut st);
        }
        let always = inner.cfg.sync == SyncMode::Always;
        let result = w.commit(inner, sync || always, rotate);
        let mut st = self.state();
        if st.publish(w, result, rotate) {
            Ok(w.segment)
        } else {
            let f = st.failed.clone().unwrap_or_default();
            Err(WalError::Failed(f))
        }
    }
}
