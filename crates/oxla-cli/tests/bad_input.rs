//! What `oxla run` says about each class of bad input: exit status 1 and
//! exactly one line on stderr. `docs/bad-input.md` quotes these lines; keep
//! the two in step.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Writes `files` into a fresh directory, runs `oxla ARGS` there, and
/// returns the exit status and the single line it printed on stderr.
fn oxla(files: &[(&str, &[u8])], args: &[&str]) -> (i32, String) {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir: PathBuf = std::env::temp_dir().join(format!(
        "oxla-bad-input-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_oxla"))
        .args(args)
        .current_dir(&dir)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8(out.stderr).unwrap();
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "expected one line on stderr, got:\n{stderr}"
    );
    (out.status.code().unwrap_or(-1), lines[0].to_string())
}

/// `oxla run m.hlo ARGS` on `module` (and more files); asserts exit status 1.
#[track_caller]
fn run_error(module: &str, files: &[(&str, &[u8])], args: &[&str]) -> String {
    let mut all = vec![("m.hlo", module.as_bytes())];
    all.extend_from_slice(files);
    let mut argv = vec!["run", "m.hlo"];
    argv.extend_from_slice(args);
    let (status, line) = oxla(&all, &argv);
    assert_eq!(status, 1, "{line}");
    line
}

fn entry(body: &str) -> String {
    format!("HloModule m\n\nENTRY e {{\n{body}\n}}\n")
}

/// A version-1 `.npy` file with the given header dict and data.
fn npy(header: &str, data: &[u8]) -> Vec<u8> {
    let mut text = header.to_string();
    while !(10 + text.len() + 1).is_multiple_of(64) {
        text.push(' ');
    }
    text.push('\n');
    let mut v = b"\x93NUMPY\x01\x00".to_vec();
    v.extend_from_slice(&(text.len() as u16).to_le_bytes());
    v.extend_from_slice(text.as_bytes());
    v.extend_from_slice(data);
    v
}

const NEG2: &str = "  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(p)";

#[test]
fn missing_file() {
    let (status, line) = oxla(&[], &["run", "nope.hlo"]);
    assert_eq!(status, 1);
    assert_eq!(
        line,
        "error: cannot read nope.hlo: No such file or directory (os error 2)"
    );
}

#[test]
fn not_utf8() {
    let (status, line) = oxla(&[("m.hlo", b"HloModule \xff\xfe")], &["run", "m.hlo"]);
    assert_eq!(status, 1);
    assert_eq!(
        line,
        "error: cannot read m.hlo: stream did not contain valid UTF-8"
    );
}

#[test]
fn malformed_text() {
    let line = run_error(
        "HloModule m\n\nENTRY e {\n  ROOT x = f32[] constant(1\n}\n",
        &[],
        &[],
    );
    assert_eq!(
        line,
        "error: m.hlo:5:1: expected ')' after the literal, found '}'"
    );
}

#[test]
fn unknown_opcode() {
    let line = run_error(&entry("  ROOT x = f32[] frobnicate()"), &[], &[]);
    assert_eq!(line, "error: m.hlo:4:18: unknown opcode frobnicate");
}

#[test]
fn wrong_attribute() {
    let line = run_error(
        &entry("  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(p), dimensions={0}"),
        &[],
        &[],
    );
    assert_eq!(
        line,
        "error: m.hlo:5:30: unexpected attribute dimensions for negate"
    );
}

#[test]
fn out_of_range_attribute() {
    let line = run_error(
        &entry("  p = f32[2] parameter(0)\n  ROOT b = f32[2,3] broadcast(p), dimensions={5}"),
        &[],
        &[],
    );
    assert_eq!(
        line,
        "error: m.hlo: the module does not verify: in e, instruction b: broadcast: dimensions [5] contains 5, which is not a dimension of a rank-2 array"
    );
}

#[test]
fn shape_mismatch() {
    let line = run_error(
        &entry("  a = f32[2] parameter(0)\n  b = f32[3] parameter(1)\n  ROOT s = f32[2] add(a, b)"),
        &[],
        &[],
    );
    assert_eq!(
        line,
        "error: m.hlo: the module does not verify: in e, instruction s: add: operands must have the same dimensions, got f32[2] and f32[3]"
    );
}

