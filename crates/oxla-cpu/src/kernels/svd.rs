//! The singular value decomposition (LAPACK's `gesdd` contract) of
//! row-major real matrices, by Golub and Reinsch's method: Householder
//! reduction to upper bidiagonal form, the reflectors accumulated with the
//! blocked `orgqr`, then implicit shifted QR steps on the bidiagonal matrix
//! whose rotations run along the rows of `U^T` and `V^T` (contiguous here).
//! The reduction visits each row once per column (the left reflector's
//! update, then the right one's), and a second thread applies the
//! rotations batch by batch while the first goes on making them.

use std::sync::mpsc::{Sender, channel};

use super::dense::{Real, dot, dot4};
use super::orthogonal::{orgqr, reflector};

/// QR steps per singular value before giving up.
const MAX_ITERATIONS: usize = 60;

/// The factors of one matrix: singular values (descending), `U` (`m x
/// u_cols`) and `V^T` (`vt_rows x n`), row-major, and whether the
/// iteration converged.
pub(crate) struct Svd<T> {
    pub s: Vec<T>,
    pub u: Vec<T>,
    pub vt: Vec<T>,
    pub converged: bool,
}

/// The SVD of the `m x n` matrix `a` (row stride `n`): with `full`, `U` is
/// `m x m` and `V^T` `n x n`, else `m x k` and `k x n` (`k = min(m, n)`).
pub(crate) fn gesdd<T: Real>(a: &[T], m: usize, n: usize, full: bool) -> Svd<T> {
    let k = m.min(n);
    let (u_cols, vt_rows) = if full { (m, n) } else { (k, k) };
    if k == 0 || a.len() < m * n {
        // No singular values; the vectors of an empty side are identities.
        let eye = |r: usize, c: usize| {
            let mut e = vec![T::ZERO; r * c];
            for i in 0..r.min(c) {
                e[i * c + i] = T::ONE;
            }
            e
        };
        return Svd {
            s: Vec::new(),
            u: eye(m, u_cols),
            vt: eye(vt_rows, n),
            converged: true,
        };
    }
    if m >= n {
        let (s, ut, vt, converged) = tall(a.to_vec(), m, n, full);
        // `ut` rows are U's columns.
        let mut u = vec![T::ZERO; m * u_cols];
        for (j, col) in ut.chunks_exact(m).enumerate() {
            for (i, &x) in col.iter().enumerate() {
                u[i * u_cols + j] = x;
            }
        }
        Svd {
            s,
            u,
            vt,
            converged,
        }
    } else {
        // A^T = U' S V'^T, so A = V' S U'^T: U = V', V^T = U'^T.
        let mut at = vec![T::ZERO; m * n];
        for i in 0..m {
            for j in 0..n {
                at[j * m + i] = a[i * n + j];
            }
        }
        let (s, ut_rows, v_rows, converged) = tall(at, n, m, full);
        let mut u = vec![T::ZERO; m * m];
        for (j, col) in v_rows.chunks_exact(m).enumerate() {
            for (i, &x) in col.iter().enumerate() {
                u[i * m + j] = x;
            }
        }
        let mut vt = ut_rows;
        vt.truncate(vt_rows * n);
        Svd {
            s,
            u,
            vt,
            converged,
        }
    }
}

/// The SVD of a tall `m x n` matrix (`m >= n`): singular values, `U^T`
/// (`m` rows with `full`, else `n`; each of length `m`), `V^T` (`n x n`).
fn tall<T: Real>(a: Vec<T>, m: usize, n: usize, full: bool) -> Factors<T> {
    let mut out = None;
    tall_dispatch(a, m, n, full, &mut out);
    out.unwrap_or_default()
}

/// Singular values, `U^T`, `V^T`, and whether the iteration converged.
type Factors<T> = (Vec<T>, Vec<T>, Vec<T>, bool);

// The reduction's and the rotations' loops, compiled for the CPU's vectors.
dispatched!(tall_dispatch<T: Real> => tall_body(a: Vec<T>, m: usize, n: usize, full: bool, out: &mut Option<Factors<T>>));

