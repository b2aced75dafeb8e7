//! `MatchXla`: the module after XLA's inexact rewrites (entry computation as
//! HLO text, without `%` sigils and layouts), and the values those rewrites
//! give where they differ from the module as written. The rules themselves
//! are pinned against real XLA by the `xla_*` JAX fixtures.

use oxla_hlo::{HloModule, Literal};
use oxla_interp::{EvalOptions, NoServices};
use oxla_passes::{Dce, FoldConstants, MatchXla, Pass, Pipeline};

mod common;
use common::entry_lines;

/// `text` after the rewrites, constant folding and dead-code elimination,
/// checked to verify after every pass.
fn rewritten(text: &str) -> HloModule {
    let mut module = oxla_text::parse_module(text).unwrap();
    let passes: Vec<Box<dyn Pass>> = vec![
        Box::new(MatchXla),
        Box::new(FoldConstants::default()),
        Box::new(Dce),
    ];
    Pipeline::new(passes).run_observed(&mut module, &mut |pass, _, _, m| {
        if let Err(e) = oxla_hlo::verifier::verify(m) {
            panic!("after {pass}: {e}\n{}", oxla_text::print_module(m));
        }
    });
    module
}

fn check(text: &str, expected: &[&str]) -> HloModule {
    let module = rewritten(text);
    assert_eq!(
        entry_lines(&module),
        expected,
        "\n{}",
        oxla_text::print_module(&module)
    );
    module
}

fn run(module: &HloModule, args: &[Literal]) -> Literal {
    oxla_interp::evaluate(module, args, &EvalOptions::default(), &NoServices).unwrap()
}

#[test]
fn division_by_a_constant_multiplies_by_its_reciprocal() {
    check(
        "HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  c = f32[] constant(10)
  b = f32[4] broadcast(c), dimensions={}
  ROOT d = f32[4] divide(x, b)
}",
        &[
            "x = f32[4] parameter(0)",
            "d.1 = f32[] constant(0.1)",
            "d.2 = f32[4] broadcast(d.1), dimensions={}",
            "ROOT d.3 = f32[4] multiply(x, d.2)",
        ],
    );
    // Integers divide as written.
    check(
        "HloModule m
ENTRY e {
  x = s32[4] parameter(0)
  c = s32[] constant(10)
  b = s32[4] broadcast(c), dimensions={}
  ROOT d = s32[4] divide(x, b)
}",
        &[
            "x = s32[4] parameter(0)",
            "c = s32[] constant(10)",
            "b = s32[4] broadcast(c), dimensions={}",
            "ROOT d = s32[4] divide(x, b)",
        ],
    );
}

#[test]
fn constants_reassociate() {
    // (x + 3) + 2 => x + 5, the sum folded in f32.
    check(
        "HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  c3 = f32[] constant(3)
  b3 = f32[4] broadcast(c3), dimensions={}
  c2 = f32[] constant(2)
  b2 = f32[4] broadcast(c2), dimensions={}
  a = f32[4] add(x, b3)
  ROOT r = f32[4] add(a, b2)
}",
        &[
            "x = f32[4] parameter(0)",
            "r.1 = f32[] constant(5)",
            "r.2 = f32[4] broadcast(r.1), dimensions={}",
            "ROOT r.3 = f32[4] add(x, r.2)",
        ],
    );
    // (x * 3) * 2 => x * 6; (x - 3) - 2 => x + -5.
    check(
        "HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  c3 = f32[] constant(3)
  b3 = f32[4] broadcast(c3), dimensions={}
  c2 = f32[] constant(2)
  b2 = f32[4] broadcast(c2), dimensions={}
  m = f32[4] multiply(x, b3)
  p = f32[4] multiply(m, b2)
  s = f32[4] subtract(x, b3)
  t = f32[4] subtract(s, b2)
  ROOT r = (f32[4], f32[4]) tuple(p, t)
}",
        &[
            "x = f32[4] parameter(0)",
            "p.1 = f32[] constant(6)",
            "p.2 = f32[4] broadcast(p.1), dimensions={}",
            "p.3 = f32[4] multiply(x, p.2)",
            "t.4 = f32[] constant(-5)",
            "t.5 = f32[4] broadcast(t.4), dimensions={}",
            "t.6 = f32[4] add(x, t.5)",
            "ROOT r = (f32[4], f32[4]) tuple(p.3, t.6)",
        ],
    );
}

#[test]
fn quotients_regroup_and_powers_expand() {
    check(
        "HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  z = f32[4] parameter(2)
  q = f32[4] divide(x, y)
  a = f32[4] divide(q, z)
  s = f32[4] sqrt(y)
  b = f32[4] divide(x, s)
  c3 = f32[] constant(3)
  b3 = f32[4] broadcast(c3), dimensions={}
  p = f32[4] power(x, b3)
  ROOT r = (f32[4], f32[4], f32[4]) tuple(a, b, p)
}",
        &[
            "x = f32[4] parameter(0)",
            "y = f32[4] parameter(1)",
            "z = f32[4] parameter(2)",
            "a.1 = f32[4] multiply(y, z)",
            "a.2 = f32[4] divide(x, a.1)",
            "b.1 = f32[4] rsqrt(y)",
            "b.2 = f32[4] multiply(x, b.1)",
            "p.1 = f32[4] multiply(x, x)",
            "p.2 = f32[4] multiply(x, p.1)",
            "ROOT r = (f32[4], f32[4], f32[4]) tuple(a.2, b.2, p.2)",
        ],
    );
}

