//! The lab's network and faults, checked by real processes: this test binary
//! runs itself inside a node's namespace (`child_role`) as a TCP listener, a
//! TCP client, a UDP receiver or sender, or the holder of a lab that is then
//! killed. These tests need root, `ip` and `iptables`, and fail, never skip,
//! without them (`scripts/setup` installs the tools).
//!
//! Behaviour, not timing: a check that something gets through waits long
//! (seconds, so a loaded machine passes), a check that something is cut
//! waits short (a dropped packet never arrives, however long one waits);
//! the one timing check is a lower bound (a delay of 100 ms cannot make a
//! round trip shorter than 100 ms). Each test bounds its waits and undoes
//! its lab by `Drop`, also when it panics.

use std::io::{BufRead, BufReader, Read};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use locus_netlab::{Netem, Netlab, NetlabError, NetlabSpec, Party, NODES_MAX};

const TCP_PORT: u16 = 7000;
const UDP_PORT: u16 = 7001;
/// How long a check that must get through may wait.
const THROUGH_MS: u64 = 10_000;
/// How long a check that must be cut waits before it says "cut".
const CUT_MS: u64 = 500;
/// How long a child process lives at most, should its parent forget it.
const CHILD_LIFETIME_MS: u64 = 60_000;
/// The environment variable that gives a child its role.
const ROLE_VAR: &str = "LOCUS_NETLAB_CHILD_ROLE";
const READY: &str = "netlab-child ready";

fn lab(nodes: usize) -> Netlab {
    Netlab::create(NetlabSpec::new(nodes)).unwrap_or_else(|e| panic!("cannot make a lab: {e}"))
}

// ---- the child processes ----

/// Not a check: the body of a child process started by the other tests
/// (this binary, run with this test's name and `LOCUS_NETLAB_CHILD_ROLE`).
/// Without the variable it does nothing.
#[test]
fn child_role() {
    let Ok(role) = std::env::var(ROLE_VAR) else {
        return;
    };
    // However its parent fares, a child stops by itself.
    thread::spawn(|| {
        thread::sleep(Duration::from_millis(CHILD_LIFETIME_MS));
        std::process::exit(2);
    });
    let words: Vec<&str> = role.split_whitespace().collect();
    let code = match words.as_slice() {
        ["listen", addr] => {
            let listener = TcpListener::bind(addr).expect("bind");
            println!("{READY}");
            for stream in listener.incoming() {
                drop(stream);
            }
            0
        }
        ["connect", addr, timeout_ms] => {
            let addr: SocketAddr = addr.parse().expect("address");
            let timeout = Duration::from_millis(timeout_ms.parse().expect("ms"));
            match TcpStream::connect_timeout(&addr, timeout) {
                Ok(_) => 0,
                Err(e) => {
                    println!("connect {addr}: {e}");
                    3
                }
            }
        }
        ["udp-recv", addr, window_ms] => {
            let socket = UdpSocket::bind(addr).expect("bind");
            socket
                .set_read_timeout(Some(Duration::from_millis(window_ms.parse().expect("ms"))))
                .expect("timeout");
            println!("{READY}");
            let mut buffer = [0u8; 64];
            if socket.recv(&mut buffer).is_ok() {
                0
            } else {
                3
            }
        }
        ["udp-send", addr, window_ms] => {
            let never = AtomicBool::new(false);
            send_for(
                addr.parse().expect("address"),
                None,
                window_ms.parse().expect("ms"),
                &never,
            );
            0
        }
        ["hold", nodes] => {
            let lab = lab(nodes.parse().expect("nodes"));
            println!(
                "{READY} {} {} {}",
                lab.tag(),
                lab.host_link(),
                lab.host_addr()
            );
            // Until the parent closes stdin (Kid::finish); then Drop.
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
            drop(lab);
            0
        }
        _ => panic!("unknown role {role:?}"),
    };
    std::process::exit(code);
}

/// A child process, ended and reaped when dropped: a holder of a lab is
/// asked to tear it down first (its stdin closed), so a failing test leaves
/// no lab behind; any other child is killed.
struct Kid {
    child: Child,
    lines: mpsc::Receiver<String>,
    holds_a_lab: bool,
}

