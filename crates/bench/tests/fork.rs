//! `pragh::fork::in_child`: a child sees the parent's memory, keeps its own
//! writes, and its error, panic or death comes back as an error. Its own
//! harness (`harness = false`): fork needs a process with one thread, and
//! the test harness runs each test on a thread of its own.

use locus_bench::pragh::fork::in_child;
use locus_bench::BenchError;

fn main() {
    let mut data = vec![1u64, 2, 3];
    let got: u64 = in_child("sum", || {
        data[0] = 100; // the child's copy only
        Ok(data.iter().sum())
    })
    .unwrap();
    assert_eq!(got, 105);
    assert_eq!(data, [1, 2, 3], "the parent's memory is untouched");

    let e = in_child::<u64, _>("failing", || {
        Err(BenchError::setting("--x", 1, "must be 2"))
    })
    .unwrap_err();
    assert!(e.to_string().contains("--x = 1: must be 2"), "{e}");
    let e = in_child::<u64, _>("panicking", || panic!("boom")).unwrap_err();
    assert!(e.to_string().contains("panicked: boom"), "{e}");
    let e = in_child::<u64, _>("killed", || {
        // SAFETY: the child kills itself.
        unsafe { libc::raise(libc::SIGKILL) };
        Ok(0)
    })
    .unwrap_err();
    assert!(e.to_string().contains("signal 9"), "{e}");

    // A second thread makes fork unsafe: refused, with the reason.
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || rx.recv());
    let e = in_child::<u64, _>("threaded", || Ok(1)).unwrap_err();
    assert!(e.to_string().contains("cannot fork with 2 threads"), "{e}");
    drop(tx);
    let _ = t.join();
    println!("fork: 5 checks passed");
}
