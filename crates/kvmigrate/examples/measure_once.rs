//! Runs the measurement driver once per protocol and prints one JSON line each (a smoke run of
//! what `locus bench netmigrate` will call). `cargo run -p locus-kvmigrate --example measure_once`.

use std::sync::Arc;

use rand::{Rng, SeedableRng};

use locus_kvmigrate::measure::{measure, Draw, MeasureConfig, OpChooser};
use locus_kvmigrate::Protocol;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for protocol in Protocol::ALL {
        let cfg = MeasureConfig::quick(protocol);
        let (keys, ratio) = (cfg.keys, cfg.write_ratio);
        let chooser: OpChooser = Arc::new(move |_client, seed| {
            let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
            Box::new(move || Draw {
                write: rng.gen_bool(ratio),
                key: rng.gen_range(0..keys),
            })
        });
        let r = measure(&cfg, chooser)?;
        let line = serde_json::json!({
            "protocol": protocol.name(),
            "migration_ms": r.migration_ms,
            "pause_ms": r.pause_ms,
            "avg_ops_per_s_migrating": r.avg_ops_per_s_migrating.round(),
            "avg_ops_per_s": r.avg_ops_per_s.round(),
            "failed_ops": r.failed_ops,
            "lost_writes": r.lost_writes,
            "client_extra_pct": 100.0 * r.client_extra_bytes as f64 / r.client_bytes.max(1) as f64,
            "server_extra_pct": 100.0 * r.server_extra_bytes as f64 / r.server_data_bytes.max(1) as f64,
            "bins": r.timeline.len(),
        });
        println!("{line}");
    }
    Ok(())
}
