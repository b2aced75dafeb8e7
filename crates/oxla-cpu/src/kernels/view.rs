//! Strided views: how a fused loop reads an input. A view maps an index of
//! the loop's iteration space to an element of a buffer as `offset + sum of
//! index[d] * stride[d]`. Broadcast (stride 0), transpose (permuted strides),
//! slice (offset and scaled strides), reverse (negative strides) and
//! reshapes of contiguous data all compose into one view, so those
//! operations cost nothing inside a fusion.

use oxla_hlo::ir::SliceDim;

/// `offset + sum(index[d] * strides[d])` over the dimensions of `dims`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct View {
    pub dims: Vec<i64>,
    pub offset: i64,
    pub strides: Vec<i64>,
}

fn row_major(dims: &[i64]) -> Vec<i64> {
    let mut s = vec![1i64; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

impl View {
    /// The whole of a row-major buffer of `dims`.
    pub fn contiguous(dims: &[i64]) -> View {
        View {
            dims: dims.to_vec(),
            offset: 0,
            strides: row_major(dims),
        }
    }

    /// Whether the view reads a row-major buffer of its own dims whole, in
    /// order: offset 0 and row-major strides.
    pub fn is_whole(&self) -> bool {
        self.offset == 0 && self.is_contiguous()
    }

    /// Whether the view walks its buffer in row-major order from `offset`.
    fn is_contiguous(&self) -> bool {
        let expected = row_major(&self.dims);
        self.dims
            .iter()
            .zip(&self.strides)
            .zip(&expected)
            .all(|((&d, &s), &e)| d == 1 || s == e)
    }

    /// `broadcast(x), dimensions=map` to `out_dims`.
    pub fn broadcast(&self, out_dims: &[i64], map: &[i64]) -> View {
        let mut strides = vec![0i64; out_dims.len()];
        for (i, &m) in map.iter().enumerate() {
            // A size-1 operand dimension broadcast to a larger one repeats: stride 0.
            if self.dims[i] == out_dims[m as usize] {
                strides[m as usize] = self.strides[i];
            }
        }
        View {
            dims: out_dims.to_vec(),
            offset: self.offset,
            strides,
        }
    }

    /// `transpose(x), dimensions=perm`.
    pub fn transpose(&self, perm: &[i64]) -> View {
        View {
            dims: perm.iter().map(|&p| self.dims[p as usize]).collect(),
            offset: self.offset,
            strides: perm.iter().map(|&p| self.strides[p as usize]).collect(),
        }
    }

    /// `slice(x), slice={[start:limit:stride], ...}`.
    pub fn slice(&self, dims: &[SliceDim]) -> View {
        let mut offset = self.offset;
        let mut out_dims = Vec::with_capacity(dims.len());
        let mut strides = Vec::with_capacity(dims.len());
        for (d, s) in dims.iter().enumerate() {
            offset += s.start * self.strides[d];
            let len = s.limit - s.start;
            out_dims.push(if len <= 0 {
                0
            } else {
                (len - 1) / s.stride + 1
            });
            strides.push(self.strides[d] * s.stride);
        }
        View {
            dims: out_dims,
            offset,
            strides,
        }
    }

    /// `reverse(x), dimensions=dims`.
    pub fn reverse(&self, dims: &[i64]) -> View {
        let mut v = self.clone();
        for &d in dims {
            let d = d as usize;
            v.offset += (v.dims[d] - 1).max(0) * v.strides[d];
            v.strides[d] = -v.strides[d];
        }
        v
    }

    /// `reshape(x)` to `out_dims`, if the view can express it: when it is
    /// contiguous, or when the reshape only adds or removes size-1 dimensions.
    pub fn reshape(&self, out_dims: &[i64]) -> Option<View> {
        if self.is_contiguous() {
            let strides = row_major(out_dims);
            return Some(View {
                dims: out_dims.to_vec(),
                offset: self.offset,
                strides,
            });
        }
        let kept: Vec<(i64, i64)> = self
            .dims
            .iter()
            .zip(&self.strides)
            .filter(|(d, _)| **d != 1)
            .map(|(&d, &s)| (d, s))
            .collect();
        let out_kept: Vec<i64> = out_dims.iter().copied().filter(|&d| d != 1).collect();
        if kept.iter().map(|k| k.0).collect::<Vec<_>>() != out_kept {
            return None;
        }
        let mut it = kept.iter();
        let strides = out_dims
            .iter()
            .map(|&d| {
                if d == 1 {
                    0
                } else {
                    it.next().map_or(0, |k| k.1)
                }
            })
            .collect();
        Some(View {
            dims: out_dims.to_vec(),
            offset: self.offset,
            strides,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(v: &View, index: &[i64]) -> i64 {
        v.offset
            + index
                .iter()
                .zip(&v.strides)
                .map(|(i, s)| i * s)
                .sum::<i64>()
    }

    #[test]
    fn composes_like_the_operations() {
        let x = View::contiguous(&[2, 3]);
        let t = x.transpose(&[1, 0]);
        assert_eq!(at(&t, &[2, 1]), 5);
        let b = x.broadcast(&[4, 2, 3], &[1, 2]);
        assert_eq!(at(&b, &[3, 1, 2]), 5);
        let s = x.slice(&[
            SliceDim {
                start: 1,
                limit: 2,
                stride: 1,
            },
            SliceDim {
                start: 0,
                limit: 3,
                stride: 2,
            },
        ]);
        assert_eq!(s.dims, vec![1, 2]);
        assert_eq!(at(&s, &[0, 1]), 5);
        let r = x.reverse(&[1]);
        assert_eq!(at(&r, &[0, 0]), 2);
        let flat = x.reshape(&[6]).unwrap();
        assert_eq!(at(&flat, &[4]), 4);
        assert!(t.reshape(&[6]).is_none());
        let squeezed = t.reshape(&[3, 1, 2]).unwrap();
        assert_eq!(at(&squeezed, &[2, 0, 1]), 5);
        // Degenerate broadcast: a size-1 dimension repeats.
        let one = View::contiguous(&[1, 3]);
        assert_eq!(at(&one.broadcast(&[4, 3], &[0, 1]), &[3, 2]), 2);
    }
}
