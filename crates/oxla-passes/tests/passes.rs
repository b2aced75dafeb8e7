//! Each rule of each pass on a small module: the entry computation after
//! the pass, written as HLO text (without `%` sigils and layouts), and the
//! same results before and after on random inputs, bit for bit.

use oxla_hlo::{HloModule, Literal};
use oxla_interp::{EvalOptions, NoServices};
use oxla_passes::{
    Cse, Dce, FoldConstants, HoistInvariants, Inline, LoopRanges, Pass, Pipeline, Simplify,
    UnrollWhile,
};

mod common;
use common::entry_lines;

fn evaluate(module: &HloModule, seed: u64) -> Literal {
    let mut state = seed;
    let args: Vec<Literal> = module
        .entry()
        .parameters()
        .iter()
        .map(|&p| oxla_testsuite::random_literal(&module.entry().instruction(p).shape, &mut state))
        .collect();
    oxla_interp::evaluate(module, &args, &EvalOptions::default(), &NoServices)
        .expect("the module evaluates")
}

/// Runs `passes` to a fixed point on `text`, checks the module still
/// verifies and computes the same bits, and compares the entry with `expected`.
fn check(passes: Vec<Box<dyn Pass>>, text: &str, expected: &[&str]) {
    let before = oxla_text::parse_module(text).unwrap();
    let mut after = before.clone();
    Pipeline::new(passes).run_observed(&mut after, &mut |pass, _, _, m| {
        if let Err(e) = oxla_hlo::verifier::verify(m) {
            panic!("after {pass}: {e}\n{}", oxla_text::print_module(m));
        }
    });
    assert_eq!(
        entry_lines(&after),
        expected,
        "\n{}",
        oxla_text::print_module(&after)
    );
    for seed in 1..4 {
        let (x, y) = (evaluate(&before, seed), evaluate(&after, seed));
        assert!(
            x.bitwise_eq(&y),
            "results differ on seed {seed}: {x:?} vs {y:?}"
        );
    }
}

fn simplify() -> Vec<Box<dyn Pass>> {
    vec![Box::new(Simplify), Box::new(Dce)]
}

#[test]
fn reshape_chains_and_multiplication_by_one() {
    check(
        simplify(),
        "HloModule m
        ENTRY e {
          p = f32[2,3] parameter(0)
          r = f32[3,2] reshape(p)
          r2 = f32[6] reshape(r)
          same = f32[6] reshape(r2)
          c = f32[] constant(1)
          b = f32[6] broadcast(c), dimensions={}
          ROOT m = f32[6] multiply(b, same)
        }",
        &["p = f32[2,3] parameter(0)", "ROOT r2 = f32[6] reshape(p)"],
    );
}

#[test]
fn transposes_compose_and_cancel() {
    check(
        simplify(),
        "HloModule m
        ENTRY e {
          p = f32[2,3,4] parameter(0)
          t1 = f32[3,4,2] transpose(p), dimensions={1,2,0}
          t2 = f32[4,3,2] transpose(t1), dimensions={1,0,2}
          back = f32[2,3,4] transpose(t1), dimensions={2,0,1}
          ROOT t = (f32[4,3,2], f32[2,3,4]) tuple(t2, back)
        }",
        &[
            "p = f32[2,3,4] parameter(0)",
            "t2 = f32[4,3,2] transpose(p), dimensions={2,1,0}",
            "ROOT t = (f32[4,3,2], f32[2,3,4]) tuple(t2, p)",
        ],
    );
}

#[test]
fn transposes_and_unit_reshapes_that_keep_every_element_in_place() {
    // JAX's `lu_solve`: add a unit dimension, transpose, drop it, then the
    // caller transposes back. Taken together the chain moves nothing: the
    // source, or a reshape of it. A chain that does move stays.
    check(
        simplify(),
        "HloModule m
        ENTRY e {
          p = f32[3,4] parameter(0)
          a = f32[3,1,4] reshape(p)
          b = f32[4,3,1] transpose(a), dimensions={2,0,1}
          c = f32[4,3] reshape(b)
          back = f32[3,4] transpose(c), dimensions={1,0}
          t = f32[4,3] transpose(p), dimensions={1,0}
          r = f32[4,3,1] reshape(t)
          unit = f32[3,1,4] transpose(r), dimensions={1,2,0}
          moved = f32[4,1,3] transpose(a), dimensions={2,1,0}
          ROOT out = (f32[3,4], f32[3,1,4], f32[4,1,3]) tuple(back, unit, moved)
        }",
        &[
            "p = f32[3,4] parameter(0)",
            "a = f32[3,1,4] reshape(p)",
            "unit = f32[3,1,4] reshape(p)",
            "moved = f32[4,1,3] transpose(a), dimensions={2,1,0}",
            "ROOT out = (f32[3,4], f32[3,1,4], f32[4,1,3]) tuple(p, unit, moved)",
        ],
    );
}

#[test]
fn broadcasts_and_transposes_of_an_iota_become_iotas() {
    // `jnp.eye`: a counter broadcast along rows and along columns, compared.
    // Each broadcast is an iota of its own shape along the dimension the
    // counter went to; so is a transpose of an iota. A broadcast of
    // another array stays.
    check(
        simplify(),
        "HloModule m
        ENTRY e {
          i = s32[4] iota(), iota_dimension=0
          rows = s32[4,3,4] broadcast(i), dimensions={0}
          cols = s32[4,3,4] broadcast(i), dimensions={2}
          eq = pred[4,3,4] compare(rows, cols), direction=EQ
          j = f32[2,5] iota(), iota_dimension=1
          t = f32[5,2] transpose(j), dimensions={1,0}
          p = s32[4] parameter(0)
          kept = s32[3,4] broadcast(p), dimensions={1}
          z = u16[4,1] iota(), iota_dimension=1
          zeros = u16[4,2] broadcast(z), dimensions={0,1}
          y = u16[4,1] iota(), iota_dimension=0
          down = u16[4,2] broadcast(y), dimensions={0,1}
          ROOT out = (pred[4,3,4], f32[5,2], s32[3,4], u16[4,2], u16[4,2]) tuple(eq, t, kept, zeros, down)
        }",
        &[
            "rows = s32[4,3,4] iota(), iota_dimension=0",
            "cols = s32[4,3,4] iota(), iota_dimension=2",
            "eq = pred[4,3,4] compare(rows, cols), direction=EQ",
            "t = f32[5,2] iota(), iota_dimension=0",
            "p = s32[4] parameter(0)",
            "kept = s32[3,4] broadcast(p), dimensions={1}",
            // A counter of size 1 (zeros) spread to 2: not an iota along it.
            "z = u16[4,1] iota(), iota_dimension=1",
            "zeros = u16[4,2] broadcast(z), dimensions={0,1}",
            "down = u16[4,2] iota(), iota_dimension=0",
            "ROOT out = (pred[4,3,4], f32[5,2], s32[3,4], u16[4,2], u16[4,2]) tuple(eq, t, kept, zeros, down)",
        ],
    );
}

