//! A server's membership on etcd (issue 15 requirement 2), with `[etcd]`.
//! The steps a server shares with the simulated cluster run through
//! `locus_node::member` over [`Etcd`] (etcd as the node's
//! `MembershipStore`):
//!
//! 1. before recovery: connect and take this incarnation's epoch
//!    (`reserve_epoch`); the fabric speaks at that epoch from then on;
//! 2. after recovery, before serving clients: `locus_node::member::join`
//!    (register under a kept-alive lease, read the membership, set each
//!    live peer's epoch in the fabric's table and mark each peer that is not
//!    live down at its last registered epoch: stale addresses into it fail
//!    at once);
//! 3. the membership watch thread hands each event to
//!    `locus_node::member::on_event`: about peer D, the fabric's view of D
//!    and Pragh 5 (`Node::on_peer_event`, with the keys the coordinator's
//!    record names with latest target D, on `PeerDown`); an event that says
//!    this server's own epoch ended (its lease expired, or a newer
//!    incarnation of it registered) fences it;
//! 4. the fence thread: when the lease is lost (or a TTL passed since the
//!    last acknowledged renewal, e.g. after SIGSTOP), the server is fenced:
//!    it logs why, shuts its fabric down (peers' one-sided operations stop),
//!    and refuses every client request from then on; `locus server` exits
//!    with code 3. A restart re-registers at a newer epoch. Before the fence
//!    thread runs, both the client connections (`MemberState::refuses`) and
//!    the fabric (`TcpFabric::hold_lease`, given the lease at registration)
//!    already refuse by the lease's own clock.
//!
//! Without `[etcd]` none of this runs and every epoch stays 0.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use locus_fabric::tcp::TcpFabric;
use locus_fabric::MachineId;
use locus_membership::{MemberEvent, Membership, Registration, Watch};
use locus_node::member::{Handled, MembershipStore};
use locus_node::node::PeerEvent;
use locus_store::Key;

use serde_json::{json, Value};

use crate::config::ClusterFile;
use crate::server::Shared;
use crate::{Result, ServerError};

/// How often the membership threads look at the stop flag.
const POLL: Duration = Duration::from_millis(100);
/// Events kept for STATS.
const RECENT_MAX: usize = 16;

/// This server's membership: its connection to etcd, epoch, registration,
/// and what it has seen.
pub(crate) struct MemberState {
    pub(crate) membership: Membership,
    pub(crate) epoch: u64,
    reg: Registration,
    watch: Mutex<Option<Watch>>,
    peer_down: AtomicU64,
    peer_up: AtomicU64,
    /// Peer events handed to the node (`locus_node::member::on_event`).
    pub(crate) hook_calls: AtomicU64,
    recent: Mutex<VecDeque<Value>>,
    fenced: Mutex<Option<String>>,
    /// Set from registration until no failover goal is pending in etcd
    /// (`await_failovers`): data requests are refused meanwhile.
    failover_pending: std::sync::atomic::AtomicBool,
    /// Set from registration until the lists the replay made visible are
    /// at the backups (`get_ready`): data requests are refused meanwhile.
    resend_pending: std::sync::atomic::AtomicBool,
}

fn etcd_err(e: locus_membership::MembershipError) -> ServerError {
    ServerError::Membership(e.to_string())
}

/// etcd as the node's membership store (`locus_node::member`): the steps a
/// server and the simulated cluster share run through it.
pub(crate) struct Etcd<'a>(pub(crate) &'a Membership);

impl locus_node::member::MembershipStore for Etcd<'_> {
    type Registration = Registration;
    type Watch = Watch;

    fn reserve_epoch(&self, machine: MachineId) -> std::result::Result<u64, String> {
        self.0.reserve_epoch(machine).map_err(|e| e.to_string())
    }
    fn register_at(
        &self,
        machine: MachineId,
        epoch: u64,
        info: &str,
    ) -> std::result::Result<Registration, String> {
        self.0
            .register_at(machine, epoch, info)
            .map_err(|e| e.to_string())
    }
    fn last_registered(&self, machine: MachineId) -> std::result::Result<u64, String> {
        self.0.last_registered(machine).map_err(|e| e.to_string())
    }
    fn watch(&self) -> std::result::Result<(Vec<(MachineId, u64)>, Watch), String> {
        let (members, watch) = self.0.watch().map_err(|e| e.to_string())?;
        Ok((
            members.iter().map(|m| (m.machine, m.epoch)).collect(),
            watch,
        ))
    }
    fn keys_targeting(&self, machine: MachineId) -> std::result::Result<Vec<Key>, String> {
        self.0
            .record_keys_targeting(machine)
            .map(|keys| keys.into_iter().map(Key).collect())
            .map_err(|e| e.to_string())
    }
}

