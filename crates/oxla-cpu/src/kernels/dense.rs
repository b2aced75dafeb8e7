//! Dense factorisations and triangular solves on row-major real matrices,
//! recursive so that almost all of their work is matrix products through
//! `gemm` (the kernels of the LAPACK custom calls, see `lapack.rs`).
//!
//! A matrix here is a slice and a row stride `ld` (columns are contiguous);
//! a block of it is named by its first row and column. Every routine
//! splits its problem in halves, solves the first, updates the rest with
//! one product, and solves that; below [`BASE`] rows or columns it runs the
//! textbook loop, whose inner loops run along rows.

use std::ops::{Add, Div, Mul, Neg, Sub};

/// Below this size a routine runs its unblocked loop.
const BASE: usize = 16;

/// From this many multiply-adds a product runs on every thread.
///
/// The factorisations alternate serial panel steps with these trailing
/// products, so the other threads fall asleep in between and each parallel
/// product first pays to wake them (tens of microseconds under this
/// hypervisor), and `gemm` joins them again per block of the depth. At 2^20
/// that lost to one thread: on the Xeon of 27 November 2026, qr_512 ran in
/// 7.4 ms on two threads and 5.9 ms on one. From 2^25 (about 0.3 ms of one
/// core's work) the products gain; alternating thresholds
/// (`oxla bench bench/workloads/W.hlo`, median of 50-200 runs): qr_512
/// 7.4 -> 6.0 ms, solve_1024 9.9 -> 8.8 ms, cholesky_1024 11.6 -> 10.8 ms,
/// inv_512 4.6 -> 4.4 ms, eigh_256 3.5 -> 3.0 ms; eigh_1024 82-95 ms
/// either way.
const PARALLEL_MIN_FLOPS: usize = 1 << 25;

thread_local! {
    /// Set while a thread solves its own columns of a split solve (see
    /// [`solve_left`]): its products then stay on it, the other threads
    /// being busy with their own columns.
    static SERIAL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A solve splits its right-hand side between threads only if each gets
/// at least this many columns.
const SPLIT_MIN_COLS: usize = 64;

/// f32 or f64.
pub(crate) trait Real:
    Copy
    + Send
    + Sync
    + PartialOrd
    + Default
    + 'static
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    const EPSILON: Self;
    fn abs(self) -> Self;
    fn sqrt(self) -> Self;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
    /// `sqrt(a^2 + b^2)` without overflow or underflow in between.
    fn hypot(a: Self, b: Self) -> Self;
}

impl Real for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    const EPSILON: f32 = f32::EPSILON;
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
    fn hypot(a: f32, b: f32) -> f32 {
        // Exact enough in f64, whose range holds the squares.
        let (a, b) = (a as f64, b as f64);
        (a * a + b * b).sqrt() as f32
    }
    fn abs(self) -> f32 {
        f32::abs(self)
    }
    fn sqrt(self) -> f32 {
        f32::sqrt(self)
    }
}

impl Real for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    const EPSILON: f64 = f64::EPSILON;
    fn to_f64(self) -> f64 {
        self
    }
    fn from_f64(v: f64) -> f64 {
        v
    }
    fn hypot(a: f64, b: f64) -> f64 {
        let (a, b) = (a.abs(), b.abs());
        let (big, small) = if a >= b { (a, b) } else { (b, a) };
        if big == 0.0 || big.is_infinite() || small.is_nan() {
            return big + small;
        }
        let r = small / big;
        big * (1.0 + r * r).sqrt()
    }
    fn abs(self) -> f64 {
        f64::abs(self)
    }
    fn sqrt(self) -> f64 {
        f64::sqrt(self)
    }
}

