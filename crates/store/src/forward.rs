//! Check-and-forward (Pragh 4.3): the two-sided messages that carry an update
//! to the machine that can apply it, and their replies.
//!
//! Two kinds of request:
//! * a **vertex op** (`put`, `insert_edge`, `delete_edge` of a whole vertex) goes
//!   to the vertex's home, which coordinates it under its per-vertex lock;
//! * a **part op** (one read-modify-write of one key) goes to the machine
//!   holding that key's value, which writes the new value into its own value
//!   region and CASes the address word at the key's home. If the value moved
//!   again meanwhile, the reply says where (`Moved`) and the sender follows.
//!
//! A third request, **replica registration** ([`crate::replica`]), goes from
//! a machine that copied a value to the key's home, which lists the replica
//! if the key's address word is still the one the copy came from.
//!
//! A fourth, **node request** ([`Request::Node`]), carries bytes the store
//! does not read to the node above it ([`crate::NodeHandler`]): a primary's
//! replication record to a backup (issue 60). Its reply carries the node's
//! answer, or `Failed`.
//!
//! A part op never waits for anything, so a service that is coordinating a
//! vertex op (and waits for part-op replies) can always be answered: there is
//! no cycle of waiting machines.
//!
//! ```text
//!  message (little-endian)
//!  +------+-------+--------+----------------+---------------------
//!  | kind | from  | op     | request id u64 | body ...
//!  | u8   | u8    | u8 pad | (at byte 8)    |
//!  +------+-------+--------+----------------+---------------------
//!  kind 1 = request, 2 = reply
//!  request body:  key u64 (part ops) or vertex u32 (vertex ops), then the op's arguments;
//!                 op 21 (replica registration): key u64, seen word u64, offset_units u64
//!                 op 31 (node request): the node's bytes, to the end of the message
//!  reply body:    outcome u8 (1 part, 2 vertex, 3 replica, 4 failed, 5 removed,
//!                 6 handed, 7 not owned yet, 8 ahead of the table, 9 node),
//!                 then outcome fields; node: the node's bytes, to the end;
//!                 failed: UTF-8 text of at most FAILED_TEXT_BYTES_MAX bytes;
//!                 handed / not owned yet: machine u8, key u64 (a slot move's markers, issue 59)
//! ```
//!
//! A machine answers every request it can read the header of, even when the
//! body is malformed or the operation fails there (`Failed` with the reason):
//! the sender then gets an error at once instead of waiting out its timeout.

use crate::VertexId;
use locus_fabric::MachineId;

const KIND_REQUEST: u8 = 1;
const KIND_REPLY: u8 = 2;
const HEADER_BYTES: usize = 16;
/// Longest reason a `Failed` reply carries; longer ones are cut.
pub const FAILED_TEXT_BYTES_MAX: usize = 1024;

/// One read-modify-write of one key's part, applied by the holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartOp {
    /// Replace the part with these ids and flags.
    Replace {
        /// New ids.
        ids: Vec<VertexId>,
        /// New flags.
        flags: u32,
    },
    /// Append `u` unless present, the part is full (`max` ids) or another part follows.
    Append {
        /// The neighbour.
        u: VertexId,
        /// Part capacity.
        max: u32,
    },
    /// Remove every `u`.
    Remove {
        /// The neighbour.
        u: VertexId,
    },
    /// Set the MORE flag.
    SetMore,
    /// Create the part holding `[u]` if it does not exist.
    CreateWith {
        /// The neighbour.
        u: VertexId,
    },
    /// Remove the part's value: its address word becomes 0 (no value), the
    /// key's slot stays (keys never move, Pragh 2.1).
    Drop,
}

/// What a part op found or did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartReply {
    /// Applied, and the part had (after the op) the MORE flag if `more`.
    Done {
        /// Whether the op changed the value.
        changed: bool,
        /// Whether another part follows.
        more: bool,
    },
    /// `Append` found the part full.
    Full,
    /// `Append` found another part following: the caller must rescan.
    HasMore,
    /// The key has no value (ops other than `CreateWith` and `Replace`).
    Absent,
    /// The value is held by another machine now.
    Moved(MachineId),
}

/// A whole-vertex update, coordinated by the vertex's home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VertexOp {
    /// Replace the adjacency list.
    Put(Vec<VertexId>),
    /// Add an edge unless present.
    Insert(VertexId),
    /// Remove every occurrence of an edge.
    Delete(VertexId),
    /// Remove the vertex: every part of its list.
    Remove,
}

