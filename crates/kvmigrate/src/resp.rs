//! A minimal RESP2 client for talking to a stock `redis-server` with ordinary commands.
//!
//! Blocking TCP, one connection per [`Client`], every wait bounded: connect,
//! each whole write and each whole reply have a deadline. Commands are sent
//! as RESP2 arrays of bulk strings, so keys and values are binary-safe:
//!
//! ```text
//!  SET k v   ─▶  *3\r\n $3\r\nSET\r\n $1\r\nk\r\n $1\r\nv\r\n
//!  replies   ◀─  +OK\r\n          simple string      -ERR msg\r\n   error
//!                :42\r\n          integer            $5\r\nhello\r\n bulk ($-1 = null)
//!                *2\r\n<r><r>     array of replies   (*-1 = null; nested)
//! ```
//!
//! The [`Decoder`] is incremental and does no I/O: bytes are fed as they
//! arrive, partial replies are kept as a stack of open arrays, so a reply of
//! n bytes is parsed in O(n) however it is split. Every length is checked
//! against [`Limits`] before anything is allocated; malformed input is a
//! [`RespError::Protocol`] naming the offset and the bytes seen, never a
//! panic. After any I/O or protocol error the client is poisoned (the
//! stream's position is unknown): later calls fail until reconnected.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Errors from the RESP client and decoder.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RespError {
    /// No address of `addr` accepted a connection in time.
    #[error("cannot connect to redis at {addr}: {reason}")]
    Connect {
        /// The address asked for.
        addr: String,
        /// Why (last attempt's error, or "resolved to no address").
        reason: String,
    },
    /// The server did not take a request or finish a reply in time.
    #[error("redis at {addr} did not {during} within {timeout_ms} ms")]
    Timeout {
        /// Server address.
        addr: String,
        /// "accept the request" or "finish its reply".
        during: &'static str,
        /// The bound that expired.
        timeout_ms: u64,
    },
    /// The server closed the connection.
    #[error("redis at {addr} closed the connection {during}")]
    Closed {
        /// Server address.
        addr: String,
        /// "before replying", "in the middle of a reply", ...
        during: &'static str,
    },
    /// Another socket error.
    #[error("I/O error talking to redis at {addr}: {source}")]
    Io {
        /// Server address.
        addr: String,
        /// The error.
        source: io::Error,
    },
    /// The bytes received are not RESP2.
    #[error("RESP2 protocol violation at byte {offset} of a reply: {what}; saw {seen:?}")]
    Protocol {
        /// Offset from the start of the reply being parsed.
        offset: usize,
        /// What rule was broken.
        what: String,
        /// The bytes at that offset (escaped, at most 48).
        seen: String,
    },
    /// A reply is larger (or nests deeper) than the limits allow.
    #[error("reply exceeds the client's limit: {what} (raise Limits if this is expected)")]
    TooLarge {
        /// Which limit and by how much.
        what: String,
    },
    /// The server answered with an error reply.
    #[error("redis error: {0}")]
    Server(String),
    /// A well-formed reply of the wrong shape for the command.
    #[error("unexpected reply to {command}: {reply}")]
    Unexpected {
        /// The command (its name).
        command: String,
        /// The reply, abbreviated.
        reply: String,
    },
    /// An earlier I/O or protocol error left the stream at an unknown position.
    #[error(
        "connection to redis at {addr} is unusable after an earlier error ({first}); reconnect"
    )]
    Poisoned {
        /// Server address.
        addr: String,
        /// The error that poisoned it.
        first: String,
    },
    /// A caller mistake caught before sending (e.g. an empty command).
    #[error("invalid command: {0}")]
    InvalidCommand(String),
}

/// One RESP2 reply.
#[derive(Clone, PartialEq, Eq)]
pub enum Reply {
    /// `+text`: a status such as `OK`, `PONG`, `QUEUED`.
    Simple(String),
    /// `-text`: an error reply (at top level, helpers turn it into [`RespError::Server`]).
    Error(String),
    /// `:n`.
    Integer(i64),
    /// `$n` bytes, or `None` for the null bulk string `$-1`.
    Bulk(Option<Vec<u8>>),
    /// `*n` replies, or `None` for the null array `*-1`.
    Array(Option<Vec<Reply>>),
}

impl fmt::Debug for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Simple(s) => write!(f, "+{s}"),
            Reply::Error(s) => write!(f, "-{s}"),
            Reply::Integer(n) => write!(f, ":{n}"),
            Reply::Bulk(None) => write!(f, "$nil"),
            Reply::Bulk(Some(b)) => write!(f, "${}", escape(b, 48)),
            Reply::Array(None) => write!(f, "*nil"),
            Reply::Array(Some(items)) => f.debug_list().entries(items).finish(),
        }
    }
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = format!("{self:?}");
        if s.len() > 200 {
            let mut end = 200;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            write!(f, "{}...", &s[..end])
        } else {
            f.write_str(&s)
        }
    }
}

/// Bytes shown escaped (`\r`, `\n`, `\xNN`), cut to `max` input bytes.
fn escape(bytes: &[u8], max: usize) -> String {
    let shown = &bytes[..bytes.len().min(max)];
    let mut s = shown.escape_ascii().to_string();
    if bytes.len() > max {
        s.push_str("...");
    }
    s
}