/// `dst = lhs * rhs`, or `dst -= lhs * rhs` with `subtract` (`m x n`,
/// row stride `ldd`), operands given by (row stride, column stride); on
/// every thread from [`PARALLEL_MIN_FLOPS`] multiply-adds.
///
/// # Safety
/// Every element of the three blocks must be in bounds of live buffers,
/// and the destination block must overlap neither operand.
unsafe fn gemm_update<T: Real>(
    (m, n, k): (usize, usize, usize),
    dst: *mut T,
    ldd: isize,
    lhs: *const T,
    (lrs, lcs): (isize, isize),
    rhs: *const T,
    (rrs, rcs): (isize, isize),
    subtract: bool,
) {
    let parallelism = if m * n * k >= PARALLEL_MIN_FLOPS && !SERIAL.with(std::cell::Cell::get) {
        gemm::Parallelism::Rayon(rayon::current_num_threads())
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: the caller's contract.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
            1,
            ldd,
            subtract,
            lhs,
            lcs,
            lrs,
            rhs,
            rcs,
            rrs,
            T::ONE,
            if subtract { -T::ONE } else { T::ONE },
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// A block operand of a product: its first element's row and column in the
/// buffer, and whether it is read transposed.
#[derive(Clone, Copy)]
struct Block {
    row: usize,
    col: usize,
    transposed: bool,
}

impl Block {
    fn at(row: usize, col: usize) -> Block {
        Block {
            row,
            col,
            transposed: false,
        }
    }

    fn t(self) -> Block {
        Block {
            transposed: true,
            ..self
        }
    }

    /// The rows and columns of the buffer it covers as an `r x c` operand.
    fn extent(self, r: usize, c: usize) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
        let (r, c) = if self.transposed { (c, r) } else { (r, c) };
        (self.row..self.row + r, self.col..self.col + c)
    }
}

fn overlaps(a: &std::ops::Range<usize>, b: &std::ops::Range<usize>) -> bool {
    a.start < b.end && b.start < a.end
}

/// `x[dst] -= op(x[lhs]) * op(x[rhs])`: `dst` is `m x n`, the operands
/// `m x k` and `k x n` blocks of the same buffer `x` (row stride `ld`),
/// which must not overlap `dst`'s block (operands that would are copied
/// first, so the result is always the product of the values before).
#[allow(clippy::too_many_arguments)]
fn sub_product<T: Real>(
    x: &mut [T],
    ld: usize,
    dst: (usize, usize),
    (m, n, k): (usize, usize, usize),
    lhs: Block,
    rhs: Block,
) {
    if m == 0 || n == 0 || k == 0 {
        return;
    }
    let (dr, dc) = (dst.0..dst.0 + m, dst.1..dst.1 + n);
    let (lr, lc) = lhs.extent(m, k);
    let (rr, rc) = rhs.extent(k, n);
    let last = |rows: &std::ops::Range<usize>, cols: &std::ops::Range<usize>| {
        (rows.end - 1) * ld + cols.end - 1
    };
    let inside = [(&dr, &dc), (&lr, &lc), (&rr, &rc)]
        .iter()
        .all(|(r, c)| c.end <= ld && last(r, c) < x.len());
    let clash = |r: &std::ops::Range<usize>, c: &std::ops::Range<usize>| {
        overlaps(r, &dr) && overlaps(c, &dc)
    };
    if !inside || clash(&lr, &lc) || clash(&rr, &rc) {
        // Not a product of disjoint blocks: evaluate it from copies.
        let read = |b: Block, i: usize, j: usize| {
            let (i, j) = if b.transposed { (j, i) } else { (i, j) };
            x.get((b.row + i) * ld + b.col + j)
                .copied()
                .unwrap_or_default()
        };
        let mut product = vec![T::ZERO; m * n];
        for i in 0..m {
            for p in 0..k {
                let l = read(lhs, i, p);
                for j in 0..n {
                    product[i * n + j] = product[i * n + j] + l * read(rhs, p, j);
                }
            }
        }
        for i in 0..m {
            for j in 0..n {
                if let Some(d) = x.get_mut((dst.0 + i) * ld + dst.1 + j) {
                    *d = *d - product[i * n + j];
                }
            }
        }
        return;
    }
    let strides = |b: Block| -> (isize, isize) {
        // (column stride, row stride) of the operand as read.
        if b.transposed {
            (ld as isize, 1)
        } else {
            (1, ld as isize)
        }
    };
    let (lcs, lrs) = strides(lhs);
    // A transposed right operand (`L^T` in Cholesky and its solves) is
    // read by gemm down its columns, which it packs element by element: 36%
    // of cholesky_1024's profile. A register-transposed copy costs a
    // fraction of that, and gemm reads the copy's rows as they are.
    let copy = (rhs.transposed && n * k >= TRANSPOSED_COPY_MIN)
        .then(|| transposed(x, ld, (rhs.row, rhs.col), (n, k)));
    let (rcs, rrs) = match copy {
        Some(_) => (1, n as isize),
        None => strides(rhs),
    };
    let base = x.as_mut_ptr();
    // SAFETY: the three blocks lie inside `x` (checked above: every row
    // they cover ends within the row stride and the last element is in
    // bounds), or the right one is `copy`'s `k x n` matrix; the
    // destination block overlaps neither operand block, so gemm writes
    // only memory it does not read. `x` is borrowed mutably for the call,
    // so nothing else touches it.
    unsafe {
        gemm_update(
            (m, n, k),
            base.add(dst.0 * ld + dst.1),
            ld as isize,
            base.add(lhs.row * ld + lhs.col).cast_const(),
            (lrs, lcs),
            match &copy {
                Some(c) => c.as_ptr(),
                None => base.add(rhs.row * ld + rhs.col).cast_const(),
            },
            (rrs, rcs),
            true,
        );
    }
}

/// Elements from which [`sub_product`] copies a transposed right operand.
const TRANSPOSED_COPY_MIN: usize = 1024;

/// The `rows x cols` block at (`row`, `col`) of `x` (row stride `ld`),
/// transposed: a `cols x rows` row-major matrix. The block must lie inside
/// `x`. Whole register blocks where the CPU has them.
fn transposed<T: Real>(
    x: &[T],
    ld: usize,
    (row, col): (usize, usize),
    (rows, cols): (usize, usize),
) -> Vec<T> {
    let mut out = vec![T::ZERO; rows * cols];
    // A register block: `per` rows of `BLOCK_K` contiguous elements.
    let per = 64 / std::mem::size_of::<T>().max(1);
    let k = super::copy::BLOCK_K;
    for j0 in (0..rows).step_by(per) {
        for p0 in (0..cols).step_by(k) {
            let whole = j0 + per <= rows
                && p0 + k <= cols
                && super::copy::square::block(
                    x,
                    ((row + j0) * ld + col + p0) as i64,
                    ld as i64,
                    &mut out,
                    p0 * rows + j0,
                    rows,
                );
            if !whole {
                for j in j0..(j0 + per).min(rows) {
                    for p in p0..(p0 + k).min(cols) {
                        out[p * rows + j] = x[(row + j) * ld + col + p];
                    }
                }
            }
        }
    }
    out
}

/// Rows `p` and `i` (`p < i`) of `x`, `len` elements from column `col`:
/// the first to read, the second to write.
#[inline(always)]
fn row_pair<T>(
    x: &mut [T],
    ld: usize,
    p: usize,
    i: usize,
    col: usize,
    len: usize,
) -> (&[T], &mut [T]) {
    let (top, bottom) = x.split_at_mut(i * ld);
    (
        &top[p * ld + col..p * ld + col + len],
        &mut bottom[col..col + len],
    )
}

/// `dst -= l * src`, elementwise.
#[inline(always)]
fn axpy<T: Real>(dst: &mut [T], l: T, src: &[T]) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = *d - l * s;
    }
}

