use std::io::Cursor;
use std::net::{TcpListener, TcpStream};
use std::thread;

use super::*;

/// Bounds every socket read and write of a test, so a bug fails instead of hanging.
const SOCKET_TIMEOUT: Duration = Duration::from_secs(10);

fn secret(s: &str) -> Secret {
    Secret::new(s).expect("a valid test secret")
}

fn alpha() -> Secret {
    secret("alpha-cluster-secret-0001")
}

fn beta() -> Secret {
    secret("beta-cluster-secret-00002")
}

/// A connected loopback socket pair: (listener's end, client's end).
fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (server, _) = l.accept().unwrap();
    for s in [&server, &client] {
        s.set_read_timeout(Some(SOCKET_TIMEOUT)).unwrap();
        s.set_write_timeout(Some(SOCKET_TIMEOUT)).unwrap();
    }
    (server, client)
}

/// Runs `accept` on one end and `prove` on the other; returns both results.
fn handshake(
    server_secret: Secret,
    server_kind: Listener,
    client_secret: &Secret,
    client_kind: Listener,
) -> (Result<(), AuthError>, Result<(), AuthError>) {
    let (mut s, mut c) = pair();
    let server = thread::spawn(move || accept(&mut s, &server_secret, server_kind, SOCKET_TIMEOUT));
    let client = prove(&mut c, client_secret, client_kind);
    (server.join().expect("accept does not panic"), client)
}

/// A peer that plays back `input` and records what it is sent.
struct Script {
    input: Cursor<Vec<u8>>,
    output: Vec<u8>,
}

impl Script {
    fn new(input: &[u8]) -> Self {
        Script {
            input: Cursor::new(input.to_vec()),
            output: Vec::new(),
        }
    }
}

impl Read for Script {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.input.read(buf)
    }
}

impl Write for Script {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.output.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn the_right_secret_is_accepted_both_ways_and_the_stream_stays_aligned() {
    for kind in [Listener::Fabric, Listener::Client, Listener::Control] {
        let (mut s, mut c) = pair();
        let server = thread::spawn(move || {
            accept(&mut s, &alpha(), kind, SOCKET_TIMEOUT)?;
            let mut after = [0u8; 5];
            s.read_exact(&mut after)?;
            Ok::<_, AuthError>(after)
        });
        prove(&mut c, &alpha(), kind).expect("the client is accepted");
        c.write_all(b"HELLO").unwrap();
        assert_eq!(
            &server.join().unwrap().expect("the server accepts"),
            b"HELLO"
        );
    }
}

#[test]
fn a_wrong_secret_is_bad_proof_on_the_listener_and_refused_with_the_reason_on_the_client() {
    let (server, client) = handshake(alpha(), Listener::Fabric, &beta(), Listener::Fabric);
    assert!(matches!(server, Err(AuthError::BadProof)), "{server:?}");
    match client {
        Err(AuthError::Refused { reason }) => {
            assert_eq!(reason, "wrong cluster secret for this fabric listener")
        }
        other => panic!("expected Refused, got {other:?}"),
    }
}

#[test]
fn a_proof_for_the_fabric_listener_is_refused_by_a_client_listener() {
    let (server, client) = handshake(alpha(), Listener::Client, &alpha(), Listener::Fabric);
    assert!(matches!(server, Err(AuthError::BadProof)), "{server:?}");
    assert!(
        matches!(&client, Err(AuthError::Refused { reason }) if reason.contains("client listener")),
        "{client:?}"
    );
}

#[test]
fn a_listener_with_a_wrong_mac_is_unproven() {
    // A fake listener: a valid challenge, "accepted", then a MAC it cannot know.
    let mut fake = MAGIC.to_vec();
    fake.extend_from_slice(&[7u8; NONCE_BYTES]);
    fake.push(STATUS_ACCEPTED);
    fake.extend_from_slice(&[0u8; MAC_BYTES]);
    let mut peer = Script::new(&fake);
    let r = prove(&mut peer, &alpha(), Listener::Fabric);
    assert!(matches!(r, Err(AuthError::ServerUnproven)), "{r:?}");
    assert_eq!(
        peer.output.len(),
        NONCE_BYTES + MAC_BYTES,
        "the proof was sent"
    );
}

#[test]
fn a_garbage_challenge_is_not_locus_and_nothing_is_sent() {
    for garbage in [
        &b"HTTP/1.1 400 Bad Request\r\n\r\n"[..],
        b"LOCUSAU2 a later version",
        &[0u8; 64],
    ] {
        let mut peer = Script::new(garbage);
        let r = prove(&mut peer, &alpha(), Listener::Fabric);
        assert!(matches!(r, Err(AuthError::NotLocus)), "{r:?}");
        assert!(peer.output.is_empty(), "no proof for a stranger");
    }
}

/// A listener's whole side of a handshake: challenge, then `verdict`.
fn transcript(verdict: &[u8]) -> Vec<u8> {
    let mut t = MAGIC.to_vec();
    t.extend_from_slice(&[9u8; NONCE_BYTES]);
    t.extend_from_slice(verdict);
    t
}

#[test]
fn every_truncation_of_a_listener_transcript_fails_without_panicking() {
    let mut accepted = vec![STATUS_ACCEPTED];
    accepted.extend_from_slice(&[1u8; MAC_BYTES]);
    let refused = refusal("no");
    for full in [transcript(&accepted), transcript(&refused)] {
        for cut in 0..full.len() {
            let mut peer = Script::new(&full[..cut]);
            let r = prove(&mut peer, &alpha(), Listener::Fabric);
            match r {
                Err(AuthError::Io(e)) => {
                    assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "cut at {cut}: {e}")
                }
                other => panic!("cut at {cut}: expected Io, got {other:?}"),
            }
        }
    }
    // An unknown status byte and an oversized reason are not this protocol.
    for verdict in [&[0x02u8][..], &[STATUS_REFUSED, 0x01, 0x01]] {
        let r = prove(
            &mut Script::new(&transcript(verdict)),
            &alpha(),
            Listener::Fabric,
        );
        assert!(matches!(r, Err(AuthError::NotLocus)), "{verdict:?}: {r:?}");
    }
}

