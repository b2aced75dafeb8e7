//! `fft` (FFT, IFFT, RFFT, IRFFT over the trailing `fft_length`
//! dimensions) through `rustfft` (and `realfft` for RFFT's real axis,
//! which transforms `n` real points as `n / 2` complex ones), in the
//! precision of the values ([`Precision`]): f32 for c64 and f32, as XLA's
//! CPU backend transforms them, and f64 for c128 and f64. The
//! interpreter's definition is the exact DFT (which it sums directly, in
//! f64); an O(n log n) transform in f32 is within a few `log2 n` f32
//! roundings of it relative to the transform's largest value (not to each
//! bin: a bin near 0 has the absolute error of the large ones), as XLA's
//! own f32 transform is. The axes are transformed one after
//! another, as the interpreter does: every line along an axis is gathered,
//! transformed and put back, lines split across the pool when there are
//! many. Inverse transforms scale by 1/n per axis; IRFFT completes the
//! last axis's spectrum by Hermitian symmetry (ignoring the imaginary
//! parts of the DC and Nyquist bins) and keeps the real part.

use std::sync::Arc;

use oxla_hlo::ir::FftType;
use oxla_hlo::num_complex::{Complex, Complex32, Complex64};
use oxla_hlo::{ArrayData, ArrayLiteral, ArrayShape, HloComputation, HloInstruction};
use rayon::prelude::*;
use realfft::{RealFftPlanner, RealToComplex};
use rustfft::{Fft, FftDirection, FftPlanner};

use super::Kernel;
use super::fused::PARALLEL_MIN;

/// Points (of the operand, or of IRFFT's full spectra) from which lines are
/// transformed across the pool: a transform does about `5 log2 n` flops a
/// point, so far fewer points than an element-wise loop's are worth a split.
pub(crate) const FFT_PARALLEL_MIN: usize = PARALLEL_MIN / 8;
use crate::buffer::Pool;
use crate::value::Value;

/// The floating-point type a transform computes in.
pub(crate) trait Precision: rustfft::FftNum {
    fn of_f32(v: f32) -> Self;
    fn of_f64(v: f64) -> Self;
    fn to_f32(self) -> f32;
    fn to_f64(self) -> f64;
    /// `abs` of each of `line` rounded to c64, into `out`: the f32 values
    /// `abs` of the c64 transform gives.
    fn abs_c64(line: &[Complex<Self>], out: &mut [f32]);
}

