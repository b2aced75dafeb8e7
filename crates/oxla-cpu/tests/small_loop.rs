//! Loops over small values, which the CPU backend compiles whole into a
//! register program: each test checks that the loop took that path, that
//! its results equal the interpreter's bit for bit, and where the values are
//! known, the values themselves.

use oxla_hlo::{HloModule, Literal};
use oxla_interp::{EvalError, EvalOptions, NoServices};

fn compile(text: &str) -> (HloModule, oxla_cpu::CpuExecutable) {
    let module = oxla_text::parse_module(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let exe = oxla_cpu::compile(&module).unwrap();
    (module, exe)
}

/// Runs `text` on `args` on both backends (twice on the CPU, the first
/// result recycled), asserts the loop ran as a small-state loop and the
/// results agree bit for bit, and returns the result.
fn check(text: &str, args: &[Literal]) -> Literal {
    let (module, exe) = compile(text);
    assert!(
        exe.describe().contains("small-state loop"),
        "the loop was not compiled whole:\n{}",
        exe.describe()
    );
    let options = EvalOptions::default();
    let want = oxla_interp::evaluate(&module, args, &options, &NoServices).unwrap();
    let first = exe.execute(args, &options, &NoServices).unwrap();
    assert!(first.bitwise_eq(&want), "got {first}, want {want}");
    exe.recycle(first);
    let again = exe.execute(args, &options, &NoServices).unwrap();
    assert!(
        again.bitwise_eq(&want),
        "second run: got {again}, want {want}"
    );
    again
}

const SPEC_WHILE: &str = "HloModule w
body {
  p = (s32[], f32[10], f32[10]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  acc = f32[10] get-tuple-element(p), index=1
  v = f32[10] get-tuple-element(p), index=2
  a = f32[10] add(acc, v)
  ROOT t = (s32[], f32[10], f32[10]) tuple(j, a, v)
}
cond {
  p = (s32[], f32[10], f32[10]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(1000)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  zero = s32[] constant(0)
  acc = f32[10] parameter(0)
  v = f32[10] parameter(1)
  init = (s32[], f32[10], f32[10]) tuple(zero, acc, v)
  w = (s32[], f32[10], f32[10]) while(init), condition=cond, body=body
  c = s32[] get-tuple-element(w), index=0
  r = f32[10] get-tuple-element(w), index=1
  ROOT out = (s32[], f32[10]) tuple(c, r)
}
";

#[test]
fn the_spec_loop_adds_a_vector_a_thousand_times() {
    let acc = Literal::vec1(&[0f32; 10]);
    let v = Literal::vec1(&[1f32, 2., 3., 4., 5., 6., 7., 8., 9., 10.]);
    let out = check(SPEC_WHILE, &[acc, v]);
    let parts = out.tuple_elements().unwrap();
    assert_eq!(parts[0].to_scalar::<i32>().unwrap(), 1000);
    assert_eq!(
        parts[1].to_vec::<f32>().unwrap(),
        vec![
            1000f32, 2000., 3000., 4000., 5000., 6000., 7000., 8000., 9000., 10000.
        ]
    );
}

#[test]
fn state_values_that_trade_places_and_wrap() {
    // (i, a, b) -> (i + 1, b, a + b): Fibonacci in u64 past its overflow
    // (fib(100) wraps), and in s32 where it goes negative.
    let text = "HloModule f
body {
  p = (s32[], u64[], u64[], s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  a = u64[] get-tuple-element(p), index=1
  b = u64[] get-tuple-element(p), index=2
  s = u64[] add(a, b)
  c = s32[] get-tuple-element(p), index=3
  d = s32[] get-tuple-element(p), index=4
  e = s32[] add(c, d)
  ROOT t = (s32[], u64[], u64[], s32[], s32[]) tuple(j, b, s, d, e)
}
cond {
  p = (s32[], u64[], u64[], s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  k = s32[] constant(100)
  ROOT lt = pred[] compare(i, k), direction=LT
}
ENTRY e {
  z = s32[] constant(0)
  a = u64[] constant(0)
  b = u64[] constant(1)
  c = s32[] constant(0)
  d = s32[] constant(1)
  init = (s32[], u64[], u64[], s32[], s32[]) tuple(z, a, b, c, d)
  ROOT w = (s32[], u64[], u64[], s32[], s32[]) while(init), condition=cond, body=body
}
";
    let out = check(text, &[]);
    let parts = out.tuple_elements().unwrap();
    // fib(100) mod 2^64 and fib(100) mod 2^32 as s32.
    let mut fib = (0u128, 1u128);
    for _ in 0..100 {
        fib = (fib.1, fib.0 + fib.1);
    }
    assert_eq!(parts[1].to_scalar::<u64>().unwrap(), fib.0 as u64);
    assert_eq!(parts[3].to_scalar::<i32>().unwrap(), fib.0 as u32 as i32);
}

#[test]
fn index_operations_generic_functions_and_float_edge_cases() {
    // The body reverses, transposes, slices, broadcasts, divides by zero in
    // integers, takes exp, selects and clamps, twenty times (more than the
    // passes unroll).
    let text = "HloModule g
body {
  p = (s32[], f32[2,3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  x = f32[2,3] get-tuple-element(p), index=1
  t = f32[3,2] transpose(x), dimensions={1,0}
  r = f32[3,2] reverse(t), dimensions={0}
  back = f32[2,3] reshape(r)
  h = f32[] constant(0.5)
  hb = f32[2,3] broadcast(h), dimensions={}
  m = f32[2,3] multiply(back, hb)
  e = f32[2,3] exponential(m)
  io = s32[2,3] iota(), iota_dimension=1
  zi = s32[] constant(0)
  zb = s32[2,3] broadcast(zi), dimensions={}
  q = s32[2,3] divide(io, zb)
  qf = f32[2,3] convert(q)
  nz = f32[] constant(-0)
  nzb = f32[2,3] broadcast(nz), dimensions={}
  mx = f32[2,3] maximum(e, nzb)
  lt = pred[2,3] compare(mx, qf), direction=LT
  s = f32[2,3] select(lt, mx, qf)
  lo = f32[] constant(-3)
  hi = f32[] constant(3)
  c = f32[2,3] clamp(lo, s, hi)
  ROOT o = (s32[], f32[2,3]) tuple(j, c)
}
cond {
  p = (s32[], f32[2,3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(20)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  z = s32[] constant(0)
  x = f32[2,3] parameter(0)
  init = (s32[], f32[2,3]) tuple(z, x)
  ROOT w = (s32[], f32[2,3]) while(init), condition=cond, body=body
}
";
    let x = Literal::from_vec(&[2, 3], vec![0.1f32, -0.0, f32::NAN, 1.5, -2.0, 0.25]).unwrap();
    check(text, &[x]);
}

#[test]
fn an_array_state_read_through_a_slice() {
    // Doubles a vector until its first element reaches 100.
    let text = "HloModule a
body {
  x = f32[4] parameter(0)
  ROOT d = f32[4] add(x, x)
}
cond {
  x = f32[4] parameter(0)
  s = f32[1] slice(x), slice={[0:1]}
  v = f32[] reshape(s)
  k = f32[] constant(100)
  ROOT lt = pred[] compare(v, k), direction=LT
}
ENTRY e {
  x = f32[4] parameter(0)
  ROOT w = f32[4] while(x), condition=cond, body=body
}
";
    let out = check(text, &[Literal::vec1(&[1f32, -1., 0.5, 3.])]);
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![128f32, -128., 64., 384.]);
}

#[test]
fn layout_operations_of_constants_and_of_loop_values() {
    // Each iteration: x = x * broadcast(2) + transpose(k) + broadcast(i),
    // the first two of constants (computed once when compiling), the last
    // of the counter (a scalar broadcast every iteration).
    let text = "HloModule c
body {
  p = (s32[], f32[2,3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  x = f32[2,3] get-tuple-element(p), index=1
  two = f32[] constant(2)
  twos = f32[2,3] broadcast(two), dimensions={}
  k = f32[3,2] constant({{1, 2}, {3, 4}, {5, 6}})
  kt = f32[2,3] transpose(k), dimensions={1,0}
  fi = f32[] convert(i)
  bi = f32[2,3] broadcast(fi), dimensions={}
  m = f32[2,3] multiply(x, twos)
  a = f32[2,3] add(m, kt)
  r = f32[2,3] add(a, bi)
  ROOT t = (s32[], f32[2,3]) tuple(j, r)
}
cond {
  p = (s32[], f32[2,3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(40)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  z = s32[] constant(0)
  x = f32[2,3] parameter(0)
  init = (s32[], f32[2,3]) tuple(z, x)
  w = (s32[], f32[2,3]) while(init), condition=cond, body=body
  ROOT r = f32[2,3] get-tuple-element(w), index=1
}
";
    let x = Literal::from_vec(&[2, 3], vec![0f32, 1., -1., 0.5, 2., 10.]).unwrap();
    let out = check(text, std::slice::from_ref(&x));
    // Forty iterations of x -> (2x + kt) + i, i = 0..40, in the loop's
    // order of f32 operations.
    let kt = [1f32, 3., 5., 2., 4., 6.];
    let mut want = x.to_vec::<f32>().unwrap();
    for i in 0..40 {
        for (w, k) in want.iter_mut().zip(kt) {
            *w = *w * 2.0 + k + i as f32;
        }
    }
    assert_eq!(out.to_vec::<f32>().unwrap(), want);
}

#[test]
fn results_used_twice_and_constant_results() {
    let text = "HloModule d
body {
  p = (s32[], f64[3], f64[3], f64[3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  a = f64[3] get-tuple-element(p), index=1
  b = f64[3] get-tuple-element(p), index=2
  s = f64[3] subtract(a, b)
  k = f64[3] constant({1, 2, 3})
  ROOT t = (s32[], f64[3], f64[3], f64[3]) tuple(j, s, s, k)
}
cond {
  p = (s32[], f64[3], f64[3], f64[3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(12)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  z = s32[] constant(0)
  a = f64[3] parameter(0)
  b = f64[3] parameter(1)
  c = f64[3] parameter(2)
  init = (s32[], f64[3], f64[3], f64[3]) tuple(z, a, b, c)
  ROOT w = (s32[], f64[3], f64[3], f64[3]) while(init), condition=cond, body=body
}
";
    let a = Literal::vec1(&[5f64, 6., 7.]);
    let b = Literal::vec1(&[1f64, 1., 1.]);
    let c = Literal::vec1(&[9f64, 9., 9.]);
    let out = check(text, &[a, b, c]);
    let parts = out.tuple_elements().unwrap();
    // After the first iteration both are a - b, and from then on zero.
    assert_eq!(parts[1].to_vec::<f64>().unwrap(), vec![0.0, 0.0, 0.0]);
    assert_eq!(parts[2].to_vec::<f64>().unwrap(), vec![0.0, 0.0, 0.0]);
    assert_eq!(parts[3].to_vec::<f64>().unwrap(), vec![1.0, 2.0, 3.0]);
}

#[test]
fn a_loop_that_never_runs_returns_its_state() {
    // The counter starts at a value known only when the loop runs (1, from
    // the input), so the passes cannot unroll the loop away.
    let text = SPEC_WHILE
        .replace("constant(1000)", "constant(-1)")
        .replace(
            "zero = s32[] constant(0)\n  acc = f32[10] parameter(0)",
            "acc = f32[10] parameter(0)\n  a0 = f32[1] slice(acc), slice={[0:1]}\n  \
         a1 = f32[] reshape(a0)\n  zero = s32[] convert(a1)",
        );
    let acc = Literal::vec1(&[1.5f32; 10]);
    let v = Literal::vec1(&[2f32; 10]);
    let out = check(&text, &[acc, v]);
    let parts = out.tuple_elements().unwrap();
    assert_eq!(parts[0].to_scalar::<i32>().unwrap(), 1);
    assert_eq!(parts[1].to_vec::<f32>().unwrap(), vec![1.5f32; 10]);
}

#[test]
fn the_iteration_limit_stops_the_loop_with_the_interpreters_error() {
    let (module, exe) = compile(SPEC_WHILE);
    let options = EvalOptions {
        while_iteration_limit: Some(10),
        ..EvalOptions::default()
    };
    let args = [Literal::vec1(&[0f32; 10]), Literal::vec1(&[1f32; 10])];
    let want = oxla_interp::evaluate(&module, &args, &options, &NoServices).unwrap_err();
    let got = exe.execute(&args, &options, &NoServices).unwrap_err();
    assert!(matches!(
        want,
        EvalError::WhileIterationLimit { limit: 10, .. }
    ));
    assert_eq!(got.to_string(), want.to_string());
}

#[test]
fn the_memory_limit_still_applies() {
    let (module, exe) = compile(SPEC_WHILE);
    let options = EvalOptions {
        max_array_bytes: 16,
        ..EvalOptions::default()
    };
    let args = [Literal::vec1(&[0f32; 10]), Literal::vec1(&[1f32; 10])];
    let want = oxla_interp::evaluate(&module, &args, &options, &NoServices).unwrap_err();
    assert!(matches!(want, EvalError::MemoryLimit { limit: 16, .. }));
    // The CPU backend checks arrays it makes (not the tuple the
    // interpreter builds first), so it stops at the body's add.
    let got = exe.execute(&args, &options, &NoServices).unwrap_err();
    assert!(
        got.to_string()
            .contains("instruction `a` (add): the result array f32[10] needs 40 bytes"),
        "{got}"
    );
}

#[test]
fn large_or_unsupported_states_take_the_general_path() {
    let big = SPEC_WHILE.replace("f32[10]", "f32[5000]");
    let (_, exe) = compile(&big);
    assert!(!exe.describe().contains("small-state loop"));
    // A dot in the body is not an operation of the register program.
    let dot = "HloModule d
body {
  p = (s32[], f32[2,2]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  m = f32[2,2] get-tuple-element(p), index=1
  d = f32[2,2] dot(m, m), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (s32[], f32[2,2]) tuple(j, d)
}
cond {
  p = (s32[], f32[2,2]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  z = s32[] constant(0)
  m = f32[2,2] parameter(0)
  init = (s32[], f32[2,2]) tuple(z, m)
  ROOT w = (s32[], f32[2,2]) while(init), condition=cond, body=body
}
";
    let (module, exe) = compile(dot);
    assert!(!exe.describe().contains("small-state loop"));
    let m = Literal::from_vec(&[2, 2], vec![1f32, 1., 0., 1.]).unwrap();
    let options = EvalOptions::default();
    let want =
        oxla_interp::evaluate(&module, std::slice::from_ref(&m), &options, &NoServices).unwrap();
    let got = exe.execute(&[m], &options, &NoServices).unwrap();
    assert!(got.bitwise_eq(&want));
    // [[1,1],[0,1]]^8 = [[1,8],[0,1]].
    assert_eq!(
        got.tuple_elements().unwrap()[1].to_vec::<f32>().unwrap(),
        vec![1f32, 8., 0., 1.]
    );
}

/// A loop whose body calls a computation, branches on the counter's parity
/// and runs an inner loop: `acc` gains `i` on even `i` and `2 * i` on odd,
/// the inner loop adding the increment one unit at a time.
const NESTED: &str = "HloModule n
parity {
  x = s64[] parameter(0)
  two = s64[] constant(2)
  ROOT r = s64[] remainder(x, two)
}
even {
  p = (s64[], s64[]) parameter(0)
  ROOT i = s64[] get-tuple-element(p), index=0
}
odd {
  p = (s64[], s64[]) parameter(0)
  i = s64[] get-tuple-element(p), index=0
  ROOT d = s64[] add(i, i)
}
inner_body {
  p = (s64[], s64[], s64[]) parameter(0)
  k = s64[] get-tuple-element(p), index=0
  one = s64[] constant(1)
  k1 = s64[] add(k, one)
  a = s64[] get-tuple-element(p), index=1
  a1 = s64[] add(a, one)
  n = s64[] get-tuple-element(p), index=2
  ROOT t = (s64[], s64[], s64[]) tuple(k1, a1, n)
}
inner_cond {
  p = (s64[], s64[], s64[]) parameter(0)
  k = s64[] get-tuple-element(p), index=0
  n = s64[] get-tuple-element(p), index=2
  ROOT lt = pred[] compare(k, n), direction=LT
}
body {
  p = (s64[], s64[]) parameter(0)
  i = s64[] get-tuple-element(p), index=0
  acc = s64[] get-tuple-element(p), index=1
  r = s64[] call(i), to_apply=parity
  zero = s64[] constant(0)
  is_odd = pred[] compare(r, zero), direction=NE
  branch = s32[] convert(is_odd)
  pair = (s64[], s64[]) tuple(i, acc)
  inc = s64[] conditional(branch, pair, pair), branch_computations={even, odd}
  start = (s64[], s64[], s64[]) tuple(zero, acc, inc)
  il = (s64[], s64[], s64[]) while(start), condition=inner_cond, body=inner_body
  got = s64[] get-tuple-element(il), index=1
  one = s64[] constant(1)
  i1 = s64[] add(i, one)
  ROOT o = (s64[], s64[]) tuple(i1, got)
}
cond {
  p = (s64[], s64[]) parameter(0)
  i = s64[] get-tuple-element(p), index=0
  n = s64[] constant(10)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  z = s64[] constant(0)
  init = (s64[], s64[]) tuple(z, z)
  ROOT w = (s64[], s64[]) while(init), condition=cond, body=body
}
";

#[test]
fn calls_conditionals_and_inner_loops_compile_into_the_loop() {
    let out = check(NESTED, &[]);
    let parts = out.tuple_elements().unwrap();
    assert_eq!(parts[0].to_scalar::<i64>().unwrap(), 10);
    // Even i: 0+2+4+6+8; odd i: 2*(1+3+5+7+9).
    assert_eq!(parts[1].to_scalar::<i64>().unwrap(), 70);
}

#[test]
fn an_inner_loop_at_the_limit_is_named_in_the_error() {
    let (module, exe) = compile(NESTED);
    // The outer loop runs 10 times; the inner one 18 times at i = 9.
    let options = EvalOptions {
        while_iteration_limit: Some(12),
        ..EvalOptions::default()
    };
    let want = oxla_interp::evaluate(&module, &[], &options, &NoServices).unwrap_err();
    let got = exe.execute(&[], &options, &NoServices).unwrap_err();
    assert!(want.to_string().contains("`il`"), "{want}");
    assert_eq!(got.to_string(), want.to_string());
}

#[test]
fn scalars_of_every_bank_type_keep_their_bits_and_their_order() {
    // Scalars live in the loop's scalar bank as raw bits: an s32 counter
    // whose old value is read after the new one is computed, an s32 branch
    // index that goes negative (the last branch), f32 and f64 values with
    // signed zeros, a u8 that wraps, a pred flag that flips.
    let text = "HloModule b
b0 {
  p = f32[] parameter(0)
  one = f32[] constant(1)
  ROOT r = f32[] add(p, one)
}
b1 {
  p = f32[] parameter(0)
  two = f32[] constant(-2)
  ROOT r = f32[] multiply(p, two)
}
body {
  p = (s32[], s32[], f32[], u8[], pred[], f64[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  three = s32[] constant(3)
  t = s32[] multiply(i, three)
  x = f32[] get-tuple-element(p), index=2
  sel = s32[] subtract(i, three)
  y = f32[] conditional(sel, x, x), branch_computations={b0, b1}
  u = u8[] get-tuple-element(p), index=3
  k = u8[] constant(200)
  u1 = u8[] add(u, k)
  f = pred[] get-tuple-element(p), index=4
  tr = pred[] constant(true)
  f1 = pred[] xor(f, tr)
  d = f64[] get-tuple-element(p), index=5
  half = f64[] constant(-0.5)
  dm = f64[] multiply(d, half)
  d1 = f64[] select(f, dm, d)
  ROOT o = (s32[], s32[], f32[], u8[], pred[], f64[]) tuple(i1, t, y, u1, f1, d1)
}
cond {
  p = (s32[], s32[], f32[], u8[], pred[], f64[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(11)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  z = s32[] constant(0)
  x = f32[] constant(0.5)
  u = u8[] constant(0)
  f = pred[] constant(false)
  d = f64[] constant(0)
  init = (s32[], s32[], f32[], u8[], pred[], f64[]) tuple(z, z, x, u, f, d)
  ROOT w = (s32[], s32[], f32[], u8[], pred[], f64[]) while(init), condition=cond, body=body
}
";
    let out = check(text, &[]);
    let parts = out.tuple_elements().unwrap();
    assert_eq!(parts[0].to_scalar::<i32>().unwrap(), 11);
    assert_eq!(parts[1].to_scalar::<i32>().unwrap(), 30);
    // i = 0, 1, 2: index -3, -2, -1 (the last branch, x * -2); i = 3: x + 1;
    // i = 4 to 10: index 1 to 7 (x * -2).
    let mut x = 0.5f32;
    for i in 0..11 {
        x = if i == 3 { x + 1.0 } else { x * -2.0 };
    }
    assert_eq!(parts[2].to_scalar::<f32>().unwrap(), x);
    assert_eq!(parts[3].to_scalar::<u8>().unwrap(), (11 * 200 % 256) as u8);
    assert!(parts[4].to_scalar::<bool>().unwrap());
    // d * -0.5 on the turns the flag is true (i = 1, 3, 5, 7, 9): -0, +0,
    // -0, +0, -0.
    let d = parts[5].to_scalar::<f64>().unwrap();
    assert_eq!(d.to_bits(), (-0f64).to_bits());
}

#[test]
fn array_results_written_over_their_state() {
    // Each array result is computed straight into its state value where
    // the order allows: updating the first operand (a + v, f + d1), the
    // second (v - b), neither (a select), both (c + c, which cannot), and a
    // result read again after it is computed (d1, which cannot either).
    let text = "HloModule u
body {
  p = (s32[], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  v = f32[4] get-tuple-element(p), index=1
  a = f32[4] get-tuple-element(p), index=2
  e = f32[4] get-tuple-element(p), index=5
  big = pred[4] compare(e, a), direction=GT
  a1 = f32[4] add(a, v)
  b = f32[4] get-tuple-element(p), index=3
  b1 = f32[4] subtract(v, b)
  c = f32[4] get-tuple-element(p), index=4
  c1 = f32[4] add(c, c)
  d1 = f32[4] multiply(v, v)
  e1 = f32[4] select(big, v, c)
  f = f32[4] get-tuple-element(p), index=7
  f1 = f32[4] add(f, d1)
  ROOT o = (s32[], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4]) tuple(i1, v, a1, b1, c1, e1, d1, f1)
}
cond {
  p = (s32[], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(12)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  z = s32[] constant(0)
  v = f32[4] parameter(0)
  x = f32[4] parameter(1)
  init = (s32[], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4]) tuple(z, v, x, x, x, x, x, x)
  ROOT w = (s32[], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4]) while(init), condition=cond, body=body
}
";
    let v = [1.5f32, -2.0, 0.25, 3.0];
    let x = [0.5f32, 1.0, -1.0, 2.0];
    let out = check(text, &[Literal::vec1(&v), Literal::vec1(&x)]);
    let parts = out.tuple_elements().unwrap();
    // The same loop in plain Rust, lane by lane.
    for lane in 0..4 {
        let v = v[lane];
        let [mut a, mut b, mut c, mut d, mut e, mut f] = [x[lane]; 6];
        for _ in 0..12 {
            let big = e > a;
            let d1 = v * v;
            (a, b, c, d, e, f) = (a + v, v - b, c + c, d1, if big { v } else { c }, f + d1);
        }
        let want = [a, b, c, e, d, f];
        for (k, w) in want.iter().enumerate() {
            let got = parts[k + 2].to_vec::<f32>().unwrap()[lane];
            assert_eq!(got.to_bits(), w.to_bits(), "part {} lane {lane}", k + 2);
        }
    }
}

#[test]
fn unrolled_loops_still_stop_at_a_lower_iteration_limit() {
    // Five trips: the passes unroll this loop, but a limit of 3 must still
    // stop it with the interpreter's error; a limit of 5 lets it finish.
    let text = SPEC_WHILE.replace("constant(1000)", "constant(5)");
    let (module, exe) = compile(&text);
    assert!(!exe.describe().contains("while"), "{}", exe.describe());
    let args = [Literal::vec1(&[0f32; 10]), Literal::vec1(&[1f32; 10])];
    for limit in [3, 5] {
        let options = EvalOptions {
            while_iteration_limit: Some(limit),
            ..EvalOptions::default()
        };
        let want = oxla_interp::evaluate(&module, &args, &options, &NoServices);
        let got = exe.execute(&args, &options, &NoServices);
        match (want, got) {
            (Err(w), Err(g)) => {
                assert_eq!(limit, 3);
                assert_eq!(g.to_string(), w.to_string());
            }
            (Ok(w), Ok(g)) => {
                assert_eq!(limit, 5);
                assert!(g.bitwise_eq(&w), "got {g}, want {w}");
                let acc = g.tuple_elements().unwrap()[1].to_vec::<f32>().unwrap();
                assert_eq!(acc, vec![5f32; 10]);
            }
            (w, g) => panic!("limit {limit}: interpreter {w:?}, cpu {g:?}"),
        }
    }
}

/// A loop over `(counter, bound, acc)` of type `ty`: the condition is
/// `cond` (over `i` and `n`), the body steps the counter with `step` and
/// adds `addend` (`i` or `one`) to `acc`.
fn counting_loop(ty: &str, cond: &str, step: &str, addend: &str) -> String {
    format!(
        "HloModule c
body {{
  p = ({ty}[], {ty}[], {ty}[]) parameter(0)
  i = {ty}[] get-tuple-element(p), index=0
  n = {ty}[] get-tuple-element(p), index=1
  acc = {ty}[] get-tuple-element(p), index=2
  s = {ty}[] constant(STEP)
  one = {ty}[] constant(1)
  j = {ty}[] {step}
  a = {ty}[] add(acc, {addend})
  ROOT t = ({ty}[], {ty}[], {ty}[]) tuple(j, n, a)
}}
cond {{
  p = ({ty}[], {ty}[], {ty}[]) parameter(0)
  i = {ty}[] get-tuple-element(p), index=0
  n = {ty}[] get-tuple-element(p), index=1
  ROOT c = pred[] {cond}
}}
ENTRY e {{
  i0 = {ty}[] parameter(0)
  n = {ty}[] parameter(1)
  z = {ty}[] constant(0)
  init = ({ty}[], {ty}[], {ty}[]) tuple(i0, n, z)
  ROOT w = ({ty}[], {ty}[], {ty}[]) while(init), condition=cond, body=body
}}
"
    )
}

#[test]
fn counted_loops_in_every_direction_and_type() {
    // (type, condition, step, step size, start, bound, trips, last counter)
    let cases: [(&str, &str, &str, i64, i64, i64, i64, i64); 6] = [
        (
            "s32",
            "compare(i, n), direction=LT",
            "add(i, s)",
            3,
            -7,
            20,
            9,
            20,
        ),
        // Bounds that the counter reaches exactly.
        (
            "u32",
            "compare(i, n), direction=LE",
            "add(i, s)",
            5,
            0,
            40,
            9,
            45,
        ),
        (
            "s64",
            "compare(i, n), direction=GT",
            "subtract(i, s)",
            4,
            30,
            -3,
            9,
            -6,
        ),
        (
            "u64",
            "compare(i, n), direction=GE",
            "subtract(i, s)",
            7,
            50,
            8,
            7,
            1,
        ),
        // The bound on the left, the step first.
        (
            "s32",
            "compare(n, i), direction=GT",
            "add(s, i)",
            1,
            5,
            12,
            7,
            12,
        ),
        // Past the bound already: no trips.
        (
            "s64",
            "compare(i, n), direction=LT",
            "add(i, s)",
            2,
            9,
            3,
            0,
            9,
        ),
    ];
    for (ty, cond, step, size, start, bound, trips, last) in cases {
        let lit = |v: i64| match ty {
            "s32" => Literal::scalar(v as i32),
            "u32" => Literal::scalar(v as u32),
            "s64" => Literal::scalar(v),
            _ => Literal::scalar(v as u64),
        };
        let get = |l: &Literal| -> i64 {
            match ty {
                "s32" => l.to_scalar::<i32>().unwrap().into(),
                "u32" => l.to_scalar::<u32>().unwrap().into(),
                "s64" => l.to_scalar::<i64>().unwrap(),
                _ => l.to_scalar::<u64>().unwrap() as i64,
            }
        };
        // The body reads the counter (it is stepped each iteration), or
        // only steps it (it is set once, at the end).
        for (addend, listing) in [
            ("i", "small-state loop, counted)"),
            ("one", "small-state loop, counted, counter set at the end)"),
        ] {
            let text = counting_loop(ty, cond, step, addend).replace("STEP", &size.to_string());
            let (_, exe) = compile(&text);
            assert!(exe.describe().contains(listing), "{}", exe.describe());
            let out = check(&text, &[lit(start), lit(bound)]);
            let parts = out.tuple_elements().unwrap();
            assert_eq!(get(&parts[0]), last, "{ty} {cond}");
            let sum: i64 = (0..trips)
                .map(|k| {
                    if addend == "one" {
                        1
                    } else if step.starts_with("subtract") {
                        start - k * size
                    } else {
                        start + k * size
                    }
                })
                .sum();
            assert_eq!(get(&parts[2]), sum, "{ty} {cond} {addend}");
        }
    }
}

#[test]
fn a_counter_that_would_wrap_tests_the_condition_each_time() {
    // From 2^31 - 8 by 4 below 2^31 - 1: the third step wraps to -2^31,
    // still below the bound, so the loop runs on until the limit stops it,
    // as in the interpreter; a trip count of 2 would be wrong.
    let text = counting_loop("s32", "compare(i, n), direction=LT", "add(i, s)", "one")
        .replace("STEP", "4");
    let (module, exe) = compile(&text);
    let options = EvalOptions {
        while_iteration_limit: Some(50),
        ..EvalOptions::default()
    };
    let args = [Literal::scalar(i32::MAX - 7), Literal::scalar(i32::MAX)];
    let want = oxla_interp::evaluate(&module, &args, &options, &NoServices).unwrap_err();
    let got = exe.execute(&args, &options, &NoServices).unwrap_err();
    assert!(matches!(
        want,
        EvalError::WhileIterationLimit { limit: 50, .. }
    ));
    assert_eq!(got.to_string(), want.to_string());
    // Just short of wrapping, the trip count holds: one step, to 2^31 - 4.
    let args = [Literal::scalar(i32::MAX - 7), Literal::scalar(i32::MAX - 3)];
    let out = check(&text, &args);
    let parts = out.tuple_elements().unwrap();
    assert_eq!(parts[0].to_scalar::<i32>().unwrap(), i32::MAX - 3);
    assert_eq!(parts[2].to_scalar::<i32>().unwrap(), 1);
}

/// JAX's `lu_pivots_to_permutation` as `jnp.linalg.solve` and `inv` lower
/// it: row swaps applied to an iota through dynamic-slices and one-element
/// scatters, the swap indices wrapped when negative.
fn pivots_to_permutation(n: usize) -> String {
    "HloModule perm
keep_update {
  a = s32[] parameter(0)
  ROOT b = s32[] parameter(1)
}
swap {
  pivots = s32[@N] parameter(0)
  i = s32[] parameter(1)
  perm = s32[@N] parameter(2)
  one = s32[] constant(1)
  next = s32[] add(i, one)
  zero = s32[] constant(0)
  n = s32[] constant(@N)
  lt = pred[] compare(i, zero), direction=LT
  wrapped = s32[] add(i, n)
  at = s32[] select(lt, wrapped, i)
  at1 = s32[1] reshape(at)
  pd = s32[1] dynamic-slice(pivots, at), dynamic_slice_sizes={1}
  p = s32[] reshape(pd)
  plt = pred[] compare(p, zero), direction=LT
  pw = s32[] add(p, n)
  pat = s32[] select(plt, pw, p)
  vd = s32[1] dynamic-slice(perm, pat), dynamic_slice_sizes={1}
  v = s32[] reshape(vd)
  s1 = s32[@N] scatter(perm, at1, v), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=0, indices_are_sorted=true, unique_indices=true, to_apply=keep_update
  pat1 = s32[1] reshape(pat)
  ud = s32[1] dynamic-slice(perm, at), dynamic_slice_sizes={1}
  u = s32[] reshape(ud)
  s2 = s32[@N] scatter(s1, pat1, u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=0, indices_are_sorted=true, unique_indices=true, to_apply=keep_update
  ROOT t = (s32[], s32[@N]) tuple(next, s2)
}
body {
  p = (s32[], s32[], s32[@N], s32[@N]) parameter(0)
  k = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  k1 = s32[] add(k, one)
  pivots = s32[@N] get-tuple-element(p), index=3
  i = s32[] get-tuple-element(p), index=1
  perm = s32[@N] get-tuple-element(p), index=2
  c = (s32[], s32[@N]) call(pivots, i, perm), to_apply=swap
  i1 = s32[] get-tuple-element(c), index=0
  perm1 = s32[@N] get-tuple-element(c), index=1
  ROOT t = (s32[], s32[], s32[@N], s32[@N]) tuple(k1, i1, perm1, pivots)
}
cond {
  p = (s32[], s32[], s32[@N], s32[@N]) parameter(0)
  k = s32[] get-tuple-element(p), index=0
  n = s32[] constant(@N)
  ROOT lt = pred[] compare(k, n), direction=LT
}
ENTRY e {
  pivots = s32[@N] parameter(0)
  zero = s32[] constant(0)
  iota = s32[@N] iota(), iota_dimension=0
  init = (s32[], s32[], s32[@N], s32[@N]) tuple(zero, zero, iota, pivots)
  w = (s32[], s32[], s32[@N], s32[@N]) while(init), condition=cond, body=body
  ROOT perm = s32[@N] get-tuple-element(w), index=2
}
"
    .replace("@N", &n.to_string())
}

#[test]
fn pivots_become_a_permutation_through_dynamic_slices_and_scatters() {
    // LAPACK-style pivots (row i swapped with row pivots[i]), one given
    // negatively (-1 is the last row), as JAX wraps them.
    // Twelve rows: more trips than the passes unroll.
    let pivots = [3i32, 1, 7, 3, -1, 6, 6, 7, 11, -2, 10, 11];
    let mut want: Vec<i32> = (0..12).collect();
    for (i, &p) in pivots.iter().enumerate() {
        let p = if p < 0 { p + 12 } else { p } as usize;
        want.swap(i, p);
    }
    let got = check(&pivots_to_permutation(12), &[Literal::vec1(&pivots)]);
    assert_eq!(got.to_vec::<i32>().unwrap(), want);
    assert_eq!(want, vec![3, 1, 7, 0, 11, 6, 5, 2, 4, 10, 9, 8]);
}

#[test]
fn dynamic_slices_and_updates_clamp_their_starts_in_every_index_type() {
    // Per iteration i of 12 (more than the passes unroll): a 2x2 window of x at (i - 1, 2i - 3) (s32
    // starts, clamped at both ends) adds into acc and, plus one, goes back
    // into x at (i, 3i - 4) (u32 starts: negative ones wrap to huge and
    // clamp to the last column); a 1x3 window at (i, i) with s16 starts and
    // a 2x1 window at (i, i) from the seed's start vector add up too.
    let text = "HloModule ds
body {
  p = (s32[], f32[4,5], f32[2,2], f32[1,3], f32[2,1]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[4,5] get-tuple-element(p), index=1
  acc = f32[2,2] get-tuple-element(p), index=2
  one = s32[] constant(1)
  two = s32[] constant(2)
  three = s32[] constant(3)
  four = s32[] constant(4)
  r0 = s32[] subtract(i, one)
  c0 = s32[] multiply(i, two)
  c1 = s32[] subtract(c0, three)
  w = f32[2,2] dynamic-slice(x, r0, c1), dynamic_slice_sizes={2,2}
  acc1 = f32[2,2] add(acc, w)
  onef = f32[] constant(1)
  ones = f32[2,2] broadcast(onef), dimensions={}
  w1 = f32[2,2] add(w, ones)
  c3 = s32[] multiply(i, three)
  c4 = s32[] subtract(c3, four)
  ur = u32[] convert(i)
  uc = u32[] convert(c4)
  x1 = f32[4,5] dynamic-update-slice(x, w1, ur, uc)
  h = s16[] convert(i)
  v = f32[1,3] dynamic-slice(x, h, h), dynamic_slice_sizes={1,3}
  acc2 = f32[1,3] get-tuple-element(p), index=3
  acc21 = f32[1,3] add(acc2, v)
  sv = s32[2] broadcast(i), dimensions={}
  z = f32[2,1] dynamic-slice(x, sv), dynamic_slice_sizes={2,1}
  acc3 = f32[2,1] get-tuple-element(p), index=4
  acc31 = f32[2,1] add(acc3, z)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[4,5], f32[2,2], f32[1,3], f32[2,1]) tuple(i1, x1, acc1, acc21, acc31)
}
cond {
  p = (s32[], f32[4,5], f32[2,2], f32[1,3], f32[2,1]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(12)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  z = s32[] constant(0)
  x = f32[4,5] parameter(0)
  a = f32[2,2] constant({{0, 0}, {0, 0}})
  b = f32[1,3] constant({{0, 0, 0}})
  c = f32[2,1] constant({{0}, {0}})
  init = (s32[], f32[4,5], f32[2,2], f32[1,3], f32[2,1]) tuple(z, x, a, b, c)
  ROOT w = (s32[], f32[4,5], f32[2,2], f32[1,3], f32[2,1]) while(init), condition=cond, body=body
}
";
    let x0: Vec<f32> = (0..20).map(|v| v as f32).collect();
    let got = check(text, &[Literal::from_vec(&[4, 5], x0.clone()).unwrap()]);
    // The same loop, directly.
    let (mut x, mut acc, mut acc2, mut acc3) = (x0, [0f32; 4], [0f32; 3], [0f32; 2]);
    let clamp = |s: i64, dim: i64, size: i64| s.clamp(0, dim - size) as usize;
    for i in 0..12i64 {
        let (r, c) = (clamp(i - 1, 4, 2), clamp(2 * i - 3, 5, 2));
        let w: Vec<f32> = (0..4).map(|k| x[(r + k / 2) * 5 + c + k % 2]).collect();
        let (ur, uc) = (
            clamp(i, 4, 2),
            clamp(i64::from((3 * i - 4) as i32 as u32), 5, 2),
        );
        let (h, s) = (clamp(i, 4, 1), clamp(i, 5, 3));
        let v: Vec<f32> = (0..3).map(|k| x[h * 5 + s + k]).collect();
        let (zr, zc) = (clamp(i, 4, 2), clamp(i, 5, 1));
        let z: Vec<f32> = (0..2).map(|k| x[(zr + k) * 5 + zc]).collect();
        for k in 0..4 {
            acc[k] += w[k];
            x[(ur + k / 2) * 5 + uc + k % 2] = w[k] + 1.0;
        }
        (0..3).for_each(|k| acc2[k] += v[k]);
        (0..2).for_each(|k| acc3[k] += z[k]);
    }
    let parts = got.tuple_elements().unwrap();
    assert_eq!(parts[0].to_scalar::<i32>().unwrap(), 12);
    assert_eq!(parts[1].to_vec::<f32>().unwrap(), x);
    assert_eq!(parts[2].to_vec::<f32>().unwrap(), acc);
    assert_eq!(parts[3].to_vec::<f32>().unwrap(), acc2);
    assert_eq!(parts[4].to_vec::<f32>().unwrap(), acc3);
}

#[test]
fn scatters_combine_and_skip_windows_out_of_bounds() {
    // Per iteration i of 11 (more than the passes unroll): i + 1 is added into hist at (5i mod 8) - 1 (out
    // of bounds, so skipped, at -1 and 6), and the row [i, -i, 2i] is
    // combined by maximum into rows of m at i - 1 (skipped at -1 and from 4).
    let text = "HloModule sc
add {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
body {
  p = (s32[], s32[6], f32[4,3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  hist = s32[6] get-tuple-element(p), index=1
  m = f32[4,3] get-tuple-element(p), index=2
  one = s32[] constant(1)
  five = s32[] constant(5)
  eight = s32[] constant(8)
  f = s32[] multiply(i, five)
  g = s32[] remainder(f, eight)
  at = s32[] subtract(g, one)
  at1 = s32[1] reshape(at)
  i1 = s32[] add(i, one)
  hist1 = s32[6] scatter(hist, at1, i1), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=0, to_apply=add
  row = s32[] subtract(i, one)
  row1 = s32[1] reshape(row)
  fi = f32[] convert(i)
  neg = f32[] negate(fi)
  dbl = f32[] add(fi, fi)
  a = f32[1,1] reshape(fi)
  b = f32[1,1] reshape(neg)
  c = f32[1,1] reshape(dbl)
  u = f32[1,3] concatenate(a, b, c), dimensions={1}
  m1 = f32[4,3] scatter(m, row1, u), update_window_dims={0,1}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=0, to_apply=max
  ROOT t = (s32[], s32[6], f32[4,3]) tuple(i1, hist1, m1)
}
cond {
  p = (s32[], s32[6], f32[4,3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(11)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  z = s32[] constant(0)
  h = s32[6] constant({0, 0, 0, 0, 0, 0})
  m = f32[4,3] constant({{0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}})
  init = (s32[], s32[6], f32[4,3]) tuple(z, h, m)
  ROOT w = (s32[], s32[6], f32[4,3]) while(init), condition=cond, body=body
}
";
    let (module, exe) = compile(text);
    // The concatenate is not an operation of the register program: this
    // loop takes the general path, and the same scatters run natively there.
    let general = exe.describe();
    let options = EvalOptions::default();
    let want = oxla_interp::evaluate(&module, &[], &options, &NoServices).unwrap();
    let got = exe.execute(&[], &options, &NoServices).unwrap();
    assert!(got.bitwise_eq(&want), "{general}");
    // Without the concatenate (the row's three values from an iota times
    // [1, -1, 2]), the loop is compiled whole.
    let whole = text.replace(
        "  u = f32[1,3] concatenate(a, b, c), dimensions={1}",
        "  k = f32[1,3] constant({{1, -1, 2}})
  fb = f32[1,3] broadcast(fi), dimensions={}
  u = f32[1,3] multiply(fb, k)",
    );
    let got = check(&whole, &[]);
    let mut hist = [0i32; 6];
    let mut m = [0f32; 12];
    for i in 0..11i32 {
        let at = (5 * i) % 8 - 1;
        if (0..6).contains(&at) {
            hist[at as usize] += i + 1;
        }
        let row = i - 1;
        if (0..4).contains(&row) {
            let u = [i as f32, -(i as f32), 2.0 * i as f32];
            for k in 0..3 {
                let x = &mut m[row as usize * 3 + k];
                *x = x.max(u[k]);
            }
        }
    }
    let parts = got.tuple_elements().unwrap();
    assert_eq!(parts[1].to_vec::<i32>().unwrap(), hist);
    assert_eq!(parts[2].to_vec::<f32>().unwrap(), m);
    assert_eq!(hist, [6, 14, 8, 5, 12, 7]);
}

/// JAX's `fori_loop` writing row `i` of its output from row `i` of its
/// input (the `scan` pattern): large state arrays that the loop only
/// slices and updates a row at a time.
const ROWS_LOOP: &str = "HloModule r
body {
  p = (s32[], f32[1000,64], f32[1000,64]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  xs = f32[1000,64] get-tuple-element(p), index=1
  ys = f32[1000,64] get-tuple-element(p), index=2
  z = s32[] constant(0)
  x = f32[1,64] dynamic-slice(xs, i, z), dynamic_slice_sizes={1,64}
  two = f32[] constant(2)
  t = f32[1,64] broadcast(two), dimensions={}
  y = f32[1,64] multiply(x, t)
  u = f32[1000,64] dynamic-update-slice(ys, y, i, z)
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT o = (s32[], f32[1000,64], f32[1000,64]) tuple(j, xs, u)
}
cond {
  p = (s32[], f32[1000,64], f32[1000,64]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(1000)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  z = s32[] constant(0)
  xs = f32[1000,64] parameter(0)
  zero = f32[] constant(0)
  ys = f32[1000,64] broadcast(zero), dimensions={}
  init = (s32[], f32[1000,64], f32[1000,64]) tuple(z, xs, ys)
  w = (s32[], f32[1000,64], f32[1000,64]) while(init), condition=cond, body=body
  ROOT r = f32[1000,64] get-tuple-element(w), index=2
}
";

fn rows_input() -> Literal {
    let xs: Vec<f32> = (0..64_000).map(|k| (k % 997) as f32 - 400.5).collect();
    Literal::from_vec(&[1000, 64], xs).unwrap()
}

#[test]
fn large_states_sliced_and_updated_in_place_stay_in_the_loop() {
    let xs = rows_input();
    let got = check(ROWS_LOOP, std::slice::from_ref(&xs));
    let want: Vec<f32> = xs
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|v| v * 2.0)
        .collect();
    assert_eq!(got.to_vec::<f32>().unwrap(), want);
    // A scatter-add into a large state, one element an iteration, in place.
    let scatter = "HloModule s
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
body {
  p = (s32[], f32[8192]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  acc = f32[8192] get-tuple-element(p), index=1
  m = s32[] constant(8192)
  k = s32[] remainder(i, m)
  idx = s32[1] reshape(k)
  f = f32[] convert(i)
  s = f32[8192] scatter(acc, idx, f), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=0, to_apply=add
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT o = (s32[], f32[8192]) tuple(j, s)
}
cond {
  p = (s32[], f32[8192]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(20000)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  z = s32[] constant(0)
  a = f32[8192] parameter(0)
  init = (s32[], f32[8192]) tuple(z, a)
  w = (s32[], f32[8192]) while(init), condition=cond, body=body
  ROOT r = f32[8192] get-tuple-element(w), index=1
}
";
    let a = Literal::from_vec(&[8192], vec![0.5f32; 8192]).unwrap();
    let got = check(scatter, &[a]).to_vec::<f32>().unwrap();
    // Element k gains k, k + 8192 and (below 20000 - 16384) k + 16384.
    for k in [0usize, 1, 3615, 3616, 8191] {
        let mut want = 0.5f32 + k as f32 + (k + 8192) as f32;
        if k + 16384 < 20000 {
            want += (k + 16384) as f32;
        }
        assert_eq!(got[k], want, "element {k}");
    }
}

#[test]
fn a_state_array_read_again_after_the_loop_is_not_updated_under_its_reader() {
    // `ys` (x * x) enters the loop as state, which the loop updates in
    // place (row i becomes 2 * x), and the entry reads it again afterwards:
    // the loop must work on its own copy, not on the buffer its later
    // reader holds.
    let text = ROWS_LOOP
        .replace(
            "  ys = f32[1000,64] broadcast(zero), dimensions={}",
            "  ys = f32[1000,64] multiply(xs, xs)",
        )
        .replace(
            "  ROOT r = f32[1000,64] get-tuple-element(w), index=2",
            "  r = f32[1000,64] get-tuple-element(w), index=2\n  ROOT d = f32[1000,64] subtract(r, ys)",
        );
    assert!(text.contains("subtract(r, ys)") && text.contains("multiply(xs, xs)"));
    let xs = rows_input();
    let x = xs.to_vec::<f32>().unwrap();
    for (trips, rows) in [("1000", 1000), ("500", 500)] {
        let text = text.replace(
            "n = s32[] constant(1000)",
            &format!("n = s32[] constant({trips})"),
        );
        let got = check(&text, std::slice::from_ref(&xs))
            .to_vec::<f32>()
            .unwrap();
        for (k, (&g, &v)) in got.iter().zip(&x).enumerate() {
            let want = if k / 64 < rows { 2.0 * v - v * v } else { 0.0 };
            assert_eq!(g, want, "{trips} trips: element {k}");
        }
    }
}

#[test]
fn large_states_read_after_their_update_take_the_general_path() {
    // The body returns the old rows as well as the updated ones: no update
    // in place, so no copy per iteration in the register program either.
    let both = ROWS_LOOP
        .replace(
            "ROOT o = (s32[], f32[1000,64], f32[1000,64]) tuple(j, xs, u)",
            "ROOT o = (s32[], f32[1000,64], f32[1000,64]) tuple(j, ys, u)",
        )
        .replace("y = f32[1,64] multiply(x, t)", "y = f32[1,64] add(x, t)");
    let (module, exe) = compile(&both);
    assert!(!exe.describe().contains("small-state loop"));
    let xs = rows_input();
    let options = EvalOptions::default();
    let want =
        oxla_interp::evaluate(&module, std::slice::from_ref(&xs), &options, &NoServices).unwrap();
    let got = exe.execute(&[xs], &options, &NoServices).unwrap();
    assert!(got.bitwise_eq(&want));
    // The same loop in plain Rust.
    let (mut a, mut b) = (rows_input().to_vec::<f32>().unwrap(), vec![0f32; 64_000]);
    for i in 0..1000 {
        let mut u = b.clone();
        for c in 0..64 {
            u[i * 64 + c] = a[i * 64 + c] + 2.0;
        }
        (a, b) = (b, u);
    }
    assert_eq!(got.to_vec::<f32>().unwrap(), b);
}

/// The body of a rows loop (`ROWS_LOOP`'s state) with `lines` in place of
/// its slice, arithmetic and update.
fn rows_variant(lines: &str, result: &str) -> String {
    ROWS_LOOP
        .replace(
            "  x = f32[1,64] dynamic-slice(xs, i, z), dynamic_slice_sizes={1,64}
  two = f32[] constant(2)
  t = f32[1,64] broadcast(two), dimensions={}
  y = f32[1,64] multiply(x, t)
  u = f32[1000,64] dynamic-update-slice(ys, y, i, z)
",
            lines,
        )
        .replace(
            "ROOT o = (s32[], f32[1000,64], f32[1000,64]) tuple(j, xs, u)",
            result,
        )
}

#[test]
fn blocks_are_read_and_written_in_place_by_the_arithmetic_between() {
    let xs = rows_input();
    let x = xs.to_vec::<f32>().unwrap();
    // `ys[i] = xs[i] * 2`: the caller's `xs` is borrowed, not copied in,
    // and the slice, the multiply and the update become one operation.
    let (_, exe) = compile(ROWS_LOOP);
    assert!(
        exe.describe().contains("1 borrowed, 1 windowed)"),
        "{}",
        exe.describe()
    );
    let got = check(ROWS_LOOP, std::slice::from_ref(&xs));
    let want: Vec<f32> = x.iter().map(|v| v * 2.0).collect();
    assert_eq!(got.to_vec::<f32>().unwrap(), want);
    // The borrowed array, returned as it came.
    let whole = ROWS_LOOP.replace(
        "ROOT r = f32[1000,64] get-tuple-element(w), index=2",
        "ROOT r = (s32[], f32[1000,64], f32[1000,64]) copy(w)",
    );
    let got = check(&whole, std::slice::from_ref(&xs));
    let parts = got.tuple_elements().unwrap();
    assert_eq!(parts[1].to_vec::<f32>().unwrap(), x);
    assert_eq!(parts[2].to_vec::<f32>().unwrap(), want);
    assert_eq!(xs.to_vec::<f32>().unwrap(), x, "the argument changed");

    // The updated array's row i - 1, read between the multiply and the
    // update: the update stays where it was, both slices move into the
    // arithmetic that reads them.
    let text = rows_variant(
        "  x = f32[1,64] dynamic-slice(xs, i, z), dynamic_slice_sizes={1,64}
  two = f32[] constant(2)
  t = f32[1,64] broadcast(two), dimensions={}
  y = f32[1,64] multiply(x, t)
  m = s32[] constant(1)
  k = s32[] subtract(i, m)
  old = f32[1,64] dynamic-slice(ys, k, z), dynamic_slice_sizes={1,64}
  y2 = f32[1,64] add(y, old)
  u = f32[1000,64] dynamic-update-slice(ys, y2, i, z)
",
        "ROOT o = (s32[], f32[1000,64], f32[1000,64]) tuple(j, xs, u)",
    );
    let (_, exe) = compile(&text);
    assert!(
        exe.describe().contains("1 borrowed, 2 windowed)"),
        "{}",
        exe.describe()
    );
    let got = check(&text, std::slice::from_ref(&xs))
        .to_vec::<f32>()
        .unwrap();
    // Row i is 2 x[i] + row i - 1 (row 0: 2 x[0] + row 0 of the zeros).
    let mut want = vec![0f32; 64_000];
    for i in 0..1000 {
        for c in 0..64 {
            let prev = want[i.max(1) * 64 - 64 + c] * f32::from(u8::from(i > 0));
            want[i * 64 + c] = 2.0 * x[i * 64 + c] + prev;
        }
    }
    assert_eq!(got, want);

    // A slice of the array the arithmetic's result updates: the slice
    // moves in, the update does not (rows double down the array).
    let text = rows_variant(
        "  m = s32[] constant(1)
  k = s32[] subtract(i, m)
  x = f32[1,64] dynamic-slice(ys, k, z), dynamic_slice_sizes={1,64}
  two = f32[] constant(2)
  t = f32[1,64] broadcast(two), dimensions={}
  y = f32[1,64] multiply(x, t)
  u = f32[1000,64] dynamic-update-slice(ys, y, i, z)
",
        "ROOT o = (s32[], f32[1000,64], f32[1000,64]) tuple(j, xs, u)",
    )
    .replace(
        "ys = f32[1000,64] broadcast(zero), dimensions={}",
        "ys = f32[1000,64] copy(xs)",
    )
    .replace("n = s32[] constant(1000)", "n = s32[] constant(20)");
    let (_, exe) = compile(&text);
    assert!(
        exe.describe().contains(", 1 windowed)"),
        "{}",
        exe.describe()
    );
    let got = check(&text, std::slice::from_ref(&xs))
        .to_vec::<f32>()
        .unwrap();
    let mut want = x.clone();
    for i in 0..20 {
        for c in 0..64 {
            want[i * 64 + c] = 2.0 * want[i.max(1) * 64 - 64 + c];
        }
    }
    assert_eq!(got, want);

    // What stays as it was: a slice read twice, and a column (not one run
    // of elements) at s64 and u32 starts that clamp.
    let twice = rows_variant(
        "  x = f32[1,64] dynamic-slice(xs, i, z), dynamic_slice_sizes={1,64}
  y = f32[1,64] multiply(x, x)
  u = f32[1000,64] dynamic-update-slice(ys, y, i, z)
",
        "ROOT o = (s32[], f32[1000,64], f32[1000,64]) tuple(j, xs, u)",
    );
    let column = rows_variant(
        "  w = s64[] convert(i)
  zl = s64[] constant(-5)
  col = f32[1000,1] dynamic-slice(xs, zl, w), dynamic_slice_sizes={1000,1}
  col2 = f32[1000,1] add(col, col)
  c = u32[] convert(i)
  zu = u32[] constant(0)
  u = f32[1000,64] dynamic-update-slice(ys, col2, zu, c)
",
        "ROOT o = (s32[], f32[1000,64], f32[1000,64]) tuple(j, xs, u)",
    )
    .replace("n = s32[] constant(1000)", "n = s32[] constant(70)");
    for text in [&twice, &column] {
        let (_, exe) = compile(text);
        assert!(!exe.describe().contains("windowed"), "{}", exe.describe());
    }
    let got = check(&twice, std::slice::from_ref(&xs))
        .to_vec::<f32>()
        .unwrap();
    let want: Vec<f32> = x.iter().map(|v| v * v).collect();
    assert_eq!(got, want);
    let got = check(&column, std::slice::from_ref(&xs))
        .to_vec::<f32>()
        .unwrap();
    let mut want = vec![0f32; 64_000];
    for i in 0..70 {
        let col = i.min(63);
        for r in 0..1000 {
            want[r * 64 + col] = x[r * 64 + col] + x[r * 64 + col];
        }
    }
    assert_eq!(got, want);
}
