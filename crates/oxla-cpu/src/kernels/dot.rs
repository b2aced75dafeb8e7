//! `dot` with dimension numbers, through the `gemm` crate. Each operand's
//! batch, free and contracting dimensions are merged into one stride each
//! where the layout allows (so transposed operands cost nothing); an operand
//! whose dimensions cannot be merged is first copied into that order. Each
//! batch is one strided matrix product, run on the shared thread pool when
//! it is big enough to pay for it.
//!
//! As in the interpreter (and XLA), operands are converted to the
//! accumulation type first: the result type, or f32 for f16 and bf16
//! results, which are rounded once at the end. Float products go through
//! `gemm`; integer products (int8 quantised matmuls, index arithmetic)
//! through tiles of wrapping multiply-adds held in registers, whose sums do
//! not depend on the order, so they are the interpreter's exactly.

use oxla_hlo::ir::DotDimensionNumbers;
use std::borrow::Cow;

use oxla_hlo::half::{bf16, f16};
use oxla_hlo::{
    ArrayData, ArrayLiteral, ArrayShape, HloComputation, HloInstruction, NativeType, PrimitiveType,
};
use rayon::prelude::*;

use super::Kernel;
use crate::buffer::Pool;
use crate::value::Value;

/// Products with fewer multiply-adds than this run on one thread.
///
/// At this size `gemm`'s own threads gain little: scan_rnn's 64x128x128
/// product of each step, on two threads, leaves the second waiting in the
/// scheduler for a quarter of its samples. Splitting such products (up to
/// 4M multiply-adds) into a band of rows per thread, each band a product of
/// its own on one thread, did not help: scan_rnn took 2.92-3.51 ms against
/// 2.83-3.22 with `gemm`'s threads (alternating runs, AVX2 EPYC, 1 December
/// 2026), nor did splitting them into two halves of columns on the
/// AVX-512 Xeon of 2 December 2026 (2.76-2.89 ms against 2.57-2.68). The
/// serial work between the products (the step's tanh, sum and slices) is
/// what keeps the second thread idle: it sleeps, and waking it costs about
/// what its half of the product saves. On AVX-512 hosts products up to 4M
/// multiply-adds now run on one thread in [`super::sgemm_small`], which
/// skips `gemm`'s packing as well: scan_rnn took 2.17-2.39 ms against
/// 2.43-2.63 (alternating runs; one thread with `gemm` 2.41-2.44).
pub(crate) const PARALLEL_MIN_FLOPS: usize = 1 << 20;

/// Products up to this many multiply-adds run as plain loops.
const TINY_FLOPS: usize = 16 * 16 * 16;

/// One operand's dimensions, grouped.
#[derive(Clone, Debug)]
struct Side {
    dims: Vec<i64>,
    batch: Vec<usize>,
    free: Vec<usize>,
    contracting: Vec<usize>,
}

#[derive(Clone, Debug)]
pub(crate) struct DotKernel {
    /// The result type.
    ty: PrimitiveType,
    /// The type operands are converted to and sums kept in.
    acc: PrimitiveType,
    lhs: Side,
    rhs: Side,
    out_dims: Vec<i64>,
}

/// A dot the kernel handles: complex operands of the result's type; real
/// or half operands of an f16, bf16, f32 or f64 result; integer operands of
/// an integer result.
pub(crate) fn plan(comp: &HloComputation, instr: &HloInstruction) -> Option<DotKernel> {
    use PrimitiveType::*;
    let d: &DotDimensionNumbers = instr.attrs.dot_dnums.as_ref()?;
    let ty = instr.shape.element_type()?;
    let l = comp.instruction(instr.operands[0]).shape.as_array()?;
    let r = comp.instruction(instr.operands[1]).shape.as_array()?;
    let operands = [l.element_type(), r.element_type()];
    let real = |t: PrimitiveType| matches!(t, F16 | BF16 | F32 | F64);
    let acc = match ty {
        C64 | C128 if operands == [ty, ty] => ty,
        F16 | BF16 if operands.into_iter().all(real) => F32,
        F32 | F64 if operands.into_iter().all(real) => ty,
        _ if ty.is_integral() && operands.into_iter().all(|t| t.is_integral()) => ty,
        _ => return None,
    };
    let side = |dims: &[i64], batch: &[i64], contracting: &[i64]| -> Side {
        let batch: Vec<usize> = batch.iter().map(|&b| b as usize).collect();
        let contracting: Vec<usize> = contracting.iter().map(|&c| c as usize).collect();
        let free = (0..dims.len())
            .filter(|i| !batch.contains(i) && !contracting.contains(i))
            .collect();
        Side {
            dims: dims.to_vec(),
            batch,
            free,
            contracting,
        }
    };
    Some(DotKernel {
        ty,
        acc,
        lhs: side(
            l.dims(),
            &d.lhs_batch_dimensions,
            &d.lhs_contracting_dimensions,
        ),
        rhs: side(
            r.dims(),
            &d.rhs_batch_dimensions,
            &d.rhs_contracting_dimensions,
        ),
        out_dims: instr.shape.as_array()?.dims().to_vec(),
    })
}

