//! Householder QR (LAPACK's `geqrf` and `orgqr`) and the symmetric
//! eigenproblem (`syevd`) on row-major real matrices.
//!
//! QR works in panels of [`PANEL`] columns: each panel's reflectors are
//! made and applied within the panel one by one, then gathered into a
//! block reflector `I - V T V^T` (LAPACK's `larft`) that updates the rest
//! of the matrix with two matrix products. The eigenproblem reduces the
//! matrix to tridiagonal form with reflectors, accumulates them with the
//! same blocked `orgqr`, and diagonalises the tridiagonal matrix by
//! divide and conquer ([`stedc`]), or when small by implicit QL iterations
//! with Wilkinson shifts, rotating eigenvector rows.

use super::dense::{Operand, Real, product};
use super::sytrd::{Reduced, tridiagonalize};
use super::tridiagonal::stedc;

/// Columns per panel of the blocked QR.
const PANEL: usize = 32;

/// Matrices larger than this are diagonalised by divide and conquer
/// ([`stedc`]), smaller ones by QL.
const DIVIDE_MIN: usize = 32;

/// QL iterations per eigenvalue before `syevd` gives up (as EISPACK).
const MAX_ITERATIONS: usize = 30;

/// `?larfg` on `(alpha, x)`: the reflector `H = I - tau v v^T` with
/// `v = (1, x')` and `H (alpha, x) = (beta, 0)`. `x` becomes `x'`; returns
/// `(tau, beta)`, `tau = 0` (and `beta = alpha`) when `x` is zero.
#[inline(always)]
pub(crate) fn reflector<T: Real>(alpha: T, x: &mut [T]) -> (T, T) {
    // The norm in f64, so that squares of large f32 values cannot overflow.
    let xnorm = x
        .iter()
        .map(|v| v.to_f64() * v.to_f64())
        .sum::<f64>()
        .sqrt();
    if xnorm == 0.0 {
        return (T::ZERO, alpha);
    }
    let norm = alpha.to_f64().hypot(xnorm);
    let beta = T::from_f64(if alpha >= T::ZERO { -norm } else { norm });
    let tau = (beta - alpha) / beta;
    let scale = T::ONE / (alpha - beta);
    for v in x.iter_mut() {
        *v = *v * scale;
    }
    (tau, beta)
}

/// `V`, explicit: the `rows x jb` matrix whose column `c` is the reflector
/// stored below the diagonal of column `col + c` of `a` (row stride `ld`)
/// from row `row + c` on, with its implicit 1 and zeros above.
fn explicit_v<T: Real>(
    a: &[T],
    ld: usize,
    row: usize,
    col: usize,
    rows: usize,
    jb: usize,
) -> Vec<T> {
    let mut v = vec![T::ZERO; rows * jb];
    for i in 0..rows {
        let src = (row + i) * ld + col;
        for c in 0..jb.min(i + 1) {
            v[i * jb + c] = if c == i { T::ONE } else { a[src + c] };
        }
    }
    v
}

/// [`explicit_v`] for reflectors stored in rows: column `c` of the `rows
/// x jb` result is the reflector right of the diagonal of row `j0 + c` of
/// `a` (row stride `ld`).
fn explicit_v_rows<T: Real>(a: &[T], ld: usize, j0: usize, rows: usize, jb: usize) -> Vec<T> {
    let mut v = vec![T::ZERO; rows * jb];
    for c in 0..jb.min(rows) {
        let src = &a[(j0 + c) * ld + j0..(j0 + c) * ld + j0 + rows];
        v[c * jb + c] = T::ONE;
        for (i, &x) in src.iter().enumerate().skip(c + 1) {
            v[i * jb + c] = x;
        }
    }
    v
}

/// `larft` (forward, column-wise): the upper triangular `T` (`jb x jb`)
/// with `H(1) ... H(jb) = I - V T V^T`.
fn block_factor<T: Real>(v: &[T], rows: usize, jb: usize, tau: &[T]) -> Vec<T> {
    let mut t = vec![T::ZERO; jb * jb];
    let mut g = vec![T::ZERO; jb];
    for i in 0..jb {
        t[i * jb + i] = tau[i];
        if tau[i] == T::ZERO || i == 0 {
            continue;
        }
        // g[r] = V[:, r] . V[:, i], r < i (V[:, i] is zero above row i).
        g[..i].fill(T::ZERO);
        for p in i..rows {
            let row = &v[p * jb..p * jb + jb];
            let vi = row[i];
            for (gr, &vr) in g[..i].iter_mut().zip(&row[..i]) {
                *gr = *gr + vr * vi;
            }
        }
        // T[0..i, i] = -tau_i T[0..i, 0..i] g.
        for r in 0..i {
            let s = (r..i).fold(T::ZERO, |s, q| s + t[r * jb + q] * g[q]);
            t[r * jb + i] = -tau[i] * s;
        }
    }
    t
}

