//! Helpers shared by Linux-only thread tests (the store's `service_idle.rs`
//! and `service_spin.rs`; the coordinator's `driver_idle.rs` includes this
//! file by path).

/// Context switches (voluntary and not) of this process's threads whose
/// names start with `prefix`.
pub fn switches(prefix: &str) -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let dir = task.unwrap().path();
        let Ok(comm) = std::fs::read_to_string(dir.join("comm")) else {
            continue; // the thread ended meanwhile
        };
        if !comm.trim().starts_with(prefix) {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(dir.join("status")) else {
            continue;
        };
        for line in status.lines() {
            if line.starts_with("voluntary_ctxt_switches:")
                || line.starts_with("nonvoluntary_ctxt_switches:")
            {
                total += line
                    .split_whitespace()
                    .nth(1)
                    .and_then(|n| n.parse::<u64>().ok())
                    .expect("a switch count");
            }
        }
    }
    total
}
