//! A server paused past its lease and resumed refuses every client request it
//! receives before it exits (issue 61 requirement 5; M2 and N1 in
//! docs/design.md).
//!
//! `locus cluster up` (etcd, 3 servers, lease TTL 3 s) with
//! `LOCUS_FENCED_EXIT_DELAY_MS`, so the fenced server stays alive a few
//! seconds before exiting instead of about 100 ms: the window this test sends
//! into is then wide enough to hit on a loaded machine. Server 1 is
//! SIGSTOPped until both survivors saw it down. Requests are sent in two
//! ways:
//! - *buffered*: written, while it is stopped, on connections it accepted
//!   before (they wait in its sockets), so its connection threads read them
//!   the moment it runs again, racing its fence thread (a request read
//!   before the fence is refused by the lease-by-own-clock check,
//!   `Lease::is_live`; in practice the fence thread usually wins). These
//!   connections must survive the pause: before `server/src/conn.rs` took
//!   `EINTR` for an idle poll, every one was reset on resume, unanswered;
//! - *after resume*: on new connections, one request each, until it exits.
//!
//! The fabric half: a peer's fabric node as server 0 would open one (the
//! cluster's secret, epoch 1) READs server 1's key region on a few
//! connections before the pause (served), once more on each while it is
//! stopped (waiting in its sockets), and on new connections after SIGCONT
//! until it exits. None may be served: refused by the listener ("serves no
//! peer") or the connection closed or refused. Before the fabric held the
//! lease's liveness (`TcpFabric::hold_lease`), a waiting READ was served on
//! resume, before the fence thread ran (most runs: it races that thread, so
//! whether the test catches that is a matter of chance per run).
//!
//! Every request must be refused: `NOT_READY` naming the fence or the lease,
//! or the connection closed or refused (it exited). An answer with data, or
//! any other error (the request ran), fails the test. At least one buffered
//! request must have been refused by the server itself, so the test cannot
//! pass without reaching it.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Cluster;
use locus_client::proto::{ErrorCode, Request};
use locus_client::{ClientError, ClientFile, Conn};
use locus_fabric::auth::{Listener, Secret};
use locus_fabric::tcp::{TcpConfig, TcpFabric, TcpPort};
use locus_fabric::{Fabric, Port, RegionId};

/// How long the fenced server stays alive (refusing) before it exits.
const FENCED_EXIT_DELAY_MS: &str = "5000";
/// Connections opened before the pause, one buffered request each.
const BUFFERED: usize = 8;
/// Fabric connections (one per port) opened before the pause, one waiting READ each.
const BUFFERED_READS: usize = 4;
/// The deadline of every request: long, so only the server ends a wait.
const DEADLINE: Duration = Duration::from_secs(30);

/// Waits (bounded) until `f` holds; panics naming `what` otherwise.
fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The third field of `/proc/PID/stat`: the process state, if it exists.
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Gone, or a zombie nobody reaped yet.
fn exited(pid: u32) -> bool {
    matches!(state(pid), None | Some('Z'))
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) on a process this test's cluster started.
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0, "kill {pid}");
}

fn server_pid(cluster: &Cluster, id: u8) -> u32 {
    let pids: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(cluster.dir.path().join("pids.json")).unwrap(),
    )
    .unwrap();
    pids.as_array()
        .unwrap()
        .iter()
        .find(|p| p["role"] == "server" && p["id"] == id)
        .unwrap()["pid"]
        .as_u64()
        .unwrap() as u32
}

/// Whether server `at` has seen `PeerDown` of machine `m` at epoch 1.
fn saw_down(c: &locus_client::Client, at: u8, m: u8) -> bool {
    let Ok(st) = c.stats(at) else { return false };
    st["membership"]["events"].as_array().is_some_and(|evs| {
        evs.iter()
            .any(|e| e["event"] == "down" && e["machine"] == m && e["epoch"] == 1)
    }) && st["membership"]["peers"][m.to_string()]["down"] == true
}

/// Reads, updates, traversals, a ping and STATS, all about vertex `v`.
fn requests(v: u32) -> Vec<Request> {
    vec![
        Request::Neighbors { vertex: v, k: 0 },
        Request::InsertEdge {
            vertex: v,
            neighbor: 7,
        },
        Request::Khop {
            vertex: v,
            hops: 2,
            k: 10,
        },
        Request::Put {
            vertex: v,
            ids: vec![1, 2, 3],
        },
        Request::DeleteEdge {
            vertex: v,
            neighbor: 9,
        },
        Request::Where { vertex: v },
        Request::Ping,
        Request::Stats,
    ]
}

/// What became of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// `NOT_READY` before the fence thread ran: the lease is not surely held.
    RefusedLease,
    /// `NOT_READY`: fenced out.
    RefusedFenced,
    /// The connection was refused or closed (the process is gone or going).
    Closed,
}

