//! The one thread pool every execution runs in. Handing work to a pool
//! from a thread outside it costs 12 to 50 us under this hypervisor, inside
//! it about 1 us, so an execution that has parallel work enters the pool
//! once, and every kernel's parallel loop (and `gemm`, which uses the
//! current rayon pool) runs from inside. Executions too small to split stay
//! on the caller's thread and pay nothing.

use std::sync::OnceLock;

use rayon::ThreadPool;

static POOL: OnceLock<Option<ThreadPool>> = OnceLock::new();

fn pool() -> Option<&'static ThreadPool> {
    POOL.get_or_init(|| {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("oxla-worker-{i}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// Runs `f` inside the pool (on the caller's thread if the pool could not start).
pub(crate) fn in_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    match pool() {
        Some(p) => p.install(f),
        None => f(),
    }
}
