//! `pad` of any element type: each block of the output along its outermost
//! dimension is filled with the padding value and then receives the input
//! rows that land in it (contiguous copies when there is no interior
//! padding). Negative padding crops. Large outputs split their blocks
//! across threads.

use oxla_hlo::ir::PadDim;
use oxla_hlo::{
    ArrayData, ArrayLiteral, ArrayShape, HloComputation, HloInstruction, NativeType, PrimitiveType,
    with_array_data,
};
use rayon::prelude::*;

use super::Kernel;
use super::fused::PARALLEL_MIN;
use crate::buffer::Pool;
use crate::value::Value;

pub(crate) struct PadKernel {
    ty: PrimitiveType,
    in_dims: Vec<usize>,
    out_dims: Vec<usize>,
    padding: Vec<PadDim>,
}

pub(crate) fn plan(comp: &HloComputation, instr: &HloInstruction) -> Option<PadKernel> {
    let out = instr.shape.as_array()?;
    let input = comp
        .instruction(*instr.operands.first()?)
        .shape
        .as_array()?;
    let padding = instr.attrs.padding.clone()?;
    if padding.len() != input.rank() || out.rank() != input.rank() {
        return None;
    }
    Some(PadKernel {
        ty: out.element_type(),
        in_dims: input.dims_usize(),
        out_dims: out.dims_usize(),
        padding,
    })
}

/// Where input index `j` lands along one dimension, if inside the output.
#[inline(always)]
fn land(p: &PadDim, j: usize, out: usize) -> Option<usize> {
    // In i128: the amounts may be anywhere in i64 where they cancel or
    // meet a dimension of size 1.
    let o = p.low as i128 + j as i128 * (p.interior as i128 + 1);
    (o >= 0 && o < out as i128).then_some(o as usize)
}

impl PadKernel {
    fn pad<T: NativeType>(&self, src: &[T], value: T, pool: &Pool) -> Vec<T> {
        let n_out: usize = self.out_dims.iter().product();
        let mut out = pool.take::<T>(n_out);
        let rank = self.out_dims.len();
        if n_out == 0 {
            return out;
        }
        if rank == 0 {
            out.copy_from_slice(src);
            return out;
        }
        if src.is_empty() || rank == 1 {
            out.fill(value);
            if !src.is_empty() {
                self.block(src, &mut out, 0);
            }
            return out;
        }
        let block = n_out / self.out_dims[0].max(1);
        let work = |(o0, chunk): (usize, &mut [T])| {
            chunk.fill(value);
            // The input block landing here along dimension 0, if any.
            let p = &self.padding[0];
            let step = p.interior as i128 + 1;
            let shifted = o0 as i128 - p.low as i128;
            if shifted < 0 || shifted % step != 0 || (shifted / step) as usize >= self.in_dims[0] {
                return;
            }
            let j0 = (shifted / step) as usize;
            let in_block: usize = self.in_dims[1..].iter().product();
            self.block(&src[j0 * in_block..(j0 + 1) * in_block], chunk, 1);
        };
        if n_out >= PARALLEL_MIN && self.out_dims[0] > 1 {
            out.par_chunks_mut(block.max(1)).enumerate().for_each(work);
        } else {
            out.chunks_mut(block.max(1)).enumerate().for_each(work);
        }
        out
    }

    /// Copies the input block `src` (dimensions `d..`) into the output block
    /// `dst`, already holding the padding value.
    fn block<T: Copy>(&self, src: &[T], dst: &mut [T], d: usize) {
        let rank = self.out_dims.len();
        if d == rank {
            dst[0] = src[0];
            return;
        }
        let p = &self.padding[d];
        let (n_in, n_out) = (self.in_dims[d], self.out_dims[d]);
        let in_block: usize = self.in_dims[d + 1..].iter().product();
        let out_block: usize = self.out_dims[d + 1..].iter().product();
        if d + 1 == rank && p.interior == 0 {
            // The innermost dimension without holes: one contiguous copy.
            let first = (0..n_in).find(|&j| land(p, j, n_out).is_some());
            if let Some(j_lo) = first {
                let o_lo = land(p, j_lo, n_out).unwrap_or(0);
                let count = (n_in - j_lo).min(n_out - o_lo);
                dst[o_lo..o_lo + count].copy_from_slice(&src[j_lo..j_lo + count]);
            }
            return;
        }
        for j in 0..n_in {
            if let Some(o) = land(p, j, n_out) {
                self.block(
                    &src[j * in_block..(j + 1) * in_block],
                    &mut dst[o * out_block..(o + 1) * out_block],
                    d + 1,
                );
            }
        }
    }
}

fn go<T: NativeType>(
    k: &PadKernel,
    src: &[T],
    value: &ArrayData,
    pool: &Pool,
) -> Option<ArrayData> {
    let value = *T::slice(value)?.first()?;
    Some(T::wrap(k.pad(src, value, pool)))
}

impl Kernel for PadKernel {
    fn name(&self) -> &'static str {
        "pad"
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        let (Some(x), Some(v)) = (
            inputs.first().and_then(Value::array),
            inputs.get(1).and_then(Value::array),
        ) else {
            return Err("pad reads an array and a padding value".into());
        };
        let data = with_array_data!(x.data(), src => go(self, src, v.data(), pool))
            .ok_or("pad operands of different types")?;
        let shape = ArrayShape::new(
            self.ty,
            self.out_dims.iter().map(|&d| d as i64).collect::<Vec<_>>(),
        )
        .map_err(|e| e.to_string())?;
        Ok(Value::owned(
            ArrayLiteral::new(shape, data).map_err(|e| e.to_string())?,
        ))
    }
}
