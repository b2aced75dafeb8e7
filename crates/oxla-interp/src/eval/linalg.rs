//! Linear algebra and transforms: `triangular-solve`, `cholesky` and `fft`.
//! All are computed in double precision (f64 or complex f64) over the leading
//! batch dimensions and rounded once to the result type. The FFT is a plain
//! O(n^2) DFT per axis: slow for long transforms, but obviously correct.

use std::ops::{Add, Div, Mul, Neg, Sub};

use num_complex::Complex64;
use oxla_hlo::ir::{FftType, TriangularTranspose};
use oxla_hlo::{ArrayData, ArrayLiteral, ArrayShape, HloInstruction, Scalar};

use super::{attr, result_array};
use crate::element::Elem;
use crate::error::{OpResult, fail};
use crate::index::{Counter, dims_usize, element_count, linear, strides};
use crate::value::{Value, make_array};

/// The two number types the solvers work in.
pub(super) trait Field:
    Copy
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    fn conj(self) -> Self;
    fn read(e: Elem) -> Self;
    fn to_scalar(self) -> Scalar;
    fn is_nan(self) -> bool;
    /// The principal square root of the real part (the diagonal of a Cholesky factor).
    fn sqrt_real(self) -> Self;
    fn nan() -> Self;
    /// `|re| + |im|`, the magnitude LAPACK pivots by.
    fn abs1(self) -> f64;
    /// Whether the real part is positive (and not NaN).
    fn positive_real(self) -> bool;
    /// `|x|^2`.
    fn abs2(self) -> f64;
    fn real(self) -> f64;
    fn imag(self) -> f64;
    fn from_real(v: f64) -> Self;
}

impl Field for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    fn conj(self) -> f64 {
        self
    }
    fn read(e: Elem) -> f64 {
        e.to_scalar().as_f64()
    }
    fn to_scalar(self) -> Scalar {
        Scalar::Float(self)
    }
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
    fn sqrt_real(self) -> f64 {
        self.sqrt()
    }
    fn nan() -> f64 {
        f64::NAN
    }
    fn abs1(self) -> f64 {
        self.abs()
    }
    fn positive_real(self) -> bool {
        self > 0.0
    }
    fn abs2(self) -> f64 {
        self * self
    }
    fn real(self) -> f64 {
        self
    }
    fn imag(self) -> f64 {
        0.0
    }
    fn from_real(v: f64) -> f64 {
        v
    }
}

impl Field for Complex64 {
    const ZERO: Complex64 = Complex64::new(0.0, 0.0);
    const ONE: Complex64 = Complex64::new(1.0, 0.0);
    fn conj(self) -> Complex64 {
        Complex64::conj(&self)
    }
    fn read(e: Elem) -> Complex64 {
        match e.to_scalar() {
            Scalar::Complex(re, im) => Complex64::new(re, im),
            s => Complex64::new(s.as_f64(), 0.0),
        }
    }
    fn to_scalar(self) -> Scalar {
        Scalar::Complex(self.re, self.im)
    }
    fn is_nan(self) -> bool {
        Complex64::is_nan(self)
    }
    fn sqrt_real(self) -> Complex64 {
        Complex64::new(self.re.sqrt(), 0.0)
    }
    fn nan() -> Complex64 {
        Complex64::new(f64::NAN, f64::NAN)
    }
    fn abs1(self) -> f64 {
        self.re.abs() + self.im.abs()
    }
    fn positive_real(self) -> bool {
        self.re > 0.0
    }
    fn abs2(self) -> f64 {
        self.norm_sqr()
    }
    fn real(self) -> f64 {
        self.re
    }
    fn imag(self) -> f64 {
        self.im
    }
    fn from_real(v: f64) -> Complex64 {
        Complex64::new(v, 0.0)
    }
}

pub(super) fn load<T: Field>(a: &ArrayLiteral) -> Vec<T> {
    (0..a.element_count())
        .map(|i| T::read(Elem::read(a.data(), i)))
        .collect()
}

fn store<T: Field>(shape: &ArrayShape, values: &[T]) -> OpResult<Value> {
    Ok(Value::array(store_array(shape, values)?))
}