#[test]
fn broadcasts_compose() {
    check(
        simplify(),
        "HloModule m
        ENTRY e {
          p = f32[3] parameter(0)
          b1 = f32[2,3] broadcast(p), dimensions={1}
          ROOT b2 = f32[2,4,3] broadcast(b1), dimensions={0,2}
        }",
        &[
            "p = f32[3] parameter(0)",
            "ROOT b2 = f32[2,4,3] broadcast(p), dimensions={2}",
        ],
    );
}

#[test]
fn scalar_broadcasts_absorb_reshapes_and_transposes() {
    check(
        simplify(),
        "HloModule m
        ENTRY e {
          p = f32[] parameter(0)
          b = f32[2,3] broadcast(p), dimensions={}
          r = f32[3,2] reshape(b)
          t = f32[2,3] transpose(r), dimensions={1,0}
          ROOT s = f32[2,3] sine(t)
        }",
        &[
            "p = f32[] parameter(0)",
            "t = f32[2,3] broadcast(p), dimensions={}",
            "ROOT s = f32[2,3] sine(t)",
        ],
    );
}

#[test]
fn slices_compose_and_full_slices_vanish() {
    check(
        simplify(),
        "HloModule m
        ENTRY e {
          p = f32[20,5] parameter(0)
          s1 = f32[9,5] slice(p), slice={[2:19:2], [0:5]}
          s2 = f32[3,5] slice(s1), slice={[1:9:3], [0:5]}
          ROOT s3 = f32[3,5] slice(s2), slice={[0:3], [0:5]}
        }",
        &[
            "p = f32[20,5] parameter(0)",
            "ROOT s2 = f32[3,5] slice(p), slice={[4:17:6], [0:5:1]}",
        ],
    );
}

#[test]
fn no_op_movement_is_removed() {
    check(
        simplify(),
        "HloModule m
        ENTRY e {
          p = s32[4,1] parameter(0)
          z = s32[] constant(0)
          pad = s32[4,1] pad(p, z), padding=0_0x0_0
          rev = s32[4,1] reverse(pad), dimensions={1}
          rev2 = s32[4,1] reverse(rev), dimensions={0}
          rev3 = s32[4,1] reverse(rev2), dimensions={0}
          cat = s32[4,1] concatenate(rev3), dimensions={0}
          cp = s32[4,1] copy(cat)
          ROOT cv = s32[4,1] convert(cp)
        }",
        &["ROOT p = s32[4,1] parameter(0)"],
    );
}

#[test]
fn additive_identities_respect_signed_zero() {
    // x + 0.0 is not x when x is -0.0, so it stays; x + -0.0 and x - 0.0 are exact.
    check(
        simplify(),
        "HloModule m
        ENTRY e {
          p = f32[4] parameter(0)
          zero = f32[] constant(0)
          nzero = f32[] constant(-0)
          bz = f32[4] broadcast(zero), dimensions={}
          bn = f32[4] broadcast(nzero), dimensions={}
          kept = f32[4] add(p, bz)
          gone = f32[4] add(bn, kept)
          ROOT gone2 = f32[4] subtract(gone, bz)
        }",
        &[
            "p = f32[4] parameter(0)",
            "zero = f32[] constant(0)",
            "bz = f32[4] broadcast(zero), dimensions={}",
            "ROOT kept = f32[4] add(p, bz)",
        ],
    );
}

#[test]
fn integer_and_boolean_identities() {
    check(
        simplify(),
        "HloModule m
        ENTRY e {
          p = s32[4] parameter(0)
          q = pred[4] parameter(1)
          zero = s32[4] constant({0, 0, 0, 0})
          one = s32[] constant(1)
          t = pred[] constant(true)
          f = pred[] constant(false)
          bone = s32[4] broadcast(one), dimensions={}
          bt = pred[4] broadcast(t), dimensions={}
          bf = pred[4] broadcast(f), dimensions={}
          a = s32[4] add(zero, p)
          d = s32[4] divide(a, bone)
          x = s32[4] xor(d, zero)
          qa = pred[4] and(q, bt)
          qo = pred[4] or(bf, qa)
          ROOT r = (s32[4], pred[4]) tuple(x, qo)
        }",
        &[
            "p = s32[4] parameter(0)",
            "q = pred[4] parameter(1)",
            "ROOT r = (s32[4], pred[4]) tuple(p, q)",
        ],
    );
}

#[test]
fn predicates_compared_with_constants_are_themselves_or_their_negation() {
    check(
        simplify(),
        "HloModule m
        ENTRY e {
          q = pred[4] parameter(0)
          i = s32[4] parameter(1)
          t = pred[] constant(true)
          f = pred[] constant(false)
          bt = pred[4] broadcast(t), dimensions={}
          bf = pred[4] broadcast(f), dimensions={}
          c = pred[4] constant({false, false, false, false})
          a = pred[4] compare(q, bf), direction=NE
          b = pred[4] compare(bt, q), direction=EQ
          n = pred[4] compare(c, q), direction=EQ
          m = pred[4] compare(q, bt), direction=NE
          o = pred[4] compare(q, bf), direction=GT
          z = s32[4] constant({0, 0, 0, 0})
          k = pred[4] compare(i, z), direction=NE
          ROOT r = (pred[4], pred[4], pred[4], pred[4], pred[4], pred[4]) tuple(a, b, n, m, o, k)
        }",
        &[
            "q = pred[4] parameter(0)",
            "i = s32[4] parameter(1)",
            "f = pred[] constant(false)",
            "bf = pred[4] broadcast(f), dimensions={}",
            "n = pred[4] not(q)",
            "m = pred[4] not(q)",
            "o = pred[4] compare(q, bf), direction=GT",
            "z = s32[4] constant({0, 0, 0, 0})",
            "k = pred[4] compare(i, z), direction=NE",
            "ROOT r = (pred[4], pred[4], pred[4], pred[4], pred[4], /*index=5*/pred[4]) \
             tuple(q, q, n, m, o, /*index=5*/k)",
        ],
    );
}

