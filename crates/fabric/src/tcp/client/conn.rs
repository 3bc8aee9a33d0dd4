//! One TCP connection to one node ([`Conn`]): its send and receive buffers,
//! the queue of outstanding requests, matching responses against it, and the
//! flow-control window. The [`TcpPort`](super::TcpPort) drives one per remote node.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::auth::{self, AuthError, Listener};
use crate::tcp::frame::{self, RecvBuf, HEADER_BYTES};
use crate::tcp::{for_machine, Inner};
use crate::{Completion, FabricError, MachineId, Output, RegionInfo, Result, WrId};

/// Response bytes one connection may have outstanding before the port reads
/// responses instead of posting more (one larger request may go alone).
/// Keeps a node's unsent responses, and so its memory, bounded.
pub(crate) const CONN_RESPONSE_BYTES_MAX: usize = 1 << 20;
/// A send buffer is written out once it holds this much.
pub(super) const SEND_FLUSH_BYTES: usize = 64 << 10;
/// Send-buffer capacity kept after a large request went out.
const SEND_BYTES_KEEP: usize = 1 << 20;

/// What a posted request hands back in its completion.
#[derive(Debug)]
pub(super) enum AsyncOut {
    /// A READ's buffer, filled from the response.
    Read(Vec<u8>),
    /// A READ into this port's own memory: the response's bytes are stored
    /// at word `first` of `region`.
    ReadTo {
        /// The port's own region.
        region: std::sync::Arc<crate::Region>,
        /// The first word they land at (checked when the READ was posted).
        first: usize,
    },
    /// A WRITE's buffer, handed back.
    Write(Vec<u8>),
    /// An atomic's previous word.
    Word,
}

/// Who waits for a response.
#[derive(Debug)]
pub(super) enum Waiter {
    /// A posted request: its completion goes to the port's ready queue.
    Async { id: WrId, out: AsyncOut },
    /// The synchronous call in progress on this port.
    Sync,
    /// The connection's HELLO.
    Hello,
}

/// One outstanding request.
#[derive(Debug)]
pub(super) struct Pending {
    req: u64,
    /// Port-wide posting sequence, to find the oldest outstanding request.
    pub(super) seq: u64,
    op: u8,
    /// The target machine (echoed in the response).
    target: MachineId,
    /// Exact body length of an OK response.
    reply_bytes: usize,
    waiter: Waiter,
}

/// Where a synchronous call wants its response.
#[derive(Debug)]
pub(crate) enum Sink<'a> {
    /// No synchronous call is waiting.
    None,
    /// Copy READ data here.
    Read(&'a mut [u8]),
    /// An atomic's previous word.
    Word,
    /// Nothing (WRITE, SEND).
    Unit,
    /// A LOOKUP's region.
    Region,
}

/// The result of a synchronous call.
#[derive(Debug)]
pub(crate) enum Reply {
    Unit,
    Word(u64),
    Region(RegionInfo),
}

/// One connection to a remote node.
pub(crate) struct Conn {
    stream: TcpStream,
    addr: SocketAddr,
    /// A machine the node serves (the one first asked for), for errors.
    peer: MachineId,
    pub(super) wbuf: Vec<u8>,
    rbuf: RecvBuf,
    pub(super) pending: VecDeque<Pending>,
    /// Response bytes (headers plus OK bodies) expected for `pending`.
    window_bytes: usize,
    next_req: u64,
    nonblocking: bool,
    frame_bytes_max: usize,
    io_timeout_ms: u64,
    /// This node's own epoch when the connection was opened (sent in HELLO).
    own_epoch: u64,
    /// The epoch the node was expected at (sent in HELLO).
    expect: u64,
}

impl Conn {
    /// Whether the epochs this connection was opened with are no longer the
    /// table's (for `target`, a machine of the same node): it must reopen.
    #[inline]
    pub(crate) fn stale(&self, inner: &Inner, target: MachineId) -> bool {
        self.own_epoch != inner.epochs.own() || self.expect != inner.epochs.get(target).epoch
    }

