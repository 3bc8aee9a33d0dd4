//! The client protocol's types for slot moves (issue 59): MOVE's steps and
//! reply, and the migration index SLOTS sends as hints (docs/protocol.md).

/// The steps of a slot move a server takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum MoveStep {
    /// A: guard the batch for a move to `peer`.
    Guard = 1,
    /// B: take the batch over from `peer`.
    Take = 2,
    /// Any: install the committed table.
    Install = 3,
    /// A: take back what was handed to `peer`, end the guard.
    Release = 4,
    /// B: forget a batch A took back.
    Forget = 5,
    /// Any: the slots in flight through this server.
    Status = 6,
    /// Any: migrate home every value of this server's keys held at `peer`
    /// (before `peer` leaves the cluster).
    Recall = 7,
    /// A: hand the taken batch to `peer` (HANDED logged): `peer` owns it.
    Hand = 8,
    /// B: serve the handed batch from `peer` ahead of the table (SERVE logged).
    Serve = 9,
    /// Any live server but a new primary: `peer` failed; forget it and
    /// install the failed-over table (issue 60, R4).
    FailOver = 10,
    /// A new primary: serve the slots the failed-over table gives it from
    /// its backup lists (issue 60, R2).
    Promote = 11,
    /// A rejoin (issue 60): at the slots' owner, `peer` learns them (their
    /// updates go to it too); at `peer`, it takes the owner's records.
    Learn = 12,
    /// A rejoin: the slots' owner copies their lists to `peer`, which
    /// learns them.
    Copy = 13,
    /// A handover (issue 60): the slots' owner guards them for `peer`, a
    /// backup of them, and snapshots their lists into its backup log.
    HandOver = 14,
    /// A handover given up before its commit: the owner drops its snapshot
    /// and ends the guard.
    Unhand = 15,
}

impl MoveStep {
    pub(super) fn from_u8(b: u8) -> Option<MoveStep> {
        use MoveStep::*;
        Some(match b {
            1 => Guard,
            2 => Take,
            3 => Install,
            4 => Release,
            5 => Forget,
            6 => Status,
            7 => Recall,
            8 => Hand,
            9 => Serve,
            10 => FailOver,
            11 => Promote,
            12 => Learn,
            13 => Copy,
            14 => HandOver,
            15 => Unhand,
            _ => return None,
        })
    }
}

/// Slots one MOVE request may name.
pub const MOVE_SLOTS_MAX: usize = 1 << 16;
/// Keys one MOVE request or reply may list (8 MiB, half a frame).
pub const MOVE_KEYS_MAX: usize = 1 << 20;
/// A slot in flight through a server, as MOVE's reply lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotInFlight {
    /// The slot.
    pub slot: u32,
    /// Whether it is leaving (guarded here) or arriving (taken over here).
    pub leaving: bool,
    /// Past the group's decision: leaving, handed (HANDED logged here, the
    /// peer serves it); arriving, served here ahead of the table.
    pub handed: bool,
    /// The other server.
    pub peer: u8,
}

/// The migration index of the moves from one server to another (NetMigrate
/// 4.2 with groups = slots, `locus_placement::index`): a Bloom filter of
/// the slots handed to `to` (it serves them; state S3) and a counting Bloom
/// filter of the slots guarded and not handed yet (S2). Sent with SLOTS by
/// the old home; a client routes updates of an S3 slot to `to`. A false
/// positive costs a refused request, never a wrong answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoveHint {
    /// The old home (the server that answered).
    pub from: u8,
    /// The new home.
    pub to: u8,
    /// The Bloom filter's bytes ([`locus_placement::index::BloomFilter::to_bytes`]).
    pub bf: Vec<u8>,
    /// The counting Bloom filter's counters.
    pub cbf: Vec<u8>,
}

/// Bytes of one filter in a SLOTS reply's hint.
pub const HINT_FILTER_BYTES_MAX: usize = 1 << 16;
/// Hints in one SLOTS reply.
pub const HINTS_MAX: usize = 255;

/// What a MOVE step did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MoveReply {
    /// Vertices of the batch (TAKE).
    pub vertices: u64,
    /// Keys handed over (TAKE) or back (RELEASE).
    pub keys: u64,
    /// Bytes of values copied.
    pub bytes: u64,
    /// Slots the step took in hand or finished.
    pub slots: u64,
    /// Slots in flight through the server after the step.
    pub in_flight: Vec<SlotInFlight>,
    /// GUARD: the batch's keys in the guarding server's table.
    pub listed: Vec<u64>,
}
