//! The one thread pool every execution runs in. Handing work to a pool
//! from a thread outside it costs 12 to 50 us under this hypervisor, inside
//! it about 1 us, so an execution that has parallel work enters the pool
//! once, and every kernel's parallel loop (and `gemm`, which uses the
//! current rayon pool) runs from inside. Executions too small to split stay
//! on the caller's thread and pay nothing.
//!
//! When the pool starts on the program's main thread, that thread becomes
//! one of its workers: the executions it asks for then run on it directly,
//! with no hand-off there and back, and the pool starts one thread fewer.
//! The main thread lives as long as the process, so the pool never loses
//! the worker. Executions from other threads hand their work to the pool
//! as before. A pool first needed by another thread (a test harness's, a
//! server's) takes no caller in: that thread may end.
//!
//! The pool has one thread per available core, or `OXLA_NUM_THREADS` if
//! that is set to a positive number.

use std::sync::OnceLock;

use rayon::ThreadPool;

static POOL: OnceLock<Option<ThreadPool>> = OnceLock::new();

fn pool() -> Option<&'static ThreadPool> {
    POOL.get_or_init(|| {
        let threads = std::env::var("OXLA_NUM_THREADS")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&n| n > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let builder = || {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("oxla-worker-{i}"))
        };
        // `use_current_thread` fails where this thread already belongs to
        // another rayon pool; then the pool starts all its threads itself.
        let on_main = std::thread::current().name() == Some("main");
        on_main
            .then(|| builder().use_current_thread().build().ok())
            .flatten()
            .or_else(|| builder().build().ok())
    })
    .as_ref()
}

/// Runs `f` inside the pool (on the caller's thread if the pool could not
/// start, or if the caller is one of its workers).
pub(crate) fn in_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    match pool() {
        Some(p) => p.install(f),
        None => f(),
    }
}
