//! Data movement: broadcast, reshape, transpose, reverse, slice, dynamic
//! slices (clamped starts, both index forms), pad, concatenate, iota,
//! get-dimension-size, tuples.

use crate::common::{assert_bits, check_op, eval, lit};

#[test]
fn broadcast_in_dim() {
    check_op(
        "f32[2,3]",
        "broadcast",
        "dimensions={}",
        &[("f32[]", "2")],
        "{{2, 2, 2}, {2, 2, 2}}",
    );
    check_op(
        "s32[2,3]",
        "broadcast",
        "dimensions={1}",
        &[("s32[3]", "{1, 2, 3}")],
        "{{1, 2, 3}, {1, 2, 3}}",
    );
    check_op(
        "s32[2,3]",
        "broadcast",
        "dimensions={0}",
        &[("s32[2]", "{1, 2}")],
        "{{1, 1, 1}, {2, 2, 2}}",
    );
    check_op(
        "s32[2,2]",
        "broadcast",
        "dimensions={0,1}",
        &[("s32[1,2]", "{{5, 6}}")],
        "{{5, 6}, {5, 6}}",
    );
}

#[test]
fn reshape_keeps_row_major_order() {
    let v = "{{{10, 11, 12}, {15, 16, 17}}, {{20, 21, 22}, {25, 26, 27}}, {{30, 31, 32}, {35, 36, 37}}, {{40, 41, 42}, {45, 46, 47}}}";
    check_op(
        "s32[8,3]",
        "reshape",
        "",
        &[("s32[4,2,3]", v)],
        "{{10, 11, 12}, {15, 16, 17}, {20, 21, 22}, {25, 26, 27}, {30, 31, 32}, {35, 36, 37}, {40, 41, 42}, {45, 46, 47}}",
    );
    check_op("s32[]", "reshape", "", &[("s32[1,1]", "{{5}}")], "5");
}

#[test]
fn transpose_permutes_dimensions() {
    check_op(
        "s32[3,2]",
        "transpose",
        "dimensions={1,0}",
        &[("s32[2,3]", "{{1, 2, 3}, {4, 5, 6}}")],
        "{{1, 4}, {2, 5}, {3, 6}}",
    );
    check_op(
        "s32[2,2,2]",
        "transpose",
        "dimensions={2,0,1}",
        &[("s32[2,2,2]", "{{{0, 1}, {2, 3}}, {{4, 5}, {6, 7}}}")],
        "{{{0, 2}, {4, 6}}, {{1, 3}, {5, 7}}}",
    );
}

#[test]
fn reverse_dimensions() {
    check_op(
        "s32[2,3]",
        "reverse",
        "dimensions={1}",
        &[("s32[2,3]", "{{1, 2, 3}, {4, 5, 6}}")],
        "{{3, 2, 1}, {6, 5, 4}}",
    );
    check_op(
        "s32[2,3]",
        "reverse",
        "dimensions={0,1}",
        &[("s32[2,3]", "{{1, 2, 3}, {4, 5, 6}}")],
        "{{6, 5, 4}, {3, 2, 1}}",
    );
}

#[test]
fn slice_with_strides() {
    let b = "{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9, 10, 11}}";
    check_op(
        "f32[2,2]",
        "slice",
        "slice={[2:4], [1:3]}",
        &[("f32[4,3]", b)],
        "{{7, 8}, {10, 11}}",
    );
    check_op(
        "f32[2,2]",
        "slice",
        "slice={[0:4:2], [0:3:2]}",
        &[("f32[4,3]", b)],
        "{{0, 2}, {6, 8}}",
    );
}

fn dynamic_slice_module(index_type: &str) -> String {
    format!(
        "HloModule t\nENTRY e {{\n  x = s32[4,5] parameter(0)\n  i = {index_type}[] parameter(1)\n  j = {index_type}[] parameter(2)\n  ROOT r = s32[2,3] dynamic-slice(x, i, j), dynamic_slice_sizes={{2,3}}\n}}\n"
    )
}

