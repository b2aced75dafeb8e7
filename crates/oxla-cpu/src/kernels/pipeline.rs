//! Row pipelines: a chain of fused reductions and loops over the same rows
//! (softmax: the row maximum, the row sum of exponentials, the quotients;
//! layer norm: mean, variance, the normalised rows) run block by block of
//! rows instead of stage by stage. Each stage still computes exactly what
//! it computes alone, over the same rows in the same order, so results are
//! unchanged; what changes is that a block of the shared input is read
//! from memory once and from cache by the later stages. Threads take
//! disjoint ranges of rows, and every stage's output rows with them.
//!
//! A chain qualifies when every stage's iteration space starts with
//! dimensions whose product is the pipeline's row count, reductions only
//! reduce dimensions after those, and a stage reads an earlier stage's
//! output only within the same row.

use oxla_hlo::{ArrayLiteral, ArrayShape, PrimitiveType};
use rayon::prelude::*;

use super::Kernel;
use super::fused::{
    self, Float, FusedLoop, Input, Leaf, PARALLEL_MIN, Scratch, Source, Space, TILE, is_half,
};
use super::reduce::{self, Plan, ReduceLoop, RowFold};
use super::view::View;
use crate::buffer::Pool;
use crate::value::Value;

/// A kernel that can be a stage of a pipeline.
#[derive(Clone, Debug)]
pub(crate) enum Stage {
    Loop(FusedLoop),
    Reduce(ReduceLoop),
}

impl Stage {
    /// The fused expression the stage evaluates.
    fn expr(&self) -> &FusedLoop {
        match self {
            Stage::Loop(f) => f,
            Stage::Reduce(r) => &r.input,
        }
    }

    fn out_dims(&self) -> &[i64] {
        match self {
            Stage::Loop(f) => &f.dims,
            Stage::Reduce(r) => &r.out_dims,
        }
    }

    /// The element type of the stage's output as a kernel of its own: the
    /// type it computes in, or bf16 or f16 (a loop narrowing its result, a
    /// row maximum or minimum of halves, which f32 computes exactly).
    fn out_ty(&self) -> PrimitiveType {
        match self {
            Stage::Loop(f) => f.out_ty,
            Stage::Reduce(r) => r.out_ty,
        }
    }
}

/// Where a stage's kernel input comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum From {
    /// The pipeline's own input.
    External(usize),
    /// An earlier stage's output.
    Stage(usize),
}

/// How a stage walks its part of a block of rows.
#[derive(Clone, Debug)]
enum Walk {
    /// `q` rows of `row_len` elements of its space per pipeline row.
    Rows {
        space: Space,
        q: usize,
        row_len: usize,
    },
    /// A one-dimensional space, one element per pipeline row.
    Span { space: Space },
    /// A reduction: `q` rows of `cols` of its space per pipeline row.
    Reduce {
        plan: Plan,
        q: usize,
        cols: usize,
        init: usize,
    },
}

impl Walk {
    fn space_mut(&mut self) -> &mut Space {
        match self {
            Walk::Rows { space, .. } | Walk::Span { space } => space,
            Walk::Reduce { plan, .. } => &mut plan.space,
        }
    }
}

#[derive(Debug)]
struct PipeStage {
    stage: Stage,
    from: Vec<From>,
    walk: Walk,
    /// Output elements per pipeline row.
    per_row: usize,
    /// Views (by index) that read an earlier stage's output, and that stage:
    /// their offsets move with the rows a thread owns.
    shifts: Vec<(usize, usize)>,
    /// bf16 or f16 for a stage whose output is of that type: its values are
    /// kept in the pipeline's type, rounded to the half type, so later
    /// stages read exactly what they would read from the half array.
    narrow: Option<PrimitiveType>,
    /// A loop stage's rows reduced by the next stage as each is written
    /// (see [`fold_pairs`]).
    fold: Option<RowFold>,
    /// A reduction that the loop stage before it folds.
    folded: bool,
}

/// A compiled pipeline.
#[derive(Debug)]
pub(crate) struct RowPipeline {
    ty: PrimitiveType,
    rows: usize,
    stages: Vec<PipeStage>,
    /// Pipeline rows per block: about [`BLOCK_BYTES`] of the widest stage's
    /// space.
    block: usize,
    /// Elements of the widest stage's space per row.
    widest: usize,
    /// The value slot each stage computes (for listings).
    outputs: Vec<usize>,
    /// Pipeline inputs read row by row in memory order, and their elements
    /// per pipeline row: the next block of each is hinted into cache while
    /// the stages compute (see [`fused::Ahead`]).
    streamed: Vec<(usize, usize)>,
}

