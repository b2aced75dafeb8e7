//! `Literal`: a host value of any shape. Arrays keep their elements densely in
//! row-major order, whatever the layout in their shape says; tuples hold
//! literals; a token carries no data.

mod bytes;
mod format;
mod native;
mod nested;

use std::fmt;

pub use format::{MAX_EMPTY_ROWS, empty_array_is_compact, format_float, format_g, format_scalar};
pub use native::{ArrayData, NativeType, Scalar, round_f64_to_float_format};
pub use nested::NestedArray;

use crate::element_type::PrimitiveType;
use crate::shape::{ArrayShape, Shape, ShapeError};

/// A host value: an array of any element type, a tuple, or a token.
#[derive(Clone, Debug)]
pub enum Literal {
    Array(ArrayLiteral),
    Tuple(Vec<Literal>),
    Token,
}

/// An array value. Invariant: `data` holds exactly `shape.element_count()`
/// elements of `shape.element_type()`, in row-major order.
#[derive(Clone, Debug)]
pub struct ArrayLiteral {
    shape: ArrayShape,
    data: ArrayData,
}

/// What went wrong building, reading or transforming a literal.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LiteralError {
    #[error(transparent)]
    Shape(#[from] ShapeError),
    #[error("{context}: expected {expected}, got {actual}")]
    TypeMismatch {
        context: &'static str,
        expected: String,
        actual: String,
    },
    #[error("shape {shape} holds {expected} elements but {actual} were given")]
    ElementCount {
        shape: String,
        expected: usize,
        actual: usize,
    },
    #[error("index {index:?} is out of bounds for shape {shape}")]
    IndexOutOfBounds { index: Vec<usize>, shape: String },
    #[error(
        "cannot reshape {from} ({from_count} elements) to dimensions {to:?} ({to_count} elements)"
    )]
    Reshape {
        from: String,
        from_count: usize,
        to: Vec<i64>,
        to_count: usize,
    },
    #[error("nested array is ragged: {0}")]
    Ragged(String),
    #[error("{0}")]
    Other(String),
}

impl ArrayLiteral {
    /// An array from a shape and matching data.
    pub fn new(shape: ArrayShape, data: ArrayData) -> Result<ArrayLiteral, LiteralError> {
        if shape.element_type() != data.element_type() {
            return Err(LiteralError::TypeMismatch {
                context: "array data",
                expected: shape.element_type().to_string(),
                actual: data.element_type().to_string(),
            });
        }
        let expected = shape.element_count()?;
        if expected != data.len() {
            return Err(LiteralError::ElementCount {
                shape: shape.to_string(),
                expected,
                actual: data.len(),
            });
        }
        Ok(ArrayLiteral { shape, data })
    }

    pub fn shape(&self) -> &ArrayShape {
        &self.shape
    }

    pub fn data(&self) -> &ArrayData {
        &self.data
    }

    pub fn data_mut(&mut self) -> &mut ArrayData {
        &mut self.data
    }

    pub fn into_data(self) -> ArrayData {
        self.data
    }

    pub fn element_type(&self) -> PrimitiveType {
        self.shape.element_type()
    }

    pub fn dims(&self) -> &[i64] {
        self.shape.dims()
    }

    pub fn element_count(&self) -> usize {
        self.data.len()
    }

    /// The elements as a slice of `T`, if `T` matches the element type.
    pub fn as_slice<T: NativeType>(&self) -> Option<&[T]> {
        T::slice(&self.data)
    }

    /// Row-major linear index of a multi-dimensional index, if it is in bounds.
    pub fn linear_index(&self, index: &[usize]) -> Option<usize> {
        if index.len() != self.shape.rank() {
            return None;
        }
        let mut linear = 0usize;
        for (&i, &d) in index.iter().zip(self.shape.dims()) {
            if i >= d as usize {
                return None;
            }
            linear = linear * d as usize + i;
        }
        Some(linear)
    }
}

impl Literal {
    /// A rank-0 array holding `value`.
    pub fn scalar<T: NativeType>(value: T) -> Literal {
        Literal::Array(ArrayLiteral {
            shape: ArrayShape::scalar(T::TYPE),
            data: T::wrap(vec![value]),
        })
    }

    /// A rank-1 array.
    pub fn vec1<T: NativeType>(values: &[T]) -> Literal {
        Literal::Array(ArrayLiteral {
            shape: ArrayShape::new_unchecked(T::TYPE, [values.len() as i64]),
            data: T::wrap(values.to_vec()),
        })
    }

