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
//!
//! This file is the format (errors, replies, encoding, the decoder), with no
//! I/O; the [`Client`] that does the I/O is in `resp/client.rs`.

mod client;

use std::fmt;
use std::io;

pub use client::{Client, Config, Pttl};

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

#[cfg(test)]
mod tests;
