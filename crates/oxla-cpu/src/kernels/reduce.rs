//! Reductions with add, multiply, maximum or minimum, with the element-wise
//! work producing their input fused in: the input expression is evaluated
//! tile by tile (as in a fused loop) and folded into the result without ever
//! being stored. Reduced and kept dimensions are each merged where the
//! input's views allow, so a reduction becomes a row reduction (a
//! vectorised horizontal fold per output element), a column reduction
//! (vectorised accumulation into a row of outputs), or a mix.

use oxla_hlo::{ArrayData, ArrayLiteral, ArrayShape, PrimitiveType};
use rayon::prelude::*;

use super::Kernel;
use super::fused::{
    Arg, Binary, Float, FusedLoop, Op, PARALLEL_MIN, Scratch, Source, Space, Src, TILE,
    coalesce_classes, eval_tile, row_offsets,
};
use super::packed::Packing;
use crate::buffer::Pool;
use crate::value::Value;

/// A reduction of a fused expression over some of its dimensions.
#[derive(Clone, Debug)]
pub(crate) struct ReduceLoop {
    /// The reduced operand, over the operand's dimensions.
    pub input: FusedLoop,
    /// Which operand dimensions are reduced.
    pub reduced: Vec<bool>,
    /// Add, Mul, Max or Min.
    pub op: Binary,
    /// The kernel input holding the init value.
    pub init_input: usize,
    pub out_dims: Vec<i64>,
    /// The result's type: the input loop's, or (maximum and minimum only,
    /// which need no rounding) bf16 or f16 computed in f32.
    pub out_ty: PrimitiveType,
}

#[inline(always)]
fn combine<T: Float>(op: Binary, a: T, b: T) -> T {
    match op {
        Binary::Add => a + b,
        Binary::Mul => a * b,
        Binary::Max => super::minmax::max(a, b),
        _ => super::minmax::min(a, b),
    }
}

/// The exact identity: -0.0 for sums (+0.0 would turn -0.0 into +0.0).
fn identity<T: Float>(op: Binary) -> T {
    match op {
        Binary::Add => T::from_f64(-0.0),
        Binary::Mul => T::from_f64(1.0),
        Binary::Max => T::from_f64(f64::NEG_INFINITY),
        _ => T::from_f64(f64::INFINITY),
    }
}

/// The four 16-lane accumulators of a fold merged into one value, always in
/// this order (pairs, then the pair sums, then lane by lane from `id`), so
/// every fold that uses it gives the same result for the same values.
///
#[inline(always)]
fn merge_lanes<T: Float>(id: T, lanes: [[T; 16]; 4], f: &impl Fn(T, T) -> T) -> T {
    let [a0, a1, a2, a3] = lanes;
    let mut merged = a0;
    for l in 0..16 {
        merged[l] = f(f(a0[l], a1[l]), f(a2[l], a3[l]));
    }
    fold_merged(id, merged, f)
}

/// The last step of [`merge_lanes`]: the sixteen pair sums folded lane by
/// lane from `id`. They are written to memory first (`black_box`):
/// otherwise LLVM merged each lane on its own as the fold reached it,
/// four extractions from vector registers and three scalar operations a
/// lane, about 130 instructions for every row folded. Stored, the pairs
/// take three vector operations and the fold sixteen loads: the sums of
/// `exp` over rows of 64 (f32[65536, 64], one core of the AMD EPYC of 30
/// November 2026) took 1.90 ms against 2.36, the same sums to the bit.
#[inline(always)]
fn fold_merged<T: Float>(id: T, merged: [T; 16], f: &impl Fn(T, T) -> T) -> T {
    std::hint::black_box(merged)
        .iter()
        .fold(id, |acc, &l| f(acc, l))
}

/// One 16-lane accumulator of [`fold`] taking 16 more values.
#[inline(always)]
fn step<T: Float>(acc: &mut [T; 16], c: &[T], f: &impl Fn(T, T) -> T) {
    for i in 0..16 {
        acc[i] = f(acc[i], c[i]);
    }
}

/// Folds a tile. The operation is matched once, outside the loops, and
/// four independent accumulators of 16 lanes (four vector registers of
/// f32) take turns, so additions overlap instead of each waiting for the
/// one before.
#[inline(always)]
fn fold<T: Float>(op: Binary, t: &[T]) -> T {
    /// The fold, and with `NAN` whether any element is a NaN (noted in the
    /// same pass: a lane keeps the last NaN it saw).
    #[inline(always)]
    fn go<T: Float, const NAN: bool>(op: Binary, t: &[T], f: impl Fn(T, T) -> T) -> (T, bool) {
        let id = identity::<T>(op);
        let (mut a0, mut a1, mut a2, mut a3) = ([id; 16], [id; 16], [id; 16], [id; 16]);
        let (mut n0, mut n1) = ([T::ZERO; 16], [T::ZERO; 16]);
        #[allow(clippy::eq_op)]
        let note = |n: T, x: T| if x != x { x } else { n };
        let chunks = t.chunks_exact(64);
        let rest = chunks.remainder();
        for c in chunks {
            step(&mut a0, &c[..16], &f);
            step(&mut a1, &c[16..32], &f);
            step(&mut a2, &c[32..48], &f);
            step(&mut a3, &c[48..64], &f);
            if NAN {
                step(&mut n0, &c[..16], &note);
                step(&mut n1, &c[16..32], &note);
                step(&mut n0, &c[32..48], &note);
                step(&mut n1, &c[48..64], &note);
            }
        }
        let mut acc = merge_lanes(id, [a0, a1, a2, a3], &f);
        #[allow(clippy::eq_op)]
        let mut nan = NAN && n0.iter().chain(&n1).any(|&x| x != x);
        for &v in rest {
            acc = f(acc, v);
            #[allow(clippy::eq_op)]
            let here = v != v;
            nan |= NAN && here;
        }
        (acc, nan)
    }
    // Maximum and minimum first fold with a plain comparison (one vector
    // instruction), which agrees with XLA's rule unless a NaN is present
    // or the result is a zero (whose sign the rule decides); those tiles
    // fold again with the full rule.
    match op {
        Binary::Add => go::<T, false>(op, t, |a, b| a + b).0,
        Binary::Mul => go::<T, false>(op, t, |a, b| a * b).0,
        Binary::Max => {
            let (fast, nan) = minmax_f32(true, t)
                .unwrap_or_else(|| go::<T, true>(op, t, |a, b| if b > a { b } else { a }));
            if fast == T::ZERO || nan {
                go::<T, false>(op, t, |a, b| combine(Binary::Max, a, b)).0
            } else {
                fast
            }
        }
        _ => {
            let (fast, nan) = minmax_f32(false, t)
                .unwrap_or_else(|| go::<T, true>(op, t, |a, b| if b < a { b } else { a }));
            if fast == T::ZERO || nan {
                go::<T, false>(op, t, |a, b| combine(Binary::Min, a, b)).0
            } else {
                fast
            }
        }
    }
}

/// Plain rows at least this long are reduced two at a time (see
/// [`fold_pair`] and `rows_generic`).
const PAIR_MIN_BYTES: usize = 2048;

/// Whether [`fold_pair`] folds rows of `T` by `op` (f32 sums on a CPU
/// with AVX2).
fn folds_pairs<T: Float>(op: Binary) -> bool {
    #[cfg(target_arch = "x86_64")]
    if matches!(op, Binary::Add)
        && std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>()
        && std::is_x86_feature_detected!("avx2")
    {
        return true;
    }
    let _ = op;
    false
}

