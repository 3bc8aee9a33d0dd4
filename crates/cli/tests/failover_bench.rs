//! `locus bench failover` end to end, tiny: a cluster with replication 2,
//! a kill -9 of server 1 under the load, and the report says the slots
//! failed over, every vertex answered again (a number of seconds; how
//! many is the benchmark's business, not this test's) and no
//! acknowledged insert was lost.

use std::process::Command;

#[test]
fn the_failover_bench_reports_a_failover_without_lost_writes() {
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_locus"))
        .args([
            "bench",
            "failover",
            "--replication",
            "2",
            "--scale",
            "10",
            "--phase-s",
            "1",
            "--clients",
            "2",
            "--json",
            "--out",
        ])
        .arg(out.path())
        .output()
        .expect("run locus");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "bench failover: {stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{report}");
    let row = &rows[0];
    assert_eq!(row["replication"], 2, "{row}");
    assert_eq!(row["failed_over"], true, "{row}");
    assert!(row["answer_s"].is_number(), "every vertex answers: {row}");
    assert!(
        row["acknowledged_writes"].as_u64().unwrap() > 0,
        "the load inserted: {row}"
    );
    assert_eq!(row["lost_acknowledged_writes"], 0, "{row}");
    assert_eq!(row["violations"], 0, "{row}");
    for f in ["failover.json", "failover-timeline.png"] {
        assert!(out.path().join(f).is_file(), "{f} written");
    }
}
