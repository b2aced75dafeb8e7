//! `fft` (FFT, IFFT, RFFT, IRFFT over the trailing `fft_length`
//! dimensions) through `rustfft` (and `realfft` for RFFT's real axis,
//! which transforms `n` real points as `n / 2` complex ones), in f64
//! whatever the element type: the
//! interpreter's definition is the exact DFT (which it sums directly, in
//! f64), so an O(n log n) transform in f64 rounds to the same f32 values
//! but for the last bit now and then. The axes are transformed one after
//! another, as the interpreter does: every line along an axis is gathered,
//! transformed and put back, lines split across the pool when there are
//! many. Inverse transforms scale by 1/n per axis; IRFFT completes the
//! last axis's spectrum by Hermitian symmetry (ignoring the imaginary
//! parts of the DC and Nyquist bins) and keeps the real part.

use std::sync::Arc;

use oxla_hlo::ir::FftType;
use oxla_hlo::num_complex::{Complex32, Complex64};
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

pub(crate) struct FftKernel {
    kind: FftType,
    in_dims: Vec<usize>,
    out: ArrayShape,
    /// The transformed (trailing) dimensions.
    axes: Vec<usize>,
    /// The transform of each complex axis (all of `axes`, but RFFT's and
    /// IRFFT's last), planned once: planning costs more than transforming
    /// a few thousand points.
    plans: Vec<Arc<dyn Fft<f64>>>,
    /// RFFT's transform of its last axis, real to complex.
    real: Option<Arc<dyn RealToComplex<f64>>>,
    /// IRFFT's inverse transform of the last axis's full length.
    last: Option<Arc<dyn Fft<f64>>>,
}

pub(crate) fn plan(comp: &HloComputation, instr: &HloInstruction) -> Option<FftKernel> {
    let x = comp
        .instruction(*instr.operands.first()?)
        .shape
        .as_array()?;
    let out = instr.shape.as_array()?.clone();
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
    let mut planner = FftPlanner::<f64>::new();
    let real = (kind == FftType::Rfft && in_dims[rank - 1] > 0)
        .then(|| RealFftPlanner::<f64>::new().plan_fft_forward(in_dims[rank - 1]));
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
    })
}

