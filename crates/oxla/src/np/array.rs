//! `Array`: an eager, NumPy-like host array. Each operation builds a small
//! computation with the NumPy-style front end (so broadcasting and promotion
//! are exactly [`super::Tensor`]'s) and runs it at once with the interpreter.
//!
//! Like `XlaOp`, an `Array` produced by a failed operation carries the error
//! instead of a value, so expressions read as math (`&a + &b * 2.0`); the
//! error surfaces from any accessor (`shape`, `to_vec`, ...) or [`Array::check`].
//! In-place updates follow the Array API: they succeed only when the right
//! operand broadcasts to the (indexed) left operand's shape without changing it.

use std::fmt;
use std::ops;

use oxla_builder::XlaBuilder;
use oxla_hlo::literal::NestedArray;
use oxla_hlo::{ArrayData, ArrayLiteral, ArrayShape, Literal, NativeType, PrimitiveType};

use super::broadcast::{broadcast_pair, shape_text};
use super::ops::{BinaryOp, Operand, Tensor, binary, where_};
use super::promote::{WeakScalar, result_type, weak_result_type};
use crate::client::{Client, CompileOptions};

/// Why an eager operation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NpError(pub String);

type NpResult<T> = Result<T, NpError>;

/// A host array with a dtype and a shape; see the module documentation.
#[derive(Clone, Debug)]
pub struct Array {
    value: NpResult<ArrayLiteral>,
}

/// One index of [`Array::index`] / [`Array::set`], as in NumPy's basic indexing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ix {
    /// One position (negative counts from the end); the dimension is dropped.
    At(i64),
    /// `start:stop:step` (each part optional as in NumPy; bounds clamp).
    Range {
        start: Option<i64>,
        stop: Option<i64>,
        step: i64,
    },
    /// `:`, the whole dimension.
    All,
    /// `...`, as many `:` as needed.
    Ellipsis,
    /// `None`/`np.newaxis`: a new dimension of size 1.
    NewAxis,
}

impl Ix {
    /// `start:stop` with step 1.
    pub fn range(start: i64, stop: i64) -> Ix {
        Ix::Range {
            start: Some(start),
            stop: Some(stop),
            step: 1,
        }
    }
}

/// Values usable on either side of an eager operation: arrays and Rust scalars.
pub trait IntoArrayOperand {
    fn into_array_operand(self) -> ArrayOperand;
}

/// An eager operand.
#[derive(Clone, Debug)]
pub enum ArrayOperand {
    Array(Array),
    Scalar(WeakScalar),
}

impl IntoArrayOperand for &Array {
    fn into_array_operand(self) -> ArrayOperand {
        ArrayOperand::Array(self.clone())
    }
}

impl IntoArrayOperand for Array {
    fn into_array_operand(self) -> ArrayOperand {
        ArrayOperand::Array(self)
    }
}

impl IntoArrayOperand for bool {
    fn into_array_operand(self) -> ArrayOperand {
        ArrayOperand::Scalar(WeakScalar::Bool(self))
    }
}

macro_rules! scalar_array_operands {
    ($variant:ident, $conv:ty: $($t:ty),*) => {
        $(impl IntoArrayOperand for $t {
            fn into_array_operand(self) -> ArrayOperand {
                ArrayOperand::Scalar(WeakScalar::$variant(self as $conv))
            }
        })*
    };
}

scalar_array_operands!(Int, i128: i8, i16, i32, i64, u8, u16, u32, u64, isize, usize);
scalar_array_operands!(Float, f64: f32, f64);

fn err<T>(message: impl Into<String>) -> NpResult<T> {
    Err(NpError(message.into()))
}

impl Array {
    fn ok(a: ArrayLiteral) -> Array {
        Array { value: Ok(a) }
    }

    fn failed(e: NpError) -> Array {
        Array { value: Err(e) }
    }

    /// An array from a literal (which must be an array, not a tuple or token).
    pub fn from_literal(literal: Literal) -> Array {
        match literal {
            Literal::Array(a) => Array::ok(a),
            other => Array::failed(NpError(format!(
                "an Array holds an array, not {}",
                other.shape()
            ))),
        }
    }

    /// An array of the given dimensions from row-major values.
    pub fn from_vec<T: NativeType>(dims: &[i64], values: Vec<T>) -> Array {
        match Literal::from_vec(dims, values) {
            Ok(l) => Array::from_literal(l),
            Err(e) => Array::failed(NpError(e.to_string())),
        }
    }

