//! The LAPACK custom calls JAX emits on CPU, built in (`?` is s, d, c or z
//! for f32, f64, c64, c128):
//!
//! | JAX | target |
//! |---|---|
//! | `jnp.linalg.cholesky` | `lapack_?potrf_ffi` |
//! | `lu_factor`, `det`, `inv`, `solve`, `expm` | `lapack_?getrf_ffi` (+ `?trsm`) |
//! | triangular solves | `lapack_?trsm_ffi` |
//! | `qr` | `lapack_?geqrf_ffi`, `lapack_?orgqr_ffi` (`?ungqr` for complex) |
//! | `eigh`, `eigvalsh` | `lapack_?syevd_ffi` (`?heevd` for complex) |
//! | `svd`, `pinv`, `lstsq`, `matrix_rank`, 2-norm | `lapack_?gesdd_ffi` |
//! | `tridiagonal_solve` | `lapack_?gtsv_ffi` |
//!
//! XLA:CPU runs these through LAPACK; here they follow LAPACK's contracts
//! on the logical arrays:
//!
//! * The operand layouts JAX asks for (`{1,2,0}`: each matrix column-major)
//!   only place LAPACK's `A(i, j)` at the logical element `[..., i, j]`, so
//!   they change nothing here. Leading dimensions are batches.
//! * `potrf` (`uplo` `L` or `U`): `(factor, info)`. The selected triangle
//!   becomes the Cholesky factor, the other keeps the operand's values;
//!   `info` is 0, or the 1-based order of the first leading minor that is
//!   not positive definite (JAX then masks the batch element with NaN).
//! * `getrf`: `(lu, ipiv, info)`, partial pivoting by rows: `lu` holds the
//!   unit lower factor below the diagonal and the upper factor on and above
//!   it, `ipiv[i]` the 1-based row swapped with row `i + 1`, `info` 0 or the
//!   1-based index of the first exactly zero pivot (the factorisation still
//!   completes).
//! * `trsm` (`side`, `uplo`, `trans_x` `N`/`T`/`C`, `diag` `N`/`U`): the
//!   solution of `op(a) x = b` (side `L`) or `x op(a) = b` (side `R`), as
//!   the `triangular-solve` instruction computes it.
//! * `geqrf`: `(a, tau)`, Householder QR with `?larfg`'s reflectors (R on
//!   and above the diagonal, the vectors below it); `orgqr`/`ungqr`: the
//!   first `n` columns of `Q = H(1) ... H(k)` from them.
//! * `syevd`/`heevd` (`uplo`; `mode` `V` or `N`): `(vectors, values,
//!   info)`, the eigenvalues ascending and orthonormal eigenvectors in the
//!   columns, by Jacobi rotations (see [`syevd`] on the eigenvectors' sign).
//! * `gesdd` (`mode` `A`, `S` or `N`): `(a, s, u, vt, info)`, by one-sided
//!   Jacobi; `a` is returned as it came (LAPACK leaves it undefined).
//! * `gtsv`: `(dl, d, du, x, info)`, LAPACK's pivoted elimination (see
//!   [`gtsv`] for JAX's diagonal convention).
//!
//! Like the other solvers, these compute in f64 (or complex f64) and round
//! once, so they agree with LAPACK's single-precision results to rounding.
//! The attributes come from the typed-FFI `backend_config`, for instance
//! `{uplo = 76 : ui8}` (76 is `L`).

use num_complex::Complex64;
use oxla_hlo::ir::{TriangularSolveOptions, TriangularTranspose};
use oxla_hlo::{ArrayData, HloInstruction, PrimitiveType, Scalar, Shape};

use super::linalg::{Field, load, matrices, solve, store_array};
use crate::error::{OpResult, fail};
use crate::value::{Value, make_array};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Routine {
    Potrf,
    Getrf,
    Trsm,
    Geqrf,
    Orgqr,
    Syevd,
    Gesdd,
    Gtsv,
}

/// The routine and element type a built-in target names.
fn routine(target: &str) -> Option<(Routine, PrimitiveType)> {
    let name = target.strip_prefix("lapack_")?.strip_suffix("_ffi")?;
    let ty = match name.as_bytes().first()? {
        b's' => PrimitiveType::F32,
        b'd' => PrimitiveType::F64,
        b'c' => PrimitiveType::C64,
        b'z' => PrimitiveType::C128,
        _ => return None,
    };
    let routine = match &name[1..] {
        "potrf" => Routine::Potrf,
        "getrf" => Routine::Getrf,
        "trsm" => Routine::Trsm,
        "geqrf" => Routine::Geqrf,
        "orgqr" if !ty.is_complex() => Routine::Orgqr,
        "ungqr" if ty.is_complex() => Routine::Orgqr,
        "syevd" if !ty.is_complex() => Routine::Syevd,
        "heevd" if ty.is_complex() => Routine::Syevd,
        "gesdd" => Routine::Gesdd,
        "gtsv" => Routine::Gtsv,
        _ => return None,
    };
    Some((routine, ty))
}

/// Whether `target` names a LAPACK routine built in here.
pub(crate) fn is_builtin(target: &str) -> bool {
    routine(target).is_some()
}