    /// An array of the given dimensions from row-major values.
    pub fn from_vec<T: NativeType>(dims: &[i64], values: Vec<T>) -> Result<Literal, LiteralError> {
        let shape = ArrayShape::new(T::TYPE, dims)?;
        ArrayLiteral::new(shape, T::wrap(values)).map(Literal::Array)
    }

    /// An array from nested Rust arrays, `Vec`s or slices, e.g. `[[1, 2], [3, 4]]`.
    pub fn from_nested<A: NestedArray>(nested: A) -> Result<Literal, LiteralError> {
        let (dims, values) = nested::flatten(&nested)?;
        Literal::from_vec(&dims, values)
    }

    /// An array with the given shape and data.
    pub fn from_data(shape: ArrayShape, data: ArrayData) -> Result<Literal, LiteralError> {
        ArrayLiteral::new(shape, data).map(Literal::Array)
    }

    pub fn tuple(elements: Vec<Literal>) -> Literal {
        Literal::Tuple(elements)
    }

    pub fn token() -> Literal {
        Literal::Token
    }

    /// Zeros (false, empty tuples' elements, tokens) of any shape.
    pub fn zeros(shape: &Shape) -> Result<Literal, LiteralError> {
        Ok(match shape {
            Shape::Array(a) => Literal::Array(ArrayLiteral {
                shape: a.clone(),
                data: ArrayData::zeros(a.element_type(), a.element_count()?),
            }),
            Shape::Tuple(t) => {
                Literal::Tuple(t.iter().map(Literal::zeros).collect::<Result<_, _>>()?)
            }
            Shape::Token => Literal::Token,
        })
    }

    /// An array of `shape` with every element `value` (converted to the element type).
    pub fn splat(shape: &ArrayShape, value: Scalar) -> Result<Literal, LiteralError> {
        let n = shape.element_count()?;
        Ok(Literal::Array(ArrayLiteral {
            shape: shape.clone(),
            data: ArrayData::splat(shape.element_type(), value, n),
        }))
    }

    /// The shape of this value.
    pub fn shape(&self) -> Shape {
        match self {
            Literal::Array(a) => Shape::Array(a.shape.clone()),
            Literal::Tuple(t) => Shape::Tuple(t.iter().map(Literal::shape).collect()),
            Literal::Token => Shape::Token,
        }
    }

