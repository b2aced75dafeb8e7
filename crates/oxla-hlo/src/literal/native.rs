//! Rust types that hold XLA elements ([`NativeType`]), the typed dense storage
//! of an array ([`ArrayData`]), and [`Scalar`], a type-erased element used to
//! move values between element types with XLA's conversion rules.

use half::{bf16, f16};
use num_complex::{Complex32, Complex64};

use crate::element_type::PrimitiveType;

/// A Rust type that stores elements of one XLA element type.
pub trait NativeType: Copy + Default + PartialEq + std::fmt::Debug + Send + Sync + 'static {
    const TYPE: PrimitiveType;
    fn slice(data: &ArrayData) -> Option<&[Self]>;
    fn slice_mut(data: &mut ArrayData) -> Option<&mut [Self]>;
    fn into_vec(data: ArrayData) -> Result<Vec<Self>, ArrayData>;
    fn wrap(v: Vec<Self>) -> ArrayData;
    fn to_scalar(self) -> Scalar;
    /// Converts with XLA's `convert` rules (see [`Scalar`]).
    fn from_scalar(s: Scalar) -> Self;
}

/// Dense row-major storage of an array's elements, one variant per element type.
#[derive(Clone, Debug)]
pub enum ArrayData {
    Pred(Vec<bool>),
    S8(Vec<i8>),
    S16(Vec<i16>),
    S32(Vec<i32>),
    S64(Vec<i64>),
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    C64(Vec<Complex32>),
    C128(Vec<Complex64>),
}

/// Runs `$body` with `$v` bound to the typed `Vec` inside an [`ArrayData`]
/// (by value, reference or mutable reference, depending on `$data`). Every arm
/// must produce the same type, so bodies usually call a generic function.
#[macro_export]
macro_rules! with_array_data {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            $crate::ArrayData::Pred($v) => $body,
            $crate::ArrayData::S8($v) => $body,
            $crate::ArrayData::S16($v) => $body,
            $crate::ArrayData::S32($v) => $body,
            $crate::ArrayData::S64($v) => $body,
            $crate::ArrayData::U8($v) => $body,
            $crate::ArrayData::U16($v) => $body,
            $crate::ArrayData::U32($v) => $body,
            $crate::ArrayData::U64($v) => $body,
            $crate::ArrayData::F16($v) => $body,
            $crate::ArrayData::BF16($v) => $body,
            $crate::ArrayData::F32($v) => $body,
            $crate::ArrayData::F64($v) => $body,
            $crate::ArrayData::C64($v) => $body,
            $crate::ArrayData::C128($v) => $body,
        }
    };
}

/// Runs `$body` with the type alias `$t` naming the Rust type of a
/// [`PrimitiveType`] value.
#[macro_export]
macro_rules! with_native_type {
    ($ty:expr, $t:ident => $body:expr) => {
        match $ty {
            $crate::PrimitiveType::Pred => {
                type $t = bool;
                $body
            }
            $crate::PrimitiveType::S8 => {
                type $t = i8;
                $body
            }
            $crate::PrimitiveType::S16 => {
                type $t = i16;
                $body
            }
            $crate::PrimitiveType::S32 => {
                type $t = i32;
                $body
            }
            $crate::PrimitiveType::S64 => {
                type $t = i64;
                $body
            }
            $crate::PrimitiveType::U8 => {
                type $t = u8;
                $body
            }
            $crate::PrimitiveType::U16 => {
                type $t = u16;
                $body
            }
            $crate::PrimitiveType::U32 => {
                type $t = u32;
                $body
            }
            $crate::PrimitiveType::U64 => {
                type $t = u64;
                $body
            }
            $crate::PrimitiveType::F16 => {
                type $t = $crate::half::f16;
                $body
            }
            $crate::PrimitiveType::BF16 => {
                type $t = $crate::half::bf16;
                $body
            }
            $crate::PrimitiveType::F32 => {
                type $t = f32;
                $body
            }
            $crate::PrimitiveType::F64 => {
                type $t = f64;
                $body
            }
            $crate::PrimitiveType::C64 => {
                type $t = $crate::num_complex::Complex32;
                $body
            }
            $crate::PrimitiveType::C128 => {
                type $t = $crate::num_complex::Complex64;
                $body
            }
        }
    };
}

