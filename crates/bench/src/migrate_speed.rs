//! `locus bench migrate-speed` (Pragh 6, Fig. 13): values migrated per second
//! and network bytes per second, for payloads from 64 B to 64 KB, with one and
//! two migration threads, on the in-process fabric (default latency model) and
//! on TCP loopback.
//!
//! Setup per measurement: a 2-machine cluster (plus a third for the second
//! thread's source on TCP, so sources never collide); `n` values of the payload
//! size are loaded on machine 1; each migration thread acts as machine 0 and
//! migrates its share with the pipelined `migrate_batch`. Rates are counted
//! over the migration phase only; bytes are the fabric's remote payload bytes
//! in that phase (both directions, all operations: lookups, copies,
//! invalidations, CASes, reclaim appends).

use std::path::{Path, PathBuf};
use std::time::Instant;

use locus_fabric::counting::{Counting, Locality};
use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_fabric::tcp::{loopback_cluster_with, TcpConfig};
use locus_fabric::Fabric;
use locus_store::{Key, Migration, Store, StoreConfig};
use serde::Serialize;

use crate::output::OutDir;
use crate::{BenchError, Preset, Reporter, Result};

/// The experiment's name in errors and file names.
const NAME: &str = "migrate-speed";
/// Payload sizes of Fig. 13.
pub const PAYLOADS: [u64; 6] = [64, 256, 1024, 4096, 16384, 65536];
/// Migration threads measured.
pub const THREADS: [usize; 2] = [1, 2];
/// Fewest values per measurement (a large payload still takes a measurable time).
const VALUES_MIN: u64 = 256;
/// Most migration threads a row may ask for.
pub const THREADS_MAX: usize = 64;
/// Smallest payload (the count-and-flags word and one id).
pub const PAYLOAD_MIN: u64 = 16;
/// Largest payload (a value held away from its home fits 32 MiB, Pragh 4.1).
pub const PAYLOAD_MAX: u64 = 16 << 20;
/// Values migrated per `migrate_batch` call.
const BATCH_KEYS: usize = 4096;

/// What a run measures, from a [`Preset`] and overrides.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    /// The preset the settings came from.
    pub preset: Preset,
    /// In-process rows: payload bytes loaded per measurement (values = this / payload).
    pub local_bytes_max: u64,
    /// In-process rows: values per measurement, at most.
    pub local_values_max: u64,
    /// TCP rows: payload bytes loaded per measurement.
    pub tcp_bytes_max: u64,
    /// TCP rows: values per measurement, at most (every operation crosses a socket).
    pub tcp_values_max: u64,
    /// Measure the TCP rows.
    pub tcp: bool,
    /// Migration thread counts measured (each row's cluster is built afresh).
    pub threads: Vec<usize>,
    /// Payload sizes measured, in bytes.
    pub payloads: Vec<u64>,
    /// Times every row is measured; the rounds are interleaved (each round
    /// measures every row once), and a row reports the median with min and max.
    pub runs: usize,
}

impl Settings {
    /// quick (seconds: 48 MB or 40,000 values per in-process measurement,
    /// 4,000 per TCP one) or full (256 MB or 200,000; 20,000 over TCP).
    pub fn new(preset: Preset) -> Settings {
        let (local_bytes_max, local_values_max, tcp_values_max) = match preset {
            Preset::Quick => (48 << 20, 40_000, 4_000),
            Preset::Full => (256 << 20, 200_000, 20_000),
        };
        Settings {
            preset,
            local_bytes_max,
            local_values_max,
            tcp_bytes_max: 48 << 20,
            tcp_values_max,
            tcp: true,
            threads: THREADS.to_vec(),
            payloads: PAYLOADS.to_vec(),
            runs: 1,
        }
    }

    /// Rejects settings that cannot work, naming the setting.
    pub fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("local_values_max", self.local_values_max),
            ("tcp_values_max", self.tcp_values_max),
        ] {
            if v < VALUES_MIN {
                return Err(BenchError::setting(
                    name,
                    v,
                    format!("must be at least {VALUES_MIN}"),
                ));
            }
        }
        if self.runs == 0 {
            return Err(BenchError::setting("runs", 0, "must be at least 1"));
        }
        if self.threads.is_empty()
            || self
                .threads
                .iter()
                .any(|&t| !(1..=THREADS_MAX).contains(&t))
        {
            return Err(BenchError::setting(
                "threads",
                format!("{:?}", self.threads),
                format!("must be one or more thread counts in 1..={THREADS_MAX}"),
            ));
        }
        if self.payloads.is_empty()
            || self
                .payloads
                .iter()
                .any(|&p| !(PAYLOAD_MIN..=PAYLOAD_MAX).contains(&p) || p % 8 != 0)
        {
            return Err(BenchError::setting(
                "payloads",
                format!("{:?}", self.payloads),
                format!(
                    "must be one or more sizes in {PAYLOAD_MIN}..={PAYLOAD_MAX} bytes, multiples of 8"
                ),
            ));
        }
        Ok(())
    }
}