fn row_major(dims: &[i64]) -> Vec<usize> {
    let mut s = vec![1usize; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1].saturating_mul(dims[i + 1] as usize);
    }
    s
}

/// The number of elements of dimensions `sizes`: zero if one is zero (the
/// others may then multiply past `usize`: an empty operand can have any).
fn count(sizes: impl Iterator<Item = usize> + Clone) -> usize {
    match sizes.clone().any(|d| d == 0) {
        true => 0,
        false => sizes.fold(1, usize::saturating_mul),
    }
}

/// The size and single stride of dimensions `group` taken in order, if
/// they are laid out so that one stride walks them all.
fn merged(dims: &[i64], strides: &[usize], group: &[usize]) -> Option<(usize, usize)> {
    let size = count(group.iter().map(|&d| dims[d] as usize));
    let live: Vec<usize> = group.iter().copied().filter(|&d| dims[d] != 1).collect();
    match live.as_slice() {
        [] => Some((size, 1)),
        [first, rest @ ..] => {
            let mut prev = *first;
            for &d in rest {
                if strides[prev] != strides[d].saturating_mul(dims[d] as usize) {
                    return None;
                }
                prev = d;
            }
            Some((size, strides[prev]))
        }
    }
}

/// A side's operand viewed as batches of (free x contracting) matrices.
struct Matrices<'a, T: Clone> {
    data: std::borrow::Cow<'a, [T]>,
    batch_strides: Vec<usize>,
    batch_dims: Vec<usize>,
    rows: (usize, usize),
    cols: (usize, usize),
}

fn matrices<'a, T: Copy>(side: &Side, data: &'a [T], contracting_first: bool) -> Matrices<'a, T> {
    let strides = row_major(&side.dims);
    let (first, second) = if contracting_first {
        (&side.contracting, &side.free)
    } else {
        (&side.free, &side.contracting)
    };
    if let (Some(r), Some(c)) = (
        merged(&side.dims, &strides, first),
        merged(&side.dims, &strides, second),
    ) {
        return Matrices {
            data: std::borrow::Cow::Borrowed(data),
            batch_strides: side.batch.iter().map(|&b| strides[b]).collect(),
            batch_dims: side.batch.iter().map(|&b| side.dims[b] as usize).collect(),
            rows: r,
            cols: c,
        };
    }
    // Copy into [batch..., first..., second...] so every group merges.
    let order: Vec<usize> = side
        .batch
        .iter()
        .chain(first)
        .chain(second)
        .copied()
        .collect();
    let new_dims: Vec<i64> = order.iter().map(|&d| side.dims[d]).collect();
    let n = count(new_dims.iter().map(|&d| d as usize));
    let mut out = Vec::with_capacity(n);
    let mut index = vec![0usize; order.len()];
    for _ in 0..n {
        let src: usize = order
            .iter()
            .zip(&index)
            .map(|(&d, &i)| i * strides[d])
            .sum();
        out.push(data[src]);
        for k in (0..index.len()).rev() {
            index[k] += 1;
            if index[k] < new_dims[k] as usize {
                break;
            }
            index[k] = 0;
        }
    }
    let new_strides = row_major(&new_dims);
    let nb = side.batch.len();
    let nf = first.len();
    let rows_size = count(new_dims[nb..nb + nf].iter().map(|&d| d as usize));
    let cols_size = count(new_dims[nb + nf..].iter().map(|&d| d as usize));
    Matrices {
        data: std::borrow::Cow::Owned(out),
        batch_strides: new_strides[..nb].to_vec(),
        batch_dims: new_dims[..nb].iter().map(|&d| d as usize).collect(),
        rows: (rows_size, cols_size.max(1)),
        cols: (cols_size, 1),
    }
}

/// Runs an f32 product (`m x k` by `k x n`, operands as (data, row stride,
/// column stride)) into `dst` on one of oxla's own kernels where that is
/// the faster one: small products on AVX-512 hosts unpacked on one thread,
/// large ones on AVX2 hosts without AVX-512. False leaves it to `gemm`.
fn own_sgemm<T: 'static>(
    (m, n, k): (usize, usize, usize),
    (a, ars, acs): (&[T], usize, usize),
    (b, brs, bcs): (&[T], usize, usize),
    dst: &mut [T],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() && dst.len() >= m * n {
        use super::sgemm::{Operand, sgemm};
        let operand = |ptr: *const T, rs: usize, cs: usize| Operand {
            ptr: ptr.cast(),
            rs: rs as isize,
            cs: cs as isize,
        };
        let (a, b) = (operand(a.as_ptr(), ars, acs), operand(b.as_ptr(), brs, bcs));
        let out = dst.as_mut_ptr().cast();
        // SAFETY (both branches): `T` is f32 (checked above), so the casts
        // keep the element type. The elements read, a[i*ars + p*acs] and
        // b[p*brs + j*bcs] for i < m, p < k, j < n, are inside the operands
        // by construction of their strides from the shapes (as for `gemm`);
        // `dst` holds m x n with row stride n and overlaps neither; each
        // kernel's `preferred` checked its features (and the small one the
        // unit column stride of `b`).
        if super::sgemm_small::preferred((m, n, k), bcs) {
            unsafe { super::sgemm_small::product((m, n, k), a, b, out, n) };
            return true;
        }
        if super::sgemm::preferred((m, n, k)) {
            unsafe { sgemm((m, n, k), a, b, out, n, rayon::current_num_threads()) };
            return true;
        }
    }
    let _ = ((m, n, k), (a, ars, acs), (b, brs, bcs), dst);
    false
}

