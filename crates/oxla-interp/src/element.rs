//! What each element-wise operation does to one element: [`Element`] gives the
//! semantics per element type, and [`Elem`] is one element of any type, for
//! code that learns the type at run time (scalar computations, conversions).
//!
//! Both the array path (`eval::elementwise`) and the scalar-computation path
//! (`scalar_program`) call these functions, so they cannot disagree.
//!
//! Rules (XLA's, see the module docs of `eval::elementwise`): integer
//! arithmetic wraps and never traps; f16 and bf16 are computed in f32 and
//! rounded once per operation; f32 transcendental functions are computed in
//! f64 and rounded once; maximum/minimum propagate NaN.

use half::{bf16, f16};
use num_complex::{Complex32, Complex64};
use oxla_hlo::ir::{ComparisonDirection, ComparisonType, Opcode};
use oxla_hlo::{ArrayLiteral, NativeType, PrimitiveType, Scalar, with_array_data};

use crate::float_env::{Flush, flushing};
use crate::math;

/// The element-wise semantics of one element type. Each method returns `None`
/// when the operation does not apply to the type (shape inference rejects
/// such modules, so verified modules never see it).
pub(crate) trait Element: NativeType {
    /// A unary operation that keeps the element type.
    fn unary(op: Opcode, x: Self) -> Option<Self>;
    /// A binary operation that keeps the element type.
    fn binary(op: Opcode, a: Self, b: Self) -> Option<Self>;
    /// `a <dir> b` under the comparison type `ty`.
    fn compare(dir: ComparisonDirection, ty: ComparisonType, a: Self, b: Self) -> Option<bool>;
    fn to_elem(self) -> Elem;
}

fn ordered<T: PartialOrd>(dir: ComparisonDirection, a: T, b: T) -> bool {
    match dir {
        ComparisonDirection::Eq => a == b,
        ComparisonDirection::Ne => a != b,
        ComparisonDirection::Lt => a < b,
        ComparisonDirection::Le => a <= b,
        ComparisonDirection::Gt => a > b,
        ComparisonDirection::Ge => a >= b,
    }
}

/// Lexicographic comparison of pairs (complex numbers: real part, then imaginary).
fn lexicographic<T: PartialOrd>(dir: ComparisonDirection, a: (T, T), b: (T, T)) -> bool {
    if a.0 == b.0 {
        ordered(dir, a.1, b.1)
    } else {
        ordered(dir, a.0, b.0)
    }
}

macro_rules! total_order_key {
    ($name:ident, $float:ty, $int:ty) => {
        /// The float's position in XLA's TOTALORDER: the sign-magnitude bits as a
        /// two's-complement integer (-NaN < -inf < ... < -0 < +0 < ... < inf < +NaN).
        fn $name(x: $float) -> $int {
            let k = x.to_bits() as $int;
            if k < 0 { k ^ <$int>::MAX } else { k }
        }
    };
}

total_order_key!(total_key_f16, f16, i16);
total_order_key!(total_key_bf16, bf16, i16);
total_order_key!(total_key_f32, f32, i32);
total_order_key!(total_key_f64, f64, i64);

