//! The client protocol's requests and replies (docs/protocol.md section 3).

use super::*;

/// A client request (without its deadline).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// First frame: the client's name.
    Hello {
        /// Free text naming the client (logs).
        client: String,
    },
    /// Liveness.
    Ping,
    /// The whole lists of these vertices (at most [`LISTS_VERTICES_MAX`]),
    /// read together at the server.
    Lists {
        /// The vertices, in the order their lists come back.
        vertices: Vec<u32>,
    },
    /// Up to `k` neighbours (0: all).
    Neighbors {
        /// The vertex.
        vertex: u32,
        /// Neighbours wanted; 0 for all.
        k: u32,
    },
    /// Up to `k` neighbours (0: all), read from the receiving server's
    /// backup of the vertex's slot if it holds one (may be stale), else as
    /// [`Request::Neighbors`] reads them.
    StaleNeighbors {
        /// The vertex.
        vertex: u32,
        /// Neighbours wanted; 0 for all.
        k: u32,
    },
    /// Replace the adjacency list.
    Put {
        /// The vertex.
        vertex: u32,
        /// Its new list.
        ids: Vec<u32>,
    },
    /// Add `vertex -> neighbor`.
    InsertEdge {
        /// Source.
        vertex: u32,
        /// Target.
        neighbor: u32,
    },
    /// Remove `vertex -> neighbor`.
    DeleteEdge {
        /// Source.
        vertex: u32,
        /// Target.
        neighbor: u32,
    },
    /// k-hop traversal from `vertex`.
    Khop {
        /// Start vertex.
        vertex: u32,
        /// Hops, 1..=8.
        hops: u8,
        /// Neighbours per vertex per hop, 1..=1,000,000.
        k: u32,
    },
    /// Bulk load batch: neighbours to merge into each vertex's list.
    Load {
        /// (vertex, neighbours to add).
        vertices: Vec<(u32, Vec<u32>)>,
    },
    /// Move `vertex`'s value to the receiving server.
    Migrate {
        /// The vertex.
        vertex: u32,
    },
    /// Remove `vertex` (its whole list).
    DeleteVertex {
        /// The vertex.
        vertex: u32,
    },
    /// Where `vertex`'s value is.
    Where {
        /// The vertex.
        vertex: u32,
    },
    /// Server statistics.
    Stats,
    /// The slot table the server holds.
    Slots,
    /// The servers the server knows, with their client addresses.
    Servers,
    /// A step of a slot move (`docs/design.md`, "Moves across servers").
    Move {
        /// Which step.
        step: MoveStep,
        /// The other server of the move (guard: B; take: A; release: B).
        peer: u8,
        /// The batch's slots.
        slots: Vec<u32>,
        /// INSTALL: the table in its wire form (else empty).
        table: Vec<u8>,
        /// TAKE: the batch's keys as the guard listed them (`vertex | part << 32`).
        keys: Vec<u64>,
    },
}

/// Vertices one LISTS request may ask for.
pub const LISTS_VERTICES_MAX: usize = 1 << 16;
/// A LISTS reply's length of a vertex with no entry.
pub const LIST_ABSENT: u32 = u32::MAX;

impl Reply {
    /// A LISTS reply's lists, in the request's order (`None`: no entry);
    /// `None` for any other reply.
    pub fn lists(&self) -> Option<Vec<Option<&[u32]>>> {
        let Reply::Lists { lens, ids } = self else {
            return None;
        };
        let mut at = 0;
        Some(
            lens.iter()
                .map(|&n| {
                    (n != LIST_ABSENT).then(|| {
                        let l = &ids[at..at + n as usize];
                        at += n as usize;
                        l
                    })
                })
                .collect(),
        )
    }
}

impl Request {
    /// The request's op.
    pub fn op(&self) -> Op {
        match self {
            Request::Hello { .. } => Op::Hello,
            Request::Ping => Op::Ping,
            Request::Neighbors { .. } => Op::Neighbors,
            Request::StaleNeighbors { .. } => Op::StaleNeighbors,
            Request::Put { .. } => Op::Put,
            Request::InsertEdge { .. } => Op::InsertEdge,
            Request::DeleteEdge { .. } => Op::DeleteEdge,
            Request::Khop { .. } => Op::Khop,
            Request::Load { .. } => Op::Load,
            Request::Migrate { .. } => Op::Migrate,
            Request::Where { .. } => Op::Where,
            Request::DeleteVertex { .. } => Op::DeleteVertex,
            Request::Stats => Op::Stats,
            Request::Slots => Op::Slots,
            Request::Servers => Op::Servers,
            Request::Lists { .. } => Op::Lists,
            Request::Move { .. } => Op::Move,
        }
    }

