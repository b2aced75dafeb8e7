//! The conformance suite, written once and run on every backend: a corpus
//! is one folder per case (`module.hlo`, `in*.npy`, `out*.npy`, `meta.json`;
//! the layout of `shared/conformance/stablehlo-interpret` and of the JAX
//! fixtures); each case runs through a backend given as a closure and is
//! compared with
//! the rule of `shared/tools/check_corpus.py`: exact for integers, pred and
//! "eq"; otherwise `|a - e| <= atol + rtol * |e|` or within `max_ulp`; NaN
//! matches NaN; complex parts compared separately; bf16 stored as u16 bits.

use std::path::{Path, PathBuf};

use half::{bf16, f16};
use num_complex::{Complex32, Complex64};
use oxla_hlo::HloModule;
use oxla_hlo::{ArrayData, ArrayLiteral, ArrayShape, Literal, PrimitiveType, Scalar};
use serde_json::Value as Json;

/// Reads an .npy file as an array of XLA type `ty` (bf16 from u16 bits).
pub fn read_npy(path: &Path, ty: PrimitiveType) -> Result<ArrayLiteral, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let npy = npyz::NpyFile::new(&bytes[..]).map_err(|e| format!("{}: {e}", path.display()))?;
    if npy.order() != npyz::Order::C {
        return Err(format!(
            "{}: Fortran order is not supported",
            path.display()
        ));
    }
    let dims: Vec<i64> = npy.shape().iter().map(|&d| d as i64).collect();
    if let npyz::DType::Plain(t) = npy.dtype()
        && t.endianness() == npyz::Endianness::Big
    {
        return Err(format!("{}: big-endian data", path.display()));
    }
    let raw: &[u8] = npy.into_inner();
    let shape = ArrayShape::new(ty, dims).map_err(|e| e.to_string())?;
    let n = shape.element_count().map_err(|e| e.to_string())?;
    let size = ty.byte_size();
    if raw.len() < n * size {
        return Err(format!(
            "{}: {} bytes of data, expected {}",
            path.display(),
            raw.len(),
            n * size
        ));
    }
    // `chunks_exact(size)` gives slices of exactly `size` bytes, so the
    // array conversions below cannot fail.
    let chunks = raw[..n * size].chunks_exact(size);
    macro_rules! le {
        ($t:ty) => {
            chunks
                .map(|c| <$t>::from_le_bytes(c.try_into().unwrap()))
                .collect()
        };
    }
    let data = match ty {
        PrimitiveType::Pred => ArrayData::Pred(chunks.map(|c| c[0] != 0).collect()),
        PrimitiveType::S8 => ArrayData::S8(le!(i8)),
        PrimitiveType::S16 => ArrayData::S16(le!(i16)),
        PrimitiveType::S32 => ArrayData::S32(le!(i32)),
        PrimitiveType::S64 => ArrayData::S64(le!(i64)),
        PrimitiveType::U8 => ArrayData::U8(le!(u8)),
        PrimitiveType::U16 => ArrayData::U16(le!(u16)),
        PrimitiveType::U32 => ArrayData::U32(le!(u32)),
        PrimitiveType::U64 => ArrayData::U64(le!(u64)),
        PrimitiveType::F16 => ArrayData::F16(
            chunks
                .map(|c| f16::from_bits(u16::from_le_bytes(c.try_into().unwrap())))
                .collect(),
        ),
        PrimitiveType::BF16 => ArrayData::BF16(
            chunks
                .map(|c| bf16::from_bits(u16::from_le_bytes(c.try_into().unwrap())))
                .collect(),
        ),
        PrimitiveType::F32 => ArrayData::F32(le!(f32)),
        PrimitiveType::F64 => ArrayData::F64(le!(f64)),
        PrimitiveType::C64 => ArrayData::C64(
            chunks
                .map(|c| {
                    Complex32::new(
                        f32::from_le_bytes(c[..4].try_into().unwrap()),
                        f32::from_le_bytes(c[4..].try_into().unwrap()),
                    )
                })
                .collect(),
        ),
        PrimitiveType::C128 => ArrayData::C128(
            chunks
                .map(|c| {
                    Complex64::new(
                        f64::from_le_bytes(c[..8].try_into().unwrap()),
                        f64::from_le_bytes(c[8..].try_into().unwrap()),
                    )
                })
                .collect(),
        ),
    };
    ArrayLiteral::new(shape, data).map_err(|e| e.to_string())
}

