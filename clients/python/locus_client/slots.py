"""The slot table: which server homes each vertex (issue 59), and which
servers back each slot up (issue 60).

``slot(v) = v % slots``; a vertex's home is its slot's owner. The slot count
is fixed when a cluster is made; owners change only by moves and fail-overs,
each change a new epoch. The servers serve the table (op SLOTS) and check it:
a server asked about a vertex it does not home answers ``WRONG_HOME``. A
client's copy is therefore a hint, fetched again when a server refuses it.

Replication: the table asks for R copies of each slot (``replication``,
1..=3), the owner's and up to R - 1 backups' (``backups``: never the owner,
no repeats; fewer after a failure until the slot is copied again). Each slot
has a primary epoch (``primary_epochs``, >= 1), one more at each fail-over
and, with R > 1, at each move.

Wire form (little-endian), as crates/placement/src/slots.rs writes it.
Version 1 when R = 1 and every primary epoch is 1, version 2 otherwise::

    offset    bytes  field
    0         4      magic "LSLT"
    4         2      version (1 or 2)
    6         2      machines: owners and backups are below it, 1..=MACHINES_MAX
    8         8      epoch
    16        4      slots, 1..=SLOTS_MAX
    20        slots  owner of each slot, one byte
                     (version 1 ends here; version 2 goes on)
    20+slots  1      R, the replication asked for, 1..=REPLICATION_MAX
    21+slots         per slot, in slot order:
                4      its primary epoch, >= 1
                1      n, its backup count, 0..=R-1
                n      its backups, one byte each: below machines, not the
                       owner, no repeats
                     (nothing follows the last slot)

No I/O here. ``SlotTable.decode`` checks every field as the Rust
``SlotTable::decode`` does and raises ``ProtocolError`` naming the byte.
"""

from __future__ import annotations

import struct
from typing import Any, Iterable, Mapping, Sequence

from .errors import ProtocolError

#: Slots of a new cluster unless configured.
SLOTS_DEFAULT = 4096
#: Most slots a table may have.
SLOTS_MAX = 1 << 16
#: Most machines (a machine id is one byte, below 128 as the fabric's).
MACHINES_MAX = 128
#: Most copies of a slot a table may ask for: its owner's and two backups'.
REPLICATION_MAX = 3
MAGIC = b"LSLT"
#: Owners only: R = 1 and every primary epoch 1.
TABLE_VERSION = 1
#: Owners, R, and per slot a primary epoch and backups.
TABLE_VERSION_REPLICATED = 2
TABLE_HEADER_BYTES = 20
#: Longest encoding: version 2, every slot with REPLICATION_MAX - 1 backups.
TABLE_ENCODED_BYTES_MAX = TABLE_HEADER_BYTES + 1 + SLOTS_MAX * (1 + 4 + 1 + REPLICATION_MAX - 1)
#: Largest table in a SLOTS reply: the longest encoding (the Rust client's
#: ``SLOTS_TABLE_BYTES_MAX`` is the same).
TABLE_BYTES_MAX = TABLE_ENCODED_BYTES_MAX
#: Bytes of one filter of a SLOTS reply's hint, and hints per reply.
HINT_FILTER_BYTES_MAX = 1 << 16
HINTS_MAX = 255

_HEAD = struct.Struct("<4sHHQI")
_SLOT_ENTRY = struct.Struct("<IB")


def _shape_error(slots: int, machines: int) -> str | None:
    if not 1 <= slots <= SLOTS_MAX:
        return f"slots = {slots}: expected 1..={SLOTS_MAX}"
    if not 1 <= machines <= MACHINES_MAX:
        return f"machines = {machines}: expected 1..={MACHINES_MAX}"
    return None


def _backups_error(slot: int, owner: int, backups: Sequence[int], machines: int, replication: int) -> str | None:
    """Why ``backups`` cannot be ``slot``'s (None if they can)."""
    if len(backups) > replication - 1:
        return f"slot {slot} has {len(backups)} backups, more than R - 1 = {replication - 1}"
    for i, m in enumerate(backups):
        if not 0 <= m < machines:
            return f"slot {slot}'s backup {m} is not below {machines} machines"
        if m == owner:
            return f"slot {slot}'s backup {m} is its owner"
        if m in backups[:i]:
            return f"slot {slot}'s backup {m} is named twice"
    return None


