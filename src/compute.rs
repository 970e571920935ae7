//! The compute pool: CPU-bound work (chunk codecs, encoding and decoding snapshots,
//! manifests and transaction logs) runs on one fixed pool with a thread per core,
//! awaited from async code.
//!
//! It is separate from tokio's blocking pool, which serves file I/O and may grow to
//! hundreds of threads. Bounding compression to one thread per core keeps each
//! thread's reused zstd context (see `zstd_context`) and its buffers hot in cache and
//! stops dozens of threads from time-slicing two cores: a 256 MiB zstd write through
//! the Array API spent ~1.7x the CPU in libzstd when it ran on 32 blocking threads.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

/// The pool, built on first use; `None` when the operating system refused threads
/// (work then falls back to tokio's blocking pool).
fn pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("floe-compute-{i}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// Runs `f` on the compute pool and waits for it without blocking the async
/// executor. With no tokio runtime current (a plain synchronous caller) `f` runs on
/// the calling thread.
///
/// # Errors
/// The panic message, as `Err`, when `f` panicked: the panic does not cross into the
/// caller's task.
pub(crate) async fn spawn<T, F>(f: F) -> Result<T, String>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    if tokio::runtime::Handle::try_current().is_err() {
        return catch_unwind(AssertUnwindSafe(f)).map_err(panic_message);
    }
    let Some(pool) = pool() else {
        return tokio::task::spawn_blocking(f)
            .await
            .map_err(|e| e.to_string());
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    pool.spawn(move || {
        // The receiver may be gone (the caller's future was dropped); the result is
        // then discarded.
        let _ = tx.send(catch_unwind(AssertUnwindSafe(f)).map_err(panic_message));
    });
    rx.await
        .map_err(|_| "compute task ended without a result".to_string())?
}

/// Whether async code running now may wait for [`install`]: a multi-thread tokio
/// runtime is current. On a current-thread runtime waiting would stall every other
/// task; with no runtime the caller is synchronous and takes the ordinary paths.
pub(crate) fn may_wait_for_pool() -> bool {
    tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
}

/// Runs `f` on the compute pool and blocks the calling thread until it returns; `f`
/// may borrow from the caller (no `'static` bound) and use the pool's threads with
/// rayon's parallel iterators. With no pool, `f` runs on the calling thread. From
/// async code (arrays encoding or decoding a window of chunks straight from or into
/// the caller's buffer, which cannot be sent to a task) the executor thread waits
/// meanwhile: keep each call to a bounded amount of work and yield between calls.
/// (`tokio::task::block_in_place` would hand the thread's other tasks on, but it
/// panics inside a `LocalSet` and cannot be asked beforehand whether it would.)
///
/// # Errors
/// The panic message, as `Err`, when `f` panicked.
pub(crate) fn install<R, F>(f: F) -> Result<R, String>
where
    R: Send,
    F: FnOnce() -> R + Send,
{
    let run = || catch_unwind(AssertUnwindSafe(f)).map_err(panic_message);
    match pool() {
        Some(pool) => pool.install(run),
        None => run(),
    }
}

/// Runs `f` on the compute pool without waiting for it (on the calling thread when
/// there is no pool); a panic in `f` is caught and dropped.
pub(crate) fn spawn_detached(f: impl FnOnce() + Send + 'static) {
    let run = move || {
        let _ = catch_unwind(AssertUnwindSafe(f));
    };
    match pool() {
        Some(pool) => pool.spawn(run),
        None => run(),
    }
}

/// The text of a panic payload.
fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(s) => format!("compute task panicked: {s}"),
        Err(payload) => match payload.downcast::<&'static str>() {
            Ok(s) => format!("compute task panicked: {s}"),
            Err(_) => "compute task panicked".to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn runs_work_off_the_calling_thread_and_returns_its_result() {
        let caller = std::thread::current().id();
        let (value, worker) = spawn(|| (6 * 7, std::thread::current().id()))
            .await
            .expect("no panic");
        assert_eq!(value, 42);
        assert_ne!(worker, caller);
    }

    #[tokio::test]
    async fn a_panic_becomes_an_error_with_its_message() {
        let err = spawn(|| -> u32 { panic!("boom {}", 1) })
            .await
            .expect_err("the task panicked");
        assert!(err.contains("boom 1"), "{err}");
        // The pool survives the panic.
        assert_eq!(spawn(|| 1).await, Ok(1));
    }

    #[test]
    fn detached_work_runs_and_its_panics_stay_inside() {
        let (tx, rx) = std::sync::mpsc::channel();
        spawn_detached(|| panic!("ignored"));
        spawn_detached(move || tx.send(7).expect("receiver alive"));
        assert_eq!(rx.recv_timeout(std::time::Duration::from_secs(10)), Ok(7));
    }

    #[test]
    fn installed_work_borrows_runs_on_the_pool_and_reports_panics() {
        use rayon::prelude::*;
        let data: Vec<u64> = (1..=1000).collect();
        let (sum, on_pool) = install(|| {
            let sum: u64 = data.par_iter().sum();
            let name = std::thread::current().name().unwrap_or("").to_string();
            (sum, name.starts_with("floe-compute-"))
        })
        .expect("no panic");
        assert_eq!(sum, 500_500);
        assert!(on_pool, "install runs on the compute pool");
        let err = install(|| -> u32 { panic!("installed {}", 2) }).expect_err("panicked");
        assert!(err.contains("installed 2"), "{err}");
        assert_eq!(install(|| 3), Ok(3), "the pool survives the panic");
    }

    #[test]
    fn without_a_runtime_work_runs_inline() {
        let caller = std::thread::current().id();
        let worker = futures::executor::block_on(spawn(|| std::thread::current().id()));
        assert_eq!(worker, Ok(caller));
    }
}