    /// An array from nested Rust arrays or `Vec`s, e.g. `[[1.0, 2.0], [3.0, 4.0]]`.
    pub fn from_nested<A: NestedArray>(nested: A) -> Array {
        match Literal::from_nested(nested) {
            Ok(l) => Array::from_literal(l),
            Err(e) => Array::failed(NpError(e.to_string())),
        }
    }

    /// A rank-0 array.
    pub fn scalar<T: NativeType>(value: T) -> Array {
        Array::from_literal(Literal::scalar(value))
    }

    /// Zeros (false for bool) of a dtype and shape.
    pub fn zeros(dtype: PrimitiveType, dims: &[i64]) -> Array {
        match ArrayShape::new(dtype, dims)
            .map_err(|e| NpError(e.to_string()))
            .and_then(|s| {
                let n = s.element_count().map_err(|e| NpError(e.to_string()))?;
                ArrayLiteral::new(s, ArrayData::zeros(dtype, n)).map_err(|e| NpError(e.to_string()))
            }) {
            Ok(a) => Array::ok(a),
            Err(e) => Array::failed(e),
        }
    }

    /// The value, or the error of the operation that produced this array.
    pub fn check(&self) -> NpResult<&ArrayLiteral> {
        self.value.as_ref().map_err(Clone::clone)
    }

    pub fn is_ok(&self) -> bool {
        self.value.is_ok()
    }

    pub fn dtype(&self) -> NpResult<PrimitiveType> {
        self.check().map(|a| a.element_type())
    }

    pub fn shape(&self) -> NpResult<Vec<i64>> {
        self.check().map(|a| a.dims().to_vec())
    }

    pub fn ndim(&self) -> NpResult<usize> {
        self.check().map(|a| a.dims().len())
    }

    /// The elements in row-major order, if `T` is the dtype.
    pub fn to_vec<T: NativeType>(&self) -> NpResult<Vec<T>> {
        let a = self.check()?;
        a.as_slice::<T>().map(<[T]>::to_vec).ok_or_else(|| {
            NpError(format!(
                "the array holds {}, not {}",
                a.element_type(),
                T::TYPE
            ))
        })
    }

    /// The array as a literal.
    pub fn to_literal(&self) -> NpResult<Literal> {
        self.check().map(|a| Literal::Array(a.clone()))
    }

    /// The elements converted to `dtype` (NumPy's `astype`).
    pub fn astype(&self, dtype: PrimitiveType) -> Array {
        match self.check() {
            Ok(a) => {
                match ArrayLiteral::new(a.shape().with_element_type(dtype), a.data().convert(dtype))
                {
                    Ok(c) => Array::ok(c),
                    Err(e) => Array::failed(NpError(e.to_string())),
                }
            }
            Err(e) => Array::failed(e),
        }
    }

    /// `op(self, rhs)` with broadcasting and promotion.
    pub fn binary(&self, op: BinaryOp, rhs: impl IntoArrayOperand) -> Array {
        eager_binary(
            op,
            ArrayOperand::Array(self.clone()),
            rhs.into_array_operand(),
        )
    }

    pub fn maximum(&self, rhs: impl IntoArrayOperand) -> Array {
        self.binary(BinaryOp::Maximum, rhs)
    }

    pub fn minimum(&self, rhs: impl IntoArrayOperand) -> Array {
        self.binary(BinaryOp::Minimum, rhs)
    }

    pub fn pow(&self, rhs: impl IntoArrayOperand) -> Array {
        self.binary(BinaryOp::Pow, rhs)
    }

    pub fn equal(&self, rhs: impl IntoArrayOperand) -> Array {
        self.binary(BinaryOp::Equal, rhs)
    }

    pub fn not_equal(&self, rhs: impl IntoArrayOperand) -> Array {
        self.binary(BinaryOp::NotEqual, rhs)
    }

    pub fn less(&self, rhs: impl IntoArrayOperand) -> Array {
        self.binary(BinaryOp::Less, rhs)
    }

    pub fn less_equal(&self, rhs: impl IntoArrayOperand) -> Array {
        self.binary(BinaryOp::LessEqual, rhs)
    }

    pub fn greater(&self, rhs: impl IntoArrayOperand) -> Array {
        self.binary(BinaryOp::Greater, rhs)
    }