macro_rules! int_element {
    ($t:ty, $unsigned:ty, $signed:ty, $wide:ty) => {
        impl Element for $t {
            fn unary(op: Opcode, x: $t) -> Option<$t> {
                let signed = <$t>::MIN != 0;
                Some(match op {
                    Opcode::Abs if signed => (x as $signed).wrapping_abs() as $t,
                    Opcode::Abs => x,
                    Opcode::Negate => x.wrapping_neg(),
                    Opcode::Sign if signed => (x as $signed).signum() as $t,
                    Opcode::Sign => (x != 0) as $t,
                    Opcode::Not => !x,
                    Opcode::PopCnt => x.count_ones() as $t,
                    Opcode::Clz => x.leading_zeros() as $t,
                    _ => return None,
                })
            }

            fn binary(op: Opcode, a: $t, b: $t) -> Option<$t> {
                const BITS: $unsigned = <$t>::BITS as $unsigned;
                Some(match op {
                    Opcode::Add => a.wrapping_add(b),
                    Opcode::Subtract => a.wrapping_sub(b),
                    Opcode::Multiply => a.wrapping_mul(b),
                    // x / 0 is all ones (-1 signed, MAX unsigned); INT_MIN / -1 = INT_MIN.
                    Opcode::Divide => {
                        if b == 0 {
                            !0
                        } else {
                            a.wrapping_div(b)
                        }
                    }
                    // x % 0 = x; INT_MIN % -1 = 0; the sign follows the dividend.
                    Opcode::Remainder => {
                        if b == 0 {
                            a
                        } else {
                            a.wrapping_rem(b)
                        }
                    }
                    Opcode::Maximum => a.max(b),
                    Opcode::Minimum => a.min(b),
                    Opcode::And => a & b,
                    Opcode::Or => a | b,
                    Opcode::Xor => a ^ b,
                    Opcode::Power => {
                        // XLA's integer power: a "negative" exponent (sign bit set,
                        // also for unsigned types) gives 1 for base 1, +-1 for base -1
                        // (all ones) and 0 otherwise; otherwise square-and-multiply
                        // over the exponent's low 6 bits only, wrapping.
                        if (b as $signed) < 0 {
                            if a == 1 {
                                1
                            } else if a == !0 {
                                if b & 1 == 1 { !0 } else { 1 }
                            } else {
                                0
                            }
                        } else {
                            let (mut acc, mut base, mut e) = (1 as $t, a, b as $unsigned);
                            for _ in 0..6 {
                                if e & 1 == 1 {
                                    acc = acc.wrapping_mul(base);
                                }
                                base = base.wrapping_mul(base);
                                e >>= 1;
                            }
                            acc
                        }
                    }
                    // Shift amounts are unsigned; amounts of at least the bit width
                    // shift everything out (arithmetic shifts fill with the sign).
                    Opcode::ShiftLeft => {
                        let amount = b as $unsigned;
                        if amount >= BITS { 0 } else { a << amount }
                    }
                    Opcode::ShiftRightLogical => {
                        let amount = b as $unsigned;
                        if amount >= BITS {
                            0
                        } else {
                            ((a as $unsigned) >> amount) as $t
                        }
                    }
                    Opcode::ShiftRightArithmetic => {
                        let amount = b as $unsigned;
                        let s = a as $signed;
                        if amount >= BITS {
                            if s < 0 { !0 } else { 0 }
                        } else {
                            (s >> amount) as $t
                        }
                    }
                    // The high half of the double-width product (sign- or zero-extended).
                    Opcode::MulHi => (((a as $wide) * (b as $wide)) >> <$t>::BITS) as $t,
                    _ => return None,
                })
            }

            fn compare(dir: ComparisonDirection, ty: ComparisonType, a: $t, b: $t) -> Option<bool> {
                match ty {
                    ComparisonType::Signed => Some(ordered(dir, a as $signed, b as $signed)),
                    ComparisonType::Unsigned => Some(ordered(dir, a as $unsigned, b as $unsigned)),
                    _ => None,
                }
            }

            fn to_elem(self) -> Elem {
                <$t as ToElem>::wrap_elem(self)
            }
        }
    };
}

int_element!(i8, u8, i8, i16);
int_element!(i16, u16, i16, i32);
int_element!(i32, u32, i32, i64);
int_element!(i64, u64, i64, i128);
int_element!(u8, u8, i8, u16);
int_element!(u16, u16, i16, u32);
int_element!(u32, u32, i32, u64);
int_element!(u64, u64, i64, u128);

impl Element for bool {
    fn unary(op: Opcode, x: bool) -> Option<bool> {
        match op {
            Opcode::Not => Some(!x),
            _ => None,
        }
    }

    fn binary(op: Opcode, a: bool, b: bool) -> Option<bool> {
        Some(match op {
            // As in the StableHLO spec: add is `or` and multiply is `and` on booleans.
            Opcode::And | Opcode::Minimum | Opcode::Multiply => a & b,
            Opcode::Or | Opcode::Maximum | Opcode::Add => a | b,
            Opcode::Xor => a ^ b,
            _ => return None,
        })
    }

    fn compare(dir: ComparisonDirection, ty: ComparisonType, a: bool, b: bool) -> Option<bool> {
        match ty {
            ComparisonType::Signed | ComparisonType::Unsigned => {
                Some(ordered(dir, a as u8, b as u8))
            }
            _ => None,
        }
    }

