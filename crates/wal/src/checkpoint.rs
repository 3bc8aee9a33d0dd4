//! The checkpoint file: a snapshot that replaces the log segments before it.
//!
//! Frames (`frame.rs`), each payload starting with a kind byte:
//!
//! ```text
//!  kind 0 header: "LOCUSCKP" | version u32 LE | first segment u64 LE | identity (UTF-8)
//!  kind 1 entry:  the caller's bytes
//!  kind 2 end:    entry count u64 LE
//! ```
//!
//! Written as `checkpoint.tmp`, synced, renamed over `checkpoint`, and the
//! directory synced: a crash leaves either the old checkpoint or the new
//! one, never a mix. A checkpoint without its end frame, or whose count
//! differs, is therefore corrupt, not torn.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::frame::{self, End};
use crate::storage::{Storage, StorageFile};
use crate::{Result, WalError};

pub(crate) const FILE: &str = "checkpoint";
const TMP: &str = "checkpoint.tmp";
const MAGIC: &[u8; 8] = b"LOCUSCKP";
const VERSION: u32 = 1;
const KIND_HEADER: u8 = 0;
const KIND_ENTRY: u8 = 1;
const KIND_END: u8 = 2;

/// Writes one checkpoint; nothing replaces the current one until [`commit`](Self::commit).
pub struct CheckpointWriter {
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    out: BufWriter<Box<dyn StorageFile>>,
    frame: Vec<u8>,
    payload: Vec<u8>,
    entries: u64,
    bytes: u64,
}

impl CheckpointWriter {
    pub(crate) fn create(
        storage: Arc<dyn Storage>,
        dir: &Path,
        first_segment: u64,
        identity: &str,
    ) -> Result<Self> {
        let path = dir.join(TMP);
        let f = storage.create(&path).map_err(|source| WalError::Io {
            what: "cannot create the checkpoint",
            path,
            source,
        })?;
        let mut w = CheckpointWriter {
            storage,
            dir: dir.to_path_buf(),
            out: BufWriter::with_capacity(1 << 20, f),
            frame: Vec::new(),
            payload: Vec::new(),
            entries: 0,
            bytes: 0,
        };
        let mut h = vec![KIND_HEADER];
        h.extend_from_slice(MAGIC);
        h.extend_from_slice(&VERSION.to_le_bytes());
        h.extend_from_slice(&first_segment.to_le_bytes());
        h.extend_from_slice(identity.as_bytes());
        w.put(&h)?;
        Ok(w)
    }

    fn put(&mut self, payload: &[u8]) -> Result<()> {
        if payload.len() > frame::RECORD_BYTES_MAX {
            return Err(WalError::TooLarge {
                bytes: payload.len(),
                max: frame::RECORD_BYTES_MAX,
            });
        }
        self.frame.clear();
        frame::encode(payload, &mut self.frame);
        self.bytes += self.frame.len() as u64;
        self.out
            .write_all(&self.frame)
            .map_err(|source| WalError::Io {
                what: "cannot write the checkpoint",
                path: self.dir.join(TMP),
                source,
            })
    }

    /// Adds one entry.
    pub fn entry(&mut self, bytes: &[u8]) -> Result<()> {
        let mut p = std::mem::take(&mut self.payload);
        p.clear();
        p.push(KIND_ENTRY);
        p.extend_from_slice(bytes);
        let r = self.put(&p);
        self.payload = p;
        self.entries += 1;
        r
    }

    /// Entries so far.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Makes the checkpoint durable and the current one; returns its bytes.
    pub fn commit(mut self) -> Result<u64> {
        let mut end = vec![KIND_END];
        end.extend_from_slice(&self.entries.to_le_bytes());
        self.put(&end)?;
        let tmp = self.dir.join(TMP);
        let io = |what, source| WalError::Io {
            what,
            path: tmp.clone(),
            source,
        };
        let mut f = self
            .out
            .into_inner()
            .map_err(|e| io("cannot write the checkpoint", e.into_error()))?;
        f.sync_all()
            .map_err(|e| io("cannot sync the checkpoint", e))?;
        drop(f);
        self.storage
            .rename(&tmp, &self.dir.join(FILE))
            .map_err(|e| io("cannot rename the checkpoint", e))?;
        crate::sync_dir(&*self.storage, &self.dir)?;
        Ok(self.bytes)
    }
}

/// Reads `dir`'s checkpoint, if any: calls `entry` for each entry and
/// returns the first segment to replay and the entry count.
pub(crate) fn read(
    storage: &dyn Storage,
    dir: &Path,
    identity: &str,
    mut entry: impl FnMut(u64, &[u8]) -> std::result::Result<(), String>,
) -> Result<Option<(u64, u64)>> {
    let path = dir.join(FILE);
    let bytes = match storage.read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(WalError::Io {
                what: "cannot read the checkpoint",
                path,
                source,
            })
        }
    };
    let corrupt = |offset: u64, why: String| WalError::Corrupt {
        path: path.clone(),
        offset,
        why,
    };
    let (frames, end) = frame::parse(&bytes);
    match end {
        End::Clean => {}
        // Renamed only after a sync: a cut frame is damage, not a crash.
        End::Torn { offset, why } | End::Corrupt { offset, why } => {
            return Err(corrupt(offset, why))
        }
    }
    let Some(&(_, h)) = frames.first() else {
        return Err(corrupt(0, "empty checkpoint".into()));
    };
    if h.len() < 21 || h[0] != KIND_HEADER || &h[1..9] != MAGIC {
        return Err(corrupt(0, "no checkpoint header".into()));
    }
    let version = u32::from_le_bytes(h[9..13].try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(corrupt(
            0,
            format!("checkpoint version {version}, this build reads {VERSION}"),
        ));
    }
    let first = u64::from_le_bytes(h[13..21].try_into().expect("8 bytes"));
    let found = String::from_utf8_lossy(&h[21..]);
    if found != identity {
        return Err(WalError::Identity {
            path,
            found: found.into(),
            expected: identity.into(),
        });
    }
    let mut count = 0u64;
    let mut ended = false;
    for &(off, p) in &frames[1..] {
        if ended {
            return Err(corrupt(off, "a frame after the end frame".into()));
        }
        match p.first() {
            Some(&KIND_ENTRY) => {
                entry(off, &p[1..]).map_err(|why| corrupt(off, why))?;
                count += 1;
            }
            Some(&KIND_END) if p.len() == 9 => {
                let n = u64::from_le_bytes(p[1..9].try_into().expect("8 bytes"));
                if n != count {
                    return Err(corrupt(
                        off,
                        format!("end frame counts {n} entries, found {count}"),
                    ));
                }
                ended = true;
            }
            _ => return Err(corrupt(off, "unknown checkpoint frame".into())),
        }
    }
    if !ended {
        return Err(corrupt(bytes.len() as u64, "no end frame".into()));
    }
    Ok(Some((first, count)))
}
