//! Reduction of a symmetric matrix to tridiagonal form with Householder
//! reflectors (LAPACK's `sytd2`, lower triangle), for `syevd`.
//!
//! Each column costs a product of the trailing matrix with the reflector
//! (rows four at a time) and a rank-two update of it: two passes over a
//! triangle of up to 2 MiB (f32, 1024 rows), a thousand times. Large
//! matrices are reduced by a team of two threads that own fixed,
//! interleaved blocks of rows for the whole reduction and meet at a
//! spinning barrier twice a column. A `rayon::join` per step, as before,
//! put the second thread to sleep and woke it (10-20 us a time under this
//! hypervisor) and handed it different rows, whose cache lines then moved
//! between the cores: eigh_1024's reduction took 76 ms that way, 82 on one
//! thread, and about 45 as a team.
//!
//! Blocking the reduction as LAPACK's `sytrd` does (`latrd` panels and a
//! rank-64 `syr2k`) saves the update's pass but was slower here: the
//! product's pass, now the only one, misses L2 as often, and the panel's
//! corrections read one column across all rows.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

use super::dense::{Real, dot};
use super::orthogonal::reflector;

/// Matrices whose lower triangle holds this many bytes or more are
/// reduced by two threads (f32 from 627 rows, f64 from 444): below that
/// the triangle fits one core's L2 and the team's barriers cost about
/// what the second core saves (at 512 f32 rows, 17 ms either way; at 768
/// the team is 10% faster, at 1024 30%).
const TEAM_MIN_BYTES: usize = 768 << 10;

/// The team stops when the trailing matrix has this few rows left; the
/// rest is reduced on one thread.
const TEAM_TAIL: usize = 64;

/// Rows per block; blocks alternate between the team's two threads.
const BLOCK_ROWS: usize = 16;

/// How long the reduction waits for the second thread to start before
/// it reduces the matrix alone.
const PARTNER_WAIT: Duration = Duration::from_micros(200);

/// Spins at a barrier before the thread yields its core.
const SPINS: u32 = 1 << 14;

/// Where the reduction's results go: `d` and `e` the tridiagonal matrix's
/// diagonal and off-diagonal, reflector `k`'s `tau` in `taus[k]` and its
/// vector (without the leading 1) in row `k` of `rows` (row stride `n -
/// 1`), from column `k + 1` on.
pub(crate) struct Reduced<'a, T> {
    pub d: &'a mut [T],
    pub e: &'a mut [T],
    pub taus: &'a mut [T],
    pub rows: &'a mut [T],
}

impl<T: Real> Reduced<'_, T> {
    /// Stores column `k`'s results: its diagonal element, the reflector
    /// `(tau, beta)` and the vector `v` (`v[0]` the implicit 1).
    fn store(&mut self, k: usize, diagonal: T, (tau, beta): (T, T), v: &[T]) {
        let m1 = self.taus.len();
        self.d[k] = diagonal;
        self.e[k] = beta;
        self.taus[k] = tau;
        let row = &mut self.rows[k * m1..(k + 1) * m1];
        row[k + 1..k + v.len()].copy_from_slice(&v[1..]);
    }
}

/// Reduces the `n x n` symmetric matrix whose lower triangle is `s` (row
/// stride `ld`; `s` is overwritten) to `Q^T A Q` tridiagonal, `Q = H(0)
/// ... H(n-3)`, `H(k) = I - tau v v^T` acting on rows `k + 1..`.
/// Returns how many threads shared the work.
pub(crate) fn tridiagonalize<T: Real>(
    s: &mut [T],
    n: usize,
    ld: usize,
    out: &mut Reduced<'_, T>,
) -> usize {
    if n == 0 || ld < n || s.len() < (n - 1) * ld + n || out.d.len() < n || out.e.len() < n {
        return 0;
    }
    let m1 = n - 1;
    if out.taus.len() != m1 || out.rows.len() < m1 * m1 {
        return 0;
    }
    let (mut k0, mut threads) = (0, 1);
    let bytes = n * n / 2 * std::mem::size_of::<T>();
    if bytes >= TEAM_MIN_BYTES && n > TEAM_TAIL + 1 && rayon::current_num_threads() >= 2 {
        k0 = n - 1 - TEAM_TAIL;
        threads = team(s, (n, ld), k0, out);
    }
    serial_dispatch(s, (n, ld), k0, out);
    if n >= 2 {
        out.d[n - 2] = s[(n - 2) * ld + n - 2];
        out.e[n - 2] = s[(n - 1) * ld + n - 2];
    }
    out.d[n - 1] = s[(n - 1) * ld + n - 1];
    threads
}

