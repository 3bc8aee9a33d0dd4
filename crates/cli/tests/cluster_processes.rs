//! A real cluster: `locus cluster up` starts three `locus server` processes
//! on loopback, a client loads a graph over the client protocol, and values
//! migrate between the processes while queries run; every answer is checked
//! against a plain in-memory reference. Then bad input and a vanished
//! server: each a clear error, and the other servers keep serving.
//! Every process is started with a lifetime, so nothing outlives the test.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use locus_client::proto::{ErrorCode, Request, HEADER_BYTES};
use locus_client::{Client, ClientConfig, ClientError};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

mod common;

use common::{graph, khop_ref, load, Cluster, SERVERS, VERTICES};

#[test]
fn three_processes_migrate_while_queries_run_and_every_answer_is_right() {
    let cluster = Cluster::up();
    let c = Arc::new(cluster.client());
    let g = Arc::new(graph(7));
    load(&c, &g);
    for v in [0u32, 1, 97, 599] {
        assert_eq!(c.neighbors(v, 0).unwrap(), g[v as usize], "vertex {v}");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let checked = Arc::new(AtomicU64::new(0));
    let mut readers = Vec::new();
    for t in 0..2u64 {
        let (c, g, stop, checked) = (
            Arc::clone(&c),
            Arc::clone(&g),
            Arc::clone(&stop),
            Arc::clone(&checked),
        );
        readers.push(std::thread::spawn(move || {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(100 + t);
            while !stop.load(Ordering::Acquire) {
                let v = rng.gen_range(0..VERTICES);
                let k = rng.gen_range(1..20);
                let r = c.khop(v, 2, k as u32).unwrap();
                let (want, n) = khop_ref(&g, v, 2, k);
                assert_eq!(r.distinct, want, "2-hop from {v}, k {k}");
                assert_eq!(r.with_repeats, n);
                assert_eq!(c.neighbors(v, 0).unwrap(), g[v as usize]);
                checked.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    // Move values around: each of these vertices to every other machine in turn.
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    let mut moved = 0;
    let t0 = Instant::now();
    for round in 0..60 {
        let v = if round % 10 == 0 {
            97 * (round / 10)
        } else {
            rng.gen_range(0..VERTICES)
        };
        let to = rng.gen_range(0..SERVERS) as u8;
        let m = c.migrate(v, to).unwrap();
        assert_eq!(m.to, to);
        let at = c.locate(v).unwrap();
        assert!(at.found);
        assert_eq!(at.holder, to, "vertex {v} after migrating to {to}");
        moved += m.parts;
    }
    // Let the readers overlap the migrations for a while at least.
    while checked.load(Ordering::Relaxed) < 200 && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Release);
    for r in readers {
        r.join().unwrap();
    }
    assert!(moved > 20, "values moved between processes: {moved}");
    assert!(checked.load(Ordering::Relaxed) >= 200);
    // Updates after migration still land (forwarded to the holder) and read back.
    let v = 97u32;
    c.migrate(v, (c.home(v) + 1) % SERVERS as u8).unwrap();
    assert!(c.insert_edge(v, 5).unwrap() || g[v as usize].contains(&5));
    assert!(c.neighbors(v, 0).unwrap().contains(&5));
    assert!(c.delete_edge(v, 5).unwrap());
    assert!(!c.neighbors(v, 0).unwrap().contains(&5));
    // Statistics see the migrations.
    let away: u64 = (0..SERVERS as u8)
        .map(|id| c.stats(id).unwrap()["values_away"].as_u64().unwrap())
        .sum();
    assert!(away > 0, "some values are held away from their home");
}

/// Writes raw bytes to a server's client port after a correct handshake.
fn raw_after_handshake(addr: std::net::SocketAddr, secret: &str) -> std::net::TcpStream {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let secret = locus_fabric::auth::Secret::new(secret).unwrap();
    locus_fabric::auth::prove(&mut s, &secret, locus_fabric::auth::Listener::Client).unwrap();
    let mut hello = Vec::new();
    Request::Hello {
        client: "raw".into(),
    }
    .encode(&mut hello, 0, 1000);
    s.write_all(&hello).unwrap();
    let mut body = Vec::new();
    locus_client::proto::read_frame(&mut s, 1 << 20, &mut body).unwrap();
    s
}

fn secret_of(file: &Path) -> String {
    let t: toml::Table = std::fs::read_to_string(file).unwrap().parse().unwrap();
    t["cluster"]["secret"].as_str().unwrap().to_string()
}

#[test]
fn bad_input_gets_clear_errors_and_the_servers_keep_serving() {
    let cluster = Cluster::up();
    let c = cluster.client();
    c.put(1, &[2, 3]).unwrap();
    // Unknown vertex.
    let e = c.neighbors(4, 0).unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::UnknownVertex), "{e}");
    assert!(e.to_string().contains("server 1"), "names the server: {e}");
    // A value past the value region: FULL, nothing applied.
    let big: Vec<u32> = (0..4_000_000).collect();
    c.put(10, &big).unwrap();
    let e = c.put(7, &big).unwrap_err();
    assert!(
        matches!(e.code(), Some(ErrorCode::Full | ErrorCode::TooLarge)),
        "{e}"
    );
    assert_eq!(
        c.neighbors(7, 0).unwrap_err().code(),
        Some(ErrorCode::UnknownVertex)
    );
    // Wrong home in a LOAD batch: refused whole.
    let e = c
        .load_batch(0, vec![(3, vec![1]), (4, vec![1])], None)
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::WrongHome), "{e}");
    assert_eq!(
        c.neighbors(3, 0).unwrap_err().code(),
        Some(ErrorCode::UnknownVertex)
    );
    // Malformed body: an error reply, and the connection stays usable.
    let addr = c.address(0).unwrap();
    let mut s = raw_after_handshake(addr, &secret_of(&cluster.file()));
    let mut f = Vec::new();
    Request::Put {
        vertex: 3,
        ids: vec![1, 2],
    }
    .encode(&mut f, 1, 1000);
    f.truncate(f.len() - 3);
    let body_len = (f.len() - HEADER_BYTES) as u32;
    f[4..8].copy_from_slice(&body_len.to_le_bytes());
    s.write_all(&f).unwrap();
    let mut body = Vec::new();
    let h = locus_client::proto::read_frame(&mut s, 1 << 20, &mut body).unwrap();
    assert_eq!(h.op, locus_client::proto::ERROR_OP);
    let mut ping = Vec::new();
    Request::Ping.encode(&mut ping, 2, 1000);
    s.write_all(&ping).unwrap();
    let h = locus_client::proto::read_frame(&mut s, 1 << 20, &mut body).unwrap();
    assert_eq!(
        (h.op, h.id),
        (0x82, 2),
        "still serving on the same connection"
    );
    // Garbage header: error and close.
    s.write_all(&[0xAB; 32]).unwrap();
    let _ = locus_client::proto::read_frame(&mut s, 1 << 20, &mut body);
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    // A client with the wrong secret is refused, clearly.
    let wrong = Client::new(
        vec![addr],
        ClientConfig {
            secret: Some(locus_fabric::auth::Secret::new("not the cluster secret").unwrap()),
            ..ClientConfig::default()
        },
    )
    .unwrap();
    let e = wrong.ping(0).unwrap_err();
    assert!(matches!(e, ClientError::Auth { .. }), "{e}");
    assert!(e.to_string().contains("refused"), "{e}");
    assert!(c.stats(0).unwrap()["auth_refused"].as_u64().unwrap() >= 1);
    // Everything above left the servers serving.
    assert_eq!(c.neighbors(1, 0).unwrap(), vec![2, 3]);
    // A server killed with SIGKILL: its vertices fail naming it, the others serve.
    // SAFETY: kill(2) on a child process of this test's cluster.
    unsafe { libc::kill(cluster.pid(2) as i32, libc::SIGKILL) };
    std::thread::sleep(Duration::from_millis(200));
    let e = c.neighbors(2, 0).unwrap_err();
    assert!(matches!(e, ClientError::Unavailable { .. }), "{e}");
    assert!(e.to_string().contains("server 2"), "{e}");
    assert_eq!(c.neighbors(1, 0).unwrap(), vec![2, 3]);
}

#[test]
fn load_batches_past_their_deadline_or_the_value_region_are_refused_whole() {
    let cluster = Cluster::up_with(&["--no-coordinator"]);
    let c = cluster.client();
    let keys = |id: u8| c.stats(id).unwrap()["keys"].as_u64().unwrap();
    let home0: Vec<u32> = (0..u32::MAX)
        .filter(|&v| c.home(v) == 0)
        .take(200_000)
        .collect();
    // A batch far too large for a 1 ms deadline: DEADLINE, nothing applied.
    let batch: Vec<(u32, Vec<u32>)> = home0.iter().map(|&v| (v, vec![1, 2, 3, 4])).collect();
    let e = c
        .load_batch(0, batch, Some(Duration::from_millis(1)))
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Deadline), "{e}");
    assert!(e.to_string().contains("server 0"), "names the server: {e}");
    assert_eq!(keys(0), 0, "nothing of the batch was applied");
    // Fill server 0's 32 MiB value region until a big vertex no longer fits,
    // then a batch with a small vertex and a big one: FULL, neither applied.
    let big: Vec<u32> = (0..2_000_000).collect();
    let mut loaded = 0;
    for &v in &home0[10..30] {
        match c.load_batch(0, vec![(v, big.clone())], None) {
            Ok(_) => loaded += 1,
            Err(e) => {
                assert_eq!(e.code(), Some(ErrorCode::Full), "{e}");
                break;
            }
        }
    }
    assert!((1..20).contains(&loaded), "{loaded} big vertices fit");
    let e = c
        .load_batch(0, vec![(home0[2], vec![7]), (home0[3], big.clone())], None)
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Full), "{e}");
    assert!(e.to_string().contains("nothing applied"), "{e}");
    assert_eq!(
        c.neighbors(home0[2], 0).unwrap_err().code(),
        Some(ErrorCode::UnknownVertex)
    );
    // And the server keeps serving what it holds.
    assert_eq!(c.neighbors(home0[10], 0).unwrap().len(), big.len());
    assert!(c.load_batch(0, vec![(home0[4], vec![1])], None).is_ok());
}
