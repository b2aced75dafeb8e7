//! The four float element types seen as bit patterns, shared by the literal
//! parser and printer. NaN payloads live in the mantissa bits; building and
//! reading values through bits (rather than through `f64`) keeps them
//! exact, since converting a signalling NaN between widths would quiet it.

use oxla_hlo::half::{bf16, f16};
use oxla_hlo::{NativeType, Scalar};

pub(crate) trait FloatBits: Copy {
    const EXPONENT_BITS: u32;
    const MANTISSA_BITS: u32;
    /// Rounds to nearest even; out-of-range values become infinite.
    fn round_from(x: f64) -> Self;
    fn from_bit_pattern(bits: u64) -> Self;
    fn bit_pattern(self) -> u64;
    /// The value as an `f64` (exact for every non-NaN value).
    fn widen(self) -> f64;

    fn is_infinite_value(self) -> bool {
        self.widen().is_infinite()
    }

    /// The NaN with these mantissa bits, or `None` if `payload` is 0 or too wide.
    fn nan_with_payload(negative: bool, payload: u64) -> Option<Self> {
        let mask = (1u64 << Self::MANTISSA_BITS) - 1;
        if payload == 0 || payload > mask {
            return None;
        }
        let exponent = ((1u64 << Self::EXPONENT_BITS) - 1) << Self::MANTISSA_BITS;
        let sign = u64::from(negative) << (Self::EXPONENT_BITS + Self::MANTISSA_BITS);
        Some(Self::from_bit_pattern(sign | exponent | payload))
    }

    /// The quiet NaN XLA writes as plain `nan`: only the top mantissa bit set.
    fn default_nan_payload() -> u64 {
        1u64 << (Self::MANTISSA_BITS - 1)
    }

    /// `Some((negative, payload))` if the value is a NaN.
    fn nan_parts(self) -> Option<(bool, u64)> {
        let bits = self.bit_pattern();
        let mask = (1u64 << Self::MANTISSA_BITS) - 1;
        let exponent = (bits >> Self::MANTISSA_BITS) & ((1u64 << Self::EXPONENT_BITS) - 1);
        let payload = bits & mask;
        let all_ones = (1u64 << Self::EXPONENT_BITS) - 1;
        (exponent == all_ones && payload != 0).then(|| {
            let negative = (bits >> (Self::EXPONENT_BITS + Self::MANTISSA_BITS)) & 1 == 1;
            (negative, payload)
        })
    }
}

impl FloatBits for f64 {
    const EXPONENT_BITS: u32 = 11;
    const MANTISSA_BITS: u32 = 52;
    fn round_from(x: f64) -> Self {
        x
    }
    fn from_bit_pattern(bits: u64) -> Self {
        f64::from_bits(bits)
    }
    fn bit_pattern(self) -> u64 {
        self.to_bits()
    }
    fn widen(self) -> f64 {
        self
    }
}

impl FloatBits for f32 {
    const EXPONENT_BITS: u32 = 8;
    const MANTISSA_BITS: u32 = 23;
    fn round_from(x: f64) -> Self {
        x as f32
    }
    fn from_bit_pattern(bits: u64) -> Self {
        // Patterns are built within the type's width.
        f32::from_bits(bits as u32)
    }
    fn bit_pattern(self) -> u64 {
        u64::from(self.to_bits())
    }
    fn widen(self) -> f64 {
        f64::from(self)
    }
}

impl FloatBits for f16 {
    const EXPONENT_BITS: u32 = 5;
    const MANTISSA_BITS: u32 = 10;
    fn round_from(x: f64) -> Self {
        f16::from_scalar(Scalar::Float(x))
    }
    fn from_bit_pattern(bits: u64) -> Self {
        f16::from_bits(bits as u16)
    }
    fn bit_pattern(self) -> u64 {
        u64::from(self.to_bits())
    }
    fn widen(self) -> f64 {
        self.to_f64()
    }
}

impl FloatBits for bf16 {
    const EXPONENT_BITS: u32 = 8;
    const MANTISSA_BITS: u32 = 7;
    fn round_from(x: f64) -> Self {
        bf16::from_scalar(Scalar::Float(x))
    }
    fn from_bit_pattern(bits: u64) -> Self {
        bf16::from_bits(bits as u16)
    }
    fn bit_pattern(self) -> u64 {
        u64::from(self.to_bits())
    }
    fn widen(self) -> f64 {
        self.to_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nan_payloads_are_exact() {
        let signalling = f32::nan_with_payload(false, 1).unwrap();
        assert_eq!(signalling.to_bits(), 0x7f80_0001);
        assert_eq!(signalling.nan_parts(), Some((false, 1)));
        assert_eq!(
            f16::nan_with_payload(true, 0x3ff).unwrap().to_bits(),
            0xffff
        );
        assert_eq!(bf16::nan_with_payload(false, 0x80), None);
        assert_eq!(f64::nan_with_payload(false, 0), None);
        assert_eq!(f32::INFINITY.nan_parts(), None);
        assert_eq!(f64::default_nan_payload(), 1 << 51);
    }
}
