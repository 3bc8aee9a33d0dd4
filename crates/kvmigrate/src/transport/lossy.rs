//! [`Lossy`]: a decorator of any [`Transport`] that drops, duplicates and reorders a given
//! share of datagrams, every choice drawn from one seed, so a lossy run repeats exactly over
//! a deterministic transport (the simulation's) and is a fault injector over a real one (UDP).
//!
//! ```text
//!   send(p), p in scope:   drop_pct       -> gone
//!                          duplicate_pct  -> sent twice
//!                          reorder_pct    -> held back: the receiver gets it after the next
//!                                            packet sent to it, or when it finds nothing else
//!   send(p), p not in scope: passed through untouched
//! ```
//!
//! Scope ([`Faults::queries`]): the reliable control plane (`reliable`) covers migration and
//! control traffic between servers and the router, so that is always in scope. Client queries
//! and their replies are in scope only when asked for: a lost one is a client timeout, but a
//! duplicated or delayed client write re-executes after its client moved on, which only a
//! client-side de-duplication could hide (the paper's clients have none, nor do ours).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::{Inbound, Transport};
use crate::error::{Error, Result};
use crate::wire::{Body, NodeId, Packet};

/// Which datagrams [`Lossy`] harms, and how often (percent of the datagrams in scope).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Share dropped.
    pub drop_pct: u8,
    /// Share sent twice.
    pub duplicate_pct: u8,
    /// Share held back behind a later datagram to the same node.
    pub reorder_pct: u8,
    /// Client queries and replies are in scope too (see the module doc).
    pub queries: bool,
}

impl Faults {
    /// Checks that each share is a percentage and that they add up to at most 100.
    pub fn check(&self) -> Result<()> {
        let total = self.drop_pct as u16 + self.duplicate_pct as u16 + self.reorder_pct as u16;
        if total > 100 {
            return Err(Error::InvalidSetting {
                key: "drop_pct + duplicate_pct + reorder_pct",
                value: total.to_string(),
                expected: "at most 100 (each datagram meets at most one fault)".into(),
            });
        }
        Ok(())
    }

    fn in_scope(&self, p: &Packet) -> bool {
        self.queries || !(p.body.is_query() || matches!(p.body, Body::Reply { .. }))
    }
}

/// What [`Lossy`] did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCounters {
    /// Datagrams dropped.
    pub dropped: u64,
    /// Datagrams sent twice.
    pub duplicated: u64,
    /// Datagrams held back behind a later one.
    pub reordered: u64,
}

struct State {
    rng: Xoshiro256PlusPlus,
    held: BTreeMap<NodeId, VecDeque<Packet>>,
    counters: FaultCounters,
}

/// A transport that drops, duplicates and reorders a share of what it carries.
pub struct Lossy<T> {
    inner: T,
    faults: Faults,
    state: Mutex<State>,
}

impl<T: Transport> Lossy<T> {
    /// Wraps `inner`; every choice comes from `seed`.
    pub fn new(inner: T, faults: Faults, seed: u64) -> Result<Self> {
        faults.check()?;
        Ok(Self {
            inner,
            faults,
            state: Mutex::new(State {
                rng: Xoshiro256PlusPlus::seed_from_u64(seed),
                held: BTreeMap::new(),
                counters: FaultCounters::default(),
            }),
        })
    }

    /// What was done to the datagrams so far.
    pub fn counters(&self) -> FaultCounters {
        self.lock().counters
    }

    /// The wrapped transport.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Takes one held-back datagram for `node`, if any.
    fn release(&self, node: NodeId) -> Option<Packet> {
        let mut s = self.lock();
        let q = s.held.get_mut(&node)?;
        let p = q.pop_front();
        if q.is_empty() {
            s.held.remove(&node);
        }
        p
    }
}

impl<T: Transport> Transport for Lossy<T> {
    fn send(&self, to: NodeId, packet: Packet) -> Result<()> {
        if !self.faults.in_scope(&packet) {
            return self.inner.send(to, packet);
        }
        let (copies, held_before) = {
            let mut s = self.lock();
            let roll = s.rng.gen_range(0..100u8);
            let f = self.faults;
            let held_before = s.held.remove(&to).unwrap_or_default();
            if roll < f.drop_pct {
                s.counters.dropped += 1;
                (0, held_before)
            } else if roll < f.drop_pct + f.duplicate_pct {
                s.counters.duplicated += 1;
                (2, held_before)
            } else if roll < f.drop_pct + f.duplicate_pct + f.reorder_pct {
                s.counters.reordered += 1;
                // This one waits; the ones held before it go now, ahead of it.
                s.held.entry(to).or_default().push_back(packet.clone());
                (0, held_before)
            } else {
                (1, held_before)
            }
        };
        for _ in 0..copies {
            self.inner.send(to, packet.clone())?;
        }
        for p in held_before {
            self.inner.send(to, p)?;
        }
        Ok(())
    }