// ---------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------

/// A command: its name and arguments, each sent as a bulk string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    args: Vec<Vec<u8>>,
}

impl Command {
    /// A command named `name` with no arguments yet.
    pub fn new(name: &str) -> Command {
        Command {
            args: vec![name.as_bytes().to_vec()],
        }
    }

    /// Appends an argument (any bytes).
    pub fn arg(mut self, arg: impl AsRef<[u8]>) -> Command {
        self.args.push(arg.as_ref().to_vec());
        self
    }

    /// Appends a number as its decimal text.
    pub fn arg_int(self, n: i64) -> Command {
        self.arg(n.to_string())
    }

    /// The command's name (first word), for messages.
    pub fn name(&self) -> String {
        self.args
            .first()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .unwrap_or_default()
    }

    /// Appends the command's RESP2 encoding to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode_command(out, &self.args);
    }
}

/// Appends `*N\r\n` then `$len\r\narg\r\n` for each argument to `out`.
pub fn encode_command<A: AsRef<[u8]>>(out: &mut Vec<u8>, args: &[A]) {
    out.push(b'*');
    out.extend_from_slice(args.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    for a in args {
        let a = a.as_ref();
        out.push(b'$');
        out.extend_from_slice(a.len().to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

// ---------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------

/// Bounds on what the decoder accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest reply, all nested parts and framing included.
    pub reply_bytes_max: usize,
    /// Longest `+`, `-`, `:` or header line, CRLF included.
    pub line_bytes_max: usize,
    /// Deepest array nesting.
    pub depth_max: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            reply_bytes_max: 64 << 20,
            line_bytes_max: 64 << 10,
            depth_max: 32,
        }
    }
}

/// An open array being filled: how many elements it still expects.
#[derive(Debug)]
struct Open {
    remaining: usize,
    items: Vec<Reply>,
}

/// What one step of parsing found.
enum Step {
    Value(Reply),
    OpenArray(usize),
}

/// Incremental RESP2 decoder: [`feed`](Decoder::feed) bytes, take replies
/// with [`next_reply`](Decoder::next_reply). Pure; no I/O.
#[derive(Debug)]
pub struct Decoder {
    limits: Limits,
    buf: Vec<u8>,
    /// Next unparsed byte in `buf`.
    pos: usize,
    /// Where the reply being parsed starts in `buf`.
    reply_start: usize,
    stack: Vec<Open>,
}

impl Decoder {
    /// An empty decoder with these limits.
    pub fn new(limits: Limits) -> Decoder {
        Decoder {
            limits,
            buf: Vec::new(),
            pos: 0,
            reply_start: 0,
            stack: Vec::new(),
        }
    }

    /// Appends received bytes.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes received and not yet consumed by a complete reply.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.reply_start
    }

    /// True when a reply has been started but not finished.
    pub fn in_reply(&self) -> bool {
        self.buf.len() > self.reply_start || !self.stack.is_empty()
    }

    /// The next complete reply, `Ok(None)` if more bytes are needed, or an
    /// error for input that is not RESP2 or breaks the limits (the decoder
    /// is then unusable: the stream position is lost).
    pub fn next_reply(&mut self) -> Result<Option<Reply>, RespError> {
        loop {
            let step = match self.step()? {
                Some(step) => step,
                None => return Ok(None),
            };
            let mut value = match step {
                Step::OpenArray(n) => {
                    if self.stack.len() >= self.limits.depth_max {
                        return Err(RespError::TooLarge {
                            what: format!("arrays nest deeper than {}", self.limits.depth_max),
                        });
                    }
                    self.stack.push(Open {
                        remaining: n,
                        // Capacity is not trusted from the header.
                        items: Vec::with_capacity(n.min(1024)),
                    });
                    continue;
                }
                Step::Value(v) => v,
            };
            // Close every array this value completes.
            loop {
                match self.stack.last_mut() {
                    None => {
                        self.finish_reply();
                        return Ok(Some(value));
                    }
                    Some(top) => {
                        top.items.push(value);
                        top.remaining -= 1;
                        if top.remaining > 0 {
                            break;
                        }
                        let done = self.stack.pop().map(|o| o.items).unwrap_or_default();
                        value = Reply::Array(Some(done));
                    }
                }
            }
        }
    }

    /// A whole reply was taken: drop its bytes when that is cheap.
    fn finish_reply(&mut self) {
        self.reply_start = self.pos;
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
            self.reply_start = 0;
        } else if self.pos > 64 << 10 && self.pos * 2 > self.buf.len() {
            self.buf.drain(..self.pos);
            self.pos = 0;
            self.reply_start = 0;
        }
    }

    fn protocol(&self, at: usize, what: impl Into<String>) -> RespError {
        let at = at.min(self.buf.len());
        RespError::Protocol {
            offset: at - self.reply_start.min(at),
            what: what.into(),
            seen: escape(&self.buf[at..], 48),
        }
    }

    fn check_size(&self, end: usize) -> Result<(), RespError> {
        let bytes = end.saturating_sub(self.reply_start);
        if bytes > self.limits.reply_bytes_max {
            return Err(RespError::TooLarge {
                what: format!(
                    "reply of at least {bytes} bytes, limit reply_bytes_max = {}",
                    self.limits.reply_bytes_max
                ),
            });
        }
        Ok(())
    }

    /// The line starting at `from` (without CRLF) and the index after its
    /// CRLF, or `None` if the CRLF has not arrived.
    fn line(&self, from: usize) -> Result<Option<(usize, usize)>, RespError> {
        let avail = &self.buf[from..];
        let limit = self.limits.line_bytes_max;
        match avail.iter().position(|&b| b == b'\r' || b == b'\n') {
            Some(i) if avail[i] == b'\n' => {
                Err(self.protocol(from + i, "line feed without carriage return"))
            }
            Some(i) if i + 1 >= limit => Err(RespError::TooLarge {
                what: format!("line longer than line_bytes_max = {limit}"),
            }),
            Some(i) => match avail.get(i + 1) {
                None => Ok(None),
                Some(b'\n') => {
                    self.check_size(from + i + 2)?;
                    Ok(Some((from + i, from + i + 2)))
                }
                Some(_) => {
                    Err(self.protocol(from + i, "carriage return not followed by line feed"))
                }
            },
            None if avail.len() >= limit => Err(RespError::TooLarge {
                what: format!("line longer than line_bytes_max = {limit}"),
            }),
            None => {
                self.check_size(self.buf.len())?;
                Ok(None)
            }
        }
    }

    fn int(&self, start: usize, end: usize) -> Result<i64, RespError> {
        let text = &self.buf[start..end];
        let digits = text.strip_prefix(b"-").unwrap_or(text);
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return Err(self.protocol(start, "expected a decimal integer"));
        }
        std::str::from_utf8(text)
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .ok_or_else(|| self.protocol(start, "integer out of 64-bit range"))
    }

    fn text(&self, start: usize, end: usize) -> Result<String, RespError> {
        String::from_utf8(self.buf[start..end].to_vec())
            .map_err(|_| self.protocol(start, "status or error line is not UTF-8"))
    }

    /// Parses one value or array header at `pos`; advances `pos` only when
    /// it is complete.
    fn step(&mut self) -> Result<Option<Step>, RespError> {
        let at = self.pos;
        let Some(&kind) = self.buf.get(at) else {
            return Ok(None);
        };
        let Some((end, next)) = self.line(at + 1)? else {
            return Ok(None);
        };
        let step = match kind {
            b'+' => Step::Value(Reply::Simple(self.text(at + 1, end)?)),
            b'-' => Step::Value(Reply::Error(self.text(at + 1, end)?)),
            b':' => Step::Value(Reply::Integer(self.int(at + 1, end)?)),
            b'$' => {
                let len = self.int(at + 1, end)?;
                if len == -1 {
                    Step::Value(Reply::Bulk(None))
                } else if len < 0 {
                    return Err(self.protocol(at + 1, "negative bulk length other than -1"));
                } else {
                    let len = usize::try_from(len).unwrap_or(usize::MAX);
                    let data_end = next.saturating_add(len);
                    self.check_size(data_end.saturating_add(2))?;
                    if self.buf.len() < data_end + 2 {
                        return Ok(None);
                    }
                    if &self.buf[data_end..data_end + 2] != b"\r\n" {
                        return Err(self.protocol(data_end, "bulk string not followed by CRLF"));
                    }
                    self.pos = data_end + 2;
                    return Ok(Some(Step::Value(Reply::Bulk(Some(
                        self.buf[next..data_end].to_vec(),
                    )))));
                }
            }
            b'*' => {
                let n = self.int(at + 1, end)?;
                if n == -1 {
                    Step::Value(Reply::Array(None))
                } else if n < 0 {
                    return Err(self.protocol(at + 1, "negative array length other than -1"));
                } else if n == 0 {
                    Step::Value(Reply::Array(Some(Vec::new())))
                } else {
                    // Each element takes at least 3 bytes ("+\r\n").
                    let n = usize::try_from(n).unwrap_or(usize::MAX);
                    self.check_size(next.saturating_add(n.saturating_mul(3)))?;
                    Step::OpenArray(n)
                }
            }
            other => {
                let what = if b"_,#!=(%~|>".contains(&other) {
                    format!(
                        "RESP3 type byte {:?}; this client speaks RESP2",
                        other as char
                    )
                } else {
                    format!("unknown type byte 0x{other:02x}")
                };
                return Err(self.protocol(at, what));
            }
        };
        self.pos = next;
        Ok(Some(step))
    }
}