    fn to_elem(self) -> Elem {
        Elem::Pred(self)
    }
}

/// IEEE maximum with NaN propagation (the first NaN operand wins) and -0 < +0.
fn float_max<T: num_traits_lite::Float>(a: T, b: T) -> T {
    if a.is_nan() {
        a
    } else if b.is_nan() || b > a {
        b
    } else if a > b {
        a
    } else if a.is_sign_negative() {
        // Equal: only the sign of a zero can differ; +0 wins.
        b
    } else {
        a
    }
}

/// IEEE minimum with NaN propagation and -0 < +0.
fn float_min<T: num_traits_lite::Float>(a: T, b: T) -> T {
    if a.is_nan() {
        a
    } else if b.is_nan() || b < a {
        b
    } else if a < b || a.is_sign_negative() {
        // Equal: only the sign of a zero can differ; -0 wins.
        a
    } else {
        b
    }
}

/// The few float predicates `float_max`/`float_min` need, for f32 and f64.
mod num_traits_lite {
    pub(crate) trait Float: Copy + PartialOrd {
        fn is_nan(self) -> bool;
        fn is_sign_negative(self) -> bool;
    }
    impl Float for f32 {
        fn is_nan(self) -> bool {
            f32::is_nan(self)
        }
        fn is_sign_negative(self) -> bool {
            f32::is_sign_negative(self)
        }
    }
    impl Float for f64 {
        fn is_nan(self) -> bool {
            f64::is_nan(self)
        }
        fn is_sign_negative(self) -> bool {
            f64::is_sign_negative(self)
        }
    }
}

macro_rules! float_element {
    ($t:ident, $key:ident) => {
        impl Element for $t {
            fn unary(op: Opcode, x: $t) -> Option<$t> {
                match op {
                    // Sign-bit operations are not arithmetic: never flushed.
                    Opcode::Abs => return Some(x.abs()),
                    Opcode::Negate => return Some(-x),
                    Opcode::Real => return Some(x),
                    Opcode::Imag => return Some(0.0),
                    _ => {}
                }
                let x = x.flush();
                // Transcendentals are computed in f64 and rounded once.
                let w = x as f64;
                let r = match op {
                    Opcode::Ceil => x.ceil(),
                    Opcode::Floor => x.floor(),
                    Opcode::RoundNearestAfz => x.round(),
                    Opcode::RoundNearestEven => x.round_ties_even(),
                    // sign(+-0) = +-0, sign(NaN) = NaN, otherwise +-1.
                    Opcode::Sign => {
                        if x.is_nan() || x == 0.0 {
                            x
                        } else {
                            (1.0 as $t).copysign(x)
                        }
                    }
                    Opcode::Sqrt => x.sqrt(),
                    Opcode::Rsqrt => (1.0 / w.sqrt()) as $t,
                    Opcode::Cbrt => w.cbrt() as $t,
                    Opcode::Exp => w.exp() as $t,
                    Opcode::Expm1 => w.exp_m1() as $t,
                    Opcode::Log => w.ln() as $t,
                    Opcode::Log1p => w.ln_1p() as $t,
                    Opcode::Logistic => math::logistic(w) as $t,
                    Opcode::Sin => w.sin() as $t,
                    Opcode::Cos => w.cos() as $t,
                    Opcode::Tan => w.tan() as $t,
                    Opcode::Tanh => w.tanh() as $t,
                    Opcode::Acos => w.acos() as $t,
                    Opcode::Acosh => w.acosh() as $t,
                    Opcode::Asin => w.asin() as $t,
                    Opcode::Asinh => w.asinh() as $t,
                    Opcode::Atan => w.atan() as $t,
                    Opcode::Atanh => w.atanh() as $t,
                    Opcode::Cosh => w.cosh() as $t,
                    Opcode::Sinh => w.sinh() as $t,
                    Opcode::Erf => math::erf(w) as $t,
                    _ => return None,
                };
                Some(r.flush())
            }

            fn binary(op: Opcode, a: $t, b: $t) -> Option<$t> {
                let (a, b) = (a.flush(), b.flush());
                let r = match op {
                    Opcode::Add => a + b,
                    Opcode::Subtract => a - b,
                    Opcode::Multiply => a * b,
                    Opcode::Divide => a / b,
                    // C fmod: exact, sign of the dividend.
                    Opcode::Remainder => a % b,
                    Opcode::Maximum => float_max(a, b),
                    Opcode::Minimum => float_min(a, b),
                    Opcode::Power => (a as f64).powf(b as f64) as $t,
                    Opcode::Atan2 => (a as f64).atan2(b as f64) as $t,
                    _ => return None,
                };
                Some(r.flush())
            }

            fn compare(dir: ComparisonDirection, ty: ComparisonType, a: $t, b: $t) -> Option<bool> {
                match ty {
                    ComparisonType::Float => Some(ordered(dir, a.flush(), b.flush())),
                    ComparisonType::TotalOrder => Some(ordered(dir, $key(a), $key(b))),
                    _ => None,
                }
            }

            fn to_elem(self) -> Elem {
                <$t as ToElem>::wrap_elem(self)
            }
        }
    };
}

