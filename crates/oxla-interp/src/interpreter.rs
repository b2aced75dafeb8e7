//! The evaluation loop: runs a computation's instructions in stored order
//! (operands come first), skipping those that neither reach the root nor have
//! side effects, and releases each value after its last use. Also the
//! machinery ops use to call computations: on whole values
//! ([`Interpreter::call`]) or element by element ([`ScalarFn`]). The two
//! resource guards that need no op knowledge live here too: every result is
//! checked against the memory limit before its instruction runs, and calls
//! may nest only [`MAX_CALL_DEPTH`] deep.

use std::collections::HashMap;
use std::rc::Rc;

use oxla_hlo::{ComputationId, HloComputation, HloModule, InstrId, Opcode, Shape};

use crate::element::Elem;
use crate::error::{EvalError, OpError, OpResult};
use crate::eval::rng::RngState;
use crate::options::{EvalOptions, MAX_CALL_DEPTH};
use crate::scalar_program::ScalarProgram;
use crate::services::Services;
use crate::value::Value;

/// How to run one computation, worked out once and reused for every call.
struct Plan {
    /// The instructions to evaluate, in stored order.
    order: Vec<InstrId>,
    /// For each instruction, how many times evaluated instructions use it.
    uses: Vec<u32>,
    /// Values of the constants, made once.
    constants: HashMap<InstrId, Value>,
}

/// The state of one evaluation.
pub(crate) struct Interpreter<'a> {
    pub(crate) module: &'a HloModule,
    pub(crate) options: &'a EvalOptions,
    pub(crate) services: &'a dyn Services,
    plans: Vec<Option<Rc<Plan>>>,
    programs: Vec<Option<Option<Rc<ScalarProgram>>>>,
    pub(crate) rng: RngState,
    /// How many times each collective instruction has run, keyed by (computation, instruction).
    collective_counts: HashMap<(ComputationId, InstrId), u64>,
    /// How many calls deep the computation being evaluated is (0 for the entry).
    depth: usize,
}

/// The instruction being evaluated, for error messages and collective keys.
#[derive(Clone, Copy)]
pub(crate) struct Site<'m> {
    pub(crate) computation_id: ComputationId,
    pub(crate) computation: &'m HloComputation,
    pub(crate) id: InstrId,
    pub(crate) instr: &'m oxla_hlo::HloInstruction,
}

