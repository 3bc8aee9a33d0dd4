//! The TCP fabric: machines in other processes (or hosts), reached over TCP.
//!
//! A [`TcpFabric`] is one *node*: it hosts some machines (their
//! [`MachineMemory`]: regions plus inbox, kept by the same `hosted::Hosted` as
//! the in-process and simulated fabrics' machines) and knows, for every other machine,
//! the address of the node serving it ([`TcpConfig::peers`]). The node listens
//! on one address and runs:
//!
//! * an **accept thread**, and one **service thread per accepted connection**
//!   ([`server`]). A service thread reads request frames, executes each on the
//!   hosted machine's memory with the same code as the in-process fabric
//!   (`memory::apply_ref`, the implementation behind `memory::apply`), and
//!   writes the responses back, batching them while more requests are
//!   buffered. No worker thread of the node takes part: the one-sided verbs
//!   stay one-sided. Two-sided messages are delivered into the hosted
//!   machine's inbox and acknowledged; receivers take them with
//!   [`Port::try_recv`].
//! * nothing else: the client side runs on the threads that use the ports.
//!
//! A [`TcpPort`] ([`client`]) acting as a hosted machine goes straight to
//! memory for targets hosted by its own node, and otherwise opens (lazily)
//! **one connection per remote node**, with `TCP_NODELAY`. `post` appends the
//! request frame to the connection's send buffer; `poll`, `wait`, every
//! synchronous call and a full buffer (64 KiB) write it out, so many requests
//! are in flight at once (pipelined) and their responses come back in batches.
//! A node serves one connection in order and responses carry the request id,
//! which the port checks against its queue of outstanding requests; so
//! operations and completions of one port to one target keep posting order
//! (guarantees 5 and 6 of the crate doc). A fenced request is sent only after
//! every earlier request of the port has completed. The synchronous helpers
//! never steal completions of posted requests: those met while waiting are
//! stashed for `poll`.
//!
//! **Authentication.** A node with a secret ([`TcpConfig::secret`]) lets in
//! only peers that prove they know it: the service thread of every accepted
//! connection runs [`auth::accept`](crate::auth::accept) (kind `Listener::Fabric`,
//! bounded by `io_timeout_ms`) before it reads a request, and a port runs
//! [`auth::prove`](crate::auth::prove) right after connecting, before its
//! HELLO (bounded by `connect_timeout_ms`). A connection that does not prove
//! the secret is refused and closed, counted in [`TcpFabric::auth_refusals`]
//! and logged with `tracing::warn!`; the accept thread never waits for a
//! handshake. A node without a secret, as before, runs no handshake; one that
//! meets a node with a secret fails at the challenge with a message saying so.
//!
//! **Epochs** ([`crate::fencing`]): with a membership, each node knows its own
//! epoch and the epoch of every peer, or that it is down (one
//! [`EpochTable`] for the node). HELLO carries the
//! connecting node's epoch and the one it expects the listener at; stale or
//! fenced connections are refused, and every request is checked again, so a
//! peer marked down after it connected is cut off at its next one.
//! Operations to a machine marked down fail at once with `PeerUnavailable`
//! naming its epoch, and a port reopens connections whose epochs changed. A
//! fenced node ([`Fencing::fence`]) refuses every request and connection, and
//! its ports fail. All epochs 0 (no membership): no effect.
//!
//! **Failures are errors, never hangs.** Connects are bounded by
//! `connect_timeout_ms`, reads and writes by `io_timeout_ms`. When a
//! connection fails (closed, reset, timed out, or a malformed frame), every
//! request outstanding on it completes with [`FabricError::PeerUnavailable`]
//! (or [`FabricError::Protocol`]) and the connection is dropped; the next
//! operation to that node tries to connect again, and fails at once with
//! `PeerUnavailable` while the node is down. Dropping the last handle of a
//! [`TcpFabric`] (or calling [`TcpFabric::shutdown`]) stops the accept thread
//! (a stop flag plus a self-connect to wake `accept`), shuts down every
//! accepted socket and joins the service threads.
//!
//! **Flow control.** A port keeps at most `CONN_RESPONSE_BYTES_MAX` (1 MiB) of
//! expected response bytes outstanding per connection (one larger request is
//! allowed alone), reading responses before it posts more. A service thread
//! never blocks on a write while the client may be blocked writing to it: it
//! writes with a short timeout and goes on reading requests while its unsent
//! responses stay below that window plus one frame. So a client that posts
//! much before polling slows down but cannot deadlock against its server.
//!
//! **Wire format** (see [`frame`] for every frame): a 16-byte little-endian
//! header, then the body.
//! ```text
//!  0               4       5       6               8                               16
//!  +---------------+-------+-------+---------------+-------------------------------+
//!  | body_len u32  | op u8 | mach  | aux u16       | request id u64                |  body ...
//!  +---------------+-------+-------+---------------+-------------------------------+
//!  requests:  op 1 HELLO, 2 READ, 3 WRITE, 4 CAS, 5 FETCH_ADD, 6 SEND, 7 LOOKUP; aux = region id
//!  responses: op | 0x80; aux = status (0 OK, else an error code whose body holds the
//!             FabricError's fields, so a remote OutOfBounds arrives as OutOfBounds);
//!             op 0xFF: fatal error, the connection closes
//! ```
//! Frames larger than `frame_bytes_max` (16 MiB by default) are rejected from
//! their length prefix; a one-sided operation or message that would not fit in
//! one fails with [`FabricError::MessageTooLarge`] before it is sent.

