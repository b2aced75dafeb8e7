//! Element-wise ops on `XlaOp`: unary functions, binary arithmetic and
//! comparisons (plain and with `broadcast_dimensions`), select, clamp and
//! conversions. Implicit broadcasting is lowered here into explicit
//! `broadcast` instructions, so the IR never broadcasts implicitly.

use std::panic::Location;

use oxla_hlo::ir::{ComparisonDirection, ComparisonType, InstrId, Opcode};
use oxla_hlo::shape_inference::{self as infer, OperandBroadcast};
use oxla_hlo::{ArrayShape, PrimitiveType, Shape};

use crate::builder::{Extra, XlaBuilder};
use crate::error::BuildError;
use crate::op::XlaOp;

macro_rules! unary_ops {
    ($($(#[$m:meta])* $name:ident => $opcode:ident;)*) => {
        impl<'b> XlaOp<'b> {
            $(
                $(#[$m])*
                #[track_caller]
                pub fn $name(self) -> XlaOp<'b> {
                    self.unary(Opcode::$opcode, Location::caller())
                }
            )*
        }
    };
}

unary_ops! {
    /// `|x|` (the magnitude, a real value, for complex `x`).
    abs => Abs;
    /// Rounds up to an integer value.
    ceil => Ceil;
    /// Rounds down to an integer value.
    floor => Floor;
    /// `e^x`.
    exp => Exp;
    /// `e^x - 1`, accurate near 0.
    expm1 => Expm1;
    /// Natural logarithm.
    log => Log;
    /// `ln(1 + x)`, accurate near 0.
    log1p => Log1p;
    /// `1 / (1 + e^-x)`.
    logistic => Logistic;
    /// `-x`.
    neg => Negate;
    /// Logical not for pred, bitwise not for integers.
    not => Not;
    /// -1, 0 or 1 by the sign of `x` (NaN stays NaN).
    sign => Sign;
    /// Hyperbolic tangent.
    tanh => Tanh;
    sqrt => Sqrt;
    /// `1 / sqrt(x)`.
    rsqrt => Rsqrt;
    /// Cube root.
    cbrt => Cbrt;
    sin => Sin;
    cos => Cos;
    tan => Tan;
    /// Error function.
    erf => Erf;
    /// True where `x` is neither infinite nor NaN.
    is_finite => IsFinite;
    /// Rounds to the nearest integer, halves away from zero.
    round => RoundNearestAfz;
    /// Rounds to the nearest integer, halves to even.
    round_nearest_even => RoundNearestEven;
    /// Real part (the value itself for real types).
    real => Real;
    /// Imaginary part (zero for real types).
    imag => Imag;
    /// Number of set bits.
    popcnt => PopCnt;
    /// Number of leading zero bits.
    clz => Clz;
    /// A copy of the value.
    copy => Copy;
    acos => Acos;
    acosh => Acosh;
    asin => Asin;
    asinh => Asinh;
    atan => Atan;
    atanh => Atanh;
    cosh => Cosh;
    sinh => Sinh;
}

macro_rules! binary_ops {
    ($($(#[$m:meta])* $name:ident, $with_dims:ident => $opcode:ident;)*) => {
        impl<'b> XlaOp<'b> {
            $(
                $(#[$m])*
                /// The operands must have equal shapes, up to degenerate (size-1)
                /// dimensions, unless one is a scalar.
                #[track_caller]
                pub fn $name(self, rhs: XlaOp<'b>) -> XlaOp<'b> {
                    self.binary(Opcode::$opcode, rhs, &[], None, Location::caller())
                }

                /// Like the plain form, matching the lower-rank operand's dimensions
                /// to the higher-rank operand's `broadcast_dimensions` (XLA's "InDim" broadcasting).
                #[track_caller]
                pub fn $with_dims(self, rhs: XlaOp<'b>, broadcast_dimensions: &[i64]) -> XlaOp<'b> {
                    self.binary(Opcode::$opcode, rhs, broadcast_dimensions, None, Location::caller())
                }
            )*
        }
    };
}

binary_ops! {
    /// `lhs + rhs`.
    add, add_with_dims => Add;
    /// `lhs - rhs`.
    sub, sub_with_dims => Subtract;
    /// `lhs * rhs`.
    mul, mul_with_dims => Multiply;
    /// `lhs / rhs` (integer division by zero gives -1, or all ones when unsigned).
    div, div_with_dims => Divide;
    /// Remainder with the sign of the dividend.
    rem, rem_with_dims => Remainder;
    /// Element-wise maximum.
    max, max_with_dims => Maximum;
    /// Element-wise minimum.
    min, min_with_dims => Minimum;
    /// `lhs ^ rhs`.
    pow, pow_with_dims => Power;
    /// Logical and (pred) or bitwise and (integers).
    and, and_with_dims => And;
    /// Logical or (pred) or bitwise or (integers).
    or, or_with_dims => Or;
    /// Logical or bitwise exclusive or.
    xor, xor_with_dims => Xor;
    /// Two-argument arctangent `atan2(lhs, rhs)`.
    atan2, atan2_with_dims => Atan2;
    shift_left, shift_left_with_dims => ShiftLeft;
    shift_right_arithmetic, shift_right_arithmetic_with_dims => ShiftRightArithmetic;
    shift_right_logical, shift_right_logical_with_dims => ShiftRightLogical;
    /// A complex number from real and imaginary parts.
    complex, complex_with_dims => Complex;
    /// The high half of the double-width integer product.
    mulhi, mulhi_with_dims => MulHi;
}

macro_rules! compare_ops {
    ($($(#[$m:meta])* $name:ident, $with_dims:ident => $dir:ident;)*) => {
        impl<'b> XlaOp<'b> {
            $(
                $(#[$m])*
                /// The result is pred with the broadcast shape; floats compare as IEEE.
                #[track_caller]
                pub fn $name(self, rhs: XlaOp<'b>) -> XlaOp<'b> {
                    self.binary(Opcode::Compare, rhs, &[], Some((ComparisonDirection::$dir, None)), Location::caller())
                }

                /// Like the plain form, with `broadcast_dimensions` for operands of different ranks.
                #[track_caller]
                pub fn $with_dims(self, rhs: XlaOp<'b>, broadcast_dimensions: &[i64]) -> XlaOp<'b> {
                    self.binary(Opcode::Compare, rhs, broadcast_dimensions, Some((ComparisonDirection::$dir, None)), Location::caller())
                }
            )*
        }
    };
}

compare_ops! {
    /// `lhs == rhs`.
    eq, eq_with_dims => Eq;
    /// `lhs != rhs`.
    ne, ne_with_dims => Ne;
    /// `lhs >= rhs`.
    ge, ge_with_dims => Ge;
    /// `lhs > rhs`.
    gt, gt_with_dims => Gt;
    /// `lhs <= rhs`.
    le, le_with_dims => Le;
    /// `lhs < rhs`.
    lt, lt_with_dims => Lt;
}

impl<'b> XlaOp<'b> {
    /// The seed's LogicalAnd: `and` on pred values.
    #[track_caller]
    pub fn logical_and(self, rhs: XlaOp<'b>) -> XlaOp<'b> {
        self.logical(Opcode::And, rhs, &[], Location::caller())
    }

    /// LogicalAnd with `broadcast_dimensions`.
    #[track_caller]
    pub fn logical_and_with_dims(self, rhs: XlaOp<'b>, broadcast_dimensions: &[i64]) -> XlaOp<'b> {
        self.logical(Opcode::And, rhs, broadcast_dimensions, Location::caller())
    }

    /// The seed's LogicalOr: `or` on pred values.
    #[track_caller]
    pub fn logical_or(self, rhs: XlaOp<'b>) -> XlaOp<'b> {
        self.logical(Opcode::Or, rhs, &[], Location::caller())
    }

    /// LogicalOr with `broadcast_dimensions`.
    #[track_caller]
    pub fn logical_or_with_dims(self, rhs: XlaOp<'b>, broadcast_dimensions: &[i64]) -> XlaOp<'b> {
        self.logical(Opcode::Or, rhs, broadcast_dimensions, Location::caller())
    }

    /// The seed's LogicalNot: `not` on pred values.
    #[track_caller]
    pub fn logical_not(self) -> XlaOp<'b> {
        let loc = Location::caller();
        if let Some(e) = self.expect_pred("not", loc) {
            return e;
        }
        self.unary(Opcode::Not, loc)
    }

    fn expect_pred(self, op: &str, loc: &'static Location<'static>) -> Option<XlaOp<'b>> {
        match self.shape() {
            Ok(Shape::Array(a)) if a.element_type() == PrimitiveType::Pred => None,
            Ok(other) => Some(self.builder().record_error(BuildError::new(
                op,
                format!("logical operations need pred operands, got {other}"),
                loc,
            ))),
            Err(_) => Some(self.builder().failed()),
        }
    }

    fn logical(
        self,
        opcode: Opcode,
        rhs: XlaOp<'b>,
        dims: &[i64],
        loc: &'static Location<'static>,
    ) -> XlaOp<'b> {
        for side in [self, rhs] {
            if let Some(e) = side.expect_pred(opcode.name(), loc) {
                return e;
            }
        }
        self.binary(opcode, rhs, dims, None, loc)
    }

    /// A comparison with an explicit direction and, optionally, comparison type
    /// (e.g. `TotalOrder` to order NaNs and signed zeros).
    #[track_caller]
    pub fn compare(
        self,
        rhs: XlaOp<'b>,
        direction: ComparisonDirection,
        ty: Option<ComparisonType>,
    ) -> XlaOp<'b> {
        self.binary(
            Opcode::Compare,
            rhs,
            &[],
            Some((direction, ty)),
            Location::caller(),
        )
    }

    pub(crate) fn unary(self, opcode: Opcode, loc: &'static Location<'static>) -> XlaOp<'b> {
        let b = self.builder();
        let Some((ids, shapes)) = b.shapes(opcode.name(), &[self], loc) else {
            return b.failed();
        };
        let shape = if opcode == Opcode::Copy {
            Ok(shapes[0].clone())
        } else {
            infer::unary(opcode, &shapes[0])
        };
        b.add(opcode, shape, ids, Extra::default(), loc)
    }

    /// A binary op with XLA's broadcasting: `broadcast_dimensions` (InDim),
    /// scalars, then degenerate dimensions, each lowered to a `broadcast`.
    pub(crate) fn binary(
        self,
        opcode: Opcode,
        rhs: XlaOp<'b>,
        broadcast_dimensions: &[i64],
        compare: Option<(ComparisonDirection, Option<ComparisonType>)>,
        loc: &'static Location<'static>,
    ) -> XlaOp<'b> {
        let b = self.builder();
        let name = opcode.name();
        let Some((ids, shapes)) = b.shapes(name, &[self, rhs], loc) else {
            return b.failed();
        };
        let (l, r) = match (&shapes[0], &shapes[1]) {
            (Shape::Array(l), Shape::Array(r)) => (l, r),
            (l, r) => {
                return b.record_error(BuildError::new(
                    name,
                    format!("operands must be arrays, got {l} and {r}"),
                    loc,
                ));
            }
        };
        if l.element_type() != r.element_type() {
            return b.record_error(BuildError::new(
                name,
                format!("operands must have the same element type, got {l} and {r}"),
                loc,
            ));
        }
        let plan = match infer::broadcast_binary(name, l.dims(), r.dims(), broadcast_dimensions) {
            Ok(p) => p,
            Err(e) => return b.record_error(BuildError::from_infer(e, loc)),
        };
        let lhs = broadcast_for(b, ids[0], l, &plan.lhs, &plan.dims, loc);
        let rhs = broadcast_for(b, ids[1], r, &plan.rhs, &plan.dims, loc);
        let (Some(lhs), Some(rhs)) = (lhs, rhs) else {
            return b.failed();
        };
        let full = Shape::Array(ArrayShape::new_unchecked(
            l.element_type(),
            plan.dims.clone(),
        ));
        let mut extra = Extra::default();
        let shape = match compare {
            Some((direction, ty)) => {
                extra.attrs.comparison_direction = Some(direction);
                extra.attrs.comparison_type = ty;
                infer::compare(&full, &full, direction, ty)
            }
            None => infer::binary(opcode, &full, &full),
        };
        b.add(opcode, shape, vec![lhs, rhs], extra, loc)
    }

    /// `select(pred, on_true, on_false)`, called on the predicate. A scalar
    /// predicate chooses whole arrays (it is broadcast); tuple operands need a
    /// scalar predicate and select element by element.
    #[track_caller]
    pub fn select(self, on_true: XlaOp<'b>, on_false: XlaOp<'b>) -> XlaOp<'b> {
        select_impl(self, on_true, on_false, Location::caller())
    }

    /// `clamp(min, self, max)`: `min` and `max` are scalars or shaped like `self`.
    #[track_caller]
    pub fn clamp(self, min: XlaOp<'b>, max: XlaOp<'b>) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let Some((ids, s)) = b.shapes("clamp", &[min, self, max], loc) else {
            return b.failed();
        };
        b.add(
            Opcode::Clamp,
            infer::clamp(&s[0], &s[1], &s[2]),
            ids,
            Extra::default(),
            loc,
        )
    }

    /// Converts each element to `ty` (round to nearest even; float to integer
    /// truncates, saturates, and maps NaN to 0).
    #[track_caller]
    pub fn convert_element_type(self, ty: PrimitiveType) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let Some((ids, s)) = b.shapes("convert", &[self], loc) else {
            return b.failed();
        };
        b.add(
            Opcode::Convert,
            infer::convert(&s[0], ty),
            ids,
            Extra::default(),
            loc,
        )
    }

    /// Reinterprets the bits of each element as `ty`.
    #[track_caller]
    pub fn bitcast_convert_type(self, ty: PrimitiveType) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let Some((ids, s)) = b.shapes("bitcast-convert", &[self], loc) else {
            return b.failed();
        };
        b.add(
            Opcode::BitcastConvert,
            infer::bitcast_convert(&s[0], ty),
            ids,
            Extra::default(),
            loc,
        )
    }

    /// Rounds each element to a float format with the given exponent and mantissa bits.
    #[track_caller]
    pub fn reduce_precision(self, exponent_bits: i64, mantissa_bits: i64) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let Some((ids, s)) = b.shapes("reduce-precision", &[self], loc) else {
            return b.failed();
        };
        let mut extra = Extra::default();
        extra.attrs.exponent_bits = Some(exponent_bits);
        extra.attrs.mantissa_bits = Some(mantissa_bits);
        b.add(
            Opcode::ReducePrecision,
            infer::reduce_precision(&s[0], exponent_bits, mantissa_bits),
            ids,
            extra,
            loc,
        )
    }
}

/// Broadcasts operand `id` (of shape `shape`) to `dims` as `plan` says.
fn broadcast_for(
    b: &XlaBuilder,
    id: InstrId,
    shape: &ArrayShape,
    plan: &OperandBroadcast,
    dims: &[i64],
    loc: &'static Location<'static>,
) -> Option<InstrId> {
    let Some(map) = &plan.dimensions else {
        return Some(id);
    };
    let out = Shape::Array(ArrayShape::new_unchecked(
        shape.element_type(),
        dims.to_vec(),
    ));
    let mut extra = Extra::default();
    extra.attrs.dimensions = Some(map.clone());
    let result = infer::broadcast_in_dim(&Shape::Array(shape.clone()), &out, map);
    b.add(Opcode::Broadcast, result, vec![id], extra, loc)
        .id()
        .ok()
}

fn select_impl<'b>(
    pred: XlaOp<'b>,
    on_true: XlaOp<'b>,
    on_false: XlaOp<'b>,
    loc: &'static Location<'static>,
) -> XlaOp<'b> {
    let b = pred.builder();
    let Some((ids, s)) = b.shapes("select", &[pred, on_true, on_false], loc) else {
        return b.failed();
    };
    match (&s[0], &s[1], &s[2]) {
        (Shape::Array(p), Shape::Tuple(t), Shape::Tuple(f)) => {
            if !p.is_scalar() || p.element_type() != PrimitiveType::Pred {
                return b.record_error(BuildError::new(
                    "select",
                    format!("selecting between tuples needs a scalar pred predicate, got {p}"),
                    loc,
                ));
            }
            if !s[1].compatible(&s[2]) {
                return b.record_error(BuildError::new(
                    "select",
                    format!(
                        "on_true and on_false must have the same shape, got {} and {}",
                        s[1], s[2]
                    ),
                    loc,
                ));
            }
            // Tuples are selected element by element, recursively.
            let elements: Vec<XlaOp<'b>> = (0..t.len().min(f.len()))
                .map(|i| {
                    select_impl(
                        pred,
                        on_true.get_tuple_element(i),
                        on_false.get_tuple_element(i),
                        loc,
                    )
                })
                .collect();
            b.tuple_at(&elements, loc)
        }
        (Shape::Array(p), Shape::Array(t), Shape::Array(_)) if p.is_scalar() && !t.is_scalar() => {
            if p.element_type() != PrimitiveType::Pred {
                return b.record_error(BuildError::new(
                    "select",
                    format!("pred must have element type pred, got {p}"),
                    loc,
                ));
            }
            let plan = OperandBroadcast {
                dimensions: Some(vec![]),
            };
            let Some(p) = broadcast_for(b, ids[0], p, &plan, t.dims(), loc) else {
                return b.failed();
            };
            let pred_shape = Shape::Array(t.with_element_type(PrimitiveType::Pred));
            b.add(
                Opcode::Select,
                infer::select(&pred_shape, &s[1], &s[2]),
                vec![p, ids[1], ids[2]],
                Extra::default(),
                loc,
            )
        }
        _ => b.add(
            Opcode::Select,
            infer::select(&s[0], &s[1], &s[2]),
            ids,
            Extra::default(),
            loc,
        ),
    }
}
