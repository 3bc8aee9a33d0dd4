//! Check-and-forward under bad input and failures: a malformed message, a
//! request that lies about its sender, a part op that fails at the holder and
//! a flooded service are each counted and answered with an error, and the
//! service goes on; queues are bounded; replies to forwards that timed out
//! are dropped, not kept.

use locus_fabric::faulty::{Fault, Faulty};
use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_fabric::{Fabric, Port};
use locus_store::forward::{self, Envelope, PartOp, Reply, Request, VertexOp};
use locus_store::{Store, StoreConfig, StoreError, DEFERRED_VERTEX_OPS_MAX};

fn fabric(machines: usize) -> LocalFabric {
    LocalFabric::new(LocalConfig::with_machines(machines).without_model()).unwrap()
}

fn config() -> StoreConfig {
    StoreConfig {
        buckets_per_machine: 64,
        overflow_buckets_per_machine: 16,
        value_region_bytes: 1 << 20,
        part_neighbors_max: 64,
        ..StoreConfig::default()
    }
}

/// The next message in `port`'s inbox, decoded (it must be there).
fn next_message<P: Port>(port: &mut P) -> Envelope {
    let m = port.try_recv().unwrap().expect("a message");
    forward::decode(&m.payload).unwrap()
}

fn failed_reply(e: Envelope) -> (u64, String) {
    match e {
        Envelope::Reply {
            id,
            reply: Reply::Failed(reason),
        } => (id, reason),
        other => panic!("expected a failed reply, got {other:?}"),
    }
}