// ---------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------

/// Client settings; every wait is bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Bound on establishing the TCP connection.
    pub connect_timeout_ms: u64,
    /// Bound on sending one request (or pipeline window) and on receiving
    /// one whole reply.
    pub io_timeout_ms: u64,
    /// Commands in flight at once within [`Client::pipeline`].
    pub pipeline_window_max: usize,
    /// Decoder limits.
    pub limits: Limits,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            connect_timeout_ms: 2_000,
            io_timeout_ms: 10_000,
            pipeline_window_max: 1024,
            limits: Limits::default(),
        }
    }
}

/// What `PTTL` says about a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pttl {
    /// The key does not exist (-2).
    Missing,
    /// The key has no expiry (-1).
    Persistent,
    /// Milliseconds left.
    Millis(u64),
}

/// A blocking RESP2 connection to one redis server.
#[derive(Debug)]
pub struct Client {
    stream: TcpStream,
    addr: String,
    config: Config,
    decoder: Decoder,
    out: Vec<u8>,
    poisoned: Option<String>,
}

impl Client {
    /// Connects to `addr` (e.g. `"127.0.0.1:6379"`), trying each resolved
    /// address within `connect_timeout_ms`.
    pub fn connect(addr: &str, config: Config) -> Result<Client, RespError> {
        let fail = |reason: String| RespError::Connect {
            addr: addr.to_string(),
            reason,
        };
        if config.pipeline_window_max == 0 || config.io_timeout_ms == 0 {
            return Err(fail(
                "pipeline_window_max and io_timeout_ms must be above 0".into(),
            ));
        }
        let addrs: Vec<SocketAddr> = addr
            .to_socket_addrs()
            .map_err(|e| fail(format!("cannot resolve: {e}")))?
            .collect();
        let timeout = Duration::from_millis(config.connect_timeout_ms.max(1));
        let mut last = "resolved to no address".to_string();
        for a in addrs {
            match TcpStream::connect_timeout(&a, timeout) {
                Ok(stream) => {
                    stream
                        .set_nodelay(true)
                        .map_err(|e| fail(format!("set TCP_NODELAY: {e}")))?;
                    return Ok(Client {
                        stream,
                        addr: addr.to_string(),
                        config,
                        decoder: Decoder::new(config.limits),
                        out: Vec::new(),
                        poisoned: None,
                    });
                }
                Err(e) if is_timeout(&e) => {
                    last = format!("{a}: no answer within {} ms", config.connect_timeout_ms)
                }
                Err(e) => last = format!("{a}: {e}"),
            }
        }
        Err(fail(last))
    }

