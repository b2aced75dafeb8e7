//! Shapes as XLA prints them: layouts on every non-scalar array when asked
//! (the default layout spelled out), and `/*index=K*/` before tuple
//! elements 5, 10, 15, ... (counting again from 0 inside each nested tuple).

use std::fmt::Write as _;

use oxla_hlo::Shape;

/// The `/*index=K*/` marker XLA writes before every fifth element of a list.
pub(crate) fn index_marker(out: &mut String, i: usize) {
    if i > 0 && i.is_multiple_of(5) {
        let _ = write!(out, "/*index={i}*/");
    }
}

pub(crate) fn write_shape(out: &mut String, shape: &Shape, with_layout: bool) {
    match shape {
        Shape::Array(a) => {
            // Writing into a String cannot fail.
            let _ = a.write(out, with_layout);
        }
        Shape::Tuple(elements) => {
            out.push('(');
            for (i, e) in elements.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                index_marker(out, i);
                write_shape(out, e, with_layout);
            }
            out.push(')');
        }
        Shape::Token => out.push_str("token[]"),
    }
}

pub(crate) fn shape_text(shape: &Shape, with_layout: bool) -> String {
    let mut s = String::new();
    write_shape(&mut s, shape, with_layout);
    s
}
