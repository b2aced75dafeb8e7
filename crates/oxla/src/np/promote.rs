//! Type promotion for mixed element types, as the Array API specifies it
//! (within a kind: the wider type; signed with unsigned: the smallest signed
//! type holding both), extended the way NumPy does across kinds (bool joins
//! any numeric type; integers with floats give a float wide enough for the
//! integer's values), and Rust scalars that take the array's type when they
//! are of the same kind ("weak" scalars, as in NumPy 2 and the Array API).

use std::fmt;

use oxla_hlo::PrimitiveType::{self, *};

/// Two element types with no common type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromotionError {
    pub lhs: PrimitiveType,
    pub rhs: PrimitiveType,
    pub reason: &'static str,
}

impl fmt::Display for PromotionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no common type for {} and {}: {}",
            self.lhs, self.rhs, self.reason
        )
    }
}

impl std::error::Error for PromotionError {}

/// The kind of an element type, in promotion order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Bool,
    Int,
    Float,
    Complex,
}

fn kind(t: PrimitiveType) -> Kind {
    if t.is_pred() {
        Kind::Bool
    } else if t.is_integral() {
        Kind::Int
    } else if t.is_float() {
        Kind::Float
    } else {
        Kind::Complex
    }
}

/// Smallest signed integer type holding every value of both integer types.
fn promote_ints(a: PrimitiveType, b: PrimitiveType) -> Result<PrimitiveType, PromotionError> {
    let bits = |t: PrimitiveType| t.bit_width();
    if a.is_signed_int() == b.is_signed_int() {
        return Ok(if bits(a) >= bits(b) { a } else { b });
    }
    let (signed, unsigned) = if a.is_signed_int() { (a, b) } else { (b, a) };
    if bits(signed) > bits(unsigned) {
        return Ok(signed);
    }
    match bits(unsigned) {
        8 => Ok(S16),
        16 => Ok(S32),
        32 => Ok(S64),
        _ => Err(PromotionError {
            lhs: a,
            rhs: b,
            reason: "no signed integer type holds every u64 value; convert explicitly",
        }),
    }
}

/// The float type wide enough for an integer type's values (as NumPy chooses).
fn float_for_int(t: PrimitiveType) -> PrimitiveType {
    match t.bit_width() {
        8 => F16,
        16 => F32,
        _ => F64,
    }
}

fn promote_floats(a: PrimitiveType, b: PrimitiveType) -> PrimitiveType {
    match (a, b) {
        _ if a == b => a,
        (F16, BF16) | (BF16, F16) => F32,
        _ => {
            let w = |t: PrimitiveType| t.bit_width();
            if w(a) >= w(b) { a } else { b }
        }
    }
}

/// The common element type of two arrays' element types.
pub fn result_type(a: PrimitiveType, b: PrimitiveType) -> Result<PrimitiveType, PromotionError> {
    let (ka, kb) = (kind(a), kind(b));
    Ok(match (ka, kb) {
        _ if a == b => a,
        (Kind::Bool, _) => b,
        (_, Kind::Bool) => a,
        (Kind::Int, Kind::Int) => promote_ints(a, b)?,
        (Kind::Float, Kind::Float) => promote_floats(a, b),
        (Kind::Int, Kind::Float) => promote_floats(float_for_int(a), b),
        (Kind::Float, Kind::Int) => promote_floats(a, float_for_int(b)),
        _ => {
            // At least one complex: the complex type whose parts hold both.
            let part = |t: PrimitiveType| match kind(t) {
                Kind::Complex => t.component_type(),
                Kind::Int => float_for_int(t),
                _ => t,
            };
            match promote_floats(part(a), part(b)) {
                F64 => C128,
                _ => C64,
            }
        }
    })
}

/// A Rust scalar in an expression with arrays: it has a kind but takes the
/// array's element type when the kinds agree.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum WeakScalar {
    Bool(bool),
    Int(i128),
    Float(f64),
}

/// Element type used for a weak scalar next to an array of type `array`:
/// the array's type when the scalar's kind is no higher, otherwise the
/// default type of the scalar's kind (s64 for integers, f64 for floats).
pub fn weak_result_type(array: PrimitiveType, scalar: WeakScalar) -> PrimitiveType {
    match (kind(array), scalar) {
        (_, WeakScalar::Bool(_)) => array,
        (Kind::Bool, WeakScalar::Int(_)) => S64,
        (Kind::Bool | Kind::Int, WeakScalar::Float(_)) => F64,
        _ => array,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn array_api_promotion_table() {
        assert_eq!(result_type(S8, S32), Ok(S32));
        assert_eq!(result_type(U8, U16), Ok(U16));
        assert_eq!(result_type(U8, S8), Ok(S16));
        assert_eq!(result_type(U16, S8), Ok(S32));
        assert_eq!(result_type(U32, S32), Ok(S64));
        assert_eq!(result_type(U8, S32), Ok(S32));
        assert!(result_type(U64, S64).is_err());
        assert_eq!(result_type(F16, F32), Ok(F32));
        assert_eq!(result_type(F32, F64), Ok(F64));
        assert_eq!(result_type(BF16, F16), Ok(F32));
        assert_eq!(result_type(C64, F64), Ok(C128));
        assert_eq!(result_type(C64, F32), Ok(C64));
        assert_eq!(result_type(Pred, U8), Ok(U8));
        assert_eq!(result_type(Pred, Pred), Ok(Pred));
        assert_eq!(result_type(S8, F16), Ok(F16));
        assert_eq!(result_type(S16, F16), Ok(F32));
        assert_eq!(result_type(S32, F32), Ok(F64));
        assert_eq!(result_type(S64, C64), Ok(C128));
    }

    #[test]
    fn weak_scalars() {
        assert_eq!(weak_result_type(F16, WeakScalar::Float(2.5)), F16);
        assert_eq!(weak_result_type(U8, WeakScalar::Int(3)), U8);
        assert_eq!(weak_result_type(S32, WeakScalar::Float(0.5)), F64);
        assert_eq!(weak_result_type(Pred, WeakScalar::Int(1)), S64);
        assert_eq!(weak_result_type(S8, WeakScalar::Bool(true)), S8);
        assert_eq!(weak_result_type(C64, WeakScalar::Float(1.0)), C64);
    }
}
