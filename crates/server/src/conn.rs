//! The client listener: an accept thread, and one thread per connection.
//!
//! ```text
//!  accepted ──auth::accept──▶ authenticated ──HELLO──▶ serving ──▶ closed
//!      │ (refused: logged,          │ (other first frame:     │ (bad header, foreign
//!      │  counted, closed)          │  NOT_READY, closed)     │  version, peer gone,
//!      ▼                            ▼                         ▼  server stopping)
//!   closed                       closed                    closed
//! ```
//!
//! The accept thread never reads from a socket: a client that stalls its
//! handshake holds only its own thread, for at most the handshake timeout.
//! Past `limits.max_clients` connections, a new one is answered `BUSY` after
//! its handshake and closed. A body that does not parse is answered with an
//! error and the connection stays open (its header was sound); a header that
//! does not parse closes it, since the stream cannot be resynchronised.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use locus_client::proto::{
    self, ErrorCode, Header, Op, ProtoError, Reply, Request, HEADER_BYTES, VERSION,
};
use locus_fabric::auth::{self, Listener};
use locus_fabric::tcp::TcpFabric;
use locus_node::Session;
use locus_store::Worker;

use crate::server::{ServerFabric, Shared};

/// How often an idle connection checks whether the server is stopping.
const IDLE_POLL: Duration = Duration::from_millis(250);
/// Longest wait for the rest of a frame once its first byte arrived.
const FRAME_READ_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) fn accept_loop(s: &Arc<Shared>, listener: TcpListener) {
    loop {
        let accepted = listener.accept();
        if s.stop.load(Ordering::Acquire) {
            return;
        }
        match accepted {
            Ok((stream, peer)) => {
                let sc = Arc::clone(s);
                let spawned = std::thread::Builder::new()
                    .name(format!("locus-client-{}", s.id))
                    .spawn(move || serve(&sc, stream, peer));
                if let Err(e) = spawned {
                    tracing::warn!(%peer, "cannot start a connection thread: {e}");
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // Out of descriptors and the like: back off instead of spinning.
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Wakes an accept loop blocked on `addr` (it then sees the stop flag).
pub(crate) fn wake_accept(addr: SocketAddr) {
    let mut a = addr;
    if a.ip().is_unspecified() {
        a.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    let _ = TcpStream::connect_timeout(&a, Duration::from_secs(1));
}

/// Counts a live connection for as long as it is held.
struct Slot<'a>(&'a Shared);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.clients.fetch_sub(1, Ordering::AcqRel);
    }
}

fn serve(s: &Shared, mut stream: TcpStream, peer: SocketAddr) {
    let handshake = Duration::from_millis(s.file.limits.handshake_timeout_ms);
    if stream.set_nodelay(true).is_err()
        || stream.set_read_timeout(Some(handshake)).is_err()
        || stream.set_write_timeout(Some(handshake)).is_err()
    {
        return;
    }
    if s.stop.load(Ordering::Acquire) {
        return;
    }
    if let Err(e) = auth::accept(&mut stream, &s.secret, Listener::Client, handshake) {
        s.auth_refused.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("locus_auth_refused_total", "listener" => "client").increment(1);
        tracing::warn!(server = s.id, %peer, "client refused at the handshake: {e}");
        return;
    }
    let n = s.clients.fetch_add(1, Ordering::AcqRel) + 1;
    let _slot = Slot(s);
    let mut c = Connection {
        s,
        stream,
        peer,
        rbuf: Vec::new(),
        wbuf: Vec::new(),
        session: s.node.session(),
    };
    if n > s.file.limits.max_clients {
        c.error_and_close(
            0,
            Op::Hello,
            ErrorCode::Busy,
            format!(
                "{} connections are open, the limit (limits.max_clients); retry later",
                s.file.limits.max_clients
            ),
        );
        return;
    }
    // The first frame must be HELLO, within the handshake timeout.
    match c.read_frame(handshake) {
        Ok(Some(h)) if h.op == Op::Hello as u8 && h.version == VERSION => {
            match Request::decode(h.op, &c.rbuf) {
                Ok((_, Request::Hello { client })) => {
                    tracing::debug!(server = s.id, %peer, client, "hello");
                    let reply = Reply::Hello {
                        server_id: s.id,
                        machines: s.file.machines() as u16,
                        frame_bytes_max: s.file.limits.frame_bytes_max as u32,
                        server: format!("locus {}", env!("CARGO_PKG_VERSION")),
                    };
                    if !c.send(&reply, Op::Hello, h.id) {
                        return;
                    }
                }
                _ => {
                    c.error_and_close(h.id, Op::Hello, ErrorCode::Malformed, "bad HELLO".into());
                    return;
                }
            }
        }
        Ok(Some(h)) => {
            c.error_and_close(
                h.id,
                Op::Hello,
                ErrorCode::NotReady,
                "the first frame must be HELLO (docs/protocol.md)".into(),
            );
            return;
        }
        Ok(None) | Err(_) => return,
    }
    let _ = c.stream.set_write_timeout(Some(FRAME_READ_TIMEOUT));
    while !s.stop.load(Ordering::Acquire) {
        let h = match c.read_frame(IDLE_POLL) {
            Ok(Some(h)) => h,
            Ok(None) => continue,
            Err(FrameFault::Gone) => return,
            Err(FrameFault::Bad(e)) => {
                let code = match e {
                    ProtoError::TooLarge { .. } => ErrorCode::TooLarge,
                    _ => ErrorCode::Malformed,
                };
                c.error_and_close(0, Op::Ping, code, e.to_string());
                return;
            }
        };
        let received = Instant::now();
        if h.version != VERSION {
            c.error_and_close(
                h.id,
                Op::Ping,
                ErrorCode::UnsupportedVersion,
                format!(
                    "this server speaks protocol version {VERSION}, not {}",
                    h.version
                ),
            );
            return;
        }
        let op = Op::from_u8(h.op).filter(|o| !o.is_control());
        let (deadline_ms, req) = match Request::decode(h.op, &c.rbuf) {
            Ok(x) => x,
            Err(e) => {
                let code = match e {
                    ProtoError::UnknownOp(_) => ErrorCode::UnknownOp,
                    ProtoError::TooLarge { .. } => ErrorCode::TooLarge,
                    ProtoError::Invalid { .. } => ErrorCode::Invalid,
                    _ => ErrorCode::Malformed,
                };
                let reply = Reply::Error {
                    code,
                    message: c.named(&e.to_string()),
                };
                if !c.send(&reply, op.unwrap_or(Op::Ping), h.id) {
                    return;
                }
                continue;
            }
        };
        let op = req.op();
        let deadline = received + Duration::from_millis(deadline_ms as u64);
        s.requests[op as usize & 15].fetch_add(1, Ordering::Relaxed);
        if let Some(why) = s.membership.as_ref().and_then(|m| m.refuses(s.id)) {
            c.error_and_close(h.id, op, ErrorCode::NotReady, why); // fenced (member.rs)
            return;
        }
        let control = matches!(
            req,
            Request::Move { .. }
                | Request::Slots
                | Request::Servers
                | Request::Stats
                | Request::Ping
                | Request::Hello { .. }
        );
        let waiting = (!control)
            .then(|| s.membership.as_ref().and_then(|m| m.awaits_failover(s.id)))
            .flatten();
        let reply = match req {
            _ if waiting.is_some() => s
                .node
                .error(ErrorCode::NotReady, waiting.expect("checked by the guard")),
            Request::Stats => crate::stats::reply(&mut c),
            Request::Servers => Reply::Servers(s.servers_reply()),
            req => {
                // The node's deadlines are on the fabric's clock.
                let left_ns = deadline
                    .saturating_duration_since(Instant::now())
                    .as_nanos() as u64;
                match c.session.now_ns(&s.node) {
                    Ok(now) => s
                        .node
                        .handle(&mut c.session, req, now.saturating_add(left_ns)),
                    Err(e) => s.node.error(locus_node::node::code_of(&e), e.to_string()),
                }
            }
        };
        let secs = received.elapsed().as_secs_f64();
        let outcome = if matches!(reply, Reply::Error { .. }) {
            "error"
        } else {
            "ok"
        };
        metrics::counter!("locus_requests_total", "op" => op.name(), "outcome" => outcome)
            .increment(1);
        metrics::histogram!("locus_request_seconds", "op" => op.name()).record(secs);
        if !c.send(&reply, op, h.id) {
            return;
        }
    }
}

/// Why a frame could not be read.
enum FrameFault {
    /// The client left, the connection broke, or a frame stalled half-way.
    Gone,
    /// The header is not the protocol.
    Bad(ProtoError),
}

/// One client connection.
pub(crate) struct Connection<'a> {
    pub(crate) s: &'a Shared,
    stream: TcpStream,
    peer: SocketAddr,
    rbuf: Vec<u8>,
    wbuf: Vec<u8>,
    session: Session<TcpFabric>,
}

impl Connection<'_> {
    /// Prefixes `what` with this server's name, as every error message is.
    pub(crate) fn named(&self, what: &str) -> String {
        self.s.node.named(what)
    }

    /// This connection's worker (made on first use).
    pub(crate) fn worker(&mut self) -> locus_store::Result<&mut Worker<ServerFabric>> {
        self.session.worker(&self.s.node)
    }

    /// Reads one frame into `rbuf`: `Ok(None)` if no byte came within `idle`
    /// (or the wait was interrupted).
    fn read_frame(&mut self, idle: Duration) -> Result<Option<Header>, FrameFault> {
        let _ = self.stream.set_read_timeout(Some(idle));
        let mut h = [0u8; HEADER_BYTES];
        match self.stream.read(&mut h[..1]) {
            Ok(0) => return Err(FrameFault::Gone),
            Ok(_) => {}
            // EINTR: a recv with SO_RCVTIMEO is not restarted after SIGSTOP
            // and SIGCONT (signal(7)); taken for a broken connection, every
            // idle client was reset on resume and the requests it had sent
            // meanwhile went unanswered instead of refused or served.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                return Ok(None)
            }
            Err(_) => return Err(FrameFault::Gone),
        }
        let _ = self.stream.set_read_timeout(Some(FRAME_READ_TIMEOUT));
        self.stream
            .read_exact(&mut h[1..])
            .map_err(|_| FrameFault::Gone)?;
        let header =
            Header::parse(&h, self.s.file.limits.frame_bytes_max).map_err(FrameFault::Bad)?;
        self.rbuf.clear();
        self.rbuf.resize(header.body_len as usize, 0);
        self.stream
            .read_exact(&mut self.rbuf)
            .map_err(|_| FrameFault::Gone)?;
        Ok(Some(header))
    }

    /// Writes a reply; false if the client is gone.
    fn send(&mut self, reply: &Reply, op: Op, id: u64) -> bool {
        self.wbuf.clear();
        reply.encode(&mut self.wbuf, op, id);
        debug_assert!(self.wbuf.len() <= proto::FRAME_BYTES_MAX);
        match self.stream.write_all(&self.wbuf) {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!(server = self.s.id, peer = %self.peer, "client gone: {e}");
                false
            }
        }
    }

    fn error_and_close(&mut self, id: u64, op: Op, code: ErrorCode, message: String) {
        let reply = Reply::Error {
            code,
            message: self.named(&message),
        };
        self.send(&reply, op, id);
        let _ = self.stream.flush();
        let _ = self.stream.shutdown(std::net::Shutdown::Write);
        // Let the client read the reply before the socket is dropped (a
        // reset would discard it); bounded.
        let _ = self
            .stream
            .set_read_timeout(Some(Duration::from_millis(200)));
        let mut sink = [0u8; 4096];
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(1) {
            match self.stream.read(&mut sink) {
                Ok(n) if n > 0 => {}
                _ => break,
            }
        }
    }
}