/// One measurement.
#[derive(Serialize, Debug, Clone)]
pub struct Row {
    /// "local" or "tcp".
    pub fabric: String,
    /// Migration threads.
    pub threads: usize,
    /// Payload bytes of each value.
    pub payload_bytes: u64,
    /// Values migrated.
    pub values: u64,
    /// Values migrated per second (the median of the runs).
    pub values_per_s: f64,
    /// The slowest run's values per second.
    pub values_per_s_min: f64,
    /// The fastest run's values per second.
    pub values_per_s_max: f64,
    /// Every run's values per second, in the order measured.
    pub values_per_s_runs: Vec<f64>,
    /// Remote bytes per second, every operation of the migration (the median run's).
    pub bytes_per_s: f64,
    /// Seconds the migration phase took (the median run's).
    pub elapsed_s: f64,
}

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The settings it ran with.
    pub settings: Settings,
    /// In-process rows, then TCP rows; by threads, then payload.
    pub rows: Vec<Row>,
}

impl Report {
    /// Writes `migrate-speed.json` (the rows) and `migrate-speed.png` into
    /// `dir`. Returns the files written.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        let mut out = OutDir::create(dir)?;
        out.json(&format!("{NAME}.json"), &self.rows)?;
        let png = out.path(&format!("{NAME}.png"));
        plot(&self.rows, &png)?;
        out.wrote(png);
        Ok(out.written().to_vec())
    }
}

fn config(values: u64, payload: u64) -> StoreConfig {
    let per_value = payload + 64;
    StoreConfig {
        buckets_per_machine: (values / 2).max(64).next_power_of_two(),
        value_region_bytes: (values * per_value * 2 + (64 << 20)).next_multiple_of(8),
        reclaim_ring_entries: values.max(1024),
        ..StoreConfig::default()
    }
}

/// `n` values for this payload size: enough to take a measurable time, bounded in memory.
fn count(payload: u64, bytes_max: u64, values_max: u64) -> u64 {
    (bytes_max / payload).clamp(VALUES_MIN, values_max)
}

/// The ids of a value whose payload is `payload` bytes (8 bytes of count and flags, then u32 ids).
fn list(payload: u64, v: u32) -> Vec<u32> {
    (0..(payload.saturating_sub(8) / 4) as u32)
        .map(|i| v ^ i)
        .collect()
}

fn measure<F: Fabric>(
    nodes: &[Store<F>],
    remote_bytes: &dyn Fn() -> u64,
    threads: usize,
    payload: u64,
    n: u64,
) -> Result<Row> {
    // Values homed on machine 1 (v % machines == 1) are loaded by machine 1.
    let machines = nodes[0].machines() as u32;
    let vertices: Vec<u32> = (0..n as u32).map(|i| i * machines + 1).collect();
    {
        let mut w = nodes[1].worker(1)?;
        for &v in &vertices {
            w.put(v, &list(payload, v))?;
        }
    }
    let before = remote_bytes();
    let t0 = Instant::now();
    let moved: Result<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let share: Vec<Key> = vertices
                    .iter()
                    .skip(t)
                    .step_by(threads)
                    .map(|&v| Key::part(v, 0))
                    .collect();
                let node = &nodes[0];
                s.spawn(move || -> Result<u64> {
                    let mut w = node.worker(0)?;
                    let mut moved = 0;
                    for chunk in share.chunks(BATCH_KEYS) {
                        let out = w.migrate_batch(chunk)?;
                        moved += out
                            .iter()
                            .filter(|m| matches!(m, Migration::Moved { .. }))
                            .count() as u64;
                    }
                    Ok(moved)
                })
            })
            .collect();
        handles
            .into_iter()
            .enumerate()
            .map(|(t, h)| {
                h.join().unwrap_or_else(|_| {
                    Err(BenchError::ThreadPanicked {
                        thread: format!("migration thread {t}"),
                    })
                })
            })
            .sum()
    });
    let elapsed = t0.elapsed().as_secs_f64();
    let moved = moved?;
    if moved != n {
        return Err(BenchError::Measurement {
            experiment: NAME,
            what: format!("only {moved} of {n} values of {payload} B migrated"),
        });
    }
    let bytes = remote_bytes() - before;
    Ok(Row {
        fabric: String::new(),
        threads,
        payload_bytes: payload,
        values: n,
        values_per_s: n as f64 / elapsed,
        values_per_s_min: n as f64 / elapsed,
        values_per_s_max: n as f64 / elapsed,
        values_per_s_runs: vec![n as f64 / elapsed],
        bytes_per_s: bytes as f64 / elapsed,
        elapsed_s: elapsed,
    })
}

