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
use std::collections::HashMap;

use rayon::prelude::*;

use super::Kernel;
use super::fused::{PARALLEL_MIN, copy_streamed, data_bytes, store_fence, streams_traffic};
use super::typed::{self, BinFn, ConvertFn, FloorFn, RemainderFn, RotateFn, RotateXorFn, SplatFn};
use crate::buffer::Pool;
use crate::value::Value;

/// Elements per tile at most: a tile of a few operations' values is
/// dispatched once per node, so shorter tiles pay that more often (512
/// took 1.2-1.5 ms for int_floordiv_mod on one core of the AMD EPYC with
/// AVX-512 of 30 November 2026, against 0.86-0.89 for 1024).
const TILE: usize = 2048;

/// Elements per tile at least (see [`TILE`]).
const TILE_MIN: usize = 1024;

/// Bytes the tile buffers of one loop may take together: half of a 32 KiB
/// L1 data cache, the rest being the input and output streams. The four
/// s32 buffers of int_floordiv_mod's chain filled L1 at 2048 elements
/// each; at 1024 one core took 0.90 ms against 1.00 (medians of five
/// alternating runs on the EPYC above).
const TILES_BYTES: usize = 16 << 10;

/// The elements per tile of a loop without mixes whose slot buffers take
/// `bytes` per element together: [`TILE`] where they fit in
/// [`TILES_BYTES`] so, else [`TILE_MIN`].
fn tile_len(bytes: usize) -> usize {
    if bytes.saturating_mul(TILE) > TILES_BYTES {
        TILE_MIN
    } else {
        TILE
    }
}

/// Whether `nodes` hold a threefry [`Node::Mix`].
fn has_mix(nodes: &[(Node, PrimitiveType)]) -> bool {
    nodes.iter().any(|(n, _)| matches!(n, Node::Mix(..)))
}

/// The bytes per element of a loop's slot buffers together (a slot holds
/// values of one element type, see [`assign_slots`]).
fn slot_bytes(nodes: &[(Node, PrimitiveType)], slots: &[usize], slot_count: usize) -> usize {
    let mut size = vec![0; slot_count];
    for ((_, ty), &s) in nodes.iter().zip(slots) {
        if let Some(b) = size.get_mut(s) {
            *b = ty.byte_size();
        }
    }
    size.iter().sum()
}

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
    /// The remainder of node `.1` by the one element of kernel input `.3`,
    /// from node `.2`, their quotient.
    Remainder(RemainderFn, usize, usize, usize),
    /// JAX's floor division or modulo of node `.1` by the one element of
    /// kernel input `.2` (see [`typed::FloorFn`]).
    Floor(FloorFn, usize, usize),
    /// Node `.1` rotated left by `.2` bits.
    Rotate(RotateFn, usize, u32),
    /// Node `.1` rotated left by `.2` bits, exclusive-or node `.3`.
    RotateXor(RotateXorFn, usize, u32, usize),
    Select(usize, usize, usize),
    Convert(ConvertFn, usize),
    /// A pair of 32-bit words `(a, b)`, starting from nodes `.0` and `.1`,
    /// taken through `.2`'s steps in registers: threefry's rounds and key
    /// injections in one pass instead of a pass per operation. The node's
    /// value is the final `a`; the final `b` is the next node's, a
    /// [`Node::MixedB`].
    Mix(usize, usize, Vec<Step>),
    /// The final `b` of the [`Node::Mix`] just before it, which writes it.
    MixedB,
}

/// One step of a [`Node::Mix`] on its words `(a, b)`, all arithmetic
/// wrapping, as the operations it replaces compute it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// `a += b; b = rotate_left(b, k) ^ a`: threefry's mix.
    Mix(u32),
    /// `a +=` kernel input `.0`'s one element.
    AddA(usize),
    /// `b +=` kernel input `.0`'s one element.
    AddB(usize),
}

impl Node {
    /// The nodes it reads.
    fn operands(&self) -> Vec<usize> {
        match *self {
            Node::Input(_) | Node::Splat(_) | Node::Iota(..) | Node::MixedB => vec![],
            Node::Binary(_, a, b)
            | Node::RotateXor(_, a, _, b)
            | Node::Mix(a, b, _)
            | Node::Remainder(_, a, b, _) => vec![a, b],
            Node::BinarySplat(_, a, _)
            | Node::Floor(_, a, _)
            | Node::Rotate(_, a, _)
            | Node::Convert(_, a) => vec![a],
            Node::Select(p, a, b) => vec![p, a, b],
        }
    }

    /// The node with each operand `k` read from `to(k)` instead.
    fn renumbered(self, to: impl Fn(usize) -> usize) -> Node {
        match self {
            Node::Binary(f, a, b) => Node::Binary(f, to(a), to(b)),
            Node::RotateXor(f, a, k, b) => Node::RotateXor(f, to(a), k, to(b)),
            Node::Mix(a, b, steps) => Node::Mix(to(a), to(b), steps),
            Node::BinarySplat(f, a, i) => Node::BinarySplat(f, to(a), i),
            Node::Floor(f, a, i) => Node::Floor(f, to(a), i),
            Node::Remainder(f, a, q, i) => Node::Remainder(f, to(a), to(q), i),
            Node::Rotate(f, a, k) => Node::Rotate(f, to(a), k),
            Node::Convert(f, a) => Node::Convert(f, to(a)),
            Node::Select(p, a, b) => Node::Select(to(p), to(a), to(b)),
            n @ (Node::Input(_) | Node::Splat(_) | Node::Iota(..) | Node::MixedB) => n,
        }
    }
}

