//! The log against its files: what was acknowledged comes back, in order;
//! torn tails are cut; corruption stops recovery naming file and offset;
//! a log cut at random offsets recovers exactly a prefix (issue 15, 4(e)).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use locus_wal::frame::FRAME_HEADER_BYTES;
use locus_wal::{Entry, FileStorage, SyncMode, Wal, WalConfig, WalError};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn cfg(dir: &Path, sync: SyncMode) -> WalConfig {
    WalConfig {
        storage: Arc::new(FileStorage),
        dir: dir.to_path_buf(),
        sync,
        identity: "server 0 of 1".into(),
        segment_bytes_max: 64 << 20,
    }
}

/// A log, its checkpoint entries and records replayed, and the recovery report.
type Opened = (Wal, Vec<Vec<u8>>, Vec<Vec<u8>>, locus_wal::Recovery);

/// Opens the log, collecting what recovery replays.
fn open(c: WalConfig) -> Result<Opened, WalError> {
    let mut ck = Vec::new();
    let mut recs = Vec::new();
    let (w, r) = Wal::open(c, |e| {
        match e {
            Entry::Checkpoint(b) => ck.push(b.to_vec()),
            Entry::Record(b) => recs.push(b.to_vec()),
        }
        Ok(())
    })?;
    Ok((w, ck, recs, r))
}

fn record(i: u32) -> Vec<u8> {
    // Varied lengths, including empty.
    let n = (i * 37 % 300) as usize;
    let mut v = i.to_le_bytes().to_vec();
    v.extend((0..n).map(|j| (i as usize + j) as u8));
    v
}

fn wal_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect();
    v.sort();
    v
}

#[test]
fn acknowledged_records_come_back_in_order_across_restarts() {
    let d = tempfile::tempdir().unwrap();
    for round in 0..3u32 {
        let (w, ck, recs, r) = open(cfg(d.path(), SyncMode::Always)).unwrap();
        assert!(ck.is_empty());
        let want: Vec<Vec<u8>> = (0..round * 50).map(record).collect();
        assert_eq!(recs, want, "round {round}");
        assert_eq!(r.records, want.len() as u64);
        for i in round * 50..(round + 1) * 50 {
            w.append_and_wait(&record(i)).unwrap();
        }
    }
}