/// An array of `shape` holding `values` rounded to its element type.
pub(super) fn store_array<T: Field>(shape: &ArrayShape, values: &[T]) -> OpResult<ArrayLiteral> {
    let ty = shape.element_type();
    let data = ArrayData::from_scalars(
        ty,
        &values.iter().map(|v| v.to_scalar()).collect::<Vec<_>>(),
    );
    make_array(shape, data)
}

/// Dimensions `[..., rows, cols]` of a batch of matrices: (batch count, rows, cols).
pub(super) fn matrices(a: &ArrayLiteral) -> OpResult<(usize, usize, usize)> {
    let d = dims_usize(a.dims());
    if d.len() < 2 {
        return fail(format!("expected a (batch of) matrices, got {}", a.shape()));
    }
    let (r, c) = (d[d.len() - 2], d[d.len() - 1]);
    // An empty array may have huge dimensions; it has no batches either way.
    let batches = if d.contains(&0) {
        0
    } else {
        d[..d.len() - 2].iter().product()
    };
    Ok((batches, r, c))
}

#[allow(clippy::too_many_arguments)]
pub(super) fn solve<T: Field>(
    a: &[T],
    b: &[T],
    batches: usize,
    m: usize,
    rows: usize,
    cols: usize,
    opts: &oxla_hlo::ir::TriangularSolveOptions,
) -> Vec<T> {
    let mut x = b.to_vec();
    let transposed = opts.transpose_a != TriangularTranspose::NoTranspose;
    let conjugate = opts.transpose_a == TriangularTranspose::Adjoint;
    // op(a) is lower triangular when `lower` and not transposed, or upper and transposed.
    let op_lower = opts.lower != transposed;
    if batches == 0 {
        return x;
    }
    // With a batch, `a` holds m * m elements, so this fits.
    let mut op = vec![T::ZERO; m * m];
    for batch in 0..batches {
        let ab = &a[batch * m * m..(batch + 1) * m * m];
        // op(a) with only the selected triangle read and a unit diagonal if asked.
        for i in 0..m {
            for j in 0..m {
                let (si, sj) = if transposed { (j, i) } else { (i, j) };
                let in_triangle = if opts.lower { si >= sj } else { si <= sj };
                let v = if si == sj && opts.unit_diagonal {
                    T::ONE
                } else if in_triangle {
                    let v = ab[si * m + sj];
                    if conjugate { v.conj() } else { v }
                } else {
                    T::ZERO
                };
                op[i * m + j] = v;
            }
        }
        let xb = &mut x[batch * rows * cols..(batch + 1) * rows * cols];
        if opts.left_side {
            // op(a) X = B, X is m x cols: substitute down each column.
            for c in 0..cols {
                let order: Vec<usize> = if op_lower {
                    (0..m).collect()
                } else {
                    (0..m).rev().collect()
                };
                for &i in &order {
                    let mut s = xb[i * cols + c];
                    for j in 0..m {
                        let solved = if op_lower { j < i } else { j > i };
                        if solved {
                            s = s - op[i * m + j] * xb[j * cols + c];
                        }
                    }
                    xb[i * cols + c] = s / op[i * m + i];
                }
            }
        } else {
            // X op(a) = B, X is rows x m: x_j = (b_j - sum_{i solved} x_i op_ij) / op_jj.
            for r in 0..rows {
                let order: Vec<usize> = if op_lower {
                    (0..m).rev().collect()
                } else {
                    (0..m).collect()
                };
                for &j in &order {
                    let mut s = xb[r * m + j];
                    for i in 0..m {
                        let solved = if op_lower { i > j } else { i < j };
                        if solved {
                            s = s - xb[r * m + i] * op[i * m + j];
                        }
                    }
                    xb[r * m + j] = s / op[j * m + j];
                }
            }
        }
    }
    x
}

