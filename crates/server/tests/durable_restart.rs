//! Durability in one test process (two `Server`s over loopback TCP): every
//! acknowledged update, single or LOAD, comes back after the servers stop
//! and start again on the same directory, through checkpoints and the log,
//! with every value back at its home; updates sent past the home are
//! refused; bad `[durability]` settings name their key.

mod common;

use common::free;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use locus_client::proto::{ErrorCode, Request};
use locus_client::{Client, ClientConfig};
use locus_fabric::auth::Secret;
use locus_server::config::{ClusterSection, DurabilitySection, ServerEntry};
use locus_server::{ClusterFile, Server};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const SECRET: &str = "durable restart test secret";
const VERTICES: u32 = 400;

fn cluster_file(dir: &std::path::Path, machines: u8, sync: &str) -> ClusterFile {
    let mut f = ClusterFile {
        cluster: ClusterSection {
            secret: Some(SECRET.into()),
            max_servers: None,
        },
        servers: (0..machines)
            .map(|id| ServerEntry {
                id,
                fabric: free(),
                client: free(),
                metrics: None,
            })
            .collect(),
        coordinator: None,
        store: Default::default(),
        policy: Default::default(),
        limits: Default::default(),
        durability: Some(DurabilitySection {
            dir: dir.join("data"),
            sync: sync.into(),
            checkpoint_interval_s: 1,
            ..DurabilitySection::default()
        }),
        recovery: Default::default(),
        etcd: None,
        replication: Default::default(),
    };
    f.store.value_region_mb = Some(16);
    f.store.cache_mb = 4;
    f.store.part_neighbors_max = 16; // long lists become several parts
    f.validate().unwrap();
    f
}

