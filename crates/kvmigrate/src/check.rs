//! A per-key linearizability checker for a register (Wing & Gong's search with Lowe's memo of
//! visited configurations), for the client histories the tests record (NetMigrate 4.3, 7).
//!
//! A history is a list of operations with invocation and response instants from one logical
//! clock. A write whose outcome is unknown (timed out, refused) has no response: it may take
//! effect at any point after its invocation, or never. Reads that failed say nothing and are
//! left out by the recorder.

use std::collections::{BTreeMap, HashSet};

use crate::wire::Key;

/// One recorded operation on one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op {
    /// The client that issued it (for messages).
    pub client: u32,
    /// The key.
    pub key: Key,
    /// What it did.
    pub kind: OpKind,
    /// Invocation instant.
    pub invoke: u64,
    /// Response instant; `None` if the outcome is unknown (writes only).
    pub response: Option<u64>,
}

/// A read with what it saw, or a write (`None` deletes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// Read, with the value returned (`None`: absent).
    Read(Option<Vec<u8>>),
    /// Write of a value, or deletion.
    Write(Option<Vec<u8>>),
}

/// Histories longer than this per key are refused (the search is exponential in concurrency).
pub const OPS_PER_KEY_MAX: usize = 2048;
/// Configurations explored per key before giving up (reported as an error, never as a pass).
pub const CONFIGURATIONS_MAX: usize = 2_000_000;

/// The error of a history that has no valid order (a violation; other errors mean the
/// checker gave up).
pub const NO_VALID_ORDER: &str = "no valid order";

/// Checks every key's history; `initial` gives each key's value before the history.
/// On failure, the message names the key and shows its history.
pub fn check_history(ops: &[Op], initial: impl Fn(Key) -> Option<Vec<u8>>) -> Result<(), String> {
    let mut by_key: BTreeMap<Key, Vec<Op>> = BTreeMap::new();
    for op in ops {
        if let Some(r) = op.response {
            if r < op.invoke {
                return Err(format!("op {op:?} responds before it is invoked"));
            }
        } else if matches!(op.kind, OpKind::Read(_)) {
            return Err(format!(
                "read {op:?} has no response; leave failed reads out"
            ));
        }
        by_key.entry(op.key).or_default().push(op.clone());
    }
    for (key, mut ops) in by_key {
        if ops.len() > OPS_PER_KEY_MAX {
            return Err(format!(
                "key {key}: {} ops exceed OPS_PER_KEY_MAX = {OPS_PER_KEY_MAX}",
                ops.len()
            ));
        }
        ops.sort_by_key(|o| o.invoke);
        if let Err(e) = check_key(&ops, initial(key)) {
            let mut msg = format!("key {key} is not linearizable ({e}); history:\n");
            for o in &ops {
                msg.push_str(&format!(
                    "  client {} {:?} [{}, {}]\n",
                    o.client,
                    o.kind,
                    o.invoke,
                    o.response.map_or("?".to_string(), |r| r.to_string())
                ));
            }
            return Err(msg);
        }
    }
    Ok(())
}

fn check_key(ops: &[Op], initial: Option<Vec<u8>>) -> Result<(), &'static str> {
    explore(ops, &[initial], false).map(|_| ())
}

/// The register values a history of one key can end with, starting from any of `initials`:
/// one per valid order of all its completed operations (each order ends with the value of its
/// last write, or its initial value). Empty: no valid order, the history is not linearizable.
///
/// Meant for a segment of a history that ends at a quiescent instant (every operation before it
/// has responded), so that the next segment may start from any of these values: this is how
/// [`crate::history`] checks histories far longer than [`OPS_PER_KEY_MAX`]. A write with an
/// unknown outcome may take effect after the segment ends, so a segment holding one must be the
/// last; this function does not let it take effect after the completed operations (it asserts
/// there is none in debug builds).
pub fn final_values(
    ops: &[Op],
    initials: &[Option<Vec<u8>>],
) -> Result<Vec<Option<Vec<u8>>>, &'static str> {
    debug_assert!(ops.iter().all(|o| o.response.is_some()));
    if ops.len() > OPS_PER_KEY_MAX {
        return Err("segment longer than OPS_PER_KEY_MAX");
    }
    let mut sorted = ops.to_vec();
    sorted.sort_by_key(|o| o.invoke);
    explore(&sorted, initials, true)
}

