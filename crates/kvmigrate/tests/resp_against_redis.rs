//! The RESP2 client against a real, private `redis-server`: every helper a
//! migration agent uses, binary-safe keys and values, pipelining, every
//! reply type redis produces (nested and null arrays included), server
//! errors, and the reply size bound.
//!
//! Needs `redis-server` on PATH (Debian: `apt-get install -y redis-server`);
//! without it the test fails, it does not skip.

use std::collections::HashSet;
use std::path::Path;

use locus_kvmigrate::redis::RedisProcess;
use locus_kvmigrate::resp::{Client, Command, Config, Limits, Pttl, Reply, RespError};

/// A private redis-server on a free loopback port (the crate's own guard: killed on drop).
struct Redis {
    /// Held for its drop: the server lives as long as this value.
    _process: RedisProcess,
    addr: String,
}

impl Redis {
    fn start() -> Redis {
        let process = RedisProcess::start(Path::new("redis-server")).unwrap_or_else(|e| {
            panic!("{e}; CI installs redis-server in .ci/run. This test does not skip without it.")
        });
        let addr = process.addr().to_string();
        Redis {
            _process: process,
            addr,
        }
    }

    fn client(&self) -> Client {
        Client::connect(&self.addr, Config::default()).expect("connect to the private redis")
    }
}

