//! Resource guards: results larger than the memory limit fail before
//! anything is allocated, runaway loops stop at the iteration limit, and
//! deep chains of calls end in an error instead of a stack overflow.

use oxla_hlo::{Literal, Opcode};
use oxla_interp::{
    DEFAULT_MAX_ARRAY_BYTES, EvalError, EvalOptions, MAX_CALL_DEPTH, NoServices, evaluate,
};

use crate::common::{lit, module, try_eval_with};

fn limited(bytes: u64) -> EvalOptions {
    EvalOptions::default().max_array_bytes(bytes)
}

/// Each module's result would need terabytes: allocating it would abort the
/// process, so these pass only because the check comes first.
#[test]
fn huge_results_fail_before_allocation() {
    let cases = [
        (
            "ROOT b = f32[1000000,1000000] broadcast(p), dimensions={}",
            "b",
            Opcode::Broadcast,
            "f32[1000000,1000000]",
            4_000_000_000_000u64,
        ),
        (
            "ROOT i = s64[1000000000000] iota(), iota_dimension=0",
            "i",
            Opcode::Iota,
            "s64[1000000000000]",
            8_000_000_000_000,
        ),
        (
            "ROOT q = f32[2000000000001] pad(p, p), padding=",
            "q",
            Opcode::Pad,
            "f32[2000000000001]",
            0,
        ),
    ];
    for (root, name, opcode, shape, bytes) in cases {
        // A rank-0 pad cannot grow; make the pad case a rank-1 one.
        let body = if opcode == Opcode::Pad {
            "  v = f32[1] broadcast(p), dimensions={}\n  ROOT q = f32[2000000000001] pad(v, p), padding=1000000000000_1000000000000".to_string()
        } else {
            format!("  {root}")
        };
        let text = format!("HloModule t\nENTRY e {{\n  p = f32[] parameter(0)\n{body}\n}}\n");
        let e = try_eval_with(
            &text,
            &[Literal::scalar(1.0f32)],
            &EvalOptions::default(),
            &NoServices,
        )
        .unwrap_err();
        let bytes = if bytes == 0 { 8_000_000_000_004 } else { bytes };
        assert_eq!(
            e,
            EvalError::MemoryLimit {
                computation: "e".into(),
                instruction: name.into(),
                opcode,
                shape: shape.into(),
                bytes,
                limit: DEFAULT_MAX_ARRAY_BYTES,
            }
        );
    }
}

#[test]
fn the_memory_limit_is_configurable_and_names_the_instruction() {
    let text = "HloModule t\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT b = f32[300] broadcast(p), dimensions={}\n}\n";
    let one = [Literal::scalar(1.0f32)];
    let e = try_eval_with(text, &one, &limited(1024), &NoServices).unwrap_err();
    assert_eq!(
        e.to_string(),
        "in computation `e`, instruction `b` (broadcast): the result array f32[300] needs 1200 bytes, more than the memory limit of 1024 bytes"
    );
    assert!(try_eval_with(text, &one, &limited(1200), &NoServices).is_ok());
}

#[test]
fn the_memory_limit_applies_to_each_array_of_a_tuple_and_inside_calls() {
    let text = r#"HloModule t
grow {
  x = s32[] parameter(0)
  ROOT b = s32[100] broadcast(x), dimensions={}
}
grow_pair {
  x = s32[] parameter(0)
  a = s32[10] broadcast(x), dimensions={}
  b = s32[100] call(x), to_apply=grow
  ROOT t = (s32[10], s32[100]) tuple(a, b)
}
ENTRY e {
  p = s32[] parameter(0)
  ROOT t = (s32[10], s32[100]) call(p), to_apply=grow_pair
}
"#;
    let e = try_eval_with(text, &[Literal::scalar(1i32)], &limited(100), &NoServices).unwrap_err();
    // The call's result holds a 400-byte array, so the check at the outer
    // call fails first, naming the array over the limit.
    assert_eq!(
        e.to_string(),
        "in computation `e`, instruction `t` (call): the result array s32[100] needs 400 bytes, more than the memory limit of 100 bytes"
    );
}

