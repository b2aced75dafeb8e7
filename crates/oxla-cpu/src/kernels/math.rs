//! Branch-free f32 math for fused loops, written so the compiler vectorises
//! the loops that call it (no libm calls in hot loops). `FMA` selects fused
//! multiply-adds (used when the kernel is compiled for a CPU that has them;
//! without that target feature `mul_add` would be a library call).
//!
//! Accuracy against the correctly rounded result: exp and log within 2 ulp;
//! tanh is XLA's own rational approximation (bit-exact with XLA:CPU when FMA
//! is on); logistic follows from exp; erf within a few ulp.

// Polynomial coefficients are quoted as published (Cephes, XLA), digits
// beyond f32's included; one of them happens to be close to 2/sqrt(pi).
#![allow(clippy::excessive_precision, clippy::approx_constant)]

#[inline(always)]
fn madd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA { a.mul_add(b, c) } else { a * b + c }
}

/// `2^n` for an integer-valued `n` in [-127, 128], built from its bits.
/// Adding 1.5 * 2^23 puts `n + 127` in the low mantissa bits, a float add
/// where a float-to-int conversion would not vectorise (Rust's saturating
/// `as` becomes scalar compares). NaN gives NaN's bits, which the caller
/// multiplies into a NaN anyway.
#[inline(always)]
fn pow2(n: f32) -> f32 {
    // `clamp` lets NaN through.
    let n = n.clamp(-127.0, 128.0);
    let t = n + (127.0 + 12_582_912.0);
    f32::from_bits((t.to_bits() & 0x1ff) << 23)
}

/// The range reduction and polynomial of `exp`: with `x = n ln 2 + r`,
/// returns `(e^r, n)`.
#[inline(always)]
fn exp_parts<const FMA: bool>(x: f32) -> (f32, f32) {
    let n = (x * std::f32::consts::LOG2_E).round_ties_even();
    let r = madd::<FMA>(n, -0.693_359_375, x);
    let r = madd::<FMA>(n, 2.121_944_4e-4, r);
    let r2 = r * r;
    let mut p = 1.987_569_2e-4f32;
    p = madd::<FMA>(p, r, 1.398_199_9e-3);
    p = madd::<FMA>(p, r, 8.333_452e-3);
    p = madd::<FMA>(p, r, 4.166_579_6e-2);
    p = madd::<FMA>(p, r, 1.666_666_5e-1);
    p = madd::<FMA>(p, r, 5.000_000_1e-1);
    (madd::<FMA>(p, r2, r) + 1.0, n)
}

/// e^x (Cephes' expf: range reduction by ln 2, degree-5 polynomial).
#[inline(always)]
pub(crate) fn exp<const FMA: bool>(x: f32) -> f32 {
    // Comparisons (not min/max) so that NaN passes through.
    let (y, n) = exp_parts::<FMA>(x.clamp(-104.0, 88.8));
    // Split the scale so 2^n stays representable for n down to -149.
    let half = (n * 0.5).floor();
    y * pow2(half) * pow2(n - half)
}

/// `exp` for `x` in [-86, 88], where `2^n` is a normal float: one scaling
/// instead of two, and no clamp. Bit-identical to [`exp`] there (scaling
/// by a power of two is exact while the result stays normal).
#[inline(always)]
pub(crate) fn exp_normal<const FMA: bool>(x: f32) -> f32 {
    let (y, n) = exp_parts::<FMA>(x);
    // n + 127 in [1, 254]: the exponent field of 2^n.
    let t = n + (127.0 + 12_582_912.0);
    y * f32::from_bits((t.to_bits() & 0x1ff) << 23)
}

/// The range of [`exp_normal`].
pub(crate) const EXP_NORMAL: (f32, f32) = (-86.0, 88.0);

