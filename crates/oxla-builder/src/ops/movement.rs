//! Data-movement ops: broadcast, reshape (with and without a dimension
//! order), collapse, transpose, rev, slice, dynamic slices, pad, concatenate,
//! iota, gather and scatter.

use std::panic::Location;

use oxla_hlo::ir::{GatherDimensionNumbers, Opcode, PadDim, ScatterDimensionNumbers, SliceDim};
use oxla_hlo::shape_inference as infer;
use oxla_hlo::{ArrayShape, PrimitiveType, Shape};

use crate::builder::{Extra, XlaBuilder};
use crate::computation::XlaComputation;
use crate::error::BuildError;
use crate::op::XlaOp;

/// Edge padding (low, high; negative removes elements) and interior padding
/// of one dimension, for [`XlaOp::pad`].
pub type PaddingConfig = Vec<PadDim>;

fn with_dims(dims: &[i64]) -> Extra {
    let mut e = Extra::default();
    e.attrs.dimensions = Some(dims.to_vec());
    e
}

impl<'b> XlaOp<'b> {
    fn one(self, op: &str, loc: &'static Location<'static>) -> Option<(oxla_hlo::InstrId, Shape)> {
        let (ids, shapes) = self.builder().shapes(op, &[self], loc)?;
        Some((ids[0], shapes.into_iter().next()?))
    }