impl DotKernel {
    fn execute<T: oxla_hlo::NativeType + std::ops::Add<Output = T> + std::ops::Mul<Output = T>>(
        &self,
        lhs: &[T],
        rhs: &[T],
        one: T,
        zero: T,
        pool: &Pool,
    ) -> Vec<T> {
        // lhs as (M x K), rhs as (K x N).
        let a = matrices(&self.lhs, lhs, false);
        let b = matrices(&self.rhs, rhs, true);
        let (m, k, n) = (a.rows.0, a.cols.0, b.cols.0);
        let batches: usize = a.batch_dims.iter().product();
        let mut out = pool.take(batches * m * n);
        if m * n == 0 {
            return out;
        }
        if k == 0 {
            // An empty contraction sums nothing.
            out.fill(zero);
            return out;
        }
        let parallelism = if m * n * k >= PARALLEL_MIN_FLOPS {
            gemm::Parallelism::Rayon(rayon::current_num_threads())
        } else {
            gemm::Parallelism::None
        };
        let mut index = vec![0usize; a.batch_dims.len()];
        for batch in 0..batches {
            let a_off: usize = index.iter().zip(&a.batch_strides).map(|(i, s)| i * s).sum();
            let b_off: usize = index.iter().zip(&b.batch_strides).map(|(i, s)| i * s).sum();
            let dst = &mut out[batch * m * n..(batch + 1) * m * n];
            let a_data = &a.data[a_off..];
            let b_data = &b.data[b_off..];
            let tiny = m * n * k <= TINY_FLOPS;
            if !tiny
                && n == 1
                && a.cols.1 == 1
                && b.rows.1 == 1
                && gemv_rows(dst, a_data, a.rows.1, &b_data[..k], zero)
            {
                // A matrix times a vector, rows in parallel.
            } else if !tiny
                && m == 1
                && a.cols.1 == 1
                && b.cols.1 == 1
                && gemv_columns(dst, &a_data[..k], b_data, b.rows.1, zero)
            {
                // A vector times a matrix, columns in parallel.
            } else if tiny {
                // gemm's fixed cost (about 300 ns) outweighs a product this small.
                for i in 0..m {
                    for j in 0..n {
                        let mut acc = zero;
                        for p in 0..k {
                            acc = acc
                                + a.data[a_off + i * a.rows.1 + p * a.cols.1]
                                    * b.data[b_off + p * b.rows.1 + j * b.cols.1];
                        }
                        dst[i * n + j] = acc;
                    }
                }
            } else if own_sgemm(
                (m, n, k),
                (a_data, a.rows.1, a.cols.1),
                (b_data, b.rows.1, b.cols.1),
                dst,
            ) {
                // An f32 product on one of oxla's own kernels.
            } else {
                // SAFETY: `dst` holds m*n elements written with row stride n and
                // column stride 1. The lhs elements read are at a_off + i*rs + p*cs
                // for i < m, p < k, all inside `lhs` by construction of the
                // strides from its shape (the same for rhs); nothing aliases `dst`.
                unsafe {
                    gemm::gemm(
                        m,
                        n,
                        k,
                        dst.as_mut_ptr(),
                        1,
                        n as isize,
                        false,
                        a.data.as_ptr().add(a_off),
                        a.cols.1 as isize,
                        a.rows.1 as isize,
                        b.data.as_ptr().add(b_off),
                        b.cols.1 as isize,
                        b.rows.1 as isize,
                        zero,
                        one,
                        false,
                        false,
                        false,
                        parallelism,
                    );
                }
            }
            for kdim in (0..index.len()).rev() {
                index[kdim] += 1;
                if index[kdim] < a.batch_dims[kdim] {
                    break;
                }
                index[kdim] = 0;
            }
        }
        out
    }
}

/// Lanes of the vector products' partial sums.
const LANES: usize = 16;

/// `dot(a, b)` of two equal-length slices, summed in [`LANES`] interleaved
/// partial sums (which the compiler keeps in vector registers), then those
/// in order.
#[inline(always)]
fn dot_lanes<T: Copy + std::ops::Add<Output = T> + std::ops::Mul<Output = T>>(
    a: &[T],
    b: &[T],
    zero: T,
) -> T {
    let mut acc = [zero; LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..LANES {
            acc[l] = acc[l] + x[l] * y[l];
        }
    }
    let mut sum = acc.into_iter().fold(zero, |s, v| s + v);
    for (&x, &y) in ra.iter().zip(rb) {
        sum = sum + x * y;
    }
    sum
}

