//! Shapes handed to the builder by other code (made with
//! `ArrayShape::new_unchecked`, or nested without bound) are errors naming
//! the op, never a module that fails later. Found by the `builder_calls`
//! fuzz target: an unchecked parameter shape used to build, verify, and
//! print as text that does not parse.

use oxla_builder::XlaBuilder;
use oxla_hlo::{ArrayShape, MAX_SHAPE_PARTS, MAX_TUPLE_DEPTH, PrimitiveType, Shape};

fn message(e: oxla_builder::BuildError) -> String {
    let text = e.to_string();
    // Drop the caller location that ends the message.
    text.split(" (at ").next().unwrap_or(&text).to_string()
}

#[test]
fn an_unchecked_parameter_shape_is_an_error() {
    let b = XlaBuilder::new("m");
    let bad = Shape::tuple(vec![Shape::Array(ArrayShape::new_unchecked(
        PrimitiveType::Pred,
        [-1, 0, 0],
    ))]);
    let p = b.parameter(0, &bad, "p");
    assert_eq!(
        message(b.build(p).unwrap_err()),
        "parameter: dimension 0 of pred[-1,0,0] is negative (-1)"
    );
}

#[test]
fn an_overflowing_custom_call_shape_is_an_error() {
    let b = XlaBuilder::new("m");
    let huge = Shape::Array(ArrayShape::new_unchecked(PrimitiveType::F32, [i64::MAX, 4]));
    let c = b.custom_call("target", &[], &huge);
    assert_eq!(
        message(b.build(c).unwrap_err()),
        "custom-call: the element count of f32[9223372036854775807,4] overflows"
    );
}

#[test]
fn tuples_nest_at_most_max_tuple_depth_levels() {
    let b = XlaBuilder::new("m");
    let mut t = b.constant_r0(1.0f32);
    for _ in 0..MAX_TUPLE_DEPTH {
        t = b.tuple(&[t]);
    }
    assert!(t.shape().is_ok());
    let deeper = b.tuple(&[t]);
    assert_eq!(
        message(b.build(deeper).unwrap_err()),
        "tuple: tuple shapes nest more than 64 levels deep"
    );
}

/// Found by the `builder_calls` fuzz target (a timeout): tuples repeating
/// their operand grow exponentially with each call, since shapes are trees.
#[test]
fn tuples_have_at_most_max_shape_parts_parts() {
    let b = XlaBuilder::new("m");
    let mut t = b.constant_r0(1.0f32);
    let mut parts = 1;
    while parts * 3 < MAX_SHAPE_PARTS {
        t = b.tuple(&[t, t, t]);
        parts = parts * 3 + 1;
    }
    assert!(t.shape().is_ok());
    let wider = b.tuple(&[t, t, t]);
    assert_eq!(
        message(b.build(wider).unwrap_err()),
        "tuple: the shape has more than 65536 parts (arrays, tokens and tuples)"
    );
}
