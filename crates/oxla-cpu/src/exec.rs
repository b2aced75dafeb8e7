//! The executor: runs a program's steps in order over value slots, moving a
//! value into its last reader and giving its arrays back to the pool there.
//! Control flow runs other programs; operations without a native kernel go
//! to the interpreter session, which keeps the random-number stream and
//! collective counts consistent with the interpreter's. Per-program state
//! (slots, use counts) lives in frames that are reused, so a loop iteration
//! allocates nothing beyond the values it makes.

use std::sync::Arc;

use oxla_hlo::{ComputationId, HloModule, InstrId, Literal};
use oxla_interp::{EvalError, EvalOptions, MAX_CALL_DEPTH, Session};

use crate::buffer::Pool;
use crate::error::{CpuError, CpuResult};
use crate::program::{Kind, Program};
use crate::small_loop::{LoopError, SmallLoop};
use crate::value::Value;

/// The state of one running program.
struct Frame<'a> {
    slots: Vec<Option<Value<'a>>>,
    remaining: Vec<u32>,
    inputs: Vec<Value<'a>>,
}

pub(crate) struct Exec<'a> {
    pub module: &'a HloModule,
    pub programs: &'a [Program],
    pub options: &'a EvalOptions,
    pub session: Session<'a>,
    pub pool: &'a Pool,
    depth: usize,
    /// Frames of finished runs, for the next runs.
    frames: Vec<Frame<'a>>,
}

