//! The client side: connections to remote nodes and the [`TcpPort`].
//!
//! A [`Conn`] (`client/conn.rs`) is one TCP connection to one node: a send
//! buffer of encoded requests, a receive buffer, and the queue of outstanding
//! requests in sending order. The node answers in order, so each response must
//! match the front of the queue (request id, op and machine are checked); a
//! mismatch is a protocol error that fails the connection. Any connection
//! failure completes every outstanding request with the error and drops the
//! connection; the next operation reconnects.

mod conn;

use std::collections::VecDeque;
use std::sync::Arc;

use super::frame::{self, HEADER_BYTES};
use super::{for_machine, Inner, Route};
use crate::hosted::check_inflight;
use crate::memory::{apply, apply_ref, read_to_memory, Region, VerbRef};
use crate::{
    Completion, FabricError, MachineId, Message, Output, Port, RegionId, Result, Verb, WorkRequest,
    WrId,
};

pub(crate) use conn::{lookup, Conn, CONN_RESPONSE_BYTES_MAX};
use conn::{AsyncOut, Reply, Sink, Waiter, SEND_FLUSH_BYTES};

/// A port of the TCP fabric: issues operations as one hosted machine.
///
/// Posted requests are written to the socket by the next `poll`, `wait` or
/// synchronous call on the port (or when 64 KiB are buffered, or when the
/// port is dropped); keep calling the port to make progress, as with an RDMA
/// completion queue.
pub struct TcpPort {
    inner: Arc<Inner>,
    machine: MachineId,
    /// One lazily opened connection per remote node.
    conns: Vec<Option<Conn>>,
    /// Completions ready for `poll`, in completion order.
    ready: VecDeque<Completion>,
    /// Posted and not yet returned by `poll`/`wait`.
    inflight: usize,
    /// Posting sequence (see `Pending::seq`).
    seq: u64,
    /// Whether some send buffer may hold unsent requests.
    unflushed: bool,
}

impl std::fmt::Debug for TcpPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpPort")
            .field("machine", &self.machine)
            .field("inflight", &self.inflight)
            .finish()
    }
}

/// The connection to `node`, opened if needed. One opened at epochs the
/// table no longer holds is closed first (its outstanding requests complete
/// with `PeerUnavailable`) and reopened at the current ones.
fn conn_to<'a>(
    conns: &'a mut [Option<Conn>],
    ready: &mut VecDeque<Completion>,
    inner: &Inner,
    node: usize,
    target: MachineId,
    from: MachineId,
) -> Result<&'a mut Conn> {
    let slot = &mut conns[node];
    if slot.as_ref().is_some_and(|c| c.stale(inner, target)) {
        let old = slot.take().expect("checked above");
        let e = inner.epochs.get(target);
        old.fail(
            &FabricError::PeerUnavailable {
                machine: target,
                reason: format!(
                    "the connection was opened at other epochs (machine {target} is now at \
                     epoch {}, this node at {}); reconnecting",
                    e.epoch,
                    inner.epochs.own()
                ),
            },
            ready,
        );
    }
    if slot.is_none() {
        *slot = Some(Conn::connect(inner, node, target, from)?);
    }
    Ok(slot.as_mut().expect("connected above"))
}

impl TcpPort {
    pub(crate) fn new(inner: Arc<Inner>, machine: MachineId) -> Self {
        let nodes = inner.nodes.len();
        TcpPort {
            inner,
            machine,
            conns: (0..nodes).map(|_| None).collect(),
            ready: VecDeque::new(),
            inflight: 0,
            seq: 0,
            unflushed: false,
        }
    }

    /// Drops connection `node` and fails its outstanding requests; returns `err`.
    fn fail(&mut self, node: usize, err: FabricError) -> FabricError {
        if let Some(c) = self.conns[node].take() {
            c.fail(&err, &mut self.ready);
        }
        err
    }

    /// Writes every buffered request out.
    fn flush_all(&mut self) {
        if !self.unflushed {
            return;
        }
        self.unflushed = false;
        for node in 0..self.conns.len() {
            if let Some(c) = self.conns[node].as_mut() {
                if let Err(e) = c.flush() {
                    self.fail(node, e);
                }
            }
        }
    }

    /// Waits for every outstanding request (a fence).
    fn fence(&mut self) {
        self.unflushed = false;
        for node in 0..self.conns.len() {
            if let Some(c) = self.conns[node].as_mut() {
                if let Err(e) = c.drain(&mut self.ready) {
                    self.fail(node, e);
                }
            }
        }
    }