/// Inputs of at least this many bytes have their next block hinted into
/// cache ([`fused::Ahead`]); smaller ones stay in cache between runs.
const AHEAD_MIN_BYTES: usize = 1 << 20;

/// The bytes of the widest stage's space a block of rows spans. Smaller
/// blocks keep more of a block's stages in the first-level cache, but each
/// stage of each block costs a call (sources, views, dispatch; about 90 ns
/// for a stage of one row): bf16 layer norm over f32[4096, 1024] on two
/// threads took 1.47-1.85 ms with 128 KiB blocks, 1.67-2.16 ms with 64 KiB,
/// 2.41-2.45 ms with 16 KiB and 2.73-2.89 ms with 4 KiB (one row a block;
/// alternating `oxla bench` runs, 30 November 2026). A stand-alone loop
/// that computes a whole row of it at a time, in registers and L1, took
/// 0.8-1.3 ms there (inputs rotated past the cache): the headroom left is
/// in fusing the stages of a row into one pass, not in the block's size.
/// With its row sums folded as the rows are written (see [`fold_pairs`]),
/// 8 KiB blocks took 2.20-2.26 ms, 16 KiB 1.79-2.05, 32 KiB 1.42-2.46,
/// 64 KiB 1.44-1.51, 128 KiB 1.37-1.91 and 256 KiB 1.47-1.82. Taking
/// each row through all the stages before the next (kept stages one row
/// long, the one-value-a-row stages computed as single values rather than
/// tiles) took 3.3-3.9 ms against 2.3-2.6 for these blocks on one core
/// (alternating runs of one build): the three loop stages' calls a row
/// (sources, dispatch, a tile's setup) cost more than the second-level
/// cache traffic they save. The stand-alone loop's speed needs the stages
/// of a row compiled into one pass, not called one after another (XLA's
/// CPU backend hands this whole graph to one YNNPACK fusion). Rows taken
/// one at a time through the same calls, with the next row's input hinted
/// into cache, took 2.18-2.35 ms against 1.35-1.39 ms for these blocks on
/// two threads, and 4.3 against 2.4 ms on one core. There the calls for
/// the one-value-a-row stages took 15% of the time, the choice of each
/// stage's sources and offsets 20%, and the hints and streamed stores
/// waited on memory: one core read and wrote 7.5 GB/s where the
/// stand-alone loop, row by row, moves 23 (30 November 2026).
///
/// A leaner row at a time was slower too (1 December 2026): one-value-a-row
/// stages computed as single values instead of tiles of one, each stage's
/// sources resolved once per range with the earlier stages' rows in a small
/// arena (the same bits as blocks, checked on softmax, log-softmax and both
/// layer norms), and each output row streamed once computed. On two
/// threads bf16 layer norm took 2.45-3.71 ms with the next row hinted
/// (2.25-3.86 two rows ahead, 2.92-3.76 unhinted) against 2.46-3.02 ms for
/// these blocks, softmax 4.33-5.36 against 3.76-4.15, and on one core
/// 4.50-7.39 against 3.57-5.78 (alternating runs in a slow hour of the
/// AVX2 EPYC). The single values sit on each row's critical path (8% of
/// the samples, mostly the reciprocal square root's division and root),
/// and the streamed stores waited for memory as long as before (18% of the
/// loop's samples): spreading them over the rows does not make them cheaper.
///
/// What a block in L1 would save is small: on one core, 16 KiB blocks
/// (the two kept blocks in L1) cut the samples in the bf16 roundings by
/// 21% and in the variance's fold by 11%, about 800 of 7,500 in all, while
/// the calls of the one-value-a-row stages, now eight times as many, took
/// about 1,150 more (`perf record` of 600 runs each, 30 November 2026).
const BLOCK_BYTES: usize = 128 << 10;

/// An empty vector of sources with `v`'s allocation, for borrows of
/// another lifetime: the stages' sources are resolved block by block,
/// against outputs borrowed anew for each block, without allocating.
#[allow(clippy::unnecessary_filter_map)] // (It changes the lifetime.)
fn recycle<'b, T>(mut v: Vec<Source<'_, T>>) -> Vec<Source<'b, T>> {
    v.clear();
    v.into_iter().filter_map(|_| None).collect()
}