/// Replaces chains of threefry steps on pairs of 32-bit words by
/// [`Node::Mix`] nodes. `adds[k]` says node `k` is an integer add (a
/// [`Node::Binary`] or [`Node::BinarySplat`] of `add`). A chain starts at an
/// add `a + b` that a [`Node::RotateXor`] of `b` reads, and grows while the
/// pair's values are read only by the next step: another mix, or the add of
/// a scalar to either word. Every other node keeps its order; the mix sits
/// where the first of its two results was.
pub(crate) fn fuse_mixes(
    nodes: Vec<(Node, PrimitiveType)>,
    adds: &[bool],
    results: Vec<usize>,
) -> (Vec<(Node, PrimitiveType)>, Vec<usize>) {
    let n = nodes.len();
    if adds.len() != n {
        return (nodes, results);
    }
    let word = |k: usize| matches!(nodes[k].1, PrimitiveType::U32 | PrimitiveType::S32);
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (k, (node, _)) in nodes.iter().enumerate() {
        for a in node.operands() {
            if !users[a].contains(&k) {
                users[a].push(k);
            }
        }
    }
    // Results are read after the last node, so they end any chain.
    let only = |x: usize, allowed: &[usize]| {
        !results.contains(&x) && users[x].iter().all(|u| allowed.contains(u))
    };
    // The mix `t = a + b`, `u = rotate(b, k) ^ t` on `(a, b)`, if any.
    let mix = |a: usize, b: usize| -> Option<(usize, usize, u32)> {
        users[a].iter().find_map(|&t| {
            let Node::Binary(_, p, q) = nodes[t].0 else {
                return None;
            };
            if !(adds[t] && word(t) && ((p, q) == (a, b) || (p, q) == (b, a))) {
                return None;
            }
            users[t].iter().find_map(|&u| match nodes[u].0 {
                Node::RotateXor(_, x, k, y) if x == b && y == t && word(u) => Some((t, u, k)),
                _ => None,
            })
        })
    };
    let add_splat = |x: usize| -> Option<(usize, usize)> {
        users[x].iter().find_map(|&t| match nodes[t].0 {
            Node::BinarySplat(_, y, j) if y == x && adds[t] && word(t) => Some((t, j)),
            _ => None,
        })
    };
    let mut gone = vec![false; n];
    // Each mix by where it goes (the first of its results): its start pair,
    // steps, and final pair with their types.
    let mut mixes: HashMap<usize, (usize, usize, Vec<Step>, [(usize, PrimitiveType); 2])> =
        HashMap::new();
    for k in 0..n {
        let Node::Binary(_, p, q) = nodes[k].0 else {
            continue;
        };
        if gone[k] || p == q || !adds[k] {
            continue;
        }
        // The first mix: `b` is the operand the rotation reads.
        let Some((a0, b0, (mut a, mut b, r0))) = [(p, q), (q, p)]
            .into_iter()
            .find_map(|(x, y)| mix(x, y).filter(|m| m.0 == k).map(|m| (x, y, m)))
        else {
            continue;
        };
        let mut steps = vec![Step::Mix(r0)];
        let mut chain = vec![a, b];
        // (After a mix, `b` reads `a` too.)
        loop {
            if let Some((t, u, r)) = mix(a, b)
                && only(a, &[t, b])
                && only(b, &[t, u])
            {
                steps.push(Step::Mix(r));
                (a, b) = (t, u);
            } else if let Some((t, j)) = add_splat(a)
                && only(a, &[t, b])
            {
                steps.push(Step::AddA(j));
                a = t;
            } else if let Some((t, j)) = add_splat(b)
                && only(b, &[t])
            {
                steps.push(Step::AddB(j));
                b = t;
            } else {
                break;
            }
            chain.extend([a, b]);
        }
        for &c in &chain {
            gone[c] = true;
        }
        let finals = [(a, nodes[a].1), (b, nodes[b].1)];
        mixes.insert(a.min(b), (a0, b0, steps, finals));
    }
    if mixes.is_empty() {
        return (nodes, results);
    }
    // Chain nodes go; each mix and its `b` take the place of the first of
    // its results (after its start pair, before any reader of either), and
    // readers of the results read those.
    let mut to = vec![usize::MAX; n];
    let mut out: Vec<(Node, PrimitiveType)> = Vec::with_capacity(n);
    for (k, (node, ty)) in nodes.into_iter().enumerate() {
        if let Some((a0, b0, steps, [(a, ta), (b, tb)])) = mixes.remove(&k) {
            out.push((Node::Mix(to[a0], to[b0], steps), ta));
            to[a] = out.len() - 1;
            out.push((Node::MixedB, tb));
            to[b] = out.len() - 1;
        } else if !gone[k] {
            out.push((node.renumbered(|x| to[x]), ty));
            to[k] = out.len() - 1;
        }
    }
    // (No result is inside a chain: each ends one.)
    let results = results.into_iter().map(|r| to[r]).collect();
    (out, results)
}