float_element!(f32, total_key_f32);
float_element!(f64, total_key_f64);

macro_rules! half_element {
    ($t:ident, $key:ident) => {
        /// Computed in f32 and rounded once to the half type (round to nearest even).
        impl Element for $t {
            fn unary(op: Opcode, x: $t) -> Option<$t> {
                match op {
                    // Sign-bit operations keep every bit (NaN payloads included).
                    Opcode::Negate => Some(-x),
                    Opcode::Abs => Some(<$t>::from_bits(x.to_bits() & 0x7fff)),
                    _ => f32::unary(op, x.to_f32()).map(<$t>::from_f32),
                }
            }

            fn binary(op: Opcode, a: $t, b: $t) -> Option<$t> {
                f32::binary(op, a.to_f32(), b.to_f32()).map(<$t>::from_f32)
            }

            fn compare(dir: ComparisonDirection, ty: ComparisonType, a: $t, b: $t) -> Option<bool> {
                match ty {
                    // In f32, where bf16 denormals are f32 denormals (flushed if flushing).
                    ComparisonType::Float => {
                        Some(ordered(dir, a.to_f32().flush(), b.to_f32().flush()))
                    }
                    ComparisonType::TotalOrder => Some(ordered(dir, $key(a), $key(b))),
                    _ => None,
                }
            }

            fn to_elem(self) -> Elem {
                <$t as ToElem>::wrap_elem(self)
            }
        }
    };
}

half_element!(f16, total_key_f16);
half_element!(bf16, total_key_bf16);

macro_rules! complex_element {
    ($t:ident, $part:ty, $key:ident) => {
        /// Basic arithmetic in the type's own precision; division and the
        /// transcendental functions in complex f64, rounded once per part.
        impl Element for $t {
            fn unary(op: Opcode, x: $t) -> Option<$t> {
                if op == Opcode::Negate {
                    return Some(-x);
                }
                let x = x.flush();
                let w = Complex64::new(x.re as f64, x.im as f64);
                let r = match op {
                    Opcode::Sign => math::complex_sign(w),
                    Opcode::Exp => w.exp(),
                    Opcode::Expm1 => math::complex_expm1(w),
                    Opcode::Log => w.ln(),
                    Opcode::Log1p => math::complex_log1p(w),
                    Opcode::Logistic => math::complex_logistic(w),
                    Opcode::Sin => w.sin(),
                    Opcode::Cos => w.cos(),
                    Opcode::Tan => w.tan(),
                    Opcode::Tanh => w.tanh(),
                    Opcode::Acos => w.acos(),
                    Opcode::Acosh => w.acosh(),
                    Opcode::Asin => w.asin(),
                    Opcode::Asinh => w.asinh(),
                    Opcode::Atan => w.atan(),
                    Opcode::Atanh => w.atanh(),
                    Opcode::Cosh => w.cosh(),
                    Opcode::Sinh => w.sinh(),
                    Opcode::Sqrt => w.sqrt(),
                    Opcode::Rsqrt => math::complex_rsqrt(w),
                    _ => return None,
                };
                Some(<$t>::new(r.re as $part, r.im as $part).flush())
            }

            fn binary(op: Opcode, a: $t, b: $t) -> Option<$t> {
                let (a, b) = (a.flush(), b.flush());
                let wide = |z: $t| Complex64::new(z.re as f64, z.im as f64);
                let r = match op {
                    Opcode::Add => return Some((a + b).flush()),
                    Opcode::Subtract => return Some((a - b).flush()),
                    Opcode::Multiply => return Some((a * b).flush()),
                    Opcode::Divide => wide(a) / wide(b),
                    Opcode::Power => math::complex_pow(wide(a), wide(b)),
                    Opcode::Atan2 => math::complex_atan2(wide(a), wide(b)),
                    // Lexicographic order (real part first), as the StableHLO spec says.
                    Opcode::Maximum => {
                        return Some(
                            if lexicographic(ComparisonDirection::Ge, (a.re, a.im), (b.re, b.im))
                                || a.re.is_nan()
                                || a.im.is_nan()
                            {
                                a
                            } else {
                                b
                            },
                        );
                    }
                    Opcode::Minimum => {
                        return Some(
                            if lexicographic(ComparisonDirection::Le, (a.re, a.im), (b.re, b.im))
                                || a.re.is_nan()
                                || a.im.is_nan()
                            {
                                a
                            } else {
                                b
                            },
                        );
                    }
                    _ => return None,
                };
                Some(<$t>::new(r.re as $part, r.im as $part).flush())
            }

            fn compare(dir: ComparisonDirection, ty: ComparisonType, a: $t, b: $t) -> Option<bool> {
                match ty {
                    ComparisonType::Float => {
                        let (a, b) = (a.flush(), b.flush());
                        Some(lexicographic(dir, (a.re, a.im), (b.re, b.im)))
                    }
                    ComparisonType::TotalOrder => Some(lexicographic(
                        dir,
                        ($key(a.re), $key(a.im)),
                        ($key(b.re), $key(b.im)),
                    )),
                    _ => None,
                }
            }

            fn to_elem(self) -> Elem {
                <$t as ToElem>::wrap_elem(self)
            }
        }
    };
}

