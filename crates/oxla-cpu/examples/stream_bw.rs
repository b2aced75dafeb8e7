//! Measures this machine's memory bandwidth, the ceiling for fused loops
//! over arrays larger than the caches: the STREAM triad `a = b + s * c`
//! over three arrays of 2^25 f32 (128 MiB each), counting the bytes read
//! and written (12 per element, as STREAM does), on one thread and on
//! every core, with plain stores and with non-temporal (streaming) stores,
//! median of nine runs after a warm-up. It also times a read-only pass (the
//! sum of one array, 4 bytes an element), the ceiling for reductions such as
//! a row sum, which write almost nothing.
//!
//! `cargo run --release -p oxla-cpu --example stream_bw`

use std::time::Instant;

use rayon::prelude::*;

const N: usize = 1 << 25;
const RUNS: usize = 9;

/// `a[i] = b[i] + s * c[i]`, stored plainly or, with `stream` and
/// AVX-512F, 64 bytes at a time past the caches.
fn triad(a: &mut [f32], b: &[f32], c: &[f32], s: f32, stream: bool) {
    #[cfg(target_arch = "x86_64")]
    if stream && is_x86_feature_detected!("avx512f") {
        /// # Safety
        /// AVX-512F; `a` is 64-byte aligned and a multiple of 16 long, and
        /// `b` and `c` are at least as long.
        #[target_feature(enable = "avx512f")]
        unsafe fn nt(a: &mut [f32], b: &[f32], c: &[f32], s: f32) {
            use std::arch::x86_64::*;
            let sv = _mm512_set1_ps(s);
            for i in (0..a.len()).step_by(16) {
                // SAFETY: i + 16 <= len of all three; `a + i` is aligned.
                unsafe {
                    let x = _mm512_loadu_ps(b.as_ptr().add(i));
                    let y = _mm512_loadu_ps(c.as_ptr().add(i));
                    _mm512_stream_ps(a.as_mut_ptr().add(i), _mm512_fmadd_ps(sv, y, x));
                }
            }
            _mm_sfence();
        }
        if a.as_ptr().align_offset(64) == 0 && a.len().is_multiple_of(16) {
            // SAFETY: checked just above; the callers pass equal lengths.
            return unsafe { nt(a, b, c, s) };
        }
    }
    for ((a, &b), &c) in a.iter_mut().zip(b).zip(c) {
        *a = b + s * c;
    }
}

/// GB/s of the triad on `threads` threads (each a contiguous share).
fn measure(a: &mut [f32], b: &[f32], c: &[f32], pool: &rayon::ThreadPool, stream: bool) -> f64 {
    let threads = pool.current_num_threads();
    let share = (N / threads).next_multiple_of(1024);
    let mut run = || {
        let start = Instant::now();
        pool.install(|| {
            a.par_chunks_mut(share)
                .zip(b.par_chunks(share))
                .zip(c.par_chunks(share))
                .for_each(|((a, b), c)| triad(a, b, c, 3.0, stream));
        });
        start.elapsed().as_secs_f64()
    };
    run();
    let mut times: Vec<f64> = (0..RUNS).map(|_| run()).collect();
    times.sort_by(f64::total_cmp);
    (N * 12) as f64 / times[RUNS / 2] / 1e9
}

/// The sum of `b` in 64 independent lanes (so the compiler keeps them in
/// vector registers without reordering any lane's additions).
fn read_sum(b: &[f32]) -> f32 {
    let mut acc = [0f32; 64];
    let chunks = b.chunks_exact(64);
    let rest: f32 = chunks.remainder().iter().sum();
    for c in chunks {
        for (a, &x) in acc.iter_mut().zip(c) {
            *a += x;
        }
    }
    acc.iter().sum::<f32>() + rest
}

/// GB/s of [`read_sum`] over `b` on `threads` threads.
fn measure_read(b: &[f32], pool: &rayon::ThreadPool) -> f64 {
    let threads = pool.current_num_threads();
    let share = (N / threads).next_multiple_of(1024);
    let run = || {
        let start = Instant::now();
        let sum: f32 = pool.install(|| b.par_chunks(share).map(read_sum).sum());
        assert_eq!(sum, N as f32, "the sum of ones");
        start.elapsed().as_secs_f64()
    };
    run();
    let mut times: Vec<f64> = (0..RUNS).map(|_| run()).collect();
    times.sort_by(f64::total_cmp);
    (N * 4) as f64 / times[RUNS / 2] / 1e9
}

/// A vector of `N` copies of `v` starting on a 64-byte boundary (a larger
/// allocation, offset), every page touched.
fn aligned(v: f32) -> (Vec<f32>, usize) {
    let storage = vec![v; N + 16];
    let offset = storage.as_ptr().align_offset(64);
    (storage, offset)
}

fn main() {
    let (mut a, oa) = aligned(0.0);
    let (b, ob) = aligned(1.0);
    let (c, oc) = aligned(2.0);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut counts = vec![1];
    if threads > 1 {
        counts.push(threads);
    }
    for t in counts {
        // A measuring tool, not a library path: without threads there is
        // nothing to measure, so it stops there with the reason.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(t)
            .build()
            .expect("a thread pool");
        for stream in [false, true] {
            let gbs = measure(
                &mut a[oa..oa + N],
                &b[ob..ob + N],
                &c[oc..oc + N],
                &pool,
                stream,
            );
            let kind = if stream { "streaming" } else { "plain" };
            println!("{t} thread(s), {kind} stores: triad {gbs:.1} GB/s");
        }
        let gbs = measure_read(&b[ob..ob + N], &pool);
        println!("{t} thread(s), read only: sum {gbs:.1} GB/s");
    }
    assert!(
        a[oa..oa + N].iter().all(|&x| x == 7.0),
        "the triad's values"
    );
}