/// How one output is checked (check_corpus.py's `output_spec`).
#[derive(Debug)]
pub struct Spec {
    pub check: String,
    pub rtol: f64,
    pub atol: f64,
    pub max_ulp: Option<f64>,
    pub dtype: String,
}

fn num(v: Option<&Json>) -> Option<f64> {
    v.and_then(Json::as_f64)
}

pub fn output_spec(meta: &Json, i: usize) -> Spec {
    let top = meta
        .get("check")
        .and_then(Json::as_str)
        .unwrap_or("eq")
        .to_string();
    let mut spec = Spec {
        check: if top == "values" {
            "eq".into()
        } else {
            top.clone()
        },
        rtol: num(meta.get("rtol")).unwrap_or(0.0),
        atol: num(meta.get("atol")).unwrap_or(0.0),
        max_ulp: num(meta.get("max_ulp")),
        dtype: String::new(),
    };
    if let Some(o) = meta
        .get("outputs")
        .and_then(Json::as_array)
        .and_then(|o| o.get(i))
    {
        if let Some(c) = o.get("check").and_then(Json::as_str) {
            spec.check = c.to_string();
        }
        if let Some(v) = num(o.get("rtol")) {
            spec.rtol = v;
        }
        if let Some(v) = num(o.get("atol")) {
            spec.atol = v;
        }
        if let Some(v) = num(o.get("max_ulp")) {
            spec.max_ulp = Some(v);
        }
        if let Some(t) = o.get("tolerance").filter(|t| t.is_object()) {
            if t.get("kind").and_then(Json::as_str) == Some("exact") {
                spec.check = "eq".into();
            } else {
                spec.check = "close".into();
                spec.rtol = num(t.get("rtol")).unwrap_or(0.0);
                spec.atol = num(t.get("atol")).unwrap_or(0.0);
            }
        }
        spec.dtype = o
            .get("hlo_type")
            .or_else(|| o.get("dtype"))
            .and_then(Json::as_str)
            .unwrap_or("")
            .to_string();
    }
    if top == "shape_only" {
        spec.check = "shape_only".into();
    }
    spec
}

/// Position of a float's bit pattern in value order (check_corpus.py's `_ordered`).
fn ordered(bits: u64, width: u32) -> f64 {
    let sign = 1u64 << (width - 1);
    let mag = (bits & (sign - 1)) as f64;
    if bits & sign != 0 { -mag } else { mag }
}

/// (value, bits, width) of each real part of element `i`.
fn float_parts(a: &ArrayLiteral, i: usize) -> Vec<(f64, u64, u32)> {
    match a.data() {
        ArrayData::F16(v) => vec![(v[i].to_f64(), v[i].to_bits() as u64, 16)],
        ArrayData::BF16(v) => vec![(v[i].to_f64(), v[i].to_bits() as u64, 16)],
        ArrayData::F32(v) => vec![(v[i] as f64, v[i].to_bits() as u64, 32)],
        ArrayData::F64(v) => vec![(v[i], v[i].to_bits(), 64)],
        ArrayData::C64(v) => vec![
            (v[i].re as f64, v[i].re.to_bits() as u64, 32),
            (v[i].im as f64, v[i].im.to_bits() as u64, 32),
        ],
        ArrayData::C128(v) => vec![
            (v[i].re, v[i].re.to_bits(), 64),
            (v[i].im, v[i].im.to_bits(), 64),
        ],
        _ => vec![],
    }
}

