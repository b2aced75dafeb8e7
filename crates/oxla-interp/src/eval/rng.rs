//! Random numbers. `rng-bit-generator` is bit-exact with XLA:CPU for
//! `rng_three_fry` and `rng_philox` (`rng_default` is Philox there): the
//! algorithms below follow XLA's `RngBitGeneratorExpander`, as modelled and
//! verified in the project's op-semantics notes.
//!
//! `rng` (uniform and normal distributions) is implementation-defined in XLA;
//! oxla draws from a Philox stream keyed by [`crate::EvalOptions::seed`], so a
//! given module, arguments and seed always give the same values (they differ
//! from XLA's).

use oxla_hlo::ir::{RngAlgorithm, RngDistribution};
use oxla_hlo::{ArrayData, HloInstruction, PrimitiveType, Scalar, Shape};

use super::convert::from_bytes;
use super::{attr, result_array};
use crate::element::{self, Elem};
use crate::error::{OpResult, fail};
use crate::index::{Counter, dims_usize, element_count, linear, strides};
use crate::interpreter::Interpreter;
use crate::value::{Value, make_array};

/// Philox-4x32 with 10 rounds.
fn philox4x32(mut x: [u32; 4], mut k0: u32, mut k1: u32) -> [u32; 4] {
    for _ in 0..10 {
        let p0 = x[0] as u64 * 0xD251_1F53;
        let p1 = x[2] as u64 * 0xCD9E_8D57;
        x = [
            ((p1 >> 32) as u32) ^ x[1] ^ k0,
            p1 as u32,
            ((p0 >> 32) as u32) ^ x[3] ^ k1,
            p0 as u32,
        ];
        k0 = k0.wrapping_add(0x9E37_79B9);
        k1 = k1.wrapping_add(0xBB67_AE85);
    }
    x
}

/// Threefry-2x32 with 20 rounds.
fn threefry2x32(x0: u32, x1: u32, k0: u32, k1: u32) -> (u32, u32) {
    const ROTATIONS: [u32; 8] = [13, 15, 26, 6, 17, 29, 16, 24];
    let ks = [k0, k1, 0x1BD1_1BDA ^ k0 ^ k1];
    let (mut x0, mut x1) = (x0.wrapping_add(k0), x1.wrapping_add(k1));
    for block in 0..5usize {
        let rots = if block % 2 == 0 {
            &ROTATIONS[..4]
        } else {
            &ROTATIONS[4..]
        };
        for &r in rots {
            x0 = x0.wrapping_add(x1);
            x1 = x1.rotate_left(r);
            x1 ^= x0;
        }
        x0 = x0.wrapping_add(ks[(block + 1) % 3]);
        x1 = x1
            .wrapping_add(ks[(block + 2) % 3])
            .wrapping_add(block as u32 + 1);
    }
    (x0, x1)
}

fn lo32(v: u64) -> u32 {
    v as u32
}

fn hi32(v: u64) -> u32 {
    (v >> 32) as u32
}

/// The dimension ThreeFry's 32-bit output splits in two halves, whose
/// elements come from the two words of one block: the first even-sized
/// dimension, else the largest (the first of equals); 0 for a scalar.
pub fn threefry_split_dimension(dims: &[usize]) -> usize {
    dims.iter().position(|&s| s % 2 == 0).unwrap_or_else(|| {
        let mut best = 0;
        for (i, &s) in dims.iter().enumerate() {
            if s > dims[best] {
                best = i;
            }
        }
        best
    })
}