/// A request as carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// A part op on a key.
    Part {
        /// The key.
        key: u64,
        /// The op.
        op: PartOp,
    },
    /// A vertex op.
    Vertex {
        /// The vertex.
        vertex: VertexId,
        /// The op.
        op: VertexOp,
    },
    /// List a replica of `key` at the sender (see [`crate::replica`]).
    Replica {
        /// The key.
        key: u64,
        /// The address word the replica was copied from.
        seen: u64,
        /// The replica block in the sender's value region, in 8-byte units.
        offset_units: u64,
    },
    /// Bytes for the node above the receiving store ([`crate::NodeHandler`]).
    Node(Vec<u8>),
}

/// A reply as carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Outcome of a part op.
    Part(PartReply),
    /// Whether a replica was listed.
    Replica(bool),
    /// Outcome of a vertex op: whether it changed anything (insert/delete).
    Vertex(bool),
    /// Outcome of [`VertexOp::Remove`]: the list the vertex had, if it had an entry.
    Removed(Option<Vec<VertexId>>),
    /// The request failed where it ran (or could not be read there): why.
    Failed(String),
    /// The key was handed to machine `to` by a slot move (its old home
    /// keeps a marker): the sender asks `to`.
    Handed {
        /// The key.
        key: u64,
        /// Its new home.
        to: MachineId,
    },
    /// The key is still machine `owner`'s: its handoff to the machine that
    /// answered is in flight.
    NotOwnedYet {
        /// The key.
        key: u64,
        /// Its owner.
        owner: MachineId,
    },
    /// The vertex's slot is served by the machine that answered ahead of
    /// the slot table: keys of it are not created or removed yet (V3).
    AheadOfTable {
        /// The vertex.
        vertex: VertexId,
        /// Its slot.
        slot: u32,
    },
    /// The receiving node's answer to a [`Request::Node`].
    Node(Vec<u8>),
}

impl Reply {
    /// The reply's kind, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Reply::Part(_) => "part",
            Reply::Replica(_) => "replica",
            Reply::Vertex(_) => "vertex",
            Reply::Removed(_) => "removed",
            Reply::Failed(_) => "failed",
            Reply::Handed { .. } => "handed",
            Reply::NotOwnedYet { .. } => "not owned yet",
            Reply::AheadOfTable { .. } => "ahead of the table",
            Reply::Node(_) => "node",
        }
    }
}

impl Request {
    /// The request's kind, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Request::Part { .. } => "part",
            Request::Vertex { .. } => "vertex",
            Request::Replica { .. } => "replica",
            Request::Node(_) => "node",
        }
    }
}

/// A message that does not decode, with what could be read of its header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    /// What was wrong.
    pub reason: String,
    /// The message's kind byte and request id, if the header was whole.
    pub header: Option<(u8, u64)>,
}

impl Malformed {
    /// The id of a request that can be answered despite its body.
    pub fn request_id(&self) -> Option<u64> {
        self.header.filter(|h| h.0 == KIND_REQUEST).map(|h| h.1)
    }

    /// The id of a reply whose waiter can be told it was unreadable.
    pub fn reply_id(&self) -> Option<u64> {
        self.header.filter(|h| h.0 == KIND_REPLY).map(|h| h.1)
    }
}

/// A decoded message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Envelope {
    /// A request from `from`, to be answered with `id`.
    Request {
        /// Sender.
        from: MachineId,
        /// Request id (sender-chosen).
        id: u64,
        /// The request.
        request: Request,
    },
    /// A reply to request `id`.
    Reply {
        /// Request id.
        id: u64,
        /// The reply.
        reply: Reply,
    },
}

fn header(kind: u8, from: MachineId, op: u8, id: u64, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&[kind, from, op, 0, 0, 0, 0, 0]);
    out.extend_from_slice(&id.to_le_bytes());
}

fn put_ids(ids: &[VertexId], out: &mut Vec<u8>) {
    out.extend_from_slice(&(ids.len() as u32).to_le_bytes());
    for id in ids {
        out.extend_from_slice(&id.to_le_bytes());
    }
}

