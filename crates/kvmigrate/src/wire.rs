//! The packet format (NetMigrate appendix A, Fig. 8), as an explicit little-endian encoding.
//!
//! Every packet is a 16-byte header followed by a body whose layout depends on `op`:
//!
//! ```text
//!  0       2     3     4      5      6        8        10              14        16
//!  +-------+-----+-----+------+------+--------+--------+---------------+---------+
//!  | magic | ver | op  |flags | rsvd | from   | shard  |      seq      |body_len |
//!  | u16   | u8  | u8  | u8   | u8=0 | u16    | u16    |      u32      |  u16    |
//!  +-------+-----+-----+------+------+--------+--------+---------------+---------+
//!  magic = 0x4D4E ("NM" little-endian), ver = 1; `from` is the sending node (a client for
//!  queries the router forwards); `shard` is the paper's DBPort: the shard a query addresses,
//!  which is also the id of its home server; `seq` is the request id replies echo.
//!
//!  op  body                                                          sent by -> to
//!  1   GET        key u64                                            client -> router -> server
//!  2   SET        key u64 | len u16 | value[len]                     client -> router -> server
//!  3   DELETE     key u64                                            client -> router -> server
//!  4   REPLY      status u8 | version u64 | len u16 | value[len]     server -> client
//!                 (status LOST: value is the message saying which server lost the key)
//!  10  REGISTER   src u16 | dst u16 | mode u8 | buckets_log2 u8 | group_buckets_log2 u8
//!  11  GROUP_START     group u32                                     source -> router
//!  12  GROUP_COMPLETE  group u32                                     source -> router
//!  13  TERMINATE  (empty)                                            source -> router
//!  14  ABORT      (empty)                                            source -> router, dest
//!  15  CONTROL_ACK  acked_op u8 | ok u8 | group u32                  router -> source
//!  20  INIT       era u16 | protocol u8 | buckets_log2 u8 | group_buckets_log2 u8
//!  21  INIT_ACK   ok u8 | buckets_log2_max u8                        dest -> source
//!  22  DATA       batch u32 | group u32 | count u16 | item[count]    source -> dest
//!  23  DATA_ACK   batch u32                                          dest -> source
//!  24  GROUP_DONE group u32                                          source -> dest
//!  25  FINISH     (empty)                                            source -> dest
//!  26  PULL       key u64                                            dest -> source
//!  27  PULL_REPLY item                                               source -> dest
//!  28  MIRROR     item                                               dest -> source
//!  29  MIRROR_ACK ok u8                                              source -> dest
//!  30  PROBE      (empty)                                            dest -> source
//!  31  PROBE_ACK  ok u8 (still migrating this shard to the prober)   source -> dest
//!  16  SOURCE_LOST (empty)                                           dest -> router
//!  17  HAND_BACK  to u16                                             dest -> router
//!
//!  item = key u64 | version u64 | state u8 (0 absent, 1 deleted, 2 value) | len u16 | value[len]
//! ```
//!
//! Flags: `DOUBLE` (a double-read copy; the client waits for two replies), `FROM_DEST` (reply
//! from the destination), `PULLED` (the destination PriorityPulled the key), `LATE` (a batch of
//! late dirty writes). Values are at most [`VALUE_BYTES_MAX`]; a packet is at most
//! [`DATAGRAM_BYTES_MAX`] so it fits one UDP datagram. Decoding never panics: any inconsistency
//! is an [`Error::Malformed`].

use crate::error::{Error, Result};
use crate::group::Geometry;

/// A node of the system: the router, a server, or a client.
pub type NodeId = u16;
/// A shard: the id of the server that owns it before any migration.
pub type ShardId = u16;
/// Keys are 8 bytes so that a key and a group id fit the switch's metadata (NetMigrate 7).
pub type Key = u64;

