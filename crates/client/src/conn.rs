//! One connection to a server's client listener (or the coordinator's
//! control listener): connect, authenticate (`locus_fabric::auth`), HELLO,
//! then blocking request/reply calls, each bounded by its deadline. A
//! connection that timed out or broke is never reused: the caller drops it.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use locus_fabric::auth::{self, Listener, Secret};

use crate::error::{ClientError, Result, ServerRef};
use crate::proto::{self, Control, ErrorCode, Op, ReadError, Reply, Request, HEADER_BYTES};

/// Added to a request's deadline for the socket timeout, so the server's
/// own `DEADLINE` reply arrives before the client gives up.
const DEADLINE_GRACE: Duration = Duration::from_secs(1);

/// What the server said in its HELLO reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerHello {
    /// Its machine.
    pub server_id: u8,
    /// Machines in the cluster.
    pub machines: u16,
    /// Frame limit on this connection.
    pub frame_bytes_max: usize,
    /// Its version text.
    pub server: String,
}

/// How an error from a connection attempt that never reached the server
/// starts (nothing was sent: a request may go elsewhere).
pub(crate) const CANNOT_CONNECT: &str = "cannot connect";

/// An open, authenticated connection.
pub struct Conn {
    stream: TcpStream,
    server: ServerRef,
    hello: ServerHello,
    next_id: u64,
    wbuf: Vec<u8>,
    rbuf: Vec<u8>,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("server", &self.server)
            .field("hello", &self.hello)
            .finish()
    }
}

impl Conn {
    /// Whether the server closed this idle connection (a pooled one is
    /// checked before it is used again, so that no request goes to a server
    /// that has gone: the caller connects afresh, and a failure to connect
    /// says nothing was sent).
    pub(crate) fn peer_closed(&self) -> bool {
        if self.stream.set_nonblocking(true).is_err() {
            return true;
        }
        let mut b = [0u8; 1];
        let closed = match self.stream.peek(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        };
        self.stream.set_nonblocking(false).is_err() || closed
    }

    /// Connects to `addr`, proves the secret (if any) for listener `kind`,
    /// and says HELLO as `name`; all within `timeout`.
    pub fn connect(
        addr: SocketAddr,
        secret: Option<&Secret>,
        kind: Listener,
        name: &str,
        timeout: Duration,
    ) -> Result<Conn> {
        let server = ServerRef { id: None, addr };
        let unavailable = |reason: String| ClientError::Unavailable { server, reason };
        let stream = TcpStream::connect_timeout(&addr, timeout)
            .map_err(|e| unavailable(format!("{CANNOT_CONNECT}: {e}; is it running?")))?;
        stream
            .set_nodelay(true)
            .and_then(|()| stream.set_read_timeout(Some(timeout)))
            .and_then(|()| stream.set_write_timeout(Some(timeout)))
            .map_err(|e| unavailable(format!("cannot set socket options: {e}")))?;
        let mut conn = Conn {
            stream,
            server,
            hello: ServerHello {
                server_id: 0,
                machines: 0,
                frame_bytes_max: proto::FRAME_BYTES_MAX,
                server: String::new(),
            },
            next_id: 0,
            wbuf: Vec::with_capacity(4096),
            rbuf: Vec::with_capacity(4096),
        };
        if let Some(secret) = secret {
            auth::prove_within(&mut conn.stream, secret, kind, timeout).map_err(|e| {
                ClientError::Auth {
                    server,
                    reason: e.to_string(),
                }
            })?;
        }
        let deadline_ms = timeout.as_millis().clamp(1, proto::DEADLINE_MS_MAX as u128) as u32;
        match conn.call(
            &Request::Hello {
                client: name.into(),
            },
            Duration::from_millis(deadline_ms as u64),
        )? {
            Reply::Hello {
                server_id,
                machines,
                frame_bytes_max,
                server: version,
            } => {
                conn.server.id = Some(server_id);
                conn.hello = ServerHello {
                    server_id,
                    machines,
                    frame_bytes_max: (frame_bytes_max as usize).min(proto::FRAME_BYTES_MAX),
                    server: version,
                };
                Ok(conn)
            }
            other => Err(conn.protocol(format!("HELLO answered with {other:?}"))),
        }
    }

    /// Which server this is.
    pub fn server(&self) -> ServerRef {
        self.server
    }

    /// Its HELLO reply.
    pub fn hello(&self) -> &ServerHello {
        &self.hello
    }

    fn protocol(&self, what: String) -> ClientError {
        ClientError::Protocol {
            server: self.server,
            error: proto::ProtoError::Malformed { op: "reply", what },
        }
    }