/// `triangular-solve(a, b)`: solves `op(a) x = b` (left_side) or `x op(a) = b`,
/// reading only the `lower` (or upper) triangle of `a`, and taking its diagonal
/// as ones when `unit_diagonal`.
pub(crate) fn triangular_solve(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let a = operands[0].as_array()?;
    let b = operands[1].as_array()?;
    let out = result_array(instr)?;
    let opts = attr(&instr.attrs.triangular_solve, "triangular-solve options")?;
    let (batches, m, m2) = matrices(a)?;
    let (b_batches, rows, cols) = matrices(b)?;
    let solved = if opts.left_side { rows } else { cols };
    if m != m2 || batches != b_batches || solved != m {
        return fail(format!(
            "a {} and b {} do not fit together",
            a.shape(),
            b.shape()
        ));
    }
    if a.element_type().is_complex() {
        let x = solve::<Complex64>(&load(a), &load(b), batches, m, rows, cols, opts);
        store(out, &x)
    } else {
        let x = solve::<f64>(&load(a), &load(b), batches, m, rows, cols, opts);
        store(out, &x)
    }
}

fn cholesky_batches<T: Field>(a: &[T], batches: usize, n: usize, lower: bool) -> Vec<T> {
    let mut out = vec![T::ZERO; a.len()];
    if batches == 0 {
        return out;
    }
    // With a batch, `a` holds n * n elements, so this fits.
    let mut l = vec![T::ZERO; n * n];
    for batch in 0..batches {
        let ab = &a[batch * n * n..(batch + 1) * n * n];
        // The lower triangle of the Hermitian matrix, read from the selected triangle.
        let at = |i: usize, j: usize| {
            if lower {
                ab[i * n + j]
            } else {
                ab[j * n + i].conj()
            }
        };
        l.fill(T::ZERO);
        for j in 0..n {
            let mut d = at(j, j);
            for k in 0..j {
                d = d - l[j * n + k] * l[j * n + k].conj();
            }
            let djj = d.sqrt_real();
            l[j * n + j] = djj;
            for i in j + 1..n {
                let mut s = at(i, j);
                for k in 0..j {
                    s = s - l[i * n + k] * l[j * n + k].conj();
                }
                l[i * n + j] = s / djj;
            }
        }
        let failed = l.iter().any(|v| v.is_nan());
        let ob = &mut out[batch * n * n..(batch + 1) * n * n];
        for i in 0..n {
            for j in 0..n {
                ob[i * n + j] = if failed {
                    T::nan()
                } else if lower {
                    l[i * n + j]
                } else {
                    l[j * n + i].conj()
                };
            }
        }
    }
    out
}

/// `cholesky(a), lower=...`: `a = L L^H` (or `U^H U`), reading only the
/// selected triangle; the other triangle of the result is zero, and a batch
/// element that is not positive definite gives all NaN.
pub(crate) fn cholesky(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let a = operands[0].as_array()?;
    let out = result_array(instr)?;
    let (batches, n, n2) = matrices(a)?;
    if n != n2 {
        return fail(format!("{} is not a batch of square matrices", a.shape()));
    }
    let lower = instr.attrs.cholesky_lower.unwrap_or(false);
    if a.element_type().is_complex() {
        store(
            out,
            &cholesky_batches::<Complex64>(&load(a), batches, n, lower),
        )
    } else {
        store(out, &cholesky_batches::<f64>(&load(a), batches, n, lower))
    }
}

/// Replaces every line of `data` (dimensions `dims`) along `axis` by its DFT
/// (`inverse`: the inverse DFT, scaled by 1/n).
fn dft_axis(data: &mut [Complex64], dims: &[usize], axis: usize, inverse: bool) {
    let n = dims[axis];
    if n == 0 || data.is_empty() {
        return;
    }
    let sign = if inverse { 1.0 } else { -1.0 };
    let twiddle: Vec<Complex64> = (0..n)
        .map(|m| {
            Complex64::from_polar(1.0, sign * 2.0 * std::f64::consts::PI * m as f64 / n as f64)
        })
        .collect();
    let st = strides(dims);
    let stride = st[axis];
    let mut outer = dims.to_vec();
    outer[axis] = 1;
    let scale = if inverse { 1.0 / n as f64 } else { 1.0 };
    let mut line = vec![Complex64::new(0.0, 0.0); n];
    let mut c = Counter::new(&outer);
    while !c.done() {
        let start = linear(c.index(), &st);
        for (k, v) in line.iter_mut().enumerate() {
            *v = data[start + k * stride];
        }
        for k in 0..n {
            let mut s = Complex64::new(0.0, 0.0);
            for (j, &v) in line.iter().enumerate() {
                s += v * twiddle[(j * k) % n];
            }
            data[start + k * stride] = s * scale;
        }
        c.advance();
    }
}

