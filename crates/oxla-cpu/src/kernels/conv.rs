//! Convolution as matrix products: for each batch element and feature
//! group, the input patches are laid out as a matrix with one row per
//! (input feature, kernel position) and one column per output position
//! (im2col, transposed, so rows copy along the input's innermost spatial
//! dimension), and the kernel as a matrix with one row per output feature;
//! their product is the output, written straight into place through
//! strides. Padding (negative too), strides, dilation of the input and of
//! the kernel, and reversed windows are handled while building the patches
//! and the kernel matrix. Any dimension layout works.
//!
//! Groups: with feature groups, group `g` reads the input features of its
//! group; with batch groups (a depthwise convolution's weight gradient, as
//! JAX writes it), group `g` reads all input features of the input batch
//! elements of its group. Either way it computes the output features of
//! its group, with the kernel's rows for them.
//!
//! Element types follow the dot's rule: operands are converted to the
//! accumulation type first (f32 for f16 and bf16 results, which are
//! rounded once at the end), floats multiply through `gemm`, integers
//! through the dot's tiles of wrapping multiply-adds, which are exact.

use oxla_hlo::half::{bf16, f16};
use oxla_hlo::ir::{ConvDimensionNumbers, Window};
use oxla_hlo::{
    ArrayData, ArrayLiteral, ArrayShape, HloComputation, HloInstruction, NativeType, PrimitiveType,
};

use rayon::prelude::*;

use super::Kernel;
use super::dot::{Int, give_back, int_product, ints_as, reals_as, rounded};
use crate::buffer::Pool;
use crate::value::Value;

#[derive(Clone, Debug)]
pub(crate) struct ConvKernel {
    /// The result type.
    ty: PrimitiveType,
    /// The type operands are converted to and sums kept in.
    acc: PrimitiveType,
    lhs_dims: Vec<i64>,
    rhs_dims: Vec<i64>,
    out_dims: Vec<i64>,
    d: ConvDimensionNumbers,
    window: Window,
    /// Feature groups, or batch groups when `batch_grouped`.
    groups: usize,
    batch_grouped: bool,
}

/// A convolution the kernel handles: real or half operands of an f16,
/// bf16, f32 or f64 result, or integer operands of an integer result.
pub(crate) fn plan(comp: &HloComputation, instr: &HloInstruction) -> Option<ConvKernel> {
    use PrimitiveType::*;
    let ty = instr.shape.element_type()?;
    let l = comp.instruction(instr.operands[0]).shape.as_array()?;
    let r = comp.instruction(instr.operands[1]).shape.as_array()?;
    let operands = [l.element_type(), r.element_type()];
    let real = |t: PrimitiveType| matches!(t, F16 | BF16 | F32 | F64);
    let acc = match ty {
        F16 | BF16 if operands.into_iter().all(real) => F32,
        F32 | F64 if operands.into_iter().all(real) => ty,
        _ if ty.is_integral() && operands.into_iter().all(|t| t.is_integral()) => ty,
        _ => return None,
    };
    let feature_groups = instr.attrs.feature_group_count.unwrap_or(1);
    let batch_groups = instr.attrs.batch_group_count.unwrap_or(1);
    // The verifier allows at most one kind of group.
    let (groups, batch_grouped) = match (feature_groups, batch_groups) {
        (f, 1) if f >= 1 => (f, false),
        (1, b) if b > 1 => (b, true),
        _ => return None,
    };
    Some(ConvKernel {
        ty,
        acc,
        lhs_dims: l.dims().to_vec(),
        rhs_dims: r.dims().to_vec(),
        out_dims: instr.shape.as_array()?.dims().to_vec(),
        d: instr.attrs.conv_dnums.clone()?,
        window: instr.attrs.window.clone()?,
        groups: usize::try_from(groups).ok()?,
        batch_grouped,
    })
}

/// An element type convolutions are computed in, and its matrix product.
pub(crate) trait ConvElem: NativeType + Copy + Default + Send + Sync {
    /// `dst[i * dst.1 + j * dst.2] = sum over p of a[i * a.1 + p * a.2] *
    /// b[p * b.1 + j * b.2]`, for `i < m`, `j < n`, `p < k`, split across
    /// the pool when `parallel`.
    ///
    /// # Safety
    /// Every such element of `dst` must be writable and written by nobody
    /// else meanwhile, and every such element of `a` and `b` readable; `k`
    /// is at least 1.
    unsafe fn product(
        mnk: (usize, usize, usize),
        dst: (*mut Self, usize, usize),
        a: (*const Self, usize, usize),
        b: (*const Self, usize, usize),
        parallel: bool,
        pool: &Pool,
    );

    /// `acc[i] += part[i]` (wrapping for integers).
    fn add_into(acc: &mut [Self], part: &[Self]);
}

macro_rules! float_product {
    ($($t:ty),*) => {$(
        impl ConvElem for $t {
            unsafe fn product(
                (m, n, k): (usize, usize, usize),
                dst: (*mut $t, usize, usize),
                a: (*const $t, usize, usize),
                b: (*const $t, usize, usize),
                parallel: bool,
                _pool: &Pool,
            ) {
                let parallelism = match parallel {
                    true => gemm::Parallelism::Rayon(rayon::current_num_threads()),
                    false => gemm::Parallelism::None,
                };
                // SAFETY: the caller's contract is gemm's.
                unsafe {
                    gemm::gemm(
                        m,
                        n,
                        k,
                        dst.0,
                        dst.2 as isize,
                        dst.1 as isize,
                        false,
                        a.0,
                        a.2 as isize,
                        a.1 as isize,
                        b.0,
                        b.2 as isize,
                        b.1 as isize,
                        0.0,
                        1.0,
                        false,
                        false,
                        false,
                        parallelism,
                    )
                }
            }

            fn add_into(acc: &mut [$t], part: &[$t]) {
                acc.iter_mut().zip(part).for_each(|(a, &p)| *a += p);
            }
        }
    )*};
}

