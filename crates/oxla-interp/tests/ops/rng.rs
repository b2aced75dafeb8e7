//! `rng` statistics and determinism; `rng-bit-generator` known values.

use oxla_hlo::Literal;
use oxla_interp::{EvalOptions, NoServices};

use crate::common::{assert_bits, eval, lit, op_module, try_eval_with};

fn draw(out: &str, distribution: &str, a: (&str, &str), b: (&str, &str), seed: u64) -> Literal {
    let text = op_module(
        out,
        "rng",
        &format!("distribution={distribution}"),
        &[a.0, b.0],
        "",
    );
    try_eval_with(
        &text,
        &[lit(a.0, a.1), lit(b.0, b.1)],
        &EvalOptions::with_seed(seed),
        &NoServices,
    )
    .unwrap()
}

fn mean_var(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    (
        mean,
        v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n,
    )
}

#[test]
fn uniform_floats_have_the_right_moments_and_range() {
    let out = draw(
        "f32[100000]",
        "rng_uniform",
        ("f32[]", "-1"),
        ("f32[]", "3"),
        7,
    );
    let v: Vec<f64> = out
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|&x| x as f64)
        .collect();
    assert!(v.iter().all(|&x| (-1.0..3.0).contains(&x)));
    let (mean, var) = mean_var(&v);
    assert!((mean - 1.0).abs() < 0.02, "mean {mean}");
    assert!((var - 16.0 / 12.0).abs() < 0.02, "variance {var}");
    let half = draw(
        "bf16[1000]",
        "rng_uniform",
        ("bf16[]", "0"),
        ("bf16[]", "1"),
        7,
    );
    assert!(
        half.to_vec::<half::bf16>()
            .unwrap()
            .iter()
            .all(|x| (0.0..1.0).contains(&x.to_f32()))
    );
}

#[test]
fn normal_floats_have_the_right_moments() {
    let out = draw(
        "f64[100000]",
        "rng_normal",
        ("f64[]", "2"),
        ("f64[]", "0.5"),
        11,
    );
    let (mean, var) = mean_var(&out.to_vec::<f64>().unwrap());
    assert!((mean - 2.0).abs() < 0.01, "mean {mean}");
    assert!((var - 0.25).abs() < 0.01, "variance {var}");
}

#[test]
fn uniform_integers_cover_the_half_open_range() {
    let out = draw(
        "s32[100000]",
        "rng_uniform",
        ("s32[]", "-3"),
        ("s32[]", "5"),
        3,
    );
    let v = out.to_vec::<i32>().unwrap();
    assert!(v.iter().all(|x| (-3..5).contains(x)));
    for k in -3..5 {
        let count = v.iter().filter(|&&x| x == k).count();
        assert!(
            (count as f64 - 12500.0).abs() < 600.0,
            "{k} drawn {count} times"
        );
    }
    let (mean, _) = mean_var(&v.iter().map(|&x| x as f64).collect::<Vec<_>>());
    assert!((mean - 0.5).abs() < 0.05);
    let wide = draw(
        "u64[1000]",
        "rng_uniform",
        ("u64[]", "0"),
        ("u64[]", "18446744073709551615"),
        3,
    );
    assert!(wide.to_vec::<u64>().unwrap().iter().any(|&x| x > 1 << 63));
}

#[test]
fn rng_is_deterministic_per_seed() {
    let a = draw("f32[64]", "rng_uniform", ("f32[]", "0"), ("f32[]", "1"), 42);
    let b = draw("f32[64]", "rng_uniform", ("f32[]", "0"), ("f32[]", "1"), 42);
    let c = draw("f32[64]", "rng_uniform", ("f32[]", "0"), ("f32[]", "1"), 43);
    assert_bits(&a, &b);
    assert!(!a.bitwise_eq(&c));
    // Two rng instructions in one module draw different values.
    let text = "HloModule t\nENTRY e {\n  a = f32[] constant(0)\n  b = f32[] constant(1)\n  x = f32[8] rng(a, b), distribution=rng_uniform\n  y = f32[8] rng(a, b), distribution=rng_uniform\n  ROOT t = (f32[8], f32[8]) tuple(x, y)\n}\n";
    let out = eval(text, &[]);
    let parts = out.tuple_elements().unwrap();
    assert!(!parts[0].bitwise_eq(&parts[1]));
}

#[test]
fn empty_or_reversed_ranges_do_not_panic() {
    let out = draw("s32[4]", "rng_uniform", ("s32[]", "5"), ("s32[]", "5"), 1);
    assert_bits(&out, &lit("s32[4]", "{5, 5, 5, 5}"));
    let out = draw("s32[4]", "rng_uniform", ("s32[]", "5"), ("s32[]", "-5"), 1);
    assert_eq!(out.to_vec::<i32>().unwrap().len(), 4);
    let out = draw("f32[4]", "rng_uniform", ("f32[]", "2"), ("f32[]", "1"), 1);
    assert!(
        out.to_vec::<f32>()
            .unwrap()
            .iter()
            .all(|x| (1.0..=2.0).contains(x))
    );
    let out = draw(
        "pred[4]",
        "rng_uniform",
        ("pred[]", "false"),
        ("pred[]", "true"),
        1,
    );
    assert_bits(&out, &lit("pred[4]", "{false, false, false, false}"));
}

fn bit_generator(algorithm: &str, state: &str, bits: &str) -> String {
    format!(
        "HloModule t\nENTRY e {{\n  s = {state} parameter(0)\n  ROOT r = ({state}, {bits}) rng-bit-generator(s), algorithm={algorithm}\n}}\n"
    )
}

#[test]
fn three_fry_matches_the_stablehlo_spec_example() {
    let out = eval(
        &bit_generator("rng_three_fry", "u64[2]", "u64[2,2]"),
        &[lit("u64[2]", "{1, 2}")],
    );
    let expected = lit(
        "(u64[2], u64[2,2])",
        "({1, 6}, {{9236835810183407956, 16087790271692313299}, {18212823393184779219, 2658481902456610144}})",
    );
    assert_bits(&out, &expected);
}

#[test]
fn philox_advances_the_counter_per_block() {
    // 15 u32 values use 4 blocks of four words.
    let out = eval(
        &bit_generator("rng_philox", "u64[2]", "u32[15]"),
        &[lit("u64[2]", "{8589934593, 17179869187}")],
    );
    let state = out.tuple_elements().unwrap()[0].to_vec::<u64>().unwrap();
    assert_eq!(state, vec![8589934593, 17179869191]);
    // The default algorithm is Philox.
    let default = eval(
        &bit_generator("rng_default", "u64[2]", "u32[15]"),
        &[lit("u64[2]", "{8589934593, 17179869187}")],
    );
    assert_bits(&default, &out);
    // A u64[3] state carries the counter's high word.
    let three = eval(
        &bit_generator("rng_philox", "u64[3]", "u64[3]"),
        &[lit("u64[3]", "{7, 18446744073709551615, 5}")],
    );
    assert_eq!(
        three.tuple_elements().unwrap()[0].to_vec::<u64>().unwrap(),
        vec![7, 1, 6]
    );
}
