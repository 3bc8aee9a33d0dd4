//! Unit tests of `resp.rs`.

use super::*;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::net::TcpStream;
use std::thread;

fn decode_all(bytes: &[u8]) -> Result<Vec<Reply>, RespError> {
    let mut d = Decoder::new(Limits::default());
    d.feed(bytes);
    let mut out = Vec::new();
    while let Some(r) = d.next_reply()? {
        out.push(r);
    }
    assert!(!d.in_reply(), "left a partial reply");
    Ok(out)
}

fn bulk(b: &[u8]) -> Reply {
    Reply::Bulk(Some(b.to_vec()))
}

const SAMPLE: &[u8] = b"+OK\r\n-ERR wrong type\r\n:-42\r\n$5\r\nhe\r\no\r\n$-1\r\n$0\r\n\r\n\
*-1\r\n*0\r\n*3\r\n:1\r\n*2\r\n$1\r\na\r\n*-1\r\n+x\r\n";

fn sample_replies() -> Vec<Reply> {
    vec![
        Reply::Simple("OK".into()),
        Reply::Error("ERR wrong type".into()),
        Reply::Integer(-42),
        bulk(b"he\r\no"),
        Reply::Bulk(None),
        bulk(b""),
        Reply::Array(None),
        Reply::Array(Some(vec![])),
        Reply::Array(Some(vec![
            Reply::Integer(1),
            Reply::Array(Some(vec![bulk(b"a"), Reply::Array(None)])),
            Reply::Simple("x".into()),
        ])),
    ]
}

#[test]
fn decodes_every_reply_type() {
    assert_eq!(decode_all(SAMPLE).unwrap(), sample_replies());
}

#[test]
fn any_split_of_the_input_gives_the_same_replies() {
    // Byte by byte, and cut at every point into two feeds.
    let mut d = Decoder::new(Limits::default());
    let mut got = Vec::new();
    for b in SAMPLE {
        d.feed(std::slice::from_ref(b));
        while let Some(r) = d.next_reply().unwrap() {
            got.push(r);
        }
    }
    assert_eq!(got, sample_replies());
    for cut in 0..=SAMPLE.len() {
        let mut d = Decoder::new(Limits::default());
        let mut got = Vec::new();
        for part in [&SAMPLE[..cut], &SAMPLE[cut..]] {
            d.feed(part);
            while let Some(r) = d.next_reply().unwrap() {
                got.push(r);
            }
        }
        assert_eq!(got, sample_replies(), "cut at {cut}");
    }
}

#[test]
fn partial_input_waits_for_more() {
    for partial in [
        &b"+OK"[..],
        b"+OK\r",
        b"$5\r\nhel",
        b"$5\r\nhello\r",
        b"*2\r\n:1\r\n",
        b":12",
        b"*",
    ] {
        let mut d = Decoder::new(Limits::default());
        d.feed(partial);
        assert!(d.next_reply().unwrap().is_none(), "{partial:?}");
    }
}

#[test]
fn malformed_input_is_an_error_naming_what_was_seen() {
    let cases: &[(&[u8], &str)] = &[
        (b"?what\r\n", "unknown type byte"),
        (b"%1\r\n", "RESP3"),
        (b":12a\r\n", "decimal integer"),
        (b":\r\n", "decimal integer"),
        (b":99999999999999999999\r\n", "64-bit range"),
        (b"$-2\r\n", "negative bulk length"),
        (b"*-5\r\n", "negative array length"),
        (b"$3\r\nabcde\r\n", "not followed by CRLF"),
        (b"+OK\n", "line feed without carriage return"),
        (b"+O\rK\r\n", "carriage return not followed"),
        (b"$+3\r\nabc\r\n", "decimal integer"),
        (b"+\xff\xfe\r\n", "UTF-8"),
    ];
    for (input, want) in cases {
        let err = decode_all(input).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, RespError::Protocol { .. }),
            "{input:?}: {msg}"
        );
        assert!(msg.contains(want), "{input:?}: {msg}");
    }
    let msg = decode_all(b":12a\r\n").unwrap_err().to_string();
    assert!(msg.contains("12a"), "{msg}");
}