    /// Connects to `node` (first asked for `peer`), proves the cluster secret
    /// if the node has one (within connect_timeout_ms), and queues the HELLO.
    pub(crate) fn connect(
        inner: &Inner,
        node: usize,
        peer: MachineId,
        from: MachineId,
    ) -> Result<Conn> {
        let c = &inner.config;
        let addr = *inner.nodes[node].read().unwrap_or_else(|e| e.into_inner());
        if addr == super::super::UNASSIGNED {
            return Err(FabricError::PeerUnavailable {
                machine: peer,
                reason: "it has no address yet: no server of it has joined the cluster".into(),
            });
        }
        let unavailable = |what: String| FabricError::PeerUnavailable {
            machine: peer,
            reason: format!("cannot connect to {addr}: {what}"),
        };
        let stream = TcpStream::connect_timeout(&addr, Duration::from_millis(c.connect_timeout_ms))
            .map_err(|e| {
                unavailable(format!(
                    "{e} (connect_timeout_ms = {}); is the node serving machine {peer} running?",
                    c.connect_timeout_ms
                ))
            })?;
        stream
            .set_nodelay(true)
            .map_err(|e| unavailable(format!("cannot set socket options: {e}")))?;
        if let Some(secret) = &c.secret {
            let timeout = Duration::from_millis(c.connect_timeout_ms);
            stream
                .set_read_timeout(Some(timeout))
                .and_then(|()| stream.set_write_timeout(Some(timeout)))
                .map_err(|e| unavailable(format!("cannot set socket options: {e}")))?;
            auth::prove_within(&mut &stream, secret, Listener::Fabric, timeout)
                .map_err(|e| auth_failed(&e, addr, peer, c.connect_timeout_ms))?;
        }
        let io = Some(c.io_timeout());
        stream
            .set_read_timeout(io)
            .and_then(|()| stream.set_write_timeout(io))
            .map_err(|e| unavailable(format!("cannot set socket options: {e}")))?;
        let mut conn = Conn {
            stream,
            addr,
            peer,
            wbuf: Vec::with_capacity(SEND_FLUSH_BYTES + 4096),
            rbuf: RecvBuf::default(),
            pending: VecDeque::new(),
            window_bytes: 0,
            next_req: 0,
            nonblocking: false,
            frame_bytes_max: c.frame_bytes_max,
            io_timeout_ms: c.io_timeout_ms,
            own_epoch: inner.epochs.own(),
            expect: inner.epochs.get(peer).epoch,
        };
        let epochs = (conn.own_epoch, conn.expect);
        // Pipelined: requests follow the HELLO without waiting for its answer;
        // the node closes the connection if it refuses the HELLO.
        let req = conn.encode(|b, req| {
            frame::encode_hello(b, req, from, c.machines, c.frame_bytes_max, epochs)
        });
        conn.expect(req, 0, frame::OP_HELLO, from, 0, Waiter::Hello);
        Ok(conn)
    }

    fn lost(&self, what: impl std::fmt::Display) -> FabricError {
        FabricError::PeerUnavailable {
            machine: self.peer,
            reason: format!("connection to {} {what}", self.addr),
        }
    }

    /// Appends a request frame; returns its request id.
    #[inline]
    pub(super) fn encode(&mut self, f: impl FnOnce(&mut Vec<u8>, u64)) -> u64 {
        let req = self.next_req;
        self.next_req += 1;
        f(&mut self.wbuf, req);
        req
    }

    /// Records the request just encoded as outstanding.
    #[inline]
    pub(super) fn expect(
        &mut self,
        req: u64,
        seq: u64,
        op: u8,
        target: MachineId,
        reply_bytes: usize,
        waiter: Waiter,
    ) {
        self.window_bytes += HEADER_BYTES + reply_bytes;
        self.pending.push_back(Pending {
            req,
            seq,
            op,
            target,
            reply_bytes,
            waiter,
        });
    }