    /// Appends the request as a frame. Lists past their limits are the
    /// caller's bug (the client splits loads); they are asserted.
    pub fn encode(&self, out: &mut Vec<u8>, id: u64, deadline_ms: u32) {
        let start = begin_frame(out, self.op() as u8, id);
        let mut e = Enc(out);
        e.u32(deadline_ms);
        match self {
            Request::Hello { client } => {
                e.str(client, NAME_MAX);
            }
            Request::Ping | Request::Stats | Request::Slots | Request::Servers => {}
            Request::Neighbors { vertex, k } | Request::StaleNeighbors { vertex, k } => {
                e.u32(*vertex).u32(*k);
            }
            Request::Lists { vertices } => {
                assert!(vertices.len() <= LISTS_VERTICES_MAX);
                e.ids(vertices);
            }
            Request::Put { vertex, ids } => {
                assert!(ids.len() <= IDS_MAX, "PUT of {} ids", ids.len());
                e.u32(*vertex).ids(ids);
            }
            Request::InsertEdge { vertex, neighbor } | Request::DeleteEdge { vertex, neighbor } => {
                e.u32(*vertex).u32(*neighbor);
            }
            Request::Khop { vertex, hops, k } => {
                e.u32(*vertex).u8(*hops).u32(*k);
            }
            Request::Load { vertices } => {
                assert!(vertices.len() <= LOAD_VERTICES_MAX);
                e.u32(vertices.len() as u32);
                for (v, ids) in vertices {
                    assert!(ids.len() <= IDS_MAX);
                    e.u32(*v).ids(ids);
                }
            }
            Request::Migrate { vertex }
            | Request::Where { vertex }
            | Request::DeleteVertex { vertex } => {
                e.u32(*vertex);
            }
            Request::Move {
                step,
                peer,
                slots,
                table,
                keys,
            } => {
                assert!(slots.len() <= MOVE_SLOTS_MAX && table.len() <= SLOTS_TABLE_BYTES_MAX);
                assert!(keys.len() <= MOVE_KEYS_MAX);
                e.u8(*step as u8).u8(*peer).ids(slots);
                e.u32(table.len() as u32);
                e.0.extend_from_slice(table);
                e.u32(keys.len() as u32);
                for k in keys {
                    e.u64(*k);
                }
            }
        }
        end_frame(out, start);
    }