impl Drop for Kid {
    fn drop(&mut self) {
        if self.holds_a_lab {
            drop(self.child.stdin.take());
            let deadline = Instant::now() + Duration::from_millis(THROUGH_MS);
            while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
                thread::sleep(Duration::from_millis(5));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Kid {
    /// Runs this binary as `role`, in node `node`'s namespace or, for
    /// `None`, here in the root namespace.
    fn start(lab: Option<(&Netlab, usize)>, role: &str) -> Kid {
        let exe = std::env::current_exe().expect("the test binary");
        let mut command = match lab {
            Some((lab, node)) => lab.command(node, exe),
            None => Command::new(exe),
        };
        command
            .args(["child_role", "--exact", "--nocapture", "--test-threads=1"])
            .env(ROLE_VAR, role)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = command.spawn().expect("spawn a child");
        let stdout = child.stdout.take().expect("piped");
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Kid {
            child,
            lines,
            holds_a_lab: role.starts_with("hold"),
        }
    }

    /// Waits for the child's ready line and returns what follows READY.
    fn ready(&self) -> String {
        let deadline = Instant::now() + Duration::from_millis(THROUGH_MS);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    // The harness may have begun the line ("test child_role ... ").
                    if let Some((_, rest)) = line.split_once(READY) {
                        return rest.trim().to_string();
                    }
                }
                Err(_) => panic!("a child was not ready within {THROUGH_MS} ms"),
            }
        }
    }

    /// Closes the child's stdin (a holder then tears its lab down and
    /// exits) and returns its exit code.
    fn finish(mut self) -> i32 {
        drop(self.child.stdin.take());
        self.exit_code(THROUGH_MS)
    }

    /// Kills the child with SIGKILL at once: no `Drop` runs in it.
    fn kill(mut self) {
        self.holds_a_lab = false;
    }

    /// The exit code, waiting at most `limit_ms`.
    fn exit_code(&mut self, limit_ms: u64) -> i32 {
        let deadline = Instant::now() + Duration::from_millis(limit_ms);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status.code().unwrap_or(-1);
            }
            assert!(Instant::now() < deadline, "a child ran past {limit_ms} ms");
            thread::sleep(Duration::from_millis(5));
        }
    }
}

/// A TCP listener on every address of node `node` (its link and its loopback).
fn listen(lab: &Netlab, node: usize) -> Kid {
    let kid = Kid::start(Some((lab, node)), &format!("listen 0.0.0.0:{TCP_PORT}"));
    kid.ready();
    kid
}

/// Sends a datagram to `to` every 20 ms for `window_ms`, from `from` (or
/// any address), until `stop` is set.
fn send_for(to: SocketAddr, from: Option<Ipv4Addr>, window_ms: u64, stop: &AtomicBool) {
    let socket = UdpSocket::bind((from.unwrap_or(Ipv4Addr::UNSPECIFIED), 0)).expect("bind");
    let deadline = Instant::now() + Duration::from_millis(window_ms);
    while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
        // A send may fail while the path is cut (no ARP answer yet); keep on.
        let _ = socket.send_to(b"probe", to);
        thread::sleep(Duration::from_millis(20));
    }
}

// ---- what the tests observe ----

/// Whether a TCP connection from `from` to node `to` completes within
/// `timeout_ms` (node `to` must have a listener).
fn connects(lab: &Netlab, from: Party, to: usize, timeout_ms: u64) -> bool {
    let addr = SocketAddr::V4(SocketAddrV4::new(lab.addr(to), TCP_PORT));
    match from {
        Party::Host => TcpStream::connect_timeout(&addr, Duration::from_millis(timeout_ms)).is_ok(),
        Party::Node(node) => {
            let mut kid = Kid::start(Some((lab, node)), &format!("connect {addr} {timeout_ms}"));
            kid.exit_code(timeout_ms + THROUGH_MS) == 0
        }
    }
}

fn assert_connects(lab: &Netlab, from: Party, to: usize) {
    assert!(
        connects(lab, from, to, THROUGH_MS),
        "{from:?} cannot connect to node {to}"
    );
}

fn assert_cut(lab: &Netlab, from: Party, to: usize) {
    assert!(
        !connects(lab, from, to, CUT_MS),
        "{from:?} still connects to node {to}"
    );
}

