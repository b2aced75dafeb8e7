//! Data movement with runtime or multiple sources, for any element type:
//! `concatenate`, `dynamic-slice` and `dynamic-update-slice` (which writes
//! into its operand in place when the operand's buffer is not shared, so a
//! loop that updates one slice of a large array per iteration does not
//! copy the array each time). Start indices are clamped into
//! `[0, dim - size]` as XLA does.

use std::sync::Arc;

use oxla_hlo::{
    ArrayData, ArrayLiteral, ArrayShape, HloComputation, HloInstruction, NativeType, PrimitiveType,
    with_array_data,
};

use super::Kernel;
use crate::buffer::Pool;
use crate::value::{Buf, Value};

pub(crate) fn row_major(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

pub(crate) fn array_dims(
    comp: &HloComputation,
    instr: &HloInstruction,
    operand: usize,
) -> Option<Vec<usize>> {
    Some(
        comp.instruction(*instr.operands.get(operand)?)
            .shape
            .as_array()?
            .dims_usize(),
    )
}

/// Whether `a` has dimensions `dims`.
pub(crate) fn has_dims(a: &ArrayLiteral, dims: &[usize]) -> bool {
    a.dims()
        .iter()
        .map(|&d| d as usize)
        .eq(dims.iter().copied())
}

/// Calls `f(offset_in_block, offset_in_array)` for each innermost row of a
/// block of dimensions `block` placed at `start` in an array of strides
/// `strides` (the block is row-major, dense).
fn for_each_row(
    block: &[usize],
    start: &[usize],
    strides: &[usize],
    mut f: impl FnMut(usize, usize),
) {
    let rank = block.len();
    if rank == 0 {
        f(0, 0);
        return;
    }
    let row = block[rank - 1];
    let rows: usize = block[..rank - 1].iter().product();
    if row == 0 || rows == 0 {
        return;
    }
    let base: usize = start.iter().zip(strides).map(|(s, t)| s * t).sum();
    for r in 0..rows {
        let (mut rem, mut off) = (r, base);
        for d in (0..rank - 1).rev() {
            off += (rem % block[d]) * strides[d];
            rem /= block[d];
        }
        f(r * row, off);
    }
}

/// Start indices from scalar operands (or one vector, the seed's form),
/// clamped so the block fits.
fn starts(values: &[Value<'_>], dims: &[usize], sizes: &[usize]) -> Result<Vec<usize>, String> {
    let arrays = values
        .iter()
        .map(|v| v.array().map(ArrayLiteral::data))
        .collect::<Option<Vec<_>>>()
        .ok_or("start indices must be arrays")?;
    let mut out = Vec::with_capacity(dims.len());
    clamped_starts(&arrays, dims, sizes, &mut out)?;
    Ok(out)
}

/// Start indices from one-element arrays, one per dimension (or one
/// vector of them, the seed's form), each clamped into `[0, dim - size]`
/// so the block fits, into `out`.
pub(crate) fn clamped_starts(
    values: &[&ArrayData],
    dims: &[usize],
    sizes: &[usize],
    out: &mut Vec<usize>,
) -> Result<(), String> {
    let vector = match values {
        [v] if dims.len() != 1 || v.len() != 1 => Some(*v),
        _ => None,
    };
    let count = vector.map_or(values.len(), |v| v.len());
    if count != dims.len() || sizes.len() != dims.len() {
        return Err(format!("{count} start indices for rank {}", dims.len()));
    }
    out.clear();
    for d in 0..count {
        let raw = match vector {
            Some(v) => index_at(v, d),
            None if values[d].len() == 1 => index_at(values[d], 0),
            None => return Err("start indices must be scalars".into()),
        };
        out.push(raw.clamp(0, dims[d].saturating_sub(sizes[d]) as i128) as usize);
    }
    Ok(())
}

/// Element `i` of an index array as an integer: read directly for the
/// index types JAX writes (s32, s64), through the generic scalar otherwise.
/// A loop's `dynamic-slice` reads its starts every iteration. Callers pass
/// `i < v.len()` (checked in `clamped_starts` before any read).
#[inline]
pub(crate) fn index_at(v: &ArrayData, i: usize) -> i128 {
    match v {
        ArrayData::S32(x) => x[i] as i128,
        ArrayData::S64(x) => x[i] as i128,
        _ => v.scalar(i).as_i128(),
    }
}

/// Copies the block of dimensions `sizes` at `start` of `src` (row-major
/// strides `strides`) into `out`; false if the types or lengths disagree.
pub(crate) fn slice_into(
    src: &ArrayData,
    strides: &[usize],
    sizes: &[usize],
    start: &[usize],
    out: &mut ArrayData,
) -> bool {
    fn go<T: NativeType>(
        o: &mut [T],
        src: &ArrayData,
        strides: &[usize],
        sizes: &[usize],
        start: &[usize],
    ) -> bool {
        let Some(src) = T::slice(src) else {
            return false;
        };
        if o.len() != sizes.iter().product::<usize>()
            || !block_fits(src.len(), strides, sizes, start)
        {
            return false;
        }
        let row = sizes.last().copied().unwrap_or(1);
        for_each_row(sizes, start, strides, |b, a| {
            o[b..b + row].copy_from_slice(&src[a..a + row])
        });
        true
    }
    with_array_data!(out, o => go(o, src, strides, sizes, start))
}

/// Writes `update` (dimensions `sizes`) into `dst` (row-major strides
/// `strides`) at `start`; false if the types or lengths disagree.
pub(crate) fn update_into(
    dst: &mut ArrayData,
    strides: &[usize],
    update: &ArrayData,
    sizes: &[usize],
    start: &[usize],
) -> bool {
    fn go<T: NativeType>(
        d: &mut [T],
        update: &ArrayData,
        strides: &[usize],
        sizes: &[usize],
        start: &[usize],
    ) -> bool {
        let Some(u) = T::slice(update) else {
            return false;
        };
        if u.len() != sizes.iter().product::<usize>() || !block_fits(d.len(), strides, sizes, start)
        {
            return false;
        }
        let row = sizes.last().copied().unwrap_or(1);
        for_each_row(sizes, start, strides, |b, a| {
            d[a..a + row].copy_from_slice(&u[b..b + row])
        });
        true
    }
    with_array_data!(dst, d => go(d, update, strides, sizes, start))
}

/// Copies `n` elements of `src` from element `from` into `dst` at element
/// `at`; false if the types differ or either range runs past its array.
pub(crate) fn copy_span(
    dst: &mut ArrayData,
    at: usize,
    src: &ArrayData,
    from: usize,
    n: usize,
) -> bool {
    fn go<T: NativeType>(d: &mut [T], at: usize, src: &ArrayData, from: usize, n: usize) -> bool {
        let s = T::slice(src).and_then(|s| s.get(from..from.checked_add(n)?));
        let d = at.checked_add(n).and_then(|end| d.get_mut(at..end));
        match (d, s) {
            (Some(d), Some(s)) => {
                d.copy_from_slice(s);
                true
            }
            _ => false,
        }
    }
    with_array_data!(dst, d => go(d, at, src, from, n))
}

/// Whether a block of `sizes` at `start` ends inside an array of `len`
/// elements with row-major `strides` (so its rows can be indexed freely).
fn block_fits(len: usize, strides: &[usize], sizes: &[usize], start: &[usize]) -> bool {
    if sizes.contains(&0) {
        return true;
    }
    let last: usize = strides
        .iter()
        .zip(sizes.iter().zip(start))
        .map(|(t, (n, s))| (n - 1 + s) * t)
        .sum();
    strides.len() == sizes.len() && start.len() == sizes.len() && last < len
}

pub(crate) struct DynamicSliceKernel {
    ty: PrimitiveType,
    dims: Vec<usize>,
    strides: Vec<usize>,
    sizes: Vec<usize>,
}

pub(crate) fn plan_dynamic_slice(
    comp: &HloComputation,
    instr: &HloInstruction,
) -> Option<DynamicSliceKernel> {
    let out = instr.shape.as_array()?;
    let dims = array_dims(comp, instr, 0)?;
    Some(DynamicSliceKernel {
        ty: out.element_type(),
        strides: row_major(&dims),
        dims,
        sizes: out.dims_usize(),
    })
}

/// `n` elements of `like`'s type from the pool, values unspecified.
fn take_like<T: NativeType>(_like: &[T], n: usize, pool: &Pool) -> ArrayData {
    T::wrap(pool.take::<T>(n))
}

impl Kernel for DynamicSliceKernel {
    fn name(&self) -> &'static str {
        "dynamic-slice"
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        let (first, rest) = inputs
            .split_first()
            .ok_or("dynamic-slice needs an operand")?;
        let x = first
            .array()
            .filter(|a| has_dims(a, &self.dims))
            .ok_or("dynamic-slice reads an array of its operand's shape")?;
        let start = starts(rest, &self.dims, &self.sizes)?;
        let n = self.sizes.iter().product();
        let mut data = with_array_data!(x.data(), v => take_like(v, n, pool));
        if !slice_into(x.data(), &self.strides, &self.sizes, &start, &mut data) {
            return Err("dynamic-slice reads an array of its operand's shape".into());
        }
        let shape = ArrayShape::new(
            self.ty,
            self.sizes.iter().map(|&d| d as i64).collect::<Vec<_>>(),
        )
        .map_err(|e| e.to_string())?;
        Ok(Value::owned(
            ArrayLiteral::new(shape, data).map_err(|e| e.to_string())?,
        ))
    }
}

pub(crate) struct DynamicUpdateSliceKernel {
    dims: Vec<usize>,
    strides: Vec<usize>,
    update: Vec<usize>,
}

pub(crate) fn plan_dynamic_update_slice(
    comp: &HloComputation,
    instr: &HloInstruction,
) -> Option<DynamicUpdateSliceKernel> {
    let dims = array_dims(comp, instr, 0)?;
    Some(DynamicUpdateSliceKernel {
        strides: row_major(&dims),
        dims,
        update: array_dims(comp, instr, 1)?,
    })
}

impl Kernel for DynamicUpdateSliceKernel {
    fn name(&self) -> &'static str {
        "dynamic-update-slice"
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        if inputs.len() < 2 {
            return Err("dynamic-update-slice needs an operand and an update".into());
        }
        let start = starts(&inputs[2..], &self.dims, &self.update)?;
        // The operand's own buffer when nothing else holds it, else a copy.
        let mut target = match std::mem::replace(&mut inputs[0], Value::Token) {
            Value::Array(Buf::Own(a)) => {
                Arc::try_unwrap(a).unwrap_or_else(|shared| copy_of(&shared, pool))
            }
            Value::Array(Buf::Arg(a)) => copy_of(a, pool),
            _ => return Err("dynamic-update-slice reads arrays".into()),
        };
        let update = inputs[1]
            .array()
            .filter(|a| has_dims(a, &self.update))
            .ok_or("dynamic-update-slice reads an update of its declared shape")?;
        if !has_dims(&target, &self.dims) {
            return Err("dynamic-update-slice reads an operand of its declared shape".into());
        }
        if !update_into(
            target.data_mut(),
            &self.strides,
            update.data(),
            &self.update,
            &start,
        ) {
            return Err("dynamic-update-slice operands of different types".into());
        }
        Ok(Value::owned(target))
    }
}