    /// Decodes a request body of `op`; returns its deadline and the request.
    /// Control ops are [`ProtoError::UnknownOp`] here (see [`Control::decode`]).
    pub fn decode(op: u8, body: &[u8]) -> Result<(u32, Request), ProtoError> {
        let op = match Op::from_u8(op) {
            Some(o) if !o.is_control() => o,
            _ => return Err(ProtoError::UnknownOp(op)),
        };
        let mut d = Dec::new(body, op.name());
        let deadline_ms = d.u32("deadline_ms")?;
        if deadline_ms == 0 || deadline_ms > DEADLINE_MS_MAX {
            return Err(ProtoError::Invalid {
                field: "deadline_ms",
                value: deadline_ms as u64,
                expected: "must be 1..=3600000",
            });
        }
        let r = match op {
            Op::Hello => Request::Hello {
                client: d.str("client", NAME_MAX)?,
            },
            Op::Ping => Request::Ping,
            Op::Stats => Request::Stats,
            Op::Slots => Request::Slots,
            Op::Servers => Request::Servers,
            Op::Neighbors => Request::Neighbors {
                vertex: d.u32("vertex")?,
                k: d.u32("k")?,
            },
            Op::StaleNeighbors => Request::StaleNeighbors {
                vertex: d.u32("vertex")?,
                k: d.u32("k")?,
            },
            Op::Lists => Request::Lists {
                vertices: d.ids("vertices", LISTS_VERTICES_MAX)?,
            },
            Op::Put => Request::Put {
                vertex: d.u32("vertex")?,
                ids: d.ids("ids", IDS_MAX)?,
            },
            Op::InsertEdge => Request::InsertEdge {
                vertex: d.u32("vertex")?,
                neighbor: d.u32("neighbor")?,
            },
            Op::DeleteEdge => Request::DeleteEdge {
                vertex: d.u32("vertex")?,
                neighbor: d.u32("neighbor")?,
            },
            Op::Khop => {
                let vertex = d.u32("vertex")?;
                let hops = d.u8("hops")?;
                let k = d.u32("k")?;
                if hops == 0 || hops > HOPS_MAX {
                    return Err(ProtoError::Invalid {
                        field: "hops",
                        value: hops as u64,
                        expected: "must be 1..=8",
                    });
                }
                if k == 0 || k > K_MAX {
                    return Err(ProtoError::Invalid {
                        field: "k",
                        value: k as u64,
                        expected: "must be 1..=1000000",
                    });
                }
                Request::Khop { vertex, hops, k }
            }
            Op::Load => {
                let n = d.count("vertices", LOAD_VERTICES_MAX, 8)?;
                let mut vertices = Vec::with_capacity(n);
                for _ in 0..n {
                    let v = d.u32("vertex")?;
                    vertices.push((v, d.ids("ids", IDS_MAX)?));
                }
                Request::Load { vertices }
            }
            Op::Migrate => Request::Migrate {
                vertex: d.u32("vertex")?,
            },
            Op::Where => Request::Where {
                vertex: d.u32("vertex")?,
            },
            Op::DeleteVertex => Request::DeleteVertex {
                vertex: d.u32("vertex")?,
            },
            Op::Move => {
                let b = d.u8("step")?;
                let step = MoveStep::from_u8(b).ok_or(ProtoError::Invalid {
                    field: "step",
                    value: b as u64,
                    expected: "must be 1..=7",
                })?;
                let peer = d.u8("peer")?;
                let slots = d.ids("slots", MOVE_SLOTS_MAX)?;
                let n = d.count("table", SLOTS_TABLE_BYTES_MAX, 1)?;
                let table = d.take(n, "table")?.to_vec();
                let n = d.count("keys", MOVE_KEYS_MAX, 8)?;
                let mut keys = Vec::with_capacity(n);
                for _ in 0..n {
                    keys.push(d.u64("key")?);
                }
                Request::Move {
                    step,
                    peer,
                    slots,
                    table,
                    keys,
                }
            }
            _ => unreachable!("control ops were rejected above"),
        };
        d.finish()?;
        Ok((deadline_ms, r))
    }
}

/// What a k-hop query found and cost.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KhopReply {
    /// Last frontier's size counting repeats.
    pub with_repeats: u64,
    /// Server-side time of the traversal.
    pub elapsed_ns: u64,
    /// One-sided operations to the server's own machine.
    pub local_ops: u64,
    /// One-sided operations to other machines.
    pub remote_ops: u64,
    /// Payload bytes of the local operations.
    pub local_bytes: u64,
    /// Payload bytes of the remote operations.
    pub remote_bytes: u64,
    /// Distinct vertices of the last frontier, increasing.
    pub distinct: Vec<u32>,
}

/// A reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// HELLO accepted.
    Hello {
        /// The server's machine.
        server_id: u8,
        /// Machines in the cluster.
        machines: u16,
        /// The frame limit on this connection.
        frame_bytes_max: u32,
        /// Server version text.
        server: String,
    },
    /// PING answered.
    Pong,
    /// Neighbours.
    Neighbors(Vec<u32>),
    /// STALE_NEIGHBORS: neighbours, and whether they came from a backup's
    /// copy (possibly stale) rather than a read at the primary.
    StaleNeighbors {
        /// Read from the answering server's backup of the slot.
        from_backup: bool,
        /// The neighbours.
        ids: Vec<u32>,
    },
    /// LISTS: each vertex's list length in the request's order
    /// ([`LIST_ABSENT`]: no entry), then every list back to back.
    Lists {
        /// One per vertex asked.
        lens: Vec<u32>,
        /// The lists, concatenated.
        ids: Vec<u32>,
    },
    /// PUT applied.
    Put,
    /// INSERT_EDGE or DELETE_EDGE: whether the list changed.
    Changed(bool),
    /// DELETE_VERTEX: the list the vertex had (`None`: it had no entry).
    Removed(Option<Vec<u32>>),
    /// k-hop result.
    Khop(KhopReply),
    /// LOAD applied.
    Load {
        /// Vertices changed.
        vertices: u32,
        /// Edges added.
        edges_added: u64,
        /// Per vertex entry of the request, in its order: whether that
        /// vertex's list changed (an entry repeating a vertex shares its flag).
        changed: Vec<bool>,
    },
    /// MIGRATE done.
    Migrate {
        /// Where part 0 was.
        from: u8,
        /// Where it is.
        to: u8,
        /// Values moved.
        parts: u32,
        /// Bytes copied.
        bytes: u64,
    },
    /// WHERE answered.
    Where {
        /// Home machine.
        home: u8,
        /// Machine holding the value.
        holder: u8,
        /// Whether the vertex has an entry.
        found: bool,
    },
    /// STATS JSON.
    Stats(String),
    /// SLOTS: the slot table in its wire form (`locus_placement::slots`),
    /// checked by the decoder, and the migration index of the moves leaving
    /// the answering server (hints: the servers decide).
    Slots {
        /// The table.
        table: Vec<u8>,
        /// One per move leaving the server, by target.
        hints: Vec<MoveHint>,
    },
    /// SERVERS: each server's id and client address (`host:port`), by id.
    Servers(Vec<(u8, String)>),
    /// A MOVE step done.
    Move(MoveReply),
    /// An error reply.
    Error {
        /// Its code.
        code: ErrorCode,
        /// What went wrong, naming the server.
        message: String,
    },
}

