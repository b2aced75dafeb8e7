//! Text of element values as XLA prints them: integers in decimal, `true` and
//! `false`, floats in the shortest of two `%g` precisions that reads back
//! exactly (as XLA's `RoundTripFpToString`), `inf`, `-inf`, `nan`, and
//! complex numbers as `(re, im)`.

use std::fmt::Write as _;

use half::{bf16, f16};

use super::native::Scalar;
use crate::element_type::PrimitiveType;

/// The most empty rows an array with no elements is printed with in full.
pub const MAX_EMPTY_ROWS: u64 = 1024;

/// Whether an array of `dims` with no elements is written as just `{}`
/// rather than in XLA's nested form (`f32[2,0]` is `{ {}, {} }`). The
/// nested form has a row for every index before the first zero dimension,
/// so a value of no size, such as `f32[1099511627776,0]`, would take
/// terabytes of text; past [`MAX_EMPTY_ROWS`] rows oxla writes `{}`, which
/// its parser accepts for any array with no elements.
pub fn empty_array_is_compact(dims: &[i64]) -> bool {
    let Some(first_zero) = dims.iter().position(|&d| d == 0) else {
        return false;
    };
    let rows = dims[..first_zero]
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d.max(0) as u64));
    rows.is_none_or(|r| r > MAX_EMPTY_ROWS)
}

/// C's `%.{precision}g` for a finite `x`.
pub fn format_g(x: f64, precision: usize) -> String {
    let precision = precision.max(1);
    if x == 0.0 {
        return if x.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let sci = format!("{:.*e}", precision - 1, x);
    // Rust writes `d.ddde-5`: the exponent follows the `e`.
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= precision as i32 {
        let mantissa = strip_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (precision as i32 - 1 - exp).max(0) as usize;
        strip_zeros(&format!("{x:.decimals$}")).to_string()
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// Digits tried for each float type: `digits10`, then `max_digits10`.
/// For f16 and bf16 XLA always uses `max_digits10` (f16 0.1 prints as
/// `0.099976`, bf16 0.1 as `0.1001`), as checked against jaxlib's printer.
fn precisions(ty: PrimitiveType) -> (usize, usize) {
    match ty {
        PrimitiveType::F16 => (5, 5),
        PrimitiveType::BF16 => (4, 4),
        PrimitiveType::F32 | PrimitiveType::C64 => (6, 9),
        _ => (15, 17),
    }
}

fn reads_back(text: &str, x: f64, ty: PrimitiveType) -> bool {
    let Ok(y) = text.parse::<f64>() else {
        return false;
    };
    match ty {
        PrimitiveType::F16 => f16::from_f64(y).to_bits() == f16::from_f64(x).to_bits(),
        PrimitiveType::BF16 => bf16::from_f64(y).to_bits() == bf16::from_f64(x).to_bits(),
        PrimitiveType::F32 | PrimitiveType::C64 => (y as f32).to_bits() == (x as f32).to_bits(),
        _ => y.to_bits() == x.to_bits(),
    }
}

/// The payload bits of a NaN of type `ty`, if they differ from the default
/// quiet NaN (only the top mantissa bit set).
fn nan_payload(x: f64, ty: PrimitiveType) -> Option<u64> {
    let (payload, quiet) = match ty {
        PrimitiveType::F16 => ((f16::from_f64(x).to_bits() & 0x3ff) as u64, 0x200),
        PrimitiveType::BF16 => ((bf16::from_f64(x).to_bits() & 0x7f) as u64, 0x40),
        PrimitiveType::F32 | PrimitiveType::C64 => {
            (((x as f32).to_bits() & 0x7f_ffff) as u64, 0x40_0000)
        }
        _ => (x.to_bits() & 0xf_ffff_ffff_ffff, 0x8_0000_0000_0000),
    };
    (payload != quiet).then_some(payload)
}

/// A float of type `ty` (given exactly as an f64) as XLA prints it.
pub fn format_float(x: f64, ty: PrimitiveType) -> String {
    if x.is_nan() {
        let sign = if x.is_sign_negative() { "-" } else { "" };
        return match nan_payload(x, ty) {
            Some(p) => format!("{sign}nan(0x{p:x})"),
            None => format!("{sign}nan"),
        };
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let (short, long) = precisions(ty);
    let s = format_g(x, short);
    if reads_back(&s, x, ty) {
        s
    } else {
        format_g(x, long)
    }
}

/// One element of type `ty` as XLA prints it.
pub fn format_scalar(out: &mut String, value: Scalar, ty: PrimitiveType) {
    // Writing into a String cannot fail.
    let _ = match value {
        Scalar::Pred(b) => write!(out, "{b}"),
        Scalar::Int(i) => write!(out, "{i}"),
        Scalar::Float(f) => write!(out, "{}", format_float(f, ty)),
        Scalar::Complex(re, im) => {
            write!(out, "({}, {})", format_float(re, ty), format_float(im, ty))
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_g() {
        assert_eq!(format_g(1.0, 6), "1");
        assert_eq!(format_g(0.1, 6), "0.1");
        assert_eq!(format_g(1e20, 6), "1e+20");
        assert_eq!(format_g(1.5e-5, 6), "1.5e-05");
        assert_eq!(format_g(123456.0, 6), "123456");
        assert_eq!(format_g(1234567.0, 6), "1.23457e+06");
        assert_eq!(format_g(999999.5, 6), "1e+06");
        assert_eq!(format_g(0.0001, 6), "0.0001");
        assert_eq!(format_g(-2.5, 6), "-2.5");
        assert_eq!(format_g(-0.0, 6), "-0");
    }

    #[test]
    fn round_trip_precision() {
        assert_eq!(format_float(0.1f32 as f64, PrimitiveType::F32), "0.1");
        assert_eq!(
            format_float(16777217.0f32 as f64, PrimitiveType::F32),
            "16777216"
        );
        assert_eq!(format_float(0.1, PrimitiveType::F64), "0.1");
        assert_eq!(
            format_float(1.0 / 3.0, PrimitiveType::F64),
            "0.33333333333333331"
        );
        assert_eq!(
            format_float((1.0f32 / 3.0) as f64, PrimitiveType::F32),
            "0.333333343"
        );
        assert_eq!(format_float(f64::NEG_INFINITY, PrimitiveType::F32), "-inf");
        // f16 and bf16 always use max_digits10 digits, as XLA does.
        let f16_tenth = half::f16::from_f64(0.1).to_f64();
        assert_eq!(format_float(f16_tenth, PrimitiveType::F16), "0.099976");
        assert_eq!(format_float(1.0, PrimitiveType::F16), "1");
        let bf16_tenth = half::bf16::from_f64(0.1).to_f64();
        assert_eq!(format_float(bf16_tenth, PrimitiveType::BF16), "0.1001");
        let bf16_big = half::bf16::from_f64(1e10).to_f64();
        assert_eq!(format_float(bf16_big, PrimitiveType::BF16), "9.999e+09");
        assert_eq!(format_float(f64::NAN, PrimitiveType::F32), "nan");
        assert_eq!(format_float(-f64::NAN, PrimitiveType::F64), "-nan");
        // Widened at run time: LLVM's constant folding of the conversion
        // drops the payload in release builds.
        let payload = std::hint::black_box(f32::from_bits(0x7fc0_0001)) as f64;
        assert_eq!(format_float(payload, PrimitiveType::F32), "nan(0x400001)");
    }
}