/// The smallest `k` with `dims[..k]` multiplying to `rows`.
fn leading(dims: &[i64], rows: usize) -> Option<usize> {
    let mut p = 1usize;
    for (k, &d) in dims.iter().enumerate() {
        if p == rows {
            return Some(k);
        }
        p = p.checked_mul(usize::try_from(d).ok()?)?;
    }
    (p == rows).then_some(dims.len())
}

/// Whether `view` over `dims` (the first `k` leading) reads, for each
/// pipeline row, only that row of a buffer with `per_row` elements a row.
fn row_local(view: &View, dims: &[i64], k: usize, per_row: usize) -> bool {
    let per_row = per_row as i64;
    // Leading dimensions: the row-major index over them, times the row size.
    let mut expected = per_row;
    for d in (0..k).rev() {
        if dims[d] != 1 && view.strides[d] != expected {
            return false;
        }
        expected *= dims[d];
    }
    // The rest stays inside the row.
    let (mut lo, mut hi) = (view.offset, view.offset);
    for (&size, &stride) in dims.iter().zip(&view.strides).skip(k) {
        let span = (size - 1) * stride;
        if span < 0 {
            lo += span;
        } else {
            hi += span;
        }
    }
    lo >= 0 && hi < per_row
}

/// The elements per pipeline row of a buffer that `view` over `dims` (the
/// first `k` leading) reads as consecutive runs, one per row in order: row
/// `r` within elements `[r * n, (r + 1) * n)`.
fn row_run(view: &View, dims: &[i64], k: usize) -> Option<usize> {
    let d = (0..k).rev().find(|&d| dims[d] != 1)?;
    let n = view.strides[d];
    (n > 0 && row_local(view, dims, k, n as usize)).then_some(n as usize)
}

/// Compiles a chain of stages: each with the value slots of its kernel
/// inputs and its own output slot. Returns the pipeline and the slots of
/// its inputs, or `None` if the chain does not qualify.
pub(crate) fn build(chain: &[(Stage, Vec<usize>, usize)]) -> Option<(RowPipeline, Vec<usize>)> {
    // The rows are those of the first reduction (loops before it, as a
    // value kept for the reductions and loops after it, take them too).
    let first = chain.iter().find_map(|(s, ..)| match s {
        Stage::Reduce(r) => Some(r),
        Stage::Loop(_) => None,
    })?;
    let ty = first.input.ty;
    let k0 = first.reduced.iter().position(|&r| r)?;
    let rows: usize = first.input.dims[..k0]
        .iter()
        .map(|&d| usize::try_from(d).ok())
        .product::<Option<usize>>()?;
    if rows < 2 || chain.len() < 2 {
        return None;
    }
    let mut externals: Vec<usize> = Vec::new();
    let mut streamed: Vec<(usize, usize)> = Vec::new();
    let mut stages: Vec<PipeStage> = Vec::new();
    let mut widest = 1usize;
    for (s, (stage, inputs, _)) in chain.iter().enumerate() {
        let expr = stage.expr();
        // A half-typed output only inside the chain (the pipeline's result
        // is of its own type), and only from f32.
        let out_ty = stage.out_ty();
        let inner = s + 1 < chain.len();
        let narrow = (is_half(out_ty) && inner && ty == PrimitiveType::F32).then_some(out_ty);
        if expr.ty != ty || (out_ty != ty && narrow.is_none()) || expr.dims.iter().any(|&d| d <= 0)
        {
            return None;
        }
        let dims = &expr.dims;
        let k = leading(dims, rows)?;
        let elements: usize = dims.iter().map(|&d| d as usize).product();
        widest = widest.max(elements / rows);
        let from: Vec<From> = inputs
            .iter()
            .map(|slot| match chain[..s].iter().position(|c| c.2 == *slot) {
                Some(t) => From::Stage(t),
                None => {
                    let j = externals.iter().position(|e| e == slot).unwrap_or_else(|| {
                        externals.push(*slot);
                        externals.len() - 1
                    });
                    From::External(j)
                }
            })
            .collect();
        // Inputs read in memory order, a contiguous run per pipeline row.
        for leaf in &expr.leaves {
            if let Leaf::Input { input, view, .. } = leaf
                && let Some(From::External(j)) = from.get(*input)
                && let Some(per_row) = row_run(view, dims, k)
                && !streamed.contains(&(*j, per_row))
            {
                streamed.push((*j, per_row));
            }
        }
        // Reads of earlier stages: float data, within the row.
        let mut shifts = Vec::new();
        let mut view_index = 0usize;
        for leaf in &expr.leaves {
            match leaf {
                Leaf::Scalar(_) => continue,
                Leaf::Affine(_) => {}
                Leaf::Input {
                    input,
                    ty: lty,
                    view,
                    starts,
                } => {
                    // (Loops with dynamic starts are never stages.)
                    if !starts.is_empty() {
                        return None;
                    }
                    if let From::Stage(t) = *from.get(*input)? {
                        let held: &PipeStage = &stages[t];
                        if *lty != held.stage.out_ty() || !row_local(view, dims, k, held.per_row) {
                            return None;
                        }
                        shifts.push((view_index, t));
                    }
                }
            }
            view_index += 1;
        }
        let out_len: usize = stage.out_dims().iter().map(|&d| d as usize).product();
        if !out_len.is_multiple_of(rows) {
            return None;
        }
        let walk = match stage {
            Stage::Loop(f) => {
                let inner: Vec<bool> = (0..dims.len()).map(|d| d >= k).collect();
                let views = f.views();
                let (space, classes) = fused::coalesce_classes(dims, &views, &inner);
                let last = space.dims.len() - 1;
                if classes[last] {
                    let lead: usize = (0..last)
                        .filter(|&i| !classes[i])
                        .map(|i| space.dims[i])
                        .product();
                    if lead != rows {
                        return None;
                    }
                    let q = (0..last)
                        .filter(|&i| classes[i])
                        .map(|i| space.dims[i])
                        .product();
                    Walk::Rows {
                        row_len: space.dims[last],
                        space,
                        q,
                    }
                } else if space.dims == [rows] {
                    Walk::Span { space }
                } else {
                    return None;
                }
            }
            Stage::Reduce(r) => {
                if r.reduced
                    .iter()
                    .take(k)
                    .zip(dims)
                    .any(|(&red, &d)| red && d != 1)
                {
                    return None;
                }
                let init = match *from.get(r.init_input)? {
                    From::External(j) => j,
                    From::Stage(_) => return None,
                };
                let plan = r.plan();
                let last = plan.space.dims.len() - 1;
                let space_rows: usize = plan.space.dims[..last].iter().product();
                if !space_rows.is_multiple_of(rows) || space_rows < rows {
                    return None;
                }
                Walk::Reduce {
                    cols: plan.space.dims[last],
                    q: space_rows / rows,
                    plan,
                    init,
                }
            }
        };
        stages.push(PipeStage {
            stage: stage.clone(),
            from,
            walk,
            per_row: out_len / rows,
            shifts,
            narrow,
            fold: None,
            folded: false,
        });
    }
    fold_pairs(&mut stages);
    let row_bytes = widest * if ty == PrimitiveType::F64 { 8 } else { 4 };
    let block = (BLOCK_BYTES / row_bytes.max(1)).clamp(1, rows);
    Some((
        RowPipeline {
            ty,
            rows,
            stages,
            block,
            widest,
            outputs: chain.iter().map(|c| c.2).collect(),
            streamed,
        },
        externals,
    ))
}