fn start(file: &ClusterFile) -> Vec<Server> {
    let handles: Vec<_> = (0..file.machines() as u8)
        .map(|id| {
            let f = file.clone();
            std::thread::spawn(move || Server::start(f, id).unwrap())
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

fn client(servers: &[Server]) -> Client {
    Client::new(
        servers.iter().map(|s| s.client_addr()).collect(),
        ClientConfig {
            secret: Some(Secret::new(SECRET).unwrap()),
            ..ClientConfig::default()
        },
    )
    .unwrap()
}

fn stat(c: &Client, id: u8, key: &str) -> u64 {
    c.stats(id).unwrap()["durability"][key].as_u64().unwrap()
}

/// Random updates of every kind, each applied to `model` once acknowledged.
fn updates(c: &Client, model: &mut HashMap<u32, Vec<u32>>, rng: &mut Xoshiro256PlusPlus, n: usize) {
    for _ in 0..n {
        let v = rng.gen_range(0..VERTICES);
        match rng.gen_range(0..10) {
            0..=2 => {
                let len = if rng.gen_bool(0.1) {
                    40
                } else {
                    rng.gen_range(0..6)
                };
                let l: Vec<u32> = (0..len).map(|_| rng.gen_range(0..VERTICES)).collect();
                c.put(v, &l).unwrap();
                model.insert(v, l);
            }
            3..=6 => {
                let u = rng.gen_range(0..VERTICES);
                let changed = c.insert_edge(v, u).unwrap();
                let l = model.entry(v).or_default();
                assert_eq!(changed, !l.contains(&u), "insert {v} -> {u}");
                if changed {
                    l.push(u);
                }
            }
            _ => {
                let Some(l) = model.get_mut(&v) else { continue };
                let u = if l.is_empty() || rng.gen_bool(0.3) {
                    rng.gen_range(0..VERTICES)
                } else {
                    l[rng.gen_range(0..l.len())]
                };
                let changed = c.delete_edge(v, u).unwrap();
                assert_eq!(changed, l.contains(&u), "delete {v} -> {u}");
                l.retain(|&x| x != u);
            }
        }
    }
}

fn check(c: &Client, model: &HashMap<u32, Vec<u32>>, when: &str) {
    for (&v, l) in model {
        let got = c.neighbors(v, 0).unwrap();
        assert_eq!(&got, l, "{when}: vertex {v}");
        let at = c.locate(v).unwrap();
        assert!(at.found, "{when}: vertex {v}");
    }
}

#[test]
fn acknowledged_updates_come_back_after_restarts_through_checkpoints_and_the_log() {
    let seed = 0x15d;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let file = cluster_file(dir.path(), 2, "always");
    let mut model: HashMap<u32, Vec<u32>> = HashMap::new();
    let servers = start(&file);
    let c = client(&servers);
    // A LOAD batch per home, logged as one record each.
    for home in 0..2u8 {
        let batch: Vec<(u32, Vec<u32>)> = (0..VERTICES)
            .filter(|&v| v % 2 == home as u32)
            .map(|v| (v, vec![(v + 1) % VERTICES, (v + 7) % VERTICES]))
            .collect();
        for (v, l) in &batch {
            model.insert(*v, l.clone());
        }
        c.load_batch(home, batch, None).unwrap();
    }
    updates(&c, &mut model, &mut rng, 600);
    // Values migrated away from their home must come back home on recovery.
    let moved: Vec<u32> = (0..VERTICES).step_by(5).collect();
    for &v in &moved {
        c.migrate(v, 1 - c.home(v)).unwrap();
    }
    updates(&c, &mut model, &mut rng, 300);
    // Wait (bounded) for a checkpoint on both servers, then log more on top.
    let t0 = Instant::now();
    while (0..2).any(|id| stat(&c, id, "checkpoints") == 0) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no checkpoint within 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    updates(&c, &mut model, &mut rng, 300);
    check(&c, &model, "before the restart");
    drop(c);
    drop(servers);

    let servers = start(&file);
    let c = client(&servers);
    check(
        &c,
        &model,
        &format!("after the first restart (seed {seed:#x})"),
    );
    for id in 0..2 {
        assert!(stat(&c, id, "recovered_vertices") > 0);
        assert!(
            stat(&c, id, "recovered_checkpoint_entries") > 0,
            "server {id} read no checkpoint"
        );
    }
    for &v in &moved {
        let at = c.locate(v).unwrap();
        assert_eq!(at.holder, at.home, "vertex {v} not back at home");
    }
    drop(c);
    drop(servers);

    // No checkpoint now: the next restart must replay these from the log.
    let mut file = file;
    file.durability.as_mut().unwrap().checkpoint_interval_s = 3600;
    let servers = start(&file);
    let c = client(&servers);
    check(
        &c,
        &model,
        &format!("after the second restart (seed {seed:#x})"),
    );
    updates(&c, &mut model, &mut rng, 300);
    drop(c);
    drop(servers);

    let servers = start(&file);
    let c = client(&servers);
    check(
        &c,
        &model,
        &format!("after the third restart (seed {seed:#x})"),
    );
    for id in 0..2 {
        assert!(
            stat(&c, id, "recovered_records") > 0,
            "server {id} replayed no log"
        );
    }
}

#[test]
fn with_durability_an_update_sent_past_its_home_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = cluster_file(dir.path(), 2, "interval");
    let servers = start(&file);
    let c = client(&servers);
    c.put(3, &[1, 2]).unwrap();
    let not_home = 1 - c.home(3);
    for req in [
        Request::Put {
            vertex: 3,
            ids: vec![9],
        },
        Request::InsertEdge {
            vertex: 3,
            neighbor: 9,
        },
        Request::DeleteEdge {
            vertex: 3,
            neighbor: 1,
        },
    ] {
        let e = c.call(not_home, &req, None).unwrap_err();
        assert_eq!(e.code(), Some(ErrorCode::WrongHome), "{e}");
        assert!(e.to_string().contains("durability"), "{e}");
    }
    assert_eq!(c.neighbors(3, 0).unwrap(), vec![1, 2]);
}

#[test]
fn bad_durability_settings_name_their_key() {
    let dir = tempfile::tempdir().unwrap();
    let good = cluster_file(dir.path(), 1, "always");
    type Spoil = fn(&mut DurabilitySection);
    let cases: [(&str, Spoil); 4] = [
        ("durability.sync", |d| d.sync = "sometimes".into()),
        ("durability.interval_ms", |d| {
            d.sync = "interval".into();
            d.interval_ms = 0;
        }),
        ("durability.checkpoint_interval_s", |d| {
            d.checkpoint_interval_s = 0
        }),
        ("durability.dir", |d| d.dir = "".into()),
    ];
    for (key, bad) in cases {
        let mut f = good.clone();
        bad(f.durability.as_mut().unwrap());
        let e = f.validate().unwrap_err().to_string();
        assert!(e.starts_with(key), "{key}: {e}");
    }
    // Through the file: relative directories are relative to it.
    let path = dir.path().join("cluster.toml");
    let mut f = good.clone();
    f.durability.as_mut().unwrap().dir = "state".into();
    f.write(&path).unwrap();
    let back = ClusterFile::load(&path).unwrap();
    assert_eq!(back.durability.unwrap().dir, dir.path().join("state"));
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("\"always\"", "\"never\"");
    std::fs::write(&path, text).unwrap();
    let e = ClusterFile::load(&path).unwrap_err().to_string();
    assert!(e.contains("durability.sync"), "{e}");
}

#[test]
fn a_corrupt_log_stops_the_start_naming_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut file = cluster_file(dir.path(), 1, "always");
    // No checkpoint may take the records out of the log first.
    file.durability.as_mut().unwrap().checkpoint_interval_s = 3600;
    {
        let servers = start(&file);
        let c = client(&servers);
        for v in 0..50 {
            c.put(v, &[v + 1, v + 2, v + 3]).unwrap();
        }
    }
    let sdir = file.durability.as_ref().unwrap().server_dir(0);
    let mut segs: Vec<_> = std::fs::read_dir(&sdir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "wal") && std::fs::metadata(p).unwrap().len() > 100
        })
        .collect();
    segs.sort();
    let seg = segs.pop().expect("a segment with records");
    let mut bytes = std::fs::read(&seg).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x5A;
    std::fs::write(&seg, &bytes).unwrap();
    let e = Server::start(file.clone(), 0)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        e.contains(&seg.display().to_string()) && e.contains("byte offset"),
        "{e}"
    );
}