float_product!(f32, f64);

macro_rules! int_conv_product {
    ($($t:ty),*) => {$(
        impl ConvElem for $t {
            unsafe fn product(
                (m, n, k): (usize, usize, usize),
                dst: (*mut $t, usize, usize),
                a: (*const $t, usize, usize),
                b: (*const $t, usize, usize),
                parallel: bool,
                pool: &Pool,
            ) {
                if m * n == 0 || k == 0 {
                    return;
                }
                // SAFETY: the last element each operand is read at is the
                // end of these spans; the caller vouches every such element
                // is readable.
                let (a_data, b_data) = unsafe {
                    (
                        std::slice::from_raw_parts(a.0, (m - 1) * a.1 + (k - 1) * a.2 + 1),
                        std::slice::from_raw_parts(b.0, (k - 1) * b.1 + (n - 1) * b.2 + 1),
                    )
                };
                let mut sums = pool.take::<$t>(m * n);
                int_product(
                    (m, n, k),
                    (a_data, a.1, a.2),
                    (b_data, b.1, b.2),
                    &mut sums,
                    parallel,
                    pool,
                );
                for (i, row) in sums.chunks_exact(n).enumerate() {
                    for (j, &v) in row.iter().enumerate() {
                        // SAFETY: i < m and j < n: the caller vouches it is writable.
                        unsafe { *dst.0.add(i * dst.1 + j * dst.2) = v };
                    }
                }
                pool.give(sums);
            }

            fn add_into(acc: &mut [$t], part: &[$t]) {
                acc.iter_mut().zip(part).for_each(|(a, &p)| *a = a.wrapping_add(p));
            }
        }
    )*};
}

int_conv_product!(i8, i16, i32, i64, u8, u16, u32, u64);

/// A folded convolution whose output has at most this many elements
/// splits its sum across threads instead of its output.
const SPLIT_MAX_OUTPUT: usize = 1 << 16;
/// Patch elements a thread of a split sum fills at a time (128 KiB of f32;
/// 2^16 and 2^18 were 10-15% slower on the weight gradient of cnn_grad_nhwc).
const SPLIT_CHUNK_ELEMENTS: usize = 1 << 15;
/// The fewest patch rows a chunk of a split sum takes.
const SPLIT_MIN_ROWS: usize = 16;

/// `offsets[s][o * k_sp[s] + k]`: the input offset along spatial
/// dimension `s` (its index times the input's stride) under output index
/// `o` and kernel index `k`, or `None` in padding and holes.
struct Taps {
    offsets: Vec<Vec<Option<usize>>>,
    k_sp: Vec<usize>,
}

impl Taps {
    /// Fills `run` with the input from `base` plus the offsets under output
    /// position `opos` and kernel position `kpos`, or with zeros where any
    /// dimension falls in padding or a hole.
    #[inline(always)]
    fn copy<T: Copy>(
        &self,
        run: &mut [T],
        lhs: &[T],
        base: usize,
        opos: &[usize],
        kpos: &[usize],
        zero: T,
    ) {
        match self.at(base, opos, kpos, self.offsets.len()) {
            Some(a) => copy_run(run, &lhs[a..a + run.len()]),
            None => run.fill(zero),
        }
    }

    /// `base` plus the offsets of the first `dims` spatial dimensions under
    /// output position `opos` and kernel position `kpos`, or `None` where
    /// any falls in padding or a hole.
    #[inline(always)]
    fn at(&self, base: usize, opos: &[usize], kpos: &[usize], dims: usize) -> Option<usize> {
        let mut at = Some(base);
        for (s, offsets) in self.offsets[..dims].iter().enumerate() {
            at = match (at, offsets[opos[s] * self.k_sp[s] + kpos[s]]) {
                (Some(a), Some(i)) => Some(a + i),
                _ => None,
            };
        }
        at
    }

    /// Fills `line` with runs of `run` elements, one per position along
    /// the innermost output spatial dimension (the outer ones at `opos`),
    /// each as [`Taps::copy`] would; runs that lie end to end in the input
    /// (stride 1, no dilation) are copied as one.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn copy_line<T: Copy>(
        &self,
        line: &mut [T],
        lhs: &[T],
        base: usize,
        opos: &[usize],
        kpos: &[usize],
        run: usize,
        zero: T,
    ) {
        let last = self.offsets.len() - 1;
        let Some(a) = self.at(base, opos, kpos, last) else {
            line.fill(zero);
            return;
        };
        let (offsets, k, kp) = (&self.offsets[last], self.k_sp[last], kpos[last]);
        let n = line.len() / run.max(1);
        let mut o = 0;
        while o < n {
            match offsets[o * k + kp] {
                None => {
                    line[o * run..(o + 1) * run].fill(zero);
                    o += 1;
                }
                Some(i) => {
                    let mut e = o + 1;
                    while e < n && offsets[e * k + kp] == Some(i + (e - o) * run) {
                        e += 1;
                    }
                    let (dst, src) = (
                        &mut line[o * run..e * run],
                        &lhs[a + i..a + i + (e - o) * run],
                    );
                    match e - o {
                        1 => copy_run(dst, src),
                        _ => dst.copy_from_slice(src),
                    }
                    o = e;
                }
            }
        }
    }
}

