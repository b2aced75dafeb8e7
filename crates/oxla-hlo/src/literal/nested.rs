//! Building arrays from nested Rust values: a scalar, `[T; N]`, `Vec<T>` or
//! `&[T]`, nested to any depth. Ragged nesting is an error.

use super::LiteralError;
use super::native::NativeType;

/// A Rust value that is an array: a [`NativeType`] scalar, or a fixed array,
/// `Vec` or slice of nested arrays of equal shape.
pub trait NestedArray {
    type Elem: NativeType;
    /// Number of dimensions.
    fn rank() -> usize;
    /// Dimension sizes, read along the first element at each level; levels
    /// below an empty one count as size 0.
    fn dims_into(&self, dims: &mut Vec<i64>);
    /// Appends the elements in row-major order after checking they have `dims`.
    fn flatten_into(&self, dims: &[i64], out: &mut Vec<Self::Elem>) -> Result<(), LiteralError>;
}

impl<T: NativeType> NestedArray for T {
    type Elem = T;
    fn rank() -> usize {
        0
    }
    fn dims_into(&self, _dims: &mut Vec<i64>) {}
    fn flatten_into(&self, _dims: &[i64], out: &mut Vec<T>) -> Result<(), LiteralError> {
        out.push(*self);
        Ok(())
    }
}

fn dims_of_items<U: NestedArray>(items: &[U], dims: &mut Vec<i64>) {
    dims.push(items.len() as i64);
    match items.first() {
        Some(first) => first.dims_into(dims),
        None => dims.extend(std::iter::repeat_n(0, U::rank())),
    }
}

fn flatten_items<U: NestedArray>(
    items: &[U],
    dims: &[i64],
    out: &mut Vec<U::Elem>,
) -> Result<(), LiteralError> {
    let (&n, rest) = dims
        .split_first()
        .ok_or_else(|| LiteralError::Ragged("too many levels".into()))?;
    if items.len() as i64 != n {
        return Err(LiteralError::Ragged(format!(
            "a level of {} elements where {} were expected from the first element",
            items.len(),
            n
        )));
    }
    items
        .iter()
        .try_for_each(|item| item.flatten_into(rest, out))
}

impl<U: NestedArray, const N: usize> NestedArray for [U; N] {
    type Elem = U::Elem;
    fn rank() -> usize {
        1 + U::rank()
    }
    fn dims_into(&self, dims: &mut Vec<i64>) {
        dims_of_items(self, dims)
    }
    fn flatten_into(&self, dims: &[i64], out: &mut Vec<U::Elem>) -> Result<(), LiteralError> {
        flatten_items(self, dims, out)
    }
}

impl<U: NestedArray> NestedArray for Vec<U> {
    type Elem = U::Elem;
    fn rank() -> usize {
        1 + U::rank()
    }
    fn dims_into(&self, dims: &mut Vec<i64>) {
        dims_of_items(self, dims)
    }
    fn flatten_into(&self, dims: &[i64], out: &mut Vec<U::Elem>) -> Result<(), LiteralError> {
        flatten_items(self, dims, out)
    }
}

impl<U: NestedArray> NestedArray for &[U] {
    type Elem = U::Elem;
    fn rank() -> usize {
        1 + U::rank()
    }
    fn dims_into(&self, dims: &mut Vec<i64>) {
        dims_of_items(self, dims)
    }
    fn flatten_into(&self, dims: &[i64], out: &mut Vec<U::Elem>) -> Result<(), LiteralError> {
        flatten_items(self, dims, out)
    }
}

/// Dimensions and row-major elements of a nested array.
pub(super) fn flatten<A: NestedArray>(
    nested: &A,
) -> Result<(Vec<i64>, Vec<A::Elem>), LiteralError> {
    let mut dims = Vec::with_capacity(A::rank());
    nested.dims_into(&mut dims);
    let mut out = Vec::new();
    nested.flatten_into(&dims, &mut out)?;
    Ok((dims, out))
}
