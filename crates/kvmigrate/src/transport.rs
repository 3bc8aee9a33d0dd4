//! How packets move between nodes. [`Transport`] is the seam: [`InProcess`] (channels, the
//! default), [`Udp`] (one loopback socket per node, every node in this process, packets encoded
//! with [`crate::wire`]) and [`UdpPeer`] (this process's one node of a deployment with a
//! process per node, as `locus kv` runs) are siblings; [`Lossy`] is a decorator of any of them
//! that drops, duplicates and reorders a given share of datagrams, from a seed.
//!
//! The siblings keep per receiving node the order packets were sent in: on loopback a datagram
//! is queued at the receiver during `send_to`. What UDP does not give is delivery when a
//! receive buffer overflows, nor, off loopback, order or uniqueness. The layer above copes
//! (NetMigrate 7, see `reliable`): every migration and control packet is numbered and sent
//! again until answered, a receiver applies a packet it sees twice once, and a packet still
//! unanswered after its retries aborts the migration, the source staying authoritative. A lost
//! query or reply shows up as a client timeout.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use crate::auth::{AuthCounters, DatagramKey, Opener, Sealer};
use crate::error::{Error, Result};
use crate::wire::{NodeId, Packet};

mod lossy;

pub use lossy::{FaultCounters, Faults, Lossy};

/// A transport shared by the nodes and clients that use it.
pub type SharedTransport = std::sync::Arc<dyn Transport>;

/// Moves packets between nodes.
pub trait Transport: Send + Sync {
    /// Sends `packet` to `to`. A packet for a node that is down is dropped silently, as a
    /// datagram to a dead host would be; an unknown node is an error.
    fn send(&self, to: NodeId, packet: Packet) -> Result<()>;
    /// Takes the next packet for `node`, waiting up to `timeout`; `Ok(None)` on timeout;
    /// an error once the node is down.
    fn recv(&self, node: NodeId, timeout: Duration) -> Result<Option<Packet>>;
    /// Like [`Transport::recv`], but a datagram that is not a wire packet is handed back as
    /// [`Inbound::Foreign`] instead of being dropped, for a driver that shares its socket with
    /// other traffic (the CLI's management datagrams). Transports without such traffic keep
    /// this default.
    fn recv_inbound(&self, node: NodeId, timeout: Duration) -> Result<Option<Inbound>> {
        Ok(self.recv(node, timeout)?.map(Inbound::Packet))
    }
    /// Bytes sent so far (encoded sizes).
    fn bytes_sent(&self) -> u64;
    /// Marks a node dead (fault injection): it receives nothing more.
    fn set_down(&self, node: NodeId);
    /// Whether `node` has a packet to take right now, for transports that can tell without
    /// waiting (in-memory ones; the simulation steps only nodes that have one).
    fn ready(&self, _node: NodeId) -> Option<bool> {
        None
    }
}

/// What a node receives: a packet, or a datagram that does not decode as one.
#[derive(Debug)]
pub enum Inbound {
    /// A wire packet.
    Packet(Packet),
    /// Anything else that arrived on the node's socket.
    Foreign(Foreign),
}

/// A datagram that is not a wire packet: management traffic, or garbage.
#[derive(Clone, Debug)]
pub struct Foreign {
    /// The datagram.
    pub bytes: Vec<u8>,
    /// Its sender (where an answer goes).
    pub from: SocketAddr,
}

/// In-process transport: one unbounded channel per node. Occupancy is bounded by the protocol's
/// windows (`batches_inflight_max`, one outstanding query per closed-loop client, parked reads).
pub struct InProcess {
    inboxes: Vec<(Sender<Packet>, Receiver<Packet>)>,
    down: Vec<AtomicBool>,
    bytes: AtomicU64,
}

impl InProcess {
    /// A transport for nodes `0..nodes`.
    pub fn new(nodes: usize) -> Self {
        Self {
            inboxes: (0..nodes).map(|_| crossbeam_channel::unbounded()).collect(),
            down: (0..nodes).map(|_| AtomicBool::new(false)).collect(),
            bytes: AtomicU64::new(0),
        }
    }

    /// Whether a node is down.
    pub fn is_down(&self, node: NodeId) -> bool {
        match self.down.get(node as usize) {
            Some(d) => d.load(Ordering::SeqCst),
            None => true,
        }
    }
}