/// `a . b`, in four independent vectors of 16 partial sums: a single
/// vector of sums would wait on the adder's latency every step (2
/// elements a cycle instead of 16).
#[inline(always)]
pub(crate) fn dot<T: Real>(a: &[T], b: &[T]) -> T {
    let len = a.len().min(b.len());
    let (a, b) = (&a[..len], &b[..len]);
    let (a64, ar) = a.as_chunks::<64>();
    let (b64, br) = b.as_chunks::<64>();
    let (mut s0, mut s1, mut s2, mut s3) =
        ([T::ZERO; 16], [T::ZERO; 16], [T::ZERO; 16], [T::ZERO; 16]);
    for (x, y) in a64.iter().zip(b64) {
        for l in 0..16 {
            s0[l] = s0[l] + x[l] * y[l];
            s1[l] = s1[l] + x[16 + l] * y[16 + l];
            s2[l] = s2[l] + x[32 + l] * y[32 + l];
            s3[l] = s3[l] + x[48 + l] * y[48 + l];
        }
    }
    let (a16, ar) = ar.as_chunks::<16>();
    let (b16, br) = br.as_chunks::<16>();
    for (x, y) in a16.iter().zip(b16) {
        for l in 0..16 {
            s0[l] = s0[l] + x[l] * y[l];
        }
    }
    let mut sum = T::ZERO;
    for (&x, &y) in ar.iter().zip(br) {
        sum = sum + x * y;
    }
    for l in 0..16 {
        s0[l] = (s0[l] + s1[l]) + (s2[l] + s3[l]);
    }
    s0.iter().fold(T::ZERO, |s, &v| s + v) + sum
}

/// The dot products of four rows with `v` (each row at least as long as
/// `v`), sharing `v`'s loads: one vector of sums per row, their lanes
/// summed once at the end (row by row, the sums and the scalar tails cost
/// as much as a short row). `sytrd`'s symmetric product runs the same
/// loop fused with its update of `p`, to read the rows once.
#[inline(always)]
pub(crate) fn dot4<T: Real>(rows: [&[T]; 4], v: &[T]) -> [T; 4] {
    let len = v.len();
    let (c0, t0) = rows[0][..len].as_chunks::<16>();
    let (c1, t1) = rows[1][..len].as_chunks::<16>();
    let (c2, t2) = rows[2][..len].as_chunks::<16>();
    let (c3, t3) = rows[3][..len].as_chunks::<16>();
    let (vc, vt) = v.as_chunks::<16>();
    let zero = [T::ZERO; 16];
    let (mut a0, mut a1, mut a2, mut a3) = (zero, zero, zero, zero);
    for (j, y) in vc.iter().enumerate() {
        let (x0, x1, x2, x3) = (&c0[j], &c1[j], &c2[j], &c3[j]);
        for l in 0..16 {
            a0[l] = a0[l] + x0[l] * y[l];
            a1[l] = a1[l] + x1[l] * y[l];
            a2[l] = a2[l] + x2[l] * y[l];
            a3[l] = a3[l] + x3[l] * y[l];
        }
    }
    let mut tails = [T::ZERO; 4];
    for (c, &y) in vt.iter().enumerate() {
        for (t, x) in tails.iter_mut().zip([t0[c], t1[c], t2[c], t3[c]]) {
            *t = *t + x * y;
        }
    }
    let lanes = |a: [T; 16]| a.iter().fold(T::ZERO, |s, &x| s + x);
    [
        lanes(a0) + tails[0],
        lanes(a1) + tails[1],
        lanes(a2) + tails[2],
        lanes(a3) + tails[3],
    ]
}

/// A triangular matrix `n x n` whose top-left element is at (`row`, `col`)
/// of a buffer with row stride `ld`.
#[derive(Clone, Copy)]
pub(crate) struct Triangle {
    pub row: usize,
    pub col: usize,
    pub n: usize,
    pub lower: bool,
    /// Unit diagonal: the diagonal is taken as ones and never read.
    pub unit: bool,
}

impl Triangle {
    fn sub(self, from: usize, to: usize) -> Triangle {
        Triangle {
            row: self.row + from,
            col: self.col + from,
            n: to - from,
            ..self
        }
    }
}

/// Solves `t x = b` in place of `b`, where `t` lies in `tri` (row stride
/// `ldt`) and `b` is `t.n x cols` in `rhs` (row stride `ldb`). Neither
/// buffer may be the other.
///
/// The columns of `b` are independent problems. With many of them, each
/// thread solves its own block of columns, copied out to a buffer of its
/// own and back, with every product of its solve on it: split by the
/// recursion alone, the products below [`PARALLEL_MIN_FLOPS`] and the
/// unblocked solves all ran on one thread (inv_512's two solves with 512
/// columns kept one thread busy for 43% of the time and the other 15%).
/// Each column's arithmetic is the same either way.
pub(crate) fn solve_left<T: Real>(
    tri: &[T],
    ldt: usize,
    t: Triangle,
    rhs: &mut [T],
    ldb: usize,
    cols: usize,
) {
    let n = t.n;
    let threads = rayon::current_num_threads();
    let parts = threads.min(cols / SPLIT_MIN_COLS);
    let work = n.saturating_mul(n).saturating_mul(cols);
    if parts < 2 || work < 2 * PARALLEL_MIN_FLOPS || SERIAL.with(std::cell::Cell::get) {
        solve_left_blocked(tri, ldt, t, rhs, ldb, cols);
        return;
    }
    // Column bounds on multiples of 16, whole vectors of f32 and f64.
    let bounds: Vec<(usize, usize)> = (0..parts)
        .map(|p| {
            let at = |q: usize| {
                if q == parts {
                    cols
                } else {
                    cols * q / parts / 16 * 16
                }
            };
            (at(p), at(p + 1))
        })
        .collect();
    let mut blocks: Vec<Vec<T>> = bounds
        .iter()
        .map(|&(lo, hi)| {
            let mut v = Vec::with_capacity(n * (hi - lo));
            for i in 0..n {
                v.extend_from_slice(&rhs[i * ldb + lo..i * ldb + hi]);
            }
            v
        })
        .collect();
    {
        use rayon::prelude::*;
        blocks
            .par_iter_mut()
            .zip(&bounds)
            .for_each(|(block, &(lo, hi))| {
                let was = SERIAL.with(|s| s.replace(true));
                solve_left_blocked(tri, ldt, t, block, hi - lo, hi - lo);
                SERIAL.with(|s| s.set(was));
            });
    }
    for (block, &(lo, hi)) in blocks.iter().zip(&bounds) {
        for (i, row) in block.chunks_exact(hi - lo).enumerate() {
            rhs[i * ldb + lo..i * ldb + hi].copy_from_slice(row);
        }
    }
}

