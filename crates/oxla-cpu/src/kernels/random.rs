//! `rng-bit-generator`: ThreeFry-2x32 and Philox-4x32 (`rng_default` is
//! Philox, as on XLA:CPU), bit for bit the interpreter's bits and state
//! (`oxla_interp`'s `eval/rng.rs` is the reference and says where each rule
//! comes from). Counter blocks are independent, so the kernel computes
//! 32 at a time, one per vector lane, splits the output across the
//! pool's threads, and writes each element's bits straight into the result.

use oxla_hlo::ir::RngAlgorithm;
use oxla_hlo::{ArrayLiteral, ArrayShape, HloInstruction, NativeType, PrimitiveType, Shape};
use rayon::prelude::*;

use super::Kernel;
use super::fused::PARALLEL_MIN;
use crate::buffer::Pool;
use crate::value::Value;

/// Counter blocks computed together, one per lane.
const LANES: usize = 32;

/// Elements a thread takes at a time when the output is split.
const TASK: usize = 1 << 15;

#[derive(Clone, Copy, Debug)]
enum Algorithm {
    ThreeFry,
    Philox,
}

pub(crate) struct RngBitsKernel {
    algorithm: Algorithm,
    bits: ArrayShape,
}

pub(crate) fn plan(instr: &HloInstruction) -> Option<RngBitsKernel> {
    let Shape::Tuple(parts) = &instr.shape else {
        return None;
    };
    let [Shape::Array(_), Shape::Array(bits)] = parts.as_slice() else {
        return None;
    };
    use PrimitiveType::*;
    if matches!(bits.element_type(), Pred | C64 | C128) {
        return None;
    }
    let algorithm = match instr.attrs.rng_algorithm.unwrap_or(RngAlgorithm::Default) {
        RngAlgorithm::ThreeFry => Algorithm::ThreeFry,
        RngAlgorithm::Philox | RngAlgorithm::Default => Algorithm::Philox,
    };
    Some(RngBitsKernel {
        algorithm,
        bits: bits.clone(),
    })
}

/// An element type made from generated bits: the low bits of a 32-bit word
/// for types of up to 32 bits, a whole 64-bit word for the others.
trait Word: NativeType + Send {
    const WIDE: bool = std::mem::size_of::<Self>() == 8;
    fn from_word(w: u64) -> Self;
}

macro_rules! int_word {
    ($($t:ty),*) => {$(
        impl Word for $t {
            #[inline(always)]
            fn from_word(w: u64) -> $t {
                w as $t
            }
        }
    )*};
}

int_word!(u8, u16, u32, u64, i8, i16, i32, i64);

macro_rules! float_word {
    ($($t:ty: $bits:ty),*) => {$(
        impl Word for $t {
            #[inline(always)]
            fn from_word(w: u64) -> $t {
                <$t>::from_bits(w as $bits)
            }
        }
    )*};
}

float_word!(oxla_hlo::half::f16: u16, oxla_hlo::half::bf16: u16, f32: u32, f64: u64);

