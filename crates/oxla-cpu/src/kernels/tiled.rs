//! Fused loops over any element types: a chain of the typed operations of
//! `typed` (integer and predicate arithmetic, shifts, comparisons, selects,
//! conversions), with broadcast scalars, evaluated tile by tile so the
//! intermediate values stay in cache. JAX's PRNG (threefry: rotations,
//! xors and adds on u32 arrays) and index arithmetic run this way. Each
//! operation computes what it computes alone, element by element, so
//! results are the typed kernels' and the interpreter's.

use oxla_hlo::{
    ArrayData, ArrayLiteral, ArrayShape, NativeType, PrimitiveType, with_array_data,
    with_native_type,
};
use rayon::prelude::*;

use super::Kernel;
use super::fused::PARALLEL_MIN;
use super::typed::{self, BinFn, ConvertFn};
use crate::buffer::Pool;
use crate::value::Value;

/// Elements per tile.
const TILE: usize = 512;

/// One value of the loop: a kernel input, or an operation on earlier ones.
#[derive(Clone, Debug)]
pub(crate) enum Node {
    /// Kernel input `.0`, of the loop's shape.
    Input(usize),
    /// Kernel input `.0`, one element, the same across the loop.
    Splat(usize),
    Binary(BinFn, usize, usize),
    Select(usize, usize, usize),
    Convert(ConvertFn, usize),
}

/// A compiled loop: its nodes in order (the last is the result) and each
/// node's element type.
#[derive(Clone, Debug)]
pub(crate) struct TiledLoop {
    pub nodes: Vec<(Node, PrimitiveType)>,
    pub shape: ArrayShape,
}

fn tile_of(ty: PrimitiveType, n: usize) -> ArrayData {
    ArrayData::zeros(ty, n)
}

/// Copies `src[start..start + len]` into `dst` (the same type, `len` long).
fn load(dst: &mut ArrayData, src: &ArrayData, start: usize) -> bool {
    fn go<T: NativeType>(d: &mut [T], src: &ArrayData, start: usize) -> bool {
        match T::slice(src).and_then(|s| s.get(start..start + d.len())) {
            Some(s) => {
                d.copy_from_slice(s);
                true
            }
            None => false,
        }
    }
    with_array_data!(dst, d => go(d, src, start))
}

/// Fills `dst` with the one element of `src`.
fn splat(dst: &mut ArrayData, src: &ArrayData) -> bool {
    fn go<T: NativeType>(d: &mut [T], src: &ArrayData) -> bool {
        match T::slice(src) {
            Some([v]) => {
                d.fill(*v);
                true
            }
            _ => false,
        }
    }
    with_array_data!(dst, d => go(d, src))
}

impl TiledLoop {
    /// Elements `[start, start + len)` of the result, into the last of
    /// `regs` (one tile per node).
    fn tile(
        &self,
        inputs: &[&ArrayData],
        start: usize,
        len: usize,
        regs: &mut [ArrayData],
    ) -> bool {
        for (k, (node, ty)) in self.nodes.iter().enumerate() {
            let fresh = regs[k].len() != len;
            if fresh {
                regs[k] = tile_of(*ty, len);
            }
            let (done, rest) = regs.split_at_mut(k);
            let r = &mut rest[0];
            let input = |i: usize| inputs.get(i).copied();
            let ok = match *node {
                Node::Input(i) => input(i).is_some_and(|x| load(r, x, start)),
                // The same in every tile: filled once.
                Node::Splat(_) if !fresh => true,
                Node::Splat(i) => input(i).is_some_and(|x| splat(r, x)),
                Node::Binary(f, a, b) => f(&done[a], &done[b], r),
                Node::Select(p, a, b) => typed::select(&done[p], &done[a], &done[b], r),
                Node::Convert(f, a) => f(&done[a], r),
            };
            if !ok {
                return false;
            }
        }
        true
    }

    fn execute<T: NativeType>(&self, inputs: &[&ArrayData], out: &mut [T]) -> bool {
        let n = out.len();
        let tasks = if n >= PARALLEL_MIN {
            (rayon::current_num_threads() * 4).min(n.div_ceil(TILE))
        } else {
            1
        };
        let per_task = (n.div_ceil(TILE).div_ceil(tasks.max(1)) * TILE).max(TILE);
        let run = |(i, part): (usize, &mut [T])| -> bool {
            let first = i * per_task;
            let mut regs: Vec<ArrayData> = self.nodes.iter().map(|(_, t)| tile_of(*t, 0)).collect();
            for (j, dst) in part.chunks_mut(TILE).enumerate() {
                if !self.tile(inputs, first + j * TILE, dst.len(), &mut regs) {
                    return false;
                }
                match regs.last().and_then(T::slice) {
                    Some(t) if t.len() == dst.len() => dst.copy_from_slice(t),
                    _ => return false,
                }
            }
            true
        };
        if tasks > 1 {
            out.par_chunks_mut(per_task).enumerate().all(run)
        } else {
            out.chunks_mut(per_task).enumerate().all(run)
        }
    }
}

impl Kernel for TiledLoop {
    fn name(&self) -> &'static str {
        "tiled loop"
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        let data: Vec<&ArrayData> = inputs
            .iter()
            .map(|v| {
                v.array()
                    .map(ArrayLiteral::data)
                    .ok_or("a tiled loop reads arrays")
            })
            .collect::<Result<_, _>>()?;
        let n = self.shape.element_count().map_err(|e| e.to_string())?;
        let (out, ok) = with_native_type!(self.shape.element_type(), T => {
            let mut out = pool.take::<T>(n);
            let ok = self.execute(&data, &mut out);
            (T::wrap(out), ok)
        });
        if !ok {
            return Err("operands of unexpected types or shapes".into());
        }
        let out = ArrayLiteral::new(self.shape.clone(), out).map_err(|e| e.to_string())?;
        Ok(Value::owned(out))
    }
}
