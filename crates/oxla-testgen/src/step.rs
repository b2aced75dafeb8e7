//! One builder call with all its arguments decided, so a computation can be
//! replayed into a fresh builder: operands are indices into the values made
//! so far (parameters first), sub-computations indices into the generator's
//! list.

use oxla_builder::{Padding, XlaBuilder, XlaComputation, XlaOp};
use oxla_hlo::ir::{ComparisonDirection, ComparisonType, DotDimensionNumbers, PadDim, Window};
use oxla_hlo::{Literal, PrimitiveType, Shape};

/// `unary(op, x)` applies unary op number `op` (below `UNARY_COUNT`).
macro_rules! unary_ops {
    ($($m:ident),* $(,)?) => {
        pub(crate) const UNARY_COUNT: usize = [$(stringify!($m)),*].len();

        fn unary<'b>(op: usize, x: XlaOp<'b>) -> XlaOp<'b> {
            let table: &[fn(XlaOp<'b>) -> XlaOp<'b>] = &[$(XlaOp::$m),*];
            table[op](x)
        }
    };
}

/// `binary(op, x, y, dims)` applies binary op number `op` (below
/// `BINARY_COUNT`), with implicit broadcasting when `dims` is given.
macro_rules! binary_ops {
    ($(($m:ident, $with_dims:ident)),* $(,)?) => {
        pub(crate) const BINARY_COUNT: usize = [$(stringify!($m)),*].len();

        fn binary<'b>(op: usize, x: XlaOp<'b>, y: XlaOp<'b>, dims: Option<&[i64]>) -> XlaOp<'b> {
            let plain: &[fn(XlaOp<'b>, XlaOp<'b>) -> XlaOp<'b>] = &[$(XlaOp::$m),*];
            let with_dims: &[fn(XlaOp<'b>, XlaOp<'b>, &[i64]) -> XlaOp<'b>] = &[$(XlaOp::$with_dims),*];
            match dims {
                None => plain[op](x, y),
                Some(d) => with_dims[op](x, y, d),
            }
        }
    };
}

unary_ops!(
    abs,
    ceil,
    floor,
    exp,
    expm1,
    log,
    log1p,
    logistic,
    neg,
    not,
    sign,
    tanh,
    sqrt,
    rsqrt,
    cbrt,
    sin,
    cos,
    tan,
    erf,
    is_finite,
    round,
    round_nearest_even,
    real,
    imag,
    popcnt,
    clz,
    copy,
    acos,
    acosh,
    asin,
    asinh,
    atan,
    atanh,
    cosh,
    sinh,
    optimization_barrier,
);

binary_ops!(
    (add, add_with_dims),
    (sub, sub_with_dims),
    (mul, mul_with_dims),
    (div, div_with_dims),
    (rem, rem_with_dims),
    (max, max_with_dims),
    (min, min_with_dims),
    (pow, pow_with_dims),
    (and, and_with_dims),
    (or, or_with_dims),
    (xor, xor_with_dims),
    (atan2, atan2_with_dims),
    (shift_left, shift_left_with_dims),
    (shift_right_arithmetic, shift_right_arithmetic_with_dims),
    (shift_right_logical, shift_right_logical_with_dims),
    (complex, complex_with_dims),
    (mulhi, mulhi_with_dims),
);

/// One builder call. `usize` fields name values (operands), `comp` fields
/// name sub-computations.
#[derive(Clone, Debug)]
pub(crate) enum Step {
    Constant(Literal),
    Iota {
        ty: PrimitiveType,
        dims: Vec<i64>,
        dim: i64,
    },
    Unary {
        op: usize,
        x: usize,
    },
    Binary {
        op: usize,
        x: usize,
        y: usize,
        broadcast: Option<Vec<i64>>,
    },
    Compare {
        x: usize,
        y: usize,
        direction: ComparisonDirection,
        ty: Option<ComparisonType>,
    },
    Select {
        pred: usize,
        on_true: usize,
        on_false: usize,
    },
    Clamp {
        min: usize,
        x: usize,
        max: usize,
    },
    Convert {
        x: usize,
        ty: PrimitiveType,
    },
    BitcastConvert {
        x: usize,
        ty: PrimitiveType,
    },
    ReducePrecision {
        x: usize,
        exponent_bits: i64,
        mantissa_bits: i64,
    },
    Broadcast {
        x: usize,
        sizes: Vec<i64>,
    },
    BroadcastInDim {
        x: usize,
        out: Vec<i64>,
        dims: Vec<i64>,
    },
    Reshape {
        x: usize,
        sizes: Vec<i64>,
    },
    Transpose {
        x: usize,
        permutation: Vec<i64>,
    },
    Rev {
        x: usize,
        dims: Vec<i64>,
    },
    Slice {
        x: usize,
        start: Vec<i64>,
        limit: Vec<i64>,
        strides: Vec<i64>,
    },
    DynamicSlice {
        x: usize,
        starts: Vec<usize>,
        sizes: Vec<i64>,
    },
    DynamicUpdateSlice {
        x: usize,
        update: usize,
        starts: Vec<usize>,
    },
    Pad {
        x: usize,
        value: usize,
        config: Vec<PadDim>,
    },
    Concat {
        xs: Vec<usize>,
        dim: i64,
    },
    Reduce {
        x: usize,
        init: usize,
        comp: usize,
        dims: Vec<i64>,
    },
    ReduceWindow {
        x: usize,
        init: usize,
        comp: usize,
        window: Window,
    },
    Dot {
        x: usize,
        y: usize,
        dnums: DotDimensionNumbers,
    },
    Conv {
        x: usize,
        kernel: usize,
        strides: Vec<i64>,
        same: bool,
    },
    Sort {
        x: usize,
    },
    TopK {
        x: usize,
        k: i64,
    },
    Tuple {
        xs: Vec<usize>,
    },
    GetTupleElement {
        x: usize,
        index: usize,
    },
    Map {
        xs: Vec<usize>,
        comp: usize,
    },
    Call {
        xs: Vec<usize>,
        comp: usize,
    },
    /// `while` over `(s32[] counter, x)` starting from `start`.
    While {
        x: usize,
        start: i32,
        cond: usize,
        body: usize,
    },
    Conditional {
        pred: usize,
        on_true: usize,
        true_comp: usize,
        on_false: usize,
        false_comp: usize,
    },
    RngUniform {
        a: usize,
        b: usize,
        shape: Shape,
    },
    CustomCall {
        xs: Vec<usize>,
        target: String,
        shape: Shape,
    },
    Parameter {
        number: usize,
        shape: Shape,
    },
}

/// Makes `step` in `b`; `ops` are the values made so far.
pub(crate) fn apply<'b>(
    b: &'b XlaBuilder,
    ops: &[XlaOp<'b>],
    step: &Step,
    comps: &[XlaComputation],
) -> XlaOp<'b> {
    let at = |i: usize| ops[i];
    let all = |xs: &[usize]| xs.iter().map(|&i| ops[i]).collect::<Vec<_>>();
    match step {
        Step::Constant(literal) => b.constant_literal(literal),
        Step::Iota { ty, dims, dim } => b.iota(*ty, dims, *dim),
        Step::Unary { op, x } => unary(*op, at(*x)),
        Step::Binary {
            op,
            x,
            y,
            broadcast,
        } => binary(*op, at(*x), at(*y), broadcast.as_deref()),
        Step::Compare {
            x,
            y,
            direction,
            ty,
        } => at(*x).compare(at(*y), *direction, *ty),
        Step::Select {
            pred,
            on_true,
            on_false,
        } => at(*pred).select(at(*on_true), at(*on_false)),
        Step::Clamp { min, x, max } => at(*min).clamp(at(*x), at(*max)),
        Step::Convert { x, ty } => at(*x).convert_element_type(*ty),
        Step::BitcastConvert { x, ty } => at(*x).bitcast_convert_type(*ty),
        Step::ReducePrecision {
            x,
            exponent_bits,
            mantissa_bits,
        } => at(*x).reduce_precision(*exponent_bits, *mantissa_bits),
        Step::Broadcast { x, sizes } => at(*x).broadcast(sizes),
        Step::BroadcastInDim { x, out, dims } => at(*x).broadcast_in_dim(out, dims),
        Step::Reshape { x, sizes } => at(*x).reshape(sizes),
        Step::Transpose { x, permutation } => at(*x).transpose(permutation),
        Step::Rev { x, dims } => at(*x).rev(dims),
        Step::Slice {
            x,
            start,
            limit,
            strides,
        } => at(*x).slice_with_strides(start, limit, strides),
        Step::DynamicSlice { x, starts, sizes } => {
            at(*x).dynamic_slice_scalars(&all(starts), sizes)
        }
        Step::DynamicUpdateSlice { x, update, starts } => {
            at(*x).dynamic_update_slice_scalars(at(*update), &all(starts))
        }
        Step::Pad { x, value, config } => at(*x).pad(at(*value), config),
        Step::Concat { xs, dim } => b.concat_in_dim(&all(xs), *dim),
        Step::Reduce {
            x,
            init,
            comp,
            dims,
        } => at(*x).reduce(at(*init), &comps[*comp], dims),
        Step::ReduceWindow {
            x,
            init,
            comp,
            window,
        } => at(*x).reduce_window_with(at(*init), &comps[*comp], window),
        Step::Dot { x, y, dnums } => at(*x).dot_general(at(*y), dnums),
        Step::Conv {
            x,
            kernel,
            strides,
            same,
        } => {
            let padding = if *same { Padding::Same } else { Padding::Valid };
            at(*x).conv(at(*kernel), strides, padding)
        }
        Step::Sort { x } => at(*x).sort(),
        Step::TopK { x, k } => at(*x).top_k(*k),
        Step::Tuple { xs } => b.tuple(&all(xs)),
        Step::GetTupleElement { x, index } => at(*x).get_tuple_element(*index),
        Step::Map { xs, comp } => b.map(&all(xs), &comps[*comp], &[]),
        Step::Call { xs, comp } => b.call(&comps[*comp], &all(xs)),
        Step::While {
            x,
            start,
            cond,
            body,
        } => {
            let init = b.tuple(&[b.constant_r0(*start), at(*x)]);
            b.while_loop(&comps[*cond], &comps[*body], init)
        }
        Step::Conditional {
            pred,
            on_true,
            true_comp,
            on_false,
            false_comp,
        } => b.conditional(
            at(*pred),
            at(*on_true),
            &comps[*true_comp],
            at(*on_false),
            &comps[*false_comp],
        ),
        Step::RngUniform { a, b: hi, shape } => b.rng_uniform(at(*a), at(*hi), shape),
        Step::CustomCall { xs, target, shape } => b.custom_call(target, &all(xs), shape),
        Step::Parameter { number, shape } => b.parameter(*number, shape, "p"),
    }
}
