//! Operations that move or select elements without arithmetic: broadcast,
//! reshape, transpose, reverse, slice, dynamic slices, pad, concatenate,
//! gather, scatter, iota, bitcast, get-dimension-size.

use super::elementwise::dims_text;
use super::{
    InferResult, check_dims_in_range, check_permutation, check_signature, err, expect_array,
    expect_scalar, make_array,
};
use crate::element_type::PrimitiveType;
use crate::ir::{GatherDimensionNumbers, PadDim, ScatterDimensionNumbers, SliceDim};
use crate::shape::{ArrayShape, ProgramShape, Shape};

/// Shape of `broadcast` (XLA's BroadcastInDim): operand dimension `i` maps to
/// result dimension `dimensions[i]` and must equal it or be 1.
pub fn broadcast_in_dim(operand: &Shape, result: &Shape, dimensions: &[i64]) -> InferResult {
    let op = "broadcast";
    let a = expect_array(op, "operand", operand)?;
    let r = expect_array(op, "result", result)?;
    if a.element_type() != r.element_type() {
        return err(
            op,
            format!("result {r} must have the operand's element type ({a})"),
        );
    }
    if dimensions.len() != a.rank() {
        return err(
            op,
            format!("dimensions {dimensions:?} must have one entry per operand dimension ({a})"),
        );
    }
    check_dims_in_range(op, "dimensions", dimensions, r.rank())?;
    for (i, &d) in dimensions.iter().enumerate() {
        let (from, to) = (a.dim(i), r.dim(d as usize));
        if from != to && from != 1 {
            return err(
                op,
                format!(
                    "operand dimension {i} (size {from}) must be 1 or equal result dimension {d} (size {to}); {a} to {r}"
                ),
            );
        }
    }
    Ok(result.clone())
}

/// Shape of the seed's `Broadcast(operand, sizes)`: new major dimensions `sizes`
/// followed by the operand's dimensions.
pub fn broadcast_sizes(operand: &Shape, sizes: &[i64]) -> InferResult {
    let op = "Broadcast";
    let a = expect_array(op, "operand", operand)?;
    if let Some(&s) = sizes.iter().find(|&&s| s < 0) {
        return err(
            op,
            format!("broadcast sizes {sizes:?} contain the negative size {s}"),
        );
    }
    let mut dims = sizes.to_vec();
    dims.extend_from_slice(a.dims());
    make_array(op, a.element_type(), dims)
}

/// Shape of `reshape` to `new_sizes`: the element counts must agree.
pub fn reshape(operand: &Shape, new_sizes: &[i64]) -> InferResult {
    let op = "reshape";
    let a = expect_array(op, "operand", operand)?;
    let out = make_array(op, a.element_type(), new_sizes.to_vec())?;
    let (from, to) = (
        element_count(op, a)?,
        element_count(op, expect_array(op, "result", &out)?)?,
    );
    if from != to {
        return err(
            op,
            format!(
                "cannot reshape {a} ({from} elements) to {} ({to} elements): the element counts differ",
                dims_text(new_sizes)
            ),
        );
    }
    Ok(out)
}

fn element_count(op: &str, a: &ArrayShape) -> InferResult<usize> {
    a.element_count().or_else(|e| err(op, e.to_string()))
}

/// Shape of the seed's `Collapse(operand, dimensions)`: `dimensions` must be
/// an in-order, consecutive run of the operand's dimensions; they become one.
pub fn collapse(operand: &Shape, dimensions: &[i64]) -> InferResult {
    let op = "Collapse";
    let a = expect_array(op, "operand", operand)?;
    if dimensions.is_empty() {
        return err(
            op,
            format!("needs at least one dimension to collapse; operand {a}"),
        );
    }
    check_dims_in_range(op, "dimensions", dimensions, a.rank())?;
    if dimensions.windows(2).any(|w| w[1] != w[0] + 1) {
        return err(
            op,
            format!(
                "dimensions {dimensions:?} must be an in-order, consecutive subset of the dimensions of {a}"
            ),
        );
    }
    let (first, last) = (
        dimensions[0] as usize,
        *dimensions.last().unwrap_or(&0) as usize,
    );
    let mut dims: Vec<i64> = a.dims()[..first].to_vec();
    // The collapsed run may overflow when a zero elsewhere keeps the array
    // empty (f32[2^40,2^40,0]).
    let Some(collapsed) = a.dims()[first..=last]
        .iter()
        .try_fold(1i64, |n, &d| n.checked_mul(d))
    else {
        return err(
            op,
            format!("collapsing dimensions {dimensions:?} of {a} gives a size that overflows"),
        );
    };
    dims.push(collapsed);
    dims.extend_from_slice(&a.dims()[last + 1..]);
    make_array(op, a.element_type(), dims)
}