    /// The address this client was connected to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends one command and returns its reply; an error reply is
    /// [`RespError::Server`].
    pub fn call(&mut self, cmd: &Command) -> Result<Reply, RespError> {
        let mut replies = self.pipeline(std::slice::from_ref(cmd))?;
        match replies.pop() {
            Some(Reply::Error(msg)) => Err(RespError::Server(msg)),
            Some(reply) => Ok(reply),
            None => Err(self.poison(RespError::Closed {
                addr: self.addr.clone(),
                during: "before replying",
            })),
        }
    }

    /// Sends `cmds` pipelined (at most `pipeline_window_max` in flight) and
    /// returns one reply per command, in order. Error replies stay
    /// [`Reply::Error`] in their place, so one failed command does not hide
    /// the others.
    pub fn pipeline(&mut self, cmds: &[Command]) -> Result<Vec<Reply>, RespError> {
        if let Some(first) = &self.poisoned {
            return Err(RespError::Poisoned {
                addr: self.addr.clone(),
                first: first.clone(),
            });
        }
        if let Some(bad) = cmds
            .iter()
            .find(|c| c.args.is_empty() || c.args[0].is_empty())
        {
            return Err(RespError::InvalidCommand(format!(
                "a command needs a name, got {bad:?}"
            )));
        }
        let mut replies = Vec::with_capacity(cmds.len());
        for window in cmds.chunks(self.config.pipeline_window_max) {
            self.out.clear();
            for c in window {
                c.encode(&mut self.out);
            }
            if let Err(e) = self.send() {
                return Err(self.poison(e));
            }
            for _ in window {
                match self.receive() {
                    Ok(r) => replies.push(r),
                    Err(e) => return Err(self.poison(e)),
                }
            }
        }
        Ok(replies)
    }

    fn poison(&mut self, e: RespError) -> RespError {
        if self.poisoned.is_none() {
            self.poisoned = Some(e.to_string());
        }
        e
    }