    /// Applies `verb` to memory this node holds (`mem`, the target's); a
    /// READ into this port's own region lands in its machine's memory.
    fn apply_local(
        &self,
        mem: &crate::MachineMemory,
        region: RegionId,
        offset: u64,
        verb: Verb,
    ) -> Result<Output> {
        match verb {
            Verb::ReadTo {
                region: local,
                offset: local_offset,
                len,
            } => {
                let me = self.inner.hosted.memory(self.machine)?;
                read_to_memory(mem, region, offset, me, local, local_offset, len)
            }
            verb => apply(mem, region, offset, verb),
        }
    }

    /// This port's own region `local` and the first word of `len` bytes at
    /// `offset` in it, checked before a READ into it is sent.
    fn own_range(&self, local: RegionId, offset: u64, len: u64) -> Result<(Arc<Region>, usize)> {
        let r = self.inner.hosted.memory(self.machine)?.region(local)?;
        let first = r.check(self.machine, local, offset, len)?;
        Ok((r, first))
    }

    fn complete(&mut self, id: WrId, target: MachineId, result: Result<Output>) {
        self.ready.push_back(Completion { id, target, result });
    }

    fn hand_out(&mut self, out: &mut Vec<Completion>) -> usize {
        let n = self.ready.len();
        debug_assert!(
            n <= self.inflight,
            "{n} completions for {} posted",
            self.inflight
        );
        out.extend(self.ready.drain(..));
        self.inflight -= n;
        n
    }

    /// The node whose oldest outstanding request is the port's oldest.
    fn oldest(&self) -> Option<usize> {
        self.conns
            .iter()
            .enumerate()
            .filter_map(|(i, c)| Some((c.as_ref()?.pending.front()?.seq, i)))
            .min()
            .map(|(_, i)| i)
    }

    /// A synchronous request to remote `node`.
    fn call(
        &mut self,
        node: usize,
        target: MachineId,
        op: u8,
        reply_bytes: usize,
        sink: &mut Sink<'_>,
        encode: impl FnOnce(&mut Vec<u8>, u64),
    ) -> Result<Reply> {
        self.seq += 1;
        let seq = self.seq;
        let conn = conn_to(
            &mut self.conns,
            &mut self.ready,
            &self.inner,
            node,
            target,
            self.machine,
        )?;
        match conn.call(seq, op, target, reply_bytes, sink, &mut self.ready, encode) {
            Ok(reply) => reply,
            Err(e) => Err(for_machine(&self.fail(node, e), target)),
        }
    }

    /// Queues a posted request to remote `node`.
    fn post_remote(&mut self, node: usize, wr: WorkRequest) {
        let WorkRequest {
            id,
            target,
            region,
            offset,
            verb,
            ..
        } = wr;
        if let Err(e) = self.inner.check_payload(&verb) {
            return self.complete(id, target, Err(e));
        }
        // A READ into own memory: its landing range is checked before it is sent.
        let landing = match verb {
            Verb::ReadTo {
                region: local,
                offset: local_offset,
                len,
            } => match self.own_range(local, local_offset, len) {
                Ok(r) => Some(r),
                Err(e) => return self.complete(id, target, Err(e)),
            },
            _ => None,
        };
        self.seq += 1;
        let seq = self.seq;
        let conn = match conn_to(
            &mut self.conns,
            &mut self.ready,
            &self.inner,
            node,
            target,
            self.machine,
        ) {
            Ok(c) => c,
            Err(e) => return self.complete(id, target, Err(e)),
        };
        let (op, reply_bytes) = match &verb {
            Verb::Read { buf } => (frame::OP_READ, buf.len()),
            Verb::ReadTo { len, .. } => (frame::OP_READ, *len as usize),
            Verb::Write { .. } => (frame::OP_WRITE, 0),
            Verb::Cas { .. } => (frame::OP_CAS, 8),
            Verb::FetchAdd { .. } => (frame::OP_FETCH_ADD, 8),
        };
        if let Err(e) = conn.make_room(HEADER_BYTES + reply_bytes, &mut self.ready) {
            let e = self.fail(node, e);
            return self.complete(id, target, Err(for_machine(&e, target)));
        }
        let (req, out) = match verb {
            Verb::Read { buf } => {
                let len = buf.len() as u32;
                let req =
                    conn.encode(|b, req| frame::encode_read(b, req, target, region, offset, len));
                (req, AsyncOut::Read(buf))
            }
            Verb::ReadTo { len, .. } => {
                let (region_to, first) =
                    landing.expect("resolved above for a READ into own memory");
                let req = conn.encode(|b, req| {
                    frame::encode_read(b, req, target, region, offset, len as u32)
                });
                (
                    req,
                    AsyncOut::ReadTo {
                        region: region_to,
                        first,
                    },
                )
            }
            Verb::Write { data } => {
                let req = conn
                    .encode(|b, req| frame::encode_write(b, req, target, region, offset, &data));
                (req, AsyncOut::Write(data))
            }
            Verb::Cas { expected, new } => (
                conn.encode(|b, req| {
                    frame::encode_cas(b, req, target, region, offset, expected, new)
                }),
                AsyncOut::Word,
            ),
            Verb::FetchAdd { add } => (
                conn.encode(|b, req| frame::encode_fetch_add(b, req, target, region, offset, add)),
                AsyncOut::Word,
            ),
        };
        conn.expect(req, seq, op, target, reply_bytes, Waiter::Async { id, out });
        self.after_post(node)
    }

