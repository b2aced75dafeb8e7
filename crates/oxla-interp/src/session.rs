//! A `Session` evaluates single instructions (or whole computations) of one
//! module on demand, keeping the state an evaluation carries between
//! instructions: the `rng` stream, the execution counts that key
//! collectives, and the runtime services. A compiler uses it for the
//! operations it does not compile itself, so its results match the
//! interpreter's exactly, random numbers included, as long as it runs
//! side-effecting instructions in the interpreter's order.

use oxla_hlo::{ComputationId, HloModule, InstrId, Literal};

use crate::error::EvalError;
use crate::interpreter::{Interpreter, Site};
use crate::options::EvalOptions;
use crate::services::Services;
use crate::value::Value;

/// Evaluation state for one execution of a module; see the module docs.
pub struct Session<'a> {
    interp: Interpreter<'a>,
    flush: bool,
}

impl<'a> Session<'a> {
    pub fn new(
        module: &'a HloModule,
        options: &'a EvalOptions,
        services: &'a dyn Services,
    ) -> Session<'a> {
        Session {
            interp: Interpreter::new(module, options, services),
            flush: options.flush_denormals,
        }
    }

    /// Evaluates instruction `instr` of computation `computation` on operand
    /// values (one per operand, in order). Parameters cannot be evaluated
    /// this way: the caller holds the arguments.
    pub fn eval_instruction(
        &mut self,
        computation: ComputationId,
        instr: InstrId,
        operands: &[Literal],
    ) -> Result<Literal, EvalError> {
        let module: &'a HloModule = self.interp.module;
        let comp = module
            .computations()
            .get(computation.index())
            .ok_or_else(|| EvalError::InvalidModule {
                message: format!("computation {computation} does not exist"),
            })?;
        let hlo =
            comp.instructions()
                .get(instr.index())
                .ok_or_else(|| EvalError::InvalidModule {
                    message: format!("instruction {instr} does not exist in `{}`", comp.name),
                })?;
        let values: Vec<Value> = operands.iter().cloned().map(Value::from_literal).collect();
        let site = Site {
            computation_id: computation,
            computation: comp,
            id: instr,
            instr: hlo,
        };
        let _flush = crate::float_env::set_flushing(self.flush);
        self.interp
            .eval_instruction(&site, &values, &[])
            .map(Value::into_literal)
            .map_err(|e| e.locate(&comp.name, &hlo.name, hlo.opcode))
    }

    /// The `rng` stream's key (the seed) and the index of the next word it
    /// gives: a backend computing an `rng` itself takes the words from
    /// there on (see [`crate::rng_stream_block`]) and then moves the
    /// stream past them with [`Session::seek_rng`].
    pub fn rng_position(&self) -> (u64, u128) {
        self.interp.rng.position()
    }

    /// Moves the `rng` stream to word `position`.
    pub fn seek_rng(&mut self, position: u128) {
        self.interp.rng.seek(position)
    }

    /// Evaluates computation `computation` on `args`.
    pub fn call(
        &mut self,
        computation: ComputationId,
        args: &[Literal],
    ) -> Result<Literal, EvalError> {
        let values: Vec<Value> = args.iter().cloned().map(Value::from_literal).collect();
        let _flush = crate::float_env::set_flushing(self.flush);
        self.interp
            .eval_computation(computation, &values)
            .map(Value::into_literal)
    }
}
