//! Literals in the one-line form XLA's `DenseArrayToStringHelper` and tuple
//! printer produce: `{1, 2}` for rank 1, `{ { 1, 2 }, { 3, 4 } }` above
//! (with `{a}` for one-element rows, `{}` for empty ones, and `/*iK=V*/`
//! position comments above rank 3), pred arrays as 1/0, and tuples as
//! `( a, b )`, except that an empty array whose nested form would be huge
//! is `{}` (see `oxla_hlo::literal::empty_array_is_compact`). Floats follow XLA's `RoundTripFpToString` through
//! `oxla_hlo::literal::format_float`; NaNs are read from their bits so
//! payloads survive exactly.

use std::fmt::Write as _;

use oxla_hlo::literal::format_float;
use oxla_hlo::{ArrayData, ArrayLiteral, Literal, PrimitiveType};

use crate::floats::FloatBits;

pub(crate) fn write_literal(out: &mut String, literal: &Literal) {
    match literal {
        Literal::Array(a) => write_array(out, a),
        Literal::Tuple(elements) => {
            out.push_str("( ");
            for (i, e) in elements.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_literal(out, e);
            }
            out.push_str(" )");
        }
        Literal::Token => out.push_str("token"),
    }
}

fn write_array(out: &mut String, a: &ArrayLiteral) {
    let dims: Vec<usize> = a
        .dims()
        .iter()
        .map(|&d| usize::try_from(d).unwrap_or(0))
        .collect();
    if dims.is_empty() {
        write_element(out, a.data(), 0, false);
        return;
    }
    if oxla_hlo::literal::empty_array_is_compact(a.dims()) {
        out.push_str("{}");
        return;
    }
    let mut index = Vec::with_capacity(dims.len());
    let mut next = 0usize;
    write_level(out, a.data(), &dims, &mut index, &mut next);
}

/// One brace level; `index` holds the indices of the enclosing levels and
/// `next` the row-major position of the next element.
fn write_level(
    out: &mut String,
    data: &ArrayData,
    dims: &[usize],
    index: &mut Vec<usize>,
    next: &mut usize,
) {
    let rank = dims.len();
    let level = index.len();
    let size = dims.get(level).copied().unwrap_or(0);
    let innermost = level + 1 == rank;
    // Opening brace.
    if rank == 1 {
        out.push('{');
    } else if innermost {
        out.push('{');
        if size > 1 {
            out.push(' ');
        }
    } else if rank > 3 && level > 0 {
        let _ = write!(
            out,
            "{{ /*i{}={}*/",
            level - 1,
            index.last().copied().unwrap_or(0)
        );
        if size > 0 {
            out.push(' ');
        }
    } else {
        out.push_str("{ ");
    }
    for i in 0..size {
        if i > 0 {
            out.push_str(", ");
        }
        if innermost {
            write_element(out, data, *next, true);
            *next += 1;
        } else {
            index.push(i);
            write_level(out, data, dims, index, next);
            index.pop();
        }
    }
    // Closing brace.
    if rank == 1 {
        out.push('}');
    } else if innermost {
        if size > 1 {
            out.push(' ');
        }
        out.push('}');
    } else {
        out.push_str(" }");
    }
}

/// Element `i`; pred elements of arrays print as 1/0, scalars as true/false.
fn write_element(out: &mut String, data: &ArrayData, i: usize, in_array: bool) {
    let ty = data.element_type();
    let missing = "?";
    let _ = match data {
        ArrayData::Pred(v) => match v.get(i) {
            Some(&b) if in_array => write!(out, "{}", u8::from(b)),
            Some(b) => write!(out, "{b}"),
            None => write!(out, "{missing}"),
        },
        ArrayData::S8(v) => write_int(out, v.get(i).map(|&x| x.into())),
        ArrayData::S16(v) => write_int(out, v.get(i).map(|&x| x.into())),
        ArrayData::S32(v) => write_int(out, v.get(i).map(|&x| x.into())),
        ArrayData::S64(v) => write_int(out, v.get(i).map(|&x| x.into())),
        ArrayData::U8(v) => write_int(out, v.get(i).map(|&x| x.into())),
        ArrayData::U16(v) => write_int(out, v.get(i).map(|&x| x.into())),
        ArrayData::U32(v) => write_int(out, v.get(i).map(|&x| x.into())),
        ArrayData::U64(v) => write_int(out, v.get(i).map(|&x| x.into())),
        ArrayData::F16(v) => write_float(out, v.get(i).copied(), ty),
        ArrayData::BF16(v) => write_float(out, v.get(i).copied(), ty),
        ArrayData::F32(v) => write_float(out, v.get(i).copied(), ty),
        ArrayData::F64(v) => write_float(out, v.get(i).copied(), ty),
        ArrayData::C64(v) => write_complex(out, v.get(i).map(|c| (c.re, c.im)), ty),
        ArrayData::C128(v) => write_complex(out, v.get(i).map(|c| (c.re, c.im)), ty),
    };
}

fn write_int(out: &mut String, v: Option<i128>) -> std::fmt::Result {
    match v {
        Some(v) => write!(out, "{v}"),
        None => write!(out, "?"),
    }
}

/// A float as XLA prints it: `nan` for the default quiet NaN, `nan(0x..)`
/// with any other payload, otherwise `format_float`.
pub(crate) fn float_text<T: FloatBits>(v: T, ty: PrimitiveType) -> String {
    match v.nan_parts() {
        Some((negative, payload)) => {
            let sign = if negative { "-" } else { "" };
            if payload == T::default_nan_payload() {
                format!("{sign}nan")
            } else {
                format!("{sign}nan(0x{payload:x})")
            }
        }
        None => format_float(v.widen(), ty),
    }
}

fn write_float<T: FloatBits>(
    out: &mut String,
    v: Option<T>,
    ty: PrimitiveType,
) -> std::fmt::Result {
    match v {
        Some(v) => write!(out, "{}", float_text(v, ty)),
        None => write!(out, "?"),
    }
}

fn write_complex<T: FloatBits>(
    out: &mut String,
    v: Option<(T, T)>,
    ty: PrimitiveType,
) -> std::fmt::Result {
    match v {
        Some((re, im)) => write!(out, "({}, {})", float_text(re, ty), float_text(im, ty)),
        None => write!(out, "?"),
    }
}
