//! `gather` and `scatter`, with full dimension numbers (batching dimensions
//! included), for any index type.
//!
//! Both run in two phases. First the start indices become one operand
//! offset per batch position (a generic loop per index type): gather clamps
//! each start so its slice lies inside the operand, scatter marks a window
//! that does not lie entirely inside as skipped. Then the windows are
//! copied (gather, for any element type, as runs of contiguous elements
//! where the layouts allow, split across threads when each batch position
//! owns a contiguous block of the result) or combined (scatter, in row-major
//! order of the updates, XLA:CPU's order, so with repeated indices the last
//! update wins under assignment). Scatter writes into its operand's buffer
//! when nothing else holds it. Scatter runs natively for one operand with an
//! assigning combiner (any type) or an add, multiply, maximum or minimum of
//! its two parameters (f32, f64, s32, s64, u32, u64); others go to the
//! interpreter.

use std::sync::Arc;

use oxla_hlo::{
    ArrayData, ArrayLiteral, HloComputation, HloInstruction, HloModule, NativeType, Opcode,
    PrimitiveType, with_array_data,
};
use rayon::prelude::*;

use super::Kernel;
use super::fused::{PARALLEL_MIN, copy_streamed, store_fence, streams};
use super::slices::{array_dims, copy_of, has_dims, row_major};
use crate::buffer::Pool;
use crate::value::{Buf, Value};

/// A batch position whose scatter window falls outside the operand.
const SKIP: usize = usize::MAX;

/// Distinct dimension numbers below `rank`.
fn dims_below(dims: &[i64], rank: usize) -> Option<Vec<usize>> {
    let out: Vec<usize> = dims
        .iter()
        .map(|&d| usize::try_from(d).ok().filter(|&d| d < rank))
        .collect::<Option<_>>()?;
    let mut sorted = out.clone();
    sorted.sort_unstable();
    sorted.dedup();
    (sorted.len() == out.len()).then_some(out)
}

/// The numbers below `n` that are not in `taken`, in order.
fn others(n: usize, taken: &[usize]) -> Vec<usize> {
    (0..n).filter(|d| !taken.contains(d)).collect()
}

/// How start indices are read: the indices array's batch dimensions, and
/// where each index vector's components go in the operand.
struct Starts {
    /// Dimensions of the indices array.
    dims: Vec<usize>,
    /// Size and stride in the indices array of each batch dimension (every
    /// dimension but the index vector's), in order.
    batch: Vec<(usize, usize)>,
    /// Stride between an index vector's components.
    component_stride: usize,
    /// The operand dimension each component starts.
    to_operand: Vec<usize>,
    /// Operand batching dimensions, with the position among `batch` of the
    /// indices dimension that gives their start.
    batching: Vec<(usize, usize)>,
}

impl Starts {
    fn new(
        dims: Vec<usize>,
        index_vector_dim: i64,
        to_operand: &[i64],
        operand_batching: &[i64],
        indices_batching: &[i64],
        operand_rank: usize,
    ) -> Option<Starts> {
        let rank = dims.len();
        let vector_dim = usize::try_from(index_vector_dim)
            .ok()
            .filter(|&d| d <= rank)?;
        let strides = row_major(&dims);
        let batch_dims = others(rank, &[vector_dim]);
        let vector_len = dims.get(vector_dim).copied().unwrap_or(1);
        let to_operand = dims_below(to_operand, operand_rank)?;
        let operand_batching = dims_below(operand_batching, operand_rank)?;
        let indices_batching = dims_below(indices_batching, rank)?;
        if to_operand.len() != vector_len
            || operand_batching.len() != indices_batching.len()
            || operand_batching.iter().any(|d| to_operand.contains(d))
        {
            return None;
        }
        let batching = operand_batching
            .iter()
            .zip(&indices_batching)
            .map(|(&od, &id)| Some((od, batch_dims.iter().position(|&b| b == id)?)))
            .collect::<Option<_>>()?;
        Some(Starts {
            batch: batch_dims.iter().map(|&d| (dims[d], strides[d])).collect(),
            component_stride: strides.get(vector_dim).copied().unwrap_or(0),
            dims,
            to_operand,
            batching,
        })
    }

