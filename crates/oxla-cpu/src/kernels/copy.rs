//! Copies through a strided view: broadcasts, slices, reverses, reshapes
//! and transposes of any element type, when nothing else is computed. A
//! transpose (the output's fastest dimension is not the input's) goes in
//! small blocks sized so that reads run along the input's contiguous
//! dimension and writes fill whole cache lines; other views are walked in
//! output order, a row at a time.

use oxla_hlo::{ArrayData, ArrayLiteral, ArrayShape, PrimitiveType, with_array_data};
use rayon::prelude::*;

use super::Kernel;
use super::fused::{PARALLEL_MIN, coalesce};
use super::view::View;
use crate::buffer::Pool;
use crate::value::Value;

/// Input-contiguous indices per transposition block.
pub(crate) const BLOCK_K: usize = 16;

/// Rows and columns of a transposition tile: a tile's input and output rows
/// each span a few pages, so its blocks stay within the TLB's reach.
const TILE: usize = 64;

/// The tiles of rows `r0..r1` by columns `0..cols` (columns in multiples of
/// `block_l` but the last), as `(r0, r1, c0, c1)`, row tiles outermost.
fn tiles(
    r0: usize,
    r1: usize,
    cols: usize,
    block_l: usize,
) -> impl Iterator<Item = (usize, usize, usize, usize)> {
    let tc = TILE.div_ceil(block_l) * block_l;
    (r0..r1).step_by(TILE).flat_map(move |t0| {
        (0..cols)
            .step_by(tc)
            .map(move |u0| (t0, (t0 + TILE).min(r1), u0, (u0 + tc).min(cols)))
    })
}

#[derive(Clone, Debug)]
pub(crate) struct CopyKernel {
    pub ty: PrimitiveType,
    pub view: View,
    pub out_dims: Vec<i64>,
}

impl CopyKernel {
    pub(crate) fn copy<T: oxla_hlo::NativeType>(&self, src: &[T], pool: &Pool) -> Vec<T> {
        let space = coalesce(&self.view.dims, &[&self.view]);
        let dims = &space.dims;
        let strides = &space.strides[0];
        let n: usize = dims.iter().product();
        let mut out = pool.take(n);
        let last = dims.len() - 1;
        // The output dimension along which the input is contiguous.
        let k = match strides[..last].iter().position(|&s| s == 1) {
            Some(k) if strides[last] != 1 && strides[last] != 0 => k,
            _ => {
                // No transposition (or rows that each repeat one element):
                // walk the output in order.
                let outer: usize = dims[..last].iter().product();
                let (inner, st) = (dims[last], strides[last]);
                for row in 0..outer {
                    let (mut r, mut off) = (row, space.offsets[0]);
                    for d in (0..last).rev() {
                        off += (r % dims[d]) as i64 * strides[d];
                        r /= dims[d];
                    }
                    let dst = &mut out[row * inner..(row + 1) * inner];
                    if st == 1 {
                        dst.copy_from_slice(&src[off as usize..off as usize + inner]);
                    } else if st == 0 {
                        // A broadcast along the row, in the widest stores:
                        // with 16-byte ones, filling f32[1000, 64] (JAX's
                        // `zeros_like`) took a tenth of the 16.9 us that
                        // bench fori_rows ran; with them, 15.8 us.
                        let v = src[off as usize];
                        super::typed::vectorized(inner, || dst.fill(v));
                    } else {
                        for (c, o) in dst.iter_mut().enumerate() {
                            *o = src[(off + c as i64 * st) as usize];
                        }
                    }
                }
                return out;
            }
        };
        let (rows, cols) = (dims[k], dims[last]);
        let col_stride = strides[last];
        // Output stride of dimension k, and of every outer dimension.
        let mut out_strides = vec![1usize; dims.len()];
        for d in (0..last).rev() {
            out_strides[d] = out_strides[d + 1] * dims[d + 1];
        }
        // Everything but dimensions k and last is walked one plane at a time.
        let outer: Vec<usize> = (0..last).filter(|&d| d != k).collect();
        let planes: usize = outer.iter().map(|&d| dims[d]).product();
        let plane = |p: usize| -> (i64, usize) {
            let (mut r, mut src_off, mut dst_off) = (p, space.offsets[0], 0usize);
            for &d in outer.iter().rev() {
                let i = r % dims[d];
                r /= dims[d];
                src_off += i as i64 * strides[d];
                dst_off += i * out_strides[d];
            }
            (src_off, dst_off)
        };
        let kstride = out_strides[k];
        // Blocks of BLOCK_K input-contiguous indices by `block_l`
        // output-contiguous ones: each input run is read whole, and each
        // output row segment a block writes is one full cache line, so no
        // line is written in pieces from different blocks (measured: 15 ms
        // for a 4096^2 f32 transpose on one core, against 28 ms through a
        // transposing buffer and 140+ ms when writes cover part of a line).
        // Whole blocks of 32- and 64-bit elements transpose in registers
        // (`square`): element by element, rows a power-of-two apart all
        // fall in one cache set, and a 4096^2 f32 transpose took 35 ms.
        let block_l = (64 / std::mem::size_of::<T>().max(1)).max(1);
        let block = |out: &mut [T],
                     row_base: usize,
                     dst_off: usize,
                     src_off: i64,
                     r0: usize,
                     r1: usize,
                     c0: usize| {
            let c1 = (c0 + block_l).min(cols);
            if r1 - r0 == BLOCK_K
                && c1 - c0 == block_l
                && square::block(
                    src,
                    src_off + c0 as i64 * col_stride + r0 as i64,
                    col_stride,
                    out,
                    dst_off + (r0 - row_base) * kstride + c0,
                    kstride,
                )
            {
                return;
            }
            for c in c0..c1 {
                let s = (src_off + c as i64 * col_stride + r0 as i64) as usize;
                let run = &src[s..s + (r1 - r0)];
                let mut at = dst_off + (r0 - row_base) * kstride + c;
                for &v in run {
                    out[at] = v;
                    at += kstride;
                }
            }
        };
        if n >= PARALLEL_MIN && planes == 1 && k == 0 {
            // One 2-D transpose: split its rows into bands, each a contiguous part of the output.
            let band = BLOCK_K
                * rows
                    .div_ceil(BLOCK_K * rayon::current_num_threads().max(1) * 4)
                    .max(1);
            let (src_off, _) = plane(0);
            out.par_chunks_mut(band * kstride)
                .enumerate()
                .for_each(|(b, chunk)| {
                    let r_start = b * band;
                    let r_end = (r_start + band).min(rows);
                    for (t0, t1, u0, u1) in tiles(r_start, r_end, cols, block_l) {
                        for r0 in (t0..t1).step_by(BLOCK_K) {
                            for c0 in (u0..u1).step_by(block_l) {
                                block(chunk, r_start, 0, src_off, r0, (r0 + BLOCK_K).min(t1), c0);
                            }
                        }
                    }
                });
        } else {
            for p in 0..planes {
                let (src_off, dst_off) = plane(p);
                for (t0, t1, u0, u1) in tiles(0, rows, cols, block_l) {
                    for r0 in (t0..t1).step_by(BLOCK_K) {
                        for c0 in (u0..u1).step_by(block_l) {
                            block(
                                &mut out,
                                0,
                                dst_off,
                                src_off,
                                r0,
                                (r0 + BLOCK_K).min(t1),
                                c0,
                            );
                        }
                    }
                }
            }
        }
        out
    }
}

