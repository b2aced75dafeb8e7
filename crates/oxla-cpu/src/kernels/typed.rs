//! Typed element-wise loops for integers, predicates and small arrays:
//! the common arithmetic, comparisons and select, each chosen once (when
//! compiling) as a plain function of the operands' storage. Small-state
//! loops run their counters and flags with them, and element-wise kernels
//! on integers use them instead of the interpreter's scalar semantics.
//! Integer arithmetic wraps, integer division follows XLA's rules for zero
//! and overflow, float maximum and minimum are XLA's, so results agree
//! with the interpreter bit for bit.

use oxla_hlo::ir::{ComparisonDirection, ComparisonType};
use oxla_hlo::{
    ArrayData, HloComputation, HloInstruction, NativeType, Opcode, PrimitiveType, with_array_data,
};

use oxla_hlo::half::{bf16, f16};
use oxla_hlo::num_complex::{Complex32, Complex64};

use super::fold::Geometry;
use super::minmax;

/// `match $ty` with an arm `$pick::<T>($arg)` for each integer type `T`,
/// then the arms given.
macro_rules! by_integer_type {
    ($ty:expr, $pick:ident($arg:expr), { $($arms:tt)* }) => {
        match $ty {
            PrimitiveType::S8 => $pick::<i8>($arg),
            PrimitiveType::S16 => $pick::<i16>($arg),
            PrimitiveType::S32 => $pick::<i32>($arg),
            PrimitiveType::S64 => $pick::<i64>($arg),
            PrimitiveType::U8 => $pick::<u8>($arg),
            PrimitiveType::U16 => $pick::<u16>($arg),
            PrimitiveType::U32 => $pick::<u32>($arg),
            PrimitiveType::U64 => $pick::<u64>($arg),
            $($arms)*
        }
    };
}

/// Arithmetic with a typed loop (the result type is the operands').
#[derive(Clone, Copy, Debug)]
enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
    And,
    Or,
    Xor,
    ShiftLeft,
    ShiftRightLogical,
    ShiftRightArithmetic,
    Rem,
}

fn float_type(t: PrimitiveType) -> bool {
    matches!(t, PrimitiveType::F32 | PrimitiveType::F64)
}

fn int_type(t: PrimitiveType) -> bool {
    matches!(
        t,
        PrimitiveType::S8
            | PrimitiveType::S16
            | PrimitiveType::S32
            | PrimitiveType::S64
            | PrimitiveType::U8
            | PrimitiveType::U16
            | PrimitiveType::U32
            | PrimitiveType::U64
    )
}

fn arith_of(op: Opcode, ty: PrimitiveType) -> Option<Arith> {
    let a = match op {
        Opcode::Add => Arith::Add,
        Opcode::Subtract => Arith::Sub,
        Opcode::Multiply => Arith::Mul,
        Opcode::Divide => Arith::Div,
        Opcode::Maximum => Arith::Max,
        Opcode::Minimum => Arith::Min,
        Opcode::And => Arith::And,
        Opcode::Or => Arith::Or,
        Opcode::Xor => Arith::Xor,
        Opcode::ShiftLeft => Arith::ShiftLeft,
        Opcode::ShiftRightLogical => Arith::ShiftRightLogical,
        Opcode::ShiftRightArithmetic => Arith::ShiftRightArithmetic,
        Opcode::Remainder => Arith::Rem,
        _ => return None,
    };
    let ok = if float_type(ty) {
        matches!(
            a,
            Arith::Add | Arith::Sub | Arith::Mul | Arith::Div | Arith::Max | Arith::Min
        )
    } else if int_type(ty) {
        true
    } else {
        ty == PrimitiveType::Pred && matches!(a, Arith::And | Arith::Or | Arith::Xor)
    };
    ok.then_some(a)
}

/// Whether a comparison of `ty` operands under `ct` is the typed loop's.
fn plain_comparison(ty: PrimitiveType, ct: Option<ComparisonType>) -> bool {
    if float_type(ty) {
        matches!(ct, None | Some(ComparisonType::Float))
    } else if int_type(ty) {
        let signed = matches!(
            ty,
            PrimitiveType::S8 | PrimitiveType::S16 | PrimitiveType::S32 | PrimitiveType::S64
        );
        match ct {
            None => true,
            Some(ComparisonType::Signed) => signed,
            Some(ComparisonType::Unsigned) => !signed,
            _ => false,
        }
    } else {
        // Predicates compare as unsigned integers (false < true).
        ty == PrimitiveType::Pred && matches!(ct, None | Some(ComparisonType::Unsigned))
    }
}

/// Unsigned integers as masks: all ones for true, zero for false.
trait Mask: Copy + std::ops::BitAnd<Output = Self> + std::ops::BitXor<Output = Self> {
    fn mask(p: bool) -> Self;
}

macro_rules! mask {
    ($($t:ty),*) => {$(
        impl Mask for $t {
            #[inline(always)]
            fn mask(p: bool) -> $t {
                (p as $t).wrapping_neg()
            }
        }
    )*};
}

mask!(u8, u16, u32, u64);

/// `o[i] = if p[i] { a[i] } else { b[i] }` on the values' bits (`to` and
/// `from` convert). Written as a choice between two loaded values, LLVM
/// makes it a choice between their addresses and vectorises that as a
/// gather: 29% of an integer floor division's time (`x // 5 % 11` on
/// s32[1048576]) went to those gathers.
#[inline(always)]
fn blend<T: Copy, B: Mask>(
    o: &mut [T],
    p: &[bool],
    a: &[T],
    b: &[T],
    to: impl Fn(T) -> B,
    from: impl Fn(B) -> T,
) {
    vectorized(o.len(), move || {
        for (((o, &p), &a), &b) in o.iter_mut().zip(p).zip(a).zip(b) {
            let (a, b) = (to(a), to(b));
            *o = from(b ^ ((a ^ b) & B::mask(p)));
        }
    });
}

pub(crate) fn select(p: &ArrayData, a: &ArrayData, b: &ArrayData, out: &mut ArrayData) -> bool {
    fn go<T: NativeType>(o: &mut [T], p: &[bool], a: &ArrayData, b: &ArrayData) -> bool {
        let (Some(a), Some(b)) = (T::slice(a), T::slice(b)) else {
            return false;
        };
        if a.len() != o.len() || b.len() != o.len() {
            return false;
        }
        if let [p] = p {
            o.copy_from_slice(if *p { a } else { b });
        } else if p.len() == o.len() {
            vectorized(o.len(), move || {
                for (((o, &p), &a), &b) in o.iter_mut().zip(p).zip(a).zip(b) {
                    *o = if p { a } else { b };
                }
            });
        } else {
            return false;
        }
        true
    }
    let ArrayData::Pred(p) = p else {
        return false;
    };
    macro_rules! blended {
        ($($v:ident: $to:expr, $from:expr;)*) => {
            match (&mut *out, a, b) {
                $((ArrayData::$v(o), ArrayData::$v(a), ArrayData::$v(b))
                    if p.len() == o.len() && a.len() == o.len() && b.len() == o.len() =>
                {
                    blend(o, p, a, b, $to, $from);
                    return true;
                })*
                _ => {}
            }
        };
    }
    if p.len() > 1 {
        blended! {
            Pred: |x| x as u8, |x| x != 0;
            S8: |x| x as u8, |x| x as i8;
            U8: |x| x, |x| x;
            S16: |x| x as u16, |x| x as i16;
            U16: |x| x, |x| x;
            F16: f16::to_bits, f16::from_bits;
            BF16: bf16::to_bits, bf16::from_bits;
            S32: |x| x as u32, |x| x as i32;
            U32: |x| x, |x| x;
            F32: f32::to_bits, f32::from_bits;
            S64: |x| x as u64, |x| x as i64;
            U64: |x| x, |x| x;
            F64: f64::to_bits, f64::from_bits;
        }
    }
    with_array_data!(out, o => go(o, p, a, b))
}

#[inline(always)]
fn zip<T: Copy>(a: &[T], b: &[T], o: &mut [T], f: impl Fn(T, T) -> T) -> bool {
    // Scalars (counters, flags) are most of a loop's work: no loop for them.
    if let ([a], [b], [o]) = (a, b, &mut *o) {
        *o = f(*a, *b);
        return true;
    }
    if a.len() != o.len() || b.len() != o.len() {
        return false;
    }
    vectorized(o.len(), move || {
        for ((o, &a), &b) in o.iter_mut().zip(a).zip(b) {
            *o = f(a, b);
        }
    });
    true
}

/// Runs `f` (a loop over `n` elements, inlined) compiled for the widest
/// vector instructions the CPU has: AVX-512, AVX2, or the baseline (integer
/// shifts by varying amounts, for one, have no SSE2 instruction). Short
/// loops (a small-state loop's) skip the check.
#[inline(always)]
pub(crate) fn vectorized<R>(n: usize, f: impl FnOnce() -> R) -> R {
    match vector_level(n) {
        // SAFETY: `vector_level` detected the features.
        #[cfg(target_arch = "x86_64")]
        VectorLevel::Avx512 => unsafe { with_avx512(f) },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        VectorLevel::Avx2 => unsafe { with_avx2(f) },
        VectorLevel::Baseline => f(),
    }
}

/// The widest vector instructions a loop over `n` elements takes (see
/// [`vectorized`]).
enum VectorLevel {
    #[cfg(target_arch = "x86_64")]
    Avx512,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    Baseline,
}

#[inline(always)]
fn vector_level(n: usize) -> VectorLevel {
    #[cfg(target_arch = "x86_64")]
    if n >= 64 {
        if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bw") {
            return VectorLevel::Avx512;
        }
        if std::is_x86_feature_detected!("avx2") {
            return VectorLevel::Avx2;
        }
    }
    VectorLevel::Baseline
}

/// # Safety
/// The CPU must have AVX-512 F and BW.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2")]
unsafe fn with_avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn with_avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// A typed element-wise operation on registers, chosen when compiling so
/// that running it is one call: the operands' and result's storage, then
/// the loop.
pub(crate) type BinFn = fn(&ArrayData, &ArrayData, &mut ArrayData) -> bool;

