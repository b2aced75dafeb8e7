//! `dot` over ranks and dimension numbers, accumulation types, `ragged-dot`.

use oxla_hlo::Literal;

use crate::common::{assert_bits, check_op, eval, eval_op, lit};

const MM: &str = "lhs_contracting_dims={1}, rhs_contracting_dims={0}";

#[test]
fn vector_matrix_ranks() {
    check_op(
        "f32[]",
        "dot",
        "lhs_contracting_dims={0}, rhs_contracting_dims={0}",
        &[("f32[3]", "{1, 2, 3}"), ("f32[3]", "{4, 5, 6}")],
        "32",
    );
    check_op(
        "f32[2]",
        "dot",
        MM,
        &[
            ("f32[2,3]", "{{1, 2, 3}, {4, 5, 6}}"),
            ("f32[3]", "{1, 0, -1}"),
        ],
        "{-2, -2}",
    );
    check_op(
        "f32[2]",
        "dot",
        "lhs_contracting_dims={0}, rhs_contracting_dims={0}",
        &[
            ("f32[3]", "{1, 0, -1}"),
            ("f32[3,2]", "{{1, 2}, {3, 4}, {5, 6}}"),
        ],
        "{-4, -4}",
    );
    check_op(
        "f32[2,2]",
        "dot",
        MM,
        &[
            ("f32[2,3]", "{{1, 2, 3}, {4, 5, 6}}"),
            ("f32[3,2]", "{{1, 2}, {3, 4}, {5, 6}}"),
        ],
        "{{22, 28}, {49, 64}}",
    );
    // No contracting dimensions: an outer product.
    check_op(
        "s32[2,3]",
        "dot",
        "",
        &[("s32[2]", "{1, 2}"), ("s32[3]", "{1, 10, 100}")],
        "{{1, 10, 100}, {2, 20, 200}}",
    );
}

#[test]
fn batch_and_multiple_contracting_dims() {
    check_op(
        "s32[2,1,1]",
        "dot",
        "lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}",
        &[
            ("s32[2,1,2]", "{{{1, 2}}, {{3, 4}}}"),
            ("s32[2,2,1]", "{{{5}, {6}}, {{7}, {8}}}"),
        ],
        "{{{17}}, {{53}}}",
    );
    // Contract two dimensions at once, batch dimension not leading.
    check_op(
        "s32[2]",
        "dot",
        "lhs_batch_dims={1}, rhs_batch_dims={0}, lhs_contracting_dims={0,2}, rhs_contracting_dims={2,1}",
        &[
            ("s32[2,2,2]", "{{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}}"),
            ("s32[2,2,2]", "{{{1, 1}, {1, 1}}, {{1, 0}, {0, 0}}}"),
        ],
        "{14, 3}",
    );
}

#[test]
fn integer_dots_wrap_and_widen() {
    check_op(
        "s8[]",
        "dot",
        "lhs_contracting_dims={0}, rhs_contracting_dims={0}",
        &[("s8[2]", "{100, 100}"), ("s8[2]", "{2, 1}")],
        "44",
    );
    check_op(
        "s32[]",
        "dot",
        "lhs_contracting_dims={0}, rhs_contracting_dims={0}",
        &[("s8[2]", "{100, 100}"), ("s8[2]", "{2, 1}")],
        "300",
    );
    check_op(
        "u32[]",
        "dot",
        "lhs_contracting_dims={0}, rhs_contracting_dims={0}",
        &[("u8[2]", "{255, 255}"), ("u8[2]", "{255, 255}")],
        "130050",
    );
}

#[test]
fn half_dots_accumulate_in_f32() {
    // 4096 ones summed in f16 would stop at 2048; accumulated in f32 and rounded once, 4096.
    let ones = format!("{{{}}}", vec!["1"; 4096].join(", "));
    let got = eval_op(
        "f16[]",
        "dot",
        "lhs_contracting_dims={0}, rhs_contracting_dims={0}",
        &[("f16[4096]", &ones), ("f16[4096]", &ones)],
    );
    assert_bits(&got, &lit("f16[]", "4096"));
    check_op(
        "c64[]",
        "dot",
        "lhs_contracting_dims={0}, rhs_contracting_dims={0}",
        &[
            ("c64[2]", "{(1, 1), (0, 2)}"),
            ("c64[2]", "{(1, -1), (3, 0)}"),
        ],
        "(2, 6)",
    );
}

#[test]
fn ragged_dot_groups_rows() {
    // Rows 0-1 use rhs[0], row 2 uses rhs[1], row 3 is past the groups: zeros.
    check_op(
        "f32[4,2]",
        "ragged-dot",
        "lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0}, rhs_group_dims={0}",
        &[
            ("f32[4,2]", "{{1, 0}, {0, 1}, {1, 1}, {5, 5}}"),
            ("f32[2,2,2]", "{{{1, 2}, {3, 4}}, {{10, 20}, {30, 40}}}"),
            ("s32[2]", "{2, 1}"),
        ],
        "{{1, 2}, {3, 4}, {40, 60}, {0, 0}}",
    );
}

/// Found by the `builder_calls` fuzz target: contracting a 2^40-long
/// dimension of an empty operand built a 2^40-entry index table (a hang,
/// then an allocation failure) for a result with no elements.
#[test]
fn an_empty_dot_with_a_huge_contracting_dimension_returns_at_once() {
    let text = "HloModule t\nENTRY e {\n  p = f32[1099511627776,0] parameter(0)\n  ROOT d = f32[0,0] dot(p, p), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n}\n";
    let arg = Literal::from_vec(&[1 << 40, 0], Vec::<f32>::new()).unwrap();
    assert_eq!(
        eval(text, &[arg]),
        Literal::from_vec(&[0, 0], Vec::<f32>::new()).unwrap()
    );
}
