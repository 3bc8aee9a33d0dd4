//! How packets move between nodes. [`Transport`] is the seam: [`InProcess`] (channels, the
//! default) and [`Udp`] (one loopback socket per node, packets encoded with [`crate::wire`]) are
//! siblings. Both keep the guarantee the protocol relies on (see `server`): per receiving node,
//! packets are taken in the order they were sent. On loopback a datagram is queued at the
//! receiver during `send_to`, so that holds; what UDP does not give is delivery when a receive
//! buffer overflows (NetMigrate 7 leaves reliability to a layer above): a lost data batch or
//! ack shows up as a migration abort after `ack_timeout_us`, a lost query as a client timeout.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use crate::error::{Error, Result};
use crate::wire::{NodeId, Packet};

/// Moves packets between nodes.
pub trait Transport: Send + Sync {
    /// Sends `packet` to `to`. A packet for a node that is down is dropped silently, as a
    /// datagram to a dead host would be; an unknown node is an error.
    fn send(&self, to: NodeId, packet: Packet) -> Result<()>;
    /// Takes the next packet for `node`, waiting up to `timeout`; `Ok(None)` on timeout;
    /// an error once the node is down.
    fn recv(&self, node: NodeId, timeout: Duration) -> Result<Option<Packet>>;
    /// Bytes sent so far (encoded sizes).
    fn bytes_sent(&self) -> u64;
    /// Marks a node dead (fault injection): it receives nothing more.
    fn set_down(&self, node: NodeId);
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

impl Udp {
    /// Binds one socket per node on 127.0.0.1 with OS-chosen ports.
    pub fn bind_loopback(nodes: usize) -> Result<Self> {
        let bind = || {
            UdpSocket::bind("127.0.0.1:0")
                .map_err(|e| Error::Runtime(format!("bind 127.0.0.1: {e}")))
        };
        let sockets = (0..nodes).map(|_| bind()).collect::<Result<Vec<_>>>()?;
        let addrs = sockets
            .iter()
            .map(|s| {
                s.local_addr()
                    .map_err(|e| Error::Runtime(format!("local_addr: {e}")))
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
                .map_err(|e| Error::Runtime(format!("set_read_timeout: {e}")))?;
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
                Err(e) => return Err(Error::Runtime(format!("recv on node {node}: {e}"))),
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
}