const ADD: u8 = 0;
const SUB: u8 = 1;
const MUL: u8 = 2;
const DIV: u8 = 3;
const MAX: u8 = 4;
const MIN: u8 = 5;
const AND: u8 = 6;
const OR: u8 = 7;
const XOR: u8 = 8;
const SHL: u8 = 9;
const SHR: u8 = 10;
const SAR: u8 = 11;
const REM: u8 = 12;

/// Arithmetic of one element type; `OP` is one of the constants above that
/// [`arith_of`] allows for the type (others are never instantiated for it).
/// A value also travels as the raw bits of a `u64` (a scalar register).
pub(crate) trait Lanes: NativeType + PartialOrd {
    fn arith<const OP: u8>(a: Self, b: Self) -> Self;
    /// `o[i] = arith::<OP>(a[i], d)` for a division or remainder (`OP`) by
    /// one divisor, where the type has a faster way than dividing each
    /// element; false (and `o` untouched) where not.
    #[inline(always)]
    fn by_divisor<const OP: u8>(a: &[Self], d: Self, o: &mut [Self]) -> bool {
        let _ = (a, d, o);
        false
    }
    fn to_bits(self) -> u64;
    fn from_bits(bits: u64) -> Self;
}

macro_rules! int_lanes {
    ($($t:ty: $unsigned:ty, $signed:ty),*) => {$(
        impl Lanes for $t {
            #[inline(always)]
            fn arith<const OP: u8>(a: $t, b: $t) -> $t {
                // Shift amounts are unsigned; amounts of at least the bit
                // width shift everything out (arithmetic shifts fill with
                // the sign), as XLA defines them.
                let amount = b as $unsigned;
                let inside = amount < <$t>::BITS as $unsigned;
                let by = (amount as u32) & (<$t>::BITS - 1);
                if OP == DIV || OP == REM {
                    return int_divide::<$t, OP>(a, b);
                }
                match OP {
                    ADD => a.wrapping_add(b),
                    SUB => a.wrapping_sub(b),
                    MUL => a.wrapping_mul(b),
                    MAX => a.max(b),
                    MIN => a.min(b),
                    AND => a & b,
                    OR => a | b,
                    SHL => if inside { a << by } else { 0 },
                    SHR => if inside { ((a as $unsigned) >> by) as $t } else { 0 },
                    SAR => {
                        let s = a as $signed;
                        (if inside { s >> by } else { s >> (<$t>::BITS - 1) }) as $t
                    }
                    _ => a ^ b,
                }
            }
            #[inline(always)]
            fn by_divisor<const OP: u8>(a: &[$t], d: $t, o: &mut [$t]) -> bool {
                divide_by::<$t, OP>(a, d, o)
            }
            #[inline(always)]
            fn to_bits(self) -> u64 {
                // Two's complement bits of the type's width, zero-extended.
                self as u64 & (u64::MAX >> (64 - 8 * size_of::<$t>()))
            }
            #[inline(always)]
            fn from_bits(bits: u64) -> $t {
                bits as $t
            }
        }
    )*};
}

int_lanes!(
    i8: u8, i8, i16: u16, i16, i32: u32, i32, i64: u64, i64, u8: u8, i8, u16: u16, i16, u32: u32,
    i32, u64: u64, i64
);

/// Integers as the division below needs them.
trait Divisible: Copy + PartialEq {
    const ZERO: Self;
    /// All bits set: -1 signed, the maximum unsigned.
    const ONES: Self;
    /// The one quotient that overflows, `MIN / -1`, has dividend `MIN`
    /// (`None` for unsigned types).
    const OVERFLOWS: Option<Self>;
    const BITS: u32;
    const ONE: Self;
    fn to_f64(self) -> f64;
    /// All bits set where the highest bit is set (a negative signed
    /// value), else 0: an arithmetic shift, which vectorises as one.
    fn sign_mask(self) -> Self;
    fn and(self, b: Self) -> Self;
    /// The value in f32 (exact for magnitudes up to `2^24`).
    fn to_f32(self) -> f32;
    /// `v`, an integer value of the type, as the type.
    ///
    /// # Safety
    /// `v` must be an integer value of the type.
    unsafe fn from_f32_unchecked(v: f32) -> Self;
    /// `v` truncated.
    ///
    /// # Safety
    /// `v` truncated must be a value of the type (a quotient of two of its
    /// values that does not overflow).
    unsafe fn from_f64_unchecked(v: f64) -> Self;
    fn wrapping_div(self, b: Self) -> Self;
    fn wrapping_add(self, b: Self) -> Self;
    fn wrapping_sub(self, b: Self) -> Self;
    fn wrapping_mul(self, b: Self) -> Self;
}

macro_rules! divisible {
    ($($t:ty: $s:ty),*) => {$(
        impl Divisible for $t {
            const ZERO: $t = 0;
            const ONES: $t = !0;
            const OVERFLOWS: Option<$t> = if <$t>::MIN == 0 { None } else { Some(<$t>::MIN) };
            const BITS: u32 = <$t>::BITS;
            const ONE: $t = 1;
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn sign_mask(self) -> $t {
                ((self as $s) >> (<$t>::BITS - 1)) as $t
            }
            #[inline(always)]
            fn and(self, b: $t) -> $t {
                self & b
            }
            #[inline(always)]
            fn to_f32(self) -> f32 {
                self as f32
            }
            #[inline(always)]
            unsafe fn from_f32_unchecked(v: f32) -> $t {
                // SAFETY: the caller passes an integer value of the type.
                unsafe { v.to_int_unchecked::<$t>() }
            }
            #[inline(always)]
            unsafe fn from_f64_unchecked(v: f64) -> $t {
                // SAFETY: the caller keeps `v` in the type's range.
                unsafe { v.to_int_unchecked::<$t>() }
            }
            #[inline(always)]
            fn wrapping_div(self, b: $t) -> $t {
                <$t>::wrapping_div(self, b)
            }
            #[inline(always)]
            fn wrapping_add(self, b: $t) -> $t {
                <$t>::wrapping_add(self, b)
            }
            #[inline(always)]
            fn wrapping_sub(self, b: $t) -> $t {
                <$t>::wrapping_sub(self, b)
            }
            #[inline(always)]
            fn wrapping_mul(self, b: $t) -> $t {
                <$t>::wrapping_mul(self, b)
            }
        }
    )*};
}

divisible!(i8: i8, i16: i16, i32: i32, i64: i64, u8: i8, u16: i16, u32: i32, u64: i64);

/// XLA's integer division (`OP` = DIV) or remainder (REM): `x / 0` is all
/// ones and `x % 0` is `x`; `MIN / -1` is `MIN` and `MIN % -1` is 0; the
/// quotient is truncated and the remainder takes the dividend's sign.
///
/// Types of up to 32 bits divide in f64, which vector units do (x86 has
/// no integer vector division): both operands are exact there, and the
/// rounded quotient's error, at most `2^32 * 2^-53 / |b|`, is less than
/// the `1 / |b|` between a quotient that is not an integer and the nearest
/// integer, so truncating it gives the integer quotient. A zero divisor,
/// and the `-1` of the one quotient outside the type's range (`MIN / -1`,
/// whose quotient is `MIN` again), become 1, so every quotient converted is
/// in range, which lets the conversion skip saturating: written so, without
/// branches, loops of it vectorise.
#[inline(always)]
fn int_divide<T: Divisible, const OP: u8>(a: T, b: T) -> T {
    let zero = b == T::ZERO;
    let q = if T::BITS <= 32 {
        let overflow = T::OVERFLOWS == Some(a) && b == T::ONES;
        let d = if zero || overflow { T::ONE } else { b };
        // SAFETY: `|d| >= 1` and `d` is not -1 when `a` is `MIN`, so the
        // truncated quotient `a / d` is a value of the type.
        unsafe { T::from_f64_unchecked(a.to_f64() / d.to_f64()) }
    } else if zero {
        T::ZERO
    } else {
        a.wrapping_div(b)
    };
    if OP == DIV {
        if zero { T::ONES } else { q }
    } else if zero {
        a
    } else {
        a.wrapping_sub(q.wrapping_mul(b))
    }
}

/// The reciprocal of `d` that [`divide_by`] multiplies by (see there), for
/// types of up to 32 bits and divisors other than 0 and -1; `None` for
/// others, which divide as [`int_divide`] does.
#[inline(always)]
fn reciprocal<T: Divisible>(d: T) -> Option<f64> {
    let minus_one = T::OVERFLOWS.is_some() && d == T::ONES;
    (T::BITS <= 32 && d != T::ZERO && !minus_one)
        .then(|| 1.0 / d.to_f64() * (1.0 + 4.0 * f64::EPSILON))
}

/// [`int_divide`] of each `a[i]` by one divisor `d`, for types of up to
/// 32 bits and divisors other than 0 and -1: a product with `d`'s
/// reciprocal instead of a division per element (a 512-bit f64 division
/// takes about five times a product's throughput). The reciprocal is
/// rounded up in magnitude by about `2^-50`: `fl(fl(1 / d) * (1 + 2^-50))`
/// and the product with `a` round three times, by at most `2^-53` each,
/// so `a * r` exceeds `|a / d|` in magnitude by a factor between
/// `1 + 5 * 2^-53` and `1 + 11 * 2^-53`. Truncating it gives the truncated
/// quotient: an exact integer quotient is not undershot, and a quotient
/// that is not an integer lies at least `1 / |d|` below the next one,
/// more than the overshoot of at most `|a / d| * 11 * 2^-53 < 2^32 * 11 *
/// 2^-53 / |d|`. False for other types and divisors, which divide as
/// `int_divide` does.
#[inline(always)]
fn divide_by<T: Divisible, const OP: u8>(a: &[T], d: T, o: &mut [T]) -> bool {
    let Some(r) = reciprocal(d) else {
        return false;
    };
    if a.len() != o.len() {
        return false;
    }
    for (o, &a) in o.iter_mut().zip(a) {
        // SAFETY: `|d| >= 1` and `d` is not -1, so the truncated quotient
        // (see above) is at most `|a|` in magnitude, a value of the type.
        let q = unsafe { T::from_f64_unchecked(a.to_f64() * r) };
        *o = if OP == DIV {
            q
        } else {
            a.wrapping_sub(q.wrapping_mul(d))
        };
    }
    true
}