/// [`solve_left`] on the calling thread's share: by halves of the triangle,
/// its products parallel unless [`SERIAL`] is set.
fn solve_left_blocked<T: Real>(
    tri: &[T],
    ldt: usize,
    t: Triangle,
    rhs: &mut [T],
    ldb: usize,
    cols: usize,
) {
    let n = t.n;
    if n == 0 || cols == 0 {
        return;
    }
    if n <= BASE {
        solve_left_base_dispatch(tri, ldt, t, rhs, ldb, cols);
        return;
    }
    let h = n / 2;
    // The half solved first, then the other half's right-hand side
    // updated with it.
    let (first, second) = if t.lower { (0..h, h..n) } else { (h..n, 0..h) };
    let rows_from = |r: usize| r * ldb;
    solve_left_blocked(
        tri,
        ldt,
        t.sub(first.start, first.end),
        &mut rhs[rows_from(first.start)..],
        ldb,
        cols,
    );
    // b[second] -= t[second, first] * x[first]: t and b are different
    // buffers, so the product goes through a copy of the coupling block.
    let (sr, fr) = (second.len(), first.len());
    let mut coupling = vec![T::ZERO; sr * fr];
    for (i, out) in coupling.chunks_exact_mut(fr).enumerate() {
        let start = (t.row + second.start + i) * ldt + t.col + first.start;
        out.copy_from_slice(&tri[start..start + fr]);
    }
    product_into(
        rhs,
        ldb,
        (second.start, 0),
        (sr, cols, fr),
        &coupling,
        (first.start, 0),
    );
    solve_left_blocked(
        tri,
        ldt,
        t.sub(second.start, second.end),
        &mut rhs[rows_from(second.start)..],
        ldb,
        cols,
    );
}

// The unblocked loop, compiled for the CPU's vectors.
dispatched!(solve_left_base_dispatch<T: Real> => solve_left_base_body(tri: &[T], ldt: usize, t: Triangle, rhs: &mut [T], ldb: usize, cols: usize));

#[inline(always)]
fn solve_left_base_body<T: Real, const WIDE: bool>(
    tri: &[T],
    ldt: usize,
    t: Triangle,
    rhs: &mut [T],
    ldb: usize,
    cols: usize,
) {
    let n = t.n;
    let at = |i: usize, j: usize| tri[(t.row + i) * ldt + t.col + j];
    // Rows in the order they are solved: down for lower, up for upper.
    let order = (0..n).map(|k| if t.lower { k } else { n - 1 - k });
    for i in order {
        let others = if t.lower { 0..i } else { i + 1..n };
        for p in others {
            let l = at(i, p);
            if p < i {
                let (src, dst) = row_pair(rhs, ldb, p, i, 0, cols);
                axpy(dst, l, src);
            } else {
                let (dst_rows, src_rows) = rhs.split_at_mut(p * ldb);
                axpy(&mut dst_rows[i * ldb..i * ldb + cols], l, &src_rows[..cols]);
            }
        }
        if !t.unit {
            let d = at(i, i);
            for v in &mut rhs[i * ldb..i * ldb + cols] {
                *v = *v / d;
            }
        }
    }
}

/// A matrix operand read from a slice: element `(i, j)` is at
/// `offset + i * rs + j * cs`.
#[derive(Clone, Copy)]
pub(crate) struct Operand<'a, T> {
    pub data: &'a [T],
    pub offset: usize,
    pub rs: usize,
    pub cs: usize,
}

impl<'a, T: Copy + Default> Operand<'a, T> {
    /// The `rows x cols` matrix at `offset` of a row-major buffer with row
    /// stride `ld`.
    pub(crate) fn rows(data: &'a [T], ld: usize, offset: usize) -> Operand<'a, T> {
        Operand {
            data,
            offset,
            rs: ld,
            cs: 1,
        }
    }

    /// The same matrix read transposed.
    pub(crate) fn t(self) -> Operand<'a, T> {
        Operand {
            rs: self.cs,
            cs: self.rs,
            ..self
        }
    }

    fn covers(&self, r: usize, c: usize) -> bool {
        r == 0 || c == 0 || self.offset + (r - 1) * self.rs + (c - 1) * self.cs < self.data.len()
    }

    fn get(&self, i: usize, j: usize) -> T {
        self.data
            .get(self.offset + i * self.rs + j * self.cs)
            .copied()
            .unwrap_or_default()
    }
}

/// `dst = lhs * rhs`, or `dst -= lhs * rhs` with `subtract`: `dst` is the
/// `m x n` block at `at` of a row-major buffer with row stride `ld`, `lhs`
/// is `m x k` and `rhs` `k x n`.
pub(crate) fn product<T: Real>(
    dst: &mut [T],
    ld: usize,
    at: usize,
    (m, n, k): (usize, usize, usize),
    lhs: Operand<T>,
    rhs: Operand<T>,
    subtract: bool,
) {
    if m == 0 || n == 0 {
        return;
    }
    let fits = n <= ld && at + (m - 1) * ld + n <= dst.len();
    if k == 0 || !fits || !lhs.covers(m, k) || !rhs.covers(k, n) {
        // An empty sum, or blocks that do not fit (never by construction):
        // element by element, writing only what is inside `dst`.
        for i in 0..m {
            for j in 0..n {
                let s = (0..k).fold(T::ZERO, |s, p| s + lhs.get(i, p) * rhs.get(p, j));
                if let Some(d) = dst.get_mut(at + i * ld + j) {
                    *d = if subtract { *d - s } else { s };
                }
            }
        }
        return;
    }
    // SAFETY: the destination block and both operands lie inside their
    // slices (checked above); `dst` is borrowed mutably and the operands
    // shared, so they are different buffers.
    unsafe {
        gemm_update(
            (m, n, k),
            dst.as_mut_ptr().add(at),
            ld as isize,
            lhs.data.as_ptr().add(lhs.offset),
            (lhs.rs as isize, lhs.cs as isize),
            rhs.data.as_ptr().add(rhs.offset),
            (rhs.rs as isize, rhs.cs as isize),
            subtract,
        );
    }
}

