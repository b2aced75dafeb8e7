//! HLO text run end to end as `oxla run` runs it, on the interpreter: parse
//! and verify, make random arguments (within the memory limit), evaluate
//! with a while-iteration limit and a memory limit. Every step may fail with
//! an error; none may panic, hang or allocate past the limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oxla_interp::{EvalOptions, NoServices, evaluate};

const MEMORY_LIMIT: u64 = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(module) = oxla_text::parse_module(&text) else {
        return;
    };
    let Ok(args) = oxla_cli::arguments::entry_arguments(&module, &[], 7, MEMORY_LIMIT) else {
        return;
    };
    let options = EvalOptions::with_seed(3)
        .while_iteration_limit(1000)
        .max_array_bytes(MEMORY_LIMIT);
    let _ = evaluate(&module, &args, &options, &NoServices);
});