macro_rules! float_lanes {
    ($($t:ty),*) => {$(
        impl Lanes for $t {
            #[inline(always)]
            fn arith<const OP: u8>(a: $t, b: $t) -> $t {
                match OP {
                    ADD => a + b,
                    SUB => a - b,
                    MUL => a * b,
                    DIV => a / b,
                    MAX => minmax::max(a, b),
                    _ => minmax::min(a, b),
                }
            }
            #[inline(always)]
            fn to_bits(self) -> u64 {
                <$t>::to_bits(self) as u64
            }
            #[inline(always)]
            fn from_bits(bits: u64) -> $t {
                <$t>::from_bits(bits as _)
            }
        }
    )*};
}

float_lanes!(f32, f64);

impl Lanes for bool {
    #[inline(always)]
    fn arith<const OP: u8>(a: bool, b: bool) -> bool {
        match OP {
            AND => a & b,
            OR => a | b,
            _ => a ^ b,
        }
    }
    #[inline(always)]
    fn to_bits(self) -> u64 {
        self as u64
    }
    #[inline(always)]
    fn from_bits(bits: u64) -> bool {
        bits != 0
    }
}

/// A typed operation on one value each, as raw bits (see [`Lanes`]).
pub(crate) type ScalarFn = fn(u64, u64) -> u64;

/// An element-wise update of an array in place by another of its length:
/// `o = o op x` or `o = x op o`.
pub(crate) type UpdateFn = fn(&mut ArrayData, &ArrayData) -> bool;

/// A typed binary operation: over arrays, over scalar registers, and (for
/// arithmetic) in place, with the result replacing the first or the second
/// operand.
#[derive(Clone, Copy)]
pub(crate) struct Typed {
    pub array: BinFn,
    pub scalar: ScalarFn,
    pub update: Option<[UpdateFn; 2]>,
    /// With one operand a scalar (as raw bits): `[a op s, s op a]`.
    pub splat: Option<[SplatFn; 2]>,
    /// Over runs of elements inside larger arrays (arithmetic only).
    pub window: Option<WindowFn>,
    /// `scalar`, when it is one of the operations a loop runs inline.
    pub inline: Option<InlineOp>,
}

/// The scalar operations of loop counters and indices, which a loop runs
/// inline instead of calling `Typed::scalar`: wrapping addition,
/// subtraction and multiplication of 32- and 64-bit integers (the same
/// bits signed or not) and comparisons of signed ones (`DIR` as in
/// [`holds`]). Operands and results are scalar register bits (see
/// [`Lanes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InlineOp {
    Add32,
    Sub32,
    Mul32,
    Add64,
    Sub64,
    Mul64,
    Compare32(u8),
    Compare64(u8),
}

impl InlineOp {
    fn of_arith(op: Arith, ty: PrimitiveType) -> Option<InlineOp> {
        use PrimitiveType as P;
        let wide = match ty {
            P::S32 | P::U32 => false,
            P::S64 | P::U64 => true,
            _ => return None,
        };
        Some(match (op, wide) {
            (Arith::Add, false) => InlineOp::Add32,
            (Arith::Sub, false) => InlineOp::Sub32,
            (Arith::Mul, false) => InlineOp::Mul32,
            (Arith::Add, true) => InlineOp::Add64,
            (Arith::Sub, true) => InlineOp::Sub64,
            (Arith::Mul, true) => InlineOp::Mul64,
            _ => return None,
        })
    }

    fn of_compare(dir: u8, ty: PrimitiveType) -> Option<InlineOp> {
        match ty {
            PrimitiveType::S32 => Some(InlineOp::Compare32(dir)),
            PrimitiveType::S64 => Some(InlineOp::Compare64(dir)),
            _ => None,
        }
    }

    #[inline(always)]
    pub(crate) fn apply(self, a: u64, b: u64) -> u64 {
        let (x, y) = (a as u32, b as u32);
        match self {
            InlineOp::Add32 => u64::from(x.wrapping_add(y)),
            InlineOp::Sub32 => u64::from(x.wrapping_sub(y)),
            InlineOp::Mul32 => u64::from(x.wrapping_mul(y)),
            InlineOp::Add64 => a.wrapping_add(b),
            InlineOp::Sub64 => a.wrapping_sub(b),
            InlineOp::Mul64 => a.wrapping_mul(b),
            InlineOp::Compare32(dir) => u64::from(compare(dir, x as i32, y as i32)),
            InlineOp::Compare64(dir) => u64::from(compare(dir, a as i64, b as i64)),
        }
    }
}

#[inline(always)]
fn compare<T: PartialOrd>(dir: u8, a: T, b: T) -> bool {
    match dir {
        0 => a == b,
        1 => a != b,
        2 => a < b,
        3 => a <= b,
        4 => a > b,
        _ => a >= b,
    }
}

/// An element-wise operation over `n` elements of each array, from the
/// given element offsets: `o[oo..][..n] = a[ao..][..n] op b[bo..][..n]`;
/// false if the types differ or a run passes its array's end.
pub(crate) type WindowFn =
    fn(&ArrayData, usize, &ArrayData, usize, &mut ArrayData, usize, usize) -> bool;

fn arith_window<T: Lanes, const OP: u8>(
    a: &ArrayData,
    ao: usize,
    b: &ArrayData,
    bo: usize,
    o: &mut ArrayData,
    oo: usize,
    n: usize,
) -> bool {
    fn run<T>(x: &[T], at: usize, n: usize) -> Option<&[T]> {
        x.get(at..at.checked_add(n)?)
    }
    let a = T::slice(a).and_then(|a| run(a, ao, n));
    let b = T::slice(b).and_then(|b| run(b, bo, n));
    let o = T::slice_mut(o).and_then(|o| o.get_mut(oo..oo.checked_add(n)?));
    match (a, b, o) {
        (Some(a), Some(b), Some(o)) => zip(a, b, o, T::arith::<OP>),
        _ => false,
    }
}

/// An element-wise operation of an array and a scalar given as raw bits
/// (see [`Lanes`]), into an array of the first one's length.
pub(crate) type SplatFn = fn(&ArrayData, u64, &mut ArrayData) -> bool;

fn splat_typed<T: Lanes, const OP: u8, const SCALAR_FIRST: bool>(
    a: &ArrayData,
    s: u64,
    o: &mut ArrayData,
) -> bool {
    match (T::slice(a), T::slice_mut(o)) {
        (Some(a), Some(o)) if a.len() == o.len() => {
            let s = T::from_bits(s);
            if !SCALAR_FIRST
                && (OP == DIV || OP == REM)
                && vectorized(o.len(), || T::by_divisor::<OP>(a, s, o))
            {
                return true;
            }
            vectorized(o.len(), move || {
                for (o, &a) in o.iter_mut().zip(a) {
                    *o = if SCALAR_FIRST {
                        T::arith::<OP>(s, a)
                    } else {
                        T::arith::<OP>(a, s)
                    };
                }
            });
            true
        }
        _ => false,
    }
}

/// `a - q * d` for `q` the quotient `a / d` by one divisor `d` (raw bits,
/// see [`Lanes`]) as XLA divides: XLA's remainder, in wrapping arithmetic,
/// for every divisor (`x / 0` is all ones and `x % 0` is `x`; `MIN / -1`
/// is `MIN` and `MIN % -1` is 0). Where a loop divides too, the remainder
/// costs a product and a difference instead of a second division.
pub(crate) type RemainderFn = fn(&ArrayData, &ArrayData, u64, &mut ArrayData) -> bool;

fn remainder_typed<T: Lanes>(a: &ArrayData, q: &ArrayData, d: u64, o: &mut ArrayData) -> bool {
    match (T::slice(a), T::slice(q), T::slice_mut(o)) {
        (Some(a), Some(q), Some(o)) if a.len() == o.len() && q.len() == o.len() => {
            let d = T::from_bits(d);
            vectorized(o.len(), move || {
                for (o, (&a, &q)) in o.iter_mut().zip(a.iter().zip(q)) {
                    *o = T::arith::<SUB>(a, T::arith::<MUL>(q, d));
                }
            });
            true
        }
        _ => false,
    }
}

/// [`RemainderFn`] for integers of type `ty`.
pub(crate) fn remainder_fn(ty: PrimitiveType) -> Option<RemainderFn> {
    fn pick<T: Lanes>(_: ()) -> Option<RemainderFn> {
        Some(remainder_typed::<T>)
    }
    by_integer_type!(ty, pick(()), { _ => None })
}

/// JAX's floor division (`jnp.floor_divide`; `MODULO` false) or modulo
/// (`jnp.remainder`; true) of signed integers by one divisor `d` (raw
/// bits, see [`Lanes`]) that is not 0, as the `select` JAX writes for them
/// computes it: from the quotient `q` and remainder `r` of XLA's division
/// (see [`int_divide`]), `q - 1` (or `r + d`) where `r` is not 0 and its
/// sign is not `d`'s, else `q` (or `r`), in wrapping arithmetic. One pass
/// instead of the eight or so of the operations it replaces.
pub(crate) type FloorFn = fn(&ArrayData, u64, &mut ArrayData) -> bool;

fn floor_typed<T: Lanes + Divisible, const MODULO: bool>(
    a: &ArrayData,
    d: u64,
    o: &mut ArrayData,
) -> bool {
    let (Some(a), Some(o)) = (T::slice(a), T::slice_mut(o)) else {
        return false;
    };
    if a.len() != o.len() {
        return false;
    }
    let d = T::from_bits(d);
    match reciprocal(d) {
        Some(rd) if floors_in_f32(d) => floor_in_runs::<T, MODULO>(a, d, rd, o),
        Some(rd) => vectorized(o.len(), move || floor_f64_run::<T, MODULO>(a, d, rd, o)),
        None => vectorized(o.len(), move || {
            for (o, &a) in o.iter_mut().zip(a) {
                *o = floor_of::<T, MODULO>(a, int_divide::<T, DIV>(a, d), d);
            }
        }),
    }
    true
}

