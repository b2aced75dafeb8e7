//! Element-wise operations: unary and binary arithmetic, comparison, select,
//! clamp, conversions; and XLA's explicit broadcasting rules for binary
//! operations (scalars, `broadcast_dimensions`, degenerate dimensions).

use super::{InferResult, err, expect_array, make_array};
use crate::element_type::PrimitiveType;
use crate::ir::{ComparisonDirection, ComparisonType, Opcode};
use crate::shape::{ArrayShape, Shape};

/// Which element types an element-wise operation accepts.
fn accepts(op: Opcode, ty: PrimitiveType) -> bool {
    use Opcode::*;
    let int = ty.is_integral();
    let float = ty.is_float();
    let complex = ty.is_complex();
    match op {
        Abs | Sign => ty.is_signed_int() || float || complex,
        // Negating an unsigned integer wraps (0 - x), as in XLA and StableHLO.
        Negate => int || float || complex,
        Ceil | Floor | RoundNearestAfz | RoundNearestEven | Erf | Cbrt | IsFinite
        | ReducePrecision => float,
        Clz | PopCnt | ShiftLeft | ShiftRightArithmetic | ShiftRightLogical | MulHi => int,
        Cos | Sin | Tan | Tanh | Exp | Expm1 | Log | Log1p | Logistic | Sqrt | Rsqrt => {
            float || complex
        }
        Real | Imag => float || complex,
        Acos | Acosh | Asin | Asinh | Atan | Atanh | Cosh | Sinh => float || complex,
        Not | And | Or | Xor => int || ty.is_pred(),
        // On pred, add is logical or and multiply logical and (StableHLO's i1).
        Add | Multiply => int || float || complex || ty.is_pred(),
        Subtract | Divide | Power => int || float || complex,
        Remainder => int || float,
        // Complex values order lexicographically (real part, then imaginary), as StableHLO specifies.
        Maximum | Minimum => int || float || complex || ty.is_pred(),
        Atan2 => float || complex,
        Complex => matches!(ty, PrimitiveType::F32 | PrimitiveType::F64),
        // Convert, copy and compare take every element type.
        _ => true,
    }
}

fn type_error(op: Opcode, shape: &ArrayShape) -> InferResult {
    let what = match op {
        Opcode::Abs | Opcode::Sign => "a signed integer, float or complex",
        Opcode::Negate => "a numeric (integer, float or complex)",
        Opcode::Clz | Opcode::PopCnt | Opcode::MulHi => "an integer",
        Opcode::ShiftLeft | Opcode::ShiftRightArithmetic | Opcode::ShiftRightLogical => {
            "an integer"
        }
        Opcode::Not | Opcode::And | Opcode::Or | Opcode::Xor => "a pred or integer",
        Opcode::Add | Opcode::Multiply => "a pred or numeric (integer, float or complex)",
        Opcode::Subtract | Opcode::Divide | Opcode::Power => {
            "a numeric (integer, float or complex)"
        }
        Opcode::Remainder => "an integer or float",
        Opcode::Maximum | Opcode::Minimum => "a pred, integer, float or complex",
        Opcode::Complex => "an f32 or f64",
        Opcode::Cos | Opcode::Sin | Opcode::Tan | Opcode::Tanh | Opcode::Exp | Opcode::Expm1 => {
            "a float or complex"
        }
        Opcode::Log | Opcode::Log1p | Opcode::Logistic | Opcode::Sqrt | Opcode::Rsqrt => {
            "a float or complex"
        }
        Opcode::Real | Opcode::Imag | Opcode::Atan2 => "a float or complex",
        Opcode::Acos | Opcode::Acosh | Opcode::Asin | Opcode::Asinh => "a float or complex",
        Opcode::Atan | Opcode::Atanh | Opcode::Cosh | Opcode::Sinh => "a float or complex",
        _ => "a float",
    };
    err(
        op.name(),
        format!("expects {what} element type, got {shape}"),
    )
}

/// Shape of an element-wise unary operation (not convert, which takes a target type).
pub fn unary(op: Opcode, operand: &Shape) -> InferResult {
    let name = op.name();
    let a = expect_array(name, "operand", operand)?;
    let ty = a.element_type();
    if !accepts(op, ty) {
        return type_error(op, a);
    }
    let out = match op {
        Opcode::IsFinite => PrimitiveType::Pred,
        Opcode::Abs | Opcode::Real | Opcode::Imag => ty.component_type(),
        _ => ty,
    };
    Ok(Shape::Array(a.with_element_type(out)))
}

