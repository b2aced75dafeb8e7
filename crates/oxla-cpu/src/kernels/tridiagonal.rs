//! The symmetric tridiagonal eigenproblem by divide and conquer (LAPACK's
//! `stedc`): Cuppen's method with the deflation of `laed2`, the secular
//! equation solved per root from its nearer pole, and the eigenvectors
//! computed from Gu and Eisenstat's recomputed `z` (so they come out
//! orthogonal however close the roots are).
//!
//! The matrix is split in halves by a rank-one tear, each half solved
//! recursively (by implicit QL once small), and the halves' eigenvectors
//! `Q = diag(Q1, Q2)` merged with the eigenvectors `U` of `D + rho z z^T`
//! as one matrix product `Q U`. Most of the arithmetic is in that product,
//! which is why this beats QL's rotations for all but small matrices.
//! The scalar work of a merge (roots, `z`, `U`) is in f64.

use super::dense::{Operand, Real, product};
use super::orthogonal::tridiagonal_ql;
use std::cmp::Ordering;

/// Subproblems up to this size are solved by implicit QL (LAPACK: 25).
const SMALL: usize = 32;
/// Subproblems from this size solve their halves on two threads.
const PARALLEL_MIN: usize = 128;
/// Root-finding steps per root; every step at least halves the bracket
/// unless the rational model lands inside it, so this is never reached
/// in practice.
const MAX_STEPS: usize = 200;

/// The eigenvalues (ascending, into `d`) and eigenvectors (the columns of
/// the returned `n x n` row-major matrix, `n = d.len()`) of the symmetric
/// tridiagonal matrix with diagonal `d` and off-diagonal `e` (`e[i]`
/// couples `i` and `i + 1`). `None` if some element is not finite or a QL
/// base case did not converge.
pub(crate) fn stedc<T: Real>(d: &mut [T], e: &[T]) -> Option<Vec<T>> {
    let n = d.len();
    let e = e.get(..n.saturating_sub(1))?;
    let finite = |x: &T| x.to_f64().is_finite();
    if !d.iter().all(finite) || !e.iter().all(finite) {
        return None;
    }
    // Scale to a largest element near 1 (by a power of two, exactly), as
    // `stedc` does: the deflation tolerance is absolute.
    let norm = d.iter().chain(e).fold(0f64, |m, x| m.max(x.to_f64().abs()));
    let mut q = vec![T::ZERO; n * n];
    if norm == 0.0 {
        for i in 0..n {
            q[i * n + i] = T::ONE;
        }
        return Some(q);
    }
    let exponent = norm.log2().floor() as i32;
    let (down, up) = (
        T::from_f64(2f64.powi(-exponent)),
        T::from_f64(2f64.powi(exponent)),
    );
    let e: Vec<T> = e.iter().map(|&x| x * down).collect();
    for x in d.iter_mut() {
        *x = *x * down;
    }
    let ok = divide(d, &e, &mut q, n, (0, 0));
    for x in d.iter_mut() {
        *x = *x * up;
    }
    ok.then_some(q)
}

/// Solves the subproblem with diagonal `d` and off-diagonal `e` into the
/// `s x s` block (`s = d.len()`) at (`row`, `col`) of `q` (row stride
/// `ld`), whose other elements in those rows are left alone.
fn divide<T: Real>(
    d: &mut [T],
    e: &[T],
    q: &mut [T],
    ld: usize,
    (row, col): (usize, usize),
) -> bool {
    let s = d.len();
    if s <= SMALL {
        return small(d, e, q, ld, (row, col));
    }
    // T = diag(T1 - |b| e_last e_last^T, T2 - |b| e_0 e_0^T)
    //     + |b| u u^T,  u = e_{n1-1} + sign(b) e_{n1}.
    let n1 = s / 2;
    let beta = e[n1 - 1];
    let (d1, d2) = d.split_at_mut(n1);
    d1[n1 - 1] = d1[n1 - 1] - beta.abs();
    d2[0] = d2[0] - beta.abs();
    let (e1, e2) = (&e[..n1 - 1], &e[n1..]);
    let (top, bottom) = q.split_at_mut((row + n1) * ld);
    let mut first = || divide(d1, e1, top, ld, (row, col));
    let mut second = || divide(d2, e2, bottom, ld, (0, col + n1));
    let (a, b) = if s >= PARALLEL_MIN {
        rayon::join(first, second)
    } else {
        (first(), second())
    };
    if !(a && b) {
        return false;
    }
    merge_dispatch(d, q, ld, (row, col), n1, beta);
    true
}