    /// The seed's `Broadcast`: adds major dimensions of sizes `broadcast_sizes`,
    /// copying the operand into each.
    #[track_caller]
    pub fn broadcast(self, broadcast_sizes: &[i64]) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let Some((id, s)) = self.one("broadcast", loc) else {
            return b.failed();
        };
        let out = match infer::broadcast_sizes(&s, broadcast_sizes) {
            Ok(o) => o,
            Err(e) => return b.record_error(BuildError::from_infer(e, loc)),
        };
        let n = broadcast_sizes.len() as i64;
        let rank = out.as_array().map_or(0, |a| a.rank()) as i64;
        let dims: Vec<i64> = (n..rank).collect();
        b.add(
            Opcode::Broadcast,
            infer::broadcast_in_dim(&s, &out, &dims),
            vec![id],
            with_dims(&dims),
            loc,
        )
    }

    /// XLA's `BroadcastInDim`: operand dimension `i` becomes result dimension
    /// `broadcast_dimensions[i]` of `out_dims` (it must match or be 1).
    #[track_caller]
    pub fn broadcast_in_dim(self, out_dims: &[i64], broadcast_dimensions: &[i64]) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let Some((id, s)) = self.one("broadcast", loc) else {
            return b.failed();
        };
        let out = match s
            .as_array()
            .map(|a| ArrayShape::new(a.element_type(), out_dims))
        {
            Some(Ok(a)) => Shape::Array(a),
            Some(Err(e)) => {
                return b.record_error(BuildError::new("broadcast", e.to_string(), loc));
            }
            None => {
                return b.record_error(BuildError::new(
                    "broadcast",
                    format!("operand must be an array, got {s}"),
                    loc,
                ));
            }
        };
        b.add(
            Opcode::Broadcast,
            infer::broadcast_in_dim(&s, &out, broadcast_dimensions),
            vec![id],
            with_dims(broadcast_dimensions),
            loc,
        )
    }

    /// Reshapes to `new_sizes`, reading the operand in row-major order.
    #[track_caller]
    pub fn reshape(self, new_sizes: &[i64]) -> XlaOp<'b> {
        self.reshape_at(new_sizes, Location::caller())
    }

    fn reshape_at(self, new_sizes: &[i64], loc: &'static Location<'static>) -> XlaOp<'b> {
        let b = self.builder();
        let Some((id, s)) = self.one("reshape", loc) else {
            return b.failed();
        };
        b.add(
            Opcode::Reshape,
            infer::reshape(&s, new_sizes),
            vec![id],
            Extra::default(),
            loc,
        )
    }

    /// The seed's `Reshape(operand, dimensions, new_sizes)`: collapses the operand
    /// visiting its dimensions in the order `dimensions` (a permutation, most
    /// major first), then refines into `new_sizes`.
    #[track_caller]
    pub fn reshape_with_dimensions(self, dimensions: &[i64], new_sizes: &[i64]) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let Some((_, s)) = self.one("reshape", loc) else {
            return b.failed();
        };
        let rank = s.as_array().map_or(0, |a| a.rank());
        let is_permutation = {
            let mut sorted = dimensions.to_vec();
            sorted.sort_unstable();
            sorted == (0..rank as i64).collect::<Vec<_>>()
        };
        if !is_permutation {
            return b.record_error(BuildError::new(
                "reshape",
                format!("dimensions {dimensions:?} must be a permutation of the {rank} dimensions of {s}"),
                loc,
            ));
        }
        let identity = dimensions.iter().enumerate().all(|(i, &d)| i as i64 == d);
        let ordered = if identity {
            self
        } else {
            self.transpose_at(dimensions, loc)
        };
        ordered.reshape_at(new_sizes, loc)
    }

    /// The seed's `Collapse`: merges an in-order, consecutive run of dimensions into one.
    #[track_caller]
    pub fn collapse(self, dimensions: &[i64]) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let Some((_, s)) = self.one("Collapse", loc) else {
            return b.failed();
        };
        match infer::collapse(&s, dimensions) {
            Ok(Shape::Array(out)) => self.reshape_at(out.dims(), loc),
            Ok(_) => b.failed(),
            Err(e) => b.record_error(BuildError::from_infer(e, loc)),
        }
    }

    /// Permutes dimensions: result dimension `i` is operand dimension `permutation[i]`.
    #[track_caller]
    pub fn transpose(self, permutation: &[i64]) -> XlaOp<'b> {
        self.transpose_at(permutation, Location::caller())
    }

    fn transpose_at(self, permutation: &[i64], loc: &'static Location<'static>) -> XlaOp<'b> {
        let b = self.builder();
        let Some((id, s)) = self.one("transpose", loc) else {
            return b.failed();
        };
        b.add(
            Opcode::Transpose,
            infer::transpose(&s, permutation),
            vec![id],
            with_dims(permutation),
            loc,
        )
    }

    /// Reverses the order of elements along `dimensions`.
    #[track_caller]
    pub fn rev(self, dimensions: &[i64]) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let Some((id, s)) = self.one("reverse", loc) else {
            return b.failed();
        };
        b.add(
            Opcode::Reverse,
            infer::reverse(&s, dimensions),
            vec![id],
            with_dims(dimensions),
            loc,
        )
    }

    /// The seed's `Slice`: the box `[start, limit)` per dimension; starts must be
    /// non-negative and each limit strictly greater than its start and at most
    /// the dimension's size.
    #[track_caller]
    pub fn slice(self, start_indices: &[i64], limit_indices: &[i64]) -> XlaOp<'b> {
        let strides = vec![1; start_indices.len()];
        self.slice_impl(
            start_indices,
            limit_indices,
            &strides,
            true,
            Location::caller(),
        )
    }

    /// Slice with strides (today's HLO form); empty ranges are allowed.
    #[track_caller]
    pub fn slice_with_strides(
        self,
        start_indices: &[i64],
        limit_indices: &[i64],
        strides: &[i64],
    ) -> XlaOp<'b> {
        self.slice_impl(
            start_indices,
            limit_indices,
            strides,
            false,
            Location::caller(),
        )
    }

    fn slice_impl(
        self,
        starts: &[i64],
        limits: &[i64],
        strides: &[i64],
        seed: bool,
        loc: &'static Location<'static>,
    ) -> XlaOp<'b> {
        let b = self.builder();
        let Some((id, s)) = self.one("slice", loc) else {
            return b.failed();
        };
        if starts.len() != limits.len() || starts.len() != strides.len() {
            return b.record_error(BuildError::new(
                "slice",
                format!(
                    "start indices {starts:?}, limit indices {limits:?} and strides {strides:?} must have the same length"
                ),
                loc,
            ));
        }
        if seed && let Some(i) = (0..starts.len()).find(|&i| limits[i] <= starts[i]) {
            return b.record_error(BuildError::new(
                    "slice",
                    format!(
                        "limit index {} of dimension {i} must be strictly greater than its start index {} (operand {s})",
                        limits[i], starts[i]
                    ),
                    loc,
                ));
        }
        let dims: Vec<SliceDim> = (0..starts.len())
            .map(|i| SliceDim {
                start: starts[i],
                limit: limits[i],
                stride: strides[i],
            })
            .collect();
        let mut extra = Extra::default();
        extra.attrs.slice = Some(dims.clone());
        b.add(Opcode::Slice, infer::slice(&s, &dims), vec![id], extra, loc)
    }

    /// The seed's `DynamicSlice`: a slice of `size_indices` starting at the
    /// runtime values of `start_indices` (a rank-1 integer array with one entry
    /// per dimension). Starts are clamped so the slice stays in bounds.
    #[track_caller]
    pub fn dynamic_slice(self, start_indices: XlaOp<'b>, size_indices: &[i64]) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let Some((_, s)) = b.shapes("dynamic-slice", &[self, start_indices], loc) else {
            return b.failed();
        };
        if let Some(i) = size_indices.iter().position(|&z| z <= 0) {
            return b.record_error(BuildError::new(
                "dynamic-slice",
                format!("slice size {} of dimension {i} must be strictly greater than zero (operand {})", size_indices[i], s[0]),
                loc,
            ));
        }
        let Some(starts) = scalar_starts(b, "dynamic-slice", start_indices, &s[0], &s[1], loc)
        else {
            return b.failed();
        };
        self.dynamic_slice_scalars(&starts, size_indices)
    }

    /// Today's `dynamic-slice`: one scalar start index per dimension.
    #[track_caller]
    pub fn dynamic_slice_scalars(
        self,
        start_indices: &[XlaOp<'b>],
        size_indices: &[i64],
    ) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let mut all = vec![self];
        all.extend_from_slice(start_indices);
        let Some((ids, s)) = b.shapes("dynamic-slice", &all, loc) else {
            return b.failed();
        };
        let index_shapes: Vec<&Shape> = s[1..].iter().collect();
        let mut extra = Extra::default();
        extra.attrs.dynamic_slice_sizes = Some(size_indices.to_vec());
        b.add(
            Opcode::DynamicSlice,
            infer::dynamic_slice(&s[0], &index_shapes, size_indices),
            ids,
            extra,
            loc,
        )
    }

    /// The seed's `DynamicUpdateSlice`: the operand with `update` written at the
    /// runtime `start_indices` (rank-1, one per dimension; clamped in bounds).
    #[track_caller]
    pub fn dynamic_update_slice(self, update: XlaOp<'b>, start_indices: XlaOp<'b>) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let Some((_, s)) = b.shapes("dynamic-update-slice", &[self, update, start_indices], loc)
        else {
            return b.failed();
        };
        if let Some(u) = s[1].as_array()
            && let Some(i) = u.dims().iter().position(|&d| d <= 0)
        {
            return b.record_error(BuildError::new(
                "dynamic-update-slice",
                format!("update dimension {i} of {u} must be strictly greater than zero"),
                loc,
            ));
        }
        let Some(starts) =
            scalar_starts(b, "dynamic-update-slice", start_indices, &s[0], &s[2], loc)
        else {
            return b.failed();
        };
        self.dynamic_update_slice_scalars(update, &starts)
    }

    /// Today's `dynamic-update-slice`: one scalar start index per dimension.
    #[track_caller]
    pub fn dynamic_update_slice_scalars(
        self,
        update: XlaOp<'b>,
        start_indices: &[XlaOp<'b>],
    ) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let mut all = vec![self, update];
        all.extend_from_slice(start_indices);
        let Some((ids, s)) = b.shapes("dynamic-update-slice", &all, loc) else {
            return b.failed();
        };
        let index_shapes: Vec<&Shape> = s[2..].iter().collect();
        b.add(
            Opcode::DynamicUpdateSlice,
            infer::dynamic_update_slice(&s[0], &s[1], &index_shapes),
            ids,
            Extra::default(),
            loc,
        )
    }

    /// Pads with `padding_value` around (low/high, negative removes) and between (interior) elements.
    #[track_caller]
    pub fn pad(self, padding_value: XlaOp<'b>, padding_config: &[PadDim]) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let Some((ids, s)) = b.shapes("pad", &[self, padding_value], loc) else {
            return b.failed();
        };
        let mut extra = Extra::default();
        extra.attrs.padding = Some(padding_config.to_vec());
        b.add(
            Opcode::Pad,
            infer::pad(&s[0], &s[1], padding_config),
            ids,
            extra,
            loc,
        )
    }

    /// Gathers slices of `self` at `start_indices` (XLA's general gather).
    #[track_caller]
    pub fn gather(
        self,
        start_indices: XlaOp<'b>,
        dimension_numbers: &GatherDimensionNumbers,
        slice_sizes: &[i64],
        indices_are_sorted: bool,
    ) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let Some((ids, s)) = b.shapes("gather", &[self, start_indices], loc) else {
            return b.failed();
        };
        let mut extra = Extra::default();
        extra.attrs.gather_dnums = Some(dimension_numbers.clone());
        extra.attrs.gather_slice_sizes = Some(slice_sizes.to_vec());
        extra.attrs.indices_are_sorted = indices_are_sorted.then_some(true);
        b.add(
            Opcode::Gather,
            infer::gather(&s[0], &s[1], dimension_numbers, slice_sizes),
            ids,
            extra,
            loc,
        )
    }

    /// Scatters `updates` into `self` at `scatter_indices`, combining with `update_computation`.
    #[track_caller]
    pub fn scatter(
        self,
        scatter_indices: XlaOp<'b>,
        updates: XlaOp<'b>,
        update_computation: &XlaComputation,
        dimension_numbers: &ScatterDimensionNumbers,
        indices_are_sorted: bool,
        unique_indices: bool,
    ) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let Some((ids, s)) = b.shapes("scatter", &[self, scatter_indices, updates], loc) else {
            return b.failed();
        };
        let (comp, sig) = b.embed(update_computation);
        let mut extra = Extra::default();
        extra.attrs.scatter_dnums = Some(dimension_numbers.clone());
        extra.attrs.indices_are_sorted = indices_are_sorted.then_some(true);
        extra.attrs.unique_indices = unique_indices.then_some(true);
        extra.called.to_apply = Some(comp);
        b.add(
            Opcode::Scatter,
            infer::scatter(&[&s[0]], &s[1], &[&s[2]], dimension_numbers, &sig),
            ids,
            extra,
            loc,
        )
    }
}