/// Shape of `transpose`: `result[i] = operand[permutation[i]]`.
pub fn transpose(operand: &Shape, permutation: &[i64]) -> InferResult {
    let op = "transpose";
    let a = expect_array(op, "operand", operand)?;
    check_permutation(op, "permutation", permutation, a.rank())?;
    let dims = permutation.iter().map(|&p| a.dim(p as usize)).collect();
    make_array(op, a.element_type(), dims)
}

/// Shape of `reverse`.
pub fn reverse(operand: &Shape, dimensions: &[i64]) -> InferResult {
    let op = "reverse";
    let a = expect_array(op, "operand", operand)?;
    check_dims_in_range(op, "dimensions", dimensions, a.rank())?;
    Ok(operand.clone())
}

/// Shape of `slice`: per dimension `0 <= start <= limit <= size` and `stride >= 1`.
pub fn slice(operand: &Shape, dims: &[SliceDim]) -> InferResult {
    let op = "slice";
    let a = expect_array(op, "operand", operand)?;
    if dims.len() != a.rank() {
        return err(
            op,
            format!(
                "needs one [start:limit:stride] per dimension of {a}, got {}",
                dims.len()
            ),
        );
    }
    let mut out = Vec::with_capacity(dims.len());
    for (i, s) in dims.iter().enumerate() {
        let size = a.dim(i);
        if s.start < 0 || s.start > s.limit || s.limit > size {
            return err(
                op,
                format!(
                    "dimension {i}: [{}:{}] must satisfy 0 <= start <= limit <= {size} (operand {a})",
                    s.start, s.limit
                ),
            );
        }
        if s.stride < 1 {
            return err(
                op,
                format!(
                    "dimension {i}: stride {} must be positive (operand {a})",
                    s.stride
                ),
            );
        }
        // ceil((limit - start) / stride), without overflow for huge strides.
        let len = s.limit - s.start;
        out.push(if len == 0 {
            0
        } else {
            (len - 1) / s.stride + 1
        });
    }
    make_array(op, a.element_type(), out)
}

fn check_index_operands(op: &str, a: &ArrayShape, indices: &[&Shape]) -> InferResult<()> {
    // Today's HLO passes one scalar per dimension; the 2017 form passes one
    // rank-1 array holding all of them.
    let single_vector =
        indices.len() == 1 && indices[0].as_array().is_some_and(|s| s.rank() == 1) && a.rank() != 1;
    let mut ty = None;
    if single_vector
        || (indices.len() == 1
            && a.rank() == 1
            && indices[0].as_array().is_some_and(|s| s.rank() == 1))
    {
        let s = expect_array(op, "start indices", indices[0])?;
        if s.dim(0) != a.rank() as i64 {
            return err(
                op,
                format!("start indices {s} must have one entry per dimension of {a}"),
            );
        }
        ty = Some(s.element_type());
    } else {
        if indices.len() != a.rank() {
            return err(
                op,
                format!(
                    "needs one scalar start index per dimension of {a}, got {}",
                    indices.len()
                ),
            );
        }
        for (i, s) in indices.iter().enumerate() {
            let s = expect_scalar(op, &format!("start index {i}"), s)?;
            if ty.is_some_and(|t| t != s.element_type()) {
                return err(op, "start indices must all have the same element type");
            }
            ty = Some(s.element_type());
        }
    }
    if let Some(t) = ty
        && !t.is_integral()
    {
        return err(op, format!("start indices must be integers, got {t}"));
    }
    Ok(())
}

/// Shape of `dynamic-slice` with sizes `sizes`.
pub fn dynamic_slice(operand: &Shape, indices: &[&Shape], sizes: &[i64]) -> InferResult {
    let op = "dynamic-slice";
    let a = expect_array(op, "operand", operand)?;
    check_index_operands(op, a, indices)?;
    if sizes.len() != a.rank() {
        return err(
            op,
            format!("slice sizes {sizes:?} must have one entry per dimension of {a}"),
        );
    }
    for (i, &s) in sizes.iter().enumerate() {
        if s < 0 || s > a.dim(i) {
            return err(
                op,
                format!(
                    "slice size {s} of dimension {i} must be in [0, {}] (operand {a})",
                    a.dim(i)
                ),
            );
        }
    }
    make_array(op, a.element_type(), sizes.to_vec())
}

