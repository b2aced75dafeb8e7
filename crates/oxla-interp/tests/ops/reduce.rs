//! reduce, reduce-window, select-and-scatter and map.

use crate::common::{assert_bits, binary_computation, eval, lit, op_module};

fn run(out: &str, op: &str, attrs: &str, extra: &str, args: &[(&str, &str)]) -> oxla_hlo::Literal {
    let shapes: Vec<&str> = args.iter().map(|a| a.0).collect();
    let values: Vec<_> = args.iter().map(|(s, v)| lit(s, v)).collect();
    eval(&op_module(out, op, attrs, &shapes, extra), &values)
}

const CUBE: &str = "{{{1, 2, 3}, {4, 5, 6}}, {{1, 2, 3}, {4, 5, 6}}, {{1, 2, 3}, {4, 5, 6}}, {{1, 2, 3}, {4, 5, 6}}}";

#[test]
fn reduce_examples_from_the_spec() {
    let add = binary_computation("add", "s32", "add");
    let x = ("s32[4,2,3]", CUBE);
    let zero = ("s32[]", "0");
    let r = |out: &str, dims: &str| {
        run(
            out,
            "reduce",
            &format!("dimensions={{{dims}}}, to_apply=add"),
            &add,
            &[x, zero],
        )
    };
    assert_bits(
        &r("s32[2,3]", "0"),
        &lit("s32[2,3]", "{{4, 8, 12}, {16, 20, 24}}"),
    );
    assert_bits(
        &r("s32[4,2]", "2"),
        &lit("s32[4,2]", "{{6, 15}, {6, 15}, {6, 15}, {6, 15}}"),
    );
    assert_bits(&r("s32[3]", "0,1"), &lit("s32[3]", "{20, 28, 36}"));
    assert_bits(&r("s32[]", "0,1,2"), &lit("s32[]", "84"));
    assert_bits(&r("s32[4,2,3]", ""), &lit("s32[4,2,3]", CUBE));
}

#[test]
fn reduce_folds_in_order_from_the_init_value() {
    // A non-commutative reducer shows the order: acc * 10 + x, starting from 9.
    let f = "f {\n  a = s64[] parameter(0)\n  b = s64[] parameter(1)\n  t = s64[] constant(10)\n  m = s64[] multiply(a, t)\n  ROOT r = s64[] add(m, b)\n}\n";
    let out = run(
        "s64[2]",
        "reduce",
        "dimensions={1}, to_apply=f",
        f,
        &[("s64[2,3]", "{{1, 2, 3}, {4, 5, 6}}"), ("s64[]", "9")],
    );
    assert_bits(&out, &lit("s64[2]", "{9123, 9456}"));
}

#[test]
fn variadic_reduce_argmax() {
    let argmax = "argmax {\n  a = f32[] parameter(0)\n  i = s32[] parameter(1)\n  b = f32[] parameter(2)\n  j = s32[] parameter(3)\n  gt = pred[] compare(b, a), direction=GT\n  v = f32[] select(gt, b, a)\n  k = s32[] select(gt, j, i)\n  ROOT t = (f32[], s32[]) tuple(v, k)\n}\n";
    let out = run(
        "(f32[2], s32[2])",
        "reduce",
        "dimensions={1}, to_apply=argmax",
        argmax,
        &[
            ("f32[2,4]", "{{1, 7, 3, 7}, {-1, -5, -2, -9}}"),
            ("s32[2,4]", "{{0, 1, 2, 3}, {0, 1, 2, 3}}"),
            ("f32[]", "-inf"),
            ("s32[]", "-1"),
        ],
    );
    assert_bits(&out, &lit("(f32[2], s32[2])", "({7, -1}, {1, 0})"));
}

