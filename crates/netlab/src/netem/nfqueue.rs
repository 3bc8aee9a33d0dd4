//! The least of netfilter's queue protocol (`nfnetlink_queue`) the delay
//! engine needs: bind a queue, receive packet ids, send verdicts.
//!
//! Every message is a netlink header, a netfilter header and attributes
//! (header fields in host order, netfilter's payloads big-endian):
//!
//! ```text
//!  nlmsghdr   len u32 | type u16 = (subsystem 3 << 8) | msg | flags u16 | seq u32 | pid u32
//!  nfgenmsg   family u8 | version u8 = 0 | queue number u16 BE
//!  attribute  len u16 | type u16 | payload, padded to 4 bytes
//!
//!  to the kernel    CONFIG  CMD {command u8 = BIND, pad u8, family u16 BE}
//!                           PARAMS {copy range u32 BE, copy mode u8 = META}  (packed)
//!                           QUEUE_MAXLEN u32 BE
//!                   VERDICT VERDICT_HDR {verdict u32 BE (1 accept, 0 drop), id u32 BE}
//!  from the kernel  PACKET  PACKET_HDR {id u32 BE, hw protocol u16 BE, hook u8}  (packed), ...
//!                   ERROR   {errno i32 (negated, 0 = ack), the request's nlmsghdr}
//! ```
//!
//! Copy mode META: the kernel sends the packet's metadata, never its bytes;
//! the engine needs only the id.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

const NFNL_SUBSYS_QUEUE: u16 = 3;
const NFQNL_MSG_PACKET: u16 = 0;
const NFQNL_MSG_VERDICT: u16 = 1;
const NFQNL_MSG_CONFIG: u16 = 2;
const NFQA_PACKET_HDR: u16 = 1;
const NFQA_VERDICT_HDR: u16 = 2;
const NFQA_CFG_CMD: u16 = 1;
const NFQA_CFG_PARAMS: u16 = 2;
const NFQA_CFG_QUEUE_MAXLEN: u16 = 3;
const NFQNL_CFG_CMD_BIND: u8 = 1;
const NFQNL_COPY_META: u8 = 1;
const NFNETLINK_V0: u8 = 0;
const NF_DROP: u32 = 0;
const NF_ACCEPT: u32 = 1;
/// Attribute type bits that are flags, not the type.
const NLA_TYPE_MASK: u16 = 0x3fff;

const NLMSG_HEADER_LEN: usize = 16;
const NFGEN_HEADER_LEN: usize = 4;

/// The socket's receive buffer: room for tens of thousands of packet
/// notices, so a burst is not lost (a lost notice leaves its packet in the
/// kernel's queue until the queue is unbound).
const RECEIVE_BUFFER_BYTES: libc::c_int = 8 << 20;

/// How long binding may wait for the kernel's acknowledgement.
const ACK_TIMEOUT_MS: u64 = 2_000;

