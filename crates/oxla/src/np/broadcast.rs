//! `broadcast_shapes`: the Array API broadcasting algorithm, step by step.

use std::fmt;

/// Why shapes do not broadcast.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BroadcastError {
    pub lhs: Vec<i64>,
    pub rhs: Vec<i64>,
    /// Each dimension of the result (counted from the left of the longer
    /// shape) where the sizes differ and neither is 1: `(index, lhs size, rhs size)`.
    pub mismatches: Vec<(usize, i64, i64)>,
}

pub(crate) fn shape_text(dims: &[i64]) -> String {
    if dims.is_empty() {
        return "()".to_string();
    }
    dims.iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join("x")
}

impl fmt::Display for BroadcastError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot broadcast {} with {}: ",
            shape_text(&self.lhs),
            shape_text(&self.rhs)
        )?;
        let parts: Vec<String> = self
            .mismatches
            .iter()
            .map(|(i, a, b)| format!("dimension {i} is {a} vs {b}"))
            .collect();
        f.write_str(&parts.join(", "))?;
        // A shorter shape that matches the longer one's leading dimensions was
        // probably meant to line up on the left, which the rule does not do.
        let (short, long) = if self.lhs.len() < self.rhs.len() {
            (&self.lhs, &self.rhs)
        } else {
            (&self.rhs, &self.lhs)
        };
        if short.len() < long.len() && long.starts_with(short) {
            f.write_str(" (singleton dimensions can only be prepended)")?;
        }
        Ok(())
    }
}

impl std::error::Error for BroadcastError {}

/// The shape two shapes broadcast to, following the Array API algorithm:
/// align from the right, treat missing leading dimensions as 1, and at each
/// dimension take the other size where one is 1, or the common size.
pub fn broadcast_pair(shape1: &[i64], shape2: &[i64]) -> Result<Vec<i64>, BroadcastError> {
    let (n1, n2) = (shape1.len() as isize, shape2.len() as isize);
    let n = n1.max(n2);
    let mut shape = vec![0i64; n as usize];
    let mut mismatches = Vec::new();
    let mut i = n - 1;
    while i >= 0 {
        let k1 = n1 - n + i;
        let d1 = if k1 >= 0 { shape1[k1 as usize] } else { 1 };
        let k2 = n2 - n + i;
        let d2 = if k2 >= 0 { shape2[k2 as usize] } else { 1 };
        shape[i as usize] = if d1 == 1 {
            d2
        } else if d2 == 1 || d1 == d2 {
            d1
        } else {
            mismatches.push((i as usize, d1, d2));
            d1
        };
        i -= 1;
    }
    if mismatches.is_empty() {
        Ok(shape)
    } else {
        Err(BroadcastError {
            lhs: shape1.to_vec(),
            rhs: shape2.to_vec(),
            mismatches,
        })
    }
}

/// The shape any number of shapes broadcast to (the empty list gives a scalar).
pub fn broadcast_shapes(shapes: &[&[i64]]) -> Result<Vec<i64>, BroadcastError> {
    shapes
        .iter()
        .try_fold(Vec::new(), |acc, s| broadcast_pair(&acc, s))
}
