//! Windowed operations: reduce-window with add, multiply, maximum or
//! minimum over floats or integers (pooling, cumulative sums), and select-and-scatter choosing the
//! maximum or minimum and adding (the gradient of max pooling).
//!
//! A reduce-window is separable for these reductions, so it runs as one
//! one-dimensional pass per windowed dimension, each vectorised along the
//! dimensions inside it; padding and dilation holes are skipped (not fed as
//! the init value, as XLA does), and the init value is combined once at the
//! end. Select-and-scatter walks each window in lexicographic order, as the
//! spec requires, splitting the work over the outer dimensions that no
//! window spans.

use oxla_hlo::ir::{ComparisonDirection, Window, WindowDim};
use oxla_hlo::{
    ArrayData, ArrayLiteral, ArrayShape, HloComputation, HloInstruction, HloModule, NativeType,
    Opcode, PrimitiveType,
};
use rayon::prelude::*;

use super::Kernel;
use super::fused::Binary;
use crate::buffer::Pool;
use crate::value::Value;

/// `op(p0, p1)` in either order, if the computation is just that.
fn binary_of(
    module: &HloModule,
    id: Option<oxla_hlo::ComputationId>,
) -> Option<(Opcode, &HloInstruction, bool)> {
    let comp = module.computations().get(id?.index())?;
    let root = comp.root_instruction();
    let params: Vec<Option<usize>> = root
        .operands
        .iter()
        .map(|o| {
            let i = comp.instruction(*o);
            (i.opcode == Opcode::Parameter)
                .then_some(i.attrs.parameter_number)
                .flatten()
        })
        .collect();
    if comp.num_parameters() != 2 {
        return None;
    }
    match params.as_slice() {
        [Some(0), Some(1)] => Some((root.opcode, root, false)),
        [Some(1), Some(0)] => Some((root.opcode, root, true)),
        _ => None,
    }
}

fn reduction(op: Opcode) -> Option<Binary> {
    Some(match op {
        Opcode::Add => Binary::Add,
        Opcode::Multiply => Binary::Mul,
        Opcode::Maximum => Binary::Max,
        Opcode::Minimum => Binary::Min,
        _ => return None,
    })
}

trait Elem: oxla_hlo::NativeType + super::minmax::MinMax {
    fn identity(op: Binary) -> Self;
    /// Whether folding `self` into a result changes nothing: the exact
    /// identity (-0.0 for float sums: +0.0 would turn -0.0 into +0.0).
    fn is_identity(self, op: Binary) -> bool;
    /// `+`, wrapping for integers as XLA's are.
    fn add(self, other: Self) -> Self;
    /// `*`, wrapping for integers.
    fn mul(self, other: Self) -> Self;
}

macro_rules! float_elem {
    ($t:ty) => {
        impl Elem for $t {
            fn identity(op: Binary) -> Self {
                match op {
                    Binary::Add => -0.0,
                    Binary::Mul => 1.0,
                    Binary::Max => <$t>::NEG_INFINITY,
                    _ => <$t>::INFINITY,
                }
            }
            fn is_identity(self, op: Binary) -> bool {
                self.to_bits() == Self::identity(op).to_bits()
            }
            #[inline(always)]
            fn add(self, other: Self) -> Self {
                self + other
            }
            #[inline(always)]
            fn mul(self, other: Self) -> Self {
                self * other
            }
        }
    };
}

float_elem!(f32);
float_elem!(f64);

macro_rules! int_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            fn identity(op: Binary) -> Self {
                match op {
                    Binary::Add => 0,
                    Binary::Mul => 1,
                    Binary::Max => <$t>::MIN,
                    _ => <$t>::MAX,
                }
            }
            fn is_identity(self, op: Binary) -> bool {
                self == Self::identity(op)
            }
            #[inline(always)]
            fn add(self, other: Self) -> Self {
                self.wrapping_add(other)
            }
            #[inline(always)]
            fn mul(self, other: Self) -> Self {
                self.wrapping_mul(other)
            }
        }
    )*};
}

int_elem!(i8, i16, i32, i64, u8, u16, u32, u64);

#[inline(always)]
fn combine<T: Elem>(op: Binary, a: T, b: T) -> T {
    match op {
        Binary::Add => a.add(b),
        Binary::Mul => a.mul(b),
        Binary::Max => super::minmax::max(a, b),
        _ => super::minmax::min(a, b),
    }
}

/// The input index along one dimension for output index `o` and window tap `k`, if not padding or a hole.
#[inline(always)]
fn tap(w: &WindowDim, size: usize, o: usize, k: usize) -> Option<usize> {
    let pos = o as i64 * w.stride + k as i64 * w.window_dilation - w.pad_low;
    if pos < 0 || pos % w.base_dilation != 0 {
        return None;
    }
    let i = (pos / w.base_dilation) as usize;
    (i < size).then_some(i)
}