#[test]
fn complex_multiplication_by_one_stays() {
    // (a+bi)(1+0i) computes b*0, which is NaN when b is infinite.
    check(
        simplify(),
        "HloModule m
        ENTRY e {
          p = c64[2] parameter(0)
          one = c64[2] constant({(1,0), (1,0)})
          ROOT m = c64[2] multiply(p, one)
        }",
        &[
            "p = c64[2] parameter(0)",
            "one = c64[2] constant({(1, 0), (1, 0)})",
            "ROOT m = c64[2] multiply(p, one)",
        ],
    );
}

#[test]
fn double_negation_and_constant_selects() {
    check(
        simplify(),
        "HloModule m
        ENTRY e {
          p = f32[3] parameter(0)
          q = f32[3] parameter(1)
          n = f32[3] negate(p)
          nn = f32[3] negate(n)
          t = pred[] constant(true)
          bt = pred[3] broadcast(t), dimensions={}
          s = f32[3] select(bt, nn, q)
          f = pred[3] constant({false, false, false})
          ROOT s2 = f32[3] select(f, q, s)
        }",
        &["ROOT p = f32[3] parameter(0)", "q = f32[3] parameter(1)"],
    );
}

#[test]
fn tuples_are_taken_apart_where_they_are_built() {
    check(
        simplify(),
        "HloModule m
        ENTRY e {
          p = (f32[2], s32[]) parameter(0)
          a = f32[2] get-tuple-element(p), index=0
          b = s32[] get-tuple-element(p), index=1
          t = (f32[2], s32[]) tuple(a, b)
          x = f32[2] get-tuple-element(t), index=0
          ROOT r = (f32[2], (f32[2], s32[])) tuple(x, t)
        }",
        &[
            "p = (f32[2], s32[]) parameter(0)",
            "x = f32[2] get-tuple-element(p), index=0",
            "ROOT r = (f32[2], (f32[2], s32[])) tuple(x, p)",
        ],
    );
}

#[test]
fn dynamic_slices_with_constant_starts_become_clamped_slices() {
    check(
        simplify(),
        "HloModule m
        ENTRY e {
          p = f32[4,6] parameter(0)
          i = s32[] constant(5)
          j = s32[] constant(-3)
          ROOT d = f32[2,3] dynamic-slice(p, i, j), dynamic_slice_sizes={2,3}
        }",
        &[
            "p = f32[4,6] parameter(0)",
            "ROOT d = f32[2,3] slice(p), slice={[2:4], [0:3]}",
        ],
    );
}

#[test]
fn constants_fold_through_the_interpreter() {
    check(
        vec![Box::new(FoldConstants::default()), Box::new(Dce)],
        "HloModule m
        ENTRY e {
          p = f32[3] parameter(0)
          a = f32[3] constant({1, 2, 3})
          b = f32[3] constant({0.5, 0.25, 0.125})
          c = f32[3] multiply(a, b)
          d = f32[3] exponential(c)
          ROOT r = f32[3] add(p, d)
        }",
        &[
            "p = f32[3] parameter(0)",
            "d = f32[3] constant({1.64872122, 1.64872122, 1.45499146})",
            "ROOT r = f32[3] add(p, d)",
        ],
    );
}

#[test]
fn folding_leaves_expansions_randomness_and_big_results_alone() {
    check(
        vec![Box::new(FoldConstants::default()), Box::new(Dce)],
        "HloModule m
        ENTRY e {
          z = f32[] constant(0)
          one = f32[] constant(1)
          b = f32[64,64] broadcast(one), dimensions={}
          i = f32[64,64] iota(), iota_dimension=0
          n = f32[64,64] negate(b)
          r = f32[64,64] rng(z, one), distribution=rng_uniform
          ROOT t = (f32[64,64], f32[64,64], f32[64,64]) tuple(i, n, r)
        }",
        &[
            "z = f32[] constant(0)",
            "one = f32[] constant(1)",
            "b = f32[64,64] broadcast(one), dimensions={}",
            "i = f32[64,64] iota(), iota_dimension=0",
            "n = f32[64,64] negate(b)",
            "r = f32[64,64] rng(z, one), distribution=rng_uniform",
            "ROOT t = (f32[64,64], f32[64,64], f32[64,64]) tuple(i, n, r)",
        ],
    );
}

#[test]
fn cse_merges_equal_work_but_not_different_zeros() {
    check(
        vec![Box::new(Cse), Box::new(Dce)],
        r#"HloModule m
        ENTRY e {
          p = f32[3] parameter(0)
          z1 = f32[] constant(0)
          z2 = f32[] constant(-0)
          z3 = f32[] constant(0)
          a = f32[3] broadcast(z1), dimensions={}
          b = f32[3] broadcast(z2), dimensions={}
          c = f32[3] broadcast(z3), dimensions={}
          x = f32[3] add(p, a), metadata={op_name="first"}
          y = f32[3] add(p, b)
          w = f32[3] add(p, c), metadata={op_name="second"}
          ROOT t = (f32[3], f32[3], f32[3]) tuple(x, y, w)
        }"#,
        &[
            "p = f32[3] parameter(0)",
            "z1 = f32[] constant(0)",
            "z2 = f32[] constant(-0)",
            "a = f32[3] broadcast(z1), dimensions={}",
            "b = f32[3] broadcast(z2), dimensions={}",
            "x = f32[3] add(p, a), metadata={op_name=\"first\"}",
            "y = f32[3] add(p, b)",
            "ROOT t = (f32[3], f32[3], f32[3]) tuple(x, y, x)",
        ],
    );
}

