//! Delay, jitter and loss on one node's link, in user space.
//!
//! `tc qdisc ... netem` is the usual tool, but the kernels Locus runs on
//! (its CI's among them) are built without `sch_netem`
//! (`CONFIG_NET_SCH_NETEM` unset, no modules), so `tc` answers "Specified
//! qdisc kind is unknown". What they do have is NFQUEUE: one iptables rule
//! in node i's namespace,
//!
//! ```text
//!  OUTPUT -> locus-netem: -o eth0 -j NFQUEUE --queue-num 0
//! ```
//!
//! hands every IPv4 packet node i sends on its link to a queue, and an
//! [`Engine`] thread of this process, bound to that queue from inside the
//! namespace, holds each packet for its delay (or drops it) and then tells
//! the kernel to let it go. What it changes is what netem on node i's veth
//! would change: the packets node i sends, on that one link; loopback
//! (`lo`, in node i's namespace and in the host's) never passes the rule.
//!
//! What a packet meets is in [`Netem`]'s doc: netem's semantics, seeded.
//!
//! The queue is fail-closed: if the engine stops on an error, node i's
//! packets are dropped (not let through undelayed) until `clear_netem`,
//! which returns that error; the engine also prints it at once.

mod nfqueue;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use crate::error::{NetlabError, Result};

/// The longest delay (and so jitter) a [`Netem`] may ask for.
pub const NETEM_DELAY_MS_MAX: u32 = 10_000;

/// The queue's length in the kernel: packets held at once, at most.
pub(crate) const PENDING_PACKETS_MAX: u32 = 4096;

/// The queue number inside a node's namespace (each namespace has its own
/// queues, so every node uses the same one).
pub(crate) const QUEUE_NUM: u16 = 0;

/// How often a running engine looks at its stop flag when no packet is due.
const STOP_CHECK_MS: u64 = 20;

/// How long an engine may take to enter the namespace and bind its queue.
const START_TIMEOUT_MS: u64 = 5_000;

/// Delay, jitter and loss for the packets one node sends on its link, as
/// netem would apply them on that node's veth: each packet is dropped with
/// probability `loss_pct / 100`, else held for `delay_ms` plus a uniform
/// draw from `[-jitter_ms, +jitter_ms]` (so with jitter, packets may be
/// reordered). A round trip through the node's link gains the delay once
/// (the node's leg). The draws come from `seed`; which packet meets which
/// draw depends on arrival order, so a run is not replayed packet for
/// packet. At most 4096 packets are held at once; past that the kernel
/// drops, as netem does past its `limit`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Netem {
    /// Added to every packet that is not lost, in milliseconds.
    pub delay_ms: u32,
    /// Each packet's delay is `delay_ms` plus a uniform draw from
    /// `[-jitter_ms, +jitter_ms]`; at most `delay_ms`.
    pub jitter_ms: u32,
    /// The chance, in percent (0 to 100), that a packet is dropped.
    pub loss_pct: f64,
    /// Seeds the draws of jitter and loss.
    pub seed: u64,
}

impl Netem {
    /// Checks every field against its range, naming the one that is not.
    pub fn validate(&self) -> Result<()> {
        let invalid = |field, value: String, reason| {
            Err(NetlabError::InvalidNetem {
                field,
                value,
                reason,
            })
        };
        if self.delay_ms > NETEM_DELAY_MS_MAX {
            return invalid(
                "delay_ms",
                self.delay_ms.to_string(),
                "at most NETEM_DELAY_MS_MAX (10000)",
            );
        }
        if self.jitter_ms > self.delay_ms {
            return invalid(
                "jitter_ms",
                self.jitter_ms.to_string(),
                "at most delay_ms (a packet is never sent before it was queued)",
            );
        }
        if !(0.0..=100.0).contains(&self.loss_pct) {
            return invalid("loss_pct", self.loss_pct.to_string(), "0 to 100");
        }
        Ok(())
    }
}

/// SplitMix64: small, seedable, good enough for choosing delays.
struct Draws(u64);

impl Draws {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// What happens to each packet: the policy, without the queue.
pub(crate) struct Decider {
    netem: Netem,
    draws: Draws,
}

impl Decider {
    pub(crate) fn new(netem: Netem) -> Decider {
        Decider {
            netem,
            draws: Draws(netem.seed),
        }
    }