/// `b[dst] -= c * b[src]`, with `c` a separate `m x k` row-major matrix
/// and `b[src]` the `k x n` block at `src` of `b`, disjoint from `dst`.
fn product_into<T: Real>(
    b: &mut [T],
    ldb: usize,
    dst: (usize, usize),
    (m, n, k): (usize, usize, usize),
    c: &[T],
    src: (usize, usize),
) {
    if m == 0 || n == 0 || k == 0 {
        return;
    }
    let (dr, sr) = (dst.0..dst.0 + m, src.0..src.0 + k);
    let inside = dst.1 + n <= ldb
        && src.1 + n <= ldb
        && (dr.end - 1) * ldb + dst.1 + n <= b.len()
        && (sr.end - 1) * ldb + src.1 + n <= b.len()
        && c.len() >= m * k;
    if !inside || (overlaps(&dr, &sr) && overlaps(&(dst.1..dst.1 + n), &(src.1..src.1 + n))) {
        let mut product = vec![T::ZERO; m * n];
        for i in 0..m {
            for p in 0..k {
                let l = c.get(i * k + p).copied().unwrap_or_default();
                for j in 0..n {
                    let v = b
                        .get((src.0 + p) * ldb + src.1 + j)
                        .copied()
                        .unwrap_or_default();
                    product[i * n + j] = product[i * n + j] + l * v;
                }
            }
        }
        for i in 0..m {
            for j in 0..n {
                if let Some(d) = b.get_mut((dst.0 + i) * ldb + dst.1 + j) {
                    *d = *d - product[i * n + j];
                }
            }
        }
        return;
    }
    let base = b.as_mut_ptr();
    // SAFETY: both blocks of `b` lie inside it and do not overlap (checked
    // above), `c` holds `m * k` elements and is a different buffer (it is
    // borrowed shared while `b` is borrowed mutably).
    unsafe {
        gemm_update(
            (m, n, k),
            base.add(dst.0 * ldb + dst.1),
            ldb as isize,
            c.as_ptr(),
            (k as isize, 1),
            base.add(src.0 * ldb + src.1).cast_const(),
            (ldb as isize, 1),
            true,
        );
    }
}

/// LU factorisation with partial pivoting (LAPACK's `getrf`) of the
/// `m x n` matrix `a` (row stride `n`), in place: `pivots[j]` is the
/// 1-based row swapped with row `j + 1` (the first largest `|a|` in the
/// column), and the result is the 1-based index of the first exactly zero
/// pivot, or 0.
pub(crate) fn getrf<T: Real>(a: &mut [T], m: usize, n: usize, pivots: &mut [i32]) -> i32 {
    let k = m.min(n);
    let mut info = 0;
    if k == 0 || a.len() < m * n || pivots.len() < k {
        return 0;
    }
    lu_columns(a, m, n, 0, k, pivots, &mut info);
    if n > k {
        // A wide matrix: the columns right of the square part become
        // U's rows, L^-1 times them.
        let t = Triangle {
            row: 0,
            col: 0,
            n: k,
            lower: true,
            unit: true,
        };
        solve_left_in_place(a, n, t, (0, k), n - k);
    }
    info
}

/// `solve_left` where the triangle and the right-hand side share the
/// buffer (disjoint blocks): the rhs is the `t.n x cols` block at `at`.
fn solve_left_in_place<T: Real>(
    a: &mut [T],
    ld: usize,
    t: Triangle,
    at: (usize, usize),
    cols: usize,
) {
    let n = t.n;
    if n == 0 || cols == 0 {
        return;
    }
    if n <= BASE {
        solve_in_place_base_dispatch(a, ld, t, at, cols);
        return;
    }
    let h = n / 2;
    let (first, second) = if t.lower { (0..h, h..n) } else { (h..n, 0..h) };
    solve_left_in_place(
        a,
        ld,
        t.sub(first.start, first.end),
        (at.0 + first.start, at.1),
        cols,
    );
    sub_product(
        a,
        ld,
        (at.0 + second.start, at.1),
        (second.len(), cols, first.len()),
        Block::at(t.row + second.start, t.col + first.start),
        Block::at(at.0 + first.start, at.1),
    );
    solve_left_in_place(
        a,
        ld,
        t.sub(second.start, second.end),
        (at.0 + second.start, at.1),
        cols,
    );
}

// The unblocked loop, compiled for the CPU's vectors.
dispatched!(solve_in_place_base_dispatch<T: Real> => solve_in_place_base_body(a: &mut [T], ld: usize, t: Triangle, at: (usize, usize), cols: usize));

#[inline(always)]
fn solve_in_place_base_body<T: Real, const WIDE: bool>(
    a: &mut [T],
    ld: usize,
    t: Triangle,
    at: (usize, usize),
    cols: usize,
) {
    let n = t.n;
    // Rows in the order they are solved: down for lower, up for upper.
    let order = (0..n).map(|k| if t.lower { k } else { n - 1 - k });
    let mut row = vec![T::ZERO; cols];
    for i in order {
        let others = if t.lower { 0..i } else { i + 1..n };
        let start = (at.0 + i) * ld + at.1;
        row.copy_from_slice(&a[start..start + cols]);
        for p in others {
            let l = a[(t.row + i) * ld + t.col + p];
            let src = (at.0 + p) * ld + at.1;
            axpy(&mut row, l, &a[src..src + cols]);
        }
        if !t.unit {
            let d = a[(t.row + i) * ld + t.col + i];
            for v in &mut row {
                *v = *v / d;
            }
        }
        a[start..start + cols].copy_from_slice(&row);
    }
}