#[test]
fn the_listener_refuses_garbage_and_fails_on_truncation() {
    let mut peer = Script::new(&[0xAB; NONCE_BYTES + MAC_BYTES]);
    let r = accept(&mut peer, &alpha(), Listener::Fabric, SOCKET_TIMEOUT);
    assert!(matches!(r, Err(AuthError::BadProof)), "{r:?}");
    let out = &peer.output;
    assert_eq!(&out[..8], b"LOCUSAU1");
    let reason = b"wrong cluster secret for this fabric listener";
    assert_eq!(out[40], STATUS_REFUSED);
    assert_eq!(
        u16::from_le_bytes([out[41], out[42]]) as usize,
        reason.len()
    );
    assert_eq!(&out[43..], reason);
    for cut in [0, 1, 32, 63] {
        let mut peer = Script::new(&[0xAB; 64][..cut]);
        let r = accept(&mut peer, &alpha(), Listener::Fabric, SOCKET_TIMEOUT);
        assert!(matches!(r, Err(AuthError::Io(_))), "cut at {cut}: {r:?}");
        assert_eq!(peer.output.len(), 40, "only the challenge was sent");
    }
}

/// A peer that sends `bytes` (then zeros) one byte per read, slowly.
struct Trickle {
    delay: Duration,
    bytes: Vec<u8>,
}

impl Read for Trickle {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        thread::sleep(self.delay);
        buf[0] = if self.bytes.is_empty() {
            0
        } else {
            self.bytes.remove(0)
        };
        Ok(1)
    }
}

impl Write for Trickle {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn the_timeout_bounds_the_whole_exchange_against_a_trickling_peer() {
    // 64 bytes at one per 20 ms take over a second; the bound is 100 ms.
    let mut slow = Trickle {
        delay: Duration::from_millis(20),
        bytes: Vec::new(),
    };
    let bound = Duration::from_millis(100);
    let start = Instant::now();
    let r = accept(&mut slow, &alpha(), Listener::Fabric, bound);
    match r {
        Err(AuthError::Io(e)) => assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}"),
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "stopped at the deadline"
    );
    // The client side: a listener trickling a valid challenge.
    let mut slow = Trickle {
        delay: Duration::from_millis(20),
        bytes: MAGIC.to_vec(),
    };
    match prove_within(&mut slow, &alpha(), Listener::Fabric, bound) {
        Err(AuthError::Io(e)) => assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}"),
        other => panic!("expected a timeout, got {other:?}"),
    }
}

#[test]
fn a_silent_socket_times_out_with_a_message_saying_so() {
    let (mut s, _c) = pair();
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let r = accept(&mut s, &alpha(), Listener::Fabric, Duration::from_secs(5));
    let msg = r.expect_err("nobody answers").to_string();
    assert!(msg.contains("timed out or was cut"), "{msg}");
    assert!(msg.contains("waiting for the client's proof"), "{msg}");
}

#[test]
fn the_macs_match_the_documented_test_vector() {
    let key = secret("0123456789abcdef0123456789abcdef");
    let (ns, nc) = ([0x11u8; 32], [0x22u8; 32]);
    assert_eq!(
        hex(&client_mac(&key, Listener::Fabric, &ns, &nc)),
        "bbe8d1e450c34e45225be5dd1b6270b2fb4f1113ea3e1752d914eb6cc7d840ee"
    );
    assert_eq!(
        hex(&server_mac(&key, Listener::Fabric, &ns, &nc)),
        "9aebdfa0d671432fa58df2d80c10cdcacdf5dcf6f952e19a0083448cb087873d"
    );
    assert_ne!(
        client_mac(&key, Listener::Client, &ns, &nc),
        client_mac(&key, Listener::Fabric, &ns, &nc),
        "the kind is inside the MAC"
    );
}