/// The floor quotient (or modulo, if `MODULO`) of `a` by `d` from XLA's
/// truncated quotient `q`: `q - 1` (or `r + d`) where the remainder `r` is
/// not 0 and its sign is not `d`'s, else `q` (or `r`).
#[inline(always)]
fn floor_of<T: Lanes + Divisible, const MODULO: bool>(a: T, q: T, d: T) -> T {
    let r = a.wrapping_sub(q.wrapping_mul(d));
    let off = r != T::ZERO && ((r < T::ZERO) != (d < T::ZERO));
    match (MODULO, off) {
        (true, true) => r.wrapping_add(d),
        (true, false) => r,
        (false, true) => q.wrapping_sub(T::ONE),
        (false, false) => q,
    }
}

/// [`floor_typed`]'s loop over `a` with the f64 quotient by `d`, whose
/// [`reciprocal`] is `rd`.
#[inline(always)]
fn floor_f64_run<T: Lanes + Divisible, const MODULO: bool>(a: &[T], d: T, rd: f64, o: &mut [T]) {
    for (o, &a) in o.iter_mut().zip(a) {
        // SAFETY: as in `divide_by`, whose quotient this is.
        let q = unsafe { T::from_f64_unchecked(a.to_f64() * rd) };
        *o = floor_of::<T, MODULO>(a, q, d);
    }
}

/// The largest magnitude of a dividend, and of a divisor, that
/// [`floor_f32_run`] takes: `2^24`, up to which f32 holds integers exactly.
const FLOOR_F32_MAX: f64 = (1u32 << 24) as f64;

/// Elements per run of [`floor_in_runs`], each run checked once for
/// dividends that [`floor_f32_run`] takes: a whole tile of a fused loop.
const FLOOR_RUN: usize = 1024;

/// Whether [`floor_f32_run`] can divide by `d`, a divisor with a
/// [`reciprocal`]: one of a signed type, at most `2^24` in magnitude, and
/// not the type's minimum (whose negation, in the correction, would wrap).
#[inline(always)]
fn floors_in_f32<T: Divisible>(d: T) -> bool {
    T::OVERFLOWS.is_some_and(|min| d != min) && d.to_f64().abs() <= FLOOR_F32_MAX
}

/// [`floor_typed`] by a divisor that passes [`floors_in_f32`] (with
/// [`reciprocal`] `rd`), in runs of [`FLOOR_RUN`]: each run with the f32
/// estimate if its dividends allow it, else with the f64 quotient. The
/// loops are compiled in functions of their own for the CPU's vector
/// instructions: inside a closure handed to [`vectorized`] LLVM left them
/// out of line without the features, calling `floorf` for each element.
fn floor_in_runs<T: Lanes + Divisible, const MODULO: bool>(a: &[T], d: T, rd: f64, o: &mut [T]) {
    match vector_level(o.len()) {
        // SAFETY: `vector_level` detected the features.
        #[cfg(target_arch = "x86_64")]
        VectorLevel::Avx512 => unsafe { floor_runs_avx512::<T, MODULO>(a, d, rd, o) },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        VectorLevel::Avx2 => unsafe { floor_runs_avx2::<T, MODULO>(a, d, rd, o) },
        VectorLevel::Baseline => floor_runs::<T, MODULO>(a, d, rd, o),
    }
}

/// # Safety
/// The CPU must have AVX-512 F and BW.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2")]
unsafe fn floor_runs_avx512<T: Lanes + Divisible, const MODULO: bool>(
    a: &[T],
    d: T,
    rd: f64,
    o: &mut [T],
) {
    floor_runs::<T, MODULO>(a, d, rd, o)
}

/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn floor_runs_avx2<T: Lanes + Divisible, const MODULO: bool>(
    a: &[T],
    d: T,
    rd: f64,
    o: &mut [T],
) {
    floor_runs::<T, MODULO>(a, d, rd, o)
}

/// [`floor_in_runs`]'s loop, compiled into each of its callers: a run's
/// smallest and largest dividend choose its division.
#[inline(always)]
fn floor_runs<T: Lanes + Divisible, const MODULO: bool>(a: &[T], d: T, rd: f64, o: &mut [T]) {
    for (a, o) in a.chunks(FLOOR_RUN).zip(o.chunks_mut(FLOOR_RUN)) {
        // A plain loop (`Iterator::fold` was left out of line, without the
        // caller's vector instructions), starting from `d`, which the
        // estimate takes too.
        let (mut lo, mut hi) = (d, d);
        for &v in a {
            lo = if v < lo { v } else { lo };
            hi = if v > hi { v } else { hi };
        }
        if lo.to_f64() < -FLOOR_F32_MAX || hi.to_f64() > FLOOR_F32_MAX {
            floor_f64_run::<T, MODULO>(a, d, rd, o);
        } else if d < T::ZERO {
            floor_f32_run::<T, MODULO, true>(a, d, o);
        } else {
            floor_f32_run::<T, MODULO, false>(a, d, o);
        }
    }
}

/// [`floor_typed`]'s floor division (or modulo, if `MODULO`) of `a` into
/// `o` by `d`, negative if `NEGATIVE`, where every dividend is at most
/// `2^24` in magnitude and `d` passes [`floors_in_f32`]: an estimate in
/// f32 and one correction, in about two thirds of the time of the f64
/// quotient, whose conversions take two operations each for 512-bit
/// vectors on AMD's Zen 4.
///
/// Why it is exact: `a` and `d` are exact in f32; `1 / d` rounds once and
/// the product once, each by at most `2^-24` relatively, so the product
/// `p` differs from `a / d` by at most `|a / d| * 2^-23 * (1 + 2^-24)`,
/// below 1 for `|d| >= 3` (as `|a| <= 2^24`), and not at all for
/// `|d| <= 2`, whose reciprocals and products are exact. So `q0 = floor(p)`
/// is the floor quotient `q` or one off it, and `r0 = a - q0 * d` is the
/// floor remainder `r` (of `d`'s sign, smaller than `|d|`) or `r ± d`,
/// which the type holds: below `2^23` only an exact quotient can be
/// missed (the error is then below `1 / |d|`), leaving `r0 = d`, and above
/// it the type has 32 bits for `|r0| < 2^25`. A remainder of the wrong
/// sign means `q0` was one too big; one reaching `d` means one too small.
/// Both tests are sign masks of a difference (`d` is not the type's
/// minimum, so `-r0` does not wrap), which the vector units compute with
/// shifts instead of comparisons into mask registers.
#[inline(always)]
fn floor_f32_run<T: Lanes + Divisible, const MODULO: bool, const NEGATIVE: bool>(
    a: &[T],
    d: T,
    o: &mut [T],
) {
    let rd = 1.0 / d.to_f32();
    let below_d = d.wrapping_sub(T::ONE);
    let past_d = d.wrapping_add(T::ONE);
    for (o, &a) in o.iter_mut().zip(a) {
        // SAFETY: `|d| >= 1` and `d` is not -1 (`reciprocal` holds), so
        // `floor(p)` is `a` (for `d` = 1) or at most `|a| / 2 + 1` in
        // magnitude: an integer of the type.
        let q0 = unsafe { T::from_f32_unchecked((a.to_f32() * rd).floor()) };
        let r0 = a.wrapping_sub(q0.wrapping_mul(d));
        // All ones where `q0` is one too big (`r0` has the wrong sign), or
        // one too small (`r0` reaches `d`).
        let (big, small) = if NEGATIVE {
            (
                T::ZERO.wrapping_sub(r0).sign_mask(),
                r0.wrapping_sub(past_d).sign_mask(),
            )
        } else {
            (r0.sign_mask(), below_d.wrapping_sub(r0).sign_mask())
        };
        *o = if MODULO {
            r0.wrapping_add(big.and(d)).wrapping_sub(small.and(d))
        } else {
            q0.wrapping_add(big).wrapping_sub(small)
        };
    }
}

/// [`FloorFn`] for signed integers of type `ty`: the modulo if `modulo`,
/// else the quotient.
pub(crate) fn floor_fn(ty: PrimitiveType, modulo: bool) -> Option<FloorFn> {
    fn pick<T: Lanes + Divisible>(modulo: bool) -> FloorFn {
        match modulo {
            true => floor_typed::<T, true>,
            false => floor_typed::<T, false>,
        }
    }
    Some(match ty {
        PrimitiveType::S8 => pick::<i8>(modulo),
        PrimitiveType::S16 => pick::<i16>(modulo),
        PrimitiveType::S32 => pick::<i32>(modulo),
        PrimitiveType::S64 => pick::<i64>(modulo),
        _ => return None,
    })
}

/// A rotation left by a fixed amount: XLA's `or(shift-left(x, k),
/// shift-right-logical(x, width - k))`, for `k` from 0 to the width.
pub(crate) type RotateFn = fn(&ArrayData, u32, &mut ArrayData) -> bool;

fn rotate_typed<T: NativeType + Copy>(
    a: &ArrayData,
    k: u32,
    o: &mut ArrayData,
    rotate: impl Fn(T, u32) -> T,
) -> bool {
    convert_with::<T, T>(a, o, move |v| rotate(v, k))
}

/// The rotation of `ty` (32- and 64-bit integers).
pub(crate) fn rotate_fn(ty: PrimitiveType) -> Option<RotateFn> {
    Some(match ty {
        PrimitiveType::U32 => |a, k, o| rotate_typed::<u32>(a, k, o, u32::rotate_left),
        PrimitiveType::S32 => |a, k, o| rotate_typed::<i32>(a, k, o, i32::rotate_left),
        PrimitiveType::U64 => |a, k, o| rotate_typed::<u64>(a, k, o, u64::rotate_left),
        PrimitiveType::S64 => |a, k, o| rotate_typed::<i64>(a, k, o, i64::rotate_left),
        _ => return None,
    })
}