complex_element!(Complex32, f32, total_key_f32);
complex_element!(Complex64, f64, total_key_f64);

/// One element of any type.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Elem {
    Pred(bool),
    S8(i8),
    S16(i16),
    S32(i32),
    S64(i64),
    U8(u8),
    U16(u16),
    U32(u32),
    U64(u64),
    F16(f16),
    BF16(bf16),
    F32(f32),
    F64(f64),
    C64(Complex32),
    C128(Complex64),
}

/// Runs `$body` with `$v` bound to the typed value inside an [`Elem`].
macro_rules! with_elem {
    ($e:expr, $v:ident => $body:expr) => {
        match $e {
            Elem::Pred($v) => $body,
            Elem::S8($v) => $body,
            Elem::S16($v) => $body,
            Elem::S32($v) => $body,
            Elem::S64($v) => $body,
            Elem::U8($v) => $body,
            Elem::U16($v) => $body,
            Elem::U32($v) => $body,
            Elem::U64($v) => $body,
            Elem::F16($v) => $body,
            Elem::BF16($v) => $body,
            Elem::F32($v) => $body,
            Elem::F64($v) => $body,
            Elem::C64($v) => $body,
            Elem::C128($v) => $body,
        }
    };
}

/// Runs `$body` with `$x`, `$y` bound to two values of the same type, or `$other` if the types differ.
macro_rules! with_elem_pair {
    ($a:expr, $b:expr, $x:ident, $y:ident => $body:expr, else $other:expr) => {
        match ($a, $b) {
            (Elem::Pred($x), Elem::Pred($y)) => $body,
            (Elem::S8($x), Elem::S8($y)) => $body,
            (Elem::S16($x), Elem::S16($y)) => $body,
            (Elem::S32($x), Elem::S32($y)) => $body,
            (Elem::S64($x), Elem::S64($y)) => $body,
            (Elem::U8($x), Elem::U8($y)) => $body,
            (Elem::U16($x), Elem::U16($y)) => $body,
            (Elem::U32($x), Elem::U32($y)) => $body,
            (Elem::U64($x), Elem::U64($y)) => $body,
            (Elem::F16($x), Elem::F16($y)) => $body,
            (Elem::BF16($x), Elem::BF16($y)) => $body,
            (Elem::F32($x), Elem::F32($y)) => $body,
            (Elem::F64($x), Elem::F64($y)) => $body,
            (Elem::C64($x), Elem::C64($y)) => $body,
            (Elem::C128($x), Elem::C128($y)) => $body,
            _ => $other,
        }
    };
}

