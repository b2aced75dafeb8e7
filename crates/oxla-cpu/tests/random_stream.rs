//! The stateful `rng` on the CPU backend against the interpreter, byte for
//! byte: both draw from the execution's stream (keyed by the seed), so a
//! module gives the same values on either backend, whatever the element
//! type, distribution, size (one thread or split across the pool) and the
//! order of earlier draws that leave the stream partway through a block.

use oxla_hlo::{Literal, PrimitiveType, Scalar};
use oxla_interp::{EvalOptions, NoServices};

/// Runs `text` on both backends with `args` and seed `seed` (the CPU
/// twice, handing the first result back) and requires the same bytes;
/// every `rng` must run natively.
fn check(text: &str, args: &[Literal], seed: u64) {
    let module = oxla_text::parse_module(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let options = EvalOptions {
        seed,
        ..EvalOptions::default()
    };
    let want = oxla_interp::evaluate(&module, args, &options, &NoServices).unwrap();
    let exe = oxla_cpu::compile(&module).unwrap();
    let listing = exe.describe();
    assert!(
        listing.contains("= rng (") && !listing.contains("interpreted"),
        "not native:\n{listing}"
    );
    for run in 0..2 {
        let got = exe.execute(args, &options, &NoServices).unwrap();
        assert!(
            bytes(&got) == bytes(&want),
            "run {run}, seed {seed}: differs\n{text}"
        );
        exe.recycle(got);
    }
}

fn bytes(l: &Literal) -> Vec<Vec<u8>> {
    match l {
        Literal::Tuple(parts) => parts.iter().flat_map(bytes).collect(),
        Literal::Array(a) => vec![a.to_bytes()],
        Literal::Token => Vec::new(),
    }
}

/// A scalar of type `ty` holding `v`.
fn scalar(ty: PrimitiveType, v: Scalar) -> Literal {
    let shape = oxla_hlo::ArrayShape::new(ty, []).unwrap();
    Literal::splat(&shape, v).unwrap()
}

/// One `rng` of `ty[dims]` with parameter bounds.
fn one(ty: &str, dims: &str, distribution: &str) -> String {
    format!(
        "HloModule r\nENTRY e {{\n  a = {ty}[] parameter(0)\n  b = {ty}[] parameter(1)\n  ROOT r = {ty}[{dims}] rng(a, b), distribution={distribution}\n}}\n"
    )
}

#[test]
fn uniform_and_normal_floats_of_every_width_and_size() {
    use PrimitiveType::*;
    for (ty, name) in [(F32, "f32"), (F64, "f64"), (F16, "f16"), (BF16, "bf16")] {
        for dims in ["", "1", "7", "1000", "300,1001"] {
            for seed in [0, 0xdead_beef_0123_4567] {
                // [0, 1) rounds onto 1 now and then in the half types,
                // which then give the low bound.
                let bounds = [
                    scalar(ty, Scalar::Float(0.0)),
                    scalar(ty, Scalar::Float(1.0)),
                ];
                check(&one(name, dims, "rng_uniform"), &bounds, seed);
                let bounds = [
                    scalar(ty, Scalar::Float(-3.5)),
                    scalar(ty, Scalar::Float(2.0)),
                ];
                check(&one(name, dims, "rng_uniform"), &bounds, seed);
                let bounds = [
                    scalar(ty, Scalar::Float(1.5)),
                    scalar(ty, Scalar::Float(0.25)),
                ];
                check(&one(name, dims, "rng_normal"), &bounds, seed);
            }
        }
    }
    // An empty interval, reversed bounds and an empty array.
    let bounds = [
        scalar(F32, Scalar::Float(2.0)),
        scalar(F32, Scalar::Float(2.0)),
    ];
    check(&one("f32", "5000", "rng_uniform"), &bounds, 3);
    let bounds = [
        scalar(F32, Scalar::Float(2.0)),
        scalar(F32, Scalar::Float(-1.0)),
    ];
    check(&one("f32", "5000", "rng_uniform"), &bounds, 3);
    check(&one("f32", "0,40", "rng_normal"), &bounds, 3);
}

#[test]
fn uniform_integers_and_predicates() {
    use PrimitiveType::*;
    let cases: [(PrimitiveType, &str, i128, i128); 9] = [
        (S32, "s32", -5, 17),
        (S32, "s32", i32::MIN as i128, i32::MAX as i128),
        (S64, "s64", i64::MIN as i128, i64::MAX as i128),
        (U8, "u8", 3, 250),
        (U16, "u16", 0, 2),
        (U64, "u64", 10, u64::MAX as i128),
        (S8, "s8", -128, 127),
        // An empty range: no words drawn, every element the low end.
        (S32, "s32", 9, 9),
        (S16, "s16", 9, -4),
    ];
    for (ty, name, lo, hi) in cases {
        for dims in ["", "13", "200,1000"] {
            let bounds = [scalar(ty, Scalar::Int(lo)), scalar(ty, Scalar::Int(hi))];
            check(&one(name, dims, "rng_uniform"), &bounds, 11);
        }
    }
    let bounds = [
        scalar(Pred, Scalar::Pred(false)),
        scalar(Pred, Scalar::Pred(true)),
    ];
    check(&one("pred", "3000", "rng_uniform"), &bounds, 11);
}

/// Draws of 2, 4 and no words an element in one execution, leaving the
/// stream partway through a block for the next, some in a loop.
#[test]
fn successive_draws_continue_the_stream() {
    let text = "HloModule r\n\
        body {\n  p = (s32[], f32[3]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n  one = s32[] constant(1)\n  j = s32[] add(i, one)\n  lo = f32[] constant(0)\n  hi = f32[] constant(1)\n  u = f32[3] rng(lo, hi), distribution=rng_uniform\n  acc = f32[3] get-tuple-element(p), index=1\n  s = f32[3] add(acc, u)\n  ROOT t = (s32[], f32[3]) tuple(j, s)\n}\n\
        cond {\n  p = (s32[], f32[3]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n  n = s32[] constant(5)\n  ROOT c = pred[] compare(i, n), direction=LT\n}\n\
        ENTRY e {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n\
        u1 = f32[3] rng(a, b), distribution=rng_uniform\n\
        g1 = f32[5] rng(a, b), distribution=rng_normal\n\
        lo = s32[] constant(4)\n  e = s32[7] rng(lo, lo), distribution=rng_uniform\n\
        hi = s32[] constant(1000)\n  k = s32[9] rng(lo, hi), distribution=rng_uniform\n\
        u2 = f32[200000] rng(a, b), distribution=rng_uniform\n\
        z = s32[] constant(0)\n  zf = f32[] constant(0)\n  zs = f32[3] broadcast(zf), dimensions={}\n\
        init = (s32[], f32[3]) tuple(z, zs)\n\
        w = (s32[], f32[3]) while(init), condition=cond, body=body\n\
        g2 = f32[131073] rng(a, b), distribution=rng_normal\n\
        ROOT t = (f32[3], f32[5], s32[7], s32[9], f32[200000], (s32[], f32[3]), f32[131073]) tuple(u1, g1, e, k, u2, w, g2)\n}\n";
    let args = [
        scalar(PrimitiveType::F32, Scalar::Float(-1.0)),
        scalar(PrimitiveType::F32, Scalar::Float(3.0)),
    ];
    for seed in [0, 1, u64::MAX] {
        check(text, &args, seed);
    }
}