    pub fn as_array(&self) -> Option<&ArrayLiteral> {
        match self {
            Literal::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The array inside, or an error naming what this literal is instead.
    pub fn array(&self) -> Result<&ArrayLiteral, LiteralError> {
        self.as_array().ok_or_else(|| LiteralError::TypeMismatch {
            context: "literal",
            expected: "an array".into(),
            actual: self.shape().to_string(),
        })
    }

    pub fn into_array(self) -> Result<ArrayLiteral, LiteralError> {
        match self {
            Literal::Array(a) => Ok(a),
            other => Err(LiteralError::TypeMismatch {
                context: "literal",
                expected: "an array".into(),
                actual: other.shape().to_string(),
            }),
        }
    }

    pub fn element_type(&self) -> Option<PrimitiveType> {
        self.as_array().map(|a| a.element_type())
    }

    /// The elements of a tuple.
    pub fn tuple_elements(&self) -> Option<&[Literal]> {
        match self {
            Literal::Tuple(t) => Some(t),
            _ => None,
        }
    }

    fn typed<T: NativeType>(&self) -> Result<&[T], LiteralError> {
        let a = self.array()?;
        a.as_slice::<T>().ok_or_else(|| LiteralError::TypeMismatch {
            context: "element access",
            expected: T::TYPE.to_string(),
            actual: a.shape.to_string(),
        })
    }

    /// The elements in row-major order, if `T` is the element type.
    pub fn to_vec<T: NativeType>(&self) -> Result<Vec<T>, LiteralError> {
        self.typed::<T>().map(<[T]>::to_vec)
    }

    /// The elements as a slice, if `T` is the element type.
    pub fn as_slice<T: NativeType>(&self) -> Result<&[T], LiteralError> {
        self.typed::<T>()
    }

    /// The element at a multi-dimensional index.
    pub fn get<T: NativeType>(&self, index: &[usize]) -> Result<T, LiteralError> {
        let values = self.typed::<T>()?;
        let a = self.array()?;
        let i = a
            .linear_index(index)
            .ok_or_else(|| LiteralError::IndexOutOfBounds {
                index: index.to_vec(),
                shape: a.shape.to_string(),
            })?;
        Ok(values[i])
    }

    /// Sets the element at a multi-dimensional index.
    pub fn set<T: NativeType>(&mut self, index: &[usize], value: T) -> Result<(), LiteralError> {
        let shape_text = self.shape().to_string();
        let Literal::Array(a) = self else {
            return Err(LiteralError::TypeMismatch {
                context: "literal",
                expected: "an array".into(),
                actual: shape_text,
            });
        };
        let i = a
            .linear_index(index)
            .ok_or_else(|| LiteralError::IndexOutOfBounds {
                index: index.to_vec(),
                shape: shape_text.clone(),
            })?;
        let values = T::slice_mut(&mut a.data).ok_or_else(|| LiteralError::TypeMismatch {
            context: "element access",
            expected: T::TYPE.to_string(),
            actual: shape_text,
        })?;
        values[i] = value;
        Ok(())
    }

    /// The single element of a rank-0 (or one-element) array.
    pub fn to_scalar<T: NativeType>(&self) -> Result<T, LiteralError> {
        let values = self.typed::<T>()?;
        match values {
            [v] => Ok(*v),
            _ => Err(LiteralError::TypeMismatch {
                context: "to_scalar",
                expected: "a one-element array".into(),
                actual: self.shape().to_string(),
            }),
        }
    }

    /// The same elements under new dimensions (row-major order is kept).
    pub fn reshape(&self, dims: &[i64]) -> Result<Literal, LiteralError> {
        let a = self.array()?;
        let shape = ArrayShape::new(a.element_type(), dims)?;
        let to_count = shape.element_count()?;
        if to_count != a.element_count() {
            return Err(LiteralError::Reshape {
                from: a.shape.to_string(),
                from_count: a.element_count(),
                to: dims.to_vec(),
                to_count,
            });
        }
        Ok(Literal::Array(ArrayLiteral {
            shape,
            data: a.data.clone(),
        }))
    }

    /// Every element converted to `ty` with XLA's `convert` rules (tuples convert leaf by leaf).
    pub fn convert(&self, ty: PrimitiveType) -> Result<Literal, LiteralError> {
        match self {
            Literal::Array(a) => Ok(Literal::Array(ArrayLiteral {
                shape: a.shape.with_element_type(ty),
                data: a.data.convert(ty),
            })),
            Literal::Tuple(t) => Ok(Literal::Tuple(
                t.iter().map(|l| l.convert(ty)).collect::<Result<_, _>>()?,
            )),
            Literal::Token => Err(LiteralError::Other("cannot convert a token".into())),
        }
    }

    /// Array leaves, depth first.
    pub fn leaves(&self) -> Vec<&ArrayLiteral> {
        let mut out = Vec::new();
        fn go<'a>(l: &'a Literal, out: &mut Vec<&'a ArrayLiteral>) {
            match l {
                Literal::Array(a) => out.push(a),
                Literal::Tuple(t) => t.iter().for_each(|x| go(x, out)),
                Literal::Token => {}
            }
        }
        go(self, &mut out);
        out
    }

    /// Exact equality with bit-identical floats (any NaN still equals any NaN).
    pub fn bitwise_eq(&self, other: &Literal) -> bool {
        self.equal_with(other, &|a, b| a.equal(b, true))
    }

    /// Equal within `|a - e| <= atol + rtol * |e|` per float element (NaN
    /// matches NaN, infinities must match exactly); other types must be equal.
    /// `self` is the actual value and `expected` the reference.
    pub fn approx_eq(&self, expected: &Literal, rtol: f64, atol: f64) -> bool {
        self.first_mismatch(expected, rtol, atol).is_none()
    }

    /// Like [`Literal::approx_eq`], returning a description of the first difference.
    pub fn first_mismatch(&self, expected: &Literal, rtol: f64, atol: f64) -> Option<String> {
        match (self, expected) {
            (Literal::Array(a), Literal::Array(e)) => {
                if !a.shape.compatible(&e.shape) {
                    return Some(format!(
                        "shape {} differs from expected {}",
                        a.shape, e.shape
                    ));
                }
                (0..a.data.len()).find_map(|i| {
                    let (x, y) = (a.data.scalar(i), e.data.scalar(i));
                    (!scalar_close(x, y, rtol, atol)).then(|| {
                        let (mut xs, mut ys) = (String::new(), String::new());
                        format_scalar(&mut xs, x, a.element_type());
                        format_scalar(&mut ys, y, a.element_type());
                        format!("element {i} is {xs}, expected {ys}")
                    })
                })
            }
            (Literal::Tuple(a), Literal::Tuple(e)) => {
                if a.len() != e.len() {
                    return Some(format!(
                        "tuple of {} elements, expected {}",
                        a.len(),
                        e.len()
                    ));
                }
                a.iter().zip(e).enumerate().find_map(|(i, (x, y))| {
                    x.first_mismatch(y, rtol, atol)
                        .map(|m| format!("tuple element {i}: {m}"))
                })
            }
            (Literal::Token, Literal::Token) => None,
            (a, e) => Some(format!("{} differs from expected {}", a.shape(), e.shape())),
        }
    }

    fn equal_with(&self, other: &Literal, eq: &dyn Fn(&ArrayData, &ArrayData) -> bool) -> bool {
        match (self, other) {
            (Literal::Array(a), Literal::Array(b)) => {
                a.shape.compatible(&b.shape) && eq(&a.data, &b.data)
            }
            (Literal::Tuple(a), Literal::Tuple(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.equal_with(y, eq))
            }
            (Literal::Token, Literal::Token) => true,
            _ => false,
        }
    }

    /// The elements in HLO literal syntax without the shape: `{{1, 2}, {3, 4}}`
    /// for arrays, the bare value for scalars, `(a, b)` for tuples.
    pub fn write_values(&self, out: &mut String) {
        match self {
            Literal::Array(a) => write_array_values(out, a),
            Literal::Tuple(t) => {
                out.push('(');
                for (i, l) in t.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    l.write_values(out);
                }
                out.push(')');
            }
            Literal::Token => out.push_str("token"),
        }
    }
}

