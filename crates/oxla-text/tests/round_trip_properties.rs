//! Printing then parsing any module gives the same module, and printing is a
//! fixed point: checked on random valid computations that `oxla-testgen`
//! decodes from bytes (sequences of builder calls with random shapes and
//! attributes, nested computations included). `robustness.rs` checks the
//! same on mutated text; this checks it on everything the builder makes.

use arbitrary::Unstructured;
use oxla_testgen::{Options, generate};
use oxla_text::{parse_module, print_module};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn printing_then_parsing_gives_the_same_module(
        bytes in prop::collection::vec(any::<u8>(), 0..3000)
    ) {
        let mut u = Unstructured::new(&bytes);
        let generated = generate(&mut u, &Options::default()).expect("generation never fails");
        let computation = generated.built.expect("valid-mode computations build");
        let module = computation.module();
        let printed = print_module(module);
        let parsed = parse_module(&printed)
            .unwrap_or_else(|e| panic!("printed module does not parse: {e}\n{printed}"));
        prop_assert!(parsed == *module, "round trip changed the module:\n{}", printed);
        prop_assert_eq!(print_module(&parsed), printed);
    }
}