mod client;
pub(crate) mod frame;
mod server;

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::auth::Secret;
use crate::fencing::{EpochTable, Fencing};
use crate::hosted::{check_machine_count, check_queue_limits, Hosted};
use crate::memory::MachineMemory;
use crate::{check_machine, Fabric, FabricError, MachineId, RegionInfo, Result, Verb};

pub use crate::fencing::PeerEpoch;
pub use client::TcpPort;

use client::Conn;
use frame::HEADER_BYTES;

/// Settings of one TCP node. Every node of a cluster must agree on
/// `machines`, `peers` and `frame_bytes_max` (checked when nodes connect).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpConfig {
    /// Machines in the cluster (1..=128).
    pub machines: usize,
    /// The machines this node hosts (their memory lives in this process).
    pub hosted: Vec<MachineId>,
    /// For every machine (index = machine id), the address of the node serving
    /// it. Entries of hosted machines are not used.
    pub peers: Vec<SocketAddr>,
    /// Longest wait for a TCP connect, in milliseconds.
    pub connect_timeout_ms: u64,
    /// Longest wait for a socket read or write (a peer that stops answering),
    /// in milliseconds.
    pub io_timeout_ms: u64,
    /// Operations a port may have posted and not yet polled.
    pub inflight_ops_max: usize,
    /// Messages an inbox holds before senders see back-pressure.
    pub inbox_messages_max: usize,
    /// Largest message payload.
    pub message_bytes_max: usize,
    /// Largest frame on the wire, header included; bounds the data of one READ
    /// or WRITE to `frame_bytes_max - 24` bytes.
    pub frame_bytes_max: usize,
    /// Fault in the hosted machines' regions when registered (see
    /// [`crate::LocalConfig::pin_memory`]).
    pub pin_memory: bool,
    /// The cluster secret. A node with one refuses every connection that does
    /// not prove it knows it ([`crate::auth`]), and proves it to every node it
    /// connects to; so every node of a cluster needs the same secret, or none.
    /// `None` (the default): no handshake, anyone who reaches the port gets in.
    pub secret: Option<Secret>,
}

impl Default for TcpConfig {
    /// The default limits; `machines`, `hosted` and `peers` are empty and must be filled in.
    fn default() -> Self {
        TcpConfig {
            machines: 0,
            hosted: Vec::new(),
            peers: Vec::new(),
            connect_timeout_ms: 2_000,
            io_timeout_ms: 5_000,
            inflight_ops_max: 4096,
            inbox_messages_max: 65_536,
            message_bytes_max: 1 << 20,
            frame_bytes_max: 16 << 20,
            pin_memory: false,
            secret: None,
        }
    }
}