/// Whether one key's history (unknown-outcome writes allowed) has a valid order starting from
/// any of `initials`: the last segment of a history cut at quiescent instants.
pub fn linearizable_from(ops: &[Op], initials: &[Option<Vec<u8>>]) -> Result<(), &'static str> {
    if ops.len() > OPS_PER_KEY_MAX {
        return Err("segment longer than OPS_PER_KEY_MAX");
    }
    let mut sorted = ops.to_vec();
    sorted.sort_by_key(|o| o.invoke);
    explore(&sorted, initials, false).map(|_| ())
}

/// Depth-first search over (linearized set, register value) from each initial value, with a
/// memo of visited configurations. With `all`, collects the value of every configuration where
/// all completed ops are linearized; otherwise stops at the first. `ops` sorted by invocation.
fn explore(
    ops: &[Op],
    initials: &[Option<Vec<u8>>],
    all: bool,
) -> Result<Vec<Option<Vec<u8>>>, &'static str> {
    let n = ops.len();
    let words = n.div_ceil(64).max(1);
    let completed = ops.iter().filter(|o| o.response.is_some()).count();
    let mut seen: HashSet<(Vec<u64>, Option<Vec<u8>>)> = HashSet::new();
    let mut finals: Vec<Option<Vec<u8>>> = Vec::new();
    // An explicit stack of frames holding the candidates still to try at each depth.
    struct Frame {
        done: Vec<u64>,
        value: Option<Vec<u8>>,
        completed_done: usize,
        candidates: Vec<usize>,
    }
    let is_done = |d: &[u64], i: usize| d[i / 64] & (1 << (i % 64)) != 0;
    let candidates = |d: &[u64], value: &Option<Vec<u8>>| -> Vec<usize> {
        // An op may go next if no other pending completed op responded before it was invoked.
        let min_resp = (0..n)
            .filter(|&i| !is_done(d, i))
            .filter_map(|i| ops[i].response)
            .min()
            .unwrap_or(u64::MAX);
        (0..n)
            .filter(|&i| !is_done(d, i) && ops[i].invoke < min_resp)
            .filter(|&i| match &ops[i].kind {
                OpKind::Read(v) => v == value,
                OpKind::Write(_) => true,
            })
            .collect()
    };
    for initial in initials {
        let root = vec![0u64; words];
        if !seen.insert((root.clone(), initial.clone())) {
            continue;
        }
        let c = candidates(&root, initial);
        let mut stack = vec![Frame {
            done: root,
            value: initial.clone(),
            completed_done: 0,
            candidates: c,
        }];
        while let Some(top) = stack.last_mut() {
            if top.completed_done == completed {
                if !finals.contains(&top.value) {
                    finals.push(top.value.clone());
                }
                if !all {
                    return Ok(finals);
                }
                stack.pop();
                continue;
            }
            let Some(i) = top.candidates.pop() else {
                stack.pop();
                continue;
            };
            let mut done = top.done.clone();
            done[i / 64] |= 1 << (i % 64);
            let value = match &ops[i].kind {
                OpKind::Read(_) => top.value.clone(),
                OpKind::Write(v) => v.clone(),
            };
            let completed_done = top.completed_done + ops[i].response.is_some() as usize;
            if !seen.insert((done.clone(), value.clone())) {
                continue;
            }
            if seen.len() > CONFIGURATIONS_MAX {
                return Err("search too large; shorten the history");
            }
            let c = candidates(&done, &value);
            stack.push(Frame {
                done,
                value,
                completed_done,
                candidates: c,
            });
        }
    }
    if finals.is_empty() {
        Err(NO_VALID_ORDER)
    } else {
        Ok(finals)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(client: u32, v: u8, invoke: u64, response: Option<u64>) -> Op {
        Op {
            client,
            key: 1,
            kind: OpKind::Write(Some(vec![v])),
            invoke,
            response,
        }
    }
    fn r(client: u32, v: Option<u8>, invoke: u64, response: u64) -> Op {
        Op {
            client,
            key: 1,
            kind: OpKind::Read(v.map(|v| vec![v])),
            invoke,
            response: Some(response),
        }
    }

    #[test]
    fn sequential_and_concurrent_histories_pass() {
        let h = vec![
            w(0, 1, 1, Some(2)),
            r(1, Some(1), 3, 4),
            w(0, 2, 5, Some(8)),
            r(1, Some(1), 6, 7),
        ];
        check_history(&h, |_| None).unwrap();
        // A read concurrent with a write may see either value.
        let h = vec![w(0, 1, 1, Some(10)), r(1, None, 2, 3), r(2, Some(1), 4, 5)];
        check_history(&h, |_| None).unwrap();
    }

    #[test]
    fn stale_read_after_write_fails() {
        let h = vec![w(0, 1, 1, Some(2)), r(1, None, 3, 4)];
        assert!(check_history(&h, |_| None).is_err());
    }

    #[test]
    fn reads_cannot_go_back_in_time() {
        // Two sequential reads see the new then the old value while the write is still open.
        let h = vec![w(0, 1, 1, Some(100)), r(1, Some(1), 2, 3), r(1, None, 4, 5)];
        assert!(check_history(&h, |_| None).is_err());
    }

    #[test]
    fn lost_write_fails_and_unknown_writes_may_vanish() {
        let h = vec![
            w(0, 1, 1, Some(2)),
            w(0, 2, 3, Some(4)),
            r(1, Some(1), 5, 6),
        ];
        assert!(check_history(&h, |_| None).is_err());
        let h = vec![
            w(0, 1, 1, Some(2)),
            w(0, 2, 3, None),
            r(1, Some(1), 5, 6),
            r(1, Some(2), 7, 8),
        ];
        check_history(&h, |_| None).unwrap();
        let h = vec![w(0, 2, 3, None), r(1, Some(2), 7, 8), r(1, None, 9, 10)];
        assert!(
            check_history(&h, |_| None).is_err(),
            "an unknown write cannot be undone"
        );
    }

    #[test]
    fn initial_values_count() {
        let h = vec![r(0, Some(7), 1, 2)];
        check_history(&h, |_| Some(vec![7])).unwrap();
        assert!(check_history(&h, |_| None).is_err());
    }

    #[test]
    fn final_values_are_every_possible_last_write() {
        // Two concurrent writes: either may be last.
        let h = vec![w(0, 1, 1, Some(4)), w(1, 2, 2, Some(3))];
        let mut f = final_values(&h, &[None]).unwrap();
        f.sort();
        assert_eq!(f, vec![Some(vec![1]), Some(vec![2])]);
        // A read after both pins the order.
        let h = vec![
            w(0, 1, 1, Some(4)),
            w(1, 2, 2, Some(3)),
            r(2, Some(2), 5, 6),
        ];
        assert_eq!(final_values(&h, &[None]).unwrap(), vec![Some(vec![2])]);
        // Only reads: the initial value survives, from whichever initial fits.
        let h = vec![r(0, Some(7), 1, 2)];
        assert_eq!(
            final_values(&h, &[Some(vec![3]), Some(vec![7])]).unwrap(),
            vec![Some(vec![7])]
        );
        assert!(final_values(&h, &[Some(vec![3])]).is_err());
    }
}