#[inline(always)]
fn tall_body<T: Real, const WIDE: bool>(
    mut a: Vec<T>,
    m: usize,
    n: usize,
    full: bool,
    out: &mut Option<Factors<T>>,
) {
    let mut d = vec![T::ZERO; n];
    // e[i] couples columns i - 1 and i (e[0] = 0), as Golub-Reinsch keeps it.
    let mut e = vec![T::ZERO; n];
    let mut tauq = vec![T::ZERO; n];
    let mut taup = vec![T::ZERO; n.saturating_sub(2)];
    let mut column = vec![T::ZERO; m];
    let mut w = vec![T::ZERO; n];
    for j in 0..n {
        // From the left: column j below the diagonal.
        let below = &mut column[..m - j - 1];
        for (i, x) in below.iter_mut().enumerate() {
            *x = a[(j + 1 + i) * n + j];
        }
        let (tau, beta) = reflector(a[j * n + j], below);
        for (i, &x) in below.iter().enumerate() {
            a[(j + 1 + i) * n + j] = x;
        }
        a[j * n + j] = beta;
        d[j] = beta;
        tauq[j] = tau;
        if j + 1 >= n {
            continue;
        }
        // w = tau A^T (1, v) over the columns right of j: the left
        // reflector's update of each row is then `r -= v_i w`.
        let w = &mut w[..n - j - 1];
        let left = tau != T::ZERO;
        if left {
            w.copy_from_slice(&a[j * n + j + 1..j * n + n]);
            for i in j + 1..m {
                let vi = a[i * n + j];
                for (s, &c) in w.iter_mut().zip(&a[i * n + j + 1..i * n + n]) {
                    *s = *s + vi * c;
                }
            }
            for s in w.iter_mut() {
                *s = *s * tau;
            }
            for (c, &s) in a[j * n + j + 1..j * n + n].iter_mut().zip(w.iter()) {
                *c = *c - s;
            }
        }
        // From the right: row j (now updated) right of the superdiagonal.
        let row = j * n;
        let (tau, beta) = {
            let (head, tail) = a[row + j + 1..row + n].split_at_mut(1);
            reflector(head[0], tail)
        };
        a[row + j + 1] = beta;
        e[j + 1] = beta;
        if j + 2 < n {
            taup[j] = tau;
        }
        let right = tau != T::ZERO;
        // Each row below takes the left update and then the right one in
        // one visit, the right reflector's dot products four rows at a
        // time: the same operations in the same order as two sweeps over
        // the rows, with each row read once while it is in cache.
        let (top, bottom) = a.split_at_mut(row + n);
        let v = &top[row + j + 2..row + n];
        let w = &*w;
        let from_left = |r: &mut [T]| {
            if left {
                let vi = r[j];
                for (c, &s) in r[j + 1..].iter_mut().zip(w) {
                    *c = *c - vi * s;
                }
            }
        };
        // r -= tau (r . (1, v)) (1, v).
        let from_right = |r: &mut [T], dot: T| {
            let s = (r[j + 1] + dot) * tau;
            r[j + 1] = r[j + 1] - s;
            for (x, &vi) in r[j + 2..].iter_mut().zip(v) {
                *x = *x - s * vi;
            }
        };
        let mut quads = bottom.chunks_exact_mut(4 * n);
        for quad in &mut quads {
            let (r01, r23) = quad.split_at_mut(2 * n);
            let (r0, r1) = r01.split_at_mut(n);
            let (r2, r3) = r23.split_at_mut(n);
            for r in [&mut *r0, &mut *r1, &mut *r2, &mut *r3] {
                from_left(r);
            }
            if right {
                let sums = dot4([&r0[j + 2..], &r1[j + 2..], &r2[j + 2..], &r3[j + 2..]], v);
                for (r, s) in [r0, r1, r2, r3].into_iter().zip(sums) {
                    from_right(r, s);
                }
            }
        }
        for r in quads.into_remainder().chunks_exact_mut(n) {
            from_left(r);
            if right {
                let s = dot(&r[j + 2..], v);
                from_right(r, s);
            }
        }
    }
    // U = H(0) ... H(n-1), its first `u_rows` columns, as rows of `ut`.
    let u_rows = if full { m } else { n };
    let u = if u_rows == n {
        orgqr(&a, n, &tauq, m, n, n)
    } else {
        let mut refl = vec![T::ZERO; m * m];
        for i in 0..m {
            refl[i * m..i * m + n].copy_from_slice(&a[i * n..i * n + n]);
        }
        orgqr(&refl, m, &tauq, m, m, n)
    };
    let mut ut = vec![T::ZERO; u_rows * m];
    for i in 0..m {
        for j in 0..u_rows {
            ut[j * m + i] = u[i * u_rows + j];
        }
    }
    // V = diag(1, G(0) ... G(n-3)); reflector j acts on coordinates j + 1..
    let mut vt = vec![T::ZERO; n * n];
    vt[0] = T::ONE;
    if n >= 2 {
        let n1 = n - 1;
        let mut refl = vec![T::ZERO; n1 * n1];
        for j in 0..n.saturating_sub(2) {
            for i in 1..n1 - j {
                refl[(j + i) * n1 + j] = a[j * n + j + 1 + i];
            }
        }
        let v = orgqr(&refl, n1, &taup, n1, n1, n.saturating_sub(2));
        for i in 0..n1 {
            for j in 0..n1 {
                vt[(j + 1) * n + i + 1] = v[i * n1 + j];
            }
        }
    }
    let converged = diagonalize(&mut d, &mut e, &mut ut, m, &mut vt, n);
    // Descending order, rows of both factors along.
    for i in 0..n {
        let mut max = i;
        for j in i + 1..n {
            if d[j] > d[max] {
                max = j;
            }
        }
        if max != i {
            d.swap(i, max);
            swap_rows(&mut ut, m, i, max);
            swap_rows(&mut vt, n, i, max);
        }
    }
    *out = Some((d, ut, vt, converged));
}