    pub fn greater_equal(&self, rhs: impl IntoArrayOperand) -> Array {
        self.binary(BinaryOp::GreaterEqual, rhs)
    }

    pub fn logical_and(&self, rhs: impl IntoArrayOperand) -> Array {
        self.binary(BinaryOp::LogicalAnd, rhs)
    }

    pub fn logical_or(&self, rhs: impl IntoArrayOperand) -> Array {
        self.binary(BinaryOp::LogicalOr, rhs)
    }

    pub fn logical_not(&self) -> Array {
        run_unary(self, "logical_not", super::ops::logical_not)
    }

    /// `self op= rhs`, leaving `self` unchanged on error. The right operand
    /// must broadcast to `self`'s shape without changing it, and the result
    /// must be of no higher kind (bool < integer < float < complex) than
    /// `self`'s dtype, to which it is cast.
    pub fn try_op_assign(&mut self, op: BinaryOp, rhs: impl IntoArrayOperand) -> NpResult<()> {
        let lhs = self.check()?.clone();
        let rhs = rhs.into_array_operand();
        let (rdims, rtype) = match &rhs {
            ArrayOperand::Array(a) => {
                let a = a.check()?;
                (
                    a.dims().to_vec(),
                    result_type(lhs.element_type(), a.element_type())
                        .map_err(|e| NpError(e.to_string()))?,
                )
            }
            ArrayOperand::Scalar(s) => (Vec::new(), weak_result_type(lhs.element_type(), *s)),
        };
        let name = op.name();
        check_fits(name, &rdims, lhs.dims())?;
        if kind(rtype) > kind(lhs.element_type()) {
            return err(format!(
                "in-place {name}: the result type {rtype} cannot be stored in the left operand's {}",
                lhs.element_type()
            ));
        }
        let result = eager_binary(op, ArrayOperand::Array(Array::ok(lhs.clone())), rhs)
            .check()?
            .clone();
        let data = result.data().convert(lhs.element_type());
        self.value =
            Ok(ArrayLiteral::new(lhs.shape().clone(), data).map_err(|e| NpError(e.to_string()))?);
        Ok(())
    }

    /// `x[...] = value`: `value` must broadcast to `self`'s shape without
    /// changing it; it is cast to `self`'s dtype.
    pub fn assign(&mut self, value: impl IntoArrayOperand) -> NpResult<()> {
        self.set(&[Ix::Ellipsis], value)
    }

    /// The sub-array selected by NumPy basic indexing (a copy).
    pub fn index(&self, index: &[Ix]) -> Array {
        let run = || -> NpResult<ArrayLiteral> {
            let a = self.check()?;
            let sel = Selection::new(a.dims(), index)?;
            let shape = ArrayShape::new(a.element_type(), sel.result_dims.clone())
                .map_err(|e| NpError(e.to_string()))?;
            ArrayLiteral::new(shape, a.data().take(&sel.linear(a.dims())))
                .map_err(|e| NpError(e.to_string()))
        };
        match run() {
            Ok(a) => Array::ok(a),
            Err(e) => Array::failed(e),
        }
    }

    /// `x[index] = value`: `value` must broadcast to the indexed region's
    /// shape without changing it; it is cast to `self`'s dtype.
    pub fn set(&mut self, index: &[Ix], value: impl IntoArrayOperand) -> NpResult<()> {
        let a = self.check()?.clone();
        let sel = Selection::new(a.dims(), index)?;
        let region = sel.result_dims.clone();
        let values: ArrayLiteral = match value.into_array_operand() {
            ArrayOperand::Array(v) => v.check()?.clone(),
            ArrayOperand::Scalar(s) => {
                let ty = weak_result_type(a.element_type(), s);
                let scalar = match s {
                    WeakScalar::Bool(b) => oxla_hlo::Scalar::Pred(b),
                    WeakScalar::Int(i) => oxla_hlo::Scalar::Int(i),
                    WeakScalar::Float(f) => oxla_hlo::Scalar::Float(f),
                };
                match Literal::splat(&ArrayShape::scalar(ty), scalar) {
                    Ok(Literal::Array(l)) => l,
                    _ => return err("cannot make a scalar"),
                }
            }
        };
        check_fits("assignment", values.dims(), &region)?;
        let spread = broadcast_host(&values, &region)
            .data()
            .convert(a.element_type());
        let mut data = a.data().clone();
        data.scatter_from(
            &spread,
            sel.linear(a.dims())
                .into_iter()
                .enumerate()
                .map(|(i, j)| (j, i)),
        );
        self.value =
            Ok(ArrayLiteral::new(a.shape().clone(), data).map_err(|e| NpError(e.to_string()))?);
        Ok(())
    }
}

