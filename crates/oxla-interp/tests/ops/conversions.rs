//! `convert`, `bitcast-convert` and `bitcast`.

use crate::common::check_op;

#[test]
fn float_to_int_truncates_saturates_and_maps_nan_to_zero() {
    let x = ("f32[7]", "{nan, -nan, 1e10, -1e10, 2.9, -2.9, -0.9}");
    check_op(
        "s32[7]",
        "convert",
        "",
        &[x],
        "{0, 0, 2147483647, -2147483648, 2, -2, 0}",
    );
    check_op("u8[7]", "convert", "", &[x], "{0, 0, 255, 0, 2, 0, 0}");
    check_op(
        "s8[3]",
        "convert",
        "",
        &[("f32[3]", "{255.5, -129, inf}")],
        "{127, -128, 127}",
    );
    check_op(
        "u32[1]",
        "convert",
        "",
        &[("f32[1]", "{4294967296}")],
        "{4294967295}",
    );
    check_op(
        "s64[2]",
        "convert",
        "",
        &[("f64[2]", "{9.3e18, -inf}")],
        "{9223372036854775807, -9223372036854775808}",
    );
}

#[test]
fn int_to_int_wraps() {
    check_op(
        "s8[3]",
        "convert",
        "",
        &[("s64[3]", "{300, -300, 128}")],
        "{44, -44, -128}",
    );
    check_op(
        "u32[1]",
        "convert",
        "",
        &[("s8[1]", "{-1}")],
        "{4294967295}",
    );
    check_op(
        "u64[1]",
        "convert",
        "",
        &[("s8[1]", "{-128}")],
        "{18446744073709551488}",
    );
    check_op("s8[1]", "convert", "", &[("u32[1]", "{2147483648}")], "{0}");
}

#[test]
fn int_to_float_rounds_to_nearest_even() {
    check_op(
        "f32[2]",
        "convert",
        "",
        &[("s32[2]", "{16777217, 16777219}")],
        "{16777216, 16777220}",
    );
    check_op(
        "f32[1]",
        "convert",
        "",
        &[("u64[1]", "{18446744073709551615}")],
        "{18446744073709551616}",
    );
    check_op(
        "f16[2]",
        "convert",
        "",
        &[("s64[2]", "{65519, 65520}")],
        "{65504, inf}",
    );
    check_op(
        "f16[2]",
        "convert",
        "",
        &[("u8[2]", "{255, 7}")],
        "{255, 7}",
    );
}

#[test]
fn narrowing_floats() {
    check_op(
        "bf16[4]",
        "convert",
        "",
        &[("f32[4]", "{1.00390625, 1.01171875, 3.4e38, 65504}")],
        "{1, 1.015625, inf, 65536}",
    );
    check_op(
        "f16[3]",
        "convert",
        "",
        &[("f32[3]", "{65519.99, 65520, 6e-08}")],
        "{65504, inf, 5.96046448e-08}",
    );
    // f64 -> f16 goes through f32 as on XLA:CPU (rounding twice).
    check_op(
        "f16[1]",
        "convert",
        "",
        &[("f64[1]", "{1.0004882812500009}")],
        "{1}",
    );
    check_op(
        "f32[2]",
        "convert",
        "",
        &[("f64[2]", "{nan, -inf}")],
        "{nan, -inf}",
    );
}

#[test]
fn pred_and_complex_conversions() {
    check_op(
        "pred[4]",
        "convert",
        "",
        &[("f32[4]", "{0, -0, nan, 0.5}")],
        "{false, false, true, true}",
    );
    check_op(
        "s32[2]",
        "convert",
        "",
        &[("pred[2]", "{true, false}")],
        "{1, 0}",
    );
    check_op(
        "c64[2]",
        "convert",
        "",
        &[("s32[2]", "{3, -1}")],
        "{(3, 0), (-1, 0)}",
    );
    check_op(
        "c64[1]",
        "convert",
        "",
        &[("c128[1]", "{(1e300, 0.5)}")],
        "{(inf, 0.5)}",
    );
}

#[test]
fn bitcast_convert_same_width() {
    check_op(
        "u32[2]",
        "bitcast-convert",
        "",
        &[("f32[2]", "{1, -0}")],
        "{1065353216, 2147483648}",
    );
    check_op(
        "f16[1]",
        "bitcast-convert",
        "",
        &[("s16[1]", "{15360}")],
        "{1}",
    );
    check_op(
        "bf16[1]",
        "bitcast-convert",
        "",
        &[("u16[1]", "{16256}")],
        "{1}",
    );
}

#[test]
fn bitcast_convert_changes_width_little_endian() {
    check_op(
        "u8[1,4]",
        "bitcast-convert",
        "",
        &[("u32[1]", "{287454020}")],
        "{{68, 51, 34, 17}}",
    );
    check_op(
        "u32[1]",
        "bitcast-convert",
        "",
        &[("u8[1,4]", "{{1, 2, 3, 4}}")],
        "{67305985}",
    );
    check_op(
        "f32[2]",
        "bitcast-convert",
        "",
        &[("f64[]", "1")],
        "{0, 1.875}",
    );
    check_op(
        "s32[3]",
        "bitcast-convert",
        "",
        &[("u16[3,2]", "{{1, 0}, {65535, 65535}, {0, 1}}")],
        "{1, -1, 65536}",
    );
}

#[test]
fn bitcast_reshapes_or_reinterprets() {
    check_op(
        "s32[2,2]",
        "bitcast",
        "",
        &[("s32[4]", "{1, 2, 3, 4}")],
        "{{1, 2}, {3, 4}}",
    );
    check_op(
        "u32[2]",
        "bitcast",
        "",
        &[("f32[2]", "{1, 2}")],
        "{1065353216, 1073741824}",
    );
}