/// Step 1: connects and takes the next epoch of `id`, which the fabric
/// speaks at from now on. `None` without `[etcd]`.
pub(crate) fn begin(
    file: &ClusterFile,
    id: MachineId,
    tcp: &TcpFabric,
) -> Result<Option<(Membership, u64)>> {
    let Some(section) = &file.etcd else {
        return Ok(None);
    };
    let m = Membership::connect(&section.config()).map_err(etcd_err)?;
    let epoch = Etcd(&m)
        .reserve_epoch(id)
        .map_err(ServerError::Membership)?;
    tcp.set_own_epoch(epoch);
    // Peers read and change nothing here until the registration (fencing's
    // rule 4): a peer that expects no epoch would read a half-replayed table.
    locus_fabric::Fencing::hold_peers(tcp, id)?;
    tracing::info!(
        server = id,
        epoch,
        "took epoch from etcd; recovering before registering"
    );
    Ok(Some((m, epoch)))
}

/// Step 1b (before recovery, which places keys by the table): adopts the
/// cluster's slot table from etcd, putting the one this file makes if etcd
/// holds none. A table of another shape (slots, machines) stops the start:
/// the file and the cluster disagree, and placing keys by either would
/// lose the other's.
pub(crate) fn adopt_slots<F: locus_fabric::Fabric>(
    m: &Membership,
    store: &locus_store::Store<F>,
) -> Result<()> {
    let mine = store.homes().table();
    let raw = m.slots_create(&mine.encode()).map_err(etcd_err)?;
    let prefix = &m.config().prefix;
    let held = locus_store::SlotTable::decode(&raw).map_err(|e| {
        ServerError::Membership(format!(
            "the slot table at {prefix}/slots is malformed: {e}"
        ))
    })?;
    if (held.slots(), held.machines()) != (mine.slots(), mine.machines()) {
        return Err(ServerError::Membership(format!(
            "the cluster's slot table ({prefix}/slots in etcd) has {} slots over {} machines, but this cluster file makes {} slots over {}: set [store] slots and the server list as the cluster was made",
            held.slots(),
            held.machines(),
            mine.slots(),
            mine.machines()
        )));
    }
    // A table at epoch 1 is the one the cluster was made with; a server
    // added later starts from its own file's, which differs.
    store
        .homes()
        .adopt(&held)
        .map_err(|e| ServerError::Membership(e.to_string()))?;
    tracing::info!(
        epoch = held.epoch(),
        slots = held.slots(),
        "slot table from etcd"
    );
    Ok(())
}

/// The peers a starting server waits for before it serves: without etcd,
/// every server of the file; with it, those live in etcd now or never
/// registered (a new cluster's, starting beside this one). A server that
/// registered once and is not live (dead, or removed from service) is not
/// waited for: the membership marks it down after recovery.
pub(crate) fn peers_to_await(
    m: Option<&Membership>,
    file: &ClusterFile,
    id: MachineId,
) -> Result<Vec<MachineId>> {
    let listed = file.servers.iter().map(|s| s.id).filter(|&p| p != id);
    let Some(m) = m else {
        return Ok(listed.collect());
    };
    let (live, _) = m.members().map_err(etcd_err)?;
    let mut out = Vec::new();
    for p in listed {
        if live.iter().any(|x| x.machine == p) || m.last_registered(p).map_err(etcd_err)? == 0 {
            out.push(p);
        }
    }
    Ok(out)
}