    /// `None`: drop the packet; else hold it this long.
    pub(crate) fn decide(&mut self) -> Option<Duration> {
        if self.draws.unit() * 100.0 < self.netem.loss_pct {
            return None;
        }
        let delay_us = i64::from(self.netem.delay_ms) * 1000;
        let jitter_us = i64::from(self.netem.jitter_ms) * 1000;
        let offset_us = if jitter_us == 0 {
            0
        } else {
            // Uniform over [-jitter, +jitter].
            (self.draws.next() % (2 * jitter_us as u64 + 1)) as i64 - jitter_us
        };
        let held_us = (delay_us + offset_us).max(0);
        Some(Duration::from_micros(held_us as u64))
    }
}

/// One node's delay queue: a thread inside the node's namespace, bound to
/// its NFQUEUE, holding packets until they are due.
pub(crate) struct Engine {
    stop: Arc<AtomicBool>,
    thread: thread::JoinHandle<Result<(), String>>,
}

impl Engine {
    /// Starts the thread and waits until its queue is bound: only then may
    /// the rule that feeds the queue go in (packets queued to a queue
    /// nobody has bound are dropped).
    pub(crate) fn start(node: usize, namespace: &str, netem: Netem) -> Result<Engine> {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<(), String>>(1);
        let namespace = namespace.to_string();
        let stopping = Arc::clone(&stop);
        let spawned = thread::Builder::new()
            .name(format!("netlab-netem-{node}"))
            .spawn(move || {
                let opened = nfqueue::enter_namespace(&namespace)
                    .and_then(|()| nfqueue::Queue::open(QUEUE_NUM, PENDING_PACKETS_MAX))
                    .map_err(|e| {
                        format!("binding queue {QUEUE_NUM} in namespace {namespace}: {e}")
                    });
                let mut queue = match opened {
                    Ok(queue) => queue,
                    Err(message) => {
                        let _ = ready_tx.send(Err(message.clone()));
                        return Err(message);
                    }
                };
                let _ = ready_tx.send(Ok(()));
                let served = serve(&mut queue, netem, &stopping);
                if let Err(message) = &served {
                    if !stopping.load(Ordering::Acquire) {
                        eprintln!(
                            "netlab: the delay queue of node {node} stopped: {message}; \
                             its outgoing packets are dropped until clear_netem"
                        );
                    }
                }
                served
            });
        let thread = spawned.map_err(|e| NetlabError::Netem {
            node,
            message: format!("cannot start its thread: {e}"),
        })?;
        match ready_rx.recv_timeout(Duration::from_millis(START_TIMEOUT_MS)) {
            Ok(Ok(())) => Ok(Engine { stop, thread }),
            Ok(Err(message)) => {
                let _ = thread.join();
                Err(NetlabError::Netem { node, message })
            }
            Err(_) => {
                // Stuck or gone without a word: tell it to stop if it ever
                // gets going, and do not wait for it.
                stop.store(true, Ordering::Release);
                Err(NetlabError::Netem {
                    node,
                    message: format!("its thread was not ready within {START_TIMEOUT_MS} ms"),
                })
            }
        }
    }

