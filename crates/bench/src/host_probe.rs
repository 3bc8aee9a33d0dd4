//! A fixed piece of work timed on every core at once, before and after a
//! measured window (issue 13, requirement 7): how fast this machine itself
//! ran then, whatever the benchmark did. On a shared VM the host's other
//! tenants and its scheduling of the vCPUs change how fast the same code
//! runs; a row whose throughput moves with the probe moved with the host.
//!
//! The work is a chain of dependent reads at pseudo-random places of a
//! 4 MiB table per thread (larger than a core's L2, within the L3), so it
//! measures the core's speed and the shared cache's latency, the two things
//! a CPU-bound benchmark row spends its time on.
//!
//! A second probe, [`handoff_ns`], times a cache line passed back and forth
//! between two threads: what a write to a line another core has just
//! written costs. On this VM it moved between about 40 and 160 ns from one
//! second to the next (stop 33 in docs/results.md), as the host placed the
//! two vCPUs nearer or farther apart; a row that shares lines between its
//! workers moves with it.

/// Dependent reads per thread per probe.
pub const PROBE_STEPS: usize = 1 << 20;
/// Words of each thread's table (4 MiB).
const TABLE_WORDS: usize = 1 << 19;

/// Nanoseconds per step of the probe, the mean over `threads` threads that
/// run it at the same time (the tables are built before the clock starts).
pub fn probe_ns(threads: usize) -> f64 {
    let threads = threads.max(1);
    let barrier = std::sync::Barrier::new(threads);
    let per_thread: Vec<f64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                s.spawn(move || {
                    let table: Vec<u64> = (0..TABLE_WORDS as u64)
                        .map(|i| locus_store::table::mix(i ^ ((t as u64) << 32)))
                        .collect();
                    barrier.wait();
                    let t0 = std::time::Instant::now();
                    let mut at = 0usize;
                    for _ in 0..PROBE_STEPS {
                        at = (table[at] as usize) & (TABLE_WORDS - 1);
                    }
                    std::hint::black_box(at);
                    t0.elapsed().as_nanos() as f64 / PROBE_STEPS as f64
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a probe thread panicked"))
            .collect()
    });
    per_thread.iter().sum::<f64>() / per_thread.len() as f64
}

/// Handoffs per [`handoff_ns`] probe.
pub const HANDOFFS: u64 = 100_000;

/// Nanoseconds for one cache line to pass from one thread to another and
/// back, the median of three probes of [`HANDOFFS`] round trips each: two
/// threads take turns writing one word, each waiting for the other's
/// write. Both threads spin, so this needs two cores to itself.
pub fn handoff_ns() -> f64 {
    let mut probes: Vec<f64> = (0..3).map(|_| one_handoff_probe(HANDOFFS)).collect();
    probes.sort_by(f64::total_cmp);
    probes[1]
}

/// Longest a [`handoff_ns`] probe runs: on a machine busy with other
/// work a spinning thread waits for the other to be scheduled, and the
/// probe reports what it managed by then (a large number, as it should).
const HANDOFF_PROBE_MAX: std::time::Duration = std::time::Duration::from_millis(200);

fn one_handoff_probe(rounds: u64) -> f64 {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    /// A word alone on its lines.
    #[repr(align(128))]
    struct Line<T>(T);
    let turn = Line(AtomicU64::new(0));
    let stop = Line(AtomicBool::new(false));
    let (turn, stop) = (&turn.0, &stop.0);
    // Spins until `turn` is `want`; false if told to stop first.
    let wait_for = |want: u64| {
        while turn.load(Ordering::Acquire) != want {
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            std::hint::spin_loop();
        }
        true
    };
    let t0 = std::time::Instant::now();
    let done = std::thread::scope(|s| {
        // This thread writes the odd turns, the other the even ones.
        s.spawn(move || {
            let mut i = 0;
            while wait_for(2 * i + 1) {
                turn.store(2 * i + 2, Ordering::Release);
                i += 1;
            }
        });
        let mut done = 0;
        while done < rounds {
            if !wait_for(2 * done) {
                break;
            }
            if done % 64 == 0 && t0.elapsed() > HANDOFF_PROBE_MAX {
                break;
            }
            turn.store(2 * done + 1, Ordering::Release);
            done += 1;
        }
        // The other thread's last turn, then its exit.
        wait_for(2 * done);
        stop.store(true, Ordering::Relaxed);
        done
    });
    t0.elapsed().as_nanos() as f64 / done.max(1) as f64
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_handoff_takes_a_positive_time() {
        let ns = super::one_handoff_probe(1_000);
        assert!(ns > 0.0 && ns.is_finite(), "{ns}");
    }

    /// Rounds it could never finish: the probe stops at its time limit,
    /// also with more spinning threads than cores.
    #[test]
    fn a_handoff_probe_stops_at_its_time_limit() {
        let busy = std::sync::atomic::AtomicBool::new(true);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    while busy.load(std::sync::atomic::Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                });
            }
            let ns = super::one_handoff_probe(u64::MAX);
            busy.store(false, std::sync::atomic::Ordering::Relaxed);
            assert!(ns > 0.0 && ns.is_finite(), "{ns}");
        });
    }

    #[test]
    fn a_probe_takes_a_positive_time_per_step() {
        let ns = super::probe_ns(2);
        assert!(ns > 0.0 && ns.is_finite(), "{ns}");
    }
}