/// The fabric and client addresses in a member's registration
/// (`fabric=A client=B`, as [`register`] writes it).
fn addresses(info: &str) -> Option<(std::net::SocketAddr, std::net::SocketAddr)> {
    let mut fabric = None;
    let mut client = None;
    for word in info.split_whitespace() {
        match word.split_once('=') {
            Some(("fabric", a)) => fabric = a.parse().ok(),
            Some(("client", a)) => client = a.parse().ok(),
            _ => {}
        }
    }
    Some((fabric?, client?))
}

/// Learns the addresses of the live members this server's file does not
/// list (servers added later) from their registrations in etcd, so that its
/// fabric reaches them and SERVERS names them.
pub(crate) fn learn_peers(s: &Shared) {
    let Some(ms) = &s.membership else { return };
    let members = match ms.membership.members() {
        Ok((m, _)) => m,
        Err(e) => {
            tracing::warn!(server = s.id, "cannot read the members' addresses: {e}");
            return;
        }
    };
    let tcp = s.store().fabric().inner();
    for m in members.iter().filter(|m| m.machine != s.id) {
        let Some((fabric, client)) = addresses(&m.info) else {
            tracing::warn!(server = s.id, peer = m.machine, info = %m.info, "a member registered without addresses");
            continue;
        };
        if tcp.peer_addr(m.machine) == Some(locus_fabric::tcp::UNASSIGNED) {
            tracing::info!(server = s.id, peer = m.machine, %fabric, %client, "a server joined the cluster");
        }
        if let Err(e) = tcp.set_peer_addr(m.machine, fabric) {
            tracing::error!(server = s.id, peer = m.machine, "{e}");
            continue;
        }
        s.set_known_client(m.machine, client);
    }
}

/// Step 2: registers (after recovery) and learns the peers' epochs
/// (`locus_node::member::join`, as the simulated cluster does it).
pub(crate) fn register(
    m: Membership,
    epoch: u64,
    file: &ClusterFile,
    id: MachineId,
    node: &locus_node::node::Node<TcpFabric>,
    client: std::net::SocketAddr,
) -> Result<MemberState> {
    let entry = file.server(id)?;
    let info = format!("fabric={} client={client}", entry.fabric);
    let joined = locus_node::member::join(node, &Etcd(&m), epoch, &info)?;
    let (reg, watch, members) = (joined.registration, joined.watch, joined.live);
    // The fabric serves nothing once the lease is not surely held, by this
    // process's own clock: after a pause past the TTL, a peer's operation
    // waiting in its sockets is refused before the fence thread runs.
    node.store()
        .fabric()
        .inner()
        .hold_lease(reg.lease().liveness())?;
    tracing::info!(
        server = id,
        epoch,
        live = ?members,
        "registered in etcd"
    );
    // Tables committed between the adoption at step 1b and now were
    // installed on the servers live then, not on this one (a mover asks
    // only live servers): etcd's is taken again, if newer (fault lab seed
    // 6104: a server that rejoined on an empty disk kept an older table
    // and refused the join's batches by it). A failover among them that
    // made this server a slot's primary is promoted here first
    // (`Node::adopt_committed`; seed 6060 of the lab with replication).
    if let Some(raw) = m.slots_load().map_err(etcd_err)? {
        let t = locus_store::SlotTable::decode(&raw)
            .map_err(|e| ServerError::Membership(format!("the slot table in etcd: {e}")))?;
        let mut session = node.session();
        let w = session
            .worker(node)
            .map_err(|e| ServerError::Membership(e.to_string()))?;
        if node
            .adopt_committed(w, &t)
            .map_err(|e| ServerError::Membership(e.to_string()))?
        {
            tracing::info!(
                server = id,
                epoch = t.epoch(),
                "a newer slot table from etcd"
            );
        }
    }
    // The updates in doubt that the replay made visible are sent to the
    // backups again (`Node::resend_replayed`) by `get_ready`, behind the
    // data gate, not here: a peer that has not yet taken this incarnation's
    // registration from its watch cannot answer it (its replies go to an
    // incarnation it has marked down), so a resend at registration waited
    // out the 30 s forward timeout and failed the start (CI, stop 76).
    // A failover committed but not finished (its goal still in etcd): its
    // new primaries may not hold their slots' lists yet (PROMOTE comes
    // after the commit), and this server, which took the committed table,
    // would read them there and find nothing (fault lab seed 6062: a
    // server restarted after a split answered "vertex missing"). Live
    // servers take the table only at the driver's FAIL_OVER, after every
    // PROMOTE; one that registers in between serves no data until the
    // goal is gone (`await_failovers`), answering the driver's steps
    // meanwhile.
    let failover_pending = failover_goal(&m).map_err(etcd_err)?;
    if failover_pending {
        tracing::info!(
            server = id,
            "a failover is finishing: data requests wait for it"
        );
    }
    Ok(MemberState {
        membership: m,
        epoch,
        reg,
        watch: Mutex::new(Some(watch)),
        peer_down: AtomicU64::new(0),
        peer_up: AtomicU64::new(0),
        hook_calls: AtomicU64::new(0),
        recent: Mutex::new(VecDeque::new()),
        fenced: Mutex::new(None),
        failover_pending: failover_pending.into(),
        resend_pending: (file.replication.factor > 1).into(),
    })
}

