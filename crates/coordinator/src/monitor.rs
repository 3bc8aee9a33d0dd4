//! One machine's monitor (Pragh 4.4, 6.4): turns its location cache's
//! access counts into the coordinator's events.
//!
//! A [`Monitor`] is polled every `hot_poll_ms` by whoever runs it (the
//! embedded driver's monitor thread for every hosted machine, or a server
//! process's control link for its own machine). Each poll
//! * drains the cache's hot-key list into instant reports ([`Event::Hot`]),
//!   each with the key's count so far and where the value was found;
//! * once the interval has passed, takes the interval's access counts
//!   (keys with at least `report_count_min` accesses) into one periodic
//!   report ([`Event::Report`]) and starts the next interval.
//!
//! The monitor only reads the cache; sending (and dropping when the
//! coordinator cannot take more) is the caller's business. Its interval is
//! wall time ([`Monitor::poll`]) or the caller's clock ([`Monitor::poll_at`]:
//! the embedded driver's, which stands still while the driver is paused,
//! see [`crate::clock`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use locus_fabric::MachineId;
use locus_store::addr::Addr;
use locus_store::cache::LocationCache;
use locus_store::{Homes, Key};

use crate::policy::{Access, Event};

/// Where `word` (an address word of `key`) says the value is, the key
/// homed as `homes` places it.
pub fn holder_of(key: Key, word: u64, homes: &Homes) -> Option<MachineId> {
    Addr::decode(word).map(|a| a.holder(homes.owner(key.vertex())))
}

/// The monitor of one machine.
#[derive(Debug)]
pub struct Monitor {
    machine: MachineId,
    /// The store's slot table: the home a local address word means.
    homes: Arc<Homes>,
    interval: Duration,
    report_count_min: u32,
    /// Where [`Monitor::poll`]'s wall clock starts.
    origin: Instant,
    /// When the current interval began, on the clock polls are given.
    interval_start: Duration,
}

impl Monitor {
    /// A monitor for `machine` of a store homing keys by `homes`, reporting
    /// every `interval_ms` the keys counted at least `report_count_min` times.
    pub fn new(
        machine: MachineId,
        homes: Arc<Homes>,
        interval_ms: u64,
        report_count_min: u32,
    ) -> Monitor {
        Monitor {
            machine,
            homes,
            interval: Duration::from_millis(interval_ms),
            report_count_min,
            origin: Instant::now(),
            interval_start: Duration::ZERO,
        }
    }

    /// [`Monitor::new`] for a caller that polls with [`Monitor::poll_at`] on
    /// its own clock, which reads `now` at this point.
    pub fn new_at(
        machine: MachineId,
        homes: Arc<Homes>,
        interval_ms: u64,
        report_count_min: u32,
        now: Duration,
    ) -> Monitor {
        Monitor {
            interval_start: now,
            ..Monitor::new(machine, homes, interval_ms, report_count_min)
        }
    }

    /// The machine monitored.
    pub fn machine(&self) -> MachineId {
        self.machine
    }

    /// One pass over `cache` (this machine's): appends instant reports, then
    /// the periodic report if the interval has passed (none if nothing was
    /// counted often enough).
    pub fn poll(&mut self, cache: &LocationCache, out: &mut Vec<Event>) {
        self.poll_at(self.origin.elapsed(), cache, out);
    }

    /// [`Monitor::poll`] at `now` on the caller's clock (never decreasing;
    /// the same clock as [`Monitor::new_at`]'s reading).
    pub fn poll_at(&mut self, now: Duration, cache: &LocationCache, out: &mut Vec<Event>) {
        let elapsed = now.saturating_sub(self.interval_start);
        let mut hot = Vec::new();
        cache.take_hot(|k| hot.push(k));
        for key in hot {
            let Some((word, count)) = cache.peek(key) else {
                continue;
            };
            let Some(holder) = holder_of(key, word, &self.homes) else {
                continue;
            };
            out.push(Event::Hot {
                machine: self.machine,
                elapsed_ms: elapsed.as_millis() as u64,
                access: Access { key, holder, count },
            });
        }
        if elapsed < self.interval {
            return;
        }
        let mut accesses = Vec::new();
        // From the second interval on, the cache visits only the keys that
        // reached the count, not every entry (`locus_store::cache`, "Intervals").
        cache.take_counts_at_least(self.report_count_min, |key, word, count| {
            if let Some(holder) = holder_of(key, word, &self.homes) {
                accesses.push(Access { key, holder, count });
            }
        });
        if !accesses.is_empty() {
            out.push(Event::Report {
                machine: self.machine,
                interval_ms: elapsed.as_millis() as u64,
                accesses,
            });
        }
        self.interval_start = now;
    }
}
