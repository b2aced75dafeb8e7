//! HLO text: any bytes either fail to parse with an error or give a module;
//! the verifier copes with whatever parses; a module prints to text that
//! parses back to an equal module, and printing is a fixed point.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oxla_text::{parse_module, parse_module_unverified, print_module};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(module) = parse_module_unverified(&text) else {
        assert!(parse_module(&text).is_err());
        return;
    };
    let verified = oxla_hlo::verifier::verify(&module).is_ok();
    assert_eq!(parse_module(&text).is_ok(), verified);
    let printed = print_module(&module);
    let again = parse_module_unverified(&printed)
        .unwrap_or_else(|e| panic!("printed module does not parse: {e}\n{printed}"));
    assert!(again == module, "round trip changed the module:\n{printed}");
    assert_eq!(print_module(&again), printed);
});