    /// Writes `self.out` within `io_timeout_ms`.
    fn send(&mut self) -> Result<(), RespError> {
        let timeout_ms = self.config.io_timeout_ms;
        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
        let mut sent = 0;
        while sent < self.out.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(self.timeout("accept the request"));
            }
            self.stream
                .set_write_timeout(Some(left))
                .map_err(|e| self.io(e))?;
            match self.stream.write(&self.out[sent..]) {
                Ok(0) => {
                    return Err(RespError::Closed {
                        addr: self.addr.clone(),
                        during: "while we were sending",
                    })
                }
                Ok(n) => sent += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => return Err(self.timeout("accept the request")),
                Err(e) => return Err(self.io(e)),
            }
        }
        Ok(())
    }

    /// Reads one whole reply within `io_timeout_ms`.
    fn receive(&mut self) -> Result<Reply, RespError> {
        let deadline = Instant::now() + Duration::from_millis(self.config.io_timeout_ms);
        let mut chunk = [0u8; 64 << 10];
        loop {
            if let Some(reply) = self.decoder.next_reply()? {
                return Ok(reply);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(self.timeout("finish its reply"));
            }
            self.stream
                .set_read_timeout(Some(left))
                .map_err(|e| self.io(e))?;
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    return Err(RespError::Closed {
                        addr: self.addr.clone(),
                        during: if self.decoder.in_reply() {
                            "in the middle of a reply"
                        } else {
                            "before replying"
                        },
                    })
                }
                Ok(n) => self.decoder.feed(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => return Err(self.timeout("finish its reply")),
                Err(e) => return Err(self.io(e)),
            }
        }
    }

    fn timeout(&self, during: &'static str) -> RespError {
        RespError::Timeout {
            addr: self.addr.clone(),
            during,
            timeout_ms: self.config.io_timeout_ms,
        }
    }

    fn io(&self, source: io::Error) -> RespError {
        RespError::Io {
            addr: self.addr.clone(),
            source,
        }
    }

    fn unexpected(cmd: &str, reply: &Reply) -> RespError {
        RespError::Unexpected {
            command: cmd.to_string(),
            reply: reply.to_string(),
        }
    }

    fn expect_ok(&mut self, cmd: &Command) -> Result<(), RespError> {
        match self.call(cmd)? {
            Reply::Simple(s) if s == "OK" => Ok(()),
            other => Err(Self::unexpected(&cmd.name(), &other)),
        }
    }

    fn expect_int(&mut self, cmd: &Command) -> Result<i64, RespError> {
        match self.call(cmd)? {
            Reply::Integer(n) => Ok(n),
            other => Err(Self::unexpected(&cmd.name(), &other)),
        }
    }

    fn expect_bulk(&mut self, cmd: &Command) -> Result<Option<Vec<u8>>, RespError> {
        match self.call(cmd)? {
            Reply::Bulk(b) => Ok(b),
            other => Err(Self::unexpected(&cmd.name(), &other)),
        }
    }

    /// `PING`: expects `PONG`.
    pub fn ping(&mut self) -> Result<(), RespError> {
        match self.call(&Command::new("PING"))? {
            Reply::Simple(s) if s == "PONG" => Ok(()),
            other => Err(Self::unexpected("PING", &other)),
        }
    }

    /// `GET key`: the value, or `None` if the key is absent.
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, RespError> {
        self.expect_bulk(&Command::new("GET").arg(key))
    }

    /// `SET key value`.
    pub fn set(&mut self, key: &[u8], value: &[u8]) -> Result<(), RespError> {
        self.expect_ok(&Command::new("SET").arg(key).arg(value))
    }

    /// `DEL key...`: how many existed.
    pub fn del(&mut self, keys: &[&[u8]]) -> Result<u64, RespError> {
        if keys.is_empty() {
            return Err(RespError::InvalidCommand(
                "DEL needs at least one key".into(),
            ));
        }
        let cmd = keys.iter().fold(Command::new("DEL"), |c, k| c.arg(k));
        Ok(self.expect_int(&cmd)?.max(0) as u64)
    }

    /// `SCAN cursor COUNT count`: the next cursor (0 when the iteration is
    /// over) and a batch of keys (possibly empty, possibly repeating keys,
    /// as SCAN guarantees only that keys present throughout are returned).
    pub fn scan(&mut self, cursor: u64, count: u64) -> Result<(u64, Vec<Vec<u8>>), RespError> {
        let cmd = Command::new("SCAN")
            .arg(cursor.to_string())
            .arg("COUNT")
            .arg(count.max(1).to_string());
        let reply = self.call(&cmd)?;
        let bad = || Self::unexpected("SCAN", &reply);
        let Reply::Array(Some(parts)) = &reply else {
            return Err(bad());
        };
        let [Reply::Bulk(Some(next)), Reply::Array(Some(keys))] = parts.as_slice() else {
            return Err(bad());
        };
        let next = std::str::from_utf8(next)
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or_else(bad)?;
        let keys = keys
            .iter()
            .map(|k| match k {
                Reply::Bulk(Some(k)) => Ok(k.clone()),
                _ => Err(bad()),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((next, keys))
    }

    /// `DUMP key`: the serialized value, or `None` if the key is absent.
    pub fn dump(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, RespError> {
        self.expect_bulk(&Command::new("DUMP").arg(key))
    }

    /// `RESTORE key ttl_ms payload [REPLACE]`; `ttl_ms` 0 means no expiry.
    /// Without `replace`, an existing key is a server error (BUSYKEY).
    pub fn restore(
        &mut self,
        key: &[u8],
        ttl_ms: u64,
        payload: &[u8],
        replace: bool,
    ) -> Result<(), RespError> {
        let mut cmd = Command::new("RESTORE")
            .arg(key)
            .arg(ttl_ms.to_string())
            .arg(payload);
        if replace {
            cmd = cmd.arg("REPLACE");
        }
        self.expect_ok(&cmd)
    }

    /// `PTTL key`.
    pub fn pttl(&mut self, key: &[u8]) -> Result<Pttl, RespError> {
        let cmd = Command::new("PTTL").arg(key);
        match self.expect_int(&cmd)? {
            -2 => Ok(Pttl::Missing),
            -1 => Ok(Pttl::Persistent),
            n if n >= 0 => Ok(Pttl::Millis(n as u64)),
            n => Err(Self::unexpected("PTTL", &Reply::Integer(n))),
        }
    }

    /// `MULTI`, the commands, `EXEC`, in one round trip: the replies of the
    /// commands, or `None` if the transaction was aborted (a `WATCH`ed key
    /// changed). A command rejected while queueing fails the whole call
    /// with the server's error (redis then discards the transaction).
    pub fn multi_exec(&mut self, cmds: &[Command]) -> Result<Option<Vec<Reply>>, RespError> {
        let mut all = Vec::with_capacity(cmds.len() + 2);
        all.push(Command::new("MULTI"));
        all.extend(cmds.iter().cloned());
        all.push(Command::new("EXEC"));
        let mut replies = self.pipeline(&all)?;
        let exec = replies.pop().unwrap_or(Reply::Array(None));
        for r in &replies {
            match r {
                Reply::Simple(s) if s == "OK" || s == "QUEUED" => {}
                Reply::Error(msg) => return Err(RespError::Server(msg.clone())),
                other => return Err(Self::unexpected("MULTI", other)),
            }
        }
        match exec {
            Reply::Array(items) => Ok(items),
            Reply::Error(msg) => Err(RespError::Server(msg)),
            other => Err(Self::unexpected("EXEC", &other)),
        }
    }

    /// `EVAL script numkeys keys... args...`: the script's reply.
    pub fn eval(
        &mut self,
        script: &str,
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> Result<Reply, RespError> {
        let cmd = Command::new("EVAL").arg(script).arg(keys.len().to_string());
        let cmd = keys.iter().chain(args).fold(cmd, |c, a| c.arg(a));
        self.call(&cmd)
    }

    /// `DBSIZE`: keys in the current database.
    pub fn dbsize(&mut self) -> Result<u64, RespError> {
        Ok(self.expect_int(&Command::new("DBSIZE"))?.max(0) as u64)
    }

    /// `FLUSHALL`: deletes every key of every database.
    pub fn flushall(&mut self) -> Result<(), RespError> {
        self.expect_ok(&Command::new("FLUSHALL"))
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::thread;

    fn decode_all(bytes: &[u8]) -> Result<Vec<Reply>, RespError> {
        let mut d = Decoder::new(Limits::default());
        d.feed(bytes);
        let mut out = Vec::new();
        while let Some(r) = d.next_reply()? {
            out.push(r);
        }
        assert!(!d.in_reply(), "left a partial reply");
        Ok(out)
    }

    fn bulk(b: &[u8]) -> Reply {
        Reply::Bulk(Some(b.to_vec()))
    }

    const SAMPLE: &[u8] = b"+OK\r\n-ERR wrong type\r\n:-42\r\n$5\r\nhe\r\no\r\n$-1\r\n$0\r\n\r\n\
*-1\r\n*0\r\n*3\r\n:1\r\n*2\r\n$1\r\na\r\n*-1\r\n+x\r\n";

    fn sample_replies() -> Vec<Reply> {
        vec![
            Reply::Simple("OK".into()),
            Reply::Error("ERR wrong type".into()),
            Reply::Integer(-42),
            bulk(b"he\r\no"),
            Reply::Bulk(None),
            bulk(b""),
            Reply::Array(None),
            Reply::Array(Some(vec![])),
            Reply::Array(Some(vec![
                Reply::Integer(1),
                Reply::Array(Some(vec![bulk(b"a"), Reply::Array(None)])),
                Reply::Simple("x".into()),
            ])),
        ]
    }

    #[test]
    fn decodes_every_reply_type() {
        assert_eq!(decode_all(SAMPLE).unwrap(), sample_replies());
    }

    #[test]
    fn any_split_of_the_input_gives_the_same_replies() {
        // Byte by byte, and cut at every point into two feeds.
        let mut d = Decoder::new(Limits::default());
        let mut got = Vec::new();
        for b in SAMPLE {
            d.feed(std::slice::from_ref(b));
            while let Some(r) = d.next_reply().unwrap() {
                got.push(r);
            }
        }
        assert_eq!(got, sample_replies());
        for cut in 0..=SAMPLE.len() {
            let mut d = Decoder::new(Limits::default());
            let mut got = Vec::new();
            for part in [&SAMPLE[..cut], &SAMPLE[cut..]] {
                d.feed(part);
                while let Some(r) = d.next_reply().unwrap() {
                    got.push(r);
                }
            }
            assert_eq!(got, sample_replies(), "cut at {cut}");
        }
    }

    #[test]
    fn partial_input_waits_for_more() {
        for partial in [
            &b"+OK"[..],
            b"+OK\r",
            b"$5\r\nhel",
            b"$5\r\nhello\r",
            b"*2\r\n:1\r\n",
            b":12",
            b"*",
        ] {
            let mut d = Decoder::new(Limits::default());
            d.feed(partial);
            assert!(d.next_reply().unwrap().is_none(), "{partial:?}");
        }
    }

    #[test]
    fn malformed_input_is_an_error_naming_what_was_seen() {
        let cases: &[(&[u8], &str)] = &[
            (b"?what\r\n", "unknown type byte"),
            (b"%1\r\n", "RESP3"),
            (b":12a\r\n", "decimal integer"),
            (b":\r\n", "decimal integer"),
            (b":99999999999999999999\r\n", "64-bit range"),
            (b"$-2\r\n", "negative bulk length"),
            (b"*-5\r\n", "negative array length"),
            (b"$3\r\nabcde\r\n", "not followed by CRLF"),
            (b"+OK\n", "line feed without carriage return"),
            (b"+O\rK\r\n", "carriage return not followed"),
            (b"$+3\r\nabc\r\n", "decimal integer"),
            (b"+\xff\xfe\r\n", "UTF-8"),
        ];
        for (input, want) in cases {
            let err = decode_all(input).unwrap_err();
            let msg = err.to_string();
            assert!(
                matches!(err, RespError::Protocol { .. }),
                "{input:?}: {msg}"
            );
            assert!(msg.contains(want), "{input:?}: {msg}");
        }
        let msg = decode_all(b":12a\r\n").unwrap_err().to_string();
        assert!(msg.contains("12a"), "{msg}");
    }

    #[test]
    fn limits_are_enforced_before_data_arrives() {
        let limits = Limits {
            reply_bytes_max: 100,
            line_bytes_max: 32,
            depth_max: 3,
        };
        let too_large = |input: &[u8]| {
            let mut d = Decoder::new(limits);
            d.feed(input);
            match d.next_reply() {
                Err(RespError::TooLarge { what }) => what,
                other => panic!("{input:?}: {other:?}"),
            }
        };
        // Header claims more than the limit: refused without waiting for it.
        assert!(too_large(b"$1000\r\n").contains("reply_bytes_max"));
        assert!(too_large(b"*9223372036854775807\r\n").contains("reply_bytes_max"));
        assert!(too_large(b"$9223372036854775807\r\n").contains("reply_bytes_max"));
        assert!(too_large(b"+aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa").contains("line"));
        assert!(too_large(b"*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n").contains("nest"));
        // Many small elements adding up past the limit.
        let mut many = b"*30\r\n".to_vec();
        for _ in 0..30 {
            many.extend_from_slice(b":1\r\n");
        }
        assert!(too_large(&many).contains("reply_bytes_max"));
        // Within the limit is fine.
        let mut d = Decoder::new(limits);
        let mut ok = b"$91\r\n".to_vec();
        ok.extend_from_slice(&[b'x'; 91]);
        ok.extend_from_slice(b"\r\n");
        assert_eq!(ok.len(), 98);
        d.feed(&ok);
        assert_eq!(d.next_reply().unwrap(), Some(bulk(&[b'x'; 91])));
    }

    /// A small seeded xorshift so the property tests need no dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn random_bytes_never_panic() {
        // Random bytes, biased towards RESP's own alphabet so the parser
        // gets deep before failing; any outcome but a panic is fine.
        let alphabet = b"+-:$*\r\n0123456789-1\r\n$-1\r\n*-1\r\n";
        let limits = Limits {
            reply_bytes_max: 4096,
            line_bytes_max: 64,
            depth_max: 8,
        };
        for seed in 1..=3000u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            let len = (rng.next() % 96) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    let r = rng.next();
                    if r & 3 == 0 {
                        (r >> 8) as u8
                    } else {
                        alphabet[(r >> 8) as usize % alphabet.len()]
                    }
                })
                .collect();
            let mut d = Decoder::new(limits);
            let mut at = 0;
            while at < bytes.len() {
                let n = 1 + (rng.next() % 8) as usize;
                let end = (at + n).min(bytes.len());
                d.feed(&bytes[at..end]);
                at = end;
                loop {
                    match d.next_reply() {
                        Ok(Some(_)) => {}
                        Ok(None) => break,
                        Err(_) => {
                            at = bytes.len();
                            break;
                        }
                    }
                }
            }
        }
    }

    /// Test-only encoder of replies (the server side of RESP2).
    fn encode_reply(r: &Reply, out: &mut Vec<u8>) {
        match r {
            Reply::Simple(s) => out.extend_from_slice(format!("+{s}\r\n").as_bytes()),
            Reply::Error(s) => out.extend_from_slice(format!("-{s}\r\n").as_bytes()),
            Reply::Integer(n) => out.extend_from_slice(format!(":{n}\r\n").as_bytes()),
            Reply::Bulk(None) => out.extend_from_slice(b"$-1\r\n"),
            Reply::Bulk(Some(b)) => {
                out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
                out.extend_from_slice(b);
                out.extend_from_slice(b"\r\n");
            }
            Reply::Array(None) => out.extend_from_slice(b"*-1\r\n"),
            Reply::Array(Some(items)) => {
                out.extend_from_slice(format!("*{}\r\n", items.len()).as_bytes());
                for i in items {
                    encode_reply(i, out);
                }
            }
        }
    }

    fn random_reply(rng: &mut Rng, depth: usize) -> Reply {
        match rng.next() % if depth == 0 { 6 } else { 7 } {
            0 => Reply::Simple(format!("S{}", rng.next() % 1000)),
            1 => Reply::Error(format!("ERR e{}", rng.next() % 1000)),
            2 => Reply::Integer(rng.next() as i64),
            3 => Reply::Bulk(None),
            4 => Reply::Array(None),
            5 => {
                let len = (rng.next() % 40) as usize;
                Reply::Bulk(Some((0..len).map(|_| rng.next() as u8).collect()))
            }
            _ => {
                let n = (rng.next() % 5) as usize;
                Reply::Array(Some((0..n).map(|_| random_reply(rng, depth - 1)).collect()))
            }
        }
    }

    #[test]
    fn random_replies_round_trip_under_random_splits() {
        for seed in 1..=500u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            let replies: Vec<Reply> = (0..1 + rng.next() % 6)
                .map(|_| random_reply(&mut rng, 4))
                .collect();
            let mut bytes = Vec::new();
            for r in &replies {
                encode_reply(r, &mut bytes);
            }
            let mut d = Decoder::new(Limits::default());
            let mut got = Vec::new();
            let mut at = 0;
            while at < bytes.len() {
                let end = (at + 1 + (rng.next() % 16) as usize).min(bytes.len());
                d.feed(&bytes[at..end]);
                at = end;
                while let Some(r) = d.next_reply().unwrap() {
                    got.push(r);
                }
            }
            assert_eq!(got, replies, "seed {seed}");
            assert_eq!(d.buffered(), 0);
        }
    }

    #[test]
    fn mutated_valid_replies_never_panic() {
        for seed in 1..=2000u64 {
            let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
            let mut bytes = SAMPLE.to_vec();
            for _ in 0..1 + rng.next() % 4 {
                let i = (rng.next() as usize) % bytes.len();
                match rng.next() % 3 {
                    0 => bytes[i] = rng.next() as u8,
                    1 => {
                        bytes.remove(i);
                    }
                    _ => bytes.insert(i, b"\r\n*$-:+0"[(rng.next() % 8) as usize]),
                }
            }
            let _ = decode_all_lenient(&bytes);
        }
    }

    fn decode_all_lenient(bytes: &[u8]) -> Result<Vec<Reply>, RespError> {
        let mut d = Decoder::new(Limits::default());
        d.feed(bytes);
        let mut out = Vec::new();
        while let Some(r) = d.next_reply()? {
            out.push(r);
        }
        Ok(out)
    }

    #[test]
    fn encodes_binary_safe_arrays_of_bulk_strings() {
        let mut out = Vec::new();
        Command::new("SET")
            .arg(b"k\r\n")
            .arg([0u8, 255])
            .encode(&mut out);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$3\r\nk\r\n\r\n$2\r\n\x00\xff\r\n");
        out.clear();
        encode_command::<&[u8]>(&mut out, &[]);
        assert_eq!(out, b"*0\r\n");
    }

    /// A server on a private port whose one connection `serve` handles.
    fn fake_server(
        serve: impl FnOnce(TcpStream) + Send + 'static,
    ) -> (String, thread::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let handle = thread::spawn(move || {
            if let Ok((s, _)) = listener.accept() {
                serve(s);
            }
        });
        (addr, handle)
    }

    /// A short reply bound, only where a timeout is the expected outcome
    /// (tests whose server answers keep the default, so load cannot turn
    /// their answer into a timeout).
    fn quick() -> Config {
        Config {
            io_timeout_ms: 300,
            ..Config::default()
        }
    }

    #[test]
    fn silent_server_is_a_timeout_then_poisoned() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (addr, h) = fake_server(move |_s| {
            let _ = rx.recv(); // hold the connection open, say nothing
        });
        let mut c = Client::connect(&addr, quick()).unwrap();
        let err = c.ping().unwrap_err();
        assert!(matches!(err, RespError::Timeout { .. }), "{err}");
        assert!(err.to_string().contains("300 ms"), "{err}");
        let again = c.ping().unwrap_err();
        assert!(matches!(again, RespError::Poisoned { .. }), "{again}");
        drop(tx);
        h.join().unwrap();
    }

    #[test]
    fn closed_connection_is_reported() {
        let (addr, h) = fake_server(|mut s| {
            let mut buf = [0u8; 64];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"$10\r\nabc");
        });
        let mut c = Client::connect(&addr, Config::default()).unwrap();
        let err = c.get(b"k").unwrap_err();
        h.join().unwrap();
        assert!(
            matches!(
                err,
                RespError::Closed {
                    during: "in the middle of a reply",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn garbage_and_wrong_shapes_are_errors() {
        let (addr, h) = fake_server(|mut s| {
            let mut buf = [0u8; 64];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b":5\r\n");
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"-ERR boom\r\n");
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"hello\r\n");
        });
        let mut c = Client::connect(&addr, Config::default()).unwrap();
        let e = c.get(b"k").unwrap_err();
        assert!(
            matches!(e, RespError::Unexpected { .. }) && e.to_string().contains(":5"),
            "{e}"
        );
        let e = c.ping().unwrap_err();
        assert!(matches!(&e, RespError::Server(m) if m == "ERR boom"), "{e}");
        let e = c.ping().unwrap_err();
        assert!(matches!(e, RespError::Protocol { .. }), "{e}");
        h.join().unwrap();
    }

    #[test]
    fn refused_connection_is_a_connect_error() {
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let err = Client::connect(&format!("127.0.0.1:{port}"), quick()).unwrap_err();
        assert!(matches!(err, RespError::Connect { .. }), "{err}");
        assert!(Client::connect(
            "127.0.0.1:1",
            Config {
                io_timeout_ms: 0,
                ..quick()
            }
        )
        .is_err());
    }
}
