//! Golden frames: `clients/golden/frames.json` holds one encoded frame per
//! request, reply and control kind, with its fields, so that other
//! implementations of the protocol (the Python client) test their encoders
//! and decoders against the bytes this crate produces. This test fails if
//! the file and the encoder disagree; `LOCUS_UPDATE_GOLDEN=1` rewrites it
//! (review the diff: a change is a protocol change, see docs/protocol.md).

use locus_client::proto::{
    AccessEntry, Control, ErrorCode, JobKind, KhopReply, MoveHint, Op, Reply, Request, HEADER_BYTES,
};
use locus_placement::slots::SlotTable;
use serde_json::{json, Value};

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn request(name: &str, id: u64, deadline_ms: u32, r: Request, fields: Value) -> Value {
    let mut b = Vec::new();
    r.encode(&mut b, id, deadline_ms);
    json!({"name": name, "kind": "request", "op": r.op().name(), "id": id,
           "deadline_ms": deadline_ms, "fields": fields, "hex": hex(&b)})
}

fn reply(name: &str, op: Op, id: u64, r: Reply, fields: Value) -> Value {
    let mut b = Vec::new();
    r.encode(&mut b, op, id);
    json!({"name": name, "kind": "reply", "op": op.name(), "id": id,
           "fields": fields, "hex": hex(&b)})
}

fn control(name: &str, c: Control, fields: Value) -> Value {
    let mut b = Vec::new();
    c.encode(&mut b);
    assert!(b.len() >= HEADER_BYTES);
    json!({"name": name, "kind": "control", "op": c.op().name(), "id": 0,
           "fields": fields, "hex": hex(&b)})
}