/// [`fold`] of two rows of equal length at once, where [`folds_pairs`]
/// holds (else `None`): the rows are read in turns of a kilobyte, so that
/// two streams come from memory together and each core keeps more lines
/// in flight. Summing the rows of an f32[4096, 4096] on two threads (a
/// stand-alone loop on the AMD EPYC of 29 November 2026) moved 17.9-19
/// GB/s this way against 14.4-14.7 with `fold` one row at a time; turns of
/// 4 KiB gained nothing. In oxla the row sums took 3.1-3.6 ms against
/// 4.9-5.4 (alternating `oxla bench` runs, that host at its slowest). The
/// same generic loop over two rows (16 accumulators, more than AVX2's
/// registers) was slower than one row. Each row keeps its own lanes and
/// meets its values in the order `fold` does, so each result is exactly
/// `fold`'s.
#[inline(always)]
fn fold_pair<T: Float>(op: Binary, x: &[T], y: &[T]) -> Option<(T, T)> {
    #[cfg(target_arch = "x86_64")]
    if x.len() == y.len() && folds_pairs::<T>(op) {
        // SAFETY: T is f32 (`folds_pairs` compared the TypeIds).
        let f32s =
            |t: &[T]| unsafe { std::slice::from_raw_parts(t.as_ptr().cast::<f32>(), t.len()) };
        // SAFETY: `folds_pairs` detected AVX2.
        let (sx, sy) = unsafe { sum_pair_avx2(f32s(x), f32s(y)) };
        let whole = x.len() / 64 * 64;
        // f32 -> f64 -> f32 is exact.
        let finish = |s: f32, t: &[T]| {
            t[whole..]
                .iter()
                .fold(T::from_f64(f64::from(s)), |s, &v| s + v)
        };
        return Some((finish(sx, x), finish(sy, y)));
    }
    let _ = (op, x, y);
    None
}

/// What [`fold`] makes of the whole chunks of 64 of `x` and of `y`
/// (equally long), summed in explicit vector code: eight 8-lane sums per
/// row, two for each of `fold`'s four 16-lane ones, the rows taking turns
/// of 256 values, then merged as [`merge_lanes`] merges.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn sum_pair_avx2(x: &[f32], y: &[f32]) -> (f32, f32) {
    use std::arch::x86_64::*;
    const TURN: usize = 256;
    let whole = x.len().min(y.len()) / 64 * 64;
    let mut sums = [[_mm256_set1_ps(-0.0); 8]; 2];
    let mut at = 0;
    while at < whole {
        let end = (at + TURN).min(whole);
        for (acc, t) in sums.iter_mut().zip([x, y]) {
            let mut a = *acc;
            for c in t[at..end].chunks_exact(64) {
                for (j, s) in a.iter_mut().enumerate() {
                    // SAFETY: `c` holds 64 floats, so 8 from `8 * j`.
                    *s = _mm256_add_ps(*s, unsafe { _mm256_loadu_ps(c.as_ptr().add(8 * j)) });
                }
            }
            *acc = a;
        }
        at = end;
    }
    (merge_sums_avx(sums[0]), merge_sums_avx(sums[1]))
}

/// [`merge_lanes`] of a sum from its identity, for lanes held as
/// eight 8-lane vectors, `acc[j]` being lanes `8 * (j % 2)..` of
/// accumulator `j / 2`: the pairs in vector additions, then the lanes one
/// by one. Returning the lanes instead cost every row folded a stall: the
/// caller read them with 512-bit loads, which could not take their values
/// from this function's 256-bit stores, and then merged them lane by lane
/// (see [`merge_lanes`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
fn merge_sums_avx(acc: [std::arch::x86_64::__m256; 8]) -> f32 {
    use std::arch::x86_64::*;
    let lo = _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[4], acc[6]));
    let hi = _mm256_add_ps(_mm256_add_ps(acc[1], acc[3]), _mm256_add_ps(acc[5], acc[7]));
    let mut merged = [0.0f32; 16];
    // SAFETY: eight floats into each half of a sixteen-float array.
    unsafe {
        _mm256_storeu_ps(merged.as_mut_ptr(), lo);
        _mm256_storeu_ps(merged.as_mut_ptr().add(8), hi);
    }
    fold_merged(identity(Binary::Add), merged, &|a, b| a + b)
}

/// The fast maximum (or minimum) of f32 data and whether it holds a NaN,
/// in explicit AVX-512 code where the CPU has it: the same result as
/// `fold`'s fast pass (a plain comparison that passes NaNs by, exact in any
/// order), whose `[T; 16]` arrays LLVM's SLP vectoriser turned into
/// 512-bit `vmaxps` in one build and into 128-bit shuffles in another of
/// the same source (softmax's max fold 0.58 against 0.9 ms on one core).
/// `None` for other types and CPUs.
#[inline(always)]
fn minmax_f32<T: Float>(max: bool, t: &[T]) -> Option<(T, bool)> {
    #[cfg(target_arch = "x86_64")]
    if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() {
        // SAFETY: T is f32 (same TypeId), so the slice is one of f32.
        let xs = unsafe { std::slice::from_raw_parts(t.as_ptr().cast::<f32>(), t.len()) };
        let found = if std::is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F was just detected.
            Some(unsafe { minmax_f32_avx512(max, xs) })
        } else if std::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 was just detected.
            Some(unsafe { minmax_f32_avx2(max, xs) })
        } else {
            None
        };
        // f32 -> f64 -> f32 is exact.
        return found.map(|(v, nan)| (T::from_f64(f64::from(v)), nan));
    }
    let _ = (max, t);
    None
}

/// [`minmax_f32_avx512`] in 256-bit vectors: eight accumulators and two
/// NaN notes (AVX2 has no mask registers), twelve of the sixteen vector
/// registers with the loaded value and its comparison. The generic fold
/// with its 16-lane arrays came out as shuffles and blends around each
/// load on AVX2 (the AMD EPYC of 29 November 2026).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn minmax_f32_avx2(max: bool, t: &[f32]) -> (f32, bool) {
    use std::arch::x86_64::*;
    let id = if max {
        f32::NEG_INFINITY
    } else {
        f32::INFINITY
    };
    let mut acc = [_mm256_set1_ps(id); 8];
    let mut nan = [_mm256_setzero_ps(); 2];
    let (chunks, rest) = t.as_chunks::<64>();
    for c in chunks {
        for (k, a) in acc.iter_mut().enumerate() {
            // SAFETY: 8 floats from 8 k within a chunk of 64.
            let x = unsafe { _mm256_loadu_ps(c.as_ptr().add(8 * k)) };
            // As in the AVX-512 loop: a NaN leaves the accumulator as is.
            *a = if max {
                _mm256_max_ps(x, *a)
            } else {
                _mm256_min_ps(x, *a)
            };
            nan[k % 2] = _mm256_or_ps(nan[k % 2], _mm256_cmp_ps::<_CMP_UNORD_Q>(x, x));
        }
    }
    let mut lanes = [[0.0f32; 8]; 8];
    for (l, a) in lanes.iter_mut().zip(acc) {
        // SAFETY: 8 floats into an 8-float array.
        unsafe { _mm256_storeu_ps(l.as_mut_ptr(), a) };
    }
    let nan = _mm256_movemask_ps(_mm256_or_ps(nan[0], nan[1])) != 0;
    finish_minmax(max, lanes.as_flattened(), nan, rest)
}