/// Factors columns `c0 .. c0 + w` of `a` (`m x n`, row stride `n`), rows
/// `c0 ..`, whose earlier columns are done: pivots swap whole rows.
fn lu_columns<T: Real>(
    a: &mut [T],
    m: usize,
    n: usize,
    c0: usize,
    w: usize,
    pivots: &mut [i32],
    info: &mut i32,
) {
    if w <= BASE {
        lu_base_dispatch(a, m, n, c0, w, pivots, info);
        return;
    }
    let h = w / 2;
    lu_columns(a, m, n, c0, h, pivots, info);
    // U12 = L11^-1 A12, then A22 -= L21 U12.
    let t = Triangle {
        row: c0,
        col: c0,
        n: h,
        lower: true,
        unit: true,
    };
    solve_left_in_place(a, n, t, (c0, c0 + h), w - h);
    sub_product(
        a,
        n,
        (c0 + h, c0 + h),
        (m - c0 - h, w - h, h),
        Block::at(c0 + h, c0),
        Block::at(c0, c0 + h),
    );
    lu_columns(a, m, n, c0 + h, w - h, pivots, info);
}

// The unblocked loop, compiled for the CPU's vectors.
dispatched!(lu_base_dispatch<T: Real> => lu_base_body(a: &mut [T], m: usize, n: usize, c0: usize, w: usize, pivots: &mut [i32], info: &mut i32));

#[inline(always)]
fn lu_base_body<T: Real, const WIDE: bool>(
    a: &mut [T],
    m: usize,
    n: usize,
    c0: usize,
    w: usize,
    pivots: &mut [i32],
    info: &mut i32,
) {
    // The panel (rows c0.., columns c0..c0 + w) is factored in a compact
    // copy: in place, its column walks would stride by whole rows of `a`
    // (4 KiB for 1024 f32 columns: every access another cache line of
    // one set). The row swaps then reach the rest of the rows.
    let rows = m - c0;
    let mut panel = vec![T::ZERO; rows * w];
    for (r, dst) in panel.chunks_exact_mut(w).enumerate() {
        let src = (c0 + r) * n + c0;
        dst.copy_from_slice(&a[src..src + w]);
    }
    for j in 0..w {
        let mut p = j;
        let mut best = panel[j * w + j].abs();
        for i in j + 1..rows {
            let v = panel[i * w + j].abs();
            if v > best {
                p = i;
                best = v;
            }
        }
        pivots[c0 + j] = (c0 + p) as i32 + 1;
        if best == T::ZERO {
            // LAPACK records the first zero pivot and goes on; the
            // column below is zero, so there is nothing to eliminate.
            if *info == 0 {
                *info = (c0 + j) as i32 + 1;
            }
            continue;
        }
        if p != j {
            let (top, bottom) = panel.split_at_mut(p * w);
            top[j * w..j * w + w].swap_with_slice(&mut bottom[..w]);
        }
        let pivot = panel[j * w + j];
        for i in j + 1..rows {
            let l = panel[i * w + j] / pivot;
            panel[i * w + j] = l;
            let (src, dst) = row_pair(&mut panel, w, j, i, j + 1, w - j - 1);
            axpy(dst, l, src);
        }
    }
    for (r, src) in panel.chunks_exact(w).enumerate() {
        let dst = (c0 + r) * n + c0;
        a[dst..dst + w].copy_from_slice(src);
    }
    // The same swaps, in order, on the other columns of the rows.
    for j in 0..w {
        let p = pivots[c0 + j] as usize - 1;
        let row = c0 + j;
        if p != row {
            let (top, bottom) = a.split_at_mut(p * n);
            let (x, y) = (&mut top[row * n..row * n + n], &mut bottom[..n]);
            x[..c0].swap_with_slice(&mut y[..c0]);
            x[c0 + w..].swap_with_slice(&mut y[c0 + w..]);
        }
    }
}

/// Cholesky factorisation of the lower triangle of the `n x n` matrix `a`
/// (row stride `n`), in place: `a = L L^T`. Entries above the diagonal are
/// overwritten with scratch values. `Err(j)` names the first (0-based)
/// leading minor that is not positive definite; the factorisation stops
/// there with the failing diagonal value in place.
pub(crate) fn potrf_lower<T: Real>(a: &mut [T], n: usize) -> Result<(), usize> {
    if a.len() < n * n {
        return Ok(());
    }
    cholesky(a, n, 0, n)
}

/// Factors the `w x w` block at (`c0`, `c0`) of `a` (row stride `ld`).
fn cholesky<T: Real>(a: &mut [T], ld: usize, c0: usize, w: usize) -> Result<(), usize> {
    if w <= BASE {
        let mut failed = None;
        cholesky_base_dispatch(a, ld, c0, w, &mut failed);
        return failed.map_or(Ok(()), Err);
    }
    let h = w / 2;
    cholesky(a, ld, c0, h)?;
    // L21 = A21 L11^-T: each row x of it solves L11 x^T = a^T.
    solve_right_lower_t(a, ld, c0, h, (c0 + h, c0), w - h);
    // A22 -= L21 L21^T, on and below the diagonal, a band of rows at a time
    // (each band computes up to its own last column: a little above the
    // diagonal, which is scratch).
    const BAND: usize = 64;
    let mut r = 0;
    while r < w - h {
        let rows = BAND.min(w - h - r);
        sub_product(
            a,
            ld,
            (c0 + h + r, c0 + h),
            (rows, r + rows, h),
            Block::at(c0 + h + r, c0),
            Block::at(c0 + h, c0).t(),
        );
        r += rows;
    }
    cholesky(a, ld, c0 + h, w - h)
}

// The unblocked loop, compiled for the CPU's vectors.
dispatched!(cholesky_base_dispatch<T: Real> => cholesky_base_body(a: &mut [T], ld: usize, c0: usize, w: usize, failed: &mut Option<usize>));