    #[inline]
    fn set_blocking(&mut self, blocking: bool) -> Result<()> {
        if self.nonblocking == blocking {
            self.stream
                .set_nonblocking(!blocking)
                .map_err(|e| self.lost(format!("cannot switch blocking mode: {e}")))?;
            self.nonblocking = !blocking;
        }
        Ok(())
    }

    /// Writes the whole send buffer (blocking, bounded by io_timeout).
    pub(super) fn flush(&mut self) -> Result<()> {
        let mut at = 0;
        while at < self.wbuf.len() {
            match self.stream.write(&self.wbuf[at..]) {
                Ok(0) => return Err(self.lost("closed while sending")),
                Ok(n) => at += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && self.nonblocking => {
                    self.set_blocking(true)?
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(self.lost(format!(
                        "took no request for {} ms (io_timeout_ms); the node is stuck",
                        self.io_timeout_ms
                    )))
                }
                Err(e) => return Err(self.lost(format!("failed while sending: {e}"))),
            }
        }
        self.wbuf.clear();
        if self.wbuf.capacity() > SEND_BYTES_KEEP {
            self.wbuf = Vec::with_capacity(SEND_FLUSH_BYTES + 4096);
        }
        Ok(())
    }

    /// One read into the receive buffer. Blocking: waits up to io_timeout and
    /// fails after it. Not blocking: returns 0 if nothing has arrived.
    pub(super) fn fill(&mut self, blocking: bool) -> Result<usize> {
        self.set_blocking(blocking)?;
        loop {
            match self.rbuf.read_from(&mut self.stream, self.frame_bytes_max) {
                Ok(0) => return Err(self.lost("was closed by the node")),
                Ok(n) => return Ok(n),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return if blocking {
                        Err(self.lost(format!(
                            "got no response for {} ms (io_timeout_ms); the node is stuck or gone",
                            self.io_timeout_ms
                        )))
                    } else {
                        Ok(0)
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.lost(format!("failed while receiving: {e}"))),
            }
        }
    }

    /// Handles the complete responses in the receive buffer: completions of
    /// posted requests go to `ready`; stops at the synchronous call's response
    /// and returns its result. `Err` means the connection failed.
    pub(super) fn process(
        &mut self,
        ready: &mut VecDeque<Completion>,
        sink: &mut Sink<'_>,
    ) -> Result<Option<Result<Reply>>> {
        if matches!(self.pending.front(), Some(p) if matches!(p.waiter, Waiter::Hello))
            && self.challenged()?
        {
            return Ok(None);
        }
        loop {
            let Some(n) = frame::frame_len(self.rbuf.data(), self.frame_bytes_max, self.peer)?
            else {
                return Ok(None);
            };
            let r = on_response(
                &mut self.pending,
                &mut self.window_bytes,
                self.peer,
                &self.rbuf.data()[..n],
                ready,
                sink,
            );
            self.rbuf.consume(n);
            if let Some(reply) = r? {
                return Ok(Some(reply));
            }
        }
    }

    /// Before the HELLO's answer: whether the node opened with the
    /// authentication challenge instead (it has a secret, this node has none).
    /// `Ok(true)`: part of the magic, wait for the rest; `Err`: it did.
    fn challenged(&self) -> Result<bool> {
        let data = self.rbuf.data();
        let n = data.len().min(auth::MAGIC.len());
        // A frame's first 4 bytes are its length; "LOCU" is no frame of ours.
        if n < 4 || data[..n] != auth::MAGIC[..n] {
            return Ok(false);
        }
        if n < auth::MAGIC.len() {
            return Ok(true);
        }
        Err(FabricError::PeerUnavailable {
            machine: self.peer,
            reason: format!(
                "the node at {} requires the cluster secret and this node has none: set \
                 LOCUS_SECRET or `secret` in the cluster file to the cluster's secret",
                self.addr
            ),
        })
    }