/// A compiled loop: its nodes in order, each node's element type, the tile
/// buffer (slot) each node writes, and the nodes whose values it writes
/// out.
#[derive(Clone, Debug)]
pub(crate) struct TiledLoop {
    nodes: Vec<(Node, PrimitiveType)>,
    slots: Vec<usize>,
    slot_count: usize,
    /// Elements per tile (see [`tile_len`]).
    tile_elems: usize,
    /// One node (a loop's value), or several (a multi-output loop's, which
    /// makes a tuple; see [`TiledLoop::tuple`]).
    results: Vec<usize>,
    /// For a loop that makes a tuple: its elements in order, and how many
    /// of the kernel's inputs the nodes read (the others are elements
    /// passed through).
    tuple: Option<(Vec<Element>, usize)>,
    /// Each result's shape (one element count for all).
    shapes: Vec<ArrayShape>,
}

/// An element of a multi-output loop's tuple.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Element {
    /// Result `.0` of the loop.
    Result(usize),
    /// Kernel input `.0`, as it is.
    Input(usize),
}

impl TiledLoop {
    /// A loop computing `nodes` (operands before users) whose values are
    /// those of the nodes `results`, of `shapes` (one element count).
    pub fn with_results(
        nodes: Vec<(Node, PrimitiveType)>,
        results: Vec<usize>,
        shapes: Vec<ArrayShape>,
    ) -> TiledLoop {
        let (slots, slot_count) = assign_slots(&nodes, &results);
        // A mix keeps threefry's words in registers through its rounds, so
        // its buffers are touched once per many operations, while its tile
        // costs more to set up: JAX's uniform floats (a mix and 40 bytes of
        // buffers an element) took 1.62 ms at 1024 elements a tile against
        // 1.35 at 2048.
        let tile = match has_mix(&nodes) {
            true => TILE,
            false => tile_len(slot_bytes(&nodes, &slots, slot_count)),
        };
        TiledLoop {
            nodes,
            slots,
            slot_count,
            tile_elems: tile,
            results,
            tuple: None,
            shapes,
        }
    }

    /// A loop computing `nodes` that makes a tuple: the values of the
    /// nodes `results` (of `shapes`, all of one element count) and inputs
    /// from `node_inputs` on, as `elements` place them. Multi-output
    /// fusion: loops over one shape, which often read the same arrays (a
    /// JAX function's outputs), in one pass over memory.
    pub fn tuple(
        nodes: Vec<(Node, PrimitiveType)>,
        results: Vec<usize>,
        shapes: Vec<ArrayShape>,
        elements: Vec<Element>,
        node_inputs: usize,
    ) -> TiledLoop {
        TiledLoop {
            tuple: Some((elements, node_inputs)),
            ..Self::with_results(nodes, results, shapes)
        }
    }
}

