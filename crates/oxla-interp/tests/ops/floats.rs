//! Float edge cases: NaN, signed zeros and infinities through max/min,
//! compare, sign and rounding; f16/bf16 rounding once per op; complex parts.

use oxla_interp::{EvalOptions, NoServices};

use crate::common::{assert_bits, check_op, eval_op, lit, op_module, try_eval_with};

#[test]
fn maximum_and_minimum_propagate_nan_and_order_zeros() {
    let a = ("f32[6]", "{nan, 1, -0, 0, -inf, nan}");
    let b = ("f32[6]", "{1, nan, 0, -0, nan, -inf}");
    check_op(
        "f32[6]",
        "maximum",
        "",
        &[a, b],
        "{nan, nan, 0, 0, nan, nan}",
    );
    check_op(
        "f32[6]",
        "minimum",
        "",
        &[a, b],
        "{nan, nan, -0, -0, nan, nan}",
    );
    check_op(
        "f64[3]",
        "maximum",
        "",
        &[("f64[3]", "{-inf, 2, -0}"), ("f64[3]", "{inf, -3, -0}")],
        "{inf, 2, -0}",
    );
    check_op(
        "bf16[2]",
        "minimum",
        "",
        &[("bf16[2]", "{nan, 0}"), ("bf16[2]", "{1, -0}")],
        "{nan, -0}",
    );
}

#[test]
fn ieee_comparisons() {
    let a = ("f32[5]", "{nan, 1, -0, inf, nan}");
    let b = ("f32[5]", "{1, nan, 0, inf, nan}");
    check_op(
        "pred[5]",
        "compare",
        "direction=EQ",
        &[a, b],
        "{false, false, true, true, false}",
    );
    check_op(
        "pred[5]",
        "compare",
        "direction=NE",
        &[a, b],
        "{true, true, false, false, true}",
    );
    check_op(
        "pred[5]",
        "compare",
        "direction=LT",
        &[a, b],
        "{false, false, false, false, false}",
    );
    check_op(
        "pred[5]",
        "compare",
        "direction=GE",
        &[a, b],
        "{false, false, true, true, false}",
    );
}

#[test]
fn total_order_comparisons() {
    let a = ("f32[5]", "{-0, nan, -nan, -inf, nan}");
    let b = ("f32[5]", "{0, inf, -inf, -1, nan}");
    check_op(
        "pred[5]",
        "compare",
        "direction=LT, type=TOTALORDER",
        &[a, b],
        "{true, false, true, true, false}",
    );
    check_op(
        "pred[5]",
        "compare",
        "direction=EQ, type=TOTALORDER",
        &[a, b],
        "{false, false, false, false, true}",
    );
    check_op(
        "pred[2]",
        "compare",
        "direction=GT, type=TOTALORDER",
        &[("f64[2]", "{nan, 0}"), ("f64[2]", "{inf, -0}")],
        "{true, true}",
    );
}

#[test]
fn sign_of_floats() {
    check_op(
        "f32[7]",
        "sign",
        "",
        &[("f32[7]", "{-0, 0, nan, -inf, inf, -2.5, 1e-40}")],
        "{-0, 0, nan, -1, 1, -1, 1}",
    );
    check_op(
        "f16[3]",
        "sign",
        "",
        &[("f16[3]", "{-0, 3, -7}")],
        "{-0, 1, -1}",
    );
}

#[test]
fn rounding() {
    let x = (
        "f32[9]",
        "{0.5, -0.5, 2.5, 1.5, -2.5, 0.49999997, -0.4, nan, -inf}",
    );
    check_op(
        "f32[9]",
        "round-nearest-afz",
        "",
        &[x],
        "{1, -1, 3, 2, -3, 0, -0, nan, -inf}",
    );
    check_op(
        "f32[9]",
        "round-nearest-even",
        "",
        &[x],
        "{0, -0, 2, 2, -2, 0, -0, nan, -inf}",
    );
    check_op(
        "f32[3]",
        "floor",
        "",
        &[("f32[3]", "{-0.5, -0, 1.5}")],
        "{-1, -0, 1}",
    );
    check_op(
        "f32[3]",
        "ceil",
        "",
        &[("f32[3]", "{-0.5, -0, 1.5}")],
        "{-0, -0, 2}",
    );
    // Denormals are kept (IEEE): ceil of the smallest denormal is 1.
    check_op("f32[1]", "ceil", "", &[("f32[1]", "{1.4e-45}")], "{1}");
}

