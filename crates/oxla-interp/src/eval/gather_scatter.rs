//! `gather` and `scatter` with full dimension numbers, batching dimensions
//! included. Gather clamps each slice's start so the slice lies inside the
//! operand; scatter skips any update window that does not lie entirely inside
//! the operand, and combines the others with the update computation in
//! row-major order of the updates (XLA:CPU's order, so with duplicate indices
//! the last update wins under an assigning combiner).

use oxla_hlo::ir::{GatherDimensionNumbers, ScatterDimensionNumbers};
use oxla_hlo::{ArrayLiteral, HloInstruction};

use super::{attr, result_array};
use crate::element::Elem;
use crate::error::{OpResult, fail};
use crate::index::{dims_usize, for_each_index, linear, strides};
use crate::interpreter::Interpreter;
use crate::value::{Value, make_array};

fn to_usize(what: &str, dims: &[i64], rank: usize) -> OpResult<Vec<usize>> {
    dims.iter()
        .map(|&d| match usize::try_from(d) {
            Ok(d) if d < rank => Ok(d),
            _ => fail(format!("{what} {dims:?} does not fit rank {rank}")),
        })
        .collect()
}

/// How the indices array is read: which of its dimensions hold the index
/// vector and which enumerate the batch.
struct Indices<'a> {
    array: &'a ArrayLiteral,
    strides: Vec<usize>,
    /// The index vector dimension (== rank when each index is a scalar).
    vector_dim: usize,
    vector_len: usize,
    /// Dimensions of the indices array other than `vector_dim`, in order.
    batch_dims: Vec<usize>,
}