    /// The operand dimensions a window spans: all but `dropped` (collapsed
    /// or inserted) and the batching ones.
    fn window_dims(&self, rank: usize, dropped: &[usize]) -> Vec<usize> {
        let mut taken = dropped.to_vec();
        taken.extend(self.batching.iter().map(|b| b.0));
        others(rank, &taken)
    }

    fn positions(&self) -> usize {
        self.batch.iter().map(|b| b.0).product()
    }

    /// The operand offset of each batch position's window, in row-major
    /// order of the batch dimensions. Each start is clamped so that `size`
    /// elements fit from it (gather), or, with `skip`, a window of `size`
    /// that does not fit is [`SKIP`]ped (scatter).
    fn offsets(
        &self,
        indices: &ArrayData,
        x_dims: &[usize],
        size: &[usize],
        skip: bool,
    ) -> Result<Vec<usize>, String> {
        macro_rules! go {
            ($($v:ident),*) => {
                match indices {
                    $(ArrayData::$v(v) => self.offsets_of(v, x_dims, size, skip),)*
                    _ => Err(format!("indices of type {} are not integers", indices.element_type())),
                }
            };
        }
        go!(S8, S16, S32, S64, U8, U16, U32, U64)
    }

    fn offsets_of<I: Index>(
        &self,
        idx: &[I],
        x_dims: &[usize],
        size: &[usize],
        skip: bool,
    ) -> Result<Vec<usize>, String> {
        if idx.len() != self.dims.iter().product::<usize>() {
            return Err("the indices are not of their declared shape".into());
        }
        let x_strides = row_major(x_dims);
        // Per component: operand stride, largest in-bounds start, index offset.
        let comps: Vec<(usize, i64, usize)> = self
            .to_operand
            .iter()
            .enumerate()
            .map(|(j, &d)| {
                let room = x_dims[d].saturating_sub(size[d]) as i64;
                (x_strides[d], room, j * self.component_stride)
            })
            .collect();
        // A window wider than its operand dimension never fits.
        let never = skip && (0..x_dims.len()).any(|d| size[d] > x_dims[d]);
        let mut out = Vec::with_capacity(self.positions());
        let mut coords = vec![0usize; self.batch.len()];
        let mut at = 0usize;
        for _ in 0..self.positions() {
            let mut offset = 0usize;
            let mut inside = !never;
            for &(stride, room, c) in &comps {
                let v = idx[at + c].get();
                if skip {
                    inside &= (0..=room).contains(&v);
                }
                offset += v.clamp(0, room) as usize * stride;
            }
            for &(od, k) in &self.batching {
                let b = coords[k];
                if b >= x_dims[od] || size[od] > x_dims[od] - b {
                    if !skip {
                        return Err(format!(
                            "batch index {b} is out of range for operand dimension {od} of size {}",
                            x_dims[od]
                        ));
                    }
                    inside = false;
                }
                offset += b * x_strides[od];
            }
            out.push(if inside || !skip { offset } else { SKIP });
            for k in (0..coords.len()).rev() {
                coords[k] += 1;
                at += self.batch[k].1;
                if coords[k] < self.batch[k].0 {
                    break;
                }
                at -= coords[k] * self.batch[k].1;
                coords[k] = 0;
            }
        }
        Ok(out)
    }
}

/// An integer index read as `i64` (u64 beyond its range saturates, which
/// clamps or skips as the true value would).
trait Index: Copy {
    fn get(self) -> i64;
}

macro_rules! index {
    ($($t:ty),*) => {$(
        impl Index for $t {
            #[inline(always)]
            fn get(self) -> i64 {
                i64::try_from(self).unwrap_or(i64::MAX)
            }
        }
    )*};
}

index!(i8, i16, i32, i64, u8, u16, u32, u64);