    /// Sends a connection's buffer once it is large; otherwise leaves it for later.
    fn after_post(&mut self, node: usize) {
        self.unflushed = true;
        let Some(c) = self.conns[node].as_mut() else {
            return;
        };
        if c.wbuf.len() >= SEND_FLUSH_BYTES {
            if let Err(e) = c.flush() {
                self.fail(node, e);
            }
        }
    }
}

impl Drop for TcpPort {
    fn drop(&mut self) {
        // Posted writes should not vanish because nobody polled them.
        self.flush_all();
    }
}

/// Rounds a long wait yields before it sleeps ([`Port::back_off`]).
const BACK_OFF_YIELDS: u32 = 32;
/// A long wait's sleep per round.
const BACK_OFF_SLEEP: std::time::Duration = std::time::Duration::from_micros(50);

impl Port for TcpPort {
    fn machine(&self) -> MachineId {
        self.machine
    }

    fn check_peer(&self, target: MachineId) -> Result<()> {
        self.inner.route(target).map(|_| ())
    }

    /// Yields for the first [`BACK_OFF_YIELDS`] rounds (a reply over
    /// loopback takes tens of microseconds), then sleeps
    /// [`BACK_OFF_SLEEP`] a round: a primary's workers waiting for a
    /// backup's log sync kept yielding, and on a 2-core host they starved
    /// the backup's own threads (inserts alone at R = 2: 1,100/s with p99
    /// 34 ms yielding, 3,500/s with p99 2.6 ms so; docs/results/cluster.md).
    fn back_off(&mut self, round: u32) {
        if round < BACK_OFF_YIELDS {
            std::thread::yield_now()
        } else {
            std::thread::sleep(BACK_OFF_SLEEP)
        }
    }

    fn machine_count(&self) -> usize {
        self.inner.config.machines
    }

    fn post(&mut self, wr: WorkRequest) -> Result<()> {
        check_inflight(self.inflight, self.inner.config.inflight_ops_max)?;
        if wr.fence {
            self.fence();
        }
        self.inflight += 1;
        match self.inner.route(wr.target) {
            Err(e) => self.complete(wr.id, wr.target, Err(e)),
            Ok(Route::Local(mem)) => {
                let result = self.apply_local(mem, wr.region, wr.offset, wr.verb);
                self.ready.push_back(Completion {
                    id: wr.id,
                    target: wr.target,
                    result,
                });
            }
            Ok(Route::Remote(node)) => self.post_remote(node, wr),
        }
        Ok(())
    }

    fn poll(&mut self, out: &mut Vec<Completion>) -> Result<usize> {
        self.unflushed = false;
        for node in 0..self.conns.len() {
            if let Some(c) = self.conns[node].as_mut() {
                if let Err(e) = c.poll(&mut self.ready) {
                    self.fail(node, e);
                }
            }
        }
        Ok(self.hand_out(out))
    }

    fn wait(&mut self, out: &mut Vec<Completion>) -> Result<usize> {
        if self.ready.is_empty() && self.inflight > 0 {
            self.flush_all();
            for node in 0..self.conns.len() {
                if let Some(c) = self.conns[node].as_mut() {
                    if let Err(e) = c.process(&mut self.ready, &mut Sink::None) {
                        self.fail(node, e);
                    }
                }
            }
            while self.ready.is_empty() {
                // Block on the node owing the oldest response: it is due first.
                let Some(node) = self.oldest() else {
                    debug_assert!(false, "{} in flight but nothing outstanding", self.inflight);
                    break;
                };
                let c = self.conns[node]
                    .as_mut()
                    .expect("oldest() picks a live connection");
                let r = c
                    .fill(true)
                    .and_then(|_| c.process(&mut self.ready, &mut Sink::None));
                if let Err(e) = r {
                    self.fail(node, e);
                }
            }
        }
        Ok(self.hand_out(out))
    }

    fn inflight(&self) -> usize {
        self.inflight
    }