/// Threefry-2x32, 20 rounds, on each lane's (x0, x1). Written out round
/// by round, so every rotation is a constant and every loop is one vector
/// operation per lane array.
#[inline(always)]
fn threefry_portable(x0: &mut [u32; LANES], x1: &mut [u32; LANES], k0: u32, k1: u32) {
    #[inline(always)]
    fn mix<const R: u32>(x0: &mut [u32; LANES], x1: &mut [u32; LANES]) {
        for l in 0..LANES {
            let a = x0[l].wrapping_add(x1[l]);
            x0[l] = a;
            x1[l] = x1[l].rotate_left(R) ^ a;
        }
    }
    #[inline(always)]
    fn inject(x0: &mut [u32; LANES], x1: &mut [u32; LANES], a: u32, b: u32) {
        for l in 0..LANES {
            x0[l] = x0[l].wrapping_add(a);
            x1[l] = x1[l].wrapping_add(b);
        }
    }
    #[inline(always)]
    fn even(x0: &mut [u32; LANES], x1: &mut [u32; LANES]) {
        mix::<13>(x0, x1);
        mix::<15>(x0, x1);
        mix::<26>(x0, x1);
        mix::<6>(x0, x1);
    }
    #[inline(always)]
    fn odd(x0: &mut [u32; LANES], x1: &mut [u32; LANES]) {
        mix::<17>(x0, x1);
        mix::<29>(x0, x1);
        mix::<16>(x0, x1);
        mix::<24>(x0, x1);
    }
    let k2 = 0x1BD1_1BDA ^ k0 ^ k1;
    inject(x0, x1, k0, k1);
    even(x0, x1);
    inject(x0, x1, k1, k2.wrapping_add(1));
    odd(x0, x1);
    inject(x0, x1, k2, k0.wrapping_add(2));
    even(x0, x1);
    inject(x0, x1, k0, k1.wrapping_add(3));
    odd(x0, x1);
    inject(x0, x1, k1, k2.wrapping_add(4));
    even(x0, x1);
    inject(x0, x1, k2, k0.wrapping_add(5));
}

/// Philox-4x32, 10 rounds, on each lane's four words.
#[inline(always)]
fn philox_portable(x: &mut [[u32; LANES]; 4], mut k0: u32, mut k1: u32) {
    let [mut a, mut b, mut c, mut d] = *x;
    for _ in 0..10 {
        let (mut na, mut nb, mut nc, mut nd) = ([0; LANES], [0; LANES], [0; LANES], [0; LANES]);
        for l in 0..LANES {
            let p0 = a[l] as u64 * 0xD251_1F53;
            let p1 = c[l] as u64 * 0xCD9E_8D57;
            na[l] = ((p1 >> 32) as u32) ^ b[l] ^ k0;
            nb[l] = p1 as u32;
            nc[l] = ((p0 >> 32) as u32) ^ d[l] ^ k1;
            nd[l] = p0 as u32;
        }
        (a, b, c, d) = (na, nb, nc, nd);
        k0 = k0.wrapping_add(0x9E37_79B9);
        k1 = k1.wrapping_add(0xBB67_AE85);
    }
    *x = [a, b, c, d];
}

/// ThreeFry on each lane, with AVX-512 when `V512` (set only by code that
/// runs after the CPU was found to have it).
#[inline(always)]
fn threefry_lanes<const V512: bool>(
    x0: &mut [u32; LANES],
    x1: &mut [u32; LANES],
    k0: u32,
    k1: u32,
) {
    #[cfg(target_arch = "x86_64")]
    if V512 {
        // SAFETY: `V512` is only set where AVX-512F was detected.
        return unsafe { avx512::threefry(x0, x1, k0, k1) };
    }
    threefry_portable(x0, x1, k0, k1)
}

/// Philox on each lane, with AVX-512 when `V512` (see [`threefry_lanes`]).
#[inline(always)]
fn philox_lanes<const V512: bool>(x: &mut [[u32; LANES]; 4], k0: u32, k1: u32) {
    #[cfg(target_arch = "x86_64")]
    if V512 {
        // SAFETY: `V512` is only set where AVX-512F was detected.
        return unsafe { avx512::philox(x, k0, k1) };
    }
    philox_portable(x, k0, k1)
}

