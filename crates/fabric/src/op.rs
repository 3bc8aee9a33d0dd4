//! Work requests and completions: the post/poll vocabulary shared by every fabric.

use crate::{FabricError, MachineId, RegionId};

/// Caller-chosen tag that comes back in the matching [`Completion`].
pub type WrId = u64;

/// The kind of a one-sided or two-sided operation; used by counters and fault injection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// One-sided READ.
    Read = 0,
    /// One-sided WRITE.
    Write = 1,
    /// One-sided 64-bit compare-and-swap.
    Cas = 2,
    /// One-sided 64-bit fetch-and-add.
    FetchAdd = 3,
    /// Two-sided SEND.
    Send = 4,
}

impl OpKind {
    /// Number of kinds (for counter arrays).
    pub const COUNT: usize = 5;
    /// All kinds, in index order.
    pub const ALL: [OpKind; Self::COUNT] = [
        OpKind::Read,
        OpKind::Write,
        OpKind::Cas,
        OpKind::FetchAdd,
        OpKind::Send,
    ];
    /// Lower-case name for reports.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::Write => "write",
            OpKind::Cas => "cas",
            OpKind::FetchAdd => "fetch_add",
            OpKind::Send => "send",
        }
    }
}

/// What a work request does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verb {
    /// Read `buf.len()` bytes into `buf` (the buffer is handed back in the completion).
    Read {
        /// Destination buffer; its length is the read length.
        buf: Vec<u8>,
    },
    /// Read `len` bytes into the initiating machine's own region `region` at
    /// byte `offset`, as an RDMA READ whose local buffer is registered memory:
    /// the bytes land where they are to stay, with no copy through a buffer
    /// (Pragh Fig. 6 line 6 reads a migrated value straight into the block
    /// allocated for it). The local bytes are written by the time the
    /// completion ([`Output::Placed`]) is reported; until then they are
    /// unspecified. The local range is checked like the remote one.
    ReadTo {
        /// The initiator's region the bytes land in.
        region: RegionId,
        /// Byte offset in that region (a multiple of 8).
        offset: u64,
        /// Bytes to read (a multiple of 8).
        len: u64,
    },
    /// Write `data` (handed back in the completion so it can be reused).
    Write {
        /// Bytes to write.
        data: Vec<u8>,
    },
    /// Atomically replace the word with `new` if it equals `expected`.
    Cas {
        /// Value the word must hold.
        expected: u64,
        /// Value to store.
        new: u64,
    },
    /// Atomically add `add` (wrapping) to the word.
    FetchAdd {
        /// Addend.
        add: u64,
    },
}

impl Verb {
    /// The counter kind of this verb.
    pub fn kind(&self) -> OpKind {
        match self {
            Verb::Read { .. } | Verb::ReadTo { .. } => OpKind::Read,
            Verb::Write { .. } => OpKind::Write,
            Verb::Cas { .. } => OpKind::Cas,
            Verb::FetchAdd { .. } => OpKind::FetchAdd,
        }
    }
    /// What it does at its target (fencing's rules 3 and 4).
    pub(crate) fn access(&self) -> crate::fencing::Access {
        match self {
            Verb::Read { .. } | Verb::ReadTo { .. } => crate::fencing::Access::Read,
            Verb::Write { .. } | Verb::Cas { .. } | Verb::FetchAdd { .. } => {
                crate::fencing::Access::Write
            }
        }
    }
    /// Payload bytes moved over the wire (8 for atomics).
    pub fn payload_bytes(&self) -> u64 {
        match self {
            Verb::Read { buf } => buf.len() as u64,
            Verb::ReadTo { len, .. } => *len,
            Verb::Write { data } => data.len() as u64,
            Verb::Cas { .. } | Verb::FetchAdd { .. } => 8,
        }
    }
}

/// A one-sided operation to post on a [`crate::Port`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkRequest {
    /// Tag returned in the completion.
    pub id: WrId,
    /// Target machine.
    pub target: MachineId,
    /// Target region on that machine.
    pub region: RegionId,
    /// Byte offset in the region (multiple of 8).
    pub offset: u64,
    /// The operation.
    pub verb: Verb,
    /// Fence: do not start this operation before every operation posted
    /// earlier on the same port has completed (RDMA's IBV_SEND_FENCE).
    pub fence: bool,
}

