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
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::hosted::{check_machine_count, check_queue_limits, Hosted};
use crate::memory::MachineMemory;
use crate::{check_machine, Fabric, FabricError, MachineId, RegionInfo, Result, Verb};

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
    /// Distinct addresses of the remote nodes.
    pub(crate) nodes: Vec<SocketAddr>,
    /// The connection `lookup` uses to each remote node (opened on first use).
    control: Vec<Mutex<Option<Conn>>>,
    /// Set when the node stops serving.
    pub(crate) stop: AtomicBool,
    /// The accepted connections, so that shutdown can close them.
    pub(crate) sessions: Mutex<server::Sessions>,
    /// The address this node listens on.
    pub(crate) local_addr: SocketAddr,
}

impl Inner {
    /// Where `machine` lives.
    #[inline]
    pub(crate) fn route(&self, machine: MachineId) -> Result<Route<'_>> {
        check_machine(machine, self.config.machines)?;
        match self.hosted.get(machine) {
            Some(m) => Ok(Route::Local(m)),
            None => Ok(Route::Remote(
                self.node_of[machine as usize].expect("every machine not hosted has a node"),
            )),
        }
    }

    /// Whether a one-sided verb fits in a frame.
    #[inline]
    pub(crate) fn check_payload(&self, verb: &Verb) -> Result<()> {
        let (len, limit) = match verb {
            Verb::Read { buf } => (buf.len(), self.config.read_bytes_max()),
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
                Some(nodes.iter().position(|&a| a == addr).unwrap_or_else(|| {
                    nodes.push(addr);
                    nodes.len() - 1
                }))
            })
            .collect();
        let control = nodes.iter().map(|_| Mutex::new(None)).collect();
        let inner = Arc::new(Inner {
            config,
            hosted,
            node_of,
            nodes,
            control,
            stop: AtomicBool::new(false),
            sessions: Mutex::new(server::Sessions::default()),
            local_addr,
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

    /// Direct access to a hosted machine's memory (for tools and tests).
    pub fn memory(&self, machine: MachineId) -> Result<&MachineMemory> {
        self.inner.hosted.memory(machine)
    }

    /// Stops serving now, as if the node had died: closes the listener and
    /// every accepted connection and joins the service threads. Idempotent;
    /// also done when the last clone is dropped.
    pub fn shutdown(&self) {
        server::shutdown(&self.server.inner, &self.server.accept);
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

    fn port(&self, machine: MachineId) -> Result<TcpPort> {
        self.inner.hosted.memory(machine)?;
        Ok(TcpPort::new(Arc::clone(&self.inner), machine))
    }
}

/// Builds an N-node cluster on 127.0.0.1 in this process, one node per
/// machine (node `m` hosts machine `m`), with the default limits. Every
/// operation between machines crosses a real socket.
pub fn loopback_cluster(machines: usize) -> Result<Vec<TcpFabric>> {
    loopback_cluster_with(TcpConfig {
        machines,
        ..TcpConfig::default()
    })
}

/// Like [`loopback_cluster`] with the limits (and `machines`) of `config`;
/// its `hosted` and `peers` are replaced.
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
mod tests {
    use super::*;
    use crate::{Output, Port, RegionId, WorkRequest};

    fn addrs(n: usize) -> Vec<SocketAddr> {
        (0..n)
            .map(|i| SocketAddr::from(([127, 0, 0, 1], 1 + i as u16)))
            .collect()
    }

    #[test]
    fn config_limits() {
        assert!(TcpConfig::new(vec![0], addrs(1)).validate().is_ok());
        assert!(TcpConfig::new(vec![127], addrs(128)).validate().is_ok());
        assert!(TcpConfig::new(vec![0], addrs(129)).validate().is_err());
        assert!(TcpConfig::new(vec![0], vec![]).validate().is_err());
        assert!(TcpConfig::new(vec![], addrs(2)).validate().is_err());
        assert!(TcpConfig::new(vec![2], addrs(2)).validate().is_err());
        assert!(TcpConfig::new(vec![1, 1], addrs(2)).validate().is_err());
        let mut c = TcpConfig::new(vec![0], addrs(2));
        c.peers.pop();
        assert!(c.validate().is_err(), "one address per machine");
        let mut c = TcpConfig::new(vec![0], addrs(2));
        c.io_timeout_ms = 0;
        assert!(c.validate().is_err());
        let mut c = TcpConfig::new(vec![0], addrs(2));
        c.frame_bytes_max = 1 << 16;
        assert!(
            matches!(c.validate(), Err(FabricError::Config(m)) if m.contains("message_bytes_max")),
            "a message must fit in a frame"
        );
        c.message_bytes_max = (1 << 16) - HEADER_BYTES - 1;
        assert!(c.validate().is_ok(), "the largest message that fits");
        c.message_bytes_max += 1;
        assert!(c.validate().is_err());
    }

    #[test]
    fn hosted_targets_go_straight_to_memory() {
        // Machine 1's node does not exist: nothing listens at port 1. Ports
        // of machine 0 never need it for machine 0's own memory.
        let config = TcpConfig::new(vec![0], addrs(2));
        let node = TcpFabric::bind(config, SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
        let r = node.register(0, "r", 64).unwrap().id;
        let mut p = node.port(0).unwrap();
        p.write_word(0, r, 8, 5).unwrap();
        assert_eq!(p.cas(0, r, 8, 5, 6).unwrap(), 5);
        p.post(WorkRequest::read(1, 0, r, 8, 8)).unwrap();
        let mut out = Vec::new();
        assert_eq!(p.wait(&mut out).unwrap(), 1);
        assert_eq!(out[0].result, Ok(Output::Data(6u64.to_le_bytes().to_vec())));
        p.send(0, b"me").unwrap();
        assert_eq!(p.try_recv().unwrap().unwrap().payload, b"me");
        assert!(matches!(
            node.port(1),
            Err(FabricError::NotHosted { machine: 1 })
        ));
        assert!(matches!(
            node.register(1, "x", 8),
            Err(FabricError::NotHosted { machine: 1 })
        ));
        assert!(node.hosts(0) && !node.hosts(1) && !node.hosts(2));
    }

    #[test]
    fn machines_sharing_a_node_share_its_connection() {
        let nodes = loopback_nodes(
            TcpConfig {
                machines: 4,
                ..TcpConfig::default()
            },
            &[vec![0, 2], vec![1, 3]],
        )
        .unwrap();
        assert_eq!(nodes[0].inner.nodes.len(), 1, "one remote node");
        let r1 = nodes[1].register(1, "r", 64).unwrap().id;
        let r3 = nodes[1].register(3, "r", 64).unwrap().id;
        let mut p = nodes[0].port(2).unwrap();
        p.write_word(1, r1, 0, 11).unwrap();
        p.write_word(3, r3, 0, 33).unwrap();
        let mut q = nodes[1].port(3).unwrap();
        assert_eq!(q.read_word(1, r1, 0).unwrap(), 11, "local to node 1");
        assert_eq!(q.read_word(3, r3, 0).unwrap(), 33);
        assert_eq!(nodes[0].lookup(3, "r").unwrap().id, r3);
        assert!(
            loopback_nodes(
                TcpConfig {
                    machines: 2,
                    ..TcpConfig::default()
                },
                &[vec![0]]
            )
            .is_err(),
            "every machine needs a node"
        );
    }

    fn cluster(machines: usize, tweak: impl Fn(&mut TcpConfig)) -> Vec<TcpFabric> {
        let mut c = TcpConfig {
            machines,
            ..TcpConfig::default()
        };
        tweak(&mut c);
        loopback_cluster_with(c).unwrap()
    }

    fn drain(p: &mut impl Port, out: &mut Vec<crate::Completion>) {
        while p.inflight() > 0 {
            p.wait(out).unwrap();
        }
    }

    /// One port's seeded random mix of posted and synchronous operations,
    /// fences, bad targets/regions/offsets and messages, run on the TCP
    /// fabric and on the in-process fabric (the reference): every result must
    /// be identical. One issuing port makes the outcome deterministic
    /// (per-target order is all that matters).
    #[test]
    fn matches_the_in_process_fabric() {
        use crate::local::{LocalConfig, LocalFabric};
        use crate::Completion;
        let seed = 0x5EED_u64;
        let tcp = cluster(3, |_| {});
        let local = LocalFabric::new(LocalConfig::with_machines(3).without_model()).unwrap();
        for m in 0..3u8 {
            for (name, len) in [("a", 256u64), ("b", 64)] {
                let t = tcp[m as usize].register(m, name, len).unwrap();
                assert_eq!(t, local.register(m, name, len).unwrap());
            }
        }
        let mut x = seed;
        let mut rnd = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut pt = tcp[0].port(0).unwrap();
        let mut pl = local.port(0).unwrap();
        let (mut ct, mut cl): (Vec<Completion>, Vec<Completion>) = (Vec::new(), Vec::new());
        for step in 0..3000u64 {
            let target = [0u8, 1, 2, 2, 1, 3][rnd(6) as usize];
            let region = RegionId([0u16, 1, 0, 2][rnd(4) as usize]);
            let offset = match rnd(10) {
                0 => 4,
                1 => 256,
                _ => rnd(32) * 8,
            };
            let len = (rnd(4) * 8) as usize;
            let wr = match rnd(4) {
                0 => WorkRequest::read(step, target, region, offset, len),
                1 => WorkRequest::write(step, target, region, offset, vec![step as u8; len]),
                2 => WorkRequest::cas(step, target, region, offset, rnd(3), step),
                _ => WorkRequest::fetch_add(step, target, region, offset, step),
            };
            let wr = if rnd(8) == 0 { wr.fenced() } else { wr };
            let ctx = format!("seed {seed:#x} step {step}: {wr:?}");
            match rnd(10) {
                0..=4 => {
                    pt.post(wr.clone()).unwrap();
                    pl.post(wr).unwrap();
                }
                5..=7 => assert_eq!(pt.execute(wr.clone()), pl.execute(wr), "{ctx}"),
                8 => {
                    let mut bt = vec![0u8; len];
                    let mut bl = vec![0u8; len];
                    let rt = pt.read(target, region, offset, &mut bt);
                    assert_eq!(rt, pl.read(target, region, offset, &mut bl), "{ctx}");
                    assert_eq!(bt, bl, "{ctx}");
                }
                _ => {
                    let payload = step.to_le_bytes();
                    assert_eq!(
                        pt.send(target, &payload),
                        pl.send(target, &payload),
                        "{ctx}"
                    );
                }
            }
            if rnd(4) == 0 || pt.inflight() > 48 {
                pt.poll(&mut ct).unwrap();
                pl.poll(&mut cl).unwrap();
            }
            if rnd(50) == 0 {
                drain(&mut pt, &mut ct);
                drain(&mut pl, &mut cl);
            }
        }
        drain(&mut pt, &mut ct);
        drain(&mut pl, &mut cl);
        ct.sort_by_key(|c| c.id);
        cl.sort_by_key(|c| c.id);
        assert_eq!(ct.len(), cl.len());
        for (t, l) in ct.iter().zip(&cl) {
            assert_eq!(t, l, "seed {seed:#x}");
        }
        for m in 0..3u8 {
            let mut qt = tcp[m as usize].port(m).unwrap();
            let mut ql = local.port(m).unwrap();
            loop {
                let (a, b) = (qt.try_recv().unwrap(), ql.try_recv().unwrap());
                assert_eq!(a, b, "messages to machine {m}");
                if a.is_none() {
                    break;
                }
            }
            for r in 0..2u16 {
                let len = if r == 0 { 256 } else { 64 };
                let (mut a, mut b) = (vec![0u8; len], vec![0u8; len]);
                qt.read(m, RegionId(r), 0, &mut a).unwrap();
                ql.read(m, RegionId(r), 0, &mut b).unwrap();
                assert_eq!(a, b, "final memory of machine {m} region {r}");
            }
        }
    }

    /// Large reads and writes pipelined to one node without polling, far
    /// beyond socket buffers: the response window and the service thread's
    /// write timeout keep both ends moving.
    #[test]
    fn big_pipelines_both_ways_do_not_deadlock() {
        let nodes = cluster(2, |c| c.frame_bytes_max = 2 << 20);
        let chunk = 256 << 10;
        let r = nodes[1].register(1, "big", 64 * chunk as u64).unwrap().id;
        let mut p = nodes[0].port(0).unwrap();
        for i in 0..64u64 {
            let off = i * chunk as u64;
            p.post(WorkRequest::write(2 * i, 1, r, off, vec![i as u8; chunk]))
                .unwrap();
            p.post(WorkRequest::read(2 * i + 1, 1, r, off, chunk))
                .unwrap();
        }
        let mut out = Vec::new();
        drain(&mut p, &mut out);
        assert_eq!(out.len(), 128);
        for (k, c) in out.iter().enumerate() {
            assert_eq!(c.id, k as u64, "posting order");
            let i = k as u64 / 2;
            match &c.result {
                Ok(Output::Written(d)) => assert_eq!(d.len(), chunk),
                Ok(Output::Data(d)) => assert!(d.iter().all(|&b| b == i as u8), "read {i}"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn operations_too_large_for_a_frame_fail_before_sending() {
        let nodes = cluster(2, |c| {
            c.frame_bytes_max = 64 << 10;
            c.message_bytes_max = 1024;
        });
        let r = nodes[1].register(1, "r", 1 << 20).unwrap().id;
        let mut p = nodes[0].port(0).unwrap();
        let max_read = (64 << 10) - HEADER_BYTES;
        let mut big = vec![0u8; max_read + 8];
        assert!(matches!(
            p.read(1, r, 0, &mut big),
            Err(FabricError::MessageTooLarge { .. })
        ));
        p.read(1, r, 0, &mut big[..max_read]).unwrap();
        let max_write = max_read - 8;
        assert!(p.write(1, r, 0, &big[..max_write + 8]).is_err());
        p.write(1, r, 0, &big[..max_write]).unwrap();
        p.post(WorkRequest::read(1, 1, r, 0, max_read + 8)).unwrap();
        let mut out = Vec::new();
        drain(&mut p, &mut out);
        assert!(matches!(
            out[0].result,
            Err(FabricError::MessageTooLarge { .. })
        ));
        assert!(matches!(
            p.send(1, &[0; 1025]),
            Err(FabricError::MessageTooLarge {
                len: 1025,
                limit: 1024
            })
        ));
        p.send(1, &[0; 1024]).unwrap();
        // Locally the frame limit does not apply.
        let r0 = nodes[0].register(0, "r", 1 << 20).unwrap().id;
        p.write(0, r0, 0, &vec![1u8; 1 << 20]).unwrap();
    }

    #[test]
    fn a_full_remote_inbox_pushes_back() {
        let nodes = cluster(2, |c| c.inbox_messages_max = 3);
        let mut p = nodes[0].port(0).unwrap();
        for i in 0..3u8 {
            p.send(1, &[i]).unwrap();
        }
        assert_eq!(
            p.send(1, b"x"),
            Err(FabricError::InboxFull {
                machine: 1,
                limit: 3
            })
        );
        let mut q = nodes[1].port(1).unwrap();
        assert_eq!(q.try_recv().unwrap().unwrap().payload, vec![0]);
        p.send(1, b"y").unwrap();
        let big = vec![7u8; 1 << 20];
        let mut q0 = nodes[0].port(0).unwrap();
        q.send(0, &big).unwrap();
        assert_eq!(
            q0.try_recv().unwrap().unwrap().payload,
            big,
            "a 1 MiB message"
        );
    }

    #[test]
    fn sync_calls_leave_posted_completions_for_poll() {
        let nodes = cluster(3, |_| {});
        let r1 = nodes[1].register(1, "r", 64).unwrap().id;
        let r2 = nodes[2].register(2, "r", 64).unwrap().id;
        let mut p = nodes[0].port(0).unwrap();
        p.post(WorkRequest::fetch_add(1, 1, r1, 0, 5)).unwrap();
        p.post(WorkRequest::fetch_add(2, 2, r2, 0, 6)).unwrap();
        // Same target as request 1: sees its effect (per-target order).
        assert_eq!(p.fetch_add(1, r1, 0, 1).unwrap(), 5);
        assert_eq!(p.cas(2, r2, 0, 6, 60).unwrap(), 6);
        p.send(1, b"m").unwrap();
        assert_eq!(p.inflight(), 2);
        let mut out = Vec::new();
        drain(&mut p, &mut out);
        out.sort_by_key(|c| c.id);
        assert_eq!(out[0].result, Ok(Output::Word(0)));
        assert_eq!(out[1].result, Ok(Output::Word(0)));
        // A fenced request to machine 2 waits for a posted one to machine 1.
        p.post(WorkRequest::write(3, 1, r1, 8, vec![1; 8])).unwrap();
        p.post(WorkRequest::read(4, 2, r2, 0, 8).fenced()).unwrap();
        let mut out = Vec::new();
        drain(&mut p, &mut out);
        assert_eq!(out.iter().map(|c| c.id).collect::<Vec<_>>(), vec![3, 4]);
    }
}