impl XlaBuilder {
    /// Variadic scatter: N inputs updated together at the same indices, the
    /// update computation combining N current values with N updates.
    #[track_caller]
    pub fn scatter_variadic<'b>(
        &'b self,
        inputs: &[XlaOp<'b>],
        scatter_indices: XlaOp<'b>,
        updates: &[XlaOp<'b>],
        update_computation: &XlaComputation,
        dimension_numbers: &ScatterDimensionNumbers,
    ) -> XlaOp<'b> {
        let loc = Location::caller();
        let mut all: Vec<XlaOp<'b>> = inputs.to_vec();
        all.push(scatter_indices);
        all.extend_from_slice(updates);
        let Some((ids, s)) = self.shapes("scatter", &all, loc) else {
            return self.failed();
        };
        let (comp, sig) = self.embed(update_computation);
        let refs: Vec<&Shape> = s.iter().collect();
        let n = inputs.len();
        let mut extra = Extra::default();
        extra.attrs.scatter_dnums = Some(dimension_numbers.clone());
        extra.called.to_apply = Some(comp);
        let shape = infer::scatter(&refs[..n], refs[n], &refs[n + 1..], dimension_numbers, &sig);
        self.add(Opcode::Scatter, shape, ids, extra, loc)
    }
}

/// Splits a rank-1 start-index array into one scalar per dimension of `operand`.
fn scalar_starts<'b>(
    b: &'b XlaBuilder,
    op: &str,
    start_indices: XlaOp<'b>,
    operand: &Shape,
    indices: &Shape,
    loc: &'static Location<'static>,
) -> Option<Vec<XlaOp<'b>>> {
    let rank = operand.as_array().map_or(0, |a| a.rank());
    let ok = indices.as_array().is_some_and(|i| {
        i.rank() == 1 && i.dim(0) == rank as i64 && i.element_type().is_integral()
    });
    if !ok {
        b.record_error(BuildError::new(
            op,
            format!("start indices must be a rank-1 integer array with one entry per dimension of {operand}, got {indices}"),
            loc,
        ));
        return None;
    }
    Some(
        (0..rank as i64)
            .map(|i| {
                start_indices
                    .slice_impl(&[i], &[i + 1], &[1], false, loc)
                    .reshape_at(&[], loc)
            })
            .collect(),
    )
}