impl<'a> Interpreter<'a> {
    pub(crate) fn new(
        module: &'a HloModule,
        options: &'a EvalOptions,
        services: &'a dyn Services,
    ) -> Interpreter<'a> {
        let n = module.computations().len();
        Interpreter {
            module,
            options,
            services,
            plans: vec![None; n],
            programs: vec![None; n],
            rng: RngState::new(options.seed),
            collective_counts: HashMap::new(),
            depth: 0,
        }
    }

    /// The computation `id`, or an error if the module has no such computation.
    pub(crate) fn computation(&self, id: ComputationId) -> OpResult<&'a HloComputation> {
        let module: &'a HloModule = self.module;
        module
            .computations()
            .get(id.index())
            .ok_or_else(|| OpError::Message(format!("computation {id} does not exist")))
    }

    /// Which execution of this collective instruction this is (0, 1, ...).
    pub(crate) fn next_collective_sequence(&mut self, site: &Site<'_>) -> u64 {
        let n = self
            .collective_counts
            .entry((site.computation_id, site.id))
            .or_insert(0);
        let s = *n;
        *n += 1;
        s
    }

    fn plan(&mut self, id: ComputationId) -> OpResult<Rc<Plan>> {
        if let Some(Some(p)) = self.plans.get(id.index()) {
            return Ok(p.clone());
        }
        let comp = self.computation(id)?;
        let instrs = comp.instructions();
        let n = instrs.len();
        let mut live = vec![false; n];
        let root = comp.root().index();
        if root >= n {
            return Err(OpError::Message(format!(
                "the root of computation `{}` does not exist",
                comp.name
            )));
        }
        live[root] = true;
        for (k, instr) in instrs.iter().enumerate() {
            if instr.opcode.has_side_effect() {
                live[k] = true;
            }
        }
        for k in (0..n).rev() {
            if live[k] {
                for op in &instrs[k].operands {
                    if op.index() >= k {
                        return Err(OpError::Message(format!(
                            "in computation `{}`, instruction `{}` uses an operand that is not stored before it",
                            comp.name, instrs[k].name
                        )));
                    }
                    live[op.index()] = true;
                }
            }
        }
        let order: Vec<InstrId> = (0..n).filter(|&k| live[k]).map(InstrId::new).collect();
        let mut uses = vec![0u32; n];
        let mut constants = HashMap::new();
        for &id in &order {
            let instr = &instrs[id.index()];
            for op in &instr.operands {
                uses[op.index()] += 1;
            }
            if let (Opcode::Constant, Some(lit)) = (instr.opcode, &instr.attrs.literal) {
                constants.insert(id, Value::from_literal(lit.clone()));
            }
        }
        let plan = Rc::new(Plan {
            order,
            uses,
            constants,
        });
        self.plans[id.index()] = Some(plan.clone());
        Ok(plan)
    }

    /// Evaluates computation `id` on `args` (one value per parameter).
    pub(crate) fn eval_computation(
        &mut self,
        id: ComputationId,
        args: &[Value],
    ) -> Result<Value, EvalError> {
        let module: &'a HloModule = self.module;
        let Some(comp) = module.computations().get(id.index()) else {
            return Err(EvalError::InvalidModule {
                message: format!("computation {id} does not exist"),
            });
        };
        let plan = self.plan(id).map_err(|e| match e {
            OpError::Located(e) => *e,
            OpError::Message(message) | OpError::Service(_, message) => {
                EvalError::InvalidModule { message }
            }
            OpError::WhileLimit(_) | OpError::MemoryLimit { .. } | OpError::CallDepth(_) => {
                EvalError::InvalidModule {
                    message: format!("computation `{}` cannot be planned", comp.name),
                }
            }
        })?;
        if args.len() != comp.num_parameters() {
            return Err(EvalError::InvalidModule {
                message: format!(
                    "computation `{}` takes {} parameters but was called with {} arguments",
                    comp.name,
                    comp.num_parameters(),
                    args.len()
                ),
            });
        }
        let instrs = comp.instructions();
        let mut values: Vec<Option<Value>> = vec![None; instrs.len()];
        let mut remaining = plan.uses.clone();
        let root = comp.root();
        let mut operands: Vec<Value> = Vec::new();
        for &iid in &plan.order {
            let instr = &instrs[iid.index()];
            operands.clear();
            for op in &instr.operands {
                match &values[op.index()] {
                    Some(v) => operands.push(v.clone()),
                    None => {
                        return Err(OpError::Message(format!(
                            "operand `{}` has no value",
                            instrs[op.index()].name
                        ))
                        .locate(&comp.name, &instr.name, instr.opcode));
                    }
                }
            }
            let value = if let Some(c) = plan.constants.get(&iid) {
                c.clone()
            } else {
                if instr.opcode != Opcode::Parameter {
                    check_size(&instr.shape, self.options.max_array_bytes)
                        .map_err(|e| e.locate(&comp.name, &instr.name, instr.opcode))?;
                }
                let site = Site {
                    computation_id: id,
                    computation: comp,
                    id: iid,
                    instr,
                };
                self.eval_instruction(&site, &operands, args)
                    .map_err(|e| e.locate(&comp.name, &instr.name, instr.opcode))?
            };
            operands.clear();
            for op in &instr.operands {
                let r = &mut remaining[op.index()];
                *r -= 1;
                if *r == 0 && *op != root {
                    values[op.index()] = None;
                }
            }
            values[iid.index()] = Some(value);
        }
        values[root.index()]
            .take()
            .ok_or_else(|| EvalError::InvalidModule {
                message: format!("the root of computation `{}` was not evaluated", comp.name),
            })
    }

    /// Calls computation `id` on whole values (call, while, conditional, ...).
    /// Fails with [`OpError::CallDepth`] past [`MAX_CALL_DEPTH`] levels, so
    /// that a deep chain of calls cannot exhaust the stack.
    pub(crate) fn call(&mut self, id: ComputationId, args: &[Value]) -> OpResult<Value> {
        if self.depth >= MAX_CALL_DEPTH {
            return Err(OpError::CallDepth(MAX_CALL_DEPTH));
        }
        self.depth += 1;
        let result = self.eval_computation(id, args);
        self.depth -= 1;
        result.map_err(OpError::from)
    }

    /// Prepares computation `id` for application to scalars, element by
    /// element; `statics` are extra whole values passed after the scalars (a
    /// `map`'s static operands).
    pub(crate) fn scalar_fn(
        &mut self,
        id: Option<ComputationId>,
        role: &str,
        statics: Vec<Value>,
    ) -> OpResult<ScalarFn> {
        let id = id.ok_or_else(|| OpError::Message(format!("needs a {role} computation")))?;
        let comp = self.computation(id)?;
        let program = match self.programs.get(id.index()) {
            Some(Some(p)) => p.clone(),
            _ => {
                let p = ScalarProgram::compile(comp).map(Rc::new);
                self.programs[id.index()] = Some(p.clone());
                p
            }
        };
        let program = if statics.is_empty() { program } else { None };
        Ok(ScalarFn {
            id,
            program,
            regs: Vec::new(),
            statics,
            args: Vec::new(),
        })
    }

    /// Applies a prepared computation to scalar arguments, appending its
    /// scalar results (one, or one per element of a returned tuple) to `out`.
    pub(crate) fn apply(
        &mut self,
        f: &mut ScalarFn,
        args: &[Elem],
        out: &mut Vec<Elem>,
    ) -> OpResult<()> {
        if let Some(program) = &f.program {
            return program
                .run(args, &mut f.regs, out)
                .map_err(|(at, message)| {
                    let comp = &self.module.computations()[f.id.index()];
                    match at {
                        Some(at) => {
                            let instr = comp.instruction(at);
                            OpError::from(EvalError::Instruction {
                                computation: comp.name.clone(),
                                instruction: instr.name.clone(),
                                opcode: instr.opcode,
                                message,
                            })
                        }
                        None => OpError::Message(format!("computation `{}` {message}", comp.name)),
                    }
                });
        }
        f.args.clear();
        f.args.extend(args.iter().map(|&e| Value::scalar(e)));
        f.args.extend(f.statics.iter().cloned());
        let args = std::mem::take(&mut f.args);
        let result = self.call(f.id, &args);
        f.args = args;
        match result? {
            Value::Array(a) if a.element_count() == 1 => out.push(Elem::read(a.data(), 0)),
            Value::Tuple(t) => {
                for v in t.iter() {
                    out.push(v.as_elem()?);
                }
            }
            other => {
                return Err(OpError::Message(format!(
                    "the called computation returned {} where scalars were expected",
                    other.shape()
                )));
            }
        }
        Ok(())
    }
}

/// An error unless every array of `shape` fits in `limit` bytes.
fn check_size(shape: &Shape, limit: u64) -> OpResult<()> {
    match shape {
        Shape::Array(a) => {
            let bytes = a.byte_size().map_or(u64::MAX, |b| b as u64);
            if bytes > limit {
                return Err(OpError::MemoryLimit {
                    shape: a.to_string(),
                    bytes,
                    limit,
                });
            }
            Ok(())
        }
        Shape::Tuple(elements) => elements.iter().try_for_each(|s| check_size(s, limit)),
        Shape::Token => Ok(()),
    }
}

/// A computation prepared for application to scalars (see [`Interpreter::scalar_fn`]).
pub(crate) struct ScalarFn {
    id: ComputationId,
    program: Option<Rc<ScalarProgram>>,
    regs: Vec<Elem>,
    statics: Vec<Value>,
    args: Vec<Value>,
}