/// The end of an explicit max (or min) fold: the lanes its vector loop
/// left, then the elements after its last whole chunk, folded with the
/// fast pass's plain comparison; and whether the loop or those elements
/// saw a NaN.
fn finish_minmax(max: bool, lanes: &[f32], nan: bool, rest: &[f32]) -> (f32, bool) {
    let id = if max {
        f32::NEG_INFINITY
    } else {
        f32::INFINITY
    };
    let pick = |a: f32, b: f32| {
        if max {
            if b > a { b } else { a }
        } else if b < a {
            b
        } else {
            a
        }
    };
    let r = lanes.iter().chain(rest).fold(id, |a, &b| pick(a, b));
    (r, nan || rest.iter().any(|v| v.is_nan()))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn minmax_f32_avx512(max: bool, t: &[f32]) -> (f32, bool) {
    use std::arch::x86_64::*;
    let id = if max {
        f32::NEG_INFINITY
    } else {
        f32::INFINITY
    };
    let mut acc = [_mm512_set1_ps(id); 4];
    let mut nan: __mmask16 = 0;
    let (chunks, rest) = t.as_chunks::<64>();
    for c in chunks {
        for (k, a) in acc.iter_mut().enumerate() {
            // SAFETY: 16 floats from 16 k within a chunk of 64.
            let x = unsafe { _mm512_loadu_ps(c.as_ptr().add(16 * k)) };
            // vmaxps/vminps return the second operand when either is a
            // NaN: the accumulator keeps its value, as `b > a` does.
            *a = if max {
                _mm512_max_ps(x, *a)
            } else {
                _mm512_min_ps(x, *a)
            };
            nan |= _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x);
        }
    }
    let mut lanes = [[0.0f32; 16]; 4];
    for (l, a) in lanes.iter_mut().zip(acc) {
        // SAFETY: 16 floats into a 16-float array.
        unsafe { _mm512_storeu_ps(l.as_mut_ptr(), a) };
    }
    finish_minmax(max, lanes.as_flattened(), nan != 0, rest)
}

/// A summed input `a ∘ x` or `(a ∘ x)²`, with `∘` an add, subtract or
/// product of two leaves (variance's `(x - mean)²`): folded straight from
/// the leaves, without storing the tile first.
#[derive(Clone, Copy, Debug)]
struct Mapped {
    b: Binary,
    a: usize,
    x: usize,
    square: bool,
}

impl Mapped {
    fn of(r: &ReduceLoop) -> Option<Mapped> {
        if r.op != Binary::Add {
            return None;
        }
        let arith = |b: Binary| matches!(b, Binary::Add | Binary::Sub | Binary::Mul);
        match (r.input.code.as_slice(), r.input.result) {
            ([(Op::Binary(b, Src::Leaf(a), Src::Leaf(x)), d)], Src::Reg(res))
                if res == *d && arith(*b) =>
            {
                Some(Mapped {
                    b: *b,
                    a: *a,
                    x: *x,
                    square: false,
                })
            }
            (
                [
                    (Op::Binary(b, Src::Leaf(a), Src::Leaf(x)), d1),
                    (Op::Binary(Binary::Mul, Src::Reg(p), Src::Reg(q)), d2),
                ],
                Src::Reg(res),
            ) if p == d1 && q == d1 && res == *d2 && arith(*b) => Some(Mapped {
                b: *b,
                a: *a,
                x: *x,
                square: true,
            }),
            _ => None,
        }
    }
}

/// Leaf `k` over columns `[col, col + len)` of the row at `offsets`, if it
/// is contiguous or one value throughout there.
#[inline(always)]
fn leaf<'s, T: Float>(
    sources: &[Source<'s, T>],
    space: &Space,
    offsets: &[i64],
    k: usize,
    col: usize,
    len: usize,
) -> Option<Arg<'s, T>> {
    match *sources.get(k)? {
        Source::Scalar(v) => Some(Arg::Splat(v)),
        Source::Tile(t) => t.get(col..col + len).map(Arg::Slice),
        Source::Data(d, vi) => {
            let stride = *space.strides.get(vi)?.last()?;
            let at = usize::try_from(*offsets.get(vi)?).ok()?;
            match stride {
                0 => d.get(at).copied().map(Arg::Splat),
                1 => d.get(at + col..at + col + len).map(Arg::Slice),
                _ => None,
            }
        }
        _ => None,
    }
}

/// `fold(Add, t)` of `t[i] = g(a[i], x[i])`, in the same order (so the same
/// sum), without storing `t`. Each pairing of slices and splats gets its own
/// loop over whole 64-element chunks (a splat reads a chunk of copies): with
/// one loop choosing between them per chunk, LLVM left the AVX2 code
/// scalar, and layer norm's `(x - mean)²` took about a third of its time.
#[inline(always)]
fn sum_mapped<T: Float>(
    m: Mapped,
    a: Arg<'_, T>,
    x: Arg<'_, T>,
    len: usize,
    wide: bool,
    g: impl Fn(T, T) -> T,
) -> T {
    #[inline(always)]
    fn step<T: Float>(acc: &mut [T; 16], a: &[T], x: &[T], g: &impl Fn(T, T) -> T) {
        for i in 0..16 {
            acc[i] = acc[i] + g(a[i], x[i]);
        }
    }
    /// Element `i` of every 64 goes to lane `i % 16` of accumulator
    /// `i / 16 % 4`, as in [`fold`]; the four are separate variables, as
    /// there, so that they live in registers (an array of them indexed in
    /// a loop stayed in memory, and scalar).
    #[inline(always)]
    fn lanes<'s, T: Float>(
        n: usize,
        a: impl Fn(usize) -> &'s [T],
        x: impl Fn(usize) -> &'s [T],
        g: &impl Fn(T, T) -> T,
    ) -> [[T; 16]; 4] {
        let id = identity::<T>(Binary::Add);
        let (mut a0, mut a1, mut a2, mut a3) = ([id; 16], [id; 16], [id; 16], [id; 16]);
        for k in 0..n {
            let (ca, cx) = (a(k), x(k));
            step(&mut a0, &ca[..16], &cx[..16], g);
            step(&mut a1, &ca[16..32], &cx[16..32], g);
            step(&mut a2, &ca[32..48], &cx[32..48], g);
            step(&mut a3, &ca[48..64], &cx[48..64], g);
        }
        [a0, a1, a2, a3]
    }
    let id = identity::<T>(Binary::Add);
    let n = len / 64;
    let splat = |l: Arg<'_, T>| match l {
        Arg::Splat(v) => [v; 64],
        Arg::Slice(_) => [id; 64],
    };
    let (sa, sx) = (splat(a), splat(x));
    fn chunk<T>(d: &[T], k: usize) -> &[T] {
        &d[64 * k..64 * k + 64]
    }
    let mut sum = match mapped_sum_f32(m, a, x, n, wide) {
        Some(sum) => sum,
        None => {
            let acc = match (a, x) {
                (Arg::Slice(a), Arg::Slice(x)) => lanes(n, |k| chunk(a, k), |k| chunk(x, k), &g),
                (Arg::Slice(a), Arg::Splat(_)) => lanes(n, |k| chunk(a, k), |_| &sx[..], &g),
                (Arg::Splat(_), Arg::Slice(x)) => lanes(n, |_| &sa[..], |k| chunk(x, k), &g),
                (Arg::Splat(_), Arg::Splat(_)) => lanes(n, |_| &sa[..], |_| &sx[..], &g),
            };
            merge_lanes(id, acc, &|p, q| p + q)
        }
    };
    let at = |l: Arg<'_, T>, j: usize| match l {
        Arg::Slice(d) => d[j],
        Arg::Splat(v) => v,
    };
    for j in n * 64..len {
        sum = sum + g(at(a, j), at(x, j));
    }
    sum
}

