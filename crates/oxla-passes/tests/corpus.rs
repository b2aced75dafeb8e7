//! The whole conformance suite after the standard pipeline: every module
//! still verifies after every pass, and the optimised module gives the
//! expected results on the reference interpreter.

use oxla_hlo::{HloModule, Literal};
use oxla_interp::{EvalOptions, NoServices};
use oxla_passes::Pipeline;
use oxla_testsuite::{check_corpus, jax_fixtures, stablehlo_corpus};

fn optimized_interpreter(
    options: EvalOptions,
) -> impl Fn(&HloModule, &[Literal]) -> Result<Literal, String> + Sync {
    move |module, args| {
        let mut m = module.clone();
        let mut broken = None;
        Pipeline::standard().run_observed(&mut m, &mut |pass, _, _, m| {
            if broken.is_none()
                && let Err(e) = oxla_hlo::verifier::verify(m)
            {
                broken = Some(format!("the module no longer verifies after {pass}: {e}"));
            }
        });
        if let Some(e) = broken {
            return Err(e);
        }
        oxla_interp::evaluate(&m, args, &options, &NoServices).map_err(|e| e.to_string())
    }
}

#[test]
fn stablehlo_corpus_after_passes() {
    check_corpus(
        &stablehlo_corpus(env!("CARGO_MANIFEST_DIR")),
        "",
        &optimized_interpreter(EvalOptions::default()),
        412,
    );
}

#[test]
fn jax_fixtures_after_passes() {
    check_corpus(
        &jax_fixtures(env!("CARGO_MANIFEST_DIR")),
        "",
        &optimized_interpreter(EvalOptions::default()),
        609,
    );
}

#[test]
fn jax_fixtures_after_passes_flushing_denormals() {
    let options = EvalOptions::default().flush_denormals(true);
    check_corpus(
        &jax_fixtures(env!("CARGO_MANIFEST_DIR")),
        "",
        &optimized_interpreter(options),
        619,
    );
}