pub(crate) fn copy_of(a: &ArrayLiteral, pool: &Pool) -> ArrayLiteral {
    fn go<T: NativeType>(v: &[T], pool: &Pool) -> ArrayData {
        let mut out = pool.take::<T>(v.len());
        out.copy_from_slice(v);
        T::wrap(out)
    }
    let data = with_array_data!(a.data(), v => go(v, pool));
    ArrayLiteral::new(a.shape().clone(), data).unwrap_or_else(|_| a.clone())
}

pub(crate) struct ConcatenateKernel {
    ty: PrimitiveType,
    /// Each operand's extent along the concatenated dimension, times the
    /// size of the dimensions after it.
    chunks: Vec<usize>,
    outer: usize,
    out_dims: Vec<usize>,
}

pub(crate) fn plan_concatenate(
    comp: &HloComputation,
    instr: &HloInstruction,
) -> Option<ConcatenateKernel> {
    let out = instr.shape.as_array()?;
    let d = *instr.attrs.dimensions.as_ref()?.first()? as usize;
    let out_dims = out.dims_usize();
    let inner: usize = out_dims.get(d + 1..)?.iter().product();
    let chunks = (0..instr.operands.len())
        .map(|j| Some(array_dims(comp, instr, j)?.get(d)? * inner))
        .collect::<Option<_>>()?;
    Some(ConcatenateKernel {
        ty: out.element_type(),
        chunks,
        outer: out_dims[..d].iter().product(),
        out_dims,
    })
}

