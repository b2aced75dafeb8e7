//! NumPy-style printing of arrays: `str()` (`[[1. 2.]\n [3. 4.]]`) and
//! `repr()` (`array([[1., 2.], [3., 4.]], dtype=float32)`), with columns
//! aligned as NumPy aligns them.

use oxla_hlo::literal::Scalar;
use oxla_hlo::{ArrayLiteral, PrimitiveType};

/// NumPy's name for an element type.
pub fn numpy_dtype(t: PrimitiveType) -> &'static str {
    use PrimitiveType::*;
    match t {
        Pred => "bool",
        S8 => "int8",
        S16 => "int16",
        S32 => "int32",
        S64 => "int64",
        U8 => "uint8",
        U16 => "uint16",
        U32 => "uint32",
        U64 => "uint64",
        F16 => "float16",
        BF16 => "bfloat16",
        F32 => "float32",
        F64 => "float64",
        C64 => "complex64",
        C128 => "complex128",
    }
}

/// A float as NumPy writes it: `1.`, `2.5`, `nan`, `-inf`, or `1.5e-07` in
/// scientific mode.
fn float_text(x: f64, scientific: bool) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if scientific {
        let s = format!("{x:e}");
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        let m = if m.contains('.') {
            m.to_string()
        } else {
            format!("{m}.")
        };
        let e: i32 = e.parse().unwrap_or(0);
        return format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    }
    let s = format!("{x}");
    if s.contains('.') { s } else { format!("{s}.") }
}

/// Every element's text, before alignment.
fn element_texts(a: &ArrayLiteral) -> Vec<String> {
    let ty = a.element_type();
    let n = a.element_count();
    let values: Vec<Scalar> = (0..n).map(|i| a.data().scalar(i)).collect();
    let finite = |v: f64| v.is_finite() && v != 0.0;
    let parts = |s: &Scalar| -> Vec<f64> {
        match *s {
            Scalar::Float(f) => vec![f],
            Scalar::Complex(re, im) => vec![re, im],
            _ => vec![],
        }
    };
    let all: Vec<f64> = values
        .iter()
        .flat_map(parts)
        .filter(|&v| finite(v))
        .map(f64::abs)
        .collect();
    let scientific = all.iter().any(|&v| !(1e-4..1e16).contains(&v));
    // Shortest text that reads back in the element's own precision.
    let narrow = |v: f64| -> f64 {
        match ty.component_type() {
            PrimitiveType::F32 => (v as f32).to_string().parse().unwrap_or(v),
            PrimitiveType::F16 | PrimitiveType::BF16 => {
                let f = v as f32;
                format!("{:.4}", f)
                    .parse::<f64>()
                    .map(|r| if (r as f32) == f { r } else { v })
                    .unwrap_or(v)
            }
            _ => v,
        }
    };
    values
        .iter()
        .map(|s| match *s {
            Scalar::Pred(b) => {
                if b {
                    "True".to_string()
                } else {
                    "False".to_string()
                }
            }
            Scalar::Int(i) => i.to_string(),
            Scalar::Float(f) => float_text(narrow(f), scientific),
            Scalar::Complex(re, im) => {
                let sign = if im.is_sign_negative() && !im.is_nan() {
                    "-"
                } else {
                    "+"
                };
                format!(
                    "{}{sign}{}j",
                    float_text(narrow(re), scientific),
                    float_text(narrow(im.abs()), scientific)
                )
            }
        })
        .collect()
}

/// Pads texts so columns line up: integer parts right-aligned, fractions left-aligned.
fn align(texts: Vec<String>, floats: bool) -> Vec<String> {
    if !floats {
        let w = texts.iter().map(String::len).max().unwrap_or(0);
        return texts.into_iter().map(|t| format!("{t:>w$}")).collect();
    }
    let split: Vec<(String, String)> = texts
        .iter()
        .map(|t| match t.find('.') {
            Some(i) => (t[..i].to_string(), t[i..].to_string()),
            None => (t.clone(), String::new()),
        })
        .collect();
    let wi = split.iter().map(|(i, _)| i.len()).max().unwrap_or(0);
    let wf = split.iter().map(|(_, f)| f.len()).max().unwrap_or(0);
    split
        .into_iter()
        .map(|(i, f)| format!("{i:>wi$}{f:<wf$}"))
        .collect()
}

fn nest(out: &mut String, cells: &[String], dims: &[usize], depth: usize, sep: &str) {
    out.push('[');
    if dims.len() == 1 {
        out.push_str(&cells.join(sep));
    } else {
        let stride: usize = dims[1..].iter().product();
        for i in 0..dims[0] {
            if i > 0 {
                out.push_str(sep.trim_end());
                // One newline per remaining dimension, then the indentation.
                out.push_str(&"\n".repeat(dims.len() - 1));
                out.push_str(&" ".repeat(depth + 1));
            }
            nest(
                out,
                &cells[i * stride..(i + 1) * stride],
                &dims[1..],
                depth + 1,
                sep,
            );
        }
    }
    out.push(']');
}

fn render(a: &ArrayLiteral, sep: &str, indent: usize) -> String {
    let floats = a.element_type().is_float();
    let cells = align(element_texts(a), floats);
    let dims = a.shape().dims_usize();
    if dims.is_empty() {
        return cells.into_iter().next().unwrap_or_default();
    }
    let mut out = String::new();
    nest(&mut out, &cells, &dims, indent, sep);
    out
}

/// NumPy's `str()` of an array.
pub fn numpy_str(a: &ArrayLiteral) -> String {
    render(a, " ", 0)
}

/// NumPy's `repr()` of an array.
pub fn numpy_repr(a: &ArrayLiteral) -> String {
    let body = render(a, ", ", "array(".len());
    let default = matches!(
        a.element_type(),
        PrimitiveType::F64 | PrimitiveType::S64 | PrimitiveType::Pred
    );
    if default {
        format!("array({body})")
    } else {
        format!("array({body}, dtype={})", numpy_dtype(a.element_type()))
    }
}
