//! Integer arithmetic edge cases, each as XLA defines it (no traps, wrapping).

use crate::common::check_op;

#[test]
fn signed_division_by_zero_is_minus_one() {
    check_op(
        "s32[4]",
        "divide",
        "",
        &[
            ("s32[4]", "{7, -7, 0, -2147483648}"),
            ("s32[4]", "{0, 0, 0, 0}"),
        ],
        "{-1, -1, -1, -1}",
    );
    check_op(
        "s8[2]",
        "divide",
        "",
        &[("s8[2]", "{5, -128}"), ("s8[2]", "{0, 0}")],
        "{-1, -1}",
    );
}

#[test]
fn unsigned_division_by_zero_is_all_ones() {
    check_op(
        "u8[2]",
        "divide",
        "",
        &[("u8[2]", "{7, 0}"), ("u8[2]", "{0, 0}")],
        "{255, 255}",
    );
    check_op(
        "u64[1]",
        "divide",
        "",
        &[("u64[1]", "{1}"), ("u64[1]", "{0}")],
        "{18446744073709551615}",
    );
}

#[test]
fn remainder_by_zero_is_the_dividend() {
    check_op(
        "s32[3]",
        "remainder",
        "",
        &[("s32[3]", "{7, -7, 0}"), ("s32[3]", "{0, 0, 0}")],
        "{7, -7, 0}",
    );
    check_op(
        "u16[2]",
        "remainder",
        "",
        &[("u16[2]", "{65535, 3}"), ("u16[2]", "{0, 0}")],
        "{65535, 3}",
    );
}

#[test]
fn int_min_divided_by_minus_one_is_int_min() {
    check_op(
        "s32[1]",
        "divide",
        "",
        &[("s32[1]", "{-2147483648}"), ("s32[1]", "{-1}")],
        "{-2147483648}",
    );
    check_op(
        "s64[1]",
        "divide",
        "",
        &[("s64[1]", "{-9223372036854775808}"), ("s64[1]", "{-1}")],
        "{-9223372036854775808}",
    );
}

#[test]
fn int_min_remainder_minus_one_is_zero() {
    check_op(
        "s8[1]",
        "remainder",
        "",
        &[("s8[1]", "{-128}"), ("s8[1]", "{-1}")],
        "{0}",
    );
    check_op(
        "s32[1]",
        "remainder",
        "",
        &[("s32[1]", "{-2147483648}"), ("s32[1]", "{-1}")],
        "{0}",
    );
}

#[test]
fn division_truncates_and_remainder_takes_the_dividends_sign() {
    check_op(
        "s32[4]",
        "divide",
        "",
        &[("s32[4]", "{7, -7, 7, -7}"), ("s32[4]", "{-2, 2, 2, -2}")],
        "{-3, -3, 3, 3}",
    );
    check_op(
        "s32[4]",
        "remainder",
        "",
        &[("s32[4]", "{-5, 7, 5, -7}"), ("s32[4]", "{2, -2, 2, -2}")],
        "{-1, 1, 1, -1}",
    );
}

#[test]
fn arithmetic_wraps() {
    check_op(
        "s8[3]",
        "multiply",
        "",
        &[("s8[3]", "{100, -128, 16}"), ("s8[3]", "{3, -1, 16}")],
        "{44, -128, 0}",
    );
    check_op(
        "s8[2]",
        "add",
        "",
        &[("s8[2]", "{127, -128}"), ("s8[2]", "{1, -1}")],
        "{-128, 127}",
    );
    check_op(
        "u8[2]",
        "subtract",
        "",
        &[("u8[2]", "{0, 5}"), ("u8[2]", "{1, 10}")],
        "{255, 251}",
    );
    check_op(
        "s32[1]",
        "negate",
        "",
        &[("s32[1]", "{-2147483648}")],
        "{-2147483648}",
    );
    check_op(
        "s32[2]",
        "abs",
        "",
        &[("s32[2]", "{-2147483648, -5}")],
        "{-2147483648, 5}",
    );
}

#[test]
fn shifts_by_out_of_range_amounts() {
    let amounts = ("s32[5]", "{32, 33, -1, 100, 1}");
    check_op(
        "s32[5]",
        "shift-left",
        "",
        &[("s32[5]", "{1, 1, 1, 1, 1}"), amounts],
        "{0, 0, 0, 0, 2}",
    );
    check_op(
        "s32[5]",
        "shift-right-logical",
        "",
        &[("s32[5]", "{-1, -1, -1, -1, -8}"), amounts],
        "{0, 0, 0, 0, 2147483644}",
    );
    check_op(
        "s32[5]",
        "shift-right-arithmetic",
        "",
        &[("s32[5]", "{-8, 8, -1, 5, -8}"), amounts],
        "{-1, 0, -1, 0, -4}",
    );
    // Arithmetic shifts of unsigned values treat them as signed, logical shifts of signed values as unsigned.
    check_op(
        "u8[3]",
        "shift-right-arithmetic",
        "",
        &[("u8[3]", "{200, 200, 100}"), ("u8[3]", "{1, 8, 1}")],
        "{228, 255, 50}",
    );
    check_op(
        "s8[1]",
        "shift-right-logical",
        "",
        &[("s8[1]", "{-100}"), ("s8[1]", "{1}")],
        "{78}",
    );
}