    fn execute(&mut self, wr: WorkRequest) -> Result<Output> {
        if wr.fence {
            self.flush_all();
            self.fence();
        }
        let WorkRequest {
            target,
            region,
            offset,
            verb,
            ..
        } = wr;
        // A local operation leaves what is posted to other nodes buffered:
        // nothing orders it with them (guarantee 5), and flushing here
        // would cost a write per node for every local read of a batch.
        let node = match self.inner.route(target)? {
            Route::Local(mem) => return self.apply_local(mem, region, offset, verb),
            Route::Remote(node) => node,
        };
        self.flush_all();
        self.inner.check_payload(&verb)?;
        match verb {
            Verb::Read { mut buf } => {
                let len = buf.len();
                self.call(
                    node,
                    target,
                    frame::OP_READ,
                    len,
                    &mut Sink::Read(&mut buf),
                    |b, req| frame::encode_read(b, req, target, region, offset, len as u32),
                )?;
                Ok(Output::Data(buf))
            }
            Verb::ReadTo {
                region: local,
                offset: local_offset,
                len,
            } => {
                let (to, first) = self.own_range(local, local_offset, len)?;
                let mut buf = vec![0; len as usize];
                self.call(
                    node,
                    target,
                    frame::OP_READ,
                    buf.len(),
                    &mut Sink::Read(&mut buf),
                    |b, req| frame::encode_read(b, req, target, region, offset, len as u32),
                )?;
                to.write_words(first, &buf);
                Ok(Output::Placed)
            }
            Verb::Write { data } => {
                self.call(
                    node,
                    target,
                    frame::OP_WRITE,
                    0,
                    &mut Sink::Unit,
                    |b, req| frame::encode_write(b, req, target, region, offset, &data),
                )?;
                Ok(Output::Written(data))
            }
            Verb::Cas { expected, new } => {
                match self.call(node, target, frame::OP_CAS, 8, &mut Sink::Word, |b, req| {
                    frame::encode_cas(b, req, target, region, offset, expected, new)
                })? {
                    Reply::Word(w) => Ok(Output::Word(w)),
                    other => unreachable!("a CAS answered with {other:?}"),
                }
            }
            Verb::FetchAdd { add } => {
                match self.call(
                    node,
                    target,
                    frame::OP_FETCH_ADD,
                    8,
                    &mut Sink::Word,
                    |b, req| frame::encode_fetch_add(b, req, target, region, offset, add),
                )? {
                    Reply::Word(w) => Ok(Output::Word(w)),
                    other => unreachable!("a FETCH_ADD answered with {other:?}"),
                }
            }
        }
    }

    fn read(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<()> {
        match self.inner.route(target)? {
            // As in `execute`: no flush for a local operation.
            Route::Local(mem) => apply_ref(mem, region, offset, VerbRef::Read(buf)).map(|_| ()),
            Route::Remote(node) => {
                self.flush_all();
                let len = buf.len();
                super::check_len(len, self.inner.config.read_bytes_max())?;
                self.call(
                    node,
                    target,
                    frame::OP_READ,
                    len,
                    &mut Sink::Read(buf),
                    |b, req| frame::encode_read(b, req, target, region, offset, len as u32),
                )
                .map(|_| ())
            }
        }
    }

    fn write(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        data: &[u8],
    ) -> Result<()> {
        match self.inner.route(target)? {
            Route::Local(mem) => apply_ref(mem, region, offset, VerbRef::Write(data)).map(|_| ()),
            Route::Remote(node) => {
                self.flush_all();
                super::check_len(data.len(), self.inner.config.write_bytes_max())?;
                self.call(
                    node,
                    target,
                    frame::OP_WRITE,
                    0,
                    &mut Sink::Unit,
                    |b, req| frame::encode_write(b, req, target, region, offset, data),
                )
                .map(|_| ())
            }
        }
    }

    fn send(&mut self, target: MachineId, payload: &[u8]) -> Result<()> {
        self.inner.hosted.check_send(target, payload.len())?;
        let from = self.machine;
        self.flush_all();
        match self.inner.route(target)? {
            Route::Local(_) => self.inner.hosted.deliver(from, target, payload, 0),
            Route::Remote(node) => self
                .call(
                    node,
                    target,
                    frame::OP_SEND,
                    0,
                    &mut Sink::Unit,
                    |b, req| frame::encode_send(b, req, target, from, payload),
                )
                .map(|_| ()),
        }
    }

    fn try_recv(&mut self) -> Result<Option<Message>> {
        self.flush_all();
        // A fenced node's threads take no more messages (fencing.rs, rule 1).
        self.inner.epochs.check_issuer(self.machine)?;
        self.inner.hosted.take(self.machine, u64::MAX)
    }
}