impl TcpConfig {
    /// A node of a `peers.len()`-machine cluster hosting `hosted`, with the default limits.
    pub fn new(hosted: Vec<MachineId>, peers: Vec<SocketAddr>) -> Self {
        TcpConfig {
            machines: peers.len(),
            hosted,
            peers,
            ..Self::default()
        }
    }

    /// Rejects settings that cannot work, saying which and why.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(FabricError::Config(m));
        check_machine_count(self.machines)?;
        if self.peers.len() != self.machines {
            return bad(format!(
                "peers has {} addresses but the cluster has {} machines: give one address per machine",
                self.peers.len(),
                self.machines
            ));
        }
        if self.hosted.is_empty() {
            return bad("hosted is empty: a node must host at least one machine".into());
        }
        for (i, &m) in self.hosted.iter().enumerate() {
            if (m as usize) >= self.machines {
                return bad(format!(
                    "hosted machine {m} does not exist in a cluster of {} machines",
                    self.machines
                ));
            }
            if self.hosted[..i].contains(&m) {
                return bad(format!("machine {m} is listed twice in hosted"));
            }
        }
        if self.connect_timeout_ms == 0 || self.io_timeout_ms == 0 {
            return bad("connect_timeout_ms and io_timeout_ms must be positive".into());
        }
        check_queue_limits(
            self.inflight_ops_max,
            self.inbox_messages_max,
            self.message_bytes_max,
        )?;
        if self.frame_bytes_max < frame::FRAME_BYTES_MIN || self.frame_bytes_max > u32::MAX as usize
        {
            return bad(format!(
                "frame_bytes_max = {} but must be {}..={}",
                self.frame_bytes_max,
                frame::FRAME_BYTES_MIN,
                u32::MAX
            ));
        }
        if self.message_bytes_max > self.send_payload_max() {
            return bad(format!(
                "message_bytes_max = {} does not fit in a frame of frame_bytes_max = {} \
                 ({} bytes of header): raise frame_bytes_max or lower message_bytes_max",
                self.message_bytes_max,
                self.frame_bytes_max,
                HEADER_BYTES + 1
            ));
        }
        Ok(())
    }

    /// Largest READ: the response carries the data after a header.
    fn read_bytes_max(&self) -> usize {
        self.frame_bytes_max - HEADER_BYTES
    }

    /// Largest WRITE: the request carries the offset and the data.
    fn write_bytes_max(&self) -> usize {
        self.frame_bytes_max - HEADER_BYTES - 8
    }

    /// Largest SEND payload the frame can carry (after the sender byte).
    fn send_payload_max(&self) -> usize {
        self.frame_bytes_max.saturating_sub(HEADER_BYTES + 1)
    }

    fn io_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.io_timeout_ms)
    }
}

/// Where a machine's memory is, seen from one node.
pub(crate) enum Route<'a> {
    /// Hosted by this node.
    Local(&'a MachineMemory),
    /// Served by remote node `node` (an index into [`Inner::nodes`]).
    Remote(usize),
}

/// State shared by a node's handle, its ports and its service threads.
pub(crate) struct Inner {
    pub(crate) config: TcpConfig,
    /// The machines this node holds the memory of.
    pub(crate) hosted: Hosted,
    /// For each machine not hosted here, the index of its node in `nodes`.
    node_of: Vec<Option<usize>>,
    /// Addresses of the remote nodes: distinct ones, and one per machine
    /// not yet given an address ([`UNASSIGNED`], set later by
    /// [`TcpFabric::set_peer_addr`]).
    pub(crate) nodes: Vec<std::sync::RwLock<SocketAddr>>,
    /// The connection `lookup` uses to each remote node (opened on first use).
    control: Vec<Mutex<Option<Conn>>>,
    /// Set when the node stops serving.
    pub(crate) stop: AtomicBool,
    /// The accepted connections, so that shutdown can close them.
    pub(crate) sessions: Mutex<server::Sessions>,
    /// The address this node listens on.
    pub(crate) local_addr: SocketAddr,
    /// Accepted connections closed for not proving the secret.
    pub(crate) auth_refusals: AtomicU64,
    /// This node's epoch and the one it believes each machine is at.
    pub(crate) epochs: EpochTable,
    /// Connections refused (at HELLO or later) for their epoch.
    pub(crate) epoch_refusals: AtomicU64,
}