/// `out[i] = dot(row i of a, x)`, rows `row_stride` apart: a matrix times a
/// vector, memory-bound, so rows are split across the pool (gemm runs a
/// column vector as a thin product on one thread). Returns false when the
/// rows do not fit `a`.
fn gemv_rows<T: Summable>(out: &mut [T], a: &[T], row_stride: usize, x: &[T], zero: T) -> bool {
    let (m, k) = (out.len(), x.len());
    if m == 0 || (m - 1) * row_stride + k > a.len() {
        return false;
    }
    let rows = |(c, out): (usize, &mut [T])| {
        gemv_block_dispatch(out, a, row_stride, c * GEMV_ROWS, x, zero)
    };
    if m * k >= PARALLEL_MIN_FLOPS {
        out.par_chunks_mut(GEMV_ROWS).enumerate().for_each(rows);
    } else {
        out.chunks_mut(GEMV_ROWS).enumerate().for_each(rows);
    }
    true
}

/// The element types the vector products take.
trait Summable: NativeType + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self> {}
impl<T: NativeType + std::ops::Add<Output = T> + std::ops::Mul<Output = T>> Summable for T {}

/// `out[r] = dot(row first + r of a, x)`, four rows at a time so each
/// load of `x` serves four rows; every row sums in the order of
/// [`dot_lanes`].
fn gemv_block<T: Summable, const WIDE: bool>(
    out: &mut [T],
    a: &[T],
    row_stride: usize,
    first: usize,
    x: &[T],
    zero: T,
) {
    let k = x.len();
    let row = |i: usize| &a[(first + i) * row_stride..(first + i) * row_stride + k];
    let quads = out.len() / 4;
    for q in 0..quads {
        let (r0, r1, r2, r3) = (row(4 * q), row(4 * q + 1), row(4 * q + 2), row(4 * q + 3));
        let mut acc = [[zero; LANES]; 4];
        let chunks = x
            .chunks_exact(LANES)
            .zip(r0.chunks_exact(LANES))
            .zip(r1.chunks_exact(LANES))
            .zip(r2.chunks_exact(LANES))
            .zip(r3.chunks_exact(LANES));
        for ((((xs, c0), c1), c2), c3) in chunks {
            for l in 0..LANES {
                acc[0][l] = acc[0][l] + c0[l] * xs[l];
                acc[1][l] = acc[1][l] + c1[l] * xs[l];
                acc[2][l] = acc[2][l] + c2[l] * xs[l];
                acc[3][l] = acc[3][l] + c3[l] * xs[l];
            }
        }
        let tail = k - k % LANES;
        for (r, (acc, rw)) in acc.iter().zip([r0, r1, r2, r3]).enumerate() {
            let mut sum = acc.iter().fold(zero, |s, &v| s + v);
            for (&v, &xv) in rw[tail..].iter().zip(&x[tail..]) {
                sum = sum + v * xv;
            }
            out[4 * q + r] = sum;
        }
    }
    for (r, o) in out.iter_mut().enumerate().skip(4 * quads) {
        *o = dot_lanes(row(r), x, zero);
    }
}

dispatched!(gemv_block_dispatch<T: Summable> => gemv_block(out: &mut [T], a: &[T], row_stride: usize, first: usize, x: &[T], zero: T));

/// Rows a task of [`gemv_rows`] takes.
const GEMV_ROWS: usize = 64;

/// `out[j] = sum over p of x[p] * b[p * row_stride + j]`: a vector times a
/// matrix, one row of `b` after another added into the sums (in the order
/// of `p`, as the interpreter sums). Memory-bound, so above a size the rows
/// are split into one contiguous band per thread, each streaming its band
/// into its own partial sums, which are then added in band order. Returns
/// false when the rows do not fit `b`.
fn gemv_columns<T: Summable>(out: &mut [T], x: &[T], b: &[T], row_stride: usize, zero: T) -> bool {
    let (n, k) = (out.len(), x.len());
    if n == 0 || k == 0 || (k - 1) * row_stride + n > b.len() {
        return false;
    }
    let band =
        |sums: &mut [T], p0: usize, x: &[T]| gemv_band_dispatch(sums, b, row_stride, p0, x, zero);
    let threads = rayon::current_num_threads();
    if n * k < PARALLEL_MIN_FLOPS || threads < 2 || k < 2 * threads {
        band(out, 0, x);
        return true;
    }
    let per = k.div_ceil(threads);
    let mut partials: Vec<Vec<T>> = (1..threads).map(|_| vec![zero; n]).collect();
    rayon::scope(|s| {
        let (first, rest) = x.split_at(per);
        for (i, sums) in partials.iter_mut().enumerate() {
            let p0 = (i + 1) * per;
            if p0 >= k {
                break;
            }
            let xs = &rest[i * per..((i + 1) * per).min(rest.len())];
            s.spawn(move |_| band(sums, p0, xs));
        }
        band(out, 0, first);
    });
    for (i, sums) in partials.iter().enumerate() {
        if (i + 1) * per >= k {
            break;
        }
        for (o, &v) in out.iter_mut().zip(sums) {
            *o = *o + v;
        }
    }
    true
}

