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
use super::typed::{self, BinFn, ConvertFn, RotateFn, RotateXorFn, SplatFn};
use crate::buffer::Pool;
use crate::value::Value;

/// Elements per tile.
const TILE: usize = 2048;

/// One value of the loop: a kernel input, or an operation on earlier ones.
#[derive(Clone, Debug)]
pub(crate) enum Node {
    /// Kernel input `.0`, of the loop's shape.
    Input(usize),
    /// Kernel input `.0`, one element, the same across the loop.
    Splat(usize),
    /// An iota: element `l` of the loop is `(l / .1) % .2`.
    Iota(IotaFn, usize, usize),
    Binary(BinFn, usize, usize),
    /// Node `.1` with the one element of kernel input `.2`.
    BinarySplat(SplatFn, usize, usize),
    /// Node `.1` rotated left by `.2` bits.
    Rotate(RotateFn, usize, u32),
    /// Node `.1` rotated left by `.2` bits, exclusive-or node `.3`.
    RotateXor(RotateXorFn, usize, u32, usize),
    Select(usize, usize, usize),
    Convert(ConvertFn, usize),
}

/// A compiled loop: its nodes in order (the last is the result), each
/// node's element type, and the tile buffer (slot) each node writes.
#[derive(Clone, Debug)]
pub(crate) struct TiledLoop {
    nodes: Vec<(Node, PrimitiveType)>,
    slots: Vec<usize>,
    slot_count: usize,
    pub shape: ArrayShape,
}

impl TiledLoop {
    /// A loop over `shape` computing `nodes` (operands before users, the
    /// result last).
    pub fn new(nodes: Vec<(Node, PrimitiveType)>, shape: ArrayShape) -> TiledLoop {
        let (slots, slot_count) = assign_slots(&nodes);
        TiledLoop {
            nodes,
            slots,
            slot_count,
            shape,
        }
    }
}

/// Gives each node a tile buffer, reusing those of values no later node
/// reads (of the same element type), so a long chain (threefry's twenty
/// rounds) works in a few tiles that stay in L1 rather than one per node.
/// Splats keep theirs: they are filled once per task. A node never writes
/// the buffer of one of its own operands.
fn assign_slots(nodes: &[(Node, PrimitiveType)]) -> (Vec<usize>, usize) {
    let operands = |n: &Node| -> Vec<usize> {
        match *n {
            Node::Input(_) | Node::Splat(_) | Node::Iota(..) => vec![],
            Node::Binary(_, a, b) => vec![a, b],
            Node::BinarySplat(_, a, _) | Node::Rotate(_, a, _) => vec![a],
            Node::RotateXor(_, a, _, b) => vec![a, b],
            Node::Select(p, a, b) => vec![p, a, b],
            Node::Convert(_, a) => vec![a],
        }
    };
    let mut last_use: Vec<usize> = (0..nodes.len()).collect();
    for (k, (node, _)) in nodes.iter().enumerate() {
        for a in operands(node) {
            last_use[a] = k;
        }
    }
    // The result is read after the last node.
    if let Some(l) = last_use.last_mut() {
        *l = usize::MAX;
    }
    let mut free: Vec<(PrimitiveType, usize)> = Vec::new();
    let mut slots = Vec::with_capacity(nodes.len());
    let mut count = 0;
    for (k, (node, ty)) in nodes.iter().enumerate() {
        let reuse = match node {
            Node::Splat(_) => None,
            _ => free.iter().position(|(t, _)| t == ty),
        };
        let slot = match reuse {
            Some(i) => free.swap_remove(i).1,
            None => {
                count += 1;
                count - 1
            }
        };
        slots.push(slot);
        for a in operands(node) {
            let splat = matches!(nodes[a].0, Node::Splat(_));
            if last_use[a] == k && !splat && !free.iter().any(|&(_, s)| s == slots[a]) {
                free.push((nodes[a].1, slots[a]));
            }
        }
        // A value nothing reads (only the result has none, and it is kept).
        if last_use[k] == k && !matches!(node, Node::Splat(_)) {
            free.push((*ty, slot));
        }
    }
    (slots, count)
}

/// Writes iota values `(l / stride) % size` for `l` from `start` on.
pub(crate) type IotaFn = fn(usize, usize, usize, &mut ArrayData) -> bool;

