//! Small f32 matrix products on AVX-512, read straight from the operands.
//!
//! `gemm` packs both operands into panels before its micro-kernel runs, and
//! on two threads wakes the second for its share. For a product whose right
//! operand stays in L1 or L2 (scan_rnn's step multiplies a 64 x 128 state by
//! a 128 x 128 weight, 64 KiB), neither pays: the packing and the hand-over
//! cost as much as they save. This kernel keeps a 6 x 64 block of the result
//! in 24 registers and runs down the contraction; each step loads four
//! vectors of a row of the right operand (unit column stride, any row
//! stride), broadcasts six elements of the left (any strides), and does 24
//! fused multiply-adds. Blocks of columns are the outer loop, so one block
//! of the right operand (k rows of 64 floats) is reused from cache by every
//! block of rows.

use std::arch::x86_64::*;

pub(crate) use super::sgemm::Operand;

/// Rows of the register tile.
const MR: usize = 6;
/// Vectors of 16 floats per row of the register tile.
const NV: usize = 4;
/// Columns of the register tile.
const NR: usize = NV * 16;

/// Products with more multiply-adds than this go to `gemm` and its threads.
const MAX_FLOPS: usize = 1 << 22;

/// Whether an `m x k` by `k x n` product whose right operand has column
/// stride `b_cs` should run here: AVX-512 present, unit column stride on
/// the right, and small enough that one thread without packing wins.
pub(crate) fn preferred((m, n, k): (usize, usize, usize), b_cs: usize) -> bool {
    b_cs == 1 && m.saturating_mul(n).saturating_mul(k) <= MAX_FLOPS && available()
}

/// Whether this host has the instructions [`product`] needs.
pub(crate) fn available() -> bool {
    is_x86_feature_detected!("avx512f")
}

/// `dst = a * b` for an `m x k` times `k x n` product into `dst` with row
/// stride `ldd` and unit column stride, on the calling thread.
///
/// # Safety
/// [`available`] must hold and `b.cs` must be 1; every element of `a`, `b`
/// and `dst` addressed by the shapes and strides must be in bounds of live
/// buffers, and `dst` must overlap neither operand.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn product(
    (m, n, k): (usize, usize, usize),
    a: Operand,
    b: Operand,
    dst: *mut f32,
    ldd: usize,
) {
    debug_assert_eq!(b.cs, 1);
    for j in (0..n).step_by(NR) {
        let cols = NR.min(n - j);
        // SAFETY: columns j..j+cols of `b` and `dst` are in bounds.
        let (bj, dj) = unsafe { (b.ptr.add(j), dst.add(j)) };
        let vectors = cols.div_ceil(16);
        let last = cols - (vectors - 1) * 16;
        let mask: __mmask16 = if last == 16 { !0 } else { (1u16 << last) - 1 };
        let mut i = 0;
        while i < m {
            let rows = MR.min(m - i);
            // SAFETY: rows i..i+rows of `a` and `dst` are in bounds; each
            // tile reads `vectors` vectors of a row of `b`, the last masked
            // to the `cols` live columns.
            unsafe {
                let ai = a.ptr.offset(i as isize * a.rs);
                let di = dj.add(i * ldd);
                let t = Tile {
                    k,
                    a: ai,
                    a_rs: a.rs,
                    a_cs: a.cs,
                    b: bj,
                    b_rs: b.rs,
                    dst: di,
                    ldd,
                    mask,
                };
                match (rows, vectors) {
                    (6, 4) => t.run::<6, 4>(),
                    (6, 3) => t.run::<6, 3>(),
                    (6, 2) => t.run::<6, 2>(),
                    (6, _) => t.run::<6, 1>(),
                    (5, 4) => t.run::<5, 4>(),
                    (5, 3) => t.run::<5, 3>(),
                    (5, 2) => t.run::<5, 2>(),
                    (5, _) => t.run::<5, 1>(),
                    (4, 4) => t.run::<4, 4>(),
                    (4, 3) => t.run::<4, 3>(),
                    (4, 2) => t.run::<4, 2>(),
                    (4, _) => t.run::<4, 1>(),
                    (3, 4) => t.run::<3, 4>(),
                    (3, 3) => t.run::<3, 3>(),
                    (3, 2) => t.run::<3, 2>(),
                    (3, _) => t.run::<3, 1>(),
                    (2, 4) => t.run::<2, 4>(),
                    (2, 3) => t.run::<2, 3>(),
                    (2, 2) => t.run::<2, 2>(),
                    (2, _) => t.run::<2, 1>(),
                    (_, 4) => t.run::<1, 4>(),
                    (_, 3) => t.run::<1, 3>(),
                    (_, 2) => t.run::<1, 2>(),
                    (_, _) => t.run::<1, 1>(),
                }
            }
            i += rows;
        }
    }
}

