//! The driver's clock: time that stands still while the driver is paused.
//!
//! A paused driver ([`crate::Driver::pause`]) belongs to a cluster whose
//! queries have stopped too (a benchmark measuring clusters in turns). If
//! its monitors and coordinator kept the wall clock, every resume would find
//! an interval long past: the monitor would report at once, over a window
//! that is mostly pause (rates divided by time nothing ran), and dwell and
//! forgetting would run out while nothing happened. Measured on this clock,
//! a cluster run in turns sees what it would have seen running alone, its
//! pauses cut out: as many reports, over as much running time, with the
//! migrations and replicas they bring falling in its own turns.
//!
//! Invariants: [`ActiveClock::now`] never decreases; it does not advance
//! between a `pause` and the next `resume`; while running it advances with
//! the wall clock.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Running time since the clock was made, pauses left out.
#[derive(Debug)]
pub struct ActiveClock {
    origin: Instant,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Time spent paused, over pauses that have ended.
    paused: Duration,
    /// When the current pause began, if paused.
    since: Option<Instant>,
}

impl Default for ActiveClock {
    fn default() -> Self {
        ActiveClock::new()
    }
}

impl ActiveClock {
    /// A running clock at zero.
    pub fn new() -> ActiveClock {
        ActiveClock {
            origin: Instant::now(),
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Running time so far.
    pub fn now(&self) -> Duration {
        let s = self.state();
        let end = s.since.unwrap_or_else(Instant::now);
        end.saturating_duration_since(self.origin)
            .saturating_sub(s.paused)
    }

    /// [`ActiveClock::now`] in whole milliseconds.
    pub fn now_ms(&self) -> u64 {
        self.now().as_millis() as u64
    }

    /// Stops the clock (nothing if it is stopped already).
    pub fn pause(&self) {
        let mut s = self.state();
        if s.since.is_none() {
            s.since = Some(Instant::now());
        }
    }

    /// Starts a stopped clock again from where it stopped (nothing if it runs).
    pub fn resume(&self) {
        let mut s = self.state();
        if let Some(t) = s.since.take() {
            s.paused += t.elapsed();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paused_clock_stands_still_and_resumes_where_it_stopped() {
        let c = ActiveClock::new();
        std::thread::sleep(Duration::from_millis(20));
        let before = c.now();
        assert!(before >= Duration::from_millis(20), "{before:?}");
        c.pause();
        c.pause(); // twice is once
        let at_pause = c.now();
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(c.now(), at_pause, "time passed while paused");
        c.resume();
        c.resume(); // twice is once
        let after = c.now();
        assert!(after >= at_pause, "the clock went back");
        // However slow the host, the 200 ms pause is not in the reading.
        let wall = c.origin.elapsed();
        assert!(
            wall.saturating_sub(after) >= Duration::from_millis(200),
            "pause counted: wall {wall:?}, clock {after:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            c.now() >= after + Duration::from_millis(20),
            "stopped after resume"
        );
    }
}