/// Columns of the sums [`gemv_columns`] keeps at a time (16 KiB of f32).
const GEMV_COLUMNS: usize = 4096;

/// Rows `p0..p0 + x.len()` of `b` added into `sums` (`sums[j] = sum over p
/// of x[p] * b[(p0 + p) * row_stride + j]`, in the order of `p`), a tile of
/// [`GEMV_COLUMNS`] columns at a time so the sums stay in L1. Four rows go
/// into each sum while it is in a register, one after another: the same
/// additions in the same order as row by row, with a quarter of the sums'
/// loads and stores.
#[inline(always)]
fn gemv_band<T: Summable, const WIDE: bool>(
    sums: &mut [T],
    b: &[T],
    row_stride: usize,
    p0: usize,
    x: &[T],
    zero: T,
) {
    sums.fill(zero);
    for (t, sums) in sums.chunks_mut(GEMV_COLUMNS).enumerate() {
        let len = sums.len();
        let j0 = p0 * row_stride + t * GEMV_COLUMNS;
        let row = |p: usize| &b[j0 + p * row_stride..j0 + p * row_stride + len];
        let quads = x.len() / 4;
        for q in 0..quads {
            let p = 4 * q;
            let (x0, x1, x2, x3) = (x[p], x[p + 1], x[p + 2], x[p + 3]);
            let (r0, r1, r2, r3) = (row(p), row(p + 1), row(p + 2), row(p + 3));
            for i in 0..len {
                let mut s = sums[i];
                s = s + x0 * r0[i];
                s = s + x1 * r1[i];
                s = s + x2 * r2[i];
                s = s + x3 * r3[i];
                sums[i] = s;
            }
        }
        for (p, &xp) in x.iter().enumerate().skip(4 * quads) {
            for (o, &v) in sums.iter_mut().zip(row(p)) {
                *o = *o + xp * v;
            }
        }
    }
}

dispatched!(gemv_band_dispatch<T: Summable> => gemv_band(sums: &mut [T], b: &[T], row_stride: usize, p0: usize, x: &[T], zero: T));

/// Integers summed with wrapping, as XLA sums them.
pub(super) trait Int: NativeType + Default + Send + Sync {
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// The two's-complement truncation of `v` (XLA's integer conversion).
    fn from_i128(v: i128) -> Self;
}

macro_rules! int {
    ($($t:ty),*) => {$(
        impl Int for $t {
            #[inline(always)]
            fn mul_add(self, a: $t, b: $t) -> $t {
                self.wrapping_add(a.wrapping_mul(b))
            }
            #[inline(always)]
            fn from_i128(v: i128) -> $t {
                v as $t
            }
        }
    )*};
}

int!(i8, i16, i32, i64, u8, u16, u32, u64);

/// An integer operand in type `T` (converted into an array from `pool`,
/// which the caller gives back: fresh memory costs a page fault a page).
pub(super) fn ints_as<'a, T: Int>(data: &'a ArrayData, pool: &Pool) -> Option<Cow<'a, [T]>> {
    if let Some(s) = T::slice(data) {
        return Some(Cow::Borrowed(s));
    }
    let mut out = pool.take::<T>(data.len());
    macro_rules! convert {
        ($($v:ident),*) => {
            match data {
                $(ArrayData::$v(x) => {
                    for (o, &e) in out.iter_mut().zip(x) {
                        *o = T::from_i128(e as i128);
                    }
                })*
                _ => return None,
            }
        };
    }
    convert!(S8, S16, S32, S64, U8, U16, U32, U64);
    Some(Cow::Owned(out))
}

/// A real or half operand in f32 or f64, each element rounded once by
/// `from` (converted into an array from `pool`, as in [`ints_as`]).
pub(super) fn reals_as<'a, T: NativeType + Copy>(
    data: &'a ArrayData,
    from: impl Fn(f64) -> T,
    pool: &Pool,
) -> Option<Cow<'a, [T]>> {
    if let Some(s) = T::slice(data) {
        return Some(Cow::Borrowed(s));
    }
    let mut out = pool.take::<T>(data.len());
    macro_rules! fill {
        ($x:expr, $wide:expr) => {
            for (o, &e) in out.iter_mut().zip($x) {
                *o = from($wide(e));
            }
        };
    }
    match data {
        ArrayData::F16(x) => fill!(x, f16::to_f64),
        // A bf16 is the high half of an f32 (NaN payloads included).
        ArrayData::BF16(x) => fill!(x, |e: bf16| f32::from_bits((e.to_bits() as u32) << 16)
            as f64),
        ArrayData::F32(x) => fill!(x, f64::from),
        ArrayData::F64(x) => fill!(x, std::convert::identity),
        _ => return None,
    }
    Some(Cow::Owned(out))
}