class SlotTable:
    """An immutable slot table: ``epoch``, ``machines`` (the bound on owner
    ids), ``slots``, ``owners`` (one per slot, in slot order), and its
    replication: ``replication`` (R), ``backups`` (a tuple of backups per
    slot) and ``primary_epochs`` (one per slot). Without replication R is 1,
    every slot's backups empty and every primary epoch 1."""

    __slots__ = ("epoch", "machines", "owners", "replication", "backups", "primary_epochs")

    epoch: int
    machines: int
    owners: tuple[int, ...]
    replication: int
    backups: tuple[tuple[int, ...], ...]
    primary_epochs: tuple[int, ...]

    def __init__(
        self,
        epoch: int,
        machines: int,
        owners: Iterable[int],
        replication: int = 1,
        backups: Iterable[Iterable[int]] | None = None,
        primary_epochs: Iterable[int] | None = None,
    ):
        owners = tuple(owners)
        if not 0 <= epoch <= 0xFFFF_FFFF_FFFF_FFFF:
            raise ValueError(f"epoch = {epoch}, must fit a u64")
        why = _shape_error(len(owners), machines)
        if why:
            raise ValueError(f"slot table: {why}")
        for i, o in enumerate(owners):
            if not 0 <= o < machines:
                raise ValueError(f"slot table: slot {i}'s owner {o} is not below {machines} machines")
        if not 1 <= replication <= REPLICATION_MAX:
            raise ValueError(f"slot table: replication = {replication}: expected 1..={REPLICATION_MAX}")
        # Defaults (no replication) need no check: a version 1 table of
        # SLOTS_MAX slots stays as quick to make as before.
        if backups is None:
            backups = ((),) * len(owners)
        else:
            backups = tuple(tuple(b) for b in backups)
            if len(backups) != len(owners):
                raise ValueError(f"slot table: {len(backups)} backups for {len(owners)} slots")
            for i, b in enumerate(backups):
                why = _backups_error(i, owners[i], b, machines, replication)
                if why:
                    raise ValueError(f"slot table: {why}")
        if primary_epochs is None:
            primary_epochs = (1,) * len(owners)
        else:
            primary_epochs = tuple(primary_epochs)
            if len(primary_epochs) != len(owners):
                raise ValueError(f"slot table: {len(primary_epochs)} primary_epochs for {len(owners)} slots")
            for i, e in enumerate(primary_epochs):
                if not 1 <= e <= 0xFFFF_FFFF:
                    raise ValueError(f"slot table: slot {i}'s primary epoch {e} is not in 1..=u32::MAX")
        object.__setattr__(self, "epoch", epoch)
        object.__setattr__(self, "machines", machines)
        object.__setattr__(self, "owners", owners)
        object.__setattr__(self, "replication", replication)
        object.__setattr__(self, "backups", backups)
        object.__setattr__(self, "primary_epochs", primary_epochs)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a SlotTable is immutable")

    @classmethod
    def uniform(cls, slots: int, machines: int, epoch: int = 1) -> SlotTable:
        """A new cluster's table: slot ``s`` owned by ``s % machines``."""
        return cls(epoch, machines, (s % machines for s in range(slots)))

    @property
    def slots(self) -> int:
        return len(self.owners)

    def slot_of(self, v: int) -> int:
        """``v``'s slot."""
        return v % len(self.owners)

    def owner_of(self, v: int) -> int:
        """The owner of ``v``'s slot: ``v``'s home."""
        return self.owners[v % len(self.owners)]

    def backups_of(self, v: int) -> tuple[int, ...]:
        """The backups of ``v``'s slot."""
        return self.backups[v % len(self.owners)]

    def with_owners(self, moves: Mapping[int, int]) -> SlotTable:
        """The table after moving each slot of ``moves`` to its new owner, at
        the next epoch. As the Rust ``after``: a slot's backups stay, a move
        onto one is refused, and with R > 1 a moved slot's primary epoch grows."""
        owners, epochs = list(self.owners), list(self.primary_epochs)
        for slot, to in moves.items():
            if to in self.backups[slot]:
                raise ValueError(f"slot {slot} cannot move onto its backup {to}")
            if to != owners[slot] and self.replication > 1:
                epochs[slot] += 1
            owners[slot] = to
        return SlotTable(self.epoch + 1, self.machines, owners, self.replication, self.backups, epochs)

    def _is_v1(self) -> bool:
        return self.replication == 1 and all(e == 1 for e in self.primary_epochs)

    def encode(self) -> bytes:
        """The wire form (see the module doc): version 1 when it can say all, version 2 otherwise."""
        version = TABLE_VERSION if self._is_v1() else TABLE_VERSION_REPLICATED
        b = _HEAD.pack(MAGIC, version, self.machines, self.epoch, self.slots) + bytes(self.owners)
        if version == TABLE_VERSION:
            return b
        parts = [b, bytes([self.replication])]
        for e, backups in zip(self.primary_epochs, self.backups):
            parts.append(_SLOT_ENTRY.pack(e, len(backups)) + bytes(backups))
        return b"".join(parts)

    @classmethod
    def decode(cls, b: bytes) -> SlotTable:
        """Reads the wire form (either version), checking every field; ``ProtocolError`` names the byte at fault."""
        b = bytes(b)

        def malformed(at: int, what: str) -> ProtocolError:
            return ProtocolError(f"slot table, byte {at}: {what}")

        if len(b) < TABLE_HEADER_BYTES:
            raise malformed(len(b), f"{len(b)} bytes, shorter than the {TABLE_HEADER_BYTES}-byte header")
        magic, version, machines, epoch, slots = _HEAD.unpack_from(b)
        if magic != MAGIC:
            raise malformed(0, f"magic {magic!r}, not \"LSLT\"")
        if version not in (TABLE_VERSION, TABLE_VERSION_REPLICATED):
            raise malformed(
                4, f"version {version}, this client reads {TABLE_VERSION} and {TABLE_VERSION_REPLICATED}"
            )
        why = _shape_error(slots, machines)
        if why:
            raise malformed(6, why)
        rest = len(b) - TABLE_HEADER_BYTES
        if rest < slots or (version == TABLE_VERSION and rest != slots):
            raise malformed(TABLE_HEADER_BYTES, f"{rest} owner bytes for {slots} slots")
        owners = b[TABLE_HEADER_BYTES : TABLE_HEADER_BYTES + slots]
        bad = next((i for i, o in enumerate(owners) if o >= machines), None)
        if bad is not None:
            raise malformed(
                TABLE_HEADER_BYTES + bad, f"slot {bad}'s owner {owners[bad]} is not below {machines} machines"
            )
        if version == TABLE_VERSION:
            return cls(epoch, machines, owners)
        at = TABLE_HEADER_BYTES + slots
        if at >= len(b):
            raise malformed(at, "no replication byte after the owners (version 2)")
        r = b[at]
        if not 1 <= r <= REPLICATION_MAX:
            raise malformed(at, f"replication = {r}: expected 1..={REPLICATION_MAX}")
        at += 1
        backups: list[bytes] = []
        epochs: list[int] = []
        for slot in range(slots):
            if len(b) - at < _SLOT_ENTRY.size:
                raise malformed(
                    len(b),
                    f"slot {slot}'s entry at byte {at}: {len(b) - at} bytes left, {_SLOT_ENTRY.size} needed",
                )
            e, n = _SLOT_ENTRY.unpack_from(b, at)
            if e == 0:
                raise malformed(at, f"slot {slot}'s primary epoch is 0, not at least 1")
            if n > r - 1:
                raise malformed(at + 4, f"slot {slot} has {n} backups, more than R - 1 = {r - 1}")
            at += _SLOT_ENTRY.size
            if len(b) - at < n:
                raise malformed(len(b), f"slot {slot}'s {n} backups at byte {at}: {len(b) - at} bytes left")
            entry = b[at : at + n]
            for i, m in enumerate(entry):
                if m >= machines:
                    why = f"is not below {machines} machines"
                elif m == owners[slot]:
                    why = "is its owner"
                elif m in entry[:i]:
                    why = "is named twice"
                else:
                    continue
                raise malformed(at + i, f"slot {slot}'s backup {m} {why}")
            epochs.append(e)
            backups.append(entry)
            at += n
        if at != len(b):
            raise malformed(at, f"{len(b) - at} bytes past the last slot")
        return cls(epoch, machines, owners, r, backups, epochs)

    def fields(self) -> dict[str, Any]:
        """The table as frames.json keys a SLOTS reply (replication keys only for a version 2 table)."""
        f: dict[str, Any] = {
            "epoch": self.epoch,
            "machines": self.machines,
            "slots": self.slots,
            "owners": list(self.owners),
        }
        if not self._is_v1():
            f["replication"] = self.replication
            f["backups"] = [list(b) for b in self.backups]
            f["primary_epochs"] = list(self.primary_epochs)
        return f

    @classmethod
    def from_fields(cls, f: Mapping[str, Any]) -> SlotTable:
        """The table of a SLOTS reply's fields (``slots``, if given, must match the owners)."""
        owners: Sequence[int] = f["owners"]
        if "slots" in f and f["slots"] != len(owners):
            raise ValueError(f"slots = {f['slots']} but {len(owners)} owners")
        return cls(
            f["epoch"], f["machines"], owners, f.get("replication", 1), f.get("backups"), f.get("primary_epochs")
        )

    def _key(self) -> tuple:
        return (self.epoch, self.machines, self.owners, self.replication, self.backups, self.primary_epochs)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SlotTable):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"SlotTable(epoch={self.epoch}, machines={self.machines}, slots={self.slots}, "
            f"replication={self.replication})"
        )