impl Precision for f32 {
    fn of_f32(v: f32) -> f32 {
        v
    }
    fn of_f64(v: f64) -> f32 {
        v as f32
    }
    fn to_f32(self) -> f32 {
        self
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn abs_c64(line: &[Complex32], out: &mut [f32]) {
        super::typed::abs_c64_into(line, out);
    }
}

impl Precision for f64 {
    fn of_f32(v: f32) -> f64 {
        v as f64
    }
    fn of_f64(v: f64) -> f64 {
        v
    }
    fn to_f32(self) -> f32 {
        self as f32
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn abs_c64(line: &[Complex64], out: &mut [f32]) {
        let rounded: Vec<Complex32> = line
            .iter()
            .map(|c| Complex32::new(c.re as f32, c.im as f32))
            .collect();
        super::typed::abs_c64_into(&rounded, out);
    }
}

pub(crate) struct FftKernel<T: Precision> {
    kind: FftType,
    in_dims: Vec<usize>,
    out: ArrayShape,
    /// The transformed (trailing) dimensions.
    axes: Vec<usize>,
    /// The transform of each complex axis (all of `axes`, but RFFT's and
    /// IRFFT's last), planned once: planning costs more than transforming
    /// a few thousand points.
    plans: Vec<Arc<dyn Fft<T>>>,
    /// RFFT's transform of its last axis, real to complex.
    real: Option<RealPlan<T>>,
    /// IRFFT's inverse transform of the last axis's full length.
    last: Option<Arc<dyn Fft<T>>>,
    /// A one-axis RFFT to c64 whose only user is `abs`: the kernel gives
    /// the f32 absolute values (`out` is their shape), each line's taken
    /// while its spectrum is in cache ([`plan_abs`]).
    abs: bool,
}

/// The kernel of `fft` instruction `instr`, in f64 if its operand or
/// result is of double precision, else in f32.
pub(crate) fn plan(comp: &HloComputation, instr: &HloInstruction) -> Option<Box<dyn Kernel>> {
    use oxla_hlo::PrimitiveType::{C128, F64};
    let x = comp
        .instruction(*instr.operands.first()?)
        .shape
        .as_array()?;
    let out = instr.shape.as_array()?;
    let double = [x.element_type(), out.element_type()]
        .iter()
        .any(|t| matches!(t, C128 | F64));
    match double {
        true => Some(Box::new(plan_in::<f64>(x, out, instr)?)),
        false => Some(Box::new(plan_in::<f32>(x, out, instr)?)),
    }
}

fn plan_in<T: Precision>(
    x: &ArrayShape,
    out: &ArrayShape,
    instr: &HloInstruction,
) -> Option<FftKernel<T>> {
    let out = out.clone();
    let kind = instr.attrs.fft_type?;
    let k = instr.attrs.fft_length.as_ref()?.len();
    let in_dims = x.dims_usize();
    let rank = in_dims.len();
    let out_dims = out.dims_usize();
    let fits = match kind {
        FftType::Fft | FftType::Ifft => out_dims == in_dims,
        FftType::Rfft => {
            out_dims[..rank - k.min(rank)] == in_dims[..rank - k.min(rank)]
                && *out_dims.last()? == in_dims.last()? / 2 + 1
        }
        FftType::Irfft => {
            in_dims[..rank.saturating_sub(1)] == out_dims[..rank.saturating_sub(1)]
                && out_dims.last()? / 2 + 1 == *in_dims.last()?
        }
    };
    if !(k >= 1 && k <= rank && out_dims.len() == rank && fits) {
        return None;
    }
    let axes: Vec<usize> = (rank - k..rank).collect();
    let inverse = matches!(kind, FftType::Ifft | FftType::Irfft);
    let direction = match inverse {
        true => FftDirection::Inverse,
        false => FftDirection::Forward,
    };
    let complex_axes = match kind {
        FftType::Rfft | FftType::Irfft => &axes[..axes.len() - 1],
        _ => &axes[..],
    };
    let mut planner = FftPlanner::<T>::new();
    let real = (kind == FftType::Rfft && in_dims[rank - 1] > 0)
        .then(|| RealPlan::new(in_dims[rank - 1], &mut planner));
    let plans = complex_axes
        .iter()
        .map(|&a| planner.plan_fft(in_dims[a], direction))
        .collect();
    let last = matches!(kind, FftType::Irfft)
        .then(|| planner.plan_fft(out_dims[rank - 1], FftDirection::Inverse));
    Some(FftKernel {
        kind,
        in_dims,
        out,
        axes,
        plans,
        real,
        last,
        abs: false,
    })
}

/// The kernel of `abs(fft)`, where `fft` is a one-axis RFFT of f32 values
/// to c64 and `abs` (of shape `out`) its only user: one kernel that takes
/// each line's absolute values right after its transform, instead of a
/// pass over the whole c64 spectrum after all of them.
pub(crate) fn plan_abs(
    comp: &HloComputation,
    fft: &HloInstruction,
    out: &ArrayShape,
) -> Option<Box<dyn Kernel>> {
    use oxla_hlo::PrimitiveType::{C64, F32};
    let x = comp.instruction(*fft.operands.first()?).shape.as_array()?;
    let spectrum = fft.shape.as_array()?;
    let one_axis = fft.attrs.fft_length.as_ref()?.len() == 1;
    if fft.attrs.fft_type? != FftType::Rfft
        || !one_axis
        || x.element_type() != F32
        || spectrum.element_type() != C64
        || out.element_type() != F32
        || out.dims() != spectrum.dims()
    {
        return None;
    }
    let mut kernel = plan_in::<f32>(x, out, fft)?;
    kernel.abs = true;
    Some(Box::new(kernel))
}

/// A real-to-complex transform of `n` points. An even `n` is a complex
/// transform of `n / 2` points `z[m] = x[2m] + i x[2m+1]`, then a split
/// ([`split_real`]) that runs in vector registers; an odd one is
/// `realfft`'s.
enum RealPlan<T: Precision> {
    Even {
        half: Arc<dyn Fft<T>>,
        /// `exp(-2 pi i k / n)` for `k` below `n / 2`.
        twiddles: Vec<Complex<T>>,
    },
    Odd(Arc<dyn RealToComplex<T>>),
}

impl<T: Precision> RealPlan<T> {
    fn new(n: usize, planner: &mut FftPlanner<T>) -> RealPlan<T> {
        if n % 2 == 1 {
            return RealPlan::Odd(RealFftPlanner::<T>::new().plan_fft_forward(n));
        }
        let twiddles = (0..n / 2)
            .map(|k| {
                let (sin, cos) = (-2.0 * std::f64::consts::PI * k as f64 / n as f64).sin_cos();
                Complex::new(T::of_f64(cos), T::of_f64(sin))
            })
            .collect();
        RealPlan::Even {
            half: planner.plan_fft_forward(n / 2),
            twiddles,
        }
    }