#[test]
fn rules_that_need_one_user_leave_shared_values_alone() {
    // x / sqrt(y) with the sqrt also returned stays a quotient (XLA's rule
    // wants the sqrt used once); x / broadcast(s) with s used once becomes
    // x * broadcast(1 / s).
    check(
        "HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  s = f32[] parameter(2)
  r = f32[4] sqrt(y)
  q = f32[4] divide(x, r)
  b = f32[4] broadcast(s), dimensions={}
  d = f32[4] divide(x, b)
  ROOT t = (f32[4], f32[4], f32[4]) tuple(q, r, d)
}",
        &[
            "x = f32[4] parameter(0)",
            "y = f32[4] parameter(1)",
            "s = f32[] parameter(2)",
            "r = f32[4] sqrt(y)",
            "q = f32[4] divide(x, r)",
            "d.1 = f32[] constant(1)",
            "d.2 = f32[] divide(d.1, s)",
            "d.3 = f32[4] broadcast(d.2), dimensions={}",
            "d.4 = f32[4] multiply(x, d.3)",
            "ROOT t = (f32[4], f32[4], f32[4]) tuple(q, r, d.4)",
        ],
    );
}

#[test]
fn values_xla_gives_and_ieee_would_not() {
    let module = rewritten(
        "HloModule m
ENTRY e {
  x = f32[3] parameter(0)
  p = pred[3] parameter(1)
  zero = f32[] constant(0)
  z = f32[3] broadcast(zero), dimensions={}
  plus_zero = f32[3] add(x, z)
  m = f32[3] convert(p)
  masked = f32[3] multiply(m, x)
  big = f32[3] multiply(x, x)
  root = f32[3] sqrt(big)
  e40 = f32[] constant(40)
  b40 = f32[3] broadcast(e40), dimensions={}
  scaled = f32[3] multiply(x, b40)
  ex = f32[3] exponential(scaled)
  lg = f32[3] log(ex)
  ROOT r = (f32[3], f32[3], f32[3], f32[3]) tuple(plus_zero, masked, root, lg)
}",
    );
    let x = Literal::vec1(&[-0.0f32, f32::NAN, 1e30]);
    let p = Literal::vec1(&[true, false, false]);
    let out = run(&module, &[x, p]);
    let parts = out.tuple_elements().unwrap();
    let bits = |l: &Literal| -> Vec<u32> {
        l.to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect()
    };
    // x + 0 is x: -0 stays -0 (IEEE: +0).
    assert_eq!(bits(&parts[0])[0], (-0.0f32).to_bits());
    // convert(p) * x is select(p, x, 0): 0 where p is false, even for NaN.
    assert_eq!(parts[1].to_vec::<f32>().unwrap()[1..], [0.0, 0.0]);
    // sqrt(x * x) is |x|: no overflow at 1e30.
    assert_eq!(parts[2].to_vec::<f32>().unwrap()[2], 1e30);
    // log(exp(40 x)) is 40 x: no overflow to inf.
    assert_eq!(parts[3].to_vec::<f32>().unwrap()[2], 4e31);
}

#[test]
fn bf16_results_converted_to_f32_keep_their_f32_precision() {
    let text = "HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  h = bf16[2] convert(x)
  c = bf16[] constant(3)
  b = bf16[2] broadcast(c), dimensions={}
  m = bf16[2] multiply(h, b)
  wide = f32[2] convert(m)
  one = bf16[] constant(1)
  ones = bf16[2] broadcast(one), dimensions={}
  s = bf16[2] add(m, ones)
  ROOT r = (f32[2], bf16[2]) tuple(wide, s)
}";
    let module = rewritten(text);
    let x = Literal::vec1(&[0.1f32, 0.7]);
    let out = run(&module, std::slice::from_ref(&x));
    let parts = out.tuple_elements().unwrap();
    // bf16(0.1) = 0.10009765625; times 3 in f32 is 0.30029296875, which is
    // not a bf16 value (as written, the product rounds to 0.30078125).
    assert_eq!(parts[0].to_vec::<f32>().unwrap()[0], 0.300_292_97);
    // The bf16 add reads the rounded product: 0.30078125 + 1 in bf16.
    let as_written = oxla_text::parse_module(text).unwrap();
    let expected = run(&as_written, &[x]);
    assert!(parts[1].bitwise_eq(&expected.tuple_elements().unwrap()[1]));
    assert_ne!(
        expected.tuple_elements().unwrap()[0]
            .to_vec::<f32>()
            .unwrap()[0],
        0.300_292_97
    );
}

#[test]
fn reducers_and_f16_are_not_normalized() {
    let module = check(
        "HloModule m
add {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT s = bf16[] add(a, b)
}
ENTRY e {
  x = bf16[4] parameter(0)
  y = f16[4] parameter(1)
  zero = bf16[] constant(0)
  r = bf16[] reduce(x, zero), dimensions={0}, to_apply=add
  w = f32[] convert(r)
  t = f16[4] tanh(y)
  v = f32[4] convert(t)
  ROOT out = (f32[], f32[4]) tuple(w, v)
}",
        &[
            "x = bf16[4] parameter(0)",
            "y = f16[4] parameter(1)",
            "zero = bf16[] constant(0)",
            "r = bf16[] reduce(x, zero), dimensions={0}, to_apply=add",
            "w = f32[] convert(r)",
            "t = f16[4] tanh(y)",
            "v = f32[4] convert(t)",
            "ROOT out = (f32[], f32[4]) tuple(w, v)",
        ],
    );
    let reducer = oxla_text::print_module(&module);
    assert!(
        reducer.contains("ROOT %s = bf16[] add(%a, %b)"),
        "{reducer}"
    );
}
