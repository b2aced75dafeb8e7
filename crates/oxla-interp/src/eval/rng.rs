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
use oxla_hlo::{ArrayData, HloInstruction, Scalar, Shape};

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
/// consumed in evaluation order.
pub(crate) struct RngState {
    key: u64,
    counter: u64,
    buffer: [u32; 4],
    used: usize,
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
            self.buffer = philox4x32(
                [lo32(c), hi32(c), 0x6f78_6c61, 0x726e_6721],
                lo32(self.key),
                hi32(self.key),
            );
            self.counter = c.wrapping_add(1);
            self.used = 0;
        }
        self.used += 1;
        self.buffer[self.used - 1]
    }

    fn next_u64(&mut self) -> u64 {
        self.next_u32() as u64 | (self.next_u32() as u64) << 32
    }

    /// Uniform on [0, 1) with 53 random bits.
    fn unit_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
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
                    // Box-Muller in f64, rounded once to the element type.
                    let u1 = 1.0 - rng.unit_f64();
                    let u2 = rng.unit_f64();
                    let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                    let v = a.to_scalar().as_f64() + b.to_scalar().as_f64() * z;
                    element::convert(Elem::F64(v), ty)
                }
                RngDistribution::Uniform if ty.is_float() => {
                    let (lo, hi) = (a.to_scalar().as_f64(), b.to_scalar().as_f64());
                    let v = element::convert(Elem::F64(lo + (hi - lo) * rng.unit_f64()), ty);
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
                        lo + ((rng.next_u64() as u128 * range as u128) >> 64) as i128
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
