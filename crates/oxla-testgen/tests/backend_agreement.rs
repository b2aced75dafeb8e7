//! Random valid computations give the same results on every backend.
//!
//! Each backend runs through the client against the interpreter called
//! directly (for the interpreter backend, a check of the client's path and
//! of determinism), twice: on the module as written (`--as-written`), and
//! with XLA's rewrites (the client's default) against the interpreter on
//! the rewritten module (`oxla_passes::match_xla`). The comparison is
//! bit-exact on inputs of arbitrary bit
//! patterns (NaNs, infinities, extreme magnitudes), except where the CPU
//! backend is documented to round differently: its polynomial exp, log,
//! tanh, logistic and erf, and the order (and fused multiply-adds) of the
//! sums in reductions, windows, dots and convolutions. A module using any
//! of those runs on tame float arguments and constants (in [-4, 4], made
//! from the generated bits, since with extreme magnitudes a different summation
//! order legitimately turns a finite sum into infinity, or infinity into
//! NaN) and is compared within `|a - e| <= 1e-5 + 1e-5 |e|` per float
//! element; integers and predicates still exactly. Such a module that turns
//! floats into integers or predicates (bitcast-convert, convert, compare)
//! is left out: an ulp of difference there becomes an arbitrary integer;
//! so is one that makes floats from integer bits, which taming cannot
//! reach.

use arbitrary::Unstructured;
use oxla::{Backend, Client, CompileOptions, ExecuteOptions};
use oxla_hlo::{ArrayData, ArrayLiteral, HloModule, Literal, Opcode, Scalar};
use oxla_interp::{EvalOptions, NoServices, evaluate};
use oxla_testgen::{Options, generate};
use proptest::prelude::*;

/// Every backend to compare with the reference interpreter.
const BACKENDS: &[Backend] = &[Backend::Interpreter, Backend::Cpu];

/// Whether the CPU backend may round `module`'s floats differently.
fn rounding_may_differ(module: &HloModule) -> bool {
    module.computations().iter().any(|c| {
        c.instructions().iter().any(|i| {
            matches!(
                i.opcode,
                Opcode::Exp
                    | Opcode::Log
                    | Opcode::Tanh
                    | Opcode::Logistic
                    | Opcode::Erf
                    | Opcode::Reduce
                    | Opcode::ReduceWindow
                    | Opcode::SelectAndScatter
                    | Opcode::Dot
                    | Opcode::Convolution
            )
        })
    })
}

/// `l` with every float replaced by a value in [-4, 4] derived from its bits.
fn tame(l: &Literal) -> Literal {
    match l {
        Literal::Array(a) if a.element_type().is_floating() => {
            let data = a.data();
            let squash = |f: f64| ((f.to_bits() >> 11) % 8001) as f64 / 1000.0 - 4.0;
            let values: Vec<Scalar> = (0..data.len())
                .map(|i| match data.scalar(i) {
                    Scalar::Float(f) => Scalar::Float(squash(f)),
                    Scalar::Complex(re, im) => Scalar::Complex(squash(re), squash(im)),
                    other => other,
                })
                .collect();
            let data = ArrayData::from_scalars(a.element_type(), &values);
            Literal::Array(ArrayLiteral::new(a.shape().clone(), data).expect("same shape"))
        }
        Literal::Tuple(t) => Literal::Tuple(t.iter().map(tame).collect()),
        other => other.clone(),
    }
}

/// Whether `module` turns float values into integers or predicates.
fn floats_become_integers(module: &HloModule) -> bool {
    module.computations().iter().any(|c| {
        c.instructions().iter().any(|i| {
            let from_float = i.operands.first().is_some_and(|o| {
                c.instruction(*o)
                    .shape
                    .element_type()
                    .is_some_and(|t| t.is_floating())
            });
            let to_exact = i.shape.element_type().is_some_and(|t| !t.is_floating());
            from_float
                && to_exact
                && matches!(
                    i.opcode,
                    Opcode::BitcastConvert | Opcode::Convert | Opcode::Compare | Opcode::Sort
                )
        })
    })
}

/// Whether `module` makes floats from other bits (bitcast-convert), which
/// taming cannot reach: extreme magnitudes that a different summation
/// order, or a complex product's multiplication by one, may turn into
/// infinity or NaN.
fn floats_from_bits(module: &HloModule) -> bool {
    module.computations().iter().any(|c| {
        c.instructions().iter().any(|i| {
            i.opcode == Opcode::BitcastConvert
                && i.shape
                    .element_type()
                    .is_some_and(|t| t.is_floating() || t.is_complex())
        })
    })
}

/// `module` with every float constant tamed (see [`tame`]).
fn tame_constants(module: &HloModule) -> HloModule {
    let mut module = module.clone();
    for comp in module.computations_mut() {
        for instr in comp.instructions_mut() {
            if let Some(l) = &instr.attrs.literal {
                instr.attrs.literal = Some(tame(l));
            }
        }
    }
    module
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn every_backend_agrees_with_the_reference_interpreter(
        bytes in prop::collection::vec(any::<u8>(), 0..3000)
    ) {
        let mut u = Unstructured::new(&bytes);
        let generated = generate(&mut u, &Options::default()).expect("generation never fails");
        let computation = generated.built.expect("valid-mode computations build");
        let seed = 5;
        let written = computation.module();
        let rewritten = oxla_passes::match_xla(written);
        let relaxed = rounding_may_differ(written) || rounding_may_differ(&rewritten);
        let skip_cpu = relaxed
            && [written, &rewritten].iter().any(|m| floats_become_integers(m) || floats_from_bits(m));
        let args: Vec<Literal> = if relaxed { generated.args.iter().map(tame).collect() } else { generated.args.clone() };
        for xla_rewrites in [false, true] {
            let module = if relaxed { tame_constants(written) } else { written.clone() };
            // What the client runs: the module, or XLA's rewrite of it.
            let run = if xla_rewrites { oxla_passes::match_xla(&module) } else { module.clone() };
            let reference = evaluate(&run, &args, &EvalOptions::with_seed(seed), &NoServices)
                .expect("valid computations evaluate");
            for &backend in BACKENDS {
                if backend == Backend::Cpu && skip_cpu {
                    continue;
                }
                let options = CompileOptions::default().with_xla_rewrites(xla_rewrites);
                let exe = Client::new(backend)
                    .compile_module(module.clone(), &options)
                    .expect("valid computations compile");
                let result = exe
                    .execute_with(&args, &ExecuteOptions::with_seed(seed))
                    .expect("valid computations run");
                let mismatch = if backend == Backend::Cpu && relaxed {
                    result.first_mismatch(&reference, 1e-5, 1e-5)
                } else if result.bitwise_eq(&reference) {
                    None
                } else {
                    Some(result.first_mismatch(&reference, 0.0, 0.0).unwrap_or_else(|| "bit patterns differ".into()))
                };
                prop_assert!(
                    mismatch.is_none(),
                    "{backend:?} (XLA's rewrites: {xla_rewrites}) disagrees with the interpreter ({}) on\n{}",
                    mismatch.unwrap_or_default(),
                    oxla_text::print_module(&run)
                );
            }
        }
    }
}