/// Header bytes.
pub const HEADER_BYTES: usize = 16;
/// Largest value.
pub const VALUE_BYTES_MAX: usize = 1024;
/// Largest packet: one UDP datagram on IPv4.
pub const DATAGRAM_BYTES_MAX: usize = 65_507;
/// Smallest encoded item.
pub const ITEM_BYTES_MIN: usize = 19;
const MAGIC: u16 = 0x4D4E;
const VERSION: u8 = 1;

/// Flag: a double-read copy.
pub const FLAG_DOUBLE: u8 = 1;
/// Flag: reply from the destination.
pub const FLAG_FROM_DEST: u8 = 2;
/// Flag: the destination PriorityPulled the key.
pub const FLAG_PULLED: u8 = 4;
/// Flag: late dirty writes.
pub const FLAG_LATE: u8 = 8;

/// Outcome of a query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Done; a GET found a value.
    Ok = 0,
    /// A GET found no value (`version` says which deletion, 0 if never written).
    NotFound = 1,
    /// The server could not serve it (busy, aborted migration); the outcome of a write is unknown.
    Error = 2,
    /// The key's data may exist only on a server that died during a migration (the value field
    /// says which, and what an operator can do); never answered as NotFound.
    Lost = 3,
}

/// How the router treats the queries of one migration instance; one per [`crate::Protocol`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouterMode {
    /// NetMigrate: the BF/CBF state machine (4.3).
    Filters = 0,
    /// Stop-and-copy and source-based: every query to the source until termination.
    SourceOnly = 1,
    /// Rocksteady: ownership moves first, everything to the destination.
    DestinationFirst = 2,
    /// Fulva: groups below the completed prefix (the progress a client library would track)
    /// go to the destination; reads of the rest are doubled, writes go to the destination.
    ClientTracked = 3,
}

impl RouterMode {
    fn from_u8(v: u8) -> Result<Self> {
        Ok(match v {
            0 => Self::Filters,
            1 => Self::SourceOnly,
            2 => Self::DestinationFirst,
            3 => Self::ClientTracked,
            _ => return Err(Error::Malformed("unknown router mode")),
        })
    }
}

/// The live migration protocols (NetMigrate 2.2, 6.1), all run by the same agents.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Protocol {
    /// NetMigrate: router-tracked groups, double reads, PriorityPulls on false positives.
    NetMigrate = 0,
    /// Freeze the shard, copy everything, switch.
    StopAndCopy = 1,
    /// Source serves everything; dirty-log rounds; a short final pause.
    SourceBased = 2,
    /// Destination-based Rocksteady: ownership first, PriorityPulls for missing keys.
    Rocksteady = 3,
    /// Hybrid Fulva: client-tracked progress, double reads of unfinished groups.
    Fulva = 4,
}

impl Protocol {
    /// Every protocol, NetMigrate first.
    pub const ALL: [Protocol; 5] = [
        Protocol::NetMigrate,
        Protocol::StopAndCopy,
        Protocol::SourceBased,
        Protocol::Rocksteady,
        Protocol::Fulva,
    ];

    /// The router's mode for this protocol.
    pub fn router_mode(self) -> RouterMode {
        match self {
            Protocol::NetMigrate => RouterMode::Filters,
            Protocol::StopAndCopy | Protocol::SourceBased => RouterMode::SourceOnly,
            Protocol::Rocksteady => RouterMode::DestinationFirst,
            Protocol::Fulva => RouterMode::ClientTracked,
        }
    }

    /// Short lower-case name, for reports.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::NetMigrate => "netmigrate",
            Protocol::StopAndCopy => "stop-and-copy",
            Protocol::SourceBased => "source",
            Protocol::Rocksteady => "rocksteady",
            Protocol::Fulva => "fulva",
        }
    }

    fn from_u8(v: u8) -> Result<Self> {
        Ok(match v {
            0 => Self::NetMigrate,
            1 => Self::StopAndCopy,
            2 => Self::SourceBased,
            3 => Self::Rocksteady,
            4 => Self::Fulva,
            _ => return Err(Error::Malformed("unknown protocol")),
        })
    }
}