/// A small subproblem by implicit QL; eigenvalues ascending.
fn small<T: Real>(
    d: &mut [T],
    e: &[T],
    q: &mut [T],
    ld: usize,
    (row, col): (usize, usize),
) -> bool {
    let s = d.len();
    let mut off = vec![T::ZERO; s];
    off[..s.saturating_sub(1)].copy_from_slice(e);
    // Rows of `zt` are the eigenvectors.
    let mut zt = vec![T::ZERO; s * s];
    for i in 0..s {
        zt[i * s + i] = T::ONE;
    }
    if !tridiagonal_ql(d, &mut off, &mut zt, s) {
        return false;
    }
    let order = ascending(d);
    let values: Vec<T> = order.iter().map(|&i| d[i]).collect();
    d.copy_from_slice(&values);
    for r in 0..s {
        let out = &mut q[(row + r) * ld + col..][..s];
        for (x, &c) in out.iter_mut().zip(&order) {
            *x = zt[c * s + r];
        }
    }
    true
}

/// The indices of `d` in ascending order of value (stable).
fn ascending<T: Real>(d: &[T]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..d.len()).collect();
    order.sort_by(|&a, &b| d[a].partial_cmp(&d[b]).unwrap_or(Ordering::Equal));
    order
}

// The deflation's and the vectors' loops, compiled for the CPU's vectors.
dispatched!(merge_dispatch<T: Real> => merge_body(d: &mut [T], q: &mut [T], ld: usize, at: (usize, usize), n1: usize, beta: T));

