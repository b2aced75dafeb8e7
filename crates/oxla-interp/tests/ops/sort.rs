//! sort (stability, several operands, total-order comparators) and topk.

use crate::common::{assert_bits, eval, lit, op_module};

fn comparator(name: &str, types: &[&str], direction: &str, extra: &str) -> String {
    let mut text = format!("{name} {{\n");
    for (i, t) in types.iter().enumerate() {
        text.push_str(&format!(
            "  l{i} = {t}[] parameter({})\n  r{i} = {t}[] parameter({})\n",
            2 * i,
            2 * i + 1
        ));
    }
    text.push_str(&format!(
        "  ROOT c = pred[] compare(l0, r0), direction={direction}{extra}\n}}\n"
    ));
    text
}

#[test]
fn sort_is_stable() {
    // Keys with ties; the values record the original order.
    let cmp = comparator("cmp", &["s32", "s32"], "LT", "");
    let text = op_module(
        "(s32[8], s32[8])",
        "sort",
        "dimensions={0}, is_stable=true, to_apply=cmp",
        &["s32[8]", "s32[8]"],
        &cmp,
    );
    let out = eval(
        &text,
        &[
            lit("s32[8]", "{3, 1, 2, 1, 3, 2, 1, 0}"),
            lit("s32[8]", "{0, 1, 2, 3, 4, 5, 6, 7}"),
        ],
    );
    assert_bits(
        &out,
        &lit(
            "(s32[8], s32[8])",
            "({0, 1, 1, 1, 2, 2, 3, 3}, {7, 1, 3, 6, 2, 5, 0, 4})",
        ),
    );
    // Stable even without is_stable.
    let text = op_module(
        "(s32[8], s32[8])",
        "sort",
        "dimensions={0}, to_apply=cmp",
        &["s32[8]", "s32[8]"],
        &cmp,
    );
    let out2 = eval(
        &text,
        &[
            lit("s32[8]", "{3, 1, 2, 1, 3, 2, 1, 0}"),
            lit("s32[8]", "{0, 1, 2, 3, 4, 5, 6, 7}"),
        ],
    );
    assert_bits(&out2, &out);
}

#[test]
fn sort_along_a_dimension_descending() {
    let cmp = comparator("cmp", &["f32"], "GT", "");
    let text = op_module(
        "f32[2,3]",
        "sort",
        "dimensions={0}, to_apply=cmp",
        &["f32[2,3]"],
        &cmp,
    );
    let out = eval(&text, &[lit("f32[2,3]", "{{1, 5, 3}, {4, 2, 6}}")]);
    assert_bits(&out, &lit("f32[2,3]", "{{4, 5, 6}, {1, 2, 3}}"));
}

#[test]
fn total_order_sort_puts_nans_last() {
    let cmp = comparator("cmp", &["f32"], "LT", ", type=TOTALORDER");
    let text = op_module(
        "f32[7]",
        "sort",
        "dimensions={0}, to_apply=cmp",
        &["f32[7]"],
        &cmp,
    );
    let out = eval(&text, &[lit("f32[7]", "{nan, 1, -0, -inf, 0, -nan, inf}")]);
    assert_bits(&out, &lit("f32[7]", "{-nan, -inf, -0, 0, 1, inf, nan}"));
}

#[test]
fn sort_with_a_comparator_that_is_not_a_strict_weak_order() {
    // FLOAT LT with NaNs: any order is acceptable, but it must not panic.
    let cmp = comparator("cmp", &["f32"], "LT", "");
    let text = op_module(
        "f32[64]",
        "sort",
        "dimensions={0}, to_apply=cmp",
        &["f32[64]"],
        &cmp,
    );
    let values: Vec<String> = (0..64)
        .map(|i| {
            if i % 3 == 0 {
                "nan".to_string()
            } else {
                ((i * 37) % 17).to_string()
            }
        })
        .collect();
    let out = eval(
        &text,
        &[lit("f32[64]", &format!("{{{}}}", values.join(", ")))],
    );
    assert_eq!(out.to_vec::<f32>().unwrap().len(), 64);
}

#[test]
fn sort_by_two_keys() {
    // Lexicographic comparator over (a, b).
    let cmp = "cmp {\n  a0 = s32[] parameter(0)\n  a1 = s32[] parameter(1)\n  b0 = s32[] parameter(2)\n  b1 = s32[] parameter(3)\n  lt = pred[] compare(a0, a1), direction=LT\n  eq = pred[] compare(a0, a1), direction=EQ\n  lt2 = pred[] compare(b0, b1), direction=LT\n  both = pred[] and(eq, lt2)\n  ROOT r = pred[] or(lt, both)\n}\n";
    let text = op_module(
        "(s32[4], s32[4])",
        "sort",
        "dimensions={0}, to_apply=cmp",
        &["s32[4]", "s32[4]"],
        cmp,
    );
    let out = eval(
        &text,
        &[lit("s32[4]", "{2, 1, 2, 1}"), lit("s32[4]", "{5, 9, 3, 7}")],
    );
    assert_bits(
        &out,
        &lit("(s32[4], s32[4])", "({1, 1, 2, 2}, {7, 9, 3, 5})"),
    );
}

#[test]
fn topk_orders_by_total_order_with_ties_by_index() {
    let text = op_module(
        "(f32[2,3], s32[2,3])",
        "topk",
        "k=3, largest=true",
        &["f32[2,5]"],
        "",
    );
    let out = eval(
        &text,
        &[lit(
            "f32[2,5]",
            "{{1, nan, 3, inf, 3}, {-0, 0, -nan, -inf, 0}}",
        )],
    );
    assert_bits(
        &out,
        &lit(
            "(f32[2,3], s32[2,3])",
            "({{nan, inf, 3}, {0, 0, -0}}, {{1, 3, 2}, {1, 4, 0}})",
        ),
    );
    let text = op_module(
        "(s32[2], s32[2])",
        "topk",
        "k=2, largest=false",
        &["s32[4]"],
        "",
    );
    let out = eval(&text, &[lit("s32[4]", "{5, 1, 7, 1}")]);
    assert_bits(&out, &lit("(s32[2], s32[2])", "({1, 1}, {1, 3})"));
}
