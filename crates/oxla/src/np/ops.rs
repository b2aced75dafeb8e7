//! The NumPy-style front end over `XlaBuilder`: [`Tensor`] handles whose
//! operations broadcast implicitly (Array API rules) and promote mixed
//! element types. Every implicit step is lowered to explicit XLA operations
//! (`convert`, `broadcast`), so the strict core stays strict.

use std::ops;

use oxla_builder::{XlaBuilder, XlaOp};
use oxla_hlo::literal::Scalar;
use oxla_hlo::{ArrayShape, Literal, NativeType, PrimitiveType, Shape};

use super::broadcast::broadcast_pair;
use super::promote::{WeakScalar, result_type, weak_result_type};

/// A value in a NumPy-style computation: an `XlaOp` whose operations
/// broadcast and promote implicitly.
#[derive(Clone, Copy, Debug)]
pub struct Tensor<'b>(pub XlaOp<'b>);

/// An operand of a NumPy-style operation: a tensor or a Rust scalar.
#[derive(Clone, Copy, Debug)]
pub enum Operand<'b> {
    Tensor(Tensor<'b>),
    Scalar(WeakScalar),
}

/// Values usable as operands: tensors, `XlaOp`s and Rust scalars.
pub trait IntoOperand<'b> {
    fn into_operand(self) -> Operand<'b>;
}

impl<'b> IntoOperand<'b> for Operand<'b> {
    fn into_operand(self) -> Operand<'b> {
        self
    }
}

impl<'b> IntoOperand<'b> for Tensor<'b> {
    fn into_operand(self) -> Operand<'b> {
        Operand::Tensor(self)
    }
}

impl<'b> IntoOperand<'b> for XlaOp<'b> {
    fn into_operand(self) -> Operand<'b> {
        Operand::Tensor(Tensor(self))
    }
}

impl<'b> IntoOperand<'b> for bool {
    fn into_operand(self) -> Operand<'b> {
        Operand::Scalar(WeakScalar::Bool(self))
    }
}

macro_rules! scalar_operands {
    ($variant:ident, $conv:ty: $($t:ty),*) => {
        $(impl<'b> IntoOperand<'b> for $t {
            fn into_operand(self) -> Operand<'b> {
                Operand::Scalar(WeakScalar::$variant(self as $conv))
            }
        })*
    };
}

scalar_operands!(Int, i128: i8, i16, i32, i64, u8, u16, u32, u64, isize, usize);
scalar_operands!(Float, f64: f32, f64);

impl<'b> Tensor<'b> {
    pub fn op(self) -> XlaOp<'b> {
        self.0
    }

    pub fn builder(self) -> &'b XlaBuilder {
        self.0.builder()
    }

    /// The tensor's array shape, if it is a valid array.
    fn array(self) -> Option<ArrayShape> {
        match self.0.shape() {
            Ok(Shape::Array(a)) => Some(a),
            _ => None,
        }
    }
}

/// Element type and dimensions of one side, or the error to return.
fn describe<'b>(op: &str, x: &Operand<'b>) -> Result<Option<(PrimitiveType, Vec<i64>)>, XlaOp<'b>> {
    match x {
        Operand::Scalar(_) => Ok(None),
        Operand::Tensor(t) => match t.0.shape() {
            Ok(Shape::Array(a)) => Ok(Some((a.element_type(), a.dims().to_vec()))),
            Ok(other) => Err(t
                .builder()
                .report_error(op, format!("operands must be arrays, got {other}"))),
            Err(_) => Err(t.0),
        },
    }
}

/// A scalar constant of type `ty`, or an error if the value does not fit.
#[track_caller]
fn scalar_constant<'b>(
    b: &'b XlaBuilder,
    op: &str,
    value: WeakScalar,
    ty: PrimitiveType,
) -> XlaOp<'b> {
    let s = match value {
        WeakScalar::Bool(v) => Scalar::Pred(v),
        WeakScalar::Int(v) => Scalar::Int(v),
        WeakScalar::Float(v) => Scalar::Float(v),
    };
    let literal = match Literal::splat(&ArrayShape::scalar(ty), s) {
        Ok(l) => l,
        Err(e) => return b.report_error(op, e.to_string()),
    };
    if let (WeakScalar::Int(v), true) = (value, ty.is_integral()) {
        let back = literal.as_array().map(|a| a.data().scalar(0));
        if back != Some(Scalar::Int(v)) {
            return b.report_error(op, format!("the scalar {v} does not fit in {ty}"));
        }
    }
    b.constant_literal(&literal)
}