/// Merges two solved halves: on entry `d` holds the eigenvalues of both
/// (each half ascending) and the `s x s` block at `at` of `q` their
/// eigenvectors `diag(Q1, Q2)`; on exit, those of the whole.
#[inline(always)]
fn merge_body<T: Real, const WIDE: bool>(
    d: &mut [T],
    q: &mut [T],
    ld: usize,
    (row, col): (usize, usize),
    n1: usize,
    beta: T,
) {
    let s = d.len();
    let at = |r: usize, c: usize| (row + r) * ld + col + c;
    // z = Q^T u / sqrt(2) (a unit vector), rho = 2 |beta|.
    let sign = if beta < T::ZERO { -1.0 } else { 1.0 };
    let rho = 2.0 * beta.to_f64().abs();
    let half = std::f64::consts::FRAC_1_SQRT_2;
    let mut z: Vec<f64> = (0..s)
        .map(|c| {
            if c < n1 {
                q[at(n1 - 1, c)].to_f64() * half
            } else {
                sign * q[at(n1, c)].to_f64() * half
            }
        })
        .collect();
    let mut dd: Vec<f64> = d.iter().map(|x| x.to_f64()).collect();
    let order = ascending(d);

    // Deflation (`laed2`): a negligible z component leaves its pair as it
    // is; two eigenvalues closer than the tolerance (weighted by their z)
    // are rotated so that one z component vanishes.
    let eps = T::EPSILON.to_f64();
    let dmax = dd.iter().fold(0f64, |m, x| m.max(x.abs()));
    let zmax = z.iter().fold(0f64, |m, x| m.max(x.abs()));
    let tol = 8.0 * eps * dmax.max(zmax);
    let mut keep: Vec<usize> = Vec::with_capacity(s);
    let mut deflated: Vec<usize> = Vec::new();
    let mut previous: Option<usize> = None;
    for &c in &order {
        if rho * z[c].abs() <= tol {
            deflated.push(c);
            continue;
        }
        if let Some(p) = previous {
            let r = z[p].hypot(z[c]);
            let (cs, sn) = (z[c] / r, -z[p] / r);
            if ((dd[c] - dd[p]) * cs * sn).abs() <= tol {
                z[c] = r;
                z[p] = 0.0;
                for i in 0..s {
                    let (x, y) = (q[at(i, p)].to_f64(), q[at(i, c)].to_f64());
                    q[at(i, p)] = T::from_f64(cs * x + sn * y);
                    q[at(i, c)] = T::from_f64(cs * y - sn * x);
                }
                let lower = dd[p] * cs * cs + dd[c] * sn * sn;
                dd[c] = dd[p] * sn * sn + dd[c] * cs * cs;
                dd[p] = lower;
                deflated.push(p);
                previous = Some(c);
                continue;
            }
            keep.push(p);
        }
        previous = Some(c);
    }
    keep.extend(previous);

    // The secular equation 1 + sum_j w_j / (dk_j - x) = 0 over the kept
    // eigenvalues (strictly ascending): root i lies in (dk_i, dk_i+1),
    // the last in (dk_k-1, dk_k-1 + sum w).
    let k = keep.len();
    let dk: Vec<f64> = keep.iter().map(|&c| dd[c]).collect();
    let w: Vec<f64> = keep.iter().map(|&c| rho * z[c] * z[c]).collect();
    // delta[i * k + j] = dk_j - root_i.
    let mut delta = vec![0f64; k * k];
    let mut roots = vec![0f64; k];
    if k >= 64 {
        use rayon::prelude::*;
        const CHUNK: usize = 16;
        delta
            .par_chunks_mut(k * CHUNK)
            .zip(roots.par_chunks_mut(CHUNK))
            .enumerate()
            .for_each(|(c, (delta, roots))| roots_dispatch::<T>(&dk, &w, c * CHUNK, delta, roots));
    } else {
        roots_dispatch::<T>(&dk, &w, 0, &mut delta, &mut roots);
    }

    // Gu and Eisenstat: the z for which the computed roots are exact,
    // z_j^2 = prod_i (root_i - dk_j) / (rho' prod_{i != j} (dk_i - dk_j)),
    // pairing the factors so that every ratio is moderate.
    // Row by row of `delta`, every j at once.
    let mut zhat: Vec<f64> = delta[k.saturating_sub(1) * k..]
        .iter()
        .map(|&x| -x)
        .collect();
    for i in 0..k.saturating_sub(1) {
        let row = &delta[i * k..i * k + k];
        let (left, right) = zhat.split_at_mut(i + 1);
        for ((p, &x), &dj) in left.iter_mut().zip(row).zip(&dk) {
            *p *= -x / (dk[i + 1] - dj);
        }
        for ((p, &x), &dj) in right.iter_mut().zip(&row[i + 1..]).zip(&dk[i + 1..]) {
            *p *= -x / (dk[i] - dj);
        }
    }
    for (zh, &c) in zhat.iter_mut().zip(&keep) {
        let magnitude = zh.max(0.0).sqrt();
        *zh = if z[c] < 0.0 { -magnitude } else { magnitude };
    }
    // U's column i is (zhat_j / delta_ij)_j, normalised: row i of `ut`.
    let mut ut = vec![T::ZERO; k * k];
    let mut column = vec![0f64; k];
    for (i, out) in ut.chunks_exact_mut(k.max(1)).enumerate() {
        let row = &delta[i * k..i * k + k];
        for ((x, &zj), &dj) in column.iter_mut().zip(&zhat).zip(row) {
            *x = zj / dj;
        }
        let scale = 1.0 / column.iter().map(|x| x * x).sum::<f64>().sqrt();
        for (o, &x) in out.iter_mut().zip(&column) {
            *o = T::from_f64(x * scale);
        }
    }

    // New eigenvectors: Q_kept U for the roots, the deflated columns as
    // they are; then everything in ascending order of eigenvalue.
    let mut kept = vec![T::ZERO; s * k];
    let mut still = vec![T::ZERO; s * deflated.len()];
    for i in 0..s {
        let src = &q[at(i, 0)..at(i, 0) + s];
        for (x, &c) in kept[i * k..i * k + k].iter_mut().zip(&keep) {
            *x = src[c];
        }
        let nd = deflated.len();
        for (x, &c) in still[i * nd..i * nd + nd].iter_mut().zip(&deflated) {
            *x = src[c];
        }
    }
    let mut merged = vec![T::ZERO; s * k];
    product(
        &mut merged,
        k,
        0,
        (s, k, k),
        Operand::rows(&kept, k, 0),
        Operand::rows(&ut, k, 0).t(),
        false,
    );
    // (value, from the roots?, index): roots first on ties, as they came.
    let mut all: Vec<(f64, bool, usize)> = roots
        .iter()
        .enumerate()
        .map(|(i, &r)| (r, true, i))
        .collect();
    all.extend(deflated.iter().enumerate().map(|(i, &c)| (dd[c], false, i)));
    all.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(Ordering::Equal));
    let nd = deflated.len();
    for (c, &(value, _, _)) in all.iter().enumerate() {
        d[c] = T::from_f64(value);
    }
    for r in 0..s {
        let out = &mut q[at(r, 0)..at(r, 0) + s];
        let (from_roots, from_still) = (&merged[r * k..r * k + k], &still[r * nd..r * nd + nd]);
        for (x, &(_, root, i)) in out.iter_mut().zip(&all) {
            *x = if root { from_roots[i] } else { from_still[i] };
        }
    }
}

