//! Ops that apply a computation: reduce, reduce-window, select-and-scatter,
//! map and sort.

use std::panic::Location;

use oxla_hlo::ir::{ComparisonDirection, ComparisonType, Opcode, Window, WindowDim};
use oxla_hlo::shape_inference::{self as infer, Padding, make_padding};
use oxla_hlo::{PrimitiveType, Shape};

use crate::builder::{Extra, XlaBuilder};
use crate::computation::XlaComputation;
use crate::error::BuildError;
use crate::op::XlaOp;

/// A window from sizes, strides and (low, high) padding per dimension.
fn window_of(sizes: &[i64], strides: &[i64], padding: &[(i64, i64)]) -> Window {
    Window {
        dims: sizes
            .iter()
            .zip(strides)
            .zip(padding)
            .map(|((&size, &stride), &(lo, hi))| WindowDim {
                stride,
                pad_low: lo,
                pad_high: hi,
                ..WindowDim::new(size)
            })
            .collect(),
    }
}

/// Checks window sizes and strides have one entry per operand dimension.
fn check_window_args(
    b: &XlaBuilder,
    op: &str,
    operand: &Shape,
    sizes: &[i64],
    strides: &[i64],
    loc: &'static Location<'static>,
) -> Option<Vec<i64>> {
    let Some(a) = operand.as_array() else {
        b.record_error(BuildError::new(
            op,
            format!("operand must be an array, got {operand}"),
            loc,
        ));
        return None;
    };
    if sizes.len() != a.rank() || strides.len() != a.rank() {
        b.record_error(BuildError::new(
            op,
            format!(
                "window dimensions {sizes:?} and strides {strides:?} must have one entry per dimension of the operand {a}"
            ),
            loc,
        ));
        return None;
    }
    if let Some(i) = (0..sizes.len()).find(|&i| sizes[i] < 1 || strides[i] < 1) {
        b.record_error(BuildError::new(
            op,
            format!(
                "window dimension {i} needs a positive size and stride, got {} and {}",
                sizes[i], strides[i]
            ),
            loc,
        ));
        return None;
    }
    Some(a.dims().to_vec())
}

impl<'b> XlaOp<'b> {
    /// Reduces `dimensions` (in any order) with `computation: (T, T) -> T`,
    /// starting from `init_value`.
    #[track_caller]
    pub fn reduce(
        self,
        init_value: XlaOp<'b>,
        computation: &XlaComputation,
        dimensions: &[i64],
    ) -> XlaOp<'b> {
        self.builder().reduce_impl(
            &[self],
            &[init_value],
            computation,
            dimensions,
            Location::caller(),
        )
    }

    /// The seed's `ReduceWindow` with SAME or VALID padding.
    #[track_caller]
    pub fn reduce_window(
        self,
        init_value: XlaOp<'b>,
        computation: &XlaComputation,
        window_dimensions: &[i64],
        window_strides: &[i64],
        padding: Padding,
    ) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let Ok(s) = self.shape() else {
            return b.failed();
        };
        let Some(dims) = check_window_args(
            b,
            "reduce-window",
            &s,
            window_dimensions,
            window_strides,
            loc,
        ) else {
            return b.failed();
        };
        let pads = make_padding(&dims, window_dimensions, window_strides, padding);
        let window = window_of(window_dimensions, window_strides, &pads);
        b.reduce_window_impl(&[self], &[init_value], computation, window, loc)
    }

    /// Reduce-window with an explicit window (padding, base and window dilation).
    #[track_caller]
    pub fn reduce_window_with(
        self,
        init_value: XlaOp<'b>,
        computation: &XlaComputation,
        window: &Window,
    ) -> XlaOp<'b> {
        self.builder().reduce_window_impl(
            &[self],
            &[init_value],
            computation,
            window.clone(),
            Location::caller(),
        )
    }

    /// The seed's `SelectAndScatter`: picks one element per window of `self`
    /// with `select: (T, T) -> pred`, and combines `source` values into the
    /// picked positions with `scatter: (T, T) -> T`, starting from `init_value`.
    #[track_caller]
    pub fn select_and_scatter(
        self,
        select: &XlaComputation,
        window_dimensions: &[i64],
        window_strides: &[i64],
        padding: Padding,
        source: XlaOp<'b>,
        init_value: XlaOp<'b>,
        scatter: &XlaComputation,
    ) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let Some((ids, s)) = b.shapes("select-and-scatter", &[self, source, init_value], loc)
        else {
            return b.failed();
        };
        let Some(dims) = check_window_args(
            b,
            "select-and-scatter",
            &s[0],
            window_dimensions,
            window_strides,
            loc,
        ) else {
            return b.failed();
        };
        let pads = make_padding(&dims, window_dimensions, window_strides, padding);
        let window = window_of(window_dimensions, window_strides, &pads);
        let (sel, sel_sig) = b.embed(select);
        let (sct, sct_sig) = b.embed(scatter);
        let mut extra = Extra::default();
        extra.attrs.window = Some(window.clone());
        extra.called.select = Some(sel);
        extra.called.scatter = Some(sct);
        let shape = infer::select_and_scatter(&s[0], &s[1], &s[2], &window, &sel_sig, &sct_sig);
        b.add(Opcode::SelectAndScatter, shape, ids, extra, loc)
    }

    /// The seed's `Sort`: sorts a rank-1 array ascending (stable; NaNs last),
    /// or each row of a higher-rank array along its last dimension.
    #[track_caller]
    pub fn sort(self) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let Ok(s) = self.shape() else {
            return b.failed();
        };
        let Some(a) = s.as_array().filter(|a| a.rank() > 0) else {
            return b.record_error(BuildError::new(
                "sort",
                format!("operand must be an array of rank >= 1, got {s}"),
                loc,
            ));
        };
        let comparator = less_than(a.element_type());
        let dim = a.rank() as i64 - 1;
        match comparator {
            Ok(c) => b.sort_impl(&[self], &c, dim, true, loc),
            Err(e) => b.record_error(BuildError::new("sort", e.to_string(), loc)),
        }
    }
}