/// The sum [`sum_mapped`] makes of `n` chunks of 64 (its lanes merged as
/// [`merge_lanes`] merges), for f32 on a CPU with AVX2, in explicit vector
/// code: for `(x - mean)²` with the mean a splat, LLVM's SLP vectoriser
/// turned the generic loop's 16-lane arrays into 128-bit pieces assembled
/// element by element, about 0.85 cycles an element on the AMD EPYC of 29
/// November 2026, against 0.2 here. Each lane sums the same elements in
/// the same order, with a separate product and sum (no fused
/// multiply-add), so the result is the generic loop's to the bit. `None`
/// for other types or CPUs.
///
/// With `wide`, two slices take 512-bit vectors where the CPU has AVX-512
/// ([`mapped_sum_avx512`]): rows folded as they are written, in the
/// first-level cache.
#[inline(always)]
fn mapped_sum_f32<T: Float>(
    m: Mapped,
    a: Arg<'_, T>,
    x: Arg<'_, T>,
    n: usize,
    wide: bool,
) -> Option<T> {
    #[cfg(target_arch = "x86_64")]
    if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>()
        && std::is_x86_feature_detected!("avx2")
    {
        let f32_arg = |l: Arg<'_, T>| match l {
            // SAFETY: T is f32 (same TypeId), so the slice is one of f32.
            Arg::Slice(s) => {
                Arg::Slice(unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<f32>(), s.len()) })
            }
            // SAFETY: as above, the value is an f32.
            Arg::Splat(v) => Arg::Splat(unsafe { std::mem::transmute_copy::<T, f32>(&v) }),
        };
        let sum = match (f32_arg(a), f32_arg(x)) {
            (Arg::Slice(a), Arg::Slice(x)) if wide && std::is_x86_feature_detected!("avx512f") => {
                // SAFETY: AVX-512F was just detected.
                unsafe { mapped_sum_avx512(m, a, x, n) }?
            }
            // SAFETY: AVX2 was just detected.
            (a, x) => unsafe { mapped_sum_avx2(m, a, x, n) }?,
        };
        // f32 -> f64 -> f32 is exact.
        return Some(T::from_f64(f64::from(sum)));
    }
    let _ = (m, a, x, n, wide);
    None
}

/// [`mapped_sum_f32`]'s loop for two slices in 512-bit vectors: the
/// generic loop's four 16-lane sums, one vector each, merged as
/// [`merge_lanes`] merges. Each lane sums the same elements in the same
/// order, with a separate product and sum, so the result is the generic
/// loop's to the bit. `None` if a slice is shorter than `64 * n`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn mapped_sum_avx512(m: Mapped, a: &[f32], x: &[f32], n: usize) -> Option<f32> {
    use std::arch::x86_64::*;
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn go(a: &[f32], x: &[f32], n: usize, g: impl Fn(__m512, __m512) -> __m512) -> [[f32; 16]; 4] {
        let mut acc = [_mm512_set1_ps(identity::<f32>(Binary::Add)); 4];
        for (ca, cx) in a.chunks_exact(64).zip(x.chunks_exact(64)).take(n) {
            for (j, s) in acc.iter_mut().enumerate() {
                // SAFETY: each chunk holds 64 floats, so 16 from `16 * j`.
                let (p, q) = unsafe {
                    (
                        _mm512_loadu_ps(ca.as_ptr().add(16 * j)),
                        _mm512_loadu_ps(cx.as_ptr().add(16 * j)),
                    )
                };
                *s = _mm512_add_ps(*s, g(p, q));
            }
        }
        let mut lanes = [[0.0f32; 16]; 4];
        for (l, v) in lanes.iter_mut().zip(acc) {
            // SAFETY: 16 floats into a 16-float array.
            unsafe { _mm512_storeu_ps(l.as_mut_ptr(), v) };
        }
        lanes
    }
    if a.len() < 64 * n || x.len() < 64 * n {
        return None;
    }
    let lanes = match (m.b, m.square) {
        (Binary::Add, false) => go(a, x, n, |p, q| _mm512_add_ps(p, q)),
        (Binary::Sub, false) => go(a, x, n, |p, q| _mm512_sub_ps(p, q)),
        (_, false) => go(a, x, n, |p, q| _mm512_mul_ps(p, q)),
        (Binary::Add, true) => go(a, x, n, |p, q| {
            let v = _mm512_add_ps(p, q);
            _mm512_mul_ps(v, v)
        }),
        (Binary::Sub, true) => go(a, x, n, |p, q| {
            let v = _mm512_sub_ps(p, q);
            _mm512_mul_ps(v, v)
        }),
        (_, true) => go(a, x, n, |p, q| {
            let v = _mm512_mul_ps(p, q);
            _mm512_mul_ps(v, v)
        }),
    };
    Some(merge_lanes(
        identity::<f32>(Binary::Add),
        lanes,
        &|p: f32, q: f32| p + q,
    ))
}

/// [`mapped_sum_f32`]'s vector loop: eight 8-lane sums, two for each of
/// the generic loop's four 16-lane ones. `None` if a slice is shorter than
/// `64 * n`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn mapped_sum_avx2(m: Mapped, a: Arg<'_, f32>, x: Arg<'_, f32>, n: usize) -> Option<f32> {
    use std::arch::x86_64::*;
    let fits = |l: Arg<'_, f32>| match l {
        Arg::Slice(s) => s.len() >= 64 * n,
        Arg::Splat(_) => true,
    };
    if !fits(a) || !fits(x) {
        return None;
    }
    // Eight floats from element `i` on (`i + 8 <= 64 * n`), or the splat.
    let load = |l: Arg<'_, f32>| {
        let (p, v) = match l {
            Arg::Slice(s) => (s.as_ptr(), None),
            Arg::Splat(v) => (std::ptr::null(), Some(_mm256_set1_ps(v))),
        };
        move |i: usize| match v {
            Some(v) => v,
            // SAFETY: the slice holds at least `64 * n` floats (checked above).
            None => unsafe { _mm256_loadu_ps(p.add(i)) },
        }
    };
    // A macro rather than a function, so the loop is compiled with this
    // function's features (an `#[inline(always)]` helper cannot have them).
    macro_rules! run {
        ($g:expr) => {{
            let (la, lx, g) = (load(a), load(x), $g);
            let mut acc = [_mm256_set1_ps(-0.0); 8];
            for k in 0..n {
                for (j, s) in acc.iter_mut().enumerate() {
                    let i = 64 * k + 8 * j;
                    *s = _mm256_add_ps(*s, g(la(i), lx(i)));
                }
            }
            merge_sums_avx(acc)
        }};
    }
    let sq = |v: __m256| _mm256_mul_ps(v, v);
    Some(match (m.b, m.square) {
        (Binary::Add, false) => run!(|p, q| _mm256_add_ps(p, q)),
        (Binary::Sub, false) => run!(|p, q| _mm256_sub_ps(p, q)),
        (_, false) => run!(|p, q| _mm256_mul_ps(p, q)),
        (Binary::Add, true) => run!(|p, q| sq(_mm256_add_ps(p, q))),
        (Binary::Sub, true) => run!(|p, q| sq(_mm256_sub_ps(p, q))),
        (_, true) => run!(|p, q| sq(_mm256_mul_ps(p, q))),
    })
}

/// `$f($args..., g)` with `g` the function of `(a, x)` that mapping `$m`
/// computes.
macro_rules! with_mapped {
    ($m:expr, $f:ident($($arg:expr),*)) => {
        match ($m.b, $m.square) {
            (Binary::Add, false) => $f($($arg,)* |p, q| p + q),
            (Binary::Sub, false) => $f($($arg,)* |p, q| p - q),
            (_, false) => $f($($arg,)* |p, q| p * q),
            (Binary::Add, true) => $f($($arg,)* |p, q| {
                let v = p + q;
                v * v
            }),
            (Binary::Sub, true) => $f($($arg,)* |p, q| {
                let v = p - q;
                v * v
            }),
            (_, true) => $f($($arg,)* |p, q| {
                let v = p * q;
                v * v
            }),
        }
    };
}