/// One element of any type. Integers are widened to `i128` and floats to
/// `f64` (both exactly), so converting from a `Scalar` rounds only once.
///
/// Conversion rules (XLA's `convert`): integers wrap to the target width;
/// floats to integers truncate toward zero, saturate at the target's range and
/// map NaN to 0; integers and wider floats to floats round to nearest even;
/// anything to pred is `x != 0` (NaN is true); real to complex has a zero
/// imaginary part; complex to real keeps the real part.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    Pred(bool),
    Int(i128),
    Float(f64),
    Complex(f64, f64),
}

impl Scalar {
    fn as_int_saturating(self, min: i128, max: i128) -> i128 {
        match self {
            Scalar::Pred(b) => b as i128,
            Scalar::Int(i) => i,
            Scalar::Float(f) | Scalar::Complex(f, _) => {
                if f.is_nan() {
                    0
                } else if f <= min as f64 {
                    min
                } else if f >= max as f64 {
                    max
                } else {
                    f.trunc() as i128
                }
            }
        }
    }

    /// The value as an `f64` (complex: the real part). Large integers round.
    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::Pred(b) => b as u8 as f64,
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) | Scalar::Complex(f, _) => f,
        }
    }

    /// The value as an `i128` (floats truncate toward zero and saturate).
    pub fn as_i128(self) -> i128 {
        self.as_int_saturating(i128::MIN, i128::MAX)
    }

    pub fn is_truthy(self) -> bool {
        match self {
            Scalar::Pred(b) => b,
            Scalar::Int(i) => i != 0,
            Scalar::Float(f) => f != 0.0,
            Scalar::Complex(re, im) => re != 0.0 || im != 0.0,
        }
    }
}

macro_rules! native_common {
    ($t:ty, $variant:ident) => {
        const TYPE: PrimitiveType = PrimitiveType::$variant;
        fn slice(data: &ArrayData) -> Option<&[Self]> {
            match data {
                ArrayData::$variant(v) => Some(v),
                _ => None,
            }
        }
        fn slice_mut(data: &mut ArrayData) -> Option<&mut [Self]> {
            match data {
                ArrayData::$variant(v) => Some(v),
                _ => None,
            }
        }
        fn into_vec(data: ArrayData) -> Result<Vec<Self>, ArrayData> {
            match data {
                ArrayData::$variant(v) => Ok(v),
                other => Err(other),
            }
        }
        fn wrap(v: Vec<Self>) -> ArrayData {
            ArrayData::$variant(v)
        }
    };
}

macro_rules! native_int {
    ($t:ty, $variant:ident) => {
        impl NativeType for $t {
            native_common!($t, $variant);
            fn to_scalar(self) -> Scalar {
                Scalar::Int(self as i128)
            }
            fn from_scalar(s: Scalar) -> Self {
                match s {
                    // Integer to integer wraps, like a C cast.
                    Scalar::Int(i) => i as $t,
                    other => other.as_int_saturating(<$t>::MIN as i128, <$t>::MAX as i128) as $t,
                }
            }
        }
    };
}

native_int!(i8, S8);
native_int!(i16, S16);
native_int!(i32, S32);
native_int!(i64, S64);
native_int!(u8, U8);
native_int!(u16, U16);
native_int!(u32, U32);
native_int!(u64, U64);

impl NativeType for bool {
    native_common!(bool, Pred);
    fn to_scalar(self) -> Scalar {
        Scalar::Pred(self)
    }
    fn from_scalar(s: Scalar) -> Self {
        s.is_truthy()
    }
}