impl Inner {
    /// Where `machine` lives; fails if this node is fenced, or `machine` is
    /// elsewhere and marked down (the requester's rules, `fencing.rs`).
    #[inline]
    pub(crate) fn route(&self, machine: MachineId) -> Result<Route<'_>> {
        check_machine(machine, self.config.machines)?;
        self.epochs.check_issuer(machine)?;
        match self.hosted.get(machine) {
            Some(m) => Ok(Route::Local(m)),
            None => {
                self.epochs.check_up(machine)?;
                Ok(Route::Remote(
                    self.node_of[machine as usize].expect("every machine not hosted has a node"),
                ))
            }
        }
    }

    /// Whether a one-sided verb fits in a frame.
    #[inline]
    pub(crate) fn check_payload(&self, verb: &Verb) -> Result<()> {
        let (len, limit) = match verb {
            Verb::Read { buf } => (buf.len(), self.config.read_bytes_max()),
            Verb::ReadTo { len, .. } => (*len as usize, self.config.read_bytes_max()),
            Verb::Write { data } => (data.len(), self.config.write_bytes_max()),
            Verb::Cas { .. } | Verb::FetchAdd { .. } => return Ok(()),
        };
        check_len(len, limit)
    }
}

/// An access of `len` bytes against a frame's capacity `limit`.
#[inline]
pub(crate) fn check_len(len: usize, limit: usize) -> Result<()> {
    if len > limit {
        Err(FabricError::MessageTooLarge { len, limit })
    } else {
        Ok(())
    }
}

/// Stops the accept thread on drop of the last fabric handle.
struct Server {
    inner: Arc<Inner>,
    accept: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        server::shutdown(&self.inner, &self.accept);
    }
}

/// One node of a TCP cluster. Cheap to clone (shared); the node stops serving
/// when the last clone is dropped or [`TcpFabric::shutdown`] is called.
/// Ports keep working for hosted machines after that, and fail with
/// [`FabricError::PeerUnavailable`] for remote ones only if those nodes are gone.
#[derive(Clone)]
pub struct TcpFabric {
    inner: Arc<Inner>,
    server: Arc<Server>,
}

impl std::fmt::Debug for TcpFabric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpFabric")
            .field("local_addr", &self.inner.local_addr)
            .field("hosted", &self.inner.config.hosted)
            .field("machines", &self.inner.config.machines)
            .finish()
    }
}

impl TcpFabric {
    /// Listens on `listen_addr` (port 0 picks a free port, see
    /// [`TcpFabric::local_addr`]) and starts serving the hosted machines.
    pub fn bind(config: TcpConfig, listen_addr: SocketAddr) -> Result<TcpFabric> {
        config.validate()?;
        let listener = TcpListener::bind(listen_addr).map_err(|e| {
            FabricError::Config(format!(
                "cannot listen on {listen_addr}: {e}; pick a free address or port 0"
            ))
        })?;
        Self::from_listener(config, listener)
    }

