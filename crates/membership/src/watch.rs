//! The membership watch: [`MemberEvent`]s in order (invariant 4 of the crate doc).

use std::collections::BTreeMap;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use etcd_client::{Client, EventType, GetOptions, WatchOptions};

use crate::client::{parse_member, Member, Membership};
use crate::error::Result;

/// A change of the membership.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberEvent {
    /// `machine` registered at `epoch`.
    PeerUp {
        /// The machine.
        machine: u8,
        /// Its new epoch.
        epoch: u64,
    },
    /// The incarnation of `machine` at `epoch` is dead: its lease ended or a
    /// newer incarnation registered.
    PeerDown {
        /// The machine.
        machine: u8,
        /// The epoch that died.
        epoch: u64,
    },
}

/// A running watch of the membership; events arrive on [`Watch::events`].
/// Dropping it stops the watch.
#[derive(Debug)]
pub struct Watch {
    rx: Receiver<MemberEvent>,
    task: tokio::task::JoinHandle<()>,
}

impl Watch {
    /// The events, in order.
    pub fn events(&self) -> &Receiver<MemberEvent> {
        &self.rx
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Membership {
    /// Reads the membership and starts watching it: returns the members now
    /// and a [`Watch`] whose events are the changes after that read.
    pub fn watch(&self) -> Result<(Vec<Member>, Watch)> {
        let (members, rev) = self.members()?;
        let known = members.iter().map(|m| (m.machine, m.epoch)).collect();
        let (tx, rx) = crossbeam_channel::unbounded();
        let task = self.rt.spawn(watch_loop(
            self.client.clone(),
            self.members_prefix(),
            known,
            rev,
            tx,
        ));
        Ok((members, Watch { rx, task }))
    }
}

/// Applies "machine is at epoch" (`Some`) or "machine is gone" (`None`) to
/// `known`, sending the events that takes. Returns false once nobody listens.
fn apply(
    known: &mut BTreeMap<u8, u64>,
    machine: u8,
    now: Option<u64>,
    tx: &Sender<MemberEvent>,
) -> bool {
    let before = known.get(&machine).copied();
    let mut events = Vec::new();
    match (before, now) {
        (Some(old), Some(new)) if new > old => {
            events.push(MemberEvent::PeerDown {
                machine,
                epoch: old,
            });
            events.push(MemberEvent::PeerUp {
                machine,
                epoch: new,
            });
        }
        (None, Some(new)) => events.push(MemberEvent::PeerUp {
            machine,
            epoch: new,
        }),
        (Some(old), None) => events.push(MemberEvent::PeerDown {
            machine,
            epoch: old,
        }),
        // Same epoch again, an older one (cannot happen: epochs increase), or nothing.
        _ => {}
    }
    match now {
        Some(new) if before.is_none_or(|old| new > old) => {
            known.insert(machine, new);
        }
        None => {
            known.remove(&machine);
        }
        _ => {}
    }
    events.into_iter().all(|e| tx.send(e).is_ok())
}

async fn watch_loop(
    client: Client,
    prefix: String,
    mut known: BTreeMap<u8, u64>,
    mut rev: i64,
    tx: Sender<MemberEvent>,
) {
    loop {
        // Watch from just after what `known` reflects.
        let opts = WatchOptions::new()
            .with_prefix()
            .with_start_revision(rev + 1);
        let mut c = client.clone();
        if let Ok((_watcher, mut stream)) = c.watch(prefix.clone(), Some(opts)).await {
            while let Ok(Some(resp)) = stream.message().await {
                if resp.canceled() {
                    break;
                }
                for ev in resp.events() {
                    let Some(kv) = ev.kv() else { continue };
                    let key = String::from_utf8_lossy(kv.key()).into_owned();
                    let Some(machine) = key.strip_prefix(&prefix).and_then(|m| m.parse().ok())
                    else {
                        tracing::warn!(key, "ignoring a member key that names no machine");
                        continue;
                    };
                    let now = match ev.event_type() {
                        EventType::Delete => None,
                        EventType::Put => match parse_member(&prefix, kv.key(), kv.value()) {
                            Ok(m) => Some(m.epoch),
                            Err(e) => {
                                tracing::warn!(error = %e, "ignoring a malformed member");
                                continue;
                            }
                        },
                    };
                    if !apply(&mut known, machine, now, &tx) {
                        return;
                    }
                    rev = rev.max(kv.mod_revision());
                }
                if let Some(h) = resp.header() {
                    rev = rev.max(h.revision());
                }
            }
        }
        // The watch broke (etcd restarted, compaction, network): re-read and
        // send the difference, then watch again from there.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut c = client.clone();
        let Ok(Ok(r)) = tokio::time::timeout(
            Duration::from_secs(5),
            c.get(prefix.clone(), Some(GetOptions::new().with_prefix())),
        )
        .await
        else {
            continue;
        };
        let mut now: BTreeMap<u8, u64> = BTreeMap::new();
        for kv in r.kvs() {
            if let Ok(m) = parse_member(&prefix, kv.key(), kv.value()) {
                now.insert(m.machine, m.epoch);
            }
        }
        let machines: Vec<u8> = known.keys().chain(now.keys()).copied().collect();
        for m in machines {
            if !apply(&mut known, m, now.get(&m).copied(), &tx) {
                return;
            }
        }
        rev = r.header().map_or(rev, |h| h.revision());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_re_registration_without_an_expiry_yields_down_then_up() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut known = BTreeMap::new();
        assert!(apply(&mut known, 2, Some(1), &tx));
        assert!(apply(&mut known, 2, Some(1), &tx)); // the same epoch again: nothing
        assert!(apply(&mut known, 2, Some(3), &tx));
        assert!(apply(&mut known, 2, None, &tx));
        assert!(apply(&mut known, 2, None, &tx)); // gone twice: nothing
        let got: Vec<_> = rx.try_iter().collect();
        use MemberEvent::*;
        assert_eq!(
            got,
            vec![
                PeerUp {
                    machine: 2,
                    epoch: 1
                },
                PeerDown {
                    machine: 2,
                    epoch: 1
                },
                PeerUp {
                    machine: 2,
                    epoch: 3
                },
                PeerDown {
                    machine: 2,
                    epoch: 3
                },
            ]
        );
    }
}