/// Shape of `dynamic-update-slice`: the update fits inside the operand.
pub fn dynamic_update_slice(operand: &Shape, update: &Shape, indices: &[&Shape]) -> InferResult {
    let op = "dynamic-update-slice";
    let a = expect_array(op, "operand", operand)?;
    let u = expect_array(op, "update", update)?;
    check_index_operands(op, a, indices)?;
    if u.element_type() != a.element_type() {
        return err(
            op,
            format!("update {u} must have the operand's element type ({a})"),
        );
    }
    if u.rank() != a.rank() {
        return err(op, format!("update {u} must have the operand's rank ({a})"));
    }
    for i in 0..a.rank() {
        if u.dim(i) > a.dim(i) {
            return err(
                op,
                format!("update {u} does not fit in operand {a} along dimension {i}"),
            );
        }
    }
    Ok(operand.clone())
}

/// Shape of `pad`: per dimension `low + high + size + max(size - 1, 0) * interior`.
pub fn pad(operand: &Shape, padding_value: &Shape, config: &[PadDim]) -> InferResult {
    let op = "pad";
    let a = expect_array(op, "operand", operand)?;
    let v = expect_scalar(op, "padding value", padding_value)?;
    if v.element_type() != a.element_type() {
        return err(
            op,
            format!("padding value {v} must have the operand's element type ({a})"),
        );
    }
    if config.len() != a.rank() {
        return err(
            op,
            format!(
                "padding config has {} dimensions but operand {a} has {}",
                config.len(),
                a.rank()
            ),
        );
    }
    let mut dims = Vec::with_capacity(config.len());
    for (i, p) in config.iter().enumerate() {
        if p.interior < 0 {
            return err(
                op,
                format!(
                    "interior padding {} of dimension {i} must not be negative",
                    p.interior
                ),
            );
        }
        let size = a.dim(i);
        let padded = (size.max(1) - 1)
            .checked_mul(p.interior)
            .and_then(|x| x.checked_add(size))
            .and_then(|x| x.checked_add(p.low))
            .and_then(|x| x.checked_add(p.high));
        match padded {
            Some(d) if d >= 0 => dims.push(d),
            _ => {
                return err(
                    op,
                    format!(
                        "padding {}_{}_{} of dimension {i} (size {size}) leaves a negative or overflowing size",
                        p.low, p.high, p.interior
                    ),
                );
            }
        }
    }
    make_array(op, a.element_type(), dims)
}

/// Shape of `concatenate` along `dimension`.
pub fn concatenate(operands: &[&Shape], dimension: i64) -> InferResult {
    let op = "concatenate";
    let Some(first) = operands.first() else {
        return err(op, "needs at least one operand");
    };
    let f = expect_array(op, "operand 0", first)?;
    if f.rank() == 0 {
        return err(
            op,
            format!("cannot concatenate rank-0 values ({f}): there is no dimension to join along"),
        );
    }
    if dimension < 0 || dimension as usize >= f.rank() {
        return err(
            op,
            format!(
                "dimension {dimension} is not a dimension of the rank-{} operands",
                f.rank()
            ),
        );
    }
    let d = dimension as usize;
    let mut total = 0i64;
    for (k, s) in operands.iter().enumerate() {
        let a = expect_array(op, &format!("operand {k}"), s)?;
        if a.element_type() != f.element_type() {
            return err(
                op,
                format!("operand {k} ({a}) must have the element type of operand 0 ({f})"),
            );
        }
        if a.rank() != f.rank() {
            return err(
                op,
                format!("operand {k} ({a}) must have the rank of operand 0 ({f})"),
            );
        }
        for i in 0..f.rank() {
            if i != d && a.dim(i) != f.dim(i) {
                return err(
                    op,
                    format!(
                        "operand {k} ({a}) differs from operand 0 ({f}) in dimension {i}, which is not the concatenation dimension {d}"
                    ),
                );
            }
        }
        total = match total.checked_add(a.dim(d)) {
            Some(t) => t,
            None => return err(op, "the concatenated size overflows"),
        };
    }
    let mut dims = f.dims().to_vec();
    dims[d] = total;
    make_array(op, f.element_type(), dims)
}

