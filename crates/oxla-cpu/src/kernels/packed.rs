//! Short rows, several to a tile. A fused loop or reduction evaluates its
//! iteration space row by row, and each row pays a tile's fixed costs:
//! finding the leaves' offsets, resolving each leaf's slice, dispatching
//! each operation. A row of 64 channels (an NHWC activation, batch norm's
//! statistics) holds 256 bytes of f32, which memory delivers in about as
//! long as those fixed costs take, so such loops ran at a fraction of
//! bandwidth. [`Packing`] lays a block of consecutive rows out as one
//! tile: leaves whose rows follow each other in memory are read in place,
//! leaves with one value for the whole block stay splats, and the others
//! (a row broadcast down the rows, say) are gathered into a buffer, once
//! for as long as they do not change.

use super::fused::{Float, INLINE_LEAVES, Source, Space};

/// A way to evaluate blocks of consecutive rows of `space` as single tiles.
pub(crate) struct Packing<T> {
    row_len: usize,
    /// Rows per block, at most.
    per: usize,
    /// Rows in each run of the second-innermost dimension: a block stays
    /// within one, so its in-place leaves are contiguous.
    run: usize,
    /// The space a block is evaluated in: one dimension, where each view
    /// read in place steps by 1 (its rows follow each other) or by 0 (one
    /// value for the block).
    pub(crate) space: Space,
    /// Per source: its block's values where it is gathered, else empty.
    bufs: Vec<Vec<T>>,
    /// Per gathered source whose rows are all alike (it steps by 0 down the
    /// rows): the offset and the number of rows its buffer holds.
    filled: Vec<Option<(i64, usize)>>,
}

/// The view a source reads through, if any.
fn view_of<T>(src: &Source<'_, T>) -> Option<usize> {
    match *src {
        Source::Data(_, vi)
        | Source::Pred(_, vi)
        | Source::Bf16(_, vi)
        | Source::F16(_, vi)
        | Source::Affine(vi) => Some(vi),
        Source::Scalar(_) | Source::Tile(_) => None,
    }
}

impl<T: Float> Packing<T> {
    /// Packing for tiles of up to `cap` elements, when at least two rows of
    /// `space` fit in one and every source can be laid out so: `None` for
    /// long rows, a single dimension, sources already gathered
    /// ([`Source::Tile`]), or more than [`INLINE_LEAVES`] sources.
    pub(crate) fn new(space: &Space, sources: &[Source<'_, T>], cap: usize) -> Option<Packing<T>> {
        let n = space.dims.len();
        if n < 2 || sources.len() > INLINE_LEAVES {
            return None;
        }
        let row_len = space.dims[n - 1];
        let per = cap / row_len.max(1);
        if per < 2 {
            return None;
        }
        let steps = |vi: usize| (space.strides[vi][n - 1], space.strides[vi][n - 2]);
        // Per view: its stride along a block (1 or 0) when read in place.
        let in_place = |vi: usize| match steps(vi) {
            (1, across) if across == row_len as i64 => Some(1),
            (0, 0) => Some(0),
            _ => None,
        };
        let mut strides = vec![vec![0i64]; space.strides.len()];
        let mut bufs = Vec::with_capacity(sources.len());
        for src in sources {
            if matches!(src, Source::Tile(_)) {
                return None;
            }
            let gathered = match view_of(src) {
                Some(vi) => match in_place(vi) {
                    Some(s) => {
                        strides[vi] = vec![s];
                        false
                    }
                    None => true,
                },
                None => false,
            };
            bufs.push(if gathered {
                vec![T::ZERO; per * row_len]
            } else {
                Vec::new()
            });
        }
        Some(Packing {
            row_len,
            per,
            run: space.dims[n - 2],
            space: Space {
                dims: vec![per * row_len],
                strides,
                offsets: space.offsets.clone(),
            },
            filled: vec![None; sources.len()],
            bufs,
        })
    }

    /// How many rows the block starting at row `row` takes, of `left`.
    #[inline(always)]
    pub(crate) fn rows_at(&self, row: usize, left: usize) -> usize {
        self.per.min(left).min(self.run - row % self.run)
    }

    /// Gathers the block of `rows` rows whose first row's view offsets are
    /// `offsets` (see `row_offsets`) into the buffers of the sources that
    /// need one.
    pub(crate) fn fill(
        &mut self,
        space: &Space,
        sources: &[Source<'_, T>],
        offsets: &[i64],
        rows: usize,
    ) {
        let n = space.dims.len();
        let len = self.row_len;
        for (k, src) in sources.iter().enumerate() {
            let (Some(vi), false) = (view_of(src), self.bufs[k].is_empty()) else {
                continue;
            };
            let (along, across) = (space.strides[vi][n - 1], space.strides[vi][n - 2]);
            let buf = &mut self.bufs[k][..rows * len];
            if across == 0 {
                // Every row alike: gather one, repeat it, and keep it while
                // the block starts at the same offset.
                if let Some((at, had)) = self.filled[k]
                    && at == offsets[vi]
                    && had >= rows
                {
                    continue;
                }
                run(src, offsets[vi], along, &mut buf[..len]);
                for r in 1..rows {
                    buf.copy_within(..len, r * len);
                }
                self.filled[k] = Some((offsets[vi], rows));
            } else {
                for (r, row) in buf.chunks_exact_mut(len).enumerate() {
                    run(src, offsets[vi] + r as i64 * across, along, row);
                }
            }
        }
    }

    /// The sources a block is evaluated with, in [`Packing::space`]: the
    /// gathered ones replaced by their buffers (the first `sources.len()`
    /// entries).
    #[inline(always)]
    pub(crate) fn sources<'s>(
        &'s self,
        sources: &[Source<'s, T>],
    ) -> [Source<'s, T>; INLINE_LEAVES] {
        let mut out = [Source::Scalar(T::ZERO); INLINE_LEAVES];
        for ((o, src), buf) in out.iter_mut().zip(sources).zip(&self.bufs) {
            *o = if buf.is_empty() {
                *src
            } else {
                Source::Tile(buf)
            };
        }
        out
    }
}

/// `buf[i]` = the source's value at offset `base + i * s`.
fn run<T: Float>(src: &Source<'_, T>, base: i64, s: i64, buf: &mut [T]) {
    fn each<T, U: Copy>(data: &[U], base: i64, s: i64, buf: &mut [T], f: impl Fn(U) -> T) {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = f(data[(base + i as i64 * s) as usize]);
        }
    }
    match *src {
        Source::Data(d, _) if s == 1 => {
            let at = base as usize;
            buf.copy_from_slice(&d[at..at + buf.len()]);
        }
        Source::Data(d, _) => each(d, base, s, buf, |v| v),
        Source::Pred(p, _) => each(p, base, s, buf, T::from_bool),
        Source::Bf16(h, _) => each(h, base, s, buf, T::from_bf16),
        Source::F16(h, _) => each(h, base, s, buf, T::from_f16),
        Source::Affine(_) => {
            for (i, b) in buf.iter_mut().enumerate() {
                *b = T::from_f64((base + i as i64 * s) as f64);
            }
        }
        Source::Scalar(v) => buf.fill(v),
        Source::Tile(t) => buf.copy_from_slice(&t[..buf.len()]),
    }
}