/// Copies a short run (a tap's features) in fixed-size pieces the
/// compiler turns into a few vector moves; a `copy_from_slice` of a run
/// length known only at run time is a `memmove` call per run.
#[inline(always)]
fn copy_run<T: Copy>(dst: &mut [T], src: &[T]) {
    const PIECE: usize = 8;
    let mut d = dst.chunks_exact_mut(PIECE);
    let mut s = src.chunks_exact(PIECE);
    for (d, s) in (&mut d).zip(&mut s) {
        let piece: [T; PIECE] = std::array::from_fn(|i| s[i]);
        d.copy_from_slice(&piece);
    }
    for (d, &s) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *d = s;
    }
}

/// Advances `pos` to the next index of an array of `dims`, row-major
/// (back to all zeros after the last).
fn step(pos: &mut [usize], dims: &[usize]) {
    for s in (0..pos.len()).rev() {
        pos[s] += 1;
        if pos[s] < dims[s] {
            return;
        }
        pos[s] = 0;
    }
}

fn row_major(dims: &[i64]) -> Vec<usize> {
    let mut s = vec![1usize; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1] as usize;
    }
    s
}

/// Sizes shared by every batch element of one convolution.
struct Geometry {
    ls: Vec<usize>,
    os: Vec<usize>,
    cin_g: usize,
    cout_g: usize,
    in_sp: Vec<usize>,
    k_sp: Vec<usize>,
    o_sp: Vec<usize>,
    /// Rows of the patch matrix: input features of a group times kernel positions.
    rows: usize,
    /// Columns: output positions.
    s_total: usize,
    o_stride: usize,
    sp_strides: Vec<usize>,
    /// Whether the output positions walk memory with one stride.
    merged: bool,
    s_stride: usize,
    /// Patches laid out one output position after another (each position's
    /// patch contiguous) rather than one row per (feature, kernel
    /// position): for kernels wider than the output (weight gradients),
    /// whose runs along the kernel are the long ones.
    by_position: bool,
    /// Patches laid out by output position with each row's features
    /// innermost, `(kernel position, feature)`: for inputs whose features
    /// are their innermost dimension (NHWC), so each tap is one contiguous
    /// copy; the kernel matrix's rows follow the same order.
    channels_last: bool,
}

impl ConvKernel {
    fn geometry(&self) -> Geometry {
        let d = &self.d;
        let n_sp = d.input_spatial_dimensions.len();
        let ls = row_major(&self.lhs_dims);
        let os = row_major(&self.out_dims);
        let cin = self.lhs_dims[d.input_feature_dimension as usize] as usize;
        let cout = self.rhs_dims[d.kernel_output_feature_dimension as usize] as usize;
        let g = self.groups;
        let in_sp: Vec<usize> = d
            .input_spatial_dimensions
            .iter()
            .map(|&k| self.lhs_dims[k as usize] as usize)
            .collect();
        let k_sp: Vec<usize> = d
            .kernel_spatial_dimensions
            .iter()
            .map(|&k| self.rhs_dims[k as usize] as usize)
            .collect();
        let o_sp: Vec<usize> = d
            .output_spatial_dimensions
            .iter()
            .map(|&k| self.out_dims[k as usize] as usize)
            .collect();
        let kk: usize = k_sp.iter().product();
        let s_total: usize = o_sp.iter().product();
        // A batch group reads every input feature.
        let cin_g = if self.batch_grouped { cin } else { cin / g };
        let o_stride = os[d.output_feature_dimension as usize];
        let sp_strides: Vec<usize> = d
            .output_spatial_dimensions
            .iter()
            .map(|&k| os[k as usize])
            .collect();
        let merged = (0..n_sp.saturating_sub(1))
            .all(|s| o_sp[s + 1] == 1 || sp_strides[s] == sp_strides[s + 1] * o_sp[s + 1]);
        let s_stride = if n_sp == 0 { 1 } else { sp_strides[n_sp - 1] };
        let by_position = n_sp > 0 && k_sp[n_sp - 1] > o_sp[n_sp - 1];
        let channels_last =
            !by_position && n_sp > 0 && cin_g > 1 && ls[d.input_feature_dimension as usize] == 1;
        Geometry {
            ls,
            os,
            cin_g,
            cout_g: cout / g,
            in_sp,
            k_sp,
            o_sp,
            rows: cin_g * kk,
            s_total,
            o_stride,
            sp_strides,
            merged,
            s_stride,
            by_position,
            channels_last,
        }
    }

    /// The kernel of each group as a [cout_g, cin_g * kk] matrix, rows in
    /// (feature, position) order.
    fn kernel_matrix<T: oxla_hlo::NativeType>(
        &self,
        rhs: &[T],
        geo: &Geometry,
        pool: &Pool,
    ) -> Vec<T> {
        let d = &self.d;
        let rs = row_major(&self.rhs_dims);
        let n_sp = geo.k_sp.len();
        let kk: usize = geo.k_sp.iter().product();
        let cout = geo.cout_g * self.groups;
        // The offset of each kernel position, row-major over the spatial
        // dimensions (counted from the far end along reversed ones).
        let mut positions = vec![0usize];
        for s in (0..n_sp).rev() {
            let stride = rs[d.kernel_spatial_dimensions[s] as usize];
            let (size, reversed) = (geo.k_sp[s], self.window.dims[s].window_reversal);
            positions = (0..size)
                .map(|k| if reversed { size - 1 - k } else { k })
                .flat_map(|k| positions.iter().map(move |&p| k * stride + p))
                .collect();
        }
        debug_assert_eq!(positions.len(), kk);
        let (o_stride, i_stride) = (
            rs[d.kernel_output_feature_dimension as usize],
            rs[d.kernel_input_feature_dimension as usize],
        );
        // Every element is written below.
        let mut kmat = pool.take::<T>(cout * geo.rows);
        for (o, row) in kmat.chunks_mut(geo.rows.max(1)).enumerate().take(cout) {
            if geo.channels_last {
                for (part, &p) in row.chunks_mut(geo.cin_g.max(1)).zip(&positions) {
                    for (ci, v) in part.iter_mut().enumerate() {
                        *v = rhs[o * o_stride + ci * i_stride + p];
                    }
                }
                continue;
            }
            for (ci, part) in row.chunks_mut(kk.max(1)).enumerate() {
                let base = o * o_stride + ci * i_stride;
                for (v, &p) in part.iter_mut().zip(&positions) {
                    *v = rhs[base + p];
                }
            }
        }
        kmat
    }