fn output_size(w: &WindowDim, base: usize) -> usize {
    let dilated = if base == 0 {
        0
    } else {
        (base as i64 - 1) * w.base_dilation + 1
    };
    let padded = dilated + w.pad_low + w.pad_high;
    let span = (w.size - 1) * w.window_dilation + 1;
    if padded < span {
        0
    } else {
        ((padded - span) / w.stride + 1) as usize
    }
}

#[derive(Clone, Debug)]
pub(crate) struct ReduceWindowKernel {
    ty: PrimitiveType,
    op: Binary,
    dims: Vec<usize>,
    window: Window,
    out_dims: Vec<i64>,
}

pub(crate) fn plan_reduce_window(
    module: &HloModule,
    comp: &HloComputation,
    instr: &HloInstruction,
) -> Option<ReduceWindowKernel> {
    if instr.operands.len() != 2 {
        return None;
    }
    use PrimitiveType::*;
    let ty = instr
        .shape
        .element_type()
        .filter(|t| matches!(t, F32 | F64 | S8 | S16 | S32 | S64 | U8 | U16 | U32 | U64))?;
    let (opcode, _, _) = binary_of(module, instr.called.to_apply)?;
    let op = reduction(opcode)?;
    let dims = comp
        .instruction(instr.operands[0])
        .shape
        .as_array()?
        .dims_usize();
    Some(ReduceWindowKernel {
        ty,
        op,
        dims,
        window: instr.attrs.window.clone()?,
        out_dims: instr.shape.as_array()?.dims().to_vec(),
    })
}

/// One pass along dimension `d`: `[outer, n, inner] -> [outer, m, inner]`.
fn pass<T: Elem>(
    op: Binary,
    input: &[T],
    dims: &[usize],
    d: usize,
    w: &WindowDim,
    pool: &Pool,
) -> (Vec<T>, Vec<usize>) {
    // The operation is matched once, so each loop body is a single vector op.
    match op {
        Binary::Add => pass_with(op, input, dims, d, w, pool, T::add),
        Binary::Mul => pass_with(op, input, dims, d, w, pool, T::mul),
        Binary::Max => pass_with(op, input, dims, d, w, pool, super::minmax::max),
        _ => pass_with(op, input, dims, d, w, pool, super::minmax::min),
    }
}

