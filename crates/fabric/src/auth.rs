//! Challenge-response authentication with the cluster secret, for every
//! listener of a Locus node (the fabric port, and the client and control
//! listeners of other crates).
//!
//! A listener's peer can READ and WRITE the node's memory, so a node that has
//! a [`Secret`] lets nobody in who does not prove they know it. The proof is
//! an HMAC-SHA256 over two fresh nonces, one from each side, so a recorded
//! exchange cannot be replayed, and the secret itself never crosses the wire.
//! The proof is mutual: the listener also proves it knows the secret, so a
//! client does not hand its operations to an impostor. A [`Listener`] kind byte
//! is inside every MAC, so a proof made for one kind of listener is refused by
//! another.
//!
//! # The handshake
//! The listener speaks first, right after the TCP accept, before anything of
//! the listener's own protocol:
//! ```text
//!  listener (accept)                                       client (prove)
//!    |                                                          |
//!    |-- "LOCUSAU1" (8 bytes) || ns (32 bytes) ---------------->|  (1) challenge
//!    |                                                          |
//!    |<--------------- nc (32 bytes) || client_mac (32 bytes) --|  (2) proof
//!    |                                                          |
//!    |  verify client_mac in constant time                      |
//!    |-- 0x00 || server_mac (32 bytes) ------------------------>|  (3a) accepted;
//!    |        ... the listener's own protocol follows ...       |       client verifies
//!    |                                                          |       server_mac
//!    |-- 0x01 || len u16 LE || reason (len bytes UTF-8) ------->|  (3b) refused;
//!    |   and the connection is closed                           |       len <= 256
//! ```
//! Byte layout, for anyone reimplementing it (a Python client does):
//! ```text
//!  (1) listener -> client, 40 bytes
//!      0         8                                        40
//!      +---------+----------------------------------------+
//!      |LOCUSAU1 | ns: 32 random bytes                    |
//!      +---------+----------------------------------------+
//!  (2) client -> listener, 64 bytes
//!      0                               32                              64
//!      +-------------------------------+-------------------------------+
//!      | nc: 32 random bytes           | client_mac                    |
//!      +-------------------------------+-------------------------------+
//!  (3a) listener -> client, 33 bytes: 0x00, then server_mac (32 bytes)
//!  (3b) listener -> client, 3 + len bytes: 0x01, len as u16 little-endian
//!       (at most 256), then len bytes of UTF-8 reason; then the listener closes.
//!
//!  client_mac = HMAC-SHA256(key, "locus-auth-v1 client" || kind || ns || nc)
//!  server_mac = HMAC-SHA256(key, "locus-auth-v1 server" || kind || ns || nc)
//!    key  = the secret's UTF-8 bytes, exactly as written (no trimming)
//!    the labels are their 20 ASCII bytes, with no terminator
//!    kind = one byte: 1 fabric, 2 client, 3 control (see Listener)
//! ```
//! Test vector (checked in this module's tests): key
//! `0123456789abcdef0123456789abcdef`, kind 1, ns = 32 bytes of 0x11, nc = 32
//! bytes of 0x22 give
//! client_mac = `bbe8d1e450c34e45225be5dd1b6270b2fb4f1113ea3e1752d914eb6cc7d840ee`,
//! server_mac = `9aebdfa0d671432fa58df2d80c10cdcacdf5dcf6f952e19a0083448cb087873d`.
//!
//! Nonces come from the operating system, not from a seed: a predictable
//! nonce would let a recorded proof be replayed.

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use rand::rngs::OsRng;
use rand::RngCore;
use sha2::Sha256;