/// Runs the built-in target `target`, or `None` if it is not one.
pub(crate) fn call(
    target: &str,
    instr: &HloInstruction,
    operands: &[Value],
) -> Option<OpResult<Value>> {
    let (routine, ty) = routine(target)?;
    let config = instr.attrs.backend_config.as_deref().unwrap_or("");
    let run = || -> OpResult<Value> {
        let arrays = operands
            .iter()
            .map(Value::as_array)
            .collect::<OpResult<Vec<_>>>()?;
        let expected = match routine {
            Routine::Trsm | Routine::Orgqr => 2,
            Routine::Gtsv => 4,
            _ => 1,
        };
        if arrays.len() != expected {
            return fail(format!(
                "`{target}` takes {expected} operand(s), got {}",
                arrays.len()
            ));
        }
        if let Some(a) = arrays.iter().find(|a| a.element_type() != ty) {
            return fail(format!(
                "`{target}` works on {ty} matrices, got {}",
                a.shape()
            ));
        }
        let complex = ty.is_complex();
        match routine {
            Routine::Potrf => {
                let lower = match flag(config, "uplo")? {
                    b'L' => true,
                    b'U' => false,
                    c => return bad_flag(target, "uplo", c),
                };
                let a = arrays[0];
                let (batches, n, n2) = matrices(a)?;
                if n != n2 {
                    return fail(format!("`{target}`: {} is not square", a.shape()));
                }
                let (factor, info) = if complex {
                    let (f, i) = potrf::<Complex64>(load(a), batches, n, lower);
                    (store_array(a.shape(), &f)?, i)
                } else {
                    let (f, i) = potrf::<f64>(load(a), batches, n, lower);
                    (store_array(a.shape(), &f)?, i)
                };
                let tuple = instr.shape.tuple_shapes().unwrap_or(&[]);
                let info = int_array(tuple.get(1), &info, target)?;
                Ok(Value::tuple(vec![Value::array(factor), info]))
            }
            Routine::Getrf => {
                let a = arrays[0];
                let (batches, m, n) = matrices(a)?;
                let (lu, pivots, info) = if complex {
                    let (f, p, i) = getrf::<Complex64>(load(a), batches, m, n);
                    (store_array(a.shape(), &f)?, p, i)
                } else {
                    let (f, p, i) = getrf::<f64>(load(a), batches, m, n);
                    (store_array(a.shape(), &f)?, p, i)
                };
                let tuple = instr.shape.tuple_shapes().unwrap_or(&[]);
                let pivots = int_array(tuple.get(1), &pivots, target)?;
                let info = int_array(tuple.get(2), &info, target)?;
                Ok(Value::tuple(vec![Value::array(lu), pivots, info]))
            }
            Routine::Geqrf => {
                let a = arrays[0];
                let (batches, m, n) = matrices(a)?;
                let tuple = instr.shape.tuple_shapes().unwrap_or(&[]);
                let Some(tau_shape) = tuple.get(1).and_then(Shape::as_array) else {
                    return fail(format!("`{target}` returns (a, tau)"));
                };
                let (qr, tau) = if complex {
                    let (f, t) = geqrf::<Complex64>(load(a), batches, m, n);
                    (store_array(a.shape(), &f)?, store_array(tau_shape, &t)?)
                } else {
                    let (f, t) = geqrf::<f64>(load(a), batches, m, n);
                    (store_array(a.shape(), &f)?, store_array(tau_shape, &t)?)
                };
                Ok(Value::tuple(vec![Value::array(qr), Value::array(tau)]))
            }
            Routine::Orgqr => {
                let (a, tau) = (arrays[0], arrays[1]);
                let (batches, m, n) = matrices(a)?;
                let k = tau.dims().last().copied().unwrap_or(0) as usize;
                if m < n || n < k || tau.element_count() != batches * k {
                    return fail(format!(
                        "`{target}`: a {} and tau {} do not fit together (m >= n >= k)",
                        a.shape(),
                        tau.shape()
                    ));
                }
                let q = if complex {
                    store_array(
                        a.shape(),
                        &orgqr::<Complex64>(&load(a), &load(tau), batches, m, n, k),
                    )?
                } else {
                    store_array(
                        a.shape(),
                        &orgqr::<f64>(&load(a), &load(tau), batches, m, n, k),
                    )?
                };
                Ok(Value::array(q))
            }
            Routine::Syevd => {
                let lower = match flag(config, "uplo")? {
                    b'L' => true,
                    b'U' => false,
                    c => return bad_flag(target, "uplo", c),
                };
                if let Ok(mode) = flag(config, "mode")
                    && mode != b'V'
                    && mode != b'N'
                {
                    return bad_flag(target, "mode", mode);
                }
                let a = arrays[0];
                let (batches, n, n2) = matrices(a)?;
                if n != n2 {
                    return fail(format!("`{target}`: {} is not square", a.shape()));
                }
                let tuple = instr.shape.tuple_shapes().unwrap_or(&[]);
                let Some(w_shape) = tuple.get(1).and_then(Shape::as_array) else {
                    return fail(format!("`{target}` returns (vectors, values, info)"));
                };
                let (vectors, values, info) = if complex {
                    let (v, w, i) = syevd::<Complex64>(load(a), batches, n, lower);
                    (store_array(a.shape(), &v)?, w, i)
                } else {
                    let (v, w, i) = syevd::<f64>(load(a), batches, n, lower);
                    (store_array(a.shape(), &v)?, w, i)
                };
                let values = store_array(w_shape, &values)?;
                let info = int_array(tuple.get(2), &info, target)?;
                Ok(Value::tuple(vec![
                    Value::array(vectors),
                    Value::array(values),
                    info,
                ]))
            }
            Routine::Gesdd => {
                let mode = flag(config, "mode")?;
                if !matches!(mode, b'A' | b'S' | b'N') {
                    return bad_flag(target, "mode", mode);
                }
                let a = arrays[0];
                let (batches, m, n) = matrices(a)?;
                let tuple = instr.shape.tuple_shapes().unwrap_or(&[]);
                let arrays_at = |i: usize| tuple.get(i).and_then(Shape::as_array);
                let (Some(s_shape), Some(u_shape), Some(vt_shape)) =
                    (arrays_at(1), arrays_at(2), arrays_at(3))
                else {
                    return fail(format!("`{target}` returns (a, s, u, vt, info)"));
                };
                let k = m.min(n);
                // Mode N (values only) still declares vectors: full ones,
                // as JAX writes it, which LAPACK leaves unset; here they
                // are computed like mode A's.
                let last = |shape: &oxla_hlo::ArrayShape| shape.dims().last().copied();
                let full = mode == b'A' || mode == b'N' && last(u_shape) == Some(m as i64);
                let (u_cols, vt_rows) = if full { (m, n) } else { (k, k) };
                let fits = |shape: &oxla_hlo::ArrayShape, rows: usize, cols: usize| {
                    let d = shape.dims();
                    d.len() >= 2
                        && d[d.len() - 2] as usize == rows
                        && d[d.len() - 1] as usize == cols
                };
                if !fits(u_shape, m, u_cols) || !fits(vt_shape, vt_rows, n) {
                    return fail(format!(
                        "`{target}`: u {u_shape} and vt {vt_shape} do not fit a {} in mode {}",
                        a.shape(),
                        mode as char
                    ));
                }
                let (s, u, vt, info) = if complex {
                    let (s, u, vt, i) = gesdd::<Complex64>(&load(a), batches, m, n, full);
                    (s, store_array(u_shape, &u)?, store_array(vt_shape, &vt)?, i)
                } else {
                    let (s, u, vt, i) = gesdd::<f64>(&load(a), batches, m, n, full);
                    (s, store_array(u_shape, &u)?, store_array(vt_shape, &vt)?, i)
                };
                let s = store_array(s_shape, &s)?;
                let info = int_array(tuple.get(4), &info, target)?;
                Ok(Value::tuple(vec![
                    Value::array(a.clone()),
                    Value::array(s),
                    Value::array(u),
                    Value::array(vt),
                    info,
                ]))
            }
            Routine::Gtsv => {
                let (b_batches, n, nrhs) = matrices(arrays[3])?;
                let diagonals_fit = arrays[..3].iter().all(|a| {
                    let d = a.dims();
                    d.len() + 1 == arrays[3].dims().len()
                        && d[..d.len() - 1] == arrays[3].dims()[..d.len() - 1]
                        && d[d.len() - 1] as usize == n
                });
                if !diagonals_fit {
                    return fail(format!(
                        "`{target}`: diagonals {}, {}, {} do not fit b {}",
                        arrays[0].shape(),
                        arrays[1].shape(),
                        arrays[2].shape(),
                        arrays[3].shape()
                    ));
                }
                fn outputs<T: Field>(
                    parts: [Vec<T>; 4],
                    info: Vec<i64>,
                    arrays: &[&oxla_hlo::ArrayLiteral],
                    instr: &HloInstruction,
                    target: &str,
                ) -> OpResult<Value> {
                    let mut values = Vec::with_capacity(5);
                    for (part, a) in parts.iter().zip(arrays) {
                        values.push(Value::array(store_array(a.shape(), part)?));
                    }
                    let tuple = instr.shape.tuple_shapes().unwrap_or(&[]);
                    values.push(int_array(tuple.get(4), &info, target)?);
                    Ok(Value::tuple(values))
                }
                if complex {
                    let loaded = [0, 1, 2, 3].map(|i| load::<Complex64>(arrays[i]));
                    let (parts, info) = gtsv(loaded, b_batches, n, nrhs);
                    outputs(parts, info, &arrays, instr, target)
                } else {
                    let loaded = [0, 1, 2, 3].map(|i| load::<f64>(arrays[i]));
                    let (parts, info) = gtsv(loaded, b_batches, n, nrhs);
                    outputs(parts, info, &arrays, instr, target)
                }
            }
            Routine::Trsm => {
                let opts = TriangularSolveOptions {
                    left_side: match flag(config, "side")? {
                        b'L' => true,
                        b'R' => false,
                        c => return bad_flag(target, "side", c),
                    },
                    lower: match flag(config, "uplo")? {
                        b'L' => true,
                        b'U' => false,
                        c => return bad_flag(target, "uplo", c),
                    },
                    unit_diagonal: match flag(config, "diag")? {
                        b'U' => true,
                        b'N' => false,
                        c => return bad_flag(target, "diag", c),
                    },
                    transpose_a: match flag(config, "trans_x")? {
                        b'N' => TriangularTranspose::NoTranspose,
                        b'T' => TriangularTranspose::Transpose,
                        b'C' => TriangularTranspose::Adjoint,
                        c => return bad_flag(target, "trans_x", c),
                    },
                };
                let (a, b) = (arrays[0], arrays[1]);
                let (batches, m, m2) = matrices(a)?;
                let (b_batches, rows, cols) = matrices(b)?;
                let solved = if opts.left_side { rows } else { cols };
                if m != m2 || batches != b_batches || solved != m {
                    return fail(format!(
                        "`{target}`: a {} and b {} do not fit together",
                        a.shape(),
                        b.shape()
                    ));
                }
                let x = if complex {
                    let x = solve::<Complex64>(&load(a), &load(b), batches, m, rows, cols, &opts);
                    store_array(b.shape(), &x)?
                } else {
                    let x = solve::<f64>(&load(a), &load(b), batches, m, rows, cols, &opts);
                    store_array(b.shape(), &x)?
                };
                Ok(Value::array(x))
            }
        }
    };
    let result = run();
    Some(result.and_then(|v| {
        if v.shape().compatible(&instr.shape) {
            Ok(v)
        } else {
            fail(format!(
                "`{target}` gives {}, but the custom-call's shape is {}",
                v.shape(),
                instr.shape
            ))
        }
    }))
}