/// Gives each node a tile buffer, reusing those of values no later node
/// reads (of the same element type), so a long chain (threefry's twenty
/// rounds) works in a few tiles that stay in L1 rather than one per node.
/// Splats keep theirs: they are filled once per task. A node never writes
/// the buffer of one of its own operands.
fn assign_slots(nodes: &[(Node, PrimitiveType)], results: &[usize]) -> (Vec<usize>, usize) {
    let mut last_use: Vec<usize> = (0..nodes.len()).collect();
    for (k, (node, _)) in nodes.iter().enumerate() {
        for a in node.operands() {
            last_use[a] = k;
        }
    }
    // Results are read after the last node.
    for &r in results {
        if let Some(l) = last_use.get_mut(r) {
            *l = usize::MAX;
        }
    }
    let mut free: Vec<(PrimitiveType, usize)> = Vec::new();
    let mut slots = Vec::with_capacity(nodes.len());
    let mut count = 0;
    let mut take = |node: &Node, ty: &PrimitiveType, free: &mut Vec<(PrimitiveType, usize)>| {
        let reuse = match node {
            Node::Splat(_) => None,
            _ => free.iter().position(|(t, _)| t == ty),
        };
        match reuse {
            Some(i) => free.swap_remove(i).1,
            None => {
                count += 1;
                count - 1
            }
        }
    };
    for (k, (node, ty)) in nodes.iter().enumerate() {
        // (A mix's `b` has its buffer already.)
        if slots.len() == k {
            slots.push(take(node, ty, &mut free));
        }
        // A mix writes its `b` in the same pass: a buffer taken now, before
        // its operands' are free.
        if let (Node::Mix(..), Some((b @ Node::MixedB, tb))) = (node, nodes.get(k + 1)) {
            slots.push(take(b, tb, &mut free));
        }
        for a in node.operands() {
            let splat = matches!(nodes[a].0, Node::Splat(_));
            if last_use[a] == k && !splat && !free.iter().any(|&(_, s)| s == slots[a]) {
                free.push((nodes[a].1, slots[a]));
            }
        }
        // A value nothing reads (results are kept).
        if last_use[k] == k && !matches!(node, Node::Splat(_)) {
            free.push((*ty, slots[k]));
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

/// A [`Step`] with its scalar read: the word it adds (as bits).
#[derive(Clone, Copy)]
enum Resolved {
    Mix(u32),
    AddA(u32),
    AddB(u32),
}

/// 32-bit words, signed or not: the mix's wrapping arithmetic is the same
/// on their bits.
trait Word: NativeType + Copy {
    fn bits(self) -> u32;
    fn of(bits: u32) -> Self;
}

impl Word for u32 {
    fn bits(self) -> u32 {
        self
    }
    fn of(bits: u32) -> Self {
        bits
    }
}

impl Word for i32 {
    fn bits(self) -> u32 {
        self as u32
    }
    fn of(bits: u32) -> Self {
        bits as i32
    }
}

/// The steps on one pair of words.
#[inline(always)]
fn mix_one(mut x: u32, mut y: u32, steps: &[Resolved]) -> (u32, u32) {
    for step in steps {
        match *step {
            Resolved::Mix(k) => {
                x = x.wrapping_add(y);
                y = y.rotate_left(k) ^ x;
            }
            Resolved::AddA(v) => x = x.wrapping_add(v),
            Resolved::AddB(v) => y = y.wrapping_add(v),
        }
    }
    (x, y)
}

/// The steps on `(a[l], b[l])` for each lane `l`, into `oa` and `ob` (all of
/// one length): 32 lanes at a time in vector registers where the CPU has
/// AVX-512 or AVX2, the rest one by one.
fn mix_lanes<T: Word>(a: &[T], b: &[T], steps: &[Resolved], oa: &mut [T], ob: &mut [T]) {
    let n = oa.len().min(ob.len()).min(a.len()).min(b.len());
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f") {
            // SAFETY: the feature was just detected; every slice holds `n`
            // words of 4 bytes.
            done = unsafe {
                mix_avx512(
                    a.as_ptr(),
                    b.as_ptr(),
                    n,
                    steps,
                    oa.as_mut_ptr(),
                    ob.as_mut_ptr(),
                )
            };
        } else if std::is_x86_feature_detected!("avx2") {
            // SAFETY: as above.
            done = unsafe {
                mix_avx2(
                    a.as_ptr(),
                    b.as_ptr(),
                    n,
                    steps,
                    oa.as_mut_ptr(),
                    ob.as_mut_ptr(),
                )
            };
        }
    }
    for l in done..n {
        let (x, y) = mix_one(a[l].bits(), b[l].bits(), steps);
        (oa[l], ob[l]) = (T::of(x), T::of(y));
    }
}

/// The first `n / 32 * 32` lanes of [`mix_lanes`] with AVX-512, two
/// vectors of each word at a time; returns how many lanes it did.
///
/// # Safety
/// The CPU has AVX-512F; `a`, `b`, `oa` and `ob` point to `n` 32-bit words.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn mix_avx512<T>(
    a: *const T,
    b: *const T,
    n: usize,
    steps: &[Resolved],
    oa: *mut T,
    ob: *mut T,
) -> usize {
    use std::arch::x86_64::*;
    let full = n / 32 * 32;
    let mut l = 0;
    while l < full {
        // SAFETY: lanes `l..l + 32` are within the `n` words of each.
        unsafe {
            let mut x0 = _mm512_loadu_si512(a.add(l).cast());
            let mut x1 = _mm512_loadu_si512(a.add(l + 16).cast());
            let mut y0 = _mm512_loadu_si512(b.add(l).cast());
            let mut y1 = _mm512_loadu_si512(b.add(l + 16).cast());
            for step in steps {
                match *step {
                    Resolved::Mix(k) => {
                        let k = _mm512_set1_epi32(k as i32);
                        x0 = _mm512_add_epi32(x0, y0);
                        x1 = _mm512_add_epi32(x1, y1);
                        y0 = _mm512_xor_si512(_mm512_rolv_epi32(y0, k), x0);
                        y1 = _mm512_xor_si512(_mm512_rolv_epi32(y1, k), x1);
                    }
                    Resolved::AddA(v) => {
                        let v = _mm512_set1_epi32(v as i32);
                        x0 = _mm512_add_epi32(x0, v);
                        x1 = _mm512_add_epi32(x1, v);
                    }
                    Resolved::AddB(v) => {
                        let v = _mm512_set1_epi32(v as i32);
                        y0 = _mm512_add_epi32(y0, v);
                        y1 = _mm512_add_epi32(y1, v);
                    }
                }
            }
            _mm512_storeu_si512(oa.add(l).cast(), x0);
            _mm512_storeu_si512(oa.add(l + 16).cast(), x1);
            _mm512_storeu_si512(ob.add(l).cast(), y0);
            _mm512_storeu_si512(ob.add(l + 16).cast(), y1);
        }
        l += 32;
    }
    full
}