fn iota_typed<T: NativeType>(
    start: usize,
    stride: usize,
    size: usize,
    out: &mut ArrayData,
    from: impl Fn(usize) -> T,
) -> bool {
    let Some(o) = T::slice_mut(out) else {
        return false;
    };
    if stride == 0 || size == 0 {
        return o.is_empty();
    }
    // Run by run (a division per run, not per element): with stride 1,
    // consecutive values up to the end of the dimension; else `stride`
    // copies of one value.
    let mut pos = start;
    let mut rest = &mut o[..];
    while !rest.is_empty() {
        let v = (pos / stride) % size;
        let run = if stride == 1 {
            size - v
        } else {
            stride - pos % stride
        }
        .min(rest.len());
        let (now, later) = rest.split_at_mut(run);
        if stride == 1 {
            for (k, o) in now.iter_mut().enumerate() {
                *o = from(v + k);
            }
        } else {
            now.fill(from(v));
        }
        pos += run;
        rest = later;
    }
    true
}

/// The iota of `ty` (integers of 32 and 64 bits), for dimensions of at
/// most `max` elements: values that fit the type.
pub(crate) fn iota_fn(ty: PrimitiveType) -> Option<(IotaFn, u64)> {
    Some(match ty {
        PrimitiveType::S32 => (
            |a, b, c, o| iota_typed::<i32>(a, b, c, o, |v| v as i32),
            i32::MAX as u64,
        ),
        PrimitiveType::U32 => (
            |a, b, c, o| iota_typed::<u32>(a, b, c, o, |v| v as u32),
            u32::MAX as u64,
        ),
        PrimitiveType::S64 => (
            |a, b, c, o| iota_typed::<i64>(a, b, c, o, |v| v as i64),
            i64::MAX as u64,
        ),
        PrimitiveType::U64 => (
            |a, b, c, o| iota_typed::<u64>(a, b, c, o, |v| v as u64),
            u64::MAX,
        ),
        _ => return None,
    })
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
            let s = self.slots[k];
            // The node's buffer, and the others to read its operands from
            // (a node never writes one of its operands' buffers).
            let (below, rest) = regs.split_at_mut(s);
            let Some((r, above)) = rest.split_first_mut() else {
                return false;
            };
            let fresh = r.len() != len || r.element_type() != *ty;
            if fresh {
                *r = tile_of(*ty, len);
            }
            let (below, above): (&[ArrayData], &[ArrayData]) = (below, above);
            let slot = |a: usize| match self.slots[a] {
                t if t < s => &below[t],
                t => &above[t - s - 1],
            };
            let input = |i: usize| inputs.get(i).copied();
            let ok = match *node {
                Node::Input(i) => input(i).is_some_and(|x| load(r, x, start)),
                Node::Iota(f, stride, size) => f(start, stride, size, r),
                // The same in every tile: filled once.
                Node::Splat(_) if !fresh => true,
                Node::Splat(i) => input(i).is_some_and(|x| splat(r, x)),
                Node::Binary(f, a, b) => f(slot(a), slot(b), r),
                Node::BinarySplat(f, a, i) => input(i)
                    .and_then(typed::bits_of)
                    .is_some_and(|x| f(slot(a), x, r)),
                Node::Rotate(f, a, k) => f(slot(a), k, r),
                Node::RotateXor(f, a, k, b) => f(slot(a), k, slot(b), r),
                Node::Select(p, a, b) => typed::select(slot(p), slot(a), slot(b), r),
                Node::Convert(f, a) => f(slot(a), r),
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
            let mut regs: Vec<ArrayData> = (0..self.slot_count)
                .map(|_| tile_of(PrimitiveType::Pred, 0))
                .collect();
            for (j, dst) in part.chunks_mut(TILE).enumerate() {
                if !self.tile(inputs, first + j * TILE, dst.len(), &mut regs) {
                    return false;
                }
                match self.slots.last().and_then(|&s| T::slice(&regs[s])) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iota_runs_match_the_formula() {
        let Some((f, _)) = iota_fn(PrimitiveType::S32) else {
            panic!("s32 has an iota");
        };
        // Strides of 1 (runs across the end of the dimension) and more,
        // starts inside runs, tiles longer than the dimension.
        for &(start, stride, size, len) in &[
            (0, 1, 1024, 2048),
            (1000, 1, 1024, 100),
            (5, 1, 3, 17),
            (0, 1024, 1024, 2048),
            (1023, 4, 3, 40),
            (7, 2, 1, 9),
            (0, 3, 5, 0),
        ] {
            let mut out = ArrayData::zeros(PrimitiveType::S32, len);
            assert!(f(start, stride, size, &mut out));
            let want: Vec<i32> = (0..len)
                .map(|k| (((start + k) / stride) % size) as i32)
                .collect();
            assert_eq!(i32::slice(&out), Some(&want[..]), "{start} {stride} {size}");
        }
    }
}
