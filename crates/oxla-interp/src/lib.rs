//! oxla's reference interpreter: evaluates any verified [`HloModule`] on host
//! [`Literal`]s, one instruction at a time, with XLA's semantics. It is the
//! oracle the compiler is tested against, so it is written to be plain and
//! obviously correct rather than fast (though it avoids per-element
//! allocation, so loops and large arrays stay usable).
//!
//! ```
//! use oxla_hlo::{HloComputation, HloInstruction, HloModule, Literal, Opcode, PrimitiveType, Shape};
//! use oxla_hlo::ComputationId;
//! use oxla_interp::{EvalOptions, NoServices, evaluate};
//!
//! let f32x2 = Shape::array(PrimitiveType::F32, [2]).unwrap();
//! let mut p = HloInstruction::new("x", Opcode::Parameter, f32x2.clone(), vec![]);
//! p.attrs.parameter_number = Some(0);
//! let neg = HloInstruction::new("neg", Opcode::Negate, f32x2, vec![oxla_hlo::InstrId::new(0)]);
//! let entry = HloComputation::new("main", vec![p, neg], oxla_hlo::InstrId::new(1));
//! let module = HloModule::new("m", vec![entry], ComputationId::new(0));
//!
//! let out = evaluate(&module, &[Literal::vec1(&[1.0f32, -2.0])], &EvalOptions::default(), &NoServices).unwrap();
//! assert_eq!(out, Literal::vec1(&[-1.0f32, 2.0]));
//! ```
//!
//! # Semantics
//! Where the 2017 operation semantics are loose, today's XLA (as XLA:CPU
//! behaves) decides: integer division and remainder never trap (x/0 = -1 or
//! all ones, x%0 = x, INT_MIN/-1 = INT_MIN), shifts by out-of-range amounts
//! shift everything out, float-to-int conversion saturates with NaN -> 0,
//! f16/bf16 arithmetic is done in f32 and rounded once per operation, dynamic
//! slice starts and gather starts are clamped into the operand, scatter skips
//! updates whose window leaves the operand, reduce-window and
//! select-and-scatter skip padding, conditional indices out of range pick
//! the last branch, sorting is stable. Denormals are kept (IEEE) unless
//! [`EvalOptions::flush_denormals`] asks to flush them as XLA:CPU does. Each
//! op family's module documents its rules.
//!
//! # Evaluation order
//! Each computation's instructions run in stored order (operands precede
//! users). Instructions that neither reach the root nor have side effects
//! ([`oxla_hlo::Opcode::has_side_effect`]) are skipped. Side effects (infeed, outfeed,
//! custom calls, collectives, `rng`) therefore happen in stored order.

mod element;
mod elementwise;
mod error;
mod eval;
mod float_env;
mod index;
mod interpreter;
mod math;
mod options;
mod scalar_program;
mod services;
mod session;
mod value;

pub use elementwise::{ElementwiseFunction, Scratch as ElementwiseScratch};
pub use error::{EvalError, ServiceError, ServiceKind};
/// A LAPACK custom call's character attributes, for backends that run
/// those calls natively.
pub use eval::lapack::lapack_flag;
pub use eval::rng::threefry_split_dimension;
/// The `rng` stream and how its words become each distribution's values,
/// for backends that must agree with the interpreter bit for bit.
pub use eval::rng::{
    rng_normal_f64, rng_stream_block, rng_uniform_f64, rng_uniform_int, rng_unit,
    rng_words_per_element,
};
/// How ThreeFry lays out 32-bit outputs, for backends that must agree with
/// the interpreter bit for bit.
pub use eval::services::is_builtin_custom_call;
/// The interpreter's error function in f64, for backends that must agree
/// with it bit for bit.
pub use math::erf;
pub use options::{DEFAULT_MAX_ARRAY_BYTES, EvalOptions, MAX_CALL_DEPTH};
pub use services::{CollectiveKey, NoServices, Services};
pub use session::Session;

use oxla_hlo::{HloModule, Literal};

use crate::interpreter::Interpreter;
use crate::value::Value;

/// Evaluates the entry computation of `module` on `args` and returns its result.
///
/// `args` holds one literal per entry parameter, in parameter order; each
/// must have a shape compatible with its parameter's (same element type and
/// dimensions, tuples alike; layouts are ignored), otherwise the result is an
/// [`EvalError::ArgumentCount`] or [`EvalError::ArgumentShape`].
///
/// The module should have passed `oxla_hlo::verifier::verify`; for a verified
/// module and any arguments, `evaluate` never panics: every failure (a
/// runaway `while`, a missing service, ...) is an [`EvalError`] naming the
/// computation and instruction concerned.
///
/// `services` provides replica ids, collectives, infeed/outfeed and custom
/// calls; pass [`NoServices`] for a single replica without any of them.
pub fn evaluate(
    module: &HloModule,
    args: &[Literal],
    options: &EvalOptions,
    services: &dyn Services,
) -> Result<Literal, EvalError> {
    let Some(entry) = module.computations().get(module.entry_id().index()) else {
        return Err(EvalError::InvalidModule {
            message: format!("the entry computation {} does not exist", module.entry_id()),
        });
    };
    if args.len() != entry.num_parameters() {
        return Err(EvalError::ArgumentCount {
            computation: entry.name.clone(),
            expected: entry.num_parameters(),
            actual: args.len(),
        });
    }
    for (index, (arg, &param)) in args.iter().zip(entry.parameters()).enumerate() {
        let p = entry.instruction(param);
        let shape = arg.shape();
        if !shape.compatible(&p.shape) {
            return Err(EvalError::ArgumentShape {
                computation: entry.name.clone(),
                parameter: p.name.clone(),
                index,
                expected: p.shape.to_string(),
                actual: shape.to_string(),
            });
        }
    }
    let values: Vec<Value> = args.iter().cloned().map(Value::from_literal).collect();
    let _flush = float_env::set_flushing(options.flush_denormals);
    let mut interp = Interpreter::new(module, options, services);
    let result = interp.eval_computation(module.entry_id(), &values)?;
    Ok(result.into_literal())
}