/// The environment variable callers read the cluster secret from (see
/// [`Secret::from_env_or`]); it wins over the cluster file's `secret`.
pub const SECRET_ENV: &str = "LOCUS_SECRET";
/// Shortest secret, in bytes.
pub const SECRET_BYTES_MIN: usize = 16;
/// Longest secret, in bytes.
pub const SECRET_BYTES_MAX: usize = 1024;
/// The first 8 bytes a listener sends: the protocol and its version.
pub const MAGIC: [u8; 8] = *b"LOCUSAU1";
/// Bytes of each side's nonce.
pub const NONCE_BYTES: usize = 32;
/// Bytes of an HMAC-SHA256.
pub const MAC_BYTES: usize = 32;
/// Longest refusal reason on the wire, in bytes.
pub const REASON_BYTES_MAX: usize = 256;
/// The status byte of an accepted proof.
pub const STATUS_ACCEPTED: u8 = 0x00;
/// The status byte of a refused proof.
pub const STATUS_REFUSED: u8 = 0x01;

const CLIENT_LABEL: &[u8; 20] = b"locus-auth-v1 client";
const SERVER_LABEL: &[u8; 20] = b"locus-auth-v1 server";
const GENERATED_BYTES: usize = 32;

/// Why a handshake failed, or why a secret cannot be used.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The listener refused our proof and said why.
    #[error(
        "the listener refused us: {reason}; set LOCUS_SECRET or `secret` in the cluster file \
         to the cluster's secret"
    )]
    Refused {
        /// The listener's reason.
        reason: String,
    },
    /// (Listener side.) The client's MAC was wrong.
    #[error(
        "the peer did not prove it knows the cluster secret (a wrong secret, or a proof made \
         for another kind of listener); give it the cluster's secret through LOCUS_SECRET or \
         `secret` in the cluster file"
    )]
    BadProof,
    /// (Client side.) The peer did not open with this handshake.
    #[error(
        "the peer is not a Locus listener or speaks another version of the authentication \
         handshake: check the address and run the same Locus version everywhere"
    )]
    NotLocus,
    /// (Client side.) The listener's MAC was wrong: it does not know the secret.
    #[error(
        "the listener did not prove it knows the cluster secret: it has another secret or is \
         not the node meant; check the address and give every node the same secret \
         (LOCUS_SECRET or `secret` in the cluster file)"
    )]
    ServerUnproven,
    /// The exchange timed out, or the connection failed or closed midway.
    #[error(
        "the authentication handshake timed out or was cut ({0}); the peer may be stuck, gone, \
         or not expect authentication: give every node of the cluster the same secret \
         (LOCUS_SECRET or `secret` in the cluster file)"
    )]
    Io(#[from] io::Error),
    /// A secret shorter or longer than allowed.
    #[error(
        "the cluster secret is {len} bytes but must be {min}..={max} bytes: set LOCUS_SECRET or \
         `secret` in the cluster file to the cluster's secret (a generated one is 64 hex \
         characters)"
    )]
    SecretLength {
        /// Bytes given.
        len: usize,
        /// Fewest allowed.
        min: usize,
        /// Most allowed.
        max: usize,
    },
    /// A secret that is not UTF-8 text.
    #[error(
        "the cluster secret is not UTF-8 text (invalid byte at {valid_up_to}): the secret is \
         text, as written in the cluster file; set LOCUS_SECRET or `secret` to the cluster's \
         secret (a generated one is 64 hex characters)"
    )]
    SecretNotText {
        /// Bytes before the first invalid one.
        valid_up_to: usize,
    },
}

/// The cluster secret: the HMAC key of [`accept`] and [`prove`].
///
/// The key is text (what a user writes into the cluster file or
/// `LOCUS_SECRET`), and its UTF-8 bytes are the key, used exactly as given.
/// `Debug` prints `Secret(..)`, never the key; equality is compared in
/// constant time. Only [`Secret::expose`] reveals it.
#[derive(Clone)]
pub struct Secret {
    key: Box<str>,
}

impl Secret {
    /// A secret of `bytes`: UTF-8 text of [`SECRET_BYTES_MIN`]..=[`SECRET_BYTES_MAX`] bytes.
    pub fn new(bytes: impl AsRef<[u8]>) -> Result<Secret, AuthError> {
        let bytes = bytes.as_ref();
        if !(SECRET_BYTES_MIN..=SECRET_BYTES_MAX).contains(&bytes.len()) {
            return Err(AuthError::SecretLength {
                len: bytes.len(),
                min: SECRET_BYTES_MIN,
                max: SECRET_BYTES_MAX,
            });
        }
        let text = std::str::from_utf8(bytes).map_err(|e| AuthError::SecretNotText {
            valid_up_to: e.valid_up_to(),
        })?;
        Ok(Secret { key: text.into() })
    }