/// Moves the calling thread into network namespace `ns` (a name under
/// `/run/netns`, as `ip netns` makes). Only this thread moves; a socket it
/// opens then belongs to that namespace for its whole life.
pub(crate) fn enter_namespace(ns: &str) -> io::Result<()> {
    let file = File::open(std::path::Path::new("/run/netns").join(ns))?;
    // SAFETY: the descriptor is open for the call; setns with CLONE_NEWNET
    // changes only the calling thread's network namespace.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A bound queue of the calling thread's network namespace.
pub(crate) struct Queue {
    fd: OwnedFd,
    queue_num: u16,
    seq: u32,
    buffer: Vec<u8>,
}

impl Queue {
    /// Opens a netfilter socket, binds queue `queue_num` with copy mode
    /// META and `maxlen` packets at most, and waits for each step's ack.
    pub(crate) fn open(queue_num: u16, maxlen: u32) -> io::Result<Queue> {
        // SAFETY: plain socket(2); the result is checked before use.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_NETFILTER,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: raw is a descriptor we just opened and own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: sockaddr_nl is plain data; all zero is a valid value.
        let mut local: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        local.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: local is a valid sockaddr_nl and its size is passed.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&local as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the option value is a c_int of the size passed. Root may
        // force a buffer past rmem_max; if not, the default size remains.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                (&RECEIVE_BUFFER_BYTES as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        let mut queue = Queue {
            fd,
            queue_num,
            seq: 0,
            buffer: vec![0; 64 << 10],
        };
        let family = (libc::AF_INET as u16).to_be_bytes();
        queue.configure(NFQA_CFG_CMD, &[NFQNL_CFG_CMD_BIND, 0, family[0], family[1]])?;
        let mut params = [0u8; 5];
        params[4] = NFQNL_COPY_META;
        queue.configure(NFQA_CFG_PARAMS, &params)?;
        queue.configure(NFQA_CFG_QUEUE_MAXLEN, &maxlen.to_be_bytes())?;
        Ok(queue)
    }

    /// One CONFIG message with one attribute, acknowledged.
    fn configure(&mut self, attribute: u16, payload: &[u8]) -> io::Result<()> {
        self.seq += 1;
        let seq = self.seq;
        let flags = (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16;
        let message = encode(
            NFQNL_MSG_CONFIG,
            flags,
            seq,
            self.queue_num,
            attribute,
            payload,
        );
        self.send(&message)?;
        let deadline = Instant::now() + Duration::from_millis(ACK_TIMEOUT_MS);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !self.readable(left)? {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the kernel did not acknowledge the queue's configuration",
                ));
            }
            let Some(length) = self.recv()? else { continue };
            for (kind, body) in messages(&self.buffer[..length])? {
                if kind == libc::NLMSG_ERROR as u16 {
                    let (errno, acked) = parse_error(body)?;
                    if acked == seq {
                        return if errno == 0 {
                            Ok(())
                        } else {
                            Err(io::Error::from_raw_os_error(-errno))
                        };
                    }
                }
            }
        }
    }

    /// Waits up to `wait` for packets and returns the ids of all that
    /// arrived (none if the wait ran out).
    pub(crate) fn receive(&mut self, wait: Duration) -> io::Result<Vec<u32>> {
        let mut ids = Vec::new();
        if !self.readable(wait)? {
            return Ok(ids);
        }
        while let Some(length) = self.recv()? {
            for (kind, body) in messages(&self.buffer[..length])? {
                if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET {
                    ids.push(packet_id(body)?);
                } else if kind == libc::NLMSG_ERROR as u16 {
                    // A verdict the kernel refused (verdicts ask for no
                    // ack, so only failures come back).
                    let (errno, _) = parse_error(body)?;
                    if errno != 0 {
                        return Err(io::Error::from_raw_os_error(-errno));
                    }
                }
            }
        }
        Ok(ids)
    }

    /// Lets packet `id` go on (`accept`) or drops it.
    pub(crate) fn verdict(&mut self, id: u32, accept: bool) -> io::Result<()> {
        self.seq = self.seq.wrapping_add(1);
        let verdict = if accept { NF_ACCEPT } else { NF_DROP };
        let mut payload = [0u8; 8];
        payload[..4].copy_from_slice(&verdict.to_be_bytes());
        payload[4..].copy_from_slice(&id.to_be_bytes());
        let flags = libc::NLM_F_REQUEST as u16;
        let message = encode(
            NFQNL_MSG_VERDICT,
            flags,
            self.seq,
            self.queue_num,
            NFQA_VERDICT_HDR,
            &payload,
        );
        self.send(&message)
    }

    fn send(&self, message: &[u8]) -> io::Result<()> {
        // SAFETY: sockaddr_nl is plain data; all zero (pid 0) is the kernel.
        let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: message and kernel are valid for the lengths passed.
        let sent = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                message.as_ptr().cast(),
                message.len(),
                0,
                (&kernel as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if sent < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Whether a message can be read within `wait`.
    fn readable(&self, wait: Duration) -> io::Result<bool> {
        let mut poll = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // Rounded up: a packet due in 0.3 ms is not let go early.
        let wait_ms = wait.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int;
        // SAFETY: poll reads and writes the one pollfd passed.
        let ready = unsafe { libc::poll(&mut poll, 1, wait_ms) };
        match ready {
            n if n > 0 => Ok(true),
            0 => Ok(false),
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    Ok(false)
                } else {
                    Err(e)
                }
            }
        }
    }

    /// One datagram into the buffer, without waiting; `None` when there is
    /// none. Notices the kernel could not deliver (a full socket buffer)
    /// are reported and skipped: their packets stay in the kernel's queue
    /// until it is unbound, where they are dropped, as a full queue drops.
    fn recv(&mut self) -> io::Result<Option<usize>> {
        loop {
            // SAFETY: the buffer is valid for its length.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    self.buffer.as_mut_ptr().cast(),
                    self.buffer.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n >= 0 {
                return Ok(Some(n as usize));
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN) => return Ok(None),
                Some(libc::EINTR) => continue,
                Some(libc::ENOBUFS) => {
                    eprintln!("netlab: the delay queue missed packet notices (socket buffer full)");
                    continue;
                }
                _ => return Err(e),
            }
        }
    }
}

