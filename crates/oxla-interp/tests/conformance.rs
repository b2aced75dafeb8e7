//! Conformance corpora: every case of `shared/conformance/stablehlo-interpret`
//! (derived from StableHLO's interpreter tests) and of the repository's JAX
//! fixtures (`tests/fixtures/jax`, written by XLA:CPU through JAX), evaluated
//! by the interpreter and compared with check_corpus.py's rule. Each test
//! prints every failure with its reason and asserts the pass count stays at
//! or above a floor (raise the floor when more cases pass).

mod common;

use std::path::Path;

use oxla_interp::EvalOptions;

fn run(corpus: &Path, floor: usize) {
    run_with(corpus, "", &EvalOptions::default(), floor);
}

fn run_with(corpus: &Path, prefix: &str, options: &EvalOptions, floor: usize) {
    if !corpus.is_dir() {
        println!("skipping: {} is absent", corpus.display());
        return;
    }
    let (passed, total, failures) = common::corpus::run_corpus(corpus, prefix, options);
    for (name, why) in &failures {
        println!("FAIL {name}: {why}");
    }
    println!(
        "{}: {passed} passed, {} failed (of {total})",
        corpus.display(),
        total - passed
    );
    assert!(
        passed >= floor,
        "{passed} cases passed, below the floor of {floor}"
    );
}

#[test]
fn stablehlo_interpret_corpus() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    run(
        &root.join("../../../shared/conformance/stablehlo-interpret"),
        412,
    );
}

#[test]
fn jax_fixtures() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    run(&root.join("../../tests/fixtures/jax"), 502);
}

/// XLA:CPU flushes denormals; with `flush_denormals` the interpreter matches
/// it on the fixtures that probe that, and on the rest of the corpus too.
#[test]
fn jax_denormal_fixtures_with_flushing() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let options = EvalOptions::default().flush_denormals(true);
    run_with(&root.join("../../tests/fixtures/jax"), "ftz_", &options, 12);
    // The whole corpus in XLA:CPU's mode.
    run_with(&root.join("../../tests/fixtures/jax"), "", &options, 512);
}

/// Random bit patterns of the right shape for every entry parameter.
fn random_literal(shape: &oxla_hlo::Shape, state: &mut u64) -> oxla_hlo::Literal {
    use oxla_hlo::{ArrayData, ArrayLiteral, Literal, PrimitiveType, Shape};
    let mut next = || {
        *state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *state >> 11
    };
    match shape {
        Shape::Array(a) => {
            let n = a.element_count().unwrap();
            let ty = a.element_type();
            let mut bytes = Vec::with_capacity(n * ty.byte_size());
            for _ in 0..n * ty.byte_size() {
                bytes.push(next() as u8);
            }
            let data = match ty {
                PrimitiveType::Pred => ArrayData::Pred(bytes.iter().map(|b| b & 1 == 1).collect()),
                _ => {
                    // Reuse the interpreter's own bitcast: bytes as u8[n, size] -> ty[n].
                    let u8s = Literal::from_vec(&[n as i64, ty.byte_size() as i64], bytes).unwrap();
                    let text = format!(
                        "HloModule b\nENTRY e {{\n  x = u8[{n},{}] parameter(0)\n  ROOT r = {ty}[{n}] bitcast-convert(x)\n}}\n",
                        ty.byte_size()
                    );
                    if ty.byte_size() == 1 {
                        let v: Vec<u8> = u8s.to_vec().unwrap();
                        let l = Literal::vec1(&v).convert(ty).unwrap();
                        l.into_array().unwrap().into_data()
                    } else {
                        let m = oxla_text::parse_module(&text).unwrap();
                        oxla_interp::evaluate(
                            &m,
                            &[u8s],
                            &EvalOptions::default(),
                            &oxla_interp::NoServices,
                        )
                        .unwrap()
                        .into_array()
                        .unwrap()
                        .into_data()
                    }
                }
            };
            Literal::Array(ArrayLiteral::new(a.clone(), data).unwrap())
        }
        Shape::Tuple(t) => Literal::Tuple(t.iter().map(|s| random_literal(s, state)).collect()),
        Shape::Token => Literal::Token,
    }
}

/// Every corpus module evaluated on random bit patterns (NaNs, huge and
/// negative indices, ...): errors are fine, panics are not.
#[test]
fn random_arguments_never_panic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut state = 0x0dd_ba11u64;
    let mut ran = 0;
    for corpus in [
        "../../../shared/conformance/stablehlo-interpret",
        "../../tests/fixtures/jax",
    ] {
        for case in common::corpus::cases(&root.join(corpus)) {
            let Ok(text) = std::fs::read_to_string(case.join("module.hlo")) else {
                continue;
            };
            let Ok(module) = oxla_text::parse_module(&text) else {
                continue;
            };
            let options = EvalOptions::default().while_iteration_limit(10_000);
            for _ in 0..3 {
                let args: Vec<_> = module
                    .program_shape()
                    .parameters
                    .iter()
                    .map(|s| random_literal(s, &mut state))
                    .collect();
                let outcome = std::panic::catch_unwind(|| {
                    oxla_interp::evaluate(&module, &args, &options, &oxla_interp::NoServices)
                });
                assert!(
                    outcome.is_ok(),
                    "{} panicked on random arguments",
                    case.display()
                );
                ran += 1;
            }
        }
    }
    println!("{ran} evaluations on random arguments");
}