    /// The number of real points.
    fn len(&self) -> usize {
        match self {
            RealPlan::Even { twiddles, .. } => 2 * twiddles.len(),
            RealPlan::Odd(r) => r.len(),
        }
    }

    fn scratch_len(&self) -> usize {
        match self {
            RealPlan::Even { half, .. } => half.get_inplace_scratch_len(),
            RealPlan::Odd(r) => r.get_scratch_len(),
        }
    }

    /// The `n / 2 + 1` frequencies of the `n` points `x` (which it may
    /// overwrite) into `out`, with `scratch` of [`RealPlan::scratch_len`]
    /// values and `rev` of `n / 2`.
    fn process(
        &self,
        x: &mut [T],
        out: &mut [Complex<T>],
        scratch: &mut [Complex<T>],
        rev: &mut [Complex<T>],
    ) -> Result<(), String> {
        let (half, twiddles) = match self {
            RealPlan::Odd(r) => {
                return r
                    .process_with_scratch(x, out, scratch)
                    .map_err(|e| format!("rfft: {e}"));
            }
            RealPlan::Even { half, twiddles } => (half, twiddles),
        };
        let h = twiddles.len();
        if x.len() != 2 * h || out.len() != h + 1 || rev.len() != h {
            return Err(format!(
                "an rfft of {} points cannot take {}",
                2 * h,
                x.len()
            ));
        }
        for (z, pair) in out.iter_mut().zip(x.chunks_exact(2)) {
            *z = Complex::new(pair[0], pair[1]);
        }
        half.process_with_scratch(&mut out[..h], scratch);
        split(out, twiddles, rev);
        Ok(())
    }
}

dispatched!(split<T: Precision> => split_real(out: &mut [Complex<T>], twiddles: &[Complex<T>], rev: &mut [Complex<T>]));

/// The frequencies `X[k]` of `n = 2h` real points from the transform
/// `z = out[..h]` of their pairs (see [`RealPlan`]), in place into
/// `out[..=h]`: with `a = z[k]` and `b = conj(z[(h - k) % h])`, the
/// transforms of the even and odd points are `e = (a + b) / 2` and
/// `o = (a - b) / 2i`, and `X[k] = e + w^k o = e - i w^k (a - b) / 2`;
/// `X[h] = re z[0] - im z[0]`. `rev` holds the `b`s, so the loop reads
/// forward and vectorises.
#[inline(always)]
fn split_real<T: Precision, const WIDE: bool>(
    out: &mut [Complex<T>],
    twiddles: &[Complex<T>],
    rev: &mut [Complex<T>],
) {
    let h = twiddles.len();
    if out.len() != h + 1 || rev.len() != h || h == 0 {
        return;
    }
    rev[0] = out[0].conj();
    for (r, z) in rev[1..].iter_mut().zip(out[1..h].iter().rev()) {
        *r = z.conj();
    }
    let half = T::of_f64(0.5);
    for ((x, &b), &w) in out[..h].iter_mut().zip(rev.iter()).zip(twiddles) {
        let a = *x;
        let (e_re, e_im) = ((a.re + b.re) * half, (a.im + b.im) * half);
        let (o_re, o_im) = ((a.re - b.re) * half, (a.im - b.im) * half);
        // t = w * o; X = e - i t.
        let t_re = w.re * o_re - w.im * o_im;
        let t_im = w.re * o_im + w.im * o_re;
        *x = Complex::new(e_re + t_im, e_im - t_re);
    }
    let z0 = rev[0].conj();
    out[h] = Complex::new(z0.re - z0.im, T::zero());
}

/// RFFT along the last axis: each line of `x`'s `n` real points (f32 or
/// f64) becomes the `n / 2 + 1` frequencies of a line of `out`, stored
/// through `put`. Lines split across the pool when there are many points.
fn rfft_lines<T: Precision, O: Send>(
    x: &ArrayData,
    real: &RealPlan<T>,
    out: &mut [O],
    put: impl Fn(&[Complex<T>], &mut [O]) + Sync,
) -> Result<(), String> {
    let n = real.len();
    let m = n / 2 + 1;
    let lines = out.len() / m.max(1);
    if x.len() != lines * n || out.len() != lines * m {
        return Err(format!(
            "an rfft of {n} points cannot take {} elements to {}",
            x.len(),
            out.len()
        ));
    }
    let (from_f32, from_f64);
    let load: &(dyn Fn(usize, &mut [T]) + Sync) = match x {
        ArrayData::F32(v) => {
            from_f32 = move |line: usize, buf: &mut [T]| {
                for (b, &r) in buf.iter_mut().zip(&v[line * n..(line + 1) * n]) {
                    *b = T::of_f32(r);
                }
            };
            &from_f32
        }
        ArrayData::F64(v) => {
            from_f64 = move |line: usize, buf: &mut [T]| {
                for (b, &r) in buf.iter_mut().zip(&v[line * n..(line + 1) * n]) {
                    *b = T::of_f64(r);
                }
            };
            &from_f64
        }
        _ => return Err(format!("rfft does not apply to {}", x.element_type())),
    };
    let zero = Complex::new(T::zero(), T::zero());
    let state = || {
        (
            vec![T::zero(); n],
            vec![zero; m],
            vec![zero; real.scratch_len()],
            vec![zero; n / 2],
        )
    };
    #[allow(clippy::type_complexity)]
    let work = |state: &mut (Vec<T>, Vec<Complex<T>>, Vec<Complex<T>>, Vec<Complex<T>>),
                (line, o): (usize, &mut [O])| {
        let (buf, spectrum, scratch, rev) = state;
        load(line, buf);
        real.process(buf, spectrum, scratch, rev)?;
        put(spectrum, o);
        Ok(())
    };
    if x.len() >= FFT_PARALLEL_MIN && lines > 1 {
        out.par_chunks_mut(m)
            .enumerate()
            .try_for_each_init(state, work)
    } else {
        let mut s = state();
        out.chunks_mut(m)
            .enumerate()
            .try_for_each(|l| work(&mut s, l))
    }
}

/// Transforms every line of `data` (dimensions `dims`) along `axis` with
/// `fft`, scaling by `scale`.
fn transform_axis<T: Precision>(
    data: &mut [Complex<T>],
    dims: &[usize],
    axis: usize,
    fft: &Arc<dyn Fft<T>>,
    scale: T,
) {
    let n = dims[axis];
    if n == 0 || data.is_empty() {
        return;
    }
    let inner: usize = dims[axis + 1..].iter().product();
    let block = n * inner;
    let scratch_len = fft.get_inplace_scratch_len();
    // One block (an outer index) at a time: its `inner` lines of stride
    // `inner`, each gathered into `line`, transformed and put back.
    let work = |state: &mut (Vec<Complex<T>>, Vec<Complex<T>>), block_data: &mut [Complex<T>]| {
        let (line, scratch) = state;
        for i in 0..inner {
            for (k, v) in line.iter_mut().enumerate() {
                *v = block_data[k * inner + i];
            }
            fft.process_with_scratch(line, scratch);
            for (k, v) in line.iter().enumerate() {
                block_data[k * inner + i] = v * scale;
            }
        }
    };
    let zero = Complex::new(T::zero(), T::zero());
    let state = || (vec![zero; n], vec![zero; scratch_len]);
    if data.len() >= FFT_PARALLEL_MIN && data.len() / block > 1 {
        data.par_chunks_mut(block).for_each_init(state, work);
    } else if inner > 1 && data.len() >= FFT_PARALLEL_MIN {
        // One block of many lines (the transformed axis outermost):
        // columns split across the pool, each copied out and back.
        let lines: Vec<Vec<Complex<T>>> = (0..inner)
            .into_par_iter()
            .map_init(
                || vec![zero; scratch_len],
                |scratch, i| {
                    let mut line: Vec<Complex<T>> = (0..n).map(|k| data[k * inner + i]).collect();
                    fft.process_with_scratch(&mut line, scratch);
                    line
                },
            )
            .collect();
        for (i, line) in lines.iter().enumerate() {
            for (k, v) in line.iter().enumerate() {
                data[k * inner + i] = v * scale;
            }
        }
    } else {
        let mut s = state();
        data.chunks_mut(block).for_each(|b| work(&mut s, b));
    }
}

impl<T: Precision> FftKernel<T> {
    /// RFFT: the real transform of the last axis, then the complex ones
    /// of the others; a one-axis RFFT to c64 stores its lines directly.
    fn rfft(&self, x: &ArrayData, pool: &Pool) -> Result<ArrayData, String> {
        let real = self.real.as_ref().ok_or("an rfft of no points")?;
        let total = self.out.element_count().map_err(|e| e.to_string())?;
        if self.abs {
            if !self.plans.is_empty() {
                return Err("abs of an rfft of more than one axis".into());
            }
            let mut o = pool.take::<f32>(total);
            rfft_lines(x, real, &mut o, T::abs_c64)?;
            return Ok(ArrayData::F32(o));
        }
        if self.plans.is_empty() && self.out.element_type() == oxla_hlo::PrimitiveType::C64 {
            let mut o = pool.take::<Complex32>(total);
            rfft_lines(x, real, &mut o, |line, o| {
                for (o, c) in o.iter_mut().zip(line) {
                    *o = Complex32::new(c.re.to_f32(), c.im.to_f32());
                }
            })?;
            return Ok(ArrayData::C64(o));
        }
        let mut data = vec![Complex::new(T::zero(), T::zero()); total];
        rfft_lines(x, real, &mut data, |line, o| o.copy_from_slice(line))?;
        let dims = self.out.dims_usize();
        let complex_axes = &self.axes[..self.axes.len() - 1];
        if complex_axes.len() != self.plans.len() {
            return Err("an rfft planned for other axes".into());
        }
        for (&a, fft) in complex_axes.iter().zip(&self.plans) {
            transform_axis(&mut data, &dims, a, fft, T::one());
        }
        self.store(data, pool)
    }