/// A window walked as nested loops: per dimension, outermost first, its
/// size, operand stride and result (or update) stride. Size-1 dimensions
/// are dropped and dimensions contiguous on both sides merged, so the
/// innermost loop is as long a run as the layouts allow.
fn window(dims: impl Iterator<Item = (usize, usize, usize)>) -> Vec<(usize, usize, usize)> {
    let mut out: Vec<(usize, usize, usize)> = Vec::new();
    for (n, xs, os) in dims.filter(|d| d.0 != 1) {
        match out.last_mut() {
            Some(last) if last.1 == n * xs && last.2 == n * os => {
                *last = (last.0 * n, xs, os);
            }
            _ => out.push((n, xs, os)),
        }
    }
    out
}

/// How many batch positions ahead a gather prefetches its source.
const PREFETCH_AHEAD: usize = 4;

/// Hints that `len` elements of `src` from `at` will be read soon.
#[inline(always)]
pub(crate) fn prefetch<T>(src: &[T], at: usize, len: usize) {
    let bytes = (len * size_of::<T>()).min(4096);
    if let Some(row) = src.get(at..) {
        let p = row.as_ptr() as usize;
        for line in (0..bytes).step_by(64) {
            super::fused::prefetch_line(p + line);
        }
    }
}

/// Copies the window at `s` in `src` to `d` in `dst`; runs of contiguous
/// elements with non-temporal stores when `stream`.
fn copy_window<T: Copy>(
    src: &[T],
    mut s: usize,
    dst: &mut [T],
    mut d: usize,
    w: &[(usize, usize, usize)],
    stream: bool,
) {
    match w {
        [] => dst[d] = src[s],
        [(n, 1, 1)] if stream => copy_streamed(&src[s..s + n], &mut dst[d..d + n]),
        [(n, 1, 1)] => dst[d..d + n].copy_from_slice(&src[s..s + n]),
        [(n, xs, os)] => {
            for _ in 0..*n {
                dst[d] = src[s];
                s += xs;
                d += os;
            }
        }
        [(n, xs, os), rest @ ..] => {
            for _ in 0..*n {
                copy_window(src, s, dst, d, rest, stream);
                s += xs;
                d += os;
            }
        }
    }
}

pub(crate) struct GatherKernel {
    ty: PrimitiveType,
    x_dims: Vec<usize>,
    out_dims: Vec<usize>,
    starts: Starts,
    slice_sizes: Vec<usize>,
    /// Result stride of each batch dimension, in the order of `starts.batch`.
    batch_strides: Vec<usize>,
    window: Vec<(usize, usize, usize)>,
    /// Each batch position's window is the contiguous block of the result
    /// at `position * window elements`.
    blocks: bool,
}

pub(crate) fn plan_gather(comp: &HloComputation, instr: &HloInstruction) -> Option<GatherKernel> {
    let dn = instr.attrs.gather_dnums.as_ref()?;
    let out = instr.shape.as_array()?;
    let out_dims = out.dims_usize();
    let x_dims = array_dims(comp, instr, 0)?;
    let rank = x_dims.len();
    let slice_sizes: Vec<usize> = instr
        .attrs
        .gather_slice_sizes
        .as_ref()?
        .iter()
        .map(|&s| usize::try_from(s).ok())
        .collect::<Option<_>>()?;
    let starts = Starts::new(
        array_dims(comp, instr, 1)?,
        dn.index_vector_dim,
        &dn.start_index_map,
        &dn.operand_batching_dims,
        &dn.start_indices_batching_dims,
        rank,
    )?;
    let offset_dims = dims_below(&dn.offset_dims, out_dims.len())?;
    let collapsed = dims_below(&dn.collapsed_slice_dims, rank)?;
    let window_dims = starts.window_dims(rank, &collapsed);
    let batch_out = others(out_dims.len(), &offset_dims);
    let consistent = slice_sizes.len() == rank
        && slice_sizes.iter().zip(&x_dims).all(|(s, d)| s <= d)
        && window_dims.len() == offset_dims.len()
        && offset_dims.windows(2).all(|w| w[0] < w[1])
        && batch_out.len() == starts.batch.len()
        && batch_out
            .iter()
            .zip(&starts.batch)
            .all(|(&o, b)| out_dims[o] == b.0)
        && window_dims
            .iter()
            .zip(&offset_dims)
            .all(|(&w, &o)| out_dims[o] <= slice_sizes[w])
        && others(rank, &window_dims)
            .iter()
            .all(|&c| slice_sizes[c] == 1);
    if !consistent
        || out.element_type()
            != comp
                .instruction(instr.operands[0])
                .shape
                .as_array()?
                .element_type()
    {
        return None;
    }
    let x_strides = row_major(&x_dims);
    let out_strides = row_major(&out_dims);
    let window = window(
        window_dims
            .iter()
            .zip(&offset_dims)
            .map(|(&w, &o)| (out_dims[o], x_strides[w], out_strides[o])),
    );
    let nb = batch_out.len();
    let blocks = batch_out.iter().copied().eq(0..nb);
    Some(GatherKernel {
        ty: out.element_type(),
        batch_strides: batch_out.iter().map(|&o| out_strides[o]).collect(),
        x_dims,
        out_dims,
        starts,
        slice_sizes,
        window,
        blocks,
    })
}