/// Whether a UDP datagram from `from` reaches `to` within `window_ms`: one
/// direction only, as TCP (which needs both) cannot show.
fn delivers(lab: &Netlab, from: Party, to: Party, window_ms: u64) -> bool {
    let mut host_receiver = None;
    let mut node_receiver = None;
    let dest = match to {
        Party::Host => {
            let socket = UdpSocket::bind((lab.host_addr(), 0)).expect("bind on the host address");
            socket
                .set_read_timeout(Some(Duration::from_millis(window_ms)))
                .expect("timeout");
            let dest = socket.local_addr().expect("address");
            host_receiver = Some(socket);
            dest
        }
        Party::Node(node) => {
            let kid = Kid::start(
                Some((lab, node)),
                &format!("udp-recv 0.0.0.0:{UDP_PORT} {window_ms}"),
            );
            kid.ready();
            node_receiver = Some(kid);
            SocketAddr::V4(SocketAddrV4::new(lab.addr(node), UDP_PORT))
        }
    };
    // The host's sender is a thread, stopped and joined before this returns:
    // once the lab is gone, its addresses would route to the default route.
    let stop = Arc::new(AtomicBool::new(false));
    let (host_sender, _node_sender) = match from {
        Party::Host => {
            let (host, stop) = (lab.host_addr(), Arc::clone(&stop));
            let sender = thread::spawn(move || send_for(dest, Some(host), window_ms, &stop));
            (Some(sender), None)
        }
        Party::Node(node) => {
            let kid = Kid::start(Some((lab, node)), &format!("udp-send {dest} {window_ms}"));
            (None, Some(kid))
        }
    };
    let delivered = match (host_receiver, node_receiver) {
        (Some(socket), _) => socket.recv(&mut [0u8; 64]).is_ok(),
        (_, Some(mut kid)) => kid.exit_code(window_ms + THROUGH_MS) == 0,
        _ => unreachable!("one receiver was made"),
    };
    stop.store(true, Ordering::Relaxed);
    if let Some(sender) = host_sender {
        sender.join().expect("the sender thread");
    }
    delivered
}

fn assert_delivers(lab: &Netlab, from: Party, to: Party) {
    assert!(
        delivers(lab, from, to, THROUGH_MS),
        "{from:?} -> {to:?} does not get through"
    );
}

fn assert_dropped(lab: &Netlab, from: Party, to: Party) {
    assert!(
        !delivers(lab, from, to, CUT_MS),
        "{from:?} -> {to:?} still gets through"
    );
}