/// The two generators, 16 lanes to a register. (Written as
/// loops over lanes, LLVM unrolls the rounds first and then leaves much of
/// them scalar.)
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::LANES;

    /// Registers of 16 lanes per lane array.
    const REGS: usize = LANES / 16;

    /// # Safety
    /// The CPU must have AVX-512F.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn threefry(x0: &mut [u32; LANES], x1: &mut [u32; LANES], k0: u32, k1: u32) {
        // Two registers per array: independent chains of operations that
        // the core overlaps.
        // SAFETY: each array holds 16 * REGS words.
        let load = |x: &[u32; LANES]| -> [__m512i; REGS] {
            std::array::from_fn(|r| unsafe { _mm512_loadu_si512(x[16 * r..].as_ptr().cast()) })
        };
        let (mut a, mut b) = (load(x0), load(x1));
        macro_rules! mix {
            ($($r:literal)*) => {$(
                for i in 0..REGS {
                    a[i] = _mm512_add_epi32(a[i], b[i]);
                    b[i] = _mm512_xor_si512(_mm512_rol_epi32::<$r>(b[i]), a[i]);
                }
            )*};
        }
        macro_rules! inject {
            ($p:expr, $q:expr) => {
                let (p, q) = (_mm512_set1_epi32($p as i32), _mm512_set1_epi32($q as i32));
                for i in 0..REGS {
                    a[i] = _mm512_add_epi32(a[i], p);
                    b[i] = _mm512_add_epi32(b[i], q);
                }
            };
        }
        let k2 = 0x1BD1_1BDA ^ k0 ^ k1;
        inject!(k0, k1);
        mix!(13 15 26 6);
        inject!(k1, k2.wrapping_add(1));
        mix!(17 29 16 24);
        inject!(k2, k0.wrapping_add(2));
        mix!(13 15 26 6);
        inject!(k0, k1.wrapping_add(3));
        mix!(17 29 16 24);
        inject!(k1, k2.wrapping_add(4));
        mix!(13 15 26 6);
        inject!(k2, k0.wrapping_add(5));
        for i in 0..REGS {
            // SAFETY: as above.
            unsafe {
                _mm512_storeu_si512(x0[16 * i..].as_mut_ptr().cast(), a[i]);
                _mm512_storeu_si512(x1[16 * i..].as_mut_ptr().cast(), b[i]);
            }
        }
    }

    /// The high and low words of each lane's 32x32-bit product `x * m`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn mul_hi_lo(x: __m512i, m: __m512i) -> (__m512i, __m512i) {
        // Even lanes' products, then odd lanes' (moved down).
        let even = _mm512_mul_epu32(x, m);
        let odd = _mm512_mul_epu32(_mm512_srli_epi64::<32>(x), m);
        let hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64::<32>(even), odd);
        let lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64::<32>(odd));
        (hi, lo)
    }

    /// # Safety
    /// The CPU must have AVX-512F.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn philox(x: &mut [[u32; LANES]; 4], mut k0: u32, mut k1: u32) {
        // SAFETY: each array holds 16 * REGS words.
        let mut v: [[__m512i; 4]; REGS] = std::array::from_fn(|r| {
            x.each_ref()
                .map(|w| unsafe { _mm512_loadu_si512(w[16 * r..].as_ptr().cast()) })
        });
        let m0 = _mm512_set1_epi32(0xD251_1F53_u32 as i32);
        let m1 = _mm512_set1_epi32(0xCD9E_8D57_u32 as i32);
        for _ in 0..10 {
            let key0 = _mm512_set1_epi32(k0 as i32);
            let key1 = _mm512_set1_epi32(k1 as i32);
            for [a, b, c, d] in v.iter_mut() {
                let (hi0, lo0) = mul_hi_lo(*a, m0);
                let (hi1, lo1) = mul_hi_lo(*c, m1);
                (*a, *b, *c, *d) = (
                    _mm512_xor_si512(_mm512_xor_si512(hi1, *b), key0),
                    lo1,
                    _mm512_xor_si512(_mm512_xor_si512(hi0, *d), key1),
                    lo0,
                );
            }
            k0 = k0.wrapping_add(0x9E37_79B9);
            k1 = k1.wrapping_add(0xBB67_AE85);
        }
        for (r, regs) in v.iter().enumerate() {
            for (w, reg) in x.iter_mut().zip(regs) {
                // SAFETY: as above.
                unsafe { _mm512_storeu_si512(w[16 * r..].as_mut_ptr().cast(), *reg) };
            }
        }
    }
}