/// `where(condition, x, y)` eagerly.
pub fn where_array(condition: &Array, x: impl IntoArrayOperand, y: impl IntoArrayOperand) -> Array {
    let (x, y) = (x.into_array_operand(), y.into_array_operand());
    let mut inputs = vec![condition.clone()];
    for side in [&x, &y] {
        if let ArrayOperand::Array(a) = side {
            inputs.push(a.clone());
        }
    }
    run("where", &inputs, |_, t| {
        let mut next = t[1..].iter().copied();
        let mut pick = |side: &ArrayOperand| match side {
            ArrayOperand::Array(_) => Operand::Tensor(next.next().unwrap_or(t[0])),
            ArrayOperand::Scalar(s) => Operand::Scalar(*s),
        };
        let (xo, yo) = (pick(&x), pick(&y));
        where_(t[0], xo, yo)
    })
}

/// Bool < integer < float < complex.
fn kind(t: PrimitiveType) -> u8 {
    if t.is_pred() {
        0
    } else if t.is_integral() {
        1
    } else if t.is_float() {
        2
    } else {
        3
    }
}

/// The in-place rule: `value` broadcasts to `target` and the result is `target` itself.
fn check_fits(what: &str, value: &[i64], target: &[i64]) -> NpResult<()> {
    match broadcast_pair(value, target) {
        Ok(d) if d == target => Ok(()),
        Ok(d) => err(format!(
            "{what}: a value of shape {} cannot be stored in shape {}: broadcasting would change it to {}",
            shape_text(value),
            shape_text(target),
            shape_text(&d)
        )),
        Err(e) => err(format!("{what}: {e}")),
    }
}

/// `value` broadcast on the host to `dims` (its dimensions aligned on the right).
fn broadcast_host(value: &ArrayLiteral, dims: &[i64]) -> ArrayLiteral {
    let vd = value.dims();
    let offset = dims.len() - vd.len();
    let n: i64 = dims.iter().product();
    let vstrides = value.shape().strides();
    let mut indices = Vec::with_capacity(n.max(0) as usize);
    let mut counter = vec![0i64; dims.len()];
    for _ in 0..n.max(0) {
        let mut src = 0usize;
        for (k, &vdim) in vd.iter().enumerate() {
            let i = if vdim == 1 { 0 } else { counter[k + offset] };
            src += i as usize * vstrides[k];
        }
        indices.push(src);
        for k in (0..dims.len()).rev() {
            counter[k] += 1;
            if counter[k] < dims[k] {
                break;
            }
            counter[k] = 0;
        }
    }
    let shape = ArrayShape::new_unchecked(value.element_type(), dims.to_vec());
    // `indices` has exactly the element count of `shape`.
    ArrayLiteral::new(shape, value.data().take(&indices)).unwrap_or_else(|_| value.clone())
}

/// Which positions of each dimension an index selects.
struct Selection {
    /// Per original dimension, the positions taken.
    picks: Vec<Vec<i64>>,
    result_dims: Vec<i64>,
}

impl Selection {
    fn new(dims: &[i64], index: &[Ix]) -> NpResult<Selection> {
        let consuming = index
            .iter()
            .filter(|i| !matches!(i, Ix::Ellipsis | Ix::NewAxis))
            .count();
        if index.iter().filter(|i| **i == Ix::Ellipsis).count() > 1 {
            return err("an index can only have one ellipsis");
        }
        if consuming > dims.len() {
            return err(format!(
                "too many indices for an array of shape {}: {consuming} were given",
                shape_text(dims)
            ));
        }
        let mut expanded = Vec::new();
        for &ix in index {
            if ix == Ix::Ellipsis {
                expanded.extend(std::iter::repeat_n(Ix::All, dims.len() - consuming));
            } else {
                expanded.push(ix);
            }
        }
        while expanded.iter().filter(|i| **i != Ix::NewAxis).count() < dims.len() {
            expanded.push(Ix::All);
        }
        let (mut picks, mut result_dims, mut d) = (Vec::new(), Vec::new(), 0usize);
        for ix in expanded {
            match ix {
                Ix::NewAxis => result_dims.push(1),
                Ix::At(i) => {
                    let size = dims[d];
                    let j = if i < 0 { i + size } else { i };
                    if j < 0 || j >= size {
                        return err(format!(
                            "index {i} is out of bounds for dimension {d} of size {size}"
                        ));
                    }
                    picks.push(vec![j]);
                    d += 1;
                }
                Ix::All => {
                    picks.push((0..dims[d]).collect());
                    result_dims.push(dims[d]);
                    d += 1;
                }
                Ix::Range { start, stop, step } => {
                    let p = range_positions(dims[d], start, stop, step)?;
                    result_dims.push(p.len() as i64);
                    picks.push(p);
                    d += 1;
                }
                Ix::Ellipsis => {}
            }
        }
        Ok(Selection { picks, result_dims })
    }

