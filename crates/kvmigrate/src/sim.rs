//! Deterministic simulation: the real router and server state machines, one source and one
//! destination, and closed-loop clients, stepped one event at a time in an order drawn from one
//! seed (TigerBeetle-style). Each step delivers one packet from some node's FIFO inbox, lets a
//! server do background work, lets a client issue its next query, or times a client out. The
//! inboxes are an [`InProcess`] transport under a [`Lossy`] decorator, so a run can drop,
//! duplicate and reorder a share of the datagrams ([`SimConfig::faults`], seeded from the run's
//! seed) and exercise the reliable control plane.
//! A run can also hold back every GROUP-START on its way to the router for a number of steps
//! ([`SimConfig::group_start_delay_steps_max`]), so that the group's pipelined DATA, and client
//! queries, overtake it.
//! Clients record a history for [`crate::check`]; after the migration, one client reads every
//! key so that lost writes show up as stale reads. Errors name the seed.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::check::{Op, OpKind};
use crate::client::ReplyMerger;
use crate::group::Geometry;
use crate::router::{Router, RouterConfig, RouterStats};
use crate::server::{Server, ServerConfig, ServerStats};
use crate::status::{MigrationPhase, MigrationStatus};
use crate::transport::{FaultCounters, Faults, InProcess, Lossy, Transport};
use crate::wire::{Body, Key, NodeId, Packet, Protocol, Status};

const ROUTER: NodeId = 0;
const SOURCE: NodeId = 1;
const DEST: NodeId = 2;
const FIRST_CLIENT: NodeId = 3;

/// One simulated run.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Drives every choice.
    pub seed: u64,
    /// Migration protocol.
    pub protocol: Protocol,
    /// Closed-loop clients.
    pub clients: u16,
    /// Keys `0..keys`, all preloaded on the source.
    pub keys: u64,
    /// Queries per client (before the final read-back).
    pub ops_per_client: u32,
    /// Percent of queries that write (a fifth of writes delete).
    pub write_pct: u8,
    /// Table shape (small, so there are many groups per key).
    pub geometry: Geometry,
    /// Router BF bytes (tiny forces false positives).
    pub bf_bytes: usize,
    /// Router CBF bytes.
    pub cbf_bytes: usize,
    /// The migration starts at a step drawn from `1..=this`.
    pub migration_start_step_max: u64,
    /// Kill the destination at this step.
    pub kill_destination_at_step: Option<u64>,
    /// Kill the source at this step (the run then ends once the destination has the shard
    /// orphaned, or the migration had ended before).
    pub kill_source_at_step: Option<u64>,
    /// Restart the router at this step: a fresh one, with no instance or redirect, takes the
    /// packets in its inbox and everything after (a switch that rebooted).
    pub restart_router_at_step: Option<u64>,
    /// Give up (an error) after this many steps.
    pub steps_max: u64,
    /// A client abandons a query after this much simulated time.
    pub client_timeout_us: u64,
    /// Patience with an unanswered packet (simulated time; see `reliable`).
    pub ack_timeout_us: u64,
    /// First wait before an unanswered packet is sent again.
    pub retransmit_us: u64,
    /// Times an unanswered packet is sent again before it may be given up.
    pub retries_max: u32,
    /// Groups the source migrates at once.
    pub groups_inflight_max: usize,
    /// Destination writes mirrored to the source (see `server`); off is the paper's protocol.
    pub mirror_writes: bool,
    /// NetMigrate 4.4 presets applied once the instance is registered: (every BF bit set,
    /// every CBF counter at 1), i.e. Rocksteady-like and Fulva-like routing.
    pub router_preset: (bool, bool),
    /// Datagrams dropped, duplicated and reordered (none by default).
    pub faults: Faults,
    /// Each GROUP-START (and each resend of one) reaches the router's inbox only after a
    /// number of steps drawn from `0..=this` (0: at once), so DATA and queries overtake it.
    pub group_start_delay_steps_max: u64,
}

impl SimConfig {
    /// A small run that exercises every routing state with 1-byte filters.
    pub fn small(seed: u64, protocol: Protocol) -> Self {
        Self {
            seed,
            protocol,
            clients: 4,
            keys: 64,
            ops_per_client: 80,
            write_pct: 50,
            geometry: Geometry {
                buckets_log2: 5,
                group_buckets_log2: 1,
            },
            bf_bytes: 1,
            cbf_bytes: 1,
            migration_start_step_max: 100,
            kill_destination_at_step: None,
            kill_source_at_step: None,
            restart_router_at_step: None,
            steps_max: 400_000,
            client_timeout_us: 200_000,
            ack_timeout_us: 100_000,
            retransmit_us: 5_000,
            retries_max: 4,
            groups_inflight_max: 2,
            mirror_writes: false,
            router_preset: (false, false),
            faults: Faults::default(),
            group_start_delay_steps_max: 0,
        }
    }
}

