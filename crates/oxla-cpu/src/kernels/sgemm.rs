//! f32 matrix products on AVX2 + FMA hosts without AVX-512.
//!
//! There, `gemm`'s kernels reached about 1.4x of one thread's speed on two
//! threads and lost most of that to memory on large products. This one splits
//! the longer side of the result into one part per thread, and each part is a
//! whole product with no barriers. Per part, the classic blocking: a `KC x NC`
//! block of the right operand packed into `NR`-wide panels, an `MC x KC` block
//! of the left packed into `MR`-tall panels, and a 6 x 16 register tile that
//! runs down each pair of panels. Small products stay with `gemm`, whose
//! shared packing wins there.

use std::arch::x86_64::*;

use rayon::prelude::*;

const MR: usize = 6;
const NR: usize = 16;
// A long contraction block halves the register tile's start and end (zeroing,
// prefetching and the final read-modify-write of the result) per product
// against 256 steps; a short row block keeps the packed left block (72 x 512
// floats, 144 KiB) in L2 as before. Measured against KC = 256, MC = 144 on
// the AVX2 EPYC: 3% faster at 1024^3 and 2048^3, on one thread and on two.
const KC: usize = 512;
const MC: usize = 72;
const NC: usize = 2048;

/// Products with fewer multiply-adds than this stay with `gemm`.
const MIN_FLOPS: usize = 1 << 29;

/// A strided matrix operand: element `(i, j)` is at `ptr + i*rs + j*cs`.
#[derive(Clone, Copy)]
pub(crate) struct Operand {
    pub(crate) ptr: *const f32,
    pub(crate) rs: isize,
    pub(crate) cs: isize,
}

/// The result's base pointer, handed to the threads that write disjoint parts.
#[derive(Clone, Copy)]
struct SendPtr(*mut f32);
// SAFETY: each thread writes its own rows or columns of the result.
unsafe impl Send for SendPtr {}
// SAFETY: as above.
unsafe impl Sync for SendPtr {}

/// An operand shared by the threads, which only read it.
#[derive(Clone, Copy)]
struct SendOp(Operand);
// SAFETY: operands are only read while the product runs.
unsafe impl Send for SendOp {}
// SAFETY: as above.
unsafe impl Sync for SendOp {}

/// Whether this host has the instructions [`sgemm`] needs.
pub(crate) fn available() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
}

/// Whether an `m x k` by `k x n` product should run here rather than in
/// `gemm`: AVX2 and FMA without AVX-512 (where `gemm`'s own kernels are
/// fast), and large enough that per-thread packing pays.
pub(crate) fn preferred((m, n, k): (usize, usize, usize)) -> bool {
    m.saturating_mul(n).saturating_mul(k) >= MIN_FLOPS
        && !is_x86_feature_detected!("avx512f")
        && available()
}

/// `dst = a * b` for an `m x k` times `k x n` product into `dst` with row
/// stride `ldd` and unit column stride, on `threads` threads.
///
/// # Safety
/// [`available`] must hold; every element of `a`, `b` and `dst` addressed by
/// the shapes and strides must be in bounds of live buffers, and `dst` must
/// overlap neither operand.
pub(crate) unsafe fn sgemm(
    (m, n, k): (usize, usize, usize),
    a: Operand,
    b: Operand,
    dst: *mut f32,
    ldd: usize,
    threads: usize,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        for i in 0..m {
            // SAFETY: row i of `dst`, n floats, in bounds by the contract.
            unsafe { std::ptr::write_bytes(dst.add(i * ldd), 0, n) };
        }
        return;
    }
    let threads = threads.max(1);
    if threads == 1 {
        // SAFETY: the caller's contract.
        unsafe { serial((m, n, k), a, b, dst, ldd) };
        return;
    }
    // Split the longer side of the result into one part per thread, whole
    // panels each, every part a product of its own: no barriers.
    let (units, unit) = if n >= m {
        (n.div_ceil(NR), NR)
    } else {
        (m.div_ceil(MR), MR)
    };
    let t = threads.min(units);
    let parts: Vec<(usize, usize)> = (0..t)
        .map(|s| ((units * s / t) * unit, ((units * (s + 1) / t) * unit)))
        .collect();
    let (dst, a, b) = (SendPtr(dst), SendOp(a), SendOp(b));
    parts.into_par_iter().for_each(|(lo, hi)| {
        let (dst, SendOp(a), SendOp(b)) = (dst, a, b);
        // SAFETY: each part reads rows `lo..hi` of `a` (or columns of `b`)
        // and writes only the same rows (columns) of `dst`, all in bounds by
        // the caller's contract; the parts are disjoint.
        unsafe {
            if n >= m {
                let hi = hi.min(n);
                let b = Operand {
                    ptr: b.ptr.offset(lo as isize * b.cs),
                    ..b
                };
                serial((m, hi - lo, k), a, b, dst.0.add(lo), ldd);
            } else {
                let hi = hi.min(m);
                let a = Operand {
                    ptr: a.ptr.offset(lo as isize * a.rs),
                    ..a
                };
                serial((hi - lo, n, k), a, b, dst.0.add(lo * ldd), ldd);
            }
        }
    });
}

