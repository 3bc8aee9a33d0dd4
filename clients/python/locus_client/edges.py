"""Text edge lists, read as `locus load` reads them (crates/graph/src/input.rs).

Each line is two unsigned vertex ids ``src dst`` separated by blanks, a
blank line, or a comment whose first token starts with ``#`` or ``%``.
Anything else is an error naming the file, the 1-based line number and the
text. A whole input is read and checked before anything is sent, so a
malformed file loads nothing.

Then edges are grouped by home (the owner of each vertex's slot in the
slot table) into per-vertex neighbour lists in arrival order, which is the
order a server stores them in (LOAD merges in order, skipping neighbours it
already has).
"""

from __future__ import annotations

import os
from array import array
from typing import Any, Iterator, NamedTuple

from .protocol import HEADER_BYTES, IDS_MAX, LOAD_VERTICES_MAX, U32_MAX
from .slots import SlotTable

#: Largest vertex id in an edge file; u32::MAX is reserved (VERTEX_ID_MAX in crates/graph).
VERTEX_ID_MAX = U32_MAX - 1
#: Longest text line; a longer one is probably a binary file.
LINE_BYTES_MAX = 1 << 20
_QUOTE_CHARS_MAX = 60
_ID_DIGITS_MAX = len(str(VERTEX_ID_MAX))
_BLANKS = b" \t\r\x0b\x0c"
_RULE = "each line must be two unsigned vertex ids 'src dst', blank, or a comment starting with '#' or '%'"


class EdgeList(NamedTuple):
    """Edges in input order (``src[i] -> dst[i]``) and what they were read from."""

    name: str
    src: array
    dst: array


def _quote(text: str) -> str:
    return text if len(text) <= _QUOTE_CHARS_MAX else text[:_QUOTE_CHARS_MAX] + "..."


def _parse_line(line: bytes) -> tuple[int, int] | str | None:
    """An edge, None for a blank or comment line, or why the line is bad."""
    tokens = line.split()  # bytes.split() splits on exactly the ASCII blanks above and \n
    if not tokens or tokens[0][:1] in (b"#", b"%"):
        return None
    if len(tokens) != 2:
        return f"expected two vertex ids, found {len(tokens)}"
    ids = []
    for role, tok in (("source", tokens[0]), ("destination", tokens[1])):
        if not tok.isdigit():  # bytes.isdigit() is ASCII digits only
            return f"not an unsigned integer: '{_quote(tok.decode('utf-8', 'replace'))}'"
        # Cap the digits before int(): a long token is out of range anyway.
        if len(tok) > _ID_DIGITS_MAX or int(tok) > VERTEX_ID_MAX:
            return f"{role} vertex id {_quote(tok.decode())} exceeds the maximum {VERTEX_ID_MAX}"
        ids.append(int(tok))
    return ids[0], ids[1]


def _lines(source: Any) -> tuple[str, Iterator[bytes]]:
    if isinstance(source, (str, os.PathLike)):
        name = os.fspath(source)

        def read() -> Iterator[bytes]:
            try:
                f = open(name, "rb")
            except OSError as e:
                raise ValueError(f"{name}: cannot open the edge file: {e.strerror or e}") from None
            with f:
                while True:
                    # readline's limit bounds memory on a file without newlines.
                    line = f.readline(LINE_BYTES_MAX + 1)
                    if not line:
                        return
                    yield line

        return name, read()
    # An open file names itself; other iterables are just "<edges>".
    name = getattr(source, "name", None)
    return (name if isinstance(name, str) else "<edges>"), iter(source)


def read_edges(source: Any) -> EdgeList:
    """Reads a text edge list: a path, or an iterable of lines (str or bytes)
    or of ``(src, dst)`` pairs. Raises ``ValueError`` naming the input, the
    line (1-based) and its text for the first malformed line."""
    name, items = _lines(source)
    src, dst = array("I"), array("I")
    for line_no, item in enumerate(items, 1):
        if isinstance(item, (tuple, list)):
            edge = _check_pair(item)
            text = repr(item)
        else:
            raw = item.encode("utf-8", "surrogateescape") if isinstance(item, str) else bytes(item)
            if len(raw) > LINE_BYTES_MAX:
                raise ValueError(
                    f"{name}:{line_no}: line is longer than {LINE_BYTES_MAX} bytes; is this a binary edge list?"
                )
            edge = _parse_line(raw)
            text = raw.rstrip(b"\r\n").decode("utf-8", "replace")
        if isinstance(edge, str):
            raise ValueError(f"{name}:{line_no}: {edge} in line '{_quote(text)}'; {_RULE}")
        if edge is not None:
            src.append(edge[0])
            dst.append(edge[1])
    return EdgeList(name, src, dst)