/// One versioned key-value pair as migrated; `value: None` with version 0 means absent,
/// with a version means deleted (a tombstone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    /// The key.
    pub key: Key,
    /// Its version (0: never written).
    pub version: u64,
    /// The value, or `None` when deleted or absent.
    pub value: Option<Vec<u8>>,
}

/// A decoded packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    /// Sending node (for forwarded queries: the client).
    pub from: NodeId,
    /// The shard addressed.
    pub shard: ShardId,
    /// Request id (queries), batch-independent sequence (control).
    pub seq: u32,
    /// `FLAG_*` bits.
    pub flags: u8,
    /// The op and its fields.
    pub body: Body,
}

/// Op-specific fields; see the module diagram.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Body {
    Get {
        key: Key,
    },
    Set {
        key: Key,
        value: Vec<u8>,
    },
    Delete {
        key: Key,
    },
    Reply {
        status: Status,
        version: u64,
        value: Vec<u8>,
    },
    Register {
        src: NodeId,
        dst: NodeId,
        mode: RouterMode,
        geometry: Geometry,
    },
    GroupStart {
        group: u32,
    },
    GroupComplete {
        group: u32,
    },
    Terminate,
    Abort,
    ControlAck {
        op: u8,
        ok: bool,
        group: u32,
    },
    Init {
        era: u16,
        protocol: Protocol,
        geometry: Geometry,
    },
    InitAck {
        ok: bool,
        /// The largest incoming shard the destination accepts (log2 of its buckets), so that a
        /// source refused for size can say why.
        buckets_log2_max: u8,
    },
    Data {
        batch: u32,
        group: u32,
        items: Vec<Item>,
    },
    DataAck {
        batch: u32,
    },
    GroupDone {
        group: u32,
    },
    Finish,
    Pull {
        key: Key,
    },
    PullReply {
        item: Item,
    },
    Mirror {
        item: Item,
    },
    MirrorAck {
        ok: bool,
    },
    Probe,
    ProbeAck {
        ok: bool,
    },
    SourceLost,
    HandBack {
        to: NodeId,
    },
}

/// Op codes.
#[allow(missing_docs)]
pub mod op {
    pub const GET: u8 = 1;
    pub const SET: u8 = 2;
    pub const DELETE: u8 = 3;
    pub const REPLY: u8 = 4;
    pub const REGISTER: u8 = 10;
    pub const GROUP_START: u8 = 11;
    pub const GROUP_COMPLETE: u8 = 12;
    pub const TERMINATE: u8 = 13;
    pub const ABORT: u8 = 14;
    pub const CONTROL_ACK: u8 = 15;
    pub const SOURCE_LOST: u8 = 16;
    pub const HAND_BACK: u8 = 17;
    pub const INIT: u8 = 20;
    pub const INIT_ACK: u8 = 21;
    pub const DATA: u8 = 22;
    pub const DATA_ACK: u8 = 23;
    pub const GROUP_DONE: u8 = 24;
    pub const FINISH: u8 = 25;
    pub const PULL: u8 = 26;
    pub const PULL_REPLY: u8 = 27;
    pub const MIRROR: u8 = 28;
    pub const MIRROR_ACK: u8 = 29;
    pub const PROBE: u8 = 30;
    pub const PROBE_ACK: u8 = 31;
}

