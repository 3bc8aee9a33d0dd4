//! What a driver is doing, kept in etcd (`P/moves/goal`, under the mover's
//! lock) so that the coordinator finishes it if the driver dies (issue 59;
//! docs/design.md "One mover at a time", MV4). A command's goal is cleared
//! when it ends, however it ends; only a driver that died leaves one.

use serde::{Deserialize, Serialize};

/// A driver's goal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Goal {
    /// `slots` to server `to` (`cluster move`).
    Move {
        /// The slots.
        slots: Vec<u32>,
        /// Their target.
        to: u8,
        /// Slots per batch.
        batch_slots: usize,
    },
    /// Every slot over `members`, evenly (`cluster rebalance`,
    /// `add-server`, `remove-server`'s drain).
    Rebalance {
        /// The servers to hold the slots.
        members: Vec<u8>,
        /// Slots per batch.
        batch_slots: usize,
    },
    /// The slots of dead server `dead` failed over to their backups
    /// (issue 60; `failover.rs`).
    FailOver {
        /// The dead server.
        dead: u8,
        /// The new primaries (every one must PROMOTE before any server
        /// installs the table).
        #[serde(default)]
        to: Vec<u8>,
    },
    /// Server `learner` made a backup of `primary`'s `slots` (issue 60;
    /// `rejoin.rs`). Its rerun abandons the rejoin: UNLEARN at both.
    Rejoin {
        /// The slots' owner.
        primary: u8,
        /// The server learning them.
        learner: u8,
        /// The backup it replaces, if any.
        #[serde(default)]
        replaces: Option<u8>,
        /// The slots.
        slots: Vec<u32>,
    },
    /// `from`'s `slots` handed to their backup `to` (issue 60,
    /// `cluster rebalance --primaries`; `handover.rs`). Its rerun finishes
    /// it if the table names `to`, else gives it up (UNHAND at `from`).
    HandOver {
        /// The slots' owner when it began.
        from: u8,
        /// The backup to own them.
        to: u8,
        /// The slots.
        slots: Vec<u32>,
    },
}

impl Goal {
    /// Its bytes in etcd.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a goal serializes")
    }

    /// From its bytes in etcd.
    pub fn decode(bytes: &[u8]) -> Result<Goal, String> {
        serde_json::from_slice(bytes).map_err(|e| format!("the mover's goal in etcd: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::Goal;

    #[test]
    fn goals_round_trip_and_garbage_says_where() {
        for g in [
            Goal::Move {
                slots: vec![0, 7, 4095],
                to: 2,
                batch_slots: 16,
            },
            Goal::Rebalance {
                members: vec![1, 2, 3],
                batch_slots: 64,
            },
            Goal::FailOver {
                dead: 2,
                to: vec![0, 1],
            },
            Goal::Rejoin {
                primary: 0,
                learner: 2,
                replaces: Some(1),
                slots: vec![1, 4, 7],
            },
            Goal::HandOver {
                from: 0,
                to: 2,
                slots: vec![3, 9],
            },
        ] {
            assert_eq!(Goal::decode(&g.encode()).unwrap(), g);
        }
        // A goal written before `to` existed.
        assert_eq!(
            Goal::decode(br#"{"kind":"fail-over","dead":1}"#).unwrap(),
            Goal::FailOver {
                dead: 1,
                to: Vec::new()
            }
        );
        assert!(Goal::decode(br#"{"kind":"shuffle"}"#)
            .unwrap_err()
            .contains("goal in etcd"));
    }
}