    /// The secret from the environment variable `var` if it is set and not
    /// empty, else from `config_value`, else `Ok(None)` (no secret). Callers
    /// pass [`SECRET_ENV`] (`LOCUS_SECRET`) as `var`, so a secret can be kept
    /// out of the cluster file.
    pub fn from_env_or(config_value: Option<&str>, var: &str) -> Result<Option<Secret>, AuthError> {
        Self::from_sources(std::env::var_os(var).as_deref(), config_value)
    }

    /// The choice of [`Secret::from_env_or`], given the variable's value.
    fn from_sources(
        env_value: Option<&std::ffi::OsStr>,
        config_value: Option<&str>,
    ) -> Result<Option<Secret>, AuthError> {
        if let Some(v) = env_value.filter(|v| !v.is_empty()) {
            return match v.to_str() {
                Some(text) => Secret::new(text).map(Some),
                None => Err(AuthError::SecretNotText {
                    valid_up_to: v.to_string_lossy().find('\u{FFFD}').unwrap_or(0),
                }),
            };
        }
        config_value.map(Secret::new).transpose()
    }

    /// A new random secret: 32 bytes from the operating system written as 64
    /// lowercase hex characters, which are the key.
    ///
    /// # Panics
    /// If the operating system has no random source (no secret is better than a weak one).
    pub fn generate() -> Secret {
        let mut raw = [0u8; GENERATED_BYTES];
        OsRng.fill_bytes(&mut raw);
        let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
        debug_assert_eq!(hex.len(), 2 * GENERATED_BYTES);
        Secret { key: hex.into() }
    }

    /// The secret in clear, for writing it into a cluster file. Anyone who
    /// sees it can read and write every node's memory.
    pub fn expose(&self) -> &str {
        &self.key
    }

    fn bytes(&self) -> &[u8] {
        self.key.as_bytes()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl PartialEq for Secret {
    /// Constant time in the contents (the lengths may show).
    fn eq(&self, other: &Secret) -> bool {
        let (a, b) = (self.bytes(), other.bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

impl Eq for Secret {}

/// The kind of listener a proof is for: the byte mixed into every MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Listener {
    /// A node's fabric port (one-sided verbs between nodes).
    Fabric = 1,
    /// The client protocol listener.
    Client = 2,
    /// The control listener.
    Control = 3,
}

impl Listener {
    /// The kind's name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Listener::Fabric => "fabric",
            Listener::Client => "client",
            Listener::Control => "control",
        }
    }
}

type Nonce = [u8; NONCE_BYTES];
type Tag = [u8; MAC_BYTES];

/// The HMAC over `label || kind || ns || nc`, ready to finalize or verify.
fn mac(secret: &Secret, label: &[u8], kind: Listener, ns: &Nonce, nc: &Nonce) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(secret.bytes())
        .expect("HMAC takes a key of any length");
    m.update(label);
    m.update(&[kind as u8]);
    m.update(ns);
    m.update(nc);
    m
}

fn client_mac(secret: &Secret, kind: Listener, ns: &Nonce, nc: &Nonce) -> Tag {
    mac(secret, CLIENT_LABEL, kind, ns, nc)
        .finalize()
        .into_bytes()
        .into()
}

fn server_mac(secret: &Secret, kind: Listener, ns: &Nonce, nc: &Nonce) -> Tag {
    mac(secret, SERVER_LABEL, kind, ns, nc)
        .finalize()
        .into_bytes()
        .into()
}

fn nonce() -> Result<Nonce, AuthError> {
    let mut n = [0u8; NONCE_BYTES];
    OsRng
        .try_fill_bytes(&mut n)
        .map_err(|e| io::Error::other(format!("no random nonce from the OS: {e}")))?;
    Ok(n)
}

/// A refusal message (3b): status, length, reason cut to `REASON_BYTES_MAX` on a char boundary.
fn refusal(reason: &str) -> Vec<u8> {
    let mut end = reason.len().min(REASON_BYTES_MAX);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = Vec::with_capacity(3 + end);
    out.push(STATUS_REFUSED);
    out.extend_from_slice(&(end as u16).to_le_bytes());
    out.extend_from_slice(&reason.as_bytes()[..end]);
    out
}

/// A stream with a deadline for the whole exchange, checked before every read
/// and write (each of which the stream's own timeout bounds).
struct Wire<'a, S: ?Sized> {
    stream: &'a mut S,
    deadline: Option<(Instant, Duration)>,
}