/// Shape check of `iota`.
pub fn iota(result: &ArrayShape, dimension: i64) -> InferResult {
    let op = "iota";
    if result.rank() == 0 || dimension < 0 || dimension as usize >= result.rank() {
        return err(
            op,
            format!("iota_dimension {dimension} is not a dimension of {result}"),
        );
    }
    if result.element_type().is_pred() {
        return err(op, format!("needs a numeric element type, got {result}"));
    }
    Ok(Shape::Array(result.clone()))
}

/// Shape check of `bitcast` (a reinterpretation of the same bytes).
pub fn bitcast(operand: &Shape, result: &Shape) -> InferResult {
    let op = "bitcast";
    let a = expect_array(op, "operand", operand)?;
    let r = expect_array(op, "result", result)?;
    if a.byte_size().ok() != r.byte_size().ok() {
        return err(
            op,
            format!("operand {a} and result {r} must have the same byte size"),
        );
    }
    Ok(result.clone())
}

/// Shape of `get-dimension-size`: an s32 scalar.
pub fn get_dimension_size(operand: &Shape, dims: &[i64]) -> InferResult {
    let op = "get-dimension-size";
    let a = expect_array(op, "operand", operand)?;
    if dims.len() != 1 {
        return err(op, format!("needs exactly one dimension, got {dims:?}"));
    }
    check_dims_in_range(op, "dimensions", dims, a.rank())?;
    Ok(Shape::scalar(PrimitiveType::S32))
}

fn check_sorted_in_range(op: &str, what: &str, dims: &[i64], rank: usize) -> InferResult<()> {
    check_dims_in_range(op, what, dims, rank)?;
    if dims.windows(2).any(|w| w[0] >= w[1]) {
        return err(op, format!("{what} {dims:?} must be sorted"));
    }
    Ok(())
}

/// The batch dimensions of gather/scatter indices: every dimension but
/// `index_vector_dim` (which may equal the rank, meaning an implicit trailing 1).
fn index_batch_dims(
    op: &str,
    indices: &ArrayShape,
    index_vector_dim: i64,
) -> InferResult<(Vec<i64>, i64)> {
    let rank = indices.rank() as i64;
    if index_vector_dim < 0 || index_vector_dim > rank {
        return err(
            op,
            format!(
                "index_vector_dim {index_vector_dim} must be in [0, {rank}] for indices {indices}"
            ),
        );
    }
    let vector_size = if index_vector_dim == rank {
        1
    } else {
        indices.dim(index_vector_dim as usize)
    };
    let batch = (0..rank)
        .filter(|&i| i != index_vector_dim)
        .map(|i| indices.dim(i as usize))
        .collect();
    Ok((batch, vector_size))
}

