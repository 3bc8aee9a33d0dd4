use super::*;

/// A supervisor of `script` (run for any role), owning or detaching.
fn supervisor(script: &str, tie: Tie) -> (tempfile::TempDir, Supervisor) {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("fake-locus");
    std::fs::write(&exe, format!("#!/bin/sh\n{script}\n")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let s = Supervisor::new(&exe, &dir.path().join("cluster.toml"), dir.path(), tie);
    (dir, s)
}

#[test]
fn dropping_the_supervisor_kills_and_reaps_its_children() {
    let (_dir, mut s) = supervisor("exec sleep 600", Tie::Owned);
    s.spawn(Role::Server(0), &[], Some(600)).unwrap();
    s.spawn(Role::Coordinator("coordinator".into()), &[], Some(600))
        .unwrap();
    let pids = s.pids();
    assert_eq!(pids.len(), 2);
    assert!(pids.iter().all(|&pid| pid_alive(pid)));
    s.check().unwrap();
    drop(s);
    assert!(
        pids.iter().all(|&pid| !pid_alive(pid)),
        "{pids:?} outlived the supervisor"
    );
}

#[test]
fn a_panic_kills_the_children_too() {
    let (_dir, mut s) = supervisor("exec sleep 600", Tie::Owned);
    s.spawn(Role::Server(0), &[], Some(600)).unwrap();
    let pids = s.pids();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _keep = s;
        panic!("a bug in the middle of a run");
    }));
    assert!(r.is_err());
    assert!(
        pids.iter().all(|&pid| !pid_alive(pid)),
        "{pids:?} outlived the panic"
    );
}

#[test]
fn a_process_that_exits_is_named_with_its_log_and_its_arguments_are_the_commands() {
    let (dir, mut s) = supervisor(
        "echo \"args: $*\"; echo 'cannot do it: no such region' >&2; exit 3",
        Tie::Owned,
    );
    s.spawn(Role::Server(4), &["--extra".into()], Some(60))
        .unwrap();
    let t = Instant::now();
    let e = loop {
        match s.check() {
            Err(e) => break e.to_string(),
            Ok(()) if t.elapsed() < Duration::from_secs(30) => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Ok(()) => panic!("the child did not exit"),
        }
    };
    assert!(e.contains("server 4 exited"), "{e}");
    assert!(e.contains("cannot do it: no such region"), "{e}");
    let config = dir.path().join("cluster.toml");
    assert!(
        e.contains(&format!(
            "args: server --id 4 --config {} --extra --lifetime-s 60",
            config.display()
        )),
        "{e}"
    );
}

#[test]
fn a_detached_process_outlives_its_supervisor_and_terminate_ends_it() {
    let (_dir, mut s) = supervisor("exec sleep 600", Tie::Detached);
    let pid = s
        .spawn(Role::Coordinator("coordinator-1".into()), &[], Some(600))
        .unwrap();
    drop(s);
    assert!(pid_alive(pid), "a detached process outlives its supervisor");
    // SIGTERM ends `sleep`; nothing needs killing.
    assert_eq!(terminate(&[pid], Duration::from_secs(10), pid_alive), 0);
    assert!(!pid_alive(pid));
}

#[test]
fn free_ports_are_distinct_bound_until_dropped_and_below_the_ephemeral_range() {
    let (lo, hi) = below_ephemeral();
    assert!(1024 <= lo && lo < hi, "{lo}..{hi}");
    let mut p = FreePorts::default();
    let got: Vec<SocketAddr> = (0..16).map(|_| p.take().unwrap()).collect();
    let mut ports: Vec<u16> = got.iter().map(|a| a.port()).collect();
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(ports.len(), 16, "distinct: {got:?}");
    // Bound while held (on a busy machine a port may have come from the
    // kernel's fallback, outside the range, but never twice).
    assert!(TcpListener::bind(got[0]).is_err(), "held until dropped");
    drop(p);
    assert!(TcpListener::bind(got[0]).is_ok(), "released on drop");
    assert!(ports.iter().filter(|&&x| (lo..hi).contains(&x)).count() >= 8);
}