/// `c0` negates; `c{k}` calls `c{k-1}`; the entry calls `c{n}`: n + 1 nested calls.
fn call_chain(n: usize) -> String {
    let mut t = String::from(
        "HloModule deep\n\nc0 {\n  p = f32[] parameter(0)\n  ROOT r = f32[] negate(p)\n}\n\n",
    );
    for k in 1..=n {
        t.push_str(&format!(
            "c{k} {{\n  p = f32[] parameter(0)\n  ROOT r = f32[] call(p), to_apply=c{}\n}}\n\n",
            k - 1
        ));
    }
    t.push_str(&format!(
        "ENTRY e {{\n  p = f32[] parameter(0)\n  ROOT r = f32[] call(p), to_apply=c{n}\n}}\n"
    ));
    t
}

#[test]
fn ten_thousand_nested_calls_are_an_error_not_a_stack_overflow() {
    // Test threads have 2 MiB stacks; parsing, verifying and evaluating all
    // stay within them.
    let m = module(&call_chain(10_000));
    let e = evaluate(
        &m,
        &[Literal::scalar(1.0f32)],
        &EvalOptions::default(),
        &NoServices,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "in computation `c9937`, instruction `r` (call): calls nest more than 64 levels deep"
    );
    assert!(matches!(
        e,
        EvalError::CallDepth {
            limit: MAX_CALL_DEPTH,
            ..
        }
    ));
}

#[test]
fn calls_nested_up_to_the_limit_run() {
    let m = module(&call_chain(MAX_CALL_DEPTH - 1));
    let out = evaluate(
        &m,
        &[Literal::scalar(1.0f32)],
        &EvalOptions::default(),
        &NoServices,
    );
    assert_eq!(out, Ok(Literal::scalar(-1.0f32)));
    let m = module(&call_chain(MAX_CALL_DEPTH));
    let out = evaluate(
        &m,
        &[Literal::scalar(1.0f32)],
        &EvalOptions::default(),
        &NoServices,
    );
    assert!(matches!(out, Err(EvalError::CallDepth { .. })), "{out:?}");
}

#[test]
fn deep_calls_through_while_map_and_conditional_are_bounded_too() {
    let mut t = String::from(
        "HloModule deep\n\nc0 {\n  p = f32[] parameter(0)\n  ROOT r = f32[] negate(p)\n}\n\n",
    );
    for k in 1..=3000 {
        let body = match k % 3 {
            0 => format!(
                "  p = f32[] parameter(0)\n  b = f32[1] broadcast(p), dimensions={{}}\n  m = f32[1] map(b), dimensions={{0}}, to_apply=c{}\n  ROOT r = f32[] reshape(m)\n",
                k - 1
            ),
            1 => format!(
                "  p = f32[] parameter(0)\n  t = pred[] constant(true)\n  ROOT r = f32[] conditional(t, p, p), true_computation=c{0}, false_computation=c{0}\n",
                k - 1
            ),
            _ => format!(
                "  p = f32[] parameter(0)\n  ROOT r = f32[] call(p), to_apply=c{}\n",
                k - 1
            ),
        };
        t.push_str(&format!("c{k} {{\n{body}}}\n\n"));
    }
    t.push_str(
        "ENTRY e {\n  p = f32[] parameter(0)\n  ROOT r = f32[] call(p), to_apply=c3000\n}\n",
    );
    let e = evaluate(
        &module(&t),
        &[Literal::scalar(1.0f32)],
        &EvalOptions::default(),
        &NoServices,
    )
    .unwrap_err();
    assert!(matches!(e, EvalError::CallDepth { .. }), "{e}");
}

#[test]
fn a_runaway_loop_stops_at_the_iteration_limit() {
    let text = r#"HloModule t
cond {
  s = s32[] parameter(0)
  ROOT t = pred[] constant(true)
}
body {
  s = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT n = s32[] add(s, one)
}
ENTRY e {
  z = s32[] parameter(0)
  ROOT w = s32[] while(z), condition=cond, body=body
}
"#;
    let options = EvalOptions::default().while_iteration_limit(1000);
    let e = try_eval_with(text, &[lit("s32[]", "0")], &options, &NoServices).unwrap_err();
    assert_eq!(
        e.to_string(),
        "in computation `e`, instruction `w` (while): the loop exceeded the iteration limit of 1000"
    );
}

