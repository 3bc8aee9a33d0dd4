//! One suite, every [`Storage`]: `FileStorage` and `MemStorage` do the same
//! for every operation the log uses (what a crash keeps is `MemStorage`'s
//! alone, tested beside it), and the log writes the same bytes, file by
//! file, on both (the format does not depend on the storage), and with
//! either `Flusher`.

use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use locus_wal::{Entry, FileStorage, Flusher, MemStorage, Storage, SyncMode, Wal, WalConfig};

/// A storage and a directory in it that does not exist yet (the tempdir
/// lives as long as the test).
type Fixture = (Arc<dyn Storage>, PathBuf, Option<tempfile::TempDir>);

fn file_storage() -> Fixture {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("a/b");
    (Arc::new(FileStorage), dir, Some(t))
}

fn mem_storage() -> Fixture {
    (Arc::new(MemStorage::new()), PathBuf::from("/mem/a/b"), None)
}

fn names(s: &dyn Storage, dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = s
        .list_dir(dir)
        .unwrap()
        .into_iter()
        .map(|n| n.to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn files_are_written_read_listed_and_created_empty(f: Fixture) {
    let (s, dir, _t) = f;
    s.create_dir_all(&dir).unwrap();
    s.create_dir_all(&dir).unwrap(); // again: no error
    assert!(names(&*s, &dir).is_empty());
    let p = dir.join("x");
    let mut w = s.create(&p).unwrap();
    w.write_all(b"hello ").unwrap();
    w.write_all(b"world").unwrap();
    w.sync_data().unwrap();
    w.write_all(b"!").unwrap();
    w.sync_all().unwrap();
    assert_eq!(s.read(&p).unwrap(), b"hello world!");
    drop(w);
    let w = s.create(&p).unwrap();
    assert_eq!(s.read(&p).unwrap(), b"", "create truncates");
    drop(w);
    s.create_dir_all(&dir.join("sub")).unwrap();
    assert_eq!(names(&*s, &dir), vec!["sub", "x"]);
    s.sync_dir(&dir).unwrap();
}

fn renames_replace_and_removals_remove(f: Fixture) {
    let (s, dir, _t) = f;
    s.create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a"), dir.join("b"));
    s.create(&a).unwrap().write_all(b"new").unwrap();
    s.create(&b).unwrap().write_all(b"old").unwrap();
    s.rename(&a, &b).unwrap();
    assert_eq!(s.read(&b).unwrap(), b"new");
    assert_eq!(s.read(&a).unwrap_err().kind(), ErrorKind::NotFound);
    s.remove(&b).unwrap();
    assert_eq!(s.read(&b).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(s.remove(&b).unwrap_err().kind(), ErrorKind::NotFound);
    assert!(names(&*s, &dir).is_empty());
    let nowhere = dir.join("missing/f");
    assert_eq!(
        s.create(&nowhere).err().unwrap().kind(),
        ErrorKind::NotFound
    );
    s.sync_dir(&dir).unwrap();
}

fn truncate_cuts(f: Fixture) {
    let (s, dir, _t) = f;
    s.create_dir_all(&dir).unwrap();
    let p = dir.join("t");
    s.create(&p).unwrap().write_all(b"0123456789").unwrap();
    s.truncate(&p, 4).unwrap();
    assert_eq!(s.read(&p).unwrap(), b"0123");
    assert_eq!(
        s.truncate(&dir.join("none"), 0).unwrap_err().kind(),
        ErrorKind::NotFound
    );
}

fn a_lock_is_exclusive_until_its_guard_drops(f: Fixture) {
    let (s, dir, _t) = f;
    s.create_dir_all(&dir).unwrap();
    let p = dir.join("LOCK");
    let g = s.lock(&p).unwrap().expect("free");
    assert!(s.lock(&p).unwrap().is_none(), "held");
    assert_eq!(s.read(&p).unwrap(), b"", "the lock file exists, empty");
    drop(g);
    assert!(s.lock(&p).unwrap().is_some(), "released");
}

macro_rules! conformance_suite {
    ($name:ident, $make:expr) => {
        mod $name {
            #[test]
            fn files_are_written_read_listed_and_created_empty() {
                super::files_are_written_read_listed_and_created_empty($make);
            }
            #[test]
            fn renames_replace_and_removals_remove() {
                super::renames_replace_and_removals_remove($make);
            }
            #[test]
            fn truncate_cuts() {
                super::truncate_cuts($make);
            }
            #[test]
            fn a_lock_is_exclusive_until_its_guard_drops() {
                super::a_lock_is_exclusive_until_its_guard_drops($make);
            }
        }
    };
}

conformance_suite!(file, super::file_storage());
conformance_suite!(mem, super::mem_storage());

/// Every file of `dir` but the lock, by name, with its bytes.
fn contents(s: &dyn Storage, dir: &Path) -> Vec<(String, Vec<u8>)> {
    names(s, dir)
        .into_iter()
        .filter(|n| n != "LOCK")
        .map(|n| {
            let b = s.read(&dir.join(&n)).unwrap();
            (n, b)
        })
        .collect()
}

/// The files (by name, with their bytes, before and after a checkpoint)
/// and the replay of one sequence of appends, rotations (by size and by
/// call), a checkpoint and a removal, from one thread (so one record per
/// group, whoever flushes).
type Written = (Vec<(String, Vec<u8>)>, Vec<(bool, Vec<u8>)>);

fn write_and_replay((s, dir, t): Fixture, flusher: Flusher) -> Written {
    let cfg = WalConfig {
        storage: Arc::clone(&s),
        dir: dir.clone(),
        sync: SyncMode::Always,
        identity: "server 1 of 3".into(),
        segment_bytes_max: 600,
    };
    let (w, _) = Wal::open_with(cfg.clone(), flusher, |_| Ok(())).unwrap();
    for i in 0..100u32 {
        w.append_and_wait(&vec![i as u8; i as usize * 7 % 50])
            .unwrap();
    }
    let mut files = contents(&*s, &dir);
    let first = w.rotate().unwrap();
    w.append_and_wait(b"after the rotation").unwrap();
    let mut ck = w.checkpoint_writer(first).unwrap();
    ck.entry(b"entry one").unwrap();
    ck.entry(b"").unwrap();
    ck.commit().unwrap();
    w.remove_segments_before(first).unwrap();
    w.append_and_wait(b"last").unwrap();
    drop(w);
    files.extend(contents(&*s, &dir));
    let mut replayed = Vec::new();
    let (w, _) = Wal::open_with(cfg, flusher, |e| {
        replayed.push(match e {
            Entry::Checkpoint(b) => (true, b.to_vec()),
            Entry::Record(b) => (false, b.to_vec()),
        });
        Ok(())
    })
    .unwrap();
    drop(w);
    drop(t);
    (files, replayed)
}

/// The same sequence on both storages: the same files with the same
/// bytes, and the same replay.
#[test]
fn the_log_writes_the_same_bytes_on_every_storage() {
    let (file_files, file_replayed) = write_and_replay(file_storage(), Flusher::Thread);
    let (mem_files, mem_replayed) = write_and_replay(mem_storage(), Flusher::Thread);
    // Several segments by size, then the checkpoint and what follows it.
    assert!(file_files.len() >= 6, "{}", file_files.len());
    assert_eq!(
        file_files.iter().map(|f| &f.0).collect::<Vec<_>>(),
        mem_files.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    for ((name, a), (_, b)) in file_files.iter().zip(&mem_files) {
        assert!(
            a == b,
            "{name}: {} bytes on file, {} in memory",
            a.len(),
            b.len()
        );
    }
    assert_eq!(file_replayed, mem_replayed);
    assert_eq!(file_replayed.len(), 4);
}

/// The same sequence, flushed by the log's thread and by the caller
/// (`Flusher::Caller`): the same bytes (the format does not depend on who
/// writes it).
#[test]
fn the_log_writes_the_same_bytes_with_either_flusher() {
    let thread = write_and_replay(mem_storage(), Flusher::Thread);
    let caller = write_and_replay(mem_storage(), Flusher::Caller);
    assert!(thread.0.len() >= 6, "{}", thread.0.len());
    assert_eq!(thread, caller);
}
