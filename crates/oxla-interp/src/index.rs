//! Multi-dimensional index arithmetic over row-major arrays: strides, and
//! visiting every index of a shape in row-major order without allocating per
//! index.

/// Row-major strides (in elements) of an array with dimensions `dims`.
/// They fit for arrays with elements; for an empty array with huge
/// dimensions (`f32[0,2^40,2^40]`) they saturate, and nothing is indexed.
pub(crate) fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1].saturating_mul(dims[i + 1]);
    }
    s
}

/// The number of elements of an array with dimensions `dims`: 0 if any is 0
/// (the others may then be huge), otherwise their product, which fits
/// since shapes are checked.
pub(crate) fn element_count(dims: &[usize]) -> usize {
    if dims.contains(&0) {
        0
    } else {
        dims.iter().product()
    }
}

/// Dimension sizes as `usize` (shapes never hold negative sizes).
pub(crate) fn dims_usize(dims: &[i64]) -> Vec<usize> {
    dims.iter().map(|&d| d.max(0) as usize).collect()
}

/// A row-major counter over the indices of `dims`: `index()` is the current
/// index and `advance()` moves to the next, returning false after the last.
pub(crate) struct Counter {
    dims: Vec<usize>,
    index: Vec<usize>,
    done: bool,
}

impl Counter {
    pub(crate) fn new(dims: &[usize]) -> Counter {
        Counter {
            dims: dims.to_vec(),
            index: vec![0; dims.len()],
            done: dims.contains(&0),
        }
    }

    /// Whether the counter has run past the last index (or the shape is empty).
    pub(crate) fn done(&self) -> bool {
        self.done
    }

    pub(crate) fn index(&self) -> &[usize] {
        &self.index
    }

    /// Moves to the next index in row-major order; false once past the end.
    pub(crate) fn advance(&mut self) -> bool {
        for d in (0..self.dims.len()).rev() {
            self.index[d] += 1;
            if self.index[d] < self.dims[d] {
                return true;
            }
            self.index[d] = 0;
        }
        self.done = true;
        false
    }
}

/// Calls `f` with every index of `dims` in row-major order (once, with the
/// empty index, for rank 0; never for a shape with a zero dimension).
pub(crate) fn for_each_index<E>(
    dims: &[usize],
    mut f: impl FnMut(&[usize]) -> Result<(), E>,
) -> Result<(), E> {
    let mut c = Counter::new(dims);
    while !c.done() {
        f(c.index())?;
        c.advance();
    }
    Ok(())
}

/// The row-major linear index of `index` under `strides`.
pub(crate) fn linear(index: &[usize], strides: &[usize]) -> usize {
    index.iter().zip(strides).map(|(i, s)| i * s).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visits_in_row_major_order() {
        let mut seen = Vec::new();
        for_each_index::<()>(&[2, 3], |i| {
            seen.push(i.to_vec());
            Ok(())
        })
        .unwrap();
        assert_eq!(seen.len(), 6);
        assert_eq!(seen[1], vec![0, 1]);
        assert_eq!(seen[3], vec![1, 0]);
        let mut n = 0;
        for_each_index::<()>(&[], |_| {
            n += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(n, 1);
        for_each_index::<()>(&[2, 0], |_| panic!("empty shape visited")).unwrap();
        assert_eq!(strides(&[2, 3, 4]), vec![12, 4, 1]);
    }
}