/// Shape of an element-wise binary operation on operands of identical shape
/// (HLO never broadcasts implicitly; see [`broadcast_binary`] for the builder).
pub fn binary(op: Opcode, lhs: &Shape, rhs: &Shape) -> InferResult {
    let name = op.name();
    let l = expect_array(name, "lhs", lhs)?;
    let r = expect_array(name, "rhs", rhs)?;
    if l.element_type() != r.element_type() {
        return err(
            name,
            format!("operands must have the same element type, got {l} and {r}"),
        );
    }
    if !l.same_dims(r) {
        return err(
            name,
            format!("operands must have the same dimensions, got {l} and {r}"),
        );
    }
    if !accepts(op, l.element_type()) {
        return type_error(op, l);
    }
    let out = match op {
        Opcode::Complex => l.element_type().complex_of().unwrap_or(PrimitiveType::C64),
        Opcode::Compare => PrimitiveType::Pred,
        _ => l.element_type(),
    };
    Ok(Shape::Array(l.with_element_type(out)))
}

/// The comparison type XLA uses when `compare` gives none.
pub fn default_comparison_type(ty: PrimitiveType) -> ComparisonType {
    if ty.is_floating() {
        ComparisonType::Float
    } else if ty.is_unsigned_int() || ty.is_pred() {
        ComparisonType::Unsigned
    } else {
        ComparisonType::Signed
    }
}

/// Shape of a `compare`: same-shaped operands, a `pred` result.
pub fn compare(
    lhs: &Shape,
    rhs: &Shape,
    direction: ComparisonDirection,
    ty: Option<ComparisonType>,
) -> InferResult {
    let out = binary(Opcode::Compare, lhs, rhs)?;
    let l = expect_array("compare", "lhs", lhs)?;
    let et = l.element_type();
    if et.is_complex()
        && !matches!(direction, ComparisonDirection::Eq | ComparisonDirection::Ne)
        && ty != Some(ComparisonType::TotalOrder)
    {
        return err(
            "compare",
            format!("complex operands ({l}) can only be compared with EQ or NE, not {direction}"),
        );
    }
    if let Some(t) = ty {
        let ok = match t {
            ComparisonType::Float | ComparisonType::TotalOrder => et.is_floating(),
            ComparisonType::Signed => et.is_signed_int(),
            ComparisonType::Unsigned => et.is_unsigned_int() || et.is_pred(),
        };
        if !ok {
            return err(
                "compare",
                format!("comparison type {t} does not apply to {l}"),
            );
        }
    }
    Ok(out)
}

/// Shape of `convert` to `ty`: same dimensions; complex to real is not supported (as in XLA).
pub fn convert(operand: &Shape, ty: PrimitiveType) -> InferResult {
    let a = expect_array("convert", "operand", operand)?;
    if a.element_type().is_complex() && !ty.is_complex() {
        return err(
            "convert",
            format!(
                "conversion from complex to real type ({a} to {ty}) is not supported; use real or imag"
            ),
        );
    }
    Ok(Shape::Array(a.with_element_type(ty)))
}

/// Shape of `bitcast-convert` to `ty`. Equal widths keep the dimensions; a
/// narrower result adds a minor dimension of size `in_bits / out_bits`; a wider
/// result consumes a minor dimension that must have size `out_bits / in_bits`.
pub fn bitcast_convert(operand: &Shape, ty: PrimitiveType) -> InferResult {
    let op = "bitcast-convert";
    let a = expect_array(op, "operand", operand)?;
    let (from, to) = (a.element_type().bit_width(), ty.bit_width());
    if a.element_type().is_pred() != ty.is_pred() {
        return err(
            op,
            format!("cannot bitcast between pred and other types ({a} to {ty})"),
        );
    }
    let mut dims = a.dims().to_vec();
    if from > to {
        dims.push((from / to) as i64);
    } else if from < to {
        let ratio = (to / from) as i64;
        if dims.last() != Some(&ratio) {
            return err(
                op,
                format!("converting {a} to the wider {ty} needs a last dimension of size {ratio}"),
            );
        }
        dims.pop();
    }
    make_array(op, ty, dims)
}

/// Shape of `reduce-precision`.
pub fn reduce_precision(operand: &Shape, exponent_bits: i64, mantissa_bits: i64) -> InferResult {
    let out = unary(Opcode::ReducePrecision, operand)?;
    if exponent_bits < 1 || mantissa_bits < 0 {
        return err(
            "reduce-precision",
            format!(
                "needs exponent_bits >= 1 and mantissa_bits >= 0, got {exponent_bits} and {mantissa_bits}"
            ),
        );
    }
    Ok(out)
}