/// ThreeFry output words (64-bit values, or 32-bit words in the low half)
/// for `dims`, and the new counter.
fn threefry_words(key: u64, counter: u64, dims: &[usize], wide: bool) -> (Vec<u64>, u64) {
    let (k0, k1) = (lo32(key), hi32(key));
    let n = element_count(dims);
    let block = |j: u64| {
        let v = counter.wrapping_add(j);
        threefry2x32(lo32(v), hi32(v), k0, k1)
    };
    if wide {
        let words = (0..n as u64)
            .map(|i| {
                let (y0, y1) = block(i);
                y0 as u64 | (y1 as u64) << 32
            })
            .collect();
        return (words, counter.wrapping_add(n as u64));
    }
    if dims.is_empty() {
        return (vec![block(0).0 as u64], counter.wrapping_add(1));
    }
    // Half-index h along the split dimension yields the elements at 2*h and
    // 2*h + 1 along it.
    let d = threefry_split_dimension(dims);
    let mut half = dims.to_vec();
    half[d] = dims[d].div_ceil(2);
    let half_count = element_count(&half);
    let st = strides(dims);
    let mut words = vec![0u64; n];
    let mut c = Counter::new(&half);
    let mut j = 0u64;
    let mut pos = vec![0usize; dims.len()];
    while !c.done() {
        let (y0, y1) = block(j);
        for (t, y) in [(0, y0), (1, y1)] {
            pos.copy_from_slice(c.index());
            pos[d] = 2 * pos[d] + t;
            if pos[d] < dims[d] {
                words[linear(&pos, &st)] = y as u64;
            }
        }
        j += 1;
        c.advance();
    }
    (words, counter.wrapping_add(half_count as u64))
}

/// Philox output words for `n` elements from the 128-bit counter (lo, hi),
/// and the new counter.
fn philox_words(key: u64, lo: u64, hi: u64, n: usize, wide: bool) -> (Vec<u64>, (u64, u64)) {
    let (k0, k1) = (lo32(key), hi32(key));
    let per_block = if wide { 2 } else { 4 };
    let blocks = n.div_ceil(per_block) as u64;
    let mut words = Vec::with_capacity(n);
    for j in 0..blocks {
        let l = lo.wrapping_add(j);
        let h = if l < lo { hi.wrapping_add(1) } else { hi };
        let y = philox4x32([lo32(l), hi32(l), lo32(h), hi32(h)], k0, k1);
        if wide {
            words.push(y[0] as u64 | (y[1] as u64) << 32);
            words.push(y[2] as u64 | (y[3] as u64) << 32);
        } else {
            words.extend(y.iter().map(|&w| w as u64));
        }
    }
    words.truncate(n);
    let new_lo = lo.wrapping_add(blocks);
    let new_hi = if new_lo < lo { hi.wrapping_add(1) } else { hi };
    (words, (new_lo, new_hi))
}

/// `rng-bit-generator(state)`: returns `(new state, random bits)`.
pub(crate) fn rng_bit_generator(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let state_array = operands[0].as_array()?;
    let Some(state) = state_array.as_slice::<u64>() else {
        return fail(format!(
            "the state must be u64, got {}",
            state_array.shape()
        ));
    };
    let bits_shape = match &instr.shape {
        Shape::Tuple(t) if t.len() == 2 => match &t[1] {
            Shape::Array(a) => a,
            other => return fail(format!("the bits must be an array, got {other}")),
        },
        other => {
            return fail(format!(
                "the result must be a (state, bits) tuple, got {other}"
            ));
        }
    };
    let ty = bits_shape.element_type();
    let width = ty.bit_width();
    if ty.is_complex() || ty.is_pred() {
        return fail(format!("cannot generate random bits of type {ty}"));
    }
    let wide = width == 64;
    let dims = dims_usize(bits_shape.dims());
    let n = element_count(&dims);
    let algorithm = instr.attrs.rng_algorithm.unwrap_or(RngAlgorithm::Default);
    let mut new_state = state.to_vec();
    let words = match algorithm {
        RngAlgorithm::ThreeFry => {
            if state.len() < 2 {
                return fail("rng_three_fry needs a u64[2] state");
            }
            let (words, counter) = threefry_words(state[0], state[1], &dims, wide);
            new_state[1] = counter;
            words
        }
        RngAlgorithm::Philox | RngAlgorithm::Default => {
            // A u64[2] state reuses the key word as the counter's high word.
            let (lo, hi) = match state.len() {
                2 => (state[1], state[0]),
                l if l >= 3 => (state[1], state[2]),
                _ => return fail("rng_philox needs a u64[2] or u64[3] state"),
            };
            let (words, (new_lo, new_hi)) = philox_words(state[0], lo, hi, n, wide);
            new_state[1] = new_lo;
            if state.len() >= 3 {
                new_state[2] = new_hi;
            }
            words
        }
    };
    // Narrow types keep the low bits of each 32-bit word.
    let bytes_per = width / 8;
    let mut bytes = Vec::with_capacity(n * bytes_per);
    for w in words {
        bytes.extend_from_slice(&w.to_le_bytes()[..bytes_per]);
    }
    let bits = make_array(bits_shape, from_bytes(ty, &bytes))?;
    let state_out = make_array(state_array.shape(), ArrayData::U64(new_state))?;
    Ok(Value::tuple(vec![
        Value::array(state_out),
        Value::array(bits),
    ]))
}