/// The character-valued attribute `key` of a LAPACK custom call's typed-FFI
/// `backend_config` (`lapack_flag("{uplo = 76 : ui8}", "uplo")` is
/// `Some(b'L')`), or `None` if it has no such attribute.
pub fn lapack_flag(config: &str, key: &str) -> Option<u8> {
    flag(config, key).ok()
}

/// The character-valued attribute `key` of a typed-FFI backend config such
/// as `{diag = 78 : ui8, side = 76 : ui8}`.
fn flag(config: &str, key: &str) -> OpResult<u8> {
    let body = config.trim().trim_start_matches('{').trim_end_matches('}');
    for entry in body.split(',') {
        let Some((name, value)) = entry.split_once('=') else {
            continue;
        };
        if name.trim() != key {
            continue;
        }
        let number = value.split(':').next().unwrap_or("").trim();
        return match number.parse::<u8>() {
            Ok(v) => Ok(v),
            Err(_) => fail(format!(
                "backend_config attribute `{key}` is `{}`, not a character code",
                value.trim()
            )),
        };
    }
    fail(format!(
        "backend_config `{config}` lacks the attribute `{key}`"
    ))
}

fn bad_flag<T>(target: &str, key: &str, code: u8) -> OpResult<T> {
    fail(format!(
        "`{target}`: {key} = {code} ({:?}) is not one LAPACK accepts",
        code as char
    ))
}

/// An s32 (or other integer) result array of `values`, in the shape the
/// custom-call declares for it.
fn int_array(shape: Option<&Shape>, values: &[i64], target: &str) -> OpResult<Value> {
    let Some(shape) = shape.and_then(Shape::as_array) else {
        return fail(format!(
            "`{target}` returns a tuple with an integer array for its status outputs"
        ));
    };
    if !shape.element_type().is_integral() {
        return fail(format!("`{target}`: {shape} is not an integer array"));
    }
    let scalars: Vec<Scalar> = values.iter().map(|&v| Scalar::Int(v as i128)).collect();
    let data = ArrayData::from_scalars(shape.element_type(), &scalars);
    Ok(Value::array(make_array(shape, data)?))
}

/// LAPACK's `potrf` on each `n x n` matrix of `a`: the selected triangle
/// becomes the factor (`a = L L^H` or `U^H U`), the other is left as it is.
/// On a minor that is not positive definite the batch element stops there,
/// as LAPACK does, with its order in `info`.
fn potrf<T: Field>(mut a: Vec<T>, batches: usize, n: usize, lower: bool) -> (Vec<T>, Vec<i64>) {
    let mut info = vec![0i64; batches];
    for (batch, status) in info.iter_mut().enumerate() {
        let m = &mut a[batch * n * n..(batch + 1) * n * n];
        // Work on the lower factor L; for `U` read and write its conjugate
        // transpose, element (i, j) of L being U's (j, i).
        let at = |i: usize, j: usize| if lower { i * n + j } else { j * n + i };
        let get = |m: &[T], i: usize, j: usize| {
            if lower {
                m[at(i, j)]
            } else {
                m[at(i, j)].conj()
            }
        };
        for j in 0..n {
            let mut d = get(m, j, j);
            for k in 0..j {
                d = d - get(m, j, k) * get(m, j, k).conj();
            }
            if !d.positive_real() {
                // LAPACK leaves the failing diagonal element as computed.
                m[at(j, j)] = d;
                *status = j as i64 + 1;
                break;
            }
            let djj = d.sqrt_real();
            m[at(j, j)] = djj;
            for i in j + 1..n {
                let mut s = get(m, i, j);
                for k in 0..j {
                    s = s - get(m, i, k) * get(m, j, k).conj();
                }
                let v = s / djj;
                m[at(i, j)] = if lower { v } else { v.conj() };
            }
        }
    }
    (a, info)
}

/// LAPACK's `getrf` on each `m x n` matrix of `a`: row pivots (1-based, the
/// first largest `|re| + |im|` in the column, as `i?amax`) and status.
fn getrf<T: Field>(
    mut a: Vec<T>,
    batches: usize,
    m: usize,
    n: usize,
) -> (Vec<T>, Vec<i64>, Vec<i64>) {
    let steps = m.min(n);
    let mut pivots = vec![0i64; batches * steps];
    let mut info = vec![0i64; batches];
    for batch in 0..batches {
        let x = &mut a[batch * m * n..(batch + 1) * m * n];
        for j in 0..steps {
            let mut p = j;
            for i in j + 1..m {
                if x[i * n + j].abs1() > x[p * n + j].abs1() {
                    p = i;
                }
            }
            pivots[batch * steps + j] = p as i64 + 1;
            let pivot = x[p * n + j];
            if pivot.abs1() == 0.0 {
                // LAPACK records the first zero pivot and goes on (the
                // column below is zero too, so there is nothing to update).
                if info[batch] == 0 {
                    info[batch] = j as i64 + 1;
                }
                continue;
            }
            if p != j {
                for c in 0..n {
                    x.swap(j * n + c, p * n + c);
                }
            }
            for i in j + 1..m {
                x[i * n + j] = x[i * n + j] / pivot;
            }
            for i in j + 1..m {
                let l = x[i * n + j];
                for c in j + 1..n {
                    x[i * n + c] = x[i * n + c] - l * x[j * n + c];
                }
            }
        }
    }
    (a, pivots, info)
}