/// One message with one attribute.
fn encode(
    msg: u16,
    flags: u16,
    seq: u32,
    queue_num: u16,
    attribute: u16,
    payload: &[u8],
) -> Vec<u8> {
    let attribute_len = 4 + payload.len();
    let total = NLMSG_HEADER_LEN + NFGEN_HEADER_LEN + align4(attribute_len);
    let mut m = Vec::with_capacity(total);
    m.extend_from_slice(&(total as u32).to_ne_bytes());
    m.extend_from_slice(&((NFNL_SUBSYS_QUEUE << 8) | msg).to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.push(libc::AF_UNSPEC as u8);
    m.push(NFNETLINK_V0);
    m.extend_from_slice(&queue_num.to_be_bytes());
    m.extend_from_slice(&(attribute_len as u16).to_ne_bytes());
    m.extend_from_slice(&attribute.to_ne_bytes());
    m.extend_from_slice(payload);
    m.resize(total, 0);
    m
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn malformed(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("malformed netlink message: {what}"),
    )
}

/// The messages of one datagram: each one's type and the bytes after its
/// netlink header.
fn messages(datagram: &[u8]) -> io::Result<Vec<(u16, &[u8])>> {
    let mut found = Vec::new();
    let mut at = 0;
    while at + NLMSG_HEADER_LEN <= datagram.len() {
        let len = u32::from_ne_bytes(datagram[at..at + 4].try_into().expect("4 bytes")) as usize;
        let kind = u16::from_ne_bytes(datagram[at + 4..at + 6].try_into().expect("2 bytes"));
        if len < NLMSG_HEADER_LEN || at + len > datagram.len() {
            return Err(malformed("a length past the datagram"));
        }
        found.push((kind, &datagram[at + NLMSG_HEADER_LEN..at + len]));
        at += align4(len);
    }
    Ok(found)
}

/// An ERROR message's errno (negated; 0 is an ack) and the acked sequence.
fn parse_error(body: &[u8]) -> io::Result<(i32, u32)> {
    if body.len() < 4 + NLMSG_HEADER_LEN {
        return Err(malformed("a short error message"));
    }
    let errno = i32::from_ne_bytes(body[..4].try_into().expect("4 bytes"));
    let seq = u32::from_ne_bytes(body[12..16].try_into().expect("4 bytes"));
    Ok((errno, seq))
}

/// The id in a PACKET message's PACKET_HDR attribute.
fn packet_id(body: &[u8]) -> io::Result<u32> {
    let mut at = NFGEN_HEADER_LEN;
    while at + 4 <= body.len() {
        let len = u16::from_ne_bytes(body[at..at + 2].try_into().expect("2 bytes")) as usize;
        let kind =
            u16::from_ne_bytes(body[at + 2..at + 4].try_into().expect("2 bytes")) & NLA_TYPE_MASK;
        if len < 4 || at + len > body.len() {
            return Err(malformed("an attribute past its message"));
        }
        if kind == NFQA_PACKET_HDR && len >= 8 {
            return Ok(u32::from_be_bytes(
                body[at + 4..at + 8].try_into().expect("4 bytes"),
            ));
        }
        at += align4(len);
    }
    Err(malformed("a packet without PACKET_HDR"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_is_laid_out_as_the_kernel_reads_it() {
        let m = encode(
            NFQNL_MSG_VERDICT,
            1,
            9,
            0x0102,
            NFQA_VERDICT_HDR,
            &[0, 0, 0, 1, 0, 0, 0, 42],
        );
        assert_eq!(m.len(), 16 + 4 + 12);
        assert_eq!(u32::from_ne_bytes(m[0..4].try_into().unwrap()), 32);
        assert_eq!(u16::from_ne_bytes(m[4..6].try_into().unwrap()), 0x0301);
        assert_eq!(u32::from_ne_bytes(m[8..12].try_into().unwrap()), 9);
        assert_eq!(&m[16..20], &[0, 0, 0x01, 0x02]);
        assert_eq!(u16::from_ne_bytes(m[20..22].try_into().unwrap()), 12);
        assert_eq!(
            u16::from_ne_bytes(m[22..24].try_into().unwrap()),
            NFQA_VERDICT_HDR
        );
        assert_eq!(&m[24..32], &[0, 0, 0, 1, 0, 0, 0, 42]);
    }

    #[test]
    fn a_packet_notice_yields_its_id_and_a_truncated_one_is_an_error() {
        // nfgenmsg, then an attribute of another type, then PACKET_HDR
        // (flag bits set in its type, as the kernel may).
        let mut body = vec![2, 0, 0, 0];
        body.extend_from_slice(&8u16.to_ne_bytes());
        body.extend_from_slice(&9u16.to_ne_bytes());
        body.extend_from_slice(&[0; 4]);
        body.extend_from_slice(&11u16.to_ne_bytes());
        body.extend_from_slice(&(NFQA_PACKET_HDR | 0x8000).to_ne_bytes());
        body.extend_from_slice(&[0, 0, 1, 0, 0x08, 0x00, 3, 0]);
        assert_eq!(packet_id(&body).unwrap(), 256);
        assert!(packet_id(&body[..body.len() - 6]).is_err());

        let mut datagram = Vec::new();
        datagram.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
        datagram.extend_from_slice(&0x0300u16.to_ne_bytes());
        datagram.extend_from_slice(&[0; 10]);
        datagram.extend_from_slice(&body);
        let found = messages(&datagram).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, 0x0300);
        assert!(messages(&datagram[..datagram.len() - 1]).is_err());
    }
}
