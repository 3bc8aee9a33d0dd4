//! The nemesis: a seeded schedule of fault windows, each `FAULT_S` long and
//! followed by `QUIET_S` of quiet, and a probe per window showing that the
//! fault took effect. After each window every process that is gone (killed,
//! or exited after it was fenced) is started again, and a window starts only
//! once every server answers (so it may start later than planned: the
//! sequence of faults replays exactly, their times only roughly).
//!
//! `join` and `leave` (`elastic.rs`) change the members: the schedule
//! plays them out as it is drawn, so each window's server is a member then
//! (a leave only while three or more are in, a join only while an id is
//! free), and a join or leave window lasts as long as its moves take, at
//! least [`FAULT_S`].

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use locus_netlab::{Netem, Party};
use locus_server::supervise::{pid_alive, Role};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use super::clients::Recorder;
use super::cluster::{self, LabCluster, CLIENT_PORT, CONTROL_PORT, ETCD_CLIENT_PORT};
use super::elastic;
use crate::Result;

/// A fault window's length.
pub const FAULT_S: u64 = 3;
/// Quiet after each window.
pub const QUIET_S: u64 = 2;
/// Quiet before the first window.
pub const WARM_S: u64 = 2;
/// Delay of the netem window on its link.
pub const NETEM_DELAY_MS: u32 = 100;

/// The fault kinds of issue 61.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// One server cut from every other node and the host.
    PartitionOne,
    /// Servers split in two halves (etcd and the coordinator with the second).
    SplitHalves,
    /// The coordinator's node cut off.
    IsolateCoordinator,
    /// etcd's node cut off.
    IsolateEtcd,
    /// A server SIGSTOPped, then SIGCONTed.
    Pause,
    /// A server killed -9, then restarted from its log.
    KillRestart,
    /// Delay, jitter and loss on one server's link.
    Netem,
    /// A server joins: started in its namespace, slots rebalanced onto it.
    Join,
    /// A server leaves: drained, its migrated values recalled, stopped.
    Leave,
    /// With replication: the primaries given back after failovers
    /// (`cluster rebalance --primaries`'s handovers), while clients run.
    GiveBack,
}

/// Members a leave leaves at least.
pub const MEMBERS_MIN: usize = 2;

impl Kind {
    /// Every kind; in a schedule too short for all, the first ones come
    /// first (the 20 s form has the first three, 27 s the first five).
    pub const ALL: [Kind; 9] = [
        Kind::PartitionOne,
        Kind::Pause,
        Kind::KillRestart,
        Kind::Join,
        Kind::Leave,
        Kind::SplitHalves,
        Kind::IsolateCoordinator,
        Kind::IsolateEtcd,
        Kind::Netem,
    ];

    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Kind::PartitionOne => "partition_one",
            Kind::SplitHalves => "split_halves",
            Kind::IsolateCoordinator => "isolate_coordinator",
            Kind::IsolateEtcd => "isolate_etcd",
            Kind::Pause => "pause",
            Kind::KillRestart => "kill_restart",
            Kind::Netem => "netem",
            Kind::Join => "join",
            Kind::Leave => "leave",
            Kind::GiveBack => "give_primaries_back",
        }
    }
}

/// One planned window.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Planned {
    /// Its fault.
    pub kind: Kind,
    /// The server it hits, joins or leaves (unused by the kinds that hit
    /// etcd or the coordinator).
    pub server: usize,
    /// Start, ms after the clients started.
    pub start_ms: u64,
}

/// The schedule for `duration_s` seconds of a cluster of `servers` with
/// room for `room`: every kind once while they fit, seeded order, then
/// seeded repeats. Members are played out along it: a leave with
/// [`MEMBERS_MIN`] members left becomes a join, a join with no id free a
/// leave; a join takes back the id that left longest ago, else a new one.
pub fn schedule(seed: u64, duration_s: u64, servers: usize, room: usize) -> Vec<Planned> {
    schedule_of(&Kind::ALL, seed, duration_s, servers, room, MEMBERS_MIN)
}