const X45: &str = "{{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}, {10, 11, 12, 13, 14}, {15, 16, 17, 18, 19}}";

#[test]
fn dynamic_slice_clamps_starts() {
    let x = lit("s32[4,5]", X45);
    let run = |i: i32, j: i32| {
        eval(
            &dynamic_slice_module("s32"),
            &[
                x.clone(),
                lit("s32[]", &i.to_string()),
                lit("s32[]", &j.to_string()),
            ],
        )
    };
    assert_bits(&run(1, 1), &lit("s32[2,3]", "{{6, 7, 8}, {11, 12, 13}}"));
    // (3, 4) clamps to (2, 2); (100, 2) to (2, 2); (-1, -7) to (0, 0).
    assert_bits(&run(3, 4), &lit("s32[2,3]", "{{12, 13, 14}, {17, 18, 19}}"));
    assert_bits(
        &run(100, 2),
        &lit("s32[2,3]", "{{12, 13, 14}, {17, 18, 19}}"),
    );
    assert_bits(&run(-1, -7), &lit("s32[2,3]", "{{0, 1, 2}, {5, 6, 7}}"));
    // Unsigned indices are large positive numbers, not negative ones.
    let u = eval(
        &dynamic_slice_module("u32"),
        &[x.clone(), lit("u32[]", "4294967295"), lit("u32[]", "0")],
    );
    assert_bits(&u, &lit("s32[2,3]", "{{10, 11, 12}, {15, 16, 17}}"));
}

#[test]
fn dynamic_slice_with_an_index_vector() {
    let text = "HloModule t\nENTRY e {\n  x = s32[4,5] parameter(0)\n  s = s32[2] parameter(1)\n  ROOT r = s32[2,3] dynamic-slice(x, s), dynamic_slice_sizes={2,3}\n}\n";
    let out = eval(text, &[lit("s32[4,5]", X45), lit("s32[2]", "{3, -1}")]);
    assert_bits(&out, &lit("s32[2,3]", "{{10, 11, 12}, {15, 16, 17}}"));
}

#[test]
fn dynamic_update_slice_clamps_starts() {
    let text = "HloModule t\nENTRY e {\n  x = s32[4,5] parameter(0)\n  u = s32[2,3] parameter(1)\n  i = s64[] parameter(2)\n  j = s64[] parameter(3)\n  ROOT r = s32[4,5] dynamic-update-slice(x, u, i, j)\n}\n";
    let u = lit("s32[2,3]", "{{-1, -2, -3}, {-4, -5, -6}}");
    let out = eval(
        text,
        &[
            lit("s32[4,5]", X45),
            u.clone(),
            lit("s64[]", "3"),
            lit("s64[]", "4"),
        ],
    );
    assert_bits(
        &out,
        &lit(
            "s32[4,5]",
            "{{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}, {10, 11, -1, -2, -3}, {15, 16, -4, -5, -6}}",
        ),
    );
    let out = eval(
        text,
        &[
            lit("s32[4,5]", X45),
            u,
            lit("s64[]", "-1"),
            lit("s64[]", "-7"),
        ],
    );
    assert_bits(
        &out,
        &lit(
            "s32[4,5]",
            "{{-1, -2, -3, 3, 4}, {-4, -5, -6, 8, 9}, {10, 11, 12, 13, 14}, {15, 16, 17, 18, 19}}",
        ),
    );
    let vector = "HloModule t\nENTRY e {\n  x = s32[4] parameter(0)\n  u = s32[2] parameter(1)\n  s = s32[1] parameter(2)\n  ROOT r = s32[4] dynamic-update-slice(x, u, s)\n}\n";
    let out = eval(
        vector,
        &[
            lit("s32[4]", "{0, 1, 2, 3}"),
            lit("s32[2]", "{8, 9}"),
            lit("s32[1]", "{1}"),
        ],
    );
    assert_bits(&out, &lit("s32[4]", "{0, 8, 9, 3}"));
}