/// What a run produced.
#[derive(Debug)]
pub struct SimReport {
    /// Every completed or unknown-outcome operation.
    pub history: Vec<Op>,
    /// Values before the run.
    pub initial: BTreeMap<Key, Vec<u8>>,
    /// The migration's final status.
    pub status: MigrationStatus,
    /// Router counters.
    pub router: RouterStats,
    /// Source counters.
    pub source: ServerStats,
    /// Destination counters.
    pub destination: ServerStats,
    /// Steps taken.
    pub steps: u64,
    /// Queries that failed or timed out.
    pub failed_ops: u64,
    /// What the lossy network did.
    pub faults: FaultCounters,
    /// DATA batches the destination took while their group's GROUP-START was held back.
    pub data_before_start: u64,
    /// Reads answered LOST (their data may be only on a dead source).
    pub lost_reads: u64,
    /// Migration instances the router still holds at the end.
    pub router_instances: usize,
    /// The destination's status entries (a dead source's orphaned shard).
    pub destination_status: Vec<MigrationStatus>,
    /// The end state itself, for a test to go on with (operator commands, reads).
    pub end: SimEnd,
}

/// The router and servers as a run left them.
pub struct SimEnd {
    /// The router.
    pub router: Router,
    /// Source and destination.
    pub servers: [Server; 2],
}

impl std::fmt::Debug for SimEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SimEnd")
    }
}

/// GROUP-STARTs held back on their way to the router: (step at which it is sent on, packet).
type HeldStarts = Vec<(u64, Packet)>;

/// Holds back the GROUP-STARTs of `out` bound for the router (`group_start_delay_steps_max`).
fn hold_starts(
    out: Vec<(NodeId, Packet)>,
    held: &mut HeldStarts,
    rng: &mut Xoshiro256PlusPlus,
    step: u64,
    delay_max: u64,
) -> Vec<(NodeId, Packet)> {
    if delay_max == 0 {
        return out;
    }
    let mut rest = Vec::with_capacity(out.len());
    for (to, p) in out {
        if to == ROUTER && matches!(p.body, Body::GroupStart { .. }) {
            held.push((step + rng.gen_range(0..=delay_max), p));
        } else {
            rest.push((to, p));
        }
    }
    rest
}

struct Outstanding {
    seq: u32,
    key: Key,
    kind: OpKind,
    invoke: u64,
    start_us: u64,
    merger: ReplyMerger,
}

struct SimClient {
    id: NodeId,
    script: VecDeque<(Key, OpKind)>,
    outstanding: Option<Outstanding>,
    seq: u32,
}

enum Action {
    Deliver(usize),
    Tick(NodeId),
    Issue(usize),
    Timeout(usize),
}

