//! The fused loop: an element-wise expression over one iteration space,
//! evaluated tile by tile. Leaves read inputs through strided views (so
//! broadcasts, transposes, slices and reshapes are free), generate iota
//! values, or hold constants; each operation of the expression runs over a
//! whole tile (a few hundred elements kept in L1), which the compiler
//! vectorises. The tile loop is compiled three times, for AVX-512, for
//! AVX2 with FMA, and for the baseline, and the best one for the running CPU
//! is chosen once.

use oxla_hlo::half::{bf16, f16};
use oxla_hlo::ir::ComparisonDirection;
use oxla_hlo::{ArrayData, ArrayLiteral, ArrayShape, PrimitiveType};
use rayon::prelude::*;

use super::Kernel;
use super::math;
use super::packed::Packing;
use super::tiled::Element;
use super::view::View;
use crate::buffer::Pool;
use crate::value::Value;

/// Elements per tile: 8 KiB of f64 or 4 KiB of f32 per register.
pub(crate) const TILE: usize = 1024;
/// Elements per tile of a fused loop alone (see [`Scratch::step`]).
const LONE_STEP: usize = 512;
/// Below this many elements a loop runs on one thread.
pub(crate) const PARALLEL_MIN: usize = 1 << 17;

/// bf16 and f16: fused loops compute them in f32, rounding each
/// operation's result back, as XLA:CPU does.
pub(crate) fn is_half(t: PrimitiveType) -> bool {
    matches!(t, PrimitiveType::BF16 | PrimitiveType::F16)
}

/// Where an operation reads a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Src {
    Leaf(usize),
    Reg(usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unary {
    Abs,
    Neg,
    Exp,
    Expm1,
    Log,
    Log1p,
    Logistic,
    Tanh,
    Sqrt,
    Rsqrt,
    Sin,
    Cos,
    Floor,
    Ceil,
    RoundEven,
    RoundAfz,
    Sign,
    Erf,
    /// Logical not of a 0/1 predicate.
    Not,
    /// 1 where finite, 0 elsewhere.
    IsFinite,
    /// The nearest bf16 (ties to even), kept in the loop's type: a bf16
    /// operation is its f32 one rounded, as XLA:CPU computes it.
    RoundBf16,
    /// The nearest f16, likewise.
    RoundF16,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Binary {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
    Pow,
    Rem,
    Atan2,
    /// Logical and/or of 0/1 predicates.
    And,
    Or,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Unary(Unary, Src),
    Binary(Binary, Src, Src),
    /// 1 or 0.
    Compare(ComparisonDirection, Src, Src),
    /// pred ? a : b, with pred a 0/1 value.
    Select(Src, Src, Src),
    /// min(max(x, lo), hi).
    Clamp(Src, Src, Src),
}

impl Op {
    /// The values the operation reads, in operand order.
    pub(crate) fn operands(self) -> impl Iterator<Item = Src> {
        let (a, b, c) = match self {
            Op::Unary(_, a) => (a, None, None),
            Op::Binary(_, a, b) | Op::Compare(_, a, b) => (a, Some(b), None),
            Op::Select(a, b, c) | Op::Clamp(a, b, c) => (a, Some(b), Some(c)),
        };
        std::iter::once(a).chain(b).chain(c)
    }
}

/// One leaf of the expression.
#[derive(Clone, Debug)]
pub(crate) enum Leaf {
    /// Kernel input `input` (of element type `ty`: the loop's type or pred), read through `view`,
    /// whose offset moves by `starts` at run time.
    Input {
        input: usize,
        ty: PrimitiveType,
        view: View,
        starts: Vec<DynamicStart>,
    },
    /// The value `view.offset + index . view.strides` (an iota, after index operations).
    Affine(View),
    /// A constant.
    Scalar(f64),
}

/// A start index read at run time that moves a leaf's offset: a
/// `dynamic-slice` read in place (a `scan` body's slice of its `xs`) instead
/// of copied out first.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct DynamicStart {
    /// The kernel input holding the start, a one-element integer array.
    pub input: usize,
    /// Elements of the input's buffer per unit of the start.
    pub stride: i64,
    /// The largest start that keeps the slice inside its operand; starts
    /// are clamped into `[0, max]`, as `dynamic-slice` clamps them.
    pub max: i64,
}

/// A compiled fused loop.
#[derive(Clone, Debug)]
pub(crate) struct FusedLoop {
    /// The loop's floating-point type (f32 or f64); predicates are 0/1 of it.
    pub ty: PrimitiveType,
    /// The result's element type: `ty` or pred.
    pub out_ty: PrimitiveType,
    pub dims: Vec<i64>,
    pub leaves: Vec<Leaf>,
    /// Each operation writes its own register `dst`.
    pub code: Vec<(Op, usize)>,
    pub result: Src,
    /// A multi-output loop's other results (registers, each with its
    /// element type: `ty`, pred or a half type), written out tile by tile
    /// beside `result` (see [`MultiLoop`]); empty for a loop of one value.
    pub extra: Vec<(Src, PrimitiveType)>,
    pub registers: usize,
}

/// A float type the loop computes in.
pub(crate) trait Float:
    oxla_hlo::NativeType
    + super::minmax::MinMax
    + Copy
    + Default
    + PartialOrd
    + Send
    + Sync
    + 'static
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Neg<Output = Self>
    + std::ops::Rem<Output = Self>
{
    const ZERO: Self;
    fn from_f64(v: f64) -> Self;
    fn from_bool(b: bool) -> Self;
    fn abs(self) -> Self;
    fn sqrt(self) -> Self;
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    fn round_even(self) -> Self;
    fn round_afz(self) -> Self;
    fn sign(self) -> Self;
    fn not(self) -> Self;
    fn is_finite01(self) -> Self;
    /// The nearest bf16 (ties to even; NaN stays NaN, made quiet).
    fn round_bf16(self) -> Self;
    /// The nearest f16 (ties to even).
    fn round_f16(self) -> Self;
    /// `out[i] = round_bf16(a[i])` over a tile (f32 takes the CPU's
    /// conversion where it has one: see [`super::bf16round`]).
    #[inline(always)]
    fn round_bf16_tile(out: &mut [Self], a: &[Self]) {
        map1(out, a, Self::round_bf16);
    }
    /// `out[i] = round_bf16(a[i] op b[i])` over a tile, for `op` one of
    /// add, subtract, multiply and divide (likewise).
    #[inline(always)]
    fn rounded_bf16_tile(op: Binary, out: &mut [Self], a: Arg<'_, Self>, b: Arg<'_, Self>) {
        rounded_bf16_each(op, out, a, b);
    }
    fn from_bf16(v: bf16) -> Self;
    fn from_f16(v: f16) -> Self;
    /// As bf16 or f16: exact for values already rounded to them.
    fn to_bf16(self) -> bf16;
    fn to_f16(self) -> f16;
    fn exp<const FMA: bool>(self) -> Self;
    /// Runs `f` on this thread's spare tile buffers of this type (see
    /// [`Scratch::new`]).
    fn with_spares<R>(f: impl FnOnce(&mut Vec<Vec<Self>>) -> R) -> R;
    /// `exp` of a tile (f32 takes a faster path when the whole tile allows).
    #[inline(always)]
    fn exp_tile<const FMA: bool>(out: &mut [Self], a: &[Self]) {
        map1(out, a, Self::exp::<FMA>);
    }
    /// The range where [`Float::exp_normal`] gives `exp`'s own results,
    /// if the type has such a faster exp.
    const EXP_NORMAL: Option<(Self, Self)> = None;
    /// `exp` of a value inside [`Float::EXP_NORMAL`].
    #[inline(always)]
    fn exp_normal<const FMA: bool>(self) -> Self {
        self.exp::<FMA>()
    }
    fn log<const FMA: bool>(self) -> Self;
    fn tanh<const FMA: bool>(self) -> Self;
    fn logistic<const FMA: bool>(self) -> Self;
    fn erf<const FMA: bool>(self) -> Self;
    fn rsqrt(self) -> Self;
    fn expm1(self) -> Self;
    fn log1p(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn pow(a: Self, b: Self) -> Self;
    fn atan2(a: Self, b: Self) -> Self;
}

macro_rules! float_common {
    ($t:ty) => {
        const ZERO: Self = 0.0;
        fn with_spares<R>(f: impl FnOnce(&mut Vec<Vec<Self>>) -> R) -> R {
            thread_local! {
                static SPARES: std::cell::RefCell<Vec<Vec<$t>>> =
                    const { std::cell::RefCell::new(Vec::new()) };
            }
            SPARES.with(|s| match s.try_borrow_mut() {
                Ok(mut spares) => f(&mut spares),
                // Nothing here re-enters; a busy cell only costs fresh buffers.
                Err(_) => f(&mut Vec::new()),
            })
        }
        #[inline(always)]
        fn from_f64(v: f64) -> Self {
            v as $t
        }
        #[inline(always)]
        fn from_bool(b: bool) -> Self {
            if b { 1.0 } else { 0.0 }
        }
        #[inline(always)]
        fn abs(self) -> Self {
            <$t>::abs(self)
        }
        #[inline(always)]
        fn sqrt(self) -> Self {
            <$t>::sqrt(self)
        }
        #[inline(always)]
        fn floor(self) -> Self {
            <$t>::floor(self)
        }
        #[inline(always)]
        fn ceil(self) -> Self {
            <$t>::ceil(self)
        }
        #[inline(always)]
        fn round_even(self) -> Self {
            <$t>::round_ties_even(self)
        }
        #[inline(always)]
        fn round_afz(self) -> Self {
            <$t>::round(self)
        }
        /// sign(+-0) = +-0 and sign(NaN) = NaN, otherwise +-1.
        #[inline(always)]
        fn sign(self) -> Self {
            if self.is_nan() || self == 0.0 {
                self
            } else {
                (1.0 as $t).copysign(self)
            }
        }
        #[inline(always)]
        fn not(self) -> Self {
            if self == 0.0 { 1.0 } else { 0.0 }
        }
        #[inline(always)]
        fn is_finite01(self) -> Self {
            if self.is_finite() { 1.0 } else { 0.0 }
        }
        // In f64 and rounded once, as the interpreter computes them, so
        // the results agree bit for bit (for f64 this is the plain op).
        #[inline(always)]
        fn rsqrt(self) -> Self {
            (1.0 / (self as f64).sqrt()) as $t
        }
        #[inline(always)]
        fn pow(a: Self, b: Self) -> Self {
            (a as f64).powf(b as f64) as $t
        }
        #[inline(always)]
        fn atan2(a: Self, b: Self) -> Self {
            (a as f64).atan2(b as f64) as $t
        }
    };
}

impl Float for f32 {
    float_common!(f32);
    #[inline(always)]
    fn round_bf16(self) -> f32 {
        // (Choosing the NaN's bits before clearing the low half saves one
        // AVX2 operation in nine; it was reverted together with a change
        // to `eval_tile` after the two slowed row pipelines: see there.)
        let b = self.to_bits();
        let rounded = b.wrapping_add(0x7fff + ((b >> 16) & 1)) & 0xffff_0000;
        let quiet = (b | 0x0040_0000) & 0xffff_0000;
        f32::from_bits(if self.is_nan() { quiet } else { rounded })
    }
    #[inline(always)]
    fn round_f16(self) -> f32 {
        f16::from_f32(self).to_f32()
    }
    #[inline(always)]
    fn round_bf16_tile(out: &mut [f32], a: &[f32]) {
        if !super::bf16round::rounded(None, out, Arg::Slice(a), Arg::Splat(0.0)) {
            map1(out, a, f32::round_bf16);
        }
    }
    #[inline(always)]
    fn rounded_bf16_tile(op: Binary, out: &mut [f32], a: Arg<'_, f32>, b: Arg<'_, f32>) {
        if !super::bf16round::rounded(Some(op), out, a, b) {
            rounded_bf16_each(op, out, a, b);
        }
    }
    #[inline(always)]
    fn from_bf16(v: bf16) -> f32 {
        f32::from_bits((v.to_bits() as u32) << 16)
    }
    #[inline(always)]
    fn from_f16(v: f16) -> f32 {
        v.to_f32()
    }
    #[inline(always)]
    fn to_bf16(self) -> bf16 {
        bf16::from_f32(self)
    }
    #[inline(always)]
    fn to_f16(self) -> f16 {
        f16::from_f32(self)
    }
    #[inline(always)]
    fn exp<const FMA: bool>(self) -> f32 {
        math::exp::<FMA>(self)
    }
    #[inline(always)]
    fn exp_tile<const FMA: bool>(out: &mut [f32], a: &[f32]) {
        math::exp_tile::<FMA>(out, a);
    }
    const EXP_NORMAL: Option<(f32, f32)> = Some(math::EXP_NORMAL);
    #[inline(always)]
    fn exp_normal<const FMA: bool>(self) -> f32 {
        math::exp_normal::<FMA>(self)
    }
    #[inline(always)]
    fn log<const FMA: bool>(self) -> f32 {
        math::log::<FMA>(self)
    }
    #[inline(always)]
    fn tanh<const FMA: bool>(self) -> f32 {
        math::tanh::<FMA>(self)
    }
    #[inline(always)]
    fn logistic<const FMA: bool>(self) -> f32 {
        math::logistic::<FMA>(self)
    }
    #[inline(always)]
    fn erf<const FMA: bool>(self) -> f32 {
        math::erf::<FMA>(self)
    }
    // Rare in hot loops: computed in f64 and rounded once, like the interpreter.
    fn expm1(self) -> f32 {
        (self as f64).exp_m1() as f32
    }
    fn log1p(self) -> f32 {
        (self as f64).ln_1p() as f32
    }
    fn sin(self) -> f32 {
        (self as f64).sin() as f32
    }
    fn cos(self) -> f32 {
        (self as f64).cos() as f32
    }
}

impl Float for f64 {
    float_common!(f64);
    fn round_bf16(self) -> f64 {
        bf16::from_f64(self).to_f64()
    }
    fn round_f16(self) -> f64 {
        f16::from_f64(self).to_f64()
    }
    fn from_bf16(v: bf16) -> f64 {
        v.to_f64()
    }
    fn from_f16(v: f16) -> f64 {
        v.to_f64()
    }
    fn to_bf16(self) -> bf16 {
        bf16::from_f64(self)
    }
    fn to_f16(self) -> f16 {
        f16::from_f64(self)
    }
    fn exp<const FMA: bool>(self) -> f64 {
        f64::exp(self)
    }
    fn log<const FMA: bool>(self) -> f64 {
        self.ln()
    }
    fn tanh<const FMA: bool>(self) -> f64 {
        f64::tanh(self)
    }
    fn logistic<const FMA: bool>(self) -> f64 {
        1.0 / (1.0 + (-self).exp())
    }
    fn erf<const FMA: bool>(self) -> f64 {
        // The interpreter's own, so f64 results agree bit for bit.
        oxla_interp::erf(self)
    }
    fn expm1(self) -> f64 {
        self.exp_m1()
    }
    fn log1p(self) -> f64 {
        self.ln_1p()
    }
    fn sin(self) -> f64 {
        f64::sin(self)
    }
    fn cos(self) -> f64 {
        f64::cos(self)
    }
}

#[inline(always)]
fn map1<T: Copy>(out: &mut [T], a: &[T], f: impl Fn(T) -> T) {
    for (o, &x) in out.iter_mut().zip(a) {
        *o = f(x);
    }
}

/// [`Float::rounded_bf16_tile`] value by value (any `op` other than add,
/// subtract and multiply divides).
#[inline(always)]
fn rounded_bf16_each<T: Float>(op: Binary, out: &mut [T], a: Arg<'_, T>, b: Arg<'_, T>) {
    match op {
        Binary::Add => map2a(out, a, b, |x, y| (x + y).round_bf16()),
        Binary::Sub => map2a(out, a, b, |x, y| (x - y).round_bf16()),
        Binary::Mul => map2a(out, a, b, |x, y| (x * y).round_bf16()),
        _ => map2a(out, a, b, |x, y| (x / y).round_bf16()),
    }
}

#[inline(always)]
fn map2<T: Copy>(out: &mut [T], a: &[T], b: &[T], f: impl Fn(T, T) -> T) {
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = f(x, y);
    }
}

/// An operand of a binary operation over a tile: values, or one value for
/// every position (a scalar, or an input broadcast along the tile), which
/// is then never written out to a buffer.
#[derive(Clone, Copy)]
pub(crate) enum Arg<'s, T> {
    Slice(&'s [T]),
    Splat(T),
}

impl<'s, T: Copy> Arg<'s, T> {
    /// Elements `[at, at + len)`: a part of a slice, the same splat.
    #[inline(always)]
    pub(crate) fn part(self, at: usize, len: usize) -> Arg<'s, T> {
        match self {
            Arg::Slice(s) => Arg::Slice(&s[at..at + len]),
            Arg::Splat(v) => Arg::Splat(v),
        }
    }
}

#[inline(always)]
fn map2a<T: Copy>(out: &mut [T], a: Arg<'_, T>, b: Arg<'_, T>, f: impl Fn(T, T) -> T) {
    // Plain loops rather than `for_each`: with a costly `f`, the closure
    // form's `fold` was left out of line, outside the caller's target
    // features (and calling `fmaf`).
    match (a, b) {
        (Arg::Slice(a), Arg::Slice(b)) => map2(out, a, b, f),
        (Arg::Slice(a), Arg::Splat(y)) => {
            for (o, &x) in out.iter_mut().zip(a) {
                *o = f(x, y);
            }
        }
        (Arg::Splat(x), Arg::Slice(b)) => {
            for (o, &y) in out.iter_mut().zip(b) {
                *o = f(x, y);
            }
        }
        (Arg::Splat(x), Arg::Splat(y)) => out.fill(f(x, y)),
    }
}