/// What of lab `tag` is left in the root namespace: its namespaces
/// (`locus-<tag>-...`) and interfaces whose alias names it (the interface's
/// name, `locusX`, may already be another lab's).
fn leftovers(tag: &str) -> Vec<String> {
    let run = |args: &[&str]| {
        let out = Command::new("ip").args(args).output().expect("ip runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let prefix = format!("locus-{tag}-");
    let alias = format!("alias locus-netlab {tag}");
    let namespaces = run(&["netns", "list"]);
    let links = run(&["-o", "link", "show"]);
    namespaces
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| name.starts_with(&prefix))
        .map(str::to_string)
        .chain(
            links
                .lines()
                .filter(|line| line.trim_end().ends_with(&alias))
                .map(str::to_string),
        )
        .collect()
}

fn assert_gone(tag: &str) {
    let left = leftovers(tag);
    assert!(left.is_empty(), "lab {tag} left behind: {left:#?}");
}

// ---- the scenarios ----

#[test]
fn host_and_nodes_reach_each_other() {
    let lab = lab(3);
    let _listener = listen(&lab, 0);
    assert_connects(&lab, Party::Host, 0);
    assert_connects(&lab, Party::Node(1), 0);
    assert_connects(&lab, Party::Node(2), 0);
    // A node's own loopback is its own.
    let loopback = Kid::start(
        Some((&lab, 0)),
        &format!("connect 127.0.0.1:{TCP_PORT} {THROUGH_MS}"),
    );
    assert_eq!({ loopback }.exit_code(2 * THROUGH_MS), 0);
}

#[test]
fn partition_cuts_its_sides_apart_and_nothing_else() {
    let lab = lab(3);
    let _listeners = [listen(&lab, 0), listen(&lab, 1)];
    assert_connects(&lab, Party::Node(1), 0);
    lab.partition(&[Party::Node(0)], &[Party::Node(1)])
        .expect("partition");
    assert_cut(&lab, Party::Node(1), 0);
    assert_cut(&lab, Party::Node(0), 1);
    assert_connects(&lab, Party::Host, 0);
    assert_connects(&lab, Party::Host, 1);
    assert_connects(&lab, Party::Node(2), 0);
    assert_connects(&lab, Party::Node(2), 1);
}

#[test]
fn partition_drops_both_directions() {
    let lab = lab(2);
    lab.partition(&[Party::Node(0)], &[Party::Node(1), Party::Host])
        .expect("partition");
    assert_dropped(&lab, Party::Node(0), Party::Node(1));
    assert_dropped(&lab, Party::Node(1), Party::Node(0));
    assert_dropped(&lab, Party::Node(0), Party::Host);
    assert_dropped(&lab, Party::Host, Party::Node(0));
    assert_delivers(&lab, Party::Host, Party::Node(1));
    assert_delivers(&lab, Party::Node(1), Party::Host);
}

#[test]
fn heal_removes_every_cut() {
    let lab = lab(3);
    let _listener = listen(&lab, 0);
    lab.partition(&[Party::Node(0)], &[Party::Node(1)])
        .expect("partition");
    lab.isolate(0).expect("isolate");
    lab.drop_one_way(Party::Node(2), Party::Node(0))
        .expect("drop");
    assert_cut(&lab, Party::Node(1), 0);
    lab.heal().expect("heal");
    assert_connects(&lab, Party::Node(1), 0);
    assert_connects(&lab, Party::Node(2), 0);
    assert_connects(&lab, Party::Host, 0);
}

#[test]
fn isolate_cuts_the_host_too() {
    let lab = lab(3);
    let _listeners = [listen(&lab, 0), listen(&lab, 1)];
    lab.isolate(0).expect("isolate");
    assert_cut(&lab, Party::Host, 0);
    assert_cut(&lab, Party::Node(1), 0);
    assert_cut(&lab, Party::Node(0), 1);
    assert_connects(&lab, Party::Host, 1);
    assert_connects(&lab, Party::Node(2), 1);
}

#[test]
fn drop_one_way_drops_one_direction_only() {
    let lab = lab(2);
    lab.drop_one_way(Party::Node(0), Party::Node(1))
        .expect("drop");
    lab.drop_one_way(Party::Host, Party::Node(0)).expect("drop");
    lab.drop_one_way(Party::Node(1), Party::Host).expect("drop");
    assert_dropped(&lab, Party::Node(0), Party::Node(1));
    assert_delivers(&lab, Party::Node(1), Party::Node(0));
    assert_dropped(&lab, Party::Host, Party::Node(0));
    assert_delivers(&lab, Party::Node(0), Party::Host);
    assert_dropped(&lab, Party::Node(1), Party::Host);
    assert_delivers(&lab, Party::Host, Party::Node(1));
}

#[test]
fn netem_delay_holds_a_round_trip_at_least_the_delay() {
    let lab = lab(2);
    let _listener = listen(&lab, 0);
    assert_connects(&lab, Party::Host, 0);
    let addr = SocketAddr::V4(SocketAddrV4::new(lab.addr(0), TCP_PORT));
    let round_trip = || {
        let started = Instant::now();
        TcpStream::connect_timeout(&addr, Duration::from_millis(THROUGH_MS)).expect("connect");
        started.elapsed()
    };
    let delay = Netem {
        delay_ms: 100,
        ..Netem::default()
    };
    lab.netem(0, delay).expect("netem");
    for _ in 0..3 {
        let took = round_trip();
        assert!(
            took >= Duration::from_millis(100),
            "a round trip took {took:?}"
        );
    }
    let jittered = Netem {
        delay_ms: 100,
        jitter_ms: 50,
        seed: 61,
        ..Netem::default()
    };
    lab.netem(0, jittered).expect("netem replaces netem");
    for _ in 0..3 {
        let took = round_trip();
        assert!(
            took >= Duration::from_millis(50),
            "a round trip took {took:?}"
        );
    }
    lab.clear_netem(0).expect("clear");
    assert_connects(&lab, Party::Host, 0);
}

#[test]
fn netem_loss_hits_one_link_only_and_clear_restores_it() {
    let lab = lab(2);
    let _listeners = [listen(&lab, 0), listen(&lab, 1)];
    let lose_all = Netem {
        loss_pct: 100.0,
        ..Netem::default()
    };
    lab.netem(0, lose_all).expect("netem");
    assert_cut(&lab, Party::Host, 0);
    assert_cut(&lab, Party::Node(1), 0);
    assert_connects(&lab, Party::Host, 1);
    // Node 0's loopback does not pass its link.
    let loopback = Kid::start(
        Some((&lab, 0)),
        &format!("connect 127.0.0.1:{TCP_PORT} {THROUGH_MS}"),
    );
    assert_eq!({ loopback }.exit_code(2 * THROUGH_MS), 0);
    lab.clear_netem(0).expect("clear");
    assert_connects(&lab, Party::Host, 0);
    assert_connects(&lab, Party::Node(1), 0);
    lab.clear_netem(0).expect("clearing twice is fine");
}

#[test]
fn teardown_removes_every_name_and_kills_leftover_processes() {
    let lab = lab(2);
    let tag = lab.tag();
    assert_eq!(leftovers(&tag).len(), 4, "a link and three namespaces");
    lab.isolate(1).expect("isolate");
    lab.netem(
        0,
        Netem {
            delay_ms: 10,
            ..Netem::default()
        },
    )
    .expect("netem");
    let mut listener = listen(&lab, 0);
    lab.close().expect("every part goes");
    assert_gone(&tag);
    assert_ne!(listener.exit_code(THROUGH_MS), 0, "the listener was killed");
}

#[test]
fn a_panicking_test_still_tears_its_lab_down() {
    let (tx, rx) = mpsc::channel();
    let panicked = thread::spawn(move || {
        let lab = lab(2);
        tx.send(lab.tag()).expect("send");
        lab.isolate(0).expect("isolate");
        panic!("a test failing with its lab up");
    })
    .join();
    assert!(panicked.is_err());
    assert_gone(&rx.recv().expect("the tag"));
}

#[test]
fn sweep_removes_the_lab_of_a_dead_process() {
    let holder = Kid::start(None, "hold 2");
    let ready = holder.ready();
    let tag = ready.split_whitespace().next().expect("a tag").to_string();
    assert_eq!(leftovers(&tag).len(), 4, "a link and three namespaces");
    // SIGKILL: no Drop runs, as when a test run is killed.
    holder.kill();
    Netlab::sweep().expect("sweep");
    assert_gone(&tag);
}

#[test]
fn two_labs_at_once_do_not_clash() {
    let other = thread::spawn(|| lab(2));
    let first = lab(2);
    let second = other.join().expect("the other lab");
    assert_ne!(first.host_addr(), second.host_addr());
    assert_ne!(first.host_link(), second.host_link());
    assert_ne!(first.namespace(0), second.namespace(0));
    let _listeners = [listen(&first, 0), listen(&second, 0)];
    first.isolate(0).expect("isolate");
    assert_cut(&first, Party::Host, 0);
    assert_connects(&second, Party::Host, 0);
    assert_connects(&second, Party::Node(1), 0);
}

#[test]
fn labs_made_by_processes_at_once_do_not_clash() {
    // Three processes choose a /24 at the same moment: the interface name
    // locusX is the claim, so each gets its own.
    let holders: Vec<Kid> = (0..3).map(|_| Kid::start(None, "hold 1")).collect();
    // Each ready line: tag, link, host address.
    let readies: Vec<Vec<String>> = holders
        .iter()
        .map(|holder| {
            holder
                .ready()
                .split_whitespace()
                .map(str::to_string)
                .collect()
        })
        .collect();
    for ready in &readies {
        assert_eq!(leftovers(&ready[0]).len(), 3, "a link and two namespaces");
    }
    for column in [1, 2] {
        let mut seen: Vec<&str> = readies.iter().map(|r| r[column].as_str()).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 3, "{readies:?}");
    }
    for holder in holders {
        assert_eq!(holder.finish(), 0, "a holder tears its lab down and exits");
    }
    for ready in &readies {
        assert_gone(&ready[0]);
    }
}