/// [`sum_mapped`] for `m`'s operation.
#[inline(always)]
fn sum_of<T: Float>(m: Mapped, a: Arg<'_, T>, x: Arg<'_, T>, len: usize) -> T {
    with_mapped!(m, sum_mapped(m, a, x, len, false))
}

/// `accumulate(Add, out, t)` of `t[i] = g(a[i], x[i])` for `m`'s `g`,
/// without storing `t`.
#[inline(always)]
fn accumulate_mapped<T: Float>(m: Mapped, out: &mut [T], a: Arg<'_, T>, x: Arg<'_, T>) {
    #[inline(always)]
    fn each<T: Float>(out: &mut [T], a: Arg<'_, T>, x: Arg<'_, T>, g: impl Fn(T, T) -> T) {
        match (a, x) {
            (Arg::Slice(a), Arg::Slice(x)) => {
                for ((o, &p), &q) in out.iter_mut().zip(a).zip(x) {
                    *o = *o + g(p, q);
                }
            }
            (Arg::Slice(a), Arg::Splat(q)) => {
                for (o, &p) in out.iter_mut().zip(a) {
                    *o = *o + g(p, q);
                }
            }
            (Arg::Splat(p), Arg::Slice(x)) => {
                for (o, &q) in out.iter_mut().zip(x) {
                    *o = *o + g(p, q);
                }
            }
            (Arg::Splat(p), Arg::Splat(q)) => {
                let v = g(p, q);
                out.iter_mut().for_each(|o| *o = *o + v);
            }
        }
    }
    with_mapped!(m, each(out, a, x))
}

#[inline(always)]
fn accumulate<T: Float>(op: Binary, out: &mut [T], t: &[T]) {
    match op {
        Binary::Add => out.iter_mut().zip(t).for_each(|(o, &v)| *o = *o + v),
        Binary::Mul => out.iter_mut().zip(t).for_each(|(o, &v)| *o = *o * v),
        Binary::Max => out
            .iter_mut()
            .zip(t)
            .for_each(|(o, &v)| *o = combine(Binary::Max, *o, v)),
        _ => out
            .iter_mut()
            .zip(t)
            .for_each(|(o, &v)| *o = combine(Binary::Min, *o, v)),
    }
}

/// A row reduction folded from the tiles of the loop that computes its
/// input (see the row pipeline's folded stages): each tile is one whole
/// row of at most [`TILE`] elements, just written and still in the
/// first-level cache, so the reduction does not read it back from the
/// block later. Only the two forms whose row fold `rows_generic` computes
/// from the row's values alone: the plain input, and a mapped one.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowFold {
    op: Binary,
    mapped: Option<Mapped>,
}

impl RowFold {
    /// The fold of `r`, if its input is the plain leaf 0 or [`Mapped`].
    pub(crate) fn of(r: &ReduceLoop) -> Option<RowFold> {
        if r.input.code.is_empty() && r.input.result == Src::Leaf(0) && r.input.leaves.len() == 1 {
            return Some(RowFold {
                op: r.op,
                mapped: None,
            });
        }
        Mapped::of(r).map(|m| RowFold {
            op: r.op,
            mapped: Some(m),
        })
    }

    /// Combines `acc` with the reduction of the row `t` (every leaf of the
    /// reduction reading `t`), exactly as `rows_generic` reduces such a row
    /// (at most [`TILE`] long) where it reads it in place: the plain fold of
    /// the row, or the mapped sum from the identity.
    #[inline(always)]
    pub(crate) fn fold_into<T: Float>(&self, acc: &mut T, t: &[T]) {
        let v = match self.mapped {
            None => fold(self.op, t),
            Some(m) => {
                let (row, len) = (Arg::Slice(t), t.len());
                identity::<T>(self.op) + with_mapped!(m, sum_mapped(m, row, row, len, true))
            }
        };
        *acc = combine(self.op, *acc, v);
    }
}

/// Where the rows of the merged space write: the output offset of each
/// row's first element, from its kept dimensions.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub space: Space,
    pub classes: Vec<bool>,
    /// Output stride of each merged dimension (0 for reduced ones).
    out_strides: Vec<usize>,
}

impl Plan {
    fn out_offset(&self, row: usize) -> usize {
        let outer = &self.space.dims[..self.space.dims.len() - 1];
        let mut r = row;
        let mut o = 0usize;
        for k in (0..outer.len()).rev() {
            o += (r % outer[k]) * self.out_strides[k];
            r /= outer[k];
        }
        o
    }
}

impl ReduceLoop {
    pub(crate) fn plan(&self) -> Plan {
        let views = self.input.views();
        let (space, classes) = coalesce_classes(&self.input.dims, &views, &self.reduced);
        let mut out_strides = vec![0usize; space.dims.len()];
        let mut s = 1usize;
        for k in (0..space.dims.len()).rev() {
            if !classes[k] {
                out_strides[k] = s;
                s *= space.dims[k];
            }
        }
        Plan {
            space,
            classes,
            out_strides,
        }
    }

    fn execute<T: Float>(
        &self,
        inputs: &[&ArrayLiteral],
        pool: &Pool,
    ) -> Result<ArrayLiteral, String> {
        let init = init_value::<T>(inputs, self.init_input)?;
        let sources = self.input.resolve::<T>(inputs)?;
        let plan = self.plan();
        let n_out: usize = self.out_dims.iter().map(|&d| d as usize).product();
        let mut out = pool.filled(n_out, init);
        let dims = &plan.space.dims;
        let last = dims.len() - 1;
        let rows: usize = dims[..last].iter().product();
        let total = rows * dims[last];
        let threads = rayon::current_num_threads().max(1);
        if total >= PARALLEL_MIN && last > 0 && !plan.classes[0] && dims[0] > 1 {
            // Split the outermost (kept) dimension: each task owns a block of outputs.
            let per = dims[0].div_ceil(threads * 2);
            let rows_per_outer = rows / dims[0];
            let out_per_outer = plan.out_strides[0];
            out.par_chunks_mut(per * out_per_outer)
                .enumerate()
                .for_each(|(i, chunk)| {
                    let first = i * per * rows_per_outer;
                    let count = (chunk.len() / out_per_outer.max(1)) * rows_per_outer;
                    dispatch(
                        self,
                        &plan,
                        &sources,
                        first,
                        count,
                        0,
                        dims[last],
                        chunk,
                        i * per * out_per_outer,
                    );
                });
        } else if total >= PARALLEL_MIN
            && !plan.classes[last]
            && plan.classes[..last].iter().all(|&c| c)
        {
            // Only the innermost dimension is kept: split the rows into one
            // band per thread, each summing into a partial result of its own
            // (every thread then streams whole rows, which memory prefetches
            // best), and combine the partials. Short rows too: the mean of
            // f32[4096,1024] over axis 0 took 1.8-2.6 ms on one thread, 0.82
            // on two, and batch norm's statistics of [16,56,56,64] (rows of
            // 64) 7.0-7.9 ms against 5.0-5.3.
            let bands = threads.min(rows).max(1);
            let per = rows.div_ceil(bands);
            let identity = identity::<T>(self.op);
            let partials: Vec<Vec<T>> = (0..bands)
                .into_par_iter()
                .map(|b| {
                    let first = b * per;
                    let count = per.min(rows.saturating_sub(first));
                    let mut partial = pool.filled(n_out, identity);
                    if count > 0 {
                        dispatch(
                            self,
                            &plan,
                            &sources,
                            first,
                            count,
                            0,
                            dims[last],
                            &mut partial,
                            0,
                        );
                    }
                    partial
                })
                .collect();
            for partial in partials {
                accumulate(self.op, &mut out, &partial);
                pool.give(partial);
            }
        } else {
            dispatch(self, &plan, &sources, 0, rows, 0, dims[last], &mut out, 0);
        }
        let shape =
            ArrayShape::new(self.out_ty, self.out_dims.clone()).map_err(|e| e.to_string())?;
        let data = match self.out_ty {
            PrimitiveType::BF16 => {
                let halves = ArrayData::BF16(out.iter().map(|&v| v.to_bf16()).collect());
                pool.give(out);
                halves
            }
            PrimitiveType::F16 => {
                let halves = ArrayData::F16(out.iter().map(|&v| v.to_f16()).collect());
                pool.give(out);
                halves
            }
            _ => T::wrap(out),
        };
        ArrayLiteral::new(shape, data).map_err(|e| e.to_string())
    }
}

