//! What a run of the simulated twin exercised (`sim_cluster.rs`), summed over seeds.

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Coverage {
    pub(crate) acknowledged: u64,
    pub(crate) unknown: u64,
    pub(crate) refused: u64,
    pub(crate) migrated: u64,
    pub(crate) checkpoints: u64,
    pub(crate) crashes: u64,
    pub(crate) fenced: u64,
    pub(crate) restarts: u64,
    pub(crate) fenced_refusals: u64,
    pub(crate) approved: u64,
    pub(crate) moved: u64,
    pub(crate) checkpoint_failures: u64,
    pub(crate) steps: u64,
    pub(crate) slot_moves: u64,
    pub(crate) slot_moves_rolled_back: u64,
    pub(crate) joins: u64,
    /// Updates acknowledged by a node the table did not name yet (a slot
    /// served ahead of the table, V2).
    pub(crate) served_ahead: u64,
    /// Faults struck at a handed slot's old or new home before its commit.
    pub(crate) hunted: u64,
    /// Batches a mover abandoned mid-way (it died) and a new driver settled.
    pub(crate) driver_deaths: u64,
    /// Of those, batches the settling driver rolled forward (handed).
    pub(crate) settled_forward: u64,
    /// Failovers committed (replication).
    pub(crate) failovers: u64,
    /// Vertices new primaries served from their backup lists.
    pub(crate) promoted: u64,
    /// Failovers to a backup that was restarting (it joined after).
    pub(crate) to_restarting: u64,
    /// Membership events whose handling failed because a second node was
    /// down, or the handling node was killed meanwhile.
    pub(crate) recovery_errors: u64,
    /// Slots a rejoin made a live node back.
    pub(crate) rejoined: u64,
    /// Rejoins that did not commit (a node died or restarted meanwhile).
    pub(crate) rejoins_abandoned: u64,
    /// Failovers to a backup a rejoin made.
    pub(crate) to_rejoined: u64,
    /// Slots handed from their primary to a backup (primaries given back).
    pub(crate) handed_over: u64,
    /// Handovers that did not commit.
    pub(crate) handovers_abandoned: u64,
    /// Handovers struck by a fault (`sim_cluster/handover.rs` `Strike`).
    pub(crate) handover_strikes: u64,
    /// Slots copied or handed by reshapings (a node leaving, coming back).
    pub(crate) reshaped: u64,
    /// Reshapings' rejoins struck by a fault.
    pub(crate) reshape_strikes: u64,
    /// Nodes that left (drained, stopped) and came back.
    pub(crate) left: u64,
    /// Operations acknowledged while a node left and came back.
    pub(crate) acked_reshaping: u64,
}

impl Coverage {
    pub(crate) fn add(&mut self, o: &Coverage) {
        self.acknowledged += o.acknowledged;
        self.unknown += o.unknown;
        self.refused += o.refused;
        self.migrated += o.migrated;
        self.checkpoints += o.checkpoints;
        self.crashes += o.crashes;
        self.fenced += o.fenced;
        self.restarts += o.restarts;
        self.fenced_refusals += o.fenced_refusals;
        self.approved += o.approved;
        self.moved += o.moved;
        self.checkpoint_failures += o.checkpoint_failures;
        self.steps += o.steps;
        self.slot_moves += o.slot_moves;
        self.slot_moves_rolled_back += o.slot_moves_rolled_back;
        self.joins += o.joins;
        self.served_ahead += o.served_ahead;
        self.hunted += o.hunted;
        self.driver_deaths += o.driver_deaths;
        self.settled_forward += o.settled_forward;
        self.failovers += o.failovers;
        self.promoted += o.promoted;
        self.to_restarting += o.to_restarting;
        self.recovery_errors += o.recovery_errors;
        self.rejoined += o.rejoined;
        self.rejoins_abandoned += o.rejoins_abandoned;
        self.to_rejoined += o.to_rejoined;
        self.handed_over += o.handed_over;
        self.handovers_abandoned += o.handovers_abandoned;
        self.handover_strikes += o.handover_strikes;
        self.reshaped += o.reshaped;
        self.reshape_strikes += o.reshape_strikes;
        self.left += o.left;
        self.acked_reshaping += o.acked_reshaping;
    }
}