/// A rotation left by a fixed amount, then an exclusive or with a second
/// array: `rotate(x, k) ^ y`, threefry's mix (whose rotation nothing else
/// reads) in one pass instead of two.
pub(crate) type RotateXorFn = fn(&ArrayData, u32, &ArrayData, &mut ArrayData) -> bool;

fn rotate_xor_typed<T: NativeType + std::ops::BitXor<Output = T>>(
    x: &ArrayData,
    k: u32,
    y: &ArrayData,
    o: &mut ArrayData,
    rotate: impl Fn(T, u32) -> T,
) -> bool {
    match (T::slice(x), T::slice(y), T::slice_mut(o)) {
        (Some(x), Some(y), Some(o)) if x.len() == o.len() && y.len() == o.len() => {
            // (`move`, as in `convert_with`.)
            vectorized(o.len(), move || {
                for ((o, &x), &y) in o.iter_mut().zip(x).zip(y) {
                    *o = rotate(x, k) ^ y;
                }
            });
            true
        }
        _ => false,
    }
}

/// The rotation and exclusive or of `ty` (32- and 64-bit integers).
pub(crate) fn rotate_xor_fn(ty: PrimitiveType) -> Option<RotateXorFn> {
    Some(match ty {
        PrimitiveType::U32 => |x, k, y, o| rotate_xor_typed::<u32>(x, k, y, o, u32::rotate_left),
        PrimitiveType::S32 => |x, k, y, o| rotate_xor_typed::<i32>(x, k, y, o, i32::rotate_left),
        PrimitiveType::U64 => |x, k, y, o| rotate_xor_typed::<u64>(x, k, y, o, u64::rotate_left),
        PrimitiveType::S64 => |x, k, y, o| rotate_xor_typed::<i64>(x, k, y, o, i64::rotate_left),
        _ => return None,
    })
}

fn update_typed<T: Lanes, const OP: u8, const FIRST: bool>(
    o: &mut ArrayData,
    x: &ArrayData,
) -> bool {
    match (T::slice_mut(o), T::slice(x)) {
        (Some(o), Some(x)) if o.len() == x.len() => {
            vectorized(o.len(), move || {
                for (o, &x) in o.iter_mut().zip(x) {
                    *o = if FIRST {
                        T::arith::<OP>(*o, x)
                    } else {
                        T::arith::<OP>(x, *o)
                    };
                }
            });
            true
        }
        _ => false,
    }
}

fn arith_scalar<T: Lanes, const OP: u8>(a: u64, b: u64) -> u64 {
    T::arith::<OP>(T::from_bits(a), T::from_bits(b)).to_bits()
}

fn compare_scalar<T: Lanes, const DIR: u8>(a: u64, b: u64) -> u64 {
    u64::from(holds::<DIR, T>(&T::from_bits(a), &T::from_bits(b)))
}

fn arith_typed<T: Lanes, const OP: u8>(a: &ArrayData, b: &ArrayData, o: &mut ArrayData) -> bool {
    match (T::slice(a), T::slice(b), T::slice_mut(o)) {
        (Some(a), Some(b), Some(o)) => zip(a, b, o, T::arith::<OP>),
        _ => false,
    }
}

/// The typed function for `op` on `ty` (a pair [`arith_of`] accepted).
fn arith_fn(op: Arith, ty: PrimitiveType) -> Option<Typed> {
    fn both<T: Lanes, const OP: u8>() -> Typed {
        Typed {
            array: arith_typed::<T, OP>,
            scalar: arith_scalar::<T, OP>,
            update: Some([update_typed::<T, OP, true>, update_typed::<T, OP, false>]),
            splat: Some([splat_typed::<T, OP, false>, splat_typed::<T, OP, true>]),
            window: Some(arith_window::<T, OP>),
            inline: None,
        }
    }
    fn pick<T: Lanes>(op: Arith) -> Typed {
        match op {
            Arith::Add => both::<T, ADD>(),
            Arith::Sub => both::<T, SUB>(),
            Arith::Mul => both::<T, MUL>(),
            Arith::Div => both::<T, DIV>(),
            Arith::Max => both::<T, MAX>(),
            Arith::Min => both::<T, MIN>(),
            Arith::And => both::<T, AND>(),
            Arith::Or => both::<T, OR>(),
            Arith::Xor => both::<T, XOR>(),
            Arith::ShiftLeft => both::<T, SHL>(),
            Arith::ShiftRightLogical => both::<T, SHR>(),
            Arith::ShiftRightArithmetic => both::<T, SAR>(),
            Arith::Rem => both::<T, REM>(),
        }
    }
    let typed = by_integer_type!(ty, pick(op), {
        PrimitiveType::F32 => pick::<f32>(op),
        PrimitiveType::F64 => pick::<f64>(op),
        PrimitiveType::Pred => pick::<bool>(op),
        _ => return None,
    });
    Some(Typed {
        inline: InlineOp::of_arith(op, ty),
        ..typed
    })
}

#[inline(always)]
fn holds<const DIR: u8, T: PartialOrd>(a: &T, b: &T) -> bool {
    compare(DIR, a, b)
}

fn compare_typed<T: Lanes, const DIR: u8>(a: &ArrayData, b: &ArrayData, o: &mut ArrayData) -> bool {
    let (Some(a), Some(b), ArrayData::Pred(o)) = (T::slice(a), T::slice(b), o) else {
        return false;
    };
    if let ([a], [b], [o]) = (a, b, &mut o[..]) {
        *o = holds::<DIR, T>(a, b);
        return true;
    }
    if a.len() != o.len() || b.len() != o.len() {
        return false;
    }
    vectorized(o.len(), move || {
        for (o, (a, b)) in o.iter_mut().zip(a.iter().zip(b)) {
            *o = holds::<DIR, T>(a, b);
        }
    });
    true
}

/// [`compare_typed`] with one operand a scalar (as raw bits), the second
/// with `SCALAR_FIRST`.
fn compare_splat_typed<T: Lanes, const DIR: u8, const SCALAR_FIRST: bool>(
    a: &ArrayData,
    s: u64,
    o: &mut ArrayData,
) -> bool {
    let (Some(a), ArrayData::Pred(o)) = (T::slice(a), o) else {
        return false;
    };
    if a.len() != o.len() {
        return false;
    }
    let s = T::from_bits(s);
    vectorized(o.len(), move || {
        for (o, a) in o.iter_mut().zip(a) {
            *o = if SCALAR_FIRST {
                holds::<DIR, T>(&s, a)
            } else {
                holds::<DIR, T>(a, &s)
            };
        }
    });
    true
}

/// The typed comparison of `ty` operands (under their default comparison type).
fn compare_fn(dir: ComparisonDirection, ty: PrimitiveType) -> Option<Typed> {
    fn both<T: Lanes, const DIR: u8>() -> Typed {
        Typed {
            array: compare_typed::<T, DIR>,
            scalar: compare_scalar::<T, DIR>,
            update: None,
            splat: Some([
                compare_splat_typed::<T, DIR, false>,
                compare_splat_typed::<T, DIR, true>,
            ]),
            window: None,
            inline: None,
        }
    }
    fn pick<T: Lanes>(dir: ComparisonDirection) -> Typed {
        match dir {
            ComparisonDirection::Eq => both::<T, 0>(),
            ComparisonDirection::Ne => both::<T, 1>(),
            ComparisonDirection::Lt => both::<T, 2>(),
            ComparisonDirection::Le => both::<T, 3>(),
            ComparisonDirection::Gt => both::<T, 4>(),
            ComparisonDirection::Ge => both::<T, 5>(),
        }
    }
    let typed = by_integer_type!(ty, pick(dir), {
        PrimitiveType::F32 => pick::<f32>(dir),
        PrimitiveType::F64 => pick::<f64>(dir),
        PrimitiveType::Pred => pick::<bool>(dir),
        _ => return None,
    });
    Some(Typed {
        inline: InlineOp::of_compare(direction_code(dir), ty),
        ..typed
    })
}

/// A comparison direction as the `DIR` of [`holds`].
/// Whether `a dir b` holds.
pub(crate) fn compared(dir: ComparisonDirection, a: i128, b: i128) -> bool {
    compare(direction_code(dir), a, b)
}

fn direction_code(dir: ComparisonDirection) -> u8 {
    match dir {
        ComparisonDirection::Eq => 0,
        ComparisonDirection::Ne => 1,
        ComparisonDirection::Lt => 2,
        ComparisonDirection::Le => 3,
        ComparisonDirection::Gt => 4,
        ComparisonDirection::Ge => 5,
    }
}

/// The typed function for `instr`, a binary arithmetic operation or a
/// comparison (under its operands' default comparison type) of `comp`,
/// applied to two operands of the result's element count.
pub(crate) fn binary_fn(instr: &HloInstruction, comp: &HloComputation) -> Option<Typed> {
    let [a, b] = instr.operands.as_slice() else {
        return None;
    };
    let ty = instr.shape.as_array()?.element_type();
    let operand_type = comp.instruction(*a).shape.as_array()?.element_type();
    if comp.instruction(*b).shape.as_array()?.element_type() != operand_type {
        return None;
    }
    if instr.opcode == Opcode::Compare {
        return plain_comparison(operand_type, instr.attrs.comparison_type)
            .then(|| compare_fn(instr.attrs.comparison_direction?, operand_type))
            .flatten();
    }
    if operand_type != ty {
        return None;
    }
    arith_fn(arith_of(instr.opcode, ty)?, ty)
}

/// Whether values of `ty` fit a scalar register (see [`Lanes`]).
pub(crate) fn scalar_type(ty: PrimitiveType) -> bool {
    float_type(ty) || int_type(ty) || ty == PrimitiveType::Pred
}