    /// Serves the hosted machines on an already bound listener. Lets a test or
    /// launcher bind every node first (learning their ports) and then build the
    /// peer table.
    pub fn from_listener(config: TcpConfig, listener: TcpListener) -> Result<TcpFabric> {
        config.validate()?;
        let local_addr = listener
            .local_addr()
            .and_then(|a| listener.set_nonblocking(false).map(|()| a))
            .map_err(|e| FabricError::Config(format!("the listener is not usable: {e}")))?;
        let hosted = Hosted::some(
            config.machines,
            config.hosted.iter().copied(),
            config.inbox_messages_max,
            config.message_bytes_max,
            config.pin_memory,
        );
        let mut nodes: Vec<SocketAddr> = Vec::new();
        let node_of = (0..config.machines)
            .map(|m| {
                if hosted.hosts(m as MachineId) {
                    return None;
                }
                let addr = config.peers[m];
                // Machines without an address yet get a node each: each
                // may be given its own address later.
                let known = (addr != UNASSIGNED)
                    .then(|| nodes.iter().position(|&a| a == addr))
                    .flatten();
                Some(known.unwrap_or_else(|| {
                    nodes.push(addr);
                    nodes.len() - 1
                }))
            })
            .collect();
        let nodes: Vec<std::sync::RwLock<SocketAddr>> =
            nodes.into_iter().map(std::sync::RwLock::new).collect();
        let control = nodes.iter().map(|_| Mutex::new(None)).collect();
        let machines = config.machines;
        let inner = Arc::new(Inner {
            config,
            hosted,
            node_of,
            nodes,
            control,
            stop: AtomicBool::new(false),
            sessions: Mutex::new(server::Sessions::default()),
            local_addr,
            auth_refusals: AtomicU64::new(0),
            epochs: EpochTable::new(machines),
            epoch_refusals: AtomicU64::new(0),
        });
        let accept = server::start(Arc::clone(&inner), listener)?;
        Ok(TcpFabric {
            server: Arc::new(Server {
                inner: Arc::clone(&inner),
                accept: Mutex::new(Some(accept)),
            }),
            inner,
        })
    }

    /// The address this node listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local_addr
    }

    /// The settings.
    pub fn config(&self) -> &TcpConfig {
        &self.inner.config
    }

    /// Accepted connections this node closed because they did not prove the
    /// cluster secret (a wrong secret, none, garbage, or silence). Always 0
    /// without a secret.
    pub fn auth_refusals(&self) -> u64 {
        self.inner.auth_refusals.load(Ordering::Relaxed)
    }

    /// Sets this node's own epoch (from its membership registration), carried
    /// in the HELLO of every connection it opens from now on; connections
    /// opened at another epoch are reopened. See [`crate::fencing`].
    pub fn set_own_epoch(&self, epoch: u64) {
        self.inner.epochs.set_own(epoch);
    }

    /// This node's own epoch (0 until set).
    pub fn own_epoch(&self) -> u64 {
        self.inner.epochs.own()
    }

    /// Gives `machine`, listed with the address [`UNASSIGNED`] when this
    /// node started (a server added to the cluster later), its address.
    /// Setting the address it already has changes nothing; changing a known
    /// address is refused (a server keeps its address for the cluster's
    /// life), as is an address for a machine hosted here.
    pub fn set_peer_addr(&self, machine: MachineId, addr: SocketAddr) -> Result<()> {
        check_machine(machine, self.inner.config.machines)?;
        let Some(node) = self.inner.node_of[machine as usize] else {
            return Err(FabricError::Config(format!(
                "machine {machine} is hosted by this node: it has no peer address"
            )));
        };
        let mut held = self.inner.nodes[node]
            .write()
            .unwrap_or_else(|e| e.into_inner());
        if *held == addr {
            return Ok(());
        }
        if *held != UNASSIGNED || addr == UNASSIGNED {
            return Err(FabricError::Config(format!(
                "machine {machine} is at {held}; a server cannot move to {addr}"
            )));
        }
        *held = addr;
        Ok(())
    }

    /// The address this node has for `machine` (`None` for a hosted machine;
    /// [`UNASSIGNED`] for one not given an address yet).
    pub fn peer_addr(&self, machine: MachineId) -> Option<SocketAddr> {
        let node = (*self.inner.node_of.get(machine as usize)?)?;
        Some(
            *self.inner.nodes[node]
                .read()
                .unwrap_or_else(|e| e.into_inner()),
        )
    }

    /// Records that `machine` is up at `epoch`: connections to it reopen
    /// expecting that epoch, and its older incarnations are refused.
    pub fn set_peer_epoch(&self, machine: MachineId, epoch: u64) -> Result<()> {
        self.inner
            .epochs
            .set_peer(machine, PeerEpoch { epoch, down: false })
    }

    /// Marks `machine`'s incarnation at `epoch` down: operations to it fail
    /// at once with [`FabricError::PeerUnavailable`] naming it and the epoch,
    /// and its connections to this node are refused.
    pub fn mark_down(&self, machine: MachineId, epoch: u64) -> Result<()> {
        self.inner
            .epochs
            .set_peer(machine, PeerEpoch { epoch, down: true })
    }

    /// What this node believes about `machine`'s epoch.
    pub fn peer_epoch(&self, machine: MachineId) -> Result<PeerEpoch> {
        self.inner.epochs.peer(machine)
    }

    /// Connections this node refused (at HELLO or at a later request) for
    /// their epoch. Always 0 without a membership.
    pub fn epoch_refusals(&self) -> u64 {
        self.inner.epoch_refusals.load(Ordering::Relaxed)
    }

    /// Direct access to a hosted machine's memory (for tools and tests).
    pub fn memory(&self, machine: MachineId) -> Result<&MachineMemory> {
        self.inner.hosted.memory(machine)
    }

    /// Fences this node as soon as `live` says its membership lease is not
    /// surely held (checked per request served and per operation issued;
    /// [`EpochTable::hold_lease`]). Once per node.
    pub fn hold_lease(&self, live: impl Fn() -> bool + Send + Sync + 'static) -> Result<()> {
        self.inner.epochs.hold_lease(Box::new(live))
    }

    /// Stops serving now, as if the node had died: closes the listener and
    /// every accepted connection and joins the service threads. Idempotent;
    /// also done when the last clone is dropped.
    pub fn shutdown(&self) {
        server::shutdown(&self.server.inner, &self.server.accept);
    }
}