impl Body {
    /// This body's op code.
    pub fn op(&self) -> u8 {
        match self {
            Body::Get { .. } => op::GET,
            Body::Set { .. } => op::SET,
            Body::Delete { .. } => op::DELETE,
            Body::Reply { .. } => op::REPLY,
            Body::Register { .. } => op::REGISTER,
            Body::GroupStart { .. } => op::GROUP_START,
            Body::GroupComplete { .. } => op::GROUP_COMPLETE,
            Body::Terminate => op::TERMINATE,
            Body::Abort => op::ABORT,
            Body::ControlAck { .. } => op::CONTROL_ACK,
            Body::Init { .. } => op::INIT,
            Body::InitAck { .. } => op::INIT_ACK,
            Body::Data { .. } => op::DATA,
            Body::DataAck { .. } => op::DATA_ACK,
            Body::GroupDone { .. } => op::GROUP_DONE,
            Body::Finish => op::FINISH,
            Body::Pull { .. } => op::PULL,
            Body::PullReply { .. } => op::PULL_REPLY,
            Body::Mirror { .. } => op::MIRROR,
            Body::MirrorAck { .. } => op::MIRROR_ACK,
            Body::Probe => op::PROBE,
            Body::ProbeAck { .. } => op::PROBE_ACK,
            Body::SourceLost => op::SOURCE_LOST,
            Body::HandBack { .. } => op::HAND_BACK,
        }
    }

    /// Whether this is a client query (GET, SET, DELETE).
    pub fn is_query(&self) -> bool {
        matches!(
            self,
            Body::Get { .. } | Body::Set { .. } | Body::Delete { .. }
        )
    }
}

fn item_len(item: &Item) -> usize {
    ITEM_BYTES_MIN + item.value.as_ref().map_or(0, Vec::len)
}

impl Packet {
    /// Encoded size in bytes (what the bandwidth counters add up).
    pub fn encoded_len(&self) -> usize {
        HEADER_BYTES
            + match &self.body {
                Body::Get { .. } | Body::Delete { .. } | Body::Pull { .. } => 8,
                Body::Set { value, .. } => 10 + value.len(),
                Body::Reply { value, .. } => 11 + value.len(),
                Body::Register { .. } => 7,
                Body::GroupStart { .. }
                | Body::GroupComplete { .. }
                | Body::GroupDone { .. }
                | Body::DataAck { .. } => 4,
                Body::Terminate | Body::Abort | Body::Finish | Body::Probe | Body::SourceLost => 0,
                Body::HandBack { .. } => 2,
                Body::ControlAck { .. } => 6,
                Body::Init { .. } => 5,
                Body::InitAck { .. } => 2,
                Body::MirrorAck { .. } | Body::ProbeAck { .. } => 1,
                Body::Data { items, .. } => 10 + items.iter().map(item_len).sum::<usize>(),
                Body::PullReply { item } | Body::Mirror { item } => item_len(item),
            }
    }