/// Marks each reduction that reduces the rows of the loop stage just before
/// it, as that loop writes them: a row of at most [`TILE`] elements is one
/// tile, folded while it is in the first-level cache instead of read back
/// from the block (which has left it for the second-level cache by then).
/// The reduction must read nothing but the loop's output, each row in
/// place, in one of the forms [`RowFold`] folds; the loop must write its
/// rows as they are (not rounded afterwards to a half type) and read no
/// operand down columns (which would split its rows into tiles). Each
/// row's result is the one the reduction computes on its own, to the bit.
///
/// The folds are still a large part of bf16 layer norm's time: skipping
/// both of its folds (a measurement only, with wrong results) took it
/// from 1.44-1.58 to 1.24-1.29 ms on two threads, and skipping the plain
/// sum alone about 5% (alternating runs of one build, 30 November 2026).
/// Each fold is a second pass over a row in L1 whose additions are a
/// latency chain: sixteen dependent additions in each of four
/// accumulators, then sixteen more merging the lanes one by one. Summing
/// in the loop that rounds and writes the row instead, in the same order
/// (the same sums to the bit), did not recover it: 1.29-1.66 ms against
/// 1.29-1.44 (six alternating runs of each build), and bf16 softmax
/// 1.90-2.17 against 1.95-2.05. On one core the folds' time went, in
/// the profile, to the streamed stores of the last stage, which then
/// waited longer for memory. Merging the lanes as a tree would change
/// every sum's bits, for a gain (about 3%) within the host's noise.
fn fold_pairs(stages: &mut [PipeStage]) {
    for s in 1..stages.len() {
        let (before, after) = stages.split_at_mut(s);
        let (p, red) = (&mut before[s - 1], &mut after[0]);
        let (
            Walk::Rows {
                space,
                q: 1,
                row_len,
            },
            Stage::Reduce(r),
            Walk::Reduce {
                plan, q: 1, cols, ..
            },
        ) = (&p.walk, &red.stage, &red.walk)
        else {
            continue;
        };
        let n = *row_len;
        // The loop reads no operand down columns: every input leaf steps
        // along its rows by one element or none.
        let mut along_rows = true;
        let mut view_index = 0usize;
        for leaf in &p.stage.expr().leaves {
            match leaf {
                Leaf::Scalar(_) => continue,
                Leaf::Affine(_) => {}
                Leaf::Input { .. } => {
                    along_rows &= matches!(space.strides[view_index].last(), Some(0 | 1))
                }
            }
            view_index += 1;
        }
        // Every leaf of the reduction reads the loop's row in place.
        let in_place = r.input.leaves.iter().enumerate().all(|(vi, leaf)| {
            matches!(leaf, Leaf::Input { input, .. }
                if red.from.get(*input) == Some(&From::Stage(s - 1)))
                && plan.space.strides.get(vi).map(Vec::as_slice) == Some(&[n as i64, 1][..])
                && plan.space.offsets.get(vi) == Some(&0)
        });
        if *cols == n
            && n <= TILE
            && along_rows
            && in_place
            && p.narrow.is_none()
            && p.per_row == n
            && red.per_row == 1
            && plan.classes == [false, true]
            && let Some(fold) = RowFold::of(r)
        {
            p.fold = Some(fold);
            red.folded = true;
        }
    }
}