/// Reduces whose reducers are separate but identical computations (as JAX
/// writes a region for every reduce) merge; a reducer that differs in one
/// operation, or calls a different computation, keeps its reduce apart.
#[test]
fn cse_compares_called_computations_by_structure() {
    check(
        vec![Box::new(Cse), Box::new(Dce)],
        "HloModule m
        sq {
          x = f32[] parameter(0)
          ROOT m = f32[] multiply(x, x)
        }
        sq2 {
          y = f32[] parameter(0)
          ROOT n = f32[] multiply(y, y)
        }
        r1 {
          a = f32[] parameter(0)
          b = f32[] parameter(1)
          ROOT s = f32[] add(a, b), metadata={op_name=\"one\"}
        }
        r2 {
          c = f32[] parameter(0)
          d = f32[] parameter(1)
          ROOT t = f32[] add(c, d)
        }
        r3 {
          c = f32[] parameter(0)
          d = f32[] parameter(1)
          ROOT t = f32[] maximum(c, d)
        }
        r4 {
          c = f32[] parameter(0)
          d = f32[] parameter(1)
          e = f32[] call(c), to_apply=sq
          ROOT t = f32[] add(e, d)
        }
        r5 {
          c = f32[] parameter(0)
          d = f32[] parameter(1)
          e = f32[] call(c), to_apply=sq2
          ROOT t = f32[] add(e, d)
        }
        ENTRY e {
          p = f32[4,5] parameter(0)
          z = f32[] constant(0)
          s1 = f32[5] reduce(p, z), dimensions={0}, to_apply=r1
          s2 = f32[5] reduce(p, z), dimensions={0}, to_apply=r2
          s3 = f32[5] reduce(p, z), dimensions={0}, to_apply=r3
          s4 = f32[5] reduce(p, z), dimensions={0}, to_apply=r4
          s5 = f32[5] reduce(p, z), dimensions={0}, to_apply=r5
          ROOT t = (f32[5], f32[5], f32[5], f32[5], f32[5]) tuple(s1, s2, s3, s4, s5)
        }",
        &[
            "p = f32[4,5] parameter(0)",
            "z = f32[] constant(0)",
            "s1 = f32[5] reduce(p, z), dimensions={0}, to_apply=r1",
            "s3 = f32[5] reduce(p, z), dimensions={0}, to_apply=r3",
            "s4 = f32[5] reduce(p, z), dimensions={0}, to_apply=r4",
            "ROOT t = (f32[5], f32[5], f32[5], f32[5], f32[5]) tuple(s1, s1, s3, s4, s4)",
        ],
    );
}

#[test]
fn cse_keeps_random_numbers_apart() {
    check(
        vec![Box::new(Cse), Box::new(Dce)],
        "HloModule m
        ENTRY e {
          z = f32[] constant(0)
          one = f32[] constant(1)
          r1 = f32[2] rng(z, one), distribution=rng_uniform
          r2 = f32[2] rng(z, one), distribution=rng_uniform
          ROOT t = (f32[2], f32[2]) tuple(r1, r2)
        }",
        &[
            "z = f32[] constant(0)",
            "one = f32[] constant(1)",
            "r1 = f32[2] rng(z, one), distribution=rng_uniform",
            "r2 = f32[2] rng(z, one), distribution=rng_uniform",
            "ROOT t = (f32[2], f32[2]) tuple(r1, r2)",
        ],
    );
}

#[test]
fn dce_drops_dead_instructions_and_computations_and_renumbers_calls() {
    let text = "HloModule m
        dead {
          a = f32[] parameter(0)
          b = f32[] parameter(1)
          ROOT m = f32[] multiply(a, b)
        }
        add {
          a = f32[] parameter(0)
          b = f32[] parameter(1)
          ROOT s = f32[] add(a, b)
        }
        ENTRY e {
          p = f32[4] parameter(0)
          unused = f32[4] sine(p)
          z = f32[] constant(0)
          unused_reduce = f32[] reduce(p, z), dimensions={0}, to_apply=dead
          ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=add
        }";
    check(
        vec![Box::new(Dce)],
        text,
        &[
            "p = f32[4] parameter(0)",
            "z = f32[] constant(0)",
            "ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=add",
        ],
    );
    let mut m = oxla_text::parse_module(text).unwrap();
    assert!(Dce.run(&mut m));
    assert_eq!(m.computations().len(), 2);
    assert!(!Dce.run(&mut m), "a second run finds nothing more");
}

#[test]
fn dce_keeps_side_effects() {
    // The unused rng still advances the random stream the second one reads.
    check(
        vec![Box::new(Dce)],
        "HloModule m
        ENTRY e {
          z = f32[] constant(0)
          one = f32[] constant(1)
          unused = f32[2] rng(z, one), distribution=rng_uniform
          ROOT r = f32[2] rng(z, one), distribution=rng_uniform
        }",
        &[
            "z = f32[] constant(0)",
            "one = f32[] constant(1)",
            "unused = f32[2] rng(z, one), distribution=rng_uniform",
            "ROOT r = f32[2] rng(z, one), distribution=rng_uniform",
        ],
    );
}

#[test]
fn the_pipeline_reports_every_pass_and_reaches_a_fixed_point() {
    let mut m = oxla_text::parse_module(
        "HloModule m
        ENTRY e {
          p = f32[8] parameter(0)
          a = f32[] constant(2)
          b = f32[] constant(3)
          c = f32[] multiply(a, b)
          bc = f32[8] broadcast(c), dimensions={}
          x = f32[8] multiply(p, bc)
          y = f32[8] multiply(p, bc)
          ROOT s = f32[8] add(x, y)
        }",
    )
    .unwrap();
    let mut seen = Vec::new();
    Pipeline::standard().run_observed(&mut m, &mut |pass, round, changed, _| {
        seen.push((pass.to_string(), round, changed))
    });
    let names: Vec<&str> = seen.iter().take(8).map(|(p, _, _)| p.as_str()).collect();
    assert_eq!(
        names,
        [
            "inline",
            "unroll-while",
            "loop-ranges",
            "simplify",
            "fold-constants",
            "cse",
            "hoist-invariants",
            "dce"
        ]
    );
    let last_round = seen.last().unwrap().1;
    assert!(
        seen.iter().filter(|s| s.1 == last_round).all(|s| !s.2),
        "the last round changes nothing: {seen:?}"
    );
    assert_eq!(
        entry_lines(&m),
        [
            "p = f32[8] parameter(0)",
            "c = f32[] constant(6)",
            "bc = f32[8] broadcast(c), dimensions={}",
            "x = f32[8] multiply(p, bc)",
            "ROOT s = f32[8] add(x, x)",
        ]
    );
}

#[test]
fn max_with_minus_infinity_is_the_other_operand() {
    // softmax's `max(reduce_max(x), -inf)`; NaN still propagates.
    check(
        simplify(),
        "HloModule m
        ENTRY e {
          p = f32[4] parameter(0)
          ninf = f32[] constant(-inf)
          pinf = f32[] constant(inf)
          b = f32[4] broadcast(ninf), dimensions={}
          c = f32[4] broadcast(pinf), dimensions={}
          m = f32[4] maximum(b, p)
          ROOT n = f32[4] minimum(m, c)
        }",
        &["ROOT p = f32[4] parameter(0)"],
    );
}

#[test]
fn calls_of_computations_that_draw_random_numbers_stay() {
    // Folding, merging or dropping the maps would change the random stream.
    check(
        vec![
            Box::new(FoldConstants::default()),
            Box::new(Cse),
            Box::new(Dce),
        ],
        "HloModule m
        noisy {
          x = f32[] parameter(0)
          one = f32[] constant(1)
          ROOT r = f32[] rng(x, one), distribution=rng_uniform
        }
        ENTRY e {
          c = f32[3] constant({0, 0.25, 0.5})
          unused = f32[3] map(c), dimensions={0}, to_apply=noisy
          a = f32[3] map(c), dimensions={0}, to_apply=noisy
          b = f32[3] map(c), dimensions={0}, to_apply=noisy
          ROOT t = (f32[3], f32[3]) tuple(a, b)
        }",
        &[
            "c = f32[3] constant({0, 0.25, 0.5})",
            "unused = f32[3] map(c), dimensions={0}, to_apply=noisy",
            "a = f32[3] map(c), dimensions={0}, to_apply=noisy",
            "b = f32[3] map(c), dimensions={0}, to_apply=noisy",
            "ROOT t = (f32[3], f32[3]) tuple(a, b)",
        ],
    );
}

fn inline_and_unroll() -> Vec<Box<dyn Pass>> {
    vec![
        Box::new(Inline),
        Box::new(UnrollWhile),
        Box::new(Simplify),
        Box::new(FoldConstants::default()),
        Box::new(Dce),
    ]
}

#[test]
fn calls_are_inlined_through_every_level() {
    check(
        inline_and_unroll(),
        "HloModule m
        square {
          x = f32[4] parameter(0)
          ROOT y = f32[4] multiply(x, x)
        }
        pair {
          a = f32[4] parameter(0)
          b = f32[4] parameter(1)
          s = f32[4] call(a), to_apply=square
          ROOT t = (f32[4], f32[4]) tuple(s, b)
        }
        ENTRY e {
          p = f32[4] parameter(0)
          q = f32[4] parameter(1)
          c = (f32[4], f32[4]) call(q, p), to_apply=pair
          y = f32[4] multiply(p, p)
          first = f32[4] get-tuple-element(c), index=0
          second = f32[4] get-tuple-element(c), index=1
          ROOT r = f32[4] subtract(first, second)
        }",
        &[
            "p = f32[4] parameter(0)",
            "q = f32[4] parameter(1)",
            // Copies get names no other instruction of the module has.
            "y.2 = f32[4] multiply(q, q)",
            "ROOT r = f32[4] subtract(y.2, p)",
        ],
    );
}

#[test]
fn calls_with_effects_are_not_inlined() {
    let text = "HloModule m
        noisy {
          x = f32[] parameter(0)
          one = f32[] constant(1)
          ROOT r = f32[] rng(x, one), distribution=rng_uniform
        }
        ENTRY e {
          z = f32[] constant(0)
          ROOT c = f32[] call(z), to_apply=noisy
        }";
    let mut m = oxla_text::parse_module(text).unwrap();
    assert!(!Inline.run(&mut m));
}

#[test]
fn calls_around_jaxs_lapack_custom_calls_are_inlined() {
    // JAX's factorisations are functions of their operands, so the `jit`-ed
    // helper around one inlines; another custom call keeps its call.
    let text = "HloModule m
        solve {
          x = f32[4,4] parameter(0)
          ROOT lu = (f32[4,4], s32[4], s32[]) custom-call(x), custom_call_target=\"lapack_sgetrf_ffi\"
        }
        other {
          x = f32[4,4] parameter(0)
          ROOT y = f32[4,4] custom-call(x), custom_call_target=\"my_kernel\"
        }
        ENTRY e {
          p = f32[4,4] parameter(0)
          c = (f32[4,4], s32[4], s32[]) call(p), to_apply=solve
          d = f32[4,4] call(p), to_apply=other
          ROOT t = ((f32[4,4], s32[4], s32[]), f32[4,4]) tuple(c, d)
        }";
    let mut m = oxla_text::parse_module(text).unwrap();
    assert!(Inline.run(&mut m));
    let lines = entry_lines(&m);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("custom-call(p), custom_call_target=\"lapack_sgetrf_ffi\"")),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("call(p), to_apply=other")),
        "{lines:?}"
    );
}

