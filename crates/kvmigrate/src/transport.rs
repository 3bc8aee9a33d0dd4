//! How packets move between nodes. [`Transport`] is the seam: [`InProcess`] (channels, the
//! default) is one implementation; a UDP transport on loopback is a sibling that encodes with
//! [`crate::wire`] and keeps the same guarantee: per receiving node, packets are taken in the
//! order they were sent (one FIFO inbox per node; the protocol relies on it, see `server`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

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

    /// Marks a node dead (fault injection): its inbox is dropped and later packets vanish.
    pub fn set_down(&self, node: NodeId) {
        if let Some(d) = self.down.get(node as usize) {
            d.store(true, Ordering::SeqCst);
            while self.inboxes[node as usize].1.try_recv().is_ok() {}
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

    #[test]
    fn fifo_per_node_and_down_nodes_swallow() {
        let t = InProcess::new(3);
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
}