/// `exp` over a tile: [`exp_normal`] when every element is in its range,
/// else [`exp`]. The fast form is computed while the range is checked, in
/// one pass; a tile with an element outside is redone in the general form.
#[inline(always)]
pub(crate) fn exp_tile<const FMA: bool>(out: &mut [f32], a: &[f32]) {
    // A flag folded without branches, so the loop vectorises (a NaN counts
    // as outside: such tiles take the general path).
    let mut outside = 0u32;
    for (o, &x) in out.iter_mut().zip(a) {
        *o = exp_normal::<FMA>(x);
        outside |= u32::from(!(EXP_NORMAL.0..=EXP_NORMAL.1).contains(&x));
    }
    if outside != 0 {
        for (o, &x) in out.iter_mut().zip(a) {
            *o = exp::<FMA>(x);
        }
    }
}

/// ln x (Cephes' logf: split off the exponent, polynomial in the mantissa).
#[inline(always)]
pub(crate) fn log<const FMA: bool>(x: f32) -> f32 {
    // Subnormals are scaled into the normal range first.
    let tiny = x < f32::MIN_POSITIVE;
    let xs = if tiny { x * 8_388_608.0 } else { x };
    let bits = xs.to_bits();
    let mut e = ((bits >> 23) & 0xff) as i32 - 126;
    let mut m = f32::from_bits((bits & 0x007f_ffff) | 0x3f00_0000); // in [0.5, 1)
    if m < std::f32::consts::FRAC_1_SQRT_2 {
        e -= 1;
        m = m + m - 1.0;
    } else {
        m -= 1.0;
    }
    let e = e as f32 - if tiny { 23.0 } else { 0.0 };
    let z = m * m;
    let mut p = 7.037_683_6e-2f32;
    p = madd::<FMA>(p, m, -1.151_461e-1);
    p = madd::<FMA>(p, m, 1.167_699_9e-1);
    p = madd::<FMA>(p, m, -1.242_014_1e-1);
    p = madd::<FMA>(p, m, 1.424_932_3e-1);
    p = madd::<FMA>(p, m, -1.666_805_8e-1);
    p = madd::<FMA>(p, m, 2.000_071_5e-1);
    p = madd::<FMA>(p, m, -2.499_999_4e-1);
    p = madd::<FMA>(p, m, 3.333_333e-1);
    let mut y = p * m * z;
    y = madd::<FMA>(e, -2.121_944_4e-4, y);
    y = madd::<FMA>(z, -0.5, y);
    let r = madd::<FMA>(e, 0.693_359_375, m + y);
    // NaNs come out as libm makes them (so even their bits match the
    // interpreter's): an input NaN quieted, and for x < 0 the NaN the
    // hardware makes for 0/0 (negative on x86).
    if x == 0.0 {
        f32::NEG_INFINITY
    } else if x.is_nan() {
        x + x
    } else if x < 0.0 {
        // Computed at run time: 0/0 gives the hardware's default NaN.
        #[allow(clippy::eq_op)]
        let nan = (x - x) / (x - x);
        nan
    } else if x == f32::INFINITY {
        f32::INFINITY
    } else {
        r
    }
}

/// tanh x: XLA's rational approximation (`xla/codegen/intrinsic/tanh.cc`).
#[inline(always)]
pub(crate) fn tanh<const FMA: bool>(x: f32) -> f32 {
    const CLAMP: f32 = 7.998_811_7;
    let c = x.clamp(-CLAMP, CLAMP);
    let s = c * c;
    let mut num = -2.760_768_5e-16f32;
    num = madd::<FMA>(s, num, 2.000_187_9e-13);
    num = madd::<FMA>(s, num, -8.604_671_5e-11);
    num = madd::<FMA>(s, num, 5.122_297e-8);
    num = madd::<FMA>(s, num, 1.485_722_4e-5);
    num = madd::<FMA>(s, num, 6.372_619_3e-4);
    num = madd::<FMA>(s, num, 4.893_524_6e-3);
    num *= c;
    let mut den = 1.198_258_4e-6f32;
    den = madd::<FMA>(s, den, 1.185_347e-4);
    den = madd::<FMA>(s, den, 2.268_434_6e-3);
    den = madd::<FMA>(s, den, 4.893_525e-3);
    let r = num / den;
    let ax = x.abs();
    if ax < 0.0004 {
        x
    } else if ax >= 20.0 {
        1.0f32.copysign(x)
    } else {
        r
    }
}