/// Compares `actual` with `expected` under `spec`; `Err` describes the first difference.
pub fn compare(actual: &ArrayLiteral, expected: &ArrayLiteral, spec: &Spec) -> Result<(), String> {
    if actual.dims() != expected.dims() {
        return Err(format!(
            "shape {:?} != expected {:?}",
            actual.dims(),
            expected.dims()
        ));
    }
    if actual.element_type() != expected.element_type() {
        return Err(format!(
            "type {} != expected {}",
            actual.element_type(),
            expected.element_type()
        ));
    }
    if spec.check == "shape_only" {
        return Ok(());
    }
    let ty = actual.element_type();
    let n = actual.element_count();
    let mut bad = 0;
    let mut first = None;
    for i in 0..n {
        let ok = if ty.is_floating() {
            float_parts(actual, i)
                .iter()
                .zip(float_parts(expected, i))
                .all(|(&(a, ab, w), (e, eb, _))| {
                    if (a.is_nan() && e.is_nan()) || a == e {
                        return true;
                    }
                    if spec.check == "eq" || !a.is_finite() || !e.is_finite() {
                        return false;
                    }
                    (a - e).abs() <= spec.atol + spec.rtol * e.abs()
                        || spec
                            .max_ulp
                            .is_some_and(|m| (ordered(ab, w) - ordered(eb, w)).abs() <= m)
                })
        } else {
            actual.data().scalar(i) == expected.data().scalar(i)
        };
        if !ok {
            bad += 1;
            first.get_or_insert(i);
        }
    }
    match first {
        None => Ok(()),
        Some(i) => Err(format!(
            "{bad}/{n} elements differ ({}, rtol={}, atol={}, max_ulp={:?}), first at {i}: {} vs expected {}",
            spec.check,
            spec.rtol,
            spec.atol,
            spec.max_ulp,
            show(actual.data().scalar(i)),
            show(expected.data().scalar(i)),
        )),
    }
}

fn show(s: Scalar) -> String {
    match s {
        Scalar::Float(f) => format!("{f:e}"),
        Scalar::Complex(a, b) => format!("({a:e}, {b:e})"),
        other => format!("{other:?}"),
    }
}

fn type_of(name: &str) -> Result<PrimitiveType, String> {
    name.parse::<PrimitiveType>().map_err(|e| e.to_string())
}

/// A backend under test: the module and the arguments in, the result out.
pub type Backend<'a> = dyn Fn(&HloModule, &[Literal]) -> Result<Literal, String> + Sync + 'a;

/// Runs one case; `Err` says why it failed.
pub fn run_case(dir: &Path, backend: &Backend<'_>) -> Result<(), String> {
    let meta: Json = serde_json::from_str(
        &std::fs::read_to_string(dir.join("meta.json")).map_err(|e| e.to_string())?,
    )
    .map_err(|e| format!("meta.json: {e}"))?;
    let text = std::fs::read_to_string(dir.join("module.hlo")).map_err(|e| e.to_string())?;
    let module = oxla_text::parse_module(&text)
        .map_err(|e| format!("parse: {}", e.to_string().lines().next().unwrap_or("")))?;
    let inputs = meta
        .get("inputs")
        .and_then(Json::as_array)
        .cloned()
        .unwrap_or_default();
    let mut args = Vec::new();
    for (i, input) in inputs.iter().enumerate() {
        let ty = type_of(input.get("dtype").and_then(Json::as_str).unwrap_or(""))?;
        args.push(Literal::Array(read_npy(
            &dir.join(format!("in{i}.npy")),
            ty,
        )?));
    }
    let result = backend(&module, &args).map_err(|e| format!("eval: {e}"))?;
    let leaves = result.leaves();
    let outputs = meta
        .get("outputs")
        .and_then(Json::as_array)
        .cloned()
        .unwrap_or_default();
    if leaves.len() != outputs.len() {
        return Err(format!(
            "{} outputs, expected {}",
            leaves.len(),
            outputs.len()
        ));
    }
    for (i, actual) in leaves.iter().enumerate() {
        let spec = output_spec(&meta, i);
        let ty = type_of(&spec.dtype)?;
        let expected = read_npy(&dir.join(format!("out{i}.npy")), ty)?;
        compare(actual, &expected, &spec).map_err(|e| format!("out{i}: {e}"))?;
    }
    Ok(())
}