/// The init value, kernel input `k`, in the type the reduction computes
/// in (from a half-precision init, exactly).
pub(crate) fn init_value<T: Float>(inputs: &[&ArrayLiteral], k: usize) -> Result<T, String> {
    inputs
        .get(k)
        .and_then(|a| match a.data() {
            ArrayData::BF16(h) => h.first().map(|&v| T::from_bf16(v)),
            ArrayData::F16(h) => h.first().map(|&v| T::from_f16(v)),
            data => T::slice(data).and_then(|s| s.first().copied()),
        })
        .ok_or_else(|| "the init value is missing".to_string())
}

pub(crate) fn dispatch<T: Float>(
    r: &ReduceLoop,
    plan: &Plan,
    sources: &[Source<'_, T>],
    first_row: usize,
    rows: usize,
    col0: usize,
    cols: usize,
    out: &mut [T],
    out_base: usize,
) {
    // Room for a whole tile where rows are short (see `Packing`).
    let mut scratch = Scratch::<T>::new(&r.input, TILE.min(rows * cols).max(cols));
    dispatch_with(
        r,
        plan,
        sources,
        first_row,
        rows,
        col0,
        cols,
        out,
        out_base,
        &mut scratch,
    );
}

/// [`dispatch`] with the caller's scratch space (made by `Scratch::new`
/// for `r.input` and at least `cols` columns), which a caller running many
/// blocks of rows makes once: making it costs microseconds.
pub(crate) fn dispatch_with<T: Float>(
    r: &ReduceLoop,
    plan: &Plan,
    sources: &[Source<'_, T>],
    first_row: usize,
    rows: usize,
    col0: usize,
    cols: usize,
    out: &mut [T],
    out_base: usize,
    scratch: &mut Scratch<T>,
) {
    #[cfg(target_arch = "x86_64")]
    {
        // A sum or product of plain data takes 256-bit loads: on Zen 4 the
        // 512-bit loads that straddle cache lines made a [4096, 4096] row
        // sum 35% slower; on Zen 5 still 10-25% (1.63-1.84 ms against
        // 2.00-2.11, layer norm 1.51-1.58 against 1.66-1.73, alternating
        // `oxla bench` runs), and on the Xeon of 27 November 2026, with
        // arrays starting on a line (`AlignedAlloc`), 1.23-1.28 against
        // 1.33-1.36 ms. Reductions that compute (exp, squares) gain from
        // AVX-512, and so do maxima and minima: their fold keeps six
        // 16-lane accumulators (four for the result, two noting NaNs),
        // which AVX2 cannot hold in its sixteen registers beside the
        // loads; softmax over f32[4096, 1024] took 1.35-1.44 ms with
        // AVX-512 against 1.50-1.52 ms there.
        let wide = !r.input.code.is_empty() || matches!(r.op, Binary::Max | Binary::Min);
        if wide && std::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F (checked just above).
            return unsafe {
                rows_avx512(
                    r, plan, sources, first_row, rows, col0, cols, out, out_base, scratch,
                )
            };
        }
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            // SAFETY: the CPU supports AVX2 and FMA (checked just above).
            return unsafe {
                rows_avx2(
                    r, plan, sources, first_row, rows, col0, cols, out, out_base, scratch,
                )
            };
        }
    }
    rows_generic::<T, false>(
        r, plan, sources, first_row, rows, col0, cols, out, out_base, scratch,
    )
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
unsafe fn rows_avx512<T: Float>(
    r: &ReduceLoop,
    plan: &Plan,
    sources: &[Source<'_, T>],
    first_row: usize,
    rows: usize,
    col0: usize,
    cols: usize,
    out: &mut [T],
    out_base: usize,
    scratch: &mut Scratch<T>,
) {
    rows_generic::<T, true>(
        r, plan, sources, first_row, rows, col0, cols, out, out_base, scratch,
    )
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_avx2<T: Float>(
    r: &ReduceLoop,
    plan: &Plan,
    sources: &[Source<'_, T>],
    first_row: usize,
    rows: usize,
    col0: usize,
    cols: usize,
    out: &mut [T],
    out_base: usize,
    scratch: &mut Scratch<T>,
) {
    rows_generic::<T, true>(
        r, plan, sources, first_row, rows, col0, cols, out, out_base, scratch,
    )
}

/// Rows `[first_row, first_row + rows)` of the merged space, columns
/// `[col0, col0 + cols)` of each; `out` holds the outputs from `out_base` on.
#[inline(always)]
fn rows_generic<T: Float, const FMA: bool>(
    r: &ReduceLoop,
    plan: &Plan,
    sources: &[Source<'_, T>],
    first_row: usize,
    rows: usize,
    col0: usize,
    cols: usize,
    out: &mut [T],
    out_base: usize,
    scratch: &mut Scratch<T>,
) {
    let last = plan.space.dims.len() - 1;
    let inner_reduced = plan.classes[last];
    // The input itself, when the reduction reads it unchanged and contiguously.
    let direct = match (r.input.code.is_empty(), r.input.result, sources) {
        (true, super::fused::Src::Leaf(0), [Source::Data(d, 0)])
            if plan.space.strides[0].last() == Some(&1) =>
        {
            Some(*d)
        }
        _ => None,
    };
    let mapped = Mapped::of(r);
    let mut offsets = std::mem::take(&mut scratch.offsets);
    let row_len = plan.space.dims[last];
    let whole_rows = col0 == 0 && cols == row_len && rows > 1;
    if whole_rows
        && !(inner_reduced && direct.is_some())
        && let Some(mut pack) = Packing::new(&plan.space, sources, scratch.cap())
    {
        // Short rows: several to a tile, each row then folded or
        // accumulated from its part of it. A block's rows stay within one
        // run of the second-innermost dimension, so their outputs are this
        // far apart.
        let out_step = plan.out_strides[last - 1];
        let mut row = first_row;
        while row < first_row + rows {
            scratch.ahead.step();
            let k = pack.rows_at(row, first_row + rows - row);
            row_offsets(&plan.space, row, &mut offsets);
            pack.fill(&plan.space, sources, &offsets, k);
            let packed = &pack.sources(sources)[..sources.len()];
            let o0 = plan.out_offset(row) - out_base;
            // A mapped input, folded or accumulated from its two leaves
            // row by row, without storing the tile first.
            let block = k * row_len;
            if let Some(m) = mapped
                && let Some(a) = leaf(packed, &pack.space, &offsets, m.a, 0, block)
                && let Some(x) = leaf(packed, &pack.space, &offsets, m.x, 0, block)
            {
                for i in 0..k {
                    let o = o0 + i * out_step;
                    let (a, x) = (a.part(i * row_len, row_len), x.part(i * row_len, row_len));
                    if inner_reduced {
                        out[o] = out[o] + sum_of(m, a, x, row_len);
                    } else {
                        accumulate_mapped(m, &mut out[o..o + row_len], a, x);
                    }
                }
                row += k;
                continue;
            }
            let t = eval_tile::<T, FMA>(
                &r.input,
                &pack.space,
                packed,
                &offsets,
                0,
                k * row_len,
                scratch,
                None,
            )
            .unwrap_or_default();
            for (i, part) in t.chunks_exact(row_len).enumerate() {
                let o = o0 + i * out_step;
                if inner_reduced {
                    out[o] = combine(r.op, out[o], fold(r.op, part));
                } else {
                    accumulate(r.op, &mut out[o..o + row_len], part);
                }
            }
            row += k;
        }
        scratch.offsets = offsets;
        return;
    }
    // Long rows of plain data are read two at a time, in turns, so that two
    // streams come from memory together; an odd last row takes the loop
    // below, one row at a time as every other row does.
    let end = first_row + rows;
    let mut row = first_row;
    let long = cols * std::mem::size_of::<T>() >= PAIR_MIN_BYTES;
    // The data index of row `row`'s first column, its offsets left in `at`.
    let start = |row: usize, at: &mut Vec<i64>| {
        row_offsets(&plan.space, row, at);
        (at[0] + col0 as i64) as usize
    };
    if let Some(data) = direct.filter(|_| long && end - row > 1) {
        let mut second = Vec::with_capacity(offsets.capacity());
        if inner_reduced && folds_pairs::<T>(r.op) {
            // Sums along the rows (see `fold_pair`).
            while row + 1 < end {
                scratch.ahead.step();
                scratch.ahead.step();
                let (b0, b1) = (start(row, &mut offsets), start(row + 1, &mut second));
                let (x, y) = (&data[b0..b0 + cols], &data[b1..b1 + cols]);
                let (s0, s1) =
                    fold_pair(r.op, x, y).unwrap_or_else(|| (fold(r.op, x), fold(r.op, y)));
                let (o0, o1) = (
                    plan.out_offset(row) - out_base,
                    plan.out_offset(row + 1) - out_base,
                );
                out[o0] = combine(r.op, out[o0], s0);
                out[o1] = combine(r.op, out[o1], s1);
                row += 2;
            }
        } else if !inner_reduced {
            // Rows accumulated into kept outputs, in turns of a kilobyte:
            // the column sums of an f32[4096, 4096] took 3.0 ms against
            // 3.9-4.0 one row after the other. Each output meets the first
            // row's value and then the second's, as one row after the other
            // would give it.
            let turn = (1024 / std::mem::size_of::<T>()).max(1);
            while row + 1 < end {
                scratch.ahead.step();
                scratch.ahead.step();
                let (b0, b1) = (start(row, &mut offsets), start(row + 1, &mut second));
                let (o0, o1) = (
                    plan.out_offset(row) + col0 - out_base,
                    plan.out_offset(row + 1) + col0 - out_base,
                );
                for c in (0..cols).step_by(turn) {
                    let len = turn.min(cols - c);
                    accumulate(
                        r.op,
                        &mut out[o0 + c..o0 + c + len],
                        &data[b0 + c..b0 + c + len],
                    );
                    accumulate(
                        r.op,
                        &mut out[o1 + c..o1 + c + len],
                        &data[b1 + c..b1 + c + len],
                    );
                }
                row += 2;
            }
        }
    }
    for row in row..end {
        scratch.ahead.step();
        row_offsets(&plan.space, row, &mut offsets);
        // Absolute output index of the row's first element; `out` starts at `out_base`.
        let row_out = plan.out_offset(row);
        if inner_reduced && let Some(data) = direct {
            // A plain input read along the row: fold it in place.
            let base = (offsets[0] + col0 as i64) as usize;
            let o = row_out - out_base;
            out[o] = combine(r.op, out[o], fold(r.op, &data[base..base + cols]));
        } else if inner_reduced {
            let mut partial = identity::<T>(r.op);
            let mut c = col0;
            while c < col0 + cols {
                let len = TILE.min(col0 + cols - c);
                if let Some(m) = mapped {
                    let at = |k| leaf(sources, &plan.space, &offsets, k, c, len);
                    if let (Some(a), Some(x)) = (at(m.a), at(m.x)) {
                        partial = partial + sum_of(m, a, x, len);
                        c += len;
                        continue;
                    }
                }
                let t = eval_tile::<T, FMA>(
                    &r.input,
                    &plan.space,
                    sources,
                    &offsets,
                    c,
                    len,
                    scratch,
                    None,
                )
                .unwrap_or_default();
                partial = combine(r.op, partial, fold(r.op, t));
                c += len;
            }
            let o = row_out - out_base;
            out[o] = combine(r.op, out[o], partial);
        } else {
            let mut c = col0;
            while c < col0 + cols {
                let len = TILE.min(col0 + cols - c);
                let t = eval_tile::<T, FMA>(
                    &r.input,
                    &plan.space,
                    sources,
                    &offsets,
                    c,
                    len,
                    scratch,
                    None,
                )
                .unwrap_or_default();
                let at = row_out + c - out_base;
                accumulate(r.op, &mut out[at..at + len], t);
                c += len;
            }
        }
    }
    scratch.offsets = offsets;
}

impl Kernel for ReduceLoop {
    fn name(&self) -> &'static str {
        "fused reduction"
    }

    fn row_stage(&self) -> Option<super::pipeline::Stage> {
        Some(super::pipeline::Stage::Reduce(self.clone()))
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        let arrays: Vec<&ArrayLiteral> = inputs
            .iter()
            .map(|v| v.array().ok_or("a reduction reads arrays"))
            .collect::<Result<_, _>>()?;
        let out = match self.input.ty {
            PrimitiveType::F32 => self.execute::<f32>(&arrays, pool)?,
            PrimitiveType::F64 => self.execute::<f64>(&arrays, pool)?,
            other => return Err(format!("reductions compute in f32 or f64, not {other}")),
        };
        Ok(Value::owned(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paired_folds_are_each_rows_own_fold_bit_for_bit() {
        // Lengths around the turn (256 f32, 128 f64) and the 64-value
        // chunks, values whose sum depends on the order of additions, and
        // a NaN in some rows.
        macro_rules! check {
            ($t:ty) => {
                for len in [
                    0usize, 1, 63, 64, 65, 127, 128, 129, 255, 256, 257, 513, 1000, 4096,
                ] {
                    let values = |seed: usize| -> Vec<$t> {
                        (0..len)
                            .map(|i| {
                                let k = (i * 7919 + seed * 104729) % 1000;
                                ((k as f64 - 500.0) * 1.0e-3 * (1.0 + (k % 17) as f64 * 1.0e5))
                                    as $t
                            })
                            .collect()
                    };
                    let (x, mut y) = (values(1), values(2));
                    let near_one: Vec<$t> = x.iter().map(|&v| 1.0 + v * 1.0e-7).collect();
                    if len > 100 {
                        y[len / 3] = <$t>::NAN;
                    }
                    for (op, a, b) in [
                        (Binary::Add, &x, &y),
                        (Binary::Add, &y, &x),
                        (Binary::Mul, &near_one, &x),
                    ] {
                        let pair = fold_pair(op, a, b);
                        assert_eq!(pair.is_some(), folds_pairs::<$t>(op));
                        if let Some((p, q)) = pair {
                            assert_eq!(p.to_bits(), fold(op, a).to_bits(), "{op:?} len {len}");
                            assert_eq!(q.to_bits(), fold(op, b).to_bits(), "{op:?} len {len}");
                        }
                    }
                    // The sums do depend on the order: a plain left-to-right
                    // sum differs from the fold's for the longer rows.
                    if len == 4096 {
                        let plain = x.iter().fold(-0.0, |s: $t, &v| s + v);
                        assert_ne!(plain.to_bits(), fold(Binary::Add, &x).to_bits());
                    }
                }
            };
        }
        check!(f32);
        check!(f64);
    }

    #[test]
    fn max_and_min_folds_follow_xlas_rule_at_every_length() {
        // The explicit AVX-512 or AVX2 pass (where the CPU has it), the NaN and
        // zero fallbacks, and the scalar tail, against a plain scalar fold.
        for len in [0usize, 1, 15, 16, 63, 64, 65, 200, 1024, 1031] {
            let base: Vec<f32> = (0..len)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.25)
                .collect();
            let mut cases = vec![base.clone()];
            for k in [0, len / 2, len.saturating_sub(1)] {
                if k < len {
                    let mut t = base.clone();
                    t[k] = f32::NAN;
                    cases.push(t);
                }
            }
            // All zeros of both signs: the result's sign follows the rule.
            cases.push(
                (0..len)
                    .map(|i| if i % 3 == 1 { -0.0 } else { 0.0 })
                    .collect(),
            );
            cases.push(vec![-0.0; len]);
            for t in &cases {
                for op in [Binary::Max, Binary::Min] {
                    let got = fold(op, t);
                    let want = t
                        .iter()
                        .fold(identity::<f32>(op), |a, &b| combine(op, a, b));
                    assert!(
                        got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                        "{op:?} of {len}: {got} against {want}"
                    );
                }
            }
        }
    }

    /// A row folded as a loop writes it ([`RowFold`]) gives what the
    /// reduction gives reading the rows in place, bit for bit: plain sums
    /// (folded two rows at a time there), products, maxima and minima with
    /// NaNs and signed zeros, and the mapped forms (variance's square of a
    /// difference), at lengths around the 64-value chunks and the pairing
    /// threshold, with an odd last row.
    #[test]
    fn rows_folded_as_written_equal_the_reduction_of_the_stored_rows() {
        fn reduction(op: Binary, len: usize, rows: usize, code: Vec<(Op, usize)>) -> ReduceLoop {
            let dims = vec![rows as i64, len as i64];
            let view = crate::kernels::view::View::contiguous(&dims);
            let leaf = || super::super::fused::Leaf::Input {
                input: 0,
                ty: PrimitiveType::F32,
                view: view.clone(),
                starts: Vec::new(),
            };
            let registers = code.iter().map(|&(_, d)| d + 1).max().unwrap_or(1);
            let result = code.last().map_or(Src::Leaf(0), |&(_, d)| Src::Reg(d));
            let leaves = if code.is_empty() {
                vec![leaf()]
            } else {
                vec![leaf(), leaf()]
            };
            ReduceLoop {
                input: FusedLoop {
                    ty: PrimitiveType::F32,
                    out_ty: PrimitiveType::F32,
                    dims: dims.clone(),
                    leaves,
                    code,
                    result,
                    extra: Vec::new(),
                    registers,
                },
                reduced: vec![false, true],
                op,
                init_input: 1,
                out_dims: vec![rows as i64],
                out_ty: PrimitiveType::F32,
            }
        }
        let rows = 5;
        for len in [2usize, 63, 64, 65, 511, 512, 513, 1000, 1024] {
            let mut data: Vec<f32> = (0..rows * len)
                .map(|i| {
                    let k = (i * 7919) % 1000;
                    (k as f32 - 500.0) * 1.0e-3 * (1.0 + (k % 17) as f32 * 1.0e5)
                })
                .collect();
            data[len / 2] = f32::NAN;
            data[len + len / 3] = -0.0;
            let (l, x) = (Src::Leaf(0), Src::Leaf(1));
            let cases = [
                (Binary::Add, vec![]),
                (Binary::Mul, vec![]),
                (Binary::Max, vec![]),
                (Binary::Min, vec![]),
                (Binary::Add, vec![(Op::Binary(Binary::Mul, l, x), 0)]),
                (
                    Binary::Add,
                    vec![
                        (Op::Binary(Binary::Sub, l, x), 0),
                        (Op::Binary(Binary::Mul, Src::Reg(0), Src::Reg(0)), 1),
                    ],
                ),
            ];
            for (op, code) in cases {
                let r = reduction(op, len, rows, code);
                let fold = RowFold::of(&r).expect("a foldable reduction");
                let plan = r.plan();
                // (The pipeline folds only rows kept apart in the plan.)
                assert_eq!(plan.classes, [false, true]);
                let sources = [Source::Data(&data[..], 0), Source::Data(&data[..], 1)];
                let init = if op == Binary::Mul { 1.0f32 } else { 0.5 };
                let mut want = vec![init; rows];
                let mut scratch = Scratch::<f32>::new(&r.input, len);
                dispatch_with(
                    &r,
                    &plan,
                    &sources[..r.input.leaves.len()],
                    0,
                    rows,
                    0,
                    len,
                    &mut want,
                    0,
                    &mut scratch,
                );
                for (k, row) in data.chunks_exact(len).enumerate() {
                    let mut got = init;
                    fold.fold_into(&mut got, row);
                    assert!(
                        got.to_bits() == want[k].to_bits() || (got.is_nan() && want[k].is_nan()),
                        "{op:?} {:?}, row {k} of {len}: {got:?} against {:?}",
                        r.input.code,
                        want[k]
                    );
                }
            }
        }
    }

    /// Sums folded straight from the leaves equal the fold of the stored
    /// tile bit for bit: every operation, squared or not, every mix of
    /// slices and splats, lengths around the 64-element step.
    #[test]
    fn mapped_sums_equal_the_fold_of_the_stored_tile() {
        // f32 takes the explicit vector loop where the CPU has AVX2, f64
        // the generic one; both must give the stored tile's fold.
        mapped_sums_match::<f32>();
        mapped_sums_match::<f64>();
    }

    fn mapped_sums_match<T: Float + std::fmt::Debug>() {
        let a: Vec<T> = (0..1030)
            .map(|i| T::from_f64(((i * 37 % 101) as f64 - 50.0) * 0.173))
            .collect();
        let x: Vec<T> = (0..1030)
            .map(|i| T::from_f64(((i * 11 % 29) as f64) * 0.71 - 9.0))
            .collect();
        for b in [Binary::Add, Binary::Sub, Binary::Mul] {
            for square in [false, true] {
                let m = Mapped {
                    b,
                    a: 0,
                    x: 1,
                    square,
                };
                let g = |p: T, q: T| {
                    let v = match b {
                        Binary::Add => p + q,
                        Binary::Sub => p - q,
                        _ => p * q,
                    };
                    if square { v * v } else { v }
                };
                let (sa, sx) = (T::from_f64(-1.25), T::from_f64(0.37));
                for len in [0, 1, 63, 64, 65, 200, 1024, 1030] {
                    let cases: [(Arg<'_, T>, Arg<'_, T>); 4] = [
                        (Arg::Slice(&a[..len]), Arg::Slice(&x[..len])),
                        (Arg::Slice(&a[..len]), Arg::Splat(sx)),
                        (Arg::Splat(sa), Arg::Slice(&x[..len])),
                        (Arg::Splat(sa), Arg::Splat(sx)),
                    ];
                    for (k, (la, lx)) in cases.into_iter().enumerate() {
                        let value = |l: Arg<'_, T>, i: usize| match l {
                            Arg::Slice(d) => d[i],
                            Arg::Splat(v) => v,
                        };
                        let tile: Vec<T> =
                            (0..len).map(|i| g(value(la, i), value(lx, i))).collect();
                        let want = fold(Binary::Add, &tile);
                        let got = sum_of(m, la, lx, len);
                        // Debug prints the shortest text that reads back
                        // to the same value, and tells -0 from +0: equal
                        // text is equal bits (no NaN arises here).
                        assert_eq!(
                            format!("{got:?}"),
                            format!("{want:?}"),
                            "{b:?} squared {square}, len {len}, case {k}: {got:?} against {want:?}"
                        );
                    }
                }
            }
        }
    }
}