/// LAPACK's `geqrf` on each `m x n` matrix of `a`: Householder QR. R on and
/// above the diagonal, each reflector's vector below it (its first element
/// is an implicit 1), and `tau`, as `?larfg` makes them: `beta = -sign(re
/// alpha) |(alpha, x)|`, `tau = (beta - alpha) / beta`, `v = x / (alpha -
/// beta)`; a column with nothing to annihilate (`x = 0`, real `alpha`) gets
/// `tau = 0`.
fn geqrf<T: Field>(mut a: Vec<T>, batches: usize, m: usize, n: usize) -> (Vec<T>, Vec<T>) {
    let k = m.min(n);
    let mut taus = vec![T::ZERO; batches * k];
    for batch in 0..batches {
        let x = &mut a[batch * m * n..(batch + 1) * m * n];
        for j in 0..k {
            let alpha = x[j * n + j];
            let xnorm = (j + 1..m).map(|i| x[i * n + j].abs2()).sum::<f64>().sqrt();
            if xnorm == 0.0 && alpha.imag() == 0.0 {
                continue; // tau = 0: H is the identity.
            }
            let norm = (alpha.abs2() + xnorm * xnorm).sqrt();
            let beta = if alpha.real() >= 0.0 { -norm } else { norm };
            let b = T::from_real(beta);
            let tau = (b - alpha) / b;
            let scale = T::ONE / (alpha - b);
            for i in j + 1..m {
                x[i * n + j] = x[i * n + j] * scale;
            }
            x[j * n + j] = b;
            taus[batch * k + j] = tau;
            // Apply H^H = I - conj(tau) v v^H to the columns to the right.
            let v = |x: &[T], i: usize| if i == j { T::ONE } else { x[i * n + j] };
            for c in j + 1..n {
                let mut w = T::ZERO;
                for i in j..m {
                    w = w + v(x, i).conj() * x[i * n + c];
                }
                let w = tau.conj() * w;
                for i in j..m {
                    x[i * n + c] = x[i * n + c] - v(x, i) * w;
                }
            }
        }
    }
    (a, taus)
}

/// LAPACK's `orgqr`/`ungqr`: the first `n` columns of `Q = H(1) ... H(k)`
/// from `geqrf`'s reflectors (below the diagonal of `a`'s first `k`
/// columns) and `tau`.
fn orgqr<T: Field>(a: &[T], tau: &[T], batches: usize, m: usize, n: usize, k: usize) -> Vec<T> {
    let mut q = vec![T::ZERO; batches * m * n];
    for batch in 0..batches {
        let x = &a[batch * m * n..(batch + 1) * m * n];
        let out = &mut q[batch * m * n..(batch + 1) * m * n];
        for i in 0..n {
            out[i * n + i] = T::ONE;
        }
        for j in (0..k).rev() {
            let t = tau[batch * k + j];
            let v = |i: usize| if i == j { T::ONE } else { x[i * n + j] };
            // Q = (I - tau v v^H) Q, rows j.. (v is zero above j).
            for c in 0..n {
                let mut w = T::ZERO;
                for i in j..m {
                    w = w + v(i).conj() * out[i * n + c];
                }
                let w = t * w;
                for i in j..m {
                    out[i * n + c] = out[i * n + c] - v(i) * w;
                }
            }
        }
    }
    q
}

/// LAPACK's `gtsv` on each tridiagonal system: Gaussian elimination with
/// partial pivoting (by `|re| + |im|`), step for step as the reference
/// `?gtsv`. As JAX writes them, `dl[i]` is row `i`'s element left of the
/// diagonal (`dl[0]` unused) and `du[i]` the one right of it (the last
/// unused). Returns `[dl, d, du, x]` as LAPACK leaves them (`du`, `d`:
/// U's first superdiagonal and diagonal, `dl[1..]`: its second
/// superdiagonal, `b`: the solution) and `info`: 0, or the 1-based index of a zero pivot,
/// where the batch element stops (its solution then undefined, here the
/// partly eliminated right-hand side).
fn gtsv<T: Field>(
    [mut dl, mut d, mut du, mut b]: [Vec<T>; 4],
    batches: usize,
    n: usize,
    nrhs: usize,
) -> ([Vec<T>; 4], Vec<i64>) {
    let mut info = vec![0i64; batches];
    // Each batch's diagonals: dl and du hold n elements (the last unused).
    for batch in 0..batches {
        // JAX's subdiagonal starts at row 1 (`dl[0]` is unused); LAPACK's
        // starts at its first element: the FFI handler passes `dl + 1`.
        let (dl, d, du) = (
            &mut dl[(batch * n + 1).min((batch + 1) * n)..(batch + 1) * n],
            &mut d[batch * n..(batch + 1) * n],
            &mut du[batch * n..(batch + 1) * n],
        );
        let b = &mut b[batch * n * nrhs..(batch + 1) * n * nrhs];
        let mut singular = 0;
        for i in 0..n.saturating_sub(1) {
            if d[i].abs1() >= dl[i].abs1() {
                // No row interchange.
                if d[i].abs1() == 0.0 {
                    singular = i + 1;
                    break;
                }
                let fact = dl[i] / d[i];
                d[i + 1] = d[i + 1] - fact * du[i];
                for j in 0..nrhs {
                    b[(i + 1) * nrhs + j] = b[(i + 1) * nrhs + j] - fact * b[i * nrhs + j];
                }
                if i + 2 < n {
                    dl[i] = T::ZERO;
                }
            } else {
                // Interchange rows i and i + 1.
                let fact = d[i] / dl[i];
                d[i] = dl[i];
                let temp = d[i + 1];
                d[i + 1] = du[i] - fact * temp;
                if i + 2 < n {
                    dl[i] = du[i + 1];
                    du[i + 1] = -(fact * dl[i]);
                }
                du[i] = temp;
                for j in 0..nrhs {
                    let temp = b[i * nrhs + j];
                    b[i * nrhs + j] = b[(i + 1) * nrhs + j];
                    b[(i + 1) * nrhs + j] = temp - fact * b[(i + 1) * nrhs + j];
                }
            }
        }
        if singular == 0 && n > 0 && d[n - 1].abs1() == 0.0 {
            singular = n;
        }
        if singular > 0 {
            info[batch] = singular as i64;
            continue;
        }
        // Back substitution.
        for j in 0..nrhs {
            let x = |b: &[T], i: usize| b[i * nrhs + j];
            if n == 0 {
                break;
            }
            b[(n - 1) * nrhs + j] = x(b, n - 1) / d[n - 1];
            if n > 1 {
                b[(n - 2) * nrhs + j] = (x(b, n - 2) - du[n - 2] * x(b, n - 1)) / d[n - 2];
            }
            for i in (0..n.saturating_sub(2)).rev() {
                b[i * nrhs + j] = (x(b, i) - du[i] * x(b, i + 1) - dl[i] * x(b, i + 2)) / d[i];
            }
        }
    }
    ([dl, d, du, b], info)
}

/// Sweeps of [`syevd`]'s Jacobi method before it reports no convergence.
const JACOBI_SWEEPS: usize = 60;

