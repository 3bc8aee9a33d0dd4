//! The twin's membership store: etcd's stand-in behind the same trait
//! (`locus_node::member::MembershipStore`) that `locus server` runs etcd
//! through, so the twin's nodes join and take events by the server's steps
//! (`member::join`, `member::on_event`). As etcd does, it keeps each
//! machine's epochs (reserved above every earlier one, M1) and live
//! registration, the coordinator's record, and one queue of events per
//! watch, each watch seeing every event after it was opened, in one order.
//! Leases end when the nemesis says so ([`SimMembership::end_lease`]).

use std::collections::VecDeque;
use std::sync::Mutex;

use locus_fabric::MachineId;
use locus_node::member::MembershipStore;
use locus_node::node::PeerEvent;
use locus_store::Key;

use super::MACHINES;

#[derive(Default)]
struct State {
    /// Per machine, the last epoch reserved.
    reserved: Vec<u64>,
    /// Per machine, the last epoch registered (0: never).
    registered: Vec<u64>,
    /// Per machine, its live registration's epoch.
    live: Vec<Option<u64>>,
    /// Every watch opened, with the events it has not delivered.
    watches: Vec<VecDeque<PeerEvent>>,
}

/// See the module doc.
pub(crate) struct SimMembership {
    state: Mutex<State>,
    /// The coordinator's record: every approved (key, target), persisted
    /// before the migration is handed to an executor (etcd keeps it).
    pub(crate) record: Mutex<Vec<(Key, MachineId)>>,
}

impl SimMembership {
    pub(crate) fn new() -> SimMembership {
        SimMembership {
            state: Mutex::new(State {
                reserved: vec![0; MACHINES],
                registered: vec![0; MACHINES],
                live: vec![None; MACHINES],
                watches: Vec::new(),
            }),
            record: Mutex::new(Vec::new()),
        }
    }

    fn publish(st: &mut State, event: PeerEvent) {
        for w in &mut st.watches {
            w.push_back(event);
        }
    }

    /// `machine`'s lease ends (it crashed, or stopped renewing): its key
    /// goes, and every watch sees it down at the epoch it had.
    pub(crate) fn end_lease(&self, machine: MachineId) {
        let mut st = self.state.lock().unwrap();
        if let Some(epoch) = st.live[machine as usize].take() {
            Self::publish(&mut st, PeerEvent::Down { machine, epoch });
        }
    }

    /// Whether an event of watch `w` is waiting.
    pub(crate) fn pending(&self, w: usize) -> bool {
        !self.state.lock().unwrap().watches[w].is_empty()
    }

    /// The next event of watch `w`, if one is waiting.
    pub(crate) fn next(&self, w: usize) -> Option<PeerEvent> {
        self.state.lock().unwrap().watches[w].pop_front()
    }
}

impl MembershipStore for SimMembership {
    type Registration = ();
    /// The watch's index.
    type Watch = usize;

    fn reserve_epoch(&self, machine: MachineId) -> Result<u64, String> {
        let mut st = self.state.lock().unwrap();
        let m = machine as usize;
        st.reserved[m] = st.reserved[m].max(st.registered[m]) + 1;
        Ok(st.reserved[m])
    }

    fn register_at(&self, machine: MachineId, epoch: u64, _info: &str) -> Result<(), String> {
        let mut st = self.state.lock().unwrap();
        let m = machine as usize;
        if epoch <= st.registered[m] {
            return Err(format!(
                "machine {machine}: epoch {epoch} is not above its last registration {}",
                st.registered[m]
            ));
        }
        // A newer incarnation replaces an older one's key: its watchers see
        // the new epoch up (and the older one fences itself on seeing it).
        st.registered[m] = epoch;
        st.live[m] = Some(epoch);
        Self::publish(&mut st, PeerEvent::Up { machine, epoch });
        Ok(())
    }

    fn last_registered(&self, machine: MachineId) -> Result<u64, String> {
        Ok(self.state.lock().unwrap().registered[machine as usize])
    }

    fn watch(&self) -> Result<(Vec<(MachineId, u64)>, usize), String> {
        let mut st = self.state.lock().unwrap();
        let live = st
            .live
            .iter()
            .enumerate()
            .filter_map(|(m, e)| e.map(|e| (m as MachineId, e)))
            .collect();
        st.watches.push(VecDeque::new());
        Ok((live, st.watches.len() - 1))
    }

    fn keys_targeting(&self, machine: MachineId) -> Result<Vec<Key>, String> {
        Ok(self
            .record
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, to)| *to == machine)
            .map(|(k, _)| *k)
            .collect())
    }
}