impl NativeType for f32 {
    native_common!(f32, F32);
    fn to_scalar(self) -> Scalar {
        Scalar::Float(self as f64)
    }
    fn from_scalar(s: Scalar) -> Self {
        match s {
            // i128 -> f32 rounds once, to nearest even.
            Scalar::Int(i) => i as f32,
            other => other.as_f64() as f32,
        }
    }
}

impl NativeType for f64 {
    native_common!(f64, F64);
    fn to_scalar(self) -> Scalar {
        Scalar::Float(self)
    }
    fn from_scalar(s: Scalar) -> Self {
        s.as_f64()
    }
}

impl NativeType for f16 {
    native_common!(f16, F16);
    fn to_scalar(self) -> Scalar {
        Scalar::Float(self.to_f64())
    }
    fn from_scalar(s: Scalar) -> Self {
        f16::from_f64(round_f64_to_float_format(scalar_to_f64_once(s), 5, 10))
    }
}

impl NativeType for bf16 {
    native_common!(bf16, BF16);
    fn to_scalar(self) -> Scalar {
        Scalar::Float(self.to_f64())
    }
    fn from_scalar(s: Scalar) -> Self {
        bf16::from_f64(round_f64_to_float_format(scalar_to_f64_once(s), 8, 7))
    }
}

/// Integers wider than 53 bits round twice on the way to a half type (to f64,
/// then to the half type). That is harmless: f64 carries more than twice the
/// half types' precision plus two bits, the bound under which rounding twice
/// gives the same result as rounding once.
fn scalar_to_f64_once(s: Scalar) -> f64 {
    s.as_f64()
}

impl NativeType for Complex32 {
    native_common!(Complex32, C64);
    fn to_scalar(self) -> Scalar {
        Scalar::Complex(self.re as f64, self.im as f64)
    }
    fn from_scalar(s: Scalar) -> Self {
        match s {
            Scalar::Complex(re, im) => Complex32::new(re as f32, im as f32),
            Scalar::Int(i) => Complex32::new(i as f32, 0.0),
            other => Complex32::new(other.as_f64() as f32, 0.0),
        }
    }
}

impl NativeType for Complex64 {
    native_common!(Complex64, C128);
    fn to_scalar(self) -> Scalar {
        Scalar::Complex(self.re, self.im)
    }
    fn from_scalar(s: Scalar) -> Self {
        match s {
            Scalar::Complex(re, im) => Complex64::new(re, im),
            other => Complex64::new(other.as_f64(), 0.0),
        }
    }
}

/// Rounds `x` to the nearest value (ties to even) representable in a binary
/// float format with `exponent_bits` and `mantissa_bits` (explicit bits),
/// including its subnormals; values beyond its largest finite value become
/// infinities. NaN stays NaN. The result is returned as an `f64`, exactly.
///
/// This is IEEE rounding to a narrower format; it is used for f64 -> f16/bf16
/// conversions (which must round once, not twice through f32).
pub fn round_f64_to_float_format(x: f64, exponent_bits: u32, mantissa_bits: u32) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    let bias = (1i32 << (exponent_bits - 1)) - 1;
    let min_normal_exp = 1 - bias;
    let max_exp = bias;
    // Exponent of x as a normal f64 (x = m * 2^e with 1 <= |m| < 2).
    let bits = x.to_bits();
    let raw_exp = ((bits >> 52) & 0x7ff) as i32;
    let e = if raw_exp == 0 {
        // f64 subnormal: far below any narrower format's range.
        -1075
    } else {
        raw_exp - 1023
    };
    // The spacing of representable values around x in the target format.
    let quantum_exp = e.max(min_normal_exp) - mantissa_bits as i32;
    // x / 2^quantum_exp, rounded to an integer with ties to even. Scaling by a
    // power of two is exact while the result stays in f64's normal range.
    let scaled = scale_by_pow2(x, -quantum_exp);
    let rounded = scaled.round_ties_even();
    let result = scale_by_pow2(rounded, quantum_exp);
    let max_finite = scale_by_pow2(
        (1u64 << (mantissa_bits + 1)) as f64 - 1.0,
        max_exp - mantissa_bits as i32,
    );
    if result.abs() > max_finite {
        return f64::INFINITY.copysign(x);
    }
    if result == 0.0 {
        return 0.0f64.copysign(x);
    }
    result
}