impl GatherKernel {
    fn execute<T: NativeType>(&self, x: &[T], offsets: &[usize], pool: &Pool) -> Vec<T> {
        let n: usize = self.out_dims.iter().product();
        let mut out = pool.take::<T>(n);
        if n == 0 {
            return out;
        }
        let w = &self.window[..];
        if self.blocks {
            let block = n / offsets.len().max(1);
            let per_task = (PARALLEL_MIN / block.max(1)).max(1);
            // Rows of 256 bytes or more stream to a large result.
            let stream = streams(&out) && w.last().is_some_and(|l| l.0 * size_of::<T>() >= 256);
            let run = |(c, chunk): (usize, &mut [T])| {
                for (i, dst) in chunk.chunks_mut(block).enumerate() {
                    let p = c * per_task + i;
                    // Rows at random places miss the cache: ask for a
                    // later one while copying this one.
                    if let Some(&ahead) = offsets.get(p + PREFETCH_AHEAD) {
                        prefetch(x, ahead, block);
                    }
                    copy_window(x, offsets[p], dst, 0, w, stream);
                }
                if stream {
                    store_fence();
                }
            };
            if n >= PARALLEL_MIN && offsets.len() > per_task {
                out.par_chunks_mut(block * per_task)
                    .enumerate()
                    .for_each(run);
            } else {
                out.chunks_mut(block * per_task).enumerate().for_each(run);
            }
            return out;
        }
        if let ([(len, xs, os)], [1]) = (w, &self.batch_strides[..])
            && *os >= offsets.len()
            && *xs > 1
        {
            // Columns (one strided window per index, adjacent in the
            // result): row by row of the result, so writes are contiguous
            // and each row's reads stay within a row of the operand.
            for j in 0..*len {
                let row = &mut out[j * os..j * os + offsets.len()];
                for (d, &o) in row.iter_mut().zip(offsets) {
                    *d = x[o + j * xs];
                }
            }
            return out;
        }
        let sizes: Vec<usize> = self.starts.batch.iter().map(|b| b.0).collect();
        let mut coords = vec![0usize; sizes.len()];
        let mut at = 0usize;
        for &offset in offsets {
            copy_window(x, offset, &mut out, at, w, false);
            for k in (0..coords.len()).rev() {
                coords[k] += 1;
                at += self.batch_strides[k];
                if coords[k] < sizes[k] {
                    break;
                }
                at -= coords[k] * self.batch_strides[k];
                coords[k] = 0;
            }
        }
        out
    }
}

impl Kernel for GatherKernel {
    fn name(&self) -> &'static str {
        "gather"
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        let (Some(x), Some(idx)) = (
            inputs.first().and_then(Value::array),
            inputs.get(1).and_then(Value::array),
        ) else {
            return Err("gather reads an operand and indices".into());
        };
        if !has_dims(x, &self.x_dims) || !has_dims(idx, &self.starts.dims) {
            return Err("gather reads arrays of their declared shapes".into());
        }
        let offsets = self
            .starts
            .offsets(idx.data(), &self.x_dims, &self.slice_sizes, false)?;
        let data: ArrayData =
            with_array_data!(x.data(), v => NativeType::wrap(self.execute(v, &offsets, pool)));
        let shape = oxla_hlo::ArrayShape::new(
            self.ty,
            self.out_dims.iter().map(|&d| d as i64).collect::<Vec<_>>(),
        )
        .map_err(|e| e.to_string())?;
        Ok(Value::owned(
            ArrayLiteral::new(shape, data).map_err(|e| e.to_string())?,
        ))
    }
}