/// `C = (I - V op(T) V^T) C` for the `rows x cols` block `C` at (`row`,
/// `col`) of `a` (row stride `ld`): `op(T)` is `T^T` for `Q^T C` (`geqrf`)
/// and `T` for `Q C` (`orgqr`).
fn apply_block<T: Real>(
    a: &mut [T],
    ld: usize,
    (row, col): (usize, usize),
    (rows, cols): (usize, usize),
    v: &[T],
    t: &[T],
    jb: usize,
    transpose_t: bool,
) {
    if rows == 0 || cols == 0 || jb == 0 {
        return;
    }
    let at = row * ld + col;
    let mut w = vec![T::ZERO; jb * cols];
    product(
        &mut w,
        cols,
        0,
        (jb, cols, rows),
        Operand::rows(v, jb, 0).t(),
        Operand::rows(a, ld, at),
        false,
    );
    let tt = Operand::rows(t, jb, 0);
    let mut w2 = vec![T::ZERO; jb * cols];
    product(
        &mut w2,
        cols,
        0,
        (jb, cols, jb),
        if transpose_t { tt.t() } else { tt },
        Operand::rows(&w, cols, 0),
        false,
    );
    product(
        a,
        ld,
        at,
        (rows, cols, jb),
        Operand::rows(v, jb, 0),
        Operand::rows(&w2, cols, 0),
        true,
    );
}

/// LAPACK's `geqrf` on the `m x n` matrix `a` (row stride `n`), in place:
/// R on and above the diagonal, the reflectors below it, `tau` (`min(m,
/// n)` of them).
pub(crate) fn geqrf<T: Real>(a: &mut [T], m: usize, n: usize, tau: &mut [T]) {
    let k = m.min(n);
    if a.len() < m * n || tau.len() < k {
        return;
    }
    let mut column = vec![T::ZERO; m];
    let mut j0 = 0;
    while j0 < k {
        let jb = PANEL.min(k - j0);
        let end = if j0 + jb == k { n } else { j0 + jb };
        for j in j0..j0 + jb {
            let below = &mut column[..m - j - 1];
            for (i, x) in below.iter_mut().enumerate() {
                *x = a[(j + 1 + i) * n + j];
            }
            let (t, beta) = reflector(a[j * n + j], below);
            tau[j] = t;
            for (i, &x) in below.iter().enumerate() {
                a[(j + 1 + i) * n + j] = x;
            }
            a[j * n + j] = beta;
            if t == T::ZERO || j + 1 == end {
                continue;
            }
            // Columns j+1..end: w = t (v^T C), C -= v w.
            let mut wv: Vec<T> = a[j * n + j + 1..j * n + end].to_vec();
            for i in j + 1..m {
                let vi = a[i * n + j];
                for (s, &c) in wv.iter_mut().zip(&a[i * n + j + 1..i * n + end]) {
                    *s = *s + vi * c;
                }
            }
            for s in wv.iter_mut() {
                *s = *s * t;
            }
            for (c, &s) in a[j * n + j + 1..j * n + end].iter_mut().zip(&wv) {
                *c = *c - s;
            }
            for i in j + 1..m {
                let vi = a[i * n + j];
                for (c, &s) in a[i * n + j + 1..i * n + end].iter_mut().zip(&wv) {
                    *c = *c - vi * s;
                }
            }
        }
        if end < n {
            let rows = m - j0;
            let v = explicit_v(a, n, j0, j0, rows, jb);
            let t = block_factor(&v, rows, jb, &tau[j0..j0 + jb]);
            apply_block(a, n, (j0, end), (rows, n - end), &v, &t, jb, true);
        }
        j0 += jb;
    }
}