#[test]
fn limits_are_enforced_before_data_arrives() {
    let limits = Limits {
        reply_bytes_max: 100,
        line_bytes_max: 32,
        depth_max: 3,
    };
    let too_large = |input: &[u8]| {
        let mut d = Decoder::new(limits);
        d.feed(input);
        match d.next_reply() {
            Err(RespError::TooLarge { what }) => what,
            other => panic!("{input:?}: {other:?}"),
        }
    };
    // Header claims more than the limit: refused without waiting for it.
    assert!(too_large(b"$1000\r\n").contains("reply_bytes_max"));
    assert!(too_large(b"*9223372036854775807\r\n").contains("reply_bytes_max"));
    assert!(too_large(b"$9223372036854775807\r\n").contains("reply_bytes_max"));
    assert!(too_large(b"+aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa").contains("line"));
    assert!(too_large(b"*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n").contains("nest"));
    // Many small elements adding up past the limit.
    let mut many = b"*30\r\n".to_vec();
    for _ in 0..30 {
        many.extend_from_slice(b":1\r\n");
    }
    assert!(too_large(&many).contains("reply_bytes_max"));
    // Within the limit is fine.
    let mut d = Decoder::new(limits);
    let mut ok = b"$91\r\n".to_vec();
    ok.extend_from_slice(&[b'x'; 91]);
    ok.extend_from_slice(b"\r\n");
    assert_eq!(ok.len(), 98);
    d.feed(&ok);
    assert_eq!(d.next_reply().unwrap(), Some(bulk(&[b'x'; 91])));
}

/// A small seeded xorshift so the property tests need no dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn random_bytes_never_panic() {
    // Random bytes, biased towards RESP's own alphabet so the parser
    // gets deep before failing; any outcome but a panic is fine.
    let alphabet = b"+-:$*\r\n0123456789-1\r\n$-1\r\n*-1\r\n";
    let limits = Limits {
        reply_bytes_max: 4096,
        line_bytes_max: 64,
        depth_max: 8,
    };
    for seed in 1..=3000u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let len = (rng.next() % 96) as usize;
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                let r = rng.next();
                if r & 3 == 0 {
                    (r >> 8) as u8
                } else {
                    alphabet[(r >> 8) as usize % alphabet.len()]
                }
            })
            .collect();
        let mut d = Decoder::new(limits);
        let mut at = 0;
        while at < bytes.len() {
            let n = 1 + (rng.next() % 8) as usize;
            let end = (at + n).min(bytes.len());
            d.feed(&bytes[at..end]);
            at = end;
            loop {
                match d.next_reply() {
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(_) => {
                        at = bytes.len();
                        break;
                    }
                }
            }
        }
    }
}

/// Test-only encoder of replies (the server side of RESP2).
fn encode_reply(r: &Reply, out: &mut Vec<u8>) {
    match r {
        Reply::Simple(s) => out.extend_from_slice(format!("+{s}\r\n").as_bytes()),
        Reply::Error(s) => out.extend_from_slice(format!("-{s}\r\n").as_bytes()),
        Reply::Integer(n) => out.extend_from_slice(format!(":{n}\r\n").as_bytes()),
        Reply::Bulk(None) => out.extend_from_slice(b"$-1\r\n"),
        Reply::Bulk(Some(b)) => {
            out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
            out.extend_from_slice(b);
            out.extend_from_slice(b"\r\n");
        }
        Reply::Array(None) => out.extend_from_slice(b"*-1\r\n"),
        Reply::Array(Some(items)) => {
            out.extend_from_slice(format!("*{}\r\n", items.len()).as_bytes());
            for i in items {
                encode_reply(i, out);
            }
        }
    }
}

fn random_reply(rng: &mut Rng, depth: usize) -> Reply {
    match rng.next() % if depth == 0 { 6 } else { 7 } {
        0 => Reply::Simple(format!("S{}", rng.next() % 1000)),
        1 => Reply::Error(format!("ERR e{}", rng.next() % 1000)),
        2 => Reply::Integer(rng.next() as i64),
        3 => Reply::Bulk(None),
        4 => Reply::Array(None),
        5 => {
            let len = (rng.next() % 40) as usize;
            Reply::Bulk(Some((0..len).map(|_| rng.next() as u8).collect()))
        }
        _ => {
            let n = (rng.next() % 5) as usize;
            Reply::Array(Some((0..n).map(|_| random_reply(rng, depth - 1)).collect()))
        }
    }
}

#[test]
fn random_replies_round_trip_under_random_splits() {
    for seed in 1..=500u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let replies: Vec<Reply> = (0..1 + rng.next() % 6)
            .map(|_| random_reply(&mut rng, 4))
            .collect();
        let mut bytes = Vec::new();
        for r in &replies {
            encode_reply(r, &mut bytes);
        }
        let mut d = Decoder::new(Limits::default());
        let mut got = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let end = (at + 1 + (rng.next() % 16) as usize).min(bytes.len());
            d.feed(&bytes[at..end]);
            at = end;
            while let Some(r) = d.next_reply().unwrap() {
                got.push(r);
            }
        }
        assert_eq!(got, replies, "seed {seed}");
        assert_eq!(d.buffered(), 0);
    }
}