    fn recv(&self, node: NodeId, timeout: Duration) -> Result<Option<Packet>> {
        match self.recv_inbound(node, timeout)? {
            Some(Inbound::Packet(p)) => Ok(Some(p)),
            Some(Inbound::Foreign(_)) | None => Ok(None),
        }
    }

    fn recv_inbound(&self, node: NodeId, timeout: Duration) -> Result<Option<Inbound>> {
        let held = self.lock().held.contains_key(&node);
        // With something held back, look only briefly for anything else first.
        let wait = if held { Duration::ZERO } else { timeout };
        match self.inner.recv_inbound(node, wait)? {
            Some(i) => Ok(Some(i)),
            None => Ok(self.release(node).map(Inbound::Packet)),
        }
    }

    fn bytes_sent(&self) -> u64 {
        self.inner.bytes_sent()
    }

    fn set_down(&self, node: NodeId) {
        self.lock().held.remove(&node);
        self.inner.set_down(node);
    }

    fn ready(&self, node: NodeId) -> Option<bool> {
        let held = self.lock().held.contains_key(&node);
        Some(held || self.inner.ready(node)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::InProcess;

    fn control(seq: u32) -> Packet {
        Packet {
            from: 1,
            shard: 1,
            seq,
            flags: 0,
            body: Body::GroupStart { group: seq },
        }
    }

    fn drain(t: &impl Transport, node: NodeId) -> Vec<u32> {
        let mut seqs = Vec::new();
        while let Some(p) = t.recv(node, Duration::ZERO).unwrap() {
            seqs.push(p.seq);
        }
        seqs
    }

    #[test]
    fn each_fault_alone_does_what_it_says() {
        let all = |f: Faults| Lossy::new(InProcess::new(2), f, 7).unwrap();
        let t = all(Faults {
            drop_pct: 100,
            ..Faults::default()
        });
        t.send(1, control(1)).unwrap();
        assert!(drain(&t, 1).is_empty());
        assert_eq!(t.counters().dropped, 1);
        let t = all(Faults {
            duplicate_pct: 100,
            ..Faults::default()
        });
        t.send(1, control(1)).unwrap();
        assert_eq!(drain(&t, 1), vec![1, 1]);
        let t = all(Faults {
            reorder_pct: 100,
            ..Faults::default()
        });
        for s in 1..=3 {
            t.send(1, control(s)).unwrap();
        }
        assert_eq!(t.ready(1), Some(true));
        assert_eq!(drain(&t, 1), vec![1, 2, 3], "each held behind the next");
        assert_eq!(t.ready(1), Some(false));
        assert!(Faults {
            drop_pct: 60,
            reorder_pct: 60,
            ..Faults::default()
        }
        .check()
        .is_err());
    }

    #[test]
    fn queries_pass_untouched_unless_in_scope_and_a_seed_repeats() {
        let t = Lossy::new(
            InProcess::new(2),
            Faults {
                drop_pct: 100,
                ..Faults::default()
            },
            1,
        )
        .unwrap();
        t.send(
            1,
            Packet {
                body: Body::Get { key: 3 },
                ..control(9)
            },
        )
        .unwrap();
        assert_eq!(drain(&t, 1), vec![9]);
        let faults = Faults {
            drop_pct: 20,
            duplicate_pct: 20,
            reorder_pct: 20,
            queries: true,
        };
        let run = |seed| {
            let t = Lossy::new(InProcess::new(2), faults, seed).unwrap();
            for s in 0..200 {
                t.send(1, control(s)).unwrap();
            }
            (drain(&t, 1), t.counters())
        };
        let (a, ca) = run(5);
        assert_eq!((a.clone(), ca), run(5));
        assert!(
            ca.dropped > 0 && ca.duplicated > 0 && ca.reordered > 0,
            "{ca:?}"
        );
        assert!(
            a.windows(2).any(|w| w[0] > w[1]),
            "some arrive out of order"
        );
    }
}
