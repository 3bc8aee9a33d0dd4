//! The measurement driver runs a load during each protocol's migration and reports a coherent
//! result: the migration finished, nothing acknowledged was lost, every key's client history is
//! linearizable, the timeline covers the run,
//! and the extra-bandwidth counters come from the mechanisms each protocol uses.

use std::sync::Arc;

use locus_kvmigrate::measure::{measure, Draw, MeasureConfig, OpChooser};
use locus_kvmigrate::{MigrationPhase, Protocol};
use locus_workloads::ycsb::{FastUniform, Op, Workload};

/// YCSB's operation generator (scrambled Zipfian, one uniform stream per client).
fn ycsb(records: u64, write_ratio: f64) -> OpChooser {
    Arc::new(move |_client, seed| {
        let workload = Workload::with_write_ratio(write_ratio).expect("a valid ratio");
        let mut ops = workload.generator(records).expect("records > 0");
        let mut uniform = FastUniform::new(seed);
        Box::new(move || match ops.next(&mut uniform) {
            Op::Read(key) => Draw { key, write: false },
            Op::Update(key) => Draw { key, write: true },
        })
    })
}

#[test]
fn every_protocol_measures_without_losing_writes() {
    for protocol in Protocol::ALL {
        let mut cfg = MeasureConfig::quick(protocol);
        cfg.keys = 4000;
        cfg.write_ratio = 0.3;
        cfg.warmup_ms = 30;
        cfg.cooldown_ms = 30;
        cfg.interval_ms = 10;
        // A loaded machine must not turn slowness into failures.
        cfg.server.ack_timeout_us = 30_000_000;
        cfg.op_timeout_ms = 30_000;
        let r = measure(&cfg, ycsb(4000, 0.3)).unwrap();
        let status = r.status.clone().expect("migration finished");
        assert_eq!(status.phase, MigrationPhase::Done, "{}", protocol.name());
        assert_eq!(r.lost_writes, 0, "{}", protocol.name());
        assert_eq!(r.failed_ops, 0, "{}", protocol.name());
        // Every key's client history was recorded and checked, and is linearizable.
        let h = &r.history;
        assert_eq!(
            r.violations,
            0,
            "{}: {:?}",
            protocol.name(),
            h.first_violation
        );
        assert_eq!(h.keys_sampled, 4000);
        assert!(h.keys_checked > 0 && h.keys_checked == h.keys_seen, "{h:?}");
        assert_eq!(h.keys_unchecked, 0, "{h:?}");
        assert_eq!(
            h.ops_checked, r.ops,
            "every completed query is in a checked history"
        );
        assert_eq!(h.recording_stopped_ms, None);
        assert!(r.ops > 0);
        assert_eq!(r.timeline.iter().map(|b| b.ops).sum::<u64>(), r.ops);
        assert!(r.timeline.iter().all(|b| b.p50_us <= b.p99_us));
        assert!(r.server_data_bytes > 0);
        match protocol {
            Protocol::StopAndCopy => {
                assert_eq!(r.client_extra_bytes, 0);
                // Nothing but resends, which a loaded host's slow answers cause.
                assert_eq!(r.server_extra_bytes, r.server_resent_bytes);
            }
            Protocol::SourceBased => assert_eq!(r.client_extra_bytes, 0),
            _ => {}
        }
    }
}

#[test]
fn bad_settings_are_refused() {
    let chooser = ycsb(10, 0.5);
    let mut cfg = MeasureConfig::quick(Protocol::NetMigrate);
    cfg.write_ratio = 1.5;
    assert!(measure(&cfg, chooser.clone()).is_err());
    let mut cfg = MeasureConfig::quick(Protocol::NetMigrate);
    cfg.value_bytes = 8;
    assert!(measure(&cfg, chooser).is_err());
}