/// Philox words for `out`, whose first element is block `first`'s first
/// word; blocks count from the 128-bit counter `start`. A block gives four
/// 32-bit words, or two 64-bit words for 64-bit types.
#[inline(always)]
fn philox_fill<T: Word, const V512: bool>(out: &mut [T], key: u64, start: u128, first: u64) {
    let per = if T::WIDE { 2 } else { 4 };
    for (g, group) in out.chunks_mut(per * LANES).enumerate() {
        let c0 = start.wrapping_add((first + (g * LANES) as u64) as u128);
        let (lo0, hi0) = (c0 as u64, (c0 >> 64) as u64);
        // Word `w` of lane `l`'s counter.
        let word_of = |w: usize, l: usize| {
            let lo = lo0.wrapping_add(l as u64);
            let hi = if lo < lo0 { hi0.wrapping_add(1) } else { hi0 };
            let c = [lo, hi][w / 2];
            (c >> (32 * (w % 2))) as u32
        };
        let mut x: [[u32; LANES]; 4] =
            std::array::from_fn(|w| std::array::from_fn(|l| word_of(w, l)));
        philox_lanes::<V512>(&mut x, key as u32, (key >> 32) as u32);
        let word = |e: usize| {
            let (l, w) = (e / per, e % per);
            T::from_word(if T::WIDE {
                x[2 * w][l] as u64 | (x[2 * w + 1][l] as u64) << 32
            } else {
                x[w][l] as u64
            })
        };
        match group.len() == per * LANES {
            // A whole group in order of lanes, then words: a fixed pattern
            // of shuffles.
            true => {
                for l in 0..LANES {
                    for w in 0..per {
                        group[l * per + w] = word(l * per + w);
                    }
                }
            }
            false => {
                for (e, o) in group.iter_mut().enumerate() {
                    *o = word(e);
                }
            }
        }
    }
}

/// ThreeFry 64-bit words for `out`, whose first element is counter block
/// `first` (one block, both halves, per element).
#[inline(always)]
fn threefry_wide_fill<T: Word, const V512: bool>(
    out: &mut [T],
    key: u64,
    counter: u64,
    first: u64,
) {
    for (g, group) in out.chunks_mut(LANES).enumerate() {
        let [y0, y1] = threefry_group::<V512>(key, counter, first + (g * LANES) as u64);
        for (l, o) in group.iter_mut().enumerate() {
            *o = T::from_word(y0[l] as u64 | (y1[l] as u64) << 32);
        }
    }
}

/// How ThreeFry lays out 32-bit words: one dimension of the output (`mid`
/// long, between `outer` and `inner` elements) is split in halves, and the
/// block of each element of the half-size shape gives the elements at `2h`
/// and `2h + 1` along it. In row-major order the blocks' pairs of rows are
/// consecutive runs of the output, so any run of rows is one slice.
#[derive(Clone, Copy)]
struct Halves {
    mid: usize,
    inner: usize,
    half: usize,
}

impl Halves {
    /// The interpreter's (XLA's) split dimension; a scalar is one block.
    fn of(dims: &[usize]) -> (usize, Halves) {
        let d = oxla_interp::threefry_split_dimension(dims);
        let mid = dims.get(d).copied().unwrap_or(1);
        let outer = dims.iter().take(d).product();
        let inner = dims.iter().skip(d + 1).product();
        let halves = Halves {
            mid,
            inner,
            half: mid.div_ceil(2),
        };
        (outer, halves)
    }

    /// The length of block rows `a` to `b` (pairs of output rows, but for
    /// the last row of an odd dimension, which is single).
    fn rows_len(&self, a: usize, b: usize) -> usize {
        let singles = if self.mid % 2 == 1 {
            b / self.half - a / self.half
        } else {
            0
        };
        (2 * (b - a) - singles) * self.inner
    }
}