/// The stream behind `rng`: Philox blocks keyed by the evaluation's seed,
/// consumed in evaluation order, word after word. Word `p` of the stream
/// is word `p % 4` of block `p / 4` ([`rng_stream_block`]); each element
/// an `rng` instruction makes takes the next [`rng_words_per_element`]
/// words, so a backend can compute any element from the stream's position
/// alone.
pub(crate) struct RngState {
    key: u64,
    counter: u64,
    buffer: [u32; 4],
    used: usize,
}

/// Block `counter` of the `rng` stream keyed by `key`.
pub fn rng_stream_block(key: u64, counter: u64) -> [u32; 4] {
    philox4x32(
        [lo32(counter), hi32(counter), 0x6f78_6c61, 0x726e_6721],
        lo32(key),
        hi32(key),
    )
}

/// How many words of the stream each element of an `rng` of `distribution`
/// into `ty` takes, with bounds `(a, b)` (an integer range with no values
/// takes none: every element is `a`).
pub fn rng_words_per_element(
    distribution: RngDistribution,
    ty: PrimitiveType,
    a: Scalar,
    b: Scalar,
) -> usize {
    match distribution {
        RngDistribution::Normal => 4,
        RngDistribution::Uniform if ty.is_float() => 2,
        RngDistribution::Uniform => {
            if b.as_i128() > a.as_i128() {
                2
            } else {
                0
            }
        }
    }
}

/// A 64-bit draw from two consecutive words, the first the low half.
fn draw_u64(w0: u32, w1: u32) -> u64 {
    w0 as u64 | (w1 as u64) << 32
}