/// How a scatter combines an operand element with an update.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Combine {
    Assign,
    Add,
    Mul,
    Max,
    Min,
}

/// The combiner `comp` computes: `p1`, or `op(p0, p1)` (`swapped`: `op(p1, p0)`).
fn combiner(module: &HloModule, instr: &HloInstruction) -> Option<(Combine, bool)> {
    let comp = module.computations().get(instr.called.to_apply?.index())?;
    if comp.num_parameters() != 2 {
        return None;
    }
    let root = comp.root_instruction();
    let param = |o: &oxla_hlo::InstrId| {
        let i = comp.instruction(*o);
        (i.opcode == Opcode::Parameter)
            .then_some(i.attrs.parameter_number)
            .flatten()
    };
    if root.opcode == Opcode::Parameter {
        return (root.attrs.parameter_number == Some(1)).then_some((Combine::Assign, false));
    }
    let op = match root.opcode {
        Opcode::Add => Combine::Add,
        Opcode::Multiply => Combine::Mul,
        Opcode::Maximum => Combine::Max,
        Opcode::Minimum => Combine::Min,
        _ => return None,
    };
    let operands: Vec<Option<usize>> = root.operands.iter().map(param).collect();
    match operands.as_slice() {
        [Some(0), Some(1)] => Some((op, false)),
        [Some(1), Some(0)] => Some((op, true)),
        _ => None,
    }
}

/// An element type scatter combines natively.
trait Combinable: NativeType {
    fn combine(op: Combine, a: Self, b: Self) -> Self;
}

macro_rules! combinable_float {
    ($($t:ty),*) => {$(
        impl Combinable for $t {
            #[inline(always)]
            fn combine(op: Combine, a: $t, b: $t) -> $t {
                match op {
                    Combine::Assign => b,
                    Combine::Add => a + b,
                    Combine::Mul => a * b,
                    Combine::Max => super::minmax::max(a, b),
                    Combine::Min => super::minmax::min(a, b),
                }
            }
        }
    )*};
}

macro_rules! combinable_int {
    ($($t:ty),*) => {$(
        impl Combinable for $t {
            #[inline(always)]
            fn combine(op: Combine, a: $t, b: $t) -> $t {
                match op {
                    Combine::Assign => b,
                    Combine::Add => a.wrapping_add(b),
                    Combine::Mul => a.wrapping_mul(b),
                    Combine::Max => a.max(b),
                    Combine::Min => a.min(b),
                }
            }
        }
    )*};
}

combinable_float!(f32, f64);
combinable_int!(i8, i16, i32, i64, u8, u16, u32, u64);

/// Half-precision combiners compute in f32 and round once, as the
/// interpreter (and XLA:CPU) does each half-precision operation.
macro_rules! combinable_half {
    ($($t:ty),*) => {$(
        impl Combinable for $t {
            #[inline(always)]
            fn combine(op: Combine, a: $t, b: $t) -> $t {
                let (x, y) = (a.to_f32(), b.to_f32());
                match op {
                    Combine::Assign => b,
                    Combine::Add => <$t>::from_f32(x + y),
                    Combine::Mul => <$t>::from_f32(x * y),
                    Combine::Max => <$t>::from_f32(super::minmax::max(x, y)),
                    Combine::Min => <$t>::from_f32(super::minmax::min(x, y)),
                }
            }
        }
    )*};
}

combinable_half!(oxla_hlo::half::f16, oxla_hlo::half::bf16);

/// One dimension of the updates: a scatter dimension moves to another batch
/// position, a window dimension along the operand.
#[derive(Clone, Copy, Debug)]
enum Step {
    Batch(usize),
    Window(usize),
}

