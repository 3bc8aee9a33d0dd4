//! What a NetMigrate run is asked to do ([`Settings`], from a preset and
//! overrides) and everything it then depends on ([`RunSettings`], checked,
//! with the geometry derived and redis-server found; the `.meta.json`
//! records it).

use std::path::PathBuf;

use serde::Serialize;

use super::{Backend, Experiment};
use crate::{BenchError, Preset, Result};

/// Records, at most (the source table's memory and load time).
const RECORDS_MAX: u64 = 1 << 26;
/// Records, at least (enough keys for the smallest geometry).
const RECORDS_MIN: u64 = 256;
/// Closed-loop client threads, at most.
const CLIENTS_MAX: u16 = 64;
/// Timeline bin width bounds.
const INTERVAL_MS_MAX: u64 = 10_000;
/// Warm-up and cool-down bound.
const PHASE_MS_MAX: u64 = 60_000;
/// A migration that takes longer is reported as timed out (a loaded machine must not make a
/// slow migration an abort, so the server's ack timeout is as long).
const MIGRATION_TIMEOUT_MS: u64 = 600_000;
/// A client gives up on one query after this long (reported as a failed op).
const OP_TIMEOUT_MS: u64 = 30_000;
/// Keys per migration group by default (the paper's 2048 at 2^28 keys is coarse at our sizes).
/// Table 3 shows the trade: small groups keep throughput up but each group costs router round
/// trips (1 key per group migrates 20x slower than 256), and 64 or more keys per group cut
/// throughput during migration; 16 is between.
const GROUP_BUCKETS_LOG2_DEFAULT: u8 = 4;
/// The paper's default filters (6.1).
const BF_BYTES_DEFAULT: usize = 512 << 10;
const CBF_BYTES_DEFAULT: usize = 1024 << 10;
/// Runs per configuration, at most.
const REPEAT_MAX: usize = 20;
/// Zipf constant of YCSB's scrambled Zipfian (fixed by the generator).
const ZIPF_THETA: f64 = 0.99;
/// Value bytes by default (the paper's).
const VALUE_BYTES_DEFAULT: usize = 64;

/// What a run is asked to do, from [`Settings::new`] and overrides; checked
/// and completed by [`Settings::resolve`].
#[derive(Clone, Debug)]
pub struct Settings {
    /// The experiment.
    pub experiment: Experiment,
    /// The preset the sizes came from.
    pub preset: Preset,
    /// Where the migrating shard's pairs live.
    pub backend: Backend,
    /// The redis-server binary for [`Backend::Redis`] (`None`: found on PATH).
    pub redis_server: Option<PathBuf>,
    /// Records in the migrating shard.
    pub records: u64,
    /// Closed-loop client threads.
    pub clients: u16,
    /// Value bytes (16..=1024; 64 as in the paper).
    pub value_bytes: usize,
    /// Seed of the clients' key and operation choices.
    pub seed: u64,
    /// Runs per configuration, round-robin (the median-throughput run is reported).
    pub repeat: usize,
    /// Load before and after each migration (warm-up and cool-down), ms.
    pub phase_ms: u64,
    /// Timeline bin width, ms.
    pub interval_ms: u64,
    /// Fault injection, not a measurement: the router sends S2/S4 double reads to the source
    /// alone (`RouterConfig::fault_double_read_source_only`), so that the history checker has
    /// a broken protocol to catch (issue 64, requirement 3).
    pub fault_skip_double_read: bool,
    /// Every client write is followed by a read of its key (a read-your-writes probe; the
    /// workload in which a skipped double read shows, so the fault implies it).
    pub read_back_writes: bool,
}

impl Settings {
    /// The sizes of `experiment` under `preset` on `backend`: quick (minutes
    /// on 2 cores) or full (larger shard, longer phases); 64-byte values,
    /// seed 1, 3 runs per configuration (1 for the 60-configuration matrix
    /// under quick).
    pub fn new(experiment: Experiment, preset: Preset, backend: Backend) -> Settings {
        // Measured on 2 vCPUs: a 2^20-key shard migrates in about 1-2.5 s, a run with its
        // load, warm-up and cool-down takes about 3-4 s; `overall` has 8 runs, the sweeps 7-9,
        // the write-ratio x budget matrix 60, so the matrix gets the smaller shard.
        let big = experiment == Experiment::Overall;
        let (records, clients, phase_ms, interval_ms) = match (preset, big) {
            (Preset::Quick, true) => (1u64 << 20, 4u16, 500u64, 100u64),
            (Preset::Quick, false) => (1 << 19, 4, 300, 50),
            (Preset::Full, true) => (1 << 22, 8, 1000, 200),
            (Preset::Full, false) => (1 << 21, 8, 500, 100),
        };
        // Over Redis every pair is loaded and migrated through RESP round trips (about 40k
        // pairs/s here): a 16x smaller shard keeps a run within seconds.
        let records = if backend == Backend::Redis {
            records >> 4
        } else {
            records
        };
        let matrix = matches!(experiment, Experiment::Bandwidth | Experiment::Budgets);
        Settings {
            experiment,
            preset,
            backend,
            redis_server: None,
            records,
            clients,
            value_bytes: VALUE_BYTES_DEFAULT,
            seed: 1,
            repeat: if matrix && preset == Preset::Quick {
                1
            } else {
                3
            },
            phase_ms,
            interval_ms,
            fault_skip_double_read: false,
            read_back_writes: false,
        }
    }