impl<S: Read + Write + ?Sized> Wire<'_, S> {
    fn check_deadline(&self, doing: &str) -> Result<(), AuthError> {
        match self.deadline {
            Some((at, timeout)) if Instant::now() >= at => Err(AuthError::Io(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("{doing}: not done within {} ms", timeout.as_millis()),
            ))),
            _ => Ok(()),
        }
    }

    fn read_exact(&mut self, buf: &mut [u8], doing: &str) -> Result<(), AuthError> {
        let mut at = 0;
        while at < buf.len() {
            self.check_deadline(doing)?;
            match self.stream.read(&mut buf[at..]) {
                Ok(0) => {
                    return Err(AuthError::Io(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!(
                            "{doing}: the peer closed the connection after {at} of {} bytes",
                            buf.len()
                        ),
                    )))
                }
                Ok(n) => at += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_error(doing, e)),
            }
        }
        Ok(())
    }

    fn write_all(&mut self, mut data: &[u8], doing: &str) -> Result<(), AuthError> {
        while !data.is_empty() {
            self.check_deadline(doing)?;
            match self.stream.write(data) {
                Ok(0) => {
                    return Err(io_error(doing, io::ErrorKind::WriteZero.into()));
                }
                Ok(n) => data = &data[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_error(doing, e)),
            }
        }
        self.stream.flush().map_err(|e| io_error(doing, e))
    }
}

/// `e` with what was being done; a socket timeout (`WouldBlock` on Unix) becomes `TimedOut`.
fn io_error(doing: &str, e: io::Error) -> AuthError {
    let kind = match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            return AuthError::Io(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("{doing}: nothing within the socket timeout"),
            ))
        }
        k => k,
    };
    AuthError::Io(io::Error::new(kind, format!("{doing}: {e}")))
}

/// Listener side: challenges the peer and accepts it only if it proves it
/// knows `secret` for a listener of `kind`; then proves the same to it. Call
/// it on a fresh connection before reading anything of the listener's own
/// protocol; on `Err` close the connection (a refusal has been sent if the
/// proof was wrong, [`AuthError::BadProof`]).
///
/// **Time.** The caller sets the socket's read and write timeouts (at most
/// `timeout`), which bound each single read and write; `timeout` bounds the
/// whole exchange: it is checked before every read and write, so a peer that
/// trickles bytes fails with `TimedOut` too. The worst case is `timeout` plus
/// one socket timeout.
pub fn accept(
    stream: &mut (impl Read + Write + ?Sized),
    secret: &Secret,
    kind: Listener,
    timeout: Duration,
) -> Result<(), AuthError> {
    let mut w = Wire {
        stream,
        deadline: Some((Instant::now() + timeout, timeout)),
    };
    let ns = nonce()?;
    let mut challenge = [0u8; MAGIC.len() + NONCE_BYTES];
    challenge[..MAGIC.len()].copy_from_slice(&MAGIC);
    challenge[MAGIC.len()..].copy_from_slice(&ns);
    w.write_all(&challenge, "sending the challenge")?;
    let mut proof = [0u8; NONCE_BYTES + MAC_BYTES];
    w.read_exact(&mut proof, "waiting for the client's proof")?;
    let (nc, got) = proof.split_at(NONCE_BYTES);
    let nc: &Nonce = nc.try_into().expect("NONCE_BYTES");
    if mac(secret, CLIENT_LABEL, kind, &ns, nc)
        .verify_slice(got)
        .is_err()
    {
        let reason = format!("wrong cluster secret for this {} listener", kind.name());
        // Best effort: the peer may be gone already; the refusal stands either way.
        let _ = w.write_all(&refusal(&reason), "sending the refusal");
        return Err(AuthError::BadProof);
    }
    let mut accepted = [0u8; 1 + MAC_BYTES];
    accepted[0] = STATUS_ACCEPTED;
    accepted[1..].copy_from_slice(&server_mac(secret, kind, &ns, nc));
    w.write_all(&accepted, "sending the acceptance")
}