/// Every case folder of a corpus, sorted by name.
pub fn cases(corpus: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(corpus)
        .map(|r| {
            r.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.join("meta.json").is_file())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Runs every case whose name starts with `prefix`; returns (passed, total, failures).
pub fn run_corpus(
    corpus: &Path,
    prefix: &str,
    backend: &Backend<'_>,
) -> (usize, usize, Vec<(String, String)>) {
    let cases: Vec<PathBuf> = cases(corpus)
        .into_iter()
        .filter(|c| {
            c.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
        .collect();
    let mut failures = Vec::new();
    for case in &cases {
        let name = case
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // A panic is a failure of the case, reported like any other.
        let outcome =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_case(case, backend)))
                .unwrap_or_else(|_| Err("PANIC".into()));
        if let Err(e) = outcome {
            failures.push((name, e));
        }
    }
    (cases.len() - failures.len(), cases.len(), failures)
}

/// The repository's JAX fixtures (`tests/fixtures/jax`), from a crate directory.
pub fn jax_fixtures(manifest_dir: &str) -> PathBuf {
    Path::new(manifest_dir).join("../../tests/fixtures/jax")
}

/// The StableHLO conformance corpus beside the repository (`../shared`).
pub fn stablehlo_corpus(manifest_dir: &str) -> PathBuf {
    Path::new(manifest_dir).join("../../../shared/conformance/stablehlo-interpret")
}

/// Runs a corpus, prints every failure and the totals, and checks that at
/// least `floor` cases pass. An absent corpus is skipped with a note.
pub fn check_corpus(corpus: &Path, prefix: &str, backend: &Backend<'_>, floor: usize) {
    if !corpus.is_dir() {
        println!("skipping: {} is absent", corpus.display());
        return;
    }
    let (passed, total, failures) = run_corpus(corpus, prefix, backend);
    for (name, why) in &failures {
        println!("FAIL {name}: {why}");
    }
    println!(
        "{}: {passed} passed, {} failed (of {total})",
        corpus.display(),
        total - passed
    );
    assert!(
        passed >= floor,
        "{passed} cases passed, below the floor of {floor}"
    );
}

/// Random bit patterns of `shape` (NaNs, huge and negative integers, ...).
pub fn random_literal(shape: &oxla_hlo::Shape, state: &mut u64) -> Literal {
    let mut next = || {
        *state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*state >> 33) as u8
    };
    match shape {
        oxla_hlo::Shape::Array(a) => {
            let n = a.byte_size().unwrap_or(0);
            let mut bytes: Vec<u8> = (0..n).map(|_| next()).collect();
            if a.element_type() == PrimitiveType::Pred {
                bytes.iter_mut().for_each(|b| *b &= 1);
            }
            ArrayLiteral::from_bytes(a.clone(), &bytes)
                .map(Literal::Array)
                .unwrap_or(Literal::Token)
        }
        oxla_hlo::Shape::Tuple(t) => {
            Literal::Tuple(t.iter().map(|s| random_literal(s, state)).collect())
        }
        oxla_hlo::Shape::Token => Literal::Token,
    }
}

/// Every module of the corpora run on random arguments (three times each):
/// errors are fine, panics are not. Returns how many runs were made.
pub fn random_arguments_never_panic(corpora: &[PathBuf], backend: &Backend<'_>) -> usize {
    let mut state = 0x0dd_ba11u64;
    let mut ran = 0;
    for corpus in corpora {
        for case in cases(corpus) {
            let Ok(text) = std::fs::read_to_string(case.join("module.hlo")) else {
                continue;
            };
            let Ok(module) = oxla_text::parse_module(&text) else {
                continue;
            };
            for _ in 0..3 {
                let args: Vec<Literal> = module
                    .program_shape()
                    .parameters
                    .iter()
                    .map(|s| random_literal(s, &mut state))
                    .collect();
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    backend(&module, &args)
                }));
                assert!(
                    outcome.is_ok(),
                    "{} panicked on random arguments",
                    case.display()
                );
                ran += 1;
            }
        }
    }
    ran
}
