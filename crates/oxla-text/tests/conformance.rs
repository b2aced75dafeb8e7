//! Every module of the conformance corpus (and of the JAX fixtures, when
//! present) must parse and verify, print back to text that parses to an
//! equal module, and print identically the second time. The few modules
//! oxla cannot take yet are listed by name with the reason, so the test
//! notices both new failures and fixed ones.

use std::path::{Path, PathBuf};

use oxla_text::{parse_module_unverified, print_module};

/// `dir/*/module.hlo` under the crate directory, sorted; `None` if `dir` is absent.
fn corpus(relative: &str) -> Option<Vec<PathBuf>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    let entries = std::fs::read_dir(&dir).ok()?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("module.hlo"))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    Some(files)
}

fn case_name(path: &Path) -> String {
    let dir = path.parent().and_then(Path::file_name).unwrap_or_default();
    dir.to_string_lossy().into_owned()
}

/// What happened to each module that did not make it all the way.
#[derive(Default)]
struct Outcome {
    total: usize,
    /// Cases that do not parse, with the error.
    unparsed: Vec<(String, String)>,
    /// Cases that parse but do not verify, with the first verifier message.
    unverified: Vec<(String, String)>,
    /// Round-trip failures (always a bug in oxla-text).
    round_trip: Vec<String>,
}

fn run(files: &[PathBuf]) -> Outcome {
    let mut out = Outcome {
        total: files.len(),
        ..Outcome::default()
    };
    for path in files {
        let name = case_name(path);
        let text = std::fs::read_to_string(path).unwrap();
        let first = match parse_module_unverified(&text) {
            Ok(m) => m,
            Err(e) => {
                out.unparsed.push((name, e.to_string()));
                continue;
            }
        };
        if let Err(e) = oxla_hlo::verifier::verify(&first) {
            out.unverified.push((name.clone(), e.0[0].to_string()));
        }
        let printed = print_module(&first);
        match parse_module_unverified(&printed) {
            Err(e) => out.round_trip.push(format!(
                "{name}: printed text does not parse: {e}\n{printed}"
            )),
            Ok(second) if second != first => out.round_trip.push(format!(
                "{name}: the module changed in a round trip\n{printed}"
            )),
            Ok(second) => {
                let reprinted = print_module(&second);
                if reprinted != printed {
                    out.round_trip.push(format!(
                        "{name}: printing is not a fixed point\n{printed}\n---\n{reprinted}"
                    ));
                }
            }
        }
    }
    out
}

fn report(set: &str, o: &Outcome) {
    let ok = o.total - o.unparsed.len() - o.unverified.len();
    println!("{set}: {ok} of {} modules parse and verify", o.total);
    for (name, e) in &o.unparsed {
        println!("  does not parse: {name}: {e}");
    }
    for (name, e) in &o.unverified {
        println!("  does not verify: {name}: {e}");
    }
    for f in &o.round_trip {
        println!("  ROUND TRIP FAILED: {f}");
    }
}

fn names(v: &[(String, String)]) -> Vec<&str> {
    v.iter().map(|(n, _)| n.as_str()).collect()
}

#[test]
fn stablehlo_interpret_corpus_round_trips() {
    let Some(files) = corpus("../../../shared/conformance/stablehlo-interpret") else {
        println!("note: ../shared/conformance/stablehlo-interpret is absent; skipped");
        return;
    };
    let o = run(&files);
    report("stablehlo-interpret", &o);
    assert_eq!(o.total, 413);
    assert!(
        o.round_trip.is_empty(),
        "{} round-trip failures",
        o.round_trip.len()
    );
    assert_eq!(names(&o.unparsed), Vec::<&str>::new());
    assert_eq!(names(&o.unverified), Vec::<&str>::new());
}

#[test]
fn jax_fixtures_round_trip() {
    let Some(files) = corpus("../../tests/fixtures/jax") else {
        println!("note: tests/fixtures/jax is absent; skipped");
        return;
    };
    let o = run(&files);
    report("tests/fixtures/jax", &o);
    assert!(
        o.round_trip.is_empty(),
        "{} round-trip failures",
        o.round_trip.len()
    );
    assert_eq!(names(&o.unparsed), Vec::<&str>::new());
    assert_eq!(names(&o.unverified), Vec::<&str>::new());
}

/// With `OXLA_DUMP_PRINTED=DIR`, writes oxla's printing of every corpus
/// module to `DIR/<set>/<case>.hlo` for `tests/xla_accepts.py`, which checks
/// that XLA's own parser accepts them. Without the variable it does nothing.
#[test]
fn dump_printed_modules_for_xla() {
    let Some(dir) = std::env::var_os("OXLA_DUMP_PRINTED") else {
        return;
    };
    let dir = PathBuf::from(dir);
    let sets = [
        (
            "stablehlo-interpret",
            corpus("../../../shared/conformance/stablehlo-interpret"),
        ),
        ("jax", corpus("../../tests/fixtures/jax")),
    ];
    let mut written = 0;
    for (set, files) in &sets {
        let Some(files) = files else { continue };
        let out = dir.join(set);
        std::fs::create_dir_all(&out).unwrap();
        for path in files {
            let text = std::fs::read_to_string(path).unwrap();
            let Ok(module) = parse_module_unverified(&text) else {
                continue;
            };
            let file = out.join(format!("{}.hlo", case_name(path)));
            std::fs::write(file, print_module(&module)).unwrap();
            written += 1;
        }
    }
    println!("wrote {written} printed modules to {}", dir.display());
}