#[test]
fn declared_shape_differs_from_inferred() {
    let line = run_error(
        &entry("  p = f32[2] parameter(0)\n  ROOT n = f32[3] negate(p)"),
        &[],
        &[],
    );
    assert_eq!(
        line,
        "error: m.hlo: the module does not verify: in e, instruction n: declared shape f32[3] differs from the inferred shape f32[2]"
    );
}

#[test]
fn overflowing_shape() {
    let line = run_error(
        &entry("  ROOT p = f32[9223372036854775807,2] parameter(0)"),
        &[],
        &[],
    );
    assert_eq!(
        line,
        "error: m.hlo:4:12: the byte size of f32[9223372036854775807,2] overflows"
    );
}

#[test]
fn too_deeply_nested_text() {
    let mut shape = "f32[]".to_string();
    for _ in 0..300 {
        shape = format!("({shape})");
    }
    let line = run_error(
        &entry(&format!("  ROOT p = {shape} parameter(0)")),
        &[],
        &[],
    );
    assert_eq!(
        line,
        "error: m.hlo:4:268: nesting is too deep (more than 256 levels)"
    );
}

#[test]
fn huge_parameter() {
    let line = run_error(
        &entry("  ROOT p = f32[1000000000000] parameter(0)"),
        &[],
        &[],
    );
    assert_eq!(
        line,
        "error: entry parameter 0 has an array of shape f32[1000000000000] (4000000000000 bytes), more than the memory limit of 4294967296 bytes"
    );
}

#[test]
fn huge_intermediate() {
    let line = run_error(
        &entry(
            "  p = f32[] parameter(0)\n  ROOT b = f32[1000000,1000000] broadcast(p), dimensions={}",
        ),
        &[],
        &[],
    );
    assert_eq!(
        line,
        "error: in computation `e`, instruction `b` (broadcast): the result array f32[1000000,1000000] needs 4000000000000 bytes, more than the memory limit of 4294967296 bytes"
    );
}

#[test]
fn memory_limit_flag() {
    let line = run_error(
        &entry("  p = f32[] parameter(0)\n  ROOT b = f32[1000] broadcast(p), dimensions={}"),
        &[],
        &["--memory-limit", "1K"],
    );
    assert_eq!(
        line,
        "error: in computation `e`, instruction `b` (broadcast): the result array f32[1000] needs 4000 bytes, more than the memory limit of 1024 bytes"
    );
}

#[test]
fn runaway_loop() {
    let module = "HloModule m\n\ncond {\n  s = s32[] parameter(0)\n  ROOT t = pred[] constant(true)\n}\n\nbody {\n  s = s32[] parameter(0)\n  one = s32[] constant(1)\n  ROOT n = s32[] add(s, one)\n}\n\nENTRY e {\n  z = s32[] constant(0)\n  ROOT w = s32[] while(z), condition=cond, body=body\n}\n";
    let line = run_error(module, &[], &["--while-limit", "1000"]);
    assert_eq!(
        line,
        "error: in computation `e`, instruction `w` (while): the loop exceeded the iteration limit of 1000"
    );
}