/// Wraps a native value into its [`Elem`] variant.
pub(crate) trait ToElem {
    fn wrap_elem(self) -> Elem;
}

macro_rules! to_elem {
    ($($t:ty => $variant:ident),*) => {
        $(impl ToElem for $t {
            fn wrap_elem(self) -> Elem {
                Elem::$variant(self)
            }
        })*
    };
}

to_elem!(i8 => S8, i16 => S16, i32 => S32, i64 => S64, u8 => U8, u16 => U16, u32 => U32,
    u64 => U64, f16 => F16, bf16 => BF16, f32 => F32, f64 => F64, Complex32 => C64,
    Complex64 => C128);

fn put<T: NativeType>(data: &mut oxla_hlo::ArrayData, i: usize, x: T) -> bool {
    match T::slice_mut(data) {
        Some(s) => {
            s[i] = x;
            true
        }
        None => false,
    }
}

fn type_of<T: NativeType>(_: T) -> PrimitiveType {
    T::TYPE
}

impl Elem {
    /// Element `i` of `data` (an internal invariant: `i` is in range).
    pub(crate) fn read(data: &oxla_hlo::ArrayData, i: usize) -> Elem {
        with_array_data!(data, v => Element::to_elem(v[i]))
    }

    /// Stores into element `i` of `data`; false if the types differ.
    pub(crate) fn write(self, data: &mut oxla_hlo::ArrayData, i: usize) -> bool {
        with_elem!(self, x => put(data, i, x))
    }

    pub(crate) fn element_type(self) -> PrimitiveType {
        with_elem!(self, x => type_of(x))
    }

    pub(crate) fn to_scalar(self) -> Scalar {
        with_elem!(self, x => x.to_scalar())
    }

    /// A rank-0 array holding this element.
    pub(crate) fn to_array(self) -> ArrayLiteral {
        let literal = with_elem!(self, x => oxla_hlo::Literal::scalar(x));
        match literal {
            oxla_hlo::Literal::Array(a) => a,
            // `Literal::scalar` always makes an array.
            _ => unreachable!("Literal::scalar returned a non-array"),
        }
    }

    /// `value` converted to `ty` with `convert`'s rules (see [`convert`]).
    pub(crate) fn from_scalar(ty: PrimitiveType, value: Scalar) -> Elem {
        oxla_hlo::with_native_type!(ty, T => Element::to_elem(T::from_scalar(value)))
    }

    pub(crate) fn is_true(self) -> bool {
        self.to_scalar().is_truthy()
    }

    /// The element as an integer index: integers exactly, with their own signedness.
    pub(crate) fn as_index(self) -> i128 {
        self.to_scalar().as_i128()
    }
}

/// XLA's `convert` of one element to `to`.
///
/// The rules are oxla-hlo's [`NativeType::from_scalar`], plus one detail of
/// XLA: integers, f64 and complex f64 convert to f16 and bf16 through f32
/// (rounding twice), as XLA:CPU does.
pub(crate) fn convert(x: Elem, to: PrimitiveType) -> Elem {
    if x.element_type() == to {
        x
    } else if flushing() {
        convert_flushing(x, to)
    } else {
        convert_ieee(x, to)
    }
}

fn convert_ieee(x: Elem, to: PrimitiveType) -> Elem {
    let from = x.element_type();
    if from == to {
        return x;
    }
    let through_f32 = matches!(to, PrimitiveType::F16 | PrimitiveType::BF16)
        && (from.is_integral() || matches!(from, PrimitiveType::F64 | PrimitiveType::C128));
    let s = x.to_scalar();
    if through_f32 {
        let f = f32::from_scalar(s);
        return Elem::from_scalar(to, Scalar::Float(f as f64));
    }
    Elem::from_scalar(to, s)
}

/// Flushes f32/f64 values and complex parts (a no-op unless flushing).
fn flush_elem(x: Elem) -> Elem {
    match x {
        Elem::F32(v) => Elem::F32(v.flush()),
        Elem::F64(v) => Elem::F64(v.flush()),
        Elem::C64(v) => Elem::C64(v.flush()),
        Elem::C128(v) => Elem::C128(v.flush()),
        other => other,
    }
}