#[test]
fn reduce_with_a_general_computation() {
    // A reducer that is not a scalar program (it broadcasts and reduces
    // inside) runs through the general interpreter with the same result.
    let f = "inner {\n  x = s32[] parameter(0)\n  y = s32[] parameter(1)\n  ROOT s = s32[] add(x, y)\n}\nf {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n  v = s32[2] broadcast(b), dimensions={}\n  z = s32[] constant(0)\n  s = s32[] reduce(v, z), dimensions={0}, to_apply=inner\n  ROOT r = s32[] add(a, s)\n}\n";
    let out = run(
        "s32[]",
        "reduce",
        "dimensions={0}, to_apply=f",
        f,
        &[("s32[3]", "{1, 2, 3}"), ("s32[]", "0")],
    );
    assert_bits(&out, &lit("s32[]", "12"));
}

#[test]
fn reduce_window_max_pool_with_strides_and_padding() {
    let max = binary_computation("max", "f32", "maximum");
    let x = (
        "f32[4,6]",
        "{{1, 2, 3, 4, 5, 6}, {7, 8, 9, 10, 11, 12}, {13, 14, 15, 16, 17, 18}, {19, 20, 21, 22, 23, 24}}",
    );
    let init = ("f32[]", "-inf");
    let out = run(
        "f32[2,2]",
        "reduce-window",
        "window={size=2x3 stride=2x3}, to_apply=max",
        &max,
        &[x, init],
    );
    assert_bits(&out, &lit("f32[2,2]", "{{9, 12}, {21, 24}}"));
    let out = run(
        "f32[3,3]",
        "reduce-window",
        "window={size=2x2 stride=2x2 pad=1_1x0_0}, to_apply=max",
        &max,
        &[x, init],
    );
    assert_bits(
        &out,
        &lit("f32[3,3]", "{{2, 4, 6}, {14, 16, 18}, {20, 22, 24}}"),
    );
}

#[test]
fn reduce_window_skips_padding_and_dilation_holes() {
    // Init 1 with add: padded positions and holes are not fed to the reducer,
    // the accumulator starts from the init value once (XLA:CPU).
    let add = binary_computation("add", "s32", "add");
    let out = run(
        "s32[5]",
        "reduce-window",
        "window={size=3 pad=1_1 lhs_dilate=2}, to_apply=add",
        &add,
        &[("s32[3]", "{10, 20, 30}"), ("s32[]", "1")],
    );
    // Dilated: 10 _ 20 _ 30, padded: p 10 _ 20 _ 30 p, windows of 3.
    assert_bits(&out, &lit("s32[5]", "{11, 31, 21, 51, 31}"));
    let out = run(
        "s64[2,2]",
        "reduce-window",
        "window={size=2x1 stride=4x1 pad=2_1x0_0 lhs_dilate=2x1 rhs_dilate=3x1}, to_apply=add",
        &binary_computation("add", "s64", "add"),
        &[("s64[3,2]", "{{1, 2}, {3, 4}, {5, 6}}"), ("s64[]", "0")],
    );
    assert_bits(&out, &lit("s64[2,2]", "{{0, 0}, {3, 4}}"));
}

#[test]
fn variadic_reduce_window() {
    let f = "f {\n  a = s32[] parameter(0)\n  b = f32[] parameter(1)\n  c = s32[] parameter(2)\n  d = f32[] parameter(3)\n  s = s32[] add(a, c)\n  m = f32[] maximum(b, d)\n  ROOT t = (s32[], f32[]) tuple(s, m)\n}\n";
    let out = run(
        "(s32[2], f32[2])",
        "reduce-window",
        "window={size=2 stride=1}, to_apply=f",
        f,
        &[
            ("s32[3]", "{1, 2, 3}"),
            ("f32[3]", "{5, -1, 7}"),
            ("s32[]", "0"),
            ("f32[]", "-inf"),
        ],
    );
    assert_bits(&out, &lit("(s32[2], f32[2])", "({3, 5}, {5, 7})"));
}