/// Encodes a request.
pub fn encode_request(from: MachineId, id: u64, request: &Request, out: &mut Vec<u8>) {
    match request {
        Request::Part { key, op } => {
            let code = match op {
                PartOp::Replace { .. } => 1,
                PartOp::Append { .. } => 2,
                PartOp::Remove { .. } => 3,
                PartOp::SetMore => 4,
                PartOp::CreateWith { .. } => 5,
                PartOp::Drop => 6,
            };
            header(KIND_REQUEST, from, code, id, out);
            out.extend_from_slice(&key.to_le_bytes());
            match op {
                PartOp::Replace { ids, flags } => {
                    out.extend_from_slice(&flags.to_le_bytes());
                    put_ids(ids, out);
                }
                PartOp::Append { u, max } => {
                    out.extend_from_slice(&u.to_le_bytes());
                    out.extend_from_slice(&max.to_le_bytes());
                }
                PartOp::Remove { u } | PartOp::CreateWith { u } => {
                    out.extend_from_slice(&u.to_le_bytes())
                }
                PartOp::SetMore | PartOp::Drop => {}
            }
        }
        Request::Vertex { vertex, op } => {
            let code = match op {
                VertexOp::Put(_) => 11,
                VertexOp::Insert(_) => 12,
                VertexOp::Delete(_) => 13,
                VertexOp::Remove => 14,
            };
            header(KIND_REQUEST, from, code, id, out);
            out.extend_from_slice(&vertex.to_le_bytes());
            match op {
                VertexOp::Put(ids) => put_ids(ids, out),
                VertexOp::Remove => {}
                VertexOp::Insert(u) | VertexOp::Delete(u) => {
                    out.extend_from_slice(&u.to_le_bytes())
                }
            }
        }
        Request::Replica {
            key,
            seen,
            offset_units,
        } => {
            header(KIND_REQUEST, from, 21, id, out);
            for w in [key, seen, offset_units] {
                out.extend_from_slice(&w.to_le_bytes());
            }
        }
        Request::Node(bytes) => {
            header(KIND_REQUEST, from, 31, id, out);
            out.extend_from_slice(bytes);
        }
    }
}

/// Encodes a reply.
pub fn encode_reply(from: MachineId, id: u64, reply: &Reply, out: &mut Vec<u8>) {
    header(KIND_REPLY, from, 0, id, out);
    match reply {
        Reply::Part(p) => {
            out.push(1);
            match *p {
                PartReply::Done { changed, more } => {
                    out.extend_from_slice(&[1, changed as u8, more as u8])
                }
                PartReply::Full => out.push(2),
                PartReply::HasMore => out.push(3),
                PartReply::Absent => out.push(4),
                PartReply::Moved(m) => out.extend_from_slice(&[5, m]),
            }
        }
        Reply::Replica(b) => out.extend_from_slice(&[3, *b as u8]),
        Reply::Vertex(b) => out.extend_from_slice(&[2, *b as u8]),
        Reply::Removed(list) => {
            out.push(5);
            match list {
                None => out.push(0),
                Some(ids) => {
                    out.push(1);
                    put_ids(ids, out);
                }
            }
        }
        Reply::Handed { key, to } => {
            out.extend_from_slice(&[6, *to]);
            out.extend_from_slice(&key.to_le_bytes());
        }
        Reply::NotOwnedYet { key, owner } => {
            out.extend_from_slice(&[7, *owner]);
            out.extend_from_slice(&key.to_le_bytes());
        }
        Reply::AheadOfTable { vertex, slot } => {
            out.push(8);
            out.extend_from_slice(&vertex.to_le_bytes());
            out.extend_from_slice(&slot.to_le_bytes());
        }
        Reply::Node(bytes) => {
            out.push(9);
            out.extend_from_slice(bytes);
        }
        Reply::Failed(e) => {
            let mut end = e.len().min(FAILED_TEXT_BYTES_MAX);
            while !e.is_char_boundary(end) {
                end -= 1;
            }
            out.push(4);
            out.extend_from_slice(&e.as_bytes()[..end]);
        }
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

type Decoded<T> = std::result::Result<T, String>;

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Decoded<&[u8]> {
        let s = self
            .b
            .get(self.at..self.at + n)
            .ok_or_else(|| "truncated message".to_string())?;
        self.at += n;
        Ok(s)
    }
    fn u8(&mut self) -> Decoded<u8> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Decoded<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self) -> Decoded<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn ids(&mut self) -> Decoded<Vec<VertexId>> {
        let n = self.u32()? as usize;
        if n > (self.b.len() - self.at) / 4 {
            return Err("id count exceeds the message".into());
        }
        (0..n).map(|_| self.u32()).collect()
    }
}

/// Decodes a message; malformed input is an error, never a panic.
pub fn decode(bytes: &[u8]) -> std::result::Result<Envelope, Malformed> {
    if bytes.len() < HEADER_BYTES {
        return Err(Malformed {
            reason: format!(
                "{} bytes, shorter than the {HEADER_BYTES}-byte header",
                bytes.len()
            ),
            header: None,
        });
    }
    let (kind, id) = (
        bytes[0],
        u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes")),
    );
    decode_body(bytes).map_err(|reason| Malformed {
        reason,
        header: Some((kind, id)),
    })
}