/// Converts `t` to `ty` and broadcasts it to `dims` (aligned on the right).
#[track_caller]
fn fit<'b>(
    t: XlaOp<'b>,
    from: &(PrimitiveType, Vec<i64>),
    ty: PrimitiveType,
    dims: &[i64],
) -> XlaOp<'b> {
    let converted = if from.0 == ty {
        t
    } else {
        t.convert_element_type(ty)
    };
    if from.1 == dims {
        return converted;
    }
    let offset = (dims.len() - from.1.len()) as i64;
    let mapping: Vec<i64> = (0..from.1.len() as i64).map(|i| i + offset).collect();
    converted.broadcast_in_dim(dims, &mapping)
}

/// Promotes and broadcasts two operands to a common element type (or the one
/// `force` picks from it) and a common shape, returning them as `XlaOp`s.
#[track_caller]
fn unify<'b>(
    builder: &'b XlaBuilder,
    op: &str,
    a: Operand<'b>,
    b: Operand<'b>,
    force: Option<fn(PrimitiveType) -> PrimitiveType>,
) -> Result<(XlaOp<'b>, XlaOp<'b>), XlaOp<'b>> {
    let (da, db) = (describe(op, &a)?, describe(op, &b)?);
    let ty = match (&da, &db, a, b) {
        (Some((x, _)), Some((y, _)), _, _) => match result_type(*x, *y) {
            Ok(t) => t,
            Err(e) => return Err(builder.report_error(op, e.to_string())),
        },
        (Some((x, _)), None, _, Operand::Scalar(s))
        | (None, Some((x, _)), Operand::Scalar(s), _) => weak_result_type(*x, s),
        // Two scalars (only `where` with scalar branches): the kinds decide.
        (_, _, Operand::Scalar(s), Operand::Scalar(t)) => {
            match result_type(default_type(s), default_type(t)) {
                Ok(t) => t,
                Err(e) => return Err(builder.report_error(op, e.to_string())),
            }
        }
        _ => return Err(builder.report_error(op, "internal error: operand without a shape")),
    };
    let ty = force.map_or(ty, |f| f(ty));
    let dims = match (&da, &db) {
        (Some((_, x)), Some((_, y))) => match broadcast_pair(x, y) {
            Ok(d) => d,
            Err(e) => return Err(builder.report_error(op, e.to_string())),
        },
        (Some((_, x)), None) | (None, Some((_, x))) => x.clone(),
        (None, None) => Vec::new(),
    };
    Ok((
        lower(builder, op, a, &da, ty, &dims),
        lower(builder, op, b, &db, ty, &dims),
    ))
}

/// The type a scalar has on its own: bool, s64 or f64.
fn default_type(w: WeakScalar) -> PrimitiveType {
    match w {
        WeakScalar::Bool(_) => PrimitiveType::Pred,
        WeakScalar::Int(_) => PrimitiveType::S64,
        WeakScalar::Float(_) => PrimitiveType::F64,
    }
}

/// One operand converted to `ty` and broadcast to `dims`.
#[track_caller]
fn lower<'b>(
    builder: &'b XlaBuilder,
    op: &str,
    x: Operand<'b>,
    described: &Option<(PrimitiveType, Vec<i64>)>,
    ty: PrimitiveType,
    dims: &[i64],
) -> XlaOp<'b> {
    match (x, described) {
        (Operand::Tensor(t), Some(d)) => fit(t.0, d, ty, dims),
        (Operand::Tensor(t), None) => t.0,
        (Operand::Scalar(s), _) => {
            let c = scalar_constant(builder, op, s, ty);
            if dims.is_empty() {
                c
            } else {
                c.broadcast(dims)
            }
        }
    }
}

#[track_caller]
fn apply<'b>(
    builder: &'b XlaBuilder,
    op: &str,
    a: Operand<'b>,
    b: Operand<'b>,
    f: fn(XlaOp<'b>, XlaOp<'b>) -> XlaOp<'b>,
) -> Tensor<'b> {
    match unify(builder, op, a, b, None) {
        Ok((x, y)) => Tensor(f(x, y)),
        Err(bad) => Tensor(bad),
    }
}