/// Runs one simulation; the error says which seed failed and why.
pub fn run(cfg: &SimConfig) -> Result<SimReport, String> {
    let seed = cfg.seed;
    let fail = |m: String| format!("seed {seed}: {m}");
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let router_cfg = RouterConfig {
        id: ROUTER,
        instances_max: 2,
        bf_bytes: cfg.bf_bytes,
        cbf_bytes: cfg.cbf_bytes,
        redirects_max: 4,
        tracked_groups_max: 1 << 10,
        fault_double_read_source_only: false,
    };
    let mut router = Router::new(router_cfg.clone()).map_err(|e| fail(e.to_string()))?;
    let server_cfg = |id| ServerConfig {
        batch_items_max: 1,
        batches_inflight_max: 1,
        groups_inflight_max: cfg.groups_inflight_max,
        ack_timeout_us: cfg.ack_timeout_us,
        retransmit_us: cfg.retransmit_us,
        retries_max: cfg.retries_max,
        mirror_writes: cfg.mirror_writes,
        ..ServerConfig::new(id, ROUTER, cfg.geometry)
    };
    let mut servers = [
        Server::new(server_cfg(SOURCE)).map_err(|e| fail(e.to_string()))?,
        Server::new(server_cfg(DEST)).map_err(|e| fail(e.to_string()))?,
    ];
    let mut initial = BTreeMap::new();
    for k in 0..cfg.keys {
        let v = format!("init-{k}").into_bytes();
        servers[0]
            .load(SOURCE, k, v.clone())
            .map_err(|e| fail(e.to_string()))?;
        initial.insert(k, v);
    }
    let nodes = FIRST_CLIENT as usize + cfg.clients as usize;
    let net = Lossy::new(InProcess::new(nodes), cfg.faults, seed ^ 0x6c6f_7373)
        .map_err(|e| fail(e.to_string()))?;
    let mut dead = vec![false; nodes];
    let mut clients: Vec<SimClient> = (0..cfg.clients)
        .map(|c| {
            let script = (0..cfg.ops_per_client)
                .map(|n| {
                    // Half the queries go to an eighth of the keys, so keys see contention.
                    let hot = (cfg.keys / 8).max(1);
                    let key = if rng.gen_bool(0.5) {
                        rng.gen_range(0..hot)
                    } else {
                        rng.gen_range(0..cfg.keys)
                    };
                    let kind = if rng.gen_range(0..100) < cfg.write_pct {
                        if rng.gen_range(0..5) == 0 {
                            OpKind::Write(None)
                        } else {
                            OpKind::Write(Some(format!("c{c}-{n}").into_bytes()))
                        }
                    } else {
                        OpKind::Read(None)
                    };
                    (key, kind)
                })
                .collect();
            SimClient {
                id: FIRST_CLIENT + c,
                script,
                outstanding: None,
                seq: 0,
            }
        })
        .collect();
    let start_step = rng.gen_range(1..=cfg.migration_start_step_max.max(1));
    let mut history = Vec::new();
    let mut failed_ops = 0u64;
    let mut lost_reads = 0u64;
    let mut now_us = 0u64;
    let mut read_back_queued = false;
    let mut started = false;
    let mut preset_done = cfg.router_preset == (false, false);
    let mut held_starts: HeldStarts = Vec::new();
    let mut delay_rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x7374_6172);
    let delay_max = cfg.group_start_delay_steps_max;
    let mut data_before_start = 0u64;

    let deliver = |dead: &[bool], out: Vec<(NodeId, Packet)>| -> Result<(), String> {
        for (to, p) in out {
            if !dead[to as usize] {
                net.send(to, p)
                    .map_err(|e| format!("seed {seed}: send to {to}: {e}"))?;
            }
        }
        Ok(())
    };

    for step in 1..=cfg.steps_max {
        now_us += rng.gen_range(1..=20);
        if step == start_step {
            let out = servers[0]
                .start_migration(now_us, SOURCE, DEST, cfg.protocol)
                .map_err(|e| fail(e.to_string()))?;
            let out = hold_starts(out, &mut held_starts, &mut delay_rng, step, delay_max);
            deliver(&dead, out)?;
            started = true;
        }
        let (due, kept): (HeldStarts, HeldStarts) = std::mem::take(&mut held_starts)
            .into_iter()
            .partition(|(at, _)| *at <= step);
        held_starts = kept;
        deliver(&dead, due.into_iter().map(|(_, p)| (ROUTER, p)).collect())?;
        if cfg.kill_destination_at_step == Some(step) {
            dead[DEST as usize] = true;
            net.set_down(DEST);
        }
        if cfg.restart_router_at_step == Some(step) {
            router = Router::new(router_cfg.clone()).map_err(|e| fail(e.to_string()))?;
        }
        if cfg.kill_source_at_step == Some(step) {
            dead[SOURCE as usize] = true;
            net.set_down(SOURCE);
        }
        let status = servers[0].migration_status().into_iter().last();
        let orphaned = dead[SOURCE as usize]
            && router.instances().is_empty()
            && servers[1]
                .migration_status()
                .iter()
                .any(|s| s.phase == MigrationPhase::SourceLost);
        let finished = started
            && (orphaned
                || status.as_ref().is_some_and(|s| {
                    matches!(s.phase, MigrationPhase::Done | MigrationPhase::Aborted)
                }));
        let clients_idle = clients
            .iter()
            .all(|c| c.script.is_empty() && c.outstanding.is_none());
        if finished && clients_idle {
            if read_back_queued {
                let Some(status) = status else {
                    return Err(fail("no status".into()));
                };
                if servers[0].stats().late_after_flush != 0 {
                    return Err(fail(
                        "a write reached the source after its late flush".into(),
                    ));
                }
                return Ok(SimReport {
                    history,
                    initial,
                    status,
                    router: router.stats().clone(),
                    source: servers[0].stats().clone(),
                    destination: servers[1].stats().clone(),
                    steps: step,
                    failed_ops,
                    faults: net.counters(),
                    data_before_start,
                    lost_reads,
                    router_instances: router.instances().len(),
                    destination_status: servers[1].migration_status(),
                    end: SimEnd { router, servers },
                });
            }
            read_back_queued = true;
            clients[0].script = (0..cfg.keys).map(|k| (k, OpKind::Read(None))).collect();
        }
        let mut actions = Vec::new();
        for (n, &down) in dead.iter().enumerate() {
            if !down && net.ready(n as NodeId) == Some(true) {
                actions.push(Action::Deliver(n));
            }
        }
        // Background work is offered a quarter of the time, so migrations span many queries.
        let offer_tick = rng.gen_range(0..4) == 0;
        for s in [SOURCE, DEST] {
            if offer_tick && !dead[s as usize] {
                actions.push(Action::Tick(s));
            }
        }
        for (i, c) in clients.iter().enumerate() {
            match &c.outstanding {
                None if !c.script.is_empty() => actions.push(Action::Issue(i)),
                Some(o) if now_us - o.start_us > cfg.client_timeout_us => {
                    actions.push(Action::Timeout(i))
                }
                _ => {}
            }
        }
        if actions.is_empty() {
            continue;
        }
        let action = &actions[rng.gen_range(0..actions.len())];
        match *action {
            Action::Deliver(n) => {
                let Ok(Some(p)) = net.recv(n as NodeId, Duration::ZERO) else {
                    continue;
                };
                let node = n as NodeId;
                if node == ROUTER {
                    let out = router.on_packet(p);
                    deliver(&dead, out)?;
                    if !preset_done {
                        let (bf, cbf) = cfg.router_preset;
                        preset_done = router.preset(SOURCE, bf, cbf);
                    }
                } else if node == SOURCE || node == DEST {
                    if let Body::Data { group, .. } = p.body {
                        let start_held = held_starts.iter().any(
                            |(_, s)| matches!(s.body, Body::GroupStart { group: g } if g == group),
                        );
                        data_before_start += u64::from(node == DEST && start_held);
                    }
                    let out = servers[(node - 1) as usize].handle(now_us, p);
                    let out = hold_starts(out, &mut held_starts, &mut delay_rng, step, delay_max);
                    deliver(&dead, out)?;
                } else {
                    let c = &mut clients[(node - FIRST_CLIENT) as usize];
                    let Some(o) = c.outstanding.as_mut() else {
                        continue; // reply to a timed-out query
                    };
                    if p.seq != o.seq {
                        continue;
                    }
                    let Some(outcome) = o.merger.feed(&p) else {
                        continue;
                    };
                    let Some(o) = c.outstanding.take() else {
                        continue;
                    };
                    let unknown = o.kind_if_write();
                    let kind = match (o.kind, outcome.status) {
                        (_, Status::Error) => {
                            failed_ops += 1;
                            unknown.map(|w| (w, None))
                        }
                        // Not an answer: the key's data may be only on a dead source.
                        (_, Status::Lost) => {
                            failed_ops += 1;
                            lost_reads += 1;
                            unknown.map(|w| (w, None))
                        }
                        (OpKind::Read(_), Status::Ok) => {
                            Some((OpKind::Read(Some(outcome.value)), Some(step)))
                        }
                        (OpKind::Read(_), Status::NotFound) => {
                            Some((OpKind::Read(None), Some(step)))
                        }
                        (w, _) => Some((w, Some(step))),
                    };
                    if let Some((kind, response)) = kind {
                        history.push(Op {
                            client: c.id as u32,
                            key: o.key,
                            kind,
                            invoke: o.invoke,
                            response,
                        });
                    }
                }
            }
            Action::Tick(s) => {
                let out = servers[(s - 1) as usize].tick(now_us);
                let out = hold_starts(out, &mut held_starts, &mut delay_rng, step, delay_max);
                deliver(&dead, out)?;
            }
            Action::Issue(i) => {
                let c = &mut clients[i];
                let Some((key, kind)) = c.script.pop_front() else {
                    continue;
                };
                c.seq += 1;
                let body = match &kind {
                    OpKind::Read(_) => Body::Get { key },
                    OpKind::Write(Some(v)) => Body::Set {
                        key,
                        value: v.clone(),
                    },
                    OpKind::Write(None) => Body::Delete { key },
                };
                let query = Packet {
                    from: c.id,
                    shard: SOURCE,
                    seq: c.seq,
                    flags: 0,
                    body,
                };
                deliver(&dead, vec![(ROUTER, query)])?;
                c.outstanding = Some(Outstanding {
                    seq: c.seq,
                    key,
                    kind,
                    invoke: step,
                    start_us: now_us,
                    merger: ReplyMerger::default(),
                });
            }
            Action::Timeout(i) => {
                let c = &mut clients[i];
                if let Some(o) = c.outstanding.take() {
                    failed_ops += 1;
                    if let Some(w) = o.kind_if_write() {
                        history.push(Op {
                            client: c.id as u32,
                            key: o.key,
                            kind: w,
                            invoke: o.invoke,
                            response: None,
                        });
                    }
                }
            }
        }
    }
    Err(fail(format!(
        "no completion within steps_max = {}; status {:?}",
        cfg.steps_max,
        servers[0].migration_status()
    )))
}

impl Outstanding {
    fn kind_if_write(&self) -> Option<OpKind> {
        match &self.kind {
            OpKind::Write(v) => Some(OpKind::Write(v.clone())),
            OpKind::Read(_) => None,
        }
    }
}