/// ThreeFry on the blocks of counters `counter + j` on, one per lane.
#[inline(always)]
fn threefry_group<const V512: bool>(key: u64, counter: u64, j: u64) -> [[u32; LANES]; 2] {
    let (mut x0, mut x1) = ([0u32; LANES], [0u32; LANES]);
    let c0 = counter.wrapping_add(j);
    for l in 0..LANES {
        let c = c0.wrapping_add(l as u64);
        x0[l] = c as u32;
        x1[l] = (c >> 32) as u32;
    }
    threefry_lanes::<V512>(&mut x0, &mut x1, key as u32, (key >> 32) as u32);
    [x0, x1]
}

/// ThreeFry 32-bit words for `out`, block rows `first` on (see [`Halves`]).
#[inline(always)]
fn threefry_halves_fill<T: Word, const V512: bool>(
    out: &mut [T],
    key: u64,
    counter: u64,
    first: usize,
    h: Halves,
) {
    let inner = h.inner;
    let mut j = (first * inner) as u64;
    if inner == 1 && h.mid.is_multiple_of(2) {
        // Each block's two words are neighbours.
        for group in out.chunks_mut(2 * LANES) {
            let y = threefry_group::<V512>(key, counter, j);
            for (e, o) in group.iter_mut().enumerate() {
                *o = T::from_word(y[e % 2][e / 2] as u64);
            }
            j += LANES as u64;
        }
        return;
    }
    // Where block row `first + k` is along the split dimension, where it
    // starts in `out`, and the block being placed in it.
    let (mut at, mut base, mut i) = (first % h.half, 0, 0);
    while base < out.len() {
        let pair = 2 * at + 1 < h.mid;
        if inner.is_multiple_of(LANES) {
            // A group of lanes lies in one row: two runs of words.
            for i in (0..inner).step_by(LANES) {
                let [y0, y1] = threefry_group::<V512>(key, counter, j);
                j += LANES as u64;
                let runs = [(base + i, y0), (base + inner + i, y1)];
                for (at, y) in runs.into_iter().take(1 + pair as usize) {
                    if let Some(run) = out.get_mut(at..at + LANES) {
                        for (o, w) in run.iter_mut().zip(y) {
                            *o = T::from_word(w as u64);
                        }
                    }
                }
            }
        } else {
            let [y0, y1] = threefry_group::<V512>(key, counter, j);
            j += LANES as u64;
            for l in 0..LANES {
                let pair = 2 * at + 1 < h.mid;
                if let Some(o) = out.get_mut(base + i) {
                    *o = T::from_word(y0[l] as u64);
                }
                if pair && let Some(o) = out.get_mut(base + inner + i) {
                    *o = T::from_word(y1[l] as u64);
                }
                i += 1;
                if i == inner {
                    i = 0;
                    base += if pair { 2 * inner } else { inner };
                    at = if at + 1 == h.half { 0 } else { at + 1 };
                    if base >= out.len() {
                        break;
                    }
                }
            }
            continue;
        }
        base += if pair { 2 * inner } else { inner };
        at = if at + 1 == h.half { 0 } else { at + 1 };
    }
}

dispatched!(philox<T: Word> => philox_fill(out: &mut [T], key: u64, start: u128, first: u64));

/// The words of the `rng` stream keyed by `key` from the first word of
/// block `first` on (`oxla_interp::rng_stream_block`: the block number is
/// the counter's low 64 bits, under two fixed words).
pub(super) fn stream_words(out: &mut [u32], key: u64, first: u64) {
    const HIGH: u128 = (0x726e_6721_6f78_6c61u128) << 64;
    philox::<u32>(out, key, HIGH, first)
}
dispatched!(threefry_wide<T: Word> => threefry_wide_fill(out: &mut [T], key: u64, counter: u64, first: u64));
dispatched!(threefry_halves<T: Word> => threefry_halves_fill(out: &mut [T], key: u64, counter: u64, first: usize, h: Halves));

