// The host probe of stop 34 (docs/results.md): a cache line passed between two threads (round
// trip, ns) and a dependent-load chase over a 1 GiB buffer built once ("old") and a 128 MiB
// buffer built fresh each round ("fresh"), every ~3 s for 240 s. Build: a bin crate with no
// dependencies, `cargo build --release`; run: `probe 240`.
// Its `pingpong` is stop 33's probe (`stop33/counters-ab/pingpong-probe.rs`) unchanged, kept here so
// this file builds alone; what is new is the chase.
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
fn pingpong(rounds: u64) -> f64 {
    let flag = AtomicU64::new(0);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..rounds {
                while flag.load(Ordering::Acquire) != 2 * i + 1 { std::hint::spin_loop(); }
                flag.store(2 * i + 2, Ordering::Release);
            }
        });
        for i in 0..rounds {
            while flag.load(Ordering::Acquire) != 2 * i { std::hint::spin_loop(); }
            flag.store(2 * i + 1, Ordering::Release);
        }
        while flag.load(Ordering::Acquire) != 2 * rounds { std::hint::spin_loop(); }
    });
    t0.elapsed().as_nanos() as f64 / rounds as f64
}
// A random single cycle over n slots (Sattolo), stride in u64 units of 8 (one line per slot).
fn cycle(n: usize, seed: u64) -> Vec<u64> {
    let mut v = vec![0u64; n * 8];
    let mut perm: Vec<usize> = (0..n).collect();
    let mut x = seed | 1;
    for i in (1..n).rev() {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        let j = (x % i as u64) as usize;
        perm.swap(i, j);
    }
    for i in 0..n { v[perm[i] * 8] = (perm[(i + 1) % n] * 8) as u64; }
    v
}
fn chase(v: &[u64], steps: usize) -> f64 {
    let mut at = 0usize;
    let t0 = Instant::now();
    for _ in 0..steps { at = v[at] as usize; }
    std::hint::black_box(at);
    t0.elapsed().as_nanos() as f64 / steps as f64
}
fn main() {
    let secs: u64 = std::env::args().nth(1).map(|a| a.parse().unwrap()).unwrap_or(60);
    let old = cycle(16 << 20, 7); // 16M lines = 1 GiB, built once
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(secs) {
        let pp = pingpong(100_000);
        let o = chase(&old, 1_000_000);
        let fresh = cycle(2 << 20, start.elapsed().as_nanos() as u64); // 128 MiB, new pages
        let f = chase(&fresh, 1_000_000);
        drop(fresh);
        let o2 = chase(&old, 1_000_000);
        println!("{:6.1}s cpu {} pingpong {:7.1} old {:6.1} fresh {:6.1} old2 {:6.1}", start.elapsed().as_secs_f64(),
          unsafe { libc_sched_getcpu() }, pp, o, f, o2);
        std::thread::sleep(Duration::from_millis(2000));
    }
}
extern "C" { fn sched_getcpu() -> i32; }
unsafe fn libc_sched_getcpu() -> i32 { sched_getcpu() }