    /// Reads responses until a request of `window` response bytes fits in the window.
    pub(super) fn make_room(
        &mut self,
        window: usize,
        ready: &mut VecDeque<Completion>,
    ) -> Result<()> {
        while !self.pending.is_empty() && self.window_bytes + window > CONN_RESPONSE_BYTES_MAX {
            self.flush()?;
            let r = self.process(ready, &mut Sink::None)?;
            debug_assert!(r.is_none(), "no synchronous call is waiting");
            if !self.pending.is_empty() && self.window_bytes + window > CONN_RESPONSE_BYTES_MAX {
                self.fill(true)?;
            }
        }
        Ok(())
    }

    /// Sends what is buffered and takes what has arrived, without blocking on reads.
    pub(super) fn poll(&mut self, ready: &mut VecDeque<Completion>) -> Result<()> {
        self.flush()?;
        self.process(ready, &mut Sink::None)?;
        if !self.pending.is_empty() && self.fill(false)? > 0 {
            self.process(ready, &mut Sink::None)?;
        }
        Ok(())
    }

    /// Waits until every outstanding request has completed (for fences).
    pub(super) fn drain(&mut self, ready: &mut VecDeque<Completion>) -> Result<()> {
        self.flush()?;
        loop {
            self.process(ready, &mut Sink::None)?;
            if self.pending.is_empty() {
                return Ok(());
            }
            self.fill(true)?;
        }
    }

    /// One synchronous request: queued behind the posted ones, sent, and
    /// waited for; completions met on the way go to `ready`. The outer `Err`
    /// means the connection failed, the inner one is the request's own error.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn call(
        &mut self,
        seq: u64,
        op: u8,
        target: MachineId,
        reply_bytes: usize,
        sink: &mut Sink<'_>,
        ready: &mut VecDeque<Completion>,
        encode: impl FnOnce(&mut Vec<u8>, u64),
    ) -> Result<Result<Reply>> {
        self.make_room(HEADER_BYTES + reply_bytes, ready)?;
        let req = self.encode(encode);
        self.expect(req, seq, op, target, reply_bytes, Waiter::Sync);
        self.flush()?;
        loop {
            if let Some(reply) = self.process(ready, sink)? {
                return Ok(reply);
            }
            self.fill(true)?;
        }
    }

    /// Fails every outstanding posted request with `err` (re-addressed to its target).
    pub(super) fn fail(self, err: &FabricError, ready: &mut VecDeque<Completion>) {
        for p in self.pending {
            if let Waiter::Async { id, .. } = p.waiter {
                ready.push_back(Completion {
                    id,
                    target: p.target,
                    result: Err(for_machine(err, p.target)),
                });
            }
        }
    }
}

/// A failed handshake with the node at `addr`, as the error of an operation on `peer`.
fn auth_failed(e: &AuthError, addr: SocketAddr, peer: MachineId, timeout_ms: u64) -> FabricError {
    let reason = match e {
        AuthError::Refused { reason } => format!(
            "node at {addr} refused us: {reason}; set LOCUS_SECRET or `secret` in the cluster \
             file to the cluster's secret"
        ),
        AuthError::Io(_) => format!(
            "authentication with the node at {addr} failed (connect_timeout_ms = {timeout_ms}): \
             {e}"
        ),
        _ => format!("authentication with the node at {addr} failed: {e}"),
    };
    FabricError::PeerUnavailable {
        machine: peer,
        reason,
    }
}

