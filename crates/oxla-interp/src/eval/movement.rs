//! Data movement: broadcast, reshape, bitcast, transpose, reverse, slice,
//! dynamic-slice, dynamic-update-slice, pad, concatenate, iota and
//! get-dimension-size. Each works out, for every result element in row-major
//! order, which operand element it copies (or that it is padding), then
//! gathers those elements in one pass.

use oxla_hlo::{ArrayData, ArrayLiteral, HloInstruction, PrimitiveType};

use super::convert::{from_bytes, to_bytes};
use super::{attr, result_array};
use crate::element::{self, Elem};
use crate::error::{OpResult, fail};
use crate::index::{dims_usize, for_each_index, linear, strides};
use crate::value::{Value, make_array};

/// Checks that every entry of `dims` indexes a dimension of a rank-`rank` array.
fn check_dims(what: &str, dims: &[i64], rank: usize) -> OpResult<Vec<usize>> {
    dims.iter()
        .map(|&d| {
            usize::try_from(d)
                .ok()
                .filter(|&d| d < rank)
                .ok_or_else(|| {
                    format!("{what} {dims:?}: {d} is not a dimension of a rank-{rank} array").into()
                })
        })
        .collect()
}

/// The operand elements at `indices`, as an array of the instruction's shape.
fn gathered(instr: &HloInstruction, x: &ArrayLiteral, indices: &[usize]) -> OpResult<Value> {
    let out = result_array(instr)?;
    Ok(Value::array(make_array(out, x.data().take(indices))?))
}

pub(crate) fn iota(instr: &HloInstruction) -> OpResult<Value> {
    let out = result_array(instr)?;
    let dim = *attr(&instr.attrs.iota_dimension, "iota_dimension")?;
    let d = check_dims("iota_dimension", &[dim], out.rank())?[0];
    let dims = dims_usize(out.dims());
    let stride = strides(&dims)[d];
    let ty = out.element_type();
    let n = out.element_count()?;
    let mut data = ArrayData::zeros(ty, n);
    for i in 0..n {
        let k = (i / stride) % dims[d];
        // Integers wrap and floats round to nearest even, as `convert` does.
        element::convert(Elem::S64(k as i64), ty).write(&mut data, i);
    }
    Ok(Value::array(make_array(out, data)?))
}

/// `broadcast(x), dimensions={...}`: operand dimension `i` becomes result
/// dimension `dimensions[i]`; size-1 operand dimensions repeat.
pub(crate) fn broadcast(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let x = operands[0].as_array()?;
    let out = result_array(instr)?;
    let dims = check_dims(
        "dimensions",
        attr(&instr.attrs.dimensions, "dimensions")?,
        out.rank(),
    )?;
    let in_dims = dims_usize(x.dims());
    let out_dims = dims_usize(out.dims());
    if dims.len() != in_dims.len()
        || dims
            .iter()
            .zip(&in_dims)
            .any(|(&d, &s)| s != 1 && s != out_dims[d])
    {
        return fail(format!(
            "cannot broadcast {} to {out} along dimensions {dims:?}",
            x.shape()
        ));
    }
    let in_strides = strides(&in_dims);
    let mut indices = Vec::with_capacity(out.element_count()?);
    for_each_index::<()>(&out_dims, |o| {
        let mut s = 0;
        for (i, &d) in dims.iter().enumerate() {
            if in_dims[i] != 1 {
                s += o[d] * in_strides[i];
            }
        }
        indices.push(s);
        Ok(())
    })
    .ok();
    gathered(instr, x, &indices)
}

/// `reshape`: the same row-major elements under new dimensions.
pub(crate) fn reshape(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let x = operands[0].as_array()?;
    let out = result_array(instr)?;
    Ok(Value::array(make_array(out, x.data().clone())?))
}

/// `bitcast`: the operand's bytes under the result's shape (layouts are
/// metadata in oxla, so this is a reshape, or a byte reinterpretation when the
/// element type changes).
pub(crate) fn bitcast(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let x = operands[0].as_array()?;
    let out = result_array(instr)?;
    if out.element_type() == x.element_type() {
        return reshape(instr, operands);
    }
    let bytes = to_bytes(x.data());
    if bytes.len() != out.byte_size()? {
        return fail(format!("{} and {out} have different byte sizes", x.shape()));
    }
    Ok(Value::array(make_array(
        out,
        from_bytes(out.element_type(), &bytes),
    )?))
}

