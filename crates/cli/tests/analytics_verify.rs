//! `--verify` (issue 63): every kernel's result passes GAPBS's checks on
//! every backend, on a shipped graph, a weighted one and an R-MAT, and the
//! run says so; the checks themselves fail on wrong results (unit tests in
//! `locus_analytics::verify`).

use std::path::PathBuf;
use std::process::Command;

fn data(file: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../analytics/tests/data")
        .join(file)
        .display()
        .to_string()
}

#[test]
fn every_kernel_verifies_on_every_backend() {
    let dir = tempfile::tempdir().unwrap();
    let (lesmis, wel) = (data("lesmis.txt"), data("lesmis.wel"));
    let graphs: [&[&str]; 3] = [
        &["--graph", &lesmis],
        &["--graph", &wel, "--symmetrize"],
        &["--rmat-scale", "9"],
    ];
    for g in graphs {
        for algo in ["bfs", "sssp", "cc", "pagerank", "bc", "tc", "radii"] {
            if algo != "sssp" && g.contains(&wel.as_str()) {
                continue;
            }
            for backend in ["local", "disk", "far", "paged"] {
                let mut args = vec!["analytics", "run", "--algo", algo, "--backend", backend];
                args.extend_from_slice(g);
                args.extend([
                    "--threads",
                    "2",
                    "--verify",
                    "--sources",
                    "4",
                    "--disk-dir",
                    dir.path().to_str().unwrap(),
                ]);
                let o = Command::new(env!("CARGO_BIN_EXE_locus"))
                    .args(&args)
                    .output()
                    .unwrap();
                let so = String::from_utf8_lossy(&o.stdout);
                assert!(
                    o.status.success(),
                    "{args:?}: {}",
                    String::from_utf8_lossy(&o.stderr)
                );
                let name = if algo == "cc" { "cc" } else { algo };
                assert!(
                    so.contains(&format!("verify          {name}: ok")),
                    "{args:?}: {so}"
                );
            }
        }
    }
}