/// `x * 2^n` without intermediate overflow or underflow for the ranges used here.
fn scale_by_pow2(mut x: f64, mut n: i32) -> f64 {
    while n > 1000 {
        x *= 2f64.powi(1000);
        n -= 1000;
    }
    while n < -1000 {
        x *= 2f64.powi(-1000);
        n += 1000;
    }
    x * 2f64.powi(n)
}

impl ArrayData {
    pub fn element_type(&self) -> PrimitiveType {
        match self {
            ArrayData::Pred(_) => PrimitiveType::Pred,
            ArrayData::S8(_) => PrimitiveType::S8,
            ArrayData::S16(_) => PrimitiveType::S16,
            ArrayData::S32(_) => PrimitiveType::S32,
            ArrayData::S64(_) => PrimitiveType::S64,
            ArrayData::U8(_) => PrimitiveType::U8,
            ArrayData::U16(_) => PrimitiveType::U16,
            ArrayData::U32(_) => PrimitiveType::U32,
            ArrayData::U64(_) => PrimitiveType::U64,
            ArrayData::F16(_) => PrimitiveType::F16,
            ArrayData::BF16(_) => PrimitiveType::BF16,
            ArrayData::F32(_) => PrimitiveType::F32,
            ArrayData::F64(_) => PrimitiveType::F64,
            ArrayData::C64(_) => PrimitiveType::C64,
            ArrayData::C128(_) => PrimitiveType::C128,
        }
    }