_M64 = (1 << 64) - 1
#: The migration index's hash seeds (``crates/placement/src/index.rs``).
_INDEX_SEEDS = (0x243F6A8885A308D3, 0x13198A2E03707344, 0xA4093822299F31D0, 0x082EFA98EC4E6C89)


def _mix64(x: int) -> int:
    """``locus_placement::mix64`` (splitmix64's finalizer)."""
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


class MoveHint:
    """One move's migration index, as a server's SLOTS reply gives it
    (NetMigrate 4.2, a group being a slot): the Bloom filter of slots the old
    home ``source`` handed to ``target`` (which serves them) and the counting
    Bloom filter of slots in flight. A hint: the servers decide, and a false
    positive costs a refused request, never a wrong answer."""

    def __init__(self, source: int, target: int, bf: bytes, cbf: bytes):
        if not bf or not cbf:
            raise ProtocolError("a hint's filters are empty")
        self.source, self.target, self._bf, self._cbf = source, target, bf, cbf

    @classmethod
    def from_fields(cls, f: Mapping[str, Any]) -> "MoveHint":
        return cls(f["from"], f["to"], bytes.fromhex(f["bf"]), bytes.fromhex(f["cbf"]))

    def _places(self, slot: int, entries: int) -> list[int]:
        return [_mix64((slot ^ s) & _M64) % entries for s in _INDEX_SEEDS]

    def handed(self, slot: int) -> bool:
        """Whether the slot may have been handed (S3 or S4)."""
        return all(self._bf[b // 8] >> (b % 8) & 1 for b in self._places(slot, len(self._bf) * 8))

    def in_flight(self, slot: int) -> bool:
        """Whether the slot may be in flight, not handed yet (S2 or S4)."""
        return all(self._cbf[c] > 0 for c in self._places(slot, len(self._cbf)))

    def update_goes_to_target(self, slot: int) -> bool:
        """Whether an update goes to the new home: a slot handed to it (S3,
        or S4 where the filters cannot tell). NetMigrate Fig. 3 sends S2
        writes there too, which pulls what it lacks; here a new home serves
        a slot only once it is handed, so S2 writes stay with the old home."""
        return self.handed(slot)