#[inline(always)]
fn cholesky_base_body<T: Real, const WIDE: bool>(
    a: &mut [T],
    ld: usize,
    c0: usize,
    w: usize,
    failed: &mut Option<usize>,
) {
    for j in 0..w {
        let rj = (c0 + j) * ld + c0;
        let d = a[rj + j] - dot(&a[rj..rj + j], &a[rj..rj + j]);
        // Not positive, or NaN.
        if d.partial_cmp(&T::ZERO) != Some(std::cmp::Ordering::Greater) {
            a[rj + j] = d;
            *failed = Some(c0 + j);
            return;
        }
        let d = d.sqrt();
        a[rj + j] = d;
        for i in j + 1..w {
            let ri = (c0 + i) * ld + c0;
            let s = a[ri + j] - dot(&a[ri..ri + j], &a[rj..rj + j]);
            a[ri + j] = s / d;
        }
    }
}

/// Solves `x L^T = b` in place for the `rows x n` block `b` at `at` of
/// `a`, with `L` the lower triangle of the `n x n` block at (`c0`, `c0`)
/// (non-unit diagonal); the blocks are disjoint.
fn solve_right_lower_t<T: Real>(
    a: &mut [T],
    ld: usize,
    c0: usize,
    n: usize,
    at: (usize, usize),
    rows: usize,
) {
    if n == 0 || rows == 0 {
        return;
    }
    if n <= BASE {
        right_lower_t_base_dispatch(a, ld, c0, n, at, rows);
        return;
    }
    let h = n / 2;
    // [x1 x2] [L11^T L21^T; 0 L22^T] = [b1 b2].
    solve_right_lower_t(a, ld, c0, h, at, rows);
    sub_product(
        a,
        ld,
        (at.0, at.1 + h),
        (rows, n - h, h),
        Block::at(at.0, at.1),
        Block::at(c0 + h, c0).t(),
    );
    solve_right_lower_t(a, ld, c0 + h, n - h, (at.0, at.1 + h), rows);
}

// The unblocked loop, compiled for the CPU's vectors.
dispatched!(right_lower_t_base_dispatch<T: Real> => right_lower_t_base_body(a: &mut [T], ld: usize, c0: usize, n: usize, at: (usize, usize), rows: usize));

