//! The reliable part of the control plane over datagrams (NetMigrate 7: "we can add a reliable
//! transmission mechanism to our UDP-based migration protocol"), without I/O.
//!
//! Every packet a server must get answered (MIGRATE-INIT, REGISTER, GROUP-START,
//! GROUP-COMPLETE, TERMINATE, FINISH and DATA of a source; ABORT notices; PULL and MIRROR of a
//! destination) gets a sequence number from one server-wide counter and waits in
//! [`Retransmits`] until the answer echoing that number arrives. Unanswered, it is sent again
//! after `retransmit_us`, then twice that, and so on up to [`RETRANSMIT_WAIT_MAX_US`], at most
//! `retries_max` times; once the retries are spent, the last one has had its wait, *and* it has
//! waited `patience_us` since the first send, it is given up and the caller decides (a source aborts its migration, a
//! destination fails the reads or the write that waited for it).
//!
//! Receivers make every such packet idempotent (the router applies each control packet once,
//! judged by its content; the destination re-acks what it already applied; installs are
//! install-if-newer), and an answer whose number is no longer waited for is a duplicate and
//! is ignored. Numbers are per server, not per peer: they only match answers to requests.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::wire::{NodeId, Packet};

/// The longest wait between two sends of one packet (the backoff's cap).
pub const RETRANSMIT_WAIT_MAX_US: u64 = 1_000_000;
/// Packets waiting for an answer per server, at most (each is bounded by a protocol window:
/// batches in flight, groups in flight, parked reads, mirrored writes).
pub const RETRANSMITS_PENDING_MAX: usize = 1 << 20;

/// When to send again and when to give up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// First wait for an answer before sending again.
    pub retransmit_us: u64,
    /// Sends after the first, at most.
    pub retries_max: u32,
    /// A packet is given up only after this long since its first send (and its retries).
    pub patience_us: u64,
}

impl RetryPolicy {
    /// Checks the policy, naming the setting.
    pub fn check(&self) -> Result<()> {
        if self.retransmit_us == 0 || self.retransmit_us > RETRANSMIT_WAIT_MAX_US {
            return Err(Error::InvalidSetting {
                key: "retransmit_us",
                value: self.retransmit_us.to_string(),
                expected: format!("1..={RETRANSMIT_WAIT_MAX_US}"),
            });
        }
        if self.retries_max > 64 {
            return Err(Error::InvalidSetting {
                key: "retries_max",
                value: self.retries_max.to_string(),
                expected: "0..=64".into(),
            });
        }
        Ok(())
    }

    /// This policy with at most as many resends as fit in `patience_us`: the waits before and
    /// after them all end by then, so a packet is given up at its patience rather than at the
    /// end of a longer schedule of resends (with the defaults, 20 ms doubling to 1 s, eight
    /// resends take 4.26 s). No resend fits a patience shorter than `retransmit_us`, which
    /// then is the earliest give-up.
    pub fn fitted_to_patience(self) -> Self {
        let mut retries_max = 0;
        let mut total_us = self.wait_us(0);
        while retries_max < self.retries_max {
            let next_us = total_us.saturating_add(self.wait_us(retries_max + 1));
            if next_us > self.patience_us {
                break;
            }
            total_us = next_us;
            retries_max += 1;
        }
        Self {
            retries_max,
            ..self
        }
    }

    /// When a packet sent at 0 and never answered is given up under this policy.
    pub fn give_up_us(&self) -> u64 {
        let resends_us: u64 = (0..=self.retries_max).map(|t| self.wait_us(t)).sum();
        resends_us.max(self.patience_us)
    }

    fn wait_us(&self, tries: u32) -> u64 {
        self.retransmit_us
            .saturating_mul(1u64 << tries.min(20))
            .min(RETRANSMIT_WAIT_MAX_US)
    }
}

#[derive(Clone, Debug)]
struct Pending {
    to: NodeId,
    packet: Packet,
    first_us: u64,
    next_us: u64,
    tries: u32,
}

/// A packet given up after its retries and patience.
#[derive(Clone, Debug)]
pub struct Lost {
    /// Where it was going.
    pub to: NodeId,
    /// The packet (its `seq` is the one given up).
    pub packet: Packet,
    /// Times it was sent again.
    pub retries: u32,
    /// Microseconds since its first send.
    pub waited_us: u64,
}

/// Packets waiting for their answers, by sequence number.
#[derive(Clone, Debug)]
pub struct Retransmits {
    policy: RetryPolicy,
    pending: BTreeMap<u32, Pending>,
    next_seq: u32,
    resent: u64,
}

impl Retransmits {
    /// An empty table under `policy`.
    pub fn new(policy: RetryPolicy) -> Self {
        Self {
            policy,
            pending: BTreeMap::new(),
            next_seq: 1,
            resent: 0,
        }
    }

    /// Numbers `packet`, remembers it, and returns it to send now.
    pub fn send(&mut self, now_us: u64, to: NodeId, mut packet: Packet) -> (NodeId, Packet) {
        // 0 means "no answer expected"; skip it and any number still waiting after a wrap.
        while self.next_seq == 0 || self.pending.contains_key(&self.next_seq) {
            self.next_seq = self.next_seq.wrapping_add(1);
        }
        packet.seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        assert!(
            self.pending.len() < RETRANSMITS_PENDING_MAX,
            "more than {RETRANSMITS_PENDING_MAX} packets wait for answers: a window is unbounded"
        );
        self.pending.insert(
            packet.seq,
            Pending {
                to,
                packet: packet.clone(),
                first_us: now_us,
                next_us: now_us + self.policy.wait_us(0),
                tries: 0,
            },
        );
        (to, packet)
    }