/// LAPACK's `syevd`/`heevd` contract on each `n x n` Hermitian matrix of
/// `a`, read from its `lower` (or upper) triangle: the eigenvalues in
/// ascending order and an orthonormal eigenvector for each in the
/// corresponding column; `info` 0, or 1 where the iteration did not
/// converge (a NaN in the matrix). Computed by cyclic Jacobi rotations,
/// accurate to a few ulp of the matrix norm; each eigenvector's sign (or
/// complex phase) is the method's own, where LAPACK's is its algorithm's:
/// neither is specified, so compare them up to that.
fn syevd<T: Field>(
    a: Vec<T>,
    batches: usize,
    n: usize,
    lower: bool,
) -> (Vec<T>, Vec<f64>, Vec<i64>) {
    let mut vectors = vec![T::ZERO; a.len()];
    let mut values = vec![0.0; batches * n];
    let mut info = vec![0i64; batches];
    let mut h = vec![T::ZERO; n * n];
    let mut v = vec![T::ZERO; n * n];
    for batch in 0..batches {
        let x = &a[batch * n * n..(batch + 1) * n * n];
        for i in 0..n {
            for j in 0..n {
                let from_lower = if i >= j {
                    x[i * n + j]
                } else {
                    x[j * n + i].conj()
                };
                let from_upper = if i <= j {
                    x[i * n + j]
                } else {
                    x[j * n + i].conj()
                };
                h[i * n + j] = if lower { from_lower } else { from_upper };
            }
            // The diagonal of a Hermitian matrix is real.
            h[i * n + i] = T::from_real(h[i * n + i].real());
        }
        v.fill(T::ZERO);
        for i in 0..n {
            v[i * n + i] = T::ONE;
        }
        let total: f64 = h.iter().map(|e| e.abs2()).sum();
        let mut converged = false;
        for _ in 0..JACOBI_SWEEPS {
            if !total.is_finite() {
                break; // A NaN or infinity: LAPACK does not converge either.
            }
            let off: f64 = (0..n)
                .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
                .map(|(i, j)| h[i * n + j].abs2())
                .sum();
            if off <= total * (f64::EPSILON * f64::EPSILON) || off == 0.0 {
                converged = true;
                break;
            }
            for p in 0..n {
                for q in p + 1..n {
                    jacobi_rotate(&mut h, &mut v, n, p, q);
                }
            }
        }
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&i, &j| h[i * n + i].real().total_cmp(&h[j * n + j].real()));
        for (col, &k) in order.iter().enumerate() {
            values[batch * n + col] = h[k * n + k].real();
            for r in 0..n {
                vectors[batch * n * n + r * n + col] = v[r * n + k];
            }
        }
        if !converged {
            info[batch] = 1;
        }
    }
    (vectors, values, info)
}

/// One Jacobi step zeroing `h[p][q]` (and `h[q][p]`) of the Hermitian
/// matrix `h`: `h <- U^H h U`, `v <- v U`, where `U` first turns the
/// element's phase away (column `q` times `conj(e)`, `e = h_pq / |h_pq|`),
/// then rotates the plane (p, q) by the classical angle.
fn jacobi_rotate<T: Field>(h: &mut [T], v: &mut [T], n: usize, p: usize, q: usize) {
    let apq = h[p * n + q];
    let r = apq.abs2().sqrt();
    if r == 0.0 {
        return;
    }
    let e = apq / T::from_real(r);
    // Phase: column q times conj(e), row q times e (so h_pq becomes r).
    scale_column(h, n, q, e.conj());
    scale_column(v, n, q, e.conj());
    for x in &mut h[q * n..(q + 1) * n] {
        *x = *x * e;
    }
    let (app, aqq) = (h[p * n + p].real(), h[q * n + q].real());
    let (c, s) = jacobi_angle((aqq - app) / (2.0 * r));
    rotate_columns(h, n, (p, q), (c, s));
    rotate_columns(v, n, (p, q), (c, s));
    // Rows, the same rotation from the left.
    for k in 0..n {
        let (pk, qk) = (h[p * n + k], h[q * n + k]);
        h[p * n + k] = c * pk - s * qk;
        h[q * n + k] = s * pk + c * qk;
    }
    h[p * n + q] = T::ZERO;
    h[q * n + p] = T::ZERO;
}

/// The cosine and sine of the Jacobi rotation for `theta = (a_qq - a_pp)
/// / (2 a_pq)`: the smaller angle, `t = tan = sign(theta) / (|theta| +
/// sqrt(theta^2 + 1))`.
fn jacobi_angle<T: Field>(theta: f64) -> (T, T) {
    let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
    let c = 1.0 / (t * t + 1.0).sqrt();
    (T::from_real(c), T::from_real(t * c))
}

/// Column `q` of the row-major matrix `m` (`cols` wide) times `e`.
fn scale_column<T: Field>(m: &mut [T], cols: usize, q: usize, e: T) {
    for row in m.chunks_exact_mut(cols) {
        row[q] = row[q] * e;
    }
}

/// Columns `p` and `q` of the row-major matrix `m` (`cols` wide) rotated:
/// `m_kp' = c m_kp - s m_kq`, `m_kq' = s m_kp + c m_kq`.
fn rotate_columns<T: Field>(m: &mut [T], cols: usize, (p, q): (usize, usize), (c, s): (T, T)) {
    for row in m.chunks_exact_mut(cols) {
        let (a, b) = (row[p], row[q]);
        row[p] = c * a - s * b;
        row[q] = s * a + c * b;
    }
}