#[test]
fn mutated_valid_replies_never_panic() {
    for seed in 1..=2000u64 {
        let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
        let mut bytes = SAMPLE.to_vec();
        for _ in 0..1 + rng.next() % 4 {
            let i = (rng.next() as usize) % bytes.len();
            match rng.next() % 3 {
                0 => bytes[i] = rng.next() as u8,
                1 => {
                    bytes.remove(i);
                }
                _ => bytes.insert(i, b"\r\n*$-:+0"[(rng.next() % 8) as usize]),
            }
        }
        let _ = decode_all_lenient(&bytes);
    }
}

fn decode_all_lenient(bytes: &[u8]) -> Result<Vec<Reply>, RespError> {
    let mut d = Decoder::new(Limits::default());
    d.feed(bytes);
    let mut out = Vec::new();
    while let Some(r) = d.next_reply()? {
        out.push(r);
    }
    Ok(out)
}

#[test]
fn encodes_binary_safe_arrays_of_bulk_strings() {
    let mut out = Vec::new();
    Command::new("SET")
        .arg(b"k\r\n")
        .arg([0u8, 255])
        .encode(&mut out);
    assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$3\r\nk\r\n\r\n$2\r\n\x00\xff\r\n");
    out.clear();
    encode_command::<&[u8]>(&mut out, &[]);
    assert_eq!(out, b"*0\r\n");
}

/// A server on a private port whose one connection `serve` handles.
fn fake_server(serve: impl FnOnce(TcpStream) + Send + 'static) -> (String, thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let handle = thread::spawn(move || {
        if let Ok((s, _)) = listener.accept() {
            serve(s);
        }
    });
    (addr, handle)
}

/// A short reply bound, only where a timeout is the expected outcome
/// (tests whose server answers keep the default, so load cannot turn
/// their answer into a timeout).
fn quick() -> Config {
    Config {
        io_timeout_ms: 300,
        ..Config::default()
    }
}

#[test]
fn silent_server_is_a_timeout_then_poisoned() {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (addr, h) = fake_server(move |_s| {
        let _ = rx.recv(); // hold the connection open, say nothing
    });
    let mut c = Client::connect(&addr, quick()).unwrap();
    let err = c.ping().unwrap_err();
    assert!(matches!(err, RespError::Timeout { .. }), "{err}");
    assert!(err.to_string().contains("300 ms"), "{err}");
    let again = c.ping().unwrap_err();
    assert!(matches!(again, RespError::Poisoned { .. }), "{again}");
    drop(tx);
    h.join().unwrap();
}

#[test]
fn closed_connection_is_reported() {
    let (addr, h) = fake_server(|mut s| {
        let mut buf = [0u8; 64];
        let _ = s.read(&mut buf);
        let _ = s.write_all(b"$10\r\nabc");
    });
    let mut c = Client::connect(&addr, Config::default()).unwrap();
    let err = c.get(b"k").unwrap_err();
    h.join().unwrap();
    assert!(
        matches!(
            err,
            RespError::Closed {
                during: "in the middle of a reply",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn garbage_and_wrong_shapes_are_errors() {
    let (addr, h) = fake_server(|mut s| {
        let mut buf = [0u8; 64];
        let _ = s.read(&mut buf);
        let _ = s.write_all(b":5\r\n");
        let _ = s.read(&mut buf);
        let _ = s.write_all(b"-ERR boom\r\n");
        let _ = s.read(&mut buf);
        let _ = s.write_all(b"hello\r\n");
    });
    let mut c = Client::connect(&addr, Config::default()).unwrap();
    let e = c.get(b"k").unwrap_err();
    assert!(
        matches!(e, RespError::Unexpected { .. }) && e.to_string().contains(":5"),
        "{e}"
    );
    let e = c.ping().unwrap_err();
    assert!(matches!(&e, RespError::Server(m) if m == "ERR boom"), "{e}");
    let e = c.ping().unwrap_err();
    assert!(matches!(e, RespError::Protocol { .. }), "{e}");
    h.join().unwrap();
}

#[test]
fn refused_connection_is_a_connect_error() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let err = Client::connect(&format!("127.0.0.1:{port}"), quick()).unwrap_err();
    assert!(matches!(err, RespError::Connect { .. }), "{err}");
    assert!(Client::connect(
        "127.0.0.1:1",
        Config {
            io_timeout_ms: 0,
            ..quick()
        }
    )
    .is_err());
}
