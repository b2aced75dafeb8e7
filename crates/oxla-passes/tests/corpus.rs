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
    pipelines_then_interpreter(options, || vec![Pipeline::standard()])
}

/// The interpreter on each module after `pipelines`, checking that the
/// module verifies after every pass.
fn pipelines_then_interpreter(
    options: EvalOptions,
    pipelines: impl Fn() -> Vec<Pipeline> + Sync,
) -> impl Fn(&HloModule, &[Literal]) -> Result<Literal, String> + Sync {
    move |module, args| {
        let mut m = module.clone();
        let mut broken = None;
        for pipeline in pipelines() {
            pipeline.run_observed(&mut m, &mut |pass, _, _, m| {
                if broken.is_none()
                    && let Err(e) = oxla_hlo::verifier::verify(m)
                {
                    broken = Some(format!("the module no longer verifies after {pass}: {e}"));
                }
            });
        }
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

/// As XLA runs them: after its rewrites (`match_xla`), flushing denormals,
/// every fixture passes, the `xla_*` cases that pin the rewrites included.
#[test]
fn jax_fixtures_as_xla_rewrites_them() {
    let options = EvalOptions::default().flush_denormals(true);
    check_corpus(
        &jax_fixtures(env!("CARGO_MANIFEST_DIR")),
        "",
        &pipelines_then_interpreter(options, || vec![Pipeline::xla(), Pipeline::standard()]),
        647,
    );
}

/// XLA's rewrites change no expected value of the StableHLO corpus.
#[test]
fn stablehlo_corpus_as_xla_rewrites_it() {
    check_corpus(
        &stablehlo_corpus(env!("CARGO_MANIFEST_DIR")),
        "",
        &pipelines_then_interpreter(EvalOptions::default(), || vec![Pipeline::xla()]),
        412,
    );
}