/// LAPACK's `gesdd` contract on each `m x n` matrix of `a`: the singular
/// values descending, `U` (`m x m` when `full`, else `m x min(m, n)`) and
/// `V^H` (`n x n` or `min(m, n) x n`) with `a = U diag(s) V^H`; `info` 1
/// where the iteration did not converge (a NaN or infinity). By one-sided
/// Jacobi rotations on the columns (of `a^H` when it is wide); columns of
/// `U` past the rank complete an orthonormal basis. As with [`syevd`], the
/// singular vectors' signs (phases) are the method's own.
#[allow(clippy::type_complexity)]
fn gesdd<T: Field>(
    a: &[T],
    batches: usize,
    m: usize,
    n: usize,
    full: bool,
) -> (Vec<f64>, Vec<T>, Vec<T>, Vec<i64>) {
    let k = m.min(n);
    let (u_cols, vt_rows) = if full { (m, n) } else { (k, k) };
    let mut s_all = vec![0.0; batches * k];
    let mut u_all = vec![T::ZERO; batches * m * u_cols];
    let mut vt_all = vec![T::ZERO; batches * vt_rows * n];
    let mut info = vec![0i64; batches];
    // Work on a tall matrix w (rows x cols, rows >= cols): a itself, or a^H.
    let wide = m < n;
    let (rows, cols) = if wide { (n, m) } else { (m, n) };
    for batch in 0..batches {
        let x = &a[batch * m * n..(batch + 1) * m * n];
        let mut w = vec![T::ZERO; rows * cols];
        for i in 0..m {
            for j in 0..n {
                if wide {
                    w[j * cols + i] = x[i * n + j].conj();
                } else {
                    w[i * cols + j] = x[i * n + j];
                }
            }
        }
        let mut v = vec![T::ZERO; cols * cols];
        for i in 0..cols {
            v[i * cols + i] = T::ONE;
        }
        let finite = w.iter().all(|e| e.abs2().is_finite());
        let mut converged = false;
        for _ in 0..JACOBI_SWEEPS {
            if !finite {
                break;
            }
            let mut rotated = false;
            for p in 0..cols {
                for q in p + 1..cols {
                    rotated |= column_rotate(&mut w, &mut v, rows, cols, p, q);
                }
            }
            if !rotated {
                converged = true;
                break;
            }
        }
        if !converged {
            info[batch] = 1;
        }
        // Singular values (column norms), descending; the left vectors are
        // the normalised columns.
        let norms: Vec<f64> = (0..cols)
            .map(|j| {
                (0..rows)
                    .map(|i| w[i * cols + j].abs2())
                    .sum::<f64>()
                    .sqrt()
            })
            .collect();
        let mut order: Vec<usize> = (0..cols).collect();
        order.sort_by(|&i, &j| norms[j].total_cmp(&norms[i]));
        // Left vectors of w (rows x rows when completed), right ones (cols x cols).
        // Left vectors of w: all `rows` of them (a full basis) only when the
        // caller asked for it (so the declared result bounds the size),
        // else the `cols` that pair with singular values.
        let lc = if full { rows } else { cols };
        let mut left = vec![T::ZERO; rows * lc];
        let mut filled = vec![false; lc];
        for (c, &j) in order.iter().enumerate() {
            s_all[batch * k + c] = norms[j];
            if norms[j] > 0.0 {
                let inv = T::from_real(1.0 / norms[j]);
                for i in 0..rows {
                    left[i * lc + c] = w[i * cols + j] * inv;
                }
                filled[c] = true;
            }
        }
        complete_basis(&mut left, rows, lc, &mut filled);
        let right = |i: usize, c: usize| v[i * cols + order[c]];
        // a = w (tall) = left S right^H; a = w^H (wide) = right S left^H.
        let ub = &mut u_all[batch * m * u_cols..(batch + 1) * m * u_cols];
        let vtb = &mut vt_all[batch * vt_rows * n..(batch + 1) * vt_rows * n];
        if !wide {
            for i in 0..m {
                for c in 0..u_cols {
                    ub[i * u_cols + c] = left[i * lc + c];
                }
            }
            for r in 0..vt_rows {
                for j in 0..n {
                    vtb[r * n + j] = right(j, r).conj();
                }
            }
        } else {
            // U = right (m x m = cols x cols), V = left (n x n = rows x rows).
            for i in 0..m {
                for c in 0..u_cols {
                    ub[i * u_cols + c] = right(i, c);
                }
            }
            for r in 0..vt_rows {
                for j in 0..n {
                    vtb[r * n + j] = left[j * lc + r].conj();
                }
            }
        }
    }
    (s_all, u_all, vt_all, info)
}

/// One one-sided Jacobi step on columns `p` and `q` of `w` (and of `v`):
/// makes them orthogonal. False if they already were, to working precision.
fn column_rotate<T: Field>(
    w: &mut [T],
    v: &mut [T],
    rows: usize,
    cols: usize,
    p: usize,
    q: usize,
) -> bool {
    let (mut alpha, mut beta, mut gamma) = (0.0, 0.0, T::ZERO);
    for i in 0..rows {
        let (a, b) = (w[i * cols + p], w[i * cols + q]);
        alpha += a.abs2();
        beta += b.abs2();
        gamma = gamma + a.conj() * b;
    }
    let g = gamma.abs2().sqrt();
    if g == 0.0 || g <= f64::EPSILON * rows as f64 * (alpha * beta).sqrt() {
        return false;
    }
    // Turn column q's phase so that gamma is real, then rotate.
    let e = (gamma / T::from_real(g)).conj();
    scale_column(w, cols, q, e);
    scale_column(v, cols, q, e);
    let (c, s) = jacobi_angle((beta - alpha) / (2.0 * g));
    rotate_columns(w, cols, (p, q), (c, s));
    rotate_columns(v, cols, (p, q), (c, s));
    true
}