// The one-thread reduction, compiled for the CPU's vectors.
dispatched!(serial_dispatch<T: Real> => serial_body(s: &mut [T], size: (usize, usize), k0: usize, out: &mut Reduced<'_, T>));

/// Columns `k0..n - 2` on this thread, over the whole matrix.
#[inline(always)]
fn serial_body<T: Real, const WIDE: bool>(
    s: &mut [T],
    (n, ld): (usize, usize),
    k0: usize,
    out: &mut Reduced<'_, T>,
) {
    let mut v = vec![T::ZERO; n];
    let mut p = vec![T::ZERO; n];
    for k in k0..n.saturating_sub(2) {
        let len = n - k - 1;
        let v = &mut v[..len];
        for (i, x) in v.iter_mut().enumerate() {
            *x = s[(k + 1 + i) * ld + k];
        }
        let tau = make_reflector(out, k, s[k * ld + k], v);
        if tau == T::ZERO {
            continue;
        }
        let p = &mut p[..len];
        p.fill(T::ZERO);
        let base = (k + 1) * ld + k + 1;
        symv_rows(s, ld, base, (0, len), v, p);
        scale_to_w(p, v, tau);
        rank2_rows(s, ld, base, (0, len), v, p);
    }
}

/// Column `k`'s reflector from `v` (the column below the diagonal, which
/// becomes the reflector's vector with its leading 1), stored in `out`
/// with the diagonal element; returns `tau`.
#[inline(always)]
fn make_reflector<T: Real>(out: &mut Reduced<'_, T>, k: usize, diagonal: T, v: &mut [T]) -> T {
    let (tau, beta) = reflector(v[0], &mut v[1..]);
    v[0] = T::ONE;
    out.store(k, diagonal, (tau, beta), v);
    tau
}

/// `p += A v` over rows `r0..r1` of the symmetric trailing matrix `A`
/// whose lower triangle is stored row by row with stride `ld`, row `r0`
/// (of `A`) at `at` of `s`: each row `i` gives `A[i][..i] . v[..i] +
/// A[i][i] v[i]` to `p[i]` and `A[i][..i] v[i]` to `p[..i]`.
///
/// Rows go four at a time: their dot products share the loads of `v`,
/// their updates one load and store of `p`, and the four sums of lanes
/// are taken once per four rows (a row at a time, the dot product's sum
/// and tail cost as much as a short row).
#[inline(always)]
fn symv_rows<T: Real>(
    s: &[T],
    ld: usize,
    at: usize,
    (r0, r1): (usize, usize),
    v: &[T],
    p: &mut [T],
) {
    let mut i = r0;
    while i + 4 <= r1 {
        let start = at + (i - r0) * ld;
        let row = |q: usize| &s[start + q * ld..start + q * ld + i + q + 1];
        let rows = [row(0), row(1), row(2), row(3)];
        let vq = [v[i], v[i + 1], v[i + 2], v[i + 3]];
        let zero = [T::ZERO; 16];
        let (mut a0, mut a1, mut a2, mut a3) = (zero, zero, zero, zero);
        let (c0, t0) = rows[0][..i].as_chunks::<16>();
        let (c1, t1) = rows[1][..i].as_chunks::<16>();
        let (c2, t2) = rows[2][..i].as_chunks::<16>();
        let (c3, t3) = rows[3][..i].as_chunks::<16>();
        let (vc, vt) = v[..i].as_chunks::<16>();
        let (pc, pt) = p[..i].as_chunks_mut::<16>();
        for (j, (y, q)) in vc.iter().zip(pc.iter_mut()).enumerate() {
            let (x0, x1, x2, x3) = (&c0[j], &c1[j], &c2[j], &c3[j]);
            for l in 0..16 {
                a0[l] = a0[l] + x0[l] * y[l];
                a1[l] = a1[l] + x1[l] * y[l];
                a2[l] = a2[l] + x2[l] * y[l];
                a3[l] = a3[l] + x3[l] * y[l];
                q[l] = q[l] + x0[l] * vq[0] + x1[l] * vq[1] + x2[l] * vq[2] + x3[l] * vq[3];
            }
        }
        let lanes = |a: [T; 16]| a.iter().fold(T::ZERO, |s, &x| s + x);
        let sums = [lanes(a0), lanes(a1), lanes(a2), lanes(a3)];
        // Columns past the last whole 16, then the triangle's corner.
        let mut tip = [T::ZERO; 4];
        for (c, q) in pt.iter_mut().enumerate() {
            let (x, y) = ([t0[c], t1[c], t2[c], t3[c]], vt[c]);
            for (t, &x) in tip.iter_mut().zip(&x) {
                *t = *t + x * y;
            }
            *q = *q + x[0] * vq[0] + x[1] * vq[1] + x[2] * vq[2] + x[3] * vq[3];
        }
        for q in 0..4 {
            for c in 0..q {
                let x = rows[q][i + c];
                tip[q] = tip[q] + x * v[i + c];
                p[i + c] = p[i + c] + x * vq[q];
            }
            tip[q] = tip[q] + rows[q][i + q] * vq[q];
            p[i + q] = p[i + q] + sums[q] + tip[q];
        }
        i += 4;
    }
    for i in i..r1 {
        let start = at + (i - r0) * ld;
        let (head, diagonal) = s[start..start + i + 1].split_at(i);
        let vi = v[i];
        let (before, rest) = p.split_at_mut(i);
        rest[0] = rest[0] + dot(head, &v[..i]) + diagonal[0] * vi;
        for (pj, &x) in before.iter_mut().zip(head) {
            *pj = *pj + x * vi;
        }
    }
}

/// `A -= v w^T + w v^T` on rows `r0..r1` of the lower triangle stored as
/// for [`symv_rows`].
#[inline(always)]
fn rank2_rows<T: Real>(
    s: &mut [T],
    ld: usize,
    at: usize,
    (r0, r1): (usize, usize),
    v: &[T],
    w: &[T],
) {
    for i in r0..r1 {
        let start = at + (i - r0) * ld;
        let (vi, wi) = (v[i], w[i]);
        let row = &mut s[start..start + i + 1];
        for ((x, &vj), &wj) in row.iter_mut().zip(&v[..=i]).zip(&w[..=i]) {
            *x = *x - vi * wj - wi * vj;
        }
    }
}

/// `p = tau p`, then `p -= (tau/2)(p.v) v`: from `p = A v`, the `w` of
/// the two-sided update `H A H = A - v w^T - w v^T`.
#[inline(always)]
fn scale_to_w<T: Real>(p: &mut [T], v: &[T], tau: T) {
    for pi in p.iter_mut() {
        *pi = *pi * tau;
    }
    let kk = -T::from_f64(0.5) * tau * dot(p, v);
    for (pi, &vi) in p.iter_mut().zip(v.iter()) {
        *pi = *pi + kk * vi;
    }
}

/// `BLOCK_ROWS` rows of the matrix (fewer at the end), the first `first`.
struct Block<'a, T> {
    first: usize,
    data: &'a mut [T],
}

/// A barrier for up to two threads that spins, then yields, instead of
/// sleeping.
#[derive(Default)]
struct SpinBarrier {
    arrived: AtomicUsize,
    generation: AtomicUsize,
}

impl SpinBarrier {
    fn wait(&self, parties: usize) {
        if parties < 2 {
            return;
        }
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == parties {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation
                .store(generation.wrapping_add(1), Ordering::Release);
            return;
        }
        let mut spins = 0;
        while self.generation.load(Ordering::Acquire) == generation {
            if spins < SPINS {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// The second thread has not started yet.
const WAITING: u8 = 0;
/// It has, and reduces its blocks.
const JOINED: u8 = 1;
/// It started too late: the first thread reduces everything.
const SOLO: u8 = 2;

/// What the team's two threads share. Member 0 owns the even blocks of
/// rows (and all of them when alone), member 1 the odd ones. Each member
/// publishes the next column's entries of its own rows in `columns` and
/// its share of each product in `partials`; the barrier orders those
/// writes before the other member's reads, and the locks are never
/// contended.
struct Team<'a, T> {
    n: usize,
    ld: usize,
    stop: usize,
    state: AtomicU8,
    barrier: SpinBarrier,
    columns: [RwLock<Vec<T>>; 2],
    partials: [RwLock<Vec<T>>; 2],
    /// Member 1's blocks, until it claims them (or member 0 does).
    spare: Mutex<Vec<Block<'a, T>>>,
}

/// Columns `0..stop` by a team of two threads (or this one alone if the
/// second does not start in time); returns how many threads took part.
fn team<T: Real>(
    s: &mut [T],
    (n, ld): (usize, usize),
    stop: usize,
    out: &mut Reduced<'_, T>,
) -> usize {
    let (mut mine, mut theirs) = (Vec::new(), Vec::new());
    let end = (n - 1) * ld + n;
    for (b, data) in s[..end].chunks_mut(BLOCK_ROWS * ld).enumerate() {
        let block = Block {
            first: b * BLOCK_ROWS,
            data,
        };
        if b % 2 == 0 {
            mine.push(block);
        } else {
            theirs.push(block);
        }
    }
    let team = Team {
        n,
        ld,
        stop,
        state: AtomicU8::new(WAITING),
        barrier: SpinBarrier::default(),
        columns: [RwLock::new(vec![T::ZERO; n]), RwLock::new(vec![T::ZERO; n])],
        partials: [RwLock::new(vec![T::ZERO; n]), RwLock::new(vec![T::ZERO; n])],
        spare: Mutex::new(theirs),
    };
    let team = &team;
    let (parties, _) = rayon::join(
        || {
            let start = Instant::now();
            let parties = loop {
                if team.state.load(Ordering::Acquire) == JOINED {
                    break 2;
                }
                if start.elapsed() > PARTNER_WAIT {
                    match team.state.compare_exchange(
                        WAITING,
                        SOLO,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => break 1,
                        Err(_) => break 2,
                    }
                }
                std::hint::spin_loop();
            };
            if parties == 1 {
                let spare = std::mem::take(&mut *lock(&team.spare));
                mine.extend(spare);
            }
            member_dispatch(team, 0, parties, &mut mine, Some(out));
            parties
        },
        || {
            if team
                .state
                .compare_exchange(WAITING, JOINED, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                return;
            }
            let mut blocks = std::mem::take(&mut *lock(&team.spare));
            member_dispatch(team, 1, 2, &mut blocks, None);
        },
    );
    parties
}

/// The mutex's value, poisoned or not (a panicking member cannot leave
/// the blocks half-moved).
fn lock<'m, V>(m: &'m Mutex<V>) -> std::sync::MutexGuard<'m, V> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn read<V>(l: &RwLock<V>) -> std::sync::RwLockReadGuard<'_, V> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

fn write<V>(l: &RwLock<V>) -> std::sync::RwLockWriteGuard<'_, V> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

// A team member's loop, compiled for the CPU's vectors.
dispatched!(member_dispatch<T: Real> => member_body(team: &Team<'_, T>, id: usize, parties: usize, blocks: &mut [Block<'_, T>], out: Option<&mut Reduced<'_, T>>));

/// Member `id`'s share of columns `0..team.stop`, over its `blocks`: per
/// column, both members make the reflector from the published column (the
/// same arithmetic, so the same result; member 0 stores it), each adds
/// its rows' share of `A v`, and after the barrier both sum the shares in
/// the same order, update their rows and publish the next column.
#[inline(always)]
fn member_body<T: Real, const WIDE: bool>(
    team: &Team<'_, T>,
    id: usize,
    parties: usize,
    blocks: &mut [Block<'_, T>],
    mut out: Option<&mut Reduced<'_, T>>,
) {
    let (n, ld) = (team.n, team.ld);
    let mut x = vec![T::ZERO; n];
    let mut p = vec![T::ZERO; n];
    {
        let mut column = write(&team.columns[id]);
        for block in blocks.iter() {
            for (r, row) in block.data.chunks(ld).enumerate() {
                column[block.first + r] = row[0];
            }
        }
    }
    for k in 0..team.stop {
        team.barrier.wait(parties);
        {
            let columns = [read(&team.columns[0]), read(&team.columns[1])];
            for (i, xi) in x.iter_mut().enumerate().skip(k) {
                *xi = columns[(i / BLOCK_ROWS) % parties][i];
            }
        }
        let len = n - k - 1;
        let (diagonal, v) = (x[k], &mut x[k + 1..]);
        let (tau, beta) = reflector(v[0], &mut v[1..]);
        v[0] = T::ONE;
        if let Some(out) = out.as_deref_mut() {
            out.store(k, diagonal, (tau, beta), v);
        }
        let v = &*v;
        let p = &mut p[..len];
        let update = tau != T::ZERO;
        if update {
            p.fill(T::ZERO);
            for block in blocks.iter() {
                if let Some((at, rows)) = trailing(block, ld, k) {
                    symv_rows(block.data, ld, at, rows, v, p);
                }
            }
        }
        if parties == 2 {
            // Also without an update: the other member may still be
            // reading this column, which the next one overwrites.
            if update {
                write(&team.partials[id])[..len].copy_from_slice(p);
            }
            team.barrier.wait(parties);
            if update {
                let partials = [read(&team.partials[0]), read(&team.partials[1])];
                let (a, b) = (&partials[0][..len], &partials[1][..len]);
                for ((x, &a), &b) in p.iter_mut().zip(a).zip(b) {
                    *x = a + b;
                }
            }
        }
        if update {
            scale_to_w(p, v, tau);
        }
        let mut column = write(&team.columns[id]);
        for block in blocks.iter_mut() {
            if let Some((at, rows)) = trailing(block, ld, k) {
                if update {
                    rank2_rows(block.data, ld, at, rows, v, p);
                }
                for i in rows.0..rows.1 {
                    column[k + 1 + i] = block.data[at + (i - rows.0) * ld];
                }
            }
        }
    }
}

/// Where `block`'s rows of the trailing matrix after column `k` start in
/// its data (row and column `k + 1` on), and which of the trailing
/// matrix's rows they are; `None` if it has none.
#[inline(always)]
fn trailing<T>(block: &Block<'_, T>, ld: usize, k: usize) -> Option<(usize, (usize, usize))> {
    let rows = block.data.len().div_ceil(ld);
    let (first, end) = (block.first.max(k + 1), block.first + rows);
    (first < end).then(|| {
        let at = (first - block.first) * ld + k + 1;
        (at, (first - k - 1, end - k - 1))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest f64 matrix the team reduces.
    const TEAM_F64_ROWS: usize = 444;

    #[test]
    fn team_threshold() {
        let bytes = |n: usize| n * n / 2 * 8;
        assert!(bytes(TEAM_F64_ROWS - 1) < TEAM_MIN_BYTES);
        assert!(bytes(TEAM_F64_ROWS) >= TEAM_MIN_BYTES);
    }
    use crate::kernels::orthogonal::tests::matrix;

    /// `Q^T A Q` from the stored reflectors, dense, and how many threads
    /// reduced the matrix.
    fn reduce(a: &[f64], n: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>, usize) {
        // Rows padded as `syevd` pads them, and garbage in the padding and
        // the upper triangle, which must not be read.
        let ld = n + 3;
        let mut s = vec![f64::NAN; (n.max(1) - 1) * ld + n];
        for i in 0..n {
            s[i * ld..i * ld + i + 1].copy_from_slice(&a[i * n..i * n + i + 1]);
        }
        let m1 = n - 1;
        let (mut d, mut e) = (vec![0.0; n], vec![0.0; n]);
        let (mut taus, mut rows) = (vec![0.0; m1], vec![0.0; m1 * m1]);
        let mut out = Reduced {
            d: &mut d,
            e: &mut e,
            taus: &mut taus,
            rows: &mut rows,
        };
        let threads = tridiagonalize(&mut s, n, ld, &mut out);
        // Q = H(0) ... H(n-3) applied to the identity from the right.
        let mut q = vec![0.0; n * n];
        for i in 0..n {
            q[i * n + i] = 1.0;
        }
        for k in 0..n.saturating_sub(2) {
            let mut v = vec![0.0; n];
            v[k + 1] = 1.0;
            v[k + 2..].copy_from_slice(&rows[k * m1 + k + 1..(k + 1) * m1]);
            for row in q.chunks_exact_mut(n) {
                let t: f64 = row.iter().zip(&v).map(|(a, b)| a * b).sum::<f64>() * taus[k];
                for (x, &vj) in row.iter_mut().zip(&v) {
                    *x -= t * vj;
                }
            }
        }
        (d, e, q, threads)
    }

    /// Checks `Q^T A Q = T` for a seeded matrix; returns how many threads
    /// reduced it.
    fn check(n: usize, seed: u64) -> usize {
        let g = matrix(n, n, seed);
        let a: Vec<f64> = (0..n * n)
            .map(|k| (g[k] + g[(k % n) * n + k / n]) / 2.0)
            .collect();
        let (d, e, q, threads) = reduce(&a, n);
        // Q^T A Q must be the tridiagonal (d, e).
        let mut aq = vec![0.0; n * n];
        for i in 0..n {
            for p in 0..n {
                for j in 0..n {
                    aq[i * n + j] += a[i * n + p] * q[p * n + j];
                }
            }
        }
        let mut worst: f64 = 0.0;
        for i in 0..n {
            for j in 0..n {
                let qaq: f64 = (0..n).map(|p| q[p * n + i] * aq[p * n + j]).sum();
                let want = if i == j {
                    d[i]
                } else if i + 1 == j {
                    e[i]
                } else if j + 1 == i {
                    e[j]
                } else {
                    0.0
                };
                worst = worst.max((qaq - want).abs());
            }
        }
        assert!(worst < 1e-12 * n as f64, "{n}: |Q^T A Q - T| = {worst}");
        threads
    }

    #[test]
    fn reduces_to_tridiagonal() {
        // One thread; the team's start and its solo and two-thread runs
        // (the test pool may have either); past block boundaries.
        for &(n, seed) in &[
            (1, 1),
            (2, 2),
            (3, 3),
            (40, 4),
            (200, 5),
            (TEAM_F64_ROWS + 37, 6),
        ] {
            check(n, seed);
        }
    }

    #[test]
    fn reduces_alone_and_as_a_team() {
        // In a one-thread pool the whole reduction runs serially; in a
        // two-thread pool the team's two members share it (or the first
        // runs it alone if the second starts late). Both must give Q^T A Q
        // tridiagonal, and the same matrix to rounding.
        let n = TEAM_F64_ROWS + 21;
        let one = rayon::ThreadPoolBuilder::new().num_threads(1).build();
        let two = rayon::ThreadPoolBuilder::new().num_threads(2).build();
        let (Ok(one), Ok(two)) = (one, two) else {
            panic!("no thread pool");
        };
        assert_eq!(one.install(|| check(n, 9)), 1);
        // The second member normally starts within microseconds; ten
        // misses of 200 us each would be a bug, not a slow machine.
        assert!((0..10).any(|_| two.install(|| check(n, 9)) == 2));
        let g = matrix(n, n, 9);
        let a: Vec<f64> = (0..n * n)
            .map(|k| (g[k] + g[(k % n) * n + k / n]) / 2.0)
            .collect();
        let (d1, e1, _, _) = one.install(|| reduce(&a, n));
        let (d2, e2, _, _) = two.install(|| reduce(&a, n));
        for (x, y) in d1.iter().zip(&d2).chain(e1.iter().zip(&e2)) {
            assert!((x - y).abs() < 1e-9, "{x} vs {y}");
        }
    }
}