    /// Row-major linear indices (into an array of `dims`) of the selection, in order.
    fn linear(&self, dims: &[i64]) -> Vec<usize> {
        let strides = ArrayShape::new_unchecked(PrimitiveType::U8, dims.to_vec()).strides();
        let mut out = vec![0usize];
        for (p, &stride) in self.picks.iter().zip(&strides) {
            out = out
                .iter()
                .flat_map(|&base| p.iter().map(move |&i| base + i as usize * stride))
                .collect();
        }
        out
    }
}

/// Python's slice semantics for one dimension.
fn range_positions(
    size: i64,
    start: Option<i64>,
    stop: Option<i64>,
    step: i64,
) -> NpResult<Vec<i64>> {
    if step == 0 {
        return err("slice step cannot be zero");
    }
    let clamp = |v: i64, lo: i64, hi: i64| v.clamp(lo, hi);
    let norm = |v: i64| if v < 0 { v + size } else { v };
    let positions: Vec<i64> = if step > 0 {
        let s = clamp(start.map_or(0, norm), 0, size);
        let e = clamp(stop.map_or(size, norm), 0, size);
        (s..e).step_by(step as usize).collect()
    } else {
        let s = clamp(start.map_or(size - 1, norm), -1, size - 1);
        let e = clamp(
            stop.map_or(-1, |v| if v < 0 { v + size } else { v })
                .max(-1),
            -1,
            size - 1,
        );
        let mut p = Vec::new();
        let mut i = s;
        while i > e {
            p.push(i);
            i += step;
        }
        p
    };
    Ok(positions)
}

/// Builds and runs a computation over `inputs` (as parameters).
fn run(
    op: &str,
    inputs: &[Array],
    f: impl for<'b> Fn(&'b XlaBuilder, &[Tensor<'b>]) -> Tensor<'b>,
) -> Array {
    let literals: Vec<&ArrayLiteral> =
        match inputs.iter().map(Array::check).collect::<NpResult<_>>() {
            Ok(l) => l,
            Err(e) => return Array::failed(e),
        };
    let b = XlaBuilder::new(op);
    let params: Vec<Tensor<'_>> = literals
        .iter()
        .enumerate()
        .map(|(i, l)| {
            Tensor::parameter(
                &b,
                i,
                &oxla_hlo::Shape::Array(l.shape().clone()),
                &format!("x{i}"),
            )
        })
        .collect();
    let root = f(&b, &params);
    let result = b
        .build(root.op())
        .map_err(|e| NpError(format!("{}: {}", e.op, e.message)))
        .and_then(|c| {
            Client::default()
                .compile(&c, &CompileOptions::default())
                .map_err(|e| NpError(e.to_string()))
        })
        .and_then(|exe| {
            let args: Vec<Literal> = literals
                .iter()
                .map(|l| Literal::Array((*l).clone()))
                .collect();
            exe.execute(&args).map_err(|e| NpError(e.to_string()))
        });
    match result {
        Ok(l) => Array::from_literal(l),
        Err(e) => Array::failed(e),
    }
}

fn run_unary(a: &Array, op: &str, f: for<'b> fn(Tensor<'b>) -> Tensor<'b>) -> Array {
    run(op, std::slice::from_ref(a), |_, t| f(t[0]))
}