/// [`map2a`] of the first of `f`'s results; whether the second held at
/// any position. (One pass: the flag is folded without branches, so the
/// loop vectorises.)
#[inline(always)]
fn map2a_any<T: Copy>(
    out: &mut [T],
    a: Arg<'_, T>,
    b: Arg<'_, T>,
    f: impl Fn(T, T) -> (T, bool),
) -> bool {
    let mut hits = 0u32;
    let mut put = |o: &mut T, (v, hit): (T, bool)| {
        *o = v;
        hits |= u32::from(hit);
    };
    match (a, b) {
        (Arg::Slice(a), Arg::Slice(b)) => {
            for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                put(o, f(x, y));
            }
        }
        (Arg::Slice(a), Arg::Splat(y)) => {
            for (o, &x) in out.iter_mut().zip(a) {
                put(o, f(x, y));
            }
        }
        (Arg::Splat(x), Arg::Slice(b)) => {
            for (o, &y) in out.iter_mut().zip(b) {
                put(o, f(x, y));
            }
        }
        (Arg::Splat(x), Arg::Splat(y)) => {
            let (v, hit) = f(x, y);
            out.fill(v);
            hits = u32::from(hit);
        }
    }
    hits != 0
}

/// The arithmetic a costly function closing a loop reads, run in the
/// function's own pass: one addition, subtraction or product of two
/// operands, or a pair of them over three (see [`FusedLoop::pairs`]).
trait Before<T> {
    /// `out[i] = f(v[i])` of the arithmetic's values `v`.
    fn map(&self, out: &mut [T], f: impl Fn(T) -> T);
    /// [`Before::map`] of the first of `f`'s results; whether the second
    /// held at any position.
    fn map_any(&self, out: &mut [T], f: impl Fn(T) -> (T, bool)) -> bool;
}

/// `g(x, y)`: one operation.
struct OneOp<'a, T, G> {
    x: Arg<'a, T>,
    y: Arg<'a, T>,
    g: G,
}

impl<T: Copy, G: Fn(T, T) -> T + Copy> Before<T> for OneOp<'_, T, G> {
    #[inline(always)]
    fn map(&self, out: &mut [T], f: impl Fn(T) -> T) {
        let g = self.g;
        map2a(out, self.x, self.y, move |p, q| f(g(p, q)))
    }
    #[inline(always)]
    fn map_any(&self, out: &mut [T], f: impl Fn(T) -> (T, bool)) -> bool {
        let g = self.g;
        map2a_any(out, self.x, self.y, move |p, q| f(g(p, q)))
    }
}

/// `g(a, x, y)`: a pair of operations.
struct PairOp<'a, T, G> {
    a: &'a [T],
    x: Arg<'a, T>,
    y: Arg<'a, T>,
    g: G,
}

impl<T: Copy, G: Fn(T, T, T) -> T + Copy> Before<T> for PairOp<'_, T, G> {
    #[inline(always)]
    fn map(&self, out: &mut [T], f: impl Fn(T) -> T) {
        let g = self.g;
        map_pair(out, self.a, self.x, self.y, move |v, x, y| f(g(v, x, y)))
    }
    #[inline(always)]
    fn map_any(&self, out: &mut [T], f: impl Fn(T) -> (T, bool)) -> bool {
        let g = self.g;
        let mut hits = 0u32;
        map_pair(out, self.a, self.x, self.y, |v, x, y| {
            let (r, hit) = f(g(v, x, y));
            hits |= u32::from(hit);
            r
        });
        hits != 0
    }
}

/// `out = u(arithmetic)` in one pass: a costly function closing a loop,
/// of the operation or pair before it (softmax's `exp(x - max)`,
/// `tanh(a * b + c)`). The same values as the operations one after the
/// other; the exp takes its fast form and notes any argument outside its
/// range in the same pass, then redoes the tile in the general form if
/// there was one, as [`Float::exp_tile`] does. For a pair, one pass beat
/// the pair and the function run chunk by chunk of [`CHUNK`] elements:
/// `tanh(a * b + c)` on 4M f32, 4 alternating `oxla bench` runs each on
/// the Xeon, one core 3.11-3.19 ms against 3.27-3.43, two cores 1.59-1.61
/// against 1.69-1.76 (chunks of 32 and 512 were no better than 128).
#[inline(always)]
fn costly_of<T: Float, const FMA: bool>(u: Costly, out: &mut [T], head: impl Before<T>) {
    match u {
        Costly::Exp => match T::EXP_NORMAL {
            Some((lo, hi)) => {
                let outside = head.map_any(out, move |v| {
                    (v.exp_normal::<FMA>(), !(lo..=hi).contains(&v))
                });
                if outside {
                    head.map(out, |v| v.exp::<FMA>());
                }
            }
            None => head.map(out, |v| v.exp::<FMA>()),
        },
        Costly::Log => head.map(out, |v| v.log::<FMA>()),
        Costly::Tanh => head.map(out, |v| v.tanh::<FMA>()),
        Costly::Logistic => head.map(out, |v| v.logistic::<FMA>()),
        Costly::Erf => head.map(out, |v| v.erf::<FMA>()),
    }
}

/// [`costly_of`] one addition, subtraction or product.
#[inline(always)]
fn costly_after<T: Float, const FMA: bool>(
    u: Costly,
    b: Binary,
    out: &mut [T],
    x: Arg<'_, T>,
    y: Arg<'_, T>,
) {
    match b {
        Binary::Add => costly_of::<T, FMA>(
            u,
            out,
            OneOp {
                x,
                y,
                g: |p, q| p + q,
            },
        ),
        Binary::Sub => costly_of::<T, FMA>(
            u,
            out,
            OneOp {
                x,
                y,
                g: |p, q| p - q,
            },
        ),
        _ => costly_of::<T, FMA>(
            u,
            out,
            OneOp {
                x,
                y,
                g: |p, q| p * q,
            },
        ),
    }
}

/// [`costly_of`] `a * x + y`, the pair before an activation (an affine
/// map's output): one pass for this pair alone, as every pair in one pass
/// (nine pairs, five functions, four operand forms) more than tripled the
/// crate's build time; the other pairs run chunk by chunk.
#[inline(always)]
fn costly_after_affine<T: Float, const FMA: bool>(
    u: Costly,
    out: &mut [T],
    a: &[T],
    x: Arg<'_, T>,
    y: Arg<'_, T>,
) {
    costly_of::<T, FMA>(
        u,
        out,
        PairOp {
            a,
            x,
            y,
            g: |v, x, y| v * x + y,
        },
    )
}

#[inline(always)]
fn unary_loop<T: Float, const FMA: bool>(u: Unary, out: &mut [T], a: &[T]) {
    match u {
        Unary::Abs => map1(out, a, T::abs),
        Unary::Neg => map1(out, a, |x| -x),
        Unary::Exp => T::exp_tile::<FMA>(out, a),
        Unary::Expm1 => map1(out, a, T::expm1),
        Unary::Log => map1(out, a, T::log::<FMA>),
        Unary::Log1p => map1(out, a, T::log1p),
        Unary::Logistic => map1(out, a, T::logistic::<FMA>),
        Unary::Tanh => map1(out, a, T::tanh::<FMA>),
        Unary::Sqrt => map1(out, a, T::sqrt),
        Unary::Rsqrt => map1(out, a, T::rsqrt),
        Unary::Sin => map1(out, a, T::sin),
        Unary::Cos => map1(out, a, T::cos),
        Unary::Floor => map1(out, a, T::floor),
        Unary::Ceil => map1(out, a, T::ceil),
        Unary::RoundEven => map1(out, a, T::round_even),
        Unary::RoundAfz => map1(out, a, T::round_afz),
        Unary::Sign => map1(out, a, T::sign),
        Unary::Erf => map1(out, a, T::erf::<FMA>),
        Unary::Not => map1(out, a, T::not),
        Unary::IsFinite => map1(out, a, T::is_finite01),
        Unary::RoundBf16 => T::round_bf16_tile(out, a),
        Unary::RoundF16 => map1(out, a, T::round_f16),
    }
}

/// `out = round(x op y)`, rounding to f16 or else bf16 (the rounded pairs
/// of [`FusedLoop::rounded`]).
#[inline(always)]
fn rounded_loop<T: Float>(op: Binary, f16: bool, out: &mut [T], a: Arg<'_, T>, b: Arg<'_, T>) {
    match (op, f16) {
        (_, false) => T::rounded_bf16_tile(op, out, a, b),
        (Binary::Add, true) => map2a(out, a, b, |x, y| (x + y).round_f16()),
        (Binary::Sub, true) => map2a(out, a, b, |x, y| (x - y).round_f16()),
        (Binary::Mul, true) => map2a(out, a, b, |x, y| (x * y).round_f16()),
        (_, true) => map2a(out, a, b, |x, y| (x / y).round_f16()),
    }
}

#[inline(always)]
fn binary_loop<T: Float>(op: Binary, out: &mut [T], a: Arg<'_, T>, b: Arg<'_, T>) {
    match op {
        Binary::Add => map2a(out, a, b, |x, y| x + y),
        Binary::Sub => map2a(out, a, b, |x, y| x - y),
        Binary::Mul => map2a(out, a, b, |x, y| x * y),
        Binary::Div => map2a(out, a, b, |x, y| x / y),
        Binary::Max => map2a(out, a, b, |x, y| binary(Binary::Max, x, y)),
        Binary::Min => map2a(out, a, b, |x, y| binary(Binary::Min, x, y)),
        Binary::Pow => map2a(out, a, b, T::pow),
        Binary::Rem => map2a(out, a, b, |x, y| x % y),
        Binary::Atan2 => map2a(out, a, b, T::atan2),
        Binary::And => map2a(out, a, b, |x, y| T::from_bool(x != T::ZERO && y != T::ZERO)),
        Binary::Or => map2a(out, a, b, |x, y| T::from_bool(x != T::ZERO || y != T::ZERO)),
    }
}

/// Whether register `reg`'s value (as it is before `code[from]`) is read
/// from `code[from]` on (until an operation writes the register again), or
/// is one of the loop `f`'s results.
fn read_after(f: &FusedLoop, from: usize, reg: usize) -> bool {
    let r = Src::Reg(reg);
    for &(op, dst) in f.code.iter().skip(from) {
        if op.operands().any(|s| s == r) {
            return true;
        }
        if dst == reg {
            return false;
        }
    }
    f.is_result(r)
}

/// The registers an operation reads: every register but the one it writes
/// (which no operation reads, see [`FusedLoop::pairs`]), through the map
/// from registers to their buffers ([`Scratch::phys`]). Borrowing around
/// the written buffer, rather than moving it out of the list and back,
/// keeps the buffers' headers in place: a move and a swap of them each
/// operation made the next reads wait on the stores (store forwarding
/// fails on the mixed sizes), 15% of the samples of an Adam step in tiles
/// of 64.
#[derive(Clone, Copy)]
struct Regs<'a, T> {
    lo: &'a [Vec<T>],
    hi: &'a [Vec<T>],
    /// The written buffer (`lo.len()`), or past the end if none.
    at: usize,
    phys: &'a [usize],
}

impl<'a, T> Regs<'a, T> {
    /// All the registers, for reading.
    fn all(regs: &'a [Vec<T>], phys: &'a [usize]) -> Regs<'a, T> {
        Regs {
            lo: regs,
            hi: &[],
            at: usize::MAX,
            phys,
        }
    }

    /// Register `r`'s buffer to write, and the others to read.
    fn split(regs: &'a mut [Vec<T>], phys: &'a [usize], r: usize) -> (&'a mut [T], Regs<'a, T>) {
        let at = phys[r];
        let (lo, rest) = regs.split_at_mut(at);
        // Cannot fail: `r` and `phys` range over the loop's registers, which
        // its compiler numbered (not the module's text), and
        // `Scratch::new` made a buffer for each.
        let (out, hi) = rest.split_first_mut().expect("a register of the loop");
        (out, Regs { lo, hi, at, phys })
    }

    #[inline(always)]
    fn get(self, r: usize) -> &'a [T] {
        let q = self.phys[r];
        match q.cmp(&self.at) {
            std::cmp::Ordering::Less => &self.lo[q],
            std::cmp::Ordering::Greater => &self.hi[q - self.at - 1],
            std::cmp::Ordering::Equal => &[],
        }
    }
}

/// Positions `range` of what `s` names in a tile: a leaf's values, or a
/// register's.
#[inline(always)]
fn values<'a, T>(
    s: Src,
    leaves: &[&'a [T]],
    regs: Regs<'a, T>,
    range: std::ops::Range<usize>,
) -> &'a [T] {
    match s {
        Src::Leaf(i) => &leaves[i][range],
        Src::Reg(r) => &regs.get(r)[range],
    }
}

/// Positions `range` of an operand: a leaf with one value across the tile
/// as a splat, otherwise as [`values`].
#[inline(always)]
fn operand<'a, T: Copy>(
    s: Src,
    leaves: &[&'a [T]],
    regs: Regs<'a, T>,
    splats: &[Option<T>; INLINE_LEAVES],
    range: std::ops::Range<usize>,
) -> Arg<'a, T> {
    match s {
        Src::Leaf(i) => match splats.get(i).copied().flatten() {
            Some(v) => Arg::Splat(v),
            None => Arg::Slice(&leaves[i][range]),
        },
        Src::Reg(_) => Arg::Slice(values(s, leaves, regs, range)),
    }
}

/// The arithmetic before a closing costly function (see `eval_tile`).
#[derive(Clone, Copy, Debug)]
enum Head {
    Pair(Binary, Src, Src, Binary, Src),
    One(Binary, Src, Src),
}

/// Elements per chunk where a closing costly function runs chunk by chunk
/// with the arithmetic before it. Running every operation of a loop with
/// a costly function chunk by chunk, wherever the function stands, was
/// slower: dispatching each operation per chunk took `tanh(a * b + c)` on
/// one core from 1.73 ms to 2.3 ms, and `x * logistic(x)` from 1.63 ms to
/// 1.92 ms (XLA: 1.68-1.80 ms).
const CHUNK: usize = 128;

/// The functions that cost more than the loads of their operands: those a
/// closing function runs in one pass or chunk by chunk with the arithmetic
/// before it.
#[derive(Clone, Copy, Debug)]
enum Costly {
    Exp,
    Log,
    Tanh,
    Logistic,
    Erf,
}

fn costly(u: Unary) -> Option<Costly> {
    match u {
        Unary::Exp => Some(Costly::Exp),
        Unary::Log => Some(Costly::Log),
        Unary::Tanh => Some(Costly::Tanh),
        Unary::Logistic => Some(Costly::Logistic),
        Unary::Erf => Some(Costly::Erf),
        _ => None,
    }
}

/// `out = (a b1 x) b2 y` for the pairs of [`FusedLoop::pairs`]: each of
/// `b1` and `b2` is an addition, subtraction or product.
#[inline(always)]
fn pair_loop<T: Float>(
    b1: Binary,
    b2: Binary,
    out: &mut [T],
    a: &[T],
    x: Arg<'_, T>,
    y: Arg<'_, T>,
) {
    use Binary::{Add, Sub};
    match (b1, b2) {
        (Add, Add) => map_pair(out, a, x, y, |v, x, y| v + x + y),
        (Add, Sub) => map_pair(out, a, x, y, |v, x, y| v + x - y),
        (Add, _) => map_pair(out, a, x, y, |v, x, y| (v + x) * y),
        (Sub, Add) => map_pair(out, a, x, y, |v, x, y| v - x + y),
        (Sub, Sub) => map_pair(out, a, x, y, |v, x, y| v - x - y),
        (Sub, _) => map_pair(out, a, x, y, |v, x, y| (v - x) * y),
        (_, Add) => map_pair(out, a, x, y, |v, x, y| v * x + y),
        (_, Sub) => map_pair(out, a, x, y, |v, x, y| v * x - y),
        (_, _) => map_pair(out, a, x, y, |v, x, y| v * x * y),
    }
}

/// `out = t * t` with `t = a b1 x`: the square pairs of
/// [`FusedLoop::pairs`] (a variance's `(x - mean)^2`).
#[inline(always)]
fn square_pair<T: Float>(b1: Binary, out: &mut [T], a: &[T], x: Arg<'_, T>) {
    #[inline(always)]
    fn go<T: Copy + std::ops::Mul<Output = T>>(
        out: &mut [T],
        a: &[T],
        x: Arg<'_, T>,
        f: impl Fn(T, T) -> T,
    ) {
        let ov = out.iter_mut().zip(a);
        match x {
            Arg::Slice(x) => ov.zip(x).for_each(|((o, &v), &x)| {
                let t = f(v, x);
                *o = t * t
            }),
            Arg::Splat(x) => ov.for_each(|(o, &v)| {
                let t = f(v, x);
                *o = t * t
            }),
        }
    }
    match b1 {
        Binary::Add => go(out, a, x, |v, x| v + x),
        Binary::Sub => go(out, a, x, |v, x| v - x),
        _ => go(out, a, x, |v, x| v * x),
    }
}