/// Matches one response frame against the oldest outstanding request.
fn on_response(
    pending: &mut VecDeque<Pending>,
    window_bytes: &mut usize,
    peer: MachineId,
    bytes: &[u8],
    ready: &mut VecDeque<Completion>,
    sink: &mut Sink<'_>,
) -> Result<Option<Result<Reply>>> {
    let resp = frame::decode_response(bytes, peer)?;
    if resp.op == frame::OP_ERROR {
        // The node refused the connection; it closes it next.
        return Err(match resp.result {
            Err(e) => e,
            Ok(_) => unreachable!("decode_response rejects an OK error frame"),
        });
    }
    let protocol = |reason: String| FabricError::Protocol {
        machine: peer,
        reason,
    };
    let Some(front) = pending.front() else {
        return Err(protocol(format!(
            "a {} response to request {} arrived with no request outstanding",
            frame::op_name(resp.op),
            resp.req
        )));
    };
    if (resp.req, resp.op, resp.machine) != (front.req, front.op, front.target) {
        return Err(protocol(format!(
            "a response for {} request {} on machine {} arrived while the oldest outstanding \
             request is {} request {} on machine {}",
            frame::op_name(resp.op),
            resp.req,
            resp.machine,
            frame::op_name(front.op),
            front.req,
            front.target
        )));
    }
    if let Ok(body) = resp.result {
        if body.len() != front.reply_bytes {
            return Err(protocol(format!(
                "a {} response carries {} bytes, {} expected",
                frame::op_name(resp.op),
                body.len(),
                front.reply_bytes
            )));
        }
    }
    let p = pending.pop_front().expect("front checked above");
    *window_bytes -= HEADER_BYTES + p.reply_bytes;
    match p.waiter {
        Waiter::Hello => resp.result.map(|_| None),
        Waiter::Async { id, out } => {
            let result = resp.result.map(|body| match out {
                AsyncOut::Read(mut buf) => {
                    buf.copy_from_slice(body);
                    Output::Data(buf)
                }
                AsyncOut::ReadTo { region, first } => {
                    region.write_words(first, body);
                    Output::Placed
                }
                AsyncOut::Write(data) => Output::Written(data),
                AsyncOut::Word => Output::Word(frame::word(body)),
            });
            ready.push_back(Completion {
                id,
                target: p.target,
                result,
            });
            Ok(None)
        }
        Waiter::Sync => {
            let body = match resp.result {
                Ok(body) => body,
                Err(e) => return Ok(Some(Err(e))),
            };
            let reply = match sink {
                Sink::Read(buf) => {
                    buf.copy_from_slice(body);
                    Reply::Unit
                }
                Sink::Word => Reply::Word(frame::word(body)),
                Sink::Unit => Reply::Unit,
                Sink::Region => Reply::Region(frame::decode_lookup_reply(body, peer)?),
                Sink::None => unreachable!("a synchronous response with no call waiting"),
            };
            Ok(Some(Ok(reply)))
        }
    }
}

/// A remote region lookup on the node's control connection `slot`.
pub(crate) fn lookup(
    inner: &Inner,
    slot: &mut Option<Conn>,
    node: usize,
    machine: MachineId,
    name: &str,
) -> Result<RegionInfo> {
    if HEADER_BYTES + name.len() > inner.config.frame_bytes_max {
        return Err(FabricError::NoSuchRegion {
            machine,
            region: format!("of a {}-byte name (longer than a frame holds)", name.len()),
        });
    }
    if slot.as_ref().is_some_and(|c| c.stale(inner, machine)) {
        *slot = None; // the control connection has nothing outstanding between calls
    }
    if slot.is_none() {
        *slot = Some(Conn::connect(inner, node, machine, inner.config.hosted[0])?);
    }
    let conn = slot.as_mut().expect("connected above");
    let mut none = VecDeque::new();
    let r = conn.call(
        0,
        frame::OP_LOOKUP,
        machine,
        frame::LOOKUP_REPLY_BYTES,
        &mut Sink::Region,
        &mut none,
        |b, req| frame::encode_lookup(b, req, machine, name),
    );
    debug_assert!(none.is_empty(), "the control connection posts nothing");
    match r {
        Ok(Ok(Reply::Region(info))) => Ok(info),
        Ok(Ok(other)) => unreachable!("a LOOKUP answered with {other:?}"),
        Ok(Err(e)) => Err(e),
        Err(e) => {
            *slot = None;
            Err(for_machine(&e, machine))
        }
    }
}