    /// The answer to `seq` arrived from `from`: the packet it answers, or `None` for a duplicate
    /// answer, one to a packet already given up, or one from another node than it went to.
    pub fn ack(&mut self, seq: u32, from: NodeId) -> Option<Packet> {
        match self.pending.get(&seq) {
            Some(p) if p.to == from => self.pending.remove(&seq).map(|p| p.packet),
            _ => None,
        }
    }

    /// Whether `seq` still waits for its answer.
    pub fn waiting(&self, seq: u32) -> bool {
        self.pending.contains_key(&seq)
    }

    /// Forgets every packet `keep` refuses (an aborted migration's).
    pub fn forget(&mut self, mut keep: impl FnMut(&Packet) -> bool) {
        self.pending.retain(|_, p| keep(&p.packet));
    }

    /// The packets to send again at `now_us` (pushed to `out`), and those given up.
    pub fn due(&mut self, now_us: u64, out: &mut Vec<(NodeId, Packet)>) -> Vec<Lost> {
        let policy = self.policy;
        let mut lost = Vec::new();
        for p in self.pending.values_mut() {
            if now_us < p.next_us {
                continue;
            }
            if p.tries < policy.retries_max {
                p.tries += 1;
                p.next_us = now_us + policy.wait_us(p.tries);
                self.resent += 1;
                out.push((p.to, p.packet.clone()));
            } else if now_us >= p.first_us + policy.patience_us {
                lost.push(Lost {
                    to: p.to,
                    packet: p.packet.clone(),
                    retries: p.tries,
                    waited_us: now_us - p.first_us,
                });
            } else {
                // Retries spent: wait out the patience without sending more.
                p.next_us = p.first_us + policy.patience_us;
            }
        }
        for l in &lost {
            self.pending.remove(&l.packet.seq);
        }
        lost
    }

    /// Packets waiting.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Packets sent again so far.
    pub fn resent(&self) -> u64 {
        self.resent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Body;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            retransmit_us: 10,
            retries_max: 3,
            patience_us: 1000,
        }
    }

    fn pkt() -> Packet {
        Packet {
            from: 1,
            shard: 1,
            seq: 0,
            flags: 0,
            body: Body::Terminate,
        }
    }

    #[test]
    fn numbers_resends_with_backoff_and_gives_up_after_retries_and_patience() {
        let mut r = Retransmits::new(policy());
        let (to, p) = r.send(0, 7, pkt());
        assert_eq!((to, p.seq), (7, 1));
        let mut out = Vec::new();
        assert!(r.due(9, &mut out).is_empty() && out.is_empty());
        // Sends again at 10, 10 + 20, 30 + 40: three retries.
        for at in [10, 30, 70] {
            assert!(r.due(at, &mut out).is_empty());
            assert_eq!(
                out.pop().map(|(to, p)| (to, p.seq)),
                Some((7, 1)),
                "at {at}"
            );
        }
        assert!(r.due(500, &mut out).is_empty() && out.is_empty(), "no 4th");
        let lost = r.due(1000, &mut out);
        assert_eq!(lost.len(), 1);
        assert_eq!((lost[0].retries, lost[0].waited_us), (3, 1000));
        assert!(r.is_empty());
        assert_eq!(r.resent(), 3);
    }

    /// Drives one unanswered packet on a simulated clock: when it is given up.
    fn given_up_at_us(policy: RetryPolicy) -> u64 {
        let mut r = Retransmits::new(policy);
        r.send(0, 7, pkt());
        let mut out = Vec::new();
        (0..=policy.give_up_us() + 1)
            .step_by(100)
            .find(|&at| !r.due(at, &mut out).is_empty())
            .unwrap_or(u64::MAX)
    }

    #[test]
    fn a_patience_shorter_than_the_resends_is_kept_once_fitted() {
        let cli_defaults = RetryPolicy {
            retransmit_us: 20_000,
            retries_max: 8,
            patience_us: 500_000,
        };
        // Unfitted, 8 resends of 20 ms doubling to 1 s outlast the 500 ms patience.
        assert_eq!(given_up_at_us(cli_defaults), 4_260_000);
        let fitted = cli_defaults.fitted_to_patience();
        assert_eq!(fitted.retries_max, 3, "20 + 40 + 80 + 160 ms fit in 500");
        assert_eq!(given_up_at_us(fitted), 500_000);
        assert_eq!(fitted.give_up_us(), 500_000);
        // A long patience keeps every resend; a tiny one none, given up after the first wait.
        let long = RetryPolicy {
            patience_us: 60_000_000,
            ..cli_defaults
        };
        assert_eq!(long.fitted_to_patience(), long);
        let tiny = RetryPolicy {
            patience_us: 1_000,
            ..cli_defaults
        };
        assert_eq!(tiny.fitted_to_patience().retries_max, 0);
        assert_eq!(given_up_at_us(tiny.fitted_to_patience()), 20_000);
    }

    #[test]
    fn an_answer_stops_it_and_a_second_answer_is_a_duplicate() {
        let mut r = Retransmits::new(policy());
        let (_, a) = r.send(0, 7, pkt());
        let (_, b) = r.send(0, 7, pkt());
        assert_ne!(a.seq, b.seq);
        assert!(r.ack(a.seq, 8).is_none(), "not from where it went");
        assert!(r.ack(a.seq, 7).is_some());
        assert!(r.ack(a.seq, 7).is_none(), "duplicate");
        let mut out = Vec::new();
        r.due(10, &mut out);
        assert_eq!(out.len(), 1, "only b is sent again");
        r.forget(|p| p.seq != b.seq);
        assert!(r.is_empty());
        assert!(RetryPolicy {
            retransmit_us: 0,
            ..policy()
        }
        .check()
        .is_err());
    }
}
