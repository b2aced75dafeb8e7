//! Prints how the CPU backend compiles an HLO module: which kernel computes
//! each value, and which operations fall back to the interpreter.
//!
//! `cargo run --release -p oxla-cpu --example describe -- MODULE.hlo`

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: describe MODULE.hlo");
        std::process::exit(2);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("cannot read {path}: {e}");
            std::process::exit(1);
        }
    };
    let module = match oxla_text::parse_module(&text) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    };
    match oxla_cpu::compile(&module) {
        Ok(exe) => print!("{}", exe.describe()),
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    }
}