impl<'a> Indices<'a> {
    fn new(array: &'a ArrayLiteral, index_vector_dim: i64) -> OpResult<Indices<'a>> {
        let dims = dims_usize(array.dims());
        let rank = dims.len();
        let vector_dim = match usize::try_from(index_vector_dim) {
            Ok(d) if d <= rank => d,
            _ => {
                return fail(format!(
                    "index_vector_dim {index_vector_dim} is out of range"
                ));
            }
        };
        Ok(Indices {
            array,
            strides: strides(&dims),
            vector_dim,
            vector_len: if vector_dim == rank {
                1
            } else {
                dims[vector_dim]
            },
            batch_dims: (0..rank).filter(|&d| d != vector_dim).collect(),
        })
    }

    /// Component `j` of the index vector at batch position `batch` (a full
    /// index of the indices array whose `vector_dim` entry is overwritten).
    fn component(&self, batch: &mut [usize], j: usize) -> i128 {
        if self.vector_dim < batch.len() {
            batch[self.vector_dim] = j;
        }
        Elem::read(self.array.data(), linear(batch, &self.strides)).as_index()
    }
}

pub(crate) fn gather(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let x = operands[0].as_array()?;
    let dn: &GatherDimensionNumbers = attr(&instr.attrs.gather_dnums, "gather dimension numbers")?;
    let idx = Indices::new(operands[1].as_array()?, dn.index_vector_dim)?;
    let slice_sizes = dims_usize(attr(&instr.attrs.gather_slice_sizes, "slice_sizes")?);
    let out = result_array(instr)?;
    let x_dims = dims_usize(x.dims());
    let out_dims = dims_usize(out.dims());
    let rank = x_dims.len();
    let offset_dims = to_usize("offset_dims", &dn.offset_dims, out_dims.len())?;
    let start_map = to_usize("start_index_map", &dn.start_index_map, rank)?;
    let collapsed = to_usize("collapsed_slice_dims", &dn.collapsed_slice_dims, rank)?;
    let operand_batching = to_usize("operand_batching_dims", &dn.operand_batching_dims, rank)?;
    let index_rank = idx.array.shape().rank();
    let indices_batching = to_usize(
        "start_indices_batching_dims",
        &dn.start_indices_batching_dims,
        index_rank,
    )?;
    let batch_out_dims: Vec<usize> = (0..out_dims.len())
        .filter(|d| !offset_dims.contains(d))
        .collect();
    let window_dims: Vec<usize> = (0..rank)
        .filter(|d| !collapsed.contains(d) && !operand_batching.contains(d))
        .collect();
    let consistent = slice_sizes.len() == rank
        && slice_sizes.iter().zip(&x_dims).all(|(s, d)| s <= d)
        && start_map.len() == idx.vector_len
        && batch_out_dims.len() == idx.batch_dims.len()
        && window_dims.len() == offset_dims.len()
        && operand_batching.len() == indices_batching.len()
        && window_dims
            .iter()
            .zip(&offset_dims)
            .all(|(&w, &o)| out_dims[o] <= slice_sizes[w]);
    if !consistent {
        return fail("dimension numbers do not match the operand, indices and result shapes");
    }
    // XLA's shape rule lets a collapsed (or batching) dimension have slice
    // size 0; the slices are then empty, with nothing to fill a result that
    // has elements.
    let empty_slice = collapsed
        .iter()
        .chain(&operand_batching)
        .find(|&&c| slice_sizes[c] == 0);
    if let Some(c) = empty_slice
        && out.element_count()? > 0
    {
        return fail(format!(
            "slice_sizes {slice_sizes:?} are 0 along collapsed dimension {c}: the slices are empty but the result {out} is not"
        ));
    }
    let x_strides = strides(&x_dims);
    let mut batch = vec![0usize; index_rank];
    let mut start = vec![0usize; rank];
    let mut indices = Vec::with_capacity(out.element_count()?);
    let mut error = None;
    for_each_index::<()>(&out_dims, |o| {
        for (k, &d) in idx.batch_dims.iter().enumerate() {
            batch[d] = o[batch_out_dims[k]];
        }
        start.fill(0);
        for (j, &d) in start_map.iter().enumerate() {
            let v = idx.component(&mut batch, j);
            start[d] = v.clamp(0, (x_dims[d] - slice_sizes[d]) as i128) as usize;
        }
        for (&od, &id) in operand_batching.iter().zip(&indices_batching) {
            let b = batch.get(id).copied().unwrap_or(0);
            if b >= x_dims[od] {
                error = Some(format!(
                    "batch index {b} is out of range for operand dimension {od}"
                ));
                return Err(());
            }
            start[od] = b;
        }
        for (&w, &od) in window_dims.iter().zip(&offset_dims) {
            start[w] += o[od];
        }
        indices.push(linear(&start, &x_strides));
        Ok(())
    })
    .ok();
    if let Some(e) = error {
        return fail(e);
    }
    Ok(Value::array(make_array(out, x.data().take(&indices))?))
}

impl Interpreter<'_> {
    pub(crate) fn scatter(
        &mut self,
        instr: &HloInstruction,
        operands: &[Value],
    ) -> OpResult<Value> {
        if operands.len().is_multiple_of(2) {
            return fail("takes N inputs, the indices and N updates");
        }
        let n = operands.len() / 2;
        let inputs: Vec<&ArrayLiteral> = operands[..n]
            .iter()
            .map(Value::as_array)
            .collect::<OpResult<_>>()?;
        let updates: Vec<&ArrayLiteral> = operands[n + 1..]
            .iter()
            .map(Value::as_array)
            .collect::<OpResult<_>>()?;
        let dn: &ScatterDimensionNumbers =
            attr(&instr.attrs.scatter_dnums, "scatter dimension numbers")?;
        let idx = Indices::new(operands[n].as_array()?, dn.index_vector_dim)?;
        let x_dims = dims_usize(inputs[0].dims());
        let u_dims = dims_usize(updates[0].dims());
        let rank = x_dims.len();
        let update_window = to_usize("update_window_dims", &dn.update_window_dims, u_dims.len())?;
        let inserted = to_usize("inserted_window_dims", &dn.inserted_window_dims, rank)?;
        let input_batching = to_usize("input_batching_dims", &dn.input_batching_dims, rank)?;
        let to_operand = to_usize(
            "scatter_dims_to_operand_dims",
            &dn.scatter_dims_to_operand_dims,
            rank,
        )?;
        let index_rank = idx.array.shape().rank();
        let indices_batching = to_usize(
            "scatter_indices_batching_dims",
            &dn.scatter_indices_batching_dims,
            index_rank,
        )?;
        let update_scatter: Vec<usize> = (0..u_dims.len())
            .filter(|d| !update_window.contains(d))
            .collect();
        let window_dims: Vec<usize> = (0..rank)
            .filter(|d| !inserted.contains(d) && !input_batching.contains(d))
            .collect();
        let consistent = inputs.iter().all(|x| dims_usize(x.dims()) == x_dims)
            && updates.iter().all(|u| dims_usize(u.dims()) == u_dims)
            && inputs
                .iter()
                .zip(&updates)
                .all(|(x, u)| x.element_type() == u.element_type())
            && to_operand.len() == idx.vector_len
            && update_scatter.len() == idx.batch_dims.len()
            && window_dims.len() == update_window.len()
            && input_batching.len() == indices_batching.len();
        if !consistent {
            return fail("dimension numbers do not match the input, indices and updates shapes");
        }
        // The size of the window each update covers, per operand dimension.
        let mut window_size = vec![1usize; rank];
        for (&w, &u) in window_dims.iter().zip(&update_window) {
            window_size[w] = u_dims[u];
        }
        let mut results: Vec<oxla_hlo::ArrayData> =
            inputs.iter().map(|x| x.data().clone()).collect();
        let mut f = self.scalar_fn(instr.called.to_apply, "update", Vec::new())?;
        let x_strides = strides(&x_dims);
        let mut batch = vec![0usize; index_rank];
        let mut start = vec![0i128; rank];
        let mut target = vec![0usize; rank];
        let mut args = Vec::with_capacity(2 * n);
        let mut out = Vec::with_capacity(n);
        let mut counter = crate::index::Counter::new(&u_dims);
        let mut u_linear = 0usize;
        while !counter.done() {
            let u = counter.index();
            for (k, &d) in idx.batch_dims.iter().enumerate() {
                batch[d] = u[update_scatter[k]];
            }
            start.fill(0);
            for (j, &d) in to_operand.iter().enumerate() {
                start[d] = idx.component(&mut batch, j);
            }
            for (&od, &id) in input_batching.iter().zip(&indices_batching) {
                start[od] = batch.get(id).copied().unwrap_or(0) as i128;
            }
            let in_bounds = (0..rank)
                .all(|d| start[d] >= 0 && start[d] + window_size[d] as i128 <= x_dims[d] as i128);
            if in_bounds {
                for d in 0..rank {
                    target[d] = start[d] as usize;
                }
                for (&w, &ud) in window_dims.iter().zip(&update_window) {
                    target[w] += u[ud];
                }
                let t = linear(&target, &x_strides);
                args.clear();
                args.extend(results.iter().map(|r| Elem::read(r, t)));
                args.extend(updates.iter().map(|up| Elem::read(up.data(), u_linear)));
                out.clear();
                self.apply(&mut f, &args, &mut out)?;
                if out.len() != n {
                    return fail(format!(
                        "the update computation returned {} values, expected {n}",
                        out.len()
                    ));
                }
                for (r, e) in results.iter_mut().zip(&out) {
                    if !e.write(r, t) {
                        return fail("the update computation returned a value of the wrong type");
                    }
                }
            }
            u_linear += 1;
            counter.advance();
        }
        let arrays = inputs
            .iter()
            .zip(results)
            .map(|(x, r)| make_array(x.shape(), r))
            .collect::<OpResult<Vec<_>>>()?;
        Ok(Value::tuple_or_single(arrays))
    }
}