impl WorkRequest {
    /// A READ of `len` bytes.
    pub fn read(id: WrId, target: MachineId, region: RegionId, offset: u64, len: usize) -> Self {
        Self::read_into(id, target, region, offset, vec![0; len])
    }
    /// A READ into a caller-provided buffer (reused across operations).
    pub fn read_into(
        id: WrId,
        target: MachineId,
        region: RegionId,
        offset: u64,
        buf: Vec<u8>,
    ) -> Self {
        WorkRequest {
            id,
            target,
            region,
            offset,
            verb: Verb::Read { buf },
            fence: false,
        }
    }
    /// A READ of `len` bytes into the initiator's own region `local` at byte
    /// `local_offset` ([`Verb::ReadTo`]).
    pub fn read_to(
        id: WrId,
        target: MachineId,
        region: RegionId,
        offset: u64,
        local: RegionId,
        local_offset: u64,
        len: u64,
    ) -> Self {
        WorkRequest {
            id,
            target,
            region,
            offset,
            verb: Verb::ReadTo {
                region: local,
                offset: local_offset,
                len,
            },
            fence: false,
        }
    }
    /// A WRITE of `data`.
    pub fn write(
        id: WrId,
        target: MachineId,
        region: RegionId,
        offset: u64,
        data: Vec<u8>,
    ) -> Self {
        WorkRequest {
            id,
            target,
            region,
            offset,
            verb: Verb::Write { data },
            fence: false,
        }
    }
    /// A 64-bit compare-and-swap.
    pub fn cas(
        id: WrId,
        target: MachineId,
        region: RegionId,
        offset: u64,
        expected: u64,
        new: u64,
    ) -> Self {
        WorkRequest {
            id,
            target,
            region,
            offset,
            verb: Verb::Cas { expected, new },
            fence: false,
        }
    }
    /// A 64-bit fetch-and-add.
    pub fn fetch_add(id: WrId, target: MachineId, region: RegionId, offset: u64, add: u64) -> Self {
        WorkRequest {
            id,
            target,
            region,
            offset,
            verb: Verb::FetchAdd { add },
            fence: false,
        }
    }
    /// The same request with the fence flag set.
    pub fn fenced(mut self) -> Self {
        self.fence = true;
        self
    }
    /// Checks alignment (offset and length in whole words; for
    /// [`Verb::ReadTo`], the local offset too).
    pub fn check_alignment(&self) -> Result<(), FabricError> {
        if let Verb::ReadTo { offset, len, .. } = self.verb {
            check_alignment(offset, len)?;
        }
        check_alignment(self.offset, self.verb.payload_bytes())
    }
}

/// Checks that an access is in whole 8-byte words.
pub fn check_alignment(offset: u64, len: u64) -> Result<(), FabricError> {
    if !offset.is_multiple_of(8) || !len.is_multiple_of(8) {
        return Err(FabricError::Misaligned { offset, len });
    }
    Ok(())
}

/// What a completed operation produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// A READ's filled buffer.
    Data(Vec<u8>),
    /// A WRITE's buffer, handed back.
    Written(Vec<u8>),
    /// The word's previous value (CAS and fetch-add). A CAS succeeded iff this equals `expected`.
    Word(u64),
    /// A [`Verb::ReadTo`]'s bytes are in the initiator's region.
    Placed,
}

impl Output {
    /// The word of an atomic's completion.
    pub fn word(&self) -> Option<u64> {
        match self {
            Output::Word(w) => Some(*w),
            _ => None,
        }
    }
    /// The buffer of a READ or WRITE completion.
    pub fn into_buf(self) -> Option<Vec<u8>> {
        match self {
            Output::Data(b) | Output::Written(b) => Some(b),
            Output::Word(_) | Output::Placed => None,
        }
    }
}

/// The completion of one posted [`WorkRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The request's tag.
    pub id: WrId,
    /// The request's target machine.
    pub target: MachineId,
    /// The outcome.
    pub result: Result<Output, FabricError>,
}

/// A two-sided message as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The sending machine.
    pub from: MachineId,
    /// The payload, as sent.
    pub payload: Vec<u8>,
}