/// `sums` rounded to a half type by `f`, into an array from `pool`.
pub(super) fn rounded<H: NativeType>(sums: &[f32], f: impl Fn(f32) -> H, pool: &Pool) -> Vec<H> {
    let mut out = pool.take::<H>(sums.len());
    for (o, &v) in out.iter_mut().zip(sums) {
        *o = f(v);
    }
    out
}

/// Gives converted operands back to `pool`.
pub(super) fn give_back<T: NativeType>(pool: &Pool, operands: [Cow<'_, [T]>; 2]) {
    for v in operands {
        if let Cow::Owned(v) = v {
            pool.give(v);
        }
    }
}

/// Columns of a packed panel of the right-hand side (four 512-bit
/// registers of 32-bit sums a row), and rows of the left-hand side taken
/// together: 4 x 64 sums stay in registers while the contraction runs.
const PANEL: usize = 64;
const ROWS: usize = 4;

/// `R` rows of `a` from row `i` times one packed panel (`k` rows of
/// `PANEL`), stored into the first `cols` columns of `out` (row stride `n`).
#[inline(always)]
fn int_tile<T: Int, const R: usize>(
    a: &[T],
    (a_row, a_col): (usize, usize),
    i: usize,
    panel: &[T],
    out: &mut [T],
    n: usize,
    cols: usize,
) {
    let mut acc = [[T::default(); PANEL]; R];
    for (p, b) in panel.chunks_exact(PANEL).enumerate() {
        for (r, sums) in acc.iter_mut().enumerate() {
            let x = a[(i + r) * a_row + p * a_col];
            for (s, &y) in sums.iter_mut().zip(b) {
                *s = s.mul_add(x, y);
            }
        }
    }
    for (r, sums) in acc.iter().enumerate() {
        if let Some(row) = out.get_mut(r * n..r * n + cols) {
            row.copy_from_slice(&sums[..cols]);
        }
    }
}

/// Rows `i0..` of `a` (as many as `out` holds, `n` a row) times `b`,
/// packed in panels of `PANEL` columns (`k` rows each, zero past `n`).
/// `V512`: AVX-512 is there (set only after detecting it), so 32-bit
/// tiles take the register kernel.
#[inline(always)]
fn int_rows<T: Int, const V512: bool>(
    a: &[T],
    a_strides: (usize, usize),
    i0: usize,
    panels: &[T],
    (k, n): (usize, usize),
    out: &mut [T],
) {
    let rows = out.len() / n;
    for (q, panel) in panels.chunks_exact(k * PANEL).enumerate() {
        let (j0, cols) = (q * PANEL, (n - q * PANEL).min(PANEL));
        let mut r = 0;
        while r + ROWS <= rows {
            let o = &mut out[r * n + j0..];
            #[cfg(target_arch = "x86_64")]
            if V512 && matches!(T::TYPE, PrimitiveType::S32 | PrimitiveType::U32) {
                let i = i0 + r;
                let (a_row, a_col) = a_strides;
                // The tile's reads of `a` end at its last row's last column.
                let last = (i + ROWS - 1) * a_row + k.saturating_sub(1) * a_col;
                if k > 0 && last < a.len() {
                    let mut sums = [[T::default(); PANEL]; ROWS];
                    // SAFETY: T is a 32-bit integer (wrapping products and
                    // sums are the same bits signed or not); the reads of `a`
                    // are checked just above and the panel holds k rows of
                    // PANEL; AVX-512F is there (`V512`).
                    unsafe {
                        avx512_int::tile(
                            a.as_ptr().add(i * a_row).cast(),
                            a_strides,
                            panel.as_ptr().cast(),
                            k,
                            sums.as_mut_ptr().cast(),
                        )
                    };
                    for (r, s) in sums.iter().enumerate() {
                        if let Some(row) = o.get_mut(r * n..r * n + cols) {
                            row.copy_from_slice(&s[..cols]);
                        }
                    }
                    r += ROWS;
                    continue;
                }
            }
            int_tile::<T, ROWS>(a, a_strides, i0 + r, panel, o, n, cols);
            r += ROWS;
        }
        for r in r..rows {
            let o = &mut out[r * n + j0..];
            int_tile::<T, 1>(a, a_strides, i0 + r, panel, o, n, cols);
        }
    }
}

/// A 4 x 64 tile of 32-bit sums in sixteen registers. (The portable tile
/// keeps its sums in memory: LLVM spills the array each step.)
#[cfg(target_arch = "x86_64")]
mod avx512_int {
    use std::arch::x86_64::*;

    use super::{PANEL, ROWS};

    /// The products of rows `a`, `a + a_row`, ... (column stride `a_col`)
    /// with a panel of `k` rows of `PANEL`, into `out` (ROWS x PANEL).
    ///
    /// # Safety
    /// AVX-512F; every `a + r * a_row + p * a_col` for r < ROWS, p < k is
    /// readable, as are `k * PANEL` words from `panel` and `ROWS * PANEL`
    /// writable words from `out`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn tile(
        a: *const i32,
        (a_row, a_col): (usize, usize),
        panel: *const i32,
        k: usize,
        out: *mut i32,
    ) {
        let mut c = [[_mm512_setzero_si512(); PANEL / 16]; ROWS];
        for p in 0..k {
            // SAFETY: the caller's contract covers every read and write.
            unsafe {
                let b: [__m512i; PANEL / 16] = std::array::from_fn(|q| {
                    _mm512_loadu_si512(panel.add(p * PANEL + 16 * q).cast())
                });
                for (r, sums) in c.iter_mut().enumerate() {
                    let x = _mm512_set1_epi32(*a.add(r * a_row + p * a_col));
                    for (s, &y) in sums.iter_mut().zip(&b) {
                        *s = _mm512_add_epi32(*s, _mm512_mullo_epi32(x, y));
                    }
                }
            }
        }
        for (r, sums) in c.iter().enumerate() {
            for (q, &s) in sums.iter().enumerate() {
                // SAFETY: as above.
                unsafe { _mm512_storeu_si512(out.add(r * PANEL + 16 * q).cast(), s) };
            }
        }
    }
}