    /// Encodes into `out` (cleared first); fails only on size limits.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<()> {
        out.clear();
        let len = self.encoded_len();
        if len > DATAGRAM_BYTES_MAX {
            return Err(Error::TooLarge {
                what: "packet",
                len,
                max: DATAGRAM_BYTES_MAX,
            });
        }
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out.push(VERSION);
        out.push(self.body.op());
        out.push(self.flags);
        out.push(0);
        out.extend_from_slice(&self.from.to_le_bytes());
        out.extend_from_slice(&self.shard.to_le_bytes());
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.extend_from_slice(&((len - HEADER_BYTES) as u16).to_le_bytes());
        match &self.body {
            Body::Get { key } | Body::Delete { key } | Body::Pull { key } => {
                out.extend_from_slice(&key.to_le_bytes())
            }
            Body::Set { key, value } => {
                out.extend_from_slice(&key.to_le_bytes());
                put_value(out, value)?;
            }
            Body::Reply {
                status,
                version,
                value,
            } => {
                out.push(*status as u8);
                out.extend_from_slice(&version.to_le_bytes());
                put_value(out, value)?;
            }
            Body::Register {
                src,
                dst,
                mode,
                geometry,
            } => {
                out.extend_from_slice(&src.to_le_bytes());
                out.extend_from_slice(&dst.to_le_bytes());
                out.push(*mode as u8);
                out.push(geometry.buckets_log2);
                out.push(geometry.group_buckets_log2);
            }
            Body::GroupStart { group }
            | Body::GroupComplete { group }
            | Body::GroupDone { group }
            | Body::DataAck { batch: group } => out.extend_from_slice(&group.to_le_bytes()),
            Body::Terminate | Body::Abort | Body::Finish | Body::Probe | Body::SourceLost => {}
            Body::HandBack { to } => out.extend_from_slice(&to.to_le_bytes()),
            Body::ControlAck { op, ok, group } => {
                out.push(*op);
                out.push(*ok as u8);
                out.extend_from_slice(&group.to_le_bytes());
            }
            Body::Init {
                era,
                protocol,
                geometry,
            } => {
                out.extend_from_slice(&era.to_le_bytes());
                out.push(*protocol as u8);
                out.push(geometry.buckets_log2);
                out.push(geometry.group_buckets_log2);
            }
            Body::InitAck {
                ok,
                buckets_log2_max,
            } => {
                out.push(*ok as u8);
                out.push(*buckets_log2_max);
            }
            Body::MirrorAck { ok } | Body::ProbeAck { ok } => out.push(*ok as u8),
            Body::Data {
                batch,
                group,
                items,
            } => {
                out.extend_from_slice(&batch.to_le_bytes());
                out.extend_from_slice(&group.to_le_bytes());
                out.extend_from_slice(&(items.len() as u16).to_le_bytes());
                for item in items {
                    put_item(out, item)?;
                }
            }
            Body::PullReply { item } | Body::Mirror { item } => put_item(out, item)?,
        }
        debug_assert_eq!(out.len(), len);
        Ok(())
    }

    /// Decodes one packet; trailing bytes, bad lengths and unknown ops are errors.
    pub fn decode(buf: &[u8]) -> Result<Packet> {
        let mut r = Reader { buf, pos: 0 };
        if r.u16()? != MAGIC {
            return Err(Error::Malformed("bad magic"));
        }
        if r.u8()? != VERSION {
            return Err(Error::Malformed("unsupported version"));
        }
        let op_code = r.u8()?;
        let flags = r.u8()?;
        let _reserved = r.u8()?;
        let from = r.u16()?;
        let shard = r.u16()?;
        let seq = r.u32()?;
        let body_len = r.u16()? as usize;
        if buf.len() != HEADER_BYTES + body_len {
            return Err(Error::Malformed("body length does not match datagram"));
        }
        let body = match op_code {
            op::GET => Body::Get { key: r.u64()? },
            op::SET => Body::Set {
                key: r.u64()?,
                value: r.value()?,
            },
            op::DELETE => Body::Delete { key: r.u64()? },
            op::REPLY => Body::Reply {
                status: match r.u8()? {
                    0 => Status::Ok,
                    1 => Status::NotFound,
                    2 => Status::Error,
                    3 => Status::Lost,
                    _ => return Err(Error::Malformed("unknown status")),
                },
                version: r.u64()?,
                value: r.value()?,
            },
            op::REGISTER => Body::Register {
                src: r.u16()?,
                dst: r.u16()?,
                mode: RouterMode::from_u8(r.u8()?)?,
                geometry: r.geometry()?,
            },
            op::GROUP_START => Body::GroupStart { group: r.u32()? },
            op::GROUP_COMPLETE => Body::GroupComplete { group: r.u32()? },
            op::TERMINATE => Body::Terminate,
            op::ABORT => Body::Abort,
            op::CONTROL_ACK => Body::ControlAck {
                op: r.u8()?,
                ok: r.bool()?,
                group: r.u32()?,
            },
            op::INIT => Body::Init {
                era: r.u16()?,
                protocol: Protocol::from_u8(r.u8()?)?,
                geometry: r.geometry()?,
            },
            op::INIT_ACK => Body::InitAck {
                ok: r.bool()?,
                buckets_log2_max: r.u8()?,
            },
            op::DATA => {
                let batch = r.u32()?;
                let group = r.u32()?;
                let count = r.u16()? as usize;
                if count * ITEM_BYTES_MIN > buf.len() - r.pos {
                    return Err(Error::Malformed("item count exceeds body"));
                }
                let mut items = Vec::with_capacity(count);
                for _ in 0..count {
                    items.push(r.item()?);
                }
                Body::Data {
                    batch,
                    group,
                    items,
                }
            }
            op::DATA_ACK => Body::DataAck { batch: r.u32()? },
            op::GROUP_DONE => Body::GroupDone { group: r.u32()? },
            op::FINISH => Body::Finish,
            op::PULL => Body::Pull { key: r.u64()? },
            op::PULL_REPLY => Body::PullReply { item: r.item()? },
            op::MIRROR => Body::Mirror { item: r.item()? },
            op::MIRROR_ACK => Body::MirrorAck { ok: r.bool()? },
            op::PROBE => Body::Probe,
            op::PROBE_ACK => Body::ProbeAck { ok: r.bool()? },
            op::SOURCE_LOST => Body::SourceLost,
            op::HAND_BACK => Body::HandBack { to: r.u16()? },
            _ => return Err(Error::Malformed("unknown op")),
        };
        if r.pos != buf.len() {
            return Err(Error::Malformed("trailing bytes"));
        }
        Ok(Packet {
            from,
            shard,
            seq,
            flags,
            body,
        })
    }
}