/// Whether etcd holds a failover's goal (committed or about to be, its
/// steps not all done).
fn failover_goal(m: &Membership) -> std::result::Result<bool, locus_membership::MembershipError> {
    Ok(m.goal_load()?.is_some_and(|g| {
        matches!(
            crate::moves::Goal::decode(&g),
            Ok(crate::moves::Goal::FailOver { .. })
        )
    }))
}

/// A restarted server's last steps before it serves data, behind the gate
/// of `MemberState::awaits_failover`: a pending failover finished
/// (`await_failovers`), then the lists its replay made visible sent to
/// their backups (`resend_replayed`).
fn get_ready(s: &Shared) {
    if s.membership
        .as_ref()
        .is_some_and(|ms| ms.failover_pending.load(Ordering::Acquire))
    {
        await_failovers(s);
    }
    resend_replayed(s);
}

/// A resend's wait for each backup's answer: a reply to this incarnation
/// that a peer drops (it has not taken the registration yet) is retried
/// after this, not after the 30 s forward timeout.
const RESEND_REPLY_MS: u64 = 1_000;

/// Sends the backups the lists of the vertices the log's replay made
/// visible here (`Node::resend_replayed`, design "An update in doubt made
/// visible by a replay"), again until they all answer, then lets data
/// requests in. A backup that stays down keeps the gate closed until the
/// table no longer names it (its failover or `without_backup`).
fn resend_replayed(s: &Shared) {
    let Some(ms) = &s.membership else { return };
    if !ms.resend_pending.load(Ordering::Acquire) {
        return;
    }
    let mut tries = 0u32;
    while !s.stop.load(Ordering::Acquire) {
        let mut session = s.node.session();
        let r = session
            .worker(&s.node)
            .map_err(|e| e.to_string())
            .and_then(|w| {
                w.set_forward_timeout_ms(Some(RESEND_REPLY_MS));
                let r = s.node.resend_replayed(w).map_err(|e| e.to_string());
                w.set_forward_timeout_ms(None);
                r
            });
        match r {
            Ok(n) => {
                tracing::info!(
                    server = s.id,
                    vertices = n,
                    tries,
                    "the lists the log replayed are at the backups: serving data"
                );
                break;
            }
            Err(e) => {
                tries += 1;
                let level_warn = tries % 20 == 1;
                if level_warn {
                    tracing::warn!(
                        server = s.id,
                        tries,
                        "sending the replayed lists to the backups: {e}; retrying"
                    );
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    ms.resend_pending.store(false, Ordering::Release);
}

/// Until no failover goal is pending: polls etcd, then takes its table
/// (if the driver's steps missed this server) and lets data requests in.
fn await_failovers(s: &Shared) {
    let Some(ms) = &s.membership else { return };
    while !s.stop.load(Ordering::Acquire) {
        match failover_goal(&ms.membership) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => tracing::warn!(server = s.id, "reading the failover goal: {e}"),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    match ms.membership.slots_load() {
        Ok(Some(raw)) => match locus_store::SlotTable::decode(&raw) {
            Ok(t) => {
                let mut session = s.node.session();
                let r = session
                    .worker(&s.node)
                    .map_err(|e| e.to_string())
                    .and_then(|w| s.node.adopt_committed(w, &t).map_err(|e| e.to_string()));
                if let Err(e) = r {
                    // Served anyway: the table it holds is one the driver
                    // installed or one committed before its registration.
                    tracing::error!(server = s.id, "taking etcd's table after a failover: {e}");
                }
            }
            Err(e) => tracing::error!(server = s.id, "the slot table in etcd: {e}"),
        },
        Ok(None) => {}
        Err(e) => tracing::warn!(server = s.id, "reading the slot table: {e}"),
    }
    ms.failover_pending.store(false, Ordering::Release);
    tracing::info!(server = s.id, "no failover pending: serving data");
}

/// Steps 3 and 4: the watch and fence threads.
pub(crate) fn start(s: &Arc<Shared>) -> Result<Vec<JoinHandle<()>>> {
    let Some(ms) = &s.membership else {
        return Ok(Vec::new());
    };
    let watch = ms
        .watch
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .expect("started once");
    learn_peers(s);
    let id = s.id;
    let a = Arc::clone(s);
    let b = Arc::clone(s);
    let mut threads = vec![
        crate::server::spawn(&format!("locus-membership-{id}"), move || {
            watch_loop(&a, &watch)
        })?,
        crate::server::spawn(&format!("locus-fence-{id}"), move || fence_loop(&b))?,
    ];
    if ms.failover_pending.load(Ordering::Acquire) || ms.resend_pending.load(Ordering::Acquire) {
        let c = Arc::clone(s);
        threads.push(crate::server::spawn(
            &format!("locus-get-ready-{id}"),
            move || get_ready(&c),
        )?);
    }
    Ok(threads)
}

fn watch_loop(s: &Shared, watch: &Watch) {
    let Some(ms) = &s.membership else { return };
    while !s.stop.load(Ordering::Acquire) {
        let Ok(ev) = watch.events().recv_timeout(POLL) else {
            continue;
        };
        let event = match ev {
            MemberEvent::PeerDown { machine, epoch } => PeerEvent::Down { machine, epoch },
            MemberEvent::PeerUp { machine, epoch } => PeerEvent::Up { machine, epoch },
        };
        let (kind, machine, epoch) = match event {
            PeerEvent::Down { machine, epoch } => ("down", machine, epoch),
            PeerEvent::Up { machine, epoch } => ("up", machine, epoch),
        };
        if kind == "up" {
            learn_peers(s); // a server added since may have joined
        }
        let recorded =
            match locus_node::member::on_event(&s.node, &Etcd(&ms.membership), ms.epoch, event) {
                Ok((Handled::Fenced(why), _)) => {
                    fence(s, why);
                    continue;
                }
                Ok((Handled::Ignored, _)) => continue,
                Ok((Handled::Peer(_, recorded), err)) => {
                    ms.hook_calls.fetch_add(1, Ordering::Relaxed);
                    if let Some(e) = err {
                        tracing::error!(
                            server = s.id,
                            peer = machine,
                            "cannot read the coordinator's record for the dead peer: {e}"
                        );
                    }
                    recorded
                }
                Err(e) => {
                    ms.hook_calls.fetch_add(1, Ordering::Relaxed);
                    tracing::error!(
                        server = s.id,
                        ?event,
                        "recovery after a membership event failed: {e}"
                    );
                    0
                }
            };
        match event {
            PeerEvent::Down { .. } => ms.peer_down.fetch_add(1, Ordering::Relaxed),
            PeerEvent::Up { .. } => ms.peer_up.fetch_add(1, Ordering::Relaxed),
        };
        let mut q = ms.recent.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() == RECENT_MAX {
            q.pop_front();
        }
        q.push_back(json!({"event": kind, "machine": machine, "epoch": epoch,
                           "recorded": recorded,
                           "at_s": s.started.elapsed().as_secs_f64()}));
    }
}

fn fence_loop(s: &Shared) {
    let Some(ms) = &s.membership else { return };
    while !s.stop.load(Ordering::Acquire) {
        match ms.reg.lost().recv_timeout(POLL) {
            Ok(reason) => return fence(s, reason),
            Err(_) if !ms.reg.is_live() => {
                return fence(
                    s,
                    "no lease renewal acknowledged within its TTL (was the process stopped?)"
                        .into(),
                )
            }
            Err(_) => {}
        }
    }
}

/// Fences this server out: logs, stops its fabric, refuses clients.
pub(crate) fn fence(s: &Shared, reason: String) {
    let Some(ms) = &s.membership else { return };
    {
        let mut f = ms.fenced.lock().unwrap_or_else(|e| e.into_inner());
        if f.is_some() {
            return;
        }
        *f = Some(reason.clone());
    }
    tracing::error!(
        server = s.id,
        epoch = ms.epoch,
        "fenced out: {reason}; this incarnation stops serving (restart it to rejoin at a newer epoch)"
    );
    if let Err(e) = s.node.fence() {
        tracing::error!(server = s.id, "cannot fence the fabric: {e}");
    }
    s.store().fabric().inner().shutdown();
}

impl MemberState {
    /// Why this server must not serve, if it must not: fenced, or its lease
    /// not surely held (checked per client request).
    pub(crate) fn refuses(&self, id: MachineId) -> Option<String> {
        if let Some(r) = self
            .fenced
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        {
            return Some(format!(
                "server {id} at epoch {} is fenced out ({r}); restart it",
                self.epoch
            ));
        }
        if !self.reg.is_live() {
            return Some(format!(
                "server {id} at epoch {} has not renewed its etcd lease within its TTL: \
                 it may be fenced out and serves nothing",
                self.epoch
            ));
        }
        None
    }

    /// Why a data request is refused while a failover finishes or the
    /// replayed lists go to the backups (see `register`), if it is.
    pub(crate) fn awaits_failover(&self, id: MachineId) -> Option<String> {
        if self.failover_pending.load(Ordering::Acquire) {
            return Some(format!(
                "server {id} restarted during a failover and serves data once it has finished (its new primaries are taking their slots); retry"
            ));
        }
        self.resend_pending.load(Ordering::Acquire).then(|| {
            format!(
                "server {id} has restarted and serves data once its backups hold what its log replayed; retry"
            )
        })
    }

    /// Whether fenced, and why.
    pub(crate) fn fenced(&self) -> Option<String> {
        self.fenced
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The `membership` object of STATS.
    pub(crate) fn stats_json(&self, tcp: &TcpFabric, id: MachineId) -> Value {
        let mut peers = serde_json::Map::new();
        for m in 0..tcp.config().machines as MachineId {
            if m == id {
                continue;
            }
            if let Ok(p) = tcp.peer_epoch(m) {
                peers.insert(m.to_string(), json!({"epoch": p.epoch, "down": p.down}));
            }
        }
        let recent: Vec<Value> = self
            .recent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect();
        json!({
            "epoch": self.epoch,
            "live": self.reg.is_live(),
            "fenced": self.fenced(),
            "peers": peers,
            "peer_down": self.peer_down.load(Ordering::Relaxed),
            "peer_up": self.peer_up.load(Ordering::Relaxed),
            "hook_calls": self.hook_calls.load(Ordering::Relaxed),
            "epoch_refusals": tcp.epoch_refusals(),
            "events": recent,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::addresses;

    #[test]
    fn a_registration_names_both_addresses_or_none() {
        let (f, c) = addresses("fabric=127.0.0.1:7400 client=127.0.0.1:7500").unwrap();
        assert_eq!(f.to_string(), "127.0.0.1:7400");
        assert_eq!(c.to_string(), "127.0.0.1:7500");
        // Order and extra words do not matter.
        assert!(addresses("v=2 client=[::1]:9 fabric=[::1]:8").is_some());
        for bad in [
            "",
            "fabric=127.0.0.1:7400",
            "fabric=x client=127.0.0.1:1",
            "client=1:2",
        ] {
            assert!(addresses(bad).is_none(), "{bad}");
        }
    }
}