#[inline(always)]
fn swap_rows<T>(x: &mut [T], len: usize, i: usize, j: usize) {
    let (i, j) = (i.min(j), i.max(j));
    let (top, bottom) = x.split_at_mut(j * len);
    top[i * len..i * len + len].swap_with_slice(&mut bottom[..len]);
}

/// One step of a factor's row transformations: rows `i < j` rotated,
/// `(x_i, x_j) <- (x_i c + x_j s, x_j c - x_i s)`, or with `i == j` row
/// `i` negated.
#[derive(Clone, Copy)]
struct Rotation<T> {
    i: u32,
    j: u32,
    c: T,
    s: T,
}

impl<T> Rotation<T> {
    /// Row indices fit in u32: a factor has as many rows as columns, and
    /// 2^32 squared elements are far beyond any memory.
    fn new(i: usize, j: usize, c: T, s: T) -> Rotation<T> {
        Rotation {
            i: i as u32,
            j: j as u32,
            c,
            s,
        }
    }
}

/// The rotations of the QR iterations, recorded as they are made and
/// sent in batches to the thread that applies them to `U^T` and `V^T`
/// (the scalar recurrence that makes them never reads the factors, so the
/// two run side by side).
struct Recorder<T> {
    left: Vec<Rotation<T>>,
    right: Vec<Rotation<T>>,
    out: Sender<Batch<T>>,
}

/// Left and right rotations, in the order they were made.
type Batch<T> = (Vec<Rotation<T>>, Vec<Rotation<T>>);

/// Rotations recorded before a batch is sent: small enough that the
/// factors follow the recurrence closely, large enough that sending is
/// rare.
const BATCH: usize = 1024;

impl<T: Real> Recorder<T> {
    fn left(&mut self, i: usize, j: usize, c: T, s: T) {
        self.left.push(Rotation::new(i, j, c, s));
        self.flush_if_full();
    }

    fn right(&mut self, i: usize, j: usize, c: T, s: T) {
        self.right.push(Rotation::new(i, j, c, s));
        self.flush_if_full();
    }