/// `fft(x), fft_type=..., fft_length={...}` over the trailing dimensions:
/// FFT (forward, unnormalised), IFFT (normalised by 1/prod(fft_length)),
/// RFFT (real input, the last dimension keeps n/2 + 1 frequencies) and IRFFT
/// (Hermitian input, real output; the imaginary parts of the DC and Nyquist
/// bins are ignored).
pub(crate) fn fft(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let x = operands[0].as_array()?;
    let out = result_array(instr)?;
    let kind = *attr(&instr.attrs.fft_type, "fft_type")?;
    let lengths = dims_usize(attr(&instr.attrs.fft_length, "fft_length")?);
    let in_dims = dims_usize(x.dims());
    let out_dims = dims_usize(out.dims());
    let rank = in_dims.len();
    let k = lengths.len();
    if k == 0 || k > rank || out_dims.len() != rank {
        return fail(format!("fft_length {lengths:?} does not fit {}", x.shape()));
    }
    let axes: Vec<usize> = (rank - k..rank).collect();
    let input: Vec<Complex64> = load(x);
    let result: Vec<Complex64> = match kind {
        FftType::Fft | FftType::Ifft => {
            if out_dims != in_dims {
                return fail("FFT and IFFT keep the operand's shape");
            }
            let mut data = input;
            for &a in &axes {
                dft_axis(&mut data, &in_dims, a, kind == FftType::Ifft);
            }
            data
        }
        FftType::Rfft => {
            let mut data = input;
            for &a in &axes {
                dft_axis(&mut data, &in_dims, a, false);
            }
            // Keep the first n/2 + 1 frequencies of the last axis.
            let st = strides(&in_dims);
            let mut kept = Vec::with_capacity(element_count(&out_dims));
            let mut c = Counter::new(&out_dims);
            while !c.done() {
                if c.index()[rank - 1] >= in_dims[rank - 1] {
                    return fail("RFFT output is longer than its input");
                }
                kept.push(data[linear(c.index(), &st)]);
                c.advance();
            }
            kept
        }
        FftType::Irfft => {
            let mut data = input;
            for &a in &axes[..k - 1] {
                dft_axis(&mut data, &in_dims, a, true);
            }
            // Complex-to-real inverse along the last axis, completing the
            // spectrum by Hermitian symmetry.
            let n = out_dims[rank - 1];
            let m = in_dims[rank - 1];
            if n / 2 + 1 != m || in_dims[..rank - 1] != out_dims[..rank - 1] {
                return fail(format!("IRFFT of {} cannot give {out}", x.shape()));
            }
            // An empty result needs no twiddles, and `n` may then be huge.
            if out_dims.contains(&0) {
                return store::<Complex64>(out, &[]);
            }
            let twiddle: Vec<Complex64> = (0..n)
                .map(|j| {
                    Complex64::from_polar(1.0, 2.0 * std::f64::consts::PI * j as f64 / n as f64)
                })
                .collect();
            let lines = data.len().checked_div(m).unwrap_or(0);
            let mut real = Vec::with_capacity(lines * n);
            for line in 0..lines {
                let spectrum = &data[line * m..(line + 1) * m];
                for t in 0..n {
                    let mut s = 0.0;
                    for f in 0..n {
                        let v = if f < m {
                            spectrum[f]
                        } else {
                            spectrum[n - f].conj()
                        };
                        s += (v * twiddle[(f * t) % n]).re;
                    }
                    real.push(Complex64::new(s / n as f64, 0.0));
                }
            }
            real
        }
    };
    if result.len() != out.element_count()? {
        return fail(format!("{kind} of {} cannot give {out}", x.shape()));
    }
    if out.element_type().is_complex() {
        store(out, &result)
    } else {
        store(out, &result.iter().map(|c| c.re).collect::<Vec<f64>>())
    }
}