impl RowPipeline {
    fn execute<T: Float>(
        &self,
        inputs: &[&ArrayLiteral],
        pool: &Pool,
    ) -> Result<ArrayLiteral, String> {
        let rows = self.rows;
        let mut bufs: Vec<Vec<T>> = self
            .stages
            .iter()
            .enumerate()
            .map(|(k, s)| pool.take::<T>(if self.local(k) { 0 } else { s.per_row * rows }))
            .collect();
        // Four ranges a thread, so a thread slowed by the host leaves some
        // to the other. Each range costs its own setup (scratch, sources)
        // and a first block that no hint brought into cache: bf16 layer
        // norm over f32[4096, 1024] on two threads took a median 1.46,
        // 1.49, 1.54-1.70, 1.90 and 1.72 ms with 1, 2, 4, 8 and 16 ranges
        // a thread (within this host's noise) but 2.64 ms with 32, about
        // 35 us a range. Hinting the next range's first block during a
        // range's last did not help (alternating `oxla bench` runs, 30
        // November 2026).
        let tasks = if rows * self.widest >= PARALLEL_MIN {
            (rayon::current_num_threads() * 4).min(rows)
        } else {
            1
        };
        let per_task = rows.div_ceil(tasks.max(1));
        let tasks = rows.div_ceil(per_task);
        let mut chunks: Vec<Vec<&mut [T]>> = (0..tasks).map(|_| Vec::new()).collect();
        for (k, (s, buf)) in self.stages.iter().zip(bufs.iter_mut()).enumerate() {
            if self.local(k) {
                continue;
            }
            for (t, c) in buf.chunks_mut(per_task * s.per_row).enumerate() {
                chunks[t].push(c);
            }
        }
        chunks
            .into_par_iter()
            .enumerate()
            .try_for_each(|(t, mine)| {
                let first = t * per_task;
                let end = (first + per_task).min(rows);
                // Block-sized buffers for the stages kept within a block.
                let mut locals: Vec<Vec<T>> = (0..self.stages.len())
                    .filter(|&k| self.local(k))
                    .map(|k| pool.take::<T>(self.block * self.stages[k].per_row))
                    .collect();
                let mut mine = mine.into_iter();
                let mut local = locals.iter_mut();
                let mut outs: Vec<&mut [T]> = Vec::with_capacity(self.stages.len());
                for k in 0..self.stages.len() {
                    let next = if self.local(k) {
                        local.next().map(|v| &mut v[..])
                    } else {
                        mine.next()
                    };
                    outs.push(next.ok_or("a pipeline stage without an output")?);
                }
                let done = self.run_rows(inputs, first, end, &mut outs);
                drop(outs);
                locals.into_iter().for_each(|v| pool.give(v));
                done
            })?;
        let last = self.stages.last().ok_or("an empty pipeline")?;
        let out = bufs.pop().ok_or("an empty pipeline")?;
        // (The buffers of local stages are empty.)
        bufs.into_iter().for_each(|b| pool.give(b));
        let shape =
            ArrayShape::new(self.ty, last.stage.out_dims().to_vec()).map_err(|e| e.to_string())?;
        ArrayLiteral::new(shape, T::wrap(out)).map_err(|e| e.to_string())
    }