fn concat<T: NativeType>(
    k: &ConcatenateKernel,
    parts: &[&ArrayData],
    pool: &Pool,
) -> Option<ArrayData> {
    let srcs: Vec<&[T]> = parts.iter().map(|p| T::slice(p)).collect::<Option<_>>()?;
    if srcs.len() != k.chunks.len()
        || srcs
            .iter()
            .zip(&k.chunks)
            .any(|(s, &c)| s.len() != k.outer * c)
    {
        return None;
    }
    let row: usize = k.chunks.iter().sum();
    let mut out = pool.take::<T>(k.outer * row);
    for o in 0..k.outer {
        let mut at = o * row;
        for (src, &c) in srcs.iter().zip(&k.chunks) {
            out[at..at + c].copy_from_slice(&src[o * c..(o + 1) * c]);
            at += c;
        }
    }
    Some(T::wrap(out))
}

impl Kernel for ConcatenateKernel {
    fn name(&self) -> &'static str {
        "concatenate"
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        let parts: Vec<&ArrayData> = inputs
            .iter()
            .map(|v| {
                v.array()
                    .map(|a| a.data())
                    .ok_or("concatenate reads arrays")
            })
            .collect::<Result<_, _>>()?;
        let data = oxla_hlo::with_native_type!(self.ty, T => concat::<T>(self, &parts, pool))
            .ok_or("concatenate operands of different types")?;
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

/// `bitcast-convert`: the operand's bytes, row-major and little-endian,
/// read as the result type (a width change adds or drops a minor dimension).
pub(crate) struct BitcastConvertKernel {
    shape: ArrayShape,
    /// Between types of one width: element by element, into pooled memory.
    same_width: Option<super::typed::ConvertFn>,
}

pub(crate) fn plan_bitcast_convert(
    comp: &HloComputation,
    instr: &HloInstruction,
) -> Option<BitcastConvertKernel> {
    let shape = instr.shape.as_array()?.clone();
    let from = comp
        .instruction(*instr.operands.first()?)
        .shape
        .element_type()?;
    let same_width = super::typed::bitcast_fn(from, shape.element_type());
    (shape.element_type() != PrimitiveType::Pred)
        .then_some(BitcastConvertKernel { shape, same_width })
}

impl Kernel for BitcastConvertKernel {
    fn name(&self) -> &'static str {
        "bitcast-convert"
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        let x = inputs
            .first()
            .and_then(Value::array)
            .ok_or("bitcast-convert reads an array")?;
        if x.element_type() == PrimitiveType::Pred {
            return Err("bitcast-convert of pred".into());
        }
        if let Some(f) = self.same_width {
            let n = x.element_count();
            let mut out = oxla_hlo::with_native_type!(self.shape.element_type(), T => {
                T::wrap(pool.take::<T>(n))
            });
            if !f(x.data(), &mut out) {
                return Err("bitcast-convert of an unexpected operand".into());
            }
            let out = ArrayLiteral::new(self.shape.clone(), out).map_err(|e| e.to_string())?;
            return Ok(Value::owned(out));
        }
        let out = ArrayLiteral::from_bytes(self.shape.clone(), &x.to_bytes())
            .map_err(|e| e.to_string())?;
        Ok(Value::owned(out))
    }
}