/// [`schedule`] of a replicated cluster (issue 60): a kill or a cut
/// longer than the lease fails the victim's slots over; the primaries
/// given back, and the joins and leaves (by copies and handovers: design
/// "A replicated cluster changes shape"), come last among the kinds (so
/// schedules of 40 s and less replay as they did before they existed),
/// and a leave keeps at least `replication` members.
pub fn schedule_replicated(
    seed: u64,
    duration_s: u64,
    servers: usize,
    room: usize,
    replication: usize,
) -> Vec<Planned> {
    let kinds: Vec<Kind> = Kind::ALL
        .into_iter()
        .filter(|k| !matches!(k, Kind::Join | Kind::Leave))
        .chain([Kind::GiveBack, Kind::Join, Kind::Leave])
        .collect();
    let min = MEMBERS_MIN.max(replication);
    schedule_of(&kinds, seed, duration_s, servers, room, min)
}

fn schedule_of(
    all: &[Kind],
    seed: u64,
    duration_s: u64,
    servers: usize,
    room: usize,
    members_min: usize,
) -> Vec<Planned> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let slots = duration_s.saturating_sub(WARM_S) / (FAULT_S + QUIET_S);
    let mut kinds: Vec<Kind> = all.to_vec();
    let first = (slots as usize).min(kinds.len());
    kinds.truncate(first);
    kinds.shuffle(&mut rng);
    while (kinds.len() as u64) < slots {
        kinds.push(all[rng.gen_range(0..all.len())]);
    }
    let mut members: Vec<usize> = (0..servers).collect();
    let mut gone: std::collections::VecDeque<usize> = Default::default();
    let mut fresh = servers..room;
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| {
            let free = !gone.is_empty() || !fresh.is_empty();
            let kind = match kind {
                Kind::Leave if members.len() <= members_min => Kind::Join,
                Kind::Join if !free => Kind::Leave,
                k => k,
            };
            let server = match kind {
                Kind::Join => {
                    let id = gone
                        .pop_front()
                        .or_else(|| fresh.next())
                        .expect("a join only while an id is free");
                    members.push(id);
                    id
                }
                Kind::Leave => {
                    let id = members.remove(rng.gen_range(0..members.len()));
                    gone.push_back(id);
                    id
                }
                _ => members[rng.gen_range(0..members.len())],
            };
            Planned {
                kind,
                server,
                start_ms: (WARM_S + i as u64 * (FAULT_S + QUIET_S)) * 1000,
            }
        })
        .collect()
}

/// What a window did.
#[derive(Debug, Clone, Serialize)]
pub struct WindowRecord {
    /// The fault.
    pub kind: Kind,
    /// What it hit.
    pub target: String,
    /// When the fault was in place, ms on the clients' clock.
    pub start_ms: u64,
    /// When it was undone.
    pub end_ms: u64,
    /// Whether the probe showed the fault took effect.
    pub probe_ok: bool,
    /// What the probe saw.
    pub probe: String,
    /// Processes started again after the window.
    pub restarted: Vec<String>,
}

/// Runs the schedule against `c`; returns each window's record.
pub fn run(
    c: &mut LabCluster,
    plan: &[Planned],
    rec: &Recorder,
    note: &dyn Fn(String),
) -> Result<Vec<WindowRecord>> {
    let t0 = Instant::now();
    let mut out = Vec::new();
    for p in plan {
        let at = Duration::from_millis(p.start_ms);
        if let Some(wait) = at.checked_sub(t0.elapsed()) {
            std::thread::sleep(wait);
        }
        let w = window(c, p, rec)?;
        note(format!(
            "{:>6} ms  {} on {}: probe {} ({}){}",
            w.start_ms,
            w.kind.name(),
            w.target,
            if w.probe_ok { "ok" } else { "FAILED" },
            w.probe,
            if w.restarted.is_empty() {
                String::new()
            } else {
                format!("; restarted {}", w.restarted.join(", "))
            }
        ));
        out.push(w);
    }
    Ok(out)
}

/// Faults injected, by kind.
pub fn injected(windows: &[WindowRecord]) -> BTreeMap<&'static str, u64> {
    let mut m = BTreeMap::new();
    for w in windows {
        *m.entry(w.kind.name()).or_insert(0) += 1;
    }
    m
}