    /// Sends `req` and waits for its reply, at most `deadline` (plus a grace
    /// second for the server's own `DEADLINE` reply). An error reply becomes
    /// [`ClientError::Server`]; after any other error the connection must be
    /// dropped.
    pub fn call(&mut self, req: &Request, deadline: Duration) -> Result<Reply> {
        let deadline_ms = deadline
            .as_millis()
            .clamp(1, proto::DEADLINE_MS_MAX as u128) as u32;
        let id = self.next_id;
        self.next_id += 1;
        self.wbuf.clear();
        req.encode(&mut self.wbuf, id, deadline_ms);
        if self.wbuf.len() > self.hello.frame_bytes_max {
            return Err(ClientError::Invalid(format!(
                "{} request of {} bytes is past {}'s frame limit of {} bytes; send less at once",
                req.op().name(),
                self.wbuf.len(),
                self.server,
                self.hello.frame_bytes_max
            )));
        }
        let wait = Duration::from_millis(deadline_ms as u64) + DEADLINE_GRACE;
        let _ = self.stream.set_write_timeout(Some(wait));
        let _ = self.stream.set_read_timeout(Some(wait));
        self.stream
            .write_all(&self.wbuf)
            .map_err(|e| self.io_error(e, deadline_ms))?;
        let header = proto::read_frame(&mut self.stream, proto::FRAME_BYTES_MAX, &mut self.rbuf)
            .map_err(|e| match e {
                ReadError::Io(e) => self.io_error(e, deadline_ms),
                ReadError::Proto(error) => ClientError::Protocol {
                    server: self.server,
                    error,
                },
            })?;
        if header.id != id {
            return Err(self.protocol(format!(
                "reply id {} to request {id} (replies come in order)",
                header.id
            )));
        }
        let reply = Reply::decode(req.op(), header.op, &self.rbuf).map_err(|error| {
            ClientError::Protocol {
                server: self.server,
                error,
            }
        })?;
        match reply {
            Reply::Error { code, message } => Err(ClientError::Server {
                server: self.server,
                code,
                message,
            }),
            r => Ok(r),
        }
    }

    /// Writes a one-way control frame.
    pub fn send_control(&mut self, c: &Control) -> Result<()> {
        self.wbuf.clear();
        c.encode(&mut self.wbuf);
        self.stream
            .write_all(&self.wbuf)
            .map_err(|e| ClientError::Unavailable {
                server: self.server,
                reason: format!("control link broke: {e}"),
            })
    }

    /// Reads the next control frame, waiting at most `wait` (`Ok(None)` if
    /// nothing came; a partial frame read before the wait ends is finished
    /// under the same bound).
    pub fn recv_control(&mut self, wait: Duration) -> Result<Option<Control>> {
        let _ = self.stream.set_read_timeout(Some(wait));
        let mut h = [0u8; HEADER_BYTES];
        match std::io::Read::read(&mut self.stream, &mut h[..1]) {
            Ok(0) => {
                return Err(ClientError::Unavailable {
                    server: self.server,
                    reason: "closed the control link".into(),
                })
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(None)
            }
            Err(e) => return Err(self.io_error(e, wait.as_millis() as u32)),
        }
        let rest = &mut h[1..];
        std::io::Read::read_exact(&mut self.stream, rest)
            .map_err(|e| self.io_error(e, wait.as_millis() as u32))?;
        let header = proto::Header::parse(&h, self.hello.frame_bytes_max).map_err(|error| {
            ClientError::Protocol {
                server: self.server,
                error,
            }
        })?;
        self.rbuf.clear();
        self.rbuf.resize(header.body_len as usize, 0);
        std::io::Read::read_exact(&mut self.stream, &mut self.rbuf)
            .map_err(|e| self.io_error(e, wait.as_millis() as u32))?;
        if header.op == proto::ERROR_OP {
            let r = Reply::decode(Op::Ping, header.op, &self.rbuf).map_err(|error| {
                ClientError::Protocol {
                    server: self.server,
                    error,
                }
            })?;
            if let Reply::Error { code, message } = r {
                return Err(ClientError::Server {
                    server: self.server,
                    code,
                    message,
                });
            }
        }
        Control::decode(header.op, &self.rbuf)
            .map(Some)
            .map_err(|error| ClientError::Protocol {
                server: self.server,
                error,
            })
    }

    /// Shuts the connection down (both directions).
    pub fn shutdown(&self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }

    fn io_error(&self, e: std::io::Error, deadline_ms: u32) -> ClientError {
        match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                ClientError::Deadline {
                    server: self.server,
                    deadline_ms: deadline_ms as u64,
                }
            }
            std::io::ErrorKind::UnexpectedEof => ClientError::Unavailable {
                server: self.server,
                reason: "closed the connection".into(),
            },
            _ => ClientError::Unavailable {
                server: self.server,
                reason: e.to_string(),
            },
        }
    }
}

/// Whether an error means the server is busy or going away, so that a
/// fresh connection may be worth one retry.
pub(crate) fn is_connection_error(e: &ClientError) -> bool {
    matches!(e, ClientError::Unavailable { .. })
        || matches!(
            e,
            ClientError::Server {
                code: ErrorCode::NotReady,
                ..
            }
        )
}
