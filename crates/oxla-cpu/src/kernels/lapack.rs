//! The LAPACK custom calls JAX emits on CPU, natively for real matrices
//! (f32 and f64): `lapack_?potrf_ffi` (Cholesky), `lapack_?getrf_ffi` (LU
//! with partial pivoting) and `lapack_?trsm_ffi` (triangular solves), and
//! the `triangular-solve` instruction, by the recursive, product-based
//! routines of `dense.rs`; `lapack_?geqrf_ffi`, `lapack_?orgqr_ffi` (QR)
//! and `lapack_?syevd_ffi` (symmetric eigenproblem) by the blocked
//! Householder routines of `orthogonal.rs`; `lapack_?gesdd_ffi` (SVD) by
//! Golub and Reinsch's method in `svd.rs`. They compute in the element
//! type, as LAPACK does. Everything else (complex matrices, the other
//! routines, malformed calls, whose errors the interpreter words) is left
//! to the interpreter, whose contracts these follow.

use oxla_hlo::ir::{TriangularSolveOptions, TriangularTranspose};
use oxla_hlo::{
    ArrayData, ArrayLiteral, ArrayShape, HloComputation, HloInstruction, NativeType, Opcode,
    PrimitiveType,
};
use rayon::prelude::*;

use super::Kernel;
use super::dense::{self, Real, Triangle};
use super::orthogonal;
use super::svd;
use crate::buffer::Pool;
use crate::value::Value;

/// From this many multiply-adds in all, batch elements run in parallel.
const PARALLEL_MIN_FLOPS: usize = 1 << 20;

/// An operand's elements: read where they are, or the operand's own buffer
/// when the routine overwrites a copy of it and nothing else holds it.
enum Src<'x, T> {
    Shared(&'x [T]),
    Mine(Vec<T>),
}