    /// The input batch element and first input feature that output batch
    /// element `b` of group `grp` reads.
    fn group_input(&self, geo: &Geometry, b: usize, grp: usize) -> (usize, usize) {
        match self.batch_grouped {
            true => (grp * self.out_batch() + b, 0),
            false => (b, grp * geo.cin_g),
        }
    }

    fn out_batch(&self) -> usize {
        self.out_dims[self.d.output_batch_dimension as usize] as usize
    }

    fn execute<T: ConvElem>(&self, lhs: &[T], rhs: &[T], pool: &Pool) -> Vec<T> {
        let d = &self.d;
        let zero = T::default();
        let geo = self.geometry();
        let batch = self.out_batch();
        let mut out = pool.take::<T>(self.out_dims.iter().map(|&x| x as usize).product());
        if out.is_empty() || geo.rows == 0 {
            // No taps: every output sums nothing.
            out.fill(zero);
            return out;
        }
        if self.folds(&geo, batch) {
            self.execute_folded(lhs, rhs, &geo, batch, &mut out, pool);
            return out;
        }
        let kmat = self.kernel_matrix(rhs, &geo, pool);
        let flops = geo.cout_g * geo.s_total * geo.rows * self.groups;
        let batch_stride = geo.os[d.output_batch_dimension as usize];
        if batch > 1 && d.output_batch_dimension == 0 && flops >= 1 << 20 {
            // Batch elements in parallel, each writing its own block of the
            // output, each product on one thread.
            out.par_chunks_mut(batch_stride)
                .enumerate()
                .for_each(|(b, block)| {
                    let mut patches = pool.take::<T>(geo.rows * geo.s_total);
                    let mut temp = if geo.merged {
                        Vec::new()
                    } else {
                        pool.take::<T>(geo.cout_g * geo.s_total)
                    };
                    self.batch_element(
                        lhs,
                        &kmat,
                        &geo,
                        b,
                        block,
                        0,
                        &mut patches,
                        &mut temp,
                        false,
                        pool,
                    );
                    pool.give(patches);
                    pool.give(temp);
                });
        } else if (batch > 1 || self.groups > 1) && flops >= 1 << 20 {
            // Products whose outputs interleave (a weight gradient's output
            // has the input features where the batch was), or many groups
            // of one batch element: each (batch element, group) computes
            // its product privately, in parallel, and they are copied into
            // place after.
            let per = geo.cout_g * geo.s_total;
            let products: Vec<Vec<T>> = (0..batch * self.groups)
                .into_par_iter()
                .map(|t| {
                    let (b, grp) = (t / self.groups, t % self.groups);
                    let mut patches = pool.take::<T>(geo.rows * geo.s_total);
                    let mut temp = pool.take::<T>(per);
                    let (b_in, c0) = self.group_input(&geo, b, grp);
                    self.im2col(lhs, &geo, b_in, c0, &mut patches, zero);
                    let dst = (temp.as_mut_ptr(), geo.s_total, 1);
                    self.product(&kmat, &geo, grp, &patches, dst, false, pool);
                    pool.give(patches);
                    temp
                })
                .collect();
            for (t, temp) in products.into_iter().enumerate() {
                let (b, grp) = (t / self.groups, t % self.groups);
                let out_base = b * batch_stride + grp * geo.cout_g * geo.o_stride;
                self.scatter(&geo, &temp, &mut out, out_base);
                pool.give(temp);
            }
        } else {
            // Every patch element is written by im2col (zero in padding) before gemm reads it.
            let mut patches = pool.take::<T>(geo.rows * geo.s_total);
            let mut temp = if geo.merged {
                Vec::new()
            } else {
                pool.take::<T>(geo.cout_g * geo.s_total)
            };
            for b in 0..batch {
                self.batch_element(
                    lhs,
                    &kmat,
                    &geo,
                    b,
                    &mut out,
                    b * batch_stride,
                    &mut patches,
                    &mut temp,
                    flops >= 1 << 20,
                    pool,
                );
            }
            pool.give(patches);
            pool.give(temp);
        }
        pool.give(kmat);
        out
    }

    /// Whether the batch folds into the output positions (see
    /// `execute_folded`): one group, the input's batch dimension innermost,
    /// and the output's batch dimension innermost of its positions, so that
    /// (position, batch element) walks the output with one stride.
    fn folds(&self, geo: &Geometry, batch: usize) -> bool {
        let d = &self.d;
        let batch_stride = geo.os[d.output_batch_dimension as usize];
        self.groups == 1
            && !self.window.dims.iter().any(|w| w.window_reversal)
            && batch > 1
            && geo.ls[d.input_batch_dimension as usize] == 1
            && geo.merged
            && (geo.s_total == 1 || geo.s_stride == batch * batch_stride)
    }