// [`int_rows`] compiled for the widest vectors the CPU has.
dispatched!(int_rows_dispatch<T: Int> => int_rows(a: &[T], a_strides: (usize, usize), i0: usize, b: &[T], kn: (usize, usize), out: &mut [T]));

/// `out = a x b` with wrapping sums, `out` row-major (`m` rows of `n`), `a`
/// read at `i * a.1 + p * a.2` and `b` at `p * b.1 + j * b.2` for `i < m`,
/// `p < k`, `j < n`. `b` is packed into panels first; rows of `a` are split
/// across the pool when `parallel`.
pub(super) fn int_product<T: Int>(
    (m, n, k): (usize, usize, usize),
    a: (&[T], usize, usize),
    b: (&[T], usize, usize),
    out: &mut [T],
    parallel: bool,
    pool: &Pool,
) {
    if m * n == 0 {
        return;
    }
    let rows_per_task = if parallel && m * n * k >= PARALLEL_MIN_FLOPS {
        (m.div_ceil(4 * rayon::current_num_threads()).div_ceil(ROWS) * ROWS).max(ROWS)
    } else {
        m
    };
    let width = n.div_ceil(PANEL) * PANEL;
    let mut packed = pool.take::<T>(k * width);
    // Panel q holds columns q * PANEL.., row p after row p - 1.
    for (q, panel) in packed.chunks_mut(k * PANEL).enumerate() {
        for (p, row) in panel.chunks_mut(PANEL).enumerate() {
            for (w, o) in row.iter_mut().enumerate() {
                let j = q * PANEL + w;
                *o = match j < n {
                    true => b.0[p * b.1 + j * b.2],
                    false => T::default(),
                };
            }
        }
    }
    let strides = (a.1, a.2);
    let task = |(t, rows): (usize, &mut [T])| {
        int_rows_dispatch(a.0, strides, t * rows_per_task, &packed, (k, n), rows)
    };
    let out = &mut out[..m * n];
    if rows_per_task < m {
        out.par_chunks_mut(rows_per_task * n)
            .enumerate()
            .for_each(task);
    } else {
        task((0, out));
    }
    pool.give(packed);
}

impl DotKernel {
    /// The integer product, batch by batch (see [`int_product`]).
    fn execute_int<T: Int>(&self, lhs: &[T], rhs: &[T], pool: &Pool) -> Vec<T> {
        let a = matrices(&self.lhs, lhs, false);
        let b = matrices(&self.rhs, rhs, true);
        let (m, k, n) = (a.rows.0, a.cols.0, b.cols.0);
        let batches: usize = a.batch_dims.iter().product();
        let mut out = pool.filled(batches * m * n, T::default());
        if m * n * k == 0 {
            return out;
        }
        let mut index = vec![0usize; a.batch_dims.len()];
        for dst in out.chunks_mut(m * n) {
            let a_off: usize = index.iter().zip(&a.batch_strides).map(|(i, s)| i * s).sum();
            let b_off: usize = index.iter().zip(&b.batch_strides).map(|(i, s)| i * s).sum();
            int_product(
                (m, n, k),
                (&a.data[a_off..], a.rows.1, a.cols.1),
                (&b.data[b_off..], b.rows.1, b.cols.1),
                dst,
                true,
                pool,
            );
            for kdim in (0..index.len()).rev() {
                index[kdim] += 1;
                if index[kdim] < a.batch_dims[kdim] {
                    break;
                }
                index[kdim] = 0;
            }
        }
        out
    }

