//! A writer of unique edges under a load, and the check that every loaded
//! edge and acknowledged insert reads back (the elastic and failover
//! process tests).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::{khop_ref, VERTICES};

/// A thread inserting unique edges `v -> base + i` through its own client
/// until stopped.
pub struct Writer {
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<(u32, u32)>>>,
    failed: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<(locus_client::Routing, usize)>,
}

impl Writer {
    pub fn start(c: locus_client::Client, base: u32) -> Writer {
        let acked: Arc<Mutex<Vec<(u32, u32)>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let failed = Arc::new(AtomicU64::new(0));
        let (a, s, f) = (acked.clone(), stop.clone(), failed.clone());
        let thread = std::thread::spawn(move || {
            let mut i = 0u32;
            while !s.load(Ordering::Relaxed) {
                let v = (u64::from(i) * 7919 % u64::from(VERTICES)) as u32;
                match c.insert_edge(v, base + i) {
                    Ok(true) => a.lock().unwrap().push((v, base + i)),
                    Ok(false) => panic!("a unique edge was already there"),
                    Err(_) => {
                        f.fetch_add(1, Ordering::Relaxed);
                    }
                }
                i += 1;
            }
            (c.routing(), c.machines())
        });
        Writer {
            stop,
            acked,
            failed,
            thread,
        }
    }

    /// Stops it: the inserts acknowledged, its client's routing and the
    /// servers it knew.
    pub fn stop(self) -> (Vec<(u32, u32)>, locus_client::Routing, usize) {
        self.stop.store(true, Ordering::Relaxed);
        let (routing, known) = self.thread.join().unwrap();
        let acked = self.acked.lock().unwrap().clone();
        println!(
            "writer: {} inserts acknowledged, {} failed, {routing:?}, {known} servers known",
            acked.len(),
            self.failed.load(Ordering::Relaxed)
        );
        (acked, routing, known)
    }
}

/// Every edge of `g` and every acknowledged insert reads back through `c`,
/// and 2-hop answers hold the reference's vertices (inserts only add).
pub fn check_reads(c: &locus_client::Client, g: &[Vec<u32>], acked: &[(u32, u32)]) {
    for (v, list) in g.iter().enumerate() {
        let got = c
            .neighbors(v as u32, 0)
            .unwrap_or_else(|e| panic!("vertex {v}: {e}"));
        for u in list {
            assert!(got.contains(u), "vertex {v} lost its edge to {u}");
        }
    }
    for (v, u) in acked {
        assert!(
            c.neighbors(*v, 0).unwrap().contains(u),
            "acknowledged {v}->{u} lost"
        );
    }
    for v in [1u32, 97, 300] {
        let (want, _) = khop_ref(g, v, 2, 1_000_000);
        let got = c.khop(v, 2, 1_000_000).unwrap();
        for u in &want {
            assert!(got.distinct.contains(u), "2-hop of {v} misses {u}");
        }
    }
}
