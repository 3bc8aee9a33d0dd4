//! The configurations each experiment measures: protocols, write ratios,
//! source budgets, filter sizes and group sizes.

use locus_kvmigrate::Protocol;
use locus_workloads::ycsb::Workload;

use super::RunSettings;

/// One configuration to measure.
#[derive(Clone, Debug)]
pub(super) struct Case {
    /// The row's label.
    pub label: String,
    /// The protocol.
    pub protocol: Protocol,
    /// Destinations mirror writes to the source.
    pub mirror_writes: bool,
    /// Share of SETs.
    pub write_ratio: f64,
    /// The source's CPU budget for queries, percent.
    pub source_budget_pct: u8,
    /// Bloom filter bytes.
    pub bf_bytes: usize,
    /// Counting Bloom filter bytes.
    pub cbf_bytes: usize,
    /// log2 of buckets per migration group.
    pub group_buckets_log2: u8,
    /// Redis Cluster's own resharding instead of `protocol` (the Redis backend's extra row).
    pub redis_cluster: bool,
}

impl Case {
    fn new(s: &RunSettings, protocol: Protocol, write_ratio: f64, source_budget_pct: u8) -> Self {
        Self {
            label: protocol.name().to_string(),
            protocol,
            mirror_writes: s.mirror_writes,
            write_ratio,
            source_budget_pct,
            bf_bytes: s.bf_bytes,
            cbf_bytes: s.cbf_bytes,
            group_buckets_log2: s.group_buckets_log2,
            redis_cluster: false,
        }
    }

    fn mirrored(mut self) -> Self {
        self.mirror_writes = true;
        self.label = format!("{}-mirrored", self.label);
        self
    }

    fn labelled(mut self, label: &str) -> Self {
        self.label = label.to_string();
        self
    }
}

pub(super) const WRITE_RATIOS: [f64; 4] = [0.0, 0.1, 0.2, 0.3];
pub(super) const BUDGETS_PCT: [u8; 3] = [100, 70, 40];

/// The protocols of Tables 4-7 plus mirrored NetMigrate.
pub(super) fn matrix_cases(s: &RunSettings) -> Vec<Case> {
    let mut cases = Vec::new();
    for &w in &WRITE_RATIOS {
        for &b in &BUDGETS_PCT {
            for p in [
                Protocol::SourceBased,
                Protocol::Rocksteady,
                Protocol::Fulva,
                Protocol::NetMigrate,
            ] {
                cases.push(Case::new(s, p, w, b));
            }
            cases.push(Case::new(s, Protocol::NetMigrate, w, b).mirrored());
        }
    }
    cases
}

fn ycsb_b_write_ratio() -> f64 {
    Workload::b().update_proportion
}

pub(super) fn overall_cases(s: &RunSettings) -> Vec<Case> {
    let w = ycsb_b_write_ratio();
    let mut cases = vec![
        Case::new(s, Protocol::NetMigrate, w, 100).labelled("netmigrate-long"),
        Case::new(s, Protocol::NetMigrate, w, 70).labelled("netmigrate-medium"),
        Case::new(s, Protocol::NetMigrate, w, 40).labelled("netmigrate-short"),
        Case::new(s, Protocol::NetMigrate, w, 100).mirrored(),
    ];
    for p in [
        Protocol::StopAndCopy,
        Protocol::SourceBased,
        Protocol::Rocksteady,
        Protocol::Fulva,
    ] {
        cases.push(Case::new(s, p, w, 100));
    }
    if s.redis_server.is_some() {
        // What a Redis user would do instead: Redis Cluster moves every slot (so the same
        // keys) with `redis-cli --cluster reshard`, under the same load.
        let mut c = Case::new(s, Protocol::SourceBased, w, 100).labelled("redis-cluster");
        c.redis_cluster = true;
        cases.push(c);
    }
    cases
}

/// Table 2's settings: CBF sweep at 32 bits per group, then BF sweep at a 64-byte CBF. The
/// paper's byte sizes are for 2^17 groups; the BF is scaled to keep its bits per group, the CBF
/// (which holds only the groups in flight) keeps its size.
pub(super) fn filter_cases(s: &RunSettings) -> Vec<Case> {
    let groups = s.groups(s.group_buckets_log2) as usize;
    let bf_for = |bits: usize| (groups * bits / 8).max(1);
    let w = ycsb_b_write_ratio();
    let mut settings = Vec::new();
    for cbf in [128, 64, 32, 16] {
        settings.push((bf_for(32), cbf));
    }
    for bits in [16, 8, 4, 2, 1] {
        settings.push((bf_for(bits), 64));
    }
    settings
        .into_iter()
        .map(|(bf, cbf)| {
            let mut c = Case::new(s, Protocol::NetMigrate, w, 100);
            c.bf_bytes = bf;
            c.cbf_bytes = cbf;
            c.label = format!("bf {bf} B, cbf {cbf} B");
            c
        })
        .collect()
}

/// Table 3: keys per group from 1 to 2^12 (bounded by the table), 512 KB BF and 64 B CBF.
pub(super) fn group_cases(s: &RunSettings) -> Vec<Case> {
    let w = ycsb_b_write_ratio();
    (0..=12u8)
        .step_by(2)
        .filter(|&g| g < s.buckets_log2)
        .map(|g| {
            let mut c = Case::new(s, Protocol::NetMigrate, w, 100);
            c.group_buckets_log2 = g;
            c.cbf_bytes = 64;
            c.label = format!("{} keys/group", s.records >> (s.buckets_log2 - g).min(63));
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netmigrate::{Backend, Experiment, Settings};
    use crate::Preset;

    #[test]
    pub(super) fn filter_cases_scale_the_bf_by_bits_per_group() {
        let mut a = Settings::new(Experiment::Filters, Preset::Quick, Backend::Builtin);
        a.records = 1 << 12;
        let s = a.resolve().unwrap();
        let groups = s.groups(s.group_buckets_log2) as usize;
        let cases = filter_cases(&s);
        assert_eq!(cases.len(), 9);
        assert_eq!(cases[0].bf_bytes, groups * 4);
        assert_eq!(cases[8].bf_bytes, groups / 8);
    }
}