/// The cost of a reduce-window is the real elements its windows read, not
/// the window size: a window of 2^40 positions over a 3-element operand
/// (almost all padding and dilation holes) returns at once.
#[test]
fn a_huge_padded_window_is_cheap() {
    let text = r#"HloModule t
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  p = f32[3] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[2] reduce-window(p, z), window={size=1099511627776 stride=1099511627776 pad=1099511627775_1099511627776 lhs_dilate=1048576}, to_apply=add
}
"#;
    let out = try_eval_with(
        text,
        &[lit("f32[3]", "{1, 2, 4}")],
        &EvalOptions::default(),
        &NoServices,
    );
    assert_eq!(out, Ok(lit("f32[2]", "{1, 6}")));
}

/// A convolution with an empty kernel whose window is 2^40 long: nothing
/// to sum, so zeros at once (the window tables used to be built first).
#[test]
fn an_empty_kernel_with_a_huge_window_gives_zeros_at_once() {
    let text = "HloModule t\nENTRY e {\n  x = f32[1,0,3] parameter(0)\n  k = f32[2,0,1099511627776] parameter(1)\n  ROOT c = f32[1,2,1] convolution(x, k), window={size=1099511627776 pad=0_1099511627773}, dim_labels=bf0_oi0->bf0\n}\n";
    let x = Literal::from_vec(&[1, 0, 3], Vec::<f32>::new()).unwrap();
    let k = Literal::from_vec(&[2, 0, 1 << 40], Vec::<f32>::new()).unwrap();
    let out = try_eval_with(text, &[x, k], &EvalOptions::default(), &NoServices);
    assert_eq!(out, Ok(lit("f32[1,2,1]", "{{{0}, {0}}}")));
}

/// An array with no elements of shape `text` (`f32[0,4294967296]`).
fn empty(text: &str) -> Literal {
    oxla_hlo::Literal::zeros(&crate::common::shape(text)).unwrap()
}

/// Runs `op` on empty operands whose other dimensions are huge; the result
/// (empty too) must come back at once: no table, stride or loop may scale
/// with the dimensions of an array that has no elements.
#[track_caller]
fn empty_op(out: &str, op: &str, attrs: &str, params: &[&str], extra: &str) {
    let text = crate::common::op_module(out, op, attrs, params, extra);
    let args: Vec<Literal> = params.iter().map(|p| empty(p)).collect();
    let got = try_eval_with(&text, &args, &EvalOptions::default(), &NoServices)
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(got, empty(out), "{text}");
}

const LT: &str = "lt {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = pred[] compare(a, b), direction=LT\n}";

/// Found by the `builder_calls` fuzz target (sort: a capacity overflow
/// sizing its permutation by the 2^63-long dimension); the others are the
/// same mistake found reading the interpreter for it.
#[test]
fn empty_arrays_with_huge_dimensions_cost_nothing() {
    empty_op(
        "f32[1,0,9223372036854775807]",
        "sort",
        "dimensions={2}, is_stable=true, to_apply=lt",
        &["f32[1,0,9223372036854775807]"],
        LT,
    );
    empty_op(
        "f32[4294967296,4294967296,0]",
        "transpose",
        "dimensions={1,2,0}",
        &["f32[0,4294967296,4294967296]"],
        "",
    );
    empty_op(
        "f32[0,4294967296,4294967296]",
        "cholesky",
        "lower=true",
        &["f32[0,4294967296,4294967296]"],
        "",
    );
    empty_op(
        "f32[0,4294967296,2]",
        "triangular-solve",
        "left_side=true, lower=true, transpose_a=NO_TRANSPOSE",
        &["f32[0,4294967296,4294967296]", "f32[0,4294967296,2]"],
        "",
    );
    empty_op(
        "f32[0,1099511627776]",
        "fft",
        "fft_type=IRFFT, fft_length={1099511627776}",
        &["c64[0,549755813889]"],
        "",
    );
}

