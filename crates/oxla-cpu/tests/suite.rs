//! The conformance suite on the CPU backend: the StableHLO corpus and the
//! JAX fixtures, compared with the same rule as on the interpreter.

use oxla_hlo::{HloModule, Literal};
use oxla_interp::{EvalOptions, NoServices};
use oxla_testsuite::{check_corpus, jax_fixtures, stablehlo_corpus};

fn cpu(options: EvalOptions) -> impl Fn(&HloModule, &[Literal]) -> Result<Literal, String> + Sync {
    move |module, args| {
        let exe = oxla_cpu::compile(module).map_err(|e| e.to_string())?;
        exe.execute(args, &options, &NoServices)
            .map_err(|e| e.to_string())
    }
}

#[test]
fn stablehlo_corpus_on_cpu() {
    check_corpus(
        &stablehlo_corpus(env!("CARGO_MANIFEST_DIR")),
        "",
        &cpu(EvalOptions::default()),
        412,
    );
}

#[test]
fn jax_fixtures_on_cpu() {
    check_corpus(
        &jax_fixtures(env!("CARGO_MANIFEST_DIR")),
        "",
        &cpu(EvalOptions::default()),
        609,
    );
}

#[test]
fn jax_fixtures_on_cpu_flushing_denormals() {
    let options = EvalOptions::default().flush_denormals(true);
    check_corpus(
        &jax_fixtures(env!("CARGO_MANIFEST_DIR")),
        "",
        &cpu(options),
        619,
    );
}

/// After XLA's rewrites (`match_xla`, as `Client::compile` applies them by
/// default) the CPU backend gives XLA's results on every fixture.
#[test]
fn jax_fixtures_on_cpu_as_xla_rewrites_them() {
    let options = EvalOptions::default().flush_denormals(true);
    let cpu = cpu(options);
    check_corpus(
        &jax_fixtures(env!("CARGO_MANIFEST_DIR")),
        "",
        &|module: &HloModule, args: &[Literal]| cpu(&oxla_passes::match_xla(module), args),
        647,
    );
}

#[test]
fn random_arguments_never_panic_on_cpu() {
    let options = EvalOptions::default().while_iteration_limit(10_000);
    let dir = env!("CARGO_MANIFEST_DIR");
    oxla_testsuite::random_arguments_never_panic(
        &[stablehlo_corpus(dir), jax_fixtures(dir)],
        &cpu(options),
    );
}