impl XlaBuilder {
    /// Concatenates `operands` along `dimension` (all other dimensions must agree).
    #[track_caller]
    pub fn concat_in_dim<'b>(&'b self, operands: &[XlaOp<'b>], dimension: i64) -> XlaOp<'b> {
        let loc = Location::caller();
        let Some((ids, s)) = self.shapes("concatenate", operands, loc) else {
            return self.failed();
        };
        let refs: Vec<&Shape> = s.iter().collect();
        self.add(
            Opcode::Concatenate,
            infer::concatenate(&refs, dimension),
            ids,
            with_dims(&[dimension]),
            loc,
        )
    }

    /// An array of `ty` and `dims` whose values count up along `iota_dimension`.
    #[track_caller]
    pub fn iota(&self, ty: PrimitiveType, dims: &[i64], iota_dimension: i64) -> XlaOp<'_> {
        let loc = Location::caller();
        let shape = match ArrayShape::new(ty, dims) {
            Ok(s) => s,
            Err(e) => return self.record_error(BuildError::new("iota", e.to_string(), loc)),
        };
        let mut extra = Extra::default();
        extra.attrs.iota_dimension = Some(iota_dimension);
        self.add(
            Opcode::Iota,
            infer::iota(&shape, iota_dimension),
            vec![],
            extra,
            loc,
        )
    }
}