#[inline(always)]
fn map_pair<T: Copy>(
    out: &mut [T],
    a: &[T],
    x: Arg<'_, T>,
    y: Arg<'_, T>,
    mut f: impl FnMut(T, T, T) -> T,
) {
    // Plain loops, as in `map2a`.
    match (x, y) {
        (Arg::Slice(x), Arg::Slice(y)) => {
            for (((o, &v), &x), &y) in out.iter_mut().zip(a).zip(x).zip(y) {
                *o = f(v, x, y);
            }
        }
        (Arg::Slice(x), Arg::Splat(y)) => {
            for ((o, &v), &x) in out.iter_mut().zip(a).zip(x) {
                *o = f(v, x, y);
            }
        }
        (Arg::Splat(x), Arg::Slice(y)) => {
            for ((o, &v), &y) in out.iter_mut().zip(a).zip(y) {
                *o = f(v, x, y);
            }
        }
        (Arg::Splat(x), Arg::Splat(y)) => {
            for (o, &v) in out.iter_mut().zip(a) {
                *o = f(v, x, y);
            }
        }
    }
}

#[inline(always)]
fn compare_loop<T: Float>(dir: ComparisonDirection, out: &mut [T], a: Arg<'_, T>, b: Arg<'_, T>) {
    match dir {
        ComparisonDirection::Eq => map2a(out, a, b, |x, y| T::from_bool(x == y)),
        ComparisonDirection::Ne => map2a(out, a, b, |x, y| T::from_bool(x != y)),
        ComparisonDirection::Lt => map2a(out, a, b, |x, y| T::from_bool(x < y)),
        ComparisonDirection::Le => map2a(out, a, b, |x, y| T::from_bool(x <= y)),
        ComparisonDirection::Gt => map2a(out, a, b, |x, y| T::from_bool(x > y)),
        ComparisonDirection::Ge => map2a(out, a, b, |x, y| T::from_bool(x >= y)),
    }
}

#[inline(always)]
fn binary<T: Float>(op: Binary, a: T, b: T) -> T {
    match op {
        Binary::Add => a + b,
        Binary::Sub => a - b,
        Binary::Mul => a * b,
        Binary::Div => a / b,
        Binary::Max => super::minmax::max(a, b),
        Binary::Min => super::minmax::min(a, b),
        Binary::Pow => T::pow(a, b),
        Binary::Rem => a % b,
        Binary::Atan2 => T::atan2(a, b),
        Binary::And => T::from_bool(a != T::ZERO && b != T::ZERO),
        Binary::Or => T::from_bool(a != T::ZERO || b != T::ZERO),
    }
}

/// The iteration space with adjacent dimensions merged where every view
/// allows it, so the innermost run is as long as possible.
#[derive(Clone, Debug)]
pub(crate) struct Space {
    pub dims: Vec<usize>,
    /// Per leaf with a view: the strides over `dims`, and the offset.
    pub strides: Vec<Vec<i64>>,
    pub offsets: Vec<i64>,
}

pub(crate) fn coalesce(dims: &[i64], views: &[&View]) -> Space {
    coalesce_classes(dims, views, &vec![false; dims.len()]).0
}

/// Like [`coalesce`], merging only neighbours of the same class (a reduction
/// keeps kept and reduced dimensions apart); returns each merged dimension's class.
pub(crate) fn coalesce_classes(
    dims: &[i64],
    views: &[&View],
    classes: &[bool],
) -> (Space, Vec<bool>) {
    let mut out_dims: Vec<usize> = Vec::new();
    let mut out_classes: Vec<bool> = Vec::new();
    let mut strides: Vec<Vec<i64>> = vec![Vec::new(); views.len()];
    for (d, &size) in dims.iter().enumerate() {
        if size == 1 {
            continue;
        }
        let mergeable = out_classes.last() == Some(&classes[d])
            && views
                .iter()
                .zip(&strides)
                .all(|(v, s)| s.last().is_some_and(|&prev| prev == v.strides[d] * size));
        if mergeable {
            let last = out_dims.len() - 1;
            out_dims[last] *= size as usize;
            for (v, s) in views.iter().zip(strides.iter_mut()) {
                let k = s.len() - 1;
                s[k] = v.strides[d];
            }
        } else {
            out_dims.push(size as usize);
            out_classes.push(classes[d]);
            for (v, s) in views.iter().zip(strides.iter_mut()) {
                s.push(v.strides[d]);
            }
        }
    }
    if out_dims.is_empty() {
        out_dims.push(1);
        out_classes.push(false);
        strides.iter_mut().for_each(|s| s.push(0));
    }
    (
        Space {
            dims: out_dims,
            strides,
            offsets: views.iter().map(|v| v.offset).collect(),
        },
        out_classes,
    )
}

/// Per-thread scratch: one tile per register and per gathered leaf.
/// Leaves up to this many are listed on the stack in `eval_tile`.
pub(crate) const INLINE_LEAVES: usize = 16;

pub(crate) struct Scratch<T: Float> {
    /// Elements each register and leaf buffer holds: the longest tile.
    cap: usize,
    regs: Vec<Vec<T>>,
    /// Per register, the buffer in `regs` that holds it: a pair or a
    /// rounded operation writes the first operation's register and then
    /// takes the second's, by swapping their entries here.
    phys: Vec<usize>,
    leaves: Vec<Vec<T>>,
    /// Whether some operation reads the leaf as values (not only binary
    /// operations and comparisons, which take splats), or it is the result.
    leaf_as_slice: Vec<bool>,
    /// Write results with non-temporal stores (see [`STREAM_MIN_BYTES`]).
    pub(crate) stream: bool,
    /// Take 256-bit vectors even where the CPU has AVX-512 (see
    /// [`FusedLoop::streams_cheaply`]).
    pub(crate) narrow: bool,
    /// Per operation: whether it runs in one loop with the next (see
    /// [`FusedLoop::pairs`]).
    pairs: Vec<bool>,
    /// Per operation: whether it runs in one loop with the rounding after
    /// it (see [`FusedLoop::rounded`]).
    rounds: Vec<bool>,
    /// The steps of a tile (see [`plan`]), and the kind of tile they were
    /// planned for.
    plan: Vec<(usize, Step)>,
    kind: Option<TileKind>,
    /// The lines of a tile each step hints (see [`shares`]), for tiles of
    /// `share_lines` lines.
    shares: Vec<(usize, usize)>,
    share_lines: usize,
    /// Elements per tile, at most [`TILE`]. Each operation of a tile is a
    /// pass over it, so a tile's last passes, which read only registers,
    /// leave memory idle; a fused loop alone takes shorter tiles
    /// ([`LONE_STEP`]) to keep its input streams going. On one core
    /// (alternating `oxla bench` runs) `tanh(a * b + c)` on 4M f32 took
    /// 2.35-2.45 ms with 512-element tiles against 3.7-4.4 ms with 1024,
    /// and `-(a * b + c)` 1.8 ms against 2.0-2.4 (minimums); 256 was no
    /// better than 512. A loop of one pass (one operation, or one pair)
    /// has no such passes and keeps full tiles: `[4096, 1024] + [1024]`
    /// took 0.97-1.04 ms with 1024-element tiles against 1.09-1.14 ms with
    /// 512 (medians of 4 alternating pairs, one core). Row pipelines, whose
    /// blocks are in cache, keep full tiles: softmax took 1.7 ms with 512
    /// against 1.35 ms.
    ///
    /// The passes themselves are what still separates a long loop from a
    /// hand-written one. An Adam step (four f32[4096, 1024] inputs, three
    /// streamed outputs, a dozen operations a tile) took 3.8-4.4 ms here
    /// on two threads (XLA 3.9-4.7); the same arithmetic as one pass, every
    /// value in registers and the outputs streamed as they are computed,
    /// took 2.1-2.3 ms, and written as passes over 512-element tiles
    /// (copied out, the next tile hinted) 3.1-3.5 ms (stand-alone loops,
    /// 30 November 2026). Tiles of 1024 made no difference beyond the
    /// host's noise (3.77-4.37 ms against 4.03-4.22), tiles of 256 were
    /// slower (4.9-5.2), and lines aligned to pages instead of 64 bytes
    /// changed nothing (3.85-4.24 against 3.90-4.40). What the stand-alone
    /// passes did show is that small tiles recover almost all of it when a
    /// pass costs nothing beyond its loop: in a later run, with no hints
    /// spread over the passes, over 64 or 128 elements they took 2.27-2.40
    /// ms against 4.5 ms over 512 (one pass: 2.0), and 3.8 to 4.1 against
    /// 8.0 on one core (one pass: 2.6). Taking each tile's decisions
    /// (pairing, rounding, the closing function) once per loop ([`plan`])
    /// and its prefetch shares once per tile length ([`shares`]) did not
    /// make small tiles pay here: on the AVX2 EPYC (Zen 3) of 1 December
    /// 2026 that Adam step took 4.1-4.4 ms with tiles of 512, 5.4-8.4 with
    /// 256, 8.2-12.8 with 128 and 12.9-14.8 with 64 on two threads
    /// (alternating runs of one build; 9.6 against 15.8 ms for 512 and 128
    /// on one core). The profile of tiles of 128 has no single cost: the
    /// loads of the passes wait longer, and the helpers left out of line
    /// (the operands' slices) take about an eighth of the samples.
    pub(crate) step: usize,
    /// Run a costly function that closes the loop chunk by chunk with the
    /// pair of operations before it (see `eval_tile`): set for loops alone,
    /// whose inputs stream from memory. Row pipelines' blocks are in cache,
    /// where the chunks only cost (softmax on 512 rows, one core: 0.25 ms
    /// against 0.245).
    pub(crate) chunk_costly: bool,
    /// Hint the next tile of each contiguous input into cache, a share of
    /// it before each operation ([`shares`]): set for loops alone
    /// with at least [`PREFETCH_PASSES`] passes a tile, whose later passes
    /// read only registers and so leave memory idle, for longer than the
    /// hardware's prefetchers run ahead.
    pub(crate) prefetch: bool,
    /// Lines to hint before each tile, for a row pipeline's next block.
    pub(crate) ahead: Ahead,
    /// Room for one row's view offsets, reused from call to call rather
    /// than allocated each time (a row pipeline calls each of its stages
    /// once a block).
    pub(crate) offsets: Vec<i64>,
}

/// Loops alone with this many passes over a tile or more prefetch their
/// inputs' next tile ([`Scratch::prefetch`]). In alternating `oxla bench`
/// runs over three f32[4096, 1024] inputs (medians, two threads), a
/// four-pass f32 loop took 2.63 ms against 3.15 without, a five-pass one
/// 3.07 against 3.94, the seven-pass bf16 `(a * b + c - a) * b` 3.70
/// against 6.10; with three passes it cost (3.13 against 2.66 ms), and
/// with two (3.95 against 2.91), as it did for `tanh(a * b + c)` (2.19
/// against 1.54 ms): there the hardware's prefetchers keep up alone.
const PREFETCH_PASSES: usize = 4;

