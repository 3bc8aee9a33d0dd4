//! The blocking [`Client`]: one TCP connection to one redis server, every
//! wait bounded by a deadline, poisoned after any I/O or protocol error.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::{Command, Decoder, Limits, Reply, RespError};

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
