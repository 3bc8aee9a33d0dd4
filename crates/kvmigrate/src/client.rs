//! The client agent's pure part (NetMigrate 3, appendix A): matching replies to a request and
//! merging the two replies of a double read, keeping the one with the newer version.

use crate::wire::{Body, Packet, Status, FLAG_DOUBLE};

/// What a query returned to the application.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Ok, NotFound, or Error (for a write: outcome unknown).
    pub status: Status,
    /// Version of the value read or written.
    pub version: u64,
    /// Value read (empty for writes and misses).
    pub value: Vec<u8>,
}

/// Collects the replies of one request.
#[derive(Clone, Debug, Default)]
pub struct ReplyMerger {
    first: Option<Outcome>,
}

impl ReplyMerger {
    /// Feeds one reply packet; returns the final outcome once every expected reply is in.
    /// A double read ends with the newer of its two replies; if either failed, it failed.
    pub fn feed(&mut self, p: &Packet) -> Option<Outcome> {
        let Body::Reply {
            status,
            version,
            value,
        } = &p.body
        else {
            return None;
        };
        let got = Outcome {
            status: *status,
            version: *version,
            value: value.clone(),
        };
        if p.flags & FLAG_DOUBLE == 0 {
            return Some(got);
        }
        match self.first.take() {
            None => {
                self.first = Some(got);
                None
            }
            Some(first) => Some(merge(first, got)),
        }
    }
}

/// The newer of two replies (NetMigrate appendix A: "merges two replies ... to the one with a
/// newer version"). A missing key has version 0 unless it was deleted.
pub fn merge(a: Outcome, b: Outcome) -> Outcome {
    // An error or a LOST answer is no answer: it wins over a value so a caller never takes a
    // half-answered double read for the key's latest version.
    if matches!(a.status, Status::Error | Status::Lost) {
        return a;
    }
    if matches!(b.status, Status::Error | Status::Lost) {
        return b;
    }
    if b.version > a.version {
        b
    } else {
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::FLAG_FROM_DEST;

    fn reply(status: Status, version: u64, value: &[u8], flags: u8) -> Packet {
        Packet {
            from: 1,
            shard: 1,
            seq: 9,
            flags,
            body: Body::Reply {
                status,
                version,
                value: value.to_vec(),
            },
        }
    }

    #[test]
    fn single_reply_finishes() {
        let mut m = ReplyMerger::default();
        let out = m.feed(&reply(Status::Ok, 3, b"x", 0)).unwrap();
        assert_eq!(out.value, b"x");
    }

    #[test]
    fn double_read_keeps_the_newer_reply_in_either_order() {
        let src = reply(Status::Ok, 5, b"old", FLAG_DOUBLE);
        let dst = reply(Status::Ok, 9, b"new", FLAG_DOUBLE | FLAG_FROM_DEST);
        let miss = reply(Status::NotFound, 0, b"", FLAG_DOUBLE | FLAG_FROM_DEST);
        let deleted = reply(Status::NotFound, 11, b"", FLAG_DOUBLE | FLAG_FROM_DEST);
        for (a, b, want) in [
            (&src, &dst, b"new".to_vec()),
            (&dst, &src, b"new".to_vec()),
            (&src, &miss, b"old".to_vec()),
            (&miss, &src, b"old".to_vec()),
        ] {
            let mut m = ReplyMerger::default();
            assert!(m.feed(a).is_none());
            assert_eq!(m.feed(b).unwrap().value, want);
        }
        let mut m = ReplyMerger::default();
        m.feed(&src);
        assert_eq!(m.feed(&deleted).unwrap().status, Status::NotFound);
        let mut m = ReplyMerger::default();
        m.feed(&src);
        let err = reply(Status::Error, 0, b"", FLAG_DOUBLE);
        assert_eq!(m.feed(&err).unwrap().status, Status::Error);
    }
}