/// Shape of `select(pred, on_true, on_false)`: arrays of equal dimensions, a pred
/// predicate of the same dimensions (the builder broadcasts a scalar predicate
/// and splits tuple selects before they reach HLO).
pub fn select(pred: &Shape, on_true: &Shape, on_false: &Shape) -> InferResult {
    let op = "select";
    let p = expect_array(op, "pred", pred)?;
    let t = expect_array(op, "on_true", on_true)?;
    let f = expect_array(op, "on_false", on_false)?;
    if !t.compatible(f) {
        return err(
            op,
            format!("on_true and on_false must have the same shape, got {t} and {f}"),
        );
    }
    if p.element_type() != PrimitiveType::Pred {
        return err(op, format!("pred must have element type pred, got {p}"));
    }
    if !p.same_dims(t) {
        return err(
            op,
            format!("pred must have the dimensions of on_true, got {p} and {t}"),
        );
    }
    Ok(on_true.clone())
}

/// Shape of `clamp(min, operand, max)`: `min` and `max` are scalars or shaped like the operand.
pub fn clamp(min: &Shape, operand: &Shape, max: &Shape) -> InferResult {
    let op = "clamp";
    let x = expect_array(op, "operand", operand)?;
    for (what, s) in [("min", min), ("max", max)] {
        let b = expect_array(op, what, s)?;
        if b.element_type() != x.element_type() {
            return err(
                op,
                format!("{what} must have the operand's element type, got {b} and {x}"),
            );
        }
        if !b.is_scalar() && !b.same_dims(x) {
            return err(
                op,
                format!("{what} must be a scalar or have the operand's shape, got {b} and {x}"),
            );
        }
    }
    if x.element_type().is_complex() || x.element_type().is_pred() {
        return err(
            op,
            format!("expects an integer or float element type, got {x}"),
        );
    }
    Ok(operand.clone())
}

/// How the builder turns one operand of a broadcasting binary operation into
/// an operand of the result's shape: `broadcast(operand), dimensions=dims`
/// where each operand dimension is either equal to its result dimension or 1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperandBroadcast {
    /// Result dimension matched by each operand dimension; `None` when the
    /// operand already has the result's dimensions.
    pub dimensions: Option<Vec<i64>>,
}

/// The outcome of XLA's broadcasting rules for a binary operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BinaryBroadcast {
    /// Result dimensions.
    pub dims: Vec<i64>,
    pub lhs: OperandBroadcast,
    pub rhs: OperandBroadcast,
}