fn window(c: &mut LabCluster, p: &Planned, rec: &Recorder) -> Result<WindowRecord> {
    let fault = Duration::from_secs(FAULT_S);
    let members = c.members().ids();
    // The schedule played the members out; should a join or leave have
    // failed (its probe then fails the run), the window hits a member still.
    let server = if members.contains(&(p.server as u8)) || matches!(p.kind, Kind::Join) {
        p.server
    } else {
        members[p.server % members.len()] as usize
    };
    let other = |m: usize| members.iter().map(|&x| x as usize).find(|&x| x != m);
    let short = Duration::from_millis(500);
    // Each fault starts on a whole cluster: a server fenced by the last
    // window may still be on its way out (it is restarted here), so a
    // window can start later than planned.
    c.wait_up(cluster::UP_WAIT)?;
    let start_ms = rec.now_ns() / 1_000_000;
    let t = Instant::now();
    let rest = |t: Instant| {
        if let Some(d) = fault.checked_sub(t.elapsed()) {
            std::thread::sleep(d);
        }
    };
    let lab_err = |e: locus_netlab::NetlabError| crate::BenchError::Measurement {
        experiment: "faults",
        what: format!("the lab failed: {e}"),
    };
    // The killed server's epoch, for the probe's second half.
    let mut killed_epoch = None;
    let (target, probe_ok, probe) = match p.kind {
        Kind::PartitionOne => {
            c.lab().isolate(server).map_err(lab_err)?;
            let peer = other(server).unwrap_or(server);
            let host = cluster::connects(c.addr(server, CLIENT_PORT), short);
            let from_peer = cluster::connects_from(c.lab(), peer, c.addr(server, CLIENT_PORT));
            rest(t);
            c.lab().heal().map_err(lab_err)?;
            (
                format!("server {server}"),
                !host && !from_peer,
                format!("host connects: {host}; server {peer} connects: {from_peer}"),
            )
        }
        Kind::SplitHalves => {
            let m: Vec<usize> = members.iter().map(|&x| x as usize).collect();
            let half = m.len() / 2;
            let a: Vec<Party> = m[..half].iter().copied().map(Party::Node).collect();
            let mut b: Vec<Party> = m[half..].iter().copied().map(Party::Node).collect();
            b.extend([c.etcd_node(), c.coordinator_node()].map(Party::Node));
            c.lab().partition(&a, &b).map_err(lab_err)?;
            let (x, y) = (m[0], m[half]);
            // The far side's own: another server there, else the coordinator.
            let z = if m.len() - half >= 2 {
                m[m.len() - 1]
            } else {
                c.coordinator_node()
            };
            let across = cluster::connects_from(c.lab(), x, c.addr(y, CLIENT_PORT));
            let within = cluster::connects_from(c.lab(), z, c.addr(y, CLIENT_PORT));
            rest(t);
            c.lab().heal().map_err(lab_err)?;
            (
                format!(
                    "servers {:?} | servers {:?} + etcd + coordinator",
                    &m[..half],
                    &m[half..]
                ),
                !across && within,
                format!("node {x} -> server {y}: {across}; node {z} -> server {y}: {within}"),
            )
        }
        // The window stays open at least FAULT_S, as the others: the moves
        // take well under a second, and the clients' first operations on
        // the new table (redirects, a server learned) belong to it.
        Kind::Join => {
            let o = elastic::join(c, server as u8)?;
            rest(t);
            o
        }
        Kind::Leave => {
            let o = elastic::leave(c, server as u8)?;
            rest(t);
            o
        }
        Kind::GiveBack => {
            let o = elastic::give_back(c)?;
            rest(t);
            o
        }
        Kind::IsolateCoordinator => {
            let node = c.coordinator_node();
            c.lab().isolate(node).map_err(lab_err)?;
            let host = cluster::connects(c.addr(node, CONTROL_PORT), short);
            let from = cluster::connects_from(c.lab(), 0, c.addr(node, CONTROL_PORT));
            rest(t);
            c.lab().heal().map_err(lab_err)?;
            (
                "coordinator".into(),
                !host && !from,
                format!("host connects: {host}; server 0 connects: {from}"),
            )
        }
        Kind::IsolateEtcd => {
            let node = c.etcd_node();
            c.lab().isolate(node).map_err(lab_err)?;
            let host = cluster::connects(c.addr(node, ETCD_CLIENT_PORT), short);
            let from = cluster::connects_from(c.lab(), 0, c.addr(node, ETCD_CLIENT_PORT));
            rest(t);
            c.lab().heal().map_err(lab_err)?;
            (
                "etcd".into(),
                !host && !from,
                format!("host connects: {host}; server 0 connects: {from}"),
            )
        }
        Kind::Pause => match c.pid(&Role::Server(server as u8)) {
            None => (format!("server {server}"), false, "no live process".into()),
            Some(pid) => {
                // SAFETY: kill(2) on a child of the supervisor.
                unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
                std::thread::sleep(short);
                let a = proc_stat(pid);
                std::thread::sleep(Duration::from_secs(1));
                let b = proc_stat(pid);
                rest(t);
                // SAFETY: as above.
                unsafe { libc::kill(pid as i32, libc::SIGCONT) };
                let ok = matches!((&a, &b), (Some((sa, ca)), Some((sb, cb)))
                    if *sa == 'T' && *sb == 'T' && ca == cb);
                (
                    format!("server {server} (pid {pid})"),
                    ok,
                    format!("state and cpu ticks over 1 s: {a:?} -> {b:?}"),
                )
            }
        },
        Kind::KillRestart => match c.pid(&Role::Server(server as u8)) {
            None => (format!("server {server}"), false, "no live process".into()),
            Some(pid) => {
                let before = c.epoch(server as u8);
                killed_epoch = before;
                c.kill(pid);
                let gone = !pid_alive(pid);
                rest(t);
                (
                    format!("server {server} (pid {pid})"),
                    gone,
                    format!("pid {pid} gone after SIGKILL: {gone}; epoch before {before:?}"),
                )
            }
        },
        Kind::Netem => {
            let addr = c.addr(server, CLIENT_PORT);
            let before = cluster::connect_ms_min(addr, 3, Duration::from_secs(2));
            c.lab()
                .netem(
                    server,
                    Netem {
                        delay_ms: NETEM_DELAY_MS,
                        jitter_ms: 10,
                        loss_pct: 2.0,
                        seed: p.start_ms ^ server as u64,
                    },
                )
                .map_err(lab_err)?;
            let during = cluster::connect_ms_min(addr, 3, Duration::from_secs(2));
            rest(t);
            c.lab().clear_netem(server).map_err(lab_err)?;
            let ok = during.is_some_and(|d| d >= f64::from(NETEM_DELAY_MS - 10));
            (
                format!("server {server}"),
                ok,
                format!("connect ms (min of 3) before {before:?}, during {during:?}"),
            )
        }
    };
    let end_ms = rec.now_ns() / 1_000_000;
    let restarted = c.revive()?;
    let mut probe = probe;
    if p.kind == Kind::KillRestart {
        // The second half of the probe: the restarted server answers and
        // has registered a higher epoch than the killed one's.
        let id = server as u8;
        let up = c.answers_within(id, cluster::UP_WAIT);
        let killed = killed_epoch.unwrap_or(0);
        let after = c.wait_epoch_above(id, killed, cluster::UP_WAIT);
        probe.push_str(&format!(
            "; restarted server answers: {up}; epoch after {after:?}"
        ));
        return Ok(WindowRecord {
            kind: p.kind,
            target,
            start_ms,
            end_ms,
            probe_ok: probe_ok && up && after.is_some() && killed > 0,
            probe,
            restarted,
        });
    }
    Ok(WindowRecord {
        kind: p.kind,
        target,
        start_ms,
        end_ms,
        probe_ok,
        probe,
        restarted,
    })
}

