//! Values during execution: arrays borrowed from the caller's arguments or
//! owned (shared, so tuples and multi-use values clone cheaply), tuples of
//! values, and tokens. A kernel may write into an owned array in place when
//! nothing else holds it.

use std::sync::Arc;

use oxla_hlo::{ArrayLiteral, Literal};

/// An array value.
#[derive(Clone, Debug)]
pub enum Buf<'a> {
    /// One of the caller's arguments (never written).
    Arg(&'a ArrayLiteral),
    /// Made during execution.
    Own(Arc<ArrayLiteral>),
}

impl<'a> Buf<'a> {
    pub fn get(&self) -> &ArrayLiteral {
        match self {
            Buf::Arg(a) => a,
            Buf::Own(a) => a,
        }
    }

    /// The array, owned: moved out when nothing else shares it, copied otherwise.
    pub fn into_owned(self) -> ArrayLiteral {
        match self {
            Buf::Arg(a) => a.clone(),
            Buf::Own(a) => Arc::try_unwrap(a).unwrap_or_else(|shared| (*shared).clone()),
        }
    }
}

/// A value of any shape.
#[derive(Clone, Debug)]
pub enum Value<'a> {
    Array(Buf<'a>),
    /// Shared, so passing a loop state or a tuple around copies nothing.
    Tuple(Arc<[Value<'a>]>),
    Token,
}

impl<'a> Value<'a> {
    pub fn owned(a: ArrayLiteral) -> Value<'a> {
        Value::Array(Buf::Own(Arc::new(a)))
    }

    pub fn from_literal(l: Literal) -> Value<'a> {
        match l {
            Literal::Array(a) => Value::owned(a),
            Literal::Tuple(t) => Value::Tuple(t.into_iter().map(Value::from_literal).collect()),
            Literal::Token => Value::Token,
        }
    }

    /// A constant of the program: arrays shared, never copied.
    pub fn borrowed_shared(l: &'a std::sync::Arc<Literal>) -> Value<'a> {
        Value::borrowed(l)
    }

    pub fn borrowed(l: &'a Literal) -> Value<'a> {
        match l {
            Literal::Array(a) => Value::Array(Buf::Arg(a)),
            Literal::Tuple(t) => Value::Tuple(t.iter().map(Value::borrowed).collect()),
            Literal::Token => Value::Token,
        }
    }

    /// The value as a literal (arrays moved out when unshared, else copied).
    pub fn into_literal(self) -> Literal {
        match self {
            Value::Array(b) => Literal::Array(b.into_owned()),
            Value::Tuple(t) => {
                Literal::Tuple(unshare(t).into_iter().map(Value::into_literal).collect())
            }
            Value::Token => Literal::Token,
        }
    }

    pub fn array(&self) -> Option<&ArrayLiteral> {
        match self {
            Value::Array(b) => Some(b.get()),
            _ => None,
        }
    }

    /// The array, moved out (leaving a token), when this value is the only
    /// holder of an array made during the execution; else `None`, and the
    /// value is unchanged.
    pub fn take_unshared(&mut self) -> Option<ArrayLiteral> {
        match std::mem::replace(self, Value::Token) {
            Value::Array(Buf::Own(a)) => Arc::try_unwrap(a)
                .map_err(|shared| *self = Value::Array(Buf::Own(shared)))
                .ok(),
            other => {
                *self = other;
                None
            }
        }
    }
}

/// A tuple's elements, moved out when nothing else shares the tuple.
pub fn unshare<'a>(mut t: Arc<[Value<'a>]>) -> Vec<Value<'a>> {
    match Arc::get_mut(&mut t) {
        Some(elements) => elements
            .iter_mut()
            .map(|v| std::mem::replace(v, Value::Token))
            .collect(),
        None => t.to_vec(),
    }
}