    fn run_int<T: Int>(&self, l: &ArrayData, r: &ArrayData, pool: &Pool) -> Option<ArrayData> {
        let (a, b) = (ints_as::<T>(l, pool)?, ints_as::<T>(r, pool)?);
        let out = T::wrap(self.execute_int(&a, &b, pool));
        give_back(pool, [a, b]);
        Some(out)
    }
}

impl Kernel for DotKernel {
    fn name(&self) -> &'static str {
        if self.acc.is_integral() {
            "dot (integer)"
        } else {
            "dot (gemm)"
        }
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        let (Some(l), Some(r)) = (
            inputs.first().and_then(Value::array),
            inputs.get(1).and_then(Value::array),
        ) else {
            return Err("a dot reads two arrays".into());
        };
        use PrimitiveType::*;
        let (ld, rd) = (l.data(), r.data());
        let data = match (self.acc, ld, rd) {
            (F32, ..) => {
                let a = reals_as::<f32>(ld, |v| v as f32, pool);
                let b = reals_as::<f32>(rd, |v| v as f32, pool);
                a.zip(b).map(|(a, b)| {
                    let sums = self.execute(&a, &b, 1.0f32, 0.0, pool);
                    give_back(pool, [a, b]);
                    let out = match self.ty {
                        F16 => ArrayData::F16(rounded(&sums, f16::from_f32, pool)),
                        BF16 => ArrayData::BF16(rounded(&sums, bf16::from_f32, pool)),
                        _ => return ArrayData::F32(sums),
                    };
                    pool.give(sums);
                    out
                })
            }
            (F64, ..) => {
                let a = reals_as::<f64>(ld, |v| v, pool);
                let b = reals_as::<f64>(rd, |v| v, pool);
                a.zip(b).map(|(a, b)| {
                    let sums = self.execute(&a, &b, 1.0f64, 0.0, pool);
                    give_back(pool, [a, b]);
                    ArrayData::F64(sums)
                })
            }
            (C64, ArrayData::C64(a), ArrayData::C64(b)) => {
                use oxla_hlo::num_complex::Complex32;
                Some(ArrayData::C64(self.execute(
                    a,
                    b,
                    Complex32::new(1.0, 0.0),
                    Complex32::new(0.0, 0.0),
                    pool,
                )))
            }
            (C128, ArrayData::C128(a), ArrayData::C128(b)) => {
                use oxla_hlo::num_complex::Complex64;
                Some(ArrayData::C128(self.execute(
                    a,
                    b,
                    Complex64::new(1.0, 0.0),
                    Complex64::new(0.0, 0.0),
                    pool,
                )))
            }
            (S8, ..) => self.run_int::<i8>(ld, rd, pool),
            (S16, ..) => self.run_int::<i16>(ld, rd, pool),
            (S32, ..) => self.run_int::<i32>(ld, rd, pool),
            (S64, ..) => self.run_int::<i64>(ld, rd, pool),
            (U8, ..) => self.run_int::<u8>(ld, rd, pool),
            (U16, ..) => self.run_int::<u16>(ld, rd, pool),
            (U32, ..) => self.run_int::<u32>(ld, rd, pool),
            (U64, ..) => self.run_int::<u64>(ld, rd, pool),
            _ => None,
        };
        let Some(data) = data else {
            return Err(format!(
                "dot of {} and {} into {} is not handled natively",
                l.shape(),
                r.shape(),
                self.ty
            ));
        };
        let shape = ArrayShape::new(self.ty, self.out_dims.clone()).map_err(|e| e.to_string())?;
        Ok(Value::owned(
            ArrayLiteral::new(shape, data).map_err(|e| e.to_string())?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_times_matrix_sums_every_row_into_every_column() {
        // Small integers, whose sums are exact in any order, so any
        // misplaced row or column shows; rows in quads and a remainder,
        // columns over more than one tile, a row stride wider than a row.
        for (k, n, stride) in [(1, 1, 1), (7, 4100, 4103), (13, 9, 9), (4, 4096, 4096)] {
            let x: Vec<f32> = (0..k).map(|p| (p % 5) as f32 - 2.0).collect();
            let b: Vec<f32> = (0..k * stride).map(|i| (i % 7) as f32 - 3.0).collect();
            for p0 in [0, k / 2] {
                let xs = &x[p0..];
                let mut out = vec![f32::NAN; n];
                gemv_band_dispatch(&mut out, &b, stride, p0, xs, 0.0);
                for (j, &o) in out.iter().enumerate() {
                    let want: f32 = (0..xs.len())
                        .map(|p| xs[p] * b[(p0 + p) * stride + j])
                        .sum();
                    assert_eq!(o, want, "k {k} n {n} from row {p0}: column {j}");
                }
            }
            let mut out = vec![f32::NAN; n];
            assert!(gemv_columns(&mut out, &x, &b, stride, 0.0));
            for (j, &o) in out.iter().enumerate() {
                let want: f32 = (0..k).map(|p| x[p] * b[p * stride + j]).sum();
                assert_eq!(o, want, "k {k} n {n}: column {j}");
            }
        }
    }
}
