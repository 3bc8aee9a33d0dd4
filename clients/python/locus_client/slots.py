"""The slot table: which server homes each vertex (issue 59).

``slot(v) = v % slots``; a vertex's home is its slot's owner. The slot count
is fixed when a cluster is made; owners change only by moves, each change a
new epoch. The servers serve the table (op SLOTS) and check it: a server
asked about a vertex it does not home answers ``WRONG_HOME``. A client's
copy is therefore a hint, fetched again when a server refuses it.

Wire form (little-endian), as crates/placement/src/slots.rs writes it::

    offset  bytes  field
    0       4      magic "LSLT"
    4       2      version (1)
    6       2      machines: owners are below it, 1..=MACHINES_MAX
    8       8      epoch
    16      4      slots, 1..=SLOTS_MAX
    20      slots  owner of each slot, one byte

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
MAGIC = b"LSLT"
TABLE_VERSION = 1
TABLE_HEADER_BYTES = 20
#: Largest table in a SLOTS reply: the header and one byte per slot.
TABLE_BYTES_MAX = TABLE_HEADER_BYTES + SLOTS_MAX
#: Bytes of one filter of a SLOTS reply's hint, and hints per reply.
HINT_FILTER_BYTES_MAX = 1 << 16
HINTS_MAX = 255

_HEAD = struct.Struct("<4sHHQI")


def _shape_error(slots: int, machines: int) -> str | None:
    if not 1 <= slots <= SLOTS_MAX:
        return f"slots = {slots}: expected 1..={SLOTS_MAX}"
    if not 1 <= machines <= MACHINES_MAX:
        return f"machines = {machines}: expected 1..={MACHINES_MAX}"
    return None


class SlotTable:
    """An immutable slot table: ``epoch``, ``machines`` (the bound on owner
    ids), ``slots`` and ``owners`` (one per slot, in slot order)."""

    __slots__ = ("epoch", "machines", "owners")

    epoch: int
    machines: int
    owners: tuple[int, ...]

    def __init__(self, epoch: int, machines: int, owners: Iterable[int]):
        owners = tuple(owners)
        if not 0 <= epoch <= 0xFFFF_FFFF_FFFF_FFFF:
            raise ValueError(f"epoch = {epoch}, must fit a u64")
        why = _shape_error(len(owners), machines)
        if why:
            raise ValueError(f"slot table: {why}")
        for i, o in enumerate(owners):
            if not 0 <= o < machines:
                raise ValueError(f"slot table: slot {i}'s owner {o} is not below {machines} machines")
        object.__setattr__(self, "epoch", epoch)
        object.__setattr__(self, "machines", machines)
        object.__setattr__(self, "owners", owners)

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

    def with_owners(self, moves: Mapping[int, int]) -> SlotTable:
        """The table after moving each slot of ``moves`` to its new owner, at the next epoch."""
        owners = list(self.owners)
        for slot, to in moves.items():
            owners[slot] = to
        return SlotTable(self.epoch + 1, self.machines, owners)

    def encode(self) -> bytes:
        """The wire form (see the module doc)."""
        return _HEAD.pack(MAGIC, TABLE_VERSION, self.machines, self.epoch, self.slots) + bytes(self.owners)

    @classmethod
    def decode(cls, b: bytes) -> SlotTable:
        """Reads the wire form, checking every field; ``ProtocolError`` names the byte at fault."""
        b = bytes(b)

        def malformed(at: int, what: str) -> ProtocolError:
            return ProtocolError(f"slot table, byte {at}: {what}")

        if len(b) < TABLE_HEADER_BYTES:
            raise malformed(len(b), f"{len(b)} bytes, shorter than the {TABLE_HEADER_BYTES}-byte header")
        magic, version, machines, epoch, slots = _HEAD.unpack_from(b)
        if magic != MAGIC:
            raise malformed(0, f"magic {magic!r}, not \"LSLT\"")
        if version != TABLE_VERSION:
            raise malformed(4, f"version {version}, this client reads {TABLE_VERSION}")
        why = _shape_error(slots, machines)
        if why:
            raise malformed(6, why)
        owners = b[TABLE_HEADER_BYTES:]
        if len(owners) != slots:
            raise malformed(TABLE_HEADER_BYTES, f"{len(owners)} owner bytes for {slots} slots")
        bad = next((i for i, o in enumerate(owners) if o >= machines), None)
        if bad is not None:
            raise malformed(
                TABLE_HEADER_BYTES + bad, f"slot {bad}'s owner {owners[bad]} is not below {machines} machines"
            )
        return cls(epoch, machines, owners)

    def fields(self) -> dict[str, Any]:
        """The table as frames.json keys a SLOTS reply."""
        return {"epoch": self.epoch, "machines": self.machines, "slots": self.slots, "owners": list(self.owners)}

    @classmethod
    def from_fields(cls, f: Mapping[str, Any]) -> SlotTable:
        """The table of a SLOTS reply's fields (``slots``, if given, must match the owners)."""
        owners: Sequence[int] = f["owners"]
        if "slots" in f and f["slots"] != len(owners):
            raise ValueError(f"slots = {f['slots']} but {len(owners)} owners")
        return cls(f["epoch"], f["machines"], owners)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SlotTable):
            return NotImplemented
        return (self.epoch, self.machines, self.owners) == (other.epoch, other.machines, other.owners)

    def __hash__(self) -> int:
        return hash((self.epoch, self.machines, self.owners))

    def __repr__(self) -> str:
        return f"SlotTable(epoch={self.epoch}, machines={self.machines}, slots={self.slots})"


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