    /// About how many tiles (and reduced rows) the stages take over `rows`
    /// pipeline rows, each of which hints its share of the next block; an
    /// underestimate, so that the hints end within the block.
    fn tiles<T: Float>(&self, rows: usize, scratches: &[Scratch<T>]) -> usize {
        self.stages
            .iter()
            .zip(scratches)
            .map(|(s, scratch)| {
                if s.folded {
                    // (Its loop's tiles hint instead.)
                    return 0;
                }
                let step = scratch.step.min(scratch.cap()).max(1);
                let (q, len, tiled) = match &s.walk {
                    Walk::Rows { q, row_len, .. } => (*q, *row_len, true),
                    Walk::Reduce { q, cols, .. } => (*q, *cols, false),
                    Walk::Span { .. } => return rows.div_ceil(step),
                };
                if len < step {
                    // Short rows, several to a tile.
                    (rows * q * len).div_ceil(step)
                } else if tiled {
                    rows * q * len.div_ceil(step)
                } else {
                    // A reduction hints once a row.
                    rows * q
                }
            })
            .sum()
    }

    /// Whether stage `k` keeps its output for one block only: a loop stage
    /// before the last, which only later stages read (within the row).
    fn local(&self, k: usize) -> bool {
        k + 1 < self.stages.len() && matches!(self.stages[k].walk, Walk::Rows { .. })
    }