/// The node's one table, for every hosted `me` (the [`Fencing`] methods
/// are the inherent ones, with `me` checked).
impl Fencing for TcpFabric {
    fn own_epoch(&self, me: MachineId) -> Result<u64> {
        self.inner.hosted.memory(me)?;
        Ok(TcpFabric::own_epoch(self))
    }
    fn set_own_epoch(&self, me: MachineId, epoch: u64) -> Result<()> {
        self.inner.hosted.memory(me)?;
        TcpFabric::set_own_epoch(self, epoch);
        Ok(())
    }
    fn peer_epoch(&self, me: MachineId, peer: MachineId) -> Result<PeerEpoch> {
        self.inner.hosted.memory(me)?;
        TcpFabric::peer_epoch(self, peer)
    }
    fn set_peer_epoch(&self, me: MachineId, peer: MachineId, epoch: u64) -> Result<()> {
        self.inner.hosted.memory(me)?;
        TcpFabric::set_peer_epoch(self, peer, epoch)
    }
    fn mark_down(&self, me: MachineId, peer: MachineId, epoch: u64) -> Result<()> {
        self.inner.hosted.memory(me)?;
        TcpFabric::mark_down(self, peer, epoch)
    }
    /// The whole node is fenced: its listener refuses every request and
    /// every new connection, and its ports fail, for every hosted machine.
    fn fence(&self, me: MachineId) -> Result<()> {
        self.inner.hosted.memory(me)?;
        self.inner.epochs.fence();
        Ok(())
    }
    fn is_fenced(&self, me: MachineId) -> Result<bool> {
        self.inner.hosted.memory(me)?;
        Ok(self.inner.epochs.is_fenced())
    }
    fn hold_peers(&self, me: MachineId) -> Result<()> {
        self.inner.hosted.memory(me)?;
        self.inner.epochs.set_holding(true);
        Ok(())
    }
    fn serve_peers(&self, me: MachineId) -> Result<()> {
        self.inner.hosted.memory(me)?;
        self.inner.epochs.set_holding(false);
        Ok(())
    }
}

impl Fabric for TcpFabric {
    type Port = TcpPort;

    fn machine_count(&self) -> usize {
        self.inner.config.machines
    }

    fn hosts(&self, machine: MachineId) -> bool {
        self.inner.hosted.hosts(machine)
    }

    fn register(&self, machine: MachineId, name: &str, len_bytes: u64) -> Result<RegionInfo> {
        self.inner.hosted.register(machine, name, len_bytes)
    }

    fn lookup(&self, machine: MachineId, name: &str) -> Result<RegionInfo> {
        match self.inner.route(machine)? {
            Route::Local(mem) => mem.lookup(name),
            Route::Remote(node) => {
                let mut slot = self.inner.control[node]
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                client::lookup(&self.inner, &mut slot, node, machine, name)
            }
        }
    }

