//! Conformance corpora: every case of `shared/conformance/stablehlo-interpret`
//! (derived from StableHLO's interpreter tests) and of the repository's JAX
//! fixtures (`tests/fixtures/jax`, written by XLA:CPU through JAX), evaluated
//! by the interpreter and compared with check_corpus.py's rule (the suite in
//! `oxla-testsuite`, shared with the other backends). Each test prints every
//! failure with its reason and asserts the pass count stays at or above a
//! floor (raise the floor when more cases pass).

use oxla_hlo::{HloModule, Literal};
use oxla_interp::{EvalOptions, NoServices, evaluate};
use oxla_testsuite::{check_corpus, jax_fixtures, random_arguments_never_panic, stablehlo_corpus};

fn interp(
    options: EvalOptions,
) -> impl Fn(&HloModule, &[Literal]) -> Result<Literal, String> + Sync {
    move |module, args| evaluate(module, args, &options, &NoServices).map_err(|e| e.to_string())
}

const DIR: &str = env!("CARGO_MANIFEST_DIR");

#[test]
fn stablehlo_interpret_corpus() {
    check_corpus(
        &stablehlo_corpus(DIR),
        "",
        &interp(EvalOptions::default()),
        412,
    );
}

#[test]
fn jax_fixture_corpus() {
    check_corpus(&jax_fixtures(DIR), "", &interp(EvalOptions::default()), 609);
}

/// XLA:CPU flushes denormals; with `flush_denormals` the interpreter matches
/// it on the fixtures that probe that, and on the rest of the corpus too.
#[test]
fn jax_denormal_fixtures_with_flushing() {
    let options = EvalOptions::default().flush_denormals(true);
    check_corpus(&jax_fixtures(DIR), "ftz_", &interp(options.clone()), 12);
    check_corpus(&jax_fixtures(DIR), "", &interp(options), 619);
}

/// Every corpus module evaluated on random bit patterns (NaNs, huge and
/// negative indices, ...): errors are fine, panics are not.
#[test]
fn random_arguments_never_panic_in_the_interpreter() {
    let options = EvalOptions::default().while_iteration_limit(10_000);
    let ran = random_arguments_never_panic(
        &[stablehlo_corpus(DIR), jax_fixtures(DIR)],
        &interp(options),
    );
    println!("{ran} evaluations on random arguments");
}