    /// Pipeline rows `[first, end)`, whose outputs are `outs` (one per stage;
    /// a local stage's holds one block).
    fn run_rows<T: Float>(
        &self,
        inputs: &[&ArrayLiteral],
        first: usize,
        end: usize,
        outs: &mut [&mut [T]],
    ) -> Result<(), String> {
        // Earlier stages' outputs are read from this range's part of them,
        // a local stage's from the current block's (shifted per block).
        let mut walks: Vec<Walk> = self
            .stages
            .iter()
            .map(|s| {
                let mut w = s.walk.clone();
                let space = w.space_mut();
                for &(v, t) in &s.shifts {
                    space.offsets[v] -= (first * self.stages[t].per_row) as i64;
                }
                w
            })
            .collect();
        let mut at_block = first;
        // The last stage's output, when large, is streamed past the cache.
        let last = self.stages.len() - 1;
        let full = self.stages[last].per_row * self.rows;
        let read = fused::data_bytes(inputs.iter().map(|a| a.data()));
        let stream = fused::streams_traffic(full * std::mem::size_of::<T>(), read);
        let mut scratches: Vec<Scratch<T>> = self
            .stages
            .iter()
            .zip(&walks)
            .enumerate()
            .map(|(k, (s, w))| {
                let mut scratch = match w {
                    Walk::Rows { row_len, .. } => Scratch::new(s.stage.expr(), *row_len),
                    Walk::Span { .. } => Scratch::new(s.stage.expr(), self.block),
                    Walk::Reduce { cols, .. } => Scratch::new(s.stage.expr(), *cols),
                };
                scratch.stream = stream && k == last;
                scratch
            })
            .collect();
        // The streamed inputs' data, where large enough to be worth hinting:
        // (byte address, bytes per pipeline row).
        let hinted: Vec<(usize, usize)> = self
            .streamed
            .iter()
            .filter_map(|&(j, per_row)| {
                let a = inputs.get(j)?;
                let (at, bytes) =
                    oxla_hlo::with_array_data!(a.data(), v => (v.as_ptr() as usize, std::mem::size_of_val(&v[..])));
                (a.element_count() == per_row * self.rows && bytes >= AHEAD_MIN_BYTES)
                    .then_some((at, bytes / self.rows))
            })
            .collect();
        let mut ahead = fused::Ahead::default();
        // Each reduction's initial value, read once.
        let inits: Vec<T> = self
            .stages
            .iter()
            .map(|s| match s.walk {
                Walk::Reduce { init, .. } => reduce::init_value::<T>(inputs, init),
                _ => Ok(T::ZERO),
            })
            .collect::<Result<_, _>>()?;
        // Each stage's sources with the pipeline's inputs resolved once; the
        // leaves that read earlier stages (listed in `reads`, with the
        // stage) are filled in at each call, from outputs borrowed anew.
        let mut templates: Vec<Vec<Source<'_, T>>> = Vec::with_capacity(self.stages.len());
        let mut reads: Vec<Vec<(usize, usize)>> = Vec::with_capacity(self.stages.len());
        for stage in &self.stages {
            let mut sources = Vec::new();
            stage
                .stage
                .expr()
                .resolve_into(&mut sources, |m, ty| match stage.from.get(m) {
                    Some(From::Stage(_)) => Ok(Input::Data(&[])),
                    Some(From::External(j)) => {
                        let a = inputs.get(*j).ok_or("missing pipeline input")?;
                        fused::input_data(a, ty)
                            .ok_or_else(|| "a pipeline input of the wrong type".into())
                    }
                    None => Err("missing kernel input".into()),
                })?;
            let mut leaf_reads = Vec::new();
            for (k, leaf) in stage.stage.expr().leaves.iter().enumerate() {
                if let Leaf::Input { input, .. } = leaf
                    && let Some(From::Stage(t)) = stage.from.get(*input)
                {
                    leaf_reads.push((k, *t));
                }
            }
            templates.push(sources);
            reads.push(leaf_reads);
        }
        let mut source_lists: Vec<Vec<Source<'static, T>>> =
            self.stages.iter().map(|_| Vec::new()).collect();
        let mut b0 = first;
        while b0 < end {
            let b1 = (b0 + self.block).min(end);
            // The next block's rows, hinted a share before each tile.
            let next = b1..(b1 + self.block).min(end);
            if !hinted.is_empty() && !next.is_empty() {
                let lines: usize = hinted
                    .iter()
                    .map(|&(_, n)| (n * next.len()).div_ceil(64))
                    .sum();
                let tiles = self.tiles(b1 - b0, &scratches).max(1);
                ahead.start(
                    hinted
                        .iter()
                        .map(|&(at, n)| (at + n * next.start, at + n * next.end)),
                    lines.div_ceil(tiles),
                );
            }
            // Reads of local stages move from the last block to this one.
            for (w, stage) in walks.iter_mut().zip(&self.stages) {
                let space = w.space_mut();
                for &(v, t) in stage.shifts.iter().filter(|(_, t)| self.local(*t)) {
                    space.offsets[v] -= ((b0 - at_block) * self.stages[t].per_row) as i64;
                }
            }
            at_block = b0;
            for (s, stage) in self.stages.iter().enumerate() {
                let (done, rest) = outs.split_at_mut(s);
                let (out, later) = rest.split_first_mut().ok_or("a stage without an output")?;
                let out = &mut **out;
                let expr = stage.stage.expr();
                let mut sources = recycle(std::mem::take(&mut source_lists[s]));
                sources.extend_from_slice(&templates[s]);
                for &(k, t) in &reads[s] {
                    if let Some(Source::Data(_, vi)) = sources.get(k).copied() {
                        sources[k] = Source::Data(&*done[t], vi);
                    }
                }
                let e = stage.per_row;
                let part = if self.local(s) {
                    0..(b1 - b0) * e
                } else {
                    (b0 - first) * e..(b1 - first) * e
                };
                std::mem::swap(&mut ahead, &mut scratches[s].ahead);
                match (&walks[s], &mut scratches[s]) {
                    (Walk::Rows { space, q, row_len }, scratch) => {
                        // The next stage's rows folded as this one writes them.
                        let mut extra = match (stage.fold, later.first_mut()) {
                            (Some(fold), Some(reduced)) => {
                                let rows = &mut reduced[b0 - first..b1 - first];
                                rows.fill(inits[s + 1]);
                                fused::Extra::folding(&out[part.clone()], fold, rows, *row_len)
                            }
                            _ => fused::Extra::none(),
                        };
                        fused::dispatch(
                            expr,
                            space,
                            &sources,
                            b0 * q,
                            (b1 - b0) * q,
                            *row_len,
                            &mut out[part.clone()],
                            &mut extra,
                            scratch,
                        )
                    }
                    (Walk::Span { space }, scratch) => fused::dispatch_span(
                        expr,
                        space,
                        &sources,
                        b0,
                        &mut out[part.clone()],
                        &mut fused::Extra::none(),
                        scratch,
                    ),
                    // (Folded by the loop before it.)
                    (Walk::Reduce { .. }, _) if stage.folded => {}
                    (Walk::Reduce { plan, q, cols, .. }, scratch) => {
                        let Stage::Reduce(r) = &stage.stage else {
                            return Err("a reduction walk of a loop".into());
                        };
                        out[part.clone()].fill(inits[s]);
                        reduce::dispatch_with(
                            r,
                            plan,
                            &sources,
                            b0 * q,
                            (b1 - b0) * q,
                            0,
                            *cols,
                            out,
                            first * e,
                            scratch,
                        );
                    }
                }
                std::mem::swap(&mut ahead, &mut scratches[s].ahead);
                source_lists[s] = recycle(sources);
                // The block's values, complete, rounded as the half array
                // would hold them.
                match stage.narrow {
                    Some(PrimitiveType::BF16) => {
                        out[part].iter_mut().for_each(|v| *v = v.round_bf16())
                    }
                    Some(_) => out[part].iter_mut().for_each(|v| *v = v.round_f16()),
                    None => {}
                }
            }
            ahead.stop();
            b0 = b1;
        }
        if stream {
            fused::store_fence();
        }
        Ok(())
    }
}

