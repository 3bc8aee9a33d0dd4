//! Numbers derived from the rows: per baseline, how the closest NetMigrate
//! policy compares (`overall`), and NetMigrate's gain per write ratio and
//! source budget (`bandwidth`, `budgets`).

use super::cases::{BUDGETS_PCT, WRITE_RATIOS};
use super::Row;

fn pct_gain(ours: f64, theirs: f64) -> f64 {
    if theirs > 0.0 {
        100.0 * (ours / theirs - 1.0)
    } else {
        f64::INFINITY
    }
}

/// Per baseline: the NetMigrate policy (unmirrored) with the closest migration time, and how
/// its throughput and median latency compare (the targets).
pub(super) fn overall_derived(rows: &[Row]) -> serde_json::Value {
    let nm: Vec<&Row> = rows
        .iter()
        .filter(|r| r.protocol == "netmigrate" && !r.mirror_writes)
        .collect();
    let mut cmp = Vec::new();
    for b in rows.iter().filter(|r| r.protocol != "netmigrate") {
        let Some(n) = nm
            .iter()
            .min_by_key(|n| n.migration_ms.abs_diff(b.migration_ms))
        else {
            continue;
        };
        cmp.push(serde_json::json!({
            "baseline": b.label,
            "baseline_migration_ms": b.migration_ms,
            "netmigrate": n.label,
            "netmigrate_migration_ms": n.migration_ms,
            "throughput_gain_pct": finite(pct_gain(n.avg_ops_per_s_migrating, b.avg_ops_per_s_migrating)),
            "p50_reduction_pct": finite(100.0 * (1.0 - n.p50_us_migrating / b.p50_us_migrating.max(1e-9))),
            "throughput_above": n.avg_ops_per_s_migrating > b.avg_ops_per_s_migrating,
            "p50_below": n.p50_us_migrating < b.p50_us_migrating,
        }));
    }
    serde_json::json!({
        "closest_migration_time": cmp,
        "netmigrate_client_extra_pct_max": nm.iter().map(|r| r.client_extra_pct).fold(0.0, f64::max),
        "failed_ops_total": rows.iter().map(|r| r.failed_ops).sum::<u64>(),
        "lost_ops_total": rows.iter().map(|r| r.lost_ops).sum::<u64>(),
        "violations_total": rows.iter().map(|r| r.violations).sum::<u64>(),
    })
}

/// JSON has no infinity; an infinite gain (a baseline at zero) is written as null.
fn finite(x: f64) -> serde_json::Value {
    if x.is_finite() {
        serde_json::json!(x)
    } else {
        serde_json::Value::Null
    }
}

/// Per (write ratio, budget): NetMigrate's throughput gain over each baseline.
pub(super) fn matrix_derived(rows: &[Row]) -> serde_json::Value {
    let mut cells = Vec::new();
    for &w in &WRITE_RATIOS {
        for &b in &BUDGETS_PCT {
            let cell: Vec<&Row> = rows
                .iter()
                .filter(|r| r.write_ratio == w && r.source_budget_pct == b)
                .collect();
            let Some(nm) = cell.iter().find(|r| r.label == "netmigrate") else {
                continue;
            };
            let gains: serde_json::Map<String, serde_json::Value> = cell
                .iter()
                .filter(|r| r.protocol != "netmigrate")
                .map(|r| {
                    (
                        r.label.clone(),
                        finite(pct_gain(
                            nm.avg_ops_per_s_migrating,
                            r.avg_ops_per_s_migrating,
                        )),
                    )
                })
                .collect();
            cells.push(serde_json::json!({
                "write_ratio": w,
                "source_budget_pct": b,
                "netmigrate_throughput_gain_pct": gains,
            }));
        }
    }
    serde_json::json!({ "cells": cells })
}