/// `convert` under flush-to-zero (see [`crate::float_env`]): f32/f64 (and
/// complex) sources are read with denormals as zero and their float results
/// flushed, except for the integer-coded conversions to f16 and bf16; f64 goes
/// to f16 and bf16 through a flushed f32.
fn convert_flushing(x: Elem, to: PrimitiveType) -> Elem {
    use PrimitiveType::{BF16, C64, C128, F16, F32, F64};
    let from = x.element_type();
    let wide = matches!(from, F32 | F64 | C64 | C128);
    match (from, to) {
        (_, F16 | BF16) if matches!(from, F64 | C128) => {
            let mid = flush_elem(convert_ieee(flush_elem(x), F32));
            convert_ieee(mid, to)
        }
        (_, F16 | BF16) => convert_ieee(x, to),
        _ if wide => flush_elem(convert_ieee(flush_elem(x), to)),
        _ => convert_ieee(x, to),
    }
}

/// A unary element-wise operation on one element, including those that change
/// the element type (is-finite; abs, real and imag of complex numbers).
pub(crate) fn unary(op: Opcode, x: Elem) -> Option<Elem> {
    match (op, x) {
        (Opcode::Copy, _) => Some(x),
        (Opcode::IsFinite, Elem::F16(v)) => Some(Elem::Pred(v.is_finite())),
        (Opcode::IsFinite, Elem::BF16(v)) => Some(Elem::Pred(v.is_finite())),
        (Opcode::IsFinite, Elem::F32(v)) => Some(Elem::Pred(v.is_finite())),
        (Opcode::IsFinite, Elem::F64(v)) => Some(Elem::Pred(v.is_finite())),
        (Opcode::IsFinite, _) => None,
        (Opcode::Abs, Elem::C64(z)) => Some(Elem::F32((z.re as f64).hypot(z.im as f64) as f32)),
        (Opcode::Abs, Elem::C128(z)) => Some(Elem::F64(z.re.hypot(z.im))),
        (Opcode::Real, Elem::C64(z)) => Some(Elem::F32(z.re)),
        (Opcode::Real, Elem::C128(z)) => Some(Elem::F64(z.re)),
        (Opcode::Imag, Elem::C64(z)) => Some(Elem::F32(z.im)),
        (Opcode::Imag, Elem::C128(z)) => Some(Elem::F64(z.im)),
        _ => with_elem!(x, v => Element::unary(op, v).map(Element::to_elem)),
    }
}

/// A binary element-wise operation, including `complex(re, im)`.
pub(crate) fn binary(op: Opcode, a: Elem, b: Elem) -> Option<Elem> {
    match (op, a, b) {
        (Opcode::Complex, Elem::F32(re), Elem::F32(im)) => Some(Elem::C64(Complex32::new(re, im))),
        (Opcode::Complex, Elem::F64(re), Elem::F64(im)) => Some(Elem::C128(Complex64::new(re, im))),
        (Opcode::Complex, _, _) => None,
        _ => {
            with_elem_pair!(a, b, x, y => Element::binary(op, x, y).map(Element::to_elem), else None)
        }
    }
}

pub(crate) fn compare(
    dir: ComparisonDirection,
    ty: ComparisonType,
    a: Elem,
    b: Elem,
) -> Option<bool> {
    with_elem_pair!(a, b, x, y => Element::compare(dir, ty, x, y), else None)
}