/// The one element of `data`, as scalar register bits.
pub(crate) fn bits_of(data: &ArrayData) -> Option<u64> {
    fn go<T: Lanes>(v: &[T]) -> Option<u64> {
        match v {
            [x] => Some(x.to_bits()),
            _ => None,
        }
    }
    match data {
        ArrayData::F32(v) => go(v),
        ArrayData::F64(v) => go(v),
        ArrayData::S8(v) => go(v),
        ArrayData::S16(v) => go(v),
        ArrayData::S32(v) => go(v),
        ArrayData::S64(v) => go(v),
        ArrayData::U8(v) => go(v),
        ArrayData::U16(v) => go(v),
        ArrayData::U32(v) => go(v),
        ArrayData::U64(v) => go(v),
        ArrayData::Pred(v) => go(v),
        _ => None,
    }
}

/// Stores register `bits` as the one element of `data`.
pub(crate) fn set_bits(data: &mut ArrayData, bits: u64) -> bool {
    fn go<T: Lanes>(v: &mut [T], bits: u64) -> bool {
        match v {
            [x] => {
                *x = T::from_bits(bits);
                true
            }
            _ => false,
        }
    }
    match data {
        ArrayData::F32(v) => go(v, bits),
        ArrayData::F64(v) => go(v, bits),
        ArrayData::S8(v) => go(v, bits),
        ArrayData::S16(v) => go(v, bits),
        ArrayData::S32(v) => go(v, bits),
        ArrayData::S64(v) => go(v, bits),
        ArrayData::U8(v) => go(v, bits),
        ArrayData::U16(v) => go(v, bits),
        ArrayData::U32(v) => go(v, bits),
        ArrayData::U64(v) => go(v, bits),
        ArrayData::Pred(v) => go(v, bits),
        _ => false,
    }
}

/// A typed conversion of every element of an array into another's storage.
pub(crate) type ConvertFn = fn(&ArrayData, &mut ArrayData) -> bool;

const ABS: u8 = 0;
const NEG: u8 = 1;
const SIGN: u8 = 2;
const NOT: u8 = 3;
const POPCNT: u8 = 4;
const CLZ: u8 = 5;

/// Integer operations of one operand, as the interpreter computes them:
/// wrapping absolute value and negation, the sign as -1, 0 or 1 (0 or 1
/// unsigned), bitwise not, population count and leading zeros.
trait IntUnary: NativeType + Copy {
    fn unary<const OP: u8>(self) -> Self;
}

macro_rules! int_unary {
    ($($t:ty: $signed:ty),*) => {$(
        impl IntUnary for $t {
            #[inline(always)]
            fn unary<const OP: u8>(self) -> $t {
                let signed = <$t>::MIN != 0;
                match OP {
                    ABS if signed => (self as $signed).wrapping_abs() as $t,
                    ABS => self,
                    NEG => self.wrapping_neg(),
                    // -1 where negative, else 1 where the negation is
                    // negative (MIN's is MIN, already -1): shifts and an
                    // or, which vectorise (`signum` compiles to byte
                    // compares put together one lane at a time).
                    SIGN if signed => {
                        let (x, w) = (self as $signed, <$signed>::BITS - 1);
                        ((x >> w) | ((x.wrapping_neg() >> w) & 1)) as $t
                    }
                    SIGN => (self != 0) as $t,
                    NOT => !self,
                    POPCNT => self.count_ones() as $t,
                    _ => self.leading_zeros() as $t,
                }
            }
        }
    )*};
}

int_unary!(i8: i8, i16: i16, i32: i32, i64: i64, u8: i8, u16: i16, u32: i32, u64: i64);

fn unary_typed<T: IntUnary, const OP: u8>(x: &ArrayData, o: &mut ArrayData) -> bool {
    convert_with(x, o, |v: T| v.unary::<OP>())
}

fn not_pred(x: &ArrayData, o: &mut ArrayData) -> bool {
    match (x, o) {
        (ArrayData::Pred(x), ArrayData::Pred(o)) if x.len() == o.len() => {
            o.iter_mut().zip(x).for_each(|(o, &x)| *o = !x);
            true
        }
        _ => false,
    }
}

/// `|re + i im|` of a c64 as the interpreter computes it: f64 `hypot` of
/// the parts, rounded to f32. In f64 the squares of f32 parts are exact and
/// `sqrt(re^2 + im^2)` is within 1.5 ulp of the true value, which `hypot` is
/// within 1 ulp of, so both round to the same f32 unless they sit within a
/// few ulp of a point halfway between two f32 values (or in f32's subnormal
/// range, or are not finite): only then is `hypot` called.
#[inline(always)]
fn abs_c64_one(re: f32, im: f32) -> f32 {
    match abs_c64_sqrt(re, im) {
        (r, false) => r,
        (_, true) => f64::from(re).hypot(f64::from(im)) as f32,
    }
}

/// `sqrt(re^2 + im^2)` in f64, rounded to f32, and whether `hypot` must
/// decide instead (see [`abs_c64_one`]); no branches, so a loop of it
/// vectorises.
#[inline(always)]
fn abs_c64_sqrt(re: f32, im: f32) -> (f32, bool) {
    let (a, b) = (f64::from(re), f64::from(im));
    let r = (a * a + b * b).sqrt();
    // The 29 bits rounding to f32 drops, within 4 of their pattern halfway.
    let dropped = r.to_bits() & 0x1fff_ffff;
    let near_half = dropped.wrapping_sub(0x1000_0000 - 4) <= 8;
    let normal = (r >= f64::from(f32::MIN_POSITIVE)) & r.is_finite();
    (r as f32, near_half | !normal)
}

/// [`abs_c64_one`] over an array (see [`abs_c64_into`]).
fn abs_c64(x: &ArrayData, o: &mut ArrayData) -> bool {
    match (Complex32::slice(x), f32::slice_mut(o)) {
        (Some(x), Some(o)) if x.len() == o.len() => {
            abs_c64_into(x, o);
            true
        }
        _ => false,
    }
}

/// [`abs_c64_one`] of each of `x`, into `o` (of the same length): blocks of
/// the vectorised square root, and `hypot` again for the rare block with
/// an element that needs it.
pub(crate) fn abs_c64_into(x: &[Complex32], o: &mut [f32]) {
    const BLOCK: usize = 64;
    // The loop stays small enough to be inlined into the vector unit's
    // copy of `vectorized` (a closure that is not inlined is compiled for
    // the baseline: SSE2's two f64 lanes); `hypot` is called out of line.
    vectorized(o.len(), move || {
        for (o, x) in o.chunks_mut(BLOCK).zip(x.chunks(BLOCK)) {
            let mut hard = false;
            for (o, z) in o.iter_mut().zip(x) {
                let (r, h) = abs_c64_sqrt(z.re, z.im);
                *o = r;
                hard |= h;
            }
            if hard {
                abs_c64_hypot(x, o);
            }
        }
    });
}

/// [`abs_c64_one`] of each of `x`, into `o`: a block with an element that
/// needs `hypot`.
#[cold]
#[inline(never)]
fn abs_c64_hypot(x: &[Complex32], o: &mut [f32]) {
    for (o, z) in o.iter_mut().zip(x) {
        *o = abs_c64_one(z.re, z.im);
    }
}

fn abs_c128(x: &ArrayData, o: &mut ArrayData) -> bool {
    convert_with(x, o, |z: Complex64| z.re.hypot(z.im))
}

/// The absolute value of complex numbers of type `ty` (c64 or c128), as a
/// typed loop into their real type.
pub(crate) fn complex_abs_fn(ty: PrimitiveType) -> Option<ConvertFn> {
    match ty {
        PrimitiveType::C64 => Some(abs_c64),
        PrimitiveType::C128 => Some(abs_c128),
        _ => None,
    }
}

/// The typed loop of `op`, an operation of one operand, on integers of
/// type `ty` (result of the same type), or `not` on predicates.
pub(crate) fn unary_fn(op: Opcode, ty: PrimitiveType) -> Option<ConvertFn> {
    fn pick<T: IntUnary>(op: Opcode) -> Option<ConvertFn> {
        Some(match op {
            Opcode::Abs => unary_typed::<T, ABS>,
            Opcode::Negate => unary_typed::<T, NEG>,
            Opcode::Sign => unary_typed::<T, SIGN>,
            Opcode::Not => unary_typed::<T, NOT>,
            Opcode::PopCnt => unary_typed::<T, POPCNT>,
            Opcode::Clz => unary_typed::<T, CLZ>,
            _ => return None,
        })
    }
    by_integer_type!(ty, pick(op), {
        PrimitiveType::Pred if op == Opcode::Not => Some(not_pred),
        _ => None,
    })
}

fn convert_with<S: NativeType, D: NativeType>(
    x: &ArrayData,
    o: &mut ArrayData,
    f: impl Fn(S) -> D,
) -> bool {
    match (S::slice(x), D::slice_mut(o)) {
        (Some(x), Some(o)) if x.len() == o.len() => {
            // `move`: the loop owns `f` and what it captured (a rotation's
            // amount), so the compiler knows the stores cannot change them
            // and keeps them in registers; borrowed, they were reloaded
            // every element and the loop stayed scalar.
            vectorized(o.len(), move || {
                for (o, &x) in o.iter_mut().zip(x) {
                    *o = f(x);
                }
            });
            true
        }
        _ => false,
    }
}

/// [`convert_with`] for conversions, split across the pool for whole
/// arrays (an element-wise kernel's); tiles and small-state loops are far
/// below the threshold.
fn convert_each<S: NativeType, D: NativeType>(
    x: &ArrayData,
    o: &mut ArrayData,
    f: impl Fn(S) -> D + Copy + Send + Sync,
) -> bool {
    match (S::slice(x), D::slice_mut(o)) {
        (Some(x), Some(o)) if x.len() == o.len() => {
            // `move`: the loop owns `f` and what it captured (a rotation's
            // amount), so the compiler knows the stores cannot change them
            // and keeps them in registers; borrowed, they were reloaded
            // every element and the loop stayed scalar.
            let run = move |o: &mut [D], x: &[S]| {
                vectorized(o.len(), move || {
                    for (o, &x) in o.iter_mut().zip(x) {
                        *o = f(x);
                    }
                })
            };
            if o.len() >= super::fused::PARALLEL_MIN {
                use rayon::prelude::*;
                const PIECE: usize = 1 << 14;
                o.par_chunks_mut(PIECE)
                    .zip(x.par_chunks(PIECE))
                    .for_each(|(o, x)| run(o, x));
            } else {
                run(o, x);
            }
            true
        }
        _ => false,
    }
}