#[test]
fn deep_call_chain() {
    let mut t = String::from(
        "HloModule deep\n\nc0 {\n  p = f32[] parameter(0)\n  ROOT r = f32[] negate(p)\n}\n\n",
    );
    for k in 1..=10_000 {
        t.push_str(&format!(
            "c{k} {{\n  p = f32[] parameter(0)\n  ROOT r = f32[] call(p), to_apply=c{}\n}}\n\n",
            k - 1
        ));
    }
    t.push_str(
        "ENTRY e {\n  p = f32[] parameter(0)\n  ROOT r = f32[] call(p), to_apply=c10000\n}\n",
    );
    // The interpreter runs calls as calls, and stops at its depth limit
    // (as written: XLA's rewrites, on by default, inline calls first).
    let line = run_error(&t, &[], &["--backend", "interp", "--as-written"]);
    assert_eq!(
        line,
        "error: in computation `c9937`, instruction `r` (call): calls nest more than 64 levels deep"
    );
    // The CPU backend inlines the chain into one negation, as XLA does.
    let dir = std::env::temp_dir().join(format!("oxla-deep-call-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("m.hlo"), &t).unwrap();
    let x = npy(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (), }",
        &1.5f32.to_le_bytes(),
    );
    std::fs::write(dir.join("x.npy"), x).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_oxla"))
        .args(["run", "m.hlo", "--input", "x.npy"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "f32[] -1.5");
}

#[test]
fn missing_custom_call() {
    let line = run_error(
        &entry(
            "  p = f32[2] parameter(0)\n  ROOT c = f32[2] custom-call(p), custom_call_target=\"my_kernel\"",
        ),
        &[],
        &[],
    );
    assert_eq!(
        line,
        "error: compile: custom-call `c` in e calls the target `my_kernel`, which is not registered"
    );
}

#[test]
fn lapack_call_with_a_bad_attribute() {
    let line = run_error(
        &entry(
            "  a = f32[2,2] constant({{4, 2}, {2, 5}})\n  ROOT c = (f32[2,2], s32[]) custom-call(a), custom_call_target=\"lapack_spotrf_ffi\", backend_config={uplo = 88 : ui8}",
        ),
        &[],
        &[],
    );
    assert_eq!(
        line,
        "error: in computation `e`, instruction `c` (custom-call): `lapack_spotrf_ffi`: uplo = 88 ('X') is not one LAPACK accepts"
    );
}

#[test]
fn infeed_without_data() {
    let line = run_error(
        &entry(
            "  t = token[] after-all()\n  i = (f32[2], token[]) infeed(t)\n  ROOT x = f32[2] get-tuple-element(i), index=0",
        ),
        &[],
        &[],
    );
    assert_eq!(
        line,
        "error: in computation `e`, instruction `i` (infeed): infeed: the infeed queue of replica 0 stayed empty for 0ns (a value of shape f32[2] was requested)"
    );
}

#[test]
fn wrong_number_of_inputs() {
    let x = npy(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
        &[0; 8],
    );
    let line = run_error(
        &entry(NEG2),
        &[("x.npy", &x)],
        &["--input", "x.npy", "--input", "x.npy"],
    );
    assert_eq!(
        line,
        "error: the module takes 1 input arrays (parameter leaves) but 2 --input files were given"
    );
}

#[test]
fn bad_npy() {
    let line = run_error(
        &entry(NEG2),
        &[("x.npy", b"not an npy file")],
        &["--input", "x.npy"],
    );
    assert_eq!(
        line,
        "error: x.npy is not a valid .npy file: it does not start with the .npy magic string"
    );
}

#[test]
fn npy_of_the_wrong_shape() {
    let x = npy(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
        &[0; 12],
    );
    let line = run_error(&entry(NEG2), &[("x.npy", &x)], &["--input", "x.npy"]);
    assert_eq!(
        line,
        "error: x.npy: has shape [3] but the parameter is f32[2]"
    );
}

#[test]
fn npy_of_the_wrong_type() {
    let x = npy(
        "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }",
        &[0; 8],
    );
    let line = run_error(&entry(NEG2), &[("x.npy", &x)], &["--input", "x.npy"]);
    assert_eq!(line, "error: x.npy: holds <i4 data where f32 is expected");
}

#[test]
fn truncated_npy() {
    let x = npy(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
        &[0; 5],
    );
    let line = run_error(&entry(NEG2), &[("x.npy", &x)], &["--input", "x.npy"]);
    assert_eq!(
        line,
        "error: x.npy: holds 5 bytes of data but shape [2] needs 8"
    );
}

#[test]
fn npy_with_an_overflowing_shape() {
    let x = npy(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
        &[],
    );
    let line = run_error(&entry(NEG2), &[("x.npy", &x)], &["--input", "x.npy"]);
    assert_eq!(
        line,
        "error: x.npy is not a valid .npy file: its shape [4294967296, 4294967296] has more elements than fit in 64 bits"
    );
}

#[test]
fn npy_with_a_huge_header_length() {
    let mut x = b"\x93NUMPY\x02\x00".to_vec();
    x.extend_from_slice(&u32::MAX.to_le_bytes());
    let line = run_error(&entry(NEG2), &[("x.npy", &x)], &["--input", "x.npy"]);
    assert_eq!(
        line,
        "error: x.npy is not a valid .npy file: its header is 4294967295 bytes long, more than the 65536 accepted"
    );
}

#[test]
fn usage_errors_exit_with_status_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_oxla"))
        .args(["run", "m.hlo", "--memory-limit", "4X"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        stderr.lines().next(),
        Some(
            "error: invalid value '4X' for '--memory-limit <BYTES>': `4X` is not a byte count (a number with an optional K, M or G suffix)"
        )
    );
}