impl Kernel for CopyKernel {
    fn name(&self) -> &'static str {
        "copy"
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        let a = inputs
            .first()
            .and_then(Value::array)
            .ok_or("a copy reads one array")?;
        let data: ArrayData =
            with_array_data!(a.data(), v => oxla_hlo::NativeType::wrap(self.copy(v, pool)));
        let shape = ArrayShape::new(self.ty, self.out_dims.clone()).map_err(|e| e.to_string())?;
        Ok(Value::owned(
            ArrayLiteral::new(shape, data).map_err(|e| e.to_string())?,
        ))
    }
}

/// Whole transposition blocks of 32- and 64-bit elements, transposed in
/// AVX-512 or AVX2 registers: each block's input runs are loaded once and its
/// output rows stored as whole cache lines (fused loops' gathers of
/// transposed leaves use them too).
pub(crate) mod square {
    use super::BLOCK_K;

    /// Transposes the block whose `BLOCK_K`-element input runs start at
    /// `s0 + i * ss` (`i` below the block's width, `64 / size_of::<T>()`)
    /// into output rows starting at `d0 + j * ds`. False (nothing written)
    /// when this CPU or element size has no register transpose, or a run
    /// or row would leave `src` or `out`.
    pub(crate) fn block<T: Copy>(
        src: &[T],
        s0: i64,
        ss: i64,
        out: &mut [T],
        d0: usize,
        ds: usize,
    ) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            let size = std::mem::size_of::<T>();
            let avx512 = std::is_x86_feature_detected!("avx512f");
            let avx2 = std::is_x86_feature_detected!("avx2");
            if !(matches!(size, 4 | 8) && (avx512 || avx2)) {
                return false;
            }
            let width = 64 / size;
            let last = s0 + (width as i64 - 1) * ss;
            let inside = s0.min(last) >= 0
                && s0.max(last) as usize + BLOCK_K <= src.len()
                && d0 + (BLOCK_K - 1) * ds + width <= out.len();
            if !inside {
                return false;
            }
            let (src, dst) = (src[s0 as usize..].as_ptr(), out[d0..].as_mut_ptr());
            let ss = ss as isize;
            // SAFETY (every arm): the instruction set was detected just
            // above, and `inside` keeps every run and row in bounds; the
            // moves copy bits.
            match (size, avx512) {
                (4, true) => unsafe { t16x16(src.cast(), ss, dst.cast(), ds) },
                // Two 8x8 halves fill the 16-run block.
                (8, true) => unsafe {
                    t8x8(src.cast(), ss, dst.cast(), ds);
                    t8x8(src.add(8).cast(), ss, dst.add(8 * ds).cast(), ds);
                },
                // Four 8x8 quarters: runs `bi..bi + 8`, their elements
                // `bj..bj + 8`.
                (4, false) => unsafe {
                    for (bi, bj) in [(0, 0), (0, 8), (8, 0), (8, 8)] {
                        let s = src.offset(bi as isize * ss).add(bj).cast();
                        t8x8_avx2(s, ss, dst.add(bj * ds + bi).cast(), ds);
                    }
                },
                // Eight 4x4 parts: runs `bi..bi + 4`, their elements `bj..bj + 4`.
                _ => unsafe {
                    for bi in [0, 4] {
                        for bj in [0, 4, 8, 12] {
                            let s = src.offset(bi as isize * ss).add(bj).cast();
                            t4x4_avx2(s, ss, dst.add(bj * ds + bi).cast(), ds);
                        }
                    }
                },
            }
            true
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (src, s0, ss, out, d0, ds);
            false
        }
    }

    /// An 8x8 block of 32-bit elements in AVX2 registers: unpack pairs,
    /// then pairs of pairs, within 128-bit lanes; then swap lanes.
    ///
    /// # Safety
    /// AVX2; 8 elements at `src + i * ss` and at `dst + j * ds` for `i, j < 8`.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn t8x8_avx2(src: *const f32, ss: isize, dst: *mut f32, ds: usize) {
        use std::arch::x86_64::*;
        // SAFETY: the caller's contract covers every load and store.
        unsafe {
            let r: [__m256; 8] =
                std::array::from_fn(|i| _mm256_loadu_ps(src.offset(i as isize * ss)));
            // t[2g + h], lanes: row pairs 2g, 2g + 1 interleaved, low or high halves.
            let t: [__m256; 8] = std::array::from_fn(|i| {
                let (a, b) = (r[i & !1], r[i | 1]);
                if i & 1 == 0 {
                    _mm256_unpacklo_ps(a, b)
                } else {
                    _mm256_unpackhi_ps(a, b)
                }
            });
            // q[4h + j]: columns j and j + 4 of rows 4h..4h + 4, one a lane.
            let q: [__m256; 8] = std::array::from_fn(|i| {
                let (h, j) = (i / 4, i % 4);
                let (a, b) = (t[4 * h + (j >> 1)], t[4 * h + 2 + (j >> 1)]);
                if j & 1 == 0 {
                    _mm256_shuffle_ps::<0x44>(a, b)
                } else {
                    _mm256_shuffle_ps::<0xee>(a, b)
                }
            });
            for j in 0..4 {
                _mm256_storeu_ps(
                    dst.add(j * ds),
                    _mm256_permute2f128_ps::<0x20>(q[j], q[4 + j]),
                );
                _mm256_storeu_ps(
                    dst.add((4 + j) * ds),
                    _mm256_permute2f128_ps::<0x31>(q[j], q[4 + j]),
                );
            }
        }
    }

    /// A 4x4 block of 64-bit elements in AVX2 registers.
    ///
    /// # Safety
    /// AVX2; 4 elements at `src + i * ss` and at `dst + j * ds` for `i, j < 4`.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn t4x4_avx2(src: *const f64, ss: isize, dst: *mut f64, ds: usize) {
        use std::arch::x86_64::*;
        // SAFETY: the caller's contract covers every load and store.
        unsafe {
            let r: [__m256d; 4] =
                std::array::from_fn(|i| _mm256_loadu_pd(src.offset(i as isize * ss)));
            // t[2g + h]: columns h and h + 2 of rows 2g, 2g + 1.
            let t: [__m256d; 4] = std::array::from_fn(|i| {
                let (a, b) = (r[i & !1], r[i | 1]);
                if i & 1 == 0 {
                    _mm256_unpacklo_pd(a, b)
                } else {
                    _mm256_unpackhi_pd(a, b)
                }
            });
            for h in 0..2 {
                _mm256_storeu_pd(
                    dst.add(h * ds),
                    _mm256_permute2f128_pd::<0x20>(t[h], t[2 + h]),
                );
                _mm256_storeu_pd(
                    dst.add((2 + h) * ds),
                    _mm256_permute2f128_pd::<0x31>(t[h], t[2 + h]),
                );
            }
        }
    }

    /// A 16x16 block of 32-bit elements: unpack pairs, then pairs of
    /// pairs, within 128-bit lanes; then gather lanes across registers.
    ///
    /// # Safety
    /// AVX-512F; 16 elements at `src + i * ss` and at `dst + j * ds` for
    /// `i, j < 16`.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn t16x16(src: *const f32, ss: isize, dst: *mut f32, ds: usize) {
        use std::arch::x86_64::*;
        // SAFETY: the caller's contract covers every load and store.
        unsafe {
            let r: [__m512; 16] =
                std::array::from_fn(|i| _mm512_loadu_ps(src.offset(i as isize * ss)));
            let t: [__m512d; 16] = std::array::from_fn(|i| {
                let (a, b) = (r[i & !1], r[i | 1]);
                _mm512_castps_pd(if i & 1 == 0 {
                    _mm512_unpacklo_ps(a, b)
                } else {
                    _mm512_unpackhi_ps(a, b)
                })
            });
            // q[4g + j], lane L: column 4L + j of rows 4g..4g+4.
            let q: [__m512; 16] = std::array::from_fn(|i| {
                let (g, j) = (i / 4, i % 4);
                let (a, b) = (t[4 * g + (j >> 1)], t[4 * g + 2 + (j >> 1)]);
                _mm512_castpd_ps(if j & 1 == 0 {
                    _mm512_unpacklo_pd(a, b)
                } else {
                    _mm512_unpackhi_pd(a, b)
                })
            });
            for j in 0..4 {
                let u0 = _mm512_shuffle_f32x4::<0x88>(q[j], q[4 + j]);
                let u1 = _mm512_shuffle_f32x4::<0xdd>(q[j], q[4 + j]);
                let u2 = _mm512_shuffle_f32x4::<0x88>(q[8 + j], q[12 + j]);
                let u3 = _mm512_shuffle_f32x4::<0xdd>(q[8 + j], q[12 + j]);
                _mm512_storeu_ps(dst.add(j * ds), _mm512_shuffle_f32x4::<0x88>(u0, u2));
                _mm512_storeu_ps(dst.add((4 + j) * ds), _mm512_shuffle_f32x4::<0x88>(u1, u3));
                _mm512_storeu_ps(dst.add((8 + j) * ds), _mm512_shuffle_f32x4::<0xdd>(u0, u2));
                _mm512_storeu_ps(dst.add((12 + j) * ds), _mm512_shuffle_f32x4::<0xdd>(u1, u3));
            }
        }
    }

    /// An 8x8 block of 64-bit elements: unpack pairs within 128-bit lanes,
    /// then gather lanes across registers.
    ///
    /// # Safety
    /// AVX-512F; 8 elements at `src + i * ss` and at `dst + j * ds` for
    /// `i, j < 8`.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn t8x8(src: *const f64, ss: isize, dst: *mut f64, ds: usize) {
        use std::arch::x86_64::*;
        // SAFETY: the caller's contract covers every load and store.
        unsafe {
            let r: [__m512d; 8] =
                std::array::from_fn(|i| _mm512_loadu_pd(src.offset(i as isize * ss)));
            // t[2g + j], lane L: column 2L + j of rows 2g..2g+2.
            let t: [__m512d; 8] = std::array::from_fn(|i| {
                let (a, b) = (r[i & !1], r[i | 1]);
                if i & 1 == 0 {
                    _mm512_unpacklo_pd(a, b)
                } else {
                    _mm512_unpackhi_pd(a, b)
                }
            });
            for j in 0..2 {
                let u0 = _mm512_shuffle_f64x2::<0x88>(t[j], t[2 + j]);
                let u1 = _mm512_shuffle_f64x2::<0xdd>(t[j], t[2 + j]);
                let u2 = _mm512_shuffle_f64x2::<0x88>(t[4 + j], t[6 + j]);
                let u3 = _mm512_shuffle_f64x2::<0xdd>(t[4 + j], t[6 + j]);
                _mm512_storeu_pd(dst.add(j * ds), _mm512_shuffle_f64x2::<0x88>(u0, u2));
                _mm512_storeu_pd(dst.add((2 + j) * ds), _mm512_shuffle_f64x2::<0x88>(u1, u3));
                _mm512_storeu_pd(dst.add((4 + j) * ds), _mm512_shuffle_f64x2::<0xdd>(u0, u2));
                _mm512_storeu_pd(dst.add((6 + j) * ds), _mm512_shuffle_f64x2::<0xdd>(u1, u3));
            }
        }
    }
}