impl Reply {
    /// Appends the reply to a request of `op` as a frame.
    pub fn encode(&self, out: &mut Vec<u8>, op: Op, id: u64) {
        if let Reply::Stats(json) = self {
            if json.len() > STATS_JSON_MAX {
                // Cutting JSON would make it unreadable: say so instead.
                return Reply::Error {
                    code: ErrorCode::TooLarge,
                    message: format!(
                        "statistics of {} bytes are past the {STATS_JSON_MAX}-byte limit",
                        json.len()
                    ),
                }
                .encode(out, op, id);
            }
        }
        let op_byte = match self {
            Reply::Error { .. } => ERROR_OP,
            _ => op as u8 | REPLY_BIT,
        };
        let start = begin_frame(out, op_byte, id);
        let mut e = Enc(out);
        match self {
            Reply::Hello {
                server_id,
                machines,
                frame_bytes_max,
                server,
            } => {
                e.u8(*server_id)
                    .u16(*machines)
                    .u32(*frame_bytes_max)
                    .str(server, NAME_MAX);
            }
            Reply::Pong | Reply::Put => {}
            Reply::Neighbors(ids) => {
                e.ids(ids);
            }
            Reply::StaleNeighbors { from_backup, ids } => {
                e.u8(*from_backup as u8).ids(ids);
            }
            Reply::Lists { lens, ids } => {
                assert!(lens.len() <= LISTS_VERTICES_MAX);
                e.ids(lens).ids(ids);
            }
            Reply::Changed(c) => {
                e.u8(*c as u8);
            }
            Reply::Removed(list) => {
                e.u8(list.is_some() as u8)
                    .ids(list.as_deref().unwrap_or_default());
            }
            Reply::Khop(k) => {
                e.u64(k.with_repeats)
                    .u64(k.elapsed_ns)
                    .u64(k.local_ops)
                    .u64(k.remote_ops)
                    .u64(k.local_bytes)
                    .u64(k.remote_bytes)
                    .ids(&k.distinct);
            }
            Reply::Load {
                vertices,
                edges_added,
                changed,
            } => {
                assert!(changed.len() <= LOAD_VERTICES_MAX);
                e.u32(*vertices).u64(*edges_added).bits(changed);
            }
            Reply::Migrate {
                from,
                to,
                parts,
                bytes,
            } => {
                e.u8(*from).u8(*to).u32(*parts).u64(*bytes);
            }
            Reply::Where {
                home,
                holder,
                found,
            } => {
                e.u8(*home).u8(*holder).u8(*found as u8);
            }
            Reply::Stats(json) => {
                e.u32(json.len() as u32);
                e.0.extend_from_slice(json.as_bytes());
            }
            Reply::Slots { table, hints } => {
                e.u32(table.len() as u32);
                e.0.extend_from_slice(table);
                assert!(hints.len() <= HINTS_MAX);
                e.u8(hints.len() as u8);
                for h in hints {
                    assert!(
                        h.bf.len() <= HINT_FILTER_BYTES_MAX && h.cbf.len() <= HINT_FILTER_BYTES_MAX
                    );
                    e.u8(h.from).u8(h.to).u32(h.bf.len() as u32);
                    e.0.extend_from_slice(&h.bf);
                    e.u32(h.cbf.len() as u32);
                    e.0.extend_from_slice(&h.cbf);
                }
            }
            Reply::Servers(servers) => {
                assert!(servers.len() <= locus_fabric::MACHINES_MAX);
                e.u32(servers.len() as u32);
                for (id, addr) in servers {
                    e.u8(*id).str(addr, NAME_MAX);
                }
            }
            Reply::Move(m) => {
                assert!(m.in_flight.len() <= MOVE_SLOTS_MAX);
                e.u64(m.vertices).u64(m.keys).u64(m.bytes).u64(m.slots);
                e.u32(m.in_flight.len() as u32);
                for f in &m.in_flight {
                    e.u32(f.slot)
                        .u8(f.leaving as u8 | (f.handed as u8) << 1)
                        .u8(f.peer);
                }
                assert!(m.listed.len() <= MOVE_KEYS_MAX);
                e.u32(m.listed.len() as u32);
                for k in &m.listed {
                    e.u64(*k);
                }
            }
            Reply::Error { code, message } => {
                e.u16(code.code()).str(message, ERROR_MESSAGE_MAX);
            }
        }
        end_frame(out, start);
    }

