//! Renders sample charts for eyeballing: `cargo run -p locus-plot --example sample -- DIR`
//! writes DIR/sample.png (log-x line chart), DIR/bars.png and DIR/cdf.png.

use std::path::PathBuf;

use locus_plot::{cdf_series, BarChart, LineChart, Series};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| ".".into()));
    let sizes = [64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0];
    let latency = |base_us: f64, us_per_kb: f64| -> Vec<(f64, f64)> {
        sizes
            .iter()
            .map(|&s| (s, base_us + us_per_kb * s / 1024.0))
            .collect()
    };
    LineChart {
        title: "GET latency by payload size".into(),
        x_label: "payload (bytes)".into(),
        y_label: "median latency (us)".into(),
        x_log: true,
        y_log: false,
        series: vec![
            Series {
                label: "local".into(),
                points: latency(0.4, 0.05),
            },
            Series {
                label: "tcp (loopback)".into(),
                points: latency(11.0, 0.6),
            },
            Series {
                label: "sim".into(),
                points: latency(2.0, 0.3),
            },
        ],
    }
    .write_png(&dir.join("sample.png"))?;

    BarChart {
        title: "Throughput by workload".into(),
        y_label: "throughput (Mops/s)".into(),
        groups: vec![
            "YCSB-A".into(),
            "YCSB-B".into(),
            "YCSB-C".into(),
            "scan".into(),
        ],
        series: vec![
            ("1 thread".into(), vec![1.2, 1.9, 2.3, 0.4]),
            ("4 threads".into(), vec![3.8, 6.5, 8.1, 1.5]),
            ("16 threads".into(), vec![9.7, 17.2, 24.9, 4.8]),
        ],
    }
    .write_png(&dir.join("bars.png"))?;

    // Deterministic skewed samples (no RNG dependency): a lognormal-ish tail.
    let samples: Vec<f64> = (1..=5000)
        .map(|i| {
            let u = f64::from(i) / 5001.0;
            10.0 * (-(1.0 - u).ln()).powf(1.5) + 5.0
        })
        .collect();
    LineChart {
        title: "GET latency CDF".into(),
        x_label: "latency (us)".into(),
        y_label: "fraction of ops".into(),
        x_log: true,
        y_log: false,
        series: vec![cdf_series("tcp", &samples)],
    }
    .write_png(&dir.join("cdf.png"))?;
    Ok(())
}