impl Transport for InProcess {
    fn send(&self, to: NodeId, packet: Packet) -> Result<()> {
        let (tx, _) = self
            .inboxes
            .get(to as usize)
            .ok_or(Error::Unreachable(to))?;
        if self.down[to as usize].load(Ordering::SeqCst) {
            return Ok(());
        }
        self.bytes
            .fetch_add(packet.encoded_len() as u64, Ordering::Relaxed);
        tx.send(packet).map_err(|_| Error::Unreachable(to))
    }

    fn recv(&self, node: NodeId, timeout: Duration) -> Result<Option<Packet>> {
        let (_, rx) = self
            .inboxes
            .get(node as usize)
            .ok_or(Error::Unreachable(node))?;
        if self.down[node as usize].load(Ordering::SeqCst) {
            return Err(Error::Unreachable(node));
        }
        match rx.recv_timeout(timeout) {
            Ok(p) => Ok(Some(p)),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(Error::Unreachable(node)),
        }
    }

    fn bytes_sent(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    fn set_down(&self, node: NodeId) {
        if let Some(d) = self.down.get(node as usize) {
            d.store(true, Ordering::SeqCst);
            while self.inboxes[node as usize].1.try_recv().is_ok() {}
        }
    }

    fn ready(&self, node: NodeId) -> Option<bool> {
        let (_, rx) = self.inboxes.get(node as usize)?;
        Some(!rx.is_empty() && !self.is_down(node))
    }
}

/// UDP on loopback: node `n` receives on its own socket; every packet is one datagram in the
/// [`crate::wire`] encoding. Datagrams that fail to decode are dropped and counted.
pub struct Udp {
    sockets: Vec<UdpSocket>,
    addrs: Vec<SocketAddr>,
    sender: Mutex<(UdpSocket, Vec<u8>)>,
    down: Vec<AtomicBool>,
    bytes: AtomicU64,
    malformed: AtomicU64,
}

/// Shortest receive wait (a zero read timeout means "block forever" to the OS).
const UDP_WAIT_MIN: Duration = Duration::from_micros(50);

/// Receives one datagram on `sock` within `wait` (at least [`UDP_WAIT_MIN`]:
/// a zero read timeout means "block forever" to the OS). `None` when nothing
/// came, including Linux reporting an earlier datagram to a closed loopback
/// port as `ECONNREFUSED`.
pub fn recv_within(
    sock: &UdpSocket,
    buf: &mut [u8],
    wait: Duration,
) -> std::io::Result<Option<(usize, SocketAddr)>> {
    sock.set_read_timeout(Some(wait.max(UDP_WAIT_MIN)))?;
    match sock.recv_from(buf) {
        Ok(x) => Ok(Some(x)),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock
                    | std::io::ErrorKind::TimedOut
                    | std::io::ErrorKind::ConnectionRefused
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Base ports [`UdpPeer::bind_group`] tries before giving up.
pub const UDP_PEER_BASES_TRIED: u32 = 32;

impl Udp {
    /// Binds one socket per node on 127.0.0.1 with OS-chosen ports.
    pub fn bind_loopback(nodes: usize) -> Result<Self> {
        let bind = || {
            UdpSocket::bind("127.0.0.1:0").map_err(|source| Error::Io {
                what: "binding a UDP socket on 127.0.0.1 (an OS-chosen port)".into(),
                source,
            })
        };
        let sockets = (0..nodes).map(|_| bind()).collect::<Result<Vec<_>>>()?;
        let addrs = sockets
            .iter()
            .map(|s| {
                s.local_addr().map_err(|source| Error::Io {
                    what: "reading a bound UDP socket's local address".into(),
                    source,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            sender: Mutex::new((bind()?, Vec::new())),
            down: (0..nodes).map(|_| AtomicBool::new(false)).collect(),
            sockets,
            addrs,
            bytes: AtomicU64::new(0),
            malformed: AtomicU64::new(0),
        })
    }

    /// The address node `node` receives on (for a router or server in another process).
    pub fn addr(&self, node: NodeId) -> Option<SocketAddr> {
        self.addrs.get(node as usize).copied()
    }

    /// Datagrams dropped because they did not decode.
    pub fn malformed(&self) -> u64 {
        self.malformed.load(Ordering::Relaxed)
    }
}

impl Transport for Udp {
    fn send(&self, to: NodeId, packet: Packet) -> Result<()> {
        let addr = *self.addrs.get(to as usize).ok_or(Error::Unreachable(to))?;
        if self.down[to as usize].load(Ordering::SeqCst) {
            return Ok(());
        }
        let mut guard = match self.sender.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let (socket, buf) = &mut *guard;
        packet.encode(buf)?;
        self.bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
        socket
            .send_to(buf, addr)
            .map(|_| ())
            .map_err(|_| Error::Unreachable(to))
    }

    fn recv(&self, node: NodeId, timeout: Duration) -> Result<Option<Packet>> {
        let socket = self
            .sockets
            .get(node as usize)
            .ok_or(Error::Unreachable(node))?;
        let deadline = Instant::now() + timeout;
        let mut buf = vec![0u8; crate::wire::DATAGRAM_BYTES_MAX];
        loop {
            if self.down[node as usize].load(Ordering::SeqCst) {
                return Err(Error::Unreachable(node));
            }
            let left = deadline
                .saturating_duration_since(Instant::now())
                .max(UDP_WAIT_MIN);
            socket
                .set_read_timeout(Some(left))
                .map_err(|source| Error::Io {
                    what: format!("setting node {node}'s UDP read timeout to {left:?}"),
                    source,
                })?;
            match socket.recv_from(&mut buf) {
                Ok((n, _)) => match Packet::decode(&buf[..n]) {
                    Ok(p) => return Ok(Some(p)),
                    Err(_) => {
                        self.malformed.fetch_add(1, Ordering::Relaxed);
                    }
                },
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(source) => {
                    return Err(Error::Io {
                        what: format!("receiving on node {node}'s UDP socket"),
                        source,
                    })
                }
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
        }
    }

    fn bytes_sent(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    fn set_down(&self, node: NodeId) {
        if let Some(d) = self.down.get(node as usize) {
            d.store(true, Ordering::SeqCst);
        }
    }
}

/// One node of a deployment where every node is its own process on loopback (`locus kv`):
/// node `n` receives on `127.0.0.1:(base_port + n)`, so a peer's address is computed from its id
/// and no process needs a peer table. Only this node's socket is bound here, so every id whose
/// port fits is a peer (whether a process listens there is unknowable; a datagram to none is
/// lost, as on a network) and only ids past the last port are unknown. [`Transport::recv`]
/// drops and counts datagrams that do not decode; [`Transport::recv_inbound`] hands them to the
/// driver, which shares the socket with its own traffic ([`UdpPeer::send_datagram`]).
///
/// With [`UdpPeer::with_auth`], every wire packet is sealed with a MAC and sequence number
/// ([`crate::auth`]) and every datagram that starts like a wire packet must open, from the
/// sender's own address; the rest are dropped and counted ([`UdpPeer::auth_counters`]). The
/// driver's own datagrams are neither sealed nor checked.
pub struct UdpPeer {
    node: NodeId,
    base_port: u16,
    socket: UdpSocket,
    send_buf: Mutex<(Vec<u8>, Option<Sealer>)>,
    recv_buf: Mutex<(Vec<u8>, Option<Opener>)>,
    down: AtomicBool,
    bytes: AtomicU64,
    malformed: AtomicU64,
}

impl UdpPeer {
    /// Binds `127.0.0.1:(base_port + node)`.
    pub fn bind(base_port: u16, node: NodeId) -> Result<Self> {
        let addr = peer_addr(base_port, node).ok_or(Error::InvalidSetting {
            key: "base_port",
            value: base_port.to_string(),
            expected: format!("at most {} so that node {node} has a port", u16::MAX - node),
        })?;
        let socket = UdpSocket::bind(addr).map_err(|source| Error::Io {
            what: format!("node {node}: cannot bind {addr} (is another process using it?)"),
            source,
        })?;
        Ok(Self {
            node,
            base_port,
            socket,
            send_buf: Mutex::new((Vec::new(), None)),
            recv_buf: Mutex::new((vec![0; crate::wire::DATAGRAM_BYTES_MAX], None)),
            down: AtomicBool::new(false),
            bytes: AtomicU64::new(0),
            malformed: AtomicU64::new(0),
        })
    }

    /// Nodes `0..nodes`, each its own peer, at a base port that was free (tried up to
    /// [`UDP_PEER_BASES_TRIED`] times): a whole deployment in one process, for tests.
    pub fn bind_group(nodes: u16) -> Result<Vec<Self>> {
        let mut last = None;
        for _ in 0..UDP_PEER_BASES_TRIED {
            // The OS picks a free port; the ports above it are probably free too.
            let probe = UdpSocket::bind("127.0.0.1:0").map_err(|source| Error::Io {
                what: "binding a UDP socket on 127.0.0.1 (an OS-chosen port)".into(),
                source,
            })?;
            let base = probe.local_addr().map(|a| a.port()).unwrap_or(0);
            drop(probe);
            if base == 0 || base.checked_add(nodes).is_none() {
                continue;
            }
            match (0..nodes).map(|n| Self::bind(base, n)).collect() {
                Ok(peers) => return Ok(peers),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(Error::InvalidSetting {
            key: "nodes",
            value: nodes.to_string(),
            expected: "few enough that node ports fit above a free base port".into(),
        }))
    }

    /// Seals every wire packet this peer sends and accepts only sealed ones from their
    /// senders' addresses (see the type's doc); `router` is the deployment's router, the one
    /// node that may send packets authored by others (forwarded queries).
    pub fn with_auth(mut self, key: DatagramKey, router: NodeId) -> Self {
        let node = self.node;
        match self.send_buf.get_mut() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
        .1 = Some(Sealer::new(key.clone(), node));
        match self.recv_buf.get_mut() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
        .1 = Some(Opener::new(key, router));
        self
    }

    /// Datagrams accepted and dropped by the MAC check, if it is on.
    pub fn auth_counters(&self) -> Option<AuthCounters> {
        let g = match self.recv_buf.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        g.1.as_ref().map(|o| o.counters().clone())
    }

    /// The node this socket belongs to.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// Where `node` receives (`None` past the last port).
    pub fn addr_of(&self, node: NodeId) -> Option<SocketAddr> {
        peer_addr(self.base_port, node)
    }

    /// Sends a datagram that is not a wire packet (the driver's own traffic) from this socket.
    pub fn send_datagram(&self, bytes: &[u8], to: SocketAddr) -> Result<()> {
        self.socket
            .send_to(bytes, to)
            .map(|_| ())
            .map_err(|source| Error::Io {
                what: format!("node {}: sending a datagram to {to}", self.node),
                source,
            })
    }

    /// Datagrams [`Transport::recv`] dropped because they did not decode.
    pub fn malformed(&self) -> u64 {
        self.malformed.load(Ordering::Relaxed)
    }

    fn receive(&self, node: NodeId, timeout: Duration) -> Result<Option<Inbound>> {
        if node != self.node || self.down.load(Ordering::SeqCst) {
            return Err(Error::Unreachable(node));
        }
        let mut guard = match self.recv_buf.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let (buf, opener) = &mut *guard;
        match recv_within(&self.socket, buf, timeout) {
            Ok(Some((n, from))) => {
                let mut bytes = &buf[..n];
                if let Some(o) = opener
                    .as_mut()
                    .filter(|_| crate::wire::looks_like_packet(bytes))
                {
                    let base = self.base_port;
                    match o.open(bytes, |sender| peer_addr(base, sender) == Some(from)) {
                        Ok(packet) => bytes = packet,
                        // Counted by the opener; nothing reaches the node.
                        Err(_) => return Ok(None),
                    }
                }
                Ok(Some(match Packet::decode(bytes) {
                    Ok(p) => Inbound::Packet(p),
                    Err(_) => Inbound::Foreign(Foreign {
                        bytes: bytes.to_vec(),
                        from,
                    }),
                }))
            }
            Ok(None) => Ok(None),
            Err(source) => Err(Error::Io {
                what: format!("receiving on node {node}'s UDP socket"),
                source,
            }),
        }
    }
}

fn peer_addr(base_port: u16, node: NodeId) -> Option<SocketAddr> {
    let port = base_port.checked_add(node)?;
    Some(SocketAddr::from(([127, 0, 0, 1], port)))
}

impl Transport for UdpPeer {
    fn send(&self, to: NodeId, packet: Packet) -> Result<()> {
        let addr = self.addr_of(to).ok_or(Error::Unreachable(to))?;
        if self.down.load(Ordering::SeqCst) {
            return Ok(()); // a dead node sends nothing
        }
        let mut guard = match self.send_buf.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let (buf, sealer) = &mut *guard;
        packet.encode(buf)?;
        if let Some(s) = sealer {
            s.seal(buf);
        }
        self.bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.socket
            .send_to(buf, addr)
            .map(|_| ())
            .map_err(|_| Error::Unreachable(to))
    }

    fn recv(&self, node: NodeId, timeout: Duration) -> Result<Option<Packet>> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.receive(node, deadline.saturating_duration_since(Instant::now()))? {
                Some(Inbound::Packet(p)) => return Ok(Some(p)),
                Some(Inbound::Foreign(_)) => {
                    self.malformed.fetch_add(1, Ordering::Relaxed);
                }
                None => {}
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
        }
    }

    fn recv_inbound(&self, node: NodeId, timeout: Duration) -> Result<Option<Inbound>> {
        self.receive(node, timeout)
    }

    fn bytes_sent(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Only this node can be marked down: the others are other processes.
    fn set_down(&self, node: NodeId) {
        if node == self.node {
            self.down.store(true, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Body;

    fn pkt(seq: u32) -> Packet {
        Packet {
            from: 0,
            shard: 0,
            seq,
            flags: 0,
            body: Body::Get { key: 1 },
        }
    }

    fn fifo_per_node_and_down_nodes_swallow(t: &dyn Transport) {
        for s in 0..5 {
            t.send(1, pkt(s)).unwrap();
        }
        for s in 0..5 {
            assert_eq!(
                t.recv(1, Duration::from_millis(10)).unwrap().unwrap().seq,
                s
            );
        }
        assert!(t.recv(1, Duration::from_millis(1)).unwrap().is_none());
        t.set_down(2);
        t.send(2, pkt(0)).unwrap();
        assert!(t.recv(2, Duration::from_millis(1)).is_err());
        assert!(matches!(t.send(9, pkt(0)), Err(Error::Unreachable(9))));
    }

    #[test]
    fn in_process_conforms() {
        fifo_per_node_and_down_nodes_swallow(&InProcess::new(3));
    }

    #[test]
    fn udp_conforms_and_drops_garbage() {
        let t = Udp::bind_loopback(3).unwrap();
        fifo_per_node_and_down_nodes_swallow(&t);
        let junk = UdpSocket::bind("127.0.0.1:0").unwrap();
        junk.send_to(&[1, 2, 3], t.addr(1).unwrap()).unwrap();
        t.send(1, pkt(42)).unwrap();
        assert_eq!(t.recv(1, Duration::from_secs(5)).unwrap().unwrap().seq, 42);
        assert_eq!(t.malformed(), 1);
    }

    #[test]
    fn udp_peers_address_by_id_keep_order_and_hand_back_foreign_datagrams() {
        let peers = UdpPeer::bind_group(2).unwrap();
        let (a, b) = (&peers[0], &peers[1]);
        assert_eq!(b.addr_of(1), Some(b.socket.local_addr().unwrap()));
        for s in 0..5 {
            a.send(1, pkt(s)).unwrap();
        }
        for s in 0..5 {
            assert_eq!(b.recv(1, Duration::from_secs(5)).unwrap().unwrap().seq, s);
        }
        assert!(b.recv(0, Duration::from_millis(1)).is_err(), "not b's node");
        a.send_datagram(b"LKADM1 {}", b.addr_of(1).unwrap())
            .unwrap();
        match b.recv_inbound(1, Duration::from_secs(5)).unwrap() {
            Some(Inbound::Foreign(f)) => {
                assert_eq!(f.bytes, b"LKADM1 {}");
                assert_eq!(Some(f.from), a.addr_of(0));
            }
            other => panic!("expected a foreign datagram, got {other:?}"),
        }
        a.send_datagram(&[1, 2, 3], b.addr_of(1).unwrap()).unwrap();
        a.send(1, pkt(42)).unwrap();
        assert_eq!(b.recv(1, Duration::from_secs(5)).unwrap().unwrap().seq, 42);
        assert_eq!(b.malformed(), 1);
        b.set_down(1);
        assert!(matches!(
            b.recv(1, Duration::ZERO),
            Err(Error::Unreachable(1))
        ));
        assert!(matches!(
            a.send(u16::MAX, pkt(0)),
            Err(Error::Unreachable(_))
        ));
    }
}