/// Classifies a reply; panics on anything but a refusal.
fn fate(req: &Request, r: Result<impl std::fmt::Debug, ClientError>) -> Fate {
    match r {
        Ok(reply) => panic!(
            "the fenced server answered {:?} with {reply:?}: it must refuse every request",
            req.op()
        ),
        Err(ClientError::Server {
            code: ErrorCode::NotReady,
            message,
            ..
        }) => {
            if message.contains("fenced out") {
                Fate::RefusedFenced
            } else if message.contains("lease") {
                Fate::RefusedLease
            } else {
                panic!("{:?}: NOT_READY but not for the fence: {message}", req.op())
            }
        }
        Err(ClientError::Unavailable { reason, .. }) => {
            eprintln!("{:?}: closed: {reason}", req.op());
            Fate::Closed
        }
        Err(e) => panic!(
            "{:?} to the fenced server: {e} (neither a refusal nor a closed connection: \
             the request ran)",
            req.op()
        ),
    }
}

/// What became of one fabric READ from the fake peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FabricFate {
    /// Refused by the fenced listener ("it serves no peer").
    Refused,
    /// The connection was refused, reset or closed.
    Closed,
}

/// A fabric node as a peer would open one: machine 0 at epoch 1 (what
/// server 0 is), on the cluster's secret, expecting server 1 at epoch 1; and
/// server 1's key region.
fn fake_peer(cluster: &Cluster) -> (TcpFabric, RegionId) {
    let file = locus_server::config::ClusterFile::load(&cluster.file()).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    // Machine ids past the servers listed (the cluster's room) have none.
    let mut peers: Vec<SocketAddr> = (0..file.machines() as u8)
        .map(|m| {
            file.server(m)
                .map_or(locus_fabric::tcp::UNASSIGNED, |s| s.fabric)
        })
        .collect();
    peers[0] = listener.local_addr().unwrap();
    let mut config = TcpConfig::new(vec![0], peers);
    config.secret = Some(file.secret().unwrap());
    // Long, so only the server ends a wait for a READ it holds unread.
    config.io_timeout_ms = 30_000;
    let fabric = TcpFabric::from_listener(config, listener).unwrap();
    fabric.set_own_epoch(1);
    fabric.set_peer_epoch(1, 1).unwrap();
    let region = fabric.lookup(1, locus_store::KEYS_REGION).unwrap().id;
    (fabric, region)
}

/// One 8-byte READ of server 1's key region on `port`; panics if it is served.
fn fabric_read(port: &mut TcpPort, region: RegionId) -> FabricFate {
    let mut word = [0u8; 8];
    match port.read(1, region, 0, &mut word) {
        Ok(()) => panic!("the fenced server served a peer's one-sided READ"),
        Err(e) if e.to_string().contains("serves no peer") => FabricFate::Refused,
        Err(e) => {
            eprintln!("fabric READ: closed: {e}");
            FabricFate::Closed
        }
    }
}

fn connect(addr: SocketAddr, secret: Option<&Secret>) -> Result<Conn, ClientError> {
    Conn::connect(
        addr,
        secret,
        Listener::Client,
        "fenced-server-test",
        Duration::from_secs(10),
    )
}