    fn flush_if_full(&mut self) {
        if self.left.len() + self.right.len() >= BATCH {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.left.is_empty() && self.right.is_empty() {
            return;
        }
        let batch = (
            std::mem::replace(&mut self.left, Vec::with_capacity(BATCH)),
            std::mem::replace(&mut self.right, Vec::with_capacity(BATCH)),
        );
        // The receiver lives until every batch is applied (see
        // `diagonalize`), so sending cannot fail.
        let _ = self.out.send(batch);
    }
}

// The rotations' loops, compiled for the CPU's vectors.
dispatched!(apply_dispatch<T: Real> => apply_body(x: &mut [T], len: usize, rotations: &[Rotation<T>]));

#[inline(always)]
fn apply_body<T: Real, const WIDE: bool>(x: &mut [T], len: usize, rotations: &[Rotation<T>]) {
    for r in rotations {
        let (i, j) = (r.i as usize, r.j as usize);
        if i == j {
            for v in &mut x[i * len..i * len + len] {
                *v = -*v;
            }
            continue;
        }
        let (top, bottom) = x.split_at_mut(j * len);
        let xi = &mut top[i * len..i * len + len];
        for (y, z) in xi.iter_mut().zip(&mut bottom[..len]) {
            let (yv, zv) = (*y, *z);
            *y = yv * r.c + zv * r.s;
            *z = zv * r.c - yv * r.s;
        }
    }
}

/// Golub-Reinsch QR iterations on the upper bidiagonal matrix with
/// diagonal `w` and superdiagonal `e` (`e[i]` couples `i - 1` and `i`;
/// `e[0]` is zero): `w` becomes the singular values (non-negative), the
/// left rotations are applied to the first `n` rows of `ut` (rows of
/// `m`), the right ones to the rows of `vt` (rows of `n`).
fn diagonalize<T: Real>(
    w: &mut [T],
    e: &mut [T],
    ut: &mut [T],
    m: usize,
    vt: &mut [T],
    n: usize,
) -> bool {
    let (out, batches) = channel::<Batch<T>>();
    let produce = move || {
        let mut factors = Recorder {
            left: Vec::with_capacity(BATCH),
            right: Vec::with_capacity(BATCH),
            out,
        };
        let converged = iterate(w, e, &mut factors, n);
        factors.flush();
        // Dropping `factors` closes the channel, which ends `apply`.
        converged
    };
    let apply = move || {
        for (left, right) in batches {
            apply_dispatch(ut, m, &left);
            apply_dispatch(vt, n, &right);
        }
    };
    // On one thread (a one-thread pool, or a small problem) the recurrence
    // runs first and the batches wait in the channel.
    if m * n >= 1 << 14 {
        rayon::join(produce, apply).0
    } else {
        let converged = produce();
        apply();
        converged
    }
}

/// The iterations of [`diagonalize`], their rotations recorded in
/// `factors`.
fn iterate<T: Real>(w: &mut [T], e: &mut [T], factors: &mut Recorder<T>, n: usize) -> bool {
    let two = T::from_f64(2.0);
    let anorm = (0..n).fold(T::ZERO, |a, i| {
        let v = w[i].abs() + e[i].abs();
        if v > a { v } else { a }
    });
    let negligible = |x: T| x.abs() + anorm == anorm;
    for k in (0..n).rev() {
        let mut iterations = 0;
        loop {
            // The block l..=k: e[l] negligible (split), or w[l - 1]
            // negligible (cancel e[l] first).
            let mut l = k;
            let mut cancel = true;
            loop {
                // e[0] is zero: the block starts at 0 at the latest.
                if l == 0 || negligible(e[l]) {
                    cancel = false;
                    break;
                }
                if negligible(w[l - 1]) {
                    break;
                }
                l -= 1;
            }
            if cancel {
                // w[l - 1] is zero: chase e[l] off with left rotations.
                let nm = l - 1;
                let (mut c, mut s) = (T::ZERO, T::ONE);
                for i in l..=k {
                    let f = s * e[i];
                    e[i] = c * e[i];
                    if negligible(f) {
                        break;
                    }
                    let g = w[i];
                    let h = T::hypot(f, g);
                    w[i] = h;
                    c = g / h;
                    s = -f / h;
                    factors.left(nm, i, c, s);
                }
            }
            let z = w[k];
            if l == k {
                if z < T::ZERO {
                    w[k] = -z;
                    factors.right(k, k, T::ZERO, T::ZERO);
                }
                break;
            }
            iterations += 1;
            if iterations > MAX_ITERATIONS {
                return false;
            }
            // The shift from the bottom 2 x 2 minor.
            let mut x = w[l];
            let nm = k - 1;
            let mut y = w[nm];
            let mut g = e[nm];
            let mut h = e[k];
            let mut f = ((y - z) * (y + z) + (g - h) * (g + h)) / (two * h * y);
            g = T::hypot(f, T::ONE);
            let signed = if f >= T::ZERO { g } else { -g };
            f = ((x - z) * (x + z) + h * ((y / (f + signed)) - h)) / x;
            let (mut c, mut s) = (T::ONE, T::ONE);
            for j in l..=nm {
                let i = j + 1;
                g = e[i];
                y = w[i];
                h = s * g;
                g = c * g;
                let mut z = T::hypot(f, h);
                e[j] = z;
                c = f / z;
                s = h / z;
                f = x * c + g * s;
                g = g * c - x * s;
                h = y * s;
                y = y * c;
                factors.right(j, i, c, s);
                z = T::hypot(f, h);
                w[j] = z;
                if z != T::ZERO {
                    c = f / z;
                    s = h / z;
                }
                f = c * g + s * y;
                x = c * y - s * g;
                factors.left(j, i, c, s);
            }
            e[l] = T::ZERO;
            e[k] = f;
            w[k] = x;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(m: usize, n: usize, seed: u64) -> Vec<f64> {
        let mut s = seed.wrapping_add(0x2545f4914f6cdd1d);
        (0..m * n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
            })
            .collect()
    }

    fn check(a: &[f64], m: usize, n: usize, full: bool) {
        let svd = gesdd(a, m, n, full);
        assert!(svd.converged);
        let k = m.min(n);
        let (u_cols, vt_rows) = if full { (m, n) } else { (k, k) };
        assert_eq!(
            (svd.s.len(), svd.u.len(), svd.vt.len()),
            (k, m * u_cols, vt_rows * n)
        );
        assert!(svd.s.windows(2).all(|p| p[0] >= p[1]) && svd.s.iter().all(|&x| x >= 0.0));
        // U diag(s) V^T = A.
        for i in 0..m {
            for j in 0..n {
                let r: f64 = (0..k)
                    .map(|p| svd.u[i * u_cols + p] * svd.s[p] * svd.vt[p * n + j])
                    .sum();
                assert!(
                    (r - a[i * n + j]).abs() < 1e-12,
                    "{m}x{n} {full}: ({i},{j})"
                );
            }
        }
        // Orthonormal columns of U and rows of V^T.
        for p in 0..u_cols {
            for q in 0..u_cols {
                let g: f64 = (0..m)
                    .map(|i| svd.u[i * u_cols + p] * svd.u[i * u_cols + q])
                    .sum();
                assert!(
                    (g - f64::from(u8::from(p == q))).abs() < 1e-12,
                    "U^T U {m}x{n}"
                );
            }
        }
        for p in 0..vt_rows {
            for q in 0..vt_rows {
                let g: f64 = (0..n).map(|j| svd.vt[p * n + j] * svd.vt[q * n + j]).sum();
                assert!(
                    (g - f64::from(u8::from(p == q))).abs() < 1e-12,
                    "V V^T {m}x{n}"
                );
            }
        }
    }

    #[test]
    fn factors_reconstruct_and_are_orthonormal() {
        for &(m, n) in &[
            (1, 1),
            (3, 1),
            (1, 4),
            (5, 3),
            (3, 5),
            (40, 40),
            (70, 35),
            (35, 70),
        ] {
            let a = matrix(m, n, (m * 31 + n) as u64);
            check(&a, m, n, false);
            check(&a, m, n, true);
        }
    }

    #[test]
    fn rotations_applied_beside_the_recurrence_match_one_thread() {
        // Large enough (m n >= 2^14) that a second thread applies the
        // rotations while the first makes them, and for many batches.
        let (m, n) = (150, 130);
        let a = matrix(m, n, 7);
        let run = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| gesdd(&a, m, n, true))
        };
        let (one, two) = (run(1), run(2));
        assert!(one.converged && two.converged);
        assert_eq!((&one.s, &one.u, &one.vt), (&two.s, &two.u, &two.vt));
        check(&a, m, n, true);
    }

    #[test]
    fn rank_deficient_and_zero_matrices() {
        // Rank one, and all zeros.
        let a: Vec<f64> = (0..6 * 4)
            .map(|k| ((k / 4) as f64 + 1.0) * ((k % 4) as f64 - 1.5))
            .collect();
        check(&a, 6, 4, true);
        let svd = gesdd(&a, 6, 4, false);
        assert!(svd.s[1..].iter().all(|&x| x.abs() < 1e-12));
        check(&[0.0; 12], 3, 4, true);
        let s = gesdd(&[3.0, 0.0, 0.0, -2.0], 2, 2, false).s;
        assert_eq!(s, vec![3.0, 2.0]);
    }
}