/// The byte address, in each contiguous input leaf (the first
/// [`INLINE_LEAVES`]), of the tile at column `col`: the lines each step of
/// a tile hints into cache, its share of the next tile's (see
/// [`Scratch::prefetch`]), are counted from these. Returns how many.
#[inline(always)]
fn next_tile<T>(
    sources: &[Source<'_, T>],
    space: &Space,
    offsets: &[i64],
    col: usize,
    at: &mut [usize; INLINE_LEAVES],
) -> usize {
    let mut n = 0;
    for src in sources {
        if let Source::Data(d, vi) = *src
            && space.strides[vi].last() == Some(&1)
            && let Ok(base) = usize::try_from(offsets[vi] + col as i64)
            && let Some(tile) = d.get(base..)
            && n < INLINE_LEAVES
        {
            at[n] = tile.as_ptr() as usize;
            n += 1;
        }
    }
    n
}

/// Each step's share of the lines of a tile: the operation at position `at`
/// of `ops` takes lines `[at * lines / ops, (at + 1) * lines / ops)`.
/// Computed once per plan and tile length, not per step of every tile:
/// there the divisions and the leaves' checks took a tenth of the samples
/// of an Adam step in tiles of 128.
fn shares(steps: &[(usize, Step)], ops: usize, lines: usize, out: &mut Vec<(usize, usize)>) {
    out.clear();
    let ops = ops.max(1);
    out.extend(
        steps
            .iter()
            .map(|&(at, _)| (at * lines / ops, (at + 1) * lines / ops)),
    );
}

/// Memory a row pipeline hints into cache while it computes: the next block
/// of rows of its inputs, a few lines before each tile (or reduced row) of
/// every stage. Between blocks the hardware's prefetchers would otherwise
/// idle while the stages compute in cache, and the first stage of each
/// block would wait for memory; a block's lines spread over its tiles
/// overlap that wait with the arithmetic. (A stand-alone layer-norm-shaped
/// pipeline on one core, blocks of 128 KiB: 3.40 ms without, 2.80 ms with
/// a line every 64 elements, and the same with 16 lines before each
/// 1024-element row; two cores 1.96 against 1.67 ms. Issuing a block's
/// lines in one burst per stage was slower than none. Hinting into the
/// second-level cache only, or as non-temporal, instead of the first
/// made no difference beyond this host's noise to bf16 layer norm on two
/// threads: 1.35-1.69 ms into the first, 1.34-1.98 ms into the second, in
/// six alternating runs each on 30 November 2026.)
#[derive(Clone, Debug, Default)]
pub(crate) struct Ahead {
    /// Byte address ranges `[start, end)` still to hint, the next last.
    ranges: Vec<(usize, usize)>,
    /// Lines hinted per tile.
    per_tile: usize,
}

impl Ahead {
    /// Hints `ranges` (byte addresses, in order), `per_tile` lines before
    /// each tile from now on.
    pub(crate) fn start(
        &mut self,
        ranges: impl DoubleEndedIterator<Item = (usize, usize)>,
        per_tile: usize,
    ) {
        self.ranges.clear();
        self.ranges.extend(ranges.rev().filter(|(a, b)| a < b));
        self.per_tile = if self.ranges.is_empty() { 0 } else { per_tile };
    }

    /// Stops hinting (what is left is dropped).
    pub(crate) fn stop(&mut self) {
        self.ranges.clear();
        self.per_tile = 0;
    }

    /// Before a tile: the next share of lines.
    #[inline(always)]
    pub(crate) fn step(&mut self) {
        if self.per_tile != 0 {
            self.hint();
        }
    }

    fn hint(&mut self) {
        self.take(prefetch_line);
    }

    /// Passes the addresses of the next share of lines to `each`.
    fn take(&mut self, mut each: impl FnMut(usize)) {
        let mut n = self.per_tile;
        while n > 0 {
            let Some(r) = self.ranges.last_mut() else {
                self.per_tile = 0;
                return;
            };
            let lines = n.min((r.1 - r.0).div_ceil(64));
            (0..lines).for_each(|k| each(r.0 + 64 * k));
            r.0 += 64 * lines;
            if r.0 >= r.1 {
                self.ranges.pop();
            }
            n -= lines;
        }
    }
}

/// Hints the cache line at byte address `at` into the first-level cache.
#[inline(always)]
pub(crate) fn prefetch_line(at: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is part of x86_64, and a prefetch only hints: it never
    // faults, whatever the address, and changes no memory.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(std::ptr::without_provenance::<i8>(at));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

impl<T: Float> Scratch<T> {
    /// The longest tile this scratch has room for.
    pub(crate) fn cap(&self) -> usize {
        self.cap
    }

    /// Room for tiles of up to `len` elements (at most a full tile).
    pub(crate) fn new(f: &FusedLoop, len: usize) -> Scratch<T> {
        let len = len.min(TILE);
        let mut leaf_as_slice = vec![false; f.leaves.len()];
        // Splats are tracked for the first INLINE_LEAVES leaves only.
        leaf_as_slice
            .iter_mut()
            .skip(INLINE_LEAVES)
            .for_each(|b| *b = true);
        let mut mark = |s: Src| {
            if let Src::Leaf(i) = s
                && let Some(b) = leaf_as_slice.get_mut(i)
            {
                *b = true;
            }
        };
        for &(op, _) in &f.code {
            match op {
                Op::Binary(..) | Op::Compare(..) => {}
                Op::Unary(_, a) => mark(a),
                Op::Select(a, b, c) | Op::Clamp(a, b, c) => {
                    mark(a);
                    mark(b);
                    mark(c);
                }
            }
        }
        mark(f.result);
        f.extra.iter().for_each(|&(s, _)| mark(s));
        let pairs = f.pairs();
        // Buffers of earlier scratches on this thread, zeroed: a loop in a
        // `while` body runs once an iteration, and allocating its tiles
        // each time (calloc, free, and the allocator consolidating) took
        // about 3% of scan_rnn's samples.
        let (regs, leaves) = T::with_spares(|spares| {
            let mut buffer = || {
                let mut v = spares.pop().unwrap_or_default();
                v.clear();
                v.resize(len, T::ZERO);
                v
            };
            let regs: Vec<Vec<T>> = (0..f.registers).map(|_| buffer()).collect();
            let leaves: Vec<Vec<T>> = (0..f.leaves.len()).map(|_| buffer()).collect();
            (regs, leaves)
        });
        Scratch {
            cap: len,
            regs,
            phys: (0..f.registers).collect(),
            leaves,
            leaf_as_slice,
            stream: false,
            narrow: false,
            rounds: f.rounded(&pairs),
            pairs,
            plan: Vec::new(),
            kind: None,
            shares: Vec::new(),
            share_lines: usize::MAX,
            step: TILE,
            chunk_costly: false,
            prefetch: false,
            ahead: Ahead::default(),
            offsets: Vec::new(),
        }
    }
}

/// Spare buffers kept per thread: enough for the largest loops' registers
/// and leaves, at most a tile each.
const MAX_SPARES: usize = 64;

impl<T: Float> Drop for Scratch<T> {
    fn drop(&mut self) {
        let (regs, leaves) = (
            std::mem::take(&mut self.regs),
            std::mem::take(&mut self.leaves),
        );
        T::with_spares(|spares| {
            for v in regs.into_iter().chain(leaves) {
                if spares.len() < MAX_SPARES && v.capacity() <= TILE {
                    spares.push(v);
                }
            }
        });
    }
}

impl FusedLoop {
    /// Whether `s` is one of the loop's results.
    pub(crate) fn is_result(&self, s: Src) -> bool {
        self.result == s || self.extra.iter().any(|&(e, _)| e == s)
    }

    /// What each leaf reads, resolved against the kernel's inputs.
    pub(crate) fn resolve<'a, T: Float>(
        &self,
        inputs: &[&'a ArrayLiteral],
    ) -> Result<Vec<Source<'a, T>>, String> {
        self.resolve_with(|input, ty| {
            let a = inputs.get(input).ok_or("missing kernel input")?;
            input_data(a, ty).ok_or_else(|| {
                format!(
                    "input {input} has element type {}, not {ty}",
                    a.element_type()
                )
            })
        })
    }

    /// The sources of the leaves, with `get(input, type)` giving the data
    /// of each kernel input a leaf reads.
    pub(crate) fn resolve_with<'a, T: Float>(
        &self,
        get: impl Fn(usize, PrimitiveType) -> Result<Input<'a, T>, String>,
    ) -> Result<Vec<Source<'a, T>>, String> {
        let mut sources: Vec<Source<'a, T>> = Vec::with_capacity(self.leaves.len());
        self.resolve_into(&mut sources, get)?;
        Ok(sources)
    }

    /// [`FusedLoop::resolve_with`] into `sources` (emptied first).
    pub(crate) fn resolve_into<'a, T: Float>(
        &self,
        sources: &mut Vec<Source<'a, T>>,
        get: impl Fn(usize, PrimitiveType) -> Result<Input<'a, T>, String>,
    ) -> Result<(), String> {
        sources.clear();
        let mut view_index = 0usize;
        for leaf in &self.leaves {
            sources.push(match leaf {
                Leaf::Scalar(v) => Source::Scalar(T::from_f64(*v)),
                Leaf::Affine(_) => {
                    view_index += 1;
                    Source::Affine(view_index - 1)
                }
                Leaf::Input { input, ty, .. } => {
                    view_index += 1;
                    match get(*input, *ty)? {
                        Input::Data(d) => Source::Data(d, view_index - 1),
                        Input::Pred(p) => Source::Pred(p, view_index - 1),
                        Input::Bf16(h) => Source::Bf16(h, view_index - 1),
                        Input::F16(h) => Source::F16(h, view_index - 1),
                    }
                }
            });
        }
        Ok(())
    }

    /// Whether the loop, run on its own, does too little arithmetic per
    /// element to be anything but a stream through memory: no polynomial
    /// function, root or division. Such loops take 256-bit vectors. On
    /// Zen 5 a stream with 512-bit loads and stores ran 20% slower
    /// (`[4096, 1024] + [1024]` on one core: 0.86 ms against 0.68 ms, in
    /// alternating `oxla bench` runs; 64-byte aligned buffers changed
    /// nothing), while loops that compute (tanh in cache: 0.10 ms against
    /// 0.135 ms) gain from the wider vectors. Roundings to bf16 (eight
    /// integer and mask operations each) count as computing: a chain of
    /// four bf16 operations on three f32[4096, 1024] took 4.8-5.2 ms on two
    /// threads with 512-bit vectors against 5.3-6.3 ms with 256-bit ones.
    pub(crate) fn streams_cheaply(&self) -> bool {
        self.code.iter().all(|&(op, _)| match op {
            Op::Unary(u, _) => matches!(
                u,
                Unary::Abs
                    | Unary::Neg
                    | Unary::Floor
                    | Unary::Ceil
                    | Unary::RoundEven
                    | Unary::RoundAfz
                    | Unary::Sign
                    | Unary::Not
                    | Unary::IsFinite
            ),
            Op::Binary(b, ..) => matches!(
                b,
                Binary::Add
                    | Binary::Sub
                    | Binary::Mul
                    | Binary::Max
                    | Binary::Min
                    | Binary::And
                    | Binary::Or
            ),
            Op::Compare(..) | Op::Select(..) | Op::Clamp(..) => true,
        })
    }

    /// Which operations run in one loop with the next: an addition,
    /// subtraction or product whose result only the next operation reads,
    /// itself one of those three with the first result as its first
    /// operand (only the first: with two NaNs, x86 keeps the first one's
    /// payload, so operands are never swapped). A tile evaluates
    /// each operation as a pass over the tile, loading its operands and
    /// storing its result; a pair makes one pass, and computes the same
    /// values (each operation still rounds its own result). Layer norm's
    /// last stage, `(x - mean) * rstd * scale + bias`, is two pairs: alone,
    /// one fused pass took it from 3.2 ms to 2.7 ms on one core.
    pub(crate) fn pairs(&self) -> Vec<bool> {
        let arith = |b: Binary| matches!(b, Binary::Add | Binary::Sub | Binary::Mul);
        let code = &self.code;
        let mut pairs = vec![false; code.len()];
        let mut at = 0;
        while at + 1 < code.len() {
            let (first, d1) = code[at];
            let (second, d2) = code[at + 1];
            let r = Src::Reg(d1);
            let ok = match (first, second) {
                (Op::Binary(b1, a, x), Op::Binary(b2, p, q)) => {
                    arith(b1)
                        && arith(b2)
                        && p == r
                        && (q != r || b2 == Binary::Mul)
                        && a != r
                        && x != r
                        && d1 != d2
                        && !read_after(self, at + 2, d1)
                }
                _ => false,
            };
            if ok {
                pairs[at] = true;
                at += 2;
            } else {
                at += 1;
            }
        }
        pairs
    }

    /// Which operations run in one loop with the rounding to bf16 or f16
    /// that follows them: an arithmetic operation (not the second of a
    /// pair) whose result only that rounding reads. Every bf16 or f16
    /// operation of a loop is its f32 operation and a rounding (as XLA:CPU
    /// computes them), so without this each costs two passes over the tile.
    /// `pairs` is [`FusedLoop::pairs`].
    pub(crate) fn rounded(&self, pairs: &[bool]) -> Vec<bool> {
        let code = &self.code;
        let mut rounds = vec![false; code.len()];
        for at in 0..code.len().saturating_sub(1) {
            let (first, d1) = code[at];
            let (second, d2) = code[at + 1];
            let second_of_pair = at > 0 && pairs[at - 1];
            rounds[at] = match (first, second) {
                (
                    Op::Binary(Binary::Add | Binary::Sub | Binary::Mul | Binary::Div, ..),
                    Op::Unary(Unary::RoundBf16 | Unary::RoundF16, r),
                ) => {
                    !pairs[at]
                        && !second_of_pair
                        && r == Src::Reg(d1)
                        && d1 != d2
                        && !read_after(self, at + 2, d1)
                }
                _ => false,
            };
        }
        rounds
    }

    /// Whether some leaf's offset moves with start indices read at run time.
    pub(crate) fn has_dynamic_starts(&self) -> bool {
        self.leaves
            .iter()
            .any(|l| matches!(l, Leaf::Input { starts, .. } if !starts.is_empty()))
    }

    /// The leaves' views with their offsets moved by the dynamic starts
    /// read from `inputs`.
    fn moved_views(&self, inputs: &[&ArrayLiteral]) -> Result<Vec<View>, String> {
        let mut views = Vec::with_capacity(self.leaves.len());
        for leaf in &self.leaves {
            match leaf {
                Leaf::Input { view, starts, .. } => {
                    let mut view = view.clone();
                    for s in starts {
                        let index = inputs
                            .get(s.input)
                            .map(|a| a.data())
                            .filter(|d| d.len() == 1)
                            .ok_or("a dynamic start is not a one-element array")?;
                        let start = super::slices::index_at(index, 0).clamp(0, s.max.into());
                        view.offset += start as i64 * s.stride;
                    }
                    views.push(view);
                }
                Leaf::Affine(view) => views.push(view.clone()),
                Leaf::Scalar(_) => {}
            }
        }
        Ok(views)
    }

    pub(crate) fn views(&self) -> Vec<&View> {
        self.leaves
            .iter()
            .filter_map(|l| match l {
                Leaf::Input { view, .. } | Leaf::Affine(view) => Some(view),
                Leaf::Scalar(_) => None,
            })
            .collect()
    }

    /// The loop's results over its whole space: the main one, then the
    /// others (`extra`) in order.
    fn execute<T: Float>(
        &self,
        inputs: &[&ArrayLiteral],
        pool: &Pool,
    ) -> Result<Vec<ArrayLiteral>, String> {
        let n: usize = self.dims.iter().map(|&d| d as usize).product();
        let moved;
        let views = if self.has_dynamic_starts() {
            moved = self.moved_views(inputs)?;
            moved.iter().collect()
        } else {
            self.views()
        };
        let space = coalesce(&self.dims, &views);
        let inner = *space.dims.last().unwrap_or(&1);
        let rows = n / inner.max(1);
        let regs = self
            .extra
            .iter()
            .map(|&(s, _)| match s {
                Src::Reg(r) => Ok(r),
                Src::Leaf(_) => Err("a multi-output loop result that is not computed".to_string()),
            })
            .collect::<Result<Vec<usize>, String>>()?;
        let mut out = pool.take::<T>(n);
        let mut others: Vec<Vec<T>> = regs.iter().map(|_| pool.take::<T>(n)).collect();
        self.run_rows::<T>(inputs, &space, &mut out, &regs, &mut others, rows, inner)?;
        std::iter::once((out, self.out_ty))
            .chain(others.into_iter().zip(self.extra.iter().map(|e| e.1)))
            .map(|(values, ty)| self.literal(values, ty, pool))
            .collect()
    }

    /// A result's array of element type `ty` from its values in the loop's type.
    fn literal<T: Float>(
        &self,
        out: Vec<T>,
        ty: PrimitiveType,
        pool: &Pool,
    ) -> Result<ArrayLiteral, String> {
        let shape = ArrayShape::new(ty, self.dims.clone()).map_err(|e| e.to_string())?;
        let data = if ty == PrimitiveType::Pred {
            let preds = ArrayData::Pred(out.iter().map(|&v| v != T::ZERO).collect());
            pool.give(out);
            preds
        } else if ty == PrimitiveType::BF16 {
            let halves = ArrayData::BF16(out.iter().map(|&v| v.to_bf16()).collect());
            pool.give(out);
            halves
        } else if ty == PrimitiveType::F16 {
            let halves = ArrayData::F16(out.iter().map(|&v| v.to_f16()).collect());
            pool.give(out);
            halves
        } else {
            T::wrap(out)
        };
        ArrayLiteral::new(shape, data).map_err(|e| e.to_string())
    }

    /// Runs the loop over `rows` rows of `inner` elements into `out`, and
    /// the other results, from registers `regs`, into `others`.
    #[allow(clippy::too_many_arguments)]
    fn run_rows<T: Float>(
        &self,
        inputs: &[&ArrayLiteral],
        space: &Space,
        out: &mut [T],
        regs: &[usize],
        others: &mut [Vec<T>],
        rows: usize,
        inner: usize,
    ) -> Result<(), String> {
        let sources = self.resolve::<T>(inputs)?;
        let row_len = inner;
        // Outputs that could not stay in the last-level cache are written
        // with non-temporal stores (see `streams_traffic`), which save the
        // read of each line a plain store first makes. On an AVX2 EPYC
        // with 16 MiB of L3 (compare.py, XLA in the same runs)
        // broadcast_add took 1.09 ms streamed against 1.63 ms plain (XLA
        // 1.59-1.66), an Adam step's three f32[4096, 1024] outputs 5.60
        // against 7.81 ms (XLA 7.09-7.43), and fused_tanh was a wash (2.84
        // against 2.77). Where the cache can hold them, plain stores keep
        // them there: on an earlier host with a larger cache, broadcast_add
        // took 0.60-0.99 ms with them against 0.85-1.13 ms streamed.
        let narrow = self.streams_cheaply();
        let pairs = self.pairs();
        let fused = pairs
            .iter()
            .chain(&self.rounded(&pairs))
            .filter(|&&p| p)
            .count();
        let passes = self.code.len() - fused;
        let step = if passes > 1 { LONE_STEP } else { TILE };
        let read = data_bytes(inputs.iter().map(|a| a.data()));
        let stream = streams_traffic(
            std::mem::size_of_val(out).saturating_mul(1 + others.len()),
            read,
        );
        // A loop alone's scratch, for tiles of up to `len` elements.
        let lone = |len: usize| {
            let mut scratch = Scratch::new(self, len);
            scratch.narrow = narrow;
            scratch.step = step;
            scratch.chunk_costly = true;
            scratch.prefetch = passes >= PREFETCH_PASSES;
            scratch.stream = stream;
            scratch
        };
        let work = |first_row: usize, chunk: &mut [T], other: Vec<&mut [T]>| {
            // Room for a whole tile where rows are short (see `Packing`).
            let mut scratch = lone(step.min(chunk.len()).max(row_len));
            let rows_here = chunk.len() / row_len.max(1);
            let mut extra = Extra::new(chunk, regs, other);
            dispatch(
                self,
                space,
                &sources,
                first_row,
                rows_here,
                row_len,
                chunk,
                &mut extra,
                &mut scratch,
            );
            if stream {
                store_fence();
            }
        };
        let n = out.len();
        if n >= PARALLEL_MIN && rows > 1 {
            let threads = rayon::current_num_threads().max(1);
            let rows_per_task = rows.div_ceil(threads * 4).max(1);
            parts(out, others, rows_per_task * row_len)
                .into_par_iter()
                .enumerate()
                .for_each(|(i, (chunk, other))| work(i * rows_per_task, chunk, other));
        } else if n >= PARALLEL_MIN && row_len >= PARALLEL_MIN {
            // One long row: split it into parts, each starting at a tile boundary.
            let threads = rayon::current_num_threads().max(1);
            let part = row_len.div_ceil(threads * 4).div_ceil(TILE) * TILE;
            parts(out, others, part)
                .into_par_iter()
                .enumerate()
                .for_each(|(i, (chunk, other))| {
                    let mut scratch = lone(step.min(chunk.len()));
                    let mut extra = Extra::new(chunk, regs, other);
                    dispatch_span(
                        self,
                        space,
                        &sources,
                        i * part,
                        chunk,
                        &mut extra,
                        &mut scratch,
                    );
                    if stream {
                        store_fence();
                    }
                });
        } else {
            let other = others.iter_mut().map(|o| &mut o[..]).collect();
            work(0, out, other);
        }
        Ok(())
    }
}

/// `out` split into parts of `size` elements, each with the same part of
/// each of `others` (of `out`'s length).
fn parts<'a, T>(
    out: &'a mut [T],
    others: &'a mut [Vec<T>],
    size: usize,
) -> Vec<(&'a mut [T], Vec<&'a mut [T]>)> {
    let size = size.max(1);
    let mut parts: Vec<(&mut [T], Vec<&mut [T]>)> = out
        .chunks_mut(size)
        .map(|c| (c, Vec::with_capacity(others.len())))
        .collect();
    for o in others.iter_mut() {
        for (p, c) in parts.iter_mut().zip(o.chunks_mut(size)) {
            p.1.push(c);
        }
    }
    parts
}

