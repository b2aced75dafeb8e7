//! Hostile builder calls (wild mode: negative, huge and out-of-range shapes
//! and attributes, missing custom-call targets, runaway loops) never panic:
//! building fails with an error naming the op, or builds a module that
//! verifies and evaluates, under small limits, to a value or an error. The
//! `builder_calls` fuzz target runs the same check for longer.

use arbitrary::Unstructured;
use oxla_interp::{EvalOptions, NoServices, evaluate};
use oxla_testgen::{Options, generate};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn hostile_builder_calls_give_errors_not_panics(
        bytes in prop::collection::vec(any::<u8>(), 0..3000)
    ) {
        let mut u = Unstructured::new(&bytes);
        let options = Options { wild: true, ..Options::default() };
        let generated = generate(&mut u, &options).expect("generation never fails");
        match generated.built {
            Err(e) => prop_assert!(!e.to_string().is_empty()),
            Ok(computation) => {
                let module = computation.module();
                prop_assert!(oxla_hlo::verifier::verify(module).is_ok());
                let limits = EvalOptions::with_seed(1)
                    .while_iteration_limit(64)
                    .max_array_bytes(1 << 20);
                // A value or an error; the point is that it returns.
                let _ = evaluate(module, &generated.args, &limits, &NoServices);
            }
        }
    }
}