    /// Checks every setting (naming the flag of one that cannot work), finds
    /// redis-server for the Redis backend, and derives the geometry.
    pub fn resolve(&self) -> Result<RunSettings> {
        let redis_server = match self.backend {
            Backend::Builtin => None,
            Backend::Redis => Some(match &self.redis_server {
                Some(p) if p.is_file() => p.clone(),
                Some(p) => {
                    return Err(BenchError::setting(
                        "--redis-server",
                        p.display(),
                        "no such file; give the redis-server binary",
                    ))
                }
                None => find_on_path("redis-server").ok_or_else(|| {
                    BenchError::setting(
                        "--backend",
                        "redis",
                        "redis-server is not on PATH; install it (Debian: apt-get install -y redis-server) or pass --redis-server PATH",
                    )
                })?,
            }),
        };
        let records = self.records;
        if !(RECORDS_MIN..=RECORDS_MAX).contains(&records) {
            return Err(BenchError::setting(
                "--records",
                records,
                format!("must be in {RECORDS_MIN}..={RECORDS_MAX}"),
            ));
        }
        let clients = self.clients;
        if clients == 0 || clients > CLIENTS_MAX {
            return Err(BenchError::setting(
                "--clients",
                clients,
                format!("must be in 1..={CLIENTS_MAX}"),
            ));
        }
        if !(16..=locus_kvmigrate::wire::VALUE_BYTES_MAX).contains(&self.value_bytes) {
            return Err(BenchError::setting(
                "--value-bytes",
                self.value_bytes,
                format!(
                    "must be in 16..={} (a writer id and counter are embedded)",
                    locus_kvmigrate::wire::VALUE_BYTES_MAX
                ),
            ));
        }
        let phase_ms = self.phase_ms;
        if phase_ms > PHASE_MS_MAX {
            return Err(BenchError::setting(
                "--phase-ms",
                phase_ms,
                format!("must be at most {PHASE_MS_MAX}"),
            ));
        }
        let interval_ms = self.interval_ms;
        if interval_ms == 0 || interval_ms > INTERVAL_MS_MAX {
            return Err(BenchError::setting(
                "--interval-ms",
                interval_ms,
                format!("must be in 1..={INTERVAL_MS_MAX}"),
            ));
        }
        let repeat = self.repeat;
        if repeat == 0 || repeat > REPEAT_MAX {
            return Err(BenchError::setting(
                "--repeat",
                repeat,
                format!("must be in 1..={REPEAT_MAX}"),
            ));
        }
        // About one key per bucket, as the paper's table.
        let buckets_log2 = (64 - (records - 1).leading_zeros()) as u8;
        Ok(RunSettings {
            preset: self.preset,
            records,
            key_bytes: 4,
            key_note: "keys are 0..records (a 4-byte key space); the wire carries them as u64",
            value_bytes: self.value_bytes,
            clients,
            distribution: "YCSB CoreWorkload: per client one uniform stream draws READ/UPDATE, \
                           then the key from a scrambled Zipfian over records + 1 items, drawing \
                           again past the last record",
            zipf_theta: ZIPF_THETA,
            buckets_log2,
            group_buckets_log2: GROUP_BUCKETS_LOG2_DEFAULT.min(buckets_log2),
            bf_bytes: BF_BYTES_DEFAULT,
            cbf_bytes: CBF_BYTES_DEFAULT,
            interval_ms,
            warmup_ms: phase_ms,
            cooldown_ms: phase_ms,
            seed: self.seed,
            mirror_writes: false,
            mirror_note: "rows labelled *-mirrored run with the crate default mirror_writes = true",
            ack_timeout_us: MIGRATION_TIMEOUT_MS * 1000,
            op_timeout_ms: OP_TIMEOUT_MS,
            migration_timeout_ms: MIGRATION_TIMEOUT_MS,
            repeat,
            repeat_note:
                "configurations run round-robin, repeat times; each row is the run with the \
                          median throughput during migration, repeat_* list every run",
            transport: match self.backend {
                Backend::Builtin => {
                    "in-process channels; router, 2 servers and the clients are threads of one process"
                }
                Backend::Redis => {
                    "in-process channels between router, agents and clients; each agent keeps its pairs in its own redis-server process on loopback (RESP)"
                }
            },
            backend: self.backend,
            redis_server,
            fault_skip_double_read: self.fault_skip_double_read,
            read_back_writes: self.read_back_writes || self.fault_skip_double_read,
        })
    }
}