    /// The whole convolution as one product, for layouts that `folds`: the
    /// patch matrix has a row per (input feature, kernel position) and a
    /// column per (output position, batch element), each run of batch
    /// elements one contiguous copy of the input; the product with the
    /// kernel writes the output through strides. A weight gradient (batch
    /// and features exchanged, as JAX writes it for NHWC) becomes one
    /// product of depth batch x positions instead of a thin product per
    /// input feature over patches gathered element by element.
    fn execute_folded<T: ConvElem>(
        &self,
        lhs: &[T],
        rhs: &[T],
        geo: &Geometry,
        batch: usize,
        out: &mut [T],
        pool: &Pool,
    ) {
        let d = &self.d;
        let zero = T::default();
        let n_sp = geo.in_sp.len();
        let kk: usize = geo.k_sp.iter().product();
        let cols = geo.s_total * batch;
        let (in_strides, _, fstride) = self.input_layout(geo, 0);
        let taps = self.tap_table(geo, &in_strides);
        // Row r of the patches; `kpos` and `opos` are scratch of n_sp.
        let fill = |(kpos, opos): &mut (Vec<usize>, Vec<usize>), (r, row): (usize, &mut [T])| {
            let (f, mut p) = (r / kk.max(1), r % kk.max(1));
            for s in (0..n_sp).rev() {
                kpos[s] = p % geo.k_sp[s];
                p /= geo.k_sp[s];
            }
            opos.fill(0);
            if n_sp == 0 {
                taps.copy(row, lhs, f * fstride, opos, kpos, zero);
                return;
            }
            // One line of runs per position of the outer output dimensions.
            for line in row.chunks_mut(batch * geo.o_sp[n_sp - 1]) {
                taps.copy_line(line, lhs, f * fstride, opos, kpos, batch, zero);
                step(&mut opos[..n_sp - 1], &geo.o_sp[..n_sp - 1]);
            }
        };
        let scratch = || (vec![0usize; n_sp], vec![0usize; n_sp]);
        // The kernel as a rows x cout matrix: read in place when (feature,
        // position) walks it with one stride, else gathered.
        let cout = geo.cout_g;
        let kmat = self.folded_kernel(rhs, geo, pool);
        let (b_data, b_rs, b_cs): (&[T], usize, usize) = match &kmat {
            Err(k) => (k, 1, geo.rows),
            Ok((st, o_stride)) => (rhs, *st, *o_stride),
        };
        let batch_stride = geo.os[d.output_batch_dimension as usize];
        let last = (cols - 1) * batch_stride + (cout - 1) * geo.o_stride;
        assert!(last < out.len());
        let threads = rayon::current_num_threads();
        if cols * cout <= SPLIT_MAX_OUTPUT
            && cols * cout * geo.rows >= 1 << 20
            && threads > 1
            && geo.rows >= 2 * threads * SPLIT_MIN_ROWS
        {
            // A small output over a deep sum (a weight gradient): the rows
            // of the patches split into one band per thread, each filled a
            // cache-sized chunk at a time and multiplied into the thread's
            // own sums, which are then added in band order. gemm alone
            // would split the few output blocks and wait on memory for
            // the whole patch matrix.
            let band = geo.rows.div_ceil(threads);
            let chunk = (SPLIT_CHUNK_ELEMENTS / cols).clamp(SPLIT_MIN_ROWS, band);
            let sums: Vec<Vec<T>> = (0..threads)
                .into_par_iter()
                .map(|t| {
                    let mut acc = vec![zero; cols * cout];
                    let mut part = vec![zero; cols * cout];
                    let mut local = vec![zero; chunk * cols];
                    let mut s = scratch();
                    let end = ((t + 1) * band).min(geo.rows);
                    let mut r0 = t * band;
                    while r0 < end {
                        let n = chunk.min(end - r0);
                        for (i, row) in local[..n * cols].chunks_mut(cols).enumerate() {
                            fill(&mut s, (r0 + i, row));
                        }
                        // Computed transposed, cout x cols (`part` holds
                        // element (c, o) at c * cout + o): the few output
                        // features fill gemm's taller register tile, the
                        // many columns its narrower one.
                        // SAFETY: `local` holds n rows of cols; `part`
                        // cols x cout; the kernel rows r0..r0 + n are
                        // inside it as in the product below.
                        unsafe {
                            T::product(
                                (cout, cols, n),
                                (part.as_mut_ptr(), 1, cout),
                                (b_data.as_ptr().add(r0 * b_rs), b_cs, b_rs),
                                (local.as_ptr(), cols, 1),
                                false,
                                pool,
                            );
                        }
                        T::add_into(&mut acc, &part);
                        r0 += n;
                    }
                    acc
                })
                .collect();
            let mut total = sums.into_iter();
            let mut acc = total.next().unwrap_or_default();
            for part in total {
                T::add_into(&mut acc, &part);
            }
            for (c, row) in acc.chunks_exact(cout).enumerate() {
                for (o, &v) in row.iter().enumerate() {
                    out[c * batch_stride + o * geo.o_stride] = v;
                }
            }
            if let Err(k) = kmat {
                pool.give(k);
            }
            return;
        }
        let mut patches = pool.take::<T>(geo.rows * cols);
        if geo.rows * cols >= super::fused::PARALLEL_MIN {
            patches
                .par_chunks_mut(cols)
                .enumerate()
                .with_min_len(16)
                .for_each_init(scratch, fill);
        } else {
            let mut s = scratch();
            patches
                .chunks_mut(cols)
                .enumerate()
                .for_each(|r| fill(&mut s, r));
        }
        assert!(geo.rows * cols <= patches.len());
        let b_ptr = b_data.as_ptr();
        // SAFETY: the patches are rows x cols, column c of row r at
        // r * cols + c (checked above); the kernel element (r, o) is at
        // r * b_rs + o * b_cs, inside `rhs` when read in place (the strides
        // describe its own row-major layout) or inside `kmat`; the output
        // element (c, o) at c * batch_stride + o * o_stride, at most `last`.
        unsafe {
            T::product(
                (cols, cout, geo.rows),
                (out.as_mut_ptr(), batch_stride, geo.o_stride),
                (patches.as_ptr(), 1, cols),
                (b_ptr, b_rs, b_cs),
                cols * cout * geo.rows >= 1 << 20,
                pool,
            );
        }
        pool.give(patches);
        if let Err(k) = kmat {
            pool.give(k);
        }
    }