/// Shape of `gather` (XLA's general gather, with batching dimensions).
pub fn gather(
    operand: &Shape,
    indices: &Shape,
    d: &GatherDimensionNumbers,
    slice_sizes: &[i64],
) -> InferResult {
    let op = "gather";
    let a = expect_array(op, "operand", operand)?;
    let idx = expect_array(op, "start indices", indices)?;
    if !idx.element_type().is_integral() {
        return err(op, format!("start indices must be integers, got {idx}"));
    }
    let (batch, vector_size) = index_batch_dims(op, idx, d.index_vector_dim)?;
    if slice_sizes.len() != a.rank() {
        return err(
            op,
            format!("slice_sizes {slice_sizes:?} must have one entry per dimension of {a}"),
        );
    }
    for (i, &s) in slice_sizes.iter().enumerate() {
        if s < 0 || s > a.dim(i) {
            return err(
                op,
                format!(
                    "slice size {s} of dimension {i} must be in [0, {}] (operand {a})",
                    a.dim(i)
                ),
            );
        }
    }
    check_sorted_in_range(
        op,
        "collapsed_slice_dims",
        &d.collapsed_slice_dims,
        a.rank(),
    )?;
    check_sorted_in_range(
        op,
        "operand_batching_dims",
        &d.operand_batching_dims,
        a.rank(),
    )?;
    for &c in d
        .collapsed_slice_dims
        .iter()
        .chain(&d.operand_batching_dims)
    {
        if slice_sizes[c as usize] > 1 {
            return err(
                op,
                format!(
                    "collapsed or batching dimension {c} must have slice size 0 or 1, got {}",
                    slice_sizes[c as usize]
                ),
            );
        }
    }
    if let Some(c) = d
        .collapsed_slice_dims
        .iter()
        .find(|c| d.operand_batching_dims.contains(c))
    {
        return err(
            op,
            format!("dimension {c} is both collapsed and a batching dimension"),
        );
    }
    if d.start_index_map.len() as i64 != vector_size {
        return err(
            op,
            format!(
                "start_index_map {:?} must have one entry per index vector element ({vector_size})",
                d.start_index_map
            ),
        );
    }
    check_dims_in_range(op, "start_index_map", &d.start_index_map, a.rank())?;
    if let Some(c) = d
        .start_index_map
        .iter()
        .find(|c| d.operand_batching_dims.contains(c))
    {
        return err(
            op,
            format!("start_index_map must not contain the batching dimension {c}"),
        );
    }
    if d.operand_batching_dims.len() != d.start_indices_batching_dims.len() {
        return err(
            op,
            "operand_batching_dims and start_indices_batching_dims must have the same length",
        );
    }
    check_dims_in_range(
        op,
        "start_indices_batching_dims",
        &d.start_indices_batching_dims,
        idx.rank(),
    )?;
    if d.start_indices_batching_dims.contains(&d.index_vector_dim) {
        return err(
            op,
            "start_indices_batching_dims must not contain index_vector_dim",
        );
    }
    for (&ob, &ib) in d
        .operand_batching_dims
        .iter()
        .zip(&d.start_indices_batching_dims)
    {
        if a.dim(ob as usize) != idx.dim(ib as usize) {
            return err(
                op,
                format!(
                    "operand batching dimension {ob} and indices batching dimension {ib} differ in size"
                ),
            );
        }
    }
    let offset_sizes: Vec<i64> = (0..a.rank())
        .filter(|&i| {
            !d.collapsed_slice_dims.contains(&(i as i64))
                && !d.operand_batching_dims.contains(&(i as i64))
        })
        .map(|i| slice_sizes[i])
        .collect();
    if d.offset_dims.len() != offset_sizes.len() {
        return err(
            op,
            format!(
                "offset_dims {:?} must have one entry per slice dimension not collapsed or batching ({})",
                d.offset_dims,
                offset_sizes.len()
            ),
        );
    }
    let out_rank = batch.len() + offset_sizes.len();
    check_sorted_in_range(op, "offset_dims", &d.offset_dims, out_rank)?;
    let (mut b, mut o) = (batch.into_iter(), offset_sizes.into_iter());
    let dims = (0..out_rank as i64)
        .map(|i| {
            if d.offset_dims.contains(&i) {
                o.next()
            } else {
                b.next()
            }
            .unwrap_or(0)
        })
        .collect();
    make_array(op, a.element_type(), dims)
}