#[test]
fn bad_specs_and_faults_are_refused_by_name() {
    for nodes in [0, NODES_MAX + 1] {
        match Netlab::create(NetlabSpec::new(nodes)) {
            Err(NetlabError::NodeCount { .. }) => {}
            Err(e) => panic!("{nodes} nodes: expected NodeCount, got {e}"),
            Ok(_) => panic!("{nodes} nodes: a lab was made"),
        }
    }
    let lab = lab(2);
    assert!(matches!(
        lab.partition(&[Party::Node(0)], &[Party::Node(2)]),
        Err(NetlabError::NoSuchNode { node: 2, nodes: 2 })
    ));
    assert!(matches!(
        lab.partition(&[Party::Node(0), Party::Host], &[Party::Host]),
        Err(NetlabError::SameParty { party: Party::Host })
    ));
    assert!(matches!(
        lab.drop_one_way(Party::Node(1), Party::Node(1)),
        Err(NetlabError::SameParty { .. })
    ));
    assert!(matches!(
        lab.netem(
            0,
            Netem {
                delay_ms: 5,
                jitter_ms: 10,
                ..Netem::default()
            }
        ),
        Err(NetlabError::InvalidNetem {
            field: "jitter_ms",
            ..
        })
    ));
    assert!(matches!(
        lab.isolate(7),
        Err(NetlabError::NoSuchNode { .. })
    ));
}