impl Kernel for RowPipeline {
    fn name(&self) -> &'static str {
        "row pipeline"
    }

    fn detail(&self, name_of: &dyn Fn(usize) -> String) -> String {
        let stages: Vec<String> = self
            .stages
            .iter()
            .zip(&self.outputs)
            .enumerate()
            .map(|(k, (s, &slot))| {
                let what = match s.walk {
                    Walk::Rows { .. } if self.local(k) => "loop, one block kept",
                    Walk::Rows { .. } => "loop",
                    Walk::Span { .. } => "one value a row",
                    Walk::Reduce { .. } if s.folded => {
                        "row reduction, folded as the rows are written"
                    }
                    Walk::Reduce { .. } => "row reduction",
                };
                format!("{} ({what})", name_of(slot))
            })
            .collect();
        format!(
            " of {} stages, {} rows a block: {}",
            stages.len(),
            self.block,
            stages.join(", ")
        )
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        let arrays: Vec<&ArrayLiteral> = inputs
            .iter()
            .map(|v| v.array().ok_or("a row pipeline reads arrays"))
            .collect::<Result<_, _>>()?;
        let out = match self.ty {
            PrimitiveType::F32 => self.execute::<f32>(&arrays, pool)?,
            PrimitiveType::F64 => self.execute::<f64>(&arrays, pool)?,
            other => return Err(format!("row pipelines compute in f32 or f64, not {other}")),
        };
        Ok(Value::owned(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recycled_sources_keep_their_allocation() {
        let data = vec![1.0f32; 4];
        let mut v: Vec<Source<'_, f32>> = Vec::with_capacity(8);
        v.push(Source::Data(&data, 0));
        v.push(Source::Scalar(2.0));
        let at = v.as_ptr() as usize;
        let r: Vec<Source<'static, f32>> = recycle(v);
        assert!(r.is_empty());
        assert_eq!(r.capacity(), 8);
        assert_eq!(r.as_ptr() as usize, at);
    }

    #[test]
    fn row_locality() {
        // A [4] vector broadcast along rows of [4, 8]: row r reads element r.
        let v = View::contiguous(&[4]).broadcast(&[4, 8], &[0]);
        assert!(row_local(&v, &[4, 8], 1, 1));
        // Broadcast along columns instead: row r reads elements 0..8 of a
        // buffer with one element a row.
        let w = View::contiguous(&[8]).broadcast(&[4, 8], &[1]);
        assert!(!row_local(&w, &[4, 8], 1, 1));
        // A transposed [8, 4] read as [4, 8] crosses rows.
        let t = View::contiguous(&[8, 4]).transpose(&[1, 0]);
        assert!(!row_local(&t, &[4, 8], 1, 4));
        // The same buffer read in place is local.
        assert!(row_local(&View::contiguous(&[4, 8]), &[4, 8], 1, 8));
        // Runs of consecutive elements, one per row, in order.
        assert_eq!(row_run(&View::contiguous(&[4, 8]), &[4, 8], 1), Some(8));
        assert_eq!(
            row_run(&View::contiguous(&[4, 1, 8]), &[4, 1, 8], 1),
            Some(8)
        );
        assert_eq!(row_run(&v, &[4, 8], 1), Some(1));
        assert_eq!(row_run(&w, &[4, 8], 1), None);
        assert_eq!(row_run(&t, &[4, 8], 1), None);
        assert_eq!(leading(&[4, 1, 8], 4), Some(1));
        assert_eq!(leading(&[2, 2, 8], 4), Some(2));
        assert_eq!(leading(&[3, 8], 4), None);
    }
}
