//! Convolution as matrix products: for each batch element and feature
//! group, the input patches are laid out as a matrix with one row per
//! (input feature, kernel position) and one column per output position
//! (im2col, transposed, so rows copy along the input's innermost spatial
//! dimension), and the kernel as a matrix with one row per output feature;
//! their product is the output, written straight into place through
//! strides. Padding (negative too), strides, and dilation of the input and
//! of the kernel are handled while building the patches. Any dimension
//! layout works; batch groups and reversed windows go to the interpreter.

use oxla_hlo::ir::{ConvDimensionNumbers, Window};
use oxla_hlo::{
    ArrayData, ArrayLiteral, ArrayShape, HloComputation, HloInstruction, PrimitiveType,
};

use rayon::prelude::*;

use super::Kernel;
use crate::buffer::Pool;
use crate::value::Value;

#[derive(Clone, Debug)]
pub(crate) struct ConvKernel {
    ty: PrimitiveType,
    lhs_dims: Vec<i64>,
    rhs_dims: Vec<i64>,
    out_dims: Vec<i64>,
    d: ConvDimensionNumbers,
    window: Window,
    groups: usize,
}

pub(crate) fn plan(comp: &HloComputation, instr: &HloInstruction) -> Option<ConvKernel> {
    let ty = instr.shape.element_type()?;
    if !matches!(ty, PrimitiveType::F32 | PrimitiveType::F64) {
        return None;
    }
    let l = comp.instruction(instr.operands[0]).shape.as_array()?;
    let r = comp.instruction(instr.operands[1]).shape.as_array()?;
    if l.element_type() != ty
        || r.element_type() != ty
        || instr.attrs.batch_group_count.unwrap_or(1) != 1
    {
        return None;
    }
    let window = instr.attrs.window.clone()?;
    if window.dims.iter().any(|w| w.window_reversal) {
        return None;
    }
    Some(ConvKernel {
        ty,
        lhs_dims: l.dims().to_vec(),
        rhs_dims: r.dims().to_vec(),
        out_dims: instr.shape.as_array()?.dims().to_vec(),
        d: instr.attrs.conv_dnums.clone()?,
        window,
        groups: instr.attrs.feature_group_count.unwrap_or(1).max(1) as usize,
    })
}

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
        let mut at = Some(base);
        for (s, offsets) in self.offsets.iter().enumerate() {
            at = match (at, offsets[opos[s] * self.k_sp[s] + kpos[s]]) {
                (Some(a), Some(i)) => Some(a + i),
                _ => None,
            };
        }
        match at {
            Some(a) => copy_run(run, &lhs[a..a + run.len()]),
            None => run.fill(zero),
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
            !by_position && n_sp > 0 && cin / g > 1 && ls[d.input_feature_dimension as usize] == 1;
        Geometry {
            ls,
            os,
            cin_g: cin / g,
            cout_g: cout / g,
            in_sp,
            k_sp,
            o_sp,
            rows: (cin / g) * kk,
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
        // dimensions.
        let mut positions = vec![0usize];
        for s in (0..n_sp).rev() {
            let stride = rs[d.kernel_spatial_dimensions[s] as usize];
            positions = (0..geo.k_sp[s])
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

    fn execute<T: oxla_hlo::NativeType>(
        &self,
        lhs: &[T],
        rhs: &[T],
        one: T,
        zero: T,
        pool: &Pool,
    ) -> Vec<T> {
        let d = &self.d;
        let geo = self.geometry();
        let batch = self.lhs_dims[d.input_batch_dimension as usize] as usize;
        let mut out = pool.take::<T>(self.out_dims.iter().map(|&x| x as usize).product());
        if out.is_empty() || geo.rows == 0 {
            // No taps: every output sums nothing.
            out.fill(zero);
            return out;
        }
        if self.folds(&geo, batch) {
            self.execute_folded(lhs, rhs, &geo, batch, &mut out, one, zero, pool);
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
                        one,
                        zero,
                        gemm::Parallelism::None,
                    );
                    pool.give(patches);
                    pool.give(temp);
                });
        } else if batch > 1 && flops >= 1 << 20 {
            // Batch elements whose outputs interleave (a weight gradient's
            // output has the input features where the batch was): each
            // computes its products privately, in parallel, and they are
            // copied into place after.
            let per = self.groups * geo.cout_g * geo.s_total;
            let products: Vec<Vec<T>> = (0..batch)
                .into_par_iter()
                .map(|b| {
                    let mut patches = pool.take::<T>(geo.rows * geo.s_total);
                    let mut temp = pool.take::<T>(per);
                    for grp in 0..self.groups {
                        self.im2col(lhs, &geo, b, grp * geo.cin_g, &mut patches, zero);
                        let part = &mut temp[grp * geo.cout_g * geo.s_total..];
                        let dst = (part.as_mut_ptr(), geo.s_total, 1);
                        self.product(
                            &kmat,
                            &geo,
                            grp,
                            &patches,
                            dst,
                            one,
                            zero,
                            gemm::Parallelism::None,
                        );
                    }
                    pool.give(patches);
                    temp
                })
                .collect();
            for (b, temp) in products.into_iter().enumerate() {
                for grp in 0..self.groups {
                    let part = &temp[grp * geo.cout_g * geo.s_total..];
                    let out_base = b * batch_stride + grp * geo.cout_g * geo.o_stride;
                    self.scatter(&geo, part, &mut out, out_base);
                }
                pool.give(temp);
            }
        } else {
            let parallelism = if flops >= 1 << 20 {
                gemm::Parallelism::Rayon(rayon::current_num_threads())
            } else {
                gemm::Parallelism::None
            };
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
                    one,
                    zero,
                    parallelism,
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
    #[allow(clippy::too_many_arguments)]
    fn execute_folded<T: oxla_hlo::NativeType>(
        &self,
        lhs: &[T],
        rhs: &[T],
        geo: &Geometry,
        batch: usize,
        out: &mut [T],
        one: T,
        zero: T,
        pool: &Pool,
    ) {
        let d = &self.d;
        let n_sp = geo.in_sp.len();
        let kk: usize = geo.k_sp.iter().product();
        let cols = geo.s_total * batch;
        let (in_strides, _, fstride) = self.input_layout(geo, 0);
        let taps = self.tap_table(geo, &in_strides);
        let mut patches = pool.take::<T>(geo.rows * cols);
        // Row r of the patches; `kpos` and `opos` are scratch of n_sp.
        let fill = |(kpos, opos): &mut (Vec<usize>, Vec<usize>), (r, row): (usize, &mut [T])| {
            let (f, mut p) = (r / kk.max(1), r % kk.max(1));
            for s in (0..n_sp).rev() {
                kpos[s] = p % geo.k_sp[s];
                p /= geo.k_sp[s];
            }
            opos.fill(0);
            for run in row.chunks_mut(batch) {
                taps.copy(run, lhs, f * fstride, opos, kpos, zero);
                step(opos, &geo.o_sp);
            }
        };
        let scratch = || (vec![0usize; n_sp], vec![0usize; n_sp]);
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
        // The kernel as a rows x cout matrix: read in place when (feature,
        // position) walks it with one stride, else gathered.
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
        let direct = match ps {
            Some((_, None)) => Some(i_stride),
            Some((_, Some(st))) if geo.cin_g == 1 || i_stride == st * kk => Some(st),
            _ => None,
        };
        let cout = geo.cout_g;
        let kmat = direct.is_none().then(|| self.kernel_matrix(rhs, geo, pool));
        let (b_ptr, b_rs, b_cs) = match (&kmat, direct) {
            (Some(k), _) => (k.as_ptr(), 1, geo.rows),
            (None, st) => (rhs.as_ptr(), st.unwrap_or(1), o_stride),
        };
        let batch_stride = geo.os[d.output_batch_dimension as usize];
        let last = (cols - 1) * batch_stride + (cout - 1) * geo.o_stride;
        assert!(last < out.len() && geo.rows * cols <= patches.len());
        let parallelism = if cols * cout * geo.rows >= 1 << 20 {
            gemm::Parallelism::Rayon(rayon::current_num_threads())
        } else {
            gemm::Parallelism::None
        };
        // SAFETY: the patches are rows x cols, column c of row r at
        // r * cols + c (checked above); the kernel element (r, o) is at
        // r * b_rs + o * b_cs, inside `rhs` when read in place (the strides
        // describe its own row-major layout) or inside `kmat`; the output
        // element (c, o) at c * batch_stride + o * o_stride, at most `last`.
        unsafe {
            gemm::gemm(
                cols,
                cout,
                geo.rows,
                out.as_mut_ptr(),
                geo.o_stride as isize,
                batch_stride as isize,
                false,
                patches.as_ptr(),
                cols as isize,
                1,
                b_ptr,
                b_cs as isize,
                b_rs as isize,
                zero,
                one,
                false,
                false,
                false,
                parallelism,
            );
        }
        pool.give(patches);
        if let Some(k) = kmat {
            pool.give(k);
        }
    }

    /// The output of batch element `b` into `out`, whose element `base` is
    /// the batch element's first output.
    fn batch_element<T: oxla_hlo::NativeType>(
        &self,
        lhs: &[T],
        kmat: &[T],
        geo: &Geometry,
        b: usize,
        out: &mut [T],
        base: usize,
        patches: &mut [T],
        temp: &mut [T],
        one: T,
        zero: T,
        parallelism: gemm::Parallelism,
    ) {
        let cout_g = geo.cout_g;
        for grp in 0..self.groups {
            self.im2col(lhs, geo, b, grp * geo.cin_g, patches, zero);
            let out_base = base + grp * cout_g * geo.o_stride;
            if geo.merged {
                let last = (cout_g.saturating_sub(1)) * geo.o_stride
                    + (geo.s_total.saturating_sub(1)) * geo.s_stride;
                assert!(out_base + last < out.len());
                // SAFETY: out_base is inside `out`, and so is every address
                // out_base + o * o_stride + s * s_stride (checked above).
                let dst = unsafe { out.as_mut_ptr().add(out_base) };
                self.product(
                    kmat,
                    geo,
                    grp,
                    patches,
                    (dst, geo.o_stride, geo.s_stride),
                    one,
                    zero,
                    parallelism,
                );
            } else {
                let dst = (temp.as_mut_ptr(), geo.s_total, 1);
                self.product(kmat, geo, grp, patches, dst, one, zero, parallelism);
                self.scatter(geo, temp, out, out_base);
            }
        }
    }

    /// `dst = kernel of group grp x patches`, `dst.0[o * dst.1 + s * dst.2]`
    /// for output feature `o` of the group and output position `s`; every
    /// such address must be writable (the caller checks).
    #[allow(clippy::too_many_arguments)]
    fn product<T: oxla_hlo::NativeType>(
        &self,
        kmat: &[T],
        geo: &Geometry,
        grp: usize,
        patches: &[T],
        dst: (*mut T, usize, usize),
        one: T,
        zero: T,
        parallelism: gemm::Parallelism,
    ) {
        let (cout_g, s_total, rows) = (geo.cout_g, geo.s_total, geo.rows);
        assert!((grp + 1) * cout_g * rows <= kmat.len() && rows * s_total <= patches.len());
        // SAFETY: kmat rows [grp*cout_g, (grp+1)*cout_g) are cout_g x rows,
        // row-major, and patches is rows x s_total, row-major (both checked
        // above); the destination addresses are the caller's to vouch for.
        unsafe {
            gemm::gemm(
                cout_g,
                s_total,
                rows,
                dst.0,
                dst.2 as isize,
                dst.1 as isize,
                false,
                kmat.as_ptr().add(grp * cout_g * rows),
                1,
                rows as isize,
                patches.as_ptr(),
                if geo.by_position || geo.channels_last {
                    rows as isize
                } else {
                    1
                },
                if geo.by_position || geo.channels_last {
                    1
                } else {
                    s_total as isize
                },
                zero,
                one,
                false,
                false,
                false,
                parallelism,
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
        let data = match (l.data(), r.data()) {
            (ArrayData::F32(a), ArrayData::F32(b)) => {
                ArrayData::F32(self.execute(a, b, 1.0f32, 0.0, pool))
            }
            (ArrayData::F64(a), ArrayData::F64(b)) => {
                ArrayData::F64(self.execute(a, b, 1.0f64, 0.0, pool))
            }
            _ => return Err("convolution operands must be f32 or f64".into()),
        };
        let shape = ArrayShape::new(self.ty, self.out_dims.clone()).map_err(|e| e.to_string())?;
        Ok(Value::owned(
            ArrayLiteral::new(shape, data).map_err(|e| e.to_string())?,
        ))
    }
}