/// [`mix_avx512`] with AVX2: four vectors of each word at a time, the
/// rotation as two shifts (a count of 32 shifts every bit out).
///
/// # Safety
/// The CPU has AVX2; `a`, `b`, `oa` and `ob` point to `n` 32-bit words.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn mix_avx2<T>(
    a: *const T,
    b: *const T,
    n: usize,
    steps: &[Resolved],
    oa: *mut T,
    ob: *mut T,
) -> usize {
    use std::arch::x86_64::*;
    let full = n / 32 * 32;
    let mut l = 0;
    while l < full {
        // SAFETY: lanes `l..l + 32` are within the `n` words of each.
        unsafe {
            let (mut x, mut y) = ([_mm256_setzero_si256(); 4], [_mm256_setzero_si256(); 4]);
            for j in 0..4 {
                x[j] = _mm256_loadu_si256(a.add(l + 8 * j).cast());
                y[j] = _mm256_loadu_si256(b.add(l + 8 * j).cast());
            }
            for step in steps {
                match *step {
                    Resolved::Mix(k) => {
                        let k = k % 32;
                        let left = _mm_cvtsi32_si128(k as i32);
                        let right = _mm_cvtsi32_si128(32 - k as i32);
                        for j in 0..4 {
                            x[j] = _mm256_add_epi32(x[j], y[j]);
                            let r = _mm256_or_si256(
                                _mm256_sll_epi32(y[j], left),
                                _mm256_srl_epi32(y[j], right),
                            );
                            y[j] = _mm256_xor_si256(r, x[j]);
                        }
                    }
                    Resolved::AddA(v) => {
                        let v = _mm256_set1_epi32(v as i32);
                        for x in &mut x {
                            *x = _mm256_add_epi32(*x, v);
                        }
                    }
                    Resolved::AddB(v) => {
                        let v = _mm256_set1_epi32(v as i32);
                        for y in &mut y {
                            *y = _mm256_add_epi32(*y, v);
                        }
                    }
                }
            }
            for j in 0..4 {
                _mm256_storeu_si256(oa.add(l + 8 * j).cast(), x[j]);
                _mm256_storeu_si256(ob.add(l + 8 * j).cast(), y[j]);
            }
        }
        l += 32;
    }
    full
}

