//! Measures this machine's f32 FMA peak, the ceiling for matrix products:
//! independent fused multiply-add chains per thread (16 with AVX-512, 12 with AVX2),
//! on one thread and on every core, best of five runs.
//!
//! With AVX-512 it also times a matrix-product micro-kernel on operands
//! that stay in L1: a 12 x 32 block of C in 24 registers, each step two
//! vector loads of packed B, twelve broadcasts of packed A and 24 FMAs (the
//! shape of BLIS's and OpenBLAS's AVX-512 kernels). No product that reads
//! its operands from memory runs faster than this on the machine, so it is
//! the practical ceiling the `matmul_*` workloads are judged against
//! besides the peak.
//!
//! `cargo run --release -p oxla-cpu --example fma_peak`

use std::time::Instant;

/// Chains of `iters` steps on `LANES`-wide registers; returns a value that
/// depends on all of them, so none is optimised away.
#[cfg(target_arch = "x86_64")]
fn chains(iters: u64) -> (f32, f64) {
    use std::arch::x86_64::*;

    /// # Safety
    /// The CPU must have AVX-512F.
    #[target_feature(enable = "avx512f")]
    unsafe fn avx512(iters: u64) -> f32 {
        let (a, b) = (_mm512_set1_ps(1.000_000_1), _mm512_set1_ps(0.999_999_9));
        let mut acc = [_mm512_setzero_ps(); 16];
        for _ in 0..iters {
            for x in &mut acc {
                *x = _mm512_fmadd_ps(*x, a, b);
            }
        }
        let sum = acc
            .iter()
            .fold(_mm512_setzero_ps(), |s, &x| _mm512_add_ps(s, x));
        _mm512_reduce_add_ps(sum)
    }

    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2(iters: u64) -> f32 {
        let (a, b) = (_mm256_set1_ps(1.000_000_1), _mm256_set1_ps(0.999_999_9));
        // 12 chains, not 16: with `a` and `b` that fills 14 of AVX2's 16
        // vector registers. Sixteen would spill, and the chains would then
        // wait on stores and reloads instead of on the FMA units.
        let mut acc = [_mm256_setzero_ps(); AVX2_CHAINS];
        for _ in 0..iters {
            for x in &mut acc {
                *x = _mm256_fmadd_ps(*x, a, b);
            }
        }
        let mut lanes = [0f32; 8];
        let sum = acc
            .iter()
            .fold(_mm256_setzero_ps(), |s, &x| _mm256_add_ps(s, x));
        // SAFETY: `lanes` has room for the 8 floats stored.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), sum) };
        lanes.iter().sum()
    }

    const AVX2_CHAINS: usize = 12;
    let steps = iters as f64 * 16.0 * 2.0;
    if is_x86_feature_detected!("avx512f") {
        // SAFETY: AVX-512F was just detected.
        (unsafe { avx512(iters) }, steps * 16.0)
    } else if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
        // SAFETY: AVX2 and FMA were just detected.
        let steps = iters as f64 * AVX2_CHAINS as f64 * 2.0;
        (unsafe { avx2(iters) }, steps * 8.0)
    } else {
        (0.0, 0.0)
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn chains(_iters: u64) -> (f32, f64) {
    (0.0, 0.0)
}

/// Rows and columns of the micro-kernel's block of C, and the depth of
/// its packed panels (12 x 256 of A and 256 x 32 of B: 44 KiB with C).
const MR: usize = 12;
const NR: usize = 32;
const KC: usize = 256;

/// `reps` passes of the micro-kernel over the same packed panels; returns
/// a value that depends on the results, and the flops done.
#[cfg(target_arch = "x86_64")]
fn micro_kernel(reps: u64) -> (f32, f64) {
    use std::arch::x86_64::*;

    /// # Safety
    /// The CPU must have AVX-512F; `a` holds `KC * MR` floats, `b` `KC *
    /// NR` and `c` `MR * NR`.
    #[target_feature(enable = "avx512f")]
    unsafe fn pass(a: &[f32], b: &[f32], c: &mut [f32]) {
        let mut acc = [[_mm512_setzero_ps(); 2]; MR];
        let (mut pa, mut pb) = (a.as_ptr(), b.as_ptr());
        for _ in 0..KC {
            // SAFETY: KC steps of MR floats of `a` and NR of `b`.
            unsafe {
                let b0 = _mm512_loadu_ps(pb);
                let b1 = _mm512_loadu_ps(pb.add(16));
                for (i, row) in acc.iter_mut().enumerate() {
                    let ai = _mm512_set1_ps(*pa.add(i));
                    row[0] = _mm512_fmadd_ps(ai, b0, row[0]);
                    row[1] = _mm512_fmadd_ps(ai, b1, row[1]);
                }
                pa = pa.add(MR);
                pb = pb.add(NR);
            }
        }
        for (row, out) in acc.iter().zip(c.chunks_exact_mut(NR)) {
            // SAFETY: each chunk of `c` holds NR = 32 floats.
            unsafe {
                let p = out.as_mut_ptr();
                _mm512_storeu_ps(p, _mm512_add_ps(_mm512_loadu_ps(p), row[0]));
                _mm512_storeu_ps(p.add(16), _mm512_add_ps(_mm512_loadu_ps(p.add(16)), row[1]));
            }
        }
    }

    if !is_x86_feature_detected!("avx512f") {
        return (0.0, 0.0);
    }
    let a = vec![0.5f32; KC * MR];
    let b = vec![0.25f32; KC * NR];
    let mut c = vec![0f32; MR * NR];
    for _ in 0..reps {
        // SAFETY: AVX-512F was just detected; the sizes are as required.
        unsafe { pass(&a, &b, &mut c) };
    }
    (c[0], reps as f64 * (2 * KC * MR * NR) as f64)
}

#[cfg(not(target_arch = "x86_64"))]
fn micro_kernel(_reps: u64) -> (f32, f64) {
    (0.0, 0.0)
}

/// The best of five runs of `work` on `threads` threads at once, in
/// GFLOP/s, or `None` where it measured nothing.
fn best_of_five(threads: usize, work: fn() -> (f32, f64)) -> Option<f64> {
    let mut best = f64::MAX;
    let mut flops = 0.0;
    for _ in 0..5 {
        let start = Instant::now();
        let handles: Vec<_> = (0..threads).map(|_| std::thread::spawn(work)).collect();
        let mut check = 0.0;
        flops = 0.0;
        for h in handles {
            let (v, f) = h.join().unwrap_or((0.0, 0.0));
            check += v;
            flops += f;
        }
        best = best.min(start.elapsed().as_secs_f64());
        std::hint::black_box(check);
    }
    (flops > 0.0).then(|| flops / best / 1e9)
}

fn main() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for threads in [1, cores] {
        let Some(peak) = best_of_five(threads, || chains(20_000_000)) else {
            println!("no AVX2/FMA or AVX-512: no vector FMA peak to measure");
            return;
        };
        println!("{threads} thread(s): {peak:.0} GFLOP/s f32 FMA peak");
        if let Some(kernel) = best_of_five(threads, || micro_kernel(200_000)) {
            println!(
                "{threads} thread(s): {kernel:.0} GFLOP/s f32 12x32 micro-kernel in L1 ({:.0}% of the peak)",
                100.0 * kernel / peak
            );
        }
    }
}