pub(crate) struct ScatterKernel {
    x_dims: Vec<usize>,
    u_dims: Vec<usize>,
    starts: Starts,
    /// The window each update covers, per operand dimension.
    window_size: Vec<usize>,
    /// Per update dimension (one, for rank 0): its size and step.
    steps: Vec<(usize, Step)>,
    op: Combine,
    swapped: bool,
}

pub(crate) fn plan_scatter(
    module: &HloModule,
    comp: &HloComputation,
    instr: &HloInstruction,
) -> Option<ScatterKernel> {
    if instr.operands.len() != 3 {
        return None;
    }
    let dn = instr.attrs.scatter_dnums.as_ref()?;
    let x_shape = comp.instruction(instr.operands[0]).shape.as_array()?;
    let u_shape = comp.instruction(instr.operands[2]).shape.as_array()?;
    let ty = x_shape.element_type();
    let (op, swapped) = combiner(module, instr)?;
    use PrimitiveType::*;
    let typed = ty.is_integral() || matches!(ty, F16 | BF16 | F32 | F64);
    if u_shape.element_type() != ty
        || instr.shape.as_array()?.dims() != x_shape.dims()
        || (op != Combine::Assign && !typed)
    {
        return None;
    }
    let x_dims = x_shape.dims_usize();
    let u_dims = u_shape.dims_usize();
    let rank = x_dims.len();
    let starts = Starts::new(
        array_dims(comp, instr, 1)?,
        dn.index_vector_dim,
        &dn.scatter_dims_to_operand_dims,
        &dn.input_batching_dims,
        &dn.scatter_indices_batching_dims,
        rank,
    )?;
    let update_window = dims_below(&dn.update_window_dims, u_dims.len())?;
    let inserted = dims_below(&dn.inserted_window_dims, rank)?;
    let window_dims = starts.window_dims(rank, &inserted);
    let update_scatter = others(u_dims.len(), &update_window);
    if window_dims.len() != update_window.len()
        || !update_window.windows(2).all(|w| w[0] < w[1])
        || update_scatter.len() != starts.batch.len()
        || update_scatter
            .iter()
            .zip(&starts.batch)
            .any(|(&u, b)| u_dims[u] != b.0)
    {
        return None;
    }
    let mut window_size = vec![1usize; rank];
    for (&w, &u) in window_dims.iter().zip(&update_window) {
        window_size[w] = u_dims[u];
    }
    let x_strides = row_major(&x_dims);
    let batch_sizes: Vec<usize> = starts.batch.iter().map(|b| b.0).collect();
    let batch_strides = row_major(&batch_sizes);
    let mut steps: Vec<(usize, Step)> = (0..u_dims.len())
        .map(|d| match update_window.iter().position(|&w| w == d) {
            Some(k) => (u_dims[d], Step::Window(x_strides[window_dims[k]])),
            None => {
                let k = update_scatter.iter().position(|&s| s == d).unwrap_or(0);
                (u_dims[d], Step::Batch(batch_strides[k]))
            }
        })
        .collect();
    if steps.is_empty() {
        steps.push((1, Step::Window(0)));
    }
    Some(ScatterKernel {
        x_dims,
        u_dims,
        starts,
        window_size,
        steps,
        op,
        swapped,
    })
}

impl ScatterKernel {
    /// Combines the updates `u` into `x` in row-major order of the updates,
    /// split across threads by ranges of `x` when there are many: each
    /// element is still combined with its updates in that order, by the
    /// one thread that owns it.
    fn execute<T: Copy + Send + Sync>(
        &self,
        x: &mut [T],
        u: &[T],
        offsets: &[usize],
        f: impl Fn(T, T) -> T + Sync,
    ) {
        let threads = rayon::current_num_threads();
        if u.len() >= PARALLEL_MIN && threads > 1 && x.len() >= 4096 {
            let part = x.len().div_ceil(threads);
            x.par_chunks_mut(part)
                .enumerate()
                .for_each(|(i, x)| self.execute_part_dispatch(x, i * part, u, offsets, &f));
        } else {
            self.execute_part_dispatch(x, 0, u, offsets, &f);
        }
    }