/// `(T, T) -> pred`: `a < b`, in the total order for floats so NaNs sort last.
fn less_than(ty: PrimitiveType) -> Result<XlaComputation, BuildError> {
    let b = XlaBuilder::new(format!("lt_{ty}"));
    let x = b.parameter(0, &Shape::scalar(ty), "lhs");
    let y = b.parameter(1, &Shape::scalar(ty), "rhs");
    let ordering = ty.is_floating().then_some(ComparisonType::TotalOrder);
    b.build(x.compare(y, ComparisonDirection::Lt, ordering))
}

impl XlaBuilder {
    /// Variadic reduce: N inputs of equal dimensions reduced together with a
    /// computation `(T_0..T_N-1, T_0..T_N-1) -> (T_0..T_N-1)` (e.g. argmax).
    #[track_caller]
    pub fn reduce_variadic<'b>(
        &'b self,
        inputs: &[XlaOp<'b>],
        init_values: &[XlaOp<'b>],
        computation: &XlaComputation,
        dimensions: &[i64],
    ) -> XlaOp<'b> {
        self.reduce_impl(
            inputs,
            init_values,
            computation,
            dimensions,
            Location::caller(),
        )
    }

    fn reduce_impl<'b>(
        &'b self,
        inputs: &[XlaOp<'b>],
        inits: &[XlaOp<'b>],
        computation: &XlaComputation,
        dimensions: &[i64],
        loc: &'static Location<'static>,
    ) -> XlaOp<'b> {
        let all: Vec<XlaOp<'b>> = inputs.iter().chain(inits).copied().collect();
        let Some((ids, s)) = self.shapes("reduce", &all, loc) else {
            return self.failed();
        };
        let (comp, sig) = self.embed(computation);
        let refs: Vec<&Shape> = s.iter().collect();
        let n = inputs.len();
        let mut extra = Extra::default();
        extra.attrs.dimensions = Some(dimensions.to_vec());
        extra.called.to_apply = Some(comp);
        let shape = infer::reduce(&refs[..n], &refs[n..], dimensions, &sig);
        self.add(Opcode::Reduce, shape, ids, extra, loc)
    }

