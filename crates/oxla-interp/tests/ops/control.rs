//! while (the spec's 1000-iteration loop, nesting, the iteration limit),
//! conditional (pred, index, out of range), call, and dead-code skipping.

use oxla_interp::{EvalError, EvalOptions, NoServices};

use crate::common::{assert_bits, eval, lit, try_eval_with};

const SPEC_WHILE: &str = r#"HloModule while_spec

cond {
  p = (s32[], f32[10]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(1000)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  p = (s32[], f32[10]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  v = f32[10] get-tuple-element(p), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  c = f32[10] constant({0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5})
  v2 = f32[10] add(v, c)
  ROOT t = (s32[], f32[10]) tuple(i2, v2)
}

ENTRY e {
  z = s32[] constant(0)
  v = f32[10] constant({0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
  init = (s32[], f32[10]) tuple(z, v)
  ROOT w = (s32[], f32[10]) while(init), condition=cond, body=body
}
"#;

#[test]
fn the_spec_while_loop_runs_1000_iterations() {
    let out = eval(SPEC_WHILE, &[]);
    let expected = lit(
        "(s32[], f32[10])",
        "(1000, {500, 1000, 1500, 2000, 2500, 3000, 3500, 4000, 4500, 5000})",
    );
    assert_bits(&out, &expected);
}

#[test]
fn the_iteration_limit_stops_a_runaway_loop() {
    let runaway = SPEC_WHILE
        .replace("direction=LT", "direction=NE")
        .replace("constant(1000)", "constant(-1)");
    let options = EvalOptions::default().while_iteration_limit(50);
    let err = try_eval_with(&runaway, &[], &options, &NoServices).unwrap_err();
    assert_eq!(
        err,
        EvalError::WhileIterationLimit {
            computation: "e".into(),
            instruction: "w".into(),
            limit: 50
        }
    );
    assert_eq!(
        err.to_string(),
        "in computation `e`, instruction `w` (while): the loop exceeded the iteration limit of 50"
    );
    // A loop within the limit is unaffected.
    let ok = try_eval_with(
        SPEC_WHILE,
        &[],
        &EvalOptions::default().while_iteration_limit(1000),
        &NoServices,
    );
    assert!(ok.is_ok());
}

#[test]
fn nested_while_loops() {
    // for i in 0..4: for j in 0..3: acc += i * j
    let text = r#"HloModule nested

icond {
  p = (s32[], s32[], s32[]) parameter(0)
  j = s32[] get-tuple-element(p), index=0
  three = s32[] constant(3)
  ROOT lt = pred[] compare(j, three), direction=LT
}

ibody {
  p = (s32[], s32[], s32[]) parameter(0)
  j = s32[] get-tuple-element(p), index=0
  i = s32[] get-tuple-element(p), index=1
  acc = s32[] get-tuple-element(p), index=2
  ij = s32[] multiply(i, j)
  acc2 = s32[] add(acc, ij)
  one = s32[] constant(1)
  j2 = s32[] add(j, one)
  ROOT t = (s32[], s32[], s32[]) tuple(j2, i, acc2)
}

ocond {
  p = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  four = s32[] constant(4)
  ROOT lt = pred[] compare(i, four), direction=LT
}

obody {
  p = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  acc = s32[] get-tuple-element(p), index=1
  zero = s32[] constant(0)
  init = (s32[], s32[], s32[]) tuple(zero, i, acc)
  w = (s32[], s32[], s32[]) while(init), condition=icond, body=ibody
  acc2 = s32[] get-tuple-element(w), index=2
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT t = (s32[], s32[]) tuple(i2, acc2)
}

ENTRY e {
  zero = s32[] constant(0)
  init = (s32[], s32[]) tuple(zero, zero)
  w = (s32[], s32[]) while(init), condition=ocond, body=obody
  ROOT r = s32[] get-tuple-element(w), index=1
}
"#;
    assert_bits(&eval(text, &[]), &lit("s32[]", "18"));
}

fn switch_module() -> String {
    let mut text = String::from("HloModule switch\n");
    for k in 0..3 {
        text.push_str(&format!(
            "b{k} {{\n  x = s32[] parameter(0)\n  c = s32[] constant({})\n  ROOT r = s32[] add(x, c)\n}}\n",
            (k + 1) * 100
        ));
    }
    text.push_str("ENTRY e {\n  i = s32[] parameter(0)\n  x = s32[] parameter(1)\n  ROOT r = s32[] conditional(i, x, x, x), branch_computations={b0, b1, b2}\n}\n");
    text
}

#[test]
fn conditional_index_out_of_range_runs_the_last_branch() {
    let text = switch_module();
    let run = |i: &str| {
        eval(&text, &[lit("s32[]", i), lit("s32[]", "1")])
            .to_scalar::<i32>()
            .unwrap()
    };
    assert_eq!(run("0"), 101);
    assert_eq!(run("1"), 201);
    assert_eq!(run("2"), 301);
    assert_eq!(run("3"), 301);
    assert_eq!(run("-1"), 301);
    assert_eq!(run("-2147483648"), 301);
    assert_eq!(run("100"), 301);
}

#[test]
fn conditional_on_a_pred() {
    let text = r#"HloModule c
t {
  x = f32[] parameter(0)
  ROOT n = f32[] negate(x)
}
f {
  x = f32[] parameter(0)
  ROOT a = f32[] abs(x)
}
ENTRY e {
  p = pred[] parameter(0)
  x = f32[] parameter(1)
  ROOT r = f32[] conditional(p, x, x), true_computation=t, false_computation=f
}
"#;
    assert_bits(
        &eval(text, &[lit("pred[]", "true"), lit("f32[]", "-2")]),
        &lit("f32[]", "2"),
    );
    assert_bits(
        &eval(text, &[lit("pred[]", "true"), lit("f32[]", "3")]),
        &lit("f32[]", "-3"),
    );
    assert_bits(
        &eval(text, &[lit("pred[]", "false"), lit("f32[]", "-3")]),
        &lit("f32[]", "3"),
    );
}

#[test]
fn call_and_dead_code() {
    // The dead while never terminates: it must be skipped, since nothing
    // uses it and it has no side effect.
    let text = r#"HloModule calls
forever {
  p = s32[] parameter(0)
  ROOT t = pred[] constant(true)
}
same {
  ROOT p = s32[] parameter(0)
}
double {
  x = s32[] parameter(0)
  ROOT y = s32[] add(x, x)
}
ENTRY e {
  x = s32[] parameter(0)
  dead = s32[] while(x), condition=forever, body=same
  ROOT c = s32[] call(x), to_apply=double
}
"#;
    assert_bits(&eval(text, &[lit("s32[]", "21")]), &lit("s32[]", "42"));
}

/// The body `y = -(10 x + carry)`, `carry' = 10 x + carry` is not commutative,
/// so it pins down the argument order (inputs, then carries) and where the
/// outputs of a reversed scan go (values checked on XLA:CPU).
const SCAN: &str = r#"HloModule scan

body {
  x = s32[] parameter(0)
  carry = s32[] parameter(1)
  ten = s32[] constant(10)
  tx = s32[] multiply(x, ten)
  next = s32[] add(tx, carry)
  y = s32[] negate(next)
  ROOT r = (s32[], s32[]) tuple(y, next)
}

ENTRY e {
  xs = s32[3] parameter(0)
  init = s32[] parameter(1)
  ROOT s = (s32[3], s32[]) scan(xs, init), dimensions={0}, num_carries=1, to_apply=body
}
"#;

#[test]
fn scan_forward_and_reversed() {
    let args = [lit("s32[3]", "{1, 2, 3}"), lit("s32[]", "0")];
    assert_bits(
        &eval(SCAN, &args),
        &lit("(s32[3], s32[])", "({-10, -30, -60}, 60)"),
    );
    let reversed = SCAN.replace("num_carries=1,", "num_carries=1, is_reverse=true,");
    assert_bits(
        &eval(&reversed, &args),
        &lit("(s32[3], s32[])", "({-60, -50, -30}, 60)"),
    );
}

#[test]
fn scan_stacks_along_an_inner_dimension() {
    let text = r#"HloModule scan2

body {
  x = f32[2] parameter(0)
  c = f32[2] parameter(1)
  s = f32[2] add(x, c)
  ROOT r = (f32[2], f32[2]) tuple(s, s)
}

ENTRY e {
  xs = f32[2,3] parameter(0)
  c0 = f32[2] parameter(1)
  ROOT s = (f32[2,3], f32[2]) scan(xs, c0), dimensions={1}, num_carries=1, to_apply=body
}
"#;
    let args = [
        lit("f32[2,3]", "{{1, 2, 3}, {4, 5, 6}}"),
        lit("f32[2]", "{0, 100}"),
    ];
    assert_bits(
        &eval(text, &args),
        &lit(
            "(f32[2,3], f32[2])",
            "({{1, 3, 6}, {104, 109, 115}}, {6, 115})",
        ),
    );
}