/// A loop whose state is `(counter, x)`: `x = x * x` while `counter DIR
/// limit` (operands in that order, or swapped), the counter moving by
/// `step`; `x` starts as the parameter and the counter at `start`.
fn counted_loop(ty: &str, start: i64, step: i64, cond: &str) -> String {
    format!(
        "HloModule m
        cond {{
          s = ({ty}[], f32[4]) parameter(0)
          i = {ty}[] get-tuple-element(s), index=0
          {cond}
        }}
        body {{
          s = ({ty}[], f32[4]) parameter(0)
          i = {ty}[] get-tuple-element(s), index=0
          x = f32[4] get-tuple-element(s), index=1
          step = {ty}[] constant({step})
          next = {ty}[] add(i, step)
          y = f32[4] multiply(x, x)
          ROOT t = ({ty}[], f32[4]) tuple(next, y)
        }}
        ENTRY e {{
          p = f32[4] parameter(0)
          start = {ty}[] constant({start})
          init = ({ty}[], f32[4]) tuple(start, p)
          w = ({ty}[], f32[4]) while(init), condition=cond, body=body
          ROOT x = f32[4] get-tuple-element(w), index=1
        }}"
    )
}

/// The entry after unrolling `trips` squarings of `p`.
fn squarings(trips: usize) -> Vec<String> {
    let mut lines = vec!["p = f32[4] parameter(0)".to_string()];
    let mut last = "p".to_string();
    for k in 1..=trips {
        let root = if k == trips { "ROOT " } else { "" };
        lines.push(format!("{root}y.{k} = f32[4] multiply({last}, {last})"));
        last = format!("y.{k}");
    }
    if trips == 0 {
        lines[0] = "ROOT p = f32[4] parameter(0)".to_string();
    }
    lines
}