thread_local! {
    /// Each thread's packing buffers, kept across calls so that a product
    /// touches no fresh pages after the first.
    static PACKS: std::cell::RefCell<(Vec<f32>, Vec<f32>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// [`sgemm`] on the calling thread.
///
/// # Safety
/// As for [`sgemm`].
unsafe fn serial(
    (m, n, k): (usize, usize, usize),
    a: Operand,
    b: Operand,
    dst: *mut f32,
    ldd: usize,
) {
    PACKS.with(|packs| {
        // Nothing here re-enters, but a busy cell only costs fresh buffers.
        let mut own = (Vec::new(), Vec::new());
        let mut held = packs.try_borrow_mut();
        let (apack, bpack) = match held.as_deref_mut() {
            Ok(packs) => (&mut packs.0, &mut packs.1),
            Err(_) => (&mut own.0, &mut own.1),
        };
        // Even blocks, so that no thin remainder block pays a whole pass.
        let mc = m.div_ceil(m.div_ceil(MC)).div_ceil(MR) * MR;
        let kc_even = k.div_ceil(k.div_ceil(KC));
        let need_b = kc_even * NC.min(n.div_ceil(NR) * NR);
        if bpack.len() < need_b {
            bpack.resize(need_b, 0.0);
        }
        if apack.len() < mc * kc_even {
            apack.resize(mc * kc_even, 0.0);
        }
        for jc in (0..n).step_by(NC) {
            let nc = NC.min(n - jc);
            let panels = nc.div_ceil(NR);
            for pc in (0..k).step_by(kc_even) {
                let kc = kc_even.min(k - pc);
                let bp = &mut bpack[..panels * NR * kc];
                for (j, panel) in bp.chunks_exact_mut(NR * kc).enumerate() {
                    // SAFETY: rows pc..pc+kc and live columns of `b`.
                    unsafe { pack_rhs(panel, b, pc, kc, jc + j * NR, NR.min(nc - j * NR)) };
                }
                for ic in (0..m).step_by(mc) {
                    let rows = mc.min(m - ic);
                    let ap = &mut apack[..rows.div_ceil(MR) * MR * kc];
                    // SAFETY: live rows ic.. and columns pc..pc+kc of `a`;
                    // the block of `dst` at (ic, jc) is rows x nc, in bounds;
                    // `sgemm`'s caller checked the features.
                    unsafe {
                        pack_lhs(ap, a, ic, rows, pc, kc);
                        let d = dst.add(ic * ldd + jc);
                        macro_kernel(ap, bp, rows, nc, kc, d, ldd, pc == 0);
                    }
                }
            }
        }
    });
}

/// Packs rows `pc..pc+kc` and columns `j0..j0+cols` of `b` into one panel of
/// `kc` rows of `NR` floats, zero past `cols`.
///
/// # Safety
/// Those elements of `b` must be in bounds; `panel` holds `kc * NR` floats.
unsafe fn pack_rhs(panel: &mut [f32], b: Operand, pc: usize, kc: usize, j0: usize, cols: usize) {
    for (p, row) in panel.chunks_exact_mut(NR).take(kc).enumerate() {
        let base = (pc + p) as isize * b.rs + j0 as isize * b.cs;
        if b.cs == 1 && cols == NR {
            // SAFETY: the caller's bounds, a contiguous run of NR columns.
            row.copy_from_slice(unsafe { std::slice::from_raw_parts(b.ptr.offset(base), NR) });
        } else {
            for (l, v) in row.iter_mut().enumerate() {
                // SAFETY: the caller's bounds for the live columns.
                *v = if l < cols {
                    unsafe { *b.ptr.offset(base + l as isize * b.cs) }
                } else {
                    0.0
                };
            }
        }
    }
}

/// Packs rows `ic..ic+rows` and columns `pc..pc+kc` of `a` into `MR`-tall
/// panels of `kc` columns, zero past `rows`.
///
/// # Safety
/// Those elements of `a` must be in bounds; `apack` holds whole panels for
/// `rows` rows.
unsafe fn pack_lhs(apack: &mut [f32], a: Operand, ic: usize, rows: usize, pc: usize, kc: usize) {
    for (i, panel) in apack.chunks_exact_mut(MR * kc).enumerate() {
        let live = MR.min(rows - i * MR);
        let at = |r: usize| (ic + i * MR + r) as isize * a.rs + pc as isize * a.cs;
        let steps = panel.chunks_exact_mut(MR);
        if live == MR && a.cs == 1 {
            // Six rows, each read along its length.
            // SAFETY: the caller's bounds: kc columns of six live rows.
            let src: [&[f32]; MR] = std::array::from_fn(|r| unsafe {
                std::slice::from_raw_parts(a.ptr.offset(at(r)), kc)
            });
            for (p, step) in steps.enumerate() {
                for (v, row) in step.iter_mut().zip(&src) {
                    *v = row[p];
                }
            }
        } else if live == MR && a.rs == 1 {
            // A column-major block: each step's six values are adjacent.
            for (p, step) in steps.enumerate() {
                // SAFETY: the caller's bounds: six live rows of column pc+p.
                let col = unsafe {
                    std::slice::from_raw_parts(a.ptr.offset(at(0) + p as isize * a.cs), MR)
                };
                step.copy_from_slice(col);
            }
        } else {
            for (p, step) in steps.enumerate() {
                for (r, v) in step.iter_mut().enumerate() {
                    *v = if r < live {
                        // SAFETY: the caller's bounds for live rows.
                        unsafe { *a.ptr.offset(at(r) + p as isize * a.cs) }
                    } else {
                        0.0
                    };
                }
            }
        }
    }
}

/// Every register tile of one packed left block (`rows` rows) against the
/// packed right panels, into `dst` (row stride `ldd`): `first` stores, later
/// blocks of the contraction add.
///
/// # Safety
/// [`available`] must hold; `dst` must address `rows x nc` writable floats
/// and the packs must be whole panels of `kc` steps.
#[allow(clippy::too_many_arguments)]
unsafe fn macro_kernel(
    apack: &[f32],
    bpack: &[f32],
    rows: usize,
    nc: usize,
    kc: usize,
    dst: *mut f32,
    ldd: usize,
    first: bool,
) {
    for (jp, bp) in bpack.chunks_exact(NR * kc).enumerate() {
        let cols = NR.min(nc - jp * NR);
        for (ip, ap) in apack.chunks_exact(MR * kc).enumerate() {
            let live = MR.min(rows - ip * MR);
            // SAFETY: the tile's first element is inside `dst`'s rows x nc.
            let c = unsafe { dst.add(ip * MR * ldd + jp * NR) };
            if live == MR && cols == NR {
                // SAFETY: a whole tile of `dst`, whole panels, the features.
                unsafe { kernel(kc, ap.as_ptr(), bp.as_ptr(), c, ldd, first) };
                continue;
            }
            // A partial tile runs in a local one and copies its live part.
            let mut tile = [0f32; MR * NR];
            for r in 0..live {
                for l in 0..cols {
                    // SAFETY: live rows and columns of the tile in `dst`.
                    tile[r * NR + l] = if first {
                        0.0
                    } else {
                        unsafe { *c.add(r * ldd + l) }
                    };
                }
            }
            // SAFETY: the local tile is whole; the features.
            unsafe { kernel(kc, ap.as_ptr(), bp.as_ptr(), tile.as_mut_ptr(), NR, first) };
            for r in 0..live {
                for l in 0..cols {
                    // SAFETY: as above.
                    unsafe { *c.add(r * ldd + l) = tile[r * NR + l] };
                }
            }
        }
    }
}

/// One 6 x 16 register tile over `kc` steps of a packed left panel (6 floats
/// a step) and a packed right one (16 a step): `c = a * b` when `first`,
/// else `c += a * b`, with `c`'s rows `ldc` apart.
///
/// # Safety
/// The CPU must have AVX2 and FMA; the panels must hold `kc` steps and `c`
/// a writable 6 x 16 tile.
#[target_feature(enable = "avx2,fma")]
unsafe fn kernel(kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, first: bool) {
    let mut c00 = _mm256_setzero_ps();
    let mut c01 = _mm256_setzero_ps();
    let mut c10 = _mm256_setzero_ps();
    let mut c11 = _mm256_setzero_ps();
    let mut c20 = _mm256_setzero_ps();
    let mut c21 = _mm256_setzero_ps();
    let mut c30 = _mm256_setzero_ps();
    let mut c31 = _mm256_setzero_ps();
    let mut c40 = _mm256_setzero_ps();
    let mut c41 = _mm256_setzero_ps();
    let mut c50 = _mm256_setzero_ps();
    let mut c51 = _mm256_setzero_ps();
    // SAFETY: every address below is inside the panels or the tile.
    unsafe {
        if !first {
            // The tile's rows are far apart in memory: fetch them while the
            // products run, so the final read-modify-write finds them cached.
            for r in 0..MR {
                _mm_prefetch::<_MM_HINT_T0>(c.add(r * ldc) as *const i8);
                _mm_prefetch::<_MM_HINT_T0>(c.add(r * ldc + NR - 1) as *const i8);
            }
        }
        let (mut a, mut b) = (a, b);
        for _ in 0..kc {
            let b0 = _mm256_loadu_ps(b);
            let b1 = _mm256_loadu_ps(b.add(8));
            let x = _mm256_broadcast_ss(&*a);
            c00 = _mm256_fmadd_ps(x, b0, c00);
            c01 = _mm256_fmadd_ps(x, b1, c01);
            let x = _mm256_broadcast_ss(&*a.add(1));
            c10 = _mm256_fmadd_ps(x, b0, c10);
            c11 = _mm256_fmadd_ps(x, b1, c11);
            let x = _mm256_broadcast_ss(&*a.add(2));
            c20 = _mm256_fmadd_ps(x, b0, c20);
            c21 = _mm256_fmadd_ps(x, b1, c21);
            let x = _mm256_broadcast_ss(&*a.add(3));
            c30 = _mm256_fmadd_ps(x, b0, c30);
            c31 = _mm256_fmadd_ps(x, b1, c31);
            let x = _mm256_broadcast_ss(&*a.add(4));
            c40 = _mm256_fmadd_ps(x, b0, c40);
            c41 = _mm256_fmadd_ps(x, b1, c41);
            let x = _mm256_broadcast_ss(&*a.add(5));
            c50 = _mm256_fmadd_ps(x, b0, c50);
            c51 = _mm256_fmadd_ps(x, b1, c51);
            a = a.add(MR);
            b = b.add(NR);
        }
        let rows = [
            (c00, c01),
            (c10, c11),
            (c20, c21),
            (c30, c31),
            (c40, c41),
            (c50, c51),
        ];
        for (r, (lo, hi)) in rows.into_iter().enumerate() {
            let p = c.add(r * ldc);
            if first {
                _mm256_storeu_ps(p, lo);
                _mm256_storeu_ps(p.add(8), hi);
            } else {
                _mm256_storeu_ps(p, _mm256_add_ps(_mm256_loadu_ps(p), lo));
                _mm256_storeu_ps(p.add(8), _mm256_add_ps(_mm256_loadu_ps(p.add(8)), hi));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small integers, whose products and sums are exact in f32 in any
    /// order, so any misplaced row, column or contraction step shows.
    fn ints(len: usize, seed: usize) -> Vec<f32> {
        (0..len)
            .map(|i| ((i * 7 + seed * 13) % 7) as f32 - 3.0)
            .collect()
    }

    /// `a` (m x k) times `b` (k x n) through [`sgemm`] with either operand
    /// stored transposed, into rows 3 floats wider than the result, checked
    /// exactly against integer sums; the padding must stay untouched.
    fn check(
        (m, n, k): (usize, usize, usize),
        (at, bt): (bool, bool),
        threads: usize,
        a: &[f32],
        b: &[f32],
    ) -> Vec<f32> {
        let (ars, acs) = if at { (1, m) } else { (k, 1) };
        let (brs, bcs) = if bt { (1, k) } else { (n, 1) };
        let ldd = n + 3;
        let mut out = vec![f32::NAN; m * ldd];
        let op = |v: &[f32], rs: usize, cs: usize| Operand {
            ptr: v.as_ptr(),
            rs: rs as isize,
            cs: cs as isize,
        };
        // SAFETY: the strides address exactly the m x k and k x n elements
        // of `a` and `b`; `out` holds m rows of ldd >= n floats.
        unsafe {
            sgemm(
                (m, n, k),
                op(a, ars, acs),
                op(b, brs, bcs),
                out.as_mut_ptr(),
                ldd,
                threads,
            )
        };
        for i in 0..m {
            for j in 0..n {
                let want: f64 = (0..k)
                    .map(|p| a[i * ars + p * acs] as f64 * b[p * brs + j * bcs] as f64)
                    .sum();
                let got = out[i * ldd + j];
                assert!(
                    got == want as f32 || (got.is_nan() && want.is_nan()),
                    "({m}, {n}, {k}) transposed {at}/{bt} on {threads} threads: \
                     [{i}, {j}] is {got}, want {want}"
                );
            }
            assert!(
                out[i * ldd + n..(i + 1) * ldd].iter().all(|v| v.is_nan()),
                "row {i} padding"
            );
        }
        out
    }

    #[test]
    fn products_of_every_shape_and_layout_are_exact() {
        if !available() {
            return;
        }
        // Test set-up, not user input: building a two-thread pool fails only
        // if the OS cannot start threads, and then no test can run.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .expect("a two-thread pool for the test");
        pool.install(|| {
            // Partial tiles on both sides, several contraction blocks with
            // even splits (513, 700, 1100), more rows than a row block (150, 300),
            // more columns than a column block (2100), an empty contraction.
            for shape in [
                (1, 1, 1),
                (7, 17, 3),
                (6, 16, 256),
                (13, 33, 1100),
                (150, 37, 513),
                (300, 290, 700),
                (5, 2100, 20),
                (4, 5, 0),
            ] {
                let (m, n, k) = shape;
                let (a, b) = (ints(m * k, 1), ints(k * n, 2));
                for layout in [(false, false), (true, false), (false, true), (true, true)] {
                    for threads in [1, 2, 3] {
                        check(shape, layout, threads, &a, &b);
                    }
                }
            }
        });
    }

    #[test]
    fn non_finite_values_reach_their_own_row_and_column() {
        if !available() {
            return;
        }
        let (m, n, k) = (20, 40, 300);
        let mut a = ints(m * k, 3);
        let mut b = ints(k * n, 4);
        a[7 * k + 299] = f32::NAN; // row 7, last contraction block
        b[5 * n + 33] = f32::INFINITY; // column 33, first block
        let out = check((m, n, k), (false, false), 2, &a, &b);
        let ldd = n + 3;
        assert!((0..n).all(|j| out[7 * ldd + j].is_nan()));
        assert!(out[ldd + 33].is_infinite());
        assert!(out[3 * ldd + 32].is_finite());
    }
}