/// Uniform on [0, 1) with 53 random bits, from two words.
pub fn rng_unit(w0: u32, w1: u32) -> f64 {
    (draw_u64(w0, w1) >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// `rng`'s uniform float before rounding to the element type: `lo + (hi -
/// lo) * u`, all in f64.
pub fn rng_uniform_f64(lo: f64, hi: f64, w: [u32; 2]) -> f64 {
    lo + (hi - lo) * rng_unit(w[0], w[1])
}

/// `rng`'s normal float before rounding to the element type: Box-Muller in
/// f64, `mean + sd * z`.
pub fn rng_normal_f64(mean: f64, sd: f64, w: [u32; 4]) -> f64 {
    let u1 = 1.0 - rng_unit(w[0], w[1]);
    let u2 = rng_unit(w[2], w[3]);
    let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
    mean + sd * z
}

/// `rng`'s uniform integer in `[lo, lo + range)`, `range` positive.
pub fn rng_uniform_int(lo: i128, range: i128, w: [u32; 2]) -> i128 {
    lo + ((draw_u64(w[0], w[1]) as u128 * range as u128) >> 64) as i128
}

impl RngState {
    pub(crate) fn new(seed: u64) -> RngState {
        RngState {
            key: seed,
            counter: 0,
            buffer: [0; 4],
            used: 4,
        }
    }

    fn next_u32(&mut self) -> u32 {
        if self.used == 4 {
            let c = self.counter;
            self.buffer = rng_stream_block(self.key, c);
            self.counter = c.wrapping_add(1);
            self.used = 0;
        }
        self.used += 1;
        self.buffer[self.used - 1]
    }

    fn next<const N: usize>(&mut self) -> [u32; N] {
        std::array::from_fn(|_| self.next_u32())
    }

    /// The key, and the index of the next word.
    pub(crate) fn position(&self) -> (u64, u128) {
        // `used` is 4 before the first block (counter 0) and after a
        // block is used up, so this never goes below zero.
        (self.key, (self.counter as u128 * 4 + self.used as u128) - 4)
    }

    /// Moves the stream to word `p`.
    pub(crate) fn seek(&mut self, p: u128) {
        let block = (p / 4) as u64;
        match (p % 4) as usize {
            0 => {
                self.counter = block;
                self.used = 4;
            }
            used => {
                self.buffer = rng_stream_block(self.key, block);
                self.counter = block.wrapping_add(1);
                self.used = used;
            }
        }
    }
}

impl Interpreter<'_> {
    /// `rng(a, b), distribution=...`: uniform on `[a, b)` (floats and
    /// integers), or normal with mean `a` and standard deviation `b`.
    pub(crate) fn rng(&mut self, instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
        let out = result_array(instr)?;
        let (a, b) = (operands[0].as_elem()?, operands[1].as_elem()?);
        let distribution = *attr(&instr.attrs.rng_distribution, "distribution")?;
        let ty = out.element_type();
        let n = out.element_count()?;
        let mut data = ArrayData::zeros(ty, n);
        let rng = &mut self.rng;
        for i in 0..n {
            let e = match distribution {
                RngDistribution::Normal => {
                    if !ty.is_float() {
                        return fail(format!("rng_normal does not support {ty}"));
                    }
                    let (mean, sd) = (a.to_scalar().as_f64(), b.to_scalar().as_f64());
                    element::convert(Elem::F64(rng_normal_f64(mean, sd, rng.next())), ty)
                }
                RngDistribution::Uniform if ty.is_float() => {
                    let (lo, hi) = (a.to_scalar().as_f64(), b.to_scalar().as_f64());
                    let v = element::convert(Elem::F64(rng_uniform_f64(lo, hi, rng.next())), ty);
                    // Rounding may land on `hi`; keep the interval half-open.
                    if hi > lo && v.to_scalar().as_f64() >= hi {
                        a
                    } else {
                        v
                    }
                }
                RngDistribution::Uniform if ty.is_integral() || ty.is_pred() => {
                    let (lo, hi) = (a.as_index(), b.as_index());
                    let range = hi - lo;
                    let v = if range <= 0 {
                        lo
                    } else {
                        rng_uniform_int(lo, range, rng.next())
                    };
                    Elem::from_scalar(ty, Scalar::Int(v))
                }
                RngDistribution::Uniform => {
                    return fail(format!("rng_uniform does not support {ty}"));
                }
            };
            e.write(&mut data, i);
        }
        Ok(Value::array(make_array(out, data)?))
    }
}

#[cfg(test)]
mod tests {
    use super::RngState;

    /// Seeking to any word gives the words drawing up to it would have
    /// left next, and the position counts the words drawn.
    #[test]
    fn seeking_gives_the_words_drawing_would() {
        let mut drawn = RngState::new(42);
        let words: Vec<u32> = (0..13).map(|_| drawn.next_u32()).collect();
        assert_eq!(drawn.position(), (42, 13));
        for p in 0..13 {
            let mut s = RngState::new(42);
            s.seek(p as u128);
            assert_eq!(s.position(), (42, p as u128));
            let rest: Vec<u32> = (p..13).map(|_| s.next_u32()).collect();
            assert_eq!(rest, words[p..]);
        }
        // Words differ from block to block and key to key.
        assert_ne!(words[0..4], words[4..8]);
        let mut other = RngState::new(43);
        assert_ne!(other.next_u32(), words[0]);
    }
}