/// Runs `fill(piece, first)` over `out` cut into pieces of whole units,
/// in parallel when it is large; `first` is the piece's first unit, and
/// `len(a, b)` is the length of units `a` to `b`.
fn split<T: Send>(
    out: &mut [T],
    units: usize,
    len: impl Fn(usize, usize) -> usize,
    fill: impl Fn(&mut [T], usize) + Sync,
) {
    if out.len() < PARALLEL_MIN || units < 2 {
        return fill(out, 0);
    }
    let per_task = (TASK / len(0, 1).max(1)).max(1);
    let mut pieces = Vec::with_capacity(units.div_ceil(per_task));
    let mut rest = out;
    let mut u = 0;
    while u < units && !rest.is_empty() {
        let end = (u + per_task).min(units);
        let (piece, tail) = rest.split_at_mut(len(u, end).min(rest.len()));
        pieces.push((u, piece));
        rest = tail;
        u = end;
    }
    pieces.into_par_iter().for_each(|(u, piece)| fill(piece, u));
}

impl RngBitsKernel {
    /// The bits of this kernel's shape and the state after them.
    fn generate<T: Word>(&self, state: &mut [u64], pool: &Pool) -> Vec<T> {
        let dims: Vec<usize> = self.bits.dims().iter().map(|&d| d as usize).collect();
        // No bits, no counter moved. (Checked first: with a zero among
        // them, the other dimensions may multiply past `usize`.)
        if dims.contains(&0) {
            return Vec::new();
        }
        let n: usize = dims.iter().product();
        let mut out = pool.take::<T>(n);
        let key = state[0];
        match self.algorithm {
            Algorithm::ThreeFry => {
                let counter = state[1];
                if T::WIDE {
                    split(
                        &mut out,
                        n.div_ceil(LANES),
                        |a, b| (b - a) * LANES,
                        |piece, u| threefry_wide(piece, key, counter, (u * LANES) as u64),
                    );
                    state[1] = counter.wrapping_add(n as u64);
                } else {
                    let (outer, h) = Halves::of(&dims);
                    let rows = outer * h.half;
                    split(
                        &mut out,
                        rows,
                        |a, b| h.rows_len(a, b),
                        |piece, r| threefry_halves(piece, key, counter, r, h),
                    );
                    state[1] = counter.wrapping_add((rows * h.inner) as u64);
                }
            }
            Algorithm::Philox => {
                // A u64[2] state reuses the key word as the counter's high word.
                let (lo, hi) = if state.len() == 2 {
                    (state[1], state[0])
                } else {
                    (state[1], state[2])
                };
                let start = (hi as u128) << 64 | lo as u128;
                let per = if T::WIDE { 2 } else { 4 };
                let blocks = n.div_ceil(per);
                split(
                    &mut out,
                    blocks.div_ceil(LANES),
                    |a, b| (b - a) * per * LANES,
                    |piece, u| philox(piece, key, start, (u * LANES) as u64),
                );
                let end = start.wrapping_add(blocks as u128);
                state[1] = end as u64;
                if state.len() >= 3 {
                    state[2] = (end >> 64) as u64;
                }
            }
        }
        out
    }
}

impl Kernel for RngBitsKernel {
    fn name(&self) -> &'static str {
        "rng-bit-generator"
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        let state_in = inputs
            .first()
            .and_then(Value::array)
            .ok_or("rng-bit-generator reads an array")?;
        let Some(words) = state_in.as_slice::<u64>() else {
            return Err(format!(
                "rng-bit-generator: the state must be u64, got {}",
                state_in.shape()
            ));
        };
        if words.len() < 2 {
            return Err(match self.algorithm {
                Algorithm::ThreeFry => "rng_three_fry needs a u64[2] state",
                Algorithm::Philox => "rng_philox needs a u64[2] or u64[3] state",
            }
            .into());
        }
        let mut state = pool.take::<u64>(words.len());
        state.copy_from_slice(words);
        let ty = self.bits.element_type();
        let data = oxla_hlo::with_native_type!(ty, T => {
            generate_as::<T>(self, &mut state, pool)?
        });
        let state_shape = state_in.shape().clone();
        let state = ArrayLiteral::new(state_shape, u64::wrap(state)).map_err(|e| e.to_string())?;
        let bits = ArrayLiteral::new(self.bits.clone(), data).map_err(|e| e.to_string())?;
        Ok(Value::Tuple(
            vec![Value::owned(state), Value::owned(bits)].into(),
        ))
    }
}