    /// The kernel of a folded convolution as a rows x cout matrix: `Ok`
    /// with its (row, output feature) strides when (feature, position)
    /// walks it with one stride, so it is read in place; else `Err` with
    /// it gathered (row stride 1, output feature stride rows).
    fn folded_kernel<T: ConvElem>(
        &self,
        rhs: &[T],
        geo: &Geometry,
        pool: &Pool,
    ) -> Result<(usize, usize), Vec<T>> {
        let d = &self.d;
        let kk: usize = geo.k_sp.iter().product();
        let rs = row_major(&self.rhs_dims);
        let ps = geo.k_sp.iter().enumerate().rev().try_fold(
            (1usize, None::<usize>),
            |(count, stride), (s, &n)| {
                let st = rs[d.kernel_spatial_dimensions[s] as usize];
                match stride {
                    _ if n == 1 => Some((count, stride)),
                    None => Some((count * n, Some(st))),
                    Some(inner) if st == inner * count => Some((count * n, Some(inner))),
                    _ => None,
                }
            },
        );
        let i_stride = rs[d.kernel_input_feature_dimension as usize];
        let o_stride = rs[d.kernel_output_feature_dimension as usize];
        match ps {
            Some((_, None)) => Ok((i_stride, o_stride)),
            Some((_, Some(st))) if geo.cin_g == 1 || i_stride == st * kk => Ok((st, o_stride)),
            _ => Err(self.kernel_matrix(rhs, geo, pool)),
        }
    }

    /// The output of batch element `b` into `out`, whose element `base` is
    /// the batch element's first output.
    fn batch_element<T: ConvElem>(
        &self,
        lhs: &[T],
        kmat: &[T],
        geo: &Geometry,
        b: usize,
        out: &mut [T],
        base: usize,
        patches: &mut [T],
        temp: &mut [T],
        parallel: bool,
        pool: &Pool,
    ) {
        let cout_g = geo.cout_g;
        for grp in 0..self.groups {
            let (b_in, c0) = self.group_input(geo, b, grp);
            self.im2col(lhs, geo, b_in, c0, patches, T::default());
            let out_base = base + grp * cout_g * geo.o_stride;
            if geo.merged {
                let last = (cout_g.saturating_sub(1)) * geo.o_stride
                    + (geo.s_total.saturating_sub(1)) * geo.s_stride;
                assert!(out_base + last < out.len());
                // SAFETY: out_base is inside `out`, and so is every address
                // out_base + o * o_stride + s * s_stride (checked above).
                let dst = unsafe { out.as_mut_ptr().add(out_base) };
                let dst = (dst, geo.o_stride, geo.s_stride);
                self.product(kmat, geo, grp, patches, dst, parallel, pool);
            } else {
                let dst = (temp.as_mut_ptr(), geo.s_total, 1);
                assert!(temp.len() >= cout_g * geo.s_total);
                self.product(kmat, geo, grp, patches, dst, parallel, pool);
                self.scatter(geo, temp, out, out_base);
            }
        }
    }

    /// `dst = kernel of group grp x patches`, `dst.0[o * dst.1 + s * dst.2]`
    /// for output feature `o` of the group and output position `s`; every
    /// such address must be writable, by this call alone (the callers check
    /// before they call).
    fn product<T: ConvElem>(
        &self,
        kmat: &[T],
        geo: &Geometry,
        grp: usize,
        patches: &[T],
        dst: (*mut T, usize, usize),
        parallel: bool,
        pool: &Pool,
    ) {
        let (cout_g, s_total, rows) = (geo.cout_g, geo.s_total, geo.rows);
        assert!((grp + 1) * cout_g * rows <= kmat.len() && rows * s_total <= patches.len());
        let (p_rs, p_cs) = match geo.by_position || geo.channels_last {
            true => (1, rows),
            false => (s_total, 1),
        };
        // SAFETY: kmat rows [grp*cout_g, (grp+1)*cout_g) are cout_g x rows,
        // row-major, and patches is rows x s_total, row-major or by
        // position (both checked above); rows is at least 1 (`execute`
        // returns before); the destination addresses are the caller's to
        // vouch for.
        unsafe {
            T::product(
                (cout_g, s_total, rows),
                dst,
                (kmat.as_ptr().add(grp * cout_g * rows), rows, 1),
                (patches.as_ptr(), p_rs, p_cs),
                parallel,
                pool,
            );
        }
    }

    /// Copies `temp` (cout_g x s_total, row-major) to the output positions
    /// of one group of one batch element, which start at `out_base`.
    fn scatter<T: Copy>(&self, geo: &Geometry, temp: &[T], out: &mut [T], out_base: usize) {
        let n_sp = geo.o_sp.len();
        let mut pos = vec![0usize; n_sp];
        for s in 0..geo.s_total {
            let mut rem = s;
            for k in (0..n_sp).rev() {
                pos[k] = rem % geo.o_sp[k];
                rem /= geo.o_sp[k];
            }
            let sp_off: usize = pos.iter().zip(&geo.sp_strides).map(|(p, st)| p * st).sum();
            for o in 0..geo.cout_g {
                out[out_base + o * geo.o_stride + sp_off] = temp[o * geo.s_total + s];
            }
        }
    }