fn check_unrolled(text: &str, trips: usize) {
    let expected = squarings(trips);
    let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
    check(inline_and_unroll(), text, &expected);
}

#[test]
fn counted_loops_are_unrolled() {
    let lt = "limit = s32[] constant(3)\n ROOT c = pred[] compare(i, limit), direction=LT";
    check_unrolled(&counted_loop("s32", 0, 1, lt), 3);
    // The bound on the left, a count down, and a step past the bound.
    let gt = "limit = s32[] constant(5)\n ROOT c = pred[] compare(limit, i), direction=GT";
    check_unrolled(&counted_loop("s32", -2, 3, gt), 3);
    let down = "limit = s64[] constant(0)\n ROOT c = pred[] compare(i, limit), direction=GE";
    check_unrolled(&counted_loop("s64", 4, -2, down), 3);
    // No trips: the loop is its initial state.
    check_unrolled(&counted_loop("s32", 7, 1, lt), 0);
    // The counter wraps as u8 arithmetic does: 254, 255, 0, 1, then 2 stops.
    let ne = "limit = u8[] constant(2)\n ROOT c = pred[] compare(i, limit), direction=NE";
    check_unrolled(&counted_loop("u8", 254, 1, ne), 4);
}

#[test]
fn long_or_uncounted_loops_stay_loops() {
    let has_while = |text: &str| {
        let mut m = oxla_text::parse_module(text).unwrap();
        Pipeline::new(inline_and_unroll()).run(&mut m);
        oxla_text::print_module(&m).contains("while(")
    };
    let lt = |n: usize| {
        format!("limit = s32[] constant({n})\n ROOT c = pred[] compare(i, limit), direction=LT")
    };
    let max = oxla_passes::MAX_TRIPS;
    assert!(!has_while(&counted_loop("s32", 0, 1, &lt(max))));
    assert!(has_while(&counted_loop("s32", 0, 1, &lt(max + 1))));
    assert!(has_while(&counted_loop("s32", 0, 1, &lt(1000))));
    // Never stops: the counter does not move.
    assert!(has_while(&counted_loop("s32", 0, 0, &lt(3))));
    // The bound is not a constant.
    let param = counted_loop("s32", 0, 1, &lt(3))
        .replace("start = s32[] constant(0)", "start = s32[] parameter(1)");
    assert!(has_while(&param));
}

#[test]
fn inlining_a_chain_that_adds_work_at_every_level_stays_bounded() {
    // Each level calls the one below and adds a negation: flattening every
    // computation would make the module quadratic in the depth.
    let levels = 3000;
    let mut text = String::from(
        "HloModule deep\nc0 {\n  p = f32[] parameter(0)\n  ROOT n = f32[] negate(p)\n}\n",
    );
    for k in 1..=levels {
        text.push_str(&format!(
            "c{k} {{\n  p = f32[] parameter(0)\n  r = f32[] call(p), to_apply=c{}\n  ROOT n = f32[] negate(r)\n}}\n",
            k - 1
        ));
    }
    text.push_str(&format!(
        "ENTRY e {{\n  p = f32[] parameter(0)\n  ROOT r = f32[] call(p), to_apply=c{levels}\n}}\n"
    ));
    let mut m = oxla_text::parse_module(&text).unwrap();
    let count = |m: &HloModule| -> usize {
        m.computations()
            .iter()
            .map(|c| c.instructions().len())
            .sum()
    };
    let before = count(&m);
    assert!(Inline.run(&mut m));
    oxla_hlo::verifier::verify(&m).unwrap();
    assert!(
        count(&m) <= 4 * before + (1 << 16),
        "{} instructions from {before}",
        count(&m)
    );
    // Copies are named from their base name with one counter each: no
    // name grows with the depth.
    let longest = m
        .computations()
        .iter()
        .flat_map(|c| c.instructions())
        .map(|i| i.name.len())
        .max()
        .unwrap();
    assert!(longest <= "n.99999999".len(), "a name of {longest} bytes");
}

fn hoist() -> Vec<Box<dyn Pass>> {
    vec![Box::new(HoistInvariants), Box::new(Simplify), Box::new(Dce)]
}

/// A scan-like loop over `n` trips (a parameter, so nothing unrolls) with
/// state `(i, h, w, table)`; `STEP` computes `next` from `h`, `w`, `table`
/// and `i`, and may define more.
fn scan_loop(step: &str) -> String {
    format!(
        "HloModule m
        cond {{
          s = (s32[], f32[4,4], f32[4,4], f32[4], s32[]) parameter(0)
          i = s32[] get-tuple-element(s), index=0
          n = s32[] get-tuple-element(s), index=4
          ROOT c = pred[] compare(i, n), direction=LT
        }}
        body {{
          s = (s32[], f32[4,4], f32[4,4], f32[4], s32[]) parameter(0)
          i = s32[] get-tuple-element(s), index=0
          h = f32[4,4] get-tuple-element(s), index=1
          w = f32[4,4] get-tuple-element(s), index=2
          table = f32[4] get-tuple-element(s), index=3
          n = s32[] get-tuple-element(s), index=4
          one = s32[] constant(1)
          i1 = s32[] add(i, one)
          {step}
          ROOT t = (s32[], f32[4,4], f32[4,4], f32[4], s32[]) tuple(i1, next, w, table, n)
        }}
        ENTRY e {{
          h0 = f32[4,4] parameter(0)
          w0 = f32[4,4] parameter(1)
          table0 = f32[4] parameter(2)
          n0 = s32[] constant(3)
          zero = s32[] constant(0)
          init = (s32[], f32[4,4], f32[4,4], f32[4], s32[]) tuple(zero, h0, w0, table0, n0)
          loop = (s32[], f32[4,4], f32[4,4], f32[4], s32[]) while(init), condition=cond, body=body
          ROOT h = f32[4,4] get-tuple-element(loop), index=1
        }}"
    )
}