impl<'a> Exec<'a> {
    pub(crate) fn new(
        module: &'a HloModule,
        programs: &'a [Program],
        options: &'a EvalOptions,
        session: Session<'a>,
        pool: &'a Pool,
    ) -> Exec<'a> {
        Exec {
            module,
            programs,
            options,
            session,
            pool,
            depth: 0,
            frames: Vec::new(),
        }
    }

    fn locate(&self, program: &Program, step: usize, message: String) -> CpuError {
        self.instruction_error(program.computation, program.steps[step].instr, message)
    }

    /// The interpreter's error for instruction `instr` of computation `comp`.
    fn instruction_error(&self, comp: ComputationId, instr: InstrId, message: String) -> CpuError {
        let comp = self.module.computation(comp);
        let instr = comp.instruction(instr);
        CpuError::Eval(EvalError::Instruction {
            computation: comp.name.clone(),
            instruction: instr.name.clone(),
            opcode: instr.opcode,
            message,
        })
    }

    /// Runs program `index` on `args`, one value per parameter (moved out).
    pub(crate) fn run(&mut self, index: usize, args: &mut [Value<'a>]) -> CpuResult<Value<'a>> {
        let programs: &'a [Program] = self.programs;
        let program = &programs[index];
        let mut frame = self.frames.pop().unwrap_or_else(|| Frame {
            slots: Vec::new(),
            remaining: Vec::new(),
            inputs: Vec::new(),
        });
        frame.slots.clear();
        frame.slots.resize(program.num_slots, None);
        frame.remaining.clear();
        frame.remaining.extend_from_slice(&program.uses);
        self.depth += 1;
        let result = self.run_program(program, &mut frame, args);
        self.depth -= 1;
        // Values left by an early error must not keep arrays alive.
        frame.slots.clear();
        frame.inputs.clear();
        self.frames.push(frame);
        result
    }

    fn run_program(
        &mut self,
        program: &'a Program,
        frame: &mut Frame<'a>,
        args: &mut [Value<'a>],
    ) -> CpuResult<Value<'a>> {
        for (s, step) in program.steps.iter().enumerate() {
            if let Kind::GetTupleElement(i) = step.kind {
                let value = self
                    .tuple_element(frame, step.inputs[0], i)
                    .ok_or_else(|| {
                        self.locate(
                            program,
                            s,
                            format!("index {i} of a non-tuple or short tuple"),
                        )
                    })?;
                Self::store(frame, step.output, value);
                continue;
            }
            // Operands: moved out at their last read, shared otherwise.
            let mut inputs = std::mem::take(&mut frame.inputs);
            for &slot in &step.inputs {
                frame.remaining[slot] -= 1;
                let value = if frame.remaining[slot] == 0 {
                    frame.slots[slot].take()
                } else {
                    frame.slots[slot].clone()
                };
                match value {
                    Some(v) => inputs.push(v),
                    None => return Err(self.locate(program, s, "an operand has no value".into())),
                }
            }
            match &step.kind {
                Kind::Kernel(_) | Kind::Rng(_) | Kind::Interpret
                    if step.largest > self.options.max_array_bytes =>
                {
                    return Err(self.memory_limit(program, s));
                }
                // The interpreter's depth: the entry runs at 0, and a call
                // from a computation already 64 calls deep fails.
                Kind::Call(_) | Kind::While { .. } | Kind::Conditional { .. }
                    if self.depth > MAX_CALL_DEPTH =>
                {
                    let comp = self.module.computation(program.computation);
                    let instr = comp.instruction(step.instr);
                    return Err(CpuError::Eval(EvalError::CallDepth {
                        computation: comp.name.clone(),
                        instruction: instr.name.clone(),
                        opcode: instr.opcode,
                        limit: MAX_CALL_DEPTH,
                    }));
                }
                _ => {}
            }
            let value = match &step.kind {
                Kind::Parameter(n) => match args.get_mut(*n) {
                    Some(v) => std::mem::replace(v, Value::Token),
                    None => {
                        return Err(self.locate(
                            program,
                            s,
                            format!("parameter {n} was not passed"),
                        ));
                    }
                },
                Kind::Constant(l) => Value::borrowed_shared(l),
                Kind::Tuple => Value::Tuple(inputs.drain(..).collect()),
                Kind::GetTupleElement(_) => unreachable!("handled above"),
                Kind::Call(p) => self.run(*p, &mut inputs)?,
                Kind::While {
                    small: Some(small), ..
                } if small.largest <= self.options.max_array_bytes => {
                    self.run_small_while(program, s, small, &mut inputs)?
                }
                Kind::While { cond, body, .. } => {
                    self.run_while(program, s, *cond, *body, &mut inputs)?
                }
                Kind::Conditional { branches } => {
                    self.run_conditional(program, s, branches, &mut inputs)?
                }
                // A result with no elements is known without running the
                // kernel, whose sizes (a product of dimensions, one of them
                // zero, the others huge) could overflow on the way.
                Kind::Kernel(_) | Kind::Rng(_) if step.largest == 0 => {
                    let comp = self.module.computation(program.computation);
                    empty_value(&comp.instruction(step.instr).shape)
                        .map_err(|m| self.locate(program, s, m))?
                }
                Kind::Kernel(k) => k
                    .run(&mut inputs, self.pool)
                    .map_err(|m| self.locate(program, s, m))?,
                Kind::Rng(k) => k
                    .run(&inputs, self.pool, &mut self.session)
                    .map_err(|m| self.locate(program, s, m))?,
                Kind::Interpret => {
                    let literals: Vec<Literal> =
                        inputs.drain(..).map(Value::into_literal).collect();
                    let l = self.session.eval_instruction(
                        program.computation,
                        step.instr,
                        &literals,
                    )?;
                    literals
                        .into_iter()
                        .for_each(|l| self.pool.give_value(Value::from_literal(l)));
                    Value::from_literal(l)
                }
            };
            // Operands read for the last time go back to the pool.
            inputs.drain(..).for_each(|v| self.pool.give_value(v));
            frame.inputs = inputs;
            Self::store(frame, step.output, value);
        }
        frame.slots[program.root]
            .take()
            .ok_or_else(|| CpuError::Compile("the root was not computed".into()))
    }

    /// The error for a step whose result would pass the memory limit
    /// (checked before the step runs, as the interpreter checks it).
    fn memory_limit(&self, program: &Program, s: usize) -> CpuError {
        let limit = self.options.max_array_bytes;
        let comp = self.module.computation(program.computation);
        let instr = comp.instruction(program.steps[s].instr);
        let leaves = instr.shape.leaves();
        let over = leaves
            .iter()
            .map(|a| (a, a.byte_size().map_or(u64::MAX, |b| b as u64)))
            .find(|&(_, b)| b > limit);
        let (shape, bytes) = over.map_or((instr.shape.to_string(), u64::MAX), |(a, b)| {
            (a.to_string(), b)
        });
        CpuError::Eval(EvalError::MemoryLimit {
            computation: comp.name.clone(),
            instruction: instr.name.clone(),
            opcode: instr.opcode,
            shape,
            bytes,
            limit,
        })
    }

    fn store(frame: &mut Frame<'a>, slot: usize, value: Value<'a>) {
        if frame.remaining[slot] > 0 {
            frame.slots[slot] = Some(value);
        }
    }

    /// Element `i` of the tuple in `slot`: moved out of the tuple at its
    /// last read when nothing else shares it, copied (shallowly) otherwise.
    fn tuple_element(&self, frame: &mut Frame<'a>, slot: usize, i: usize) -> Option<Value<'a>> {
        frame.remaining[slot] -= 1;
        if frame.remaining[slot] == 0 {
            let Value::Tuple(mut t) = frame.slots[slot].take()? else {
                return None;
            };
            match Arc::get_mut(&mut t) {
                Some(elements) => elements
                    .get_mut(i)
                    .map(|v| std::mem::replace(v, Value::Token)),
                None => t.get(i).cloned(),
            }
        } else {
            match frame.slots[slot].as_ref()? {
                Value::Tuple(t) => t.get(i).cloned(),
                _ => None,
            }
        }
    }

    fn run_while(
        &mut self,
        program: &Program,
        s: usize,
        cond: usize,
        body: usize,
        inputs: &mut Vec<Value<'a>>,
    ) -> CpuResult<Value<'a>> {
        let mut state = inputs.pop().unwrap_or(Value::Token);
        let limit = self.options.while_iteration_limit;
        let mut iterations = 0u64;
        loop {
            let go = self.run(cond, &mut [state.clone()])?;
            if !predicate(&go).map_err(|m| self.locate(program, s, m))? {
                return Ok(state);
            }
            if let Some(l) = limit
                && iterations >= l
            {
                let comp = self.module.computation(program.computation);
                return Err(CpuError::Eval(EvalError::WhileIterationLimit {
                    computation: comp.name.clone(),
                    instruction: comp.instruction(program.steps[s].instr).name.clone(),
                    limit: l,
                }));
            }
            iterations += 1;
            state = self.run(body, &mut [state])?;
        }
    }

    fn run_small_while(
        &mut self,
        program: &Program,
        s: usize,
        small: &SmallLoop,
        inputs: &mut Vec<Value<'a>>,
    ) -> CpuResult<Value<'a>> {
        let state = inputs.pop().unwrap_or(Value::Token);
        small
            .run(state, self.options.while_iteration_limit)
            .map_err(|e| match e {
                LoopError::Limit {
                    computation,
                    instr,
                    limit,
                } => {
                    let comp = self.module.computation(computation);
                    CpuError::Eval(EvalError::WhileIterationLimit {
                        computation: comp.name.clone(),
                        instruction: comp.instruction(instr).name.clone(),
                        limit,
                    })
                }
                LoopError::Op {
                    computation,
                    instr,
                    message,
                } => self.instruction_error(computation, instr, message),
                LoopError::State(m) => self.locate(program, s, m),
            })
    }

    fn run_conditional(
        &mut self,
        program: &Program,
        s: usize,
        branches: &[usize],
        inputs: &mut [Value<'a>],
    ) -> CpuResult<Value<'a>> {
        if inputs.len() != branches.len() + 1 || branches.is_empty() {
            return Err(self.locate(program, s, "needs one operand per branch".into()));
        }
        let selector = inputs[0].array().map(|a| a.data().scalar(0));
        let branch = match selector {
            // A pred picks branch 0 when true, branch 1 when false.
            Some(oxla_hlo::Scalar::Pred(p)) => usize::from(!p),
            // An index out of range (negative too) picks the last branch.
            Some(oxla_hlo::Scalar::Int(i)) => usize::try_from(i)
                .ok()
                .filter(|&i| i < branches.len())
                .unwrap_or(branches.len() - 1),
            _ => {
                return Err(self.locate(
                    program,
                    s,
                    "the branch selector must be a pred or s32 scalar".into(),
                ));
            }
        };
        let arg = std::mem::replace(&mut inputs[branch + 1], Value::Token);
        self.run(branches[branch], &mut [arg])
    }
}

fn predicate(v: &Value<'_>) -> Result<bool, String> {
    match v.array().map(|a| a.data().scalar(0)) {
        Some(oxla_hlo::Scalar::Pred(p)) => Ok(p),
        _ => Err("the loop condition must be a pred scalar".into()),
    }
}

/// The value of `shape` when none of its arrays has an element.
fn empty_value<'a>(shape: &oxla_hlo::Shape) -> Result<Value<'a>, String> {
    Ok(match shape {
        oxla_hlo::Shape::Array(a) => Value::owned(
            oxla_hlo::ArrayLiteral::new(a.clone(), oxla_hlo::ArrayData::zeros(a.element_type(), 0))
                .map_err(|e| e.to_string())?,
        ),
        oxla_hlo::Shape::Tuple(parts) => Value::Tuple(
            parts
                .iter()
                .map(empty_value)
                .collect::<Result<Vec<_>, _>>()?
                .into(),
        ),
        _ => Value::Token,
    })
}
