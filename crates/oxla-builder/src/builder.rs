//! `XlaBuilder`: collects instructions for one computation. Op calls never
//! fail: a call that breaks a shape rule records the first error (with the
//! caller's location) and returns a placeholder handle, and `build` returns
//! that error. Sub-computations passed to ops are copied into the builder
//! once each, so a computation may be reused by many ops and builders.

use std::cell::RefCell;
use std::collections::HashMap;
use std::panic::Location;

use oxla_hlo::ir::{
    Attrs, Called, ComputationId, HloComputation, HloInstruction, HloModule, InstrId, Opcode,
};
use oxla_hlo::shape_inference::InferResult;
use oxla_hlo::verifier::verify;
use oxla_hlo::{Literal, ProgramShape, Shape};

use crate::computation::{XlaComputation, next_computation_uid};
use crate::error::BuildError;
use crate::op::XlaOp;

/// Builds one computation; see the crate documentation for an example.
pub struct XlaBuilder {
    name: String,
    state: RefCell<State>,
}

#[derive(Default)]
struct State {
    instructions: Vec<HloInstruction>,
    /// Every error recorded, in order; `build` returns the first.
    errors: Vec<BuildError>,
    /// The error behind the most recent failed check, which the next
    /// placeholder handle carries (see [`XlaBuilder::failed`]).
    last_failure: usize,
    /// Computations copied in from `XlaComputation`s, callees first.
    embedded: Vec<HloComputation>,
    /// Unique id of each embedded computation (parallel to `embedded`).
    embedded_uids: Vec<u64>,
    /// Where each unique computation id was embedded.
    embedded_by_uid: HashMap<u64, ComputationId>,
    /// Parameter numbers in use.
    parameter_numbers: Vec<usize>,
    next_name: usize,
}

/// What a new instruction carries besides its opcode, shape and operands.
#[derive(Default)]
pub(crate) struct Extra {
    pub attrs: Attrs,
    pub called: Called,
}

impl XlaBuilder {
    /// A builder for a computation called `name`.
    pub fn new(name: impl Into<String>) -> XlaBuilder {
        XlaBuilder {
            name: name.into(),
            state: RefCell::new(State::default()),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The first error recorded so far, if any.
    pub fn first_error(&self) -> Option<BuildError> {
        self.state.borrow().errors.first().cloned()
    }

    /// The error with the given index.
    pub(crate) fn error(&self, index: usize) -> Option<BuildError> {
        self.state.borrow().errors.get(index).cloned()
    }

    /// Records `error` and returns a placeholder handle that carries it.
    pub(crate) fn record_error(&self, error: BuildError) -> XlaOp<'_> {
        let mut state = self.state.borrow_mut();
        state.errors.push(error);
        state.last_failure = state.errors.len() - 1;
        XlaOp::invalid(self, state.last_failure)
    }

    /// Records an error found by a layer built on the builder (such as
    /// oxla's NumPy-style front end) and returns a placeholder carrying it;
    /// `build` reports the first error as usual.
    #[track_caller]
    pub fn report_error(&self, op: &str, message: impl Into<String>) -> XlaOp<'_> {
        self.record_error(BuildError::new(op, message, Location::caller()))
    }

    /// Notes that a check failed because of an invalid handle carrying error `index`.
    pub(crate) fn note_failure(&self, index: usize) {
        self.state.borrow_mut().last_failure = index;
    }