/// The instruction lines of computation `name` in `module`'s text.
fn computation_lines(module: &HloModule, name: &str) -> Vec<String> {
    let text = oxla_text::print_module(module);
    let header = |l: &str| {
        let l = l.trim_start_matches("ENTRY ").trim_start_matches('%');
        l.strip_prefix(name)
            .is_some_and(|rest| rest.starts_with([' ', '(']))
    };
    text.lines()
        .skip_while(|l| !header(l))
        .skip(1)
        .take_while(|l| l.trim() != "}")
        .map(|l| l.trim().replace('%', ""))
        .collect()
}

#[test]
fn loop_invariant_work_moves_before_the_loop() {
    // JAX's scan over `tanh(h @ (w * 0.05) + exp(table))`: the scaling and
    // the exp read only state the loop passes through, so they run once.
    let text = scan_loop(
        "c = f32[] constant(0.05)
          cb = f32[4,4] broadcast(c), dimensions={}
          ws = f32[4,4] multiply(w, cb)
          et = f32[4] exponential(table)
          etb = f32[4,4] broadcast(et), dimensions={1}
          d = f32[4,4] dot(h, ws), lhs_contracting_dims={1}, rhs_contracting_dims={0}
          a = f32[4,4] add(d, etb)
          next = f32[4,4] tanh(a)",
    );
    check(
        hoist(),
        &text,
        &[
            "h0 = f32[4,4] parameter(0)",
            "w0 = f32[4,4] parameter(1)",
            "table0 = f32[4] parameter(2)",
            "n0 = s32[] constant(3)",
            "zero = s32[] constant(0)",
            "c.1 = f32[] constant(0.05)",
            "cb.1 = f32[4,4] broadcast(c.1), dimensions={}",
            "ws.1 = f32[4,4] multiply(w0, cb.1)",
            "et.1 = f32[4] exponential(table0)",
            "loop.1 = (s32[], f32[4,4], f32[4,4], f32[4], s32[], /*index=5*/f32[4,4], f32[4]) \
             tuple(zero, h0, w0, table0, n0, /*index=5*/ws.1, et.1)",
            "loop.2 = (s32[], f32[4,4], f32[4,4], f32[4], s32[], /*index=5*/f32[4,4], f32[4]) \
             while(loop.1), condition=cond, body=body",
            "ROOT loop.4 = f32[4,4] get-tuple-element(loop.2), index=1",
        ],
    );
    let after = hoisted(&text);
    let body = computation_lines(&after, "body").join("\n");
    assert!(
        !body.contains("multiply(") && !body.contains("exponential("),
        "{body}"
    );
}

/// `text` after [`hoist`] to a fixed point, checked to verify after every
/// pass and to compute the same bits as before.
fn hoisted(text: &str) -> HloModule {
    let before = oxla_text::parse_module(text).unwrap();
    let mut after = before.clone();
    Pipeline::new(hoist()).run_observed(&mut after, &mut |pass, _, _, m| {
        if let Err(e) = oxla_hlo::verifier::verify(m) {
            panic!("after {pass}: {e}\n{}", oxla_text::print_module(m));
        }
    });
    for seed in 1..4 {
        let (x, y) = (evaluate(&before, seed), evaluate(&after, seed));
        assert!(x.bitwise_eq(&y), "results differ on seed {seed}");
    }
    after
}

#[test]
fn loop_variant_inflating_and_cheap_work_stays_in_the_loop() {
    // The counter's value, an outer product (16 elements from 8), and a
    // transpose alone (movement is hoisted only with work that reads it).
    let text = scan_loop(
        "fi = f32[] convert(i)
          fib = f32[4,4] broadcast(fi), dimensions={}
          tw = f32[4,4] transpose(w), dimensions={1,0}
          col = f32[4,1] reshape(table)
          row = f32[1,4] reshape(table)
          outer = f32[4,4] dot(col, row), lhs_contracting_dims={1}, rhs_contracting_dims={0}
          x = f32[4,4] add(h, tw)
          y = f32[4,4] add(outer, fib)
          next = f32[4,4] add(x, y)",
    );
    let mut m = oxla_text::parse_module(&text).unwrap();
    assert!(
        !HoistInvariants.run(&mut m),
        "{}",
        oxla_text::print_module(&m)
    );
    // Random numbers are drawn on every trip.
    let rng = scan_loop(
        "lo = f32[] constant(0)
          hi = f32[] constant(1)
          r = f32[4,4] rng(lo, hi), distribution=rng_uniform
          next = f32[4,4] add(h, r)",
    );
    let mut m = oxla_text::parse_module(&rng).unwrap();
    assert!(!HoistInvariants.run(&mut m));
    // A body two loops share is left alone: its state cannot grow for one.
    let shared = scan_loop("e = f32[4,4] exponential(w)\n next = f32[4,4] add(h, e)").replace(
        "ROOT h = f32[4,4] get-tuple-element(loop), index=1",
        "again = (s32[], f32[4,4], f32[4,4], f32[4], s32[]) while(init), condition=cond, body=body
          a = f32[4,4] get-tuple-element(loop), index=1
          b = f32[4,4] get-tuple-element(again), index=1
          ROOT r = f32[4,4] add(a, b)",
    );
    let mut m = oxla_text::parse_module(&shared).unwrap();
    assert!(!HoistInvariants.run(&mut m));
}