#[inline(always)]
fn pass_with<T: Elem>(
    op: Binary,
    input: &[T],
    dims: &[usize],
    d: usize,
    w: &WindowDim,
    pool: &Pool,
    f: impl Fn(T, T) -> T + Sync,
) -> (Vec<T>, Vec<usize>) {
    let outer: usize = dims[..d].iter().product();
    let inner: usize = dims[d + 1..].iter().product();
    let n = dims[d];
    let m = output_size(w, n);
    let mut out_dims = dims.to_vec();
    out_dims[d] = m;
    let total = outer * m * inner;
    if total == 0 {
        return (Vec::new(), out_dims);
    }
    // A window over the whole dimension, padded to reach back to its start
    // from every output (a cumulative sum, product, maximum or minimum,
    // as JAX writes them) or forward to its end (the reversed ones): a
    // running scan instead of a window per output. The prefix scan takes
    // each output's inputs in the window's order, as the general pass does.
    let whole = w.stride == 1 && w.window_dilation == 1 && w.base_dilation == 1 && n > 0;
    let whole = whole && w.size == n as i64 && m == n;
    let prefix = whole && w.pad_low == n as i64 - 1 && w.pad_high == 0;
    let suffix = whole && w.pad_low == 0 && w.pad_high == n as i64 - 1;
    if prefix || suffix {
        let mut out = pool.filled(total, T::identity(op));
        if inner == 1 {
            // Along the innermost dimension: a dependent chain per row, so
            // rows are scanned eight at a time, their chains interleaved.
            let rows = |(g, dst): (usize, &mut [T])| {
                let src = &input[g * ROWS * n..(g * ROWS * n + dst.len())];
                scan_rows(src, dst, n, prefix, T::identity(op), &f);
            };
            if outer * n >= 1 << 16 && outer > ROWS {
                out.par_chunks_mut(ROWS * n).enumerate().for_each(rows);
            } else {
                out.chunks_mut(ROWS * n).enumerate().for_each(rows);
            }
            return (out, out_dims);
        }
        let level = simd_level();
        let scan = |(block, dst): (usize, &mut [T])| {
            let src = &input[block * n * inner..(block + 1) * n * inner];
            let id = T::identity(op);
            match level {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: the CPU has these features (simd_level checked).
                Level::Avx512 => unsafe { scan_avx512(src, dst, inner, prefix, id, &f) },
                #[cfg(target_arch = "x86_64")]
                // SAFETY: as above.
                Level::Avx2 => unsafe { scan_avx2(src, dst, inner, prefix, id, &f) },
                _ => scan_block(src, dst, inner, prefix, id, &f),
            }
        };
        if outer * n * inner >= 1 << 16 && outer > 1 {
            out.par_chunks_mut(n * inner).enumerate().for_each(scan);
        } else {
            out.chunks_mut(n * inner).enumerate().for_each(scan);
        }
        return (out, out_dims);
    }
    let taps: Vec<Vec<usize>> = (0..m)
        .map(|o| {
            (0..w.size as usize)
                .filter_map(|k| tap(w, n, o, k))
                .collect()
        })
        .collect();
    // Without base dilation, window position k of output o reads input
    // o * stride + k * dilation - pad_low: for each k, a strided run over
    // the outputs whose read is in range.
    let runs: Option<Vec<(usize, usize, usize)>> = (w.base_dilation == 1).then(|| {
        (0..w.size)
            .filter_map(|k| {
                let off = k * w.window_dilation - w.pad_low;
                let lo = (0..m).find(|&o| o as i64 * w.stride + off >= 0)?;
                let hi = (lo..m)
                    .take_while(|&o| o as i64 * w.stride + off < n as i64)
                    .last()?
                    + 1;
                Some((lo, hi, (lo as i64 * w.stride + off) as usize))
            })
            .collect()
    });
    let stride = w.stride as usize;
    let level = simd_level();
    // Every output is written, starting from the identity (`block_generic`).
    let mut out = pool.take(total);
    let id = T::identity(op);
    let work = |(block, dst): (usize, &mut [T])| {
        let src = &input[block * n * inner..(block + 1) * n * inner];
        let job = Block {
            src,
            inner,
            stride,
            runs: runs.as_deref(),
            taps: &taps,
        };
        match level {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the CPU has these features (simd_level checked).
            Level::Avx512 => unsafe { block_avx512(&job, dst, id, &f) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Level::Avx2 => unsafe { block_avx2(&job, dst, id, &f) },
            _ => block_generic(&job, dst, id, &f),
        }
    };
    if total >= 1 << 16 && outer > 1 {
        out.par_chunks_mut(m * inner).enumerate().for_each(work);
    } else {
        out.chunks_mut(m * inner).enumerate().for_each(work);
    }
    (out, out_dims)
}

/// A running scan of one block `[n, inner]` along its rows: row `o` of
/// `dst` combines rows `0..=o` of `src` (`prefix`), or rows `o..n`, from
/// `identity`, vectorised along the rows.
#[inline(always)]
fn scan_block<T: Elem>(
    src: &[T],
    dst: &mut [T],
    inner: usize,
    prefix: bool,
    identity: T,
    f: &impl Fn(T, T) -> T,
) {
    let mut rows: Vec<(&[T], usize)> = src.chunks_exact(inner).zip(0..).collect();
    if !prefix {
        rows.reverse();
    }
    let mut previous: Option<usize> = None;
    for (row, o) in rows {
        match previous {
            None => {
                for (d, &x) in dst[o * inner..(o + 1) * inner].iter_mut().zip(row) {
                    *d = f(identity, x);
                }
            }
            Some(p) => {
                // Rows p and o of dst, apart.
                let (a, b) = dst.split_at_mut(o.max(p) * inner);
                let (last, out) = match o > p {
                    true => (&a[p * inner..(p + 1) * inner], &mut b[..inner]),
                    false => (&b[..inner], &mut a[o * inner..(o + 1) * inner]),
                };
                for ((d, &acc), &x) in out.iter_mut().zip(last).zip(row) {
                    *d = f(acc, x);
                }
            }
        }
        previous = Some(o);
    }
}

/// Rows scanned together by [`scan_rows`].
const ROWS: usize = 8;

/// Running scans of up to [`ROWS`] rows of `n` (`src` and `dst` hold them
/// one after another), each from `identity`, forward (`prefix`) or from
/// the end, the rows' chains interleaved.
fn scan_rows<T: Elem>(
    src: &[T],
    dst: &mut [T],
    n: usize,
    prefix: bool,
    identity: T,
    f: &impl Fn(T, T) -> T,
) {
    let rows = dst.len() / n;
    if rows == ROWS {
        let mut acc = [identity; ROWS];
        let mut step = |i: usize| {
            for (r, a) in acc.iter_mut().enumerate() {
                *a = f(*a, src[r * n + i]);
                dst[r * n + i] = *a;
            }
        };
        match prefix {
            true => (0..n).for_each(&mut step),
            false => (0..n).rev().for_each(&mut step),
        }
        return;
    }
    for (src, dst) in src.chunks_exact(n).zip(dst.chunks_exact_mut(n)) {
        let mut acc = identity;
        let mut step = |i: usize| {
            acc = f(acc, src[i]);
            dst[i] = acc;
        };
        match prefix {
            true => (0..n).for_each(&mut step),
            false => (0..n).rev().for_each(&mut step),
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
unsafe fn scan_avx512<T: Elem>(
    src: &[T],
    dst: &mut [T],
    inner: usize,
    prefix: bool,
    identity: T,
    f: &impl Fn(T, T) -> T,
) {
    scan_block(src, dst, inner, prefix, identity, f)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn scan_avx2<T: Elem>(
    src: &[T],
    dst: &mut [T],
    inner: usize,
    prefix: bool,
    identity: T,
    f: &impl Fn(T, T) -> T,
) {
    scan_block(src, dst, inner, prefix, identity, f)
}

/// The read side of one block of a pass.
struct Block<'a, T> {
    src: &'a [T],
    inner: usize,
    stride: usize,
    /// Per window position, the outputs `[lo, hi)` it reaches and the first input it reads.
    runs: Option<&'a [(usize, usize, usize)]>,
    /// Per output, the inputs it reads (any window).
    taps: &'a [Vec<usize>],
}

#[derive(Clone, Copy)]
enum Level {
    #[cfg(target_arch = "x86_64")]
    Avx512,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    Baseline,
}

fn simd_level() -> Level {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f") {
            return Level::Avx512;
        }
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            return Level::Avx2;
        }
    }
    Level::Baseline
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
unsafe fn block_avx512<T: Elem>(b: &Block<'_, T>, dst: &mut [T], id: T, f: &impl Fn(T, T) -> T) {
    block_generic(b, dst, id, f)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn block_avx2<T: Elem>(b: &Block<'_, T>, dst: &mut [T], id: T, f: &impl Fn(T, T) -> T) {
    block_generic(b, dst, id, f)
}

/// `$go::<T, L>($args..., c)` over `[0, $n)` in chunks of `L` = 32, 16, 8
/// and then 1 elements starting at `c`.
macro_rules! by_chunks {
    ($n:expr, $go:ident($($arg:expr),*)) => {{
        let n = $n;
        let mut c = 0;
        while c + 32 <= n {
            $go::<T, 32>($($arg,)* c);
            c += 32;
        }
        if c + 16 <= n {
            $go::<T, 16>($($arg,)* c);
            c += 16;
        }
        if c + 8 <= n {
            $go::<T, 8>($($arg,)* c);
            c += 8;
        }
        while c < n {
            $go::<T, 1>($($arg,)* c);
            c += 1;
        }
    }};
}

/// Every window position of one block folded from the identity `id` into
/// `dst` (whatever it held), a chunk of outputs at a time: the chunk folds
/// every position in registers and is stored once. Folding position by
/// position straight into `dst` let LLVM turn a maximum's `*a = if b > *a { b } else { *a }`
/// into masked stores, which AMD's AVX2 cores run at a fraction of the
/// speed of plain ones (max-pool over f32[8, 64, 112, 112]: about 70% of
/// the kernel's time on a Zen 3). Each output folds its inputs in the same
/// order as before.
#[inline(always)]
fn block_generic<T: Elem>(b: &Block<'_, T>, dst: &mut [T], id: T, f: &impl Fn(T, T) -> T) {
    let src = b.src;
    if b.inner == 1 {
        // The windowed dimension is the innermost.
        match b.runs {
            Some(runs) => by_chunks!(dst.len(), runs_chunk(dst, src, runs, b.stride, id, f)),
            None => {
                for (a, taps) in dst.iter_mut().zip(b.taps) {
                    *a = taps.iter().fold(id, |acc, &i| f(acc, src[i]));
                }
            }
        }
        return;
    }
    let inner = b.inner;
    for (o, taps) in b.taps.iter().enumerate() {
        let acc = &mut dst[o * inner..(o + 1) * inner];
        by_chunks!(inner, rows_chunk(acc, src, taps, inner, id, f));
    }
}

/// Outputs `[c, c + L)` of a block whose windowed dimension is the
/// innermost: each run `(lo, hi, first)` (one window position) folds input
/// `first + (o - lo) * stride` into output `o` for `o` in `[lo, hi)`.
#[inline(always)]
fn runs_chunk<T: Elem, const L: usize>(
    dst: &mut [T],
    src: &[T],
    runs: &[(usize, usize, usize)],
    stride: usize,
    id: T,
    f: &impl Fn(T, T) -> T,
    c: usize,
) {
    let mut t = [id; L];
    for &(lo, hi, first) in runs {
        if lo <= c && c + L <= hi {
            let s = first + (c - lo) * stride;
            if stride == 2 && s + 2 * L <= src.len() {
                // Pairs, so the compiler de-interleaves with shuffles.
                let r = &src[s..s + 2 * L];
                for l in 0..L {
                    t[l] = f(t[l], r[2 * l]);
                }
            } else {
                for (l, v) in t.iter_mut().enumerate() {
                    *v = f(*v, src[s + l * stride]);
                }
            }
        } else {
            for o in lo.max(c)..hi.min(c + L) {
                t[o - c] = f(t[o - c], src[first + (o - lo) * stride]);
            }
        }
    }
    dst[c..c + L].copy_from_slice(&t);
}

/// Elements `[c, c + L)` of output row `acc`, folding input rows `taps`
/// (each `inner` long) into it.
#[inline(always)]
fn rows_chunk<T: Elem, const L: usize>(
    acc: &mut [T],
    src: &[T],
    taps: &[usize],
    inner: usize,
    id: T,
    f: &impl Fn(T, T) -> T,
    c: usize,
) {
    let mut t = [id; L];
    for &i in taps {
        let row = &src[i * inner + c..i * inner + c + L];
        for l in 0..L {
            t[l] = f(t[l], row[l]);
        }
    }
    acc[c..c + L].copy_from_slice(&t);
}

impl ReduceWindowKernel {
    fn execute<T: Elem>(&self, input: &[T], init: T, pool: &Pool) -> Vec<T> {
        let mut dims = self.dims.clone();
        let mut current: Option<Vec<T>> = None;
        for (d, w) in self.window.dims.iter().enumerate() {
            let trivial = w.size == 1
                && w.stride == 1
                && w.pad_low == 0
                && w.pad_high == 0
                && w.base_dilation == 1;
            if trivial {
                continue;
            }
            let src: &[T] = current.as_deref().unwrap_or(input);
            let (next, next_dims) = pass(self.op, src, &dims, d, w, pool);
            if let Some(done) = current.replace(next) {
                pool.give(done);
            }
            dims = next_dims;
        }
        let mut out = current.unwrap_or_else(|| {
            let mut v = pool.take(input.len());
            v.copy_from_slice(input);
            v
        });
        // Folding in the init value changes nothing when it is the
        // operation's exact identity (max with -inf, min with +inf, x * 1,
        // x + -0.0), the usual case.
        if !init.is_identity(self.op) {
            for v in out.iter_mut() {
                *v = combine(self.op, init, *v);
            }
        }
        out
    }
}

impl Kernel for ReduceWindowKernel {
    fn name(&self) -> &'static str {
        "reduce-window"
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        let (Some(x), Some(init)) = (
            inputs.first().and_then(Value::array),
            inputs.get(1).and_then(Value::array),
        ) else {
            return Err("reduce-window reads an array and an init value".into());
        };
        fn run_typed<T: Elem>(
            k: &ReduceWindowKernel,
            x: &ArrayData,
            init: &ArrayData,
            pool: &Pool,
        ) -> Option<ArrayData> {
            let (x, init) = (T::slice(x)?, T::slice(init)?);
            Some(T::wrap(k.execute(x, *init.first()?, pool)))
        }
        let (x, init) = (x.data(), init.data());
        let data = match self.ty {
            PrimitiveType::F32 => run_typed::<f32>(self, x, init, pool),
            PrimitiveType::F64 => run_typed::<f64>(self, x, init, pool),
            PrimitiveType::S8 => run_typed::<i8>(self, x, init, pool),
            PrimitiveType::S16 => run_typed::<i16>(self, x, init, pool),
            PrimitiveType::S32 => run_typed::<i32>(self, x, init, pool),
            PrimitiveType::S64 => run_typed::<i64>(self, x, init, pool),
            PrimitiveType::U8 => run_typed::<u8>(self, x, init, pool),
            PrimitiveType::U16 => run_typed::<u16>(self, x, init, pool),
            PrimitiveType::U32 => run_typed::<u32>(self, x, init, pool),
            PrimitiveType::U64 => run_typed::<u64>(self, x, init, pool),
            _ => None,
        }
        .ok_or_else(|| {
            format!(
                "reduce-window of {:?} read operands of {:?} and {:?}",
                self.ty,
                x.element_type(),
                init.element_type()
            )
        })?;
        let shape = ArrayShape::new(self.ty, self.out_dims.clone()).map_err(|e| e.to_string())?;
        Ok(Value::owned(
            ArrayLiteral::new(shape, data).map_err(|e| e.to_string())?,
        ))
    }
}

/// Select-and-scatter picking by a comparison and scattering with add.
#[derive(Clone, Debug)]
pub(crate) struct SelectScatterKernel {
    ty: PrimitiveType,
    /// Keep the current pick `a` over a new element `b` when `a dir b`.
    dir: ComparisonDirection,
    dims: Vec<usize>,
    window: Window,
}

pub(crate) fn plan_select_and_scatter(
    module: &HloModule,
    comp: &HloComputation,
    instr: &HloInstruction,
) -> Option<SelectScatterKernel> {
    let ty = instr
        .shape
        .element_type()
        .filter(|t| matches!(t, PrimitiveType::F32 | PrimitiveType::F64))?;
    let (sel, root, swapped) = binary_of(module, instr.called.select)?;
    if sel != Opcode::Compare
        || !matches!(
            root.attrs.comparison_type,
            None | Some(oxla_hlo::ir::ComparisonType::Float)
        )
    {
        return None;
    }
    let dir = root.attrs.comparison_direction?;
    // select(a, b) = compare(b, a) flips the direction.
    let dir = if swapped {
        match dir {
            ComparisonDirection::Ge => ComparisonDirection::Le,
            ComparisonDirection::Gt => ComparisonDirection::Lt,
            ComparisonDirection::Le => ComparisonDirection::Ge,
            ComparisonDirection::Lt => ComparisonDirection::Gt,
            d => d,
        }
    } else {
        dir
    };
    if !matches!(
        dir,
        ComparisonDirection::Ge
            | ComparisonDirection::Gt
            | ComparisonDirection::Le
            | ComparisonDirection::Lt
    ) {
        return None;
    }
    let (scatter, _, _) = binary_of(module, instr.called.scatter)?;
    if scatter != Opcode::Add {
        return None;
    }
    let dims = comp
        .instruction(instr.operands[0])
        .shape
        .as_array()?
        .dims_usize();
    Some(SelectScatterKernel {
        ty,
        dir,
        dims,
        window: instr.attrs.window.clone()?,
    })
}

/// The in-plane taps of each of `n` outputs along one windowed dimension
/// of `inside` elements, in window order, each times `scale`, flattened:
/// output `o`'s are `taps[start[o]..start[o + 1]]`. Returns (taps, start).
fn tap_table(n: usize, d: &WindowDim, inside: usize, scale: usize) -> (Vec<usize>, Vec<usize>) {
    let (mut taps, mut start) = (Vec::new(), vec![0usize]);
    for o in 0..n {
        let first = o as i64 * d.stride - d.pad_low;
        for k in 0..d.size {
            let i = first + k * d.window_dilation;
            if i >= 0 && i < inside as i64 {
                taps.push(i as usize * scale);
            }
        }
        start.push(taps.len());
    }
    (taps, start)
}

/// Select-and-scatter over one plane: for each source element, the window
/// position `keep` selects (the first of equals under GE or LE) receives
/// the source value.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn scatter_2d<T: Elem>(
    op: &[T],
    src: &[T],
    dst: &mut [T],
    (h, w): (usize, usize),
    (oh, ow): (usize, usize),
    wy: &WindowDim,
    wx: &WindowDim,
    keep: impl Fn(T, T) -> bool,
) {
    // The in-plane taps of each output row (as `y * w`) and column.
    let (ys, y_start) = tap_table(oh, wy, h, w);
    let (xs, x_start) = tap_table(ow, wx, w, 1);
    for oy in 0..oh {
        let rows = &ys[y_start[oy]..y_start[oy + 1]];
        for ox in 0..ow {
            let cols = &xs[x_start[ox]..x_start[ox + 1]];
            let (Some(&r0), Some(&c0)) = (rows.first(), cols.first()) else {
                continue;
            };
            // The first tap in window order, then each later one that the
            // pick does not keep over.
            let (mut best_o, mut best_v) = (r0 + c0, op[r0 + c0]);
            for &r in rows {
                for &c in cols {
                    let v = op[r + c];
                    if !keep(best_v, v) {
                        best_o = r + c;
                        best_v = v;
                    }
                }
            }
            dst[best_o] = dst[best_o].add(src[oy * ow + ox]);
        }
    }
}

/// [`scatter_2d`] over one plane of `c` channels (the innermost
/// dimension, which no window spans), the channels compared side by side.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn scatter_2d_channels<T: Elem>(
    op: &[T],
    src: &[T],
    dst: &mut [T],
    (h, w, c): (usize, usize, usize),
    (oh, ow): (usize, usize),
    wy: &WindowDim,
    wx: &WindowDim,
    keep: impl Fn(T, T) -> bool,
) {
    // Per channel: the selected element's offset and value.
    let mut best_o = vec![0usize; c];
    let mut best_v: Vec<T> = op.get(..c).map(<[T]>::to_vec).unwrap_or_default();
    let (ys, y_start) = tap_table(oh, wy, h, w);
    let (xs, x_start) = tap_table(ow, wx, w, 1);
    for oy in 0..oh {
        let rows = &ys[y_start[oy]..y_start[oy + 1]];
        for ox in 0..ow {
            let cols = &xs[x_start[ox]..x_start[ox + 1]];
            // Whether any position of the window was inside the plane.
            let mut any = false;
            for o in rows.iter().flat_map(|&r| cols.iter().map(move |&x| r + x)) {
                let o = o * c;
                let values = &op[o..o + c];
                if any {
                    // Branch-free, so the channels compare as vectors.
                    let lanes = best_v.iter_mut().zip(best_o.iter_mut()).zip(values);
                    for (ch, ((bv, bo), &v)) in lanes.enumerate() {
                        let kept = keep(*bv, v);
                        *bv = if kept { *bv } else { v };
                        *bo = if kept { *bo } else { o + ch };
                    }
                } else {
                    best_v.copy_from_slice(values);
                    for (ch, b) in best_o.iter_mut().enumerate() {
                        *b = o + ch;
                    }
                    any = true;
                }
            }
            if any {
                let s = (oy * ow + ox) * c;
                for (ch, &o) in best_o.iter().enumerate() {
                    dst[o] = dst[o].add(src[s + ch]);
                }
            }
        }
    }
}