def _check_pair(item: tuple | list) -> tuple[int, int] | str:
    if len(item) != 2:
        return f"expected two vertex ids, found {len(item)}"
    for role, x in zip(("source", "destination"), item):
        if isinstance(x, bool) or not isinstance(x, int) or x < 0:
            return f"not an unsigned integer: '{_quote(repr(x))}'"
        if x > VERTEX_ID_MAX:
            return f"{role} vertex id {x} exceeds the maximum {VERTEX_ID_MAX}"
    return item[0], item[1]


def adjacency(edges: EdgeList, undirected: bool, table: SlotTable | int) -> tuple[list[dict[int, list[int]]], int]:
    """Per home server, each vertex's neighbours in arrival order, and the
    number of neighbour ids in all. Homes are the owners of the vertices'
    slots in ``table`` (a ``SlotTable``; an int ``machines`` homes ``v`` at
    ``v % machines``). Undirected: both directions, self loops dropped (as
    `locus load`). Directed: edges as given, and every destination gets an
    (empty) entry too, so that every vertex of the file exists on the cluster."""
    if isinstance(table, SlotTable):
        owners, slots, machines = table.owners, table.slots, table.machines
    else:
        owners, slots, machines = tuple(range(table)), table, table
    homes: list[dict[int, list[int]]] = [{} for _ in range(machines)]
    total = 0
    for u, v in zip(edges.src, edges.dst):
        if undirected:
            if u == v:
                continue
            homes[owners[u % slots]].setdefault(u, []).append(v)
            homes[owners[v % slots]].setdefault(v, []).append(u)
            total += 2
        else:
            homes[owners[u % slots]].setdefault(u, []).append(v)
            homes[owners[v % slots]].setdefault(v, [])
            total += 1
    return homes, total


#: Bytes of a LOAD frame before its vertices: header, deadline_ms, vertex count.
LOAD_OVERHEAD_BYTES = HEADER_BYTES + 4 + 4
#: Bytes of one LOAD vertex before its ids: vertex, id count.
LOAD_VERTEX_BYTES = 8


def batches(adj: dict[int, list[int]], batch_edges: int, frame_bytes_max: int) -> Iterator[list[tuple[int, list[int]]]]:
    """LOAD batches of one home: at most ``batch_edges`` neighbour ids, at most
    LOAD_VERTICES_MAX vertices and at most ``frame_bytes_max`` bytes each. A
    long list is split over consecutive batches, which the server merges back
    in order (batches to one server are sent in order)."""
    if batch_edges < 1:
        raise ValueError(f"batch_edges = {batch_edges}, must be at least 1")
    if frame_bytes_max < LOAD_OVERHEAD_BYTES + LOAD_VERTEX_BYTES + 4:
        raise ValueError(f"frame_bytes_max = {frame_bytes_max} cannot hold a LOAD of one edge")
    batch: list[tuple[int, list[int]]] = []
    n_ids, n_bytes = 0, LOAD_OVERHEAD_BYTES
    for v, nbrs in adj.items():
        pos = 0
        while True:
            fits_vertex = len(batch) < LOAD_VERTICES_MAX and n_bytes + LOAD_VERTEX_BYTES <= frame_bytes_max
            room = 0
            if fits_vertex:
                room = min(batch_edges - n_ids, (frame_bytes_max - n_bytes - LOAD_VERTEX_BYTES) // 4, IDS_MAX)
            rest = len(nbrs) - pos
            if not fits_vertex or (rest > 0 and room <= 0):
                # A fresh batch always has room for a vertex and an id (checked above).
                yield batch
                batch, n_ids, n_bytes = [], 0, LOAD_OVERHEAD_BYTES
                continue
            take = min(rest, room)
            batch.append((v, nbrs[pos : pos + take]))
            n_ids += take
            n_bytes += LOAD_VERTEX_BYTES + 4 * take
            pos += take
            if pos == len(nbrs):
                break
    if batch:
        yield batch