/// Shape of `scatter` with `inputs.len()` inputs and updates.
pub fn scatter(
    inputs: &[&Shape],
    indices: &Shape,
    updates: &[&Shape],
    d: &ScatterDimensionNumbers,
    update_computation: &ProgramShape,
) -> InferResult {
    let op = "scatter";
    if inputs.is_empty() || inputs.len() != updates.len() {
        return err(op, "needs N >= 1 inputs and as many updates");
    }
    let a = expect_array(op, "input 0", inputs[0])?;
    for (k, s) in inputs.iter().enumerate() {
        let x = expect_array(op, &format!("input {k}"), s)?;
        if !x.same_dims(a) {
            return err(
                op,
                format!("input {k} ({x}) must have the dimensions of input 0 ({a})"),
            );
        }
    }
    let idx = expect_array(op, "scatter indices", indices)?;
    if !idx.element_type().is_integral() {
        return err(op, format!("scatter indices must be integers, got {idx}"));
    }
    let (batch, vector_size) = index_batch_dims(op, idx, d.index_vector_dim)?;
    let update_rank = expect_array(op, "updates 0", updates[0])?.rank();
    check_sorted_in_range(op, "update_window_dims", &d.update_window_dims, update_rank)?;
    check_sorted_in_range(
        op,
        "inserted_window_dims",
        &d.inserted_window_dims,
        a.rank(),
    )?;
    check_sorted_in_range(op, "input_batching_dims", &d.input_batching_dims, a.rank())?;
    if d.scatter_dims_to_operand_dims.len() as i64 != vector_size {
        return err(
            op,
            format!(
                "scatter_dims_to_operand_dims {:?} must have one entry per index vector element ({vector_size})",
                d.scatter_dims_to_operand_dims
            ),
        );
    }
    check_dims_in_range(
        op,
        "scatter_dims_to_operand_dims",
        &d.scatter_dims_to_operand_dims,
        a.rank(),
    )?;
    if d.input_batching_dims.len() != d.scatter_indices_batching_dims.len() {
        return err(
            op,
            "input_batching_dims and scatter_indices_batching_dims must have the same length",
        );
    }
    if let Some(c) = d
        .inserted_window_dims
        .iter()
        .find(|c| d.input_batching_dims.contains(c))
    {
        return err(
            op,
            format!("dimension {c} is both an inserted window dimension and a batching dimension"),
        );
    }
    // Both lists are disjoint, duplicate-free dimensions of the input, so this cannot underflow.
    let window_rank = a.rank() - d.inserted_window_dims.len() - d.input_batching_dims.len();
    if d.update_window_dims.len() != window_rank {
        return err(
            op,
            format!(
                "update_window_dims {:?} must have one entry per input dimension not inserted or batching ({window_rank})",
                d.update_window_dims
            ),
        );
    }
    let window_input_dims: Vec<usize> = (0..a.rank())
        .filter(|&i| {
            !d.inserted_window_dims.contains(&(i as i64))
                && !d.input_batching_dims.contains(&(i as i64))
        })
        .collect();
    let mut scalar_params = Vec::new();
    for (k, s) in updates.iter().enumerate() {
        let u = expect_array(op, &format!("updates {k}"), s)?;
        let x = expect_array(op, &format!("input {k}"), inputs[k])?;
        if u.element_type() != x.element_type() {
            return err(
                op,
                format!("updates {k} ({u}) must have the element type of input {k} ({x})"),
            );
        }
        if u.rank() != batch.len() + window_rank {
            return err(
                op,
                format!(
                    "updates {k} ({u}) must have rank {} (scatter batch dims + window dims)",
                    batch.len() + window_rank
                ),
            );
        }
        let mut b = batch.iter();
        let mut w = window_input_dims.iter();
        for i in 0..u.rank() {
            if d.update_window_dims.contains(&(i as i64)) {
                let in_dim = w.next().copied().unwrap_or(0);
                if u.dim(i) > a.dim(in_dim) {
                    return err(
                        op,
                        format!(
                            "updates {k} ({u}) window dimension {i} is larger than input dimension {in_dim} ({a})"
                        ),
                    );
                }
            } else if b.next() != Some(&u.dim(i)) {
                return err(
                    op,
                    format!(
                        "updates {k} ({u}) dimension {i} must match the scatter indices' batch dimensions ({idx})"
                    ),
                );
            }
        }
        scalar_params.push(Shape::scalar(x.element_type()));
    }
    let mut params = scalar_params.clone();
    params.extend(scalar_params.iter().cloned());
    let result = if scalar_params.len() == 1 {
        scalar_params[0].clone()
    } else {
        Shape::Tuple(scalar_params)
    };
    check_signature(op, "update", update_computation, &params, &result)?;
    if inputs.len() == 1 {
        Ok(inputs[0].clone())
    } else {
        Ok(Shape::Tuple(inputs.iter().map(|s| (*s).clone()).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use PrimitiveType::*;

    fn s(ty: PrimitiveType, dims: &[i64]) -> Shape {
        Shape::array(ty, dims).unwrap()
    }

    #[test]
    fn collapsing_huge_dimensions_of_an_empty_array_is_an_error_not_an_overflow() {
        let v = s(F32, &[1 << 40, 1 << 40, 0]);
        assert_eq!(
            collapse(&v, &[0, 1]).unwrap_err().to_string(),
            "Collapse: collapsing dimensions [0, 1] of f32[1099511627776,1099511627776,0] gives a size that overflows"
        );
        assert_eq!(
            collapse(&v, &[1, 2]).unwrap().to_string(),
            "f32[1099511627776,0]"
        );
    }

    #[test]
    fn collapse_rules_from_the_spec() {
        let v = s(F32, &[4, 2, 3]);
        assert_eq!(collapse(&v, &[0, 1, 2]).unwrap().to_string(), "f32[24]");
        assert_eq!(collapse(&v, &[0, 1]).unwrap().to_string(), "f32[8,3]");
        assert_eq!(collapse(&v, &[1, 2]).unwrap().to_string(), "f32[4,6]");
        assert!(
            collapse(&v, &[1, 0])
                .unwrap_err()
                .to_string()
                .contains("in-order, consecutive")
        );
        assert!(
            collapse(&v, &[0, 2])
                .unwrap_err()
                .to_string()
                .contains("in-order, consecutive")
        );
        assert!(collapse(&v, &[3]).is_err());
    }

    #[test]
    fn reshape_counts() {
        let v = s(F32, &[4, 2, 3]);
        assert_eq!(reshape(&v, &[8, 3]).unwrap().to_string(), "f32[8,3]");
        assert_eq!(
            reshape(&v, &[5, 5]).unwrap_err().to_string(),
            "reshape: cannot reshape f32[4,2,3] (24 elements) to [5,5] (25 elements): the element counts differ"
        );
        assert_eq!(reshape(&s(F32, &[1, 1]), &[]).unwrap().to_string(), "f32[]");
        assert!(reshape(&v, &[i64::MAX, 4]).is_err());
    }

    #[test]
    fn concatenate_rules() {
        let a = s(F32, &[3, 2]);
        let b = s(F32, &[1, 2]);
        assert_eq!(concatenate(&[&a, &b], 0).unwrap().to_string(), "f32[4,2]");
        assert!(concatenate(&[&a, &b], 1).is_err());
        assert!(concatenate(&[], 0).is_err());
        assert!(
            concatenate(&[&s(F32, &[])], 0)
                .unwrap_err()
                .to_string()
                .contains("rank-0")
        );
        assert!(concatenate(&[&a, &s(F32, &[3])], 0).is_err());
        assert!(concatenate(&[&a, &s(S32, &[1, 2])], 0).is_err());
        assert!(concatenate(&[&a], 2).is_err());
    }

    #[test]
    fn slice_and_pad_bounds() {
        let a = s(F32, &[4, 3]);
        let sd = |start, limit| SliceDim {
            start,
            limit,
            stride: 1,
        };
        assert_eq!(
            slice(&a, &[sd(2, 4), sd(1, 3)]).unwrap().to_string(),
            "f32[2,2]"
        );
        assert_eq!(
            slice(
                &a,
                &[
                    SliceDim {
                        start: 0,
                        limit: 4,
                        stride: 3
                    },
                    sd(0, 3)
                ]
            )
            .unwrap()
            .to_string(),
            "f32[2,3]"
        );
        assert!(slice(&a, &[sd(2, 5), sd(1, 3)]).is_err());
        assert!(slice(&a, &[sd(-1, 2), sd(1, 3)]).is_err());
        assert!(slice(&a, &[sd(3, 2), sd(1, 3)]).is_err());
        let zero = s(F32, &[]);
        let p = |low, high, interior| PadDim {
            low,
            high,
            interior,
        };
        assert_eq!(
            pad(&a, &zero, &[p(1, 2, 1), p(-1, 0, 0)])
                .unwrap()
                .to_string(),
            "f32[10,2]"
        );
        assert!(pad(&a, &zero, &[p(0, 0, -1), p(0, 0, 0)]).is_err());
        assert!(pad(&a, &zero, &[p(-5, 0, 0), p(0, 0, 0)]).is_err());
        assert!(pad(&a, &s(S32, &[]), &[p(0, 0, 0), p(0, 0, 0)]).is_err());
    }

    #[test]
    fn gather_shape() {
        // jnp.take(x[5,3], idx[4], axis=0)-style gather.
        let d = GatherDimensionNumbers {
            offset_dims: vec![1],
            collapsed_slice_dims: vec![0],
            start_index_map: vec![0],
            index_vector_dim: 1,
            ..Default::default()
        };
        let g = gather(&s(F32, &[5, 3]), &s(S32, &[4, 1]), &d, &[1, 3]).unwrap();
        assert_eq!(g.to_string(), "f32[4,3]");
        assert!(gather(&s(F32, &[5, 3]), &s(S32, &[4, 1]), &d, &[2, 3]).is_err());
    }
}