// The secular equation's sums, compiled for the CPU's vectors.
dispatched!(roots_dispatch<T: Real> => roots_body(d: &[f64], w: &[f64], first: usize, delta: &mut [f64], roots: &mut [f64]));

/// Roots `first..first + roots.len()` of the secular equation (see
/// [`secular_root`]), and for each its row of `delta`: `d_j - root`,
/// computed from the root's nearer pole so that the small differences are
/// exact.
#[inline(always)]
fn roots_body<T: Real, const WIDE: bool>(
    d: &[f64],
    w: &[f64],
    first: usize,
    delta: &mut [f64],
    roots: &mut [f64],
) {
    let k = d.len();
    for (i, (root, delta)) in roots
        .iter_mut()
        .zip(delta.chunks_exact_mut(k.max(1)))
        .enumerate()
    {
        let (origin, tau) = secular_root::<WIDE>(d, w, first + i);
        for (x, &dj) in delta.iter_mut().zip(d) {
            *x = (dj - d[origin]) - tau;
        }
        *root = d[origin] + tau;
    }
}

/// Root `i` of `1 + sum_j w_j / (d_j - x) = 0` (`d` strictly ascending,
/// `w` positive) as `(origin, tau)`, the root being `d[origin] + tau` with
/// `origin` the nearer pole.
///
/// Each step fits the sums left and right of the root's interval with
/// `a + b / (d_pole - x)` (matching value and slope: Bunch, Nielsen and
/// Sorensen's model, exact when only the two poles matter) and takes the
/// model's root, or bisects the bracket when that root falls outside it.
#[inline(always)]
fn secular_root<const WIDE: bool>(d: &[f64], w: &[f64], i: usize) -> (usize, f64) {
    let k = d.len();
    let last = i + 1 == k;
    // Where the root is relative to the interval's midpoint picks the
    // origin and halves the bracket; the midpoint's sums make the first
    // model step.
    let (origin, mut lo, mut hi, mut tau, mut at_tau) = if last {
        let total: f64 = w.iter().sum();
        (i, 0.0, total, total / 2.0, None)
    } else {
        let gap = d[i + 1] - d[i];
        let s = sums::<WIDE>(d, w, d[i], gap / 2.0, i);
        if 1.0 + s.value >= 0.0 {
            (i, 0.0, gap / 2.0, gap / 2.0, Some(s))
        } else {
            (i + 1, -gap / 2.0, 0.0, -gap / 2.0, Some(s))
        }
    };
    let o = d[origin];
    let pole_a = d[i] - o;
    let pole_b = if last { 0.0 } else { d[i + 1] - o };
    for _ in 0..MAX_STEPS {
        let s = match at_tau.take() {
            Some(s) => s,
            None => sums::<WIDE>(d, w, o, tau, i),
        };
        let f = 1.0 + s.value;
        if f == 0.0 || f.abs() <= 8.0 * f64::EPSILON * (1.0 + s.magnitude) * (k as f64).sqrt() {
            break;
        }
        if f < 0.0 {
            lo = lo.max(tau);
        } else {
            hi = hi.min(tau);
        }
        if hi - lo <= 2.0 * f64::EPSILON * lo.abs().max(hi.abs()) {
            break;
        }
        let next = model_root(&s, tau, pole_a, pole_b, last).filter(|&t| t > lo && t < hi);
        let next = next.unwrap_or((lo + hi) / 2.0);
        let step = (next - tau).abs();
        tau = next;
        if step <= 2.0 * f64::EPSILON * tau.abs() {
            break;
        }
    }
    (origin, tau)
}

