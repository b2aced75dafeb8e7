//! HLO text compiled and run on the CPU backend beside the interpreter:
//! parse and verify, random arguments within a 1 MiB memory limit, then
//! both backends with a while limit. Either may fail with an error; neither
//! may panic or hang; when both succeed, results without floats (integers,
//! predicates) must be equal bit for bit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oxla_hlo::{Literal, PrimitiveType};
use oxla_interp::{EvalOptions, NoServices, evaluate};

const MEMORY_LIMIT: u64 = 1 << 20;

fn exact(l: &Literal) -> bool {
    l.leaves().iter().all(|a| {
        !matches!(
            a.element_type(),
            PrimitiveType::F16
                | PrimitiveType::BF16
                | PrimitiveType::F32
                | PrimitiveType::F64
                | PrimitiveType::C64
                | PrimitiveType::C128
        )
    })
}

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
    let Ok(exe) = oxla_cpu::compile(&module) else {
        return;
    };
    let got = exe.execute(&args, &options, &NoServices);
    if let (Ok(got), Ok(want)) = (got, evaluate(&module, &args, &options, &NoServices))
        && exact(&want)
    {
        assert!(got.bitwise_eq(&want), "cpu {got} vs interpreter {want}\n{text}");
    }
});