/// Fills the columns of the `rows x cols` matrix `q` (`cols <= rows`) not
/// yet `filled` so that all are orthonormal: each time the unit vector
/// farthest from the span of the columns so far, orthogonalised (twice)
/// against them. Its residual has squared length `1 - sum_d |q[i, d]|^2`,
/// which sums to the number of missing columns over the `rows` unit
/// vectors, so the farthest keeps at least `1 / rows` of it.
fn complete_basis<T: Field>(q: &mut [T], rows: usize, cols: usize, filled: &mut [bool]) {
    for c in 0..cols {
        if filled[c] {
            continue;
        }
        let done: Vec<usize> = (0..cols).filter(|&d| filled[d]).collect();
        let residual = |i: usize| 1.0 - done.iter().map(|&d| q[i * cols + d].abs2()).sum::<f64>();
        let Some(best) = (0..rows).max_by(|&a, &b| residual(a).total_cmp(&residual(b))) else {
            return;
        };
        let mut x = vec![T::ZERO; rows];
        x[best] = T::ONE;
        for _ in 0..2 {
            for &d in &done {
                let dot = (0..rows).fold(T::ZERO, |acc, i| acc + q[i * cols + d].conj() * x[i]);
                for (i, xi) in x.iter_mut().enumerate() {
                    *xi = *xi - q[i * cols + d] * dot;
                }
            }
        }
        let norm = x.iter().map(|e| e.abs2()).sum::<f64>().sqrt();
        if norm > 0.0 {
            for (i, xi) in x.into_iter().enumerate() {
                q[i * cols + c] = xi / T::from_real(norm);
            }
        }
        filled[c] = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_basis_finds_the_last_directions() {
        // Five columns of a dense orthogonal matrix (a reflector): every
        // unit vector keeps well under half its length off their span.
        let v = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let vv: f64 = v.iter().map(|x| x * x).sum();
        let n = 6;
        let mut q = vec![0.0f64; n * n];
        for i in 0..n {
            for j in 0..5 {
                q[i * n + j] = f64::from(u8::from(i == j)) - 2.0 * v[i] * v[j] / vv;
            }
        }
        let mut filled = [true, true, true, true, true, false];
        complete_basis(&mut q, n, n, &mut filled);
        assert!(filled.iter().all(|&f| f));
        for a in 0..n {
            for b in 0..n {
                let g: f64 = (0..n).map(|i| q[i * n + a] * q[i * n + b]).sum();
                let want = f64::from(u8::from(a == b));
                assert!((g - want).abs() < 1e-12, "({a}, {b}): {g}");
            }
        }
    }

    #[test]
    fn names() {
        assert_eq!(
            routine("lapack_spotrf_ffi"),
            Some((Routine::Potrf, PrimitiveType::F32))
        );
        assert_eq!(
            routine("lapack_zgetrf_ffi"),
            Some((Routine::Getrf, PrimitiveType::C128))
        );
        assert_eq!(
            routine("lapack_dtrsm_ffi"),
            Some((Routine::Trsm, PrimitiveType::F64))
        );
        assert_eq!(routine("lapack_spotrf"), None);
        assert_eq!(routine("lapack_xpotrf_ffi"), None);
        assert_eq!(routine("lapack_sgeev_ffi"), None);
        assert_eq!(
            routine("lapack_cungqr_ffi"),
            Some((Routine::Orgqr, PrimitiveType::C64))
        );
        assert_eq!(routine("lapack_corgqr_ffi"), None);
        assert_eq!(
            routine("lapack_zheevd_ffi"),
            Some((Routine::Syevd, PrimitiveType::C128))
        );
        assert_eq!(
            routine("lapack_ssyevd_ffi").map(|r| r.0),
            Some(Routine::Syevd)
        );
        assert_eq!(routine("lapack_csyevd_ffi"), None);
        assert_eq!(routine("lapack__ffi"), None);
    }

    #[test]
    fn flags() {
        let config = "{diag = 78 : ui8, side = 76 : ui8, trans_x = 84 : ui8, uplo = 85 : ui8}";
        assert_eq!(flag(config, "diag").ok(), Some(b'N'));
        assert_eq!(flag(config, "side").ok(), Some(b'L'));
        assert_eq!(flag(config, "trans_x").ok(), Some(b'T'));
        assert_eq!(flag(config, "uplo").ok(), Some(b'U'));
        assert!(flag(config, "alpha").is_err());
        assert!(flag("{uplo = x : ui8}", "uplo").is_err());
        assert!(flag("", "uplo").is_err());
    }

    #[test]
    fn potrf_both_triangles_and_failure() {
        // [[4, 2], [2, 5]] = L L^T with L = [[2, 0], [1, 2]].
        let a = vec![4.0, 2.0, 2.0, 5.0];
        let (l, info) = potrf::<f64>(a.clone(), 1, 2, true);
        assert_eq!((l, info), (vec![2.0, 2.0, 1.0, 2.0], vec![0]));
        let (u, info) = potrf::<f64>(a, 1, 2, false);
        assert_eq!((u, info), (vec![2.0, 1.0, 2.0, 2.0], vec![0]));
        // The second leading minor of [[1, 2], [2, 1]] is -3.
        let (f, info) = potrf::<f64>(vec![1.0, 2.0, 2.0, 1.0], 1, 2, true);
        assert_eq!(info, vec![2]);
        assert_eq!(f, vec![1.0, 2.0, 2.0, -3.0]);
        // Hermitian: [[4, 2i], [-2i, 5]] = L L^H with L = [[2, 0], [-i, 2]].
        let c = |re, im| Complex64::new(re, im);
        let h = vec![c(4.0, 0.0), c(0.0, 2.0), c(0.0, -2.0), c(5.0, 0.0)];
        let (l, info) = potrf::<Complex64>(h, 1, 2, true);
        assert_eq!(info, vec![0]);
        assert_eq!(l[2], c(0.0, -1.0));
        assert_eq!(l[3], c(2.0, 0.0));
    }

    #[test]
    fn qr_reflectors_and_q() {
        // [[3, 1], [4, 2]]: |(3, 4)| = 5, beta = -5, tau = 8/5, v = (1, 4/8).
        let (qr, tau) = geqrf::<f64>(vec![3.0, 1.0, 4.0, 2.0], 1, 2, 2);
        assert_eq!(qr[0], -5.0);
        assert_eq!(qr[2], 0.5);
        assert_eq!(tau[0], 1.6);
        // R = Q^T A: r12 = -(3 + 8) / 5, r22 = (-4 + 6) / 5, which the
        // second (1 x 1) reflector leaves (x = 0: tau = 0).
        assert!((qr[1] + 2.2).abs() < 1e-15 && (qr[3] - 0.4).abs() < 1e-15);
        assert_eq!(tau[1], 0.0);
        // Q = I - tau v v^T = [[-3/5, -4/5], [-4/5, 3/5]].
        let q = orgqr::<f64>(&qr, &tau, 1, 2, 2, 2);
        let want = [-0.6, -0.8, -0.8, 0.6];
        assert!(
            q.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-15),
            "{q:?}"
        );
        // A tall matrix: Q (4 x 2) has orthonormal columns and Q R = A.
        let a = vec![1.0, 2.0, -1.0, 0.5, 3.0, 1.0, 2.0, -2.0];
        let (qr, tau) = geqrf::<f64>(a.clone(), 1, 4, 2);
        let q = orgqr::<f64>(&qr, &tau, 1, 4, 2, 2);
        for i in 0..4 {
            for j in 0..2 {
                let r = |p: usize, j: usize| if p <= j { qr[p * 2 + j] } else { 0.0 };
                let v: f64 = (0..2).map(|p| q[i * 2 + p] * r(p, j)).sum();
                assert!((v - a[i * 2 + j]).abs() < 1e-14);
            }
        }
        let dot: f64 = (0..4).map(|i| q[i * 2] * q[i * 2 + 1]).sum();
        assert!(dot.abs() < 1e-15);
    }

    #[test]
    fn eigen_decompositions() {
        // [[2, 1], [1, 2]]: eigenvalues 1 and 3, vectors (1, -1) and (1, 1) / sqrt 2.
        let (v, w, info) = syevd::<f64>(vec![2.0, 1.0, 1.0, 2.0], 1, 2, true);
        assert_eq!(info, vec![0]);
        assert!(
            (w[0] - 1.0).abs() < 1e-15 && (w[1] - 3.0).abs() < 1e-15,
            "{w:?}"
        );
        let h = std::f64::consts::FRAC_1_SQRT_2;
        assert!(
            (v[0].abs() - h).abs() < 1e-15 && (v[2] + v[0]).abs() < 1e-15,
            "{v:?}"
        );
        assert!((v[1] - v[3]).abs() < 1e-15);
        // Only the selected triangle is read.
        let (_, w, _) = syevd::<f64>(vec![2.0, 99.0, 1.0, 2.0], 1, 2, true);
        assert!((w[0] - 1.0).abs() < 1e-15);
        let (_, w, _) = syevd::<f64>(vec![2.0, 1.0, 99.0, 2.0], 1, 2, false);
        assert!((w[1] - 3.0).abs() < 1e-15);
        // Hermitian [[2, i], [-i, 2]]: eigenvalues 1 and 3; A v = w v.
        let c = |re, im| Complex64::new(re, im);
        let a = vec![c(2.0, 0.0), c(0.0, 1.0), c(0.0, -1.0), c(2.0, 0.0)];
        let (v, w, info) = syevd::<Complex64>(a.clone(), 1, 2, true);
        assert_eq!(info, vec![0]);
        assert!(
            (w[0] - 1.0).abs() < 1e-15 && (w[1] - 3.0).abs() < 1e-15,
            "{w:?}"
        );
        for col in 0..2 {
            for row in 0..2 {
                let av: Complex64 = (0..2).map(|k| a[row * 2 + k] * v[k * 2 + col]).sum();
                assert!((av - v[row * 2 + col] * w[col]).norm() < 1e-14);
            }
        }
        // A NaN never converges: info 1, not a hang.
        let (_, _, info) = syevd::<f64>(vec![1.0, f64::NAN, f64::NAN, 1.0], 1, 2, true);
        assert_eq!(info, vec![1]);
    }

    /// `u diag(s) vt` of `gesdd`'s outputs.
    fn rebuild(s: &[f64], u: &[f64], vt: &[f64], m: usize, n: usize, full: bool) -> Vec<f64> {
        let k = m.min(n);
        let u_cols = if full { m } else { k };
        (0..m * n)
            .map(|e| {
                let (i, j) = (e / n, e % n);
                (0..k)
                    .map(|c| u[i * u_cols + c] * s[c] * vt[c * n + j])
                    .sum()
            })
            .collect()
    }

    #[test]
    fn singular_value_decompositions() {
        // diag(3, -4) padded: singular values 4, 3.
        let a = vec![3.0, 0.0, 0.0, -4.0, 0.0, 0.0];
        for full in [false, true] {
            let (s, u, vt, info) = gesdd::<f64>(&a, 1, 3, 2, full);
            assert_eq!(info, vec![0]);
            assert_eq!(s, vec![4.0, 3.0]);
            let back = rebuild(&s, &u, &vt, 3, 2, full);
            assert!(
                back.iter().zip(&a).all(|(x, y)| (x - y).abs() < 1e-15),
                "{back:?}"
            );
            if full {
                // The third column of U completes the basis: e3 up to sign.
                assert_eq!(u[2 * 3 + 2].abs(), 1.0);
            }
        }
        // Wide, rank one: [[1, 2, 2], [2, 4, 4]] = 3 sqrt 5 u v^T.
        let a = vec![1.0, 2.0, 2.0, 2.0, 4.0, 4.0];
        let (s, u, vt, _) = gesdd::<f64>(&a, 1, 2, 3, true);
        assert!(
            (s[0] - 3.0 * 5f64.sqrt()).abs() < 1e-14 && s[1].abs() < 1e-14,
            "{s:?}"
        );
        let back = rebuild(&s, &u, &vt, 2, 3, true);
        assert!(back.iter().zip(&a).all(|(x, y)| (x - y).abs() < 1e-14));
        // V^H is unitary (3 x 3) even past the rank.
        for r in 0..3 {
            for t in 0..3 {
                let d: f64 = (0..3).map(|j| vt[r * 3 + j] * vt[t * 3 + j]).sum();
                assert!((d - f64::from(r == t)).abs() < 1e-14);
            }
        }
        // Complex: [[1, i], [0, 1]] has singular values (sqrt 5 +- 1) / 2.
        let c = |re, im| Complex64::new(re, im);
        let z = vec![c(1.0, 0.0), c(0.0, 1.0), c(0.0, 0.0), c(1.0, 0.0)];
        let (s, u, vt, _) = gesdd::<Complex64>(&z, 1, 2, 2, false);
        let r5 = 5f64.sqrt();
        assert!((s[0] - (r5 + 1.0) / 2.0).abs() < 1e-15 && (s[1] - (r5 - 1.0) / 2.0).abs() < 1e-15);
        for (e, &want) in z.iter().enumerate() {
            let (i, j) = (e / 2, e % 2);
            let v: Complex64 = (0..2).map(|k| u[i * 2 + k] * s[k] * vt[k * 2 + j]).sum();
            assert!((v - want).norm() < 1e-14);
        }
        // Reduced and rank-deficient: the zero column's left vector still
        // completes an orthonormal pair.
        let a = vec![1.0, 0.0, 2.0, 0.0, 2.0, 0.0];
        let (s, u, _, _) = gesdd::<f64>(&a, 1, 3, 2, false);
        assert_eq!(s, vec![3.0, 0.0]);
        for (p, q) in [(0, 0), (0, 1), (1, 1)] {
            let d: f64 = (0..3).map(|i| u[i * 2 + p] * u[i * 2 + q]).sum();
            assert!((d - f64::from(p == q)).abs() < 1e-15, "{u:?}");
        }
        // Tall and thin: only the thin factor is built (a full 100000 x
        // 100000 one would not fit in memory).
        let tall: Vec<f64> = (0..200_000).map(|i| ((i * 7919) % 1000) as f64).collect();
        let (s, u, _, _) = gesdd::<f64>(&tall, 1, 100_000, 2, false);
        assert_eq!(u.len(), 200_000);
        assert!(s[0] >= s[1] && s[1] > 0.0);
        let (_, _, _, info) = gesdd::<f64>(&[f64::INFINITY, 0.0, 0.0, 1.0], 1, 2, 2, false);
        assert_eq!(info, vec![1]);
    }

    #[test]
    fn tridiagonal_solves() {
        // [[2, 1, 0], [1, 2, 1], [0, 1, 2]] x = (4, 8, 8): x = (1, 2, 3)
        // (dl[0] and du[2] are outside the matrix).
        let (parts, info) = gtsv::<f64>(
            [
                vec![0.0, 1.0, 1.0],
                vec![2.0; 3],
                vec![1.0, 1.0, 0.0],
                vec![4.0, 8.0, 8.0],
            ],
            1,
            3,
            1,
        );
        assert_eq!(info, vec![0]);
        assert!(
            parts[3]
                .iter()
                .zip([1.0, 2.0, 3.0])
                .all(|(x, y)| (x - y).abs() < 1e-15),
            "{:?}",
            parts[3]
        );
        // A zero first pivot forces a row interchange:
        // [[0, 1], [1, 1]] x = (2, 3): x = (1, 2); two right-hand sides.
        let (parts, info) = gtsv::<f64>(
            [
                vec![0.0, 1.0],
                vec![0.0, 1.0],
                vec![1.0, 0.0],
                vec![2.0, 1.0, 3.0, 1.0],
            ],
            1,
            2,
            2,
        );
        assert_eq!(info, vec![0]);
        assert_eq!(parts[3], vec![1.0, 0.0, 2.0, 1.0]);
        // Singular: [[1, 1], [1, 1]].
        let (_, info) = gtsv::<f64>(
            [
                vec![0.0, 1.0],
                vec![1.0, 1.0],
                vec![1.0, 0.0],
                vec![1.0, 1.0],
            ],
            1,
            2,
            1,
        );
        assert_eq!(info, vec![2]);
    }

    #[test]
    fn getrf_pivots_like_lapack() {
        // [[1, 2], [3, 4]]: pivot row 2; L = [[1, 0], [1/3, 1]], U = [[3, 4], [0, 2/3]].
        let (lu, piv, info) = getrf::<f64>(vec![1.0, 2.0, 3.0, 4.0], 1, 2, 2);
        assert_eq!(piv, vec![2, 2]);
        assert_eq!(info, vec![0]);
        assert_eq!(lu[0..2], [3.0, 4.0]);
        assert!((lu[2] - 1.0 / 3.0).abs() < 1e-15);
        assert!((lu[3] - 2.0 / 3.0).abs() < 1e-15);
        // A singular matrix: the second pivot is exactly zero.
        let (_, piv, info) = getrf::<f64>(vec![1.0, 2.0, 2.0, 4.0], 1, 2, 2);
        assert_eq!(piv, vec![2, 2]);
        assert_eq!(info, vec![2]);
        // Wide and tall matrices take min(m, n) pivots.
        let (_, piv, _) = getrf::<f64>(vec![0.0, 1.0, 2.0, 5.0, 1.0, 0.0], 1, 2, 3);
        assert_eq!(piv, vec![2, 2]);
        // [[1, 0], [3, 1], [-7, 2]]: row 3 first; then column 2 below is
        // 1 + 6/7 (row 2) and 2/7 (row 3, formerly row 1).
        let (lu, piv, _) = getrf::<f64>(vec![1.0, 0.0, 3.0, 1.0, -7.0, 2.0], 1, 3, 2);
        assert_eq!(piv, vec![3, 2]);
        assert_eq!(lu[0..2], [-7.0, 2.0]);
        assert!((lu[3] - 13.0 / 7.0).abs() < 1e-15);
    }
}
