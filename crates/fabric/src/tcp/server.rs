//! The serving side of a node: an accept thread and one service thread per
//! accepted connection.
//!
//! A service thread loops: execute every complete request in its receive
//! buffer (appending responses to its send buffer), write the responses, read
//! more requests. Responses are written with a short timeout
//! (`STALL_POLL`): if the client is not reading them, the thread goes on
//! reading requests, so a client blocked writing a long pipeline cannot
//! deadlock against a server blocked writing its answers. It stops taking
//! requests once its unsent responses exceed `CONN_RESPONSE_BYTES_MAX` plus
//! one frame (more than a well-behaved client ever has outstanding).
//!
//! On a node with a secret, the service thread first runs the authentication
//! handshake (`auth::accept`): the accept thread only hands the socket over,
//! so a client that never answers holds up its own thread and nobody else.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::client::CONN_RESPONSE_BYTES_MAX;
use super::frame::{self, RecvBuf, Request, HEADER_BYTES};
use super::{check_len, Inner};
use crate::auth::{self, AuthError, Listener, Secret};
use crate::memory::{apply_ref, VerbRef};
use crate::{FabricError, MachineId, Result};

/// How long a service thread blocks on a write the client does not drain
/// before it goes back to reading requests (and the other way round).
const STALL_POLL: Duration = Duration::from_millis(5);
/// Longest a service thread drains a refused client's input before closing.
const LINGER: Duration = Duration::from_secs(1);
/// Send-buffer capacity a service thread keeps between batches.
const SEND_BYTES_KEEP: usize = 1 << 20;

/// The live accepted connections of a node.
#[derive(Default)]
pub(crate) struct Sessions {
    next_id: u64,
    live: Vec<Session>,
}

/// One accepted connection: a handle to shut its socket down, and its thread.
struct Session {
    id: u64,
    stream: TcpStream,
    thread: Option<JoinHandle<()>>,
}

/// Starts the accept thread.
pub(crate) fn start(inner: Arc<Inner>, listener: TcpListener) -> Result<JoinHandle<()>> {
    let name = format!("locus-tcp-accept-{}", inner.local_addr.port());
    std::thread::Builder::new()
        .name(name)
        .spawn(move || accept_loop(&inner, listener))
        .map_err(|e| FabricError::Config(format!("cannot start the accept thread: {e}")))
}

