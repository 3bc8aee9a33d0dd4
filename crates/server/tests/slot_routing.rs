//! Homes by slot table over real servers (issue 59, requirement 1): a
//! vertex's home is the owner of slot `vertex % slots`, not `vertex %
//! machines`; a server refuses a logged update of a vertex it does not
//! home (`WrongHome`); a client with a stale table fetches it again and
//! retries, and when the servers keep refusing it gives up after
//! `ROUTE_RETRIES_MAX` retries instead of looping.

mod common;

use locus_client::proto::{ErrorCode, Request};
use locus_client::{Client, ClientConfig, ROUTE_RETRIES_MAX};
use locus_fabric::auth::Secret;
use locus_server::config::DurabilitySection;
use locus_server::{ClusterFile, Server};
use locus_store::{SlotMove, SlotTable};

const SECRET: &str = "slot routing test secret";
const SERVERS: u8 = 3;
/// Few slots, so that `v % slots % servers` and `v % servers` differ for
/// small ids: vertex 8 is in slot 0, owned by server 0, while 8 % 3 = 2.
const SLOTS: u32 = 8;

fn cluster_file(dir: &std::path::Path) -> ClusterFile {
    let mut f = common::small_cluster(SECRET, SERVERS);
    // With a log, updates are applied only at the home (D1), which is
    // what makes a server refuse the vertices it does not home.
    f.durability = Some(DurabilitySection {
        dir: dir.join("data"),
        ..DurabilitySection::default()
    });
    f.store.slots = Some(SLOTS);
    f.validate().unwrap();
    f
}

fn start(file: &ClusterFile) -> Vec<Server> {
    let handles: Vec<_> = (0..SERVERS)
        .map(|id| {
            let f = file.clone();
            std::thread::spawn(move || Server::start(f, id).unwrap())
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

fn client(servers: &[Server]) -> Client {
    Client::new(
        servers.iter().map(|s| s.client_addr()).collect(),
        ClientConfig {
            secret: Some(Secret::new(SECRET).unwrap()),
            ..ClientConfig::default()
        },
    )
    .unwrap()
}

/// Slot 0 handed from `from` to `to`, at the next epoch of `t`.
fn slot0(t: &SlotTable, from: u8, to: u8) -> SlotTable {
    t.after(&[SlotMove { slot: 0, from, to }]).unwrap()
}

#[test]
fn vertices_go_to_their_slot_owner_and_a_stale_client_retries_a_bounded_number_of_times() {
    let dir = tempfile::tempdir().unwrap();
    let servers = start(&cluster_file(dir.path()));
    let c = client(&servers);

    // The table every server holds, served by SLOTS.
    let t = c.slot_table().unwrap();
    assert_eq!((t.slots(), t.epoch()), (SLOTS, 1));
    assert_eq!(t.counts(), vec![3, 3, 2]);
    assert_eq!(c.home(8), 0, "slot 0's owner, not 8 % 3");
    c.put(8, &[1, 2]).unwrap();
    assert_eq!(c.neighbors(8, 0).unwrap(), vec![1, 2]);
    assert_eq!(c.routing().retries, 0);

    // Server 2 (8 % 3) does not home vertex 8 and says so.
    let e = c
        .call(
            2,
            &Request::Put {
                vertex: 8,
                ids: vec![3],
            },
            None,
        )
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::WrongHome), "{e}");
    assert!(e.to_string().contains("homed on server 0"), "{e}");

    // A new table hands slot 0 to server 1; the client still holds epoch 1,
    // so its next update of vertex 8 goes to server 0, is refused, and is
    // retried at server 1 after the table is fetched again.
    let next = slot0(&t, 0, 1);
    for s in &servers {
        assert!(s.store().homes().install(&next).unwrap());
    }
    c.put(8, &[5]).unwrap();
    let r = c.routing();
    assert_eq!((r.retries, r.table_epoch), (1, 2), "{r:?}");
    assert_eq!(c.home(8), 1);
    assert_eq!(c.neighbors(8, 0).unwrap(), vec![5]);

    // Servers that disagree at epoch 3 (server 0 names server 1 as slot
    // 0's owner, server 1 names server 0) refuse every attempt: the client
    // stops after its bound.
    let at = |t: &SlotTable| SlotTable::from_owners(3, t.machines(), t.owners().to_vec()).unwrap();
    assert!(servers[0].store().homes().install(&at(&next)).unwrap());
    assert!(servers[1].store().homes().install(&at(&t)).unwrap());
    let before = c.routing().retries;
    let e = c.put(8, &[6]).unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::WrongHome), "{e}");
    assert_eq!(c.routing().retries - before, u64::from(ROUTE_RETRIES_MAX));

    for s in servers {
        s.stop();
    }
}