/// `transpose`: result dimension `k` is operand dimension `permutation[k]`.
pub(crate) fn transpose(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let x = operands[0].as_array()?;
    let out = result_array(instr)?;
    let perm = check_dims(
        "permutation",
        attr(&instr.attrs.dimensions, "dimensions")?,
        x.shape().rank(),
    )?;
    let in_dims = dims_usize(x.dims());
    let out_dims = dims_usize(out.dims());
    if perm.len() != in_dims.len() || perm.iter().zip(&out_dims).any(|(&p, &o)| in_dims[p] != o) {
        return fail(format!(
            "permutation {perm:?} does not map {} to {out}",
            x.shape()
        ));
    }
    let in_strides = strides(&in_dims);
    let mut indices = Vec::with_capacity(out.element_count()?);
    for_each_index::<()>(&out_dims, |o| {
        indices.push(o.iter().zip(&perm).map(|(&i, &p)| i * in_strides[p]).sum());
        Ok(())
    })
    .ok();
    gathered(instr, x, &indices)
}

pub(crate) fn reverse(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let x = operands[0].as_array()?;
    let rev = check_dims(
        "dimensions",
        attr(&instr.attrs.dimensions, "dimensions")?,
        x.shape().rank(),
    )?;
    let dims = dims_usize(x.dims());
    let st = strides(&dims);
    let mut reversed = vec![false; dims.len()];
    for d in rev {
        reversed[d] = true;
    }
    let mut indices = Vec::with_capacity(x.element_count());
    for_each_index::<()>(&dims, |o| {
        let mut s = 0;
        for d in 0..dims.len() {
            let i = if reversed[d] {
                dims[d] - 1 - o[d]
            } else {
                o[d]
            };
            s += i * st[d];
        }
        indices.push(s);
        Ok(())
    })
    .ok();
    gathered(instr, x, &indices)
}

/// Copies the box starting at `starts` with stride `steps` and the result's
/// dimensions out of `x`, after checking it lies inside `x`.
fn strided_box(
    instr: &HloInstruction,
    x: &ArrayLiteral,
    starts: &[usize],
    steps: &[usize],
) -> OpResult<Value> {
    let out = result_array(instr)?;
    let in_dims = dims_usize(x.dims());
    let out_dims = dims_usize(out.dims());
    let fits = starts.len() == in_dims.len()
        && out_dims.len() == in_dims.len()
        && (0..in_dims.len())
            .all(|d| out_dims[d] == 0 || starts[d] + (out_dims[d] - 1) * steps[d] < in_dims[d]);
    if !fits {
        return fail(format!(
            "the slice starting at {starts:?} with strides {steps:?} and shape {out} does not fit in {}",
            x.shape()
        ));
    }
    let st = strides(&in_dims);
    let mut indices = Vec::with_capacity(out.element_count()?);
    for_each_index::<()>(&out_dims, |o| {
        let mut s = 0;
        for d in 0..o.len() {
            s += (starts[d] + o[d] * steps[d]) * st[d];
        }
        indices.push(s);
        Ok(())
    })
    .ok();
    gathered(instr, x, &indices)
}

pub(crate) fn slice(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let x = operands[0].as_array()?;
    let s = attr(&instr.attrs.slice, "slice")?;
    if s.iter().any(|d| d.start < 0 || d.stride < 1) {
        return fail(format!(
            "slice {s:?} has a negative start or a stride below 1"
        ));
    }
    let starts: Vec<usize> = s.iter().map(|d| d.start as usize).collect();
    let steps: Vec<usize> = s.iter().map(|d| d.stride as usize).collect();
    strided_box(instr, x, &starts, &steps)
}