/// A [`Node::Mix`] over one tile: `a` and `b` in, the final words out.
fn mix(
    a: &ArrayData,
    b: &ArrayData,
    steps: &[Step],
    inputs: &[&ArrayData],
    oa: &mut ArrayData,
    ob: &mut ArrayData,
) -> bool {
    fn go<T: Word>(
        a: &ArrayData,
        b: &ArrayData,
        steps: &[Step],
        inputs: &[&ArrayData],
        oa: &mut ArrayData,
        ob: &mut ArrayData,
    ) -> bool {
        let scalar = |j: usize| match inputs.get(j).and_then(|d| T::slice(d)) {
            Some(&[v]) => Some(v.bits()),
            _ => None,
        };
        let resolved: Option<Vec<Resolved>> = steps
            .iter()
            .map(|s| match *s {
                Step::Mix(k) => Some(Resolved::Mix(k)),
                Step::AddA(j) => scalar(j).map(Resolved::AddA),
                Step::AddB(j) => scalar(j).map(Resolved::AddB),
            })
            .collect();
        match (
            resolved,
            T::slice(a),
            T::slice(b),
            T::slice_mut(oa),
            T::slice_mut(ob),
        ) {
            (Some(steps), Some(a), Some(b), Some(oa), Some(ob))
                if a.len() == oa.len() && b.len() == oa.len() && ob.len() == oa.len() =>
            {
                mix_lanes(a, b, &steps, oa, ob);
                true
            }
            _ => false,
        }
    }
    match a.element_type() {
        PrimitiveType::U32 => go::<u32>(a, b, steps, inputs, oa, ob),
        PrimitiveType::S32 => go::<i32>(a, b, steps, inputs, oa, ob),
        _ => false,
    }
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
            // A mix writes its `b` too, into the next node's buffer, lent
            // out here so both outputs can be written at once.
            let mut second = match node {
                Node::Mix(..) => {
                    let (Some(&s2), Some((Node::MixedB, tb))) =
                        (self.slots.get(k + 1), self.nodes.get(k + 1))
                    else {
                        return false;
                    };
                    let mut b = std::mem::replace(&mut regs[s2], tile_of(PrimitiveType::Pred, 0));
                    if b.len() != len || b.element_type() != *tb {
                        b = tile_of(*tb, len);
                    }
                    Some((s2, b))
                }
                _ => None,
            };
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
                Node::Remainder(f, a, q, i) => input(i)
                    .and_then(typed::bits_of)
                    .is_some_and(|d| f(slot(a), slot(q), d, r)),
                Node::Floor(f, a, i) => input(i)
                    .and_then(typed::bits_of)
                    .is_some_and(|d| f(slot(a), d, r)),
                Node::Rotate(f, a, k) => f(slot(a), k, r),
                Node::RotateXor(f, a, k, b) => f(slot(a), k, slot(b), r),
                Node::Select(p, a, b) => typed::select(slot(p), slot(a), slot(b), r),
                Node::Convert(f, a) => f(slot(a), r),
                Node::Mix(a, b, ref steps) => match second.as_mut() {
                    Some((_, out_b)) => mix(slot(a), slot(b), steps, inputs, r, out_b),
                    None => false,
                },
                // Written by the mix before it.
                Node::MixedB => k > 0 && matches!(self.nodes[k - 1].0, Node::Mix(..)),
            };
            if let Some((s2, b)) = second.take() {
                regs[s2] = b;
            }
            if !ok {
                return false;
            }
        }
        true
    }

    /// Computes every result into `outs` (one array each, of the loop's
    /// element count and the result's type).
    fn execute(&self, inputs: &[&ArrayData], outs: &mut [ArrayData]) -> bool {
        let n = outs.first().map_or(0, ArrayData::len);
        if outs.len() != self.results.len() {
            return false;
        }
        let tile = self.tile_elems;
        let tasks = if n >= PARALLEL_MIN {
            (rayon::current_num_threads() * 4).min(n.div_ceil(tile))
        } else {
            1
        };
        let per_task = (n.div_ceil(tile).div_ceil(tasks.max(1)) * tile).max(tile);
        // Outputs that could not stay in cache are streamed, as fused
        // loops' are (see `fused::streams_traffic`), each tile's once it is
        // computed. Streaming them during the next tile instead, a share
        // after each operation, was slower: int_floordiv_mod took 1.33-1.45
        // ms on one core against 1.08-1.15 with shares ending anywhere, and
        // 1.62-2.99 against 1.19-2.17 with shares ending on lines (a slower
        // hour of the AVX2 EPYC of 1 December 2026; alternating runs).
        // Hinting each input's next tile into cache, a share before each
        // node as fused loops of four passes or more do, moved the wait
        // rather than removing it: the input's copy fell from 14% to 5% of
        // the samples on one core, while the streamed copies rose from 16%
        // to 19% and the hints took 6%. int_floordiv_mod took 0.63-1.03 ms
        // (median 0.78) against 0.64-1.03 (0.81) on two threads, and
        // 1.11-1.16 against 1.08-1.30 on one (ten and six alternating runs).
        let stream = streams_traffic(data_bytes(outs.iter()), data_bytes(inputs.iter().copied()));
        // Each task's parts of the outputs.
        let mut parts: Vec<Vec<Box<dyn Sink + '_>>> =
            (0..n.div_ceil(per_task)).map(|_| Vec::new()).collect();
        for out in outs.iter_mut() {
            if out.len() != n {
                return false;
            }
            let chunks: Vec<Box<dyn Sink + '_>> = with_array_data!(out, v => v
                .chunks_mut(per_task)
                .map(|c| Box::new(c) as Box<dyn Sink + '_>)
                .collect());
            for (part, chunk) in parts.iter_mut().zip(chunks) {
                part.push(chunk);
            }
        }
        let run = |(i, mut sinks): (usize, Vec<Box<dyn Sink + '_>>)| -> bool {
            let first = i * per_task;
            let len = per_task.min(n - first);
            let mut regs: Vec<ArrayData> = (0..self.slot_count)
                .map(|_| tile_of(PrimitiveType::Pred, 0))
                .collect();
            for at in (0..len).step_by(tile) {
                if !self.tile(inputs, first + at, tile.min(len - at), &mut regs) {
                    return false;
                }
                for (&r, sink) in self.results.iter().zip(&mut sinks) {
                    if !self
                        .slots
                        .get(r)
                        .is_some_and(|&s| sink.put(at, &regs[s], stream))
                    {
                        return false;
                    }
                }
            }
            if stream {
                store_fence();
            }
            true
        };
        if parts.len() > 1 {
            parts.into_par_iter().enumerate().all(run)
        } else {
            parts.into_iter().enumerate().all(run)
        }
    }
}

/// Where a task writes one result: its part of an output array.
trait Sink: Send {
    /// Copies `tile` (of the result's type) to the part's elements from
    /// `at` on, with non-temporal stores if `stream`.
    fn put(&mut self, at: usize, tile: &ArrayData, stream: bool) -> bool;
}

impl<T: NativeType> Sink for &mut [T] {
    fn put(&mut self, at: usize, tile: &ArrayData, stream: bool) -> bool {
        match (T::slice(tile), self.get_mut(at..)) {
            (Some(t), Some(d)) if t.len() <= d.len() => {
                if stream {
                    copy_streamed(t, &mut d[..t.len()]);
                } else {
                    d[..t.len()].copy_from_slice(t);
                }
                true
            }
            _ => false,
        }
    }
}