/// RFFT along the last axis: each line of `x`'s `n` real points (f32 or
/// f64) becomes the `n / 2 + 1` frequencies of a line of `out`, stored
/// through `put`. Lines split across the pool when there are many points.
fn rfft_lines<O: Send>(
    x: &ArrayData,
    real: &Arc<dyn RealToComplex<f64>>,
    out: &mut [O],
    put: impl Fn(Complex64) -> O + Sync,
) -> Result<(), String> {
    let (n, m) = (real.len(), real.complex_len());
    let lines = out.len() / m.max(1);
    if x.len() != lines * n || out.len() != lines * m {
        return Err(format!(
            "an rfft of {n} points cannot take {} elements to {}",
            x.len(),
            out.len()
        ));
    }
    let (from_f32, from_f64);
    let load: &(dyn Fn(usize, &mut [f64]) + Sync) = match x {
        ArrayData::F32(v) => {
            from_f32 = move |line: usize, buf: &mut [f64]| {
                for (b, &r) in buf.iter_mut().zip(&v[line * n..(line + 1) * n]) {
                    *b = r as f64;
                }
            };
            &from_f32
        }
        ArrayData::F64(v) => {
            from_f64 = move |line: usize, buf: &mut [f64]| {
                buf.copy_from_slice(&v[line * n..(line + 1) * n])
            };
            &from_f64
        }
        _ => return Err(format!("rfft does not apply to {}", x.element_type())),
    };
    let zero = Complex64::new(0.0, 0.0);
    let state = || {
        (
            vec![0.0; n],
            vec![zero; m],
            vec![zero; real.get_scratch_len()],
        )
    };
    let work = |state: &mut (Vec<f64>, Vec<Complex64>, Vec<Complex64>),
                (line, o): (usize, &mut [O])| {
        let (buf, spectrum, scratch) = state;
        load(line, buf);
        real.process_with_scratch(buf, spectrum, scratch)
            .map_err(|e| format!("rfft: {e}"))?;
        for (o, &c) in o.iter_mut().zip(spectrum.iter()) {
            *o = put(c);
        }
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
fn transform_axis(
    data: &mut [Complex64],
    dims: &[usize],
    axis: usize,
    fft: &Arc<dyn Fft<f64>>,
    scale: f64,
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
    let work = |state: &mut (Vec<Complex64>, Vec<Complex64>), block_data: &mut [Complex64]| {
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
    let state = || {
        (
            vec![Complex64::new(0.0, 0.0); n],
            vec![Complex64::new(0.0, 0.0); scratch_len],
        )
    };
    if data.len() >= FFT_PARALLEL_MIN && data.len() / block > 1 {
        data.par_chunks_mut(block).for_each_init(state, work);
    } else if inner > 1 && data.len() >= FFT_PARALLEL_MIN {
        // One block of many lines (the transformed axis outermost):
        // columns split across the pool, each copied out and back.
        let lines: Vec<Vec<Complex64>> = (0..inner)
            .into_par_iter()
            .map_init(
                || vec![Complex64::new(0.0, 0.0); scratch_len],
                |scratch, i| {
                    let mut line: Vec<Complex64> = (0..n).map(|k| data[k * inner + i]).collect();
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

impl FftKernel {
    /// RFFT: the real transform of the last axis, then the complex ones
    /// of the others; a one-axis RFFT to c64 stores its lines directly.
    fn rfft(&self, x: &ArrayData, pool: &Pool) -> Result<ArrayData, String> {
        let real = self.real.as_ref().ok_or("an rfft of no points")?;
        let total = self.out.element_count().map_err(|e| e.to_string())?;
        if self.plans.is_empty() && self.out.element_type() == oxla_hlo::PrimitiveType::C64 {
            let mut o = pool.take::<Complex32>(total);
            rfft_lines(x, real, &mut o, |c| {
                Complex32::new(c.re as f32, c.im as f32)
            })?;
            return Ok(ArrayData::C64(o));
        }
        let mut data = vec![Complex64::new(0.0, 0.0); total];
        rfft_lines(x, real, &mut data, |c| c)?;
        let dims = self.out.dims_usize();
        let complex_axes = &self.axes[..self.axes.len() - 1];
        if complex_axes.len() != self.plans.len() {
            return Err("an rfft planned for other axes".into());
        }
        for (&a, fft) in complex_axes.iter().zip(&self.plans) {
            transform_axis(&mut data, &dims, a, fft, 1.0);
        }
        self.store(data, pool)
    }

    fn execute(&self, x: &ArrayData, pool: &Pool) -> Result<ArrayData, String> {
        if self.kind == FftType::Rfft {
            return self.rfft(x, pool);
        }
        let mut data: Vec<Complex64> = match x {
            ArrayData::C64(v) => v
                .iter()
                .map(|c| Complex64::new(c.re as f64, c.im as f64))
                .collect(),
            ArrayData::C128(v) => v.clone(),
            ArrayData::F32(v) => v.iter().map(|&r| Complex64::new(r as f64, 0.0)).collect(),
            ArrayData::F64(v) => v.iter().map(|&r| Complex64::new(r, 0.0)).collect(),
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
                true => 1.0 / dims[a] as f64,
                false => 1.0,
            };
            transform_axis(&mut data, dims, a, fft, scale);
        }
        let out_dims = self.out.dims_usize();
        let result: Vec<Complex64> = match self.kind {
            FftType::Fft | FftType::Ifft => data,
            FftType::Rfft => return Err("an rfft taken as a complex transform".into()),
            FftType::Irfft => {
                let (m, n) = (dims[rank - 1], out_dims[rank - 1]);
                if n == 0 || m == 0 {
                    Vec::new()
                } else {
                    let fft = self.last.as_ref().ok_or("an irfft without its plan")?;
                    let lines = data.len() / m;
                    let mut full = vec![Complex64::new(0.0, 0.0); lines * n];
                    for (spectrum, line) in data.chunks_exact(m).zip(full.chunks_exact_mut(n)) {
                        for (f, v) in line.iter_mut().enumerate() {
                            *v = match f < m {
                                true => spectrum[f],
                                false => spectrum[n - f].conj(),
                            };
                        }
                    }
                    transform_axis(&mut full, &[lines, n], 1, fft, 1.0 / n as f64);
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
    fn store(&self, result: Vec<Complex64>, pool: &Pool) -> Result<ArrayData, String> {
        Ok(match self.out.element_type() {
            oxla_hlo::PrimitiveType::C64 => {
                let mut o = pool.take::<Complex32>(result.len());
                for (o, c) in o.iter_mut().zip(&result) {
                    *o = Complex32::new(c.re as f32, c.im as f32);
                }
                ArrayData::C64(o)
            }
            oxla_hlo::PrimitiveType::C128 => ArrayData::C128(result),
            oxla_hlo::PrimitiveType::F32 => {
                let mut o = pool.take::<f32>(result.len());
                for (o, c) in o.iter_mut().zip(&result) {
                    *o = c.re as f32;
                }
                ArrayData::F32(o)
            }
            oxla_hlo::PrimitiveType::F64 => ArrayData::F64(result.iter().map(|c| c.re).collect()),
            t => return Err(format!("fft cannot give {t}")),
        })
    }
}

impl Kernel for FftKernel {
    fn name(&self) -> &'static str {
        "fft"
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