/// The start indices of a dynamic slice: one scalar operand per dimension,
/// or (the older form) a single rank-1 operand holding them all. Each is
/// read with its own signedness.
fn start_indices(rank: usize, indices: &[Value]) -> OpResult<Vec<i128>> {
    let values: Vec<i128> = match indices {
        [v] if v.as_array()?.shape().rank() == 1 => {
            let a = v.as_array()?;
            (0..a.element_count())
                .map(|i| Elem::read(a.data(), i).as_index())
                .collect()
        }
        _ => indices
            .iter()
            .map(|v| v.as_elem().map(Elem::as_index))
            .collect::<OpResult<_>>()?,
    };
    if values.len() != rank {
        return fail(format!("needs {rank} start indices, got {}", values.len()));
    }
    Ok(values)
}

/// Clamps `start` into `[0, dim - size]`, as XLA does.
fn clamp_start(start: i128, dim: usize, size: usize) -> usize {
    start.clamp(0, dim.saturating_sub(size) as i128) as usize
}

pub(crate) fn dynamic_slice(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let x = operands[0].as_array()?;
    let out = result_array(instr)?;
    let dims = dims_usize(x.dims());
    let sizes = dims_usize(out.dims());
    if sizes.len() != dims.len() || sizes.iter().zip(&dims).any(|(s, d)| s > d) {
        return fail(format!("cannot slice {out} out of {}", x.shape()));
    }
    let starts: Vec<usize> = start_indices(dims.len(), &operands[1..])?
        .into_iter()
        .enumerate()
        .map(|(d, s)| clamp_start(s, dims[d], sizes[d]))
        .collect();
    strided_box(instr, x, &starts, &vec![1; dims.len()])
}

pub(crate) fn dynamic_update_slice(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let x = operands[0].as_array()?;
    let update = operands[1].as_array()?;
    let out = result_array(instr)?;
    let dims = dims_usize(x.dims());
    let sizes = dims_usize(update.dims());
    if sizes.len() != dims.len()
        || sizes.iter().zip(&dims).any(|(s, d)| s > d)
        || update.element_type() != x.element_type()
    {
        return fail(format!(
            "update {} does not fit in {}",
            update.shape(),
            x.shape()
        ));
    }
    let starts: Vec<usize> = start_indices(dims.len(), &operands[2..])?
        .into_iter()
        .enumerate()
        .map(|(d, s)| clamp_start(s, dims[d], sizes[d]))
        .collect();
    let st = strides(&dims);
    let mut pairs = Vec::with_capacity(update.element_count());
    let mut k = 0;
    for_each_index::<()>(&sizes, |u| {
        let dst: usize = u
            .iter()
            .zip(&starts)
            .zip(&st)
            .map(|((&i, &s), &t)| (i + s) * t)
            .sum();
        pairs.push((dst, k));
        k += 1;
        Ok(())
    })
    .ok();
    let mut data = x.data().clone();
    data.scatter_from(update.data(), pairs);
    Ok(Value::array(make_array(out, data)?))
}

/// `pad`: interior padding between elements first, then edge padding (which
/// may be negative, removing elements).
pub(crate) fn pad(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let x = operands[0].as_array()?;
    let value = operands[1].as_array()?;
    let out = result_array(instr)?;
    let config = attr(&instr.attrs.padding, "padding")?;
    let dims = dims_usize(x.dims());
    if config.len() != dims.len()
        || value.element_count() != 1
        || config.iter().any(|p| p.interior < 0)
    {
        return fail(format!("bad padding {config:?} for {}", x.shape()));
    }
    let st = strides(&dims);
    let out_dims = dims_usize(out.dims());
    let mut indices = Vec::with_capacity(out.element_count()?);
    for_each_index::<()>(&out_dims, |o| {
        let mut src = Some(0usize);
        for d in 0..o.len() {
            // In i128: `low` and `interior` may be anywhere in i64 when the
            // dimension leaves them no room to matter (a size-1 operand
            // takes any interior padding).
            let p = o[d] as i128 - config[d].low as i128;
            let step = config[d].interior as i128 + 1;
            if p < 0 || p % step != 0 || (p / step) as usize >= dims[d] {
                src = None;
                break;
            }
            src = src.map(|s| s + (p / step) as usize * st[d]);
        }
        indices.push(src);
        Ok(())
    })
    .ok();
    Ok(Value::array(make_array(
        out,
        x.data().take_or(&indices, value.data()),
    )?))
}