fn select_and_scatter_module(shape: &str, source: &str, window: &str, ty: &str) -> String {
    format!(
        "HloModule t\n{}\n{}\nENTRY e {{\n  x = {shape} parameter(0)\n  s = {source} parameter(1)\n  i = {ty}[] constant(0)\n  ROOT r = {shape} select-and-scatter(x, s, i), window={{{window}}}, select=ge, scatter=add\n}}\n",
        format_args!(
            "ge {{\n  a = {ty}[] parameter(0)\n  b = {ty}[] parameter(1)\n  ROOT r = pred[] compare(a, b), direction=GE\n}}\n"
        ),
        binary_computation("add", ty, "add"),
    )
}

#[test]
fn select_and_scatter_is_the_max_pool_gradient() {
    let text = select_and_scatter_module("f32[4,4]", "f32[2,2]", "size=2x2 stride=2x2", "f32");
    let x = lit(
        "f32[4,4]",
        "{{1, 5, 2, 0}, {3, 4, 8, 1}, {7, 0, 1, 1}, {2, 6, 3, 9}}",
    );
    let g = lit("f32[2,2]", "{{10, 20}, {30, 40}}");
    let out = eval(&text, &[x, g]);
    assert_bits(
        &out,
        &lit(
            "f32[4,4]",
            "{{0, 10, 0, 0}, {0, 0, 20, 0}, {30, 0, 0, 0}, {0, 0, 0, 40}}",
        ),
    );
}

#[test]
fn select_and_scatter_overlaps_ties_and_padding() {
    // Overlapping windows add up at a shared maximum; with GE the first of
    // equal maxima wins; padding is never selected even when every element
    // is negative.
    let text = select_and_scatter_module("s32[5]", "s32[3]", "size=3 stride=2 pad=1_1", "s32");
    let out = eval(
        &text,
        &[
            lit("s32[5]", "{-5, -1, -3, -1, -9}"),
            lit("s32[3]", "{1, 2, 4}"),
        ],
    );
    // Windows: [p, -5, -1] -> index 1; [-1, -3, -1] -> index 1 (first max); [-1, -9, p] -> index 3.
    assert_bits(&out, &lit("s32[5]", "{0, 3, 0, 4, 0}"));
    let text = select_and_scatter_module(
        "s64[4,2]",
        "s64[2,2]",
        "size=3x1 stride=2x1 pad=0_1x0_0",
        "s64",
    );
    let out = eval(
        &text,
        &[
            lit("s64[4,2]", "{{1, 5}, {2, 5}, {3, 6}, {4, 4}}"),
            lit("s64[2,2]", "{{5, 6}, {7, 8}}"),
        ],
    );
    assert_bits(&out, &lit("s64[4,2]", "{{0, 0}, {0, 0}, {5, 14}, {7, 0}}"));
}

#[test]
fn map_with_static_operands() {
    let f = "f {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT r = f32[] subtract(a, b)\n}\n";
    let out = run(
        "f32[3]",
        "map",
        "dimensions={0}, to_apply=f",
        f,
        &[("f32[3]", "{1, 2, 3}"), ("f32[3]", "{10, 20, 30}")],
    );
    assert_bits(&out, &lit("f32[3]", "{-9, -18, -27}"));
    // oxla's static operands: the trailing operand is passed whole to every application.
    let g = "inner {\n  x = s32[] parameter(0)\n  y = s32[] parameter(1)\n  ROOT s = s32[] add(x, y)\n}\ng {\n  a = s32[] parameter(0)\n  v = s32[2] parameter(1)\n  z = s32[] constant(0)\n  s = s32[] reduce(v, z), dimensions={0}, to_apply=inner\n  ROOT r = s32[] multiply(a, s)\n}\n";
    let mut text = op_module("s32[3]", "map", "to_apply=g", &["s32[3]", "s32[2]"], g);
    text = text.replace("to_apply=g", "to_apply=g, static_operands=1");
    let out = eval(
        &text,
        &[lit("s32[3]", "{1, 2, 3}"), lit("s32[2]", "{3, 4}")],
    );
    assert_bits(&out, &lit("s32[3]", "{7, 14, 21}"));
}