    /// Lets every held packet go, unbinds the queue, and returns the error
    /// the engine stopped on, if it stopped on one before.
    pub(crate) fn stop(self) -> Result<(), String> {
        self.stop.store(true, Ordering::Release);
        self.thread
            .join()
            .unwrap_or_else(|_| Err("its thread panicked".to_string()))
    }
}

/// The engine's loop: take packets as they come, decide, let them go when
/// due. On return every held packet has been let go.
fn serve(queue: &mut nfqueue::Queue, netem: Netem, stop: &AtomicBool) -> Result<(), String> {
    let mut decider = Decider::new(netem);
    // Earliest due first; the id breaks ties, in arrival order for equal
    // times (ids grow).
    let mut held: BinaryHeap<Reverse<(Instant, u32)>> = BinaryHeap::new();
    let pumped = pump(queue, &mut decider, &mut held, stop);
    // A stop comes after the rule is gone, so nothing more arrives: what is
    // held goes now rather than being dropped with the queue.
    let released = held
        .into_iter()
        .try_for_each(|Reverse((_, id))| queue.verdict(id, true));
    pumped.and(released.map_err(|e| format!("letting held packets go: {e}")))
}

fn pump(
    queue: &mut nfqueue::Queue,
    decider: &mut Decider,
    held: &mut BinaryHeap<Reverse<(Instant, u32)>>,
    stop: &AtomicBool,
) -> Result<(), String> {
    let stop_check = Duration::from_millis(STOP_CHECK_MS);
    while !stop.load(Ordering::Acquire) {
        let now = Instant::now();
        while let Some(&Reverse((due, id))) = held.peek() {
            if due > now {
                break;
            }
            held.pop();
            queue
                .verdict(id, true)
                .map_err(|e| format!("letting packet {id} go: {e}"))?;
        }
        let wait = held
            .peek()
            .map_or(stop_check, |Reverse((due, _))| {
                due.saturating_duration_since(now)
            })
            .min(stop_check);
        let ids = queue
            .receive(wait)
            .map_err(|e| format!("receiving packets: {e}"))?;
        let arrived = Instant::now();
        for id in ids {
            match decider.decide() {
                None => queue
                    .verdict(id, false)
                    .map_err(|e| format!("dropping packet {id}: {e}"))?,
                Some(hold) => held.push(Reverse((arrived + hold, id))),
            }
        }
        // The kernel hands out no more than its queue holds.
        debug_assert!(held.len() <= PENDING_PACKETS_MAX as usize);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decisions(netem: Netem, count: usize) -> Vec<Option<Duration>> {
        let mut decider = Decider::new(netem);
        (0..count).map(|_| decider.decide()).collect()
    }

    #[test]
    fn no_loss_never_drops_and_full_loss_always_does() {
        let none = Netem {
            delay_ms: 5,
            ..Netem::default()
        };
        assert!(decisions(none, 10_000)
            .iter()
            .all(|d| *d == Some(Duration::from_millis(5))));
        let all = Netem {
            loss_pct: 100.0,
            ..Netem::default()
        };
        assert!(decisions(all, 10_000).iter().all(Option::is_none));
    }

    #[test]
    fn jitter_stays_within_its_bounds_and_reaches_both_sides() {
        let netem = Netem {
            delay_ms: 100,
            jitter_ms: 30,
            seed: 7,
            ..Netem::default()
        };
        let held: Vec<Duration> = decisions(netem, 10_000).into_iter().flatten().collect();
        assert_eq!(held.len(), 10_000);
        let (low, high) = (Duration::from_millis(70), Duration::from_millis(130));
        assert!(held.iter().all(|d| (low..=high).contains(d)));
        assert!(held.iter().any(|d| *d < Duration::from_millis(80)));
        assert!(held.iter().any(|d| *d > Duration::from_millis(120)));
    }

    #[test]
    fn loss_is_near_its_rate_and_one_seed_gives_one_sequence() {
        let netem = Netem {
            loss_pct: 25.0,
            seed: 42,
            ..Netem::default()
        };
        let first = decisions(netem, 20_000);
        let lost = first.iter().filter(|d| d.is_none()).count();
        assert!(
            (4_000..6_000).contains(&lost),
            "{lost} of 20000 lost at 25%"
        );
        assert_eq!(first, decisions(netem, 20_000));
        let other = Netem { seed: 43, ..netem };
        assert_ne!(first, decisions(other, 20_000));
    }

    #[test]
    fn each_field_out_of_range_is_named() {
        let field = |netem: Netem| match netem.validate() {
            Err(NetlabError::InvalidNetem { field, .. }) => field,
            other => panic!("expected InvalidNetem, got {other:?}"),
        };
        let ok = Netem {
            delay_ms: NETEM_DELAY_MS_MAX,
            jitter_ms: NETEM_DELAY_MS_MAX,
            loss_pct: 100.0,
            seed: 0,
        };
        ok.validate().expect("the largest values are valid");
        assert_eq!(
            field(Netem {
                delay_ms: NETEM_DELAY_MS_MAX + 1,
                jitter_ms: 0,
                ..ok
            }),
            "delay_ms"
        );
        assert_eq!(
            field(Netem {
                delay_ms: 5,
                jitter_ms: 6,
                ..ok
            }),
            "jitter_ms"
        );
        assert_eq!(
            field(Netem {
                loss_pct: 100.5,
                ..ok
            }),
            "loss_pct"
        );
        assert_eq!(
            field(Netem {
                loss_pct: -1.0,
                ..ok
            }),
            "loss_pct"
        );
        assert_eq!(
            field(Netem {
                loss_pct: f64::NAN,
                ..ok
            }),
            "loss_pct"
        );
    }
}