fn write_array_values(out: &mut String, a: &ArrayLiteral) {
    let ty = a.element_type();
    let dims = a.shape.dims_usize();
    if dims.is_empty() {
        format_scalar(out, a.data.scalar(0), ty);
        return;
    }
    if empty_array_is_compact(a.dims()) {
        out.push_str("{}");
        return;
    }
    // Recursive descent over dimensions, writing one brace level per dimension.
    fn go(
        out: &mut String,
        a: &ArrayLiteral,
        dims: &[usize],
        depth: usize,
        offset: usize,
        ty: PrimitiveType,
    ) {
        out.push('{');
        // Saturates only for an empty array, whose elements are never read.
        let stride = dims[depth + 1..]
            .iter()
            .fold(1usize, |n, &d| n.saturating_mul(d));
        for i in 0..dims[depth] {
            if i > 0 {
                out.push_str(", ");
            }
            if depth + 1 == dims.len() {
                format_scalar(out, a.data.scalar(offset + i), ty);
            } else {
                go(out, a, dims, depth + 1, offset + i * stride, ty);
            }
        }
        out.push('}');
    }
    go(out, a, &dims, 0, 0, ty);
}

fn scalar_close(actual: Scalar, expected: Scalar, rtol: f64, atol: f64) -> bool {
    fn close(a: f64, e: f64, rtol: f64, atol: f64) -> bool {
        if a.is_nan() || e.is_nan() {
            return a.is_nan() && e.is_nan();
        }
        if a == e {
            return true;
        }
        a.is_finite() && e.is_finite() && (a - e).abs() <= atol + rtol * e.abs()
    }
    match (actual, expected) {
        (Scalar::Float(a), Scalar::Float(e)) => close(a, e, rtol, atol),
        (Scalar::Complex(a, b), Scalar::Complex(c, d)) => {
            close(a, c, rtol, atol) && close(b, d, rtol, atol)
        }
        (a, e) => a == e,
    }
}

/// Equality where NaN equals NaN and `+0 == -0` (see [`Literal::bitwise_eq`] for exact bits).
impl PartialEq for Literal {
    fn eq(&self, other: &Literal) -> bool {
        self.equal_with(other, &|a, b| a.equal(b, false))
    }
}

/// XLA's one-line literal syntax: `f32[2,3] {{1, 2, 3}, {4, 5, 6}}`, `s32[] 5`,
/// `(f32[] 1, pred[2] {true, false})`, `token`.
impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Literal::Array(a) => {
                let mut s = String::new();
                write_array_values(&mut s, a);
                write!(f, "{} {}", a.shape, s)
            }
            Literal::Tuple(t) => {
                f.write_str("(")?;
                for (i, l) in t.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{l}")?;
                }
                f.write_str(")")
            }
            Literal::Token => f.write_str("token"),
        }
    }
}