    /// The placeholder to return after a failed check: it carries the error
    /// that made the check fail, so `shape()` on it explains that failure.
    pub(crate) fn failed(&self) -> XlaOp<'_> {
        XlaOp::invalid(self, self.state.borrow().last_failure)
    }

    /// The shape of an instruction of this builder.
    pub(crate) fn shape_of(&self, id: InstrId) -> Shape {
        self.state.borrow().instructions[id.index()].shape.clone()
    }

    /// Checks that `ops` are valid handles of this builder and returns their ids,
    /// or `None` (after recording an error if needed) when one is not.
    pub(crate) fn ids(
        &self,
        op: &str,
        ops: &[XlaOp<'_>],
        loc: &'static Location<'static>,
    ) -> Option<Vec<InstrId>> {
        let mut ids = Vec::with_capacity(ops.len());
        for (i, o) in ops.iter().enumerate() {
            if !std::ptr::eq(o.builder(), self) {
                self.record_error(BuildError::new(
                    op,
                    format!(
                        "operand {i} was built by builder `{}`, not by `{}`",
                        o.builder().name,
                        self.name
                    ),
                    loc,
                ));
                return None;
            }
            // An invalid handle means an error was already recorded.
            match o.id() {
                Ok(id) => ids.push(id),
                Err(e) => {
                    self.note_failure(e);
                    return None;
                }
            }
        }
        Some(ids)
    }

    /// Operand shapes, or `None` as for [`XlaBuilder::ids`].
    pub(crate) fn shapes(
        &self,
        op: &str,
        ops: &[XlaOp<'_>],
        loc: &'static Location<'static>,
    ) -> Option<(Vec<InstrId>, Vec<Shape>)> {
        let ids = self.ids(op, ops, loc)?;
        let state = self.state.borrow();
        let shapes = ids
            .iter()
            .map(|id| state.instructions[id.index()].shape.clone())
            .collect();
        Some((ids, shapes))
    }

    /// Adds an instruction whose shape was inferred as `shape`, or records the inference error.
    pub(crate) fn add(
        &self,
        opcode: Opcode,
        shape: InferResult,
        operands: Vec<InstrId>,
        extra: Extra,
        loc: &'static Location<'static>,
    ) -> XlaOp<'_> {
        match shape {
            // Declared shapes (custom calls, infeed, rng) come from callers
            // and may have been made unchecked.
            Ok(shape) => match shape.validate() {
                Ok(()) => self.push(opcode, shape, operands, extra, None),
                Err(e) => self.record_error(BuildError::new(opcode.name(), e.to_string(), loc)),
            },
            Err(e) => self.record_error(BuildError::from_infer(e, loc)),
        }
    }

    fn push(
        &self,
        opcode: Opcode,
        shape: Shape,
        operands: Vec<InstrId>,
        extra: Extra,
        name: Option<String>,
    ) -> XlaOp<'_> {
        let mut state = self.state.borrow_mut();
        let name = match name {
            Some(n) => n,
            None => {
                state.next_name += 1;
                format!("{}.{}", opcode.name(), state.next_name)
            }
        };
        let mut instr = HloInstruction::new(name, opcode, shape, operands);
        instr.attrs = extra.attrs;
        instr.called = extra.called;
        let id = InstrId::new(state.instructions.len());
        state.instructions.push(instr);
        XlaOp::new(self, id)
    }

    /// Copies `computation` (and everything it calls) into this builder once,
    /// returning its id here and its signature.
    pub(crate) fn embed(&self, computation: &XlaComputation) -> (ComputationId, ProgramShape) {
        let mut state = self.state.borrow_mut();
        let module = computation.module();
        let mut local: Vec<ComputationId> = Vec::with_capacity(module.computations().len());
        for (k, comp) in module.computations().iter().enumerate() {
            let uid = computation.uid_of(k);
            if let Some(&id) = state.embedded_by_uid.get(&uid) {
                local.push(id);
                continue;
            }
            let mut copy = comp.clone();
            for instr in copy.instructions_mut() {
                instr.called.remap(|c| local[c.index()]);
            }
            let base = copy.name.clone();
            let mut n = 0;
            while copy.name == self.name || state.embedded.iter().any(|c| c.name == copy.name) {
                n += 1;
                copy.name = format!("{base}.{n}");
            }
            let id = ComputationId::new(state.embedded.len());
            state.embedded.push(copy);
            state.embedded_uids.push(uid);
            state.embedded_by_uid.insert(uid, id);
            local.push(id);
        }
        let entry = local[module.entry_id().index()];
        (entry, module.program_shape())
    }

    /// Declares parameter `number` with `shape`; `name` names the instruction.
    #[track_caller]
    pub fn parameter(&self, number: usize, shape: &Shape, name: &str) -> XlaOp<'_> {
        let loc = Location::caller();
        if let Err(e) = shape.validate() {
            return self.record_error(BuildError::new("parameter", e.to_string(), loc));
        }
        {
            let mut state = self.state.borrow_mut();
            if state.parameter_numbers.contains(&number) {
                drop(state);
                return self.record_error(BuildError::new(
                    "parameter",
                    format!("parameter number {number} is already declared"),
                    loc,
                ));
            }
            state.parameter_numbers.push(number);
        }
        let mut extra = Extra::default();
        extra.attrs.parameter_number = Some(number);
        let name = self.unique_name(name);
        self.push(Opcode::Parameter, shape.clone(), vec![], extra, Some(name))
    }

    fn unique_name(&self, requested: &str) -> String {
        let valid = !requested.is_empty()
            && requested
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
            && requested.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
        let base = if valid {
            requested.to_string()
        } else {
            "parameter".to_string()
        };
        let state = self.state.borrow();
        let taken = |n: &str| state.instructions.iter().any(|i| i.name == n);
        if !taken(&base) {
            return base;
        }
        (1..)
            .map(|k| format!("{base}.{k}"))
            .find(|n| !taken(n))
            .unwrap_or(base)
    }

    /// A constant holding `literal` (any shape, including tuples).
    #[track_caller]
    pub fn constant_literal(&self, literal: &Literal) -> XlaOp<'_> {
        let mut extra = Extra::default();
        extra.attrs.literal = Some(literal.clone());
        self.push(Opcode::Constant, literal.shape(), vec![], extra, None)
    }

    /// A scalar constant.
    #[track_caller]
    pub fn constant_r0<T: oxla_hlo::NativeType>(&self, value: T) -> XlaOp<'_> {
        self.constant_literal(&Literal::scalar(value))
    }

    /// A rank-1 constant.
    #[track_caller]
    pub fn constant_r1<T: oxla_hlo::NativeType>(&self, values: &[T]) -> XlaOp<'_> {
        self.constant_literal(&Literal::vec1(values))
    }

    /// Builds the computation whose result is `root`. Returns the first error
    /// recorded by any op call, if there was one.
    #[track_caller]
    pub fn build(&self, root: XlaOp<'_>) -> Result<XlaComputation, BuildError> {
        let loc = Location::caller();
        if let Some(e) = self.first_error() {
            return Err(e);
        }
        let Some(ids) = self.ids("build", &[root], loc) else {
            return Err(BuildError::new(
                "build",
                "the root comes from another builder",
                loc,
            ));
        };
        let state = self.state.borrow();
        let mut numbers = state.parameter_numbers.clone();
        numbers.sort_unstable();
        if let Some((i, &p)) = numbers.iter().enumerate().find(|&(i, &p)| i != p) {
            return Err(BuildError::new(
                "build",
                format!(
                    "parameters must be numbered 0..{} without gaps, but number {i} is missing (next is {p})",
                    numbers.len()
                ),
                loc,
            ));
        }
        let entry = HloComputation::new(self.name.clone(), state.instructions.clone(), ids[0]);
        let mut computations = state.embedded.clone();
        let entry_id = ComputationId::new(computations.len());
        computations.push(entry);
        let module = HloModule::new(self.name.clone(), computations, entry_id);
        let mut uids = state.embedded_uids.clone();
        uids.push(next_computation_uid());
        // The builder only adds instructions whose shapes came from shape
        // inference, so a verifier failure here is a bug in oxla, reported as such.
        if let Err(e) = verify(&module) {
            return Err(BuildError::new(
                "build",
                format!("internal error: the built module does not verify: {e}"),
                loc,
            ));
        }
        Ok(XlaComputation::new(module, uids))
    }
}