/// Values per second against payload size, one line per fabric and thread count (Fig. 13).
fn plot(rows: &[Row], path: &Path) -> Result<()> {
    let mut series = Vec::new();
    let mut thread_counts: Vec<usize> = rows.iter().map(|r| r.threads).collect();
    thread_counts.sort_unstable();
    thread_counts.dedup();
    for fabric in ["local", "tcp"] {
        for &threads in &thread_counts {
            let points: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.fabric == fabric && r.threads == threads)
                .map(|r| (r.payload_bytes as f64, r.values_per_s))
                .collect();
            if !points.is_empty() {
                let label = format!(
                    "{fabric}, {threads} thread{}",
                    if threads == 1 { "" } else { "s" }
                );
                series.push(locus_plot::Series { label, points });
            }
        }
    }
    locus_plot::LineChart {
        title: "Split-migration speed".into(),
        x_label: "payload (bytes)".into(),
        y_label: "values migrated per second".into(),
        x_log: true,
        y_log: true,
        series,
    }
    .write_png(path)?;
    Ok(())
}

/// Measures every payload and thread count on the in-process fabric, then
/// (if `settings.tcp`) on TCP loopback, `settings.runs` times: each round
/// measures every row once, so the runs of a row are interleaved with the
/// others'. A row is the median run, with the slowest and the fastest.
pub fn run(settings: &Settings, r: &Reporter) -> Result<Report> {
    settings.validate()?;
    let s = settings;
    let mut fabrics = vec!["local"];
    if s.tcp {
        fabrics.push("tcp");
    }
    let mut cells = Vec::new();
    for &fabric in &fabrics {
        for &threads in &s.threads {
            for &payload in &s.payloads {
                cells.push((fabric, threads, payload));
            }
        }
    }
    let mut runs: Vec<Vec<Row>> = vec![Vec::new(); cells.len()];
    for round in 0..s.runs {
        for (i, &(fabric, threads, payload)) in cells.iter().enumerate() {
            let (bytes_max, values_max) = match fabric {
                "local" => (s.local_bytes_max, s.local_values_max),
                _ => (s.tcp_bytes_max, s.tcp_values_max),
            };
            let n = count(payload, bytes_max, values_max);
            let of = if s.runs > 1 {
                format!(" (run {} of {})", round + 1, s.runs)
            } else {
                String::new()
            };
            r.note(format!(
                "{fabric}, {threads} thread(s), {payload} B x {n}{of} ..."
            ));
            let mut row = match fabric {
                "local" => measure_local(threads, payload, n)?,
                _ => measure_tcp(threads, payload, n)?,
            };
            row.fabric = fabric.into();
            runs[i].push(row);
        }
    }
    Ok(Report {
        settings: s.clone(),
        rows: runs.into_iter().map(median_row).collect(),
    })
}

fn measure_local(threads: usize, payload: u64, n: u64) -> Result<Row> {
    let fabric = Counting::new(LocalFabric::new(LocalConfig {
        pin_memory: true,
        ..LocalConfig::with_machines(2)
    })?);
    let store = Store::create(fabric.clone(), config(n, payload))?;
    let counters = fabric.counters().clone();
    let bytes = move || counters.total().bytes_total(Locality::Remote);
    measure(&[store.clone(), store], &bytes, threads, payload, n)
}

fn measure_tcp(threads: usize, payload: u64, n: u64) -> Result<Row> {
    let nodes: Vec<Counting<_>> = loopback_cluster_with(TcpConfig {
        machines: 2,
        pin_memory: true,
        ..TcpConfig::default()
    })?
    .into_iter()
    .map(Counting::new)
    .collect();
    let stores = nodes
        .iter()
        .map(|f| Store::create(f.clone(), config(n, payload)))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let counters = nodes[0].counters().clone();
    // Machine 0 issues every migration operation: its remote bytes are the traffic.
    let bytes = move || counters.snapshot()[0].bytes_total(Locality::Remote);
    measure(&stores, &bytes, threads, payload, n)
}