/// Client side: answers a listener's challenge with a proof that we know
/// `secret` for a listener of `kind`, and checks the listener's proof that it
/// knows it too. Call it right after connecting, before sending anything of
/// the listener's own protocol. Each read and write is bounded only by the
/// stream's own timeouts; [`prove_within`] also bounds the whole exchange.
pub fn prove(
    stream: &mut (impl Read + Write + ?Sized),
    secret: &Secret,
    kind: Listener,
) -> Result<(), AuthError> {
    prove_on(
        &mut Wire {
            stream,
            deadline: None,
        },
        secret,
        kind,
    )
}

/// [`prove`], failing with `TimedOut` once `timeout` has passed (checked
/// before every read and write, as in [`accept`]).
pub fn prove_within(
    stream: &mut (impl Read + Write + ?Sized),
    secret: &Secret,
    kind: Listener,
    timeout: Duration,
) -> Result<(), AuthError> {
    prove_on(
        &mut Wire {
            stream,
            deadline: Some((Instant::now() + timeout, timeout)),
        },
        secret,
        kind,
    )
}

fn prove_on<S: Read + Write + ?Sized>(
    w: &mut Wire<'_, S>,
    secret: &Secret,
    kind: Listener,
) -> Result<(), AuthError> {
    // The magic first, alone: a peer that is not a Locus listener is told
    // apart at once instead of after 40 bytes it may never send.
    let mut magic = [0u8; MAGIC.len()];
    w.read_exact(&mut magic, "waiting for the listener's challenge")?;
    if magic != MAGIC {
        return Err(AuthError::NotLocus);
    }
    let mut ns = [0u8; NONCE_BYTES];
    w.read_exact(&mut ns, "reading the listener's challenge")?;
    let nc = nonce()?;
    let mut proof = [0u8; NONCE_BYTES + MAC_BYTES];
    proof[..NONCE_BYTES].copy_from_slice(&nc);
    proof[NONCE_BYTES..].copy_from_slice(&client_mac(secret, kind, &ns, &nc));
    w.write_all(&proof, "sending our proof")?;
    let mut status = [0u8; 1];
    w.read_exact(&mut status, "waiting for the listener's verdict")?;
    match status[0] {
        STATUS_ACCEPTED => {
            let mut theirs = [0u8; MAC_BYTES];
            w.read_exact(&mut theirs, "reading the listener's proof")?;
            mac(secret, SERVER_LABEL, kind, &ns, &nc)
                .verify_slice(&theirs)
                .map_err(|_| AuthError::ServerUnproven)
        }
        STATUS_REFUSED => {
            let mut len = [0u8; 2];
            w.read_exact(&mut len, "reading the listener's refusal")?;
            let len = u16::from_le_bytes(len) as usize;
            if len > REASON_BYTES_MAX {
                return Err(AuthError::NotLocus);
            }
            let mut reason = vec![0u8; len];
            w.read_exact(&mut reason, "reading the listener's refusal")?;
            Err(AuthError::Refused {
                reason: String::from_utf8_lossy(&reason).into_owned(),
            })
        }
        _ => Err(AuthError::NotLocus),
    }
}

#[cfg(test)]
mod tests;
