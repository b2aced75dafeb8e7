//! `dot` with dimension numbers, through the `gemm` crate. Each operand's
//! batch, free and contracting dimensions are merged into one stride each
//! where the layout allows (so transposed operands cost nothing); an operand
//! whose dimensions cannot be merged is first copied into that order. Each
//! batch is one strided matrix product, run on the shared thread pool when
//! it is big enough to pay for it.

use oxla_hlo::ir::DotDimensionNumbers;
use oxla_hlo::{
    ArrayData, ArrayLiteral, ArrayShape, HloComputation, HloInstruction, PrimitiveType,
};

use super::Kernel;
use crate::buffer::Pool;
use crate::value::Value;

/// Products with fewer multiply-adds than this run on one thread.
const PARALLEL_MIN_FLOPS: usize = 1 << 20;

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
    ty: PrimitiveType,
    lhs: Side,
    rhs: Side,
    out_dims: Vec<i64>,
}

/// A dot the kernel handles: f32, f64, c64 or c128 throughout.
pub(crate) fn plan(comp: &HloComputation, instr: &HloInstruction) -> Option<DotKernel> {
    let d: &DotDimensionNumbers = instr.attrs.dot_dnums.as_ref()?;
    let ty = instr.shape.element_type()?;
    if !matches!(
        ty,
        PrimitiveType::F32 | PrimitiveType::F64 | PrimitiveType::C64 | PrimitiveType::C128
    ) {
        return None;
    }
    let l = comp.instruction(instr.operands[0]).shape.as_array()?;
    let r = comp.instruction(instr.operands[1]).shape.as_array()?;
    if l.element_type() != ty || r.element_type() != ty {
        return None;
    }
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
        s[i] = s[i + 1] * dims[i + 1] as usize;
    }
    s
}

/// The size and single stride of dimensions `group` taken in order, if
/// they are laid out so that one stride walks them all.
fn merged(dims: &[i64], strides: &[usize], group: &[usize]) -> Option<(usize, usize)> {
    let size: usize = group.iter().map(|&d| dims[d] as usize).product();
    let live: Vec<usize> = group.iter().copied().filter(|&d| dims[d] != 1).collect();
    match live.as_slice() {
        [] => Some((size, 1)),
        [first, rest @ ..] => {
            let mut prev = *first;
            for &d in rest {
                if strides[prev] != strides[d] * dims[d] as usize {
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
    let n: usize = new_dims.iter().map(|&d| d as usize).product();
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
    let rows_size: usize = new_dims[nb..nb + nf].iter().map(|&d| d as usize).product();
    let cols_size: usize = new_dims[nb + nf..].iter().map(|&d| d as usize).product();
    Matrices {
        data: std::borrow::Cow::Owned(out),
        batch_strides: new_strides[..nb].to_vec(),
        batch_dims: new_dims[..nb].iter().map(|&d| d as usize).collect(),
        rows: (rows_size, cols_size.max(1)),
        cols: (cols_size, 1),
    }
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
            if m * n * k <= TINY_FLOPS {
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

impl Kernel for DotKernel {
    fn name(&self) -> &'static str {
        "dot (gemm)"
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        let (Some(l), Some(r)) = (
            inputs.first().and_then(Value::array),
            inputs.get(1).and_then(Value::array),
        ) else {
            return Err("a dot reads two arrays".into());
        };
        let data = match (l.data(), r.data()) {
            (ArrayData::F32(a), ArrayData::F32(b)) => {
                ArrayData::F32(self.execute(a, b, 1.0f32, 0.0, pool))
            }
            (ArrayData::F64(a), ArrayData::F64(b)) => {
                ArrayData::F64(self.execute(a, b, 1.0f64, 0.0, pool))
            }
            (ArrayData::C64(a), ArrayData::C64(b)) => {
                use oxla_hlo::num_complex::Complex32;
                ArrayData::C64(self.execute(
                    a,
                    b,
                    Complex32::new(1.0, 0.0),
                    Complex32::new(0.0, 0.0),
                    pool,
                ))
            }
            (ArrayData::C128(a), ArrayData::C128(b)) => {
                use oxla_hlo::num_complex::Complex64;
                ArrayData::C128(self.execute(
                    a,
                    b,
                    Complex64::new(1.0, 0.0),
                    Complex64::new(0.0, 0.0),
                    pool,
                ))
            }
            _ => {
                return Err(format!(
                    "dot of {} and {} is not handled natively",
                    l.shape(),
                    r.shape()
                ));
            }
        };
        let shape = ArrayShape::new(self.ty, self.out_dims.clone()).map_err(|e| e.to_string())?;
        Ok(Value::owned(
            ArrayLiteral::new(shape, data).map_err(|e| e.to_string())?,
        ))
    }
}