pub(crate) fn concatenate(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let out = result_array(instr)?;
    let dims = attr(&instr.attrs.dimensions, "dimensions")?;
    let d = check_dims("dimension", dims, out.rank())?;
    let [d] = d[..] else {
        return fail(format!("needs exactly one dimension, got {dims:?}"));
    };
    let parts: Vec<&ArrayLiteral> = operands
        .iter()
        .map(Value::as_array)
        .collect::<OpResult<_>>()?;
    Ok(Value::array(concat_arrays(&parts, d, out)?))
}

/// Joins `parts` along dimension `d` into an array of shape `out`.
pub(crate) fn concat_arrays(
    parts: &[&ArrayLiteral],
    d: usize,
    out: &oxla_hlo::ArrayShape,
) -> OpResult<ArrayLiteral> {
    let out_dims = dims_usize(out.dims());
    if d >= out_dims.len() {
        return fail(format!("{out} has no dimension {d}"));
    }
    // Where each operand starts along `d` and in the joined data.
    let mut starts = Vec::with_capacity(parts.len() + 1);
    let mut bases = Vec::with_capacity(parts.len());
    let (mut along, mut base) = (0usize, 0usize);
    for p in parts {
        let pd = dims_usize(p.dims());
        if pd.len() != out_dims.len()
            || (0..pd.len()).any(|i| i != d && pd[i] != out_dims[i])
            || p.element_type() != out.element_type()
        {
            return fail(format!("operand {} does not fit in {out}", p.shape()));
        }
        starts.push(along);
        bases.push(base);
        along += pd[d];
        base += p.element_count();
    }
    starts.push(along);
    if along != out_dims[d] {
        return fail(format!("the operands do not add up to {out}"));
    }
    let part_strides: Vec<Vec<usize>> = parts
        .iter()
        .map(|p| strides(&dims_usize(p.dims())))
        .collect();
    let mut indices = Vec::with_capacity(out.element_count()?);
    let mut local = vec![0usize; out_dims.len()];
    for_each_index::<()>(&out_dims, |o| {
        let pos = o[d];
        let k = (0..parts.len()).find(|&k| pos < starts[k + 1]).unwrap_or(0);
        local.copy_from_slice(o);
        local[d] = pos - starts[k];
        indices.push(bases[k] + linear(&local, &part_strides[k]));
        Ok(())
    })
    .ok();
    let datas: Vec<&ArrayData> = parts.iter().map(|p| p.data()).collect();
    let joined = ArrayData::concat(&datas)
        .ok_or_else(|| format!("operands of {out} have different element types"))?;
    make_array(out, joined.take(&indices))
}

/// The sub-array `[start, start + size)` of `a` along dimension `d`.
pub(crate) fn slice_along(
    a: &ArrayLiteral,
    d: usize,
    start: usize,
    size: usize,
) -> OpResult<ArrayLiteral> {
    let dims = dims_usize(a.dims());
    if d >= dims.len() || start + size > dims[d] {
        return fail(format!(
            "cannot take [{start}, {}) of dimension {d} of {}",
            start + size,
            a.shape()
        ));
    }
    let mut out_dims = a.dims().to_vec();
    out_dims[d] = size as i64;
    let shape = oxla_hlo::ArrayShape::new(a.element_type(), out_dims)?;
    let st = strides(&dims);
    let mut indices = Vec::with_capacity(shape.element_count()?);
    for_each_index::<()>(&dims_usize(shape.dims()), |o| {
        indices.push(linear(o, &st) + start * st[d]);
        Ok(())
    })
    .ok();
    make_array(&shape, a.data().take(&indices))
}

pub(crate) fn get_dimension_size(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let x = operands[0].as_array()?;
    let d = check_dims(
        "dimensions",
        attr(&instr.attrs.dimensions, "dimensions")?,
        x.shape().rank(),
    )?;
    let [d] = d[..] else {
        return fail("needs exactly one dimension");
    };
    Ok(Value::scalar(element::convert(
        Elem::S64(x.dims()[d]),
        PrimitiveType::S32,
    )))
}