/// One register tile: `R` rows of the result by `V` vectors of columns,
/// the last vector's live columns in `mask`.
struct Tile {
    k: usize,
    a: *const f32,
    a_rs: isize,
    a_cs: isize,
    b: *const f32,
    b_rs: isize,
    dst: *mut f32,
    ldd: usize,
    mask: __mmask16,
}

impl Tile {
    /// # Safety
    /// AVX-512F; rows `0..R` of `a` (each `k` elements at stride `a_cs`),
    /// `k` rows of `V` vectors of `b` (the last masked) and the `R x V`
    /// block of `dst` are in bounds.
    #[inline(always)]
    unsafe fn run<const R: usize, const V: usize>(&self) {
        // SAFETY (whole body): AVX-512F is enabled in the caller; every
        // pointer stays inside the block the contract names.
        unsafe {
            let mut acc = [[_mm512_setzero_ps(); V]; R];
            let mut rows = [self.a; R];
            for (r, p) in rows.iter_mut().enumerate() {
                *p = self.a.offset(r as isize * self.a_rs);
            }
            let mut bp = self.b;
            for _ in 0..self.k {
                let mut bv = [_mm512_setzero_ps(); V];
                for (v, x) in bv.iter_mut().enumerate() {
                    *x = if v + 1 == V {
                        _mm512_maskz_loadu_ps(self.mask, bp.add(v * 16))
                    } else {
                        _mm512_loadu_ps(bp.add(v * 16))
                    };
                }
                for r in 0..R {
                    let x = _mm512_set1_ps(*rows[r]);
                    for v in 0..V {
                        acc[r][v] = _mm512_fmadd_ps(x, bv[v], acc[r][v]);
                    }
                    rows[r] = rows[r].offset(self.a_cs);
                }
                bp = bp.offset(self.b_rs);
            }
            for (r, row) in acc.iter().enumerate() {
                let d = self.dst.add(r * self.ldd);
                for (v, x) in row.iter().enumerate() {
                    if v + 1 == V {
                        _mm512_mask_storeu_ps(d.add(v * 16), self.mask, *x);
                    } else {
                        _mm512_storeu_ps(d.add(v * 16), *x);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The product of row-major `a` (m x k, read with the given strides)
    /// and `b` (k x n), summed in f64 so every f32 product is exact.
    fn reference(
        (m, n, k): (usize, usize, usize),
        a: &[f32],
        (ars, acs): (usize, usize),
        b: &[f32],
        brs: usize,
    ) -> Vec<f64> {
        let mut out = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                out[i * n + j] = (0..k)
                    .map(|p| f64::from(a[i * ars + p * acs]) * f64::from(b[p * brs + j]))
                    .sum();
            }
        }
        out
    }

    #[test]
    fn every_remainder_of_rows_and_columns_matches_a_plain_product() {
        if !available() {
            return;
        }
        // Small integers: every product and partial sum is exact in f32.
        let value = |x: usize| ((x * 7919) % 13) as f32 - 6.0;
        for &(m, n, k) in &[
            (1, 1, 1),
            (6, 64, 8),
            (7, 65, 3),
            (13, 17, 5),
            (64, 128, 128),
            (5, 200, 9),
            (12, 48, 1),
            (3, 33, 40),
        ] {
            // `a` is stored transposed (k x m) to exercise strides; `b` has
            // a row stride wider than n.
            let brs = n + 3;
            let a: Vec<f32> = (0..m * k).map(value).collect();
            let b: Vec<f32> = (0..k * brs).map(|x| value(x + 5)).collect();
            for (ars, acs) in [(k, 1), (1, m)] {
                let mut dst = vec![f32::NAN; m * n + 1];
                // SAFETY: the features were checked; the operands hold m x k
                // and k x brs elements as addressed, `dst` m x n plus one
                // guard element.
                unsafe {
                    product(
                        (m, n, k),
                        Operand {
                            ptr: a.as_ptr(),
                            rs: ars as isize,
                            cs: acs as isize,
                        },
                        Operand {
                            ptr: b.as_ptr(),
                            rs: brs as isize,
                            cs: 1,
                        },
                        dst.as_mut_ptr(),
                        n,
                    );
                }
                let want = reference((m, n, k), &a, (ars, acs), &b, brs);
                for (idx, (&got, &w)) in dst.iter().zip(&want).enumerate() {
                    assert_eq!(f64::from(got), w, "({m},{n},{k}) at {idx}");
                }
                assert!(dst[m * n].is_nan(), "({m},{n},{k}) wrote past the result");
            }
        }
    }
}