    /// Decodes the reply (op byte `op_byte`) to a request of `op`.
    pub fn decode(op: Op, op_byte: u8, body: &[u8]) -> Result<Reply, ProtoError> {
        if op_byte == ERROR_OP {
            let mut d = Dec::new(body, "error");
            let code = ErrorCode::from_code(d.u16("code")?);
            let message = d.str("message", ERROR_MESSAGE_MAX)?;
            d.finish()?;
            return Ok(Reply::Error { code, message });
        }
        if op_byte != op as u8 | REPLY_BIT {
            return Err(ProtoError::Malformed {
                op: op.name(),
                what: format!(
                    "reply op 0x{op_byte:02x} does not answer op 0x{:02x}",
                    op as u8
                ),
            });
        }
        let mut d = Dec::new(body, op.name());
        let r = match op {
            Op::Hello => {
                let server_id = d.u8("server_id")?;
                let machines = d.u16("machines")?;
                let frame_bytes_max = d.u32("frame_bytes_max")?;
                if (frame_bytes_max as usize) < FRAME_BYTES_MIN {
                    return Err(ProtoError::Invalid {
                        field: "frame_bytes_max",
                        value: frame_bytes_max as u64,
                        expected: "must be at least 4096",
                    });
                }
                Reply::Hello {
                    server_id,
                    machines,
                    frame_bytes_max,
                    server: d.str("server", NAME_MAX)?,
                }
            }
            Op::Ping => Reply::Pong,
            Op::Put => Reply::Put,
            Op::Neighbors => Reply::Neighbors(d.ids("ids", FRAME_BYTES_MAX / 4)?),
            Op::StaleNeighbors => Reply::StaleNeighbors {
                from_backup: match d.u8("from_backup")? {
                    0 => false,
                    1 => true,
                    b => return Err(d.malformed(format!("from_backup = {b}, expected 0 or 1"))),
                },
                ids: d.ids("ids", FRAME_BYTES_MAX / 4)?,
            },
            Op::Lists => {
                let lens = d.ids("lens", LISTS_VERTICES_MAX)?;
                let ids = d.ids("ids", FRAME_BYTES_MAX / 4)?;
                let total: u64 = lens
                    .iter()
                    .filter(|&&n| n != LIST_ABSENT)
                    .map(|&n| n as u64)
                    .sum();
                if total != ids.len() as u64 {
                    return Err(d.malformed(format!(
                        "the lengths add up to {total} ids, the lists hold {}",
                        ids.len()
                    )));
                }
                Reply::Lists { lens, ids }
            }
            Op::InsertEdge | Op::DeleteEdge => Reply::Changed(match d.u8("changed")? {
                0 => false,
                1 => true,
                b => return Err(d.malformed(format!("changed = {b}, expected 0 or 1"))),
            }),
            Op::DeleteVertex => {
                let found = d.u8("found")?;
                let ids = d.ids("ids", FRAME_BYTES_MAX / 4)?;
                Reply::Removed(match (found, ids.is_empty()) {
                    (1, _) => Some(ids),
                    (0, true) => None,
                    (0, false) => return Err(d.malformed("ids of a vertex that was not found")),
                    (b, _) => return Err(d.malformed(format!("found = {b}, expected 0 or 1"))),
                })
            }
            Op::Khop => Reply::Khop(KhopReply {
                with_repeats: d.u64("with_repeats")?,
                elapsed_ns: d.u64("elapsed_ns")?,
                local_ops: d.u64("local_ops")?,
                remote_ops: d.u64("remote_ops")?,
                local_bytes: d.u64("local_bytes")?,
                remote_bytes: d.u64("remote_bytes")?,
                distinct: d.ids("distinct", FRAME_BYTES_MAX / 4)?,
            }),
            Op::Load => Reply::Load {
                vertices: d.u32("vertices")?,
                edges_added: d.u64("edges_added")?,
                changed: d.bits("changed", LOAD_VERTICES_MAX)?,
            },
            Op::Migrate => Reply::Migrate {
                from: d.u8("from")?,
                to: d.u8("to")?,
                parts: d.u32("parts")?,
                bytes: d.u64("bytes")?,
            },
            Op::Where => Reply::Where {
                home: d.u8("home")?,
                holder: d.u8("holder")?,
                found: match d.u8("found")? {
                    0 => false,
                    1 => true,
                    b => return Err(d.malformed(format!("found = {b}, expected 0 or 1"))),
                },
            },
            Op::Stats => {
                let n = d.count("json", STATS_JSON_MAX, 1)?;
                let raw = d.take(n, "json")?;
                Reply::Stats(
                    String::from_utf8(raw.to_vec())
                        .map_err(|_| d.malformed("json is not UTF-8"))?,
                )
            }
            Op::Slots => {
                let n = d.count("table", SLOTS_TABLE_BYTES_MAX, 1)?;
                let raw = d.take(n, "table")?.to_vec();
                locus_placement::slots::SlotTable::decode(&raw)
                    .map_err(|e| d.malformed(format!("slot table: {e}")))?;
                let n = d.u8("hints")? as usize;
                let mut hints = Vec::new();
                for _ in 0..n {
                    let (from, to) = (d.u8("from")?, d.u8("to")?);
                    let len = d.count("bf", HINT_FILTER_BYTES_MAX, 1)?;
                    let bf = d.take(len, "bf")?.to_vec();
                    let len = d.count("cbf", HINT_FILTER_BYTES_MAX, 1)?;
                    let cbf = d.take(len, "cbf")?.to_vec();
                    if bf.is_empty() || cbf.is_empty() {
                        return Err(d.malformed("a hint's filter is empty"));
                    }
                    hints.push(MoveHint { from, to, bf, cbf });
                }
                Reply::Slots { table: raw, hints }
            }
            Op::Servers => {
                let n = d.count("servers", locus_fabric::MACHINES_MAX, 3)?;
                let mut servers = Vec::with_capacity(n);
                for _ in 0..n {
                    let id = d.u8("id")?;
                    if id as usize >= locus_fabric::MACHINES_MAX {
                        return Err(d.malformed(format!("server id {id} is not below 128")));
                    }
                    servers.push((id, d.str("client", NAME_MAX)?));
                }
                Reply::Servers(servers)
            }
            Op::Move => {
                let mut m = MoveReply {
                    vertices: d.u64("vertices")?,
                    keys: d.u64("keys")?,
                    bytes: d.u64("bytes")?,
                    slots: d.u64("slots")?,
                    in_flight: Vec::new(),
                    listed: Vec::new(),
                };
                let n = d.count("in_flight", MOVE_SLOTS_MAX, 6)?;
                for _ in 0..n {
                    let slot = d.u32("slot")?;
                    let state = d.u8("state")?;
                    if state > 3 {
                        return Err(d.malformed(format!(
                            "slot state = {state}, expected 0..=3 (bit 0 leaving, bit 1 handed)"
                        )));
                    }
                    m.in_flight.push(SlotInFlight {
                        slot,
                        leaving: state & 1 != 0,
                        handed: state & 2 != 0,
                        peer: d.u8("peer")?,
                    });
                }
                let n = d.count("listed", MOVE_KEYS_MAX, 8)?;
                for _ in 0..n {
                    m.listed.push(d.u64("key")?);
                }
                Reply::Move(m)
            }
            other => return Err(ProtoError::UnknownOp(other as u8)),
        };
        d.finish()?;
        Ok(r)
    }
}