#[test]
fn empty_topk_with_a_huge_dimension() {
    let text = "HloModule t\nENTRY e {\n  p = f32[0,4611686018427387904] parameter(0)\n  ROOT k = (f32[0,3], s32[0,3]) topk(p), k=3, largest=true\n}\n";
    let out = try_eval_with(
        text,
        &[empty("f32[0,4611686018427387904]")],
        &EvalOptions::default(),
        &NoServices,
    );
    assert_eq!(
        out,
        Ok(Literal::tuple(vec![empty("f32[0,3]"), empty("s32[0,3]")]))
    );
}

/// A scan steps along a dimension of an empty input, which may be 2^62
/// long: the loop iteration limit bounds it, as it bounds a `while`.
#[test]
fn a_runaway_scan_stops_at_the_iteration_limit() {
    let text = r#"HloModule t
body {
  x = f32[0] parameter(0)
  c = s32[] parameter(1)
  one = s32[] constant(1)
  ROOT r = s32[] add(c, one)
}
ENTRY e {
  xs = f32[4611686018427387904,0] parameter(0)
  init = s32[] constant(0)
  ROOT s = (s32[]) scan(xs, init), dimensions={0}, num_carries=1, to_apply=body
}
"#;
    let options = EvalOptions::default().while_iteration_limit(100);
    let e = try_eval_with(
        text,
        &[empty("f32[4611686018427387904,0]")],
        &options,
        &NoServices,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "in computation `e`, instruction `s` (scan): the scan exceeded the loop iteration limit of 100"
    );
}

/// Found by the `builder_calls` fuzz target: a reduce-window whose empty
/// result has a 2^62-long dimension sized a table by it.
#[test]
fn an_empty_reduce_window_with_a_huge_dimension() {
    empty_op(
        "f32[0,4611686018427387904]",
        "reduce-window",
        "window={size=1x1}, to_apply=add",
        &["f32[0,4611686018427387904]", "f32[]"],
        "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}",
    );
}

/// Found by the `builder_calls` fuzz target (out of memory): reducing an
/// empty `s32[0,143699050343152533]` over its long dimension built a table
/// of offsets with an entry per position of that dimension.
#[test]
fn reducing_an_empty_array_over_a_huge_dimension() {
    empty_op(
        "s32[0]",
        "reduce",
        "dimensions={1}, to_apply=add",
        &["s32[0,143699050343152533]", "s32[]"],
        "add {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n  ROOT s = s32[] add(a, b)\n}",
    );
    let text = "HloModule t\nadd {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n  ROOT s = s32[] add(a, b)\n}\nENTRY e {\n  p = s32[2,0] parameter(0)\n  z = s32[] constant(7)\n  ROOT r = s32[2] reduce(p, z), dimensions={1}, to_apply=add\n}\n";
    let out = try_eval_with(
        text,
        &[empty("s32[2,0]")],
        &EvalOptions::default(),
        &NoServices,
    );
    assert_eq!(out, Ok(lit("s32[2]", "{7, 7}")));
}

/// Found by the `builder_calls` fuzz target (a timeout): a convolution of
/// an empty `f64[4,9223372036854775807,0]` with itself has a non-empty
/// result (a zero-size window), and looped over the 2^63 input features.
#[test]
fn a_convolution_of_empty_operands_gives_zeros_at_once() {
    let text = "HloModule t\nENTRY e {\n  x = f64[4,9223372036854775807,0] parameter(0)\n  ROOT c = f64[4,4,1] convolution(x, x), window={size=0}, dim_labels=bf0_oi0->bf0\n}\n";
    let x = empty("f64[4,9223372036854775807,0]");
    let out = try_eval_with(text, &[x], &EvalOptions::default(), &NoServices);
    assert_eq!(
        out,
        Ok(Literal::zeros(&crate::common::shape("f64[4,4,1]")).unwrap())
    );
}