    fn reduce_window_impl<'b>(
        &'b self,
        inputs: &[XlaOp<'b>],
        inits: &[XlaOp<'b>],
        computation: &XlaComputation,
        window: Window,
        loc: &'static Location<'static>,
    ) -> XlaOp<'b> {
        let all: Vec<XlaOp<'b>> = inputs.iter().chain(inits).copied().collect();
        let Some((ids, s)) = self.shapes("reduce-window", &all, loc) else {
            return self.failed();
        };
        let (comp, sig) = self.embed(computation);
        let refs: Vec<&Shape> = s.iter().collect();
        let n = inputs.len();
        let shape = infer::reduce_window(&refs[..n], &refs[n..], &window, &sig);
        let mut extra = Extra::default();
        extra.attrs.window = Some(window);
        extra.called.to_apply = Some(comp);
        self.add(Opcode::ReduceWindow, shape, ids, extra, loc)
    }

    /// The seed's `Map`: applies `computation` to corresponding elements of
    /// `operands` (arrays of equal dimensions), passing `static_operands` whole
    /// as trailing arguments: `computation(e_0, ..., e_N-1, s_0, ..., s_M-1)`.
    #[track_caller]
    pub fn map<'b>(
        &'b self,
        operands: &[XlaOp<'b>],
        computation: &XlaComputation,
        static_operands: &[XlaOp<'b>],
    ) -> XlaOp<'b> {
        let loc = Location::caller();
        let all: Vec<XlaOp<'b>> = operands.iter().chain(static_operands).copied().collect();
        let Some((ids, s)) = self.shapes("map", &all, loc) else {
            return self.failed();
        };
        let (comp, sig) = self.embed(computation);
        let refs: Vec<&Shape> = s.iter().collect();
        let (mapped, statics) = refs.split_at(operands.len());
        let rank = mapped
            .first()
            .and_then(|s| s.as_array())
            .map_or(0, |a| a.rank());
        let mut extra = Extra::default();
        extra.attrs.dimensions = Some((0..rank as i64).collect());
        extra.attrs.static_operands = (!statics.is_empty()).then_some(statics.len());
        extra.called.to_apply = Some(comp);
        self.add(
            Opcode::Map,
            infer::map(mapped, statics, &sig),
            ids,
            extra,
            loc,
        )
    }

    /// Today's `sort`: sorts `operands` together along `dimension`, ordered by
    /// `comparator: (T_0, T_0, T_1, T_1, ...) -> pred` (true when the first
    /// element of each pair goes first).
    #[track_caller]
    pub fn sort_with<'b>(
        &'b self,
        operands: &[XlaOp<'b>],
        comparator: &XlaComputation,
        dimension: i64,
        is_stable: bool,
    ) -> XlaOp<'b> {
        self.sort_impl(
            operands,
            comparator,
            dimension,
            is_stable,
            Location::caller(),
        )
    }

    fn sort_impl<'b>(
        &'b self,
        operands: &[XlaOp<'b>],
        comparator: &XlaComputation,
        dimension: i64,
        is_stable: bool,
        loc: &'static Location<'static>,
    ) -> XlaOp<'b> {
        let Some((ids, s)) = self.shapes("sort", operands, loc) else {
            return self.failed();
        };
        let (comp, sig) = self.embed(comparator);
        let refs: Vec<&Shape> = s.iter().collect();
        let mut extra = Extra::default();
        extra.attrs.dimensions = Some(vec![dimension]);
        extra.attrs.is_stable = is_stable.then_some(true);
        extra.called.to_apply = Some(comp);
        self.add(
            Opcode::Sort,
            infer::sort(&refs, dimension, &sig),
            ids,
            extra,
            loc,
        )
    }
}

impl XlaBuilder {
    /// Variadic reduce-window: N inputs reduced window by window together.
    #[track_caller]
    pub fn reduce_window_variadic<'b>(
        &'b self,
        inputs: &[XlaOp<'b>],
        init_values: &[XlaOp<'b>],
        computation: &XlaComputation,
        window: &Window,
    ) -> XlaOp<'b> {
        self.reduce_window_impl(
            inputs,
            init_values,
            computation,
            window.clone(),
            Location::caller(),
        )
    }
}

impl<'b> XlaOp<'b> {
    /// The `k` largest elements along the last dimension and their s32
    /// indices, as a `(values, indices)` tuple (ties keep the lower index).
    #[track_caller]
    pub fn top_k(self, k: i64) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let Some((ids, s)) = b.shapes("topk", &[self], loc) else {
            return b.failed();
        };
        let mut extra = Extra::default();
        extra.attrs.k = Some(k);
        extra.attrs.largest = Some(true);
        b.add(Opcode::TopK, infer::topk(&s[0], k), ids, extra, loc)
    }
}