#[test]
fn integer_power() {
    check_op(
        "s32[8]",
        "power",
        "",
        &[
            ("s32[8]", "{3, 3, 7, 2, -1, -1, 0, 5}"),
            ("s32[8]", "{64, 65, 100, -1, -1, -2, 0, 33}"),
        ],
        "{1, 3, 1729633, 0, -1, 1, 1, -1671385723}",
    );
    check_op(
        "u8[4]",
        "power",
        "",
        &[
            ("u8[4]", "{3, 255, 255, 1}"),
            ("u8[4]", "{200, 129, 130, 200}"),
        ],
        "{0, 255, 1, 1}",
    );
    check_op(
        "s32[2]",
        "power",
        "",
        &[("s32[2]", "{0, 1}"), ("s32[2]", "{-1, -7}")],
        "{0, 1}",
    );
}

#[test]
fn bit_counting() {
    check_op(
        "s32[4]",
        "count-leading-zeros",
        "",
        &[("s32[4]", "{0, 1, -1, 65536}")],
        "{32, 31, 0, 15}",
    );
    check_op(
        "u8[3]",
        "count-leading-zeros",
        "",
        &[("u8[3]", "{0, 1, 128}")],
        "{8, 7, 0}",
    );
    check_op(
        "s8[3]",
        "popcnt",
        "",
        &[("s8[3]", "{-1, 0, 5}")],
        "{8, 0, 2}",
    );
    check_op(
        "u64[1]",
        "popcnt",
        "",
        &[("u64[1]", "{18446744073709551615}")],
        "{64}",
    );
    check_op("s16[2]", "not", "", &[("s16[2]", "{0, -1}")], "{-1, 0}");
}

#[test]
fn sign_of_integers() {
    check_op(
        "s32[4]",
        "sign",
        "",
        &[("s32[4]", "{-5, 0, 7, -2147483648}")],
        "{-1, 0, 1, -1}",
    );
}

#[test]
fn mulhi() {
    check_op(
        "s32[3]",
        "mulhi",
        "",
        &[
            ("s32[3]", "{-1, 65536, 2147483647}"),
            ("s32[3]", "{1, 65536, 2147483647}"),
        ],
        "{-1, 1, 1073741823}",
    );
    check_op(
        "u32[2]",
        "mulhi",
        "",
        &[
            ("u32[2]", "{4294967295, 65536}"),
            ("u32[2]", "{4294967295, 65536}"),
        ],
        "{4294967294, 1}",
    );
    check_op(
        "s64[1]",
        "mulhi",
        "",
        &[("s64[1]", "{-9223372036854775808}"), ("s64[1]", "{2}")],
        "{-1}",
    );
}

#[test]
fn bitwise_and_logical() {
    check_op(
        "u16[2]",
        "and",
        "",
        &[("u16[2]", "{12, 65535}"), ("u16[2]", "{10, 255}")],
        "{8, 255}",
    );
    check_op(
        "s8[2]",
        "or",
        "",
        &[("s8[2]", "{12, -128}"), ("s8[2]", "{3, 1}")],
        "{15, -127}",
    );
    check_op(
        "pred[4]",
        "xor",
        "",
        &[
            ("pred[4]", "{false, false, true, true}"),
            ("pred[4]", "{false, true, false, true}"),
        ],
        "{false, true, true, false}",
    );
    check_op(
        "pred[2]",
        "not",
        "",
        &[("pred[2]", "{false, true}")],
        "{true, false}",
    );
    check_op(
        "pred[4]",
        "maximum",
        "",
        &[
            ("pred[4]", "{false, false, true, true}"),
            ("pred[4]", "{false, true, false, true}"),
        ],
        "{false, true, true, true}",
    );
}

#[test]
fn integer_compare_and_clamp() {
    check_op(
        "pred[3]",
        "compare",
        "direction=LT",
        &[("u32[3]", "{1, 4294967295, 5}"), ("u32[3]", "{2, 0, 5}")],
        "{true, false, false}",
    );
    check_op(
        "pred[3]",
        "compare",
        "direction=GE",
        &[("s8[3]", "{-1, 0, -128}"), ("s8[3]", "{0, 0, 127}")],
        "{false, true, false}",
    );
    // min > max gives max, as XLA's min(max(x, lo), hi).
    check_op(
        "s32[4]",
        "clamp",
        "",
        &[
            ("s32[]", "0"),
            ("s32[4]", "{-5, 3, 12, 7}"),
            ("s32[]", "10"),
        ],
        "{0, 3, 10, 7}",
    );
    check_op(
        "s32[1]",
        "clamp",
        "",
        &[("s32[]", "5"), ("s32[1]", "{7}"), ("s32[]", "1")],
        "{1}",
    );
}