/// The data of one kernel input.
pub(crate) enum Input<'a, T> {
    Data(&'a [T]),
    Pred(&'a [bool]),
    Bf16(&'a [bf16]),
    F16(&'a [f16]),
}

/// `a`'s data as a leaf of type `ty` reads it (the loop's type, or pred).
pub(crate) fn input_data<T: Float>(a: &ArrayLiteral, ty: PrimitiveType) -> Option<Input<'_, T>> {
    match a.data() {
        ArrayData::Pred(p) if ty == PrimitiveType::Pred => Some(Input::Pred(p)),
        ArrayData::BF16(h) if ty == PrimitiveType::BF16 => Some(Input::Bf16(h)),
        ArrayData::F16(h) if ty == PrimitiveType::F16 => Some(Input::F16(h)),
        _ if matches!(
            ty,
            PrimitiveType::Pred | PrimitiveType::BF16 | PrimitiveType::F16
        ) =>
        {
            None
        }
        data => T::slice(data).map(Input::Data),
    }
}

/// Fills `buf` with leaf data of another type (pred, bf16, f16) read
/// through view `vi` from column `col` of the row at `offsets`, converted:
/// one value for a broadcast, a straight run, or strided reads.
#[inline(always)]
fn widen<T: Copy, U: Copy>(
    buf: &mut [T],
    data: &[U],
    space: &Space,
    offsets: &[i64],
    vi: usize,
    col: usize,
    convert: impl Fn(U) -> T,
) {
    let s = *space.strides[vi].last().unwrap_or(&0);
    let base = offsets[vi] + col as i64 * s;
    if s == 0 {
        buf.fill(convert(data[base as usize]));
    } else if s == 1 {
        let run = &data[base as usize..base as usize + buf.len()];
        for (b, &v) in buf.iter_mut().zip(run) {
            *b = convert(v);
        }
    } else {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = convert(data[(base + i as i64 * s) as usize]);
        }
    }
}

/// What a leaf reads.
#[derive(Clone, Copy)]
pub(crate) enum Source<'a, T> {
    Data(&'a [T], usize),
    Pred(&'a [bool], usize),
    /// Half-precision data, widened tile by tile.
    Bf16(&'a [bf16], usize),
    F16(&'a [f16], usize),
    Affine(usize),
    Scalar(T),
    /// The current tile's values, gathered beforehand (see `rows_generic`).
    Tile(&'a [T]),
}

macro_rules! multiversion {
    ($name:ident, $span:ident) => {
        pub(crate) fn $name<T: Float>(
            f: &FusedLoop,
            space: &Space,
            sources: &[Source<'_, T>],
            first_row: usize,
            rows: usize,
            row_len: usize,
            out: &mut [T],
            extra: &mut Extra<'_, T>,
            scratch: &mut Scratch<T>,
        ) {
            #[cfg(target_arch = "x86_64")]
            {
                if !scratch.narrow && std::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the CPU supports AVX-512F (checked just above).
                    return unsafe {
                        rows_avx512(
                            f, space, sources, first_row, rows, row_len, out, extra, scratch,
                        )
                    };
                }
                if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                    // SAFETY: the CPU supports AVX2 and FMA (checked just above).
                    return unsafe {
                        rows_avx2(
                            f, space, sources, first_row, rows, row_len, out, extra, scratch,
                        )
                    };
                }
            }
            rows_generic::<T, false>(
                f, space, sources, first_row, rows, row_len, out, extra, scratch,
            )
        }

        /// A contiguous part `[start, start + out.len())` of a single-row space.
        pub(crate) fn $span<T: Float>(
            f: &FusedLoop,
            space: &Space,
            sources: &[Source<'_, T>],
            start: usize,
            out: &mut [T],
            extra: &mut Extra<'_, T>,
            scratch: &mut Scratch<T>,
        ) {
            #[cfg(target_arch = "x86_64")]
            {
                if !scratch.narrow && std::is_x86_feature_detected!("avx512f") {
                    // SAFETY: as above.
                    return unsafe { span_avx512(f, space, sources, start, out, extra, scratch) };
                }
                if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                    // SAFETY: as above.
                    return unsafe { span_avx2(f, space, sources, start, out, extra, scratch) };
                }
            }
            span_generic::<T, false>(f, space, sources, start, out, extra, scratch)
        }
    };
}

multiversion!(dispatch, dispatch_span);

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
unsafe fn rows_avx512<T: Float>(
    f: &FusedLoop,
    space: &Space,
    sources: &[Source<'_, T>],
    first_row: usize,
    rows: usize,
    row_len: usize,
    out: &mut [T],
    extra: &mut Extra<'_, T>,
    scratch: &mut Scratch<T>,
) {
    rows_generic::<T, true>(
        f, space, sources, first_row, rows, row_len, out, extra, scratch,
    )
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_avx2<T: Float>(
    f: &FusedLoop,
    space: &Space,
    sources: &[Source<'_, T>],
    first_row: usize,
    rows: usize,
    row_len: usize,
    out: &mut [T],
    extra: &mut Extra<'_, T>,
    scratch: &mut Scratch<T>,
) {
    rows_generic::<T, true>(
        f, space, sources, first_row, rows, row_len, out, extra, scratch,
    )
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
unsafe fn span_avx512<T: Float>(
    f: &FusedLoop,
    space: &Space,
    sources: &[Source<'_, T>],
    start: usize,
    out: &mut [T],
    extra: &mut Extra<'_, T>,
    scratch: &mut Scratch<T>,
) {
    span_generic::<T, true>(f, space, sources, start, out, extra, scratch)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn span_avx2<T: Float>(
    f: &FusedLoop,
    space: &Space,
    sources: &[Source<'_, T>],
    start: usize,
    out: &mut [T],
    extra: &mut Extra<'_, T>,
    scratch: &mut Scratch<T>,
) {
    span_generic::<T, true>(f, space, sources, start, out, extra, scratch)
}

/// Offset of each view at the start of row `row` (rows enumerate all but
/// the innermost dimension), written into `out` (reused from row to row).
pub(crate) fn row_offsets(space: &Space, row: usize, out: &mut Vec<i64>) {
    out.clear();
    out.extend_from_slice(&space.offsets);
    let outer = &space.dims[..space.dims.len() - 1];
    let mut r = row;
    for k in (0..outer.len()).rev() {
        let i = (r % outer[k]) as i64;
        r /= outer[k];
        for (o, strides) in out.iter_mut().zip(&space.strides) {
            *o += i * strides[k];
        }
    }
}

/// Rows gathered together where a leaf reads down columns (see
/// [`reads_down_columns`]): a 64-byte line holds 16 f32 of a column.
const BLOCK_ROWS: usize = super::copy::BLOCK_K;
/// Columns gathered at a time for such a leaf (at most a tile). The rows
/// of the other leaves are read in runs this long, which the prefetchers
/// follow better the longer they are: `(a + a^T) / 2` on f32[2048, 2048]
/// took 4.9, 3.1, 2.3 and 2.3 ms with 128, 256, 512 and 1024 (two threads).
const BLOCK_WIDTH: usize = 512;
/// Columns ahead whose line the gather of such a leaf prefetches.
const GATHER_AHEAD: usize = 16;

/// Whether leaf `src` steps across lines along a row and stays within one
/// down a column (a transposed operand, as in `a + a^T`). Read row by row,
/// such a leaf takes a line per element and, with power-of-two row
/// lengths, finds it evicted when the next row wants its next element (the
/// lines of a column fall in one set of L1): `(a + a^T) / 2` on
/// f32[2048, 2048] took 14.3 ms on two threads that way. `rows_generic`
/// gathers it a block of rows at a time, reading each line once.
fn reads_down_columns<T>(space: &Space, src: &Source<'_, T>) -> bool {
    const LINE: usize = 64;
    let n = space.dims.len();
    let Source::Data(_, vi) = *src else {
        return false;
    };
    let Some(&[down_column, along_row]) = space
        .strides
        .get(vi)
        .and_then(|s| s.get(n.wrapping_sub(2)..))
    else {
        return false;
    };
    let bytes_apart =
        |stride: i64| (stride.unsigned_abs() as usize).saturating_mul(std::mem::size_of::<T>());
    bytes_apart(along_row) >= LINE && bytes_apart(down_column) < LINE
}

/// `buf[r * pitch + c] = d[bases[r] + c * s]` for `r < bases.len()` and
/// `c < len`: a block of rows of a leaf read down columns. Where the rows
/// are [`BLOCK_ROWS`] neighbours in `d` (a transposed operand), whole
/// lines at a time, transposed in registers; otherwise element by element.
#[inline(always)]
fn gather_columns<T: Copy>(
    d: &[T],
    bases: &[i64],
    s: i64,
    len: usize,
    buf: &mut [T],
    pitch: usize,
) {
    // Each column's line is one load's latency; keep several in flight.
    let prefetch = |c: usize| {
        if let Ok(at) = usize::try_from(bases[0] + (c + GATHER_AHEAD) as i64 * s) {
            super::gather::prefetch(d, at, 1);
        }
    };
    let mut c = 0;
    let neighbours =
        bases.len() == super::copy::BLOCK_K && bases.iter().zip(bases[0]..).all(|(&b, n)| b == n);
    if neighbours {
        let per = 64 / std::mem::size_of::<T>().max(1);
        while c + per <= len {
            (c..c + per).for_each(prefetch);
            if !super::copy::square::block(d, bases[0] + c as i64 * s, s, buf, c, pitch) {
                break;
            }
            c += per;
        }
    }
    for c in c..len {
        prefetch(c);
        let at = c as i64 * s;
        for (r, b) in bases.iter().enumerate() {
            buf[r * pitch + c] = d[(b + at) as usize];
        }
    }
}

/// Rows `[first_row, first_row + rows)` in blocks of [`BLOCK_ROWS`], a
/// column block of [`BLOCK_WIDTH`] at a time, with the leaves read down
/// columns gathered for the whole block first, line by line.
#[inline(always)]
fn row_blocks<T: Float, const FMA: bool>(
    f: &FusedLoop,
    space: &Space,
    sources: &[Source<'_, T>],
    first_row: usize,
    rows: usize,
    row_len: usize,
    out: &mut [T],
    extra: &mut Extra<'_, T>,
    scratch: &mut Scratch<T>,
) {
    let width = BLOCK_WIDTH.min(scratch.step);
    // A gathered row's start in its buffer: a line past a multiple of the
    // width, so the rows' lines fall in different sets of L1.
    let pitch = width + 64 / std::mem::size_of::<T>().max(1);
    let mut offsets: Vec<Vec<i64>> = (0..BLOCK_ROWS)
        .map(|_| Vec::with_capacity(space.offsets.len()))
        .collect();
    let mut gathered: Vec<Vec<T>> = sources
        .iter()
        .map(|s| {
            if reads_down_columns(space, s) {
                vec![T::ZERO; BLOCK_ROWS * pitch]
            } else {
                Vec::new()
            }
        })
        .collect();
    let inner = space.dims.len() - 1;
    let mut r0 = 0;
    while r0 < rows {
        let rb = BLOCK_ROWS.min(rows - r0);
        for (r, o) in offsets[..rb].iter_mut().enumerate() {
            row_offsets(space, first_row + r0 + r, o);
        }
        let mut start = 0;
        while start < row_len {
            let len = width.min(row_len - start);
            for (src, buf) in sources.iter().zip(&mut gathered) {
                if let (Source::Data(d, vi), false) = (*src, buf.is_empty()) {
                    let s = space.strides[vi][inner];
                    let mut bases = [0i64; BLOCK_ROWS];
                    for (b, o) in bases.iter_mut().zip(&offsets[..rb]) {
                        *b = o[vi] + start as i64 * s;
                    }
                    gather_columns(d, &bases[..rb], s, len, buf, pitch);
                }
            }
            let mut row_sources = sources.to_vec();
            for (r, o) in offsets[..rb].iter().enumerate() {
                for (rs, buf) in row_sources.iter_mut().zip(&gathered) {
                    if !buf.is_empty() {
                        *rs = Source::Tile(&buf[r * pitch..r * pitch + len]);
                    }
                }
                let at = (r0 + r) * row_len + start;
                tile::<T, FMA>(
                    f,
                    space,
                    &row_sources,
                    o,
                    start,
                    &mut out[at..at + len],
                    extra,
                    scratch,
                );
            }
            start += len;
        }
        r0 += rb;
    }
}

#[inline(always)]
fn rows_generic<T: Float, const FMA: bool>(
    f: &FusedLoop,
    space: &Space,
    sources: &[Source<'_, T>],
    first_row: usize,
    rows: usize,
    row_len: usize,
    out: &mut [T],
    extra: &mut Extra<'_, T>,
    scratch: &mut Scratch<T>,
) {
    if rows > 1 && sources.iter().any(|s| reads_down_columns(space, s)) {
        return row_blocks::<T, FMA>(
            f, space, sources, first_row, rows, row_len, out, extra, scratch,
        );
    }
    let mut offsets = std::mem::take(&mut scratch.offsets);
    if rows > 1
        && let Some(mut pack) = Packing::new(space, sources, scratch.step.min(scratch.cap))
    {
        // Short rows: several to a tile.
        let mut r = 0;
        while r < rows {
            let k = pack.rows_at(first_row + r, rows - r);
            row_offsets(space, first_row + r, &mut offsets);
            pack.fill(space, sources, &offsets, k);
            let packed = pack.sources(sources);
            tile::<T, FMA>(
                f,
                &pack.space,
                &packed[..sources.len()],
                &offsets,
                0,
                &mut out[r * row_len..(r + k) * row_len],
                extra,
                scratch,
            );
            r += k;
        }
        scratch.offsets = offsets;
        return;
    }
    for r in 0..rows {
        row_offsets(space, first_row + r, &mut offsets);
        let row = &mut out[r * row_len..(r + 1) * row_len];
        let mut start = 0;
        while start < row_len {
            let len = scratch.step.min(row_len - start);
            tile::<T, FMA>(
                f,
                space,
                sources,
                &offsets,
                start,
                &mut row[start..start + len],
                extra,
                scratch,
            );
            start += len;
        }
    }
    scratch.offsets = offsets;
}

#[inline(always)]
fn span_generic<T: Float, const FMA: bool>(
    f: &FusedLoop,
    space: &Space,
    sources: &[Source<'_, T>],
    start: usize,
    out: &mut [T],
    extra: &mut Extra<'_, T>,
    scratch: &mut Scratch<T>,
) {
    let offsets = &space.offsets;
    let mut done = 0;
    while done < out.len() {
        let len = scratch.step.min(out.len() - done);
        tile::<T, FMA>(
            f,
            space,
            sources,
            offsets,
            start + done,
            &mut out[done..done + len],
            extra,
            scratch,
        );
        done += len;
    }
}

/// Row-pipeline and gather outputs at least this large (and see
/// [`streams_traffic`]) are written with non-temporal stores: they would
/// not stay in cache anyway, and a plain store first reads each line it
/// writes (on Zen 4, STREAM triad runs at 30 GB/s with plain stores and
/// 40 GB/s with non-temporal ones; layer norm took 1.5-1.9 ms streamed
/// against 2.1-2.4 ms plain in alternating runs on a loaded host).
/// Streaming a pipeline's rows as they are computed leaves the whole
/// output to its last stage; computing each block of them into a buffer
/// in cache instead, and streaming it out a share before each tile of the
/// next block's earlier stages, was slower: bf16 layer norm over
/// f32[4096, 1024] took 1.44-1.83 ms against 1.31-1.44 on two threads,
/// 2.70-2.92 against 2.35-2.68 on one (alternating runs of one build, 30
/// November 2026). The extra pass through the buffer costs more than the
/// spread-out stores save.
pub(crate) const STREAM_MIN_BYTES: usize = 8 << 20;

/// The last-level cache's size, as `gemm` reads it (sysfs on Linux, cpuid
/// elsewhere, defaults failing those).
fn last_level_cache_bytes() -> usize {
    gemm_common::cache::CACHE_INFO[2].cache_bytes
}

/// `OXLA_STREAM_MIN_BYTES`, where set: the smallest output streamed,
/// whatever the cache (for a host whose memory the rule of
/// [`streams_traffic`] misjudges, or to compare the two kinds of store on
/// one binary).
fn stream_override() -> Option<usize> {
    static MIN: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *MIN.get_or_init(|| {
        std::env::var("OXLA_STREAM_MIN_BYTES")
            .ok()
            .and_then(|v| v.parse().ok())
    })
}

/// Whether a kernel writing `out` should stream it (non-temporal stores),
/// reading about as much as it writes.
pub(crate) fn streams<T>(out: &[T]) -> bool {
    let bytes = std::mem::size_of_val(out);
    streams_traffic(bytes, bytes)
}

/// Whether a kernel that writes `written` bytes of outputs and reads `read`
/// bytes of inputs should stream its outputs: when they are at least
/// [`STREAM_MIN_BYTES`] and the whole working set is at least a sixth of
/// the last-level cache. Below that the cache holds inputs and outputs
/// from one execution to the next, and plain stores, which leave the
/// output there for its reader, win; above it the cache does not hold
/// them, and each plain store first reads the line it writes. On a Xeon
/// with 480 MiB of L3 (shared with the host's other tenants), over
/// f32[4096,1024] operands (16 MiB each; `OXLA_STREAM_MIN_BYTES` set to 1
/// or to more than any output, alternating `oxla bench` runs of one
/// binary, medians of 40): softmax and layer norm (32 MiB in all) took
/// 1.50-1.60 and 1.21-1.27 ms plain against 1.56-1.93 and 1.26-1.28
/// streamed; fused_tanh (64 MiB, 16 written) 1.29-1.33 against 1.44-1.52;
/// a loop of two inputs and two outputs (64 MiB) 1.74-1.98 against
/// 1.71-1.94; one of four inputs and one output (80 MiB) 1.91-2.83
/// against 1.79-2.66; one of three inputs and two outputs (80 MiB)
/// 2.09-2.32 against 1.82-2.07; one of four inputs and three outputs (112
/// MiB) 4.10-4.62 against 2.67-2.85; and an Adam step (the same traffic)
/// 4.88-5.79 against 3.63-3.82 ms (XLA 4.3-4.5). On Zen 4 (32 MiB of L3)
/// a sixth is below [`STREAM_MIN_BYTES`], and every output of 8 MiB or
/// more streams, which won there by 20%.
pub(crate) fn streams_traffic(written: usize, read: usize) -> bool {
    let wanted = match stream_override() {
        Some(min) => written >= min,
        None => {
            written >= STREAM_MIN_BYTES
                && written.saturating_add(read) >= last_level_cache_bytes() / 6
        }
    };
    wanted && avx_streams()
}

/// The bytes `arrays` hold in all.
pub(crate) fn data_bytes<'a>(arrays: impl IntoIterator<Item = &'a ArrayData>) -> usize {
    arrays
        .into_iter()
        .map(|a| a.len().saturating_mul(a.element_type().byte_size()))
        .sum()
}

/// Whether this CPU has the non-temporal stores the copies use.
fn avx_streams() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Orders a thread's non-temporal stores before whatever it does next
/// (such as signalling that its part of an output is done).
pub(crate) fn store_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SFENCE is part of SSE, which every x86_64 CPU has.
    unsafe {
        std::arch::x86_64::_mm_sfence();
    }
}

/// Copies `src` to `dst` (the same length), with non-temporal stores where
/// the CPU has AVX (callers decide with [`streams`], and fence after).
pub(crate) fn copy_streamed<T: Copy>(src: &[T], dst: &mut [T]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx") && src.len() == dst.len() {
        // SAFETY: AVX was just detected.
        unsafe { stream_copy(src, dst) };
        return;
    }
    dst.copy_from_slice(src);
}

/// Copies `src` to `dst` (the same length) with non-temporal stores: whole
/// 64-byte lines at a time where the CPU has AVX-512F, 32 bytes otherwise.
/// (Softmax over f32[4096,1024] took 1.74 ms with 64-byte streamed stores
/// against 2.06 ms with 32-byte ones, median of 8 alternating runs; layer
/// norm 1.28 against 1.38 ms.)
///
/// # Safety
/// The CPU must support AVX.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn stream_copy<T: Copy>(src: &[T], dst: &mut [T]) {
    // SAFETY: AVX-512F is detected for the one, AVX by the caller for the other.
    unsafe {
        if std::is_x86_feature_detected!("avx512f") {
            stream_copy_512(src, dst)
        } else {
            stream_copy_256(src, dst)
        }
    }
}

/// [`stream_copy`] with 32-byte stores.
///
/// # Safety
/// The CPU must support AVX.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn stream_copy_256<T: Copy>(src: &[T], dst: &mut [T]) {
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm256_stream_si256};
    let n = std::mem::size_of_val(src).min(std::mem::size_of_val(dst));
    let s = src.as_ptr().cast::<u8>();
    let d = dst.as_mut_ptr().cast::<u8>();
    let head = d.align_offset(32).min(n);
    // SAFETY: every access is within the first `n` bytes of both slices,
    // which do not overlap (one is borrowed shared, the other mutably), and
    // the streamed stores are 32-byte aligned.
    unsafe {
        std::ptr::copy_nonoverlapping(s, d, head);
        let mut i = head;
        while i + 32 <= n {
            let v = _mm256_loadu_si256(s.add(i).cast::<__m256i>());
            _mm256_stream_si256(d.add(i).cast::<__m256i>(), v);
            i += 32;
        }
        std::ptr::copy_nonoverlapping(s.add(i), d.add(i), n - i);
    }
}

/// [`stream_copy`] with 64-byte stores.
///
/// # Safety
/// The CPU must support AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn stream_copy_512<T: Copy>(src: &[T], dst: &mut [T]) {
    use std::arch::x86_64::{__m512i, _mm512_loadu_si512, _mm512_stream_si512};
    let n = std::mem::size_of_val(src).min(std::mem::size_of_val(dst));
    let s = src.as_ptr().cast::<u8>();
    let d = dst.as_mut_ptr().cast::<u8>();
    let head = d.align_offset(64).min(n);
    // SAFETY: as in `stream_copy`, with 64-byte aligned streamed stores.
    unsafe {
        std::ptr::copy_nonoverlapping(s, d, head);
        let mut i = head;
        while i + 64 <= n {
            let v = _mm512_loadu_si512(s.add(i).cast::<__m512i>());
            _mm512_stream_si512(d.add(i).cast::<__m512i>(), v);
            i += 64;
        }
        std::ptr::copy_nonoverlapping(s.add(i), d.add(i), n - i);
    }
}

/// One tile: positions `[col, col + out.len())` of the innermost dimension.
///
/// A streamed tile goes out in one copy after its last step. Holding its
/// results back and writing them during the next tile instead, a share
/// before each step (each share ending on a 64-byte line of its output, as
/// arrays are aligned to their elements only), so that the non-temporal
/// stores would drain while the core computes, was slower on the AVX2 EPYC
/// (Zen 3) of 1 December 2026: an Adam step took 10.7-11.8 ms against
/// 7.6-8.0 without it, and `tanh(a * b + c)` 3.30-4.00 against 2.86-3.68
/// (two threads, alternating runs of one build on a host running at half
/// its usual speed). The integer tiled loops fared no better (see
/// `tiled::TiledLoop::execute`).
#[inline(always)]
fn tile<T: Float, const FMA: bool>(
    f: &FusedLoop,
    space: &Space,
    sources: &[Source<'_, T>],
    offsets: &[i64],
    col: usize,
    out: &mut [T],
    extra: &mut Extra<'_, T>,
    scratch: &mut Scratch<T>,
) {
    scratch.ahead.step();
    let len = out.len();
    let mut streamed = false;
    #[cfg(target_arch = "x86_64")]
    if scratch.stream {
        if let Some(result) =
            eval_tile::<T, FMA>(f, space, sources, offsets, col, len, scratch, None)
        {
            // SAFETY: `stream` is set only where AVX was detected.
            unsafe { stream_copy(result, out) };
        }
        streamed = true;
    }
    if !streamed
        && let Some(result) = eval_tile::<T, FMA>(
            f,
            space,
            sources,
            offsets,
            col,
            len,
            scratch,
            Some(&mut *out),
        )
    {
        out.copy_from_slice(result);
    }
    extra.write(out, &scratch.regs, &scratch.phys, scratch.stream);
}

/// A multi-output loop's other results (see [`FusedLoop::extra`]): where
/// one task writes them, in step with its part of the main result.
pub(crate) struct Extra<'a, T> {
    /// The address of the task's first element of the main result.
    base: usize,
    /// Per other result: its register, and the task's part of its output
    /// (laid out as the main result's part).
    outs: Vec<(usize, &'a mut [T])>,
    /// A row pipeline's reduction folded from the tiles written (see
    /// [`super::reduce::RowFold`]): its rule, its outputs (one per row of the
    /// main result's part, holding the initial value) and the row length.
    /// Every tile is then one whole row.
    fold: Option<(super::reduce::RowFold, &'a mut [T], usize)>,
}

impl<'a, T: Copy> Extra<'a, T> {
    /// For a loop of one result.
    pub(crate) fn none() -> Extra<'a, T> {
        Extra {
            base: 0,
            outs: Vec::new(),
            fold: None,
        }
    }

    /// For a loop of one result whose rows, `row_len` long, `fold` reduces
    /// into `folded` as they are written: one output per row of `main`,
    /// the part of the result being written.
    pub(crate) fn folding(
        main: &[T],
        fold: super::reduce::RowFold,
        folded: &'a mut [T],
        row_len: usize,
    ) -> Extra<'a, T> {
        Extra {
            base: main.as_ptr() as usize,
            outs: Vec::new(),
            fold: Some((fold, folded, row_len)),
        }
    }

    /// The other results `regs` name, over the part `outs` of their outputs
    /// that goes with `main`, the part of the main result one task writes.
    fn new(main: &[T], regs: &[usize], outs: Vec<&'a mut [T]>) -> Extra<'a, T> {
        Extra {
            base: main.as_ptr() as usize,
            outs: regs.iter().copied().zip(outs).collect(),
            fold: None,
        }
    }

    /// Copies each result's tile from its register to its output, at the
    /// place of `out`, the tile just written of the task's main result.
    #[inline(always)]
    fn write(&mut self, out: &[T], regs: &[Vec<T>], phys: &[usize], stream: bool)
    where
        T: Float,
    {
        let len = out.len();
        let at = (out.as_ptr() as usize - self.base) / std::mem::size_of::<T>().max(1);
        if let Some((fold, folded, row_len)) = &mut self.fold {
            debug_assert_eq!(len, *row_len, "a folded loop's tile is one row");
            fold.fold_into(&mut folded[at / *row_len], out);
        }
        if self.outs.is_empty() {
            return;
        }
        for (r, o) in &mut self.outs {
            if stream {
                copy_streamed(&regs[phys[*r]][..len], &mut o[at..at + len]);
            } else {
                o[at..at + len].copy_from_slice(&regs[phys[*r]][..len]);
            }
        }
    }
}

/// What one operation (or fused pair, or operation and its rounding) of a
/// tile does: [`eval_tile`]'s decisions, taken once per loop and kind of
/// tile (which leaves are splats, whether the caller's buffer is given) by
/// [`plan`] rather than anew for every operation of every tile.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// `c(b(x, y))`, the loop's last operations, in one pass: into the
    /// caller's buffer, or else into register `to`. Ends the tile.
    Costly {
        c: Costly,
        b: Binary,
        x: Src,
        y: Src,
        to: Option<usize>,
    },
    /// `c(a * x + y)` likewise.
    CostlyAffine {
        c: Costly,
        a: Src,
        x: Src,
        y: Src,
        to: Option<usize>,
    },
    /// A pair and the closing function `u` after it, chunk by chunk, into
    /// the caller's buffer (register `dst` holding each chunk's pair).
    Chunked { head: Head, u: Unary, dst: usize },
    /// One pass writing register `dst` (or the caller's buffer, if
    /// `direct`, which ends the tile), swapped into `result`'s.
    Pass {
        kind: Pass,
        dst: usize,
        result: usize,
        direct: bool,
    },
}

/// The loop of a [`Step::Pass`].
#[derive(Clone, Copy, Debug)]
enum Pass {
    Square(Binary, Src, Src),
    Pair(Binary, Src, Src, Binary, Src),
    Unary(Unary, Src),
    Rounded(Binary, bool, Src, Src),
    Binary(Binary, Src, Src),
    Compare(ComparisonDirection, Src, Src),
    Select(Src, Src, Src),
    Clamp(Src, Src, Src),
}

/// The kind of tile a plan was made for: a bit per leaf (of the first
/// [`INLINE_LEAVES`]) with one value across the tile, and whether the
/// caller's buffer was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TileKind {
    splats: u32,
    direct: bool,
}

/// The steps of a tile of `f` of kind `kind`, each with the position of its
/// first operation (for [`shares`]): the operations in order, two
/// in one loop where `pairs` (the first reading values, not a splat) or
/// `rounds` say so, and a closing costly function with the arithmetic
/// before it where it can.
fn plan(
    f: &FusedLoop,
    kind: TileKind,
    pairs: &[bool],
    rounds: &[bool],
    chunk_costly: bool,
    steps: &mut Vec<(usize, Step)>,
) {
    steps.clear();
    let splat =
        |s: Src| matches!(s, Src::Leaf(i) if i < INLINE_LEAVES && kind.splats >> i & 1 == 1);
    let last = f.code.len().wrapping_sub(1);
    let mut at = 0;
    while at < f.code.len() {
        let (op, dst) = f.code[at];
        // Two operations in one loop where planned, and the first reads
        // values (not one splat) in this tile.
        let pair = match (pairs.get(at), op) {
            (Some(true), Op::Binary(b1, a, x)) if !splat(a) => match f.code.get(at + 1) {
                Some(&(Op::Binary(b2, _, y), dst2)) => Some((b1, a, x, b2, y, dst2)),
                _ => None,
            },
            _ => None,
        };
        // An operation and the rounding of its result, in one loop.
        let rounded = match (rounds.get(at), op, f.code.get(at + 1)) {
            (Some(true), Op::Binary(..), Some(&(Op::Unary(u, _), rdst))) => {
                Some((u == Unary::RoundF16, rdst))
            }
            _ => None,
        };
        // A pair (or a rounded operation) writes the first operation's
        // register, which it alone reads and no operand of the pair
        // occupies (the second's own may hold the pair's first operand),
        // then swaps it into the second's.
        let (end, result) = match (pair, rounded) {
            (Some((.., dst2)), _) | (None, Some((_, dst2))) => (at + 1, dst2),
            (None, None) => (at, dst),
        };
        // An addition, subtraction or product (or a pair of them) whose
        // result only a closing costly function reads, as in `exp(x - max)`
        // or `tanh(a * b + c)`. One operation and the function run as one
        // pass. A pair, in a loop alone, runs chunk by chunk with the
        // function, so the function's arithmetic overlaps the loads of the
        // next chunk instead of following all of them.
        let head = match (pair, op) {
            _ if rounded.is_some() => None,
            (Some((b1, a, x, b2, y, dst2)), _) if y != Src::Reg(dst) => {
                Some((Head::Pair(b1, a, x, b2, y), dst2))
            }
            (None, Op::Binary(b, x, y)) if matches!(b, Binary::Add | Binary::Sub | Binary::Mul) => {
                Some((Head::One(b, x, y), dst))
            }
            _ => None,
        };
        let closing = match (head, f.code.get(end + 1)) {
            (Some((head, r)), Some(&(Op::Unary(u, arg_reg), udst)))
                if end + 1 == last
                    && arg_reg == Src::Reg(r)
                    && f.result == Src::Reg(udst)
                    && !f.extra.iter().any(|&(e, _)| e == arg_reg) =>
            {
                costly(u).map(|c| (head, u, c, udst))
            }
            _ => None,
        };
        // Into the caller's buffer, or else the function's register unless
        // an operand is there.
        let into = |operands: &[Src], udst: usize| match kind.direct {
            true => Some(None),
            false => (!operands.contains(&Src::Reg(udst))).then_some(Some(udst)),
        };
        let closed = match closing {
            Some((Head::One(b, x, y), _, c, udst)) => {
                into(&[x, y], udst).map(|to| Step::Costly { c, b, x, y, to })
            }
            Some((Head::Pair(Binary::Mul, a, x, Binary::Add, y), _, c, udst)) => {
                into(&[a, x, y], udst).map(|to| Step::CostlyAffine { c, a, x, y, to })
            }
            _ => None,
        };
        let closed = closed.or(match closing {
            Some((head, u, ..)) if chunk_costly && kind.direct => {
                Some(Step::Chunked { head, u, dst })
            }
            _ => None,
        });
        if let Some(step) = closed {
            steps.push((at, step));
            return;
        }
        let pass = match (pair, op) {
            (Some((b1, a, x, _, y, _)), _) if y == Src::Reg(dst) => Pass::Square(b1, a, x),
            (Some((b1, a, x, b2, y, _)), _) => Pass::Pair(b1, a, x, b2, y),
            (None, Op::Unary(u, a)) => Pass::Unary(u, a),
            (None, Op::Binary(b, x, y)) => match rounded {
                Some((f16, _)) => Pass::Rounded(b, f16, x, y),
                None => Pass::Binary(b, x, y),
            },
            (None, Op::Compare(dir, x, y)) => Pass::Compare(dir, x, y),
            (None, Op::Select(p, x, y)) => Pass::Select(p, x, y),
            (None, Op::Clamp(lo, x, hi)) => Pass::Clamp(lo, x, hi),
        };
        // The last operation writes the caller's buffer directly, when given one.
        let direct = end == last && f.result == Src::Reg(result) && kind.direct;
        steps.push((
            at,
            Step::Pass {
                kind: pass,
                dst,
                result,
                direct,
            },
        ));
        if direct {
            return;
        }
        at = end + 1;
    }
}

/// The expression's values at positions `[col, col + len)` of the innermost
/// dimension of the row whose view offsets are `offsets`.
#[inline(always)]
pub(crate) fn eval_tile<'r, T: Float, const FMA: bool>(
    f: &FusedLoop,
    space: &Space,
    sources: &[Source<'r, T>],
    offsets: &[i64],
    col: usize,
    len: usize,
    scratch: &'r mut Scratch<T>,
    mut direct: Option<&mut [T]>,
) -> Option<&'r [T]> {
    // Gather or fill the leaves that are not contiguous input slices. A leaf
    // with one value across the tile is a splat; only operations that
    // cannot take a splat get it written out.
    let mut splats: [Option<T>; INLINE_LEAVES] = [None; INLINE_LEAVES];
    let mut kind = TileKind {
        splats: 0,
        direct: direct.is_some(),
    };
    for (k, src) in sources.iter().enumerate() {
        let splat = match *src {
            Source::Scalar(v) => Some(v),
            Source::Data(d, vi) if *space.strides[vi].last().unwrap_or(&0) == 0 => {
                Some(d[(offsets[vi]) as usize])
            }
            _ => None,
        };
        if let (Some(v), Some(slot)) = (splat, splats.get_mut(k)) {
            *slot = Some(v);
            kind.splats |= 1 << k;
            if !scratch.leaf_as_slice[k] {
                continue;
            }
        }
        let buf = &mut scratch.leaves[k][..len];
        match *src {
            Source::Scalar(v) => buf.fill(v),
            Source::Affine(vi) => {
                let s = *space.strides[vi].last().unwrap_or(&0);
                let base = offsets[vi] + col as i64 * s;
                for (i, b) in buf.iter_mut().enumerate() {
                    *b = T::from_f64((base + i as i64 * s) as f64);
                }
            }
            Source::Pred(p, vi) => widen(buf, p, space, offsets, vi, col, T::from_bool),
            Source::Bf16(h, vi) => widen(buf, h, space, offsets, vi, col, T::from_bf16),
            Source::F16(h, vi) => widen(buf, h, space, offsets, vi, col, T::from_f16),
            // Read in place.
            Source::Tile(_) => {}
            Source::Data(d, vi) => {
                let s = *space.strides[vi].last().unwrap_or(&0);
                let base = offsets[vi] + col as i64 * s;
                if s == 0 {
                    buf.fill(d[base as usize]);
                } else if s != 1 {
                    for (i, b) in buf.iter_mut().enumerate() {
                        *b = d[(base + i as i64 * s) as usize];
                    }
                }
            }
        }
    }
    if scratch.kind != Some(kind) {
        plan(
            f,
            kind,
            &scratch.pairs,
            &scratch.rounds,
            scratch.chunk_costly,
            &mut scratch.plan,
        );
        scratch.kind = Some(kind);
        scratch.share_lines = usize::MAX;
    }
    // The next tile's lines, a share hinted before each step.
    let mut hints = [0usize; INLINE_LEAVES];
    let mut hinted = 0;
    if scratch.prefetch {
        let lines = len.div_ceil((64 / std::mem::size_of::<T>()).max(1));
        if scratch.share_lines != lines {
            shares(&scratch.plan, f.code.len(), lines, &mut scratch.shares);
            scratch.share_lines = lines;
        }
        hinted = next_tile(sources, space, offsets, col + len, &mut hints);
    }
    // Slices for every leaf: contiguous inputs directly, the rest from
    // scratch; on the stack for the usual handful of leaves (this runs per
    // tile, where an allocation would cost as much as a cheap op).
    let leaf = |k: usize, src: &Source<'r, T>, scratch_leaves: &'r [Vec<T>]| -> &'r [T] {
        match *src {
            Source::Data(d, vi) if *space.strides[vi].last().unwrap_or(&0) == 1 => {
                let base = (offsets[vi] + col as i64) as usize;
                &d[base..base + len]
            }
            Source::Tile(t) => &t[..len],
            _ => &scratch_leaves[k][..len],
        }
    };
    let Scratch {
        regs,
        phys,
        leaves: scratch_leaves,
        plan: steps,
        shares,
        ..
    } = scratch;
    let scratch_leaves: &'r [Vec<T>] = scratch_leaves;
    let steps: &'r [(usize, Step)] = steps;
    let mut inline: [&[T]; INLINE_LEAVES] = [&[]; INLINE_LEAVES];
    let heap: Vec<&[T]>;
    let leaves: &[&[T]] = if sources.len() <= INLINE_LEAVES {
        for (k, src) in sources.iter().enumerate() {
            inline[k] = leaf(k, src, scratch_leaves);
        }
        &inline[..sources.len()]
    } else {
        heap = sources
            .iter()
            .enumerate()
            .map(|(k, src)| leaf(k, src, scratch_leaves))
            .collect();
        &heap
    };
    for (i, &(_, step)) in steps.iter().enumerate() {
        if let (true, Some(&(l0, l1))) = (hinted > 0, shares.get(i)) {
            for &h in &hints[..hinted] {
                for line in l0..l1 {
                    prefetch_line(h + line * 64);
                }
            }
        }
        // Each arm chooses its output buffer (the caller's, or a register)
        // itself. One helper for the choice, shared by every arm, together
        // with a shorter `f32::round_bf16` (which of the two was not
        // isolated), gave the same bits but slowed row pipelines on two
        // threads by 15-20% on the AVX2 EPYC, with one core unchanged:
        // layer_norm took 1.74-2.72 ms against 1.33-2.23 with the arms as
        // they are, softmax 2.40-3.12 against 2.06-3.08 (alternating runs,
        // 1 December 2026).
        match step {
            Step::Costly { c, b, x, y, to } => {
                let Some(to) = to else {
                    let buf = direct.take()?;
                    let regs = Regs::all(regs, phys);
                    let arg = |s: Src| operand(s, leaves, regs, &splats, 0..len);
                    costly_after::<T, FMA>(c, b, &mut buf[..len], arg(x), arg(y));
                    return None;
                };
                {
                    let (d, regs) = Regs::split(regs, phys, to);
                    let arg = |s: Src| operand(s, leaves, regs, &splats, 0..len);
                    costly_after::<T, FMA>(c, b, &mut d[..len], arg(x), arg(y));
                }
                return Some(&regs[phys[to]][..len]);
            }
            Step::CostlyAffine { c, a, x, y, to } => {
                // (A pair here starts from values, never a splat.)
                let Some(to) = to else {
                    let buf = direct.take()?;
                    let regs = Regs::all(regs, phys);
                    let a = values(a, leaves, regs, 0..len);
                    let arg = |s: Src| operand(s, leaves, regs, &splats, 0..len);
                    costly_after_affine::<T, FMA>(c, &mut buf[..len], a, arg(x), arg(y));
                    return None;
                };
                {
                    let (d, regs) = Regs::split(regs, phys, to);
                    let a = values(a, leaves, regs, 0..len);
                    let arg = |s: Src| operand(s, leaves, regs, &splats, 0..len);
                    costly_after_affine::<T, FMA>(c, &mut d[..len], a, arg(x), arg(y));
                }
                return Some(&regs[phys[to]][..len]);
            }
            Step::Chunked { head, u, dst } => {
                let buf = direct.take()?;
                let (d, regs) = Regs::split(regs, phys, dst);
                let mut from = 0;
                while from < len {
                    let to = (from + CHUNK).min(len);
                    let t = &mut d[from..to];
                    let arg = |s: Src| operand(s, leaves, regs, &splats, from..to);
                    match head {
                        // (A pair here starts from values, never a splat.)
                        Head::Pair(b1, a, x, b2, y) => {
                            let a = values(a, leaves, regs, from..to);
                            pair_loop(b1, b2, t, a, arg(x), arg(y))
                        }
                        Head::One(b, x, y) => binary_loop(b, t, arg(x), arg(y)),
                    }
                    unary_loop::<T, FMA>(u, &mut buf[from..to], t);
                    from = to;
                }
                return None;
            }
            Step::Pass {
                kind,
                dst,
                result,
                direct: into_direct,
            } => {
                {
                    let (out, regs): (&mut [T], Regs<'_, T>) = match direct.take() {
                        Some(buf) if into_direct => (buf, Regs::all(regs, phys)),
                        other => {
                            direct = other;
                            let (d, regs) = Regs::split(regs, phys, dst);
                            (&mut d[..len], regs)
                        }
                    };
                    let get = |s: Src| values(s, leaves, regs, 0..len);
                    let arg = |s: Src| operand(s, leaves, regs, &splats, 0..len);
                    // One loop per operation kind, so each loop body is
                    // branch-free and vectorises.
                    match kind {
                        Pass::Square(b1, a, x) => square_pair(b1, out, get(a), arg(x)),
                        Pass::Pair(b1, a, x, b2, y) => {
                            pair_loop(b1, b2, out, get(a), arg(x), arg(y))
                        }
                        Pass::Unary(u, a) => unary_loop::<T, FMA>(u, out, get(a)),
                        Pass::Rounded(b, f16, x, y) => rounded_loop(b, f16, out, arg(x), arg(y)),
                        Pass::Binary(b, x, y) => binary_loop(b, out, arg(x), arg(y)),
                        Pass::Compare(dir, x, y) => compare_loop(dir, out, arg(x), arg(y)),
                        Pass::Select(p, x, y) => {
                            let (p, x, y) = (get(p), get(x), get(y));
                            for (((o, &c), &a), &b) in out.iter_mut().zip(p).zip(x).zip(y) {
                                *o = if c != T::ZERO { a } else { b };
                            }
                        }
                        Pass::Clamp(lo, x, hi) => {
                            let (lo, x, hi) = (get(lo), get(x), get(hi));
                            for (((o, &l), &v), &h) in out.iter_mut().zip(lo).zip(x).zip(hi) {
                                *o = binary(Binary::Min, binary(Binary::Max, v, l), h);
                            }
                        }
                    }
                }
                if into_direct {
                    return None;
                }
                phys.swap(dst, result);
            }
        }
    }
    Some(match f.result {
        Src::Leaf(i) => leaves[i],
        Src::Reg(r) => &regs[phys[r]][..len],
    })
}

impl FusedLoop {
    /// The input a `select(p, a, b)` whose predicate is one value (a
    /// broadcast scalar, such as JAX's check that a factorisation succeeded)
    /// returns whole: `a` or `b`, as the predicate says, when that operand
    /// is an input of the loop's type and shape read in order. The loop
    /// then hands that input on instead of copying it.
    fn forwarded(&self, arrays: &[&ArrayLiteral]) -> Option<usize> {
        let [(Op::Select(Src::Leaf(p), a, b), dst)] = self.code[..] else {
            return None;
        };
        if self.result != Src::Reg(dst) || self.out_ty != self.ty || !self.extra.is_empty() {
            return None;
        }
        let Leaf::Input {
            input,
            ty: PrimitiveType::Pred,
            view,
            starts,
        } = self.leaves.get(p)?
        else {
            return None;
        };
        if view.strides.iter().any(|&s| s != 0) || !starts.is_empty() {
            return None;
        }
        let ArrayData::Pred(bits) = arrays.get(*input)?.data() else {
            return None;
        };
        let picked = if *bits.get(usize::try_from(view.offset).ok()?)? {
            a
        } else {
            b
        };
        let Src::Leaf(picked) = picked else {
            return None;
        };
        let Leaf::Input {
            input,
            ty,
            view,
            starts,
        } = self.leaves.get(picked)?
        else {
            return None;
        };
        let array = arrays.get(*input)?;
        (*ty == self.ty
            && starts.is_empty()
            && array.element_type() == self.ty
            && array.dims() == self.dims.as_slice()
            && view.dims == self.dims
            && view.is_whole())
        .then_some(*input)
    }
}

impl FusedLoop {
    /// The loop's results (the main one, then `extra`) over `arrays`.
    fn results(&self, arrays: &[&ArrayLiteral], pool: &Pool) -> Result<Vec<ArrayLiteral>, String> {
        match self.ty {
            PrimitiveType::F32 => self.execute::<f32>(arrays, pool),
            PrimitiveType::F64 => self.execute::<f64>(arrays, pool),
            other => Err(format!("fused loops compute in f32 or f64, not {other}")),
        }
    }
}

impl Kernel for FusedLoop {
    fn name(&self) -> &'static str {
        "fused loop"
    }

    fn row_stage(&self) -> Option<super::pipeline::Stage> {
        // A pipeline fixes its stages' offsets when it is compiled.
        (!self.has_dynamic_starts()).then(|| super::pipeline::Stage::Loop(self.clone()))
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        let arrays: Vec<&ArrayLiteral> = inputs
            .iter()
            .map(|v| v.array().ok_or("a fused loop reads arrays"))
            .collect::<Result<_, _>>()?;
        if let Some(i) = self.forwarded(&arrays) {
            return Ok(inputs[i].clone());
        }
        let out = self
            .results(&arrays, pool)?
            .into_iter()
            .next()
            .ok_or("a fused loop without a result")?;
        Ok(Value::owned(out))
    }
}

/// Multi-output fusion of element-wise loops: one fused loop whose main
/// result and `extra` results are, with kernel inputs passed through, the
/// elements of a tuple. Loops over one shape that only the tuple reads
/// (an optimiser's new parameters and moments) so read the arrays they
/// share once, and compute once the values they pass each other.
#[derive(Debug)]
pub(crate) struct MultiLoop {
    lp: FusedLoop,
    /// The tuple's elements: results of the loop (0 the main one, then
    /// `extra` in order) or kernel inputs.
    elements: Vec<Element>,
    /// How many of the kernel's inputs the loop reads (the others are
    /// elements passed through).
    node_inputs: usize,
}

impl MultiLoop {
    pub(crate) fn new(lp: FusedLoop, elements: Vec<Element>, node_inputs: usize) -> MultiLoop {
        MultiLoop {
            lp,
            elements,
            node_inputs,
        }
    }
}

impl Kernel for MultiLoop {
    fn name(&self) -> &'static str {
        "multi-output fused loop"
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        let arrays: Vec<&ArrayLiteral> = inputs
            .iter()
            .take(self.node_inputs)
            .map(|v| v.array().ok_or("a fused loop reads arrays"))
            .collect::<Result<_, _>>()?;
        let results: Vec<Value<'a>> = self
            .lp
            .results(&arrays, pool)?
            .into_iter()
            .map(Value::owned)
            .collect();
        super::tiled::make_tuple(&self.elements, &results, inputs)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ahead_hints_each_line_once_in_order() {
        let mut ahead = Ahead::default();
        ahead.start([(0, 640), (1000, 1130), (5, 5)].into_iter(), 3);
        let mut steps: Vec<Vec<usize>> = Vec::new();
        for _ in 0..6 {
            let mut lines = Vec::new();
            ahead.take(|at| lines.push(at));
            steps.push(lines);
        }
        let want: Vec<usize> = (0..640).step_by(64).chain([1000, 1064, 1128]).collect();
        assert_eq!(steps.concat(), want);
        assert!(steps[..4].iter().all(|s| s.len() == 3), "{steps:?}");
        assert_eq!(steps[4].len(), 1);
        assert!(steps[5].is_empty());
        // Done: later tiles hint nothing, and stopping drops what is left.
        assert_eq!(ahead.per_tile, 0);
        ahead.start([(0, 6400)].into_iter(), 2);
        ahead.stop();
        let mut after = 0;
        ahead.take(|_| after += 1);
        assert_eq!(after, 0);
    }

    use super::*;

    /// Streamed copies of every width this CPU has, at every alignment of the
    /// destination and lengths around the store sizes, copy exactly.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn streamed_copies_are_exact() {
        let src: Vec<u32> = (0..200u32).map(|i| i.wrapping_mul(0x9e37_79b9)).collect();
        let mut copies: Vec<unsafe fn(&[u32], &mut [u32])> = Vec::new();
        if std::is_x86_feature_detected!("avx") {
            copies.push(stream_copy_256::<u32>);
            copies.push(stream_copy::<u32>);
        }
        if std::is_x86_feature_detected!("avx512f") {
            copies.push(stream_copy_512::<u32>);
        }
        for copy in copies {
            for at in 0..17 {
                for len in [0, 1, 7, 8, 15, 16, 17, 31, 33, 64, 100, 160] {
                    let mut dst = vec![0u32; 200];
                    // SAFETY: the CPU has the feature each copy needs.
                    unsafe { copy(&src[3..3 + len], &mut dst[at..at + len]) };
                    store_fence();
                    assert_eq!(&dst[at..at + len], &src[3..3 + len], "at {at}, len {len}");
                    assert!(dst[..at].iter().chain(&dst[at + len..]).all(|&v| v == 0));
                }
            }
        }
    }

    /// A loop over `n` elements of type `ty` reading inputs 0 and 1 (leaves
    /// 0 and 1) and then `extra` leaves, computing `code`, whose last
    /// operation's register is the result.
    fn loop_over(
        ty: PrimitiveType,
        n: usize,
        extra: Vec<Leaf>,
        code: Vec<(Op, usize)>,
    ) -> FusedLoop {
        let view = View {
            dims: vec![n as i64],
            offset: 0,
            strides: vec![1],
        };
        let input = |i| Leaf::Input {
            input: i,
            ty,
            view: view.clone(),
            starts: Vec::new(),
        };
        let mut leaves = vec![input(0), input(1)];
        leaves.extend(extra);
        let registers = code.iter().map(|&(_, d)| d + 1).max().unwrap_or(1);
        let result = code.last().map_or(Src::Leaf(0), |&(_, d)| Src::Reg(d));
        FusedLoop {
            ty,
            out_ty: ty,
            dims: vec![n as i64],
            leaves,
            result,
            extra: Vec::new(),
            code,
            registers,
        }
    }

    /// A loop over two f32[8] inputs computing `code`.
    fn loop_of(code: Vec<(Op, usize)>) -> FusedLoop {
        let mut f = loop_over(PrimitiveType::F32, 8, vec![], code);
        // One register per operation, the last of them the result (which
        // the tests of pairs name apart from their operations' registers).
        f.registers = f.code.len();
        f.result = Src::Reg(f.registers.saturating_sub(1));
        f
    }

    #[test]
    fn a_select_on_one_predicate_forwards_a_whole_operand() {
        let n = 8;
        let scalar_pred = |offset| Leaf::Input {
            input: 2,
            ty: PrimitiveType::Pred,
            view: View {
                dims: vec![n],
                offset,
                strides: vec![0],
            },
            starts: Vec::new(),
        };
        let select = |p, a, b| vec![(Op::Select(p, a, b), 0)];
        let (a, b, p) = (Src::Leaf(0), Src::Leaf(1), Src::Leaf(2));
        let f32s = |v: f32| {
            ArrayLiteral::new(
                ArrayShape::new(PrimitiveType::F32, vec![n]).unwrap(),
                ArrayData::F32(vec![v; n as usize]),
            )
            .unwrap()
        };
        let preds = ArrayLiteral::new(
            ArrayShape::new(PrimitiveType::Pred, vec![2]).unwrap(),
            ArrayData::Pred(vec![false, true]),
        )
        .unwrap();
        let (x, y) = (f32s(1.0), f32s(2.0));
        let arrays = [&x, &y, &preds];
        // The predicate's element 1 is true, element 0 false.
        let f = loop_over(PrimitiveType::F32, 8, vec![scalar_pred(1)], select(p, a, b));
        assert_eq!(f.forwarded(&arrays), Some(0));
        let f = loop_over(PrimitiveType::F32, 8, vec![scalar_pred(0)], select(p, a, b));
        assert_eq!(f.forwarded(&arrays), Some(1));
        // Not forwarded: a predicate that varies, a picked operand that is a
        // constant, read backwards, or of a shape other than the result's.
        let mut varying = scalar_pred(0);
        if let Leaf::Input { view, .. } = &mut varying {
            view.strides = vec![1];
            view.dims = vec![2];
        }
        let f = loop_over(PrimitiveType::F32, 8, vec![varying], select(p, a, b));
        assert_eq!(f.forwarded(&arrays), None);
        let f = loop_over(
            PrimitiveType::F32,
            8,
            vec![scalar_pred(1), Leaf::Scalar(3.0)],
            select(p, Src::Leaf(3), b),
        );
        assert_eq!(f.forwarded(&arrays), None);
        let mut f = loop_over(PrimitiveType::F32, 8, vec![scalar_pred(1)], select(p, a, b));
        if let Leaf::Input { view, .. } = &mut f.leaves[0] {
            view.offset = 7;
            view.strides = vec![-1];
        }
        assert_eq!(f.forwarded(&arrays), None);
        let short = ArrayLiteral::new(
            ArrayShape::new(PrimitiveType::F32, vec![4]).unwrap(),
            ArrayData::F32(vec![1.0; 4]),
        )
        .unwrap();
        let f = loop_over(PrimitiveType::F32, 8, vec![scalar_pred(1)], select(p, a, b));
        assert_eq!(f.forwarded(&[&short, &y, &preds]), None);
    }

    #[test]
    fn roundings_join_the_operation_whose_result_only_they_read() {
        let (a, b) = (Src::Leaf(0), Src::Leaf(1));
        let bin = |op, x, y, dst| (Op::Binary(op, x, y), dst);
        let round = |u, x, dst| (Op::Unary(u, x), dst);
        // bf16((bf16(a - b)) / b), then f16 of a product.
        let chain = loop_of(vec![
            bin(Binary::Sub, a, b, 0),
            round(Unary::RoundBf16, Src::Reg(0), 1),
            bin(Binary::Div, Src::Reg(1), b, 2),
            round(Unary::RoundBf16, Src::Reg(2), 3),
            bin(Binary::Mul, Src::Reg(3), a, 4),
            round(Unary::RoundF16, Src::Reg(4), 5),
        ]);
        assert_eq!(
            chain.rounded(&chain.pairs()),
            vec![true, false, true, false, true, false]
        );
        // The unrounded value read again, or a maximum (exact in bf16
        // already, and not one of the joined operations): no join.
        let shared = loop_of(vec![
            bin(Binary::Add, a, b, 0),
            round(Unary::RoundBf16, Src::Reg(0), 1),
            bin(Binary::Max, Src::Reg(1), Src::Reg(0), 2),
            round(Unary::RoundBf16, Src::Reg(2), 3),
        ]);
        assert_eq!(
            shared.rounded(&shared.pairs()),
            vec![false, false, false, false]
        );
        // The second of an arithmetic pair stays in its pair.
        let paired = loop_of(vec![
            bin(Binary::Sub, a, b, 0),
            bin(Binary::Mul, Src::Reg(0), a, 1),
            round(Unary::RoundBf16, Src::Reg(1), 2),
        ]);
        assert_eq!(paired.pairs(), vec![true, false, false]);
        assert_eq!(paired.rounded(&paired.pairs()), vec![false, false, false]);
    }

    #[test]
    fn arithmetic_pairs_whose_first_result_only_the_second_reads() {
        let (a, b) = (Src::Leaf(0), Src::Leaf(1));
        let bin = |op, x, y, dst| (Op::Binary(op, x, y), dst);
        // (a - b) * a + b: two pairs.
        let two = loop_of(vec![
            bin(Binary::Sub, a, b, 0),
            bin(Binary::Mul, Src::Reg(0), a, 1),
            bin(Binary::Add, Src::Reg(1), b, 0),
        ]);
        assert_eq!(two.pairs(), vec![true, false, false]);
        let four = loop_of(vec![
            bin(Binary::Sub, a, b, 0),
            bin(Binary::Mul, Src::Reg(0), a, 1),
            bin(Binary::Mul, Src::Reg(1), b, 0),
            bin(Binary::Add, Src::Reg(0), b, 1),
        ]);
        assert_eq!(four.pairs(), vec![true, false, true, false]);
        // The first result read again later: no pair (the second and
        // third operations pair; both read it, as a value of their own).
        let shared = loop_of(vec![
            bin(Binary::Sub, a, b, 0),
            bin(Binary::Mul, Src::Reg(0), a, 1),
            bin(Binary::Add, Src::Reg(1), Src::Reg(0), 2),
        ]);
        assert_eq!(shared.pairs(), vec![false, true, false]);
        // ... unless its register was written again first.
        let rewritten = loop_of(vec![
            bin(Binary::Sub, a, b, 0),
            bin(Binary::Mul, Src::Reg(0), a, 1),
            bin(Binary::Add, a, b, 0),
            bin(Binary::Add, Src::Reg(1), Src::Reg(0), 2),
        ]);
        assert_eq!(rewritten.pairs(), vec![true, false, false, false]);
        // tanh(a * b + c): the result is in the product's register, but
        // written there after the pair.
        let tanh = loop_of(vec![
            bin(Binary::Mul, a, b, 0),
            bin(Binary::Add, Src::Reg(0), a, 1),
            (Op::Unary(Unary::Tanh, Src::Reg(1)), 0),
        ]);
        assert_eq!(tanh.pairs(), vec![true, false, false]);
        // The first result is the loop's result: no pair.
        let mut escapes = loop_of(vec![
            bin(Binary::Mul, a, b, 0),
            bin(Binary::Add, Src::Reg(0), a, 1),
        ]);
        escapes.result = Src::Reg(0);
        assert_eq!(escapes.pairs(), vec![false, false]);
        // The first result as the second operand, a quotient, a maximum,
        // a sum of the first result with itself: single operations.
        for code in [
            vec![
                bin(Binary::Sub, a, b, 0),
                bin(Binary::Add, b, Src::Reg(0), 1),
            ],
            vec![
                bin(Binary::Div, a, b, 0),
                bin(Binary::Add, Src::Reg(0), b, 1),
            ],
            vec![
                bin(Binary::Add, a, b, 0),
                bin(Binary::Max, Src::Reg(0), b, 1),
            ],
            vec![
                bin(Binary::Add, a, b, 0),
                bin(Binary::Add, Src::Reg(0), Src::Reg(0), 1),
            ],
        ] {
            assert_eq!(
                loop_of(code.clone()).pairs(),
                vec![false, false],
                "{code:?}"
            );
        }
        // A square of the first result pairs.
        let square = loop_of(vec![
            bin(Binary::Sub, a, b, 0),
            bin(Binary::Mul, Src::Reg(0), Src::Reg(0), 1),
        ]);
        assert_eq!(square.pairs(), vec![true, false]);
    }

    /// Evaluates `code` over inputs `a` and `b` and the scalar `c` (leaves
    /// 0, 1, 2) as one tile: into the caller's buffer, and into scratch.
    fn tile_both_ways<T: Float>(
        code: Vec<(Op, usize)>,
        a: &[T],
        b: &[T],
        c: T,
    ) -> (Vec<T>, Vec<T>) {
        let n = a.len();
        let f = loop_over(T::TYPE, n, vec![Leaf::Scalar(0.0)], code);
        let space = coalesce(&f.dims, &f.views());
        let sources = [Source::Data(a, 0), Source::Data(b, 1), Source::Scalar(c)];
        let offsets = space.offsets.clone();
        let mut scratch = Scratch::new(&f, n);
        scratch.chunk_costly = true;
        let mut direct = vec![T::ZERO; n];
        let none = eval_tile::<T, false>(
            &f,
            &space,
            &sources,
            &offsets,
            0,
            n,
            &mut scratch,
            Some(&mut direct),
        );
        assert!(none.is_none(), "the direct buffer holds the result");
        let mut scratch = Scratch::new(&f, n);
        let kept = eval_tile::<T, false>(&f, &space, &sources, &offsets, 0, n, &mut scratch, None)
            .map(<[T]>::to_vec)
            .unwrap_or_default();
        assert_eq!(kept.len(), n, "the result in scratch");
        (direct, kept)
    }

    #[test]
    fn costly_functions_after_arithmetic_run_in_one_pass_or_chunk_by_chunk_with_the_same_values() {
        let (a, b, c) = (Src::Leaf(0), Src::Leaf(1), Src::Leaf(2));
        let bin = |op, x, y, dst| (Op::Binary(op, x, y), dst);
        let un = |u, dst| (Op::Unary(u, Src::Reg(1)), dst);
        // 300 positions: two full chunks and a partial one.
        let xs: Vec<f32> = (0..300).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
        let ys: Vec<f32> = (0..300).map(|i| (i as f32 * 0.11).cos() * 2.0).collect();
        let cases: Vec<(Vec<(Op, usize)>, fn(f32, f32, f32) -> f32)> = vec![
            // tanh(a * b + c): a pair, then the function (into the pair's
            // first register, as the allocator gives it).
            (
                vec![
                    bin(Binary::Mul, a, b, 0),
                    bin(Binary::Add, Src::Reg(0), c, 1),
                    un(Unary::Tanh, 0),
                ],
                |x, y, c| <f32 as Float>::tanh::<false>(x * y + c),
            ),
            // logistic((a - c) * b).
            (
                vec![
                    bin(Binary::Sub, a, c, 0),
                    bin(Binary::Mul, Src::Reg(0), b, 1),
                    un(Unary::Logistic, 2),
                ],
                |x, y, c| <f32 as Float>::logistic::<false>((x - c) * y),
            ),
            // exp(b - c), one operation before the function.
            (
                vec![bin(Binary::Sub, b, c, 1), un(Unary::Exp, 0)],
                |_, y, c| <f32 as Float>::exp::<false>(y - c),
            ),
            // log(a * a + b): the product of a leaf with itself.
            (
                vec![
                    bin(Binary::Mul, a, a, 0),
                    bin(Binary::Add, Src::Reg(0), b, 1),
                    un(Unary::Log, 2),
                ],
                |x, y, _| <f32 as Float>::log::<false>(x * x + y),
            ),
        ];
        // Costly functions before the last operation run tile by tile,
        // into the caller's buffer or not: x * logistic(x), exp(a) * b + c,
        // and a selection on tanh(a).
        let more: Vec<(Vec<(Op, usize)>, fn(f32, f32, f32) -> f32)> = vec![
            (
                vec![
                    (Op::Unary(Unary::Logistic, a), 0),
                    bin(Binary::Mul, a, Src::Reg(0), 1),
                ],
                |x, _, _| x * <f32 as Float>::logistic::<false>(x),
            ),
            (
                vec![
                    (Op::Unary(Unary::Exp, a), 0),
                    bin(Binary::Mul, Src::Reg(0), b, 1),
                    bin(Binary::Add, Src::Reg(1), c, 0),
                ],
                |x, y, c| <f32 as Float>::exp::<false>(x) * y + c,
            ),
            (
                vec![
                    (Op::Unary(Unary::Tanh, a), 0),
                    (Op::Compare(ComparisonDirection::Lt, Src::Reg(0), c), 1),
                    (Op::Select(Src::Reg(1), b, Src::Reg(0)), 2),
                ],
                |x, y, c| {
                    let t = <f32 as Float>::tanh::<false>(x);
                    if t < c { y } else { t }
                },
            ),
        ];
        for (code, want) in cases.into_iter().chain(more) {
            let (direct, kept) = tile_both_ways(code.clone(), &xs, &ys, 0.25f32);
            for i in 0..xs.len() {
                let w = want(xs[i], ys[i], 0.25);
                assert_eq!(direct[i].to_bits(), w.to_bits(), "{code:?} at {i}");
                assert_eq!(kept[i].to_bits(), w.to_bits(), "{code:?} at {i}");
            }
        }
        // f64 too, with a length below one chunk.
        let xs: Vec<f64> = (0..77).map(|i| i as f64 * 0.05 - 2.0).collect();
        let ys: Vec<f64> = (0..77).map(|i| 1.0 - i as f64 * 0.01).collect();
        let code = vec![
            bin(Binary::Mul, a, b, 0),
            bin(Binary::Add, Src::Reg(0), c, 1),
            un(Unary::Tanh, 0),
        ];
        let (direct, kept) = tile_both_ways(code, &xs, &ys, -0.5f64);
        for i in 0..xs.len() {
            let w = <f64 as Float>::tanh::<false>(xs[i] * ys[i] - 0.5);
            assert_eq!(direct[i].to_bits(), w.to_bits(), "at {i}");
            assert_eq!(kept[i].to_bits(), w.to_bits(), "at {i}");
        }
        // exp(a * a + b) in one pass, past exp's fast range (to infinity)
        // from the middle of the tile on: the tile is redone in the general
        // form.
        let xs: Vec<f32> = (0..300).map(|i| i as f32 * 0.1 - 5.0).collect();
        let ys: Vec<f32> = (0..300).map(|i| (i as f32 * 0.11).cos() * 2.0).collect();
        let code = vec![
            bin(Binary::Mul, a, a, 0),
            bin(Binary::Add, Src::Reg(0), b, 1),
            un(Unary::Exp, 2),
        ];
        let (direct, kept) = tile_both_ways(code, &xs, &ys, 0.0f32);
        assert!(direct[299].is_infinite());
        for i in 0..xs.len() {
            let w = <f32 as Float>::exp::<false>(xs[i] * xs[i] + ys[i]);
            assert_eq!(direct[i].to_bits(), w.to_bits(), "at {i}");
            assert_eq!(kept[i].to_bits(), w.to_bits(), "at {i}");
        }
    }

    #[test]
    fn one_operation_and_the_costly_function_after_it_make_one_pass_with_the_same_bits() {
        let (a, b, c) = (Src::Leaf(0), Src::Leaf(1), Src::Leaf(2));
        let bin = |op, x, y, dst| (Op::Binary(op, x, y), dst);
        let un = |u, dst| (Op::Unary(u, Src::Reg(1)), dst);
        type Want = fn(f32, f32, f32) -> f32;
        let exp = |v: f32| <f32 as Float>::exp::<false>(v);
        let cases: Vec<(Vec<(Op, usize)>, Want)> = vec![
            // Values and values, values and a splat, a splat and values.
            (
                vec![bin(Binary::Sub, a, b, 1), un(Unary::Exp, 0)],
                |x, y, _| <f32 as Float>::exp::<false>(x - y),
            ),
            (
                vec![bin(Binary::Mul, a, c, 1), un(Unary::Exp, 0)],
                |x, _, c| <f32 as Float>::exp::<false>(x * c),
            ),
            (
                vec![bin(Binary::Sub, c, b, 1), un(Unary::Exp, 0)],
                |_, y, c| <f32 as Float>::exp::<false>(c - y),
            ),
            (
                vec![bin(Binary::Add, a, b, 1), un(Unary::Tanh, 0)],
                |x, y, _| <f32 as Float>::tanh::<false>(x + y),
            ),
            (
                vec![bin(Binary::Mul, a, b, 1), un(Unary::Logistic, 0)],
                |x, y, _| <f32 as Float>::logistic::<false>(x * y),
            ),
            (
                vec![bin(Binary::Mul, a, a, 1), un(Unary::Log, 0)],
                |x, _, _| <f32 as Float>::log::<false>(x * x),
            ),
            (
                vec![bin(Binary::Sub, a, c, 1), un(Unary::Erf, 0)],
                |x, _, c| <f32 as Float>::erf::<false>(x - c),
            ),
            // The function's register holds an operand of the operation:
            // not one pass without a caller's buffer, the same values.
            (
                vec![
                    (Op::Unary(Unary::Abs, a), 0),
                    bin(Binary::Sub, Src::Reg(0), b, 1),
                    un(Unary::Exp, 0),
                ],
                |x, y, _| <f32 as Float>::exp::<false>(x.abs() - y),
            ),
        ];
        // Arguments inside the fast exp's range, and across both its ends
        // with a NaN (the general exp then).
        let inside: Vec<f32> = (0..300).map(|i| (i as f32 * 0.37).sin() * 30.0).collect();
        let mut across: Vec<f32> = (0..300).map(|i| i as f32 * 0.8 - 120.0).collect();
        across[101] = f32::NAN;
        let ys: Vec<f32> = (0..300).map(|i| (i as f32 * 0.11).cos() * 2.0).collect();
        for xs in [&inside, &across] {
            for (code, want) in &cases {
                let (direct, kept) = tile_both_ways(code.clone(), xs, &ys, 1.5f32);
                for i in 0..xs.len() {
                    let w = want(xs[i], ys[i], 1.5);
                    let same = |v: f32| v.to_bits() == w.to_bits() || (v.is_nan() && w.is_nan());
                    assert!(
                        same(direct[i]),
                        "{code:?} at {i}: {} against {w}",
                        direct[i]
                    );
                    assert!(same(kept[i]), "{code:?} at {i}: {} against {w}", kept[i]);
                }
            }
        }
        assert!(exp(across[0] - ys[0]) == 0.0 && exp(across[299] - ys[299]).is_infinite());
        // f64, whose exp has no fast range.
        let xs: Vec<f64> = (0..77).map(|i| i as f64 * 0.05 - 2.0).collect();
        let ys: Vec<f64> = (0..77).map(|i| 1.0 - i as f64 * 0.01).collect();
        let code = vec![bin(Binary::Sub, a, b, 1), un(Unary::Exp, 0)];
        let (direct, kept) = tile_both_ways(code, &xs, &ys, 0.0f64);
        for i in 0..xs.len() {
            let w = (xs[i] - ys[i]).exp();
            assert_eq!(direct[i].to_bits(), w.to_bits(), "at {i}");
            assert_eq!(kept[i].to_bits(), w.to_bits(), "at {i}");
        }
    }

    #[test]
    fn only_loops_without_costly_functions_take_narrow_vectors() {
        let (a, b) = (Src::Leaf(0), Src::Leaf(1));
        let add = (Op::Binary(Binary::Add, a, b), 0);
        let cheap = [
            vec![add],
            vec![add, (Op::Binary(Binary::Max, Src::Reg(0), b), 1)],
            vec![
                add,
                (Op::Compare(ComparisonDirection::Lt, Src::Reg(0), a), 1),
            ],
            vec![(Op::Unary(Unary::Abs, a), 0)],
        ];
        for code in cheap {
            assert!(loop_of(code.clone()).streams_cheaply(), "{code:?}");
        }
        let costly = [
            vec![add, (Op::Unary(Unary::Tanh, Src::Reg(0)), 1)],
            vec![(Op::Binary(Binary::Div, a, b), 0)],
            vec![(Op::Unary(Unary::Sqrt, a), 0)],
            vec![(Op::Binary(Binary::Pow, a, b), 0)],
            vec![(Op::Unary(Unary::Exp, a), 0)],
        ];
        for code in costly {
            assert!(!loop_of(code.clone()).streams_cheaply(), "{code:?}");
        }
    }
}
