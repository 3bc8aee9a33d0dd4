//! The one-way frames of the control link between servers and the
//! coordinator (docs/protocol.md section 5).

use super::*;

/// A job the coordinator hands a server (run as the target).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    /// Migrate the key's value here.
    Migrate = 1,
    /// Make a read-only replica here.
    Replicate = 2,
}

/// A report entry: accesses by the reporter to `key`, found at `holder`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessEntry {
    /// `vertex | part << 32`.
    pub key: u64,
    /// Where the reporter found the value.
    pub holder: u8,
    /// Accesses counted.
    pub count: u32,
}

/// A one-way frame of the control link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// A server introduces itself.
    Register {
        /// Its machine.
        machine: u8,
    },
    /// Periodic report.
    Report {
        /// Reporter.
        machine: u8,
        /// Interval covered.
        interval_ms: u64,
        /// Counts.
        accesses: Vec<AccessEntry>,
    },
    /// Instant report.
    Hot {
        /// Reporter.
        machine: u8,
        /// Time into the interval.
        elapsed_ms: u64,
        /// The key.
        access: AccessEntry,
    },
    /// Tracked counts (deferred mode).
    Tracked {
        /// The holder that tracked.
        machine: u8,
        /// How long.
        interval_ms: u64,
        /// (key, count).
        counts: Vec<(u64, u32)>,
    },
    /// Migrations ended: (key, to, ok).
    Migrated(Vec<(u64, u8, bool)>),
    /// Jobs for the receiving server.
    Jobs(Vec<(JobKind, u64)>),
    /// Start tracking these keys.
    Track(Vec<u64>),
    /// Stop tracking and report.
    Collect,
}

impl Control {
    /// The frame's op.
    pub fn op(&self) -> Op {
        match self {
            Control::Register { .. } => Op::Register,
            Control::Report { .. } => Op::Report,
            Control::Hot { .. } => Op::Hot,
            Control::Tracked { .. } => Op::Tracked,
            Control::Migrated(_) => Op::Migrated,
            Control::Jobs(_) => Op::Jobs,
            Control::Track(_) => Op::Track,
            Control::Collect => Op::Collect,
        }
    }

    /// Appends the frame (request id 0). Lists are at most
    /// [`CONTROL_LIST_MAX`]; senders split longer ones (asserted).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = begin_frame(out, self.op() as u8, 0);
        let mut e = Enc(out);
        match self {
            Control::Register { machine } => {
                e.u8(*machine);
            }
            Control::Report {
                machine,
                interval_ms,
                accesses,
            } => {
                assert!(accesses.len() <= CONTROL_LIST_MAX);
                e.u8(*machine).u64(*interval_ms).u32(accesses.len() as u32);
                for a in accesses {
                    e.u64(a.key).u8(a.holder).u32(a.count);
                }
            }
            Control::Hot {
                machine,
                elapsed_ms,
                access,
            } => {
                e.u8(*machine)
                    .u64(*elapsed_ms)
                    .u64(access.key)
                    .u8(access.holder)
                    .u32(access.count);
            }
            Control::Tracked {
                machine,
                interval_ms,
                counts,
            } => {
                assert!(counts.len() <= CONTROL_LIST_MAX);
                e.u8(*machine).u64(*interval_ms).u32(counts.len() as u32);
                for (k, c) in counts {
                    e.u64(*k).u32(*c);
                }
            }
            Control::Migrated(list) => {
                assert!(list.len() <= CONTROL_LIST_MAX);
                e.u32(list.len() as u32);
                for (k, to, ok) in list {
                    e.u64(*k).u8(*to).u8(*ok as u8);
                }
            }
            Control::Jobs(list) => {
                assert!(list.len() <= CONTROL_LIST_MAX);
                e.u32(list.len() as u32);
                for (kind, k) in list {
                    e.u8(*kind as u8).u64(*k);
                }
            }
            Control::Track(keys) => {
                assert!(keys.len() <= CONTROL_LIST_MAX);
                e.u32(keys.len() as u32);
                for k in keys {
                    e.u64(*k);
                }
            }
            Control::Collect => {}
        }
        end_frame(out, start);
    }

    /// Decodes a control frame's body.
    pub fn decode(op: u8, body: &[u8]) -> Result<Control, ProtoError> {
        let op = match Op::from_u8(op) {
            Some(o) if o.is_control() => o,
            _ => return Err(ProtoError::UnknownOp(op)),
        };
        let mut d = Dec::new(body, op.name());
        let c = match op {
            Op::Register => Control::Register {
                machine: d.u8("machine")?,
            },
            Op::Report => {
                let machine = d.u8("machine")?;
                let interval_ms = d.u64("interval_ms")?;
                let n = d.count("accesses", CONTROL_LIST_MAX, 13)?;
                let mut accesses = Vec::with_capacity(n);
                for _ in 0..n {
                    accesses.push(AccessEntry {
                        key: d.u64("key")?,
                        holder: d.u8("holder")?,
                        count: d.u32("count")?,
                    });
                }
                Control::Report {
                    machine,
                    interval_ms,
                    accesses,
                }
            }
            Op::Hot => Control::Hot {
                machine: d.u8("machine")?,
                elapsed_ms: d.u64("elapsed_ms")?,
                access: AccessEntry {
                    key: d.u64("key")?,
                    holder: d.u8("holder")?,
                    count: d.u32("count")?,
                },
            },
            Op::Tracked => {
                let machine = d.u8("machine")?;
                let interval_ms = d.u64("interval_ms")?;
                let n = d.count("counts", CONTROL_LIST_MAX, 12)?;
                let mut counts = Vec::with_capacity(n);
                for _ in 0..n {
                    counts.push((d.u64("key")?, d.u32("count")?));
                }
                Control::Tracked {
                    machine,
                    interval_ms,
                    counts,
                }
            }
            Op::Migrated => {
                let n = d.count("migrated", CONTROL_LIST_MAX, 10)?;
                let mut list = Vec::with_capacity(n);
                for _ in 0..n {
                    let k = d.u64("key")?;
                    let to = d.u8("to")?;
                    let ok = match d.u8("ok")? {
                        0 => false,
                        1 => true,
                        b => return Err(d.malformed(format!("ok = {b}, expected 0 or 1"))),
                    };
                    list.push((k, to, ok));
                }
                Control::Migrated(list)
            }
            Op::Jobs => {
                let n = d.count("jobs", CONTROL_LIST_MAX, 9)?;
                let mut list = Vec::with_capacity(n);
                for _ in 0..n {
                    let kind = match d.u8("kind")? {
                        1 => JobKind::Migrate,
                        2 => JobKind::Replicate,
                        b => return Err(d.malformed(format!("job kind {b}, expected 1 or 2"))),
                    };
                    list.push((kind, d.u64("key")?));
                }
                Control::Jobs(list)
            }
            Op::Track => {
                let n = d.count("keys", CONTROL_LIST_MAX, 8)?;
                let mut keys = Vec::with_capacity(n);
                for _ in 0..n {
                    keys.push(d.u64("key")?);
                }
                Control::Track(keys)
            }
            Op::Collect => Control::Collect,
            _ => unreachable!("client ops were rejected above"),
        };
        d.finish()?;
        Ok(c)
    }
}