    fn wake_on_message(&self, machine: MachineId, waker: std::thread::Thread) -> Result<bool> {
        self.inner.hosted.set_waker(machine, waker).map(|()| true)
    }

    fn port(&self, machine: MachineId) -> Result<TcpPort> {
        self.inner.hosted.memory(machine)?;
        Ok(TcpPort::new(Arc::clone(&self.inner), machine))
    }
}

/// The peer address of a machine with no server yet (a cluster made with
/// room to grow): operations to it fail with
/// [`FabricError::PeerUnavailable`] until [`TcpFabric::set_peer_addr`]
/// gives it one.
pub const UNASSIGNED: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0);

/// Builds an N-node cluster on 127.0.0.1 in this process, one node per
/// machine (node `m` hosts machine `m`), with the default limits. Every
/// operation between machines crosses a real socket.
pub fn loopback_cluster(machines: usize) -> Result<Vec<TcpFabric>> {
    loopback_cluster_with(TcpConfig {
        machines,
        ..TcpConfig::default()
    })
}

/// Like [`loopback_cluster`] with the limits (and `machines`, and `secret`)
/// of `config`; its `hosted` and `peers` are replaced.
pub fn loopback_cluster_with(config: TcpConfig) -> Result<Vec<TcpFabric>> {
    let layout: Vec<Vec<MachineId>> = (0..config.machines).map(|m| vec![m as MachineId]).collect();
    loopback_nodes(config, &layout)
}

/// Builds a cluster on 127.0.0.1 with one node per entry of `layout`, node
/// `i` hosting the machines `layout[i]` (together they must host each of the
/// `config.machines` machines exactly once). `config`'s `hosted` and `peers`
/// are replaced.
pub fn loopback_nodes(config: TcpConfig, layout: &[Vec<MachineId>]) -> Result<Vec<TcpFabric>> {
    check_machine_count(config.machines)?;
    let mut owner = vec![None; config.machines];
    for (node, hosted) in layout.iter().enumerate() {
        for &m in hosted {
            match owner.get_mut(m as usize) {
                Some(slot @ None) => *slot = Some(node),
                Some(Some(_)) => {
                    return Err(FabricError::Config(format!(
                        "machine {m} is hosted by two nodes"
                    )))
                }
                None => {
                    return Err(FabricError::Config(format!(
                        "machine {m} does not exist in a cluster of {} machines",
                        config.machines
                    )))
                }
            }
        }
    }
    if let Some(m) = owner.iter().position(Option::is_none) {
        return Err(FabricError::Config(format!("no node hosts machine {m}")));
    }
    let listeners = layout
        .iter()
        .map(|_| {
            TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
                .map_err(|e| FabricError::Config(format!("cannot listen on 127.0.0.1: {e}")))
        })
        .collect::<Result<Vec<_>>>()?;
    let addrs = listeners
        .iter()
        .map(|l| {
            l.local_addr()
                .map_err(|e| FabricError::Config(format!("a listener has no address: {e}")))
        })
        .collect::<Result<Vec<_>>>()?;
    let peers: Vec<SocketAddr> = owner
        .iter()
        .map(|n| addrs[n.expect("checked above")])
        .collect();
    listeners
        .into_iter()
        .zip(layout)
        .map(|(l, hosted)| {
            TcpFabric::from_listener(
                TcpConfig {
                    hosted: hosted.clone(),
                    peers: peers.clone(),
                    ..config.clone()
                },
                l,
            )
        })
        .collect()
}

/// `err`, re-addressed to `machine` when it names the peer (a connection
/// failure is reported against each request's own target).
pub(crate) fn for_machine(err: &FabricError, machine: MachineId) -> FabricError {
    match err {
        FabricError::PeerUnavailable { reason, .. } => FabricError::PeerUnavailable {
            machine,
            reason: reason.clone(),
        },
        FabricError::Protocol { reason, .. } => FabricError::Protocol {
            machine,
            reason: reason.clone(),
        },
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests;