#[test]
fn many_threads_share_groups_and_lose_nothing() {
    let d = tempfile::tempdir().unwrap();
    for sync in [SyncMode::Always, SyncMode::Interval { interval_ms: 5 }] {
        let _ = std::fs::remove_dir_all(d.path());
        let (w, _, _, _) = open(cfg(d.path(), sync)).unwrap();
        let w = Arc::new(w);
        let threads: Vec<_> = (0..4u32)
            .map(|t| {
                let w = Arc::clone(&w);
                std::thread::spawn(move || {
                    for i in 0..200 {
                        w.append_and_wait(&record(t * 1000 + i)).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let st = w.stats();
        let groups = st.groups.load(std::sync::atomic::Ordering::Relaxed);
        assert!((1..=800).contains(&groups), "{groups} groups");
        drop(Arc::try_unwrap(w).ok().unwrap());
        let (_, _, recs, _) = open(cfg(d.path(), sync)).unwrap();
        let mut got: Vec<u32> = recs
            .iter()
            .map(|r| u32::from_le_bytes(r[..4].try_into().unwrap()))
            .collect();
        got.sort_unstable();
        let mut want: Vec<u32> = (0..4)
            .flat_map(|t| (0..200).map(move |i| t * 1000 + i))
            .collect();
        want.sort_unstable();
        assert_eq!(got, want, "{sync:?}");
    }
}

#[test]
fn a_checkpoint_replaces_the_segments_before_it() {
    let d = tempfile::tempdir().unwrap();
    let (w, _, _, _) = open(cfg(d.path(), SyncMode::Always)).unwrap();
    for i in 0..10 {
        w.append_and_wait(&record(i)).unwrap();
    }
    let first = w.rotate().unwrap();
    // Appended after the rotation: must be replayed after the checkpoint.
    w.append_and_wait(&record(10)).unwrap();
    let mut ck = w.checkpoint_writer(first).unwrap();
    ck.entry(b"snapshot a").unwrap();
    ck.entry(b"snapshot b").unwrap();
    ck.commit().unwrap();
    assert_eq!(w.remove_segments_before(first).unwrap(), 1);
    w.append_and_wait(&record(11)).unwrap();
    drop(w);
    let (_, ck, recs, r) = open(cfg(d.path(), SyncMode::Always)).unwrap();
    assert_eq!(ck, vec![b"snapshot a".to_vec(), b"snapshot b".to_vec()]);
    assert_eq!(recs, vec![record(10), record(11)]);
    assert_eq!(r.checkpoint_entries, 2);
}

#[test]
fn segments_a_checkpoint_covered_are_removed_at_open() {
    // A crash between the checkpoint's rename and the removal of old segments.
    let d = tempfile::tempdir().unwrap();
    let (w, _, _, _) = open(cfg(d.path(), SyncMode::Always)).unwrap();
    w.append_and_wait(&record(1)).unwrap();
    let first = w.rotate().unwrap();
    w.checkpoint_writer(first).unwrap().commit().unwrap();
    drop(w);
    assert_eq!(wal_files(d.path()).len(), 2);
    let (_, ck, recs, _) = open(cfg(d.path(), SyncMode::Always)).unwrap();
    assert!(ck.is_empty() && recs.is_empty(), "{recs:?}");
    assert!(wal_files(d.path())
        .iter()
        .all(|p| !p.ends_with(format!("{:020}.wal", first - 1))));
}

#[test]
fn a_torn_final_record_is_cut_and_the_log_goes_on() {
    let d = tempfile::tempdir().unwrap();
    let (w, _, _, _) = open(cfg(d.path(), SyncMode::Always)).unwrap();
    for i in 0..5 {
        w.append_and_wait(&record(i)).unwrap();
    }
    drop(w);
    let seg = wal_files(d.path()).pop().unwrap();
    let len = std::fs::metadata(&seg).unwrap().len();
    // Half a frame: a length promising more than follows.
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes.extend_from_slice(&100u32.to_le_bytes());
    bytes.extend_from_slice(&[7u8; 20]);
    std::fs::write(&seg, &bytes).unwrap();
    let (w, _, recs, r) = open(cfg(d.path(), SyncMode::Always)).unwrap();
    assert_eq!(recs, (0..5).map(record).collect::<Vec<_>>());
    let (path, offset, _) = r.truncated.clone().expect("truncated");
    assert_eq!((path, offset), (seg.clone(), len));
    assert_eq!(std::fs::metadata(&seg).unwrap().len(), len);
    w.append_and_wait(&record(5)).unwrap();
    drop(w);
    let (_, _, recs, r) = open(cfg(d.path(), SyncMode::Always)).unwrap();
    assert_eq!(recs, (0..6).map(record).collect::<Vec<_>>());
    assert!(r.truncated.is_none());
}

/// A `kill -9` between creating a segment and writing its header (at start
/// or at a rotation) leaves an empty newest segment. Recovery accepts it (it
/// holds no record) and must not leave it behind as an older segment
/// without a header: the next start would refuse the directory as corrupt.
/// Found by `interval_process_crash_keeps_acknowledged` (seed 0).
#[test]
fn an_empty_newest_segment_left_by_a_crash_is_reused_not_left_behind() {
    let d = tempfile::tempdir().unwrap();
    let (w, _, _, _) = open(cfg(d.path(), SyncMode::Always)).unwrap();
    for i in 0..3 {
        w.append_and_wait(&record(i)).unwrap();
    }
    drop(w);
    let last = wal_files(d.path()).pop().unwrap();
    let n: u64 = last.file_stem().unwrap().to_str().unwrap().parse().unwrap();
    let empty = d.path().join(format!("{:020}.wal", n + 1));
    std::fs::write(&empty, b"").unwrap();
    for restart in 0..3 {
        let (w, _, recs, _) = open(cfg(d.path(), SyncMode::Always))
            .unwrap_or_else(|e| panic!("restart {restart}: {e}"));
        assert_eq!(recs, (0..3 + restart).map(record).collect::<Vec<_>>());
        w.append_and_wait(&record(3 + restart)).unwrap();
    }
}

#[test]
fn a_corrupt_record_in_the_middle_names_file_and_offset() {
    let d = tempfile::tempdir().unwrap();
    let (w, _, _, _) = open(cfg(d.path(), SyncMode::Always)).unwrap();
    let mut offsets = Vec::new();
    let mut at = 0u64;
    for i in 0..5 {
        let r = record(i);
        offsets.push(at);
        at += (FRAME_HEADER_BYTES + r.len()) as u64;
        w.append_and_wait(&r).unwrap();
    }
    drop(w);
    let seg = wal_files(d.path()).pop().unwrap();
    let mut bytes = std::fs::read(&seg).unwrap();
    let header = bytes.len() as u64 - at;
    let victim = header + offsets[2];
    bytes[victim as usize + FRAME_HEADER_BYTES + 1] ^= 0xFF;
    std::fs::write(&seg, &bytes).unwrap();
    match open(cfg(d.path(), SyncMode::Always)) {
        Err(e @ WalError::Corrupt { .. }) => {
            let WalError::Corrupt { path, offset, .. } = &e else {
                unreachable!()
            };
            assert_eq!((path, *offset), (&seg, victim));
            let msg = e.to_string();
            assert!(
                msg.contains(&seg.display().to_string()) && msg.contains(&victim.to_string()),
                "{msg}"
            );
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a corrupt middle record was accepted"),
    }
}

#[test]
fn a_second_process_on_the_directory_is_refused_and_so_is_another_identity() {
    let d = tempfile::tempdir().unwrap();
    let (w, _, _, _) = open(cfg(d.path(), SyncMode::Always)).unwrap();
    w.append_and_wait(b"x").unwrap();
    assert!(matches!(
        open(cfg(d.path(), SyncMode::Always)),
        Err(WalError::Locked { .. })
    ));
    drop(w);
    let mut other = cfg(d.path(), SyncMode::Always);
    other.identity = "server 1 of 2".into();
    let e = open(other).err().expect("refused");
    assert!(matches!(e, WalError::Identity { .. }), "{e}");
}

#[test]
fn small_segments_rotate_by_themselves() {
    let d = tempfile::tempdir().unwrap();
    let mut c = cfg(d.path(), SyncMode::Interval { interval_ms: 1 });
    c.segment_bytes_max = 1000;
    let (w, _, _, _) = open(c.clone()).unwrap();
    for i in 0..100 {
        w.append_and_wait(&record(i)).unwrap();
    }
    drop(w);
    assert!(wal_files(d.path()).len() > 5);
    let (_, _, recs, _) = open(c).unwrap();
    assert_eq!(recs, (0..100).map(record).collect::<Vec<_>>());
}

/// Issue 15, 4(e): the log cut at random offsets, its last record torn
/// (cut, then its remaining bytes scrambled): recovery yields exactly the
/// acknowledged records whose frames lie wholly before the cut, in order.
#[test]
fn a_log_cut_at_random_offsets_recovers_exactly_a_prefix() {
    let seed = 0x15_4e;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let d = tempfile::tempdir().unwrap();
    let (w, _, _, _) = open(cfg(d.path(), SyncMode::Always)).unwrap();
    let acked: Vec<Vec<u8>> = (0..300).map(record).collect();
    for r in &acked {
        w.append_and_wait(r).unwrap();
    }
    drop(w);
    let seg = wal_files(d.path()).pop().unwrap();
    let full = std::fs::read(&seg).unwrap();
    let body: u64 = acked
        .iter()
        .map(|r| (FRAME_HEADER_BYTES + r.len()) as u64)
        .sum();
    let header = full.len() - body as usize;
    // Where each record's frame ends.
    let mut ends = Vec::new();
    let mut at = header;
    for r in &acked {
        at += FRAME_HEADER_BYTES + r.len();
        ends.push(at);
    }
    for case in 0..200 {
        let cut = rng.gen_range(header..=full.len());
        let mut bytes = full[..cut].to_vec();
        let whole = ends.iter().filter(|&&e| e <= cut).count();
        let start = if whole == 0 { header } else { ends[whole - 1] };
        let tear = rng.gen_bool(0.5) && cut > start + FRAME_HEADER_BYTES;
        if tear {
            // Scramble the payload bytes of the cut frame that did land.
            for b in &mut bytes[start + FRAME_HEADER_BYTES..cut] {
                *b = rng.gen();
            }
        }
        let case_dir = d.path().join(format!("case-{case}"));
        std::fs::create_dir_all(&case_dir).unwrap();
        std::fs::write(case_dir.join(seg.file_name().unwrap()), &bytes).unwrap();
        let (_, _, recs, r) = open(cfg(&case_dir, SyncMode::Always))
            .unwrap_or_else(|e| panic!("seed {seed:#x} case {case} cut {cut} tear {tear}: {e}"));
        assert_eq!(
            recs,
            acked[..whole],
            "seed {seed:#x} case {case}: cut at {cut} (tear {tear}) must keep exactly {whole} records"
        );
        assert_eq!(r.truncated.is_some(), cut != start, "case {case}");
        std::fs::remove_dir_all(&case_dir).unwrap();
    }
}
