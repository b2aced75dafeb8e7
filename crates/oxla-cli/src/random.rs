//! Random arguments for a module run without inputs: deterministic for a
//! seed. Floats are uniform in [-1, 1), signed integers in [-8, 8), unsigned
//! integers in [0, 16), preds fair coins; complex parts like floats.

use oxla_hlo::literal::Scalar;
use oxla_hlo::{ArrayData, ArrayLiteral, ArrayShape, Literal, Shape};

/// SplitMix64: small, fast, and good enough for test inputs.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn random_array(shape: &ArrayShape, rng: &mut SplitMix) -> anyhow::Result<ArrayLiteral> {
    let ty = shape.element_type();
    let n = shape.element_count()?;
    // Written element by element into typed storage (a list of `Scalar`s
    // first would take eight times the array's memory for f32).
    let mut data = ArrayData::zeros(ty, n);
    for i in 0..n {
        let value = if ty.is_pred() {
            Scalar::Pred(rng.next() & 1 == 1)
        } else if ty.is_signed_int() {
            Scalar::Int((rng.next() % 16) as i128 - 8)
        } else if ty.is_unsigned_int() {
            Scalar::Int((rng.next() % 16) as i128)
        } else if ty.is_complex() {
            Scalar::Complex(rng.unit() * 2.0 - 1.0, rng.unit() * 2.0 - 1.0)
        } else {
            Scalar::Float(rng.unit() * 2.0 - 1.0)
        };
        data.set_scalar(i, value);
    }
    Ok(ArrayLiteral::new(shape.clone(), data)?)
}

/// One random value per parameter shape (tuples filled leaf by leaf).
pub fn arguments(shapes: &[Shape], seed: u64) -> anyhow::Result<Vec<Literal>> {
    let mut rng = SplitMix(seed);
    fn fill(shape: &Shape, rng: &mut SplitMix) -> anyhow::Result<Literal> {
        Ok(match shape {
            Shape::Array(a) => Literal::Array(random_array(a, rng)?),
            Shape::Tuple(t) => Literal::Tuple(
                t.iter()
                    .map(|s| fill(s, rng))
                    .collect::<anyhow::Result<_>>()?,
            ),
            Shape::Token => Literal::Token,
        })
    }
    shapes.iter().map(|s| fill(s, &mut rng)).collect()
}