/// A process's state letter and its user plus system CPU ticks.
fn proc_stat(pid: u32) -> Option<(char, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = s.rsplit_once(')')?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields after the name: state is 3, utime 14, stime 15 (1-based in proc(5)).
    let state = f.first()?.chars().next()?;
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some((state, utime + stime))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minute_has_every_kind_and_a_seed_replays_its_schedule() {
        let a = schedule(7, 60, 3, 4);
        for k in Kind::ALL {
            assert!(a.iter().any(|p| p.kind == k), "{k:?} missing from {a:?}");
        }
        let b = schedule(7, 60, 3, 4);
        let key = |s: &[Planned]| -> Vec<(Kind, usize, u64)> {
            s.iter().map(|p| (p.kind, p.server, p.start_ms)).collect()
        };
        assert_eq!(key(&a), key(&b));
        assert_ne!(key(&a), key(&schedule(8, 60, 3, 4)));
    }

    #[test]
    fn the_short_form_has_a_partition_a_pause_and_a_kill() {
        let s = schedule(61, 20, 3, 4);
        assert_eq!(s.len(), 3);
        for k in [Kind::PartitionOne, Kind::Pause, Kind::KillRestart] {
            assert!(s.iter().any(|p| p.kind == k), "{k:?} missing from {s:?}");
        }
        assert!(s.iter().all(|p| p.start_ms + FAULT_S * 1000 <= 20_000));
    }

    #[test]
    fn the_ci_form_adds_a_join_and_a_leave() {
        for seed in 0..50 {
            let s = schedule(seed, 27, 3, 4);
            assert_eq!(s.len(), 5);
            for k in [
                Kind::PartitionOne,
                Kind::Pause,
                Kind::KillRestart,
                Kind::Join,
                Kind::Leave,
            ] {
                assert!(s.iter().any(|p| p.kind == k), "{k:?} missing from {s:?}");
            }
        }
    }

    #[test]
    fn a_replicated_schedule_keeps_its_short_form_and_enough_members() {
        // The first kinds as before joins and leaves existed there.
        for seed in 0..50 {
            let s = schedule_replicated(seed, 40, 3, 4, 2);
            assert!(s
                .iter()
                .all(|p| !matches!(p.kind, Kind::Join | Kind::Leave | Kind::GiveBack)));
        }
        let s = schedule_replicated(3, 200, 3, 4, 2);
        assert!(s.iter().any(|p| p.kind == Kind::KillRestart), "{s:?}");
        assert!(s.iter().any(|p| p.kind == Kind::GiveBack), "{s:?}");
        assert!(s.iter().any(|p| p.kind == Kind::Leave), "{s:?}");
        assert!(s.iter().all(|p| p.server < 4));
        // R = 3 on 3 servers: a leave would leave too few; it is a join.
        for seed in 0..50 {
            let s = schedule_replicated(seed, 300, 3, 4, 3);
            let mut members = 3i32;
            for p in &s {
                match p.kind {
                    Kind::Join => members += 1,
                    Kind::Leave => members -= 1,
                    _ => {}
                }
                assert!(members >= 3, "{s:?}");
            }
        }
    }

    /// Played out from the first servers, every window's server is a
    /// member (a join's is not, and has room), and no leave goes below
    /// [`MEMBERS_MIN`]; joins take back ids that left, oldest first.
    #[test]
    fn every_window_hits_a_member_as_the_schedule_plays_them_out() {
        let (mut joins, mut again) = (0, 0);
        for seed in 0..300 {
            for (servers, room) in [(3, 4), (3, 5), (5, 6)] {
                let plan = schedule(seed, 120, servers, room);
                let mut members: Vec<usize> = (0..servers).collect();
                let mut gone = std::collections::VecDeque::new();
                for p in &plan {
                    match p.kind {
                        Kind::Join => {
                            assert!(!members.contains(&p.server) && p.server < room, "{p:?}");
                            if let Some(&oldest) = gone.front() {
                                assert_eq!(p.server, oldest, "{p:?}");
                                gone.pop_front();
                                again += 1;
                            }
                            members.push(p.server);
                            joins += 1;
                        }
                        Kind::Leave => {
                            assert!(members.len() > MEMBERS_MIN, "{plan:?}");
                            let i = members
                                .iter()
                                .position(|&m| m == p.server)
                                .expect("a member");
                            members.remove(i);
                            gone.push_back(p.server);
                        }
                        _ => assert!(members.contains(&p.server), "{p:?} in {plan:?}"),
                    }
                }
            }
        }
        assert!(
            joins > 0 && again > 0,
            "joins {joins}, of ids that left {again}"
        );
    }
}