/// The typed `convert` from `from` to `to`, for every pair of types but
/// complex ones. Between integers, f32 and f64, Rust's `as` is XLA's rule:
/// integers wrap to narrower integers, integers and f64 round to nearest
/// even into floats, and floats go to integers toward zero, saturating,
/// with NaN as 0. Half types widen exactly and round once to nearest even
/// from f32 (`half`'s conversions, which keep a NaN's sign and leading
/// payload bits as the interpreter's do); integers and f64 reach them
/// through f32 (rounding twice, as XLA:CPU does). Every other pair (predicates) converts through the
/// interpreter's own scalar rule, `NativeType::from_scalar`.
pub(crate) fn convert_fn(from: PrimitiveType, to: PrimitiveType) -> Option<ConvertFn> {
    use PrimitiveType::*;
    use oxla_hlo::half::{bf16, f16};
    if from.is_complex() || to.is_complex() {
        return None;
    }
    let plain =
        |t: PrimitiveType| matches!(t, S8 | S16 | S32 | S64 | U8 | U16 | U32 | U64 | F32 | F64);
    macro_rules! as_to {
        ($s:ty, $($t:ident => $d:ty),*) => {
            match to {
                $($t => Some((|x, o| convert_each::<$s, $d>(x, o, |v| v as $d)) as ConvertFn),)*
                _ => None,
            }
        };
    }
    macro_rules! as_from {
        ($($f:ident => $s:ty),*) => {
            match from {
                $($f => as_to!($s, S8 => i8, S16 => i16, S32 => i32, S64 => i64, U8 => u8,
                    U16 => u16, U32 => u32, U64 => u64, F32 => f32, F64 => f64),)*
                _ => None,
            }
        };
    }
    // A half type from a plain type, through f32.
    macro_rules! half_from {
        ($h:ty, $($f:ident => $s:ty),*) => {
            match from {
                $($f => Some((|x, o| {
                    convert_each::<$s, $h>(x, o, |v| <$h>::from_f32(v as f32))
                }) as ConvertFn),)*
                _ => None,
            }
        };
    }
    // A plain type from a half type, through its exact f32.
    macro_rules! from_half {
        ($h:ty, $($t:ident => $d:ty),*) => {
            match to {
                $($t => Some((|x, o| convert_each::<$h, $d>(x, o, |v| v.to_f32() as $d)) as ConvertFn),)*
                _ => None,
            }
        };
    }
    macro_rules! scalar {
        ($($f:ident => $s:ty),*) => {{
            macro_rules! scalar_to {
                ($ss:ty) => {
                    match to {
                        Pred => Some((|x, o| convert_each::<$ss, bool>(x, o, |v| bool::from_scalar(v.to_scalar()))) as ConvertFn),
                        S8 => Some((|x, o| convert_each::<$ss, i8>(x, o, |v| i8::from_scalar(v.to_scalar()))) as ConvertFn),
                        S16 => Some((|x, o| convert_each::<$ss, i16>(x, o, |v| i16::from_scalar(v.to_scalar()))) as ConvertFn),
                        S32 => Some((|x, o| convert_each::<$ss, i32>(x, o, |v| i32::from_scalar(v.to_scalar()))) as ConvertFn),
                        S64 => Some((|x, o| convert_each::<$ss, i64>(x, o, |v| i64::from_scalar(v.to_scalar()))) as ConvertFn),
                        U8 => Some((|x, o| convert_each::<$ss, u8>(x, o, |v| u8::from_scalar(v.to_scalar()))) as ConvertFn),
                        U16 => Some((|x, o| convert_each::<$ss, u16>(x, o, |v| u16::from_scalar(v.to_scalar()))) as ConvertFn),
                        U32 => Some((|x, o| convert_each::<$ss, u32>(x, o, |v| u32::from_scalar(v.to_scalar()))) as ConvertFn),
                        U64 => Some((|x, o| convert_each::<$ss, u64>(x, o, |v| u64::from_scalar(v.to_scalar()))) as ConvertFn),
                        F16 => Some((|x, o| convert_each::<$ss, f16>(x, o, |v| f16::from_scalar(v.to_scalar()))) as ConvertFn),
                        BF16 => Some((|x, o| convert_each::<$ss, bf16>(x, o, |v| bf16::from_scalar(v.to_scalar()))) as ConvertFn),
                        F32 => Some((|x, o| convert_each::<$ss, f32>(x, o, |v| f32::from_scalar(v.to_scalar()))) as ConvertFn),
                        F64 => Some((|x, o| convert_each::<$ss, f64>(x, o, |v| f64::from_scalar(v.to_scalar()))) as ConvertFn),
                        _ => None,
                    }
                };
            }
            match from {
                $($f => scalar_to!($s),)*
                _ => None,
            }
        }};
    }
    match (from, to) {
        (f, t) if plain(f) && plain(t) => as_from!(S8 => i8, S16 => i16, S32 => i32, S64 => i64,
            U8 => u8, U16 => u16, U32 => u32, U64 => u64, F32 => f32, F64 => f64),
        (f, F16) if plain(f) => half_from!(f16, S8 => i8, S16 => i16, S32 => i32, S64 => i64,
            U8 => u8, U16 => u16, U32 => u32, U64 => u64, F32 => f32, F64 => f64),
        (f, BF16) if plain(f) => half_from!(bf16, S8 => i8, S16 => i16, S32 => i32, S64 => i64,
            U8 => u8, U16 => u16, U32 => u32, U64 => u64, F32 => f32, F64 => f64),
        (F16, t) if plain(t) => from_half!(f16, S8 => i8, S16 => i16, S32 => i32, S64 => i64,
            U8 => u8, U16 => u16, U32 => u32, U64 => u64, F32 => f32, F64 => f64),
        (BF16, t) if plain(t) => from_half!(bf16, S8 => i8, S16 => i16, S32 => i32, S64 => i64,
            U8 => u8, U16 => u16, U32 => u32, U64 => u64, F32 => f32, F64 => f64),
        (F16, BF16) => Some(
            (|x, o| convert_each::<f16, bf16>(x, o, |v| bf16::from_f32(v.to_f32()))) as ConvertFn,
        ),
        (BF16, F16) => Some(
            (|x, o| convert_each::<bf16, f16>(x, o, |v| f16::from_f32(v.to_f32()))) as ConvertFn,
        ),
        _ => scalar!(Pred => bool, S8 => i8, S16 => i16, S32 => i32, S64 => i64, U8 => u8,
            U16 => u16, U32 => u32, U64 => u64, F16 => f16, BF16 => bf16, F32 => f32, F64 => f64),
    }
}

/// The same-width `bitcast-convert` from `from` to `to`: each element's
/// bits read as the other type (32-bit integers and f32, 64-bit integers and
/// f64).
pub(crate) fn bitcast_fn(from: PrimitiveType, to: PrimitiveType) -> Option<ConvertFn> {
    fn cast<S: Lanes, D: Lanes>(x: &ArrayData, o: &mut ArrayData) -> bool {
        convert_with::<S, D>(x, o, |v| D::from_bits(v.to_bits()))
    }
    macro_rules! to {
        ($s:ty, $($t:ident => $d:ty),*) => {
            match to {
                $(PrimitiveType::$t => Some(cast::<$s, $d> as ConvertFn),)*
                _ => None,
            }
        };
    }
    use PrimitiveType::*;
    match from {
        F32 => to!(f32, F32 => f32, S32 => i32, U32 => u32),
        S32 => to!(i32, F32 => f32, S32 => i32, U32 => u32),
        U32 => to!(u32, F32 => f32, S32 => i32, U32 => u32),
        F64 => to!(f64, F64 => f64, S64 => i64, U64 => u64),
        S64 => to!(i64, F64 => f64, S64 => i64, U64 => u64),
        U64 => to!(u64, F64 => f64, S64 => i64, U64 => u64),
        _ => None,
    }
}

/// A reduction of an array (the first argument) from an init value (the
/// second, one element) over a [`Geometry`], into the outputs.
pub(crate) type FoldFn = fn(&ArrayData, &ArrayData, &Geometry, &mut ArrayData) -> bool;

fn fold_typed<T: Lanes + Send + Sync, const OP: u8>(
    x: &ArrayData,
    init: &ArrayData,
    g: &Geometry,
    o: &mut ArrayData,
) -> bool {
    let (Some(x), Some(&[v0]), Some(o)) = (T::slice(x), T::slice(init), T::slice_mut(o)) else {
        return false;
    };
    if x.len() != g.len || o.len() != g.out_count {
        return false;
    }
    let (n, stride) = g.inner();
    g.each(o, |base| {
        let mut acc = v0;
        for start in g.runs(base) {
            acc = if stride == 1 {
                let run = &x[start..start + n];
                vectorized(n, move || {
                    run.iter().fold(acc, |a, &v| T::arith::<OP>(a, v))
                })
            } else {
                (0..n).fold(acc, |a, e| T::arith::<OP>(a, x[start + e * stride]))
            };
        }
        acc
    });
    true
}

