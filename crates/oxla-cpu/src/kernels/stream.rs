//! `rng` (uniform and normal distributions), drawn from the execution's
//! random stream: the interpreter session's, so interpreted and native
//! `rng`s share one stream and give the interpreter's values bit for bit.
//!
//! Each element takes a fixed number of the stream's words
//! (`oxla_interp::rng_words_per_element`), so element `i` reads the words
//! from `p0 + i * per` on, where `p0` is the stream's position when the
//! instruction runs. Pieces of the output are therefore computed in
//! parallel, each generating the Philox blocks its words sit in (32 at a
//! time, through `random.rs`), and the stream is moved past all of them at
//! the end. The words become values through the interpreter's own
//! functions (`oxla_interp::rng_uniform_f64` and the others), and then the
//! element type through `NativeType::from_scalar`, as the interpreter's
//! conversion does (f16 and bf16 through f32, as XLA converts f64).

use oxla_hlo::half::{bf16, f16};
use oxla_hlo::ir::RngDistribution;
use oxla_hlo::{
    ArrayData, ArrayLiteral, ArrayShape, HloInstruction, NativeType, PrimitiveType, Scalar,
};
use oxla_interp::Session;
use rayon::prelude::*;

use super::fused::PARALLEL_MIN;
use super::random::stream_words;
use crate::buffer::Pool;
use crate::value::Value;

/// Elements per parallel task.
const TASK: usize = 1 << 13;

pub(crate) struct RngKernel {
    distribution: RngDistribution,
    out: ArrayShape,
}

/// An `rng` the kernel makes: uniform floats, integers and predicates,
/// normal floats (the interpreter's cases; complex is an error there).
pub(crate) fn plan(instr: &HloInstruction) -> Option<RngKernel> {
    use PrimitiveType::*;
    let out = instr.shape.as_array()?.clone();
    let distribution = instr.attrs.rng_distribution?;
    let ty = out.element_type();
    let float = matches!(ty, F16 | BF16 | F32 | F64);
    let made = match distribution {
        RngDistribution::Normal => float,
        RngDistribution::Uniform => float || ty.is_integral() || ty == Pred,
    };
    (made && instr.operands.len() == 2).then_some(RngKernel { distribution, out })
}

/// `v` in `T` as the interpreter converts an f64 to it.
#[inline(always)]
fn from_f64<T: NativeType>(v: f64) -> T {
    match T::TYPE {
        PrimitiveType::F16 | PrimitiveType::BF16 => {
            T::from_scalar(Scalar::Float(f32::from_scalar(Scalar::Float(v)) as f64))
        }
        _ => T::from_scalar(Scalar::Float(v)),
    }
}

impl RngKernel {
    pub(crate) fn name(&self) -> &'static str {
        "rng"
    }

    /// The `rng`'s array, its words taken from `session`'s stream, which
    /// moves past them.
    pub(crate) fn run<'a>(
        &self,
        inputs: &[Value<'a>],
        pool: &Pool,
        session: &mut Session<'_>,
    ) -> Result<Value<'a>, String> {
        let bound = |i: usize| {
            inputs
                .get(i)
                .and_then(Value::array)
                .filter(|a| a.element_count() == 1 && a.element_type() == self.out.element_type())
                .map(|a| a.data())
                .ok_or_else(|| format!("rng reads two {} scalars", self.out.element_type()))
        };
        let (a, b) = (bound(0)?, bound(1)?);
        let n = self.out.element_count().map_err(|e| e.to_string())?;
        let per = oxla_interp::rng_words_per_element(
            self.distribution,
            self.out.element_type(),
            a.scalar(0),
            b.scalar(0),
        );
        let (key, p0) = session.rng_position();
        macro_rules! typed {
            ($($v:ident: $t:ty),*) => {
                match (a, b) {
                    $((ArrayData::$v(a), ArrayData::$v(b)) => {
                        <$t>::wrap(self.generate::<$t>(a[0], b[0], n, per, key, p0, pool))
                    })*
                    _ => return Err("rng reads its bounds in its element type".into()),
                }
            };
        }
        let data = typed!(
            Pred: bool, S8: i8, S16: i16, S32: i32, S64: i64, U8: u8, U16: u16, U32: u32,
            U64: u64, F16: f16, BF16: bf16, F32: f32, F64: f64
        );
        session.seek_rng(p0 + (per as u128) * (n as u128));
        Ok(Value::owned(
            ArrayLiteral::new(self.out.clone(), data).map_err(|e| e.to_string())?,
        ))
    }

    /// `n` elements in `T` from bounds `a` and `b`, element `i` from the
    /// `per` words at stream position `p0 + i * per` (key `key`).
    fn generate<T: NativeType>(
        &self,
        a: T,
        b: T,
        n: usize,
        per: usize,
        key: u64,
        p0: u128,
        pool: &Pool,
    ) -> Vec<T> {
        let mut out = pool.take::<T>(n);
        let (sa, sb) = (a.to_scalar(), b.to_scalar());
        match self.distribution {
            RngDistribution::Normal => {
                let (mean, sd) = (sa.as_f64(), sb.as_f64());
                fill(&mut out, per, key, p0, |w| {
                    from_f64(oxla_interp::rng_normal_f64(
                        mean,
                        sd,
                        [w[0], w[1], w[2], w[3]],
                    ))
                });
            }
            RngDistribution::Uniform if T::TYPE.is_float() => {
                let (lo, hi) = (sa.as_f64(), sb.as_f64());
                fill(&mut out, per, key, p0, |w| {
                    let v: T = from_f64(oxla_interp::rng_uniform_f64(lo, hi, [w[0], w[1]]));
                    // Rounding may land on `hi`; the interval stays half-open.
                    if hi > lo && v.to_scalar().as_f64() >= hi {
                        a
                    } else {
                        v
                    }
                });
            }
            RngDistribution::Uniform => {
                let (lo, hi) = (sa.as_i128(), sb.as_i128());
                if per == 0 {
                    // An empty range: every element is its low end.
                    out.fill(T::from_scalar(Scalar::Int(lo)));
                } else {
                    fill(&mut out, per, key, p0, |w| {
                        let v = oxla_interp::rng_uniform_int(lo, hi - lo, [w[0], w[1]]);
                        T::from_scalar(Scalar::Int(v))
                    });
                }
            }
        }
        out
    }
}

/// `out[i] = value(words of element i)`, each element `per` words (at
/// least one) of the stream keyed by `key` from position `p0 + i * per`;
/// pieces of `TASK` elements in parallel when the output is large enough
/// for the execution to run in the pool (see `has_parallel_work`).
fn fill<T: Send>(
    out: &mut [T],
    per: usize,
    key: u64,
    p0: u128,
    value: impl Fn(&[u32]) -> T + Sync,
) {
    let piece = |(t, part): (usize, &mut [T])| {
        let start = p0 + (t * TASK * per) as u128;
        let skip = (start % 4) as usize;
        let mut words = vec![0u32; skip + part.len() * per];
        // The block number wraps as the interpreter's counter does.
        stream_words(&mut words, key, (start / 4) as u64);
        for (o, w) in part.iter_mut().zip(words[skip..].chunks_exact(per)) {
            *o = value(w);
        }
    };
    if out.len() >= PARALLEL_MIN {
        out.par_chunks_mut(TASK).enumerate().for_each(piece);
    } else {
        out.chunks_mut(TASK).enumerate().for_each(piece);
    }
}
