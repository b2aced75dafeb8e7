//! Gather (clamped starts, batching dimensions) and scatter (duplicates,
//! out-of-bounds windows skipped, variadic, batching dimensions).

use crate::common::{assert_bits, binary_computation, check_op, eval, lit, op_module};

#[test]
fn gather_rows() {
    check_op(
        "s32[2,3]",
        "gather",
        "offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}",
        &[
            ("s32[3,3]", "{{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}"),
            ("s32[2]", "{0, 2}"),
        ],
        "{{1, 2, 3}, {7, 8, 9}}",
    );
}

#[test]
fn gather_clamps_starts_into_the_operand() {
    check_op(
        "s32[4,3]",
        "gather",
        "offset_dims={1}, collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=1, slice_sizes={3}",
        &[
            ("s32[10]", "{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}"),
            ("s32[4]", "{8, -1, -100, 100}"),
        ],
        "{{7, 8, 9}, {0, 1, 2}, {0, 1, 2}, {7, 8, 9}}",
    );
}

#[test]
fn gather_points_and_batching_dims() {
    check_op(
        "s32[2]",
        "gather",
        "offset_dims={}, collapsed_slice_dims={0,1}, start_index_map={0,1}, index_vector_dim=1, slice_sizes={1,1}",
        &[
            ("s32[3,3]", "{{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}"),
            ("s32[2,2]", "{{0, 1}, {2, 2}}"),
        ],
        "{2, 9}",
    );
    check_op(
        "s32[2]",
        "gather",
        "offset_dims={}, collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=1, slice_sizes={1,1}",
        &[
            ("s32[2,4]", "{{0, 1, 2, 3}, {10, 11, 12, 13}}"),
            ("s32[2,1]", "{{3}, {1}}"),
        ],
        "{3, 11}",
    );
}

fn scatter(
    attrs: &str,
    combiner: &str,
    shapes: &[&str],
    out: &str,
    args: &[(&str, &str)],
) -> oxla_hlo::Literal {
    let text = op_module(
        out,
        "scatter",
        &format!("{attrs}, to_apply=combine"),
        shapes,
        combiner,
    );
    let values: Vec<_> = args.iter().map(|(s, v)| lit(s, v)).collect();
    eval(&text, &values)
}

const SCALAR_1D: &str = "update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1";

#[test]
fn scatter_combines_duplicates_in_order() {
    let args = [
        ("s32[4]", "{0, 0, 0, 0}"),
        ("s32[5]", "{1, 1, 2, 1, 2}"),
        ("s32[5]", "{1, 2, 3, 4, 5}"),
    ];
    let shapes = ["s32[4]", "s32[5]", "s32[5]"];
    let added = scatter(
        SCALAR_1D,
        &binary_computation("combine", "s32", "add"),
        &shapes,
        "s32[4]",
        &args,
    );
    assert_bits(&added, &lit("s32[4]", "{0, 7, 8, 0}"));
    let assign = "combine {\n  a = s32[] parameter(0)\n  ROOT b = s32[] parameter(1)\n}\n";
    let assigned = scatter(SCALAR_1D, assign, &shapes, "s32[4]", &args);
    assert_bits(&assigned, &lit("s32[4]", "{0, 4, 5, 0}"));
}

#[test]
fn scatter_skips_windows_that_leave_the_operand() {
    let out = scatter(
        "update_window_dims={1}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1",
        &binary_computation("combine", "s32", "add"),
        &["s32[6]", "s32[3,1]", "s32[3,2]"],
        "s32[6]",
        &[
            ("s32[6]", "{0, 0, 0, 0, 0, 0}"),
            ("s32[3,1]", "{{4}, {5}, {-1}}"),
            ("s32[3,2]", "{{1, 2}, {3, 4}, {5, 6}}"),
        ],
    );
    assert_bits(&out, &lit("s32[6]", "{0, 0, 0, 0, 1, 2}"));
}

#[test]
fn variadic_scatter() {
    let combiner = "combine {\n  a = s32[] parameter(0)\n  b = f32[] parameter(1)\n  c = s32[] parameter(2)\n  d = f32[] parameter(3)\n  s = s32[] add(a, c)\n  m = f32[] multiply(b, d)\n  ROOT t = (s32[], f32[]) tuple(s, m)\n}\n";
    let out = scatter(
        SCALAR_1D,
        combiner,
        &["s32[3]", "f32[3]", "s32[2]", "s32[2]", "f32[2]"],
        "(s32[3], f32[3])",
        &[
            ("s32[3]", "{1, 1, 1}"),
            ("f32[3]", "{2, 2, 2}"),
            ("s32[2]", "{2, 2}"),
            ("s32[2]", "{10, 20}"),
            ("f32[2]", "{3, 5}"),
        ],
    );
    assert_bits(&out, &lit("(s32[3], f32[3])", "({1, 1, 31}, {2, 2, 30})"));
}

#[test]
fn scatter_with_batching_dims() {
    let out = scatter(
        "update_window_dims={}, inserted_window_dims={1}, scatter_dims_to_operand_dims={1}, input_batching_dims={0}, scatter_indices_batching_dims={0}, index_vector_dim=2",
        &binary_computation("combine", "s32", "add"),
        &["s32[2,4]", "s32[2,2]", "s32[2,2]"],
        "s32[2,4]",
        &[
            ("s32[2,4]", "{{0, 0, 0, 0}, {0, 0, 0, 0}}"),
            ("s32[2,2]", "{{0, 3}, {1, 1}}"),
            ("s32[2,2]", "{{1, 2}, {10, 20}}"),
        ],
    );
    assert_bits(&out, &lit("s32[2,4]", "{{1, 0, 0, 2}, {0, 30, 0, 0}}"));
}

/// Found by the `interpret` fuzz target (a mutated JAX fixture): slice size
/// 0 along a collapsed dimension, which XLA's shape rule allows, made the
/// start index clamp to one past the end and the read panic. The slices are
/// empty, so a result with elements is an error.
#[test]
fn a_collapsed_dimension_with_slice_size_0_is_an_error() {
    let text = r#"HloModule main, entry_computation_layout={(s64[3,4,2]{2,1,0}, s64[2,3,2]{2,1,0})->(s64[2,3,2,2]{3,2,1,0})}

ENTRY main.1 {
  Arg_0.1 = s64[3,4,2]{2,1,0} parameter(0)
  Arg_1.1 = s64[2,3,2]{2,1,0} parameter(1)
  gather.1 = s64[2,3,2,2]{3,2,1,0} gather(Arg_0.1, Arg_1.1), offset_dims={2,3}, collapsed_slice_dims={0}, start_index_map={1,0}, index_vector_dim=2, slice_sizes={0,2,2}
  ROOT tuple.1 = (s64[2,3,2,2]{3,2,1,0}) tuple(gather.1)
}
"#;
    let x = oxla_hlo::Literal::from_vec(&[3, 4, 2], (0..24i64).collect()).unwrap();
    let i = oxla_hlo::Literal::from_vec(&[2, 3, 2], vec![9i64; 12]).unwrap();
    let e = crate::common::try_eval_with(
        text,
        &[x, i],
        &oxla_interp::EvalOptions::default(),
        &oxla_interp::NoServices,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "in computation `main.1`, instruction `gather.1` (gather): slice_sizes [0, 2, 2] are 0 along collapsed dimension 0: the slices are empty but the result s64[2,3,2,2] is not"
    );
}