#[test]
fn float_remainder_is_fmod() {
    check_op(
        "f32[7]",
        "remainder",
        "",
        &[
            ("f32[7]", "{5.5, -5.5, 5.5, -6, inf, 1, 0}"),
            ("f32[7]", "{2, 2, -2, 3, 2, inf, 1}"),
        ],
        "{1.5, -1.5, 1.5, -0, nan, 1, 0}",
    );
}

#[test]
fn float_power_special_cases() {
    check_op(
        "f64[8]",
        "power",
        "",
        &[
            ("f64[8]", "{nan, 1, -1, -8, -2, -0, 0, 2}"),
            ("f64[8]", "{0, nan, inf, 0.5, 3, -1, -1, -inf}"),
        ],
        "{1, 1, 1, nan, -8, -inf, inf, 0}",
    );
}

#[test]
fn is_finite_and_unary_functions() {
    check_op(
        "pred[4]",
        "is-finite",
        "",
        &[("f32[4]", "{1, inf, -inf, nan}")],
        "{true, false, false, false}",
    );
    check_op(
        "f32[3]",
        "sqrt",
        "",
        &[("f32[3]", "{-0, 4, -1}")],
        "{-0, 2, nan}",
    );
    check_op(
        "f32[4]",
        "rsqrt",
        "",
        &[("f32[4]", "{0, -0, 4, inf}")],
        "{inf, -inf, 0.5, 0}",
    );
    check_op(
        "f32[3]",
        "cbrt",
        "",
        &[("f32[3]", "{-8, -0, inf}")],
        "{-2, -0, inf}",
    );
    check_op(
        "f32[3]",
        "logistic",
        "",
        &[("f32[3]", "{0, inf, -inf}")],
        "{0.5, 1, 0}",
    );
    check_op(
        "f32[3]",
        "log-plus-one",
        "",
        &[("f32[3]", "{-0, -1, -2}")],
        "{-0, -inf, nan}",
    );
    check_op(
        "f32[2]",
        "exponential-minus-one",
        "",
        &[("f32[2]", "{-0, -inf}")],
        "{-0, -1}",
    );
    check_op(
        "f32[3]",
        "erf",
        "",
        &[("f32[3]", "{-0, inf, -inf}")],
        "{-0, 1, -1}",
    );
    check_op("f32[2]", "tanh", "", &[("f32[2]", "{-0, inf}")], "{-0, 1}");
    check_op(
        "f32[3]",
        "atan2",
        "",
        &[("f32[3]", "{0, -0, 1}"), ("f32[3]", "{-0, 1, 0}")],
        "{3.14159274, -0, 1.57079637}",
    );
    check_op(
        "f32[1]",
        "exponential",
        "",
        &[("f32[1]", "{1}")],
        "{2.71828175}",
    );
    check_op("f64[1]", "log", "", &[("f64[1]", "{0}")], "{-inf}");
}

#[test]
fn half_types_round_once_per_operation() {
    // bf16: 1 + 2^-8 is a tie that rounds to even (1); 1 + 3*2^-8 rounds up.
    check_op(
        "bf16[2]",
        "add",
        "",
        &[
            ("bf16[2]", "{1, 1}"),
            ("bf16[2]", "{0.00390625, 0.01171875}"),
        ],
        "{1, 1.015625}",
    );
    // a*b+c in two ops: the product is rounded to bf16 before the add.
    let prod = eval_op(
        "bf16[1]",
        "multiply",
        "",
        &[("bf16[1]", "{1.0078125}"), ("bf16[1]", "{1.0078125}")],
    );
    assert_bits(&prod, &lit("bf16[1]", "{1.015625}"));
    check_op(
        "f16[2]",
        "multiply",
        "",
        &[("f16[2]", "{300, 0.0001}"), ("f16[2]", "{300, 0.0001}")],
        "{inf, 0}",
    );
    check_op(
        "f16[1]",
        "divide",
        "",
        &[("f16[1]", "{1}"), ("f16[1]", "{3}")],
        "{0.333251953}",
    );
}

#[test]
fn complex_parts() {
    check_op(
        "c64[2]",
        "complex",
        "",
        &[("f32[2]", "{1, -0}"), ("f32[2]", "{2, nan}")],
        "{(1, 2), (-0, nan)}",
    );
    check_op(
        "f32[2]",
        "real",
        "",
        &[("c64[2]", "{(1, 2), (-3, 4)}")],
        "{1, -3}",
    );
    check_op(
        "f64[2]",
        "imag",
        "",
        &[("c128[2]", "{(1, 2), (-3, -4)}")],
        "{2, -4}",
    );
    check_op(
        "f32[2]",
        "abs",
        "",
        &[("c64[2]", "{(3, 4), (-5, 12)}")],
        "{5, 13}",
    );
    check_op(
        "c64[1]",
        "multiply",
        "",
        &[("c64[1]", "{(1, 2)}"), ("c64[1]", "{(3, 4)}")],
        "{(-5, 10)}",
    );
    check_op(
        "c128[1]",
        "divide",
        "",
        &[("c128[1]", "{(-5, 10)}"), ("c128[1]", "{(3, 4)}")],
        "{(1, 2)}",
    );
    check_op(
        "pred[2]",
        "compare",
        "direction=EQ",
        &[
            ("c64[2]", "{(1, 2), (1, nan)}"),
            ("c64[2]", "{(1, 2), (1, nan)}"),
        ],
        "{true, false}",
    );
    check_op(
        "c64[1]",
        "sign",
        "",
        &[("c64[1]", "{(3, 4)}")],
        "{(0.6, 0.8)}",
    );
}