    fn execute(&self, x: &ArrayData, pool: &Pool) -> Result<ArrayData, String> {
        if self.kind == FftType::Rfft {
            return self.rfft(x, pool);
        }
        let complex = |re: T, im: T| Complex::new(re, im);
        let mut data: Vec<Complex<T>> = match x {
            ArrayData::C64(v) => v
                .iter()
                .map(|c| complex(T::of_f32(c.re), T::of_f32(c.im)))
                .collect(),
            ArrayData::C128(v) => v
                .iter()
                .map(|c| complex(T::of_f64(c.re), T::of_f64(c.im)))
                .collect(),
            ArrayData::F32(v) => v
                .iter()
                .map(|&r| complex(T::of_f32(r), T::zero()))
                .collect(),
            ArrayData::F64(v) => v
                .iter()
                .map(|&r| complex(T::of_f64(r), T::zero()))
                .collect(),
            _ => return Err(format!("fft does not apply to {}", x.element_type())),
        };
        let dims = &self.in_dims;
        let rank = dims.len();
        let inverse = matches!(self.kind, FftType::Ifft | FftType::Irfft);
        let complex_axes = match self.kind {
            FftType::Rfft | FftType::Irfft => &self.axes[..self.axes.len() - 1],
            _ => &self.axes[..],
        };
        if complex_axes.len() != self.plans.len() {
            return Err("an fft planned for other axes".into());
        }
        for (&a, fft) in complex_axes.iter().zip(&self.plans) {
            let scale = match inverse {
                true => T::of_f64(1.0 / dims[a] as f64),
                false => T::one(),
            };
            transform_axis(&mut data, dims, a, fft, scale);
        }
        let out_dims = self.out.dims_usize();
        let result: Vec<Complex<T>> = match self.kind {
            FftType::Fft | FftType::Ifft => data,
            FftType::Rfft => return Err("an rfft taken as a complex transform".into()),
            FftType::Irfft => {
                let (m, n) = (dims[rank - 1], out_dims[rank - 1]);
                if n == 0 || m == 0 {
                    Vec::new()
                } else {
                    let fft = self.last.as_ref().ok_or("an irfft without its plan")?;
                    let lines = data.len() / m;
                    let mut full = vec![complex(T::zero(), T::zero()); lines * n];
                    for (spectrum, line) in data.chunks_exact(m).zip(full.chunks_exact_mut(n)) {
                        for (f, v) in line.iter_mut().enumerate() {
                            *v = match f < m {
                                true => spectrum[f],
                                false => spectrum[n - f].conj(),
                            };
                        }
                    }
                    transform_axis(&mut full, &[lines, n], 1, fft, T::of_f64(1.0 / n as f64));
                    full
                }
            }
        };
        if result.len() != self.out.element_count().map_err(|e| e.to_string())? {
            return Err(format!("fft of {dims:?} cannot give {}", self.out));
        }
        self.store(result, pool)
    }