#[test]
fn invariant_work_leaves_nested_loops_level_by_level() {
    // The inner loop's `exp(w)` is invariant in both loops; the inner
    // `h * j` is not even in the inner one, `w + 1` only in the outer one.
    let text = "HloModule m
        icond {
          s = (s32[], f32[8], f32[8]) parameter(0)
          j = s32[] get-tuple-element(s), index=0
          k = s32[] constant(2)
          ROOT c = pred[] compare(j, k), direction=LT
        }
        ibody {
          s = (s32[], f32[8], f32[8]) parameter(0)
          j = s32[] get-tuple-element(s), index=0
          h = f32[8] get-tuple-element(s), index=1
          w = f32[8] get-tuple-element(s), index=2
          one = s32[] constant(1)
          j1 = s32[] add(j, one)
          e = f32[8] exponential(w)
          fj = f32[] convert(j)
          fjb = f32[8] broadcast(fj), dimensions={}
          hj = f32[8] multiply(h, fjb)
          next = f32[8] add(hj, e)
          ROOT t = (s32[], f32[8], f32[8]) tuple(j1, next, w)
        }
        ocond {
          s = (s32[], f32[8], f32[8], s32[]) parameter(0)
          i = s32[] get-tuple-element(s), index=0
          n = s32[] get-tuple-element(s), index=3
          ROOT c = pred[] compare(i, n), direction=LT
        }
        obody {
          s = (s32[], f32[8], f32[8], s32[]) parameter(0)
          i = s32[] get-tuple-element(s), index=0
          h = f32[8] get-tuple-element(s), index=1
          w = f32[8] get-tuple-element(s), index=2
          n = s32[] get-tuple-element(s), index=3
          one = s32[] constant(1)
          i1 = s32[] add(i, one)
          onef = f32[] constant(1)
          ob = f32[8] broadcast(onef), dimensions={}
          w1 = f32[8] add(w, ob)
          zero = s32[] constant(0)
          init = (s32[], f32[8], f32[8]) tuple(zero, h, w1)
          inner = (s32[], f32[8], f32[8]) while(init), condition=icond, body=ibody
          next = f32[8] get-tuple-element(inner), index=1
          ROOT t = (s32[], f32[8], f32[8], s32[]) tuple(i1, next, w, n)
        }
        ENTRY e {
          h0 = f32[8] parameter(0)
          w0 = f32[8] parameter(1)
          n0 = s32[] constant(3)
          zero = s32[] constant(0)
          init = (s32[], f32[8], f32[8], s32[]) tuple(zero, h0, w0, n0)
          loop = (s32[], f32[8], f32[8], s32[]) while(init), condition=ocond, body=obody
          ROOT h = f32[8] get-tuple-element(loop), index=1
        }";
    let after = hoisted(text);
    let has = |comp: &str, op: &str| {
        computation_lines(&after, comp)
            .iter()
            .any(|l| l.contains(&format!(" {op}(")))
    };
    assert!(has("e", "exponential") && has("e", "add"));
    assert!(!has("obody", "exponential") && !has("ibody", "exponential"));
    assert!(has("ibody", "multiply"));
}

/// JAX's `fori_loop` summing its index `j`, wrapped as a negative index
/// into 100 elements would be: `acc += select(j < 0, j + 100, j)`, for
/// `trips` trips of the counter `i` (0 up, by 1), `j` from `j0` by `step`.
/// With `second`, another loop runs the same body.
fn index_sum(j0: i64, step: i64, trips: i64, second: bool) -> String {
    let other = if second {
        "w2 = (s32[], s32[], s32[]) while(init), condition=cond, body=body\n  \
         a2 = s32[] get-tuple-element(w2), index=2\n  \
         ROOT r = s32[] add(a, a2)"
    } else {
        "ROOT r = s32[] add(a, a)"
    };
    format!(
        "HloModule m
cond {{
  s = (s32[], s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant({trips})
  ROOT c = pred[] compare(i, n), direction=LT
}}
body {{
  s = (s32[], s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  j = s32[] get-tuple-element(s), index=1
  acc = s32[] get-tuple-element(s), index=2
  one = s32[] constant(1)
  step = s32[] constant({step})
  zero = s32[] constant(0)
  size = s32[] constant(100)
  i1 = s32[] add(i, one)
  j1 = s32[] add(j, step)
  neg = pred[] compare(j, zero), direction=LT
  up = s32[] add(j, size)
  k = s32[] select(neg, up, j)
  acc1 = s32[] add(acc, k)
  ROOT t = (s32[], s32[], s32[]) tuple(i1, j1, acc1)
}}
ENTRY e {{
  z = s32[] constant(0)
  j0 = s32[] constant({j0})
  init = (s32[], s32[], s32[]) tuple(z, j0, z)
  w = (s32[], s32[], s32[]) while(init), condition=cond, body=body
  a = s32[] get-tuple-element(w), index=2
  {other}
}}"
    )
}

#[test]
fn comparisons_decided_by_a_counted_loops_ranges_become_constants() {
    // (j0, step, trips, a second loop, whether the select goes)
    for (j0, step, trips, second, goes) in [
        (0, 1, 1000, false, true),
        // Counting down to 1 from 50: never negative.
        (50, -1, 50, false, true),
        // Down to 0: 0 is not negative either.
        (50, -1, 51, false, true),
        // Down past 0, and up from below it: some trips see a negative j.
        (50, -1, 52, false, false),
        (-3, 1, 10, false, false),
        // The same body in two loops: left alone.
        (0, 1, 10, true, false),
    ] {
        let text = index_sum(j0, step, trips, second);
        let before = oxla_text::parse_module(&text).unwrap();
        let mut after = before.clone();
        let passes: Vec<Box<dyn Pass>> =
            vec![Box::new(LoopRanges), Box::new(Simplify), Box::new(Dce)];
        Pipeline::new(passes).run(&mut after);
        oxla_hlo::verifier::verify(&after).unwrap();
        let printed = oxla_text::print_module(&after);
        assert_eq!(
            !printed.contains("select("),
            goes,
            "{j0} {step} {trips}:\n{printed}"
        );
        // The sum of the wrapped indices, twice.
        let want: i64 = (0..trips)
            .map(|t| j0 + t * step)
            .map(|j| if j < 0 { j + 100 } else { j })
            .sum::<i64>()
            * 2;
        for module in [&before, &after] {
            let got = evaluate(module, 1);
            assert_eq!(got, Literal::scalar(want as i32), "{j0} {step} {trips}");
        }
    }
}
