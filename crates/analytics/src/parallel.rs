//! Scoped worker threads over a list of work items.

use std::sync::Mutex;

/// Calls `f` on every item from up to `threads` scoped threads, items taken
/// in list order by whichever thread is free. A panic in `f` is a bug and
/// propagates when the scope ends.
pub fn for_each<T: Send, F: Fn(T) + Sync>(items: Vec<T>, threads: usize, f: F) {
    let threads = threads.clamp(1, items.len().max(1));
    if threads == 1 {
        items.into_iter().for_each(f);
        return;
    }
    let queue = Mutex::new(items.into_iter());
    let work = || loop {
        let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
        match next {
            Some(item) => f(item),
            None => break,
        }
    };
    std::thread::scope(|s| {
        for _ in 1..threads {
            s.spawn(work);
        }
        work();
    });
}

/// Maps every item (with its index) on up to `threads` threads and returns
/// the results in item order, so a fold over them does not depend on the
/// thread count.
pub fn map<T: Send, R: Send, F: Fn(usize, T) -> R + Sync>(
    items: Vec<T>,
    threads: usize,
    f: F,
) -> Vec<R> {
    let n = items.len();
    let slots: Vec<Mutex<Option<R>>> = (0..n).map(|_| Mutex::new(None)).collect();
    for_each(
        items.into_iter().enumerate().collect(),
        threads,
        |(k, item)| {
            let r = f(k, item);
            *slots[k].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
        },
    );
    slots
        .into_iter()
        .map(|s| {
            s.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .expect("every item was mapped")
        })
        .collect()
}