/// 1 / (1 + e^-x).
#[inline(always)]
pub(crate) fn logistic<const FMA: bool>(x: f32) -> f32 {
    1.0 / (1.0 + exp::<FMA>(-x))
}

/// erf x (Abramowitz-Stegun-style rational with erfc tail via exp).
#[inline(always)]
pub(crate) fn erf<const FMA: bool>(x: f32) -> f32 {
    let a = x.abs();
    // Small |x|: the Taylor series 2/sqrt(pi) (x - x^3/3 + x^5/10 - ...) to x^13.
    let s = a * a;
    let mut p = 1.205_533_3e-4f32;
    p = madd::<FMA>(p, s, -8.548_327e-4);
    p = madd::<FMA>(p, s, 5.223_977_6e-3);
    p = madd::<FMA>(p, s, -2.686_617e-2);
    p = madd::<FMA>(p, s, 1.128_379_2e-1);
    p = madd::<FMA>(p, s, -3.761_263_9e-1);
    p = madd::<FMA>(p, s, 1.128_379_2);
    let small = a * p;
    // erfc(a) ~ t * exp(-a^2 + poly(t)), t = 1 / (1 + a/2) (Numerical Recipes erfcc).
    let t = 1.0 / madd::<FMA>(0.5, a, 1.0);
    let mut q = 0.170_872_77f32;
    q = madd::<FMA>(q, t, -0.822_152_23);
    q = madd::<FMA>(q, t, 1.488_515_9);
    q = madd::<FMA>(q, t, -1.135_203_98);
    q = madd::<FMA>(q, t, 0.278_868_07);
    q = madd::<FMA>(q, t, -0.186_288_06);
    q = madd::<FMA>(q, t, 0.096_784_18);
    q = madd::<FMA>(q, t, 0.374_091_96);
    q = madd::<FMA>(q, t, 1.000_023_7);
    q = madd::<FMA>(q, t, -1.265_512_2);
    let large = 1.0 - t * exp::<FMA>(q - s);
    let r = if a < 0.5 {
        small
    } else if a > 4.0 {
        1.0
    } else {
        large
    };
    if x.is_nan() { x } else { r.copysign(x) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ulps(a: f32, b: f32) -> u32 {
        if a == b || (a.is_nan() && b.is_nan()) {
            return 0;
        }
        let key = |v: f32| {
            let b = v.to_bits() as i64;
            if b < 0x8000_0000 { b } else { 0x8000_0000 - b }
        };
        (key(a) - key(b)).unsigned_abs() as u32
    }

    fn check(
        name: &str,
        f: impl Fn(f32) -> f32,
        reference: impl Fn(f64) -> f64,
        lo: f32,
        hi: f32,
        max_ulp: u32,
    ) {
        let mut worst = (0u32, 0.0f32);
        for i in 0..=200_000 {
            let x = lo + (hi - lo) * (i as f32 / 200_000.0);
            let want = reference(x as f64) as f32;
            let u = ulps(f(x), want);
            if u > worst.0 {
                worst = (u, x);
            }
        }
        assert!(worst.0 <= max_ulp, "{name}: {} ulp at {}", worst.0, worst.1);
    }

    #[test]
    fn accuracy() {
        check("exp", exp::<true>, f64::exp, -87.0, 88.0, 2);
        check("exp", exp::<false>, f64::exp, -20.0, 20.0, 2);
        check("log", log::<true>, f64::ln, 1e-30, 1e30, 2);
        check("log", log::<true>, f64::ln, 0.5, 2.0, 2);
        check("tanh", tanh::<true>, f64::tanh, -10.0, 10.0, 8);
        check(
            "logistic",
            logistic::<true>,
            |x| 1.0 / (1.0 + (-x).exp()),
            -30.0,
            30.0,
            4,
        );
        let erf_ref = |x: f64| {
            // Series/continued-fraction-free reference: erf via high-precision quadrature.
            let n = 4000;
            let h = x / n as f64;
            let f = |t: f64| (-t * t).exp();
            let mut s = f(0.0) + f(x);
            for k in 1..n {
                s += if k % 2 == 1 { 4.0 } else { 2.0 } * f(k as f64 * h);
            }
            s * h / 3.0 * 2.0 / std::f64::consts::PI.sqrt()
        };
        let mut worst = 0.0f64;
        for i in 0..=2000 {
            let x = -5.0 + 10.0 * i as f64 / 2000.0;
            worst = worst.max((erf::<true>(x as f32) as f64 - erf_ref(x)).abs());
        }
        assert!(worst < 2e-6, "erf abs error {worst}");
    }

    #[test]
    fn exp_into_the_subnormals() {
        // 2^n is split in two factors there; results lose precision with the
        // format but stay within a couple of the smallest subnormals.
        let mut x = -104.0f32;
        while x < -80.0 {
            let want = (x as f64).exp();
            let got = exp::<true>(x) as f64;
            let tolerance = 2.0 * f32::from_bits(1) as f64 + 4e-7 * want;
            assert!(
                (got - want).abs() <= tolerance,
                "exp({x}) = {got:e}, want {want:e}"
            );
            x += 0.37;
        }
        assert_eq!(exp::<true>(-200.0), 0.0);
        assert_eq!(exp::<true>(89.0), f32::INFINITY);
    }

    #[test]
    fn the_tile_exp_matches_exp_bit_for_bit() {
        // Tiles inside the fast range, across its edges, and with NaN.
        let mut tiles: Vec<Vec<f32>> = Vec::new();
        tiles.push((0..4000).map(|i| -86.0 + i as f32 * 0.0435).collect());
        tiles.push((0..4000).map(|i| -104.0 + i as f32 * 0.0482).collect());
        let mut with_nan: Vec<f32> = (0..100).map(|i| i as f32 * 0.3 - 15.0).collect();
        with_nan[7] = f32::NAN;
        tiles.push(with_nan);
        tiles.push(vec![-86.0, 88.0, 0.0, -0.0, 1e-30, -1e-30]);
        for tile in tiles {
            let mut out = vec![0f32; tile.len()];
            exp_tile::<true>(&mut out, &tile);
            for (&x, &y) in tile.iter().zip(&out) {
                let want = exp::<true>(x);
                assert!(
                    want.to_bits() == y.to_bits() || (want.is_nan() && y.is_nan()),
                    "exp({x}): tile gives {y:e}, exp gives {want:e}"
                );
            }
        }
    }

    #[test]
    fn special_values() {
        assert_eq!(exp::<true>(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp::<true>(f32::INFINITY), f32::INFINITY);
        assert!(exp::<true>(f32::NAN).is_nan());
        assert_eq!(exp::<true>(0.0), 1.0);
        assert_eq!(log::<true>(0.0), f32::NEG_INFINITY);
        assert!(log::<true>(-1.0).is_nan());
        // Bit for bit what libm (and so the interpreter) gives.
        for x in [
            -1.0f32,
            -0.5,
            f32::NEG_INFINITY,
            -1e-40,
            f32::NAN,
            -f32::NAN,
        ] {
            assert_eq!(log::<true>(x).to_bits(), x.ln().to_bits(), "log({x})");
            assert_eq!(log::<false>(x).to_bits(), x.ln().to_bits(), "log({x})");
        }
        assert_eq!(log::<true>(1.0), 0.0);
        assert!((log::<true>(1e-40) - (1e-40f64).ln() as f32).abs() < 1e-4);
        assert_eq!(tanh::<true>(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(tanh::<true>(30.0), 1.0);
        assert!(tanh::<true>(f32::NAN).is_nan());
        assert_eq!(erf::<true>(f32::INFINITY), 1.0);
        assert_eq!(logistic::<true>(-200.0), 0.0);
    }
}