/// XLA's broadcasting for binary operations, as `xla-broadcasting.md` states it.
///
/// - Equal ranks: `broadcast_dimensions` must be empty or the identity; each
///   pair of dimensions must be equal or one of them 1 (degenerate).
/// - Different ranks: the lower-rank operand is matched to the dimensions of
///   the higher-rank one listed in `broadcast_dimensions` (strictly increasing,
///   one per lower-rank dimension; scalars need none), its unmatched
///   dimensions being 1; degenerate broadcasting then equalises the shapes.
pub fn broadcast_binary(
    op: &str,
    lhs: &[i64],
    rhs: &[i64],
    broadcast_dimensions: &[i64],
) -> InferResult<BinaryBroadcast> {
    let shapes = || format!("{} and {}", dims_text(lhs), dims_text(rhs));
    let identity = |n: usize| (0..n as i64).collect::<Vec<_>>();
    // Each operand's dimensions as seen at the higher rank (1 where unmatched),
    // and which result dimensions they match.
    let (lhs_map, rhs_map): (Vec<i64>, Vec<i64>) = if lhs.len() == rhs.len() {
        if !broadcast_dimensions.is_empty()
            && broadcast_dimensions != identity(lhs.len()).as_slice()
        {
            return err(
                op,
                format!(
                    "broadcast_dimensions {broadcast_dimensions:?} must be empty or the identity for operands of the same rank ({})",
                    shapes()
                ),
            );
        }
        (identity(lhs.len()), identity(rhs.len()))
    } else {
        let lhs_is_larger = lhs.len() > rhs.len();
        let (small, large) = if lhs_is_larger {
            (rhs, lhs)
        } else {
            (lhs, rhs)
        };
        if broadcast_dimensions.is_empty() && !small.is_empty() {
            return err(
                op,
                format!(
                    "operands of different ranks ({}) need broadcast_dimensions unless one of them is a scalar",
                    shapes()
                ),
            );
        }
        if broadcast_dimensions.len() != small.len() {
            return err(
                op,
                format!(
                    "broadcast_dimensions {broadcast_dimensions:?} must have one entry per dimension of the lower-rank operand (rank {}); operands {}",
                    small.len(),
                    shapes()
                ),
            );
        }
        // Range and order first: they say what the dimensions mean; sizes second.
        for (i, &d) in broadcast_dimensions.iter().enumerate() {
            if d < 0 || d as usize >= large.len() {
                return err(
                    op,
                    format!(
                        "broadcast dimension {d} is not a dimension of the higher-rank operand (rank {}); operands {}",
                        large.len(),
                        shapes()
                    ),
                );
            }
            if i > 0 && broadcast_dimensions[i - 1] >= d {
                return err(
                    op,
                    format!(
                        "broadcast_dimensions {broadcast_dimensions:?} must be strictly increasing; operands {}",
                        shapes()
                    ),
                );
            }
        }
        for (i, &d) in broadcast_dimensions.iter().enumerate() {
            let (s, l) = (small[i], large[d as usize]);
            if s != l && s != 1 && l != 1 {
                return err(
                    op,
                    format!(
                        "broadcast dimension {i} of the lower-rank operand (size {s}) does not match dimension {d} of the higher-rank operand (size {l}); operands {}",
                        shapes()
                    ),
                );
            }
        }
        let small_map = broadcast_dimensions.to_vec();
        if lhs_is_larger {
            (identity(lhs.len()), small_map)
        } else {
            (small_map, identity(rhs.len()))
        }
    };
    let rank = lhs.len().max(rhs.len());
    // Expanded dimensions: 1 where an operand has no matching dimension.
    let expand = |dims: &[i64], map: &[i64]| {
        let mut e = vec![1i64; rank];
        for (&d, &m) in dims.iter().zip(map) {
            e[m as usize] = d;
        }
        e
    };
    let (le, re) = (expand(lhs, &lhs_map), expand(rhs, &rhs_map));
    let mut out = Vec::with_capacity(rank);
    for i in 0..rank {
        let (a, b) = (le[i], re[i]);
        if a != b && a != 1 && b != 1 {
            return err(
                op,
                format!(
                    "incompatible shapes {}: dimension {i} is {a} vs {b} (dimensions must be equal or one of them 1)",
                    shapes()
                ),
            );
        }
        // A size-0 dimension broadcasts against 1 to size 0.
        out.push(if a == 1 { b } else { a });
    }
    let plan = |dims: &[i64], map: Vec<i64>| OperandBroadcast {
        dimensions: if dims == out.as_slice() {
            None
        } else {
            Some(map)
        },
    };
    Ok(BinaryBroadcast {
        lhs: plan(lhs, lhs_map),
        rhs: plan(rhs, rhs_map),
        dims: out,
    })
}