impl Kernel for TiledLoop {
    fn name(&self) -> &'static str {
        match (self.tuple.is_some(), has_mix(&self.nodes)) {
            (false, false) => "tiled loop",
            (false, true) => "tiled loop (threefry mixes)",
            (true, false) => "multi-output tiled loop",
            (true, true) => "multi-output tiled loop (threefry mixes)",
        }
    }

    fn detail(&self, _name_of: &dyn Fn(usize) -> String) -> String {
        let floors = self
            .nodes
            .iter()
            .filter(|(n, _)| matches!(n, Node::Floor(..)))
            .count();
        let tiles = format!(", {} elements a tile", self.tile_elems);
        match floors {
            0 => format!(" of {} operations{tiles}", self.nodes.len()),
            _ => format!(
                " of {} operations, {floors} floor divisions or modulos{tiles}",
                self.nodes.len()
            ),
        }
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        let data: Vec<&ArrayData> = inputs
            .iter()
            .take(self.tuple.as_ref().map_or(usize::MAX, |t| t.1))
            .map(|v| {
                v.array()
                    .map(ArrayLiteral::data)
                    .ok_or("a tiled loop reads arrays")
            })
            .collect::<Result<_, _>>()?;
        let mut outs = Vec::with_capacity(self.shapes.len());
        for shape in &self.shapes {
            let n = shape.element_count().map_err(|e| e.to_string())?;
            outs.push(with_native_type!(shape.element_type(), T => T::wrap(pool.take::<T>(n))));
        }
        if !self.execute(&data, &mut outs) {
            return Err("operands of unexpected types or shapes".into());
        }
        let mut arrays: Vec<Value<'a>> = outs
            .into_iter()
            .zip(&self.shapes)
            .map(|(d, shape)| ArrayLiteral::new(shape.clone(), d).map(Value::owned))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        let Some((elements, _)) = &self.tuple else {
            return arrays
                .pop()
                .ok_or_else(|| "a loop without a result".to_string());
        };
        make_tuple(elements, &arrays, inputs)
    }
}