fn decode_body(bytes: &[u8]) -> Decoded<Envelope> {
    let (kind, from, op) = (bytes[0], bytes[1], bytes[2]);
    let id = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
    let mut r = Reader {
        b: bytes,
        at: HEADER_BYTES,
    };
    match kind {
        KIND_REQUEST => {
            let request = match op {
                1..=6 => {
                    let key = r.u64()?;
                    let op = match op {
                        1 => {
                            let flags = r.u32()?;
                            PartOp::Replace {
                                flags,
                                ids: r.ids()?,
                            }
                        }
                        2 => PartOp::Append {
                            u: r.u32()?,
                            max: r.u32()?,
                        },
                        3 => PartOp::Remove { u: r.u32()? },
                        4 => PartOp::SetMore,
                        5 => PartOp::CreateWith { u: r.u32()? },
                        _ => PartOp::Drop,
                    };
                    Request::Part { key, op }
                }
                11..=14 => {
                    let vertex = r.u32()?;
                    let op = match op {
                        11 => VertexOp::Put(r.ids()?),
                        12 => VertexOp::Insert(r.u32()?),
                        13 => VertexOp::Delete(r.u32()?),
                        _ => VertexOp::Remove,
                    };
                    Request::Vertex { vertex, op }
                }
                21 => Request::Replica {
                    key: r.u64()?,
                    seen: r.u64()?,
                    offset_units: r.u64()?,
                },
                31 => Request::Node(bytes[r.at..].to_vec()),
                other => return Err(format!("unknown request op {other}")),
            };
            Ok(Envelope::Request { from, id, request })
        }
        KIND_REPLY => {
            let reply = match r.u8()? {
                1 => Reply::Part(match r.u8()? {
                    1 => PartReply::Done {
                        changed: r.u8()? != 0,
                        more: r.u8()? != 0,
                    },
                    2 => PartReply::Full,
                    3 => PartReply::HasMore,
                    4 => PartReply::Absent,
                    5 => PartReply::Moved(r.u8()?),
                    other => return Err(format!("unknown part reply {other}")),
                }),
                2 => Reply::Vertex(r.u8()? != 0),
                3 => Reply::Replica(r.u8()? != 0),
                5 => Reply::Removed(match r.u8()? {
                    0 => None,
                    1 => Some(r.ids()?),
                    other => return Err(format!("a removal reply's flag is {other}, not 0 or 1")),
                }),
                4 => {
                    let text = &bytes[r.at..];
                    if text.len() > FAILED_TEXT_BYTES_MAX {
                        return Err(format!(
                            "a failure reason of {} bytes exceeds {FAILED_TEXT_BYTES_MAX}",
                            text.len()
                        ));
                    }
                    Reply::Failed(String::from_utf8_lossy(text).into_owned())
                }
                6 => {
                    let to = r.u8()?;
                    Reply::Handed { to, key: r.u64()? }
                }
                7 => {
                    let owner = r.u8()?;
                    Reply::NotOwnedYet {
                        owner,
                        key: r.u64()?,
                    }
                }
                8 => {
                    let vertex = r.u32()?;
                    Reply::AheadOfTable {
                        vertex,
                        slot: r.u32()?,
                    }
                }
                9 => Reply::Node(bytes[r.at..].to_vec()),
                other => return Err(format!("unknown reply kind {other}")),
            };
            Ok(Envelope::Reply { id, reply })
        }
        other => Err(format!("unknown message kind {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip_request(r: Request) {
        let mut b = Vec::new();
        encode_request(7, 99, &r, &mut b);
        assert_eq!(
            decode(&b).unwrap(),
            Envelope::Request {
                from: 7,
                id: 99,
                request: r
            }
        );
    }

    #[test]
    fn requests_round_trip() {
        round_trip_request(Request::Node(vec![]));
        round_trip_request(Request::Node(vec![0, 1, 2, 255]));
        round_trip_request(Request::Part {
            key: u64::MAX >> 1,
            op: PartOp::Replace {
                ids: vec![1, u32::MAX],
                flags: 1,
            },
        });
        round_trip_request(Request::Part {
            key: 3,
            op: PartOp::Append { u: 5, max: 9 },
        });
        round_trip_request(Request::Replica {
            key: u64::MAX,
            seen: 1 << 63,
            offset_units: (1 << 34) - 1,
        });
        round_trip_request(Request::Part {
            key: 3,
            op: PartOp::Remove { u: 5 },
        });
        round_trip_request(Request::Part {
            key: 3,
            op: PartOp::SetMore,
        });
        round_trip_request(Request::Part {
            key: 3,
            op: PartOp::CreateWith { u: 8 },
        });
        round_trip_request(Request::Vertex {
            vertex: 4,
            op: VertexOp::Put(vec![]),
        });
        round_trip_request(Request::Vertex {
            vertex: 4,
            op: VertexOp::Insert(1),
        });
        round_trip_request(Request::Vertex {
            vertex: 4,
            op: VertexOp::Delete(2),
        });
        round_trip_request(Request::Part {
            key: 3,
            op: PartOp::Drop,
        });
        round_trip_request(Request::Vertex {
            vertex: u32::MAX,
            op: VertexOp::Remove,
        });
    }

    #[test]
    fn replies_round_trip() {
        for reply in [
            Reply::Part(PartReply::Done {
                changed: true,
                more: false,
            }),
            Reply::Part(PartReply::Full),
            Reply::Part(PartReply::HasMore),
            Reply::Part(PartReply::Absent),
            Reply::Part(PartReply::Moved(127)),
            Reply::Handed {
                key: u64::MAX,
                to: 127,
            },
            Reply::NotOwnedYet { key: 9, owner: 0 },
            Reply::AheadOfTable {
                vertex: u32::MAX,
                slot: 65_535,
            },
            Reply::Vertex(true),
            Reply::Vertex(false),
            Reply::Replica(true),
            Reply::Replica(false),
            Reply::Failed("region full".into()),
            Reply::Failed(String::new()),
            Reply::Node(vec![]),
            Reply::Node(vec![7; 300]),
            Reply::Removed(None),
            Reply::Removed(Some(vec![])),
            Reply::Removed(Some(vec![3, u32::MAX])),
        ] {
            let mut b = Vec::new();
            encode_reply(1, 5, &reply, &mut b);
            assert_eq!(decode(&b).unwrap(), Envelope::Reply { id: 5, reply });
        }
    }

    #[test]
    fn garbage_is_an_error() {
        let mut b = Vec::new();
        encode_request(
            1,
            2,
            &Request::Part {
                key: 1,
                op: PartOp::Replace {
                    ids: vec![1, 2, 3],
                    flags: 0,
                },
            },
            &mut b,
        );
        for n in 0..b.len() {
            assert!(decode(&b[..n]).is_err(), "prefix of {n} bytes");
        }
        let mut lying = b.clone();
        lying[28] = 0xFF; // id count far beyond the message
        assert!(decode(&lying).is_err());
        assert!(decode(&[9; 16]).is_err());
    }

    #[test]
    fn malformed_messages_keep_what_their_header_says() {
        let mut b = Vec::new();
        encode_request(
            3,
            41,
            &Request::Part {
                key: 1,
                op: PartOp::Remove { u: 2 },
            },
            &mut b,
        );
        let e = decode(&b[..b.len() - 1]).unwrap_err();
        assert_eq!(e.request_id(), Some(41), "{e:?}");
        assert_eq!(e.reply_id(), None);
        encode_reply(3, 42, &Reply::Part(PartReply::Full), &mut b);
        b[16] = 99; // unknown outcome
        let e = decode(&b).unwrap_err();
        assert_eq!(e.reply_id(), Some(42), "{e:?}");
        assert!(e.reason.contains("unknown reply kind 99"), "{}", e.reason);
        let e = decode(&[1; 5]).unwrap_err();
        assert_eq!(e.header, None);
        assert!(e.reason.contains("shorter"), "{}", e.reason);
    }

    #[test]
    fn failure_reasons_are_bounded() {
        let long = "é".repeat(FAILED_TEXT_BYTES_MAX); // 2 bytes each: cut at a char boundary
        let mut b = Vec::new();
        encode_reply(0, 1, &Reply::Failed(long.clone()), &mut b);
        let Envelope::Reply {
            reply: Reply::Failed(text),
            ..
        } = decode(&b).unwrap()
        else {
            panic!("not a failed reply")
        };
        assert!(text.len() <= FAILED_TEXT_BYTES_MAX && long.starts_with(&text));
        // A peer that sends a longer reason is malformed, not trusted.
        b.extend_from_slice(&[b'x'; 4]);
        b.truncate(17);
        b.extend(std::iter::repeat_n(b'x', FAILED_TEXT_BYTES_MAX + 1));
        assert!(decode(&b).is_err());
    }
}