macro_rules! np_binary {
    ($($(#[$m:meta])* $name:ident => $f:expr;)*) => {
        $(
            $(#[$m])*
            /// `b` may be a tensor or a Rust scalar; a scalar on the left is
            /// written with the operators (`2.0 - t`).
            #[track_caller]
            pub fn $name<'b>(a: Tensor<'b>, b: impl IntoOperand<'b>) -> Tensor<'b> {
                apply(a.builder(), stringify!($name), Operand::Tensor(a), b.into_operand(), $f)
            }
        )*
    };
}

np_binary! {
    /// `a + b`.
    add => |x, y| x.add(y);
    /// `a - b`.
    subtract => |x, y| x.sub(y);
    /// `a * b`.
    multiply => |x, y| x.mul(y);
    /// `a ** b` (integer powers with negative exponents give 0, as in XLA).
    pow => |x, y| x.pow(y);
    /// Element-wise maximum, propagating NaN.
    maximum => |x, y| x.max(y);
    /// Element-wise minimum, propagating NaN.
    minimum => |x, y| x.min(y);
    /// `a == b`.
    equal => |x, y| x.eq(y);
    /// `a != b`.
    not_equal => |x, y| x.ne(y);
    /// `a < b`.
    less => |x, y| x.lt(y);
    /// `a <= b`.
    less_equal => |x, y| x.le(y);
    /// `a > b`.
    greater => |x, y| x.gt(y);
    /// `a >= b`.
    greater_equal => |x, y| x.ge(y);
}

/// True division: integer and bool operands are divided as f64.
#[track_caller]
pub fn divide<'b>(a: Tensor<'b>, b: impl IntoOperand<'b>) -> Tensor<'b> {
    divide_operands(a.builder(), Operand::Tensor(a), b.into_operand())
}

#[track_caller]
fn divide_operands<'b>(builder: &'b XlaBuilder, a: Operand<'b>, b: Operand<'b>) -> Tensor<'b> {
    let to_float = |t: PrimitiveType| {
        if t.is_floating() {
            t
        } else {
            PrimitiveType::F64
        }
    };
    match unify(builder, "divide", a, b, Some(to_float)) {
        Ok((x, y)) => Tensor(x.div(y)),
        Err(bad) => Tensor(bad),
    }
}

/// Remainder with the sign of the divisor (Python's `%`, the Array API's
/// `remainder`), unlike XLA's `rem`, which takes the dividend's sign.
#[track_caller]
pub fn remainder<'b>(a: Tensor<'b>, b: impl IntoOperand<'b>) -> Tensor<'b> {
    remainder_operands(a.builder(), Operand::Tensor(a), b.into_operand())
}

#[track_caller]
fn remainder_operands<'b>(builder: &'b XlaBuilder, a: Operand<'b>, b: Operand<'b>) -> Tensor<'b> {
    match unify(builder, "remainder", a, b, None) {
        Ok((x, y)) => {
            let r = x.rem(y);
            let Ok(Shape::Array(shape)) = r.shape() else {
                return Tensor(r);
            };
            let ty = shape.element_type();
            if ty.is_unsigned_int() || ty.is_pred() {
                return Tensor(r);
            }
            // Where r is non-zero and its sign differs from the divisor's, add the divisor.
            let zero = scalar_constant(x.builder(), "remainder", WeakScalar::Int(0), ty)
                .broadcast(shape.dims());
            let differs = r.lt(zero).ne(y.lt(zero));
            let fix = r.ne(zero).and(differs);
            Tensor(fix.select(r.add(y), r))
        }
        Err(bad) => Tensor(bad),
    }
}

fn expect_bool<'b>(op: &str, t: Tensor<'b>) -> Result<(), Tensor<'b>> {
    match t.array() {
        Some(a) if a.element_type() == PrimitiveType::Pred => Ok(()),
        Some(a) => Err(Tensor(
            t.builder()
                .report_error(op, format!("needs bool operands, got {a}")),
        )),
        None => Err(t),
    }
}

#[track_caller]
fn logical<'b>(
    builder: &'b XlaBuilder,
    op: &str,
    a: Operand<'b>,
    b: Operand<'b>,
    f: fn(XlaOp<'b>, XlaOp<'b>) -> XlaOp<'b>,
) -> Tensor<'b> {
    for side in [a, b] {
        if let Operand::Tensor(t) = side
            && let Err(e) = expect_bool(op, t)
        {
            return e;
        }
    }
    apply(builder, op, a, b, f)
}

