//! On-demand tracking of local accesses (Pragh 4.4).
//!
//! The location cache already counts a machine's accesses to remote keys and
//! to values migrated here, so the monitor needs no per-key table for the
//! whole graph. Local accesses (a key homed here whose value is here) are not
//! counted at all, except for the keys the coordinator names: "deferred"
//! migration asks the value's holder to count accesses to a few candidate keys
//! for one interval before it decides. This is that table.
//!
//! **Hot path.** Workers check one shared epoch word per access (a relaxed
//! load of a line nobody writes while tracking is unchanged); only when it
//! moved do they take the lock and pick up the new key set. With no keys
//! installed an access costs that load and a length check. Counting a tracked
//! key is one relaxed `fetch_add` on its own counter.
//!
//! **Bounds.** A set holds at most [`TRACKED_KEYS_MAX`] keys; installing more
//! is refused with a message, never truncated silently.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::table::Key;
use crate::{Result, StoreError};

/// Keys one machine tracks at most at a time.
pub const TRACKED_KEYS_MAX: usize = 1 << 20;

/// The keys being counted and their counts.
#[derive(Debug, Default)]
pub struct Tracked {
    counts: HashMap<Key, AtomicU32>,
}

impl Tracked {
    /// Counts one access if `key` is tracked.
    #[inline]
    pub fn note(&self, key: Key) {
        if let Some(c) = self.counts.get(&key) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// True if no key is tracked.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }
}

/// One machine's tracker, shared by its workers.
#[derive(Debug, Default)]
pub struct AccessTracker {
    epoch: AtomicU64,
    current: Mutex<Arc<Tracked>>,
}

impl AccessTracker {
    /// Starts counting accesses to `keys` (replacing any set being counted).
    pub fn install(&self, keys: impl IntoIterator<Item = Key>) -> Result<()> {
        let mut counts = HashMap::new();
        for k in keys {
            if counts.len() == TRACKED_KEYS_MAX {
                return Err(StoreError::TrackedKeysFull {
                    limit: TRACKED_KEYS_MAX,
                });
            }
            counts.insert(k, AtomicU32::new(0));
        }
        self.swap(Tracked { counts });
        Ok(())
    }

    /// Stops counting and returns each tracked key's count since `install`.
    pub fn take(&self) -> Vec<(Key, u32)> {
        let old = self.swap(Tracked::default());
        let mut out: Vec<(Key, u32)> = old
            .counts
            .iter()
            .map(|(k, c)| (*k, c.load(Ordering::Relaxed)))
            .collect();
        out.sort_unstable_by_key(|(k, _)| k.0);
        out
    }

    fn swap(&self, t: Tracked) -> Arc<Tracked> {
        let mut cur = self.current.lock().unwrap_or_else(|p| p.into_inner());
        let old = std::mem::replace(&mut *cur, Arc::new(t));
        self.epoch.fetch_add(1, Ordering::Release);
        old
    }

    /// The set in force, refreshed into `view` only if it changed since.
    #[inline]
    pub fn refresh(&self, view: &mut TrackerView) {
        let e = self.epoch.load(Ordering::Acquire);
        if e != view.epoch {
            let cur = self.current.lock().unwrap_or_else(|p| p.into_inner());
            view.tracked = Arc::clone(&cur);
            view.epoch = e;
        }
    }
}

/// A worker's copy of its machine's tracked set.
#[derive(Debug, Default)]
pub struct TrackerView {
    epoch: u64,
    tracked: Arc<Tracked>,
}

impl TrackerView {
    /// The set this view holds.
    #[inline]
    pub fn tracked(&self) -> &Tracked {
        &self.tracked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_only_installed_keys_and_take_resets() {
        let t = AccessTracker::default();
        let mut v = TrackerView::default();
        t.refresh(&mut v);
        v.tracked().note(Key(1));
        assert!(t.take().is_empty());
        t.install([Key(1), Key(2)]).unwrap();
        t.refresh(&mut v);
        for _ in 0..3 {
            v.tracked().note(Key(1));
        }
        v.tracked().note(Key(9));
        assert_eq!(t.take(), vec![(Key(1), 3), (Key(2), 0)]);
        t.refresh(&mut v);
        assert!(v.tracked().is_empty());
    }
}