#[test]
fn pad_with_edges_interior_and_negative_padding() {
    check_op(
        "s32[8]",
        "pad",
        "padding=1_2_1",
        &[("s32[3]", "{1, 2, 3}"), ("s32[]", "0")],
        "{0, 1, 0, 2, 0, 3, 0, 0}",
    );
    check_op(
        "s32[3]",
        "pad",
        "padding=-1_-1_1",
        &[("s32[3]", "{1, 2, 3}"), ("s32[]", "9")],
        "{9, 2, 9}",
    );
    check_op(
        "f32[3,4]",
        "pad",
        "padding=0_1x1_-1_0",
        &[
            ("f32[2,4]", "{{1, 2, 3, 4}, {5, 6, 7, 8}}"),
            ("f32[]", "-1"),
        ],
        "{{-1, 1, 2, 3}, {-1, 5, 6, 7}, {-1, -1, -1, -1}}",
    );
}

#[test]
fn concatenate_along_a_dimension() {
    let text = "HloModule t\nENTRY e {\n  a = s32[3,2] parameter(0)\n  b = s32[1,2] parameter(1)\n  c = s32[4,2] concatenate(a, b), dimensions={0}\n  d = s32[4,4] concatenate(c, c), dimensions={1}\n  ROOT t = (s32[4,2], s32[4,4]) tuple(c, d)\n}\n";
    let out = eval(
        text,
        &[
            lit("s32[3,2]", "{{1, 2}, {3, 4}, {5, 6}}"),
            lit("s32[1,2]", "{{7, 8}}"),
        ],
    );
    let expected = lit(
        "(s32[4,2], s32[4,4])",
        "({{1, 2}, {3, 4}, {5, 6}, {7, 8}}, {{1, 2, 1, 2}, {3, 4, 3, 4}, {5, 6, 5, 6}, {7, 8, 7, 8}})",
    );
    assert_bits(&out, &expected);
}

#[test]
fn iota_converts_indices() {
    let text = "HloModule t\nENTRY e {\n  a = s32[2,3] iota(), iota_dimension=1\n  b = u8[300] iota(), iota_dimension=0\n  c = f16[2050] iota(), iota_dimension=0\n  d = f32[3,2] iota(), iota_dimension=0\n  ROOT t = (s32[2,3], u8[300], f16[2050], f32[3,2]) tuple(a, b, c, d)\n}\n";
    let out = eval(text, &[]);
    let parts = out.tuple_elements().unwrap();
    assert_bits(&parts[0], &lit("s32[2,3]", "{{0, 1, 2}, {0, 1, 2}}"));
    let b = parts[1].to_vec::<u8>().unwrap();
    assert_eq!((b[255], b[256], b[299]), (255, 0, 43));
    let c = parts[2].to_vec::<half::f16>().unwrap();
    assert_eq!(c[2049].to_f32(), 2048.0);
    assert_bits(&parts[3], &lit("f32[3,2]", "{{0, 0}, {1, 1}, {2, 2}}"));
}

#[test]
fn get_dimension_size_and_tuples() {
    check_op(
        "s32[]",
        "get-dimension-size",
        "dimensions={1}",
        &[("f32[2,7]", "{{0,0,0,0,0,0,0},{0,0,0,0,0,0,0}}")],
        "7",
    );
    let text = "HloModule t\nENTRY e {\n  a = f32[2] parameter(0)\n  b = s32[] parameter(1)\n  t = (f32[2], s32[]) tuple(a, b)\n  o = (f32[2], s32[]) opt-barrier(t)\n  c = (f32[2], s32[]) copy(o)\n  g = s32[] get-tuple-element(c), index=1\n  ROOT r = (s32[], (f32[2], s32[])) tuple(g, t)\n}\n";
    let out = eval(text, &[lit("f32[2]", "{1, 2}"), lit("s32[]", "5")]);
    assert_bits(&out, &lit("(s32[], (f32[2], s32[]))", "(5, ({1, 2}, 5))"));
}