/// Everything a run depends on (written to the .meta.json).
#[derive(Clone, Debug, Serialize)]
pub struct RunSettings {
    /// The preset the sizes came from.
    pub preset: Preset,
    /// Records in the migrating shard.
    pub records: u64,
    /// Bytes of a key's space (keys are `0..records`).
    pub key_bytes: usize,
    /// How keys are carried.
    pub key_note: &'static str,
    /// Value bytes.
    pub value_bytes: usize,
    /// Closed-loop client threads.
    pub clients: u16,
    /// The key distribution.
    pub distribution: &'static str,
    /// Its Zipf constant.
    pub zipf_theta: f64,
    /// log2 of the buckets (about one key per bucket).
    pub buckets_log2: u8,
    /// log2 of the buckets per migration group.
    pub group_buckets_log2: u8,
    /// Bloom filter bytes (completed groups).
    pub bf_bytes: usize,
    /// Counting Bloom filter bytes (groups in flight).
    pub cbf_bytes: usize,
    /// Timeline bin width, ms.
    pub interval_ms: u64,
    /// Load before the migration, ms.
    pub warmup_ms: u64,
    /// Load after it, ms.
    pub cooldown_ms: u64,
    /// Seed of the clients' choices.
    pub seed: u64,
    /// Whether destinations mirror writes to the source (rows `*-mirrored` do).
    pub mirror_writes: bool,
    /// What `mirror_writes` means for the rows.
    pub mirror_note: &'static str,
    /// A server's ack timeout (as long as a migration may take).
    pub ack_timeout_us: u64,
    /// A client gives up on one query after this long.
    pub op_timeout_ms: u64,
    /// A migration taking longer is reported as timed out.
    pub migration_timeout_ms: u64,
    /// Runs per configuration.
    pub repeat: usize,
    /// How repeats are run and reported.
    pub repeat_note: &'static str,
    /// How the nodes talk.
    pub transport: &'static str,
    /// Where the pairs live.
    pub backend: Backend,
    /// The redis-server binary (Redis backend).
    #[serde(skip)]
    pub redis_server: Option<PathBuf>,
    /// A fault injected on purpose: double reads went to the source only (written only when
    /// set, so that measured runs' metadata is unchanged).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub fault_skip_double_read: bool,
    /// Every write was followed by a read of its key (written only when set).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub read_back_writes: bool,
}

impl RunSettings {
    /// Migration groups with `2^group_buckets_log2` buckets each.
    pub fn groups(&self, group_buckets_log2: u8) -> u64 {
        1u64 << (self.buckets_log2 - group_buckets_log2)
    }
}

/// The first executable file called `name` in a directory of PATH.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_size_the_shard_and_the_repeats() {
        let o = Settings::new(Experiment::Overall, Preset::Quick, Backend::Builtin);
        assert_eq!((o.records, o.clients, o.repeat), (1 << 20, 4, 3));
        let m = Settings::new(Experiment::Budgets, Preset::Quick, Backend::Builtin);
        assert_eq!((m.records, m.repeat), (1 << 19, 1));
        let r = Settings::new(Experiment::Overall, Preset::Full, Backend::Redis);
        assert_eq!((r.records, r.repeat), ((1 << 22) >> 4, 3));
    }

    #[test]
    fn bad_settings_name_their_flag() {
        let ok = Settings::new(Experiment::Overall, Preset::Quick, Backend::Builtin);
        type Spoil = fn(&mut Settings);
        let cases: [(&str, Spoil); 6] = [
            ("--records", |s| s.records = 0),
            ("--clients", |s| s.clients = 0),
            ("--value-bytes", |s| s.value_bytes = 8),
            ("--interval-ms", |s| s.interval_ms = 0),
            ("--phase-ms", |s| s.phase_ms = PHASE_MS_MAX + 1),
            ("--repeat", |s| s.repeat = 0),
        ];
        for (flag, spoil) in cases {
            let mut s = ok.clone();
            spoil(&mut s);
            let e = s.resolve().unwrap_err().to_string();
            assert!(e.contains(flag), "{flag}: {e}");
        }
        let mut s = ok.clone();
        s.backend = Backend::Redis;
        s.redis_server = Some("/nonexistent/redis-server".into());
        let e = s.resolve().unwrap_err().to_string();
        assert!(e.contains("--redis-server"), "{e}");
    }
}