    /// The transformed values in the result's element type.
    fn store(&self, result: Vec<Complex<T>>, pool: &Pool) -> Result<ArrayData, String> {
        Ok(match self.out.element_type() {
            oxla_hlo::PrimitiveType::C64 => {
                let mut o = pool.take::<Complex32>(result.len());
                for (o, c) in o.iter_mut().zip(&result) {
                    *o = Complex32::new(c.re.to_f32(), c.im.to_f32());
                }
                ArrayData::C64(o)
            }
            oxla_hlo::PrimitiveType::C128 => ArrayData::C128(
                result
                    .iter()
                    .map(|c| Complex64::new(c.re.to_f64(), c.im.to_f64()))
                    .collect(),
            ),
            oxla_hlo::PrimitiveType::F32 => {
                let mut o = pool.take::<f32>(result.len());
                for (o, c) in o.iter_mut().zip(&result) {
                    *o = c.re.to_f32();
                }
                ArrayData::F32(o)
            }
            oxla_hlo::PrimitiveType::F64 => {
                ArrayData::F64(result.iter().map(|c| c.re.to_f64()).collect())
            }
            t => return Err(format!("fft cannot give {t}")),
        })
    }
}

impl<T: Precision> Kernel for FftKernel<T> {
    fn name(&self) -> &'static str {
        "fft"
    }

    fn detail(&self, _name_of: &dyn Fn(usize) -> String) -> String {
        match self.abs {
            true => " with the absolute values".into(),
            false => String::new(),
        }
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        let x = inputs
            .first()
            .and_then(Value::array)
            .ok_or("fft reads an array")?;
        let data = self.execute(x.data(), pool)?;
        Ok(Value::owned(
            ArrayLiteral::new(self.out.clone(), data).map_err(|e| e.to_string())?,
        ))
    }
}