/// LAPACK's `orgqr`: the first `n` columns of `Q = H(1) ... H(k)` from the
/// reflectors below the diagonal of the first `k` columns of `a` (`m x
/// ld`, row stride `ld`) and `tau`, as an `m x n` matrix (`m >= n >= k`).
pub(crate) fn orgqr<T: Real>(
    a: &[T],
    ld: usize,
    tau: &[T],
    m: usize,
    n: usize,
    k: usize,
) -> Vec<T> {
    let mut q = vec![T::ZERO; m * n];
    for i in 0..n.min(m) {
        q[i * n + i] = T::ONE;
    }
    if k == 0 || k > n || n > m || k > ld || a.len() < m * ld || tau.len() < k {
        return q;
    }
    let mut j0 = (k - 1) / PANEL * PANEL;
    loop {
        let jb = PANEL.min(k - j0);
        let rows = m - j0;
        let v = explicit_v(a, ld, j0, j0, rows, jb);
        let t = block_factor(&v, rows, jb, &tau[j0..j0 + jb]);
        apply_block(&mut q, n, (j0, j0), (rows, n - j0), &v, &t, jb, false);
        if j0 == 0 {
            break;
        }
        j0 -= PANEL;
    }
    q
}

/// `C = Q C` with `Q = H(1) ... H(k)` from the reflectors right of the
/// diagonal of the first `k` rows of `a` (`m x ld`, row stride `ld`; the
/// transpose of `geqrf`'s storage, as the tridiagonal reduction leaves
/// them) and `tau` (LAPACK's `ormqr`, left side, no transpose), `C` the
/// `m x cols` block at (`row`, `col`) of `c` (row stride `ldc`).
#[allow(clippy::too_many_arguments)]
fn apply_q<T: Real>(
    a: &[T],
    ld: usize,
    tau: &[T],
    m: usize,
    k: usize,
    c: &mut [T],
    ldc: usize,
    (row, col): (usize, usize),
    cols: usize,
) {
    if k == 0 || k > m || k > ld || a.len() < m * ld || tau.len() < k {
        return;
    }
    let mut j0 = (k - 1) / PANEL * PANEL;
    loop {
        let jb = PANEL.min(k - j0);
        let rows = m - j0;
        let v = explicit_v_rows(a, ld, j0, rows, jb);
        let t = block_factor(&v, rows, jb, &tau[j0..j0 + jb]);
        apply_block(c, ldc, (row + j0, col), (rows, cols), &v, &t, jb, false);
        if j0 == 0 {
            break;
        }
        j0 -= PANEL;
    }
}

#[inline(always)]
fn hypot<T: Real>(a: T, b: T) -> T {
    T::hypot(a, b)
}

/// LAPACK's `syevd` contract on the `n x n` matrix `a` (row stride `n`),
/// read from its `lower` (or upper) triangle: `a` becomes the orthonormal
/// eigenvectors (in columns) and `w` the eigenvalues, ascending. Returns
/// `false` if the iteration did not converge (a NaN in the matrix).
pub(crate) fn syevd<T: Real>(a: &mut [T], n: usize, lower: bool, w: &mut [T]) -> bool {
    if n == 0 || a.len() < n * n || w.len() < n {
        return true;
    }
    let mut converged = false;
    syevd_dispatch(a, n, lower, w, &mut converged);
    converged
}

// The reduction's and the rotations' loops, compiled for the CPU's vectors.
dispatched!(syevd_dispatch<T: Real> => syevd_body(a: &mut [T], n: usize, lower: bool, w: &mut [T], converged: &mut bool));

#[inline(always)]
fn syevd_body<T: Real, const WIDE: bool>(
    a: &mut [T],
    n: usize,
    lower: bool,
    w: &mut [T],
    converged: &mut bool,
) {
    // The lower triangle of the symmetric matrix (row i, columns ..= i):
    // everything below reads and updates only that half, row by row.
    let mut s = vec![T::ZERO; n * n];
    for i in 0..n {
        for j in 0..=i {
            s[i * n + j] = if lower { a[i * n + j] } else { a[j * n + i] };
        }
    }
    // Tridiagonal reduction (`sytd2`, [`tridiagonalize`]): reflector k
    // maps column k below the diagonal onto its first element; its vector
    // goes to row k of `rows` ((n-1) x (n-1), right of the diagonal).
    let d = w;
    let mut e = vec![T::ZERO; n];
    let m1 = n - 1;
    let mut taus = vec![T::ZERO; m1];
    let mut rows = vec![T::ZERO; m1 * m1];
    let _threads = tridiagonalize(
        &mut s,
        n,
        n,
        &mut Reduced {
            d,
            e: &mut e,
            taus: &mut taus,
            rows: &mut rows,
        },
    );
    if n > DIVIDE_MIN {
        // Divide and conquer: the tridiagonal matrix's eigenvectors V
        // (ascending already), then A's: diag(1, Q') V, the reflectors
        // applied to V's rows 1.. directly.
        let Some(mut v) = stedc(d, &e) else {
            *converged = false;
            return;
        };
        apply_q(&rows, m1, &taus, m1, n - 2, &mut v, n, (1, 0), n);
        a[..n * n].copy_from_slice(&v);
        *converged = true;
        return;
    }
    // Small: Q = diag(1, Q') with Q' the reflectors applied to the
    // identity, then QL, its rotations along the rows of zt = Q^T (the
    // eigenvector estimates).
    let mut q = vec![T::ZERO; n * n];
    for i in 0..n {
        q[i * n + i] = T::ONE;
    }
    let k = n.saturating_sub(2);
    apply_q(&rows, m1, &taus, m1, k, &mut q, n, (1, 1), m1);
    let mut zt = vec![T::ZERO; n * n];
    for i in 0..n {
        for j in 0..n {
            zt[j * n + i] = q[i * n + j];
        }
    }
    *converged = tridiagonal_ql(d, &mut e, &mut zt, n);
    // Ascending order (a selection sort, as LAPACK's `steqr`).
    for i in 0..n {
        let mut min = i;
        for j in i + 1..n {
            if d[j] < d[min] {
                min = j;
            }
        }
        if min != i {
            d.swap(i, min);
            let (top, bottom) = zt.split_at_mut(min * n);
            top[i * n..i * n + n].swap_with_slice(&mut bottom[..n]);
        }
    }
    for i in 0..n {
        for j in 0..n {
            a[i * n + j] = zt[j * n + i];
        }
    }
}

