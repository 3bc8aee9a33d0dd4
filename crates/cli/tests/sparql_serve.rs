//! `locus sparql serve` as an HTTP client meets it: a real process on a free
//! loopback port, GET and both POST bodies, the bearer token, a body over the
//! limit, and the refusal to listen beyond loopback without a token. Every
//! server is killed when its test ends (also on failure).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const DATA: &str = "<http://ex.org/a> <http://ex.org/knows> <http://ex.org/b> .\n\
<http://ex.org/b> <http://ex.org/knows> <http://ex.org/c> .\n";

/// A bound on waiting for the server to load and listen (not a speed claim).
const START_S_MAX: u64 = 300;

struct Server {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(extra: &[&str]) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let nt = dir.path().join("d.nt");
    std::fs::write(&nt, DATA).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_locus"))
        .args(["sparql", "serve", "--data", nt.to_str().unwrap()])
        .args(["--listen", "127.0.0.1:0", "--machines", "2"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let mut server = Server {
        child,
        addr: String::new(),
        _dir: dir,
    };
    let line = rx
        .recv_timeout(Duration::from_secs(START_S_MAX))
        .expect("the server names its address");
    server.addr = line
        .trim()
        .strip_prefix("listening on http://")
        .and_then(|s| s.strip_suffix("/sparql"))
        .unwrap_or_else(|| panic!("first line: {line:?}"))
        .to_string();
    server
}

/// One HTTP/1.1 exchange: the status and the body.
fn http(addr: &str, head: &str, body: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let req = format!(
        "{head}\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let out = String::from_utf8_lossy(&out).into_owned();
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("response: {out:?}"));
    let body = out.split_once("\r\n\r\n").map_or("", |b| b.1).to_string();
    (status, body)
}

const Q: &str = "SELECT+%3Fo+WHERE+%7B+%3Chttp%3A%2F%2Fex.org%2Fa%3E+%3Fp+%3Fo+%7D";

#[test]
fn get_and_post_answer_over_http() {
    let s = serve(&[]);
    let (status, body) = http(
        &s.addr,
        &format!("GET /sparql?query={Q} HTTP/1.1\r\nAccept: text/csv"),
        b"",
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, "o\r\nhttp://ex.org/b\r\n");

    let form = format!("query={Q}");
    let (status, body) = http(
        &s.addr,
        "POST /sparql HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\nAccept: text/tab-separated-values",
        form.as_bytes(),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, "?o\n<http://ex.org/b>\n");

    let (status, body) = http(
        &s.addr,
        "POST /sparql HTTP/1.1\r\nContent-Type: application/sparql-query",
        b"ASK { <http://ex.org/b> <http://ex.org/knows> <http://ex.org/c> }",
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"boolean\":true"), "{body}");

    let (status, body) = http(
        &s.addr,
        "POST /sparql HTTP/1.1\r\nContent-Type: application/sparql-query",
        b"SELECT WHERE",
    );
    assert_eq!(status, 400);
    assert!(body.starts_with("SPARQL syntax"), "{body}");
}

#[test]
fn an_update_by_post_is_seen_by_the_next_query() {
    let s = serve(&[]);
    let (status, body) = http(
        &s.addr,
        "POST /sparql HTTP/1.1\r\nContent-Type: application/sparql-update",
        b"INSERT DATA { <http://ex.org/a> <http://ex.org/knows> <http://ex.org/z> }",
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("1 triple inserted"), "{body}");
    let (status, body) = http(
        &s.addr,
        &format!("GET /sparql?query={Q} HTTP/1.1\r\nAccept: text/csv"),
        b"",
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, "o\r\nhttp://ex.org/b\r\nhttp://ex.org/z\r\n");
}

#[test]
fn one_shot_updates_run_before_the_queries() {
    let dir = tempfile::tempdir().unwrap();
    let nt = dir.path().join("d.nt");
    std::fs::write(&nt, DATA).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_locus"))
        .args(["sparql", "--data", nt.to_str().unwrap(), "--json"])
        .args([
            "--update",
            "DELETE WHERE { <http://ex.org/a> ?p ?o }",
            "--update",
            "INSERT DATA { <http://ex.org/a> <http://ex.org/knows> <http://ex.org/c> }",
        ])
        .args(["--query", "SELECT ?o WHERE { <http://ex.org/a> ?p ?o }"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let b = &v["results"]["bindings"];
    assert_eq!(b.as_array().unwrap().len(), 1, "{v}");
    assert_eq!(b[0]["o"]["value"], "http://ex.org/c");
}

#[test]
fn a_token_is_checked() {
    let token = "t0ken-for-the-test-0123456789";
    let s = serve(&["--token", token]);
    let get = format!("GET /sparql?query={Q} HTTP/1.1");
    let (status, _) = http(&s.addr, &get, b"");
    assert_eq!(status, 401);
    let (status, _) = http(
        &s.addr,
        &format!("{get}\r\nAuthorization: Bearer nope"),
        b"",
    );
    assert_eq!(status, 401);
    let (status, body) = http(
        &s.addr,
        &format!("{get}\r\nAuthorization: Bearer {token}"),
        b"",
    );
    assert_eq!(status, 200, "{body}");
}

#[test]
fn a_stalled_client_does_not_hold_up_the_others() {
    let s = serve(&[]);
    // Headers that promise a body which never comes; the connection stays
    // open. (Over 1 KiB: tiny_http reads smaller bodies itself, up front.)
    let mut stalled = TcpStream::connect(&s.addr).unwrap();
    stalled
        .write_all(
            b"POST /sparql HTTP/1.1\r\nHost: x\r\nContent-Type: application/sparql-query\r\nContent-Length: 100000\r\n\r\nASK",
        )
        .unwrap();
    // Every other request is still answered (read timeouts in `http` bound the wait).
    for _ in 0..3 {
        let (status, body) = http(&s.addr, &format!("GET /sparql?query={Q} HTTP/1.1"), b"");
        assert_eq!(status, 200, "{body}");
    }
    drop(stalled);
}

#[test]
fn a_body_over_the_limit_is_413() {
    let s = serve(&["--body-bytes-max", "64"]);
    let big = vec![b' '; 65];
    let (status, body) = http(
        &s.addr,
        "POST /sparql HTTP/1.1\r\nContent-Type: application/sparql-query",
        &big,
    );
    assert_eq!(status, 413, "{body}");
    // The server keeps serving.
    let (status, _) = http(&s.addr, &format!("GET /sparql?query={Q} HTTP/1.1"), b"");
    assert_eq!(status, 200);
}

#[test]
fn refuses_a_non_loopback_address_without_a_token() {
    // Nothing is bound: the refusal comes before loading and listening.
    let o = Command::new(env!("CARGO_BIN_EXE_locus"))
        .args(["sparql", "serve", "--data", "/nonexistent.nt"])
        .args(["--listen", "0.0.0.0:0"])
        .env_remove("LOCUS_SPARQL_TOKEN")
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("refusing") && err.contains("--token"), "{err}");
    let o = Command::new(env!("CARGO_BIN_EXE_locus"))
        .args(["sparql", "serve", "--data", "/nonexistent.nt"])
        .args(["--listen", "127.0.0.1:0", "--token", "short"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("16 characters"));
}