/// The sums at `x = origin + tau`: `psi` over the poles up to `i` and
/// `phi` over the rest, their slopes, and the sum of the terms' sizes.
struct Sums {
    value: f64,
    psi: f64,
    psi_slope: f64,
    phi: f64,
    phi_slope: f64,
    magnitude: f64,
}

#[inline(always)]
fn sums<const WIDE: bool>(d: &[f64], w: &[f64], origin: f64, tau: f64, i: usize) -> Sums {
    let (psi, psi_slope) = side::<WIDE>(&d[..=i], &w[..=i], origin, tau);
    let (phi, phi_slope) = side::<WIDE>(&d[i + 1..], &w[i + 1..], origin, tau);
    let magnitude = phi - psi;
    Sums {
        value: psi + phi,
        psi,
        psi_slope,
        phi,
        phi_slope,
        magnitude,
    }
}

/// `(sum t_j, sum t_j / (d_j - x))` with the terms `t_j = w_j / (d_j - x)`
/// at `x = origin + tau`.
#[inline(always)]
fn side<const WIDE: bool>(d: &[f64], w: &[f64], origin: f64, tau: f64) -> (f64, f64) {
    #[cfg(target_arch = "x86_64")]
    if WIDE {
        // SAFETY: WIDE code runs only where AVX-512F was detected.
        return unsafe { side_avx512(d, w, origin, tau) };
    }
    // Eight lanes of partial sums, which vectorise.
    const LANES: usize = 8;
    let (mut value, mut slope) = ([0f64; LANES], [0f64; LANES]);
    let mut dc = d.chunks_exact(LANES);
    let mut wc = w.chunks_exact(LANES);
    for (dx, wx) in (&mut dc).zip(&mut wc) {
        for l in 0..LANES {
            let r = 1.0 / ((dx[l] - origin) - tau);
            let t = wx[l] * r;
            value[l] += t;
            slope[l] += t * r;
        }
    }
    let (mut v, mut sl) = (0.0, 0.0);
    for (&dx, &wx) in dc.remainder().iter().zip(wc.remainder()) {
        let r = 1.0 / ((dx - origin) - tau);
        let t = wx * r;
        v += t;
        sl += t * r;
    }
    (
        value.iter().sum::<f64>() + v,
        slope.iter().sum::<f64>() + sl,
    )
}

/// [`side`] in AVX-512, dividing by a reciprocal estimate refined by two
/// Newton steps (a last-bit difference from division: the sums only steer
/// the root-finding, and the roots are accepted on the residual).
///
/// # Safety
/// The CPU must have AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn side_avx512(d: &[f64], w: &[f64], origin: f64, tau: f64) -> (f64, f64) {
    use std::arch::x86_64::*;
    let n = d.len().min(w.len());
    let (o, t, two) = (
        _mm512_set1_pd(origin),
        _mm512_set1_pd(tau),
        _mm512_set1_pd(2.0),
    );
    let (mut value, mut slope) = (_mm512_setzero_pd(), _mm512_setzero_pd());
    let mut j = 0;
    while j + 8 <= n {
        // SAFETY: j + 8 <= n, inside both slices.
        let (dj, wj) = unsafe {
            (
                _mm512_loadu_pd(d.as_ptr().add(j)),
                _mm512_loadu_pd(w.as_ptr().add(j)),
            )
        };
        let x = _mm512_sub_pd(_mm512_sub_pd(dj, o), t);
        let mut r = _mm512_rcp14_pd(x);
        r = _mm512_mul_pd(r, _mm512_fnmadd_pd(x, r, two));
        r = _mm512_mul_pd(r, _mm512_fnmadd_pd(x, r, two));
        let term = _mm512_mul_pd(wj, r);
        value = _mm512_add_pd(value, term);
        slope = _mm512_fmadd_pd(term, r, slope);
        j += 8;
    }
    let (mut v, mut sl) = (_mm512_reduce_add_pd(value), _mm512_reduce_add_pd(slope));
    for (&dj, &wj) in d[j..n].iter().zip(&w[j..n]) {
        let r = 1.0 / ((dj - origin) - tau);
        let term = wj * r;
        v += term;
        sl += term * r;
    }
    (v, sl)
}