/// [`RngBitsKernel::generate`] for the types it makes; the others (which
/// `plan` turns away) are an error.
fn generate_as<T: NativeType>(
    kernel: &RngBitsKernel,
    state: &mut [u64],
    pool: &Pool,
) -> Result<oxla_hlo::ArrayData, String> {
    macro_rules! typed {
        ($($t:ty),*) => {
            $(if T::TYPE == <$t>::TYPE {
                return Ok(<$t>::wrap(kernel.generate::<$t>(state, pool)));
            })*
        };
    }
    typed!(u8, u16, u32, u64, i8, i16, i32, i64, f32, f64);
    typed!(oxla_hlo::half::f16, oxla_hlo::half::bf16);
    Err(format!("rng-bit-generator cannot make {}", T::TYPE))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known answers from Random123's `kat_vectors` (the rounds XLA uses).
    #[test]
    fn both_generators_give_the_published_answers_on_every_path() {
        let threefry = [
            ([0, 0], [0, 0], [0x6b20_0159, 0x99ba_4efe]),
            ([!0, !0], [!0, !0], [0x1cb9_96fc, 0xbb00_2be7]),
            (
                [0x1319_8a2e, 0x0370_7344],
                [0x243f_6a88, 0x85a3_08d3],
                [0xc492_3a9c, 0x483d_f7a0],
            ),
        ];
        for (key, ctr, want) in threefry {
            for v512 in [false, true] {
                if v512 && !std::is_x86_feature_detected!("avx512f") {
                    continue;
                }
                let (mut x0, mut x1) = ([ctr[0]; LANES], [ctr[1]; LANES]);
                match v512 {
                    true => threefry_lanes::<true>(&mut x0, &mut x1, key[0], key[1]),
                    false => threefry_lanes::<false>(&mut x0, &mut x1, key[0], key[1]),
                }
                assert_eq!((x0, x1), ([want[0]; LANES], [want[1]; LANES]), "{v512}");
            }
        }
        let philox = [
            (
                [0, 0],
                [0; 4],
                [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8],
            ),
            (
                [!0, !0],
                [!0; 4],
                [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd],
            ),
            (
                [0xa409_3822, 0x299f_31d0],
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1],
            ),
        ];
        for (key, ctr, want) in philox {
            for v512 in [false, true] {
                if v512 && !std::is_x86_feature_detected!("avx512f") {
                    continue;
                }
                let mut x = ctr.map(|w| [w; LANES]);
                match v512 {
                    true => philox_lanes::<true>(&mut x, key[0], key[1]),
                    false => philox_lanes::<false>(&mut x, key[0], key[1]),
                }
                assert_eq!(x, want.map(|w| [w; LANES]), "{v512}");
            }
        }
    }

    /// The vector and portable loops agree lane by lane on varied input.
    #[test]
    fn vector_and_portable_lanes_agree() {
        if !std::is_x86_feature_detected!("avx512f") {
            return;
        }
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 32) as u32
        };
        for _ in 0..50 {
            let x: [[u32; LANES]; 4] = std::array::from_fn(|_| std::array::from_fn(|_| next()));
            let (k0, k1) = (next(), next());
            let (mut a, mut b) = (x, x);
            philox_lanes::<true>(&mut a, k0, k1);
            philox_lanes::<false>(&mut b, k0, k1);
            assert_eq!(a, b);
            let [mut p0, mut p1, _, _] = x;
            let [mut q0, mut q1, _, _] = x;
            threefry_lanes::<true>(&mut p0, &mut p1, k0, k1);
            threefry_lanes::<false>(&mut q0, &mut q1, k0, k1);
            assert_eq!((p0, p1), (q0, q1));
        }
    }
}