impl<T: NativeType> Src<'_, T> {
    fn slice(&self) -> &[T] {
        match self {
            Src::Shared(s) => s,
            Src::Mine(v) => v,
        }
    }

    /// The elements in a buffer the routine may overwrite: the operand's
    /// own, else a copy.
    fn into_work(self, pool: &Pool) -> Vec<T> {
        match self {
            Src::Mine(v) => v,
            Src::Shared(s) => {
                let mut w = pool.take::<T>(s.len());
                w.copy_from_slice(s);
                w
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Routine {
    Potrf {
        lower: bool,
    },
    Getrf,
    Trsm(TriangularSolveOptions),
    Geqrf,
    Orgqr,
    Syevd {
        lower: bool,
    },
    /// With `full`, `U` is `m x m` and `V^T` `n x n`.
    Gesdd {
        full: bool,
    },
}

pub(crate) struct LapackKernel {
    routine: Routine,
    name: &'static str,
    batches: usize,
    /// The operand matrix's rows and columns.
    m: usize,
    n: usize,
    /// The right-hand side's rows and columns (trsm); the number of
    /// reflectors in `(k, 0)` (orgqr).
    rhs: (usize, usize),
    /// The result's arrays: the factor (or solution) first.
    outputs: Vec<ArrayShape>,
    tuple: bool,
}

/// `[batch.., rows, cols]` as (batches, rows, cols).
fn matrices(shape: &ArrayShape) -> Option<(usize, usize, usize)> {
    let d = shape
        .dims()
        .iter()
        .map(|&d| usize::try_from(d).ok())
        .collect::<Option<Vec<_>>>()?;
    let [batch @ .., r, c] = d.as_slice() else {
        return None;
    };
    let batches = batch.iter().try_fold(1usize, |p, &d| p.checked_mul(d))?;
    Some((batches, *r, *c))
}

fn is_int_array(shape: &ArrayShape, count: usize) -> bool {
    shape.element_type() == PrimitiveType::S32 && shape.element_count() == Ok(count)
}

pub(crate) fn plan(comp: &HloComputation, instr: &HloInstruction) -> Option<LapackKernel> {
    let operands = instr
        .operands
        .iter()
        .map(|&o| comp.instruction(o).shape.as_array())
        .collect::<Option<Vec<_>>>()?;
    let a = *operands.first()?;
    let ty = a.element_type();
    if !matches!(ty, PrimitiveType::F32 | PrimitiveType::F64)
        || operands.iter().any(|o| o.element_type() != ty)
    {
        return None;
    }
    let (routine, name) = match instr.opcode {
        Opcode::TriangularSolve => (
            Routine::Trsm(instr.attrs.triangular_solve?),
            "triangular-solve",
        ),
        Opcode::CustomCall => {
            let target = instr.attrs.custom_call_target.as_deref()?;
            let routine = target.strip_prefix("lapack_")?.strip_suffix("_ffi")?;
            let expected = if ty == PrimitiveType::F32 { "s" } else { "d" };
            let routine = routine.strip_prefix(expected)?;
            let config = instr.attrs.backend_config.as_deref().unwrap_or("");
            let flag = |key: &str| oxla_interp::lapack_flag(config, key);
            match routine {
                "potrf" => (
                    Routine::Potrf {
                        lower: match flag("uplo")? {
                            b'L' => true,
                            b'U' => false,
                            _ => return None,
                        },
                    },
                    "lapack potrf",
                ),
                "getrf" => (Routine::Getrf, "lapack getrf"),
                "geqrf" => (Routine::Geqrf, "lapack geqrf"),
                "gesdd" => {
                    // Mode N (values only) declares vectors all the same:
                    // full ones, as JAX writes it; they are computed.
                    let u_cols = instr
                        .shape
                        .tuple_shapes()
                        .and_then(|t| t.get(2))
                        .and_then(|u| u.as_array())
                        .and_then(|u| u.dims().last().copied());
                    let rows = a.dims().iter().rev().nth(1).copied();
                    let full = match flag("mode")? {
                        b'A' => true,
                        b'S' => false,
                        b'N' => u_cols.is_some() && u_cols == rows,
                        _ => return None,
                    };
                    (Routine::Gesdd { full }, "lapack gesdd")
                }
                "orgqr" => (Routine::Orgqr, "lapack orgqr"),
                "syevd" => {
                    if !matches!(flag("mode"), None | Some(b'V' | b'N')) {
                        return None;
                    }
                    (
                        Routine::Syevd {
                            lower: match flag("uplo")? {
                                b'L' => true,
                                b'U' => false,
                                _ => return None,
                            },
                        },
                        "lapack syevd",
                    )
                }
                "trsm" => (
                    Routine::Trsm(TriangularSolveOptions {
                        left_side: match flag("side")? {
                            b'L' => true,
                            b'R' => false,
                            _ => return None,
                        },
                        lower: match flag("uplo")? {
                            b'L' => true,
                            b'U' => false,
                            _ => return None,
                        },
                        unit_diagonal: match flag("diag")? {
                            b'U' => true,
                            b'N' => false,
                            _ => return None,
                        },
                        transpose_a: match flag("trans_x")? {
                            b'N' => TriangularTranspose::NoTranspose,
                            b'T' => TriangularTranspose::Transpose,
                            b'C' => TriangularTranspose::Adjoint,
                            _ => return None,
                        },
                    }),
                    "lapack trsm",
                ),
                _ => return None,
            }
        }
        _ => return None,
    };
    let (batches, m, n) = matrices(a)?;
    let outputs: Vec<ArrayShape> = instr.shape.leaves().into_iter().cloned().collect();
    let tuple = instr.shape.tuple_shapes().is_some();
    let same_dims = |s: &ArrayShape, like: &ArrayShape| {
        s.element_type() == like.element_type() && s.dims() == like.dims()
    };
    let mut rhs = (0, 0);
    let fits = match routine {
        Routine::Potrf { .. } => {
            operands.len() == 1
                && m == n
                && tuple
                && matches!(outputs.as_slice(), [f, info]
                    if same_dims(f, a) && is_int_array(info, batches))
        }
        Routine::Getrf => {
            operands.len() == 1
                && tuple
                && matches!(outputs.as_slice(), [f, ipiv, info]
                    if same_dims(f, a)
                        && is_int_array(ipiv, batches * m.min(n))
                        && is_int_array(info, batches))
        }
        Routine::Geqrf => {
            operands.len() == 1
                && tuple
                && matches!(outputs.as_slice(), [f, tau]
                    if same_dims(f, a)
                        && tau.element_type() == ty
                        && tau.element_count() == Ok(batches * m.min(n)))
        }
        Routine::Orgqr => {
            let tau = operands.get(1)?;
            let k = usize::try_from(*tau.dims().last()?).ok()?;
            rhs = (k, 0);
            operands.len() == 2
                && m >= n
                && n >= k
                && tau.element_count() == Ok(batches * k)
                && !tuple
                && matches!(outputs.as_slice(), [q] if same_dims(q, a))
        }
        Routine::Syevd { .. } => {
            operands.len() == 1
                && m == n
                && tuple
                && matches!(outputs.as_slice(), [v, w, info]
                    if same_dims(v, a)
                        && w.element_type() == ty
                        && w.element_count() == Ok(batches * n)
                        && is_int_array(info, batches))
        }
        Routine::Gesdd { full } => {
            let k = m.min(n);
            let (u_cols, vt_rows) = if full { (m, n) } else { (k, k) };
            let matrix = |s: &ArrayShape, r: usize, c: usize| {
                s.element_type() == ty && matrices(s) == Some((batches, r, c))
            };
            operands.len() == 1
                && tuple
                && matches!(outputs.as_slice(), [f, sv, u, vt, info]
                    if same_dims(f, a)
                        && sv.element_type() == ty
                        && sv.element_count() == Ok(batches * k)
                        && matrix(u, m, u_cols)
                        && matrix(vt, vt_rows, n)
                        && is_int_array(info, batches))
        }
        Routine::Trsm(opts) => {
            let b = operands.get(1)?;
            let (b_batches, rows, cols) = matrices(b)?;
            rhs = (rows, cols);
            let solved = if opts.left_side { rows } else { cols };
            operands.len() == 2
                && m == n
                && b_batches == batches
                && a.dims()[..a.dims().len() - 2] == b.dims()[..b.dims().len() - 2]
                && solved == m
                && !tuple
                && matches!(outputs.as_slice(), [x] if same_dims(x, b))
        }
    };
    fits.then_some(LapackKernel {
        routine,
        name,
        batches,
        m,
        n,
        rhs,
        outputs,
        tuple,
    })
}

impl LapackKernel {
    /// [`Self::compute`] on operands of element type `T`: `mine` is an
    /// operand (by index) moved out of `inputs`.
    fn compute_typed<T: Real + NativeType>(
        &self,
        inputs: &[Value<'_>],
        mine: Option<(usize, ArrayLiteral)>,
        pool: &Pool,
    ) -> Result<Vec<ArrayData>, String> {
        let wrong = || format!("{} reads f32 or f64 matrices", self.name);
        let (taken, mut own) = match mine {
            Some((i, array)) => (
                Some(i),
                Some(T::into_vec(array.into_data()).map_err(|_| wrong())?),
            ),
            None => (None, None),
        };
        let mut operand = |i: usize| -> Result<Option<Src<'_, T>>, String> {
            if taken == Some(i) {
                return Ok(own.take().map(Src::Mine));
            }
            match inputs.get(i).and_then(Value::array) {
                Some(a) => T::slice(a.data())
                    .map(|s| Some(Src::Shared(s)))
                    .ok_or_else(wrong),
                None => Ok(None),
            }
        };
        let a = operand(0)?.ok_or_else(|| format!("{} reads an array", self.name))?;
        let b = operand(1)?;
        self.compute(a, b, pool)
    }

    /// Runs on the matrices of `a` (and `b`): the arrays of the result.
    fn compute<T: Real + NativeType>(
        &self,
        a: Src<'_, T>,
        b: Option<Src<'_, T>>,
        pool: &Pool,
    ) -> Result<Vec<ArrayData>, String> {
        let (batches, m, n) = (self.batches, self.m, self.n);
        let size = m * n;
        if a.slice().len() != batches * size {
            return Err(format!("{}: operand of the wrong size", self.name));
        }
        let parallel = batches > 1 && batches * size * m.min(n) >= PARALLEL_MIN_FLOPS;
        match self.routine {
            Routine::Getrf => {
                let k = m.min(n);
                let mut lu = a.into_work(pool);
                let mut pivots = vec![0i32; batches * k];
                let mut info = vec![0i32; batches];
                let one = |((x, p), s): ((&mut [T], &mut [i32]), &mut i32)| {
                    *s = dense::getrf(x, m, n, p);
                };
                if size > 0 && k > 0 {
                    let work = lu
                        .chunks_mut(size)
                        .zip(pivots.chunks_mut(k))
                        .zip(info.iter_mut());
                    each_batch(work, parallel, one);
                }
                Ok(vec![
                    T::wrap(lu),
                    ArrayData::S32(pivots),
                    ArrayData::S32(info),
                ])
            }
            Routine::Potrf { lower } => {
                let mut factor = a.into_work(pool);
                let mut info = vec![0i32; batches];
                let one = |(x, s): (&mut [T], &mut i32)| {
                    *s = cholesky(x, n, lower);
                };
                if size > 0 {
                    let work = factor.chunks_mut(size).zip(info.iter_mut());
                    each_batch(work, parallel, one);
                }
                Ok(vec![T::wrap(factor), ArrayData::S32(info)])
            }
            Routine::Geqrf => {
                let k = m.min(n);
                let mut qr = a.into_work(pool);
                let mut tau = vec![T::ZERO; batches * k];
                let one = |(x, t): (&mut [T], &mut [T])| orthogonal::geqrf(x, m, n, t);
                if size > 0 && k > 0 {
                    let work = qr.chunks_mut(size).zip(tau.chunks_mut(k));
                    each_batch(work, parallel, one);
                }
                Ok(vec![T::wrap(qr), T::wrap(tau)])
            }
            Routine::Orgqr => {
                let tau = b.ok_or_else(|| format!("{} reads tau", self.name))?;
                let (a, tau) = (a.slice(), tau.slice());
                let k = self.rhs.0;
                if tau.len() != batches * k {
                    return Err(format!("{}: tau of the wrong size", self.name));
                }
                let mut q = pool.take::<T>(a.len());
                let one = |((x, t), out): ((&[T], &[T]), &mut [T])| {
                    out.copy_from_slice(&orthogonal::orgqr(x, n, t, m, n, k));
                };
                if size > 0 {
                    // Each batch element's tau (empty when there are no reflectors).
                    let taus = (0..batches).map(|b| &tau[b * k..(b + 1) * k]);
                    let work = a.chunks(size).zip(taus).zip(q.chunks_mut(size));
                    each_batch(work, parallel, one);
                }
                Ok(vec![T::wrap(q)])
            }
            Routine::Syevd { lower } => {
                let mut vectors = a.into_work(pool);
                let mut values = vec![T::ZERO; batches * n];
                let mut info = vec![0i32; batches];
                let one = |((x, w), s): ((&mut [T], &mut [T]), &mut i32)| {
                    *s = i32::from(!orthogonal::syevd(x, n, lower, w));
                };
                if size > 0 {
                    let work = vectors
                        .chunks_mut(size)
                        .zip(values.chunks_mut(n))
                        .zip(info.iter_mut());
                    each_batch(work, parallel, one);
                }
                Ok(vec![
                    T::wrap(vectors),
                    T::wrap(values),
                    ArrayData::S32(info),
                ])
            }
            Routine::Gesdd { full } => {
                let k = m.min(n);
                let (u_cols, vt_rows) = if full { (m, n) } else { (k, k) };
                // The operand is also the first result (LAPACK overwrites it).
                let copy = a.into_work(pool);
                let mut s = vec![T::ZERO; batches * k];
                let mut u = vec![T::ZERO; batches * m * u_cols];
                let mut vt = vec![T::ZERO; batches * vt_rows * n];
                let mut info = vec![0i32; batches];
                let one = |(((x, sv), (u, vt)), status): (
                    ((&[T], &mut [T]), (&mut [T], &mut [T])),
                    &mut i32,
                )| {
                    let f = svd::gesdd(x, m, n, full);
                    sv.copy_from_slice(&f.s);
                    u.copy_from_slice(&f.u);
                    vt.copy_from_slice(&f.vt);
                    *status = i32::from(!f.converged);
                };
                if batches > 0 {
                    // Every part of a batch element, even an empty one.
                    fn parts<T>(v: &mut [T], len: usize, batches: usize) -> Vec<&mut [T]> {
                        if len == 0 {
                            (0..batches).map(|_| &mut [][..]).collect()
                        } else {
                            v.chunks_mut(len).collect()
                        }
                    }
                    let inputs: Vec<&[T]> = (0..batches)
                        .map(|b| &copy[b * size..(b + 1) * size])
                        .collect();
                    let work = inputs
                        .into_iter()
                        .zip(parts(&mut s, k, batches))
                        .zip(parts(&mut u, m * u_cols, batches).into_iter().zip(parts(
                            &mut vt,
                            vt_rows * n,
                            batches,
                        )))
                        .zip(info.iter_mut());
                    each_batch(work, parallel, one);
                }
                Ok(vec![
                    T::wrap(copy),
                    T::wrap(s),
                    T::wrap(u),
                    T::wrap(vt),
                    ArrayData::S32(info),
                ])
            }
            Routine::Trsm(opts) => {
                let b = b.ok_or_else(|| format!("{} reads a right-hand side", self.name))?;
                let (rows, cols) = self.rhs;
                let bsize = rows * cols;
                if b.slice().len() != batches * bsize {
                    return Err(format!("{}: right-hand side of the wrong size", self.name));
                }
                let a = a.slice();
                let mut x = b.into_work(pool);
                if size > 0 && bsize > 0 {
                    let one = |(t, x): (&[T], &mut [T])| trsm(t, x, n, rows, cols, &opts);
                    let work = a.chunks(size).zip(x.chunks_mut(bsize));
                    each_batch(
                        work,
                        batches > 1 && batches * size * rows.max(cols) >= PARALLEL_MIN_FLOPS,
                        one,
                    );
                }
                Ok(vec![T::wrap(x)])
            }
        }
    }
}

/// Runs `one` on each batch element's work, on every thread with `parallel`.
fn each_batch<I: Send>(
    work: impl Iterator<Item = I>,
    parallel: bool,
    one: impl Fn(I) + Sync + Send,
) {
    if parallel {
        work.collect::<Vec<_>>().into_par_iter().for_each(one);
    } else {
        work.for_each(one);
    }
}

/// LAPACK's `potrf` on one `n x n` matrix, in place: the selected triangle
/// becomes the factor (`a = L L^T` or `U^T U`), the other keeps its values.
/// Returns `info`: 0, or the 1-based order of the first leading minor that
/// is not positive definite.
fn cholesky<T: Real>(x: &mut [T], n: usize, lower: bool) -> i32 {
    // Factor a copy (its lower triangle: the operand's, or for `U` the
    // transpose of its upper one), then copy the factor's triangle back.
    let mut work = vec![T::ZERO; n * n];
    for i in 0..n {
        if lower {
            work[i * n..i * n + i + 1].copy_from_slice(&x[i * n..i * n + i + 1]);
        } else {
            for j in 0..=i {
                work[i * n + j] = x[j * n + i];
            }
        }
    }
    let info = match dense::potrf_lower(&mut work, n) {
        Ok(()) => 0,
        Err(j) => j as i32 + 1,
    };
    for i in 0..n {
        if lower {
            x[i * n..i * n + i + 1].copy_from_slice(&work[i * n..i * n + i + 1]);
        } else {
            for j in 0..=i {
                x[j * n + i] = work[i * n + j];
            }
        }
    }
    info
}

/// Solves `op(t) x = b` (left side) or `x op(t) = b` (right side) in place
/// of the `rows x cols` matrix `b`, `t` being `n x n`. Every case becomes a
/// left-side solve with a triangle read as stored: the transposed cases
/// solve with a transposed copy of `t`, the right-side ones transpose `b`
/// (`x op(t) = b` is `op(t)^T x^T = b^T`). For real matrices the adjoint
/// is the transpose.
fn trsm<T: Real>(
    t: &[T],
    b: &mut [T],
    n: usize,
    rows: usize,
    cols: usize,
    opts: &TriangularSolveOptions,
) {
    let transposed = opts.transpose_a != TriangularTranspose::NoTranspose;
    // The triangle to solve with, as a left-side solve: op(t) on the left,
    // op(t)^T on the right.
    let flip = transposed == opts.left_side;
    let owned;
    let tri: &[T] = if flip {
        let mut tt = vec![T::ZERO; n * n];
        for i in 0..n {
            for j in 0..n {
                tt[j * n + i] = t[i * n + j];
            }
        }
        owned = tt;
        &owned
    } else {
        t
    };
    let triangle = Triangle {
        row: 0,
        col: 0,
        n,
        lower: opts.lower != flip,
        unit: opts.unit_diagonal,
    };
    if opts.left_side {
        dense::solve_left(tri, n, triangle, b, cols, cols);
    } else {
        let mut bt = vec![T::ZERO; rows * cols];
        for i in 0..rows {
            for j in 0..cols {
                bt[j * rows + i] = b[i * cols + j];
            }
        }
        dense::solve_left(tri, n, triangle, &mut bt, rows, rows);
        for i in 0..rows {
            for j in 0..cols {
                b[i * cols + j] = bt[j * rows + i];
            }
        }
    }
}

impl Kernel for LapackKernel {
    fn name(&self) -> &'static str {
        self.name
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        let ty = inputs
            .first()
            .and_then(Value::array)
            .ok_or_else(|| format!("{} reads an array", self.name))?
            .element_type();
        // The operand the routine overwrites a copy of: its own buffer
        // instead, when this is its last reader (JAX's calls alias it to
        // the result, as LAPACK works in place).
        let overwritten = match self.routine {
            Routine::Trsm(_) => Some(1),
            Routine::Orgqr => None,
            _ => Some(0),
        };
        let mine = overwritten.and_then(|i| Some((i, inputs.get_mut(i)?.take_unshared()?)));
        let arrays = match ty {
            PrimitiveType::F32 => self.compute_typed::<f32>(inputs, mine, pool)?,
            PrimitiveType::F64 => self.compute_typed::<f64>(inputs, mine, pool)?,
            _ => return Err(format!("{} reads f32 or f64 matrices", self.name)),
        };
        let mut values = Vec::with_capacity(arrays.len());
        for (shape, data) in self.outputs.iter().zip(arrays) {
            let array = ArrayLiteral::new(shape.clone(), data).map_err(|e| e.to_string())?;
            values.push(Value::owned(array));
        }
        match (self.tuple, values.pop()) {
            (false, Some(x)) if values.is_empty() => Ok(x),
            (true, Some(last)) => {
                values.push(last);
                Ok(Value::Tuple(values.into()))
            }
            _ => Err(format!("{} made the wrong number of results", self.name)),
        }
    }
}