/// Logical and of bool arrays.
#[track_caller]
pub fn logical_and<'b>(a: Tensor<'b>, b: impl IntoOperand<'b>) -> Tensor<'b> {
    logical(
        a.builder(),
        "logical_and",
        Operand::Tensor(a),
        b.into_operand(),
        |x, y| x.and(y),
    )
}

/// Logical or of bool arrays.
#[track_caller]
pub fn logical_or<'b>(a: Tensor<'b>, b: impl IntoOperand<'b>) -> Tensor<'b> {
    logical(
        a.builder(),
        "logical_or",
        Operand::Tensor(a),
        b.into_operand(),
        |x, y| x.or(y),
    )
}

/// Logical not of a bool array.
#[track_caller]
pub fn logical_not(a: Tensor<'_>) -> Tensor<'_> {
    match expect_bool("logical_not", a) {
        Ok(()) => Tensor(a.0.not()),
        Err(e) => e,
    }
}

/// `where(condition, x, y)`: elements of `x` where `condition` holds, else of
/// `y`; all three broadcast together and `x`, `y` promote to a common type.
#[track_caller]
pub fn where_<'b>(
    condition: Tensor<'b>,
    x: impl IntoOperand<'b>,
    y: impl IntoOperand<'b>,
) -> Tensor<'b> {
    let builder = condition.builder();
    let Some(cond) = condition.array() else {
        return condition;
    };
    if cond.element_type() != PrimitiveType::Pred {
        return Tensor(
            builder.report_error("where", format!("the condition must be bool, got {cond}")),
        );
    }
    let (x, y) = match unify(builder, "where", x.into_operand(), y.into_operand(), None) {
        Ok(v) => v,
        Err(bad) => return Tensor(bad),
    };
    let Some(values) = Tensor(x).array() else {
        return Tensor(x);
    };
    let dims = match broadcast_pair(cond.dims(), values.dims()) {
        Ok(d) => d,
        Err(e) => return Tensor(builder.report_error("where", e.to_string())),
    };
    let c = fit(
        condition.0,
        &(PrimitiveType::Pred, cond.dims().to_vec()),
        PrimitiveType::Pred,
        &dims,
    );
    let v = (values.element_type(), values.dims().to_vec());
    Tensor(c.select(fit(x, &v, v.0, &dims), fit(y, &v, v.0, &dims)))
}

impl<'b> Tensor<'b> {
    /// A parameter of the builder, as a tensor.
    #[track_caller]
    pub fn parameter(
        builder: &'b XlaBuilder,
        number: usize,
        shape: &Shape,
        name: &str,
    ) -> Tensor<'b> {
        Tensor(builder.parameter(number, shape, name))
    }

    /// A constant array from a literal.
    #[track_caller]
    pub fn constant(builder: &'b XlaBuilder, literal: &Literal) -> Tensor<'b> {
        Tensor(builder.constant_literal(literal))
    }

    /// A rank-1 constant.
    #[track_caller]
    pub fn from_slice<T: NativeType>(builder: &'b XlaBuilder, values: &[T]) -> Tensor<'b> {
        Tensor(builder.constant_r1(values))
    }
}

macro_rules! tensor_operator {
    ($trait:ident, $method:ident, $f:ident) => {
        impl<'b, R: IntoOperand<'b>> ops::$trait<R> for Tensor<'b> {
            type Output = Tensor<'b>;
            #[track_caller]
            fn $method(self, rhs: R) -> Tensor<'b> {
                $f(self, rhs)
            }
        }
    };
}

tensor_operator!(Add, add, add);
tensor_operator!(Sub, sub, subtract);
tensor_operator!(Mul, mul, multiply);
tensor_operator!(Div, div, divide);
tensor_operator!(Rem, rem, remainder);

