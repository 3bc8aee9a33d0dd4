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
fn contended_adds(n: u64) -> f64 {
    let c = AtomicU64::new(0);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..2 { s.spawn(|| for _ in 0..n { c.fetch_add(1, Ordering::Relaxed); }); }
    });
    t0.elapsed().as_nanos() as f64 / n as f64
}
fn main() {
    let secs: u64 = std::env::args().nth(1).map(|a| a.parse().unwrap()).unwrap_or(60);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(secs) {
        let pp = pingpong(200_000);
        let ca = contended_adds(2_000_000);
        println!("{:6.1}s pingpong {:7.1} ns/round  contended fetch_add {:6.1} ns/op", start.elapsed().as_secs_f64(), pp, ca);
        std::thread::sleep(Duration::from_millis(900));
    }
}