/// The fold of `op` over `ty` for integers and predicates, whose result
/// does not depend on the order the elements are combined in (wrapping
/// arithmetic, maximum, minimum and bitwise operations are associative and
/// commutative).
pub(crate) fn fold_fn(op: Opcode, ty: PrimitiveType) -> Option<FoldFn> {
    fn pick<T: Lanes + Send + Sync>(op: Arith) -> Option<FoldFn> {
        Some(match op {
            Arith::Add => fold_typed::<T, ADD>,
            Arith::Mul => fold_typed::<T, MUL>,
            Arith::Max => fold_typed::<T, MAX>,
            Arith::Min => fold_typed::<T, MIN>,
            Arith::And => fold_typed::<T, AND>,
            Arith::Or => fold_typed::<T, OR>,
            Arith::Xor => fold_typed::<T, XOR>,
            _ => return None,
        })
    }
    let op = arith_of(op, ty)?;
    by_integer_type!(ty, pick(op), {
        PrimitiveType::Pred => pick::<bool>(op),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sign` of each value through the typed loop, against `signum`.
    fn signs<T: NativeType + Copy>(values: Vec<T>, want: impl Fn(T) -> T) -> Result<(), String> {
        let ty = T::TYPE;
        let f = unary_fn(Opcode::Sign, ty).ok_or(format!("no sign for {ty:?}"))?;
        // Long enough for the vector loop, with a tail.
        let x: Vec<T> = values.iter().copied().cycle().take(100).collect();
        let mut out = ArrayData::zeros(ty, x.len());
        if !f(&T::wrap(x.clone()), &mut out) {
            return Err(format!("sign of {ty:?} failed"));
        }
        let got = T::slice(&out).ok_or("result type")?;
        for (g, &v) in got.iter().zip(&x) {
            if *g != want(v) {
                return Err(format!("sign of {v:?} ({ty:?}) is {g:?}"));
            }
        }
        Ok(())
    }

    #[test]
    fn remainders_from_quotients_are_xlas_for_every_divisor() -> Result<(), String> {
        let a = [i32::MIN, -7, -1, 0, 1, 7, 13, i32::MAX];
        for d in [5, -3, 1, -1, 0, i32::MIN, i32::MAX] {
            let x = i32::wrap(a.iter().copied().cycle().take(70).collect());
            let f = splat_fn_of(Opcode::Divide, PrimitiveType::S32)?;
            let mut q = ArrayData::zeros(PrimitiveType::S32, 70);
            let mut o = ArrayData::zeros(PrimitiveType::S32, 70);
            let rem = remainder_fn(PrimitiveType::S32).ok_or("no s32 remainder")?;
            if !(f(&x, d as u32 as u64, &mut q) && rem(&x, &q, d as u32 as u64, &mut o)) {
                return Err(format!("division by {d} failed"));
            }
            let xs = i32::slice(&x).ok_or("x")?;
            let got = i32::slice(&o).ok_or("o")?;
            for (g, &v) in got.iter().zip(xs) {
                if *g != int_divide::<i32, REM>(v, d) {
                    return Err(format!("{v} % {d} gave {g}"));
                }
            }
        }
        Ok(())
    }

    /// `op` of `ty` values and one scalar (the array first).
    fn splat_fn_of(op: Opcode, ty: PrimitiveType) -> Result<SplatFn, String> {
        let arith = arith_of(op, ty).ok_or("no arithmetic")?;
        let typed = arith_fn(arith, ty).ok_or("no typed function")?;
        typed
            .splat
            .map(|[f, _]| f)
            .ok_or_else(|| "no splat form".into())
    }

    /// JAX's floor division and modulo of `a` by `d` (not 0), in i64.
    fn floor_pair(a: i64, d: i64) -> (i64, i64) {
        let (q, r) = (a / d, a % d);
        if r != 0 && ((r < 0) != (d < 0)) {
            (q - 1, r + d)
        } else {
            (q, r)
        }
    }

    /// [`floor_fn`] of `ty` over `values` (as i64) by `d`, against
    /// [`floor_pair`], both the quotient and the modulo.
    fn floors_match<T: NativeType + Copy + TryFrom<i64> + Into<i64>>(
        values: &[i64],
        d: i64,
    ) -> Result<(), String> {
        let ty = T::TYPE;
        let of = |v: i64| T::try_from(v).map_err(|_| format!("{v} is not a {ty:?}"));
        let x: Vec<T> = values.iter().map(|&v| of(v)).collect::<Result<_, _>>()?;
        let bits = Into::<i64>::into(of(d)?) as u64;
        for modulo in [false, true] {
            let f = floor_fn(ty, modulo).ok_or(format!("no floor for {ty:?}"))?;
            let mut out = ArrayData::zeros(ty, x.len());
            if !f(&T::wrap(x.clone()), bits, &mut out) {
                return Err(format!("floor of {ty:?} by {d} failed"));
            }
            let got = T::slice(&out).ok_or("result type")?;
            // Results wrap to the type, as XLA's `MIN / -1` does.
            let shift = 64 - 8 * ty.byte_size() as u32;
            for (&g, &a) in got.iter().zip(values) {
                let (q, r) = floor_pair(a, d);
                let want = (if modulo { r } else { q } << shift) >> shift;
                if g.into() != want {
                    let what = if modulo { "mod" } else { "//" };
                    return Err(format!(
                        "{a} {what} {d} ({ty:?}) gave {:?}, not {want}",
                        g.into()
                    ));
                }
            }
        }
        Ok(())
    }

    #[test]
    fn floor_divisions_are_exact_for_every_i8_pair() -> Result<(), String> {
        // Every dividend, in one run of the vector loop and a tail.
        let all: Vec<i64> = (-128..=127).chain(-128..=-60).collect();
        for d in (-128..=127).filter(|&d| d != 0) {
            floors_match::<i8>(&all, d)?;
        }
        Ok(())
    }

    #[test]
    fn floor_divisions_are_exact_near_multiples_and_at_the_extremes() -> Result<(), String> {
        // Near multiples of the divisor a quotient from a rounded
        // reciprocal is most easily one off; dividends around 2^23, 2^24
        // and 2^30, and the extremes (with `MIN // -1` wrapping).
        let limit = 1i64 << 24;
        for d in [
            1i64,
            -1,
            2,
            3,
            5,
            7,
            11,
            100,
            127,
            1000,
            4097,
            65537,
            999_983,
            limit - 1,
            limit,
            limit + 1,
            1 << 30,
            i32::MAX as i64,
            -2,
            -3,
            -7,
            -11,
            -65537,
            -limit,
            -limit - 1,
            i32::MIN as i64,
        ] {
            let mut values = Vec::new();
            for base in [
                0,
                limit,
                -limit,
                limit / 3,
                1 << 23,
                -(1 << 23),
                1 << 30,
                -(1 << 30),
            ] {
                let q = base / d;
                for k in [q - 2, q - 1, q, q + 1, q + 2] {
                    for e in -2..=2 {
                        let v = k * d + e;
                        if (i32::MIN as i64..=i32::MAX as i64).contains(&v) {
                            values.push(v);
                        }
                    }
                }
                for e in -3..=3 {
                    values.push(base + e);
                }
            }
            let mut x = 0x2545_f491_4f6c_dd1du64;
            for _ in 0..600 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                values.push((x % (2 * limit as u64 + 1)) as i64 - limit);
            }
            values.extend([i32::MIN as i64, i32::MAX as i64, -1, 0, 1]);
            // Dividends up to 2^24 take the f32 estimate, runs holding a
            // larger one the f64 quotient: the small ones first, repeated
            // to fill whole runs, so that those take the estimate and the
            // last the quotient.
            let (small, large): (Vec<i64>, Vec<i64>) =
                values.iter().partition(|v| v.abs() <= limit);
            let whole = small.len().next_multiple_of(FLOOR_RUN);
            let ordered: Vec<i64> = small
                .iter()
                .cycle()
                .take(whole)
                .chain(&large)
                .copied()
                .collect();
            floors_match::<i32>(&ordered, d)?;
        }
        Ok(())
    }

    #[test]
    fn floor_divisions_are_exact_for_random_s32_within_the_estimates_range() -> Result<(), String> {
        // Random divisors and dividends up to 2^24 in magnitude, where the
        // f32 estimate is used; small divisors, where the quotient is
        // largest, and divisors near powers of two, whose reciprocals
        // round the most, more often.
        let limit = 1i64 << 24;
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for i in 0..240 {
            let magnitude = match i % 3 {
                0 => 3 + next(1000) as i64,
                1 => (1i64 << next(25)) + next(5) as i64 - 2,
                _ => 1 + next(limit as u64) as i64,
            }
            .clamp(1, limit);
            let d = if i % 2 == 0 { magnitude } else { -magnitude };
            let mut values: Vec<i64> = (0..2048)
                .map(|_| next(2 * limit as u64 + 1) as i64 - limit)
                .collect();
            // Exact multiples, whose estimate can fall just below the
            // quotient: most often the largest, so half near the limit.
            let most = limit / magnitude;
            values.extend((0..2048).map(|j| {
                let k = if j % 2 == 0 {
                    next(most as u64 + 1) as i64
                } else {
                    (most - j / 2).max(0)
                };
                if j % 4 < 2 { k * d } else { -k * d }
            }));
            floors_match::<i32>(&values, d)?;
        }
        Ok(())
    }

    #[test]
    fn floor_divisions_are_exact_for_every_s16_dividend() -> Result<(), String> {
        let all: Vec<i64> = (i16::MIN as i64..=i16::MAX as i64).collect();
        for d in [
            1i64, -1, 2, -2, 3, -3, 7, 10, -10, 127, 255, 256, -257, 4095, 12345, -32768, 32767,
        ] {
            floors_match::<i16>(&all, d)?;
        }
        Ok(())
    }

    #[test]
    fn integer_signs_are_minus_one_zero_or_one_at_every_width() -> Result<(), String> {
        signs(vec![i8::MIN, -7, -1, 0, 1, 9, i8::MAX], i8::signum)?;
        signs(vec![i16::MIN, -300, 0, 300, i16::MAX], i16::signum)?;
        signs(vec![i32::MIN, -5, -1, 0, 1, 3, i32::MAX], i32::signum)?;
        signs(vec![i64::MIN, -1, 0, 1, i64::MAX], i64::signum)?;
        signs(vec![0u32, 1, 7, u32::MAX], |v| u32::from(v != 0))?;
        signs(vec![0u8, 1, 200, u8::MAX], |v| u8::from(v != 0))
    }
}