#[test]
fn a_server_resumed_after_its_lease_expired_refuses_every_request_and_fabric_op_until_it_exits() {
    let cluster = Cluster::up_with_env(
        &["--no-coordinator"],
        &[("LOCUS_FENCED_EXIT_DELAY_MS", FENCED_EXIT_DELAY_MS)],
    );
    let c = cluster.client();
    let file = ClientFile::load(&cluster.file()).unwrap();
    let addr = file.servers[1];
    let secret = file.secret.as_ref();
    let v = (0..).find(|&v| c.home(v) == 1).unwrap();
    c.put(v, &[9]).unwrap();
    assert_eq!(c.neighbors(v, 0).unwrap(), vec![9], "server 1 serves");

    // A peer's fabric connections (a port's each), and a READ each serves while live.
    let (fabric, region) = fake_peer(&cluster);
    let ports: Vec<TcpPort> = (0..BUFFERED_READS)
        .map(|_| {
            let mut port = fabric.port(0).unwrap();
            let mut word = [0u8; 8];
            port.read(1, region, 0, &mut word)
                .expect("server 1 serves a peer's READ before the pause");
            port
        })
        .collect();

    // Connections it accepted and said HELLO on, before the pause.
    let mut conns: Vec<Conn> = (0..BUFFERED)
        .map(|_| connect(addr, secret).unwrap())
        .collect();
    let pid = server_pid(&cluster, 1);
    signal(pid, libc::SIGSTOP);
    wait_for("server 1 is stopped", Duration::from_secs(5), || {
        state(pid) == Some('T')
    });
    wait_for(
        "both survivors see PeerDown of the stopped server 1 at epoch 1",
        Duration::from_secs(30),
        || saw_down(&c, 0, 1) && saw_down(&c, 2, 1),
    );
    assert_eq!(
        state(pid),
        Some('T'),
        "still stopped: its lease has expired"
    );

    // One request per accepted connection, written while it is stopped.
    let kinds = requests(v);
    let writing = Arc::new(AtomicUsize::new(0));
    let buffered: Vec<_> = conns
        .drain(..)
        .enumerate()
        .map(|(i, mut conn)| {
            let req = kinds[i % kinds.len()].clone();
            let writing = Arc::clone(&writing);
            std::thread::spawn(move || {
                writing.fetch_add(1, Ordering::AcqRel);
                let r = conn.call(&req, DEADLINE);
                fate(&req, r)
            })
        })
        .collect();
    // A fabric READ on each of the peer's open connections, also waiting in
    // its sockets.
    let buffered_reads: Vec<_> = ports
        .into_iter()
        .map(|mut port| {
            let writing = Arc::clone(&writing);
            std::thread::spawn(move || {
                writing.fetch_add(1, Ordering::AcqRel);
                fabric_read(&mut port, region)
            })
        })
        .collect();
    wait_for(
        "the buffered requests are written",
        Duration::from_secs(10),
        || writing.load(Ordering::Acquire) == BUFFERED + BUFFERED_READS,
    );
    // Loopback writes of a few bytes complete at once; one that comes later
    // is still a request sent after the resume, checked the same way.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(state(pid), Some('T'), "still stopped before SIGCONT");

    signal(pid, libc::SIGCONT);
    let resumed = Instant::now();
    // New connections, one request each, until it exits.
    let mut after: Vec<Fate> = Vec::new();
    let mut after_reads: Vec<FabricFate> = Vec::new();
    let mut i = 0;
    while !exited(pid) {
        assert!(
            resumed.elapsed() < Duration::from_secs(60),
            "the fenced server has not exited 60 s after SIGCONT"
        );
        let req = &kinds[i % kinds.len()];
        i += 1;
        let f = match connect(addr, secret) {
            Ok(mut conn) => fate(req, conn.call(req, DEADLINE)),
            // It went away during the handshake: no request was sent.
            Err(ClientError::Auth { reason, .. }) => {
                eprintln!("connect: closed at the handshake: {reason}");
                Fate::Closed
            }
            Err(e) => fate(req, Err::<(), _>(e)),
        };
        after.push(f);
        after_reads.push(fabric_read(&mut fabric.port(0).unwrap(), region));
        std::thread::sleep(Duration::from_millis(20));
    }
    let gone = resumed.elapsed();
    let buffered: Vec<Fate> = buffered
        .into_iter()
        .map(|t| t.join().expect("a buffered request's thread"))
        .collect();
    let buffered_reads: Vec<FabricFate> = buffered_reads
        .into_iter()
        .map(|t| t.join().expect("a buffered READ's thread"))
        .collect();

    let count = |fs: &[Fate], f: Fate| fs.iter().filter(|&&x| x == f).count();
    println!(
        "server 1 exited {:.2} s after SIGCONT; buffered: {} refused (lease), {} refused \
         (fenced), {} closed; after resume: {} requests, {} refused (lease), {} refused \
         (fenced), {} closed",
        gone.as_secs_f64(),
        count(&buffered, Fate::RefusedLease),
        count(&buffered, Fate::RefusedFenced),
        count(&buffered, Fate::Closed),
        after.len(),
        count(&after, Fate::RefusedLease),
        count(&after, Fate::RefusedFenced),
        count(&after, Fate::Closed),
    );
    let reads = |f: FabricFate| after_reads.iter().filter(|&&x| x == f).count();
    println!(
        "fabric: buffered READs {buffered_reads:?}; after resume: {} READs, {} refused, {} closed",
        after_reads.len(),
        reads(FabricFate::Refused),
        reads(FabricFate::Closed)
    );
    // Not vacuous: the server itself refused requests it had received.
    let refused = |fs: &[Fate]| fs.len() - count(fs, Fate::Closed);
    assert!(
        refused(&buffered) >= 1,
        "no buffered request was refused by the server: {buffered:?}"
    );
    assert!(
        refused(&after) >= 1,
        "no request sent after the resume reached the fenced server: {after:?}"
    );
    let log =
        std::fs::read_to_string(cluster.dir.path().join("logs").join("server-1.log")).unwrap();
    assert!(log.contains("fenced out"), "{log}");
    assert!(log.contains("LOCUS_FENCED_EXIT_DELAY_MS"), "{log}");
    // The survivors still serve, and still hold server 1's old epoch down.
    let w = (0..).find(|&w| c.home(w) == 0).unwrap();
    c.put(w, &[4]).unwrap();
    assert_eq!(c.neighbors(w, 0).unwrap(), vec![4]);
    assert!(saw_down(&c, 0, 1) && saw_down(&c, 2, 1));
}
