//! Iteration-friendly access (Fargraph+ 6.2): with double buffering a thread
//! begins segment k+1 before it consumes segment k; without, it alternates.
//! The far backend's buffers stay bounded by two segments per thread.

mod common;

use std::sync::{Arc, Mutex};

use locus_analytics::algo::{self, Algo, Params};
use locus_analytics::engine::{Engine, EngineConfig};
use locus_analytics::store::far::{segment_bytes_for, FarConfig, FarStore};
use locus_analytics::store::local::LocalStore;
use locus_analytics::store::{
    BlockTable, EdgeStore, FetchStream, Footprint, Residency, Segment, StreamStats,
};
use locus_analytics::{server, Backend, Result};
use locus_fabric::local::{LocalConfig, LocalFabric};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Event {
    Begin,
    Consume,
}

/// A store that records what the engine asks of its one stream.
struct Recording {
    inner: LocalStore,
    log: Arc<Mutex<Vec<Event>>>,
}

struct RecordingStream<'s> {
    inner: Box<dyn FetchStream + 's>,
    log: Arc<Mutex<Vec<Event>>>,
}

impl EdgeStore for Recording {
    fn backend(&self) -> Backend {
        Backend::Local
    }
    fn table(&self) -> &BlockTable {
        self.inner.table()
    }
    fn open_stream(&self) -> Result<Box<dyn FetchStream + '_>> {
        Ok(Box::new(RecordingStream {
            inner: self.inner.open_stream()?,
            log: Arc::clone(&self.log),
        }))
    }
    fn segment_bytes_max(&self) -> u64 {
        64 // 8 edges: many segments per block
    }
    fn footprint(&self) -> Footprint {
        self.inner.footprint()
    }
}

impl FetchStream for RecordingStream<'_> {
    fn begin(&mut self, seg: Segment) -> Result<()> {
        self.log.lock().unwrap().push(Event::Begin);
        self.inner.begin(seg)
    }
    fn consume(&mut self, f: &mut dyn FnMut(&[u8])) -> Result<()> {
        self.log.lock().unwrap().push(Event::Consume);
        self.inner.consume(f)
    }
    fn stats(&self) -> StreamStats {
        self.inner.stats()
    }
}

fn events(buffering: bool) -> Vec<Event> {
    let g = common::shipped("lesmis.txt", None, Some(3));
    let store = Recording {
        inner: LocalStore::new(&g.grid, Algo::PageRank.orders()).unwrap(),
        log: Arc::default(),
    };
    let engine = Engine::new(
        &store,
        EngineConfig {
            threads: 1,
            buffering,
        },
    )
    .unwrap();
    let params = Params {
        iterations: 2,
        ..Params::default()
    };
    let r = algo::run(&engine, Algo::PageRank, g.grid.out_degree(), &params).unwrap();
    common::check(&g, &r.output, &params);
    let log = store.log.lock().unwrap().clone();
    log
}

#[test]
fn with_buffering_the_next_segment_is_begun_before_the_current_is_consumed() {
    let log = events(true);
    let begins = log.iter().filter(|e| **e == Event::Begin).count();
    assert!(begins > 20, "lesmis in 8-edge segments: {begins}");
    // Per edge pass: B B C B C ... B C C. At every consume, one more segment
    // than consumed has been begun, except at a pass's last consume.
    let (mut outstanding, mut max) = (0i64, 0i64);
    let mut overlapped = 0;
    for e in &log {
        match e {
            Event::Begin => outstanding += 1,
            Event::Consume => {
                if outstanding == 2 {
                    overlapped += 1;
                }
                outstanding -= 1;
            }
        }
        assert!((0..=2).contains(&outstanding));
        max = max.max(outstanding);
    }
    assert_eq!(max, 2);
    assert!(
        overlapped >= begins - 4,
        "{overlapped} of {begins} consumes overlapped"
    );
}

#[test]
fn without_buffering_fetch_and_compute_alternate() {
    let log = events(false);
    assert!(log.len() > 40);
    for pair in log.chunks(2) {
        assert_eq!(pair, [Event::Begin, Event::Consume]);
    }
}

#[test]
fn far_buffers_are_bounded_by_two_segments_per_thread() {
    let g = common::rmat(12, 2, Some(2));
    let fabric = LocalFabric::new(LocalConfig::with_machines(2).without_model()).unwrap();
    let orders = Algo::PageRank.orders();
    let table = BlockTable::new(&g.grid, orders).unwrap();
    let chunk_bytes = 4096;
    let store = server::with_server(&fabric, 1, u64::MAX, || {
        FarStore::new(
            fabric.clone(),
            &g.grid,
            orders,
            &Residency::all(&table, false),
            FarConfig {
                chunk_bytes,
                ..FarConfig::default()
            },
        )
    })
    .unwrap();
    for threads in [1, 2] {
        let engine = Engine::new(
            &store,
            EngineConfig {
                threads,
                buffering: true,
            },
        )
        .unwrap();
        let params = Params {
            iterations: 2,
            ..Params::default()
        };
        let r = algo::run(&engine, Algo::PageRank, g.grid.out_degree(), &params).unwrap();
        common::check(&g, &r.output, &params);
        let s = engine.stream_stats();
        let bound = threads as u64 * 2 * segment_bytes_for(chunk_bytes);
        assert!(
            s.buffer_bytes_peak > 0 && s.buffer_bytes_peak <= bound,
            "{s:?}"
        );
        // Every byte streamed came over the fabric, in chunk-sized READs.
        assert_eq!(s.bytes_fetched, 2 * g.grid.edge_bytes());
        assert!(s.fetch_ops >= s.bytes_fetched / chunk_bytes);
    }
}