#[test]
fn every_helper_against_a_real_redis() {
    let redis = Redis::start();
    let mut c = redis.client();

    c.ping().unwrap();
    c.flushall().unwrap();
    assert_eq!(c.dbsize().unwrap(), 0);

    // Binary-safe keys and values, CRLF and NUL inside; empty value.
    let key: &[u8] = b"k\r\n\x00\xff";
    let value: Vec<u8> = (0..=255u8)
        .chain(b"\r\n$-1\r\n*3\r\n".iter().copied())
        .collect();
    c.set(key, &value).unwrap();
    assert_eq!(c.get(key).unwrap(), Some(value.clone()));
    c.set(b"empty", b"").unwrap();
    assert_eq!(c.get(b"empty").unwrap(), Some(Vec::new()));
    assert_eq!(c.get(b"missing").unwrap(), None);
    assert_eq!(c.dbsize().unwrap(), 2);
    assert_eq!(c.del(&[b"empty", b"missing"]).unwrap(), 1);

    // A 1 MiB value crosses many reads.
    let big: Vec<u8> = (0..1 << 20).map(|i| (i * 7 % 251) as u8).collect();
    c.set(b"big", &big).unwrap();
    assert_eq!(c.get(b"big").unwrap().as_deref(), Some(&big[..]));

    // Pipelining: 3000 SETs in one call (three windows), then 3000 GETs.
    let n = 3000;
    let sets: Vec<Command> = (0..n)
        .map(|i| {
            Command::new("SET")
                .arg(format!("key:{i}"))
                .arg(format!("value:{i}"))
        })
        .collect();
    let replies = c.pipeline(&sets).unwrap();
    assert_eq!(replies.len(), n);
    assert!(replies.iter().all(|r| *r == Reply::Simple("OK".into())));
    let gets: Vec<Command> = (0..n)
        .map(|i| Command::new("GET").arg(format!("key:{i}")))
        .collect();
    for (i, r) in c.pipeline(&gets).unwrap().into_iter().enumerate() {
        assert_eq!(r, Reply::Bulk(Some(format!("value:{i}").into_bytes())));
    }

    // An error inside a pipeline stays in its place.
    let mixed = [
        Command::new("INCR").arg("counter"),
        Command::new("INCR").arg("key:0"),
        Command::new("INCR").arg("counter"),
    ];
    let r = c.pipeline(&mixed).unwrap();
    assert_eq!(r[0], Reply::Integer(1));
    assert!(
        matches!(&r[1], Reply::Error(m) if m.contains("not an integer")),
        "{r:?}"
    );
    assert_eq!(r[2], Reply::Integer(2));

    // SCAN with COUNT visits every key (keys present throughout).
    let mut seen: HashSet<Vec<u8>> = HashSet::new();
    let mut cursor = 0;
    let mut rounds = 0;
    loop {
        let (next, keys) = c.scan(cursor, 100).unwrap();
        seen.extend(keys);
        rounds += 1;
        assert!(rounds < 10_000, "SCAN did not finish");
        if next == 0 {
            break;
        }
        cursor = next;
    }
    assert_eq!(seen.len() as u64, c.dbsize().unwrap());
    assert!((0..n).all(|i| seen.contains(format!("key:{i}").as_bytes())));
    assert!(
        rounds > 1,
        "COUNT 100 over 3000 keys should take several rounds"
    );

    // DUMP / RESTORE (with and without REPLACE), PTTL.
    let payload = c.dump(key).unwrap().expect("DUMP of an existing key");
    assert_eq!(c.dump(b"missing").unwrap(), None);
    c.restore(b"copy", 0, &payload, false).unwrap();
    assert_eq!(c.get(b"copy").unwrap(), Some(value.clone()));
    let busy = c.restore(b"copy", 0, &payload, false).unwrap_err();
    assert!(
        matches!(&busy, RespError::Server(m) if m.starts_with("BUSYKEY")),
        "{busy}"
    );
    c.set(b"copy", b"other").unwrap();
    c.restore(b"copy", 60_000, &payload, true).unwrap();
    assert_eq!(c.get(b"copy").unwrap(), Some(value.clone()));
    match c.pttl(b"copy").unwrap() {
        Pttl::Millis(ms) => assert!(ms > 0 && ms <= 60_000, "{ms}"),
        other => panic!("RESTORE with a TTL gave {other:?}"),
    }
    assert_eq!(c.pttl(key).unwrap(), Pttl::Persistent);
    assert_eq!(c.pttl(b"missing").unwrap(), Pttl::Missing);
    let bad = c.restore(b"x", 0, b"not a dump payload", true).unwrap_err();
    assert!(matches!(bad, RespError::Server(_)), "{bad}");

    // MULTI/EXEC: replies of every queued command, in order.
    let tx = c
        .multi_exec(&[
            Command::new("SET").arg("t").arg("1"),
            Command::new("INCR").arg("t"),
            Command::new("GET").arg("t"),
        ])
        .unwrap()
        .expect("EXEC without WATCH is never aborted");
    assert_eq!(
        tx,
        vec![
            Reply::Simple("OK".into()),
            Reply::Integer(2),
            Reply::Bulk(Some(b"2".to_vec())),
        ]
    );
    let aborted = c
        .multi_exec(&[Command::new("SET").arg("only-one-arg")])
        .unwrap_err();
    assert!(matches!(aborted, RespError::Server(_)), "{aborted}");
    c.ping().unwrap(); // the connection is still in step

    // EVAL: nested arrays, nulls inside arrays (Lua false), integers.
    let r = c
        .eval(
            "return {KEYS[1], ARGV[1], 7, {1, {2, false}}, false}",
            &[b"a-key"],
            &[b"an-arg"],
        )
        .unwrap();
    assert_eq!(
        r,
        Reply::Array(Some(vec![
            Reply::Bulk(Some(b"a-key".to_vec())),
            Reply::Bulk(Some(b"an-arg".to_vec())),
            Reply::Integer(7),
            Reply::Array(Some(vec![
                Reply::Integer(1),
                Reply::Array(Some(vec![Reply::Integer(2), Reply::Bulk(None)])),
            ])),
            Reply::Bulk(None),
        ]))
    );
    assert_eq!(
        c.eval("return redis.status_reply('FINE')", &[], &[])
            .unwrap(),
        Reply::Simple("FINE".into())
    );
    let e = c
        .eval("return redis.error_reply('MYERR custom')", &[], &[])
        .unwrap_err();
    assert!(
        matches!(&e, RespError::Server(m) if m == "MYERR custom"),
        "{e}"
    );

    // A null array: BLPOP timing out on an empty list.
    let r = c
        .call(&Command::new("BLPOP").arg("no-such-list").arg("0.01"))
        .unwrap();
    assert_eq!(r, Reply::Array(None));

    // Server error text comes through.
    let e = c.call(&Command::new("NOSUCHCOMMAND")).unwrap_err();
    assert!(
        matches!(&e, RespError::Server(m) if m.contains("unknown command")),
        "{e}"
    );
    assert!(e.to_string().starts_with("redis error: ERR"), "{e}");

    c.flushall().unwrap();
    assert_eq!(c.dbsize().unwrap(), 0);
}

#[test]
fn reply_size_bound_against_a_real_redis() {
    let redis = Redis::start();
    let mut writer = redis.client();
    writer.set(b"large", &vec![b'x'; 4096]).unwrap();
    let config = Config {
        limits: Limits {
            reply_bytes_max: 1024,
            ..Limits::default()
        },
        ..Config::default()
    };
    let mut small = Client::connect(&redis.addr, config).unwrap();
    assert_eq!(small.get(b"absent").unwrap(), None);
    let e = small.get(b"large").unwrap_err();
    assert!(matches!(e, RespError::TooLarge { .. }), "{e}");
    assert!(e.to_string().contains("1024"), "{e}");
    // The rest of that reply is still on the wire: the client refuses to go on.
    let e = small.ping().unwrap_err();
    assert!(matches!(e, RespError::Poisoned { .. }), "{e}");
    // A fresh connection works.
    writer.ping().unwrap();
}