/// The root of the two-pole model of `f` at `tau` (poles at `pole_a` and,
/// unless `last`, `pole_b`, relative to the origin).
#[inline(always)]
fn model_root(s: &Sums, tau: f64, pole_a: f64, pole_b: f64, last: bool) -> Option<f64> {
    let da = pole_a - tau;
    let b1 = s.psi_slope * da * da;
    let a1 = s.psi - b1 / da;
    if last {
        // 1 + a1 + b1 / (pole_a - t) = 0.
        let c = 1.0 + a1 + s.phi;
        return (c > 0.0).then(|| pole_a + b1 / c);
    }
    let db = pole_b - tau;
    let b2 = s.phi_slope * db * db;
    let a2 = s.phi - b2 / db;
    let c = 1.0 + a1 + a2;
    // c (pa - t)(pb - t) + b1 (pb - t) + b2 (pa - t) = 0, as
    // qa t^2 + qb t + qc = 0.
    let qa = c;
    let qb = -(c * (pole_a + pole_b) + b1 + b2);
    let qc = c * pole_a * pole_b + b1 * pole_b + b2 * pole_a;
    if qa == 0.0 {
        return (qb != 0.0).then(|| -qc / qb);
    }
    let disc = qb * qb - 4.0 * qa * qc;
    if disc.is_nan() || disc < 0.0 {
        return None;
    }
    let h = -0.5 * (qb + qb.signum() * disc.sqrt());
    if h == 0.0 {
        return None;
    }
    // The root between the poles.
    let (low, high) = (pole_a.min(pole_b), pole_a.max(pole_b));
    [h / qa, qc / h].into_iter().find(|&t| t > low && t < high)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::kernels::orthogonal::tests::matrix;

    fn random(n: usize, seed: u64) -> Vec<f64> {
        matrix(1, n, seed)
    }

    /// max |T V - V diag(w)| / |T| and max |V^T V - I|.
    fn errors<T: Real>(d: &[f64], e: &[f64], w: &[T], v: &[T]) -> (f64, f64) {
        let n = d.len();
        let norm = d.iter().chain(e).fold(1e-300f64, |m, x| m.max(x.abs()));
        let v = |i: usize, j: usize| v[i * n + j].to_f64();
        let mut residual = 0f64;
        for (j, wj) in w.iter().enumerate() {
            for i in 0..n {
                let mut tv = d[i] * v(i, j);
                if i > 0 {
                    tv += e[i - 1] * v(i - 1, j);
                }
                if i + 1 < n {
                    tv += e[i] * v(i + 1, j);
                }
                residual = residual.max((tv - wj.to_f64() * v(i, j)).abs() / norm);
            }
        }
        let mut orthogonality = 0f64;
        for a in 0..n {
            for b in 0..n {
                let dot: f64 = (0..n).map(|i| v(i, a) * v(i, b)).sum();
                let target = if a == b { 1.0 } else { 0.0 };
                orthogonality = orthogonality.max((dot - target).abs());
            }
        }
        (residual, orthogonality)
    }

    /// Eigenvalues by QL, sorted, for comparison.
    fn ql_values(d: &[f64], e: &[f64]) -> Vec<f64> {
        let n = d.len();
        let mut dq = d.to_vec();
        let mut eq = e.to_vec();
        eq.push(0.0);
        let mut zt = vec![0.0; n * n];
        assert!(tridiagonal_ql(&mut dq, &mut eq, &mut zt, n));
        dq.sort_by(f64::total_cmp);
        dq
    }

    fn check(name: &str, d: &[f64], e: &[f64]) {
        let n = d.len();
        let norm = d.iter().chain(e).fold(1e-300f64, |m, x| m.max(x.abs()));
        let mut w = d.to_vec();
        let v = stedc(&mut w, e).unwrap_or_else(|| panic!("{name}: no result"));
        assert!(w.windows(2).all(|p| p[0] <= p[1]), "{name}: not ascending");
        let (res, orth) = errors(d, e, &w, &v);
        let bound = 1e-13 * (n as f64);
        assert!(
            res < bound && orth < bound,
            "{name} f64: residual {res:e}, orthogonality {orth:e}"
        );
        let ql = ql_values(d, e);
        let diff = w
            .iter()
            .zip(&ql)
            .fold(0f64, |m, (a, b)| m.max((a - b).abs()));
        assert!(
            diff < 1e-13 * n as f64 * norm,
            "{name}: eigenvalues differ from QL's by {diff:e}"
        );
        // The same matrix in f32.
        let d32: Vec<f32> = d.iter().map(|&x| x as f32).collect();
        let e32: Vec<f32> = e.iter().map(|&x| x as f32).collect();
        let mut w32 = d32.clone();
        let v32 = stedc(&mut w32, &e32).unwrap_or_else(|| panic!("{name} f32: no result"));
        let dd: Vec<f64> = d32.iter().map(|&x| x as f64).collect();
        let ee: Vec<f64> = e32.iter().map(|&x| x as f64).collect();
        let (res, orth) = errors(&dd, &ee, &w32, &v32);
        let bound = 2e-6 * (n as f64).sqrt();
        assert!(
            res < bound && orth < bound,
            "{name} f32: residual {res:e}, orthogonality {orth:e}"
        );
    }

    #[test]
    fn random_tridiagonals() {
        for &n in &[1usize, 2, 33, 64, 65, 100, 257] {
            let d = random(n, n as u64);
            let e = random(n.saturating_sub(1), 1000 + n as u64);
            check(&format!("random {n}"), &d, &e);
        }
    }

    #[test]
    fn clustered_and_deflating_spectra() {
        let n = 200;
        // Wilkinson's W+ (pairs of nearly equal eigenvalues), glued.
        let m = 21;
        let d: Vec<f64> = (0..n).map(|i| ((i % m) as f64 - 10.0).abs()).collect();
        let e: Vec<f64> = (0..n - 1)
            .map(|i| if i % m == m - 1 { 1e-8 } else { 1.0 })
            .collect();
        check("glued Wilkinson", &d, &e);
        // The identity with tiny couplings: everything deflates.
        let d = vec![1.0; n];
        let e = vec![1e-18; n - 1];
        check("identity", &d, &e);
        // Exact zeros in e: independent blocks.
        let mut e = random(n - 1, 7);
        for i in (0..n - 1).step_by(37) {
            e[i] = 0.0;
        }
        check("split", &random(n, 8), &e);
        // A repeated eigenvalue of high multiplicity plus a few others
        // (the 1-2-1 Toeplitz matrix has distinct, clustered ones).
        check("toeplitz", &vec![2.0; n], &vec![-1.0; n - 1]);
        // Graded: entries from 1 down to 1e-12.
        let d: Vec<f64> = (0..n)
            .map(|i| 10f64.powf(-12.0 * i as f64 / n as f64))
            .collect();
        let e: Vec<f64> = d[1..].iter().map(|x| x * 0.5).collect();
        check("graded", &d, &e);
        // All zero, and scaled far from 1.
        check("zero", &vec![0.0; 40], &vec![0.0; 39]);
        let d: Vec<f64> = random(90, 3).iter().map(|x| x * 1e30).collect();
        let e: Vec<f64> = random(89, 4).iter().map(|x| x * 1e30).collect();
        check("huge", &d, &e);
    }

    #[test]
    fn not_finite_is_none() {
        let mut d = vec![1.0, f64::NAN, 2.0];
        assert!(stedc(&mut d, &[1.0, 1.0]).is_none());
        let mut d = vec![1.0; 50];
        let mut e = vec![0.5; 49];
        e[30] = f64::INFINITY;
        assert!(stedc(&mut d, &e).is_none());
    }
}
