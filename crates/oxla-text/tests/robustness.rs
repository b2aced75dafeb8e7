//! Deterministic mutation fuzzing: corrupted versions of real modules must
//! give an error or a module, never a panic; and any module that does
//! parse must print back to text that parses to an equal module. (A
//! cargo-fuzz target can take over later; this keeps a regression net in
//! `cargo test`.)

use std::path::Path;

use oxla_text::{parse_module_unverified, print_module};

/// xorshift64: small, seedable, and good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Fragments that tend to reach deep into the grammar when spliced in.
const PIECES: &[&str] = &[
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    ",",
    "=",
    "-",
    "0",
    "99999999999999999999",
    "-1",
    "nan(0x1)",
    "inf",
    "/*",
    "*/",
    "\"",
    "\\",
    "%",
    "ROOT",
    "ENTRY",
    "f32[]",
    "(f32[], s32[])",
    "{...}",
    "<=",
    "?",
    "x",
    "_",
    "->",
    "1_2",
    "3x3",
    "b01f_01io->b01f",
    "token[]",
    "f32[2]{0}",
    "\n",
    " ",
    "tuple",
    "add",
    "parameter(0)",
    "constant(1)",
    ", dimensions={0}",
    ", to_apply=%x",
    "{1,0:T(2)}",
    "1e400",
    "-0",
    "\u{e9}",
    "\0",
    "HloModule",
    "FileNames",
];

fn mutate(rng: &mut Rng, text: &str) -> String {
    let mut b = text.as_bytes().to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = b.len();
        match rng.below(6) {
            0 => {
                let i = rng.below(len + 1);
                let j = (i + rng.below(20)).min(len);
                b.drain(i..j);
            }
            1 => {
                let i = rng.below(len + 1);
                let piece = PIECES[rng.below(PIECES.len())];
                b.splice(i..i, piece.bytes());
            }
            2 => {
                let i = rng.below(len + 1);
                let j = (i + rng.below(60)).min(len);
                let k = rng.below(len + 1);
                let chunk = b[i..j].to_vec();
                b.splice(k..k, chunk);
            }
            3 => b.truncate(rng.below(len + 1)),
            4 if len > 0 => {
                let i = rng.below(len);
                b[i] = b"0123456789{}(),=%-x_.:"[rng.below(22)];
            }
            _ if len > 1 => {
                let i = rng.below(len - 1);
                b.swap(i, i + 1);
            }
            _ => {}
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

fn seeds() -> Vec<String> {
    let mut out = vec![
        "HloModule m\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT r = f32[] add(a, b)\n}\n\nENTRY e {\n  p = f32[2,3]{1,0} parameter(0)\n  z = f32[] constant(0)\n  c = f32[2]{0} constant({1, -0})\n  r = f32[2]{0} reduce(p, z), dimensions={1}, to_apply=add\n  ROOT t = (f32[2]{0}, f32[2]{0}) tuple(r, c)\n}\n".to_string(),
    ];
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/conformance/stablehlo-interpret");
    if let Ok(entries) = std::fs::read_dir(dir) {
        let mut files: Vec<_> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path().join("module.hlo"))
            .collect();
        files.sort();
        out.extend(files.iter().filter_map(|f| std::fs::read_to_string(f).ok()));
    }
    out
}

#[test]
fn mutated_modules_never_panic_and_round_trip() {
    let seeds = seeds();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut parsed = 0;
    for _ in 0..30_000 {
        let seed = &seeds[rng.below(seeds.len())];
        let text = mutate(&mut rng, seed);
        let Ok(module) = parse_module_unverified(&text) else {
            continue;
        };
        parsed += 1;
        // The verifier must cope with whatever the parser accepts.
        let _ = oxla_hlo::verifier::verify(&module);
        let printed = print_module(&module);
        let again = parse_module_unverified(&printed)
            .unwrap_or_else(|e| panic!("{e}\n--- printed ---\n{printed}\n--- from ---\n{text}"));
        assert!(
            again == module,
            "round trip changed the module:\n{printed}\n--- from ---\n{text}"
        );
        assert_eq!(print_module(&again), printed);
    }
    // Some mutants must survive, or the test checks nothing.
    assert!(parsed > 100, "only {parsed} mutants parsed");
}