#[inline(always)]
fn right_lower_t_base_body<T: Real, const WIDE: bool>(
    a: &mut [T],
    ld: usize,
    c0: usize,
    n: usize,
    at: (usize, usize),
    rows: usize,
) {
    // Column j of x is (b_j - sum_{p<j} L[j, p] x_p) / L[j, j]: on the
    // block transposed (n rows of `rows`), each step is a long axpy.
    let mut xt = vec![T::ZERO; n * rows];
    for r in 0..rows {
        let start = (at.0 + r) * ld + at.1;
        for (j, &v) in a[start..start + n].iter().enumerate() {
            xt[j * rows + r] = v;
        }
    }
    for j in 0..n {
        let lj = (c0 + j) * ld + c0;
        let (done, rest) = xt.split_at_mut(j * rows);
        let xj = &mut rest[..rows];
        for p in 0..j {
            axpy(xj, a[lj + p], &done[p * rows..(p + 1) * rows]);
        }
        let d = a[lj + j];
        for v in xj.iter_mut() {
            *v = *v / d;
        }
    }
    for r in 0..rows {
        let start = (at.0 + r) * ld + at.1;
        for (j, v) in a[start..start + n].iter_mut().enumerate() {
            *v = xt[j * rows + r];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_products_in_every_length() {
        // Small integers, so every order of summation gives the exact sum:
        // lengths around the 16- and 64-element steps and their tails.
        for len in [0usize, 1, 15, 16, 17, 63, 64, 65, 100, 130] {
            let v: Vec<f32> = (0..len).map(|i| (i % 7) as f32 - 3.0).collect();
            let rows: Vec<Vec<f32>> = (0..4)
                .map(|q| (0..len + q).map(|i| ((i * (q + 2)) % 5) as f32).collect())
                .collect();
            let want: Vec<f32> = rows
                .iter()
                .map(|r| r.iter().zip(&v).map(|(a, b)| a * b).sum())
                .collect();
            assert_eq!(dot(&rows[0], &v), want[0], "dot, {len}");
            let got = dot4([&rows[0], &rows[1], &rows[2], &rows[3]], &v);
            assert_eq!(got.to_vec(), want, "dot4, {len}");
        }
    }

    fn matrix(m: usize, n: usize, seed: u64) -> Vec<f64> {
        let mut s = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..m * n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
            })
            .collect()
    }

    fn matmul(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for p in 0..k {
                for j in 0..n {
                    c[i * n + j] += a[i * k + p] * b[p * n + j];
                }
            }
        }
        c
    }

    fn max_diff(a: &[f64], b: &[f64]) -> f64 {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max)
    }

    #[test]
    fn lu_reconstructs_permuted_matrix() {
        for &(m, n) in &[(1, 1), (5, 5), (40, 40), (70, 33), (33, 70), (100, 100)] {
            let a = matrix(m, n, (m * 131 + n) as u64);
            let mut lu = a.clone();
            let k = m.min(n);
            let mut piv = vec![0; k];
            assert_eq!(getrf(&mut lu, m, n, &mut piv), 0);
            let mut l = vec![0.0; m * k];
            let mut u = vec![0.0; k * n];
            for i in 0..m {
                for j in 0..n {
                    if i > j && j < k {
                        l[i * k + j] = lu[i * n + j];
                    } else if i < k {
                        u[i * n + j] = lu[i * n + j];
                    }
                }
                if i < k {
                    l[i * k + i] = 1.0;
                }
            }
            let mut pa = a.clone();
            for (j, &p) in piv.iter().enumerate() {
                let p = p as usize - 1;
                assert!(p >= j && p < m);
                for c in 0..n {
                    pa.swap(j * n + c, p * n + c);
                }
            }
            // Partial pivoting keeps every multiplier at most 1.
            assert!(l.iter().all(|v| v.abs() <= 1.0));
            let diff = max_diff(&matmul(&l, &u, m, k, n), &pa);
            assert!(diff < 1e-12, "{m}x{n}: {diff}");
        }
    }

    #[test]
    fn lu_reports_the_first_zero_pivot() {
        // Column 1 is twice column 0: the second pivot is exactly zero.
        let mut a = vec![1.0, 2.0, 3.0, 2.0, 4.0, 1.0, 4.0, 8.0, 5.0];
        let mut piv = vec![0; 3];
        assert_eq!(getrf(&mut a, 3, 3, &mut piv), 2);
        assert_eq!(piv, vec![3, 2, 3]);
    }

    #[test]
    fn cholesky_reconstructs_and_reports_failure() {
        for &n in &[1usize, 7, 16, 17, 64, 150] {
            let g = matrix(n, n, n as u64);
            let mut a = matmul(&g, &transpose(&g, n, n), n, n, n);
            for i in 0..n {
                a[i * n + i] += n as f64;
            }
            let mut l = a.clone();
            assert_eq!(potrf_lower(&mut l, n), Ok(()));
            for i in 0..n {
                for j in i + 1..n {
                    l[i * n + j] = 0.0;
                }
            }
            let diff = max_diff(&matmul(&l, &transpose(&l, n, n), n, n, n), &a);
            assert!(diff < 1e-10 * n as f64, "{n}: {diff}");
        }
        // An indefinite matrix: the third leading minor fails.
        let mut a = vec![4.0, 0.0, 0.0, 0.0, 9.0, 0.0, 0.0, 0.0, -1.0];
        assert_eq!(potrf_lower(&mut a, 3), Err(2));
        assert_eq!(a[8], -1.0);
    }

    fn transpose(a: &[f64], m: usize, n: usize) -> Vec<f64> {
        let mut t = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                t[j * m + i] = a[i * n + j];
            }
        }
        t
    }

    /// An `n x n` lower or upper triangle, unit or not: off-diagonal
    /// entries of at most `scale / n` keep it well conditioned (random
    /// unit triangles are not).
    fn triangle(n: usize, seed: u64, scale: f64, lower: bool, unit: bool) -> (Vec<f64>, Triangle) {
        let mut t: Vec<f64> = matrix(n, n, seed)
            .iter()
            .map(|v| v * scale / n as f64)
            .collect();
        for i in 0..n {
            for j in 0..n {
                if (lower && j > i) || (!lower && j < i) {
                    t[i * n + j] = 0.0;
                }
            }
            t[i * n + i] = if unit { 1.0 } else { 2.0 + t[i * n + i] };
        }
        let tri = Triangle {
            row: 0,
            col: 0,
            n,
            lower,
            unit,
        };
        (t, tri)
    }

    #[test]
    fn triangular_solves_invert_the_product() {
        for &(n, cols) in &[(1usize, 1usize), (9, 3), (40, 17), (130, 5)] {
            for lower in [true, false] {
                for unit in [true, false] {
                    let (t, tri) = triangle(n, (n + cols) as u64, 2.0, lower, unit);
                    let x = matrix(n, cols, 7);
                    let mut b = matmul(&t, &x, n, n, cols);
                    let mut b2 = b.clone();
                    solve_left(&t, n, tri, &mut b, cols, cols);
                    assert!(max_diff(&b, &x) < 1e-10, "{n} {lower} {unit}");
                    // The same with the triangle and rhs in one buffer.
                    let mut both = vec![0.0; n * (n + cols)];
                    for i in 0..n {
                        both[i * (n + cols)..i * (n + cols) + n]
                            .copy_from_slice(&t[i * n..i * n + n]);
                        both[i * (n + cols) + n..(i + 1) * (n + cols)]
                            .copy_from_slice(&b2[i * cols..(i + 1) * cols]);
                    }
                    solve_left_in_place(&mut both, n + cols, tri, (0, n), cols);
                    for i in 0..n {
                        b2[i * cols..(i + 1) * cols]
                            .copy_from_slice(&both[i * (n + cols) + n..(i + 1) * (n + cols)]);
                    }
                    assert!(max_diff(&b2, &x) < 1e-10, "in place {n} {lower} {unit}");
                }
            }
        }
    }

    #[test]
    fn a_solve_with_many_columns_splits_them_between_threads()
    -> Result<(), rayon::ThreadPoolBuildError> {
        // 512^2 * 300 multiply-adds and 300 columns: two blocks of columns
        // in a pool of two threads, in a buffer with a wider row stride
        // whose extra columns must stay as they are.
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build()?;
        let (n, cols, ldb) = (512usize, 300usize, 310usize);
        for (lower, unit) in [(true, false), (false, true)] {
            let (t, tri) = triangle(n, 5, 1.0, lower, unit);
            let x = matrix(n, cols, 11);
            let b = matmul(&t, &x, n, n, cols);
            let mut buf = vec![99.0; n * ldb];
            for i in 0..n {
                buf[i * ldb..i * ldb + cols].copy_from_slice(&b[i * cols..(i + 1) * cols]);
            }
            let mut serial = buf.clone();
            pool.install(|| solve_left(&t, n, tri, &mut buf, ldb, cols));
            solve_left_blocked(&t, n, tri, &mut serial, ldb, cols);
            for i in 0..n {
                let row = &buf[i * ldb..(i + 1) * ldb];
                assert!(row[cols..].iter().all(|&v| v == 99.0), "row {i} padding");
                let want = &x[i * cols..(i + 1) * cols];
                assert!(max_diff(&row[..cols], want) < 1e-9, "{lower} row {i}");
                let one = &serial[i * ldb..i * ldb + cols];
                assert!(
                    max_diff(&row[..cols], one) < 1e-12,
                    "{lower} row {i} serial"
                );
            }
        }
        Ok(())
    }

    #[test]
    fn overlapping_products_read_the_values_before() {
        // dst overlaps lhs: computed from copies.
        let mut x = vec![1.0, 2.0, 3.0, 4.0];
        sub_product(
            &mut x,
            2,
            (0, 0),
            (2, 2, 2),
            Block::at(0, 0),
            Block::at(0, 0),
        );
        assert_eq!(x, vec![1.0 - 7.0, 2.0 - 10.0, 3.0 - 15.0, 4.0 - 22.0]);
    }
}
