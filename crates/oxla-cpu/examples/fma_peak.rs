//! Measures this machine's f32 FMA peak, the ceiling for matrix products:
//! 16 independent AVX-512 (or AVX2) fused multiply-add chains per thread,
//! on one thread and on every core, best of five runs.
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
        let mut acc = [_mm256_setzero_ps(); 16];
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

    let steps = iters as f64 * 16.0 * 2.0;
    if is_x86_feature_detected!("avx512f") {
        // SAFETY: AVX-512F was just detected.
        (unsafe { avx512(iters) }, steps * 16.0)
    } else if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
        // SAFETY: AVX2 and FMA were just detected.
        (unsafe { avx2(iters) }, steps * 8.0)
    } else {
        (0.0, 0.0)
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn chains(_iters: u64) -> (f32, f64) {
    (0.0, 0.0)
}

fn main() {
    let iters = 20_000_000;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for threads in [1, cores] {
        let mut best = f64::MAX;
        let mut flops = 0.0;
        for _ in 0..5 {
            let start = Instant::now();
            let handles: Vec<_> = (0..threads)
                .map(|_| std::thread::spawn(move || chains(iters)))
                .collect();
            let mut check = 0.0;
            for h in handles {
                let (v, f) = h.join().unwrap_or((0.0, 0.0));
                check += v;
                flops += f;
            }
            best = best.min(start.elapsed().as_secs_f64());
            std::hint::black_box(check);
        }
        if flops == 0.0 {
            println!("no AVX2/FMA or AVX-512: no vector FMA peak to measure");
            return;
        }
        println!(
            "{threads} thread(s): {:.0} GFLOP/s f32 FMA peak",
            flops / 5.0 / best / 1e9
        );
    }
}
