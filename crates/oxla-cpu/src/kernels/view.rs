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

    /// `reshape(x)` to `out_dims`, if the view can express it. Dimensions
    /// of size 1 come and go freely; the others group into runs whose
    /// products match on both sides (as in NumPy's no-copy reshape), and a
    /// run of the view's dimensions merges or splits only when it is dense
    /// within itself (each stride the next one times the next size), as a
    /// slice of the last dimension split into heads is, and a transpose
    /// merged across its permuted dimensions is not.
    pub fn reshape(&self, out_dims: &[i64]) -> Option<View> {
        if self.is_contiguous() || self.dims.contains(&0) || out_dims.contains(&0) {
            let strides = row_major(out_dims);
            return Some(View {
                dims: out_dims.to_vec(),
                offset: self.offset,
                strides,
            });
        }
        let old: Vec<(i64, i64)> = self
            .dims
            .iter()
            .zip(&self.strides)
            .filter(|(d, _)| **d != 1)
            .map(|(&d, &s)| (d, s))
            .collect();
        let new: Vec<i64> = out_dims.iter().copied().filter(|&d| d != 1).collect();
        let mut new_strides = vec![0i64; new.len()];
        let (mut oi, mut ni) = (0, 0);
        while oi < old.len() && ni < new.len() {
            let (mut op, mut np) = (old[oi].0, new[ni]);
            let (mut oj, mut nj) = (oi + 1, ni + 1);
            while op != np {
                if np < op {
                    np = np.checked_mul(*new.get(nj)?)?;
                    nj += 1;
                } else {
                    op = op.checked_mul(old.get(oj)?.0)?;
                    oj += 1;
                }
            }
            for w in old[oi..oj].windows(2) {
                if w[0].1 != w[1].1.checked_mul(w[1].0)? {
                    return None;
                }
            }
            new_strides[nj - 1] = old[oj - 1].1;
            for j in (ni + 1..nj).rev() {
                new_strides[j - 1] = new_strides[j].checked_mul(new[j])?;
            }
            oi = oj;
            ni = nj;
        }
        if oi != old.len() || ni != new.len() {
            return None;
        }
        let mut it = new_strides.into_iter();
        let strides = out_dims
            .iter()
            .map(|&d| if d == 1 { 0 } else { it.next().unwrap_or(0) })
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
        // A slice of the last dimension split into heads keeps its row stride.
        let qkv = View::contiguous(&[2, 3, 12]).slice(&[
            SliceDim {
                start: 0,
                limit: 2,
                stride: 1,
            },
            SliceDim {
                start: 0,
                limit: 3,
                stride: 1,
            },
            SliceDim {
                start: 4,
                limit: 8,
                stride: 1,
            },
        ]);
        let heads = qkv.reshape(&[2, 3, 2, 2]).unwrap();
        assert_eq!(heads.strides, vec![36, 12, 2, 1]);
        assert_eq!(at(&heads, &[1, 2, 1, 0]), 36 + 24 + 4 + 2);
        // ... and merges its two leading dimensions, which are dense together,
        // but not a row with the next one, which the slice left a gap between.
        let rows = qkv.reshape(&[6, 4]).unwrap();
        assert_eq!(at(&rows, &[5, 3]), 5 * 12 + 4 + 3);
        assert!(qkv.reshape(&[2, 12]).is_none());
        // A reversed dimension splits with negative strides.
        let rev = View::contiguous(&[6, 5]).reverse(&[0]).slice(&[
            SliceDim {
                start: 0,
                limit: 6,
                stride: 1,
            },
            SliceDim {
                start: 0,
                limit: 2,
                stride: 1,
            },
        ]);
        let split = rev.reshape(&[2, 3, 1, 2]).unwrap();
        assert_eq!(at(&split, &[1, 2, 0, 1]), at(&rev, &[5, 1]));
        // A broadcast dimension splits into broadcast dimensions.
        let bc = View::contiguous(&[3])
            .broadcast(&[4, 3], &[1])
            .transpose(&[1, 0]);
        let bsplit = bc.reshape(&[3, 2, 2]).unwrap();
        assert_eq!(bsplit.strides, vec![1, 0, 0]);
        assert!(bc.reshape(&[12]).is_none());
        // Degenerate broadcast: a size-1 dimension repeats.
        let one = View::contiguous(&[1, 3]);
        assert_eq!(at(&one.broadcast(&[4, 3], &[0, 1]), &[3, 2]), 2);
    }

    /// Every element's offset, in row-major order of the view's dimensions.
    fn offsets(v: &View) -> Vec<i64> {
        let count: i64 = v.dims.iter().product();
        (0..count)
            .map(|mut f| {
                let mut index = vec![0; v.dims.len()];
                for (i, &d) in index.iter_mut().zip(&v.dims).rev() {
                    *i = f % d;
                    f /= d;
                }
                at(v, &index)
            })
            .collect()
    }

    /// Dimensions with product `count`: divisors picked by `picks`, with
    /// size-1 dimensions where a pick is zero.
    fn factor(mut count: i64, picks: &[u8]) -> Vec<i64> {
        let mut dims = Vec::new();
        for &p in picks {
            if count == 1 || p == 0 {
                dims.push(1);
                continue;
            }
            let divisors: Vec<i64> = (2..=count).filter(|d| count % d == 0).collect();
            let d = divisors[p as usize % divisors.len()];
            dims.push(d);
            count /= d;
        }
        if count > 1 {
            dims.push(count);
        }
        dims
    }

    proptest::proptest! {
        /// A reshape the view accepts reads the same elements in the same
        /// order as the reshaped array would, and the view accepts every
        /// reshape some strides could express.
        #[test]
        fn reshapes_read_what_the_reshaped_array_holds(
            dims in proptest::collection::vec(1i64..6, 1..5),
            perm_seed in 0u64..1000,
            slices in proptest::collection::vec((0i64..3, 0i64..3, 1i64..3), 4),
            reversed in proptest::collection::vec(proptest::bool::ANY, 4),
            picks in proptest::collection::vec(0u8..8, 0..6),
        ) {
            let mut perm: Vec<i64> = (0..dims.len() as i64).collect();
            let mut seed = perm_seed;
            for i in (1..perm.len()).rev() {
                perm.swap(i, (seed % (i as u64 + 1)) as usize);
                seed /= i as u64 + 1;
            }
            let v = View::contiguous(&dims).transpose(&perm);
            let cut: Vec<SliceDim> = v
                .dims
                .iter()
                .zip(&slices)
                .map(|(&d, &(lo, hi, stride))| {
                    let start = lo.min(d - 1);
                    SliceDim { start, limit: (d - hi).max(start + 1), stride }
                })
                .collect();
            let v = v.slice(&cut);
            let flips: Vec<i64> = (0..v.dims.len() as i64).filter(|&d| reversed[d as usize]).collect();
            let v = v.reverse(&flips);
            let out = factor(v.dims.iter().product(), &picks);
            let want = offsets(&v);
            match v.reshape(&out) {
                Some(r) => {
                    proptest::prop_assert_eq!(&r.dims, &out);
                    proptest::prop_assert_eq!(offsets(&r), want);
                }
                None => {
                    // No strides fit: those a unit step along each dimension takes.
                    let unit = View::contiguous(&out);
                    let strides = unit
                        .strides
                        .iter()
                        .zip(&out)
                        .map(|(&s, &d)| if d > 1 { want[s as usize] - want[0] } else { 0 })
                        .collect();
                    let fit = View { dims: out.clone(), offset: want[0], strides };
                    proptest::prop_assert_ne!(offsets(&fit), want, "{:?} to {:?}", v, out);
                }
            }
        }
    }
}
