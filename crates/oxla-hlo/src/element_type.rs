//! The element types an array can hold (XLA's `PrimitiveType`), with the facts
//! shape inference and the interpreter ask of them: width, signedness, and the
//! spelling used in HLO text.

use std::fmt;
use std::str::FromStr;

/// The type of each element of an array. Tuples and tokens are shapes, not
/// element types (see [`crate::Shape`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PrimitiveType {
    Pred,
    S8,
    S16,
    S32,
    S64,
    U8,
    U16,
    U32,
    U64,
    F16,
    BF16,
    F32,
    F64,
    C64,
    C128,
}

use PrimitiveType::*;

impl PrimitiveType {
    /// Every element type, in declaration order.
    pub const ALL: [PrimitiveType; 15] = [
        Pred, S8, S16, S32, S64, U8, U16, U32, U64, F16, BF16, F32, F64, C64, C128,
    ];

    /// The name used in HLO text (`f32`, `pred`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Pred => "pred",
            S8 => "s8",
            S16 => "s16",
            S32 => "s32",
            S64 => "s64",
            U8 => "u8",
            U16 => "u16",
            U32 => "u32",
            U64 => "u64",
            F16 => "f16",
            BF16 => "bf16",
            F32 => "f32",
            F64 => "f64",
            C64 => "c64",
            C128 => "c128",
        }
    }

    /// Size of one element in bytes (pred takes one byte, as in XLA).
    pub fn byte_size(self) -> usize {
        match self {
            Pred | S8 | U8 => 1,
            S16 | U16 | F16 | BF16 => 2,
            S32 | U32 | F32 => 4,
            S64 | U64 | F64 | C64 => 8,
            C128 => 16,
        }
    }

    /// Width in bits (pred counts as 8, complex as both parts).
    pub fn bit_width(self) -> usize {
        self.byte_size() * 8
    }

    pub fn is_pred(self) -> bool {
        self == Pred
    }

    pub fn is_signed_int(self) -> bool {
        matches!(self, S8 | S16 | S32 | S64)
    }

    pub fn is_unsigned_int(self) -> bool {
        matches!(self, U8 | U16 | U32 | U64)
    }

    /// Signed or unsigned integer (not pred).
    pub fn is_integral(self) -> bool {
        self.is_signed_int() || self.is_unsigned_int()
    }

    pub fn is_float(self) -> bool {
        matches!(self, F16 | BF16 | F32 | F64)
    }

    pub fn is_complex(self) -> bool {
        matches!(self, C64 | C128)
    }

    /// Float or complex: the types with floating-point semantics.
    pub fn is_floating(self) -> bool {
        self.is_float() || self.is_complex()
    }

    /// Signed integers, floats and complex: the types where negation means something.
    pub fn is_signed(self) -> bool {
        self.is_signed_int() || self.is_floating()
    }

    /// The real type of each part of a complex type (c64 -> f32); other types map to themselves.
    pub fn component_type(self) -> PrimitiveType {
        match self {
            C64 => F32,
            C128 => F64,
            t => t,
        }
    }

    /// The complex type whose parts are `self` (f32 -> c64), if there is one.
    pub fn complex_of(self) -> Option<PrimitiveType> {
        match self {
            F32 => Some(C64),
            F64 => Some(C128),
            _ => None,
        }
    }

    /// Exponent and mantissa bit counts of a float type (without the implicit bit).
    pub fn float_format(self) -> Option<(u32, u32)> {
        match self {
            F16 => Some((5, 10)),
            BF16 => Some((8, 7)),
            F32 => Some((8, 23)),
            F64 => Some((11, 52)),
            _ => None,
        }
    }

    /// The unsigned integer type of the same width (used by bitcasts and shifts).
    pub fn unsigned_of_width(bits: usize) -> Option<PrimitiveType> {
        match bits {
            8 => Some(U8),
            16 => Some(U16),
            32 => Some(U32),
            64 => Some(U64),
            _ => None,
        }
    }
}

impl fmt::Display for PrimitiveType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The error for an element type name that oxla does not know.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown element type `{0}`")]
pub struct UnknownElementType(pub String);

impl FromStr for PrimitiveType {
    type Err = UnknownElementType;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PrimitiveType::ALL
            .iter()
            .copied()
            .find(|t| t.name() == s)
            .ok_or_else(|| UnknownElementType(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for t in PrimitiveType::ALL {
            assert_eq!(t.name().parse::<PrimitiveType>(), Ok(t));
        }
        assert!("f8e4m3".parse::<PrimitiveType>().is_err());
    }

    #[test]
    fn classification() {
        assert!(S32.is_signed_int() && !S32.is_unsigned_int() && S32.is_integral());
        assert!(U8.is_unsigned_int() && !U8.is_signed());
        assert!(BF16.is_float() && BF16.is_floating() && !BF16.is_complex());
        assert!(C64.is_complex() && C64.is_floating() && !C64.is_float());
        assert!(!Pred.is_integral());
        assert_eq!(C128.component_type(), F64);
        assert_eq!(C64.byte_size(), 8);
        assert_eq!(BF16.float_format(), Some((8, 7)));
    }
}