fn frames() -> Value {
    // A hint as a server makes it: slot 5 handed, slot 3 in flight (the
    // Python client checks its filter look-ups against these bytes).
    let mut handed = locus_placement::index::BloomFilter::new(8).unwrap();
    handed.insert(5);
    let mut in_flight = locus_placement::index::CountingBloomFilter::new(16).unwrap();
    in_flight.increment(3);
    let khop = KhopReply {
        with_repeats: 10_000,
        elapsed_ns: 123_456,
        local_ops: 40,
        remote_ops: 60,
        local_bytes: 4000,
        remote_bytes: 6000,
        distinct: vec![3, 9, 4_000_000_000],
    };
    let error_message = "server 1 (127.0.0.1:7411): vertex 5 has no entry";
    // Not a uniform table, and an epoch past u32 so the u64 is checked whole.
    let slots_owners = vec![0u8, 1, 2, 2, 1, 0];
    let slots = SlotTable::from_owners(1 << 32 | 7, 3, slots_owners.clone()).unwrap();
    Value::Array(vec![
        request(
            "hello",
            0,
            5000,
            Request::Hello {
                client: "python é".into(),
            },
            json!({"client": "python é"}),
        ),
        request("ping", 1, 1, Request::Ping, json!({})),
        request(
            "neighbors",
            2,
            1000,
            Request::Neighbors { vertex: 5, k: 0 },
            json!({"vertex": 5, "k": 0}),
        ),
        request(
            "stale_neighbors",
            17,
            1000,
            Request::StaleNeighbors { vertex: 5, k: 3 },
            json!({"vertex": 5, "k": 3}),
        ),
        request(
            "lists",
            16,
            1000,
            Request::Lists {
                vertices: vec![5, 6, 7],
            },
            json!({"vertices": [5, 6, 7]}),
        ),
        request(
            "put",
            3,
            1000,
            Request::Put {
                vertex: 7,
                ids: vec![1, 2, 65536],
            },
            json!({"vertex": 7, "ids": [1, 2, 65536]}),
        ),
        request(
            "insert_edge",
            4,
            1000,
            Request::InsertEdge {
                vertex: 1,
                neighbor: 2,
            },
            json!({"vertex": 1, "neighbor": 2}),
        ),
        request(
            "delete_edge",
            5,
            1000,
            Request::DeleteEdge {
                vertex: 2,
                neighbor: 1,
            },
            json!({"vertex": 2, "neighbor": 1}),
        ),
        request(
            "khop",
            6,
            30000,
            Request::Khop {
                vertex: 11,
                hops: 2,
                k: 100,
            },
            json!({"vertex": 11, "hops": 2, "k": 100}),
        ),
        request(
            "load",
            7,
            60000,
            Request::Load {
                vertices: vec![(0, vec![3, 6]), (3, vec![]), (6, vec![0])],
            },
            json!({"vertices": [[0, [3, 6]], [3, []], [6, [0]]]}),
        ),
        request(
            "migrate",
            8,
            10000,
            Request::Migrate { vertex: 42 },
            json!({"vertex": 42}),
        ),
        request(
            "where",
            9,
            1000,
            Request::Where { vertex: 42 },
            json!({"vertex": 42}),
        ),
        request("stats", 10, 1000, Request::Stats, json!({})),
        request(
            "delete_vertex",
            12,
            1000,
            Request::DeleteVertex { vertex: 42 },
            json!({"vertex": 42}),
        ),
        request("slots", 14, 1000, Request::Slots, json!({})),
        request("servers", 15, 1000, Request::Servers, json!({})),
        reply(
            "hello_reply",
            Op::Hello,
            0,
            Reply::Hello {
                server_id: 1,
                machines: 3,
                frame_bytes_max: 16 << 20,
                server: "locus 0.1.0".into(),
            },
            json!({"server_id": 1, "machines": 3, "frame_bytes_max": 16 << 20,
                   "server": "locus 0.1.0"}),
        ),
        reply("pong", Op::Ping, 1, Reply::Pong, json!({})),
        reply(
            "neighbors_reply",
            Op::Neighbors,
            2,
            Reply::Neighbors(vec![8, 9]),
            json!({"ids": [8, 9]}),
        ),
        reply(
            "stale_neighbors_reply",
            Op::StaleNeighbors,
            17,
            Reply::StaleNeighbors {
                from_backup: true,
                ids: vec![8, 9],
            },
            json!({"from_backup": true, "ids": [8, 9]}),
        ),
        reply(
            "lists_reply",
            Op::Lists,
            16,
            Reply::Lists {
                lens: vec![2, locus_client::proto::LIST_ABSENT, 0],
                ids: vec![8, 9],
            },
            json!({"lens": [2, 4294967295u32, 0], "ids": [8, 9]}),
        ),
        reply("put_reply", Op::Put, 3, Reply::Put, json!({})),
        reply(
            "insert_edge_reply",
            Op::InsertEdge,
            4,
            Reply::Changed(true),
            json!({"changed": true}),
        ),
        reply(
            "delete_edge_reply",
            Op::DeleteEdge,
            5,
            Reply::Changed(false),
            json!({"changed": false}),
        ),
        reply(
            "khop_reply",
            Op::Khop,
            6,
            Reply::Khop(khop),
            json!({"with_repeats": 10_000, "elapsed_ns": 123_456, "local_ops": 40,
                   "remote_ops": 60, "local_bytes": 4000, "remote_bytes": 6000,
                   "distinct": [3, 9, 4_000_000_000u32]}),
        ),
        reply(
            "load_reply",
            Op::Load,
            7,
            Reply::Load {
                vertices: 3,
                edges_added: 5,
                changed: vec![true, true, false, true],
            },
            json!({"vertices": 3, "edges_added": 5, "changed": [true, true, false, true]}),
        ),
        reply(
            "migrate_reply",
            Op::Migrate,
            8,
            Reply::Migrate {
                from: 0,
                to: 2,
                parts: 1,
                bytes: 48,
            },
            json!({"from": 0, "to": 2, "parts": 1, "bytes": 48}),
        ),
        reply(
            "where_reply",
            Op::Where,
            9,
            Reply::Where {
                home: 0,
                holder: 2,
                found: true,
            },
            json!({"home": 0, "holder": 2, "found": true}),
        ),
        reply(
            "delete_vertex_reply",
            Op::DeleteVertex,
            12,
            Reply::Removed(Some(vec![1, 7])),
            json!({"found": true, "ids": [1, 7]}),
        ),
        reply(
            "delete_vertex_reply_absent",
            Op::DeleteVertex,
            13,
            Reply::Removed(None),
            json!({"found": false, "ids": []}),
        ),
        reply(
            "stats_reply",
            Op::Stats,
            10,
            Reply::Stats("{\"server\":1}".into()),
            json!({"json": "{\"server\":1}"}),
        ),
        reply(
            "slots_reply",
            Op::Slots,
            14,
            Reply::Slots {
                table: slots.encode(),
                hints: Vec::new(),
            },
            json!({"epoch": 1u64 << 32 | 7, "machines": 3, "slots": 6, "owners": slots_owners,
                   "hints": []}),
        ),
        reply(
            "slots_reply_hinted",
            Op::Slots,
            14,
            Reply::Slots {
                table: slots.encode(),
                hints: vec![MoveHint {
                    from: 1,
                    to: 2,
                    bf: handed.to_bytes(),
                    cbf: in_flight.as_bytes().to_vec(),
                }],
            },
            json!({"epoch": 1u64 << 32 | 7, "machines": 3, "slots": 6, "owners": slots_owners,
                   "hints": [{"from": 1, "to": 2, "bf": hex(&handed.to_bytes()),
                              "cbf": hex(in_flight.as_bytes())}]}),
        ),
        reply(
            "servers_reply",
            Op::Servers,
            15,
            Reply::Servers(vec![(0, "127.0.0.1:7411".into()), (1, "[::1]:7412".into())]),
            json!({"servers": [{"id": 0, "client": "127.0.0.1:7411"},
                               {"id": 1, "client": "[::1]:7412"}]}),
        ),
        reply(
            "error_reply",
            Op::Neighbors,
            11,
            Reply::Error {
                code: ErrorCode::UnknownVertex,
                message: error_message.into(),
            },
            json!({"code": 4, "code_name": "UNKNOWN_VERTEX", "message": error_message}),
        ),
        control(
            "register",
            Control::Register { machine: 2 },
            json!({"machine": 2}),
        ),
        control(
            "report",
            Control::Report {
                machine: 1,
                interval_ms: 10_000,
                accesses: vec![AccessEntry {
                    key: 5 | 1 << 32,
                    holder: 0,
                    count: 300,
                }],
            },
            json!({"machine": 1, "interval_ms": 10_000,
                   "accesses": [{"key": 5u64 | 1 << 32, "holder": 0, "count": 300}]}),
        ),
        control(
            "hot",
            Control::Hot {
                machine: 0,
                elapsed_ms: 5,
                access: AccessEntry {
                    key: 9,
                    holder: 1,
                    count: 101,
                },
            },
            json!({"machine": 0, "elapsed_ms": 5,
                   "access": {"key": 9, "holder": 1, "count": 101}}),
        ),
        control(
            "tracked",
            Control::Tracked {
                machine: 2,
                interval_ms: 7,
                counts: vec![(1, 2)],
            },
            json!({"machine": 2, "interval_ms": 7, "counts": [[1, 2]]}),
        ),
        control(
            "migrated",
            Control::Migrated(vec![(1, 2, true), (3, 0, false)]),
            json!({"migrated": [[1, 2, true], [3, 0, false]]}),
        ),
        control(
            "jobs",
            Control::Jobs(vec![(JobKind::Migrate, 1), (JobKind::Replicate, 2)]),
            json!({"jobs": [[1, 1], [2, 2]]}),
        ),
        control("track", Control::Track(vec![1, 2]), json!({"keys": [1, 2]})),
        control("collect", Control::Collect, json!({})),
    ])
}

#[test]
fn golden_frames_match_the_encoder() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/golden/frames.json");
    let text = serde_json::to_string_pretty(&frames()).unwrap() + "\n";
    if std::env::var_os("LOCUS_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let on_disk = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run with LOCUS_UPDATE_GOLDEN=1", path.display()));
    assert!(
        on_disk == text,
        "{} is out of date with the encoder: a protocol change? Rerun with LOCUS_UPDATE_GOLDEN=1 and review the diff",
        path.display()
    );
}
