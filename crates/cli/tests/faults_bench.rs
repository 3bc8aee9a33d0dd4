//! `locus bench faults` in its short form (issue 61): a 27 s run of three
//! servers, etcd and a coordinator in the fault lab under a partition, a
//! SIGSTOP, a kill -9 with restart, a server joining and one leaving, while
//! slots move between the servers all along (issue 59), loses no
//! acknowledged write, the clients follow the joined server, every
//! history is linearizable, every probe shows its fault, and each window saw
//! operations; and the check is not vacuous: an acknowledged insert the
//! harness drops from a final read on purpose fails the run; a 20 s run
//! with every slot on two servers loses nothing either (issue 60). Needs root,
//! `ip`, `iptables` and etcd (`scripts/setup`); fails, never skips.

use std::process::Command;

fn faults(args: &[&str], drop_acked: bool) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_locus"));
    c.args(["bench", "faults"]).args(args);
    if drop_acked {
        c.env("LOCUS_FAULTS_DROP_ACKED", "1");
    }
    c.output().expect("run locus bench faults")
}

#[test]
fn a_short_fault_run_loses_nothing_and_every_probe_shows_its_fault() {
    let out = faults(
        &[
            "--duration-s",
            "27",
            "--seed",
            "61",
            "--slot-moves",
            "--json",
        ],
        false,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "locus bench faults failed: {}\n{stderr}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(r["seed"], 61);
    assert_eq!(r["violations"], 0, "{r:#}");
    assert_eq!(r["lost_acknowledged_writes"], 0, "{r:#}");
    assert_eq!(r["probes_failed"], 0, "{r:#}");
    assert!(r["ops"].as_u64().unwrap() > 0);
    assert!(r["acknowledged_writes"].as_u64().unwrap() > 0);
    assert!(r["keys_checked"].as_u64().unwrap() > 0);
    // The mover ran (how many of its moves commit depends on the faults).
    assert!(r["slot_moves"].is_object(), "{r:#}");
    for kind in ["partition_one", "pause", "kill_restart", "join", "leave"] {
        assert!(
            r["faults_injected"][kind].as_u64().unwrap_or(0) >= 1,
            "no {kind} window: {:#}",
            r["faults_injected"]
        );
    }
    for w in r["windows"].as_array().unwrap() {
        assert_eq!(w["probe_ok"], true, "{w:#}");
        assert!(w["ops"].as_u64().unwrap() > 0, "no operation in {w:#}");
        if w["kind"] == "join" {
            // The clients' slot tables led their updates to it.
            let id = w["target"].as_str().unwrap().trim_start_matches("server ");
            assert!(
                r["updates_by_server"][id].as_u64().unwrap_or(0) > 0,
                "no update reached the joined server {id}: {:#}",
                r["updates_by_server"]
            );
        }
    }
    assert!(
        stderr.contains("seed 61"),
        "the seed is printed first: {stderr}"
    );
}

/// With every slot on two servers (issue 60): a 20 s run (seed 61: kill -9
/// and restart, a pause, a partition) loses no acknowledged write and every
/// history is linearizable, with each update logged at its backup before it
/// is acknowledged. Its faults do not outlast the 3 s lease, so nothing
/// fails over here (the report says so); the 60 s runs on the results page
/// fail slots over.
#[test]
fn a_short_replicated_fault_run_loses_nothing() {
    let out = faults(
        &[
            "--duration-s",
            "20",
            "--seed",
            "61",
            "--replication",
            "2",
            "--json",
        ],
        false,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "locus bench faults --replication 2 failed: {}\n{stderr}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(r["settings"]["replication"], 2, "{r:#}");
    assert_eq!(r["violations"], 0, "{r:#}");
    assert_eq!(r["lost_acknowledged_writes"], 0, "{r:#}");
    assert_eq!(r["probes_failed"], 0, "{r:#}");
    assert!(r["acknowledged_writes"].as_u64().unwrap() > 0);
    assert!(r["failovers"].is_object(), "{r:#}");
}

#[test]
fn an_acknowledged_insert_missing_from_a_final_read_fails_the_run() {
    let out = faults(&["--duration-s", "10", "--seed", "62", "--json"], true);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the run passed: {stderr}");
    assert!(
        stderr.contains("dropped the acknowledged insert"),
        "{stderr}"
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(r["lost_acknowledged_writes"], 1, "{r:#}");
    assert!(r["violations"].as_u64().unwrap() >= 1, "{r:#}");
    assert!(
        r["details"][0]
            .as_str()
            .unwrap()
            .contains("not linearizable"),
        "{r:#}"
    );
}