#[test]
fn malformed_messages_are_counted_answered_and_survived() {
    let f = fabric(2);
    let store = Store::create(f.clone(), config()).unwrap();
    // No service threads: machine 0 is served by hand, and `peer` is
    // machine 1's inbox as another process would see it.
    let mut w0 = store.worker(0).unwrap();
    let mut peer = f.port(1).unwrap();

    // Garbage shorter than a header: nothing to answer, only counted.
    peer.send(0, &[1, 2, 3]).unwrap();
    assert_eq!(w0.serve().unwrap(), 1);
    assert!(peer.try_recv().unwrap().is_none());

    // A whole header and a cut body: answered with the reason.
    let mut b = Vec::new();
    let part = Request::Part {
        key: 0,
        op: PartOp::Replace {
            ids: vec![1, 2, 3],
            flags: 0,
        },
    };
    forward::encode_request(1, 77, &part, &mut b);
    peer.send(0, &b[..b.len() - 2]).unwrap();
    w0.serve().unwrap();
    let (id, reason) = failed_reply(next_message(&mut peer));
    assert_eq!(id, 77);
    assert!(
        reason.contains("malformed message from machine 1"),
        "{reason}"
    );

    // A request whose payload names another sender: the reply goes to the
    // machine the fabric says sent it, and it is refused.
    forward::encode_request(0, 78, &part, &mut b);
    peer.send(0, &b).unwrap();
    w0.serve().unwrap();
    let (id, reason) = failed_reply(next_message(&mut peer));
    assert_eq!(id, 78);
    assert!(reason.contains("names machine 0"), "{reason}");

    // The service still works: a proper request is applied and answered.
    forward::encode_request(1, 79, &part, &mut b);
    peer.send(0, &b).unwrap();
    w0.serve().unwrap();
    match next_message(&mut peer) {
        Envelope::Reply {
            id: 79,
            reply: Reply::Part(_),
        } => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(w0.get(0).unwrap(), Some(vec![1, 2, 3]));
    let stats = store.service_stats(0).unwrap();
    assert_eq!(stats.malformed_messages, 3, "{stats:?}");
    assert_eq!(stats.requests_served, 3, "{stats:?}");
}

#[test]
fn a_part_op_that_fails_at_the_holder_is_answered_and_the_service_goes_on() {
    let store = Store::create(
        fabric(3),
        StoreConfig {
            value_region_bytes: 8192,
            ..config()
        },
    )
    .unwrap();
    let services = store.spawn_services().unwrap();
    let mut w0 = store.worker(0).unwrap();
    let mut w1 = store.worker(1).unwrap();
    let mut w2 = store.worker(2).unwrap();
    w0.put(0, &[1, 2]).unwrap();
    assert_eq!(
        w2.migrate_vertex(0).unwrap(),
        1,
        "vertex 0's value moves to machine 2"
    );
    // Fill machine 2's value region with vertices homed there.
    let list: Vec<u32> = (0..60).collect();
    let mut v = 2;
    let mut full = None;
    for list in [&list[..], &list[..1]] {
        full = Some(loop {
            match w2.put(v, list) {
                Ok(()) => v += 3,
                Err(e) => break e,
            }
        });
    }
    let full = full.unwrap();
    assert!(
        matches!(full, StoreError::RegionFull { machine: 2, .. }),
        "{full}"
    );
    // An update of vertex 0 from machine 1: forwarded to its home (0), whose
    // part op goes to the holder (2), where there is no room.
    let e = w1.insert_edge(0, 99).unwrap_err();
    assert!(matches!(e, StoreError::Forwarded { machine: 0, .. }), "{e}");
    assert!(e.to_string().contains("machine 2 is full"), "{e}");
    assert!(store.service_stats(2).unwrap().requests_failed >= 1);
    // Both services are alive: an op that needs no room still goes through them.
    assert!(!w1.insert_edge(0, 1).unwrap(), "edge 0->1 is there already");
    assert!(services.failure().is_none(), "{:?}", services.failure());
}

#[test]
fn a_flooded_service_refuses_beyond_its_queue_and_drops_late_replies() {
    let f = fabric(2);
    let store = Store::create(
        f.clone(),
        StoreConfig {
            forward_timeout_ms: 200,
            ..config()
        },
    )
    .unwrap();
    let mut w0 = store.worker(0).unwrap();
    let mut peer = f.port(1).unwrap();
    // Machine 1 floods machine 0 with one vertex op more than it queues.
    let mut b = Vec::new();
    let flood = DEFERRED_VERTEX_OPS_MAX as u64 + 1;
    for id in 0..flood {
        let r = Request::Vertex {
            vertex: 0,
            op: VertexOp::Insert(5),
        };
        forward::encode_request(1, id, &r, &mut b);
        peer.send(0, &b).unwrap();
    }
    // A worker of machine 0 forwards an update to machine 1 (nobody serves
    // it) and, while it waits, reads machine 0's inbox: vertex ops are left
    // for the service, up to the limit; the one past it is refused at once.
    let e = w0.insert_edge(1, 9).unwrap_err();
    assert!(matches!(e, StoreError::Forwarded { machine: 1, .. }), "{e}");
    let stats = store.service_stats(0).unwrap();
    assert_eq!(stats.overloaded_refusals, 1, "{stats:?}");
    let forwarded = match next_message(&mut peer) {
        Envelope::Request {
            from: 0,
            id,
            request: Request::Vertex { vertex: 1, .. },
        } => id,
        other => panic!("{other:?}"),
    };
    let (id, reason) = failed_reply(next_message(&mut peer));
    assert_eq!(id, flood - 1);
    assert!(reason.contains("overloaded"), "{reason}");
    // Machine 1 answers the forward that has timed out: the late reply is
    // dropped, not filed for ever.
    forward::encode_reply(1, forwarded, &Reply::Vertex(true), &mut b);
    peer.send(0, &b).unwrap();
    // The service runs every queued op and answers it.
    let mut done = 0;
    while done < DEFERRED_VERTEX_OPS_MAX + 1 {
        done += w0.serve().unwrap();
    }
    let stats = store.service_stats(0).unwrap();
    assert_eq!(stats.late_replies_dropped, 1, "{stats:?}");
    assert_eq!(w0.get(0).unwrap(), Some(vec![5]));
    let mut answered = 0;
    while let Some(m) = peer.try_recv().unwrap() {
        match forward::decode(&m.payload).unwrap() {
            Envelope::Reply {
                reply: Reply::Vertex(_),
                ..
            } => answered += 1,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(answered, DEFERRED_VERTEX_OPS_MAX);
}

#[test]
fn forwards_to_stopped_services_fail_at_once() {
    let store = Store::create(
        fabric(2),
        StoreConfig {
            // Long enough that waiting it out would fail the test's point.
            forward_timeout_ms: 600_000,
            ..config()
        },
    )
    .unwrap();
    let services = store.spawn_services().unwrap();
    let mut w1 = store.worker(1).unwrap();
    assert!(
        w1.insert_edge(0, 1).unwrap(),
        "served: forwarded and applied"
    );
    drop(services);
    let t = std::time::Instant::now();
    let e = w1.insert_edge(0, 2).unwrap_err();
    assert!(
        matches!(e, StoreError::ServiceStopped { machine: 0, .. }),
        "{e}"
    );
    assert!(
        t.elapsed() < std::time::Duration::from_secs(60),
        "{:?}",
        t.elapsed()
    );
    // Services started again serve again (the request that found machine 0
    // stopped may still be in its inbox: "maybe applied", like a timeout).
    let _services = store.spawn_services().unwrap();
    assert!(w1.insert_edge(0, 3).unwrap());
}

#[test]
fn a_service_that_stops_says_which_machine_and_why() {
    let f = Faulty::new(fabric(2));
    let store = Store::create(f.clone(), config()).unwrap();
    let services = store.spawn_services().unwrap();
    assert!(services.failure().is_none());
    // From now on every one-sided operation fails, as if the machines'
    // memory vanished: the idle services' garbage collection meets it.
    f.inject(Fault::FailFrom(0));
    let t = std::time::Instant::now();
    let failure = loop {
        if let Some(e) = services.failure() {
            break e;
        }
        assert!(
            t.elapsed() < std::time::Duration::from_secs(60),
            "no service noticed in a minute"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    match &failure {
        StoreError::ServiceStopped { machine, reason } => {
            assert!(*machine < 2);
            assert!(reason.contains("garbage collection"), "{reason}");
        }
        other => panic!("{other}"),
    }
    assert!(
        failure.to_string().contains("the service of machine"),
        "{failure}"
    );
}