    /// `execute_part` compiled for AVX2 where the CPU has it: the combining
    /// loop over a run of updates is then 256 bits wide (the baseline build
    /// has SSE2 only). Not AVX-512: like fused loops, these runs stream
    /// through memory, where 512-bit accesses are slower on Zen 5.
    fn execute_part_dispatch<T: Copy>(
        &self,
        part: &mut [T],
        lo: usize,
        u: &[T],
        offsets: &[usize],
        f: &impl Fn(T, T) -> T,
    ) {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { self.execute_part_avx2(part, lo, u, offsets, f) };
        }
        self.execute_part(part, lo, u, offsets, f)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn execute_part_avx2<T: Copy>(
        &self,
        part: &mut [T],
        lo: usize,
        u: &[T],
        offsets: &[usize],
        f: &impl Fn(T, T) -> T,
    ) {
        self.execute_part(part, lo, u, offsets, f)
    }

    /// Like `execute`, for the elements of `x` from `lo` (`part`) only.
    #[inline(always)]
    fn execute_part<T: Copy>(
        &self,
        part: &mut [T],
        lo: usize,
        u: &[T],
        offsets: &[usize],
        f: &impl Fn(T, T) -> T,
    ) {
        let Some((&(row, last), outer)) = self.steps.split_last() else {
            return;
        };
        if row == 0 || u.is_empty() {
            return;
        }
        let hi = lo + part.len();
        // Element `at` of the operand, when it is in this range.
        let one = |part: &mut [T], at: usize, v: T| {
            if let Some(a) = at.checked_sub(lo).and_then(|i| part.get_mut(i)) {
                *a = f(*a, v);
            }
        };
        let rows = u.len() / row;
        let mut coords = vec![0usize; outer.len()];
        // The batch position and window offset of the current row's start.
        let (mut p, mut w) = (0usize, 0usize);
        let all = u;
        for r in 0..rows {
            let u = &u[r * row..(r + 1) * row];
            match last {
                Step::Window(_) if offsets[p] == SKIP => {}
                Step::Window(1) => {
                    // Rows one batch position apart: ask for a later row's
                    // target (at a random place) while combining this one.
                    if let [(_, Step::Batch(1))] = outer
                        && let Some(&ahead) = offsets.get(p + PREFETCH_AHEAD)
                        && ahead != SKIP
                    {
                        let at = ahead.wrapping_sub(lo);
                        if at < part.len() {
                            prefetch(part, at, row);
                            prefetch(all, (r + PREFETCH_AHEAD) * row, row);
                        }
                    }
                    // A run: the part of it inside this range.
                    let start = offsets[p] + w;
                    let (a, b) = (start.max(lo), (start + row).min(hi));
                    if a < b {
                        let x = &mut part[a - lo..b - lo];
                        for (x, &v) in x.iter_mut().zip(&u[a - start..b - start]) {
                            *x = f(*x, v);
                        }
                    }
                }
                Step::Window(xs) => {
                    let mut at = offsets[p] + w;
                    for &v in u {
                        one(part, at, v);
                        at += xs;
                    }
                }
                Step::Batch(ps) => {
                    for (i, &v) in u.iter().enumerate() {
                        let base = offsets[p + i * ps];
                        if base != SKIP {
                            one(part, base + w, v);
                        }
                    }
                }
            }
            for k in (0..coords.len()).rev() {
                let (n, step) = outer[k];
                coords[k] += 1;
                match step {
                    Step::Batch(s) => p += s,
                    Step::Window(s) => w += s,
                }
                if coords[k] < n {
                    break;
                }
                match step {
                    Step::Batch(s) => p -= n * s,
                    Step::Window(s) => w -= n * s,
                }
                coords[k] = 0;
            }
        }
    }

