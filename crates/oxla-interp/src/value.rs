//! Runtime values: like [`Literal`], but shared by reference counting so that
//! passing a value to a computation, through a tuple or around a loop never
//! copies array data.

use std::rc::Rc;

use oxla_hlo::{ArrayLiteral, ArrayShape, Literal, Shape};

use crate::element::Elem;
use crate::error::{OpResult, fail};

/// A value produced by an instruction.
#[derive(Clone, Debug)]
pub(crate) enum Value {
    Array(Rc<ArrayLiteral>),
    Tuple(Rc<[Value]>),
    Token,
}

impl Value {
    pub(crate) fn from_literal(literal: Literal) -> Value {
        match literal {
            Literal::Array(a) => Value::Array(Rc::new(a)),
            Literal::Tuple(t) => Value::Tuple(t.into_iter().map(Value::from_literal).collect()),
            Literal::Token => Value::Token,
        }
    }

    pub(crate) fn to_literal(&self) -> Literal {
        match self {
            Value::Array(a) => Literal::Array((**a).clone()),
            Value::Tuple(t) => Literal::Tuple(t.iter().map(Value::to_literal).collect()),
            Value::Token => Literal::Token,
        }
    }

    /// Converts to a literal, moving array data out when this is its only user.
    pub(crate) fn into_literal(self) -> Literal {
        match self {
            Value::Array(a) => Literal::Array(Rc::try_unwrap(a).unwrap_or_else(|a| (*a).clone())),
            Value::Tuple(t) => Literal::Tuple(t.iter().cloned().map(Value::into_literal).collect()),
            Value::Token => Literal::Token,
        }
    }

    pub(crate) fn array(a: ArrayLiteral) -> Value {
        Value::Array(Rc::new(a))
    }

    pub(crate) fn tuple(elements: Vec<Value>) -> Value {
        Value::Tuple(elements.into())
    }

    /// A rank-0 array holding `e`.
    pub(crate) fn scalar(e: Elem) -> Value {
        Value::array(e.to_array())
    }

    /// An array value, or one result per element of a tuple of arrays: the
    /// shape of variadic results (reduce, sort, ...) with one or many outputs.
    pub(crate) fn tuple_or_single(mut arrays: Vec<ArrayLiteral>) -> Value {
        if arrays.len() == 1 {
            Value::array(arrays.remove(0))
        } else {
            Value::tuple(arrays.into_iter().map(Value::array).collect())
        }
    }

    pub(crate) fn shape(&self) -> Shape {
        match self {
            Value::Array(a) => Shape::Array(a.shape().clone()),
            Value::Tuple(t) => Shape::Tuple(t.iter().map(Value::shape).collect()),
            Value::Token => Shape::Token,
        }
    }

    /// The array inside, or an error naming what this value is instead.
    pub(crate) fn as_array(&self) -> OpResult<&ArrayLiteral> {
        match self {
            Value::Array(a) => Ok(a),
            other => fail(format!(
                "expected an array, got a value of shape {}",
                other.shape()
            )),
        }
    }

    pub(crate) fn as_tuple(&self) -> OpResult<&[Value]> {
        match self {
            Value::Tuple(t) => Ok(t),
            other => fail(format!(
                "expected a tuple, got a value of shape {}",
                other.shape()
            )),
        }
    }

    /// The single element of a rank-0 (or one-element) array.
    pub(crate) fn as_elem(&self) -> OpResult<Elem> {
        let a = self.as_array()?;
        if a.element_count() != 1 {
            return fail(format!("expected a scalar, got {}", a.shape()));
        }
        Ok(Elem::read(a.data(), 0))
    }
}

/// An array of `shape` holding `data`, or an internal error if they disagree.
pub(crate) fn make_array(shape: &ArrayShape, data: oxla_hlo::ArrayData) -> OpResult<ArrayLiteral> {
    Ok(ArrayLiteral::new(shape.clone(), data)?)
}
