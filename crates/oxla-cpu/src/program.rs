//! Lowering a module to programs: one per computation, a list of steps in
//! execution order, each reading and writing numbered value slots, with the
//! slots each step releases. Control flow stays structured (a step of a
//! `while` runs other programs); everything else is a native kernel, or, for
//! operations without one, the interpreter.

use std::sync::Arc;

use oxla_hlo::{ComputationId, HloComputation, HloModule, InstrId, Literal, Opcode};

use crate::error::{CpuError, CpuResult};
use crate::kernels::{self, Kernel};

/// What a step does.
pub(crate) enum Kind {
    Parameter(usize),
    Constant(Arc<Literal>),
    Tuple,
    GetTupleElement(usize),
    Call(usize),
    While {
        cond: usize,
        body: usize,
        /// The loop compiled whole, when its state is small.
        small: Option<Box<crate::small_loop::SmallLoop>>,
    },
    Conditional {
        branches: Vec<usize>,
    },
    Kernel(Box<dyn Kernel>),
    /// Evaluated by the interpreter session (operations without a native kernel).
    Interpret,
}

/// One step of a program.
pub(crate) struct Step {
    pub instr: InstrId,
    pub kind: Kind,
    /// Slots read, one per operand.
    pub inputs: Vec<usize>,
    /// The slot written (the instruction's index).
    pub output: usize,
    /// Bytes of the largest array the step makes (for the memory limit).
    pub largest: u64,
}

fn largest_leaf(instr: &oxla_hlo::HloInstruction) -> u64 {
    instr
        .shape
        .leaves()
        .iter()
        .map(|a| a.byte_size().map_or(u64::MAX, |b| b as u64))
        .max()
        .unwrap_or(0)
}

/// A computation, lowered.
pub(crate) struct Program {
    pub computation: ComputationId,
    pub steps: Vec<Step>,
    pub num_slots: usize,
    /// How many times steps read each slot (the root counts once more).
    pub uses: Vec<u32>,
    pub root: usize,
}

/// Lowers every computation of `module`; program `i` is computation `i`.
/// Without `native`, every operation is left to the interpreter (XLA:CPU's
/// denormal-flushing mode runs that way: the kernels compute with IEEE
/// denormals).
pub(crate) fn lower(module: &HloModule, native: bool) -> CpuResult<Vec<Program>> {
    module
        .computations()
        .iter()
        .enumerate()
        .map(|(i, comp)| lower_computation(module, ComputationId::new(i), comp, native))
        .collect()
}

fn lower_computation(
    module: &HloModule,
    id: ComputationId,
    comp: &HloComputation,
    native: bool,
) -> CpuResult<Program> {
    let instrs = comp.instructions();
    let n = instrs.len();
    let root = comp.root().index();
    if root >= n {
        return Err(CpuError::Compile(format!(
            "computation `{}` has no root",
            comp.name
        )));
    }
    // Live: reaches the root, or has a side effect (as the interpreter decides).
    let mut live = vec![false; n];
    live[root] = true;
    for (k, instr) in instrs.iter().enumerate() {
        live[k] |= instr.opcode.has_side_effect();
    }
    for k in (0..n).rev() {
        if live[k] {
            for op in &instrs[k].operands {
                live[op.index()] = true;
            }
        }
    }
    let fusion = if native {
        crate::fusion::plan(module, comp, &live)
    } else {
        crate::fusion::Fusion {
            groups: Default::default(),
            absorbed: vec![false; n],
        }
    };
    let mut groups = fusion.groups;
    let mut steps = Vec::new();
    let mut uses = vec![0u32; n];
    uses[root] += 1;
    for k in (0..n).filter(|&k| live[k] && !fusion.absorbed[k]) {
        let instr = &instrs[k];
        if let Some(group) = groups.remove(&k) {
            for &i in &group.inputs {
                uses[i] += 1;
            }
            steps.push(Step {
                instr: InstrId::new(k),
                kind: Kind::Kernel(group.kernel),
                inputs: group.inputs,
                output: k,
                largest: largest_leaf(instr),
            });
            continue;
        }
        let kind = match instr.opcode {
            Opcode::Parameter => Kind::Parameter(instr.attrs.parameter_number.unwrap_or(0)),
            Opcode::Constant => match &instr.attrs.literal {
                Some(l) => Kind::Constant(Arc::new(l.clone())),
                None => {
                    return Err(CpuError::Compile(format!(
                        "constant `{}` has no value",
                        instr.name
                    )));
                }
            },
            Opcode::Tuple => Kind::Tuple,
            Opcode::GetTupleElement => Kind::GetTupleElement(instr.attrs.tuple_index.unwrap_or(0)),
            Opcode::Call => match instr.called.to_apply {
                Some(c) => Kind::Call(c.index()),
                None => Kind::Interpret,
            },
            Opcode::While => match (instr.called.condition, instr.called.body) {
                (Some(c), Some(b)) => Kind::While {
                    cond: c.index(),
                    body: b.index(),
                    small: native
                        .then(|| crate::small_loop::plan(module, id, InstrId::new(k)))
                        .flatten()
                        .map(Box::new),
                },
                _ => Kind::Interpret,
            },
            Opcode::Conditional => Kind::Conditional {
                branches: instr.called.branches.iter().map(|b| b.index()).collect(),
            },
            _ => match kernels::select(module, comp, InstrId::new(k)).filter(|_| native) {
                Some(kernel) => Kind::Kernel(kernel),
                None => Kind::Interpret,
            },
        };
        for op in &instr.operands {
            uses[op.index()] += 1;
        }
        steps.push(Step {
            instr: InstrId::new(k),
            kind,
            inputs: instr.operands.iter().map(|o| o.index()).collect(),
            output: k,
            largest: largest_leaf(instr),
        });
    }
    Ok(Program {
        computation: id,
        steps,
        num_slots: n,
        uses,
        root,
    })
}