#[test]
fn reduce_precision_is_bit_exact() {
    // To bf16's format (8, 7): ties to even; to f16's (5, 10): overflow to inf, tiny to zero.
    check_op(
        "f32[3]",
        "reduce-precision",
        "exponent_bits=8, mantissa_bits=7",
        &[("f32[3]", "{1.00390625, 1.01171875, nan}")],
        "{1, 1.015625, nan}",
    );
    check_op(
        "f64[3]",
        "reduce-precision",
        "exponent_bits=5, mantissa_bits=10",
        &[("f64[3]", "{65520, 65505, 1e-10}")],
        "{inf, 65504, 0}",
    );
    // A NaN comes back unchanged, even with no mantissa bits left.
    check_op(
        "f64[1]",
        "reduce-precision",
        "exponent_bits=5, mantissa_bits=0",
        &[("f64[1]", "{nan}")],
        "{nan}",
    );
}

#[test]
fn float_clamp_and_select() {
    check_op(
        "f32[4]",
        "clamp",
        "",
        &[
            ("f32[]", "0"),
            ("f32[4]", "{-0, nan, 5, -1}"),
            ("f32[]", "1"),
        ],
        "{0, nan, 1, 0}",
    );
    check_op(
        "f32[3]",
        "select",
        "",
        &[
            ("pred[3]", "{true, false, true}"),
            ("f32[3]", "{1, 2, 3}"),
            ("f32[3]", "{-1, -2, -3}"),
        ],
        "{1, -2, 3}",
    );
}

#[test]
fn flushing_denormals_models_xla_cpu() {
    let flush = EvalOptions::default().flush_denormals(true);
    let run = |op: &str, out: &str, args: &[(&str, &str)], options: &EvalOptions| {
        let shapes: Vec<&str> = args.iter().map(|a| a.0).collect();
        let values: Vec<_> = args.iter().map(|(s, v)| lit(s, v)).collect();
        try_eval_with(
            &op_module(out, op, "", &shapes, ""),
            &values,
            options,
            &NoServices,
        )
        .unwrap()
    };
    let den = ("f32[2]", "{1e-40, -1e-40}");
    let zero = ("f32[2]", "{0, 0}");
    // Arithmetic reads and writes denormals as zero...
    assert_bits(
        &run("add", "f32[2]", &[den, zero], &flush),
        &lit("f32[2]", "{0, 0}"),
    );
    assert_bits(
        &run("add", "f32[2]", &[den, zero], &EvalOptions::default()),
        &lit("f32[2]", "{1e-40, -1e-40}"),
    );
    assert_bits(
        &run("ceil", "f32[2]", &[den], &flush),
        &lit("f32[2]", "{0, -0}"),
    );
    assert_bits(
        &run("convert", "f64[2]", &[den], &flush),
        &lit("f64[2]", "{0, -0}"),
    );
    let cmp = op_module(
        "pred[2]",
        "compare",
        "direction=EQ",
        &["f32[2]", "f32[2]"],
        "",
    );
    let eq = try_eval_with(
        &cmp,
        &[lit(den.0, den.1), lit(zero.0, zero.1)],
        &flush,
        &NoServices,
    )
    .unwrap();
    assert_bits(&eq, &lit("pred[2]", "{true, true}"));
    // ... bit operations keep them, and so does f16 (computed in f32, where its denormals are normal).
    assert_bits(
        &run("negate", "f32[2]", &[den], &flush),
        &lit("f32[2]", "{-1e-40, 1e-40}"),
    );
    assert_bits(
        &run("convert", "bf16[2]", &[den], &flush),
        &lit("bf16[2]", "{1e-40, -1e-40}"),
    );
    let h = ("f16[1]", "{6e-08}");
    assert_bits(
        &run("add", "f16[1]", &[h, ("f16[1]", "{0}")], &flush),
        &lit("f16[1]", "{6e-08}"),
    );
}