pub(crate) fn dims_text(dims: &[i64]) -> String {
    let inner: Vec<String> = dims.iter().map(i64::to_string).collect();
    format!("[{}]", inner.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(lhs: &[i64], rhs: &[i64], bd: &[i64]) -> Result<Vec<i64>, String> {
        broadcast_binary("add", lhs, rhs, bd)
            .map(|b| b.dims)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn broadcasting_examples_from_the_spec() {
        // Scalar with a matrix.
        assert_eq!(out(&[2, 3], &[], &[]), Ok(vec![2, 3]));
        // Vector to matrix rows (dims (1)) and columns (dims (0)).
        assert_eq!(out(&[2, 3], &[3], &[1]), Ok(vec![2, 3]));
        assert_eq!(out(&[3, 3], &[3], &[0]), Ok(vec![3, 3]));
        // "when adding a 2x3 matrix to a 3-element vector, a broadcasting dimension of 0 is invalid".
        assert!(out(&[2, 3], &[3], &[0]).is_err());
        // 2x3x4 cuboid with a 3x4 matrix on (1,2).
        assert_eq!(out(&[2, 3, 4], &[3, 4], &[1, 2]), Ok(vec![2, 3, 4]));
        // Degenerate dimensions.
        assert_eq!(out(&[2, 1], &[2, 3], &[]), Ok(vec![2, 3]));
        assert_eq!(out(&[1, 2, 5], &[7, 2, 5], &[]), Ok(vec![7, 2, 5]));
        assert_eq!(out(&[7, 2, 5], &[7, 1, 5], &[]), Ok(vec![7, 2, 5]));
        assert!(out(&[7, 2, 5], &[7, 2, 6], &[]).is_err());
        // The outer operation.
        assert_eq!(out(&[2, 1], &[1, 3], &[]), Ok(vec![2, 3]));
        // Composition: [4] + [1,2] with (0) gives [4,2]; [1,2] + [4,3,1] with (1,2) gives [4,3,2].
        assert_eq!(out(&[4], &[1, 2], &[0]), Ok(vec![4, 2]));
        assert_eq!(out(&[1, 2], &[4, 3, 1], &[1, 2]), Ok(vec![4, 3, 2]));
    }

    #[test]
    fn broadcasting_errors() {
        let e = out(&[2, 3], &[3], &[]).unwrap_err();
        assert!(e.contains("need broadcast_dimensions"), "{e}");
        let e = out(&[2, 3, 4], &[3, 4], &[2, 1]).unwrap_err();
        assert!(e.contains("strictly increasing"), "{e}");
        let e = out(&[2, 3, 4], &[3, 4], &[1, 1]).unwrap_err();
        assert!(e.contains("strictly increasing"), "{e}");
        let e = out(&[2, 3], &[3], &[2]).unwrap_err();
        assert!(e.contains("not a dimension"), "{e}");
        let e = out(&[2, 3], &[3], &[0, 1]).unwrap_err();
        assert!(e.contains("one entry per dimension"), "{e}");
        let e = out(&[2, 3], &[2, 3], &[1, 0]).unwrap_err();
        assert!(e.contains("identity"), "{e}");
        assert_eq!(out(&[2, 3], &[2, 3], &[0, 1]), Ok(vec![2, 3]));
    }

    #[test]
    fn broadcast_plans() {
        let b = broadcast_binary("add", &[4], &[1, 2], &[0]).unwrap();
        assert_eq!(b.lhs.dimensions, Some(vec![0]));
        assert_eq!(b.rhs.dimensions, Some(vec![0, 1]));
        let b = broadcast_binary("add", &[2, 3], &[2, 3], &[]).unwrap();
        assert_eq!((b.lhs.dimensions, b.rhs.dimensions), (None, None));
        let b = broadcast_binary("add", &[2, 3], &[], &[]).unwrap();
        assert_eq!(b.rhs.dimensions, Some(vec![]));
    }

    #[test]
    fn unary_types() {
        let f = Shape::array(PrimitiveType::F32, [2]).unwrap();
        let s = Shape::array(PrimitiveType::S32, [2]).unwrap();
        let u = Shape::array(PrimitiveType::U8, [2]).unwrap();
        let c = Shape::array(PrimitiveType::C64, [2]).unwrap();
        assert_eq!(
            unary(Opcode::IsFinite, &f).unwrap().element_type(),
            Some(PrimitiveType::Pred)
        );
        assert_eq!(
            unary(Opcode::Abs, &c).unwrap().element_type(),
            Some(PrimitiveType::F32)
        );
        assert!(unary(Opcode::Tanh, &s).is_err());
        assert!(unary(Opcode::Negate, &u).is_ok());
        assert!(unary(Opcode::Abs, &u).is_err());
        assert!(unary(Opcode::Floor, &c).is_err());
        assert_eq!(
            unary(Opcode::Exp, &s).unwrap_err().to_string(),
            "exponential: expects a float or complex element type, got s32[2]"
        );
    }

    #[test]
    fn binary_needs_equal_shapes_and_types() {
        let f2 = Shape::array(PrimitiveType::F32, [2]).unwrap();
        let f3 = Shape::array(PrimitiveType::F32, [3]).unwrap();
        let s2 = Shape::array(PrimitiveType::S32, [2]).unwrap();
        assert!(binary(Opcode::Add, &f2, &f3).is_err());
        assert!(binary(Opcode::Add, &f2, &s2).is_err());
        assert_eq!(
            binary(Opcode::Complex, &f2, &f2).unwrap().element_type(),
            Some(PrimitiveType::C64)
        );
        assert!(binary(Opcode::ShiftLeft, &f2, &f2).is_err());
    }

    #[test]
    fn bitcast_convert_widths() {
        let f = Shape::array(PrimitiveType::F32, [3]).unwrap();
        assert_eq!(
            bitcast_convert(&f, PrimitiveType::U32).unwrap().to_string(),
            "u32[3]"
        );
        assert_eq!(
            bitcast_convert(&f, PrimitiveType::U8).unwrap().to_string(),
            "u8[3,4]"
        );
        let u = Shape::array(PrimitiveType::U16, [3, 4]).unwrap();
        assert_eq!(
            bitcast_convert(&u, PrimitiveType::F64).unwrap().to_string(),
            "f64[3]"
        );
        assert!(bitcast_convert(&u, PrimitiveType::F32).is_err());
    }
}