impl<T: NativeType> From<T> for Literal {
    fn from(value: T) -> Literal {
        Literal::scalar(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;
    use num_complex::Complex32;

    #[test]
    fn empty_arrays_with_huge_dimensions_display_at_once() {
        let z = |dims: &[i64]| {
            Literal::zeros(&crate::Shape::array(PrimitiveType::F32, dims.to_vec()).unwrap())
                .unwrap()
                .to_string()
        };
        assert_eq!(
            z(&[0, 1 << 40, 1 << 40]),
            "f32[0,1099511627776,1099511627776] {}"
        );
        assert_eq!(z(&[1 << 40, 0]), "f32[1099511627776,0] {}");
        assert_eq!(z(&[2, 0]), "f32[2,0] {{}, {}}");
    }

    #[test]
    fn display_matches_xla() {
        let m = Literal::from_nested([[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]]).unwrap();
        assert_eq!(m.to_string(), "f32[2,3] {{1, 2, 3}, {4, 5, 6}}");
        assert_eq!(Literal::scalar(5i32).to_string(), "s32[] 5");
        let t = Literal::tuple(vec![Literal::scalar(1.5f32), Literal::vec1(&[true, false])]);
        assert_eq!(t.to_string(), "(f32[] 1.5, pred[2] {true, false})");
        assert_eq!(
            Literal::vec1(&[Complex32::new(1.0, -2.0)]).to_string(),
            "c64[1] {(1, -2)}"
        );
        assert_eq!(
            Literal::vec1(&[f32::NAN, f32::NEG_INFINITY]).to_string(),
            "f32[2] {nan, -inf}"
        );
        assert_eq!(
            Literal::from_vec::<u8>(&[2, 0], vec![])
                .unwrap()
                .to_string(),
            "u8[2,0] {{}, {}}"
        );
        assert_eq!(
            Literal::vec1(&[bf16::from_f32(0.1)]).to_string(),
            "bf16[1] {0.1001}"
        );
    }

    #[test]
    fn element_access_and_reshape() {
        let mut m = Literal::from_nested(vec![vec![1i64, 2], vec![3, 4], vec![5, 6]]).unwrap();
        assert_eq!(m.get::<i64>(&[2, 1]), Ok(6));
        assert!(m.get::<i64>(&[3, 0]).is_err());
        assert!(m.get::<i32>(&[0, 0]).is_err());
        m.set(&[0, 0], 10i64).unwrap();
        let r = m.reshape(&[2, 3]).unwrap();
        assert_eq!(r.get::<i64>(&[0, 0]), Ok(10));
        assert_eq!(r.get::<i64>(&[1, 0]), Ok(4));
        assert!(m.reshape(&[4]).is_err());
        assert!(Literal::from_nested(vec![vec![1, 2], vec![3]]).is_err());
        assert_eq!(
            Literal::scalar(7u8)
                .reshape(&[1, 1])
                .unwrap()
                .to_vec::<u8>(),
            Ok(vec![7])
        );
    }

    #[test]
    fn conversion_follows_xla() {
        let l = Literal::vec1(&[f32::NAN, 1e10, -1e10, 2.9, -2.9]);
        assert_eq!(
            l.convert(PrimitiveType::S32).unwrap().to_vec::<i32>(),
            Ok(vec![0, i32::MAX, i32::MIN, 2, -2])
        );
        let ints = Literal::vec1(&[0i32, 1, 2])
            .convert(PrimitiveType::F32)
            .unwrap();
        assert_eq!(ints, Literal::vec1(&[0.0f32, 1.0, 2.0]));
    }

    #[test]
    fn equality_is_nan_aware() {
        let a = Literal::vec1(&[f32::NAN, 0.0, 1.0]);
        let b = Literal::vec1(&[f32::NAN, -0.0, 1.0]);
        assert_eq!(a, b);
        assert!(!a.bitwise_eq(&b));
        let c = Literal::vec1(&[f32::NAN, 0.0, 1.0 + 1e-6]);
        assert_ne!(a, c);
        assert!(a.approx_eq(&c, 1e-5, 0.0));
        assert!(!a.approx_eq(&Literal::vec1(&[1.0f32, 0.0, 1.0]), 1.0, 1.0));
        assert_eq!(
            a.first_mismatch(&Literal::vec1(&[f32::NAN, 0.5, 1.0]), 0.0, 0.1)
                .as_deref(),
            Some("element 1 is 0, expected 0.5")
        );
    }
}