fn eager_binary(op: BinaryOp, a: ArrayOperand, b: ArrayOperand) -> Array {
    let inputs: Vec<Array> = [&a, &b]
        .into_iter()
        .filter_map(|x| match x {
            ArrayOperand::Array(a) => Some(a.clone()),
            ArrayOperand::Scalar(_) => None,
        })
        .collect();
    if inputs.is_empty() {
        return Array::failed(NpError(format!("{}: needs an array operand", op.name())));
    }
    run(op.name(), &inputs, |builder, t| {
        let mut next = t.iter().copied();
        let mut operand = |x: &ArrayOperand| match x {
            ArrayOperand::Array(_) => Operand::Tensor(next.next().unwrap_or(t[0])),
            ArrayOperand::Scalar(s) => Operand::Scalar(*s),
        };
        let (x, y) = (operand(&a), operand(&b));
        binary(builder, op, x, y)
    })
}

macro_rules! array_operator {
    ($trait:ident, $method:ident, $assign_trait:ident, $assign_method:ident, $op:ident) => {
        impl<R: IntoArrayOperand> ops::$trait<R> for &Array {
            type Output = Array;
            fn $method(self, rhs: R) -> Array {
                eager_binary(
                    BinaryOp::$op,
                    ArrayOperand::Array(self.clone()),
                    rhs.into_array_operand(),
                )
            }
        }

        impl<R: IntoArrayOperand> ops::$trait<R> for Array {
            type Output = Array;
            fn $method(self, rhs: R) -> Array {
                eager_binary(
                    BinaryOp::$op,
                    ArrayOperand::Array(self),
                    rhs.into_array_operand(),
                )
            }
        }

        /// In place; an error (see [`Array::try_op_assign`]) leaves the array
        /// holding that error.
        impl<R: IntoArrayOperand> ops::$assign_trait<R> for Array {
            fn $assign_method(&mut self, rhs: R) {
                if let Err(e) = self.try_op_assign(BinaryOp::$op, rhs) {
                    self.value = Err(e);
                }
            }
        }
    };
}

array_operator!(Add, add, AddAssign, add_assign, Add);
array_operator!(Sub, sub, SubAssign, sub_assign, Subtract);
array_operator!(Mul, mul, MulAssign, mul_assign, Multiply);
array_operator!(Div, div, DivAssign, div_assign, Divide);
array_operator!(Rem, rem, RemAssign, rem_assign, Remainder);

macro_rules! scalar_lhs_array_operators {
    ($($t:ty),*) => {
        $(
            impl ops::Add<&Array> for $t {
                type Output = Array;
                fn add(self, rhs: &Array) -> Array { eager_binary(BinaryOp::Add, self.into_array_operand(), ArrayOperand::Array(rhs.clone())) }
            }
            impl ops::Sub<&Array> for $t {
                type Output = Array;
                fn sub(self, rhs: &Array) -> Array { eager_binary(BinaryOp::Subtract, self.into_array_operand(), ArrayOperand::Array(rhs.clone())) }
            }
            impl ops::Mul<&Array> for $t {
                type Output = Array;
                fn mul(self, rhs: &Array) -> Array { eager_binary(BinaryOp::Multiply, self.into_array_operand(), ArrayOperand::Array(rhs.clone())) }
            }
            impl ops::Div<&Array> for $t {
                type Output = Array;
                fn div(self, rhs: &Array) -> Array { eager_binary(BinaryOp::Divide, self.into_array_operand(), ArrayOperand::Array(rhs.clone())) }
            }
        )*
    };
}

scalar_lhs_array_operators!(i32, i64, f32, f64);

impl ops::Neg for &Array {
    type Output = Array;
    fn neg(self) -> Array {
        run("negative", std::slice::from_ref(self), |_, t| -t[0])
    }
}

impl ops::Not for &Array {
    type Output = Array;
    fn not(self) -> Array {
        self.logical_not()
    }
}

/// Arrays compare equal when both hold values that are equal element by
/// element (NaN equals NaN) with the same dtype and shape.
impl PartialEq for Array {
    fn eq(&self, other: &Array) -> bool {
        match (&self.value, &other.value) {
            (Ok(a), Ok(b)) => Literal::Array(a.clone()) == Literal::Array(b.clone()),
            _ => false,
        }
    }
}

impl Array {
    /// NumPy's `repr()`: `array([1., 2.], dtype=float32)`.
    pub fn repr(&self) -> String {
        match &self.value {
            Ok(a) => super::print::numpy_repr(a),
            Err(e) => format!("<error: {e}>"),
        }
    }
}

/// NumPy's `str()`: `[[1. 2.]\n [3. 4.]]`; a failed array prints its error.
impl fmt::Display for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Ok(a) => f.write_str(&super::print::numpy_str(a)),
            Err(e) => write!(f, "<error: {e}>"),
        }
    }
}
