//! Builder calls decoded from bytes (see `oxla-testgen`). The first byte
//! picks the mode. Valid mode: the computation must build, verify, print to
//! text that parses back to the same module, and evaluate without error
//! (other than the 1 MiB memory limit).
//! Wild mode (hostile shapes and attributes): building must fail with an
//! error or succeed, and whatever builds must verify and evaluate under
//! small limits to a value or an error. Nothing may panic.
#![no_main]

use arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use oxla_interp::{EvalError, EvalOptions, NoServices, evaluate};
use oxla_testgen::{Options, generate};

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let wild = u.arbitrary::<u8>().unwrap_or(0) & 1 == 1;
    let options = Options {
        max_ops: 24,
        max_depth: 2,
        wild,
    };
    let Ok(generated) = generate(&mut u, &options) else {
        return;
    };
    let computation = match generated.built {
        Ok(c) => c,
        Err(e) if wild => {
            assert!(!e.to_string().is_empty());
            return;
        }
        Err(e) => panic!("a valid-mode computation did not build: {e}"),
    };
    let module = computation.module();
    if let Err(e) = oxla_hlo::verifier::verify(module) {
        panic!("a built module does not verify: {e}");
    }
    let printed = oxla_text::print_module(module);
    match oxla_text::parse_module(&printed) {
        Ok(parsed) => assert!(
            parsed == *module,
            "round trip changed the module:\n{printed}"
        ),
        Err(e) => panic!("a built module does not parse back: {e}\n{printed}"),
    }
    let eval = EvalOptions::with_seed(1)
        .while_iteration_limit(64)
        .max_array_bytes(1 << 20);
    let result = evaluate(module, &generated.args, &eval, &NoServices);
    // Valid computations evaluate, unless they outgrow the small memory limit.
    if !wild
        && let Err(e) = result
        && !matches!(e, EvalError::MemoryLimit { .. })
    {
        panic!("a valid-mode computation failed to evaluate: {e}\n{printed}");
    }
});