fn accept_loop(inner: &Arc<Inner>, listener: TcpListener) {
    loop {
        let accepted = listener.accept();
        if inner.stop.load(Ordering::Acquire) {
            return;
        }
        match accepted {
            Ok((stream, _)) => admit(inner, stream),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // Out of descriptors and the like: back off instead of spinning.
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Registers a connection and starts its service thread.
fn admit(inner: &Arc<Inner>, stream: TcpStream) {
    let Ok(handle) = stream.try_clone() else {
        return;
    };
    let id = {
        let mut s = inner.sessions.lock().unwrap_or_else(|e| e.into_inner());
        // Checked under the lock that shutdown takes: either shutdown sees
        // this session, or this sees the stop flag.
        if inner.stop.load(Ordering::Acquire) {
            return;
        }
        let id = s.next_id;
        s.next_id += 1;
        s.live.push(Session {
            id,
            stream: handle,
            thread: None,
        });
        id
    };
    let owner = Arc::clone(inner);
    let spawned = std::thread::Builder::new()
        .name(format!("locus-tcp-serve-{}", inner.local_addr.port()))
        .spawn(move || {
            Service::new(&owner, stream).run();
            let mut s = owner.sessions.lock().unwrap_or_else(|e| e.into_inner());
            s.live.retain(|x| x.id != id);
        });
    let mut s = inner.sessions.lock().unwrap_or_else(|e| e.into_inner());
    match spawned {
        Ok(thread) => {
            // If the thread already finished, its entry is gone and the handle detaches.
            if let Some(x) = s.live.iter_mut().find(|x| x.id == id) {
                x.thread = Some(thread);
            }
        }
        Err(_) => s.live.retain(|x| x.id != id),
    }
}

/// Stops serving: no more accepts, every accepted socket shut down, every
/// service thread joined. Idempotent.
pub(crate) fn shutdown(inner: &Inner, accept: &Mutex<Option<JoinHandle<()>>>) {
    inner.stop.store(true, Ordering::Release);
    let accept_thread = accept.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(thread) = accept_thread {
        // Wake `accept` with a connection of our own; it then sees the flag.
        // If even that fails the thread is left blocked (detached) rather
        // than joined forever.
        if TcpStream::connect_timeout(&wake_addr(inner.local_addr), Duration::from_secs(2)).is_ok()
        {
            let _ = thread.join();
        }
    }
    let live = std::mem::take(
        &mut inner
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .live,
    );
    for s in &live {
        let _ = s.stream.shutdown(Shutdown::Both);
    }
    for s in live {
        if let Some(t) = s.thread {
            let _ = t.join();
        }
    }
}

/// Where to connect to reach a listener bound to `addr` (a wildcard address
/// is reached through loopback).
fn wake_addr(addr: SocketAddr) -> SocketAddr {
    let mut a = addr;
    if a.ip().is_unspecified() {
        a.set_ip(match a {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    a
}

/// The state of one service thread.
struct Service<'a> {
    inner: &'a Inner,
    stream: TcpStream,
    rbuf: RecvBuf,
    wbuf: Vec<u8>,
    /// Bytes of `wbuf` already written.
    wpos: usize,
    /// The client's machine, once its HELLO was accepted.
    peer: Option<MachineId>,
    /// The client node's epoch, from its HELLO.
    peer_epoch: u64,
    /// Whether the read timeout is currently `STALL_POLL` (else `io_timeout`).
    short_reads: bool,
}

impl<'a> Service<'a> {
    fn new(inner: &'a Inner, stream: TcpStream) -> Self {
        Service {
            inner,
            stream,
            rbuf: RecvBuf::default(),
            wbuf: Vec::with_capacity(64 << 10),
            wpos: 0,
            peer: None,
            peer_epoch: 0,
            short_reads: false,
        }
    }

    fn unsent(&self) -> usize {
        self.wbuf.len() - self.wpos
    }

    /// Unsent response bytes beyond which no more requests are taken.
    fn backlog_max(&self) -> usize {
        CONN_RESPONSE_BYTES_MAX + self.inner.config.frame_bytes_max
    }

    /// Serves until the client leaves, the connection fails or the node stops.
    fn run(&mut self) {
        let io_timeout = self.inner.config.io_timeout();
        if self.stream.set_nodelay(true).is_err()
            || self.stream.set_read_timeout(Some(io_timeout)).is_err()
        {
            return;
        }
        if let Some(secret) = &self.inner.config.secret {
            if let Err(e) = self.authenticate(secret) {
                self.refused(&e);
                // A refusal was written (for a wrong proof): let the client read it.
                return self.close(true);
            }
        }
        if self.stream.set_write_timeout(Some(STALL_POLL)).is_err() {
            return;
        }
        let mut last_read = Instant::now();
        let mut last_write = Instant::now();
        loop {
            if self.inner.stop.load(Ordering::Acquire) {
                return;
            }
            if self.execute_buffered() {
                // A fatal error frame is queued: say why, then close.
                return self.close(true);
            }
            if self.unsent() > 0 {
                match self.write_some() {
                    Ok(true) => last_write = Instant::now(),
                    Ok(false) => {}
                    Err(_) => return,
                }
            }
            let backlog = self.unsent();
            if backlog >= self.backlog_max() {
                // The client takes no responses: wait for it (each write
                // attempt blocks up to STALL_POLL), give up after io_timeout.
                if last_write.elapsed() > io_timeout {
                    return;
                }
                continue;
            }
            let short = backlog > 0;
            if short != self.short_reads {
                let t = if short { STALL_POLL } else { io_timeout };
                if self.stream.set_read_timeout(Some(t)).is_err() {
                    return;
                }
                self.short_reads = short;
            }
            match self
                .rbuf
                .read_from(&mut self.stream, self.inner.config.frame_bytes_max)
            {
                // The client is done sending; it may still read the answers.
                Ok(0) => return self.close(false),
                Ok(_) => last_read = Instant::now(),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    // Idle is fine; half a frame and then silence is a dead client.
                    if !self.rbuf.is_empty() && last_read.elapsed() > io_timeout {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }

    /// The handshake, before any request: the whole exchange within io_timeout.
    fn authenticate(&mut self, secret: &Secret) -> std::result::Result<(), AuthError> {
        let io_timeout = self.inner.config.io_timeout();
        self.stream.set_write_timeout(Some(io_timeout))?;
        auth::accept(&mut self.stream, secret, Listener::Fabric, io_timeout)
    }

    /// Counts and logs a connection that did not prove the secret (unless the
    /// node is stopping, which cuts handshakes short itself).
    fn refused(&self, e: &AuthError) {
        if self.inner.stop.load(Ordering::Acquire) {
            return;
        }
        self.inner.auth_refusals.fetch_add(1, Ordering::Relaxed);
        let remote = self
            .stream
            .peer_addr()
            .map_or_else(|_| "an unknown address".to_string(), |a| a.to_string());
        tracing::warn!(
            "fabric node {} refused the connection from {remote}: {e}",
            self.inner.local_addr
        );
    }

    /// Ends the connection: sends what is queued (bounded by io_timeout),
    /// then, if the client may still be sending (`linger`), half-closes and
    /// drains its input for a moment, so that it reads the queued error frame
    /// instead of a reset.
    fn close(&mut self, linger: bool) {
        let deadline = Instant::now() + self.inner.config.io_timeout();
        while self.unsent() > 0 && Instant::now() < deadline {
            if self.inner.stop.load(Ordering::Acquire) || self.write_some().is_err() {
                break;
            }
        }
        let _ = self.stream.shutdown(Shutdown::Write);
        if linger && self.stream.set_read_timeout(Some(STALL_POLL)).is_ok() {
            let mut sink = [0u8; 4096];
            let deadline = Instant::now() + LINGER.min(self.inner.config.io_timeout());
            while Instant::now() < deadline && !self.inner.stop.load(Ordering::Acquire) {
                match self.stream.read(&mut sink) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock
                                | io::ErrorKind::TimedOut
                                | io::ErrorKind::Interrupted
                        ) => {}
                    Err(_) => break,
                }
            }
        }
    }

    /// Executes the complete requests in the receive buffer. Returns true if
    /// a fatal error frame was queued and the connection must close.
    fn execute_buffered(&mut self) -> bool {
        let frame_max = self.inner.config.frame_bytes_max;
        while self.unsent() < self.backlog_max() {
            let who = self.peer.unwrap_or(MachineId::MAX);
            let n = match frame::frame_len(self.rbuf.data(), frame_max, who) {
                Ok(Some(n)) => n,
                Ok(None) => return false,
                Err(e) => {
                    frame::encode_err(&mut self.wbuf, frame::OP_ERROR, who, 0, &e);
                    return true;
                }
            };
            let fatal = serve_frame(
                self.inner,
                &mut self.peer,
                &mut self.peer_epoch,
                &self.rbuf.data()[..n],
                &mut self.wbuf,
            );
            self.rbuf.consume(n);
            if fatal {
                return true;
            }
        }
        false
    }

    /// Writes what the socket takes within `STALL_POLL`; true if any byte went out.
    fn write_some(&mut self) -> io::Result<bool> {
        let mut progressed = false;
        while self.wpos < self.wbuf.len() {
            match self.stream.write(&self.wbuf[self.wpos..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.wpos += n;
                    progressed = true;
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    break
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.wpos == self.wbuf.len() {
            self.wbuf.clear();
            self.wpos = 0;
            if self.wbuf.capacity() > SEND_BYTES_KEEP {
                self.wbuf = Vec::with_capacity(64 << 10);
            }
        } else if self.wpos >= SEND_BYTES_KEEP {
            self.wbuf.drain(..self.wpos);
            self.wpos = 0;
        }
        Ok(progressed)
    }
}

/// Executes one request frame, appending its response to `out`. Returns true
/// if the frame was fatal (malformed, or a refused HELLO): the connection must close.
fn serve_frame(
    inner: &Inner,
    peer: &mut Option<MachineId>,
    peer_epoch: &mut u64,
    frame: &[u8],
    out: &mut Vec<u8>,
) -> bool {
    let who = peer.unwrap_or(MachineId::MAX);
    let (h, req) = match frame::decode_request(frame, who) {
        Ok(x) => x,
        Err(e) => {
            let req = frame
                .get(8..HEADER_BYTES)
                .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
            frame::encode_err(out, frame::OP_ERROR, who, req, &e);
            return true;
        }
    };
    let Some(from) = *peer else {
        return match req {
            Request::Hello {
                from,
                version,
                machines,
                frame_bytes_max,
                epoch,
                expect,
            } => match check_hello(inner, from, version, machines, frame_bytes_max)
                .and_then(|()| check_epochs(inner, from, epoch, expect))
            {
                Ok(()) => {
                    *peer = Some(from);
                    *peer_epoch = epoch;
                    frame::encode_ok_empty(out, frame::OP_HELLO, from, h.req);
                    false
                }
                Err(e) => {
                    frame::encode_err(out, frame::OP_HELLO, from, h.req, &e);
                    true
                }
            },
            _ => {
                let e = FabricError::Protocol {
                    machine: who,
                    reason: format!(
                        "the first frame must be HELLO, got {}",
                        frame::op_name(h.op)
                    ),
                };
                frame::encode_err(out, frame::OP_ERROR, who, h.req, &e);
                true
            }
        };
    };
    let admitted = inner
        .epochs
        .serves()
        .and_then(|()| inner.epochs.admits(from, *peer_epoch));
    if let Err(reason) = admitted {
        // This node fenced, or the peer marked down (or superseded) after it
        // connected: cut it off.
        inner.epoch_refusals.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(machine = from, epoch = *peer_epoch, %reason, "fabric connection fenced");
        let e = FabricError::PeerUnavailable {
            machine: from,
            reason: format!("refused by the node at {}: {reason}", inner.local_addr),
        };
        frame::encode_err(out, frame::OP_ERROR, who, h.req, &e);
        return true;
    }
    // Rule 4: while this node recovers, its memory serves no peer (lookups
    // and messages go on). Rule 3: a newer incarnation than this node knows
    // reads, but changes nothing here until this node has taken its
    // registration. Either refuses this request alone; the connection stays.
    let verdict = match req {
        Request::Read { machine, .. } => Some((machine, inner.epochs.serves_memory())),
        Request::Write { machine, .. }
        | Request::Cas { machine, .. }
        | Request::FetchAdd { machine, .. } => Some((
            machine,
            inner
                .epochs
                .serves_memory()
                .and_then(|()| inner.epochs.admits_writes(from, *peer_epoch)),
        )),
        _ => None,
    };
    if let Some((machine, Err(reason))) = verdict {
        inner.epoch_refusals.fetch_add(1, Ordering::Relaxed);
        let e = FabricError::PeerUnavailable {
            machine,
            reason: format!("refused by machine {machine}: {reason}"),
        };
        frame::encode_err(out, h.op, machine, h.req, &e);
        return false;
    }
    match req {
        Request::Hello { .. } => {
            let e = FabricError::Protocol {
                machine: who,
                reason: "HELLO sent twice on one connection".into(),
            };
            frame::encode_err(out, frame::OP_ERROR, who, h.req, &e);
            return true;
        }
        Request::Read {
            machine,
            region,
            offset,
            len,
        } => {
            let len = len as usize;
            let mem = inner.hosted.memory(machine).and_then(|m| {
                check_len(len, inner.config.frame_bytes_max - HEADER_BYTES)?;
                Ok(m)
            });
            match mem {
                Err(e) => frame::encode_err(out, h.op, machine, h.req, &e),
                Ok(mem) => {
                    let at = frame::begin_ok(out, h.op, machine, h.req);
                    let start = out.len();
                    out.resize(start + len, 0);
                    match apply_ref(mem, region, offset, VerbRef::Read(&mut out[start..])) {
                        Ok(_) => frame::end_response(out, at),
                        Err(e) => {
                            out.truncate(at);
                            frame::encode_err(out, h.op, machine, h.req, &e);
                        }
                    }
                }
            }
        }
        Request::Write {
            machine,
            region,
            offset,
            data,
        } => {
            match inner
                .hosted
                .memory(machine)
                .and_then(|m| apply_ref(m, region, offset, VerbRef::Write(data)))
            {
                Ok(_) => frame::encode_ok_empty(out, h.op, machine, h.req),
                Err(e) => frame::encode_err(out, h.op, machine, h.req, &e),
            }
        }
        Request::Cas {
            machine,
            region,
            offset,
            expected,
            new,
        } => word_reply(
            out,
            h.op,
            machine,
            h.req,
            inner
                .hosted
                .memory(machine)
                .and_then(|m| apply_ref(m, region, offset, VerbRef::Cas { expected, new })),
        ),
        Request::FetchAdd {
            machine,
            region,
            offset,
            add,
        } => word_reply(
            out,
            h.op,
            machine,
            h.req,
            inner
                .hosted
                .memory(machine)
                .and_then(|m| apply_ref(m, region, offset, VerbRef::FetchAdd { add })),
        ),
        Request::Send { to, from, payload } => {
            // Hosted here first (NotHosted before MessageTooLarge), then the size.
            let delivered = inner
                .hosted
                .memory(to)
                .and_then(|_| inner.hosted.check_send(to, payload.len()))
                .and_then(|()| inner.hosted.deliver(from, to, payload, 0));
            match delivered {
                Ok(()) => frame::encode_ok_empty(out, h.op, to, h.req),
                Err(e) => frame::encode_err(out, h.op, to, h.req, &e),
            }
        }
        Request::Lookup { machine, name } => match inner.hosted.lookup(machine, name) {
            Ok(info) => frame::encode_ok_lookup(out, machine, h.req, info),
            Err(e) => frame::encode_err(out, h.op, machine, h.req, &e),
        },
    }
    false
}

fn word_reply(out: &mut Vec<u8>, op: u8, machine: MachineId, req: u64, r: Result<u64>) {
    match r {
        Ok(w) => frame::encode_ok_word(out, op, machine, req, w),
        Err(e) => frame::encode_err(out, op, machine, req, &e),
    }
}

/// Accepts a client only at epochs this node can serve (see `fencing.rs`):
/// not if this node is fenced, expected at another epoch, or the client's
/// incarnation is older than (or at the down epoch of) what this node knows.
fn check_epochs(inner: &Inner, from: MachineId, epoch: u64, expect: u64) -> Result<()> {
    let t = &inner.epochs;
    let verdict = t
        .serves()
        .and_then(|()| t.expected(from, expect, "this node"))
        .and_then(|()| t.admits(from, epoch));
    if let Err(reason) = verdict {
        inner.epoch_refusals.fetch_add(1, Ordering::Relaxed);
        let own = t.own();
        tracing::warn!(machine = from, epoch, expect, own, %reason, "fabric connection refused");
        return Err(FabricError::PeerUnavailable {
            machine: from,
            reason: format!("refused by the node at {}: {reason}", inner.local_addr),
        });
    }
    Ok(())
}

/// Accepts a client only if it speaks this protocol about the same cluster.
fn check_hello(
    inner: &Inner,
    from: MachineId,
    version: u16,
    machines: u16,
    frame_bytes_max: u32,
) -> Result<()> {
    let c = &inner.config;
    let here = inner.local_addr;
    if version != frame::PROTOCOL_VERSION {
        return Err(FabricError::Config(format!(
            "machine {from} speaks protocol version {version}, the node at {here} version {}: \
             run the same build everywhere",
            frame::PROTOCOL_VERSION
        )));
    }
    if machines as usize != c.machines || (from as usize) >= c.machines {
        return Err(FabricError::Config(format!(
            "machine {from} believes the cluster has {machines} machines, the node at {here} \
             has {}: give every node the same peer table",
            c.machines
        )));
    }
    if frame_bytes_max as usize != c.frame_bytes_max {
        return Err(FabricError::Config(format!(
            "machine {from} uses frame_bytes_max = {frame_bytes_max}, the node at {here} {}: \
             give every node the same limit",
            c.frame_bytes_max
        )));
    }
    Ok(())
}