#[test]
fn a_client_written_from_the_documented_layout_is_accepted() {
    // Reimplements the client side from the module doc alone, as a Python client would.
    let (mut s, mut c) = pair();
    let server = thread::spawn(move || accept(&mut s, &alpha(), Listener::Control, SOCKET_TIMEOUT));
    let mut challenge = [0u8; 40];
    c.read_exact(&mut challenge).unwrap();
    assert_eq!(&challenge[..8], b"LOCUSAU1");
    let nc = [0x5Au8; 32];
    let tag = |label: &[u8]| {
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(b"alpha-cluster-secret-0001").unwrap();
        m.update(label);
        m.update(&[3]);
        m.update(&challenge[8..]);
        m.update(&nc);
        m.finalize().into_bytes().to_vec()
    };
    c.write_all(&[&nc[..], &tag(b"locus-auth-v1 client")].concat())
        .unwrap();
    let mut verdict = [0u8; 33];
    c.read_exact(&mut verdict).unwrap();
    assert_eq!(verdict[0], 0x00);
    assert_eq!(verdict[1..], tag(b"locus-auth-v1 server")[..]);
    server.join().unwrap().expect("accepted");
}

#[test]
fn a_refusal_reason_is_cut_to_256_bytes_on_a_char_boundary() {
    let long = "é".repeat(200); // 400 bytes
    let r = refusal(&long);
    let len = u16::from_le_bytes([r[1], r[2]]) as usize;
    assert_eq!(len, 256);
    assert_eq!(r.len(), 3 + len);
    assert!(std::str::from_utf8(&r[3..]).is_ok());
    assert_eq!(refusal("ok"), [STATUS_REFUSED, 2, 0, b'o', b'k']);
}

#[test]
fn secret_length_is_bounded_and_the_error_says_the_length_and_the_bounds() {
    let err = Secret::new("x".repeat(15)).unwrap_err();
    assert!(matches!(
        err,
        AuthError::SecretLength {
            len: 15,
            min: 16,
            max: 1024
        }
    ));
    let msg = err.to_string();
    assert!(
        msg.contains("15 bytes") && msg.contains("16..=1024"),
        "{msg}"
    );
    assert!(msg.contains("LOCUS_SECRET"), "says what to do: {msg}");
    assert!(Secret::new("x".repeat(16)).is_ok());
    assert!(Secret::new("x".repeat(1024)).is_ok());
    assert!(matches!(
        Secret::new("x".repeat(1025)),
        Err(AuthError::SecretLength { len: 1025, .. })
    ));
    assert!(matches!(
        Secret::new([b'a', b'b', 0xFF].repeat(8)),
        Err(AuthError::SecretNotText { valid_up_to: 2 })
    ));
}

#[test]
fn debug_does_not_leak_the_secret() {
    let s = alpha();
    assert_eq!(format!("{s:?}"), "Secret(..)");
    assert_eq!(format!("{:?}", Some(s.clone())), "Some(Secret(..))");
    assert_eq!(s.expose(), "alpha-cluster-secret-0001");
}

#[test]
fn generated_secrets_are_64_lowercase_hex_characters_and_differ() {
    let (a, b) = (Secret::generate(), Secret::generate());
    assert_eq!(a.expose().len(), 64);
    assert!(a
        .expose()
        .bytes()
        .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)));
    assert_ne!(a, b);
    assert_eq!(
        Secret::new(a.expose()).unwrap(),
        a,
        "what is pasted is the key"
    );
}

#[test]
fn the_environment_wins_over_the_config_value_when_set_and_not_empty() {
    use std::ffi::OsStr;
    let from_config = "config-secret-0000000";
    let config = Some(from_config);
    let pick = |env: Option<&str>, config| Secret::from_sources(env.map(OsStr::new), config);
    assert_eq!(pick(None, None).unwrap(), None);
    assert_eq!(pick(None, config).unwrap(), Some(secret(from_config)));
    assert_eq!(
        pick(Some(""), config).unwrap(),
        Some(secret(from_config)),
        "an empty variable counts as unset"
    );
    assert_eq!(
        pick(Some("environment-secret-0000"), config).unwrap(),
        Some(secret("environment-secret-0000"))
    );
    assert!(matches!(
        pick(Some("short"), config),
        Err(AuthError::SecretLength { len: 5, .. })
    ));
    assert!(matches!(
        pick(None, Some("short")),
        Err(AuthError::SecretLength { len: 5, .. })
    ));
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let not_text = OsStr::from_bytes(b"abc\xFFdefghijklmnopqrs");
        assert!(matches!(
            Secret::from_sources(Some(not_text), config),
            Err(AuthError::SecretNotText { valid_up_to: 3 })
        ));
    }
    // The real environment, read without changing it (set_var races other threads).
    let unset = "LOCUS_AUTH_TEST_VARIABLE_NOBODY_SETS";
    assert_eq!(
        Secret::from_env_or(config, unset).unwrap(),
        Some(secret(from_config))
    );
    if let Some(path) = std::env::var("PATH").ok().filter(|p| !p.is_empty()) {
        assert_eq!(
            Secret::from_env_or(config, "PATH").ok().flatten(),
            Secret::new(path).ok()
        );
    }
}