    pub fn len(&self) -> usize {
        with_array_data!(self, v => v.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `n` zeros (false for pred) of type `ty`.
    pub fn zeros(ty: PrimitiveType, n: usize) -> ArrayData {
        with_native_type!(ty, T => T::wrap(vec![T::default(); n]))
    }

    /// `n` copies of `value` converted to `ty`.
    pub fn splat(ty: PrimitiveType, value: Scalar, n: usize) -> ArrayData {
        with_native_type!(ty, T => T::wrap(vec![T::from_scalar(value); n]))
    }

    /// Elements converted from scalars with XLA's conversion rules.
    pub fn from_scalars(ty: PrimitiveType, values: &[Scalar]) -> ArrayData {
        with_native_type!(ty, T => T::wrap(values.iter().map(|&s| T::from_scalar(s)).collect()))
    }

    /// Element `i` as a [`Scalar`]. Panics if `i` is out of range (an internal invariant).
    pub fn scalar(&self, i: usize) -> Scalar {
        with_array_data!(self, v => v[i].to_scalar())
    }

    /// Sets element `i` from a [`Scalar`], converting with XLA's rules.
    pub fn set_scalar(&mut self, i: usize, value: Scalar) {
        with_array_data!(self, v => v[i] = NativeType::from_scalar(value))
    }

    /// The elements at `indices`, in that order (a gather of whole elements).
    pub fn take(&self, indices: &[usize]) -> ArrayData {
        fn go<T: NativeType>(v: &[T], idx: &[usize]) -> ArrayData {
            T::wrap(idx.iter().map(|&i| v[i]).collect())
        }
        with_array_data!(self, v => go(v, indices))
    }

    /// Like [`ArrayData::take`], where `None` takes `fill` (element 0 of a one-element array).
    pub fn take_or(&self, indices: &[Option<usize>], fill: &ArrayData) -> ArrayData {
        fn go<T: NativeType>(v: &[T], idx: &[Option<usize>], fill: T) -> ArrayData {
            T::wrap(idx.iter().map(|i| i.map_or(fill, |i| v[i])).collect())
        }
        let fill = fill.scalar(0);
        with_array_data!(self, v => go(v, indices, NativeType::from_scalar(fill)))
    }

    /// Copies element `src[i]` to `self[j]` for each pair `(j, i)`. Both must have the same type.
    pub fn scatter_from(
        &mut self,
        src: &ArrayData,
        pairs: impl IntoIterator<Item = (usize, usize)>,
    ) {
        fn go<T: NativeType>(
            dst: &mut [T],
            src: &ArrayData,
            pairs: impl IntoIterator<Item = (usize, usize)>,
        ) {
            // Same element type is an invariant of every caller.
            let src = T::slice(src).expect("scatter_from: element types differ");
            for (j, i) in pairs {
                dst[j] = src[i];
            }
        }
        with_array_data!(self, v => go(v, src, pairs))
    }

    /// Concatenation of several arrays of the same element type.
    pub fn concat(parts: &[&ArrayData]) -> Option<ArrayData> {
        let first = parts.first()?;
        fn go<T: NativeType>(parts: &[&ArrayData]) -> Option<ArrayData> {
            let mut out = Vec::new();
            for p in parts {
                out.extend_from_slice(T::slice(p)?);
            }
            Some(T::wrap(out))
        }
        with_native_type!(first.element_type(), T => go::<T>(parts))
    }

    /// Every element converted to `ty` with XLA's conversion rules.
    pub fn convert(&self, ty: PrimitiveType) -> ArrayData {
        if ty == self.element_type() {
            return self.clone();
        }
        fn go<T: NativeType>(v: &[T], ty: PrimitiveType) -> ArrayData {
            with_native_type!(ty, U => U::wrap(v.iter().map(|x| U::from_scalar(x.to_scalar())).collect()))
        }
        with_array_data!(self, v => go(v, ty))
    }

    /// Equal element by element, where NaN equals NaN and `+0 == -0` (the
    /// conformance rule); with `bitwise`, floats must have identical bits
    /// except that any NaN equals any NaN.
    pub fn equal(&self, other: &ArrayData, bitwise: bool) -> bool {
        if self.element_type() != other.element_type() || self.len() != other.len() {
            return false;
        }
        (0..self.len()).all(|i| scalars_equal(self.scalar(i), other.scalar(i), bitwise))
    }
}

fn floats_equal(a: f64, b: f64, bitwise: bool) -> bool {
    (a.is_nan() && b.is_nan())
        || (a == b && (!bitwise || a.is_sign_negative() == b.is_sign_negative()))
}

fn scalars_equal(a: Scalar, b: Scalar, bitwise: bool) -> bool {
    match (a, b) {
        (Scalar::Float(x), Scalar::Float(y)) => floats_equal(x, y, bitwise),
        (Scalar::Complex(a, b), Scalar::Complex(c, d)) => {
            floats_equal(a, c, bitwise) && floats_equal(b, d, bitwise)
        }
        (x, y) => x == y,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_to_int_saturates_and_nan_is_zero() {
        assert_eq!(i32::from_scalar(Scalar::Float(f64::NAN)), 0);
        assert_eq!(i32::from_scalar(Scalar::Float(1e20)), i32::MAX);
        assert_eq!(i32::from_scalar(Scalar::Float(-1e20)), i32::MIN);
        assert_eq!(u8::from_scalar(Scalar::Float(-3.7)), 0);
        assert_eq!(u8::from_scalar(Scalar::Float(300.0)), 255);
        assert_eq!(i8::from_scalar(Scalar::Float(-3.7)), -3);
        assert_eq!(i64::from_scalar(Scalar::Float(f64::INFINITY)), i64::MAX);
        assert_eq!(
            u64::from_scalar(Scalar::Float(1.8446744073709552e19)),
            u64::MAX
        );
    }

    #[test]
    fn int_to_int_wraps() {
        assert_eq!(i8::from_scalar(Scalar::Int(300)), 44);
        assert_eq!(u8::from_scalar(Scalar::Int(-1)), 255);
        assert_eq!(u64::from_scalar(Scalar::Int(-1)), u64::MAX);
        assert_eq!(i32::from_scalar(u32::MAX.to_scalar()), -1);
    }

    #[test]
    fn int_to_float_rounds_once_to_nearest_even() {
        // 2^24 + 1 is a tie between 2^24 and 2^24 + 2: even mantissa wins.
        assert_eq!(f32::from_scalar(Scalar::Int((1 << 24) + 1)), 16777216.0);
        assert_eq!(f32::from_scalar(Scalar::Int((1 << 24) + 3)), 16777220.0);
        // Double rounding through f64 would give 2^63 + 2^40 here; one rounding gives 2^63.
        let v: i128 = (1i128 << 63) + (1 << 39) + 1;
        assert_eq!(f32::from_scalar(Scalar::Int(v)), 9223373136366403584.0);
        assert_eq!(
            f32::from_scalar(u64::MAX.to_scalar()),
            18446744073709551616.0
        );
    }

    #[test]
    fn narrowing_floats_round_to_nearest_even() {
        assert_eq!(
            bf16::from_scalar(Scalar::Float(1.0 + 1.0 / 256.0)).to_f32(),
            1.0
        );
        assert_eq!(
            bf16::from_scalar(Scalar::Float(1.0 + 3.0 / 256.0)).to_f32(),
            1.0 + 4.0 / 256.0
        );
        // Just above the tie: the low bits half's own f64 path drops must round up.
        let x = 1.0 + 1.0 / 256.0 + 1e-12;
        assert_eq!(
            bf16::from_scalar(Scalar::Float(x)).to_f32(),
            1.0 + 2.0 / 256.0
        );
        assert_eq!(
            f16::from_scalar(Scalar::Float(65520.0)).to_f32(),
            f32::INFINITY
        );
        assert_eq!(f16::from_scalar(Scalar::Float(65519.0)).to_f32(), 65504.0);
        // Smallest f16 subnormal is 2^-24; half of it rounds to zero (tie to even), a bit more rounds up.
        assert_eq!(
            f16::from_scalar(Scalar::Float(2f64.powi(-25))).to_f32(),
            0.0
        );
        assert_eq!(
            f16::from_scalar(Scalar::Float(2f64.powi(-25) * 1.5)).to_f64(),
            2f64.powi(-24)
        );
        assert!(f16::from_scalar(Scalar::Float(f64::NAN)).is_nan());
        assert_eq!(f16::from_scalar(Scalar::Float(-0.0)).to_bits(), 0x8000);
    }

    #[test]
    fn pred_and_complex_conversions() {
        assert!(bool::from_scalar(Scalar::Float(f64::NAN)));
        assert!(!bool::from_scalar(Scalar::Float(-0.0)));
        assert_eq!(f32::from_scalar(Scalar::Pred(true)), 1.0);
        assert_eq!(
            Complex32::from_scalar(Scalar::Int(3)),
            Complex32::new(3.0, 0.0)
        );
        assert_eq!(f64::from_scalar(Complex64::new(2.0, 5.0).to_scalar()), 2.0);
    }

    #[test]
    fn array_data_ops() {
        let d = ArrayData::S32(vec![10, 20, 30]);
        assert!(d.take(&[2, 0]).equal(&ArrayData::S32(vec![30, 10]), true));
        let filled = d.take_or(&[Some(1), None], &ArrayData::S32(vec![-1]));
        assert!(filled.equal(&ArrayData::S32(vec![20, -1]), true));
        let c = d.convert(PrimitiveType::F32);
        assert!(c.equal(&ArrayData::F32(vec![10.0, 20.0, 30.0]), true));
        let nan = ArrayData::F32(vec![f32::NAN, -0.0]);
        assert!(nan.equal(&ArrayData::F32(vec![f32::NAN, 0.0]), false));
        assert!(!nan.equal(&ArrayData::F32(vec![f32::NAN, 0.0]), true));
    }
}
