//! Random element types, shapes, literals and attribute integers. In wild
//! mode some of them are hostile: negative or huge dimensions, indices out
//! of range, sizes whose products overflow.

use arbitrary::{Result, Unstructured};
use oxla_hlo::{ArrayLiteral, ArrayShape, Literal, PrimitiveType, Shape};

/// Integers that break naive size and index arithmetic.
const NASTY: &[i64] = &[
    -1,
    -2,
    i64::MIN,
    i64::MAX,
    i64::MAX / 2 + 1,
    i32::MIN as i64,
    i32::MAX as i64,
    1 << 31,
    1 << 32,
    1 << 40,
    1 << 62,
    1_000_000,
];

/// The source of random choices, and whether they may be hostile.
pub(crate) struct Draw<'u, 'a> {
    pub(crate) u: &'u mut Unstructured<'a>,
    pub(crate) wild: bool,
}

impl Draw<'_, '_> {
    /// True with probability about `1 / n`.
    pub(crate) fn one_in(&mut self, n: u32) -> Result<bool> {
        self.u.ratio(1, n.max(1))
    }

    /// A number in `lo..=hi`.
    pub(crate) fn range(&mut self, lo: i64, hi: i64) -> Result<i64> {
        if hi <= lo {
            return Ok(lo);
        }
        self.u.int_in_range(lo..=hi)
    }

    /// An index below `n` (0 if `n` is 0).
    pub(crate) fn below(&mut self, n: usize) -> Result<usize> {
        if n <= 1 {
            return Ok(0);
        }
        self.u.int_in_range(0..=n - 1)
    }

    /// An attribute integer in `lo..=hi`, or in wild mode sometimes a hostile one.
    pub(crate) fn int(&mut self, lo: i64, hi: i64) -> Result<i64> {
        if self.wild && self.one_in(12)? {
            return Ok(*self.u.choose(NASTY)?);
        }
        self.range(lo, hi)
    }

    /// A dimension size: mostly 1 to 4, sometimes 0.
    pub(crate) fn dim(&mut self) -> Result<i64> {
        if self.one_in(12)? {
            return Ok(0);
        }
        self.int(1, 4)
    }

    pub(crate) fn element_type(&mut self) -> Result<PrimitiveType> {
        // Favour the common types; every type appears.
        if self.one_in(2)? {
            return Ok(*self.u.choose(&[
                PrimitiveType::F32,
                PrimitiveType::S32,
                PrimitiveType::Pred,
                PrimitiveType::F64,
            ])?);
        }
        Ok(*self.u.choose(&PrimitiveType::ALL)?)
    }

    /// An array shape of rank 0 to 3. In wild mode the dimensions may be
    /// negative or overflow, as a shape computed elsewhere might.
    pub(crate) fn array_shape(&mut self, ty: PrimitiveType) -> Result<ArrayShape> {
        let rank = if self.one_in(3)? {
            0
        } else {
            self.range(1, 3)?
        };
        let dims = (0..rank).map(|_| self.dim()).collect::<Result<Vec<_>>>()?;
        Ok(ArrayShape::new(ty, dims.clone())
            .unwrap_or_else(|_| ArrayShape::new_unchecked(ty, dims)))
    }

    /// An array of `shape` holding arbitrary bit patterns (NaNs, infinities,
    /// denormals and extreme integers included); zeros if `shape` is invalid
    /// or larger than 4 KiB.
    pub(crate) fn literal(&mut self, shape: &ArrayShape) -> Result<Literal> {
        let ty = shape.element_type();
        let Some(bytes) = shape.byte_size().ok().filter(|&b| b <= 4096) else {
            return Ok(Literal::Array(
                ArrayLiteral::from_bytes(ArrayShape::scalar(ty), &vec![0; ty.byte_size()])
                    .expect("a scalar of zero bytes is valid"),
            ));
        };
        let mut data = vec![0u8; bytes];
        // Short inputs leave the rest zero.
        let available = self.u.len().min(bytes);
        data[..available].copy_from_slice(self.u.bytes(available)?);
        if ty == PrimitiveType::Pred {
            for b in &mut data {
                *b &= 1;
            }
        }
        Ok(Literal::Array(
            ArrayLiteral::from_bytes(shape.clone(), &data).expect("sizes match"),
        ))
    }

    /// A value for a parameter of `shape` (tuples element by element).
    pub(crate) fn argument(&mut self, shape: &Shape) -> Result<Literal> {
        Ok(match shape {
            Shape::Array(a) => self.literal(a)?,
            Shape::Tuple(t) => Literal::Tuple(
                t.iter()
                    .map(|s| self.argument(s))
                    .collect::<Result<Vec<_>>>()?,
            ),
            Shape::Token => Literal::Token,
        })
    }

    /// `k` distinct indices below `n`, in increasing order.
    pub(crate) fn subset(&mut self, n: usize, k: usize) -> Result<Vec<usize>> {
        let mut all: Vec<usize> = (0..n).collect();
        let mut out = Vec::new();
        for _ in 0..k.min(n) {
            let i = self.below(all.len())?;
            out.push(all.remove(i));
        }
        out.sort_unstable();
        Ok(out)
    }

    /// A permutation of `0..n`.
    pub(crate) fn permutation(&mut self, n: usize) -> Result<Vec<i64>> {
        let mut all: Vec<i64> = (0..n as i64).collect();
        let mut out = Vec::with_capacity(n);
        while !all.is_empty() {
            let i = self.below(all.len())?;
            out.push(all.remove(i));
        }
        Ok(out)
    }
}