/// The operand, source, plane and output shapes, and window of
/// [`scatter_2d_channels`].
type ChannelArgs<'a, T> = (
    &'a [T],
    &'a [T],
    (usize, usize, usize),
    (usize, usize),
    (&'a WindowDim, &'a WindowDim),
);

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
unsafe fn channels_avx512<T: Elem>(
    (op, src, hwc, out, (wy, wx)): ChannelArgs<'_, T>,
    dst: &mut [T],
    keep: &impl Fn(T, T) -> bool,
) {
    scatter_2d_channels(op, src, dst, hwc, out, wy, wx, keep)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn channels_avx2<T: Elem>(
    (op, src, hwc, out, (wy, wx)): ChannelArgs<'_, T>,
    dst: &mut [T],
    keep: &impl Fn(T, T) -> bool,
) {
    scatter_2d_channels(op, src, dst, hwc, out, wy, wx, keep)
}

impl SelectScatterKernel {
    fn execute<T: Elem>(&self, operand: &[T], source: &[T], init: T, pool: &Pool) -> Vec<T> {
        let rank = self.dims.len();
        let w = &self.window.dims;
        let out_dims: Vec<usize> = (0..rank)
            .map(|d| output_size(&w[d], self.dims[d]))
            .collect();
        let mut result = pool.filled(operand.len(), init);
        if operand.is_empty() || source.is_empty() {
            return result;
        }
        // Outer dimensions no window reaches across: independent blocks.
        let free = (0..rank)
            .take_while(|&d| {
                let wd = &w[d];
                wd.size == 1
                    && wd.stride == 1
                    && wd.pad_low == 0
                    && wd.pad_high == 0
                    && wd.base_dilation == 1
            })
            .count();
        let blocks: usize = self.dims[..free].iter().product();
        let in_block: usize = self.dims[free..].iter().product();
        let src_block: usize = out_dims[free..].iter().product();
        let in_strides = {
            let mut s = vec![1usize; rank];
            for d in (0..rank.saturating_sub(1)).rev() {
                s[d] = s[d + 1] * self.dims[d + 1];
            }
            s
        };
        // Two dimensions windowed, nothing dilating the base, and at most one
        // inner dimension the window does not span (NHWC's channels):
        // pooling's shape, with a loop nest of its own.
        let trivial = |d: &WindowDim| {
            d.size == 1
                && d.stride == 1
                && d.pad_low == 0
                && d.pad_high == 0
                && d.base_dilation == 1
                && d.window_dilation == 1
        };
        let channels = match rank - free {
            2 => Some(1),
            3 if trivial(&w[rank - 1]) => Some(self.dims[rank - 1]),
            _ => None,
        };
        let windowed = rank - free - usize::from(channels.is_some_and(|_| rank - free == 3));
        if let Some(c) = channels
            .filter(|_| windowed == 2 && w[free..free + 2].iter().all(|d| d.base_dilation == 1))
        {
            let (wy, wx) = (&w[free], &w[free + 1]);
            let (h, wd) = (self.dims[free], self.dims[free + 1]);
            let (oh, ow) = (out_dims[free], out_dims[free + 1]);
            // One plane with the selection `keep`: single values (NCHW), or
            // `c` channels side by side (NHWC).
            fn run<T: Elem>(
                op: &[T],
                src: &[T],
                dst: &mut [T],
                (h, w, c): (usize, usize, usize),
                out: (usize, usize),
                (wy, wx): (&WindowDim, &WindowDim),
                keep: impl Fn(T, T) -> bool,
            ) {
                if c == 1 {
                    return scatter_2d(op, src, dst, (h, w), out, wy, wx, keep);
                }
                let args = (op, src, (h, w, c), out, (wy, wx));
                match simd_level() {
                    // SAFETY: the CPU has the features (checked by simd_level).
                    #[cfg(target_arch = "x86_64")]
                    Level::Avx512 => unsafe { channels_avx512(args, dst, &keep) },
                    // SAFETY: as above.
                    #[cfg(target_arch = "x86_64")]
                    Level::Avx2 => unsafe { channels_avx2(args, dst, &keep) },
                    Level::Baseline => {
                        scatter_2d_channels(op, src, dst, (h, w, c), out, wy, wx, keep)
                    }
                }
            }
            let plane = |(block, dst): (usize, &mut [T])| {
                let op = &operand[block * in_block..(block + 1) * in_block];
                let src = &source[block * src_block..(block + 1) * src_block];
                let geometry = ((h, wd, c), (oh, ow), (wy, wx));
                let (hw, o, win) = geometry;
                match self.dir {
                    ComparisonDirection::Ge => run(op, src, dst, hw, o, win, |a: T, b: T| a >= b),
                    ComparisonDirection::Gt => run(op, src, dst, hw, o, win, |a: T, b: T| a > b),
                    ComparisonDirection::Le => run(op, src, dst, hw, o, win, |a: T, b: T| a <= b),
                    _ => run(op, src, dst, hw, o, win, |a: T, b: T| a < b),
                }
            };
            if blocks > 1 && operand.len() >= 1 << 16 {
                result.par_chunks_mut(in_block).enumerate().for_each(plane);
            } else {
                result
                    .chunks_mut(in_block.max(1))
                    .enumerate()
                    .for_each(plane);
            }
            return result;
        }
        let dir = self.dir;
        let keep = |a: T, b: T| match dir {
            ComparisonDirection::Ge => a >= b,
            ComparisonDirection::Gt => a > b,
            ComparisonDirection::Le => a <= b,
            _ => a < b,
        };
        let sub_dims = &out_dims[free..];
        let work = |(block, dst): (usize, &mut [T])| {
            let op = &operand[block * in_block..(block + 1) * in_block];
            let src = &source[block * src_block..(block + 1) * src_block];
            let mut pos = vec![0usize; rank - free];
            let mut taps = vec![0usize; rank - free];
            for (s_index, &value) in src.iter().enumerate() {
                let mut rem = s_index;
                for k in (0..pos.len()).rev() {
                    pos[k] = rem % sub_dims[k];
                    rem /= sub_dims[k];
                }
                // Walk the window in lexicographic order, keeping the selected element.
                let mut best: Option<(usize, T)> = None;
                taps.iter_mut().for_each(|t| *t = 0);
                'window: loop {
                    let mut off = Some(0usize);
                    for k in 0..pos.len() {
                        let d = free + k;
                        off = match (off, tap(&w[d], self.dims[d], pos[k], taps[k])) {
                            (Some(o), Some(i)) => Some(o + i * in_strides[d]),
                            _ => None,
                        };
                    }
                    if let Some(o) = off {
                        let v = op[o];
                        best = match best {
                            Some((bo, bv)) if keep(bv, v) => Some((bo, bv)),
                            _ => Some((o, v)),
                        };
                    }
                    for k in (0..taps.len()).rev() {
                        taps[k] += 1;
                        if taps[k] < w[free + k].size as usize {
                            continue 'window;
                        }
                        taps[k] = 0;
                    }
                    break;
                }
                if let Some((o, _)) = best {
                    dst[o] = dst[o].add(value);
                }
            }
        };
        if blocks > 1 && operand.len() >= 1 << 16 {
            result.par_chunks_mut(in_block).enumerate().for_each(work);
        } else {
            result
                .chunks_mut(in_block.max(1))
                .enumerate()
                .for_each(work);
        }
        result
    }
}

impl Kernel for SelectScatterKernel {
    fn name(&self) -> &'static str {
        "select-and-scatter"
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        let arrays: Vec<&ArrayLiteral> = inputs.iter().filter_map(Value::array).collect();
        let [x, s, init] = arrays.as_slice() else {
            return Err("select-and-scatter reads an operand, a source and an init value".into());
        };
        let data = match (x.data(), s.data(), init.data()) {
            (ArrayData::F32(a), ArrayData::F32(b), ArrayData::F32(i)) => {
                f32::wrap(self.execute(a, b, i[0], pool))
            }
            (ArrayData::F64(a), ArrayData::F64(b), ArrayData::F64(i)) => {
                f64::wrap(self.execute(a, b, i[0], pool))
            }
            _ => return Err("select-and-scatter operands must be f32 or f64".into()),
        };
        let shape = ArrayShape::new(
            self.ty,
            self.dims.iter().map(|&d| d as i64).collect::<Vec<_>>(),
        )
        .map_err(|e| e.to_string())?;
        Ok(Value::owned(
            ArrayLiteral::new(shape, data).map_err(|e| e.to_string())?,
        ))
    }
}
