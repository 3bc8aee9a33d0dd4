//! `locus kv migration recover|abort`, the operator's decision on a shard whose source died
//! mid-migration (design: "NetMigrate: a dead source"), as a user meets them against running
//! processes: the request reaches the named server through the router, and a server with no
//! orphaned shard refuses it saying so; bad flags are refused with the flag named. (The orphan
//! itself, and both commands' effects, are checked in `kvmigrate/tests/source_dies.rs`.)
//! Nothing here depends on speed: every wait is a poll with a generous bound, and every child
//! is killed at the end.

mod common;

use common::kv::{eventually, free_base, run, text, Procs};

#[test]
fn recover_and_abort_reach_the_server_and_refuse_without_an_orphan() {
    let base = free_base();
    let router = format!("127.0.0.1:{base}");
    let r = router.as_str();
    let mut procs = Procs::new(None);
    procs.router(r);
    for id in ["1", "2"] {
        procs.server(r, id, &["--records", "10", "--buckets-log2", "6"]);
    }
    for cmd in ["recover", "abort"] {
        // Until server 2 has said hello, the router answers that it does not know it.
        let err = eventually("server 2 to say hello", || {
            let out = run(&[
                "kv",
                "migration",
                cmd,
                "--router",
                r,
                "--shard",
                "1",
                "--server",
                "2",
            ]);
            assert!(!out.status.success(), "{cmd} without an orphan succeeded");
            let err = text(&out.stderr);
            err.contains("no orphaned shard").then_some(err)
        });
        assert!(err.contains(&format!("{cmd} refused")), "{err}");
        assert!(err.contains("server 2"), "{err}");
    }
    procs.assert_alive();
    drop(procs);
}

#[test]
fn bad_flags_name_the_flag() {
    for (args, want) in [
        (&["--shard", "0", "--server", "2"][..], "--shard 0"),
        (&["--shard", "1", "--server", "65"][..], "--server 65"),
    ] {
        let mut all = vec!["kv", "migration", "recover", "--router", "127.0.0.1:7000"];
        all.extend_from_slice(args);
        let out = run(&all);
        assert!(!out.status.success());
        assert!(text(&out.stderr).contains(want), "{}", text(&out.stderr));
    }
}