    /// The patches of batch element `b`, features from `c0` on, in the
    /// layout `geo.by_position` chooses.
    fn im2col<T: Copy>(
        &self,
        lhs: &[T],
        geo: &Geometry,
        b: usize,
        c0: usize,
        patches: &mut [T],
        zero: T,
    ) {
        if geo.channels_last {
            self.im2col_channels_last(lhs, geo, b, c0, patches, zero)
        } else if geo.by_position {
            self.im2col_by_position(lhs, geo, b, c0, patches, zero)
        } else {
            self.im2col_by_row(lhs, geo, b, c0, patches, zero)
        }
    }

    /// The input's spatial strides, the offset of batch element `b`, and
    /// the feature stride.
    fn input_layout(&self, geo: &Geometry, b: usize) -> (Vec<usize>, usize, usize) {
        let d = &self.d;
        let in_strides = d
            .input_spatial_dimensions
            .iter()
            .map(|&k| geo.ls[k as usize])
            .collect();
        (
            in_strides,
            b * geo.ls[d.input_batch_dimension as usize],
            geo.ls[d.input_feature_dimension as usize],
        )
    }

    /// The input index along spatial dimension `s` read by output index `o`
    /// and kernel index `k`, if any (none in padding and holes).
    fn source(&self, geo: &Geometry, s: usize, o: usize, k: usize) -> Option<usize> {
        let w = &self.window.dims[s];
        let pos = o as i64 * w.stride + k as i64 * w.window_dilation - w.pad_low;
        if pos < 0 || pos % w.base_dilation != 0 {
            return None;
        }
        let i = pos / w.base_dilation;
        (i < geo.in_sp[s] as i64).then_some(i as usize)
    }

    /// Fills `patches[s * rows + p * cin_g + ci]` with the input value under
    /// kernel position `p` for output position `s` (zero in padding and
    /// holes): each tap's features are one contiguous run of the input.
    fn im2col_channels_last<T: Copy>(
        &self,
        lhs: &[T],
        geo: &Geometry,
        b: usize,
        c0: usize,
        patches: &mut [T],
        zero: T,
    ) {
        let n_sp = geo.in_sp.len();
        let cin = geo.cin_g;
        let (in_strides, base_b, _) = self.input_layout(geo, b);
        let taps = self.tap_table(geo, &in_strides);
        let mut opos = vec![0usize; n_sp];
        let mut kpos = vec![0usize; n_sp];
        for patch in patches.chunks_mut(geo.rows).take(geo.s_total) {
            kpos.fill(0);
            for run in patch.chunks_mut(cin) {
                taps.copy(run, lhs, base_b + c0, &opos, &kpos, zero);
                step(&mut kpos, &geo.k_sp);
            }
            step(&mut opos, &geo.o_sp);
        }
    }

    /// The input offsets of every (output index, kernel index) pair along
    /// each spatial dimension (see [`Taps`]).
    fn tap_table(&self, geo: &Geometry, in_strides: &[usize]) -> Taps {
        let offsets = (0..geo.in_sp.len())
            .map(|s| {
                (0..geo.o_sp[s] * geo.k_sp[s])
                    .map(|ok| {
                        let (o, k) = (ok / geo.k_sp[s], ok % geo.k_sp[s]);
                        self.source(geo, s, o, k).map(|i| i * in_strides[s])
                    })
                    .collect()
            })
            .collect();
        Taps {
            offsets,
            k_sp: geo.k_sp.clone(),
        }
    }

    /// Fills `patches[s * rows + ci * kk + p]` with the input value under
    /// kernel position `p` for output position `s` (zero in padding and
    /// holes): each output position's patch in one piece, built in runs
    /// along the kernel's innermost spatial dimension.
    fn im2col_by_position<T: Copy>(
        &self,
        lhs: &[T],
        geo: &Geometry,
        b: usize,
        c0: usize,
        patches: &mut [T],
        zero: T,
    ) {
        let n_sp = geo.in_sp.len();
        let last = n_sp - 1;
        let kk: usize = geo.k_sp.iter().product();
        let k_last = geo.k_sp[last];
        let (in_strides, base_b, fstride) = self.input_layout(geo, b);
        let mut opos = vec![0usize; n_sp];
        let mut kpos = vec![0usize; n_sp];
        for (s, patch) in patches.chunks_mut(geo.rows).take(geo.s_total).enumerate() {
            let mut rem = s;
            for k in (0..n_sp).rev() {
                opos[k] = rem % geo.o_sp[k];
                rem /= geo.o_sp[k];
            }
            // Along the kernel's innermost dimension: the input index of each tap.
            let taps: Vec<Option<usize>> = (0..k_last)
                .map(|k| self.source(geo, last, opos[last], k))
                .collect();
            for (ci, rows) in patch.chunks_mut(kk).enumerate() {
                let feature_base = base_b + (c0 + ci) * fstride;
                for (ko, seg) in rows.chunks_mut(k_last).enumerate() {
                    let mut rem = ko;
                    let mut off = Some(feature_base);
                    for k in (0..last).rev() {
                        kpos[k] = rem % geo.k_sp[k];
                        rem /= geo.k_sp[k];
                        off = match (off, self.source(geo, k, opos[k], kpos[k])) {
                            (Some(o), Some(i)) => Some(o + i * in_strides[k]),
                            _ => None,
                        };
                    }
                    match off {
                        None => seg.fill(zero),
                        Some(base) => {
                            for (v, tap) in seg.iter_mut().zip(&taps) {
                                *v = match tap {
                                    Some(i) => lhs[base + i * in_strides[last]],
                                    None => zero,
                                };
                            }
                        }
                    }
                }
            }
        }
    }