    /// Combines the updates `u` into `x` at the windows `indices` start
    /// (both of the shapes planned for).
    pub(crate) fn scatter_into(
        &self,
        x: &mut ArrayData,
        indices: &ArrayData,
        u: &ArrayData,
    ) -> Result<(), String> {
        let offsets = self
            .starts
            .offsets(indices, &self.x_dims, &self.window_size, true)?;
        if x.len() != self.x_dims.iter().product::<usize>()
            || u.len() != self.u_dims.iter().product::<usize>()
        {
            return Err("scatter reads an operand and updates of their declared shapes".into());
        }
        let done = match (self.op, x.element_type()) {
            (Combine::Assign, _) => with_array_data!(x, v => self.assign(v, u, &offsets)),
            (_, PrimitiveType::F16) => self.combine_typed::<oxla_hlo::half::f16>(x, u, &offsets),
            (_, PrimitiveType::BF16) => self.combine_typed::<oxla_hlo::half::bf16>(x, u, &offsets),
            (_, PrimitiveType::F32) => self.combine_typed::<f32>(x, u, &offsets),
            (_, PrimitiveType::F64) => self.combine_typed::<f64>(x, u, &offsets),
            (_, PrimitiveType::S8) => self.combine_typed::<i8>(x, u, &offsets),
            (_, PrimitiveType::S16) => self.combine_typed::<i16>(x, u, &offsets),
            (_, PrimitiveType::S32) => self.combine_typed::<i32>(x, u, &offsets),
            (_, PrimitiveType::S64) => self.combine_typed::<i64>(x, u, &offsets),
            (_, PrimitiveType::U8) => self.combine_typed::<u8>(x, u, &offsets),
            (_, PrimitiveType::U16) => self.combine_typed::<u16>(x, u, &offsets),
            (_, PrimitiveType::U32) => self.combine_typed::<u32>(x, u, &offsets),
            (_, PrimitiveType::U64) => self.combine_typed::<u64>(x, u, &offsets),
            _ => false,
        };
        if done {
            Ok(())
        } else {
            Err("scatter reads an operand and updates of one type".into())
        }
    }

    fn combine_typed<T: Combinable>(
        &self,
        x: &mut ArrayData,
        u: &ArrayData,
        offsets: &[usize],
    ) -> bool {
        let (Some(x), Some(u)) = (T::slice_mut(x), T::slice(u)) else {
            return false;
        };
        // One loop per combiner, so each compiles to straight arithmetic.
        macro_rules! each {
            ($($op:ident),*) => {
                match (self.op, self.swapped) {
                    $(
                        (Combine::$op, false) => {
                            self.execute(x, u, offsets, |a, b| T::combine(Combine::$op, a, b))
                        }
                        (Combine::$op, true) => {
                            self.execute(x, u, offsets, |a, b| T::combine(Combine::$op, b, a))
                        }
                    )*
                }
            };
        }
        each!(Assign, Add, Mul, Max, Min);
        true
    }

    fn assign<T: NativeType>(&self, x: &mut [T], u: &ArrayData, offsets: &[usize]) -> bool {
        match T::slice(u) {
            Some(u) => {
                self.execute(x, u, offsets, |_, b| b);
                true
            }
            None => false,
        }
    }
}

impl Kernel for ScatterKernel {
    fn name(&self) -> &'static str {
        "scatter"
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        if inputs.len() != 3 {
            return Err("scatter reads an operand, indices and updates".into());
        }
        // The operand's own buffer when nothing else holds it, else a copy.
        let mut target = match std::mem::replace(&mut inputs[0], Value::Token) {
            Value::Array(Buf::Own(a)) => {
                Arc::try_unwrap(a).unwrap_or_else(|shared| copy_of(&shared, pool))
            }
            Value::Array(Buf::Arg(a)) => copy_of(a, pool),
            _ => return Err("scatter reads an array operand".into()),
        };
        if !has_dims(&target, &self.x_dims) {
            return Err("scatter reads an operand of its declared shape".into());
        }
        let (Some(idx), Some(u)) = (inputs[1].array(), inputs[2].array()) else {
            return Err("scatter reads arrays".into());
        };
        if !has_dims(idx, &self.starts.dims) || !has_dims(u, &self.u_dims) {
            return Err("scatter reads indices and updates of their declared shapes".into());
        }
        let (idx, u) = (idx.data(), u.data());
        self.scatter_into(target.data_mut(), idx, u)?;
        Ok(Value::owned(target))
    }
}