/// The median run of one row (the lower middle of an even count), with every
/// run's rate and the extremes.
fn median_row(mut runs: Vec<Row>) -> Row {
    let rates: Vec<f64> = runs.iter().map(|r| r.values_per_s).collect();
    let (min, max) = rates.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &v| {
        (lo.min(v), hi.max(v))
    });
    runs.sort_by(|a, b| a.values_per_s.total_cmp(&b.values_per_s));
    let mut row = runs.swap_remove((runs.len() - 1) / 2);
    row.values_per_s_min = min;
    row.values_per_s_max = max;
    row.values_per_s_runs = rates;
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_match_the_presets_bounds() {
        let q = Settings::new(Preset::Quick);
        assert_eq!(count(64, q.local_bytes_max, q.local_values_max), 40_000);
        assert_eq!(count(65536, q.local_bytes_max, q.local_values_max), 768);
        assert_eq!(count(64, q.tcp_bytes_max, q.tcp_values_max), 4_000);
        let f = Settings::new(Preset::Full);
        assert_eq!(count(64, f.local_bytes_max, f.local_values_max), 200_000);
        assert_eq!(count(64, f.tcp_bytes_max, f.tcp_values_max), 20_000);
        assert_eq!(count(65536, f.tcp_bytes_max, f.tcp_values_max), 768);
    }

    #[test]
    fn one_small_measurement_migrates_every_value() {
        let fabric = Counting::new(LocalFabric::new(LocalConfig::with_machines(2)).unwrap());
        let store = Store::create(fabric.clone(), config(300, 256)).unwrap();
        let counters = fabric.counters().clone();
        let bytes = move || counters.total().bytes_total(Locality::Remote);
        let row = measure(&[store.clone(), store], &bytes, 2, 256, 300).unwrap();
        assert_eq!(row.values, 300);
        assert!(row.bytes_per_s > 0.0);
    }

    #[test]
    fn a_row_is_its_median_run_with_the_extremes() {
        let run = |v: f64| Row {
            fabric: "local".into(),
            threads: 1,
            payload_bytes: 64,
            values: 10,
            values_per_s: v,
            values_per_s_min: v,
            values_per_s_max: v,
            values_per_s_runs: vec![v],
            bytes_per_s: 2.0 * v,
            elapsed_s: 10.0 / v,
        };
        let row = median_row(vec![run(5.0), run(9.0), run(7.0)]);
        assert_eq!(row.values_per_s, 7.0);
        assert_eq!(row.bytes_per_s, 14.0, "the median run's other fields");
        assert_eq!((row.values_per_s_min, row.values_per_s_max), (5.0, 9.0));
        assert_eq!(
            row.values_per_s_runs,
            vec![5.0, 9.0, 7.0],
            "in the order measured"
        );
        // An even count takes the lower middle, a run that was seen.
        assert_eq!(median_row(vec![run(4.0), run(2.0)]).values_per_s, 2.0);
    }

    #[test]
    fn bad_threads_payloads_and_runs_are_refused_by_name() {
        let refused = |f: fn(&mut Settings)| {
            let mut s = Settings::new(Preset::Quick);
            f(&mut s);
            s.validate().unwrap_err().to_string()
        };
        assert!(refused(|s| s.runs = 0).contains("runs"));
        assert!(refused(|s| s.threads = vec![]).contains("threads"));
        assert!(refused(|s| s.threads = vec![1, 0]).contains("threads"));
        assert!(refused(|s| s.payloads = vec![64, 100]).contains("multiples of 8"));
        assert!(refused(|s| s.payloads = vec![8]).contains("payloads"));
        assert!(refused(|s| s.payloads = vec![64 << 20]).contains("payloads"));
        Settings::new(Preset::Full).validate().unwrap();
    }

    #[test]
    fn every_round_measures_every_row() {
        let mut s = Settings::new(Preset::Quick);
        s.tcp = false;
        s.threads = vec![1];
        s.payloads = vec![64, 256];
        s.local_values_max = 300;
        s.runs = 3;
        let report = run(&s, &Reporter::quiet()).unwrap();
        assert_eq!(report.rows.len(), 2);
        for (row, payload) in report.rows.iter().zip([64, 256]) {
            assert_eq!((row.threads, row.payload_bytes), (1, payload));
            assert_eq!(row.values_per_s_runs.len(), 3);
            assert!(
                row.values_per_s_min <= row.values_per_s
                    && row.values_per_s <= row.values_per_s_max
            );
        }
    }
}