    /// Fills `patches[(ci * kk + p) * s_total + s]` with the input value under
    /// kernel position `p` for output position `s` (zero in padding and holes).
    fn im2col_by_row<T: Copy>(
        &self,
        lhs: &[T],
        geo: &Geometry,
        b: usize,
        c0: usize,
        patches: &mut [T],
        zero: T,
    ) {
        let (in_sp, k_sp, o_sp) = (&geo.in_sp, &geo.k_sp, &geo.o_sp);
        let n_sp = in_sp.len();
        let kk: usize = k_sp.iter().product();
        let s_total = geo.s_total;
        let w = &self.window.dims;
        let (in_strides, base_b, fstride) = self.input_layout(geo, b);
        let source = |s: usize, o: usize, k: usize| self.source(geo, s, o, k);
        let mut kpos = vec![0usize; n_sp];
        let mut opos = vec![0usize; n_sp];
        let last = n_sp.wrapping_sub(1);
        let row_len = if n_sp == 0 { 1 } else { o_sp[last] };
        for p in 0..kk {
            let mut rem = p;
            for s in (0..n_sp).rev() {
                kpos[s] = rem % k_sp[s];
                rem /= k_sp[s];
            }
            // Along the innermost spatial dimension: the outputs [lo, hi) read
            // the input at first + (o - lo) * step; the rest is padding.
            let (lo, hi, first, step) = if n_sp == 0 {
                (0, 1, 0, 0)
            } else {
                let valid: Vec<(usize, usize)> = (0..row_len)
                    .filter_map(|o| source(last, o, kpos[last]).map(|i| (o, i)))
                    .collect();
                let regular = valid.windows(2).all(|v| v[1].0 == v[0].0 + 1)
                    && valid
                        .windows(2)
                        .all(|v| v[1].1 as i64 - v[0].1 as i64 == w[last].stride);
                match (valid.first(), valid.last()) {
                    (Some(&(lo, first)), Some(&(last_o, _)))
                        if regular && w[last].base_dilation == 1 =>
                    {
                        (
                            lo,
                            last_o + 1,
                            first,
                            w[last].stride as usize * in_strides[last],
                        )
                    }
                    (None, _) => (0, 0, 0, 0),
                    // Holes from base dilation: element by element.
                    _ => (usize::MAX, 0, 0, 0),
                }
            };
            let outer_count: usize = s_total / row_len.max(1);
            for ci in 0..geo.cin_g {
                let row = &mut patches[(ci * kk + p) * s_total..(ci * kk + p + 1) * s_total];
                let feature_base = base_b + (c0 + ci) * fstride;
                for oc in 0..outer_count {
                    let mut rem = oc;
                    let mut off = Some(feature_base);
                    for s in (0..n_sp.saturating_sub(1)).rev() {
                        opos[s] = rem % o_sp[s];
                        rem /= o_sp[s];
                        off = match (off, source(s, opos[s], kpos[s])) {
                            (Some(o), Some(i)) => Some(o + i * in_strides[s]),
                            _ => None,
                        };
                    }
                    let seg = &mut row[oc * row_len..(oc + 1) * row_len];
                    match off {
                        None => seg.fill(zero),
                        Some(base) if lo == usize::MAX => {
                            let st = in_strides[last];
                            for (o, v) in seg.iter_mut().enumerate() {
                                *v = match source(last, o, kpos[last]) {
                                    Some(i) => lhs[base + i * st],
                                    None => zero,
                                };
                            }
                        }
                        Some(base) => {
                            seg[..lo].fill(zero);
                            seg[hi..].fill(zero);
                            let start = base
                                + if n_sp == 0 {
                                    0
                                } else {
                                    first * in_strides[last]
                                };
                            let inner = &mut seg[lo..hi];
                            if step == 1 {
                                inner.copy_from_slice(&lhs[start..start + inner.len()]);
                            } else {
                                for (j, v) in inner.iter_mut().enumerate() {
                                    *v = lhs[start + j * step];
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

impl ConvKernel {
    fn run_int<T: Int + ConvElem>(
        &self,
        l: &ArrayData,
        r: &ArrayData,
        pool: &Pool,
    ) -> Option<ArrayData> {
        let (a, b) = (ints_as::<T>(l, pool)?, ints_as::<T>(r, pool)?);
        let out = T::wrap(self.execute(&a, &b, pool));
        give_back(pool, [a, b]);
        Some(out)
    }
}

impl Kernel for ConvKernel {
    fn name(&self) -> &'static str {
        "convolution (im2col + gemm)"
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        let (Some(l), Some(r)) = (
            inputs.first().and_then(Value::array),
            inputs.get(1).and_then(Value::array),
        ) else {
            return Err("a convolution reads two arrays".into());
        };
        use PrimitiveType::*;
        let (ld, rd) = (l.data(), r.data());
        let data = match self.acc {
            F32 => {
                let a = reals_as::<f32>(ld, |v| v as f32, pool);
                let b = reals_as::<f32>(rd, |v| v as f32, pool);
                a.zip(b).map(|(a, b)| {
                    let sums = self.execute(&a, &b, pool);
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
            F64 => {
                let a = reals_as::<f64>(ld, |v| v, pool);
                let b = reals_as::<f64>(rd, |v| v, pool);
                a.zip(b).map(|(a, b)| {
                    let sums = self.execute(&a, &b, pool);
                    give_back(pool, [a, b]);
                    ArrayData::F64(sums)
                })
            }
            S8 => self.run_int::<i8>(ld, rd, pool),
            S16 => self.run_int::<i16>(ld, rd, pool),
            S32 => self.run_int::<i32>(ld, rd, pool),
            S64 => self.run_int::<i64>(ld, rd, pool),
            U8 => self.run_int::<u8>(ld, rd, pool),
            U16 => self.run_int::<u16>(ld, rd, pool),
            U32 => self.run_int::<u32>(ld, rd, pool),
            U64 => self.run_int::<u64>(ld, rd, pool),
            _ => None,
        };
        let Some(data) = data else {
            return Err(format!(
                "convolution of {} and {} into {} is not handled natively",
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