macro_rules! scalar_lhs_operators {
    ($($t:ty),*) => {
        $(
            impl<'b> ops::Add<Tensor<'b>> for $t {
                type Output = Tensor<'b>;
                #[track_caller]
                fn add(self, rhs: Tensor<'b>) -> Tensor<'b> { apply(rhs.builder(), "add", self.into_operand(), Operand::Tensor(rhs), |x, y| x.add(y)) }
            }
            impl<'b> ops::Sub<Tensor<'b>> for $t {
                type Output = Tensor<'b>;
                #[track_caller]
                fn sub(self, rhs: Tensor<'b>) -> Tensor<'b> { apply(rhs.builder(), "subtract", self.into_operand(), Operand::Tensor(rhs), |x, y| x.sub(y)) }
            }
            impl<'b> ops::Mul<Tensor<'b>> for $t {
                type Output = Tensor<'b>;
                #[track_caller]
                fn mul(self, rhs: Tensor<'b>) -> Tensor<'b> { apply(rhs.builder(), "multiply", self.into_operand(), Operand::Tensor(rhs), |x, y| x.mul(y)) }
            }
            impl<'b> ops::Div<Tensor<'b>> for $t {
                type Output = Tensor<'b>;
                #[track_caller]
                fn div(self, rhs: Tensor<'b>) -> Tensor<'b> { divide_operands(rhs.builder(), self.into_operand(), Operand::Tensor(rhs)) }
            }
            impl<'b> ops::Rem<Tensor<'b>> for $t {
                type Output = Tensor<'b>;
                #[track_caller]
                fn rem(self, rhs: Tensor<'b>) -> Tensor<'b> { remainder_operands(rhs.builder(), self.into_operand(), Operand::Tensor(rhs)) }
            }
        )*
    };
}

scalar_lhs_operators!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);

impl<'b> ops::Neg for Tensor<'b> {
    type Output = Tensor<'b>;
    #[track_caller]
    fn neg(self) -> Tensor<'b> {
        Tensor(-self.0)
    }
}

impl<'b> ops::Not for Tensor<'b> {
    type Output = Tensor<'b>;
    #[track_caller]
    fn not(self) -> Tensor<'b> {
        logical_not(self)
    }
}

/// The binary operations of the front end, for callers that pick one at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Subtract,
    Multiply,
    Divide,
    Remainder,
    Pow,
    Maximum,
    Minimum,
    Equal,
    NotEqual,
    Less,
    LessEqual,
    Greater,
    GreaterEqual,
    LogicalAnd,
    LogicalOr,
}

impl BinaryOp {
    /// The operation's NumPy name.
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Subtract => "subtract",
            BinaryOp::Multiply => "multiply",
            BinaryOp::Divide => "divide",
            BinaryOp::Remainder => "remainder",
            BinaryOp::Pow => "pow",
            BinaryOp::Maximum => "maximum",
            BinaryOp::Minimum => "minimum",
            BinaryOp::Equal => "equal",
            BinaryOp::NotEqual => "not_equal",
            BinaryOp::Less => "less",
            BinaryOp::LessEqual => "less_equal",
            BinaryOp::Greater => "greater",
            BinaryOp::GreaterEqual => "greater_equal",
            BinaryOp::LogicalAnd => "logical_and",
            BinaryOp::LogicalOr => "logical_or",
        }
    }
}

/// `op(a, b)` where either side (not both) may be a Rust scalar.
#[track_caller]
pub fn binary<'b>(
    builder: &'b XlaBuilder,
    op: BinaryOp,
    a: Operand<'b>,
    b: Operand<'b>,
) -> Tensor<'b> {
    use BinaryOp::*;
    let name = op.name();
    match op {
        Divide => divide_operands(builder, a, b),
        Remainder => remainder_operands(builder, a, b),
        LogicalAnd => logical(builder, name, a, b, |x, y| x.and(y)),
        LogicalOr => logical(builder, name, a, b, |x, y| x.or(y)),
        Add => apply(builder, name, a, b, |x, y| x.add(y)),
        Subtract => apply(builder, name, a, b, |x, y| x.sub(y)),
        Multiply => apply(builder, name, a, b, |x, y| x.mul(y)),
        Pow => apply(builder, name, a, b, |x, y| x.pow(y)),
        Maximum => apply(builder, name, a, b, |x, y| x.max(y)),
        Minimum => apply(builder, name, a, b, |x, y| x.min(y)),
        Equal => apply(builder, name, a, b, |x, y| x.eq(y)),
        NotEqual => apply(builder, name, a, b, |x, y| x.ne(y)),
        Less => apply(builder, name, a, b, |x, y| x.lt(y)),
        LessEqual => apply(builder, name, a, b, |x, y| x.le(y)),
        Greater => apply(builder, name, a, b, |x, y| x.gt(y)),
        GreaterEqual => apply(builder, name, a, b, |x, y| x.ge(y)),
    }
}