/// A multi-output loop's tuple: `elements` taken from its `results` and
/// its kernel `inputs`. (A result may appear more than once: its array is
/// shared.)
pub(crate) fn make_tuple<'a>(
    elements: &[Element],
    results: &[Value<'a>],
    inputs: &[Value<'a>],
) -> Result<Value<'a>, String> {
    elements
        .iter()
        .map(|e| match *e {
            Element::Result(i) => results.get(i).cloned(),
            Element::Input(j) => inputs.get(j).cloned(),
        })
        .collect::<Option<Vec<_>>>()
        .map(|v| Value::Tuple(v.into()))
        .ok_or_else(|| "a tuple element out of range".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_shrink_until_their_buffers_fit_half_of_l1() {
        // Up to two s32 buffers (8 bytes an element) fit 2048 elements.
        assert_eq!(tile_len(0), 2048);
        assert_eq!(tile_len(8), 2048);
        // Three or four (int_floordiv_mod's chain) take 1024.
        assert_eq!(tile_len(12), 1024);
        assert_eq!(tile_len(16), 1024);
        // More stay at 1024: shorter tiles cost more in dispatch.
        assert_eq!(tile_len(64), 1024);
        // A loop's buffers, counted once per slot with its type's size: an
        // input, a product reusing nothing, and a predicate.
        let nodes = vec![
            (Node::Input(0), PrimitiveType::S32),
            (Node::Binary(bin, 0, 0), PrimitiveType::S32),
            (Node::Binary(bin, 1, 0), PrimitiveType::Pred),
        ];
        let (slots, count) = assign_slots(&nodes, &[2]);
        assert_eq!(count, 3, "{slots:?}");
        assert_eq!(slot_bytes(&nodes, &slots, count), 9);
    }

    // Node functions `fuse_mixes` never calls.
    fn bin(_: &ArrayData, _: &ArrayData, _: &mut ArrayData) -> bool {
        false
    }
    fn splat_add(_: &ArrayData, _: u64, _: &mut ArrayData) -> bool {
        false
    }
    fn rot_xor(_: &ArrayData, _: u32, _: &ArrayData, _: &mut ArrayData) -> bool {
        false
    }

    /// The mixes of `nodes` (`adds` marks the adds) whose value is the last
    /// node: each one's operands and steps, and the operands of the result.
    fn mixed(nodes: Vec<Node>, adds: &[bool]) -> (Vec<(usize, usize, Vec<Step>)>, Vec<usize>) {
        let last = nodes.len() - 1;
        let (mixes, out, results) = mixed_with(nodes, adds, vec![last]);
        let result = results.first().map_or(vec![], |&r| out[r].0.operands());
        (mixes, result)
    }

    /// The mixes of `nodes` with results `results`, the nodes after, and
    /// where each result went.
    #[allow(clippy::type_complexity)]
    fn mixed_with(
        nodes: Vec<Node>,
        adds: &[bool],
        results: Vec<usize>,
    ) -> (
        Vec<(usize, usize, Vec<Step>)>,
        Vec<(Node, PrimitiveType)>,
        Vec<usize>,
    ) {
        let nodes = nodes.into_iter().map(|n| (n, PrimitiveType::U32)).collect();
        let (out, results) = fuse_mixes(nodes, adds, results);
        for (k, (n, _)) in out.iter().enumerate() {
            if let Node::Mix(..) = n {
                assert!(matches!(out[k + 1].0, Node::MixedB), "{out:?}");
            }
        }
        let mixes = out
            .iter()
            .filter_map(|(n, _)| match n {
                Node::Mix(a, b, steps) => Some((*a, *b, steps.clone())),
                _ => None,
            })
            .collect();
        (mixes, out, results)
    }

    #[test]
    fn threefry_chains_become_one_mix_and_stop_where_others_read() {
        use Node::*;
        // Two rounds and a key injection on each word, then a xor.
        let nodes = vec![
            Input(0),
            Input(1),
            Binary(bin, 0, 1),
            RotateXor(rot_xor, 1, 13, 2),
            Binary(bin, 2, 3),
            RotateXor(rot_xor, 3, 15, 4),
            BinarySplat(splat_add, 4, 2),
            BinarySplat(splat_add, 5, 3),
            Binary(bin, 6, 7),
        ];
        let adds = [false, false, true, false, true, false, true, true, false];
        let (mixes, result) = mixed(nodes.clone(), &adds);
        let steps = vec![Step::Mix(13), Step::Mix(15), Step::AddA(2), Step::AddB(3)];
        assert_eq!(mixes, vec![(0, 1, steps)]);
        assert_eq!(result, vec![2, 3]);
        // Only adds mix: with the first round's not one, the chain starts
        // at the second; with neither, there is none.
        let mut plain = adds;
        plain[2] = false;
        let (mixes, _) = mixed(nodes.clone(), &plain);
        let steps = vec![Step::Mix(15), Step::AddA(2), Step::AddB(3)];
        assert_eq!(mixes, vec![(2, 3, steps)]);
        plain[4] = false;
        assert_eq!(mixed(nodes.clone(), &plain).0, vec![]);
        // The first round's `a` read by the result too: the chain ends
        // there, and a second one starts at the next round.
        let mut read = nodes.clone();
        read.push(Binary(bin, 8, 2));
        let mut more = adds.to_vec();
        more.push(false);
        let (mixes, _) = mixed(read, &more);
        let split = vec![
            (0, 1, vec![Step::Mix(13)]),
            (2, 3, vec![Step::Mix(15), Step::AddA(2), Step::AddB(3)]),
        ];
        assert_eq!(mixes, split);
        // So does a result of a multi-output loop there; each result is
        // renumbered to its node (the first round's `a` is the first mix).
        let (mixes, out, results) = mixed_with(nodes, &adds, vec![2, 8]);
        assert_eq!(mixes, split);
        assert_eq!(results.len(), 2);
        assert!(matches!(out[results[0]].0, Mix(0, 1, _)), "{out:?}");
        assert!(matches!(out[results[1]].0, Binary(_, 4, 5)), "{out:?}");
    }

    #[test]
    fn mix_kernels_agree_with_the_steps_one_pair_at_a_time() {
        // Rotations by 0 and 32 (both none), by 31, scalar adds that wrap;
        // 100 lanes: three groups of 32 and a tail.
        let steps = [
            Resolved::Mix(13),
            Resolved::Mix(0),
            Resolved::Mix(32),
            Resolved::AddA(0x9e37_79b9),
            Resolved::Mix(31),
            Resolved::AddB(u32::MAX),
        ];
        let n = 100;
        let a: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(0x9e37_79b9)).collect();
        let b: Vec<u32> = (0..n as u32)
            .map(|i| i.wrapping_mul(0x85eb_ca6b) ^ 0xdead_beef)
            .collect();
        let want: Vec<(u32, u32)> = a
            .iter()
            .zip(&b)
            .map(|(&x, &y)| mix_one(x, y, &steps))
            .collect();
        // Not the identity: the test would see a kernel that did nothing.
        assert!(
            want.iter()
                .zip(a.iter().zip(&b))
                .all(|(w, (&x, &y))| *w != (x, y))
        );
        type Kernel =
            unsafe fn(*const u32, *const u32, usize, &[Resolved], *mut u32, *mut u32) -> usize;
        #[cfg(target_arch = "x86_64")]
        for (name, has, f) in [
            (
                "avx512",
                std::is_x86_feature_detected!("avx512f"),
                mix_avx512::<u32> as Kernel,
            ),
            (
                "avx2",
                std::is_x86_feature_detected!("avx2"),
                mix_avx2::<u32> as Kernel,
            ),
        ] {
            if !has {
                continue;
            }
            let (mut oa, mut ob) = (vec![0u32; n], vec![0u32; n]);
            // SAFETY: the feature is there; every buffer holds `n` words.
            let done = unsafe {
                f(
                    a.as_ptr(),
                    b.as_ptr(),
                    n,
                    &steps,
                    oa.as_mut_ptr(),
                    ob.as_mut_ptr(),
                )
            };
            assert_eq!(done, 96, "{name}");
            for l in 0..done {
                assert_eq!((oa[l], ob[l]), want[l], "{name}, lane {l}");
            }
        }
        // The whole, tail included, on i32 as on u32.
        let sa: Vec<i32> = a.iter().map(|&x| x as i32).collect();
        let sb: Vec<i32> = b.iter().map(|&y| y as i32).collect();
        let (mut oa, mut ob) = (vec![0i32; n], vec![0i32; n]);
        mix_lanes(&sa, &sb, &steps, &mut oa, &mut ob);
        for l in 0..n {
            assert_eq!((oa[l] as u32, ob[l] as u32), want[l], "lane {l}");
        }
    }

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