/// Whether `datagram` starts as a wire packet does (magic and version), so that a driver
/// sharing its socket can tell its own traffic from packets without decoding.
pub fn looks_like_packet(datagram: &[u8]) -> bool {
    datagram.len() >= 3 && datagram[..2] == MAGIC.to_le_bytes() && datagram[2] == VERSION
}

fn put_value(out: &mut Vec<u8>, value: &[u8]) -> Result<()> {
    if value.len() > VALUE_BYTES_MAX {
        return Err(Error::TooLarge {
            what: "value",
            len: value.len(),
            max: VALUE_BYTES_MAX,
        });
    }
    out.extend_from_slice(&(value.len() as u16).to_le_bytes());
    out.extend_from_slice(value);
    Ok(())
}

fn put_item(out: &mut Vec<u8>, item: &Item) -> Result<()> {
    out.extend_from_slice(&item.key.to_le_bytes());
    out.extend_from_slice(&item.version.to_le_bytes());
    match &item.value {
        None if item.version == 0 => {
            out.push(0);
            put_value(out, &[])
        }
        None => {
            out.push(1);
            put_value(out, &[])
        }
        Some(v) => {
            out.push(2);
            put_value(out, v)
        }
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or(Error::Malformed("truncated"))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn bool(&mut self) -> Result<bool> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(Error::Malformed("bad boolean")),
        }
    }
    fn u16(&mut self) -> Result<u16> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(a))
    }
    fn u64(&mut self) -> Result<u64> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    fn value(&mut self) -> Result<Vec<u8>> {
        let len = self.u16()? as usize;
        if len > VALUE_BYTES_MAX {
            return Err(Error::Malformed("value longer than VALUE_BYTES_MAX"));
        }
        Ok(self.take(len)?.to_vec())
    }
    fn geometry(&mut self) -> Result<Geometry> {
        let b = self.u8()?;
        let g = self.u8()?;
        Geometry::new(b, g).map_err(|_| Error::Malformed("bad geometry"))
    }
    fn item(&mut self) -> Result<Item> {
        let key = self.u64()?;
        let version = self.u64()?;
        let state = self.u8()?;
        let value = self.value()?;
        let value = match state {
            0 if version == 0 && value.is_empty() => None,
            1 if version != 0 && value.is_empty() => None,
            2 => Some(value),
            _ => return Err(Error::Malformed("bad item state")),
        };
        Ok(Item {
            key,
            version,
            value,
        })
    }
}

#[cfg(test)]
mod tests;