/// `reduce-precision` on the raw bits of a float: XLA's algorithm, bit-exact.
///
/// Round the mantissa to `mantissa_bits` (ties to even, a carry may reach the
/// exponent), then send exponents above the reduced range to infinity and
/// those at or below its smallest normal exponent to zero (no denormals). A
/// NaN input is returned unchanged.
pub(crate) fn reduce_precision(x: Elem, exponent_bits: u32, mantissa_bits: u32) -> Option<Elem> {
    fn go(bits: u64, width: u32, src_e: u32, src_m: u32, e: u32, m: u32) -> u64 {
        let all = if width == 64 {
            u64::MAX
        } else {
            (1u64 << width) - 1
        };
        let exp_mask = ((1u64 << src_e) - 1) << src_m;
        let is_nan = bits & exp_mask == exp_mask && bits & ((1u64 << src_m) - 1) != 0;
        if is_nan {
            return bits;
        }
        let mut x = bits;
        if m < src_m {
            let shift = src_m - m;
            let last = 1u64 << shift;
            let bias = (last >> 1) - 1;
            let keep_lsb = (x & last) >> shift;
            x = x.wrapping_add(keep_lsb).wrapping_add(bias) & all;
            x &= !(last - 1) & all;
        }
        if e < src_e {
            let sign = x & (1u64 << (width - 1));
            let xe = x & exp_mask;
            let src_bias = (1u64 << (src_e - 1)) - 1;
            let red_bias = (1u64 << (e - 1)) - 1;
            let max_e = src_bias + red_bias;
            let min_e = src_bias - red_bias;
            if xe > max_e << src_m {
                x = sign | exp_mask;
            } else if xe <= min_e << src_m {
                x = sign;
            }
        }
        x
    }
    if exponent_bits == 0 {
        return None;
    }
    Some(match x {
        Elem::F16(v) => {
            Elem::F16(f16::from_bits(
                go(v.to_bits() as u64, 16, 5, 10, exponent_bits, mantissa_bits) as u16,
            ))
        }
        Elem::BF16(v) => Elem::BF16(bf16::from_bits(go(
            v.to_bits() as u64,
            16,
            8,
            7,
            exponent_bits,
            mantissa_bits,
        ) as u16)),
        Elem::F32(v) => {
            Elem::F32(f32::from_bits(
                go(v.to_bits() as u64, 32, 8, 23, exponent_bits, mantissa_bits) as u32,
            ))
        }
        Elem::F64(v) => Elem::F64(f64::from_bits(go(
            v.to_bits(),
            64,
            11,
            52,
            exponent_bits,
            mantissa_bits,
        ))),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_power_follows_xla() {
        assert_eq!(i32::binary(Opcode::Power, 3, 64), Some(1));
        assert_eq!(i32::binary(Opcode::Power, 3, 65), Some(3));
        assert_eq!(i32::binary(Opcode::Power, 7, 100), Some(1729633));
        assert_eq!(i32::binary(Opcode::Power, -1, -1), Some(-1));
        assert_eq!(i32::binary(Opcode::Power, -1, -2), Some(1));
        assert_eq!(i32::binary(Opcode::Power, 2, -1), Some(0));
        assert_eq!(i32::binary(Opcode::Power, 0, 0), Some(1));
        assert_eq!(i32::binary(Opcode::Power, 5, 33), Some(-1671385723));
        assert_eq!(u8::binary(Opcode::Power, 3, 200), Some(0));
        assert_eq!(u8::binary(Opcode::Power, 255, 129), Some(255));
        assert_eq!(u8::binary(Opcode::Power, 255, 130), Some(1));
        assert_eq!(u8::binary(Opcode::Power, 1, 200), Some(1));
    }

    #[test]
    fn total_order() {
        let keys: Vec<i32> = [
            f32::NEG_INFINITY,
            -1.0,
            -0.0,
            0.0,
            1.0,
            f32::INFINITY,
            f32::NAN,
        ]
        .iter()
        .map(|&x| total_key_f32(x))
        .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        assert!(total_key_f32(-f32::NAN) < total_key_f32(f32::NEG_INFINITY));
    }

    #[test]
    fn reduce_precision_examples() {
        let rp = |x: f64, e, m| match reduce_precision(Elem::F64(x), e, m) {
            Some(Elem::F64(v)) => v,
            other => panic!("{other:?}"),
        };
        assert_eq!(rp(65520.0, 5, 10), f64::INFINITY);
        assert_eq!(rp(65505.0, 5, 10), 65504.0);
        assert_eq!(rp(1.0 + 1.0 / 256.0, 8, 7), 1.0);
        assert!(rp(f64::NAN, 5, 0).is_nan());
        assert_eq!(rp(1e-10, 5, 10), 0.0);
    }

    #[test]
    fn halves_round_once_from_f32() {
        let a = f16::from_f32(1.0);
        let b = f16::from_f32(0.0004);
        assert_eq!(f16::binary(Opcode::Add, a, b), Some(f16::from_f32(1.0004)));
        assert_eq!(
            convert(
                Elem::F64(1.0 + 2f64.powi(-11) + 2f64.powi(-40)),
                PrimitiveType::F16
            ),
            Elem::F16(f16::from_f32(1.0))
        );
    }
}