/// Implicit QL with Wilkinson shifts on the symmetric tridiagonal matrix
/// with diagonal `d` and off-diagonal `e` (`e[i]` couples `i` and `i + 1`;
/// `e[n - 1]` unused): `d` becomes the eigenvalues, and every rotation of
/// rows `i`, `i + 1` of the eigenproblem is applied to rows `i`, `i + 1`
/// of `zt`. Returns `false` if some eigenvalue did not converge.
#[inline(always)]
pub(crate) fn tridiagonal_ql<T: Real>(d: &mut [T], e: &mut [T], zt: &mut [T], n: usize) -> bool {
    let two = T::from_f64(2.0);
    if n > 0 {
        e[n - 1] = T::ZERO;
    }
    for l in 0..n {
        let mut iterations = 0;
        loop {
            let mut m = l;
            while m + 1 < n {
                let dd = d[m].abs() + d[m + 1].abs();
                if e[m].abs() <= T::EPSILON * dd {
                    break;
                }
                m += 1;
            }
            if m == l {
                break;
            }
            iterations += 1;
            if iterations > MAX_ITERATIONS {
                return false;
            }
            let mut g = (d[l + 1] - d[l]) / (two * e[l]);
            let mut r = hypot(g, T::ONE);
            let shift = if g >= T::ZERO { r } else { -r };
            g = d[m] - d[l] + e[l] / (g + shift);
            let (mut s, mut c, mut p) = (T::ONE, T::ONE, T::ZERO);
            let mut deflated = false;
            for i in (l..m).rev() {
                let f = s * e[i];
                let b = c * e[i];
                r = hypot(f, g);
                e[i + 1] = r;
                if r == T::ZERO {
                    // Underflow: the matrix split; start over from l.
                    d[i + 1] = d[i + 1] - p;
                    e[m] = T::ZERO;
                    deflated = true;
                    break;
                }
                s = f / r;
                c = g / r;
                g = d[i + 1] - p;
                r = (d[i] - g) * s + two * c * b;
                p = s * r;
                d[i + 1] = g + p;
                g = c * r - b;
                let (top, bottom) = zt.split_at_mut((i + 1) * n);
                let zi = &mut top[i * n..i * n + n];
                let zi1 = &mut bottom[..n];
                for (x, y) in zi.iter_mut().zip(zi1.iter_mut()) {
                    let f = *y;
                    *y = s * *x + c * f;
                    *x = c * *x - s * f;
                }
            }
            if deflated {
                continue;
            }
            d[l] = d[l] - p;
            e[l] = g;
            e[m] = T::ZERO;
        }
    }
    true
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A seeded `m x n` matrix of values in [-1, 1).
    pub(crate) fn matrix(m: usize, n: usize, seed: u64) -> Vec<f64> {
        let mut s = seed.wrapping_add(0x9e3779b97f4a7c15);
        (0..m * n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
            })
            .collect()
    }

    fn matmul(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for p in 0..k {
                for j in 0..n {
                    c[i * n + j] += a[i * k + p] * b[p * n + j];
                }
            }
        }
        c
    }

    fn transpose(a: &[f64], m: usize, n: usize) -> Vec<f64> {
        let mut t = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                t[j * m + i] = a[i * n + j];
            }
        }
        t
    }

    fn max_diff(a: &[f64], b: &[f64]) -> f64 {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max)
    }

    fn identity(n: usize) -> Vec<f64> {
        let mut i = vec![0.0; n * n];
        for k in 0..n {
            i[k * n + k] = 1.0;
        }
        i
    }

    #[test]
    fn qr_reconstructs_with_orthonormal_q() {
        for &(m, n) in &[
            (1, 1),
            (5, 3),
            (3, 5),
            (40, 40),
            (100, 70),
            (70, 100),
            (130, 33),
        ] {
            let a = matrix(m, n, (m * 7 + n) as u64);
            let mut qr = a.clone();
            let k = m.min(n);
            let mut tau = vec![0.0; k];
            geqrf(&mut qr, m, n, &mut tau);
            // Q: m x k (the reflectors live in the first k columns).
            let mut refl = vec![0.0; m * k];
            for i in 0..m {
                refl[i * k..i * k + k].copy_from_slice(&qr[i * n..i * n + k]);
            }
            let q = orgqr(&refl, k, &tau, m, k, k);
            let mut r = vec![0.0; k * n];
            for i in 0..k {
                for j in i..n {
                    r[i * n + j] = qr[i * n + j];
                }
            }
            let diff = max_diff(&matmul(&q, &r, m, k, n), &a);
            assert!(diff < 1e-12, "{m}x{n}: |QR - A| = {diff}");
            let gram = matmul(&transpose(&q, m, k), &q, k, m, k);
            assert!(max_diff(&gram, &identity(k)) < 1e-12, "{m}x{n}: Q^T Q");
        }
    }

    #[test]
    fn qr_of_a_triangular_column_keeps_tau_zero() {
        let mut a = vec![2.0, 1.0, 0.0, 3.0];
        let mut tau = vec![9.0; 2];
        geqrf(&mut a, 2, 2, &mut tau);
        assert_eq!(tau[0], 0.0);
        assert_eq!(a[0], 2.0);
    }

    /// A seeded symmetric `n x n` matrix.
    fn symmetric(n: usize, seed: u64) -> Vec<f64> {
        let g = matrix(n, n, seed);
        (0..n * n)
            .map(|k| (g[k] + g[(k % n) * n + k / n]) / 2.0)
            .collect()
    }

    /// `A V = V diag(w)` and `V^T V = I` to within `tol`.
    fn check_eigen(sym: &[f64], v: &[f64], w: &[f64], tol: f64) {
        let n = w.len();
        let av = matmul(sym, v, n, n, n);
        let mut vw = v.to_vec();
        for row in vw.chunks_exact_mut(n) {
            for (x, &wj) in row.iter_mut().zip(w) {
                *x *= wj;
            }
        }
        assert!(max_diff(&av, &vw) < tol, "{n}: A V = V W");
        let gram = matmul(&transpose(v, n, n), v, n, n, n);
        assert!(max_diff(&gram, &identity(n)) < tol, "{n}: V^T V");
    }

    #[test]
    fn eigh_diagonalises() {
        for &n in &[1usize, 2, 3, 10, 33, 47, 90, 150] {
            let sym = symmetric(n, n as u64 + 3);
            for lower in [true, false] {
                // Garbage in the triangle that is not read.
                let mut a = sym.clone();
                for i in 0..n {
                    for j in 0..n {
                        if (lower && j > i) || (!lower && j < i) {
                            a[i * n + j] = 1e3;
                        }
                    }
                }
                let mut w = vec![0.0; n];
                assert!(syevd(&mut a, n, lower, &mut w));
                assert!(w.windows(2).all(|p| p[0] <= p[1]));
                check_eigen(&sym, &a, &w, 1e-12);
            }
        }
        // Large enough for the reduction's two-thread steps.
        let n = 404;
        let sym = symmetric(n, 11);
        let mut a = sym.clone();
        let mut w = vec![0.0; n];
        assert!(syevd(&mut a, n, true, &mut w));
        check_eigen(&sym, &a, &w, 1e-11);
        // Repeated eigenvalues, and a matrix that is already diagonal.
        let mut a = vec![2.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 2.0];
        let mut w = vec![0.0; 3];
        assert!(syevd(&mut a, 3, true, &mut w));
        assert_eq!(w, vec![1.0, 2.0, 2.0]);
        // A NaN does not converge.
        let mut a = vec![1.0, f64::NAN, f64::NAN, 1.0];
        assert!(!syevd(&mut a, 2, true, &mut [0.0; 2]));
    }
}
